"""Grouped DP aggregates over a table: bounding, partition selection, noisy metrics.

Primary sources: Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo & Gipson 2020,
"Differentially private SQL with bounded user contribution" (PoPETs) -- contribution bounding
(L0 groups per unit, Linf rows per (unit, group)), the sensitivities of counts and sums and
Laplace thresholding for private partition selection; Desfontaines, Voss, Gipson & Mandayam
2022, "Differentially private partition selection" (PoPETs) -- the optimal (epsilon, delta)
partition-selection rule (its Theorem 1) and the analysis of thresholding a noisy count.

Layout: :func:`_plan` validates the schema and the arguments and splits the budget (no data
read); :func:`_prepare_pandas` / ``_dask.prepare_dask`` read the data and code the keys;
:func:`_bounded_stats` runs the native kernel (``dpfast._tables``: group-by, per-unit
bounding, clamping, per-group sums; GIL released); :func:`_release` selects groups and adds
noise.  The budget is charged between reading the data and the first random draw.
"""
from __future__ import annotations

import datetime
import decimal
import math
import numbers
from fractions import Fraction
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from dpfast import _tables
from dpfast._dask_utils import is_dask_collection
from dpfast._threads import check_threads, default_threads
from dpfast.accounting import ApproxDP, Composed, PureDP
from dpfast.budget import charge as charge_budget
from dpfast.budget import detached
from dpfast._validation import check_delta, check_epsilon, check_int, check_positive, check_real
from dpfast.calibrate import gaussian_sigma, laplace_scale
from dpfast.mechanisms.continuous import gaussian, laplace
from dpfast.mechanisms.discrete import (discrete_gaussian_mechanism, discrete_gaussian_sigma2,
                                        discrete_laplace_mechanism)
from dpfast import _selection
from dpfast._validation import check_bounds
from dpfast.random import RandomLike, check_random_state
from dpfast.tables._keys import mix_keys, value_keys
from dpfast.tables._selection import _selection_pi, selection_probabilities, selection_threshold

__all__ = ["aggregate", "selection_threshold", "selection_probabilities"]

_KINDS = {"count": 0, "sum": 1, "mean": 1, "variance": 1, "quantile": 2}  # kind -> number of extra args
_NOISES = ("laplace", "gaussian", "discrete", "discrete_gaussian")
_SELECTIONS = ("truncated_geometric", "laplace")
# Noisy primitives each metric is built from (each gets an equal share of the metric's budget).
_PRIMITIVES = {"count": ("count",), "sum": ("sum",), "mean": ("count", "sum"),
               "variance": ("count", "sum", "sumsq"), "quantile": ()}
_LATTICE_BITS = 20       # default granularity: max(|lo|, |hi|) / granularity <= 2^20
_SQUARE_BITS = 12        # lattice squares are summed exactly, then divided by c with (d^2 / c) ~ 2^12
_LATTICE_MAX = 2 ** 53 - 1  # the discrete mechanisms need |value| < 2^53 lattice units
_MAX_ABS_BOUND = 2.0 ** 450  # |bound|^2 times any row count stays finite: no overflow in the sums
_MAX_CONTRIB = 2 ** 63 - 1  # max_groups_per_unit, max_rows_per_group: int64 in the native kernel


def _parse_metrics(metrics, columns) -> list:
    if not isinstance(metrics, Mapping) or not metrics:
        raise TypeError("metrics must be a non-empty dict {name: 'count' | (kind, column[, q])}")
    parsed = []
    for name, spec in metrics.items():
        if not isinstance(name, str):
            raise TypeError(f"metric names must be strings, got {name!r}")
        if isinstance(spec, str):
            spec = (spec,)
        if not isinstance(spec, tuple) or not spec or spec[0] not in _KINDS:
            raise ValueError(f"metric {name!r}: spec must be 'count' or (kind, column[, q]) with kind in "
                             f"{sorted(_KINDS)}, got {spec!r}")
        kind = spec[0]
        want = 1 + (0 if kind == "count" else 1 + (kind == "quantile"))
        if len(spec) != want:
            raise ValueError(f"metric {name!r}: {kind!r} takes {want - 1} argument(s) after the kind, got {spec!r}")
        col = spec[1] if kind != "count" else None
        if col is not None and col not in columns:
            raise ValueError(f"metric {name!r}: unknown column {col!r}")
        q = None
        if kind == "quantile":
            q = spec[2]
            if isinstance(q, (bool, np.bool_)) or not isinstance(q, numbers.Real) or not 0.0 <= float(q) <= 1.0:
                raise ValueError(f"metric {name!r}: quantile level must be a number in [0, 1], got {q!r}")
            q = float(q)
        parsed.append((name, kind, col, q))
    return parsed


