"""Reading the rows of :func:`dpfast.tables.aggregate`: unit and group codes and keys, value
columns, the native bounding kernel, and the typed per-group statistics it returns.

Shared by the pandas path (:func:`prepare_pandas`) and the Dask path (``tables._dask``), which
both import from here; neither imports :mod:`dpfast.tables._aggregate`.
"""
from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from dpfast import _tables
from dpfast.tables._keys import BoolLabel, bools_apart, mix_keys, value_keys
from dpfast.tables._plan import AggregatePlan, public_groups

__all__ = [
    "GroupStats",
    "bounded_stats",
    "canonical_groups",
    "check_value_dtype",
    "empty_stats",
    "group_codes",
    "group_keys",
    "key_index",
    "merge_stats",
    "prepare_pandas",
    "unit_codes",
    "unit_keys",
    "value_matrix",
]

Pair = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True, eq=False)
class GroupStats(Mapping):
    """Per-group statistics of the bounded, clamped rows (one entry per group of the index).

    ``count``: kept rows (int64); ``units``: distinct units with a kept row (int64);
    continuous noises: ``s1``, ``s2`` -- (k, G) double-double (hi, lo) sums of ``y = clamp(x) - m``
    and of ``y^2`` per value column; discrete noises: ``t1``, ``t3`` -- (k, G) 128-bit (hi int64,
    lo uint64) sums of the lattice values ``k`` and of ``(2k - klo - khi)^2``; the other pair is
    None.  ``quantile_values``: {column: (group codes, clamped kept values)} for quantile metrics.

    Also a read-only mapping from the names of the fields that are set to their values (how the
    kernel's own dict read).
    """
    count: np.ndarray
    units: np.ndarray
    s1: Pair | None
    s2: Pair | None
    t1: Pair | None
    t3: Pair | None
    quantile_values: dict[str, Pair]

    def __getitem__(self, key):
        if key not in {f.name for f in fields(self)} or getattr(self, key) is None:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return (f.name for f in fields(self) if getattr(self, f.name) is not None)

    def __len__(self):
        return sum(1 for _ in self)


def _int_codes(v: np.ndarray):
    """Dense codes of an integer array with a small range: (codes, sorted uniques), or None."""
    if v.dtype.kind not in "iu" or v.size == 0 or (v.dtype.kind == "u" and v.dtype.itemsize == 8):
        return None
    res = _tables.dense_codes(np.ascontiguousarray(v, dtype=np.int64), 4 * v.size + (1 << 16))
    if res is None:
        return None
    return res[0], res[1].astype(v.dtype)


def unit_keys(uniques) -> np.ndarray:
    """Public 64-bit key of each unit value (the hash input of its random choices):
    :func:`dpfast.tables._keys.value_keys`, a function of the value alone (int64 7, float64 7.0,
    ``Int64`` 7, categorical 7 are one key), so the choices for one unit never depend on the
    dtype the other rows give its column, and pandas and Dask inputs give the same choices."""
    return np.ascontiguousarray(value_keys(uniques), dtype=np.uint64)


def group_keys(index: pd.Index) -> np.ndarray:
    """Public 64-bit key of each group value (see :func:`unit_keys`; all missing values one
    key); for several ``by`` columns the keys of the levels, mixed in column order.  A function
    of the group's value alone: an NA group that turns an ``Int64`` index into float64 or
    object leaves every other group's key -- hence every other unit's choices -- unchanged."""
    if isinstance(index, pd.MultiIndex):
        keys = value_keys(index.get_level_values(0))
        for i in range(1, index.nlevels):
            keys = mix_keys(keys, value_keys(index.get_level_values(i)))
    else:
        keys = value_keys(index)
    return np.ascontiguousarray(keys, dtype=np.uint64)


def unit_codes(col: pd.Series):
    """(codes int64, 64-bit keys per code) of the privacy-unit column."""
    v = col.to_numpy()
    fast = _int_codes(v)
    if fast is not None:
        codes, uniq = fast
    else:
        codes, uniq = pd.factorize(col)
        codes = np.asarray(codes, dtype=np.int64)
    return np.ascontiguousarray(codes), unit_keys(uniq)


