"""The released groups as the output's index: one representation per value and one order,
rebuilt from the released values alone (:func:`released_index`).

The index of every group in the data has a dtype, categories and an order that depend on the
other groups (an NA group turns an ``Int64`` column into float64; one unit's ``'x'`` turns it into
object): none of that may reach the output, whose groups are released privately
(docs/privacy.rst, "Tables").
"""
from __future__ import annotations

import datetime
import decimal
import math
import numbers

import numpy as np
import pandas as pd

from dpfast.tables._keys import BoolLabel, bools_apart

__all__ = ["released_index"]


def _canon(v):
    """One representation per group value, a function of the value's equality class (the values
    the group-by counts as one group, whichever of them the first row holds): missing -> NaN (NA
    in an ``Int64`` / ``boolean`` level, see :func:`_from_canonical`); integral reals, Decimals and
    complex numbers with zero imaginary part -> int (int64 7, float64 7.0, Int64 7, object 7,
    ``Decimal(7)``, ``7+0j``; ``2**60`` and ``2.0**60``); other reals -> float (Decimal / Fraction
    when no float equals them); datetimes -> ``Timestamp`` in UTC (when tz-aware) at ns resolution
    (us beyond its range), timedeltas -> ``Timedelta`` at ns: the column's resolution and tz, and
    the first row's, depend on the other rows.  Anything else as it is."""
    if isinstance(v, (datetime.datetime, np.datetime64, datetime.timedelta, np.timedelta64)) and not pd.isna(v):
        t = pd.Timestamp(v) if isinstance(v, (datetime.datetime, np.datetime64)) else pd.Timedelta(v)
        if isinstance(t, pd.Timestamp) and t.tzinfo is not None:
            t = t.tz_convert("UTC")
        try:
            return t.as_unit("ns")
        except (pd.errors.OutOfBoundsDatetime, pd.errors.OutOfBoundsTimedelta, OverflowError, ValueError):
            return t.as_unit("us")
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, BoolLabel):  # a bool kept apart from the number 1 (private selection)
        return v.value
    if isinstance(v, numbers.Complex) and not isinstance(v, numbers.Real):
        if v.real != v.real or v.imag != v.imag:
            return math.nan
        if v.imag != 0:
            return complex(v)
        v = v.real
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, (numbers.Real, decimal.Decimal)):
        if v != v or (isinstance(v, decimal.Decimal) and v.is_nan()):
            return math.nan
        if isinstance(v, decimal.Decimal) and v.is_infinite() or isinstance(v, (float, np.floating)) and \
                math.isinf(v):
            return float(v)
        if v == int(v):
            return int(v)
        try:
            f = float(v)
        except OverflowError:
            return v
        return f if f == v else v
    try:
        if pd.isna(v):  # None, pd.NA, NaT (scalars only)
            return math.nan
    except (TypeError, ValueError):
        pass
    return v


def _canonical_level(values: pd.Index) -> pd.Index:
    """A level of released group values rebuilt from the values alone (dtype inferred from
    them by :func:`_from_canonical`), never from the input column's dtype, categories or other
    groups."""
    if len(values) == 0:
        return pd.Index([], dtype=object)
    a = values.to_numpy() if values.dtype.kind in "biuf" and not isinstance(values.dtype, pd.CategoricalDtype) \
        else None
    if a is not None and a.dtype.kind in "biuf":  # numpy numbers: the same result as _canon, vectorised
        if a.dtype.kind == "b":
            return pd.Index(a.astype(bool))
        if a.dtype.kind == "i" or (a.dtype.kind == "u" and int(a.max()) < 2 ** 63):
            return pd.Index(a.astype(np.int64))
        if a.dtype.kind == "u":
            return pd.Index(a.astype(np.uint64))
        f = a.astype(np.float64)
        na = np.isnan(f)
        rest = f[~na]
        small = np.all(np.isfinite(rest) & (np.abs(rest) < 2.0 ** 53))
        if small and not na.all() and np.all(rest == np.round(rest)):
            if na.any():
                return pd.Index(pd.arrays.IntegerArray(np.where(na, 0.0, f).astype(np.int64), na))
            return pd.Index(f.astype(np.int64))
        if small:  # as _canon's ints and floats below 2^53 would infer; larger: _canon per value
            return pd.Index(f)
    vals = values.tolist()
    if pd.api.types.infer_dtype(values, skipna=False) == "string":  # all str: _canon keeps them as they are
        return pd.Index(vals)
    return _from_canonical([_canon(v) for v in vals])


def _from_canonical(vals: list) -> pd.Index:
    """The index of canonical values: ints (or bools) with missing values -> ``Int64``
    (``boolean``) with NA, otherwise pandas' inference from the values."""
    na = [isinstance(v, float) and math.isnan(v) for v in vals]
    if any(na) and not all(na):
        rest = [v for v, m in zip(vals, na) if not m]
        if all(type(v) is int and -2 ** 63 <= v < 2 ** 63 for v in rest):
            return pd.Index(pd.array([None if m else v for v, m in zip(vals, na)], dtype="Int64"))
        if all(type(v) is bool for v in rest):
            return pd.Index(pd.array([None if m else v for v, m in zip(vals, na)], dtype="boolean"))
    return pd.Index(vals)


def _ranks(level: pd.Index) -> np.ndarray:
    """Rank of each value of a level in one order that depends on the values only: sorted
    (NaN last); values that do not sort together (str among ints) by (type name, value), and
    failing that by (type name, repr)."""
    # bools apart from numbers (True and 1 are two released groups, with two ranks)
    codes, uniq = pd.factorize(bools_apart(level), use_na_sentinel=False)
    try:
        _, order = pd.Index(uniq).sort_values(return_indexer=True, na_position="last")
    except TypeError:
        vals = list(uniq)

        def isna(v):
            return isinstance(v, float) and math.isnan(v)

        def tname(v):  # a BoolLabel is the bool it stands for
            return "bool" if isinstance(v, BoolLabel) else type(v).__name__
        try:
            order = sorted(range(len(vals)), key=lambda i: (isna(vals[i]), tname(vals[i]), vals[i]))
        except TypeError:
            order = sorted(range(len(vals)), key=lambda i: (isna(vals[i]), tname(vals[i]), repr(vals[i])))
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(uniq))
    return rank[np.asarray(codes, dtype=np.int64)]


def released_index(groups: pd.Index, by_cols) -> tuple:
    """(index, order): the released groups ``groups`` as the output's index, and the
    permutation of ``groups`` it lists them in.  A function of the released values and
    ``by_cols`` only: each level rebuilt by :func:`_canonical_level`, sorted by :func:`_ranks`
    (lexicographically over levels).  A categorical ``by`` gives a plain index: its categories
    may list groups that were not released (or were read off the data), so they are not kept."""
    nlev = len(by_cols)
    levels = [_canonical_level(groups.get_level_values(i) if nlev > 1 else groups) for i in range(nlev)]
    if len(groups) == 0:
        order = np.zeros(0, dtype=np.int64)
    else:
        order = np.lexsort([_ranks(lv) for lv in reversed(levels)])
    if nlev == 1:
        return pd.Index(levels[0][order], name=by_cols[0]), order
    return pd.MultiIndex.from_arrays([lv[order] for lv in levels], names=by_cols), order
