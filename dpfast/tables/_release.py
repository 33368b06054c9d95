"""The draws of :func:`dpfast.tables.aggregate`: partition selection, then one release function
per metric kind (:data:`RELEASES`), each adding the noise of :class:`_Noise` to the bounded
per-group statistics of :class:`~dpfast.tables._stats.GroupStats`.

Called after the budget has been charged (and, on zero groups, by the dry run before it, so
that every calibration and sampler validates the exact arguments first).  The sensitivities
are those of :func:`dpfast.tables.aggregate`'s docstring (Wilson et al. 2020); every noise
scale comes from :mod:`dpfast.calibrate` or the mechanism that draws it.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd
from scipy import stats

from dpfast import _selection
from dpfast._validation import check_bounds, check_positive
from dpfast.calibrate import gaussian_sigma, laplace_scale
from dpfast.mechanisms.continuous import gaussian, laplace
from dpfast.mechanisms.discrete import (
    discrete_gaussian_mechanism,
    discrete_gaussian_sigma2,
    discrete_laplace_mechanism,
)
from dpfast.tables._labels import released_index
from dpfast.tables._plan import PRIMITIVES, AggregatePlan, MetricSpec
from dpfast.tables._selection import _selection_pi, selection_threshold
from dpfast.tables._stats import GroupStats

__all__ = ["RELEASES", "release"]

_SQUARE_BITS = 12        # lattice squares are summed exactly, then divided by c with (d^2 / c) ~ 2^12
_LATTICE_MAX = 2 ** 53 - 1  # the discrete mechanisms need |value| < 2^53 lattice units


def _exact_ints(t, j: int, released: np.ndarray) -> np.ndarray:
    """Column ``j`` of 128-bit sums (hi, lo words) at ``released``, as exact Python ints."""
    hi, lo = t[0][j][released], t[1][j][released]
    return np.array([(int(h) << 64) + int(l) for h, l in zip(hi, lo)], dtype=object)


def _clamp53(v: np.ndarray) -> np.ndarray:
    """Exact integers clamped to [-(2^53 - 1), 2^53 - 1] (the discrete mechanisms' lattice range),
    as float64 (exact there).  Clamping a statistic is 1-Lipschitz, so its sensitivity does not
    grow; with the default lattices it is never reached below 2^33 rows per group."""
    return np.array([float(max(-_LATTICE_MAX, min(_LATTICE_MAX, int(x)))) for x in v], dtype=np.float64)


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


class _Noise:
    """The noise of one call (``plan.noise``) drawn from ``gen``: :meth:`add` to per-group
    statistics, :meth:`half_width` of its central intervals."""

    def __init__(self, kind: str, gen: np.random.Generator):
        self.kind = kind
        self.gen = gen

    def add(self, true_vals: np.ndarray, l1: float, l2: float, eps: float, dlt: float):
        """(noisy values, noise scale) of per-group statistics; for the discrete noises the
        values and sensitivities are integers (lattice units).  The mechanism runs even on
        zero groups: it validates its arguments (the dry run relies on it)."""
        noise, gen = self.kind, self.gen
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
            out = discrete_laplace_mechanism(tv, int(l1), Fraction(eps), rng=gen).astype(np.float64)
            return out, float(laplace_scale(eps, l1))
        if l2 == 0:
            return tv.astype(np.float64), 0.0
        s2 = float(discrete_gaussian_sigma2(l2, eps, dlt, method="zcdp"))
        out = discrete_gaussian_mechanism(tv, l2, eps, dlt, rng=gen, method="zcdp")
        return np.asarray(out, dtype=np.float64), math.sqrt(s2)

    def half_width(self, scale: float, alpha: float) -> float:
        """Half-width of the central interval missing the noise with probability <= alpha."""
        if self.kind == "laplace":  # P(|Lap(b)| > t) = exp(-t/b)
            return -scale * math.log(alpha)
        if self.kind == "gaussian":
            return scale * float(stats.norm.isf(alpha / 2.0))
        if scale == 0:
            return 0.0
        if self.kind == "discrete":
            return _dlap_half_width(scale, alpha)
        return _dgauss_half_width(scale * scale, alpha)


@dataclass
class _Context:
    """What every metric's release reads: the plan, the statistics, the released group codes
    (in output order), their kept-row counts, the count sensitivities, the noise and the CI's
    miss probability ``alpha`` (None: no CI)."""
    plan: AggregatePlan
    stats: GroupStats
    released: np.ndarray
    count_true: np.ndarray
    cnt_l1: float
    cnt_l2: float
    noise: _Noise
    alpha: float | None


Columns = dict[str, np.ndarray]
Scales = dict[str, float]


def _release_count(ctx: _Context, m: MetricSpec, eps: float, dlt: float) -> tuple[Columns, Scales]:
    """Count of kept rows: l1 ``L0 Linf``, l2 ``sqrt(L0) Linf``."""
    v, s = ctx.noise.add(ctx.count_true, ctx.cnt_l1, ctx.cnt_l2, eps, dlt)
    cols = {m.name: v}
    if ctx.alpha is not None:
        h = ctx.noise.half_width(s, ctx.alpha)
        cols[m.name + "_lo"], cols[m.name + "_hi"] = v - h, v + h
    return cols, {"count": s}


def _continuous_sum(ctx: _Context, j: int) -> np.ndarray:
    """Sum of ``y = clamp(x) - m`` of value column ``j`` per released group (double-double)."""
    s1 = ctx.stats.s1
    return (s1[0][j] + s1[1][j])[ctx.released]


def _release_sum(ctx: _Context, m: MetricSpec, eps: float, dlt: float) -> tuple[Columns, Scales]:
    """Sum of clamped values: l1 ``L0 Linf M``, ``M = max(|lo|, |hi|)`` (lattice: ``max(|klo|, |khi|)``)."""
    plan = ctx.plan
    lo, hi = plan.bounds[m.column]
    j = plan.value_cols.index(m.column)
    if plan.discrete:  # lattice sum of k = round(clamp(x)/gamma) in [klo, khi]
        gam = plan.granularity[m.column]
        klo, khi = round(lo / gam), round(hi / gam)
        t1 = _clamp53(_exact_ints(ctx.stats.t1, j, ctx.released))
        mk = max(abs(klo), abs(khi))
        v, s = ctx.noise.add(t1, ctx.cnt_l1 * mk, ctx.cnt_l2 * mk, eps, dlt)
        v, s = v * gam, s * gam
    else:
        centre = (lo + hi) / 2.0  # the kernel sums x - centre
        mx = max(abs(lo), abs(hi))
        v, s = ctx.noise.add(_continuous_sum(ctx, j) + centre * ctx.count_true, ctx.cnt_l1 * mx, ctx.cnt_l2 * mx,
                             eps, dlt)
    cols = {m.name: v}
    if ctx.alpha is not None:
        h = ctx.noise.half_width(s / gam, ctx.alpha) * gam if plan.discrete else ctx.noise.half_width(s, ctx.alpha)
        cols[m.name + "_lo"], cols[m.name + "_hi"] = v - h, v + h
    return cols, {"sum": s}


@dataclass
class _CountAndSum:
    """Noisy count ``c`` and noisy centred sum ``S`` (in output units) of one value column,
    with their scales; ``ss_lattice``: the sum's scale in lattice half-units (discrete
    noises); ``m_eff``: the centre the sum is taken around; ``d``: ``khi - klo`` (lattice)."""
    c: np.ndarray
    sc: float
    S: np.ndarray
    ss: float
    ss_lattice: float | None
    m_eff: float
    d: int | None


def _count_and_centred_sum(ctx: _Context, m: MetricSpec, eps: float, dlt: float) -> _CountAndSum:
    """The first two primitives of mean and variance, drawn in this order: the count, then the
    sum of centred values (each in ``[-r, r]``: l1 ``L0 Linf r``; lattice ``2k - klo - khi`` in
    ``[-d, d]``: l1 ``L0 Linf d``)."""
    plan = ctx.plan
    lo, hi = plan.bounds[m.column]
    j = plan.value_cols.index(m.column)
    c, sc = ctx.noise.add(ctx.count_true, ctx.cnt_l1, ctx.cnt_l2, eps, dlt)
    if plan.discrete:
        gam = plan.granularity[m.column]
        klo, khi = round(lo / gam), round(hi / gam)
        # centred lattice values y2 = 2k - klo - khi in [-d, d]; y = clamp(x) - m ~ gamma y2 / 2
        d = khi - klo
        T1 = _exact_ints(ctx.stats.t1, j, ctx.released)
        cnt_int = ctx.stats.count[ctx.released].astype(object)
        t2 = _clamp53(2 * T1 - (klo + khi) * cnt_int)  # exact sum of y2, then clamped
        S2, ss2 = ctx.noise.add(t2, ctx.cnt_l1 * d, ctx.cnt_l2 * d, eps, dlt)
        return _CountAndSum(c, sc, S2 * gam / 2.0, ss2 * gam / 2.0, ss2, (klo + khi) * gam / 2.0, d)
    r = (hi - lo) / 2.0
    S, ss = ctx.noise.add(_continuous_sum(ctx, j), ctx.cnt_l1 * r, ctx.cnt_l2 * r, eps, dlt)
    return _CountAndSum(c, sc, S, ss, None, (lo + hi) / 2.0, None)


def _release_mean(ctx: _Context, m: MetricSpec, eps: float, dlt: float) -> tuple[Columns, Scales]:
    """``m + S / max(C, 1)`` clamped to ``[lo, hi]``; the CI is a Bonferroni box of C and S."""
    plan = ctx.plan
    lo, hi = plan.bounds[m.column]
    cs = _count_and_centred_sum(ctx, m, eps, dlt)
    c, S, m_eff = cs.c, cs.S, cs.m_eff
    cols = {m.name: np.clip(m_eff + S / np.maximum(c, 1.0), lo, hi)}
    if ctx.alpha is not None:
        a2 = ctx.alpha / 2.0  # Bonferroni: each part misses with <= alpha / 2
        hc = ctx.noise.half_width(cs.sc, a2)
        if plan.discrete:
            hs = ctx.noise.half_width(cs.ss_lattice, a2) * plan.granularity[m.column] / 2.0
        else:
            hs = ctx.noise.half_width(cs.ss, a2)
        clo, chi = c - hc, c + hc
        ok = clo > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            corners = np.stack([(S - hs) / clo, (S - hs) / chi, (S + hs) / clo, (S + hs) / chi])
            mlo = np.where(ok, m_eff + corners.min(axis=0), lo)
            mhi = np.where(ok, m_eff + corners.max(axis=0), hi)
        cols[m.name + "_lo"] = np.clip(mlo, lo, hi)
        cols[m.name + "_hi"] = np.clip(mhi, lo, hi)
    return cols, {"count": cs.sc, "sum": cs.ss}


def _release_variance(ctx: _Context, m: MetricSpec, eps: float, dlt: float) -> tuple[Columns, Scales]:
    """``Q/C - (S/C)^2`` clamped to ``[0, r^2]`` from noisy count, centred sum and centred sum
    of squares (``y^2 - r^2/2`` in ``[-r^2/2, r^2/2]``: l1 ``L0 Linf r^2/2``)."""
    plan = ctx.plan
    lo, hi = plan.bounds[m.column]
    j = plan.value_cols.index(m.column)
    r = (hi - lo) / 2.0
    cs = _count_and_centred_sum(ctx, m, eps, dlt)
    c = cs.c
    if plan.discrete:
        # exact T3 = sum y2^2 (each in [0, d^2]) divided by c = 2^s with floor: per row
        # y2^2/c - h in [-h, d^2/c - h] (h = round(d^2 / 2c)), so a unit moves the centred
        # floor(T3/c) - h C by at most floor(Linf max(h, d^2/c - h)) + 1 per group.
        d, gam, l0, linf = cs.d, plan.granularity[m.column], plan.l0, plan.linf
        cdiv = 1 << max(0, (d * d).bit_length() - _SQUARE_BITS)
        hq = round(d * d / (2 * cdiv))
        a = Fraction(linf) * max(Fraction(hq), Fraction(d * d, cdiv) - hq)
        sens = math.floor(a) + 1
        T3 = _exact_ints(ctx.stats.t3, j, ctx.released)
        qt = _clamp53(T3 // cdiv - hq * ctx.stats.count[ctx.released].astype(object))
        Qc, sq = ctx.noise.add(qt, l0 * sens, math.sqrt(l0) * sens, eps, dlt)
        unit2 = gam * gam / 4.0 * cdiv  # y^2 per unit of floor(T3/c)
        sumsq = (Qc + hq * c) * unit2
        sq = sq * unit2
    else:
        h2 = r * r / 2.0
        s2 = (ctx.stats.s2[0][j] + ctx.stats.s2[1][j])[ctx.released]
        Q, sq = ctx.noise.add(s2 - h2 * ctx.count_true, ctx.cnt_l1 * h2, ctx.cnt_l2 * h2, eps, dlt)
        sumsq = Q + h2 * c
    cpos = np.maximum(c, 1.0)
    mean_y = cs.S / cpos
    return {m.name: np.clip(sumsq / cpos - mean_y ** 2, 0.0, r * r)}, {"count": cs.sc, "sum": cs.ss, "sumsq": sq}


def _quantile_draws(gs: np.ndarray, xs: np.ndarray, released: np.ndarray, q: float, eps_g: float,
                    lo: float, hi: float, gen: np.random.Generator) -> np.ndarray:
    """:func:`dpfast.mechanisms.private_quantile` of each released group's kept values at
    ``eps_g``, batched: the same validation, edges ``[lo, sorted values, hi]``, targets ``q n``
    and native draw (``sel::quantile_draw``, weight ``exp(-(eps_g / 2) |i - q n|)``) for every
    group in one call (``_selection.quantile_draws_grouped``) instead of one Python call per
    group.  ``gs``/``xs``: group codes and clamped values, sorted by (group, value)."""
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


def _release_quantile(ctx: _Context, m: MetricSpec, eps: float, dlt: float) -> tuple[Columns, Scales]:
    """The exponential mechanism per group at ``eps`` (already ``eps_q / (L0 Linf)``: group
    privacy over Linf rows, basic composition over L0 groups)."""
    lo, hi = ctx.plan.bounds[m.column]
    g, x = ctx.stats.quantile_values[m.column]
    order = np.lexsort((x, g))  # by group, then value (the edges private_quantile sorts)
    res = _quantile_draws(g[order], x[order], ctx.released, m.q, eps, lo, hi, ctx.noise.gen)
    return {m.name: res}, {"exponential_epsilon_per_group": eps}


#: One release function per metric kind: (context, metric, epsilon, delta of each primitive)
#: -> (output columns, noise scales per primitive).
RELEASES: dict[str, Callable[[_Context, MetricSpec, float, float], tuple[Columns, Scales]]] = {
    "count": _release_count, "sum": _release_sum, "mean": _release_mean, "variance": _release_variance,
    "quantile": _release_quantile,
}


def _primitive_budget(plan: AggregatePlan, m: MetricSpec) -> tuple[float, float]:
    """(epsilon, delta) of each noisy primitive of metric ``m``: its share split equally over
    its primitives; a quantile's epsilon divided by ``L0 Linf`` (group privacy, composition)."""
    eps_m, dlt_m = plan.budget[m.name]
    nprim = len(PRIMITIVES[m.kind])
    eps_p, dlt_p = (eps_m / nprim, dlt_m / nprim) if nprim else (eps_m / (plan.l0 * plan.linf), dlt_m)
    if eps_p == 0.0 or (dlt_m > 0 and dlt_p == 0.0):
        raise ValueError(f"metric {m.name!r}: its budget share {(eps_m, dlt_m)!r} is too small to split "
                         f"over its {max(nprim, 1)} noisy parts (each rounds to 0.0); raise epsilon/delta "
                         f"or the metric's weight")
    return eps_p, dlt_p


