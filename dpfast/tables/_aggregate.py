"""Grouped DP aggregates over a pandas DataFrame: bounding, partition selection, noisy metrics.

Primary sources: Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo & Gipson 2020,
"Differentially private SQL with bounded user contribution" (PoPETs) -- contribution bounding
(L0 groups per unit, Linf rows per (unit, group)), the sensitivities of counts and sums and
Laplace thresholding for private partition selection; Desfontaines, Voss, Gipson & Mandayam
2022, "Differentially private partition selection" (PoPETs) -- the (epsilon, delta) analysis of
thresholding a noisy distinct-unit count.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from dpfast._validation import check_delta, check_epsilon, check_int
from dpfast.calibrate import gaussian_sigma, laplace_scale
from dpfast.mechanisms.continuous import gaussian, laplace
from dpfast.mechanisms.quantile import private_quantile
from dpfast.random import RandomLike, check_random_state

__all__ = ["aggregate"]

_KINDS = {"count": 0, "sum": 1, "mean": 1, "variance": 1, "quantile": 2}  # kind -> number of extra args
_NOISES = ("laplace", "gaussian")
# Noisy primitives each metric is built from (each gets an equal share of the metric's budget).
_PRIMITIVES = {"count": ("count",), "sum": ("sum",), "mean": ("count", "sum"),
               "variance": ("count", "sum", "sumsq"), "quantile": ()}


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


def _rank_in_runs(sorted_keys: np.ndarray) -> np.ndarray:
    """Position of each element inside its run of equal keys (``sorted_keys`` sorted)."""
    n = sorted_keys.size
    idx = np.arange(n)
    starts = np.ones(n, dtype=bool)
    starts[1:] = sorted_keys[1:] != sorted_keys[:-1]
    return idx - np.maximum.accumulate(np.where(starts, idx, 0))


def _bound_contributions(unit: np.ndarray, grp: np.ndarray, n_groups: int, l0: int, linf: int, gen):
    """Row mask after contribution bounding, and the kept (unit, group) pairs' groups.

    Per unit, ``l0`` of its groups uniformly at random (random keys, sort, rank < l0); per kept
    (unit, group), ``linf`` of its rows uniformly at random (same construction).  The keys are
    i.i.d. uniforms, so the kept subsets of the other units have the same law whether or not
    a given unit is present -- what the add/remove analysis needs.
    """
    pair = unit.astype(np.int64) * np.int64(n_groups) + grp.astype(np.int64)
    pairs, inv = np.unique(pair, return_inverse=True)
    inv = inv.reshape(-1)
    pair_unit = pairs // n_groups
    order = np.lexsort((gen.random(pairs.size), pair_unit))
    keep_pair = np.empty(pairs.size, dtype=bool)
    keep_pair[order] = _rank_in_runs(pair_unit[order]) < l0
    order = np.lexsort((gen.random(inv.size), inv))
    keep_row = np.empty(inv.size, dtype=bool)
    keep_row[order] = _rank_in_runs(inv[order]) < linf
    keep_row &= keep_pair[inv]
    return keep_row, (pairs[keep_pair] % n_groups)


def selection_threshold(l0: int, epsilon: float, delta: float) -> float:
    """Threshold of Laplace partition selection: release iff ``n_units + Lap(l0/eps) > tau`` with
    ``tau = 1 + (l0/eps) ln(l0 / (2 delta))``.

    Derivation (Wilson et al. 2020, Sec. 4; Desfontaines et al. 2022, Sec. 3): the vector of
    distinct-unit counts has l1 sensitivity ``l0`` (a unit is in <= l0 groups after bounding),
    so the noisy counts of groups present in both neighbours are eps-DP.  A group only in the
    larger neighbour has count 1 there and is released with probability
    ``P(1 + Lap(b) > tau) = exp(-(tau - 1)/b) / 2``; over the <= l0 such groups the union bound
    gives ``l0 exp(-(tau - 1)/b) / 2 = delta`` at the tau above (b = l0/eps).  (Google's
    implementation of the same mechanism uses the per-group delta ``1 - (1 - delta)^(1/l0)``
    instead of ``delta / l0``; the union bound here is slightly more conservative.)
    Desfontaines et al. 2022 show the truncated-geometric rule is optimal; Laplace
    thresholding is a valid (close) alternative.
    """
    b = l0 / epsilon
    return 1.0 + b * math.log(l0 / (2.0 * delta))


def aggregate(
    df: pd.DataFrame,
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
) -> pd.DataFrame:
    """Differentially private grouped statistics of ``df``; ``(epsilon, delta)``-DP in total.

    Neighbouring relation: add or remove one privacy unit (all rows whose ``privacy_unit``
    equals one value).  Guarantee (Wilson et al. 2020; Desfontaines et al. 2022):

    1. **Contribution bounding.**  Per unit, ``max_groups_per_unit`` (L0) of its groups are kept,
       chosen uniformly at random; per kept (unit, group), ``max_rows_per_group`` (Linf) of its
       rows, chosen uniformly at random (random keys drawn from ``rng``, not the first rows);
       values are clamped to ``bounds[column] = (lo, hi)``.  Bounding caps what one unit can
       change, whatever its raw data.
    2. **Sensitivities** (per group a unit changes a count by <= Linf, over <= L0 groups):
       count: l1 ``L0 Linf``, l2 ``sqrt(L0) Linf``.  ``sum`` of clamped values: per group
       <= ``Linf M`` with ``M = max(|lo|, |hi|)``, l1 ``L0 Linf M``, l2 ``sqrt(L0) Linf M``.
       Inside mean and variance the sum is of values centred at ``m = (lo + hi)/2`` (each
       term in ``[-r, r]``, ``r = (hi - lo)/2``): l1 ``L0 Linf r``, l2 ``sqrt(L0) Linf r``;
       the sum of squares of centred values (in ``[0, r^2]``, centred again at ``r^2/2``):
       l1 ``L0 Linf r^2/2``, l2 ``sqrt(L0) Linf r^2/2``.
    3. **Metrics.**  ``count``; ``sum``; ``mean = m + S/max(C, 1)`` from a noisy count C and a
       noisy centred sum S, each with half of the metric's budget, clamped to ``[lo, hi]``;
       ``variance = Q/C - (S/C)^2`` from noisy count, centred sum and centred sum of squares,
       a third of the budget each, clamped to ``[0, r^2]``; ``quantile`` by
       :func:`dpfast.mechanisms.private_quantile` (exponential mechanism, Smith 2011) on the
       group's clamped kept values with epsilon ``eps_q / (L0 Linf)``: that mechanism is
       eps'-DP for adding/removing one value; a unit adds <= Linf values to a group (group
       privacy: Linf eps') in <= L0 groups (basic composition: L0 Linf eps' = eps_q).
    4. **Partition selection** (``groups=None``): a group is released iff its number of
       distinct units after bounding plus ``Lap(L0/eps_sel)`` exceeds
       ``1 + (L0/eps_sel) ln(L0/(2 delta_sel))`` (see :func:`selection_threshold`);
       (eps_sel, delta_sel)-DP, needs ``delta > 0``; this uses Laplace noise whatever ``noise``
       says (``noise`` applies to the metrics).  Metrics are released for selected groups
       only.  With public ``groups`` every listed group is reported (empty ones too; rows of
       other groups are dropped before bounding) and selection costs nothing.
    5. **Budget** (basic composition): ``epsilon`` is split over the metrics and selection in
       proportion to ``weights`` (dict of metric name / ``"selection"`` -> positive weight;
       default 1 each); within a metric equally over its noisy primitives.  ``delta`` is
       split, in proportion to the same weights, over the parts that need it: selection and,
       with ``noise="gaussian"``, the Gaussian metrics (Gaussian mechanism with the analytic
       calibration of Balle & Wang 2018 on the l2 sensitivity, ``dpfast.gaussian``).  Laplace
       metrics and quantiles are pure.  The epsilon and delta spent (sums of the parts) are
       in ``out.attrs`` and are <= ``(epsilon, delta)``.

    Value columns with NaN raise ``ValueError`` naming the column (policy: error, never a
    silent drop, since which rows are dropped would be data-dependent and undocumented).  A
    NaN in a ``by`` column forms its own group; a NaN ``privacy_unit`` raises ``ValueError``.

    Parameters
    ----------
    df : pandas.DataFrame
    privacy_unit : str
        Column identifying the privacy unit.
    by : str or list of str
        Group key column(s).
    metrics : dict
        ``{name: "count" | ("sum"|"mean"|"variance", column) | ("quantile", column, q)}``.
    bounds : dict
        ``{column: (lo, hi)}`` for every value column, finite, lo <= hi (public).
    max_groups_per_unit, max_rows_per_group : int >= 1
    epsilon : float > 0
    delta : float in [0, 1); > 0 when ``groups is None`` or ``noise="gaussian"``.
    groups : None or sequence
        Public groups (tuples for several ``by`` columns).
    noise : {"laplace", "gaussian"}
    rng : None, int, numpy.random.Generator or dpfast.random.SecureRandom
    weights : dict, optional
    ci_level : float in (0, 1), optional
        Adds ``<name>_lo`` / ``<name>_hi`` columns for count, sum and mean metrics.  They cover
        the **noise only**, at the stated level, around the value of the bounded, clamped
        data -- not the bias from clamping or contribution bounding.  Count and sum: the exact
        central interval of the noise.  Mean: a Bonferroni box (count and centred sum each at
        level ``1 - (1 - ci_level)/2``), its ratio range, intersected with ``[lo, hi]``
        (conservative).

    Returns
    -------
    pandas.DataFrame indexed by the released groups (named after ``by``), one column per
    metric.  ``out.attrs``: ``noise_scale`` (per metric, per primitive: Laplace scale b or
    Gaussian sigma), ``budget`` (per part: (epsilon, delta)), ``epsilon_spent``,
    ``delta_spent``, ``selection_threshold`` (or None), ``neighbours``.

    Raises
    ------
    ValueError, TypeError
        Unknown columns, missing or bad bounds, NaN values, bad bounds on contributions,
        epsilon/delta out of range, bad weights or ci_level -- all before any noise is drawn.
    """
    # ---------------- validation (everything before any random draw) ----------------
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas.DataFrame, got {type(df).__name__}")
    if privacy_unit not in df.columns:
        raise ValueError(f"privacy_unit: unknown column {privacy_unit!r}")
    by_cols = [by] if isinstance(by, str) else list(by) if isinstance(by, (list, tuple)) else None
    if not by_cols:
        raise TypeError(f"by must be a column name or a non-empty list of column names, got {by!r}")
    for c in by_cols:
        if c not in df.columns:
            raise ValueError(f"by: unknown column {c!r}")
    parsed = _parse_metrics(metrics, df.columns)
    value_cols = sorted({col for _, _, col, _ in parsed if col is not None})
    bnds = _check_bounds(bounds, value_cols)
    l0 = check_int(max_groups_per_unit, "max_groups_per_unit")
    linf = check_int(max_rows_per_group, "max_rows_per_group")
    epsilon = check_epsilon(epsilon, allow_array=False)
    delta = check_delta(delta)
    if noise not in _NOISES:
        raise ValueError(f"noise must be one of {_NOISES}, got {noise!r}")
    if groups is None and delta == 0:
        raise ValueError("delta must be > 0 with groups=None (private partition selection is "
                         "(epsilon, delta)-DP); pass public groups for delta = 0")
    gaussian_metrics = noise == "gaussian" and any(k != "quantile" for _, k, _, _ in parsed)
    if gaussian_metrics and delta == 0:
        raise ValueError("delta must be in (0, 1) with noise='gaussian'")
    if ci_level is not None:
        if isinstance(ci_level, (bool, np.bool_)) or not isinstance(ci_level, numbers.Real) \
                or not 0.0 < float(ci_level) < 1.0:
            raise ValueError(f"ci_level must be in (0, 1), got {ci_level!r}")
        ci_level = float(ci_level)
    parts = [name for name, _, _, _ in parsed] + (["selection"] if groups is None else [])
    if "selection" in [name for name, _, _, _ in parsed]:
        raise ValueError("metric name 'selection' is reserved (budget weight of partition selection)")
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
    if df[privacy_unit].isna().any():
        raise ValueError(f"privacy_unit column {privacy_unit!r} contains NaN/None")
    values = {}
    for col in value_cols:
        try:
            x = df[col].to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"value column {col!r} must be numeric") from None
        if np.isnan(x).any():
            raise ValueError(f"value column {col!r} contains NaN (policy: error, drop such rows first)")
        values[col] = x

    # ---------------- budget split ----------------
    wsum = sum(w.values())
    needs_delta = [p for p in parts if p == "selection" or
                   (noise == "gaussian" and dict((n, k) for n, k, _, _ in parsed)[p] != "quantile")]
    dsum = sum(w[p] for p in needs_delta)
    budget = {p: (epsilon * w[p] / wsum, (delta * w[p] / dsum) if p in needs_delta else 0.0) for p in parts}
    # Rounding in the shares must not push the totals over the caller's (epsilon, delta).
    for j, total in ((0, epsilon), (1, delta)):
        while sum(b[j] for b in budget.values()) > total:
            budget = {p: tuple(v * (1 - 2.0 ** -50) if i == j else v for i, v in enumerate(b))
                      for p, b in budget.items()}

    gen = check_random_state(rng)

    # ---------------- group codes ----------------
    if len(by_cols) == 1:
        keys = pd.Index(df[by_cols[0]])
    else:
        keys = pd.MultiIndex.from_frame(df[by_cols])
    if groups is None:
        codes, uniques = pd.factorize(keys, use_na_sentinel=False)
        group_index = uniques if isinstance(uniques, pd.Index) else pd.Index(uniques)
    else:
        glist = list(groups)
        group_index = (pd.MultiIndex.from_tuples(glist, names=by_cols) if len(by_cols) > 1
                       else pd.Index(glist))
        if group_index.has_duplicates:
            raise ValueError("groups must not contain duplicates")
        codes = group_index.get_indexer(keys)
    codes = np.asarray(codes, dtype=np.int64)
    in_scope = codes >= 0
    ucodes, _ = pd.factorize(df[privacy_unit])
    ucodes = np.asarray(ucodes, dtype=np.int64)[in_scope]
    codes = codes[in_scope]
    values = {c: x[in_scope] for c, x in values.items()}
    n_groups = len(group_index)

    # ---------------- contribution bounding ----------------
    keep, pair_groups = _bound_contributions(ucodes, codes, max(n_groups, 1), l0, linf, gen)
    g = codes[keep]
    values = {c: np.clip(x[keep], *bnds[c]) for c, x in values.items()}

    # ---------------- partition selection ----------------
    tau = None
    if groups is None:
        eps_sel, delta_sel = budget["selection"]
        n_units = np.bincount(pair_groups, minlength=n_groups).astype(np.float64)
        tau = selection_threshold(l0, eps_sel, delta_sel)
        released = np.flatnonzero(np.asarray(laplace(n_units, float(l0), eps_sel, rng=gen)) > tau) \
            if n_groups else np.zeros(0, dtype=np.int64)
    else:
        released = np.arange(n_groups)
    k = released.size

    # ---------------- metrics ----------------
    def noisy(true_vals: np.ndarray, l1: float, l2: float, eps: float, dlt: float):
        """(noisy values, noise scale) for a vector of per-group statistics."""
        if noise == "laplace":
            scale = float(laplace_scale(eps, l1)) if l1 > 0 else 0.0
            if k == 0 or l1 == 0:  # l1 == 0: lo == hi, the statistic is constant
                return true_vals.astype(np.float64), scale
            return np.asarray(laplace(true_vals, l1, eps, rng=gen), dtype=np.float64), scale
        scale = float(gaussian_sigma(eps, dlt, l2)) if l2 > 0 else 0.0
        if k == 0 or l2 == 0:
            return true_vals.astype(np.float64), scale
        return np.asarray(gaussian(true_vals, l2, eps, dlt, rng=gen), dtype=np.float64), scale

    def half_width(scale: float, level: float) -> float:
        if noise == "laplace":  # P(|Lap(b)| > t) = exp(-t/b)
            return -scale * math.log(1.0 - level)
        return scale * float(stats.norm.isf((1.0 - level) / 2.0))

    counts_all = np.bincount(g, minlength=n_groups).astype(np.float64)
    count_true = counts_all[released]
    out_cols: dict = {}
    scales: dict = {}
    cnt_l1, cnt_l2 = float(l0 * linf), math.sqrt(l0) * linf
    for name, kind, col, q in parsed:
        eps_m, dlt_m = budget[name]
        nprim = len(_PRIMITIVES[kind])
        eps_p, dlt_p = (eps_m / nprim, dlt_m / nprim) if nprim else (eps_m, dlt_m)
        if kind == "count":
            v, s = noisy(count_true, cnt_l1, cnt_l2, eps_p, dlt_p)
            out_cols[name], scales[name] = v, {"count": s}
            if ci_level is not None:
                h = half_width(s, ci_level)
                out_cols[name + "_lo"], out_cols[name + "_hi"] = v - h, v + h
            continue
        lo, hi = bnds[col]
        x = values[col]
        if kind == "sum":
            mx = max(abs(lo), abs(hi))
            t = np.bincount(g, weights=x, minlength=n_groups)[released]
            v, s = noisy(t, cnt_l1 * mx, cnt_l2 * mx, eps_p, dlt_p)
            out_cols[name], scales[name] = v, {"sum": s}
            if ci_level is not None:
                h = half_width(s, ci_level)
                out_cols[name + "_lo"], out_cols[name + "_hi"] = v - h, v + h
            continue
        if kind == "quantile":
            eps_g = eps_m / (l0 * linf)
            res = np.full(k, np.nan)
            if k:
                order = np.argsort(g, kind="stable")
                gs, xs = g[order], x[order]
                starts = np.searchsorted(gs, released, side="left")
                ends = np.searchsorted(gs, released, side="right")
                for i in range(k):
                    if lo == hi:
                        res[i] = lo
                    else:
                        res[i] = float(private_quantile(xs[starts[i]:ends[i]], q, eps_g, (lo, hi), rng=gen))
            out_cols[name], scales[name] = res, {"exponential_epsilon_per_group": eps_g}
            continue
        m, r = (lo + hi) / 2.0, (hi - lo) / 2.0
        y = x - m
        c, sc = noisy(count_true, cnt_l1, cnt_l2, eps_p, dlt_p)
        st = np.bincount(g, weights=y, minlength=n_groups)[released]
        S, ss = noisy(st, cnt_l1 * r, cnt_l2 * r, eps_p, dlt_p)
        cpos = np.maximum(c, 1.0)
        if kind == "mean":
            out_cols[name] = np.clip(m + S / cpos, lo, hi)
            scales[name] = {"count": sc, "sum": ss}
            if ci_level is not None:
                lvl = 1.0 - (1.0 - ci_level) / 2.0
                hc, hs = half_width(sc, lvl), half_width(ss, lvl)
                clo, chi = c - hc, c + hc
                corners = np.stack([(S - hs) / clo, (S - hs) / chi, (S + hs) / clo, (S + hs) / chi])
                ok = clo > 0
                with np.errstate(divide="ignore", invalid="ignore"):
                    mlo = np.where(ok, m + corners.min(axis=0), lo)
                    mhi = np.where(ok, m + corners.max(axis=0), hi)
                out_cols[name + "_lo"] = np.clip(mlo, lo, hi)
                out_cols[name + "_hi"] = np.clip(mhi, lo, hi)
            continue
        # variance: centred squares y^2 in [0, r^2], summed after centring at r^2/2.
        h2 = r * r / 2.0
        qt = np.bincount(g, weights=y * y - h2, minlength=n_groups)[released]
        Q, sq = noisy(qt, cnt_l1 * h2, cnt_l2 * h2, eps_p, dlt_p)
        mean_y = S / cpos
        out_cols[name] = np.clip((Q + h2 * c) / cpos - mean_y ** 2, 0.0, r * r)
        scales[name] = {"count": sc, "sum": ss, "sumsq": sq}

    index = group_index[released]
    if isinstance(index, pd.MultiIndex):
        index = index.set_names(by_cols)
    else:
        index = pd.Index(index, name=by_cols[0])
    out = pd.DataFrame(out_cols, index=index)
    try:  # released groups in key order (the order of selection carries no information anyway)
        out = out.sort_index()
    except TypeError:  # keys of mixed, unorderable types: keep first-appearance order
        pass
    out.attrs["noise_scale"] = scales
    out.attrs["budget"] = budget
    out.attrs["epsilon_spent"] = float(sum(e for e, _ in budget.values()))
    out.attrs["delta_spent"] = float(sum(d for _, d in budget.values()))
    out.attrs["selection_threshold"] = tau
    out.attrs["noise"] = noise
    out.attrs["neighbours"] = "add/remove one privacy unit"
    return out