def _check_bounds(bounds, cols) -> dict:
    if bounds is None:
        bounds = {}
    if not isinstance(bounds, Mapping):
        raise TypeError("bounds must be a dict {column: (lo, hi)}")
    out = {}
    for col in cols:
        if col not in bounds:
            raise ValueError(f"bounds: missing (lo, hi) for value column {col!r}")
        b = bounds[col]
        try:
            lo, hi = (float(b[0]), float(b[1]))
            if len(b) != 2:
                raise ValueError
        except (TypeError, ValueError, IndexError):
            raise TypeError(f"bounds[{col!r}] must be a pair (lo, hi) of finite numbers, got {b!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"bounds[{col!r}] must be finite, got {b!r}")
        if lo > hi:
            raise ValueError(f"bounds[{col!r}]: lo must be <= hi, got {b!r}")
        out[col] = (lo, hi)
    return out




def _check_granularity(granularity, value_cols, bnds) -> dict:
    """Lattice step per value column for the discrete noises: a positive power of two.

    Default ``2^(ceil(log2 max(|lo|, |hi|)) - 20)`` (values rounded to ~20 bits over the range).
    Powers of two keep ``round(x / gamma)`` and ``k * gamma`` exact in binary floating point.
    """
    if granularity is None:
        granularity = {}
    if not isinstance(granularity, Mapping):
        raise TypeError("granularity must be a dict {column: power of two > 0}")
    for c in granularity:
        if c not in value_cols:
            raise ValueError(f"granularity: {c!r} is not a value column of the metrics; allowed {value_cols}")
    out = {}
    for col in value_cols:
        lo, hi = bnds[col]
        mx = max(abs(lo), abs(hi))
        if col in granularity:
            g = granularity[col]
            if isinstance(g, (bool, np.bool_)) or not isinstance(g, numbers.Real) or not 0 < float(g) < math.inf \
                    or math.frexp(float(g))[0] != 0.5:
                raise ValueError(f"granularity[{col!r}] must be a positive power of two (e.g. 2**-10), got {g!r}")
            g = float(g)
        else:
            g = 2.0 ** (math.frexp(mx)[1] - _LATTICE_BITS) if mx > 0 else 1.0
        if mx / g > 2.0 ** 30:
            raise ValueError(f"granularity[{col!r}] = {g} is too fine for bounds {bnds[col]}: "
                             f"max(|lo|, |hi|) / granularity must be <= 2^30")
        out[col] = g
    return out


def _plan(columns, privacy_unit, by, metrics, bounds, max_groups_per_unit, max_rows_per_group, epsilon,
          delta, groups, noise, weights, ci_level, selection, granularity) -> dict:
    """Validate everything that does not need the rows; split the budget (no data read)."""
    if privacy_unit not in columns:
        raise ValueError(f"privacy_unit: unknown column {privacy_unit!r}")
    by_cols = [by] if isinstance(by, str) else list(by) if isinstance(by, (list, tuple)) else None
    if not by_cols:
        raise TypeError(f"by must be a column name or a non-empty list of column names, got {by!r}")
    for c in by_cols:
        if c not in columns:
            raise ValueError(f"by: unknown column {c!r}")
    parsed = _parse_metrics(metrics, columns)
    value_cols = sorted({col for _, _, col, _ in parsed if col is not None})
    bnds = _check_bounds(bounds, value_cols)
    for col, (lo, hi) in bnds.items():
        if max(abs(lo), abs(hi)) > _MAX_ABS_BOUND:
            raise ValueError(f"bounds[{col!r}] must be at most 2^450 in magnitude (sums of squares must not "
                             f"overflow), got {(lo, hi)!r}")
    l0 = check_int(max_groups_per_unit, "max_groups_per_unit")
    linf = check_int(max_rows_per_group, "max_rows_per_group")
    for v, nm in ((l0, "max_groups_per_unit"), (linf, "max_rows_per_group")):
        if v > _MAX_CONTRIB:  # the native kernel counts in int64
            raise ValueError(f"{nm} must be <= 2**63 - 1, got {v!r}")
    epsilon = check_epsilon(epsilon, allow_array=False)
    delta = check_delta(delta)
    if noise not in _NOISES:
        raise ValueError(f"noise must be one of {_NOISES}, got {noise!r}")
    if selection not in _SELECTIONS:
        raise ValueError(f"selection must be one of {_SELECTIONS}, got {selection!r}")
    discrete = noise in ("discrete", "discrete_gaussian")
    if discrete and any(k == "quantile" for _, k, _, _ in parsed):
        raise ValueError(f"noise={noise!r}: quantile metrics have no floating-point-safe sampler here "
                         "(the exponential mechanism draws doubles); use noise='laplace' or 'gaussian'")
    if groups is None and delta == 0:
        raise ValueError("delta must be > 0 with groups=None (private partition selection is "
                         "(epsilon, delta)-DP); pass public groups for delta = 0")
    gaussian_metrics = noise in ("gaussian", "discrete_gaussian") and any(k != "quantile" for _, k, _, _ in parsed)
    if gaussian_metrics and delta == 0:
        raise ValueError(f"delta must be in (0, 1) with noise={noise!r}")
    gran = _check_granularity(granularity, value_cols, bnds) if discrete else None
    if ci_level is not None:
        if isinstance(ci_level, (bool, np.bool_)) or not isinstance(ci_level, numbers.Real) \
                or not 0.0 < check_real(ci_level, "ci_level") < 1.0:  # (check_real: a Fraction
            raise ValueError(f"ci_level must be in (0, 1), got {ci_level!r}")  # beyond a double -> ValueError)
        ci_level = float(ci_level)
    if "selection" in [name for name, _, _, _ in parsed]:
        raise ValueError("metric name 'selection' is reserved (budget weight of partition selection)")
    columns_out = _output_columns(parsed, ci_level)
    parts = [name for name, _, _, _ in parsed] + (["selection"] if groups is None else [])
    weights = {} if weights is None else weights
    if not isinstance(weights, Mapping):
        raise TypeError("weights must be a dict {metric name or 'selection': weight > 0}")
    for k in weights:
        if k not in parts:
            raise ValueError(f"weights: unknown part {k!r}; allowed {parts}")
    w = {}
    for p in parts:
        v = weights.get(p, 1.0)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) or not 0 < float(v) < math.inf:
            raise ValueError(f"weights[{p!r}] must be a finite number > 0, got {v!r}")
        w[p] = float(v)
    kinds = {n: k for n, k, _, _ in parsed}
    wsum = sum(w.values())
    needs_delta = [p for p in parts if p == "selection" or
                   (noise in ("gaussian", "discrete_gaussian") and kinds[p] != "quantile")]
    dsum = sum(w[p] for p in needs_delta)
    eps_sh = _shares(epsilon, {p: w[p] for p in parts})
    dlt_sh = _shares(delta, {p: w[p] for p in needs_delta}) if needs_delta else {}
    budget = {p: (eps_sh[p], dlt_sh.get(p, 0.0)) for p in parts}
    for p, (e, d) in budget.items():
        if e == 0.0 or (p in needs_delta and d == 0.0):
            which = "epsilon" if e == 0.0 else "delta"
            raise ValueError(f"{which}={epsilon if e == 0.0 else delta!r} is too small to split over "
                             f"{len(parts)} parts: the share of {p!r} rounds to 0.0; raise {which} or "
                             f"the weight of {p!r}")
    if groups is not None:
        groups = list(groups)  # once: an iterator must not be used up by this check
        public_groups(groups, by_cols)  # duplicates: a public-parameter error, raised here
    plan = dict(privacy_unit=privacy_unit, by_cols=by_cols, parsed=parsed, value_cols=value_cols, bnds=bnds,
                l0=l0, linf=linf, epsilon=epsilon, delta=delta, noise=noise, discrete=discrete,
                selection=selection, gran=gran, ci_level=ci_level, budget=budget, groups=groups,
                want_mask=any(k == "quantile" for _, k, _, _ in parsed), columns=columns_out)
    _dry_run(plan)
    return plan


