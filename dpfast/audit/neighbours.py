"""Adversarial neighbouring pairs for :func:`dpfast.audit.audit`.

Each generator returns a list of :class:`Neighbours` -- a pair ``(D, D_prime)`` with a
``description`` -- built the way an auditor attacks a release: records at the bound, at zero,
huge, subnormal or NaN; one privacy unit with many rows across many groups, existing or new; the
same unit id in another dtype; NA keys; categorical keys; a group that only the new unit has.
Each generator documents the neighbouring relation its pairs serve; audit a release only with
pairs of the relation its guarantee is stated for.
"""
from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Sequence

import numpy as np

__all__ = ["Neighbours", "arrays", "labelled", "tables"]


class Neighbours(NamedTuple):
    """A neighbouring pair: ``D``, ``D_prime`` and what distinguishes them."""
    D: Any
    D_prime: Any
    description: str


def _extremes(bound: Optional[float], allow_nan: bool) -> List[tuple]:
    vals = [("zero", 0.0), ("subnormal", 5e-324), ("huge", 1e300), ("-huge", -1e300)]
    if bound is not None:
        vals[:0] = [("at the bound", float(bound)), ("at -bound", -float(bound))]
    if allow_nan:
        vals.append(("NaN", np.nan))
    return vals


def arrays(X, *, bound: Optional[float] = None, relation: str = "add_remove",
           allow_nan: bool = False, huge: bool = True) -> List[Neighbours]:
    """Pairs of arrays that differ in one row (the first axis indexes records).

    ``relation="add_remove"``: ``D = X`` and ``D_prime`` = X with one extra row (add/remove one
    record).  ``relation="replace_one"``: ``D_prime`` = X with its first row replaced (replace
    one record).  The extra / new rows: every coordinate at ``bound`` and ``-bound`` (where
    given), 0, the smallest subnormal, +-1e300 (unless ``huge=False``: for releases that refuse
    unbounded inputs rather than clamp them), NaN where ``allow_nan``; for
    ``relation="add_remove"`` also the pair with the row removed (``D_prime`` = X without its
    last row).  Rows with an l2 bound: pass ``bound / sqrt(d)`` to put the row on the sphere.
    """
    X = np.asarray(X)
    if X.ndim not in (1, 2) or X.shape[0] < 1:
        raise ValueError("X must be a non-empty 1-D or 2-D array of records")
    if relation not in ("add_remove", "replace_one"):
        raise ValueError(f"relation must be 'add_remove' or 'replace_one', got {relation!r}")
    Xf = X.astype(np.float64)
    out = []
    for name, v in _extremes(bound, allow_nan):
        if not huge and "huge" in name:
            continue
        row = np.full((1,) + X.shape[1:], v)
        if relation == "add_remove":
            out.append(Neighbours(Xf, np.concatenate([Xf, row]), f"add a row {name} ({v!r})"))
        else:
            Xp = Xf.copy()
            Xp[0] = row[0]
            out.append(Neighbours(Xf, Xp, f"replace row 0 by a row {name} ({v!r})"))
    if relation == "add_remove" and X.shape[0] > 1:
        out.append(Neighbours(Xf, Xf[:-1], "remove the last row"))
    return out


