"""Dask DataFrame input of :func:`dpfast.tables.aggregate`.

Two passes over the data.  The first validates the values (NaN units / values raise), collects
the distinct group keys and summarises each partition's privacy units, before the budget is
charged.  The second runs the native bounding and summing kernel on every partition on the
workers and returns per-group partial statistics, which are merged exactly (double-double sums,
128-bit lattice sums).  Bounding priorities depend only on a unit's own rows and public keys
(``csrc/tables/aggregate.hpp``), so when every unit's rows sit in one partition the merged
statistics -- and the released frame, whose noise is drawn on the client in the same order as
for pandas input -- equal those of the same table given as pandas.

Which partitions the kernel runs on (:func:`units_confined`):

* **No unit spans two partitions** (proved from the data, never assumed): the kernel runs on the
  partitions as they are, no shuffle.  Proof, tier 1: the partitions' ``[min, max]`` ranges of
  the unit column are pairwise disjoint (sorted by min, each max is strictly below the next
  min), so no value lies in two partitions -- the case of a frame indexed or sorted by the unit
  (``set_index(privacy_unit)``).  Tier 2, when the ranges overlap (e.g. a frame hash-partitioned
  by unit): each partition's distinct unit keys are gathered and the total count of keys must
  equal the number of distinct keys.  Keys are injective on unit values
  (:func:`_check_keys`: integers and datetimes as themselves, floats by their bits with -0.0 =
  0.0, strings by a 64-bit hash -- distinct hashes imply distinct strings), so disjoint key sets
  are disjoint unit sets.  Before tier 2 a cheap refutation: the 64 smallest distinct keys of
  each partition (from the first pass); if two of these sets meet, the frame is shuffled without
  tier 2 (a shared key may be a shared unit).  A hash collision can only send a frame to the
  shuffle, never let a unit through twice.  Partitions of different unit dtypes, and object
  columns of mixed types (where 1 and 1.0 are one unit), are always shuffled.  No sketch or
  sampling decides for the fast path: each tier that accepts is an exact proof.  The first
  pass only chooses the path: the proof is redone on the unit values that the bounding tasks
  themselves read (min and max, or all keys for tier 2, returned with their partial sums), and
  if it fails there -- a source that reads differently each time -- the partial sums are
  discarded and the rows shuffled.
* **Otherwise** the rows are shuffled by privacy unit first (only the unit, the group code as a
  compact integer, and the value columns; rows outside public ``groups`` dropped before).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from dpfast.tables._aggregate import (bounded_stats, canonical_groups, group_codes, merge_stats, public_groups,
                                      unit_codes, value_matrix)

_BOTTOM_K = 64  # distinct unit keys per partition sent in the first pass (refutation of tier 2)
_GCODE = "__dpfast_group_code__"
_SHUFFLE_METHOD = "tasks"  # measured faster than p2p for this shuffle (benchmarks/results/tables.md)
_SHUFFLE_PARTITIONS = None  # as many as the input (2 or 4 measured slower on 2 workers)


def _check_keys(col: pd.Series):
    """(type tag, distinct 64-bit keys) of a partition's unit values, or (None, None) when the
    values have no exact key here.  Keys are injective on the values as pandas' factorize tells
    them apart: integers (and booleans, datetimes) by their 64-bit value, floats by the bits of
    ``x + 0.0`` (-0.0 and 0.0 are one unit; NaN was refused), strings by a 64-bit hash of the
    string (distinct hashes, distinct strings; a collision only costs the shuffle).  Other object
    values (mixed types, where 1 and 1.0 are one unit but format differently) get no key."""
    raw = col.to_numpy()
    if raw.dtype.kind in "iu" and raw.size and not (raw.dtype.kind == "u" and raw.dtype.itemsize == 8):
        lo, hi = int(raw.min()), int(raw.max())
        if hi - lo < 4 * raw.size + (1 << 16):  # small range: distinct values by a bitmap (no hashing)
            seen = np.zeros(hi - lo + 1, dtype=bool)
            seen[raw.astype(np.int64) - lo] = True
            return str(raw.dtype), (np.flatnonzero(seen) + lo).view(np.uint64)
    v = pd.unique(raw)
    kind = v.dtype.kind
    if kind in "iub":
        return str(v.dtype), v.astype(np.int64).view(np.uint64)
    if kind in "mM":
        return str(v.dtype), v.view(np.int64).view(np.uint64)
    if kind == "f":
        return str(v.dtype), pd.unique((v.astype(np.float64) + 0.0).view(np.uint64))
    if kind in "OUT" and pd.api.types.infer_dtype(v, skipna=False) == "string":
        return "str", pd.util.hash_array(np.asarray(v, dtype=object), categorize=False)
    return None, None


def _unit_summary(col: pd.Series):
    """Per partition: (type tag, (min, max), its ``_BOTTOM_K`` smallest distinct keys); an empty
    partition gives ("empty", None, no keys)."""
    if len(col) == 0:
        return "empty", None, np.zeros(0, dtype=np.uint64)
    tag, keys = _check_keys(col)
    if tag is None:
        return None, None, None
    if keys.size > _BOTTOM_K:
        keys = np.partition(keys, _BOTTOM_K - 1)[:_BOTTOM_K]
    return tag, (col.min(), col.max()), keys


def _one(part, fn, *args):
    return pd.Series([fn(part, *args)], dtype=object)


def _per_partition(coll, fn, *args):
    """A Dask Series with one object per partition: ``fn(partition, *args)`` (module-level
    functions and plain arguments only: a closure over a collection would ship its graph)."""
    return coll.map_partitions(_one, fn, *args, meta=(None, object))


def _ranges_disjoint(spans) -> bool:
    """Tier 1: the (min, max) ranges of the non-empty partitions are pairwise disjoint."""
    try:
        order = sorted(range(len(spans)), key=lambda i: spans[i][0])
        return all(bool(spans[a][1] < spans[b][0]) for a, b in zip(order, order[1:]))
    except TypeError:  # no common order
        return False


def _keys_disjoint(key_sets) -> bool:
    """True iff no key occurs twice in the key arrays together (each array: distinct keys of one
    partition, so a repeat is a key in two partitions, or a hash collision inside one)."""
    allk = np.concatenate([np.asarray(k, dtype=np.uint64) for k in key_sets])
    return np.unique(allk).size == allk.size


def _decide(summaries):
    """From per-partition summaries: "ranges" (tier 1 holds), "keys" (tier 2 must decide) or
    None (shuffle: no proof possible, or a key shared by two partitions' bottom keys)."""
    summaries = [s for s in summaries if s[0] != "empty"]
    if len(summaries) <= 1:
        return "ranges"
    tags = {s[0] for s in summaries}
    if None in tags or len(tags) != 1:
        return None
    if _ranges_disjoint([s[1] for s in summaries]):
        return "ranges"
    if not _keys_disjoint([s[2] for s in summaries]):
        return None
    return "keys"


def _proved(summaries, tier: str) -> bool:
    """The exact check of one tier on (tag, (min, max), all distinct keys or None) per partition."""
    summaries = [s for s in summaries if s[0] != "empty"]
    if len(summaries) <= 1:
        return True
    tags = {s[0] for s in summaries}
    if None in tags or len(tags) != 1:
        return False
    if tier == "ranges":
        return _ranges_disjoint([s[1] for s in summaries])
    return _keys_disjoint([s[2] for s in summaries])


def _full_summary(col: pd.Series, want_keys: bool):
    """(tag, (min, max), all distinct keys if ``want_keys``) of a partition's unit column."""
    if len(col) == 0:
        return "empty", None, None
    if want_keys:
        tag, keys = _check_keys(col)
    else:  # the tag _check_keys would give, without computing the keys
        raw, keys = col.to_numpy(), None
        tag = (str(raw.dtype) if raw.dtype.kind in "iubmMf" else
               "str" if raw.dtype.kind in "OUT" and pd.api.types.infer_dtype(raw, skipna=False) == "string" else None)
    if tag is None:
        return None, None, None
    return tag, (col.min(), col.max()), keys


def units_confined(ddf, privacy_unit: str, summaries=None) -> bool:
    """True iff, proved from the data, no privacy unit has rows in two partitions of ``ddf``.

    ``summaries``: the per-partition ``_unit_summary`` results (computed here when None).  Tier 1
    (ranges), refutation (bottom keys), tier 2 (all keys): see the module docstring.  False
    (shuffle) whenever a proof is not available: partitions of different unit dtypes, unit
    values without an exact key, or keys shared between partitions.
    """
    if ddf.npartitions <= 1:
        return True
    if summaries is None:
        summaries = _per_partition(ddf[privacy_unit], _unit_summary).compute()
    tier = _decide(summaries)
    if tier != "keys":
        return tier == "ranges"
    return _proved(list(_per_partition(ddf[privacy_unit], _full_summary, True).compute()), "keys")


def _check_partition(pdf: pd.DataFrame, plan: dict, n_parts: int):
    """The first pass on one partition: (NaN in the unit column, value columns with NaN, its
    distinct group keys or None for public groups, its unit summary or None for one partition)."""
    pu, by_cols = plan["privacy_unit"], plan["by_cols"]
    unit_nan = bool(pdf[pu].isna().any())
    bad = [c for c in plan["value_cols"] if pdf[c].isna().any()]
    keys = pdf[by_cols].drop_duplicates() if plan["groups"] is None else None
    summary = _unit_summary(pdf[pu]) if n_parts > 1 and not unit_nan else None
    return unit_nan, bad, keys, summary


def prepare_dask(ddf, plan: dict):
    """Validation pass (one task per partition): (group index -- canonical, or the public groups
    --, per-partition unit summaries for :func:`units_confined`)."""
    pu, by_cols, vcols = plan["privacy_unit"], plan["by_cols"], plan["value_cols"]
    for col in vcols:
        dt = ddf.dtypes[col]
        if dt.kind not in "iufb" or dt.kind == "b":
            raise TypeError(f"value column {col!r} must be numeric")
    cols = list(dict.fromkeys([pu, *by_cols, *vcols]))
    checks = _per_partition(ddf[cols], _check_partition, plan, ddf.npartitions).compute()
    if any(c[0] for c in checks):
        raise ValueError(f"privacy_unit column {pu!r} contains NaN/None")
    for col in vcols:
        if any(col in c[1] for c in checks):
            raise ValueError(f"value column {col!r} contains NaN (policy: error, drop such rows first)")
    summaries = [c[3] for c in checks] if ddf.npartitions > 1 else None
    if plan["groups"] is not None:
        return public_groups(plan["groups"], by_cols), summaries
    keys = pd.concat([c[2] for c in checks], ignore_index=True)
    uniq = pd.Index(keys[by_cols[0]]) if len(by_cols) == 1 else pd.MultiIndex.from_frame(keys[by_cols])
    return canonical_groups(uniq.drop_duplicates(), by_cols), summaries


def _partition_stats(pdf: pd.DataFrame, plan: dict, index: pd.Index, seed: int) -> dict:
    ucodes, ukeys = unit_codes(pdf[plan["privacy_unit"]])
    if _GCODE in pdf.columns:
        gcodes = np.ascontiguousarray(pdf[_GCODE].to_numpy(), dtype=np.int64)
    else:
        gcodes = np.ascontiguousarray(group_codes(pdf, plan["by_cols"], index), dtype=np.int64)
    values = value_matrix(pdf, plan["value_cols"])
    return bounded_stats(plan, ucodes, ukeys, gcodes, index, values, seed, 1)


def _encode_groups(pdf: pd.DataFrame, plan: dict, index: pd.Index, dtype, unit_dtype) -> pd.DataFrame:
    """The columns the kernel needs, the group as a compact code, integer units as ``unit_dtype``
    when given (their values, hence their keys, unchanged); rows outside ``index`` dropped (the
    kernel ignores them: dropping them first shrinks the shuffle, not the result)."""
    pu = plan["privacy_unit"]
    g = group_codes(pdf, plan["by_cols"], index)
    u = pdf[pu].to_numpy()
    out = pd.DataFrame({pu: u if unit_dtype is None else u.astype(unit_dtype), _GCODE: g.astype(dtype)})
    for c in plan["value_cols"]:
        if c != pu:
            out[c] = pdf[c].to_numpy(dtype=np.float64)
    return out[g >= 0] if plan["groups"] is not None else out


def _narrow_units(ddf, pu: str, summaries):
    """int32 when the unit column is integer and, by the first pass's per-partition (min, max),
    every value fits in int32 (4 bytes less per shuffled row); else None."""
    kind = ddf._meta[pu].dtype.kind
    if summaries is None or kind not in "iu" or ddf._meta[pu].dtype.itemsize <= 4:
        return None
    spans = [s[1] for s in summaries if s[0] != "empty"]
    if any(sp is None for sp in spans):
        return None  # a partition without a range
    if all(-2 ** 31 <= int(lo) and int(hi) < 2 ** 31 for lo, hi in spans):
        return np.int32
    return None


def shuffle_by_unit(ddf, plan: dict, index: pd.Index, summaries=None):
    """Rows moved so that each unit's rows sit in one partition (only the needed columns)."""
    pu = plan["privacy_unit"]
    dtype = np.int16 if len(index) < 2 ** 15 else np.int32 if len(index) < 2 ** 31 else np.int64
    unit_dtype = _narrow_units(ddf, pu, summaries)
    meta = pd.DataFrame({pu: ddf._meta[pu].to_numpy() if unit_dtype is None else np.zeros(0, dtype=unit_dtype),
                         _GCODE: np.zeros(0, dtype=dtype),
                         **{c: np.zeros(0, dtype=np.float64) for c in plan["value_cols"] if c != pu}})
    enc = ddf.map_partitions(_encode_groups, plan, index, dtype, unit_dtype, meta=meta)
    return enc.shuffle(on=pu, shuffle_method=_SHUFFLE_METHOD, npartitions=_SHUFFLE_PARTITIONS)


def _stats_and_units(pdf: pd.DataFrame, plan: dict, index: pd.Index, seed: int, want_keys: bool):
    """The kernel on one partition, with the summary of the very unit values it bounded."""
    return _partition_stats(pdf, plan, index, seed), _full_summary(pdf[plan["privacy_unit"]], want_keys)


def stats_dask(ddf, plan: dict, index: pd.Index, seed: int, summaries=None) -> dict:
    """Bounding and per-group sums on the workers, merged on the client.

    The first pass's summaries only choose the path.  On the fast path the proof that no unit
    spans two partitions is redone on the unit values the kernel tasks themselves read (so a
    frame whose partitions are recomputed differently -- a non-deterministic source -- cannot
    slip through); if it fails, the partial results are discarded and the rows are shuffled.
    """
    pu = plan["privacy_unit"]
    cols = list(dict.fromkeys([pu, *plan["by_cols"], *plan["value_cols"]]))
    if ddf.npartitions <= 1:
        return merge_stats(list(_per_partition(ddf[cols], _partition_stats, plan, index, seed).compute()))
    if summaries is None:
        summaries = _per_partition(ddf[pu], _unit_summary).compute()
    tier = _decide(summaries)
    if tier is not None:
        res = list(_per_partition(ddf[cols], _stats_and_units, plan, index, seed, tier == "keys").compute())
        if _proved([r[1] for r in res], tier):
            return merge_stats([r[0] for r in res])
    parts = shuffle_by_unit(ddf, plan, index, summaries)
    return merge_stats(list(_per_partition(parts, _partition_stats, plan, index, seed).compute()))