def _output_columns(parsed, ci_level) -> list:
    """The output's columns, a function of the metrics and ci_level only; a name used twice
    (a metric called ``<m>_lo`` next to the CI column of ``m``) is refused, never overwritten."""
    cols = []
    for name, kind, _, _ in parsed:
        cols.append(name)
        if ci_level is not None and kind in ("count", "sum", "mean"):
            cols += [name + "_lo", name + "_hi"]
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise ValueError(f"output column name(s) {dup} would be used twice: with ci_level set, count, sum "
                         "and mean metrics add '<name>_lo' and '<name>_hi' columns; rename the metric")
    return cols


def _shares(total: float, weights: dict) -> dict:
    """``total`` split in proportion to ``weights``, the float sum of the shares <= total.

    Each round lowers every share by at least one ulp (multiplying by ``1 - 2^-50`` alone makes
    no progress on subnormals), so the loop ends after a few rounds for any input."""
    top = max(weights.values())
    wsum = math.fsum(v / top for v in weights.values())  # normalised: no overflow for huge weights
    sh = {p: total * ((v / top) / wsum) for p, v in weights.items()}
    while sum(sh.values()) > total:
        sh = {p: min(v * (1 - 2.0 ** -50), math.nextafter(v, 0.0)) for p, v in sh.items()}
    return sh


def _dry_run(plan: dict) -> None:
    """Every parameter-only failure before the charge and before any draw: the release runs
    on zero groups, with a throwaway generator and no budget, so each mechanism, calibration
    and CI half-width validates the exact arguments the real release will give it."""
    nv = len(plan["value_cols"])
    z = np.zeros((nv, 0))
    zu = np.zeros((nv, 0), dtype=np.uint64)
    st = {"count": np.zeros(0, dtype=np.int64), "units": np.zeros(0, dtype=np.int64), "s1": (z, z), "s2": (z, z),
          "t1": (zu, zu), "t3": (zu, zu),
          "quantile_values": {c: (np.zeros(0, dtype=np.int64), np.zeros(0)) for c in plan["value_cols"]}}
    idx = pd.MultiIndex.from_arrays([[]] * len(plan["by_cols"]), names=plan["by_cols"]) \
        if len(plan["by_cols"]) > 1 else pd.Index([], dtype=object, name=plan["by_cols"][0])
    with detached():
        _release(plan, idx, st, np.random.default_rng(0))


def _event(budget: dict):
    """The call's event: the composition of its parts, each a ``PureDP(eps_i)`` or an
    ``ApproxDP(eps_i, delta_i)`` release under add/remove neighbours (the basic-composition
    guarantee stated in :func:`aggregate`; an accountant may compose them more tightly)."""
    return Composed(tuple(PureDP(float(e)) if d == 0 else ApproxDP(float(e), float(d))
                          for e, d in budget.values()))


# ------------------------------------------------------------------------------ keys

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


def _key_index(frame: pd.DataFrame, by_cols) -> pd.Index:
    return pd.Index(frame[by_cols[0]]) if len(by_cols) == 1 else pd.MultiIndex.from_frame(frame[by_cols])


def canonical_groups(uniques: pd.Index, by_cols) -> pd.Index:
    """Groups in one order whatever the input's row order or partitioning: sorted (NaN last),
    or by key hash when the keys are not orderable."""
    try:
        idx = uniques.sort_values()
    except TypeError:
        idx = uniques[np.argsort(group_keys(uniques), kind="stable")]
    return idx.set_names(by_cols) if isinstance(idx, pd.MultiIndex) else pd.Index(idx, name=by_cols[0])


def public_groups(groups, by_cols) -> pd.Index:
    glist = list(groups)
    idx = (pd.MultiIndex.from_tuples(glist, names=by_cols) if len(by_cols) > 1
           else pd.Index(glist, name=by_cols[0]))
    if idx.has_duplicates:
        raise ValueError("groups must not contain duplicates")
    return idx


def _is_bool(ix: pd.Index) -> bool:
    return ix.dtype.kind == "b" or isinstance(ix.dtype, pd.BooleanDtype)


def group_codes(frame: pd.DataFrame, by_cols, index: pd.Index) -> np.ndarray:
    """Code of each row's group in ``index`` (-1: not in it)."""
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
    keys = _key_index(frame, by_cols)
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


def _prepare_pandas(df: pd.DataFrame, plan: dict):
    """Read the rows: (unit codes, unit keys, group codes, group index, values); raises on bad data."""
    pu, by_cols = plan["privacy_unit"], plan["by_cols"]
    if df[pu].isna().any():
        raise ValueError(f"privacy_unit column {pu!r} contains NaN/None")
    values = value_matrix(df, plan["value_cols"])
    if plan["groups"] is None:
        # the integer fast path only for a NumPy column: its index keeps the column's dtype, as
        # factorize's does for a nullable or categorical one (and as the Dask path's does)
        col0 = df[by_cols[0]]
        fast = _int_codes(col0.to_numpy()) if len(by_cols) == 1 and isinstance(col0.dtype, np.dtype) else None
        if fast is not None:  # already sorted
            gcodes, uniq = fast
            index = pd.Index(uniq, name=by_cols[0])
        else:
            codes, uniq = pd.factorize(_key_index(df, by_cols), use_na_sentinel=False)
            uniq = uniq if isinstance(uniq, pd.Index) else pd.Index(uniq)
            index = canonical_groups(uniq, by_cols)
            perm = np.asarray(index.get_indexer(uniq), dtype=np.int64)
            gcodes = perm[np.asarray(codes, dtype=np.int64)]
    else:
        index = public_groups(plan["groups"], by_cols)
        gcodes = group_codes(df, by_cols, index)
    ucodes, ukeys = unit_codes(df[pu])
    return ucodes, ukeys, np.ascontiguousarray(gcodes, dtype=np.int64), index, values


