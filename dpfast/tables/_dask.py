"""Dask DataFrame input of :func:`dpfast.tables.aggregate`.

Two passes over the data.  The first validates the values (NaN units / values raise) and
collects the distinct group keys, before the budget is charged.  The second shuffles the rows
by privacy unit (so that each unit's rows sit in one partition), runs the native bounding and
summing kernel on every partition on the workers, and returns per-group partial statistics,
which are merged exactly (double-double sums, 128-bit lattice sums).  Bounding priorities
depend only on a unit's own rows and public keys (``csrc/tables/aggregate.hpp``), so the
merged statistics -- and the released frame, whose noise is drawn on the client in the same
order as for pandas input -- equal those of the same table given as pandas.
"""
from __future__ import annotations

import dask
import numpy as np
import pandas as pd

from dpfast.tables._aggregate import (bounded_stats, canonical_groups, group_codes, merge_stats, public_groups,
                                      unit_codes, value_matrix)


def prepare_dask(ddf, plan: dict) -> pd.Index:
    """Validation pass; returns the group index (canonical, or the public groups)."""
    pu, by_cols, vcols = plan["privacy_unit"], plan["by_cols"], plan["value_cols"]
    for col in vcols:
        dt = ddf.dtypes[col]
        if dt.kind not in "iufb" or dt.kind == "b":
            raise TypeError(f"value column {col!r} must be numeric")
    todo = [ddf[pu].isna().any()] + [ddf[c].isna().any() for c in vcols]
    if plan["groups"] is None:
        todo.append(ddf[by_cols].drop_duplicates(split_out=1))  # small: no shuffle
    res = dask.compute(*todo)
    if res[0]:
        raise ValueError(f"privacy_unit column {pu!r} contains NaN/None")
    for col, bad in zip(vcols, res[1:1 + len(vcols)]):
        if bad:
            raise ValueError(f"value column {col!r} contains NaN (policy: error, drop such rows first)")
    if plan["groups"] is not None:
        return public_groups(plan["groups"], by_cols)
    keys = res[-1]
    uniq = pd.Index(keys[by_cols[0]]) if len(by_cols) == 1 else pd.MultiIndex.from_frame(keys[by_cols])
    return canonical_groups(uniq.drop_duplicates(), by_cols)


def _partition_stats(pdf: pd.DataFrame, plan: dict, index: pd.Index, seed: int) -> dict:
    ucodes, ukeys = unit_codes(pdf[plan["privacy_unit"]])
    gcodes = np.ascontiguousarray(group_codes(pdf, plan["by_cols"], index), dtype=np.int64)
    values = value_matrix(pdf, plan["value_cols"])
    return bounded_stats(plan, ucodes, ukeys, gcodes, index, values, seed, 1)


def stats_dask(ddf, plan: dict, index: pd.Index, seed: int) -> dict:
    """Bounding and per-group sums on the workers, merged on the client."""
    cols = list(dict.fromkeys([plan["privacy_unit"], *plan["by_cols"], *plan["value_cols"]]))
    shuffled = ddf[cols].shuffle(on=plan["privacy_unit"]) if ddf.npartitions > 1 else ddf[cols]
    parts = [dask.delayed(_partition_stats)(d, plan, index, seed) for d in shuffled.to_delayed()]
    return merge_stats(list(dask.compute(*parts)))