def key_index(frame: pd.DataFrame, by_cols, apart: bool = False) -> pd.Index:
    """The rows' group values: an Index (one ``by`` column) or a MultiIndex.  ``apart``
    (private partition selection): the bools of an object column as :class:`BoolLabel`, so that
    ``True`` and ``1`` are two groups (see there why)."""
    by_cols = list(by_cols)
    if not apart:
        return pd.Index(frame[by_cols[0]]) if len(by_cols) == 1 else pd.MultiIndex.from_frame(frame[by_cols])
    levels = [bools_apart(pd.Index(frame[c], name=c)) for c in by_cols]
    return levels[0] if len(by_cols) == 1 else pd.MultiIndex.from_arrays(levels, names=by_cols)


def canonical_groups(uniques: pd.Index, by_cols) -> pd.Index:
    """Groups in one order whatever the input's row order or partitioning: sorted (NaN last),
    or by key hash when the keys are not orderable.

    With several ``by`` columns, a level holding a bool and the number it equals (``True`` and
    ``1``, kept apart as two groups by :func:`key_index`) is refused with ``ValueError`` (before
    the charge): a pandas MultiIndex level cannot hold both, so the output could not label the
    two groups apart.  (One ``by`` column: a plain Index holds both.)"""
    by_cols = list(by_cols)
    if isinstance(uniques, pd.MultiIndex):
        for name, lv in zip(by_cols, uniques.levels):
            _refuse_bool_number_clash(name, lv)
    try:
        idx = uniques.sort_values()
    except TypeError:
        # by key, then which levels hold a BoolLabel (True and 1 share a key): an order of the
        # values alone, never of the row order the uniques came in
        lvls = [uniques.get_level_values(i) for i in range(uniques.nlevels)]
        tag = sum(np.fromiter((isinstance(v, BoolLabel) for v in lv), dtype=np.int64, count=len(lv)) << i
                  for i, lv in enumerate(lvls))
        idx = uniques[np.lexsort((tag, group_keys(uniques)))]
    return idx.set_names(by_cols) if isinstance(idx, pd.MultiIndex) else pd.Index(idx, name=by_cols[0])


def _refuse_bool_number_clash(name, level: pd.Index) -> None:
    if level.dtype != object:
        return
    bools = {v.value for v in level if isinstance(v, BoolLabel)}
    if not bools:
        return
    nums = [v for v in level if isinstance(v, numbers.Number) and not isinstance(v, (bool, np.bool_))]
    if any(v == b for v in nums for b in bools):
        raise ValueError(f"by column {name!r} holds booleans and the numbers 0 / 1 they equal: with several by "
                         f"columns the output's MultiIndex cannot label them apart; convert the column first "
                         f"(e.g. df[{name!r}].astype(str), or to one type)")


def _is_bool(ix: pd.Index) -> bool:
    return ix.dtype.kind == "b" or isinstance(ix.dtype, pd.BooleanDtype)