def _select(plan: AggregatePlan, index: pd.Index, st: GroupStats, gen: np.random.Generator):
    """(released group codes in output order, output index, Laplace threshold or None).

    Public groups: all, in their order.  Otherwise partition selection on the distinct units
    per group after bounding (the candidates: groups with >= 1 unit)."""
    if plan.public:
        return np.arange(len(index)), index, None
    l0 = plan.l0
    units = st.units
    eps_sel, delta_sel = plan.budget["selection"]
    tau = None
    if plan.selection == "laplace":
        tau = selection_threshold(l0, eps_sel, delta_sel)
        # candidates: the groups with >= 1 unit after bounding (a unit is in <= L0 of them);
        # a group that bounding emptied is no candidate, whatever the raw rows held
        cand = np.flatnonzero(units > 0)
        noisy_units = np.asarray(laplace(units[cand].astype(np.float64), float(l0), eps_sel, rng=gen))
        released = cand[noisy_units > tau]
    else:
        # pi: multiples of 2^-53 and U on that grid, so P(release) = pi(n) exactly (pi(0) = 0)
        G = len(index)
        pi = _selection_pi(int(units.max()) if G else 0, l0, eps_sel, delta_sel)
        u = gen.random(G)
        released = np.flatnonzero(u < pi[np.minimum(units, pi.size - 1)])
    # the output lists the released groups by a rule on their values alone (not the index
    # of every group in the data, whose dtype, categories and order depend on the others)
    out_index, order = released_index(index[released], list(plan.by_cols))
    return released[order], out_index, tau