def bounded_stats(plan: dict, ucodes, ukeys, gcodes, index: pd.Index, values, seed: int, threads: int) -> dict:
    """The native kernel on one block of rows (all rows of each unit in it): per-group partial
    statistics (see ``csrc/tables/aggregate.hpp``), with kept quantile values as (group, value)."""
    cols = plan["value_cols"]
    lo = np.array([plan["bnds"][c][0] for c in cols], dtype=np.float64)
    hi = np.array([plan["bnds"][c][1] for c in cols], dtype=np.float64)
    gamma = None if plan["gran"] is None else np.array([plan["gran"][c] for c in cols], dtype=np.float64)
    res = _tables.bound_and_sum(ucodes, int(ukeys.size), np.ascontiguousarray(ukeys, dtype=np.uint64), gcodes,
                                len(index), group_keys(index), np.ascontiguousarray(values), lo, hi, gamma,
                                int(seed), plan["l0"], plan["linf"], plan["want_mask"], threads)
    qv = {}
    if plan["want_mask"]:
        keep = res.pop("keep").view(bool)
        g = gcodes[keep]
        for name, kind, col, _ in plan["parsed"]:
            if kind == "quantile" and col not in qv:
                j = cols.index(col)
                qv[col] = (g, np.clip(values[j][keep], lo[j], hi[j]))
    res["quantile_values"] = qv
    return res


def merge_stats(parts: list) -> dict:
    """Sum per-group partial statistics of disjoint unit sets (double-double / 128-bit exact)."""
    out = {"count": sum(p["count"] for p in parts), "units": sum(p["units"] for p in parts)}
    for key in ("s1", "s2"):
        if key in parts[0]:
            hi, lo = parts[0][key][0].copy(), parts[0][key][1].copy()
            for p in parts[1:]:
                for x in p[key]:
                    s = hi + x
                    bp = s - hi
                    lo += (hi - (s - bp)) + (x - bp)
                    hi = s
            out[key] = (hi, lo)
    for key in ("t1", "t3"):
        if key in parts[0]:
            hi, lo = parts[0][key][0].copy(), parts[0][key][1].copy()
            for p in parts[1:]:
                s = lo + p[key][1]  # uint64, wraps
                hi = hi + p[key][0] + (s < lo)
                lo = s
            out[key] = (hi, lo)
    qv = {}
    for col in parts[0]["quantile_values"]:
        qv[col] = (np.concatenate([p["quantile_values"][col][0] for p in parts]),
                   np.concatenate([p["quantile_values"][col][1] for p in parts]))
    out["quantile_values"] = qv
    return out


def _exact_ints(t, j: int, released: np.ndarray) -> np.ndarray:
    """Column ``j`` of 128-bit sums (hi, lo words) at ``released``, as exact Python ints."""
    hi, lo = t[0][j][released], t[1][j][released]
    return np.array([(int(h) << 64) + int(l) for h, l in zip(hi, lo)], dtype=object)


def _clamp53(v: np.ndarray) -> np.ndarray:
    """Exact integers clamped to [-(2^53 - 1), 2^53 - 1] (the discrete mechanisms' lattice range),
    as float64 (exact there).  Clamping a statistic is 1-Lipschitz, so its sensitivity does not
    grow; with the default lattices it is never reached below 2^33 rows per group."""
    return np.array([float(max(-_LATTICE_MAX, min(_LATTICE_MAX, int(x)))) for x in v], dtype=np.float64)


# ------------------------------------------------------------------------------ release

def _dlap_half_width(b: float, alpha: float) -> float:
    """Smallest integer t with P(|Z| > t) <= alpha, Z discrete Laplace P(z) ~ exp(-|z|/b):
    P(|Z| > t) = 2 exp(-(t+1)/b) / (1 + exp(-1/b))."""
    a = math.exp(-1.0 / b)
    t = math.ceil(-b * math.log(alpha * (1.0 + a) / 2.0) - 1.0)
    return float(max(t, 0))


def _dgauss_half_width(sigma2: float, alpha: float) -> float:
    """Smallest integer t with P(|Z| > t) <= alpha for the discrete Gaussian N_Z(0, sigma2)
    (exact summation of the pmf up to 12 sigma; beyond 10^6 lattice points the continuous
    quantile rounded up, which the discrete law matches to exp(-2 pi^2 sigma2))."""
    s = math.sqrt(sigma2)
    K = int(math.ceil(12 * s)) + 2
    if K > 10 ** 6:
        return float(math.ceil(s * stats.norm.isf(alpha / 2.0)))
    k = np.arange(K + 1, dtype=np.float64)
    w = np.exp(-k * k / (2.0 * sigma2))
    total = w[0] + 2.0 * w[1:].sum()
    tail = 2.0 * (np.cumsum(w[::-1])[::-1] - w) / total  # tail[t] = P(|Z| > t)
    return float(np.flatnonzero(tail <= alpha)[0])


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
    codes, uniq = pd.factorize(level, use_na_sentinel=False)
    try:
        _, order = pd.Index(uniq).sort_values(return_indexer=True, na_position="last")
    except TypeError:
        vals = list(uniq)

        def isna(v):
            return isinstance(v, float) and math.isnan(v)
        try:
            order = sorted(range(len(vals)), key=lambda i: (isna(vals[i]), type(vals[i]).__name__, vals[i]))
        except TypeError:
            order = sorted(range(len(vals)), key=lambda i: (isna(vals[i]), type(vals[i]).__name__, repr(vals[i])))
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


def _quantile_draws(gs: np.ndarray, xs: np.ndarray, released: np.ndarray, q: float, eps_g: float,
                    lo: float, hi: float, gen: np.random.Generator) -> np.ndarray:
    """:func:`dpfast.mechanisms.private_quantile` of each released group's kept values at
    ``eps_g``, batched: the same validation, edges ``[lo, sorted values, hi]``, targets ``q n``
    and native draw (``sel::quantile_draw``) for every group in one call
    (``_selection.quantile_draws_grouped``) instead of one Python call per group.
    ``gs``/``xs``: group codes and clamped values, sorted by (group, value)."""
    res = np.full(released.size, np.nan)
    if lo == hi:  # the one possible value; no draw
        res[:] = lo
        return res
    eps_g = check_positive(eps_g, "epsilon", allow_array=False)
    check_bounds((lo, hi))
    starts = np.searchsorted(gs, released, side="left")
    n = np.searchsorted(gs, released, side="right") - starts
    # one buffer holding every group's edges back to back: [lo, x_1 <= ... <= x_n, hi]
    off = np.zeros(released.size + 1, dtype=np.int64)
    np.cumsum(n + 2, out=off[1:])
    edges = np.empty(int(off[-1]), dtype=np.float64)
    edges[off[:-1]] = lo
    edges[off[1:] - 1] = hi
    cn = np.cumsum(n) - n  # values before group i
    j = np.arange(int(n.sum()), dtype=np.int64)
    edges[j + np.repeat(off[:-1] + 1 - cn, n)] = xs[j + np.repeat(starts - cn, n)]
    targets = q * n.astype(np.float64)
    if released.size == 0:
        return res
    bg = gen.bit_generator
    with bg.lock:  # as private_quantile (dpfast.random.native_stream)
        # group i: sel::quantile_draw on edges[off[i]:off[i+1]], target q n_i, c = eps_g / 2
        return _selection.quantile_draws_grouped(bg.capsule, edges, off, targets, 0.5 * eps_g)