def labelled(X, y, *, bound: Optional[float] = None, classes: Optional[Sequence] = None,
             relation: str = "add_remove") -> List[Neighbours]:
    """Pairs of labelled data sets ``(X, y)`` that differ in one record.

    ``relation="add_remove"``: one record added, with each label of ``classes`` (default: the
    labels in ``y``), its features at ``bound`` (each coordinate; default the largest absolute
    value in X) and at 0.  ``relation="replace_one"``: the first record's label replaced by each
    other label, and its features by the bound.  A release whose label set is public (``classes=``)
    must not tell these apart beyond its epsilon; one that infers classes from the data fails on
    the pair that adds a new label.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or y.shape != (X.shape[0],) or X.shape[0] < 1:
        raise ValueError("X must be 2-D and y 1-D with one label per row")
    labels = list(np.unique(y)) if classes is None else list(classes)
    b = float(np.max(np.abs(X))) if bound is None else float(bound)
    out = []
    for lab in labels:
        for name, v in (("at the bound", b), ("zero", 0.0)):
            row = np.full((1, X.shape[1]), v)
            if relation == "add_remove":
                out.append(Neighbours((X, y), (np.concatenate([X, row]), np.append(y, lab)),
                                      f"add a record {name} with label {lab!r}"))
            elif lab != y[0]:
                Xp, yp = X.copy(), y.copy()
                Xp[0], yp[0] = row[0], lab
                out.append(Neighbours((X, y), (Xp, yp), f"replace record 0 by one {name} with label {lab!r}"))
    return out


def tables(df, privacy_unit: str, by, *, bounds: Optional[dict] = None, n_groups: int = 8,
           rows_per_group: int = 4) -> List[Neighbours]:
    """Pairs of pandas DataFrames that differ by one privacy unit (add/remove one unit).

    ``D = df`` and ``D_prime = df`` plus the rows of one new unit:

    * many rows (``rows_per_group``) in each of ``n_groups`` existing groups, values at the upper
      bound;
    * rows in ``n_groups`` groups that only the new unit has (same key type), and in a group whose
      key is of another type (a string among numbers, a number among strings);
    * a group key that is NA (the column's own missing value: NaN, None or pd.NA);
    * its rows split between two representations of one id (int 7 and float 7.0, or str and
      categorical), which must count as one unit;
    * the ``by`` column as an ordered and as an unordered categorical, the new unit in a new
      category.

    ``by`` is one column name; ``bounds`` ``{column: (lo, hi)}`` gives the value columns (others
    are copied from an existing row).
    """
    import pandas as pd
    if not isinstance(df, pd.DataFrame) or len(df) == 0:
        raise ValueError("df must be a non-empty pandas DataFrame")
    if not isinstance(by, str) or by not in df.columns or privacy_unit not in df.columns:
        raise ValueError("privacy_unit and by must be column names of df")
    bounds = {} if bounds is None else dict(bounds)
    template = df.iloc[0]
    units = df[privacy_unit]
    groups = list(pd.unique(df[by].dropna()))
    numeric_units = units.dtype.kind in "iuf"
    new_id = (int(np.nanmax(units.to_numpy(dtype=np.float64))) + 1) if numeric_units else "__audit_new_unit__"

    def rows(unit_ids, gvals):
        recs = []
        for u, g in zip(unit_ids, gvals):
            r = template.to_dict()
            r[privacy_unit] = u
            r[by] = g
            for c, (lo, hi) in bounds.items():
                r[c] = hi
            recs.append(r)
        return pd.DataFrame(recs, columns=df.columns)

    def add(extra, desc, base=df):
        ext = extra.astype({c: base[c].dtype for c in base.columns if c not in (by, privacy_unit)
                            and base[c].dtype.kind in "iufb"}, errors="ignore")
        return Neighbours(base, pd.concat([base, ext], ignore_index=True), desc)

    out = []
    gs = groups[:n_groups]
    k = rows_per_group
    out.append(add(rows([new_id] * (k * len(gs)), [g for g in gs for _ in range(k)]),
                   f"a new unit with {k} rows in each of {len(gs)} existing groups, values at the bound"))
    if df[by].dtype.kind in "iuf":
        fresh = [int(np.nanmax(df[by].to_numpy(dtype=np.float64))) + 1 + i for i in range(n_groups)]
        other = "__audit_str_group__"
    else:
        fresh = [f"__audit_group_{i}__" for i in range(n_groups)]
        other = 10 ** 6 + 7
    out.append(add(rows([new_id] * (k * n_groups), [g for g in fresh for _ in range(k)]),
                   f"a new unit with {k} rows in each of {n_groups} groups only it has"))
    out.append(add(rows([new_id] * k, [other] * k), "a new unit in a group whose key has another type"))
    na = pd.NA if pd.api.types.is_extension_array_dtype(df[by].dtype) else (
        np.nan if df[by].dtype.kind == "f" else None)
    out.append(add(rows([new_id] * k, [na] * k), "a new unit whose group key is NA"))
    if numeric_units:
        ids = [new_id, float(new_id)] * k
        out.append(add(rows(ids, [g for g in gs[:1] for _ in range(2 * k)]),
                       "a new unit whose id is written as int and as float in different rows"))
    for ordered in (True, False):
        cats = list(groups) + ["__audit_new_category__"] if df[by].dtype.kind == "O" else None
        try:
            base = df.astype({by: pd.CategoricalDtype(cats, ordered=ordered)} if cats is not None
                             else {by: pd.CategoricalDtype(list(groups) + [max(groups) + 1], ordered=ordered)})
            newg = cats[-1] if cats is not None else max(groups) + 1
            extra = rows([new_id] * k, [newg] * k).astype({by: base[by].dtype})
            out.append(Neighbours(base, pd.concat([base, extra], ignore_index=True),
                                  f"`by` as an {'ordered' if ordered else 'unordered'} categorical, "
                                  "a new unit in a category no other unit has"))
        except (TypeError, ValueError):
            pass
    return out