def release(plan: AggregatePlan, index: pd.Index, st: GroupStats, gen: np.random.Generator) -> pd.DataFrame:
    """Select groups, then release each metric through :data:`RELEASES` in the order given."""
    released, out_index, tau = _select(plan, index, st, gen)
    ctx = _Context(plan=plan, stats=st, released=released, count_true=st.count.astype(np.float64)[released],
                   cnt_l1=float(plan.l0 * plan.linf), cnt_l2=math.sqrt(plan.l0) * plan.linf,
                   noise=_Noise(plan.noise, gen),
                   alpha=None if plan.ci_level is None else 1.0 - plan.ci_level)  # exact (Sterbenz) for >= 1/2
    out_cols: dict = {}
    scales: dict = {}
    for m in plan.metrics:
        eps_p, dlt_p = _primitive_budget(plan, m)
        cols, scales[m.name] = RELEASES[m.kind](ctx, m, eps_p, dlt_p)
        out_cols.update(cols)
    budget = dict(plan.budget)
    out = pd.DataFrame({c: out_cols[c] for c in plan.columns}, index=out_index)
    out.attrs["noise_scale"] = scales
    out.attrs["budget"] = budget
    out.attrs["epsilon_spent"] = float(sum(e for e, _ in budget.values()))
    out.attrs["delta_spent"] = float(sum(d for _, d in budget.values()))
    out.attrs["selection"] = None if plan.public else plan.selection
    out.attrs["selection_threshold"] = tau
    out.attrs["noise"] = plan.noise
    out.attrs["granularity"] = None if plan.granularity is None else dict(plan.granularity)
    out.attrs["neighbours"] = "add/remove one privacy unit"
    return out