def _release(plan: dict, index: pd.Index, st: dict, gen: np.random.Generator) -> pd.DataFrame:
    noise, l0, linf, budget = plan["noise"], plan["l0"], plan["linf"], plan["budget"]
    ci_level = plan["ci_level"]
    G = len(index)
    count = st["count"].astype(np.float64)
    units = st["units"]
    tau = None
    if plan["groups"] is None:
        eps_sel, delta_sel = budget["selection"]
        if plan["selection"] == "laplace":
            tau = selection_threshold(l0, eps_sel, delta_sel)
            # candidates: the groups with >= 1 unit after bounding (a unit is in <= L0 of them);
            # a group that bounding emptied is no candidate, whatever the raw rows held
            cand = np.flatnonzero(units > 0)
            noisy_units = np.asarray(laplace(units[cand].astype(np.float64), float(l0), eps_sel, rng=gen))
            released = cand[noisy_units > tau]
        else:
            # pi: multiples of 2^-53 and U on that grid, so P(release) = pi(n) exactly (pi(0) = 0)
            pi = _selection_pi(int(units.max()) if G else 0, l0, eps_sel, delta_sel)
            u = gen.random(G)
            released = np.flatnonzero(u < pi[np.minimum(units, pi.size - 1)])
        # the output lists the released groups by a rule on their values alone (not the index
        # of every group in the data, whose dtype, categories and order depend on the others)
        out_index, order = released_index(index[released], plan["by_cols"])
        released = released[order]
    else:
        released = np.arange(G)
        out_index = index  # public groups: their given order and dtype
    k = released.size

    def noisy(true_vals: np.ndarray, l1: float, l2: float, eps: float, dlt: float):
        """(noisy values, noise scale) of per-group statistics; for the discrete noises the
        values and sensitivities are integers (lattice units).  The mechanism runs even on
        zero groups: it validates its arguments (the dry run of :func:`_plan` relies on it)."""
        if noise == "laplace":
            if l1 == 0:  # lo == hi: the statistic is constant
                return true_vals.astype(np.float64), 0.0
            scale = float(laplace_scale(eps, l1))
            return np.asarray(laplace(true_vals, l1, eps, rng=gen), dtype=np.float64), scale
        if noise == "gaussian":
            if l2 == 0:
                return true_vals.astype(np.float64), 0.0
            scale = float(gaussian_sigma(eps, dlt, l2))
            return np.asarray(gaussian(true_vals, l2, eps, dlt, rng=gen), dtype=np.float64), scale
        tv = np.asarray(true_vals, dtype=np.int64)
        if noise == "discrete":
            if l1 == 0:
                return tv.astype(np.float64), 0.0
            return discrete_laplace_mechanism(tv, int(l1), Fraction(eps), rng=gen).astype(np.float64), l1 / eps
        if l2 == 0:
            return tv.astype(np.float64), 0.0
        s2 = float(discrete_gaussian_sigma2(l2, eps, dlt, method="zcdp"))
        out = discrete_gaussian_mechanism(tv, l2, eps, dlt, rng=gen, method="zcdp")
        return np.asarray(out, dtype=np.float64), math.sqrt(s2)

    def half_width(scale: float, alpha: float) -> float:
        """Half-width of the central interval missing the noise with probability <= alpha."""
        if noise == "laplace":  # P(|Lap(b)| > t) = exp(-t/b)
            return -scale * math.log(alpha)
        if noise == "gaussian":
            return scale * float(stats.norm.isf(alpha / 2.0))
        if scale == 0:
            return 0.0
        if noise == "discrete":
            return _dlap_half_width(scale, alpha)
        return _dgauss_half_width(scale * scale, alpha)

    out_cols: dict = {}
    scales: dict = {}
    count_true = count[released]
    cnt_l1, cnt_l2 = float(l0 * linf), math.sqrt(l0) * linf
    disc = plan["discrete"]
    alpha = None if ci_level is None else 1.0 - ci_level  # exact (Sterbenz) for ci_level >= 1/2
    for name, kind, col, q in plan["parsed"]:
        eps_m, dlt_m = budget[name]
        nprim = len(_PRIMITIVES[kind])
        eps_p, dlt_p = (eps_m / nprim, dlt_m / nprim) if nprim else (eps_m / (l0 * linf), dlt_m)
        if eps_p == 0.0 or (dlt_m > 0 and dlt_p == 0.0):
            raise ValueError(f"metric {name!r}: its budget share {(eps_m, dlt_m)!r} is too small to split "
                             f"over its {max(nprim, 1)} noisy parts (each rounds to 0.0); raise epsilon/delta "
                             f"or the metric's weight")
        if kind == "count":
            v, s = noisy(count_true, cnt_l1, cnt_l2, eps_p, dlt_p)
            out_cols[name], scales[name] = v, {"count": s}
            if ci_level is not None:
                h = half_width(s, alpha)
                out_cols[name + "_lo"], out_cols[name + "_hi"] = v - h, v + h
            continue
        lo, hi = plan["bnds"][col]
        j = plan["value_cols"].index(col)
        if kind == "quantile":
            # group privacy over Linf rows, basic composition over L0 groups: eps_m / (L0 Linf)
            g, x = st["quantile_values"][col]
            order = np.lexsort((x, g))  # by group, then value (the edges private_quantile sorts)
            res = _quantile_draws(g[order], x[order], released, q, eps_p, lo, hi, gen)
            out_cols[name], scales[name] = res, {"exponential_epsilon_per_group": eps_p}
            continue
        m, r = (lo + hi) / 2.0, (hi - lo) / 2.0
        if disc:
            gam = plan["gran"][col]
            klo, khi = round(lo / gam), round(hi / gam)
            T1 = _exact_ints(st["t1"], j, released)  # exact lattice sums (Python ints)
            t1 = _clamp53(T1)
        else:
            s1 = (st["s1"][0][j] + st["s1"][1][j])[released]  # sum of y = clamp(x) - m
        if kind == "sum":
            if disc:  # lattice sum of k = round(clamp(x)/gamma) in [klo, khi]
                mk = max(abs(klo), abs(khi))
                v, s = noisy(t1, cnt_l1 * mk, cnt_l2 * mk, eps_p, dlt_p)
                v, s = v * gam, s * gam
            else:
                mx = max(abs(lo), abs(hi))
                v, s = noisy(s1 + m * count_true, cnt_l1 * mx, cnt_l2 * mx, eps_p, dlt_p)
            out_cols[name], scales[name] = v, {"sum": s}
            if ci_level is not None:
                h = half_width(s / gam, alpha) * gam if disc else half_width(s, alpha)
                out_cols[name + "_lo"], out_cols[name + "_hi"] = v - h, v + h
            continue
        c, sc = noisy(count_true, cnt_l1, cnt_l2, eps_p, dlt_p)
        if disc:
            # centred lattice values y2 = 2k - klo - khi in [-d, d]; y = clamp(x) - m ~ gamma y2 / 2
            d = khi - klo
            cnt_int = st["count"][released].astype(object)
            t2 = _clamp53(2 * T1 - (klo + khi) * cnt_int)  # exact sum of y2, then clamped
            S2, ss2 = noisy(t2, cnt_l1 * d, cnt_l2 * d, eps_p, dlt_p)
            S, ss = S2 * gam / 2.0, ss2 * gam / 2.0
            m_eff = (klo + khi) * gam / 2.0
        else:
            S, ss = noisy(s1, cnt_l1 * r, cnt_l2 * r, eps_p, dlt_p)
            m_eff = m
        cpos = np.maximum(c, 1.0)
        if kind == "mean":
            out_cols[name] = np.clip(m_eff + S / cpos, lo, hi)
            scales[name] = {"count": sc, "sum": ss}
            if ci_level is not None:
                hc = half_width(sc, alpha / 2.0)  # Bonferroni: each part misses with <= alpha / 2
                hs = half_width(ss2, alpha / 2.0) * gam / 2.0 if disc else half_width(ss, alpha / 2.0)
                clo, chi = c - hc, c + hc
                corners = np.stack([(S - hs) / clo, (S - hs) / chi, (S + hs) / clo, (S + hs) / chi])
                ok = clo > 0
                with np.errstate(divide="ignore", invalid="ignore"):
                    mlo = np.where(ok, m_eff + corners.min(axis=0), lo)
                    mhi = np.where(ok, m_eff + corners.max(axis=0), hi)
                out_cols[name + "_lo"] = np.clip(mlo, lo, hi)
                out_cols[name + "_hi"] = np.clip(mhi, lo, hi)
            continue
        # variance
        if disc:
            # exact T3 = sum y2^2 (each in [0, d^2]) divided by c = 2^s with floor: per row
            # y2^2/c - h in [-h, d^2/c - h] (h = round(d^2 / 2c)), so a unit moves the centred
            # floor(T3/c) - h C by at most floor(Linf max(h, d^2/c - h)) + 1 per group.
            cdiv = 1 << max(0, (d * d).bit_length() - _SQUARE_BITS)
            hq = round(d * d / (2 * cdiv))
            a = Fraction(linf) * max(Fraction(hq), Fraction(d * d, cdiv) - hq)
            sens = math.floor(a) + 1
            T3 = _exact_ints(st["t3"], j, released)
            qt = _clamp53(T3 // cdiv - hq * st["count"][released].astype(object))
            Qc, sq = noisy(qt, l0 * sens, math.sqrt(l0) * sens, eps_p, dlt_p)
            unit2 = gam * gam / 4.0 * cdiv  # y^2 per unit of floor(T3/c)
            sumsq = (Qc + hq * c) * unit2
            sq = sq * unit2
        else:
            h2 = r * r / 2.0
            s2 = (st["s2"][0][j] + st["s2"][1][j])[released]
            Q, sq = noisy(s2 - h2 * count_true, cnt_l1 * h2, cnt_l2 * h2, eps_p, dlt_p)
            sumsq = Q + h2 * c
        mean_y = S / cpos
        out_cols[name] = np.clip(sumsq / cpos - mean_y ** 2, 0.0, r * r)
        scales[name] = {"count": sc, "sum": ss, "sumsq": sq}

    out = pd.DataFrame({c: out_cols[c] for c in plan["columns"]}, index=out_index)
    out.attrs["noise_scale"] = scales
    out.attrs["budget"] = budget
    out.attrs["epsilon_spent"] = float(sum(e for e, _ in budget.values()))
    out.attrs["delta_spent"] = float(sum(d for _, d in budget.values()))
    out.attrs["selection"] = None if plan["groups"] is not None else plan["selection"]
    out.attrs["selection_threshold"] = tau
    out.attrs["noise"] = noise
    out.attrs["granularity"] = plan["gran"]
    out.attrs["neighbours"] = "add/remove one privacy unit"
    return out


def _is_dask(df) -> bool:
    return is_dask_collection(df) and hasattr(df, "columns")


def aggregate(
    df,
    privacy_unit: str,
    by,
    metrics: Mapping[str, Any],
    bounds: Optional[Mapping[str, tuple]] = None,
    max_groups_per_unit: int = 1,
    max_rows_per_group: int = 1,
    epsilon: float = 1.0,
    delta: float = 0.0,
    groups: Optional[Sequence] = None,
    noise: str = "laplace",
    rng: RandomLike = None,
    weights: Optional[Mapping[str, float]] = None,
    ci_level: Optional[float] = None,
    *,
    selection: str = "truncated_geometric",
    granularity: Optional[Mapping[str, float]] = None,
    budget=None,
    n_threads: Optional[int] = None,
) -> pd.DataFrame:
    """Differentially private grouped statistics of ``df``; ``(epsilon, delta)``-DP in total.

    Neighbouring relation: add or remove one privacy unit (all rows whose ``privacy_unit``
    equals one value).  Guarantee (Wilson et al. 2020; Desfontaines et al. 2022):

    1. **Contribution bounding.**  Per unit, ``max_groups_per_unit`` (L0) of its groups are kept
       and, per kept (unit, group), ``max_rows_per_group`` (Linf) of its rows; values are
       clamped to ``bounds[column] = (lo, hi)``.  The choice is uniform (not the first rows):
       the smallest priorities, where a priority is a keyed hash (MurmurHash3 finaliser) of a
       64-bit secret drawn from ``rng`` and the unit's value, the group's value and the row's
       values (with an occurrence number among identical rows).  It depends on the unit's own
       rows only -- never on the other units, the row order or the partitioning, which is
       what the add/remove analysis needs and why pandas and Dask inputs give the same output
       for the same ``rng``.  Bounding caps what one unit can change, whatever its raw data.
       Native code (``dpfast._tables``): group-by, bounding, clamping and sums in one pass.
    2. **Sensitivities** (per group a unit changes a count by <= Linf, over <= L0 groups):
       count: l1 ``L0 Linf``, l2 ``sqrt(L0) Linf``.  ``sum`` of clamped values: per group
       <= ``Linf M`` with ``M = max(|lo|, |hi|)``, l1 ``L0 Linf M``, l2 ``sqrt(L0) Linf M``.
       Inside mean and variance the sum is of values centred at ``m = (lo + hi)/2`` (each
       term in ``[-r, r]``, ``r = (hi - lo)/2``): l1 ``L0 Linf r``, l2 ``sqrt(L0) Linf r``;
       the sum of squares of centred values (in ``[0, r^2]``, centred again at ``r^2/2``):
       l1 ``L0 Linf r^2/2``, l2 ``sqrt(L0) Linf r^2/2``.
    3. **Metrics.**  ``count``; ``sum``; ``mean = m + S/max(C, 1)`` from a noisy count C and a
       noisy centred sum S, each with half of the metric's budget, clamped to ``[lo, hi]``;
       ``variance = Q/C - (S/C)^2`` (population variance) from noisy count, centred sum and
       centred sum of squares, a third of the budget each, clamped to ``[0, r^2]``;
       ``quantile`` by :func:`dpfast.mechanisms.private_quantile` (exponential mechanism,
       Smith 2011) on the group's clamped kept values with epsilon ``eps_q / (L0 Linf)``: that
       mechanism is eps'-DP for adding/removing one value; a unit adds <= Linf values to a
       group (group privacy: Linf eps') in <= L0 groups (basic composition: L0 Linf eps' = eps_q).
    4. **Noise.**  ``"laplace"``: Laplace on the l1 sensitivity (pure).  ``"gaussian"``: the
       analytic Gaussian mechanism (Balle & Wang 2018) on the l2 sensitivity.  ``"discrete"``
       / ``"discrete_gaussian"``: floating-point safe (Canonne, Kamath & Steinke 2020): each
       clamped value is rounded to the lattice ``granularity[column] * Z`` (a power of two;
       default ~2^-20 of ``max(|lo|, |hi|)``, bounds rounded likewise), sums are exact integers
       and get exact discrete Laplace / discrete Gaussian noise
       (:func:`dpfast.discrete_laplace_mechanism`, :func:`dpfast.discrete_gaussian_mechanism`,
       zCDP calibration) on the integer sensitivities (lattice ``sum``: ``Linf max(|klo|,
       |khi|)``; centred ``2k - klo - khi``: ``Linf (khi - klo)``; squares summed exactly and
       divided by ``c = 2^s`` with floor: ``floor(Linf max(h, d^2/c - h)) + 1``); pair them
       with ``rng=dpfast.random.SecureRandom()``.  Exact sums beyond ``2^53`` lattice units
       are clamped there (1-Lipschitz, so sensitivities hold).  Quantiles are refused with
       the discrete noises (the exponential mechanism draws doubles).
    5. **Partition selection** (``groups=None``), on the number n of distinct units of a group
       after bounding: ``selection="truncated_geometric"`` (default) releases a group with
       the probability ``pi(n)`` of Desfontaines et al. 2022, Theorem 1 (the optimal
       (eps, delta)-DP rule, run at ``(eps_sel/L0, delta_sel/L0)`` per group, basic
       composition over the <= L0 groups a unit touches; :func:`selection_probabilities`);
       ``selection="laplace"`` releases iff ``n + Lap(L0/eps_sel)`` exceeds
       ``1 + (L0/eps_sel) ln(L0/(2 delta_sel))`` (:func:`selection_threshold`).  The candidates
       are the groups with ``n >= 1`` after bounding (a unit is in at most L0 of them, whatever
       its raw rows; a group bounding emptied is never released).  Both are
       (eps_sel, delta_sel)-DP and need ``delta > 0``; neither depends on ``noise``.  Metrics
       are released for selected groups only.  With public ``groups`` every listed group is
       reported (empty ones too; rows of other groups are dropped before bounding) and
       selection costs nothing.
    6. **Budget** (basic composition): ``epsilon`` is split over the metrics and selection in
       proportion to ``weights`` (dict of metric name / ``"selection"`` -> positive weight;
       default 1 each); within a metric equally over its noisy primitives.  ``delta`` is
       split, in proportion to the same weights, over the parts that need it: selection and,
       with a Gaussian noise, the metrics other than quantiles.  Laplace metrics and
       quantiles are pure.  The parts are in ``out.attrs["budget"]``; their sums
       (``epsilon_spent``, ``delta_spent``) are <= ``(epsilon, delta)``.  The call's event
       (``out.attrs["event"]``: the composition of one ``PureDP(eps_i)`` or
       ``ApproxDP(eps_i, delta_i)`` per part) is
       charged to ``budget`` (or the default budget of a ``with budget:`` block) through
       ``dpfast.budget.charge`` after the input is validated and before any random draw.

    Value columns with NaN raise ``ValueError`` naming the column (policy: error, never a
    silent drop, since which rows are dropped would be data-dependent and undocumented).  A
    NaN in a ``by`` column forms its own group; a NaN ``privacy_unit`` raises ``ValueError``.

    Parameters
    ----------
    df : pandas.DataFrame or dask.dataframe.DataFrame
        A Dask frame is bounded and summed per partition on the workers, with each unit's rows
        in one partition; partial sums are merged exactly (double-double / 128-bit), so the
        output equals the pandas one for the same ``rng``.  The rows are shuffled by
        ``privacy_unit`` first unless the first pass proves from the data that no unit has
        rows in two partitions: the partitions' unit ranges ``[min, max]`` are disjoint (a
        frame indexed or sorted by the unit, e.g. ``ddf.set_index(privacy_unit)``), or their
        exact sets of unit keys are (a frame already partitioned by unit).  Such frames skip
        the shuffle; any other frame, even with one unit in two partitions, is shuffled (a
        unit bounded separately in two partitions could contribute twice), each row routed by a
        key of its unit's value that agrees across dtypes (int64 7 and float64 7.0 are one
        person, as for pandas input).
    privacy_unit : str
        Column identifying the privacy unit, or the name of the index (``df.set_index(unit)``;
        the index is then used as that column).
    by : str or list of str
        Group key column(s).
    metrics : dict
        ``{name: "count" | ("sum"|"mean"|"variance", column) | ("quantile", column, q)}``.
    bounds : dict
        ``{column: (lo, hi)}`` for every value column, finite, lo <= hi, |lo|, |hi| <= 2^450
        (public).
    max_groups_per_unit, max_rows_per_group : int in [1, 2**63 - 1]
    epsilon : float > 0
    delta : float in [0, 1); > 0 when ``groups is None`` or the noise is Gaussian.
    groups : None or sequence
        Public groups (tuples for several ``by`` columns), reported in this order.
    noise : {"laplace", "gaussian", "discrete", "discrete_gaussian"}
    rng : None, int, numpy.random.Generator or dpfast.random.SecureRandom
    weights : dict, optional
    ci_level : float in (0, 1), optional
        Adds ``<name>_lo`` / ``<name>_hi`` columns for count, sum and mean metrics.  They cover
        the **noise only**, at the stated level, around the value of the bounded, clamped
        (and, for the discrete noises, lattice-rounded) data -- not the bias from clamping or
        contribution bounding.  Count and sum: the exact central interval of the noise
        (discrete noises: the smallest integer half-width with coverage >= the level).  Mean:
        a Bonferroni box (count and centred sum each at level ``1 - (1 - ci_level)/2``), its
        ratio range, intersected with ``[lo, hi]`` (conservative).
    selection : {"truncated_geometric", "laplace"}, keyword-only
    granularity : dict, keyword-only
        ``{column: power of two}`` lattice steps for the discrete noises.
    budget : dpfast.PrivacyBudget, keyword-only
    n_threads : int, keyword-only
        Threads of the native kernel (pandas input); default ``DPFAST_NUM_THREADS`` or the CPUs.

    Returns
    -------
    pandas.DataFrame indexed by the released groups (named after ``by``), one column per metric
    (plus the CI columns).  With public ``groups``: those groups, in their order and dtype.
    Otherwise the index is rebuilt from the released values alone (:func:`released_index`):
    one representation per value (integral numbers -> int; datetimes in UTC at ns; missing -> NaN, or NA in
    an ``Int64`` / ``boolean`` index among ints / bools), the dtype inferred from them, sorted by value (by type name first where types do not compare); a
    categorical ``by`` gives a plain index.  Its dtype, order and categories never depend on
    unreleased groups (docs/privacy.rst, "Tables").  ``out.attrs``: ``noise_scale`` (per
    metric, per primitive: Laplace scale b, Gaussian sigma, or the discrete noises' scale in
    output units), ``budget`` (per part: (epsilon, delta)), ``epsilon_spent``,
    ``delta_spent``, ``event``, ``selection``, ``selection_threshold`` (Laplace selection) or
    None, ``noise``, ``granularity``, ``neighbours``.

    Raises
    ------
    ValueError, TypeError
        Unknown columns, missing or bad bounds, NaN values, bad bounds on contributions,
        epsilon/delta out of range, bad weights, ci_level or granularity, quantiles with a
        discrete noise, output column names used twice, an epsilon/delta or weight whose
        share rounds to 0, noise parameters beyond a sampler's range -- all before any noise is
        drawn and before the budget is charged (the parameter checks of every mechanism run in
        a dry run on zero groups first).
    dpfast.BudgetExceededError
        When the call's event does not fit the remaining budget (nothing drawn or charged).
    """
    if not (isinstance(df, pd.DataFrame) or _is_dask(df)):
        raise TypeError(f"df must be a pandas.DataFrame or a dask.dataframe.DataFrame, got {type(df).__name__}")
    indexed = isinstance(privacy_unit, str) and privacy_unit not in df.columns and df.index.name == privacy_unit
    # a Dask frame sorted by the unit (known divisions of a unit index) skips the shuffle: the
    # first pass need not cut its rows for it
    cut = _is_dask(df) and not (indexed and df.known_divisions)
    if indexed:
        # a frame indexed by the unit (df.set_index(privacy_unit)): the index as a column; for Dask
        # this keeps the partitions, whose unit ranges then prove the shuffle unnecessary
        df = df.reset_index()
    plan = _plan(df.columns, privacy_unit, by, metrics, bounds, max_groups_per_unit, max_rows_per_group,
                 epsilon, delta, groups, noise, weights, ci_level, selection, granularity)
    threads = default_threads() if n_threads is None else check_threads(n_threads)
    gen = check_random_state(rng)
    if _is_dask(df):
        from dpfast.tables._dask import prepare_dask, stats_dask
        index, state = prepare_dask(df, plan, cut)  # one pass: bad values raise here, before the charge
        event = _event(plan["budget"])
        charge_budget(budget, event, label="tables.aggregate")
        seed = int(gen.integers(0, 2 ** 64, dtype=np.uint64))
        st = stats_dask(df, plan, index, seed, state)
    else:
        ucodes, ukeys, gcodes, index, values = _prepare_pandas(df, plan)
        event = _event(plan["budget"])
        charge_budget(budget, event, label="tables.aggregate")
        # The key of every pseudo-random choice of the bounding (a secret draw of the rng).
        seed = int(gen.integers(0, 2 ** 64, dtype=np.uint64))
        st = bounded_stats(plan, ucodes, ukeys, gcodes, index, values, seed, threads)
    with detached():  # the inner mechanism calls must not charge a default budget again
        out = _release(plan, index, st, gen)
    out.attrs["event"] = event
    return out