def group_codes(frame: pd.DataFrame, by_cols, index: pd.Index, apart: bool = False) -> np.ndarray:
    """Code of each row's group in ``index`` (-1: not in it).  ``apart``: ``index`` holds the
    groups of private selection (:func:`key_index` with ``apart``, bools of object levels as
    :class:`BoolLabel`); the rows' values are read the same way."""
    if len(by_cols) == 1:
        v = frame[by_cols[0]].to_numpy()
        iv = index.to_numpy()
        if v.dtype.kind in "iu" and iv.dtype.kind in "iu" and v.size and iv.size:
            mn = min(int(v.min()), int(iv.min()))
            mx = max(int(v.max()), int(iv.max()))
            if mx - mn < 4 * v.size + (1 << 16):
                lookup = np.full(mx - mn + 1, -1, dtype=np.int64)
                lookup[iv.astype(np.int64) - mn] = np.arange(iv.size)
                return lookup[v.astype(np.int64) - mn]
    if apart:
        # a level the index holds as objects: its bools and the rows' bools apart from numbers,
        # the rows' values read as objects too (a bool partition of a Dask frame whose other
        # partitions made the level object); the positions in ``index`` are kept
        levels = [index.get_level_values(i) for i in range(index.nlevels)]
        obj = [lv.dtype == object for lv in levels]
        cols = [bools_apart(pd.Index(frame[c], name=c, dtype=object if o else None)) for c, o in zip(by_cols, obj)]
        levels = [bools_apart(lv) for lv in levels]
        keys = cols[0] if len(cols) == 1 else pd.MultiIndex.from_arrays(cols, names=list(by_cols))
        if any(obj):
            index = levels[0] if len(levels) == 1 else pd.MultiIndex.from_arrays(levels, names=list(by_cols))
    else:
        keys = key_index(frame, by_cols)
    il, kl = ([ix.get_level_values(i) for i in range(ix.nlevels)] for ix in (index, keys))
    flip = [_is_bool(a) != _is_bool(b) for a, b in zip(il, kl)]
    if any(flip):
        # True is 1 for the group-by (pd.factorize; an object column's get_indexer) but not for
        # get_indexer between a bool and a number level: without this, public groups [1] counted a
        # bool column's True rows only once one unit's 'x' had turned the column to object
        il, kl = ([pd.Index(lv.astype("Int64")) if f and _is_bool(lv) else lv for lv, f in zip(lvs, flip)]
                  for lvs in (il, kl))
        index, keys = (lvs[0] if len(lvs) == 1 else pd.MultiIndex.from_arrays(lvs) for lvs in (il, kl))
    codes = np.asarray(index.get_indexer(keys), dtype=np.int64)
    if len(by_cols) == 1:
        # All missing values are one group.  get_indexer tells them apart by representation (an
        # object column's None or pd.NA misses a float NaN group), and which one a row holds
        # depends on the column's dtype -- on the other rows (one unit's 'x' turns an Int64 column
        # to object): missing rows go to the index's missing group, whatever their representation.
        na_at = np.flatnonzero(np.asarray(pd.isna(index), dtype=bool))
        if na_at.size:
            codes[np.asarray(pd.isna(keys), dtype=bool)] = na_at[0]
    return codes


def check_value_dtype(col, dtype) -> None:
    """The one rule for value columns, pandas and Dask alike (checked before the charge): real
    numbers -- NumPy bool, int, uint and float, and their nullable / Arrow versions (a missing
    value then raises as NaN does).  Refused with a TypeError naming the column: datetimes and
    timedeltas (their float value depends on the resolution: us and ns differ by 1000x),
    strings and other object columns (``"1"`` would be read as 1), complex numbers (the
    imaginary part would be dropped) and categoricals (codes or labels: ambiguous)."""
    kind = getattr(dtype, "kind", "O")
    if isinstance(dtype, pd.CategoricalDtype) or kind not in "biuf":
        raise TypeError(f"value column {col!r} must hold real numbers (bool, int, uint or float, NumPy or "
                        f"nullable), got dtype {dtype}; convert it explicitly first (e.g. "
                        f"df[{col!r}].astype(float), or a datetime to a number in a unit you choose)")


def value_matrix(frame: pd.DataFrame, value_cols) -> np.ndarray:
    """(k, n) float64 matrix of the value columns; TypeError for a column that is not real
    numbers (:func:`check_value_dtype`), ValueError for NaN / NA."""
    for col in value_cols:  # the schema first: a dtype error never waits behind another column's NaN
        check_value_dtype(col, frame[col].dtype)
    out = np.empty((len(value_cols), len(frame)), dtype=np.float64)
    for j, col in enumerate(value_cols):
        s = frame[col]
        if isinstance(s.dtype, pd.api.extensions.ExtensionDtype):
            out[j] = s.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            out[j] = s.to_numpy(dtype=np.float64)
        if np.isnan(out[j]).any():
            raise ValueError(f"value column {col!r} contains NaN (policy: error, drop such rows first)")
    return out


def prepare_pandas(df: pd.DataFrame, plan: AggregatePlan):
    """Read the rows: (unit codes, unit keys, group codes, group index, values); raises on bad data."""
    pu, by_cols = plan.privacy_unit, list(plan.by_cols)
    if df[pu].isna().any():
        raise ValueError(f"privacy_unit column {pu!r} contains NaN/None")
    values = value_matrix(df, plan.value_cols)
    if plan.groups is None:
        # the integer fast path only for a NumPy column: its index keeps the column's dtype, as
        # factorize's does for a nullable or categorical one (and as the Dask path's does)
        col0 = df[by_cols[0]]
        fast = _int_codes(col0.to_numpy()) if len(by_cols) == 1 and isinstance(col0.dtype, np.dtype) else None
        if fast is not None:  # already sorted
            gcodes, uniq = fast
            index = pd.Index(uniq, name=by_cols[0])
        else:
            codes, uniq = pd.factorize(key_index(df, by_cols, apart=True), use_na_sentinel=False)
            uniq = uniq if isinstance(uniq, pd.Index) else pd.Index(uniq)
            index = canonical_groups(uniq, by_cols)
            perm = np.asarray(index.get_indexer(uniq), dtype=np.int64)
            gcodes = perm[np.asarray(codes, dtype=np.int64)]
    else:
        index = public_groups(plan.groups, by_cols)
        gcodes = group_codes(df, by_cols, index)
    ucodes, ukeys = unit_codes(df[pu])
    return ucodes, ukeys, np.ascontiguousarray(gcodes, dtype=np.int64), index, values


def bounded_stats(plan: AggregatePlan, ucodes, ukeys, gcodes, index: pd.Index, values, seed: int,
                  threads: int) -> GroupStats:
    """The native kernel on one block of rows (all rows of each unit in it): per-group partial
    statistics (see ``csrc/tables/aggregate.hpp``), with kept quantile values as (group, value)."""
    cols = list(plan.value_cols)
    lo = np.array([plan.bounds[c][0] for c in cols], dtype=np.float64)
    hi = np.array([plan.bounds[c][1] for c in cols], dtype=np.float64)
    gamma = None if plan.granularity is None else np.array([plan.granularity[c] for c in cols], dtype=np.float64)
    res = _tables.bound_and_sum(ucodes, int(ukeys.size), np.ascontiguousarray(ukeys, dtype=np.uint64), gcodes,
                                len(index), group_keys(index), np.ascontiguousarray(values), lo, hi, gamma,
                                int(seed), plan.l0, plan.linf, plan.want_mask, threads)
    qv = {}
    if plan.want_mask:
        keep = res.pop("keep").view(bool)
        g = gcodes[keep]
        for m in plan.metrics:
            if m.kind == "quantile" and m.column not in qv:
                j = cols.index(m.column)
                qv[m.column] = (g, np.clip(values[j][keep], lo[j], hi[j]))
    return GroupStats(count=res["count"], units=res["units"], s1=res.get("s1"), s2=res.get("s2"),
                      t1=res.get("t1"), t3=res.get("t3"), quantile_values=qv)


def empty_stats(plan: AggregatePlan) -> GroupStats:
    """Statistics of zero groups, with every field the release may read (the dry run's input)."""
    nv = len(plan.value_cols)
    z = np.zeros((nv, 0))
    zu = np.zeros((nv, 0), dtype=np.uint64)
    return GroupStats(count=np.zeros(0, dtype=np.int64), units=np.zeros(0, dtype=np.int64), s1=(z, z), s2=(z, z),
                      t1=(zu, zu), t3=(zu, zu),
                      quantile_values={c: (np.zeros(0, dtype=np.int64), np.zeros(0)) for c in plan.value_cols})


def _two_sum_merge(parts):
    hi, lo = parts[0][0].copy(), parts[0][1].copy()
    for p in parts[1:]:
        for x in p:
            s = hi + x
            bp = s - hi
            lo += (hi - (s - bp)) + (x - bp)
            hi = s
    return hi, lo


def _int128_merge(parts):
    hi, lo = parts[0][0].copy(), parts[0][1].copy()
    for p in parts[1:]:
        s = lo + p[1]  # uint64, wraps
        hi = hi + p[0] + (s < lo)
        lo = s
    return hi, lo


def merge_stats(parts: list) -> GroupStats:
    """Sum per-group partial statistics of disjoint unit sets (double-double / 128-bit exact)."""
    first = parts[0]
    s1 = s2 = t1 = t3 = None
    if first.s1 is not None:
        s1 = _two_sum_merge([p.s1 for p in parts])
        s2 = _two_sum_merge([p.s2 for p in parts])
    if first.t1 is not None:
        t1 = _int128_merge([p.t1 for p in parts])
        t3 = _int128_merge([p.t3 for p in parts])
    qv = {}
    for col in first.quantile_values:
        qv[col] = (np.concatenate([p.quantile_values[col][0] for p in parts]),
                   np.concatenate([p.quantile_values[col][1] for p in parts]))
    return GroupStats(count=sum(p.count for p in parts), units=sum(p.units for p in parts), s1=s1, s2=s2,
                      t1=t1, t3=t3, quantile_values=qv)
