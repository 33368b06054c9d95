"""Privacy-loss-distribution accountant: connect-the-dots discretization, FFT composition.

See: :doc:`/theory/accounting` ("Privacy-loss distributions (PLD) and FFT composition"), lectures
D17-D20.

How a query is answered (both "lanes", the remove and the add pair of the add/remove relation,
are composed separately and the worse is reported):

1. Each distinct leaf event is discretized once on the grid h*Z (cached): a pessimistic
   connect-the-dots PMF and an optimistic companion (:mod:`dpfast.accounting._discretize`).
2. The support of the composed loss is bounded by Chernoff bounds computed from the discrete
   PMFs' moment generating functions, P(S >= b) <= exp(sum_j c_j K_j(t) - t b), t > 0 (and the
   mirror for the lower end).  The FFT length N covers [a, b]; the mass outside it (<= the
   Chernoff bound, ``window_mass`` = 1e-22 per side) would wrap around: above b it is added to the +inf atom of the
   pessimistic PLD, below a it is subtracted from the optimistic delta.
3. One FFT pair for everything: the composed PMF is irfft( prod_j rfft(p_j)^{c_j} ) with
   ``scipy.fft`` (k copies: one power of the transform; heterogeneous: products).
4. +inf atoms compose exactly: P(sum = inf) = 1 - prod_j (1 - p_inf_j)^{c_j}.
5. Queries use the native scans (``dpfast._pld``): delta(eps) in O(log N) after one O(N) pass,
   eps(delta) in closed form within the bracketing grid cell, so the two are exact inverses.
6. Small deltas (< 1e-6): the FFT's round-off is absolute (~1e-13 of the total mass spread over
   the window), so the right tail is recomputed from an exponentially tilted composition
   (each PMF times e^{lambda l - K(lambda)}, lambda on a grid up to 2^30 minimising the
   Chernoff bound at the queried eps, iterated with the eps it gives), untilted afterwards:
   relative accuracy there.  Its window is cut below where the tilted law has < 1e-22 of its
   mass (delta(eps) needs only the masses above eps); one tilt cached per lane.
7. Deltas near 1 (1 - delta < 1e-3, pessimistic): the complement 1 - delta(eps) =
   P(L <= eps) + e^eps Q(L > eps) is summed directly (non-negative terms: relative round-off)
   minus an allowance for the FFT's absolute noise; the FFT's total mass (off by ~count * u:
   1.1e-13 for 1000 Gaussians) is restored to 1 - p_inf first.
8. The grid is refined automatically when connect-the-dots' extra variance would be more than
   1e-3 of the composed variance (``refine=True``).  A composed window whose estimated memory
   (:func:`estimated_bytes`) exceeds :data:`MAX_COMPOSED_BYTES` (1 GiB) is refused before
   anything is allocated; the accountant then backs off the refinement and, if needed (and
   ``refine=True``), composes on a grid coarser than ``value_discretization``
   (:class:`GridCoarsenedWarning`); with ``refine=False`` it raises :class:`GridTooLargeError`.

Ledgers of Gaussians alone (``Gaussian`` leaves, any counts: every leaf ``Gaussian``, composed or
self-composed) are not discretized for ``get_epsilon`` / ``get_delta``: their composition is exactly
one Gaussian mechanism with mu = sqrt(sum_j c_j / z_j^2) (Dong, Roth & Su 2022, Corollary 3.3),
whose privacy loss distribution is N(mu^2/2, mu^2), so its privacy profile is the analytic
Gaussian's (Balle & Wang 2018, Theorem 8).  Those two queries evaluate it in closed form on the
safe side (:func:`gaussian_ledger_mu`: mu rounded up from the rational sum;
:func:`dpfast.calibrate.gaussian_log_delta`: delta rounded up), which is both an upper bound and
tighter than the discretization (whose connect-the-dots and window truncation only add to it),
and costs microseconds instead of an FFT (1 s for one Gaussian at epsilon 64).  The optimistic
sides of ``get_*_bounds`` and :meth:`PLDAccountant.composed` still discretize.

Certification: ``get_epsilon`` / ``get_delta`` return the pessimistic values, upper bounds on the
true ones up to floating-point round-off: every reported delta carries a relative margin
(:func:`rounding_margin`, 1.8e-11 at h = 1e-4) that covers the discretization's cancellation
and the composition's relative round-off; the FFT's absolute noise is handled by the tilted
tails and the near-1 complement (an allowance estimated from the transform, not a proof).
Checked against the closed form of composed Gaussians at every delta from 1e-300 to
1 - 1e-12 (tests/accounting/test_accounting_extremes.py).  Below the +inf atom (truncation masses,
~count * ``tail_mass`` + ``window_mass``) the pessimistic epsilon is ``inf``.
``get_epsilon_bounds`` / ``get_delta_bounds`` give (optimistic, pessimistic).  The optimistic
bound rounds every loss *down* to the grid and adds back the mean rounding deficit minus a
Hoeffding margin h sqrt(K log(1/p) / 2) (failure probability p = 1e-3 of the queried delta,
charged to delta), so its gap to the pessimistic value is about that margin; the pessimistic
connect-the-dots error is second order in h.
"""
from __future__ import annotations

import functools
import math
import warnings
from fractions import Fraction
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar, cast

import numpy as np
from scipy import fft as sfft, special

from dpfast import _pld
from dpfast._validation import check_delta, check_real
from dpfast.accounting import _discretize as _disc, basic, events as ev
from dpfast.accounting._cache import ByteBoundedCache
from dpfast.accounting._closed_forms import gaussian_delta, gaussian_epsilon
from dpfast.accounting._discretize import StepPMF
from dpfast.accounting.base import PrivacyAccountant
from dpfast.accounting.events import UnsupportedEventError
from dpfast.accounting.pairs import approx_dp_pair, rr_pair

__all__ = ["PLDAccountant", "ComposedPLD", "GridCoarsenedWarning", "dominating_pairs", "symmetric"]


# ----------------------------------------------------------------------------------------------
# Per-event discretized dominating pairs (one registration per event class)
# ----------------------------------------------------------------------------------------------
@functools.singledispatch
def dominating_pairs(event, h: float, tail: float, direction: str) -> StepPMF:
    """The discretized privacy-loss distribution of ``event``'s dominating pair for
    ``direction`` (``"remove"`` or ``"add"``) on the grid h*Z, truncation mass ``tail``: a
    pessimistic connect-the-dots PMF and its optimistic companion (:mod:`._discretize`).

    Register a new (leaf) event class with ``@dominating_pairs.register`` (and
    :func:`symmetric` when its two directions differ); an unregistered one raises
    :class:`UnsupportedEventError`.  Composition nodes (:class:`SelfComposed`,
    :class:`Composed`) are flattened by the accountant, never discretized."""
    raise UnsupportedEventError(f"the PLD accountant cannot account {type(event).__name__} events "
                                f"({event!r}): no dominating pair is registered for them")


@functools.singledispatch
def symmetric(event) -> bool:
    """Whether ``event``'s add and remove pairs coincide (then one lane is composed)."""
    return True


@dominating_pairs.register
def _(event: ev.Gaussian, h, tail, direction):
    # L ~ N(mu^2/2, mu^2) in both directions (Dong, Roth & Su 2022)
    return _disc.subsampled_gaussian_pmf(event.noise_multiplier, 1.0, "remove", h, tail)


@dominating_pairs.register
def _(event: ev.Laplace, h, tail, direction):
    # exact law of (|x - D| - |x|)/b under Lap(0, b): atoms at +-D/b, density between
    return _disc.laplace_pmf(event.sensitivity / event.scale, h)


@dominating_pairs.register
def _(event: ev.RandomizedResponse, h, tail, direction):
    return _disc.discrete_pair_pmf(*rr_pair(event.epsilon, event.num_categories), h)


@dominating_pairs.register
def _(event: ev.PureDP, h, tail, direction):
    return _disc.discrete_pair_pmf(*rr_pair(event.epsilon, 2), h)


@dominating_pairs.register
def _(event: ev.ApproxDP, h, tail, direction):
    return _disc.discrete_pair_pmf(*approx_dp_pair(event.epsilon, event.delta), h)


def _profile_delta(event: ev.FromPrivacyProfile):
    def delta(eps: np.ndarray) -> np.ndarray:
        try:
            out = np.asarray(event.delta_of_epsilon(eps), dtype=np.float64)
            if out.shape != eps.shape:
                raise ValueError
        except Exception:
            out = np.array([float(event.delta_of_epsilon(float(e))) for e in eps])
        if np.isnan(out).any():
            raise ValueError(f"{event.name}: delta_of_epsilon returned NaN")
        return np.clip(out, 0.0, 1.0)
    return delta


@dominating_pairs.register
def _(event: ev.FromPrivacyProfile, h, tail, direction):
    return _disc.profile_pmf(_profile_delta(event), h, tail, event.profile_step, event.epsilon_min,
                             event.symmetric_profile)


@dominating_pairs.register
def _(event: ev.FromDominatingPair, h, tail, direction):
    if direction == "add" and event.p_add is not None:
        return _disc.discrete_pair_pmf(np.array(event.p_add), np.array(event.q_add), h)
    return _disc.discrete_pair_pmf(np.array(event.p), np.array(event.q), h)


@symmetric.register
def _(event: ev.FromDominatingPair):
    return event.p_add is None


@dominating_pairs.register
def _(event: ev.PoissonSampled, h, tail, direction):
    if event.sample_rate == 1.0:
        return dominating_pairs(event.event, h, tail, direction)
    g = ev.sampled_gaussian(event, "PLD")
    # remove pair ((1-q)N(0,z^2) + qN(1,z^2), N(0,z^2)), add pair its mirror (Zhu, Dong & Wang 2022, Thm 11)
    return _disc.subsampled_gaussian_pmf(g.noise_multiplier, event.sample_rate, direction, h, tail)


@symmetric.register
def _(event: ev.PoissonSampled):
    return event.sample_rate == 1.0 and symmetric(event.event)


@dominating_pairs.register
def _(event: ev.SampledWithoutReplacement, h, tail, direction):
    if event.sample_rate == 1.0:
        return dominating_pairs(event.event, h, tail, direction)
    g = ev.sampled_gaussian(event, "PLD")
    # C_p(G_mu): the larger of the two subsampled-Gaussian profiles, one symmetric pair built by
    # connect-the-dots (Zhu, Dong & Wang 2022; not the two pairs composed separately, which is
    # not valid under replace-one)
    return _disc.symmetric_subsampled_gaussian_pmf(g.noise_multiplier, event.sample_rate, h, tail)


@symmetric.register
def _(event: ev.SampledWithoutReplacement):
    return event.sample_rate < 1.0 or symmetric(event.event)


def _flatten(event, count: int, out: list) -> list:
    """(leaf, count) pairs of ``event`` composed ``count`` times (composition nodes expanded)."""
    if isinstance(event, ev.SelfComposed):
        _flatten(event.event, count * event.count, out)
    elif isinstance(event, ev.Composed):
        for e in event.events:
            _flatten(e, count, out)
    else:
        out.append((event, count))
    return out

#: Composed mu for which an all-Gaussian ledger is answered in closed form (outside it, the
#: discretization answers, as for any ledger: :func:`dpfast.calibrate.gaussian_epsilon` refuses
#: mu > 1e150, whose epsilon ~ mu^2/2 leaves the doubles)
CLOSED_FORM_MU = (1e-150, 1e150)


def gaussian_ledger_mu(events) -> Optional[float]:
    """A double >= the exact mu = sqrt(sum_j c_j / z_j^2) of ``(leaf, count)`` pairs whose every
    leaf is a :class:`~dpfast.accounting.events.Gaussian` (of noise multiplier z_j), or None (a
    leaf of another kind, no composition, or mu outside :data:`CLOSED_FORM_MU`).

    The composition of those Gaussians is exactly the Gaussian mechanism of that mu (mu-GDP
    composes as mu = sqrt(sum mu_j^2) and is exact for Gaussians: Dong, Roth & Su 2022,
    Corollary 3.3).  Rounded up, never down (:func:`gaussian_mu2_terms`, :func:`mu_from_sum`): a
    larger mu only raises delta at every epsilon, so the profile of the returned mu bounds the
    true one."""
    return mu_from_sum(gaussian_mu2_terms(events))


def gaussian_mu2_terms(events) -> Optional[Fraction]:
    """sum_j of c_j / z_j^2, each term rounded up to a double (so the sum is an exact dyadic
    rational of bounded size, >= the exact mu^2), over ``(leaf, count)`` pairs of Gaussian leaves;
    None when a leaf is of another kind or a term is beyond the doubles (mu > 1e154: far outside
    :data:`CLOSED_FORM_MU`, and a sum only grows)."""
    total = Fraction(0)
    for leaf, c in events:
        if type(leaf) is not ev.Gaussian:  # (exactly: a subclass may mean something else)
            return None
        if c:
            term = basic.round_up(Fraction(c) / Fraction(leaf.noise_multiplier) ** 2)
            if term == math.inf:
                return None
            total += Fraction(term)
    return total


def mu_from_sum(mu2: Optional[Fraction]) -> Optional[float]:
    """The smallest double whose square is >= ``mu2`` (rounded up to a double first), or None
    (``mu2`` None or 0, or the root outside :data:`CLOSED_FORM_MU`)."""
    if not mu2:
        return None
    s = basic.round_up(mu2)
    if not s < math.inf:
        return None
    m = math.sqrt(s)
    while Fraction(m) ** 2 < Fraction(s):
        m = math.nextafter(m, math.inf)
    return m if CLOSED_FORM_MU[0] <= m <= CLOSED_FORM_MU[1] else None


def gaussian_ledger_epsilon(mu: float, delta: float) -> float:
    """The smallest epsilon >= 0 at which the Gaussian mechanism of ``mu`` is (epsilon,
    delta)-DP, on the safe side (:func:`dpfast.calibrate.gaussian_epsilon`)."""
    return max(gaussian_epsilon(1.0, delta, mu), 0.0)  # mu / 1.0 = mu exactly


def gaussian_ledger_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of the Gaussian mechanism of ``mu``, rounded up
    (:func:`dpfast.calibrate.gaussian_delta`), and never below the smallest positive double at a
    finite epsilon: the true delta is > 0 there, and one below the doubles (1e-343) would
    otherwise read 0."""
    d = gaussian_delta(1.0, epsilon, mu)  # mu / 1.0 = mu exactly
    return d if epsilon == math.inf else max(d, 5e-324)


_T_GRID = 2.0 ** np.arange(-6.0, 8.01, 1.0)
_TILT_GRID = 2.0 ** np.arange(-6.0, 30.01, 0.5)
#: Discretized PLDs of leaf events (process-wide; thread-safe, LRU, at most 32 MiB of masses;
#: one larger than that is not cached process-wide, only by the accountant that uses it;
#: :func:`dpfast.accounting.clear_cache` empties it).
STEP_CACHE_BYTES = 32 * 2 ** 20
_STEP_CACHE = ByteBoundedCache("pld discretizations", STEP_CACHE_BYTES,
                               lambda key, v: v.p.nbytes + v.opt.nbytes + 200)


def _step_pmf(event, h: float, tail: float, direction: str, local: Optional[dict] = None) -> StepPMF:
    """The event's discretization; ``local``: the calling accountant's own memo, which
    keeps what it uses alive (and avoids recomputing entries evicted from the shared cache)."""
    if symmetric(event):
        direction = "remove"
    key = (type(event), event, h, tail, direction)
    try:
        hit = local.get(key) if local is not None else None
        if hit is None:
            hit = _STEP_CACHE.get(key)
    except TypeError:  # unhashable event
        return dominating_pairs(event, h, tail, direction)
    if hit is None:
        hit = dominating_pairs(event, h, tail, direction)
        hit.p.setflags(write=False)  # shared between accountants and threads
        hit.opt.setflags(write=False)
        _STEP_CACHE.put(key, hit)
    if local is not None:
        local[key] = hit
    return hit


def _log_mgf(p: np.ndarray, lo: int, h: float, ts: np.ndarray) -> np.ndarray:
    """K(t) = log sum_i p_i e^{t l_i} for each t (finite part only; native, exact)."""
    return _pld.log_mgf(p, float(lo), h, np.ascontiguousarray(ts, dtype=np.float64))


def _discounted_suffix(p: np.ndarray, h: float, m_max: int) -> np.ndarray:
    """S_m = sum_{j >= m} p_j e^{-(j - m) h} for m < m_max (p >= 0): blockwise suffix sums of
    p_j e^{-(j - s) h} (block start s, blocks of at most 30 / h points, so no overflow),
    carried between blocks.  Sums of non-negative terms: relative round-off."""
    n = p.size
    B = max(1, int(30.0 / h))
    out = np.empty(min(m_max, n))
    carry = 0.0  # S at the end of the current block
    end = n
    while end > 0:
        start = max(0, end - B)
        k = np.arange(end - start, dtype=np.float64)
        x = p[start:end] * np.exp(-k * h)
        suf = np.cumsum(x[::-1])[::-1]  # sum_{j=m}^{end-1} p_j e^{-(j-start)h}
        S = suf * np.exp(k * h) + carry * np.exp(-(end - start - k) * h)
        if start < out.size:
            out[start:min(end, out.size)] = S[:min(end, out.size) - start]
        carry = float(S[0])
        end = start
    return out


class ComposedPLD:
    """A composed PMF on losses (A + m) h, m = 0..N-1, plus a +inf atom; native scans."""

    def __init__(self, p: np.ndarray, A: int, h: float, p_inf: float, correction: float = 0.0,
                 shift_mean: float = 0.0, shift_count: int = 0):
        self.shift_mean = float(shift_mean)
        self.shift_count = int(shift_count)
        self.p = p
        self.A = int(A)
        self.h = float(h)
        self.p_inf = float(min(1.0, p_inf))
        self.correction = float(correction)  # subtracted from delta (optimistic wrap bound)
        self.T, self.D, self.Tm1, self.Dm1 = _pld.scan_prepare(p, self.h)

    #: pessimistic queries with 1 - delta below this use the complement (see _near_one)
    NEAR_ONE = 1e-3
    pessimistic = False  # set by _finish

    def delta(self, eps) -> np.ndarray:
        e = np.atleast_1d(np.asarray(eps, dtype=np.float64))
        d = _pld.scan_delta(self.T, self.D, self.Tm1, self.Dm1, float(self.A), self.h, self.p_inf, e)
        if self.pessimistic and np.any(d > 1.0 - self.NEAR_ONE):
            near = d > 1.0 - self.NEAR_ONE
            d[near] = np.maximum(d[near], self._near_one_delta(e[near]))
        return np.clip(d - self.correction, 0.0, 1.0)

    def epsilon(self, delta) -> np.ndarray:
        d = np.atleast_1d(np.asarray(delta, dtype=np.float64)) + self.correction
        out = _pld.scan_epsilon(self.T, self.D, self.Tm1, self.Dm1, float(self.A), self.h, self.p_inf, d)
        if self.pessimistic and np.any(d > 1.0 - self.NEAR_ONE):
            near = d > 1.0 - self.NEAR_ONE
            out = np.asarray(out, dtype=np.float64).copy()
            out[near] = np.maximum(out[near], self._near_one_epsilon(d[near]))
        return out

    # Near delta = 1 the scans' D_m (~1) carry absolute round-off (3.6e-12 of delta(0) at
    # h = 1e-4 over 1.3e7 points), which made the "pessimistic" delta below the true one and
    # epsilon(1 - 1e-12) = 0 instead of ~1554.  There the complement is computed instead:
    # 1 - delta(l_m) = C_m = sum_j p_j min(1, e^{l_m - l_j}) = P(L <= l_m) + e^{-h} S_{m+1},
    # S_m = p_m + e^{-h} S_{m+1}: sums of non-negative terms, so relative (not absolute)
    # round-off.  G_m = C_m (1 - rel) - allowance is a lower bound on C_m (rel: the recursion's
    # relative round-off, ~4u (m + 1/h); allowance: the FFT's absolute noise per entry times
    # the entries that enter C_m), made non-decreasing; delta(eps) <= 1 - G_m for l_m <= eps.
    def _near_one(self):
        g = getattr(self, "_G", None)
        if g is None:
            p = np.maximum(self.p, 0.0)
            eh = math.exp(-self.h)
            pcum = np.cumsum(p)
            M = min(p.size, int(np.searchsorted(pcum, 2.0 * self.NEAR_ONE, side="right")) + 1)
            del pcum
            C = np.cumsum(p[:M])
            C[:M - 1] += eh * _discounted_suffix(p, self.h, M)[1:M]
            m = np.arange(M, dtype=np.float64)
            inv_h = 1.0 / -math.expm1(-self.h)
            rel = rounding_margin(self.h) + 4.0 * 2.0 ** -53 * (m + 2.0 + inv_h)
            noise = float(getattr(self, "ctx", {}).get("noise", 0.0))
            g = C * (1.0 - rel) - noise * (m + 2.0 + inv_h)
            g = np.minimum.accumulate(g[::-1])[::-1]  # non-decreasing, never above C
            self._G = g
        return g

    def _near_one_delta(self, e: np.ndarray) -> np.ndarray:
        g = self._near_one()
        pos = e / self.h - self.A
        out = np.ones(e.shape)
        below = pos < 0  # C(eps) = e^{eps - l_0} C_0 below the support
        with np.errstate(under="ignore", over="ignore"):
            out[below] = 1.0 - np.maximum(g[0], 0.0) * np.exp(np.minimum(e[below] - self.A * self.h, 0.0))
        inside = (pos >= 0) & (pos < g.size)
        out[inside] = 1.0 - np.maximum(g[np.floor(pos[inside]).astype(np.int64)], 0.0)
        # beyond the computed part (C > 2 NEAR_ONE there): the scan's value stands
        out[pos >= g.size] = 0.0
        return out

    def _near_one_epsilon(self, d: np.ndarray) -> np.ndarray:
        g = self._near_one()
        target = 1.0 - d
        out = np.full(d.shape, -np.inf)
        m = np.searchsorted(g, target, side="left")  # first m with G_m >= target
        ok = (m < g.size) & (target > 0)
        l = (self.A + m[ok]) * self.h
        first = m[ok] == 0
        if g[0] > 0:
            with np.errstate(divide="ignore"):
                l[first] = self.A * self.h + np.minimum(np.log(target[ok][first] / g[0]), 0.0)
        out[ok] = l
        return out

    # optimistic queries with the Hoeffding correction for the rounding deficit R = sum R_i:
    # delta_true(eps) >= delta_opt(eps - c) - P(R < c), c = shift_mean - t,
    # P(R < c) <= exp(-2 t^2 / (K h^2)).
    def _c(self, pfail: float) -> float:
        if self.shift_count == 0 or pfail <= 0:
            return 0.0
        t = self.h * math.sqrt(self.shift_count * math.log(1.0 / pfail) / 2.0)
        return max(0.0, self.shift_mean - t)

    def lower_delta(self, eps: float) -> float:
        base = float(self.delta(eps)[0])
        d0 = float(self.delta(eps - self.shift_mean)[0])
        pfail = max(d0 * 1e-3, 1e-300)
        c = self._c(pfail)
        if c <= 0:
            return base
        return max(base, float(self.delta(eps - c)[0]) - pfail)

    def lower_epsilon(self, delta: float) -> float:
        base = float(self.epsilon(delta)[0])
        pfail = delta * 1e-3
        c = self._c(pfail)
        if c <= 0 or delta + pfail >= 1:
            return base
        return max(base, float(self.epsilon(delta + pfail)[0]) + c)


def refined_step(h: float, sums) -> float:
    """The refinement rule of :meth:`PLDAccountant._grid_step` (its one home; the budget's
    incremental composition applies it too): ``sums`` holds, per direction, the composed loss's
    variance on the grid ``h`` and the part connect-the-dots added to it; where that excess is
    above 1e-8 (an added spread below 1e-4 in loss units is negligible) and above 1e-3 of the
    true variance, ``h`` shrinks until the ratio is 1e-3, by at most 64x."""
    worst = 0.0
    for var, excess in sums:
        if excess <= 1e-8:
            continue
        true_var = var - excess
        worst = max(worst, excess / true_var if true_var > 0 else math.inf)
    if worst <= 1e-3:
        return h
    return h * max(1.0 / 64.0, math.sqrt(1e-3 / worst)) if math.isfinite(worst) else h / 64.0


def rounding_margin(h: float) -> float:
    """Relative margin on every reported delta at grid step ``h`` (pessimistic: raised,
    optimistic: lowered; epsilons are read at the correspondingly moved delta).

    It covers the floating-point error of the discretization: connect-the-dots splits lose
    about log10(1/h) digits to cancellation (a single Gaussian(1.0) at h = 1e-4 came out
    1.7e-14 (relative) below the exact delta), and the compositions' relative round-off:
    16 u / h (1.8e-11 at h = 1e-4), at least 1e-12; far below the discretization's pessimism."""
    return max(1e-12, 16 * 2.0 ** -53 / h)


#: Memory budget of one composed lane: the FFT composition and the queries on it (a tilted
#: recomposition for small deltas, the complement near delta = 1) must fit in it.  A grid
#: whose composed window would need more is refused before anything is allocated, and the
#: accountant coarsens its grid instead (see PLDAccountant).
MAX_COMPOSED_BYTES = 2 ** 30
#: Bytes per point of the composed window, measured with tracemalloc (2e5 points): the FFT
#: composition peaks at 54; a lane keeps 24 (PMF and the two scans), its tilted recomposition
#: for small deltas (one cached per lane) 24 more, the complement near delta = 1 3, the
#: optimistic lane of ``get_*_bounds`` and its tilt 48: about 100 kept and a peak of 138 with
#: everything built.  Rounded up (a tilted window can be somewhat wider than the base one).
BYTES_PER_POINT = 192


def estimated_bytes(width: int) -> int:
    """Estimated peak memory (bytes) of composing and querying a window of ``width`` points."""
    return int(width) * BYTES_PER_POINT


class GridTooLargeError(ValueError):
    """The composed window would exceed :data:`MAX_COMPOSED_BYTES` at this grid step."""


class GridCoarsenedWarning(RuntimeWarning):
    """A PLD was composed on a grid coarser than ``value_discretization`` (memory budget): the
    reported values are still certified upper bounds, looser ones."""


def _compose_lane(steps: List[Tuple[StepPMF, int]], h: float, tol: float, optimistic: bool,
                  workers: Optional[int]) -> ComposedPLD:
    pieces = []
    log_keep = 0.0  # log P(no +inf atom)
    lo_sum = hi_sum = 0
    for sp, c in steps:
        p = sp.opt if optimistic else sp.p
        lo = sp.opt_lo if optimistic else sp.lo
        pinf = sp.opt_inf if optimistic else sp.p_inf
        nz = np.flatnonzero(p > 0)
        if nz.size == 0:
            p, lo = np.zeros(1), 0
            nz = np.array([0])
        else:
            p = p[nz[0]:nz[-1] + 1]
            lo = lo + int(nz[0])
        log_keep += c * (math.log1p(-pinf) if pinf < 1 else -math.inf)
        pieces.append((p, lo, c))
        lo_sum += c * lo
        hi_sum += c * (lo + p.size - 1)
    p_inf = -math.expm1(log_keep) if log_keep > -math.inf else 1.0
    # Chernoff window
    K_up = np.zeros(_T_GRID.shape)
    K_dn = np.zeros(_T_GRID.shape)
    for p, lo, c in pieces:
        K_up += c * _log_mgf(p, lo, h, _T_GRID)
        K_dn += c * _log_mgf(p, lo, h, -_T_GRID)
    logtol = math.log(tol)
    b_t = (K_up - logtol) / _T_GRID
    a_t = -(K_dn - logtol) / _T_GRID
    b_min, a_max = float(np.min(b_t)), float(np.max(a_t))
    # no finite mass at all (every loss is +inf): K = -inf, keep the exact (trivial) support
    hi_idx = min(hi_sum, math.ceil(b_min / h) + 1) if math.isfinite(b_min) else hi_sum
    lo_idx = max(lo_sum, math.floor(a_max / h) - 1) if math.isfinite(a_max) else lo_sum
    if hi_idx < lo_idx:  # degenerate (all mass at +inf or numerical): keep exact support
        lo_idx, hi_idx = lo_sum, max(hi_sum, lo_sum)
    with np.errstate(over="ignore"):
        up_mass = 0.0 if hi_idx >= hi_sum else float(np.min(np.exp(K_up - _T_GRID * (hi_idx + 1) * h)))
        low_mass = 0.0 if lo_idx <= lo_sum else float(np.min(np.exp(K_dn + _T_GRID * (lo_idx - 1) * h)))
    width = hi_idx - lo_idx + 1
    exact = len(pieces) == 1 and pieces[0][2] == 1 and up_mass == 0.0 and low_mass == 0.0
    if not exact and estimated_bytes(width) > MAX_COMPOSED_BYTES:
        # refused before the FFT allocates anything (the accountant retries on a coarser grid)
        raise GridTooLargeError(
            f"the composed privacy-loss distribution needs {width} grid points at grid step {h:.4g} "
            f"(about {estimated_bytes(width) / 2 ** 30:.3g} GiB; the limit is "
            f"{MAX_COMPOSED_BYTES / 2 ** 30:.3g} GiB): use a coarser value_discretization"
        )
    ctx = dict(K_up=K_up, pieces=pieces, lo_idx=lo_idx, width=width, h=h, workers=workers, p_inf=p_inf,
               up_mass=up_mass, low_mass=low_mass, optimistic=optimistic, steps=steps, tol=tol)
    if exact:
        p, lo, _ = pieces[0]
        comp, A = p.copy(), lo
        ctx["exact"] = True
    else:
        A = lo_idx
        info: dict = {}
        comp = _fft_compose(pieces, lo_idx, width, workers, 0.0, info=info)
        # The FFT's relative error in the transform at 0 (the total mass), ~1e-16, is raised to
        # the power of the count: 1000 Gaussians lose 1.1e-13 of the mass, which made delta near
        # 1 too small.  The finite mass is known exactly (1 - the +inf atom): restore it.
        total = float(np.sum(comp))
        if total > 0:
            comp *= (1.0 - p_inf) / total
        # absolute round-off level of an entry (complement queries near delta = 1 allow for it):
        # the most negative raw entry, at least count * 2^-53 of the largest one
        K = sum(c for _, _, c in pieces)
        ctx["noise"] = max(info.get("neg", 0.0), K * 2.0 ** -53 * float(np.max(comp, initial=0.0)))
    return _finish(comp, A, ctx)


def _finish(comp, A, ctx) -> ComposedPLD:
    steps, h = ctx["steps"], ctx["h"]
    if ctx["optimistic"]:
        sm = sum(c * sp.opt_shift for sp, c in steps)
        sc = sum(c for sp, c in steps if sp.opt_shift > 0)
        out = ComposedPLD(comp, A, h, ctx["p_inf"], correction=ctx["low_mass"], shift_mean=sm, shift_count=sc)
    else:
        out = ComposedPLD(comp, A, h, ctx["p_inf"] + ctx["up_mass"])
        out.pessimistic = True
    out.ctx = ctx
    return out


def _fft_compose(pieces, lo_idx: int, width: int, workers, tilt: float, h: float = 0.0,
                 info: Optional[dict] = None) -> np.ndarray:
    """Composed PMF on absolute indices lo_idx .. lo_idx + width - 1 (one FFT pair).

    With ``tilt`` = lambda > 0 every piece is exponentially tilted, p_i e^{lambda l_i - K(lambda)}
    (a probability vector), composed, and untilted: this gives the far right tail with relative
    (not absolute) floating-point accuracy.  Returns (untilted values, log scale) when tilting."""
    N = sfft.next_fast_len(width, real=True)
    logmag = None
    phase = None
    logscale = 0.0
    for p, lo, c in pieces:
        if c == 0:
            continue
        if tilt > 0:
            l = (lo + np.arange(p.size)) * h
            with np.errstate(divide="ignore"):
                lw = np.log(p) + tilt * l
            k = float(special.logsumexp(lw))
            p = np.exp(lw - k)
            logscale += c * k
        folded = np.zeros(N)
        start = lo % N
        if start + p.size <= N:
            folded[start:start + p.size] = p
        else:
            np.add.at(folded, (lo + np.arange(p.size)) % N, p)
        f = sfft.rfft(folded, workers=workers)
        with np.errstate(divide="ignore"):
            lm = c * np.log(np.abs(f))
        ph = c * np.angle(f)
        logmag = lm if logmag is None else logmag + lm
        phase = ph if phase is None else phase + ph
    if logmag is None:
        out = np.zeros(width)
        if lo_idx <= 0 < lo_idx + width:
            out[-lo_idx] = 1.0
        return (out, 0.0) if tilt > 0 else out
    mag = np.exp(logmag)
    spec = mag * np.cos(phase) + 1j * (mag * np.sin(phase))
    r = sfft.irfft(spec, N, workers=workers)
    s0 = lo_idx % N
    comp = np.concatenate((r[s0:], r[:s0]))[:width] if s0 else r[:width].copy()
    if tilt > 0:
        return comp, logscale
    if info is not None:
        info["neg"] = max(0.0, -float(np.min(r)))
    comp[comp < 0] = 0.0
    return comp


def _tilted(base: ComposedPLD, tilt: float) -> ComposedPLD:
    """Recompute ``base`` with the right tail from an exponentially tilted composition."""
    ctx = dict(base.ctx)
    if ctx.get("exact"):
        return base
    pieces, h = ctx["pieces"], ctx["h"]
    lo_idx, width = ctx["lo_idx"], ctx["width"]
    # widen the window for the tilted law: P~(S > b) <= exp(K(lambda + t) - K(lambda) - t b)
    ts = tilt + _T_GRID
    K1 = sum(c * _log_mgf(p, lo, h, ts) for p, lo, c in pieces)
    K0 = sum(c * _log_mgf(p, lo, h, np.array([tilt])) for p, lo, c in pieces)[0]
    b = float(np.min((K1 - K0 - math.log(ctx["tol"])) / _T_GRID))
    hi_sum = sum(c * (lo + p.size - 1) for p, lo, c in pieces)
    new_hi = min(hi_sum, max(lo_idx + width - 1, math.ceil(b / h) + 1))
    # and cut it below: P~(S < a) <= exp(K(lambda - t) - K(lambda) + t a).  Only the right tail
    # is queried on this lane (delta(eps) needs the masses above eps only), and the window
    # must fit in the memory budget (a full-width one did not, for 1000 Gaussian(1.0): the
    # lane fell back to the untilted values and the optimistic bound came out above the exact)
    K2 = sum(c * _log_mgf(p, lo, h, tilt - _T_GRID) for p, lo, c in pieces)
    a = float(np.max(-(K2 - K0 - math.log(ctx["tol"])) / _T_GRID))
    t_lo = max(lo_idx, math.floor(a / h) - 1) if math.isfinite(a) else lo_idx
    t_lo = min(t_lo, new_hi)
    width = new_hi - t_lo + 1
    if estimated_bytes(width) > MAX_COMPOSED_BYTES:
        return base  # the tilted window would not fit: keep the untilted values
    # reuse the untilted composition (zero beyond its window, where the tilted values are used)
    r0 = np.zeros(width)
    seg = base.p[t_lo - lo_idx:t_lo - lo_idx + width]
    r0[:seg.size] = seg
    r1, logscale = _fft_compose(pieces, t_lo, width, ctx["workers"], tilt, h)
    s = (t_lo + np.arange(width)) * h
    # error models: u * max(r0) (absolute) vs u * max(r1) * e^{logscale - tilt s} (tilted)
    with np.errstate(over="ignore"):
        fac = np.exp(np.minimum(logscale - tilt * s, 700.0))
    use1 = fac * max(np.max(np.abs(r1)), 1e-300) < max(np.max(r0), 1e-300)
    comp = np.where(use1, r1 * fac, r0)
    comp[comp < 0] = 0.0
    ctx["width"] = width
    ctx["lo_idx"] = t_lo
    out = _finish(comp, t_lo, ctx)
    out.valid_from = t_lo * h  # queries below this use the base lane
    return out


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _locked(method: _Method) -> _Method:
    """Run ``method`` holding the accountant's (re-entrant) lock (its signature is kept, also
    for type checkers)."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)
    return cast(_Method, wrapper)


class PLDAccountant(PrivacyAccountant):
    """Privacy-loss-distribution accountant with FFT composition (see :doc:`/theory/accounting`).

    Parameters
    ----------
    value_discretization : float
        Grid step h of the privacy loss, in (0, 1].  The pessimistic epsilon's error is
        second order in h (connect-the-dots); the optimistic one's about (compositions) h/2.
    tail_mass : float
        Per-mechanism truncation mass (moved to +inf pessimistically); default 1e-30.
    window_mass : float
        Chernoff bound on the composed mass outside the FFT window (each side); default 1e-22.
    workers : int or None
        Passed to ``scipy.fft``.
    refine : bool
        Refine the grid automatically when it is coarse for the composed loss (see below);
        default True.  Any grid gives a certified upper bound; refinement only tightens it.
        With ``refine=False`` the grid is exactly ``value_discretization``: a composed window
        over the memory budget is refused (ValueError) instead of coarsened.

    The grid actually used (attribute ``grid_step`` after a query) is ``value_discretization``,
    refined automatically (at most 64x) when connect-the-dots' extra variance (<= h^2/4 per
    mechanism) would exceed 1e-3 of the composed loss's variance -- e.g. 10^6 steps at sample rate
    1e-4, where a fixed h = 1e-4 overstates epsilon by 15%.  Memory is bounded: a composed window
    that would need more than :data:`MAX_COMPOSED_BYTES` is never allocated; the refinement is
    backed off, then (``refine=True``) the grid coarsened beyond ``value_discretization`` with a
    :class:`GridCoarsenedWarning` (e.g. 10^5 compositions of Gaussian(1.0): grid 1.6e-3);
    ``grid_step`` and each composed lane's ``h`` say which grid was used.

    ``compose(event, count)`` records (composition nodes are flattened into their leaves, each
    discretized by its :func:`dominating_pairs` registration; an event without one raises
    :class:`UnsupportedEventError` before anything changes); the PLDs are built at the first query
    (one FFT pair per lane) and cached until the next ``compose``.  All events must share one
    neighbouring relation.  ``get_epsilon`` / ``get_delta`` are certified upper bounds
    (pessimistic; for a ledger of Gaussians alone, the exact analytic Gaussian rounded up, with
    no discretization: see the module docstring); ``get_epsilon_bounds`` / ``get_delta_bounds``
    return (optimistic, pessimistic).  epsilon is ``inf`` exactly when the +inf loss atom (a
    real one, e.g. of a pair with q = 0 < p, or a pessimistic truncation mass ~1e-22) exceeds
    delta.

    Thread-safe: one accountant may be shared between threads (``compose`` and the queries
    hold a per-accountant lock, so every composition is counted once and results equal the
    sequential ones); accountants in different threads share the bounded discretization
    cache (:data:`STEP_CACHE_BYTES`).  Each accountant also keeps the discretizations its
    events use at its current grid, for its own lifetime.
    """

    def __init__(self, value_discretization: float = 1e-4, *, tail_mass: float = 1e-30,
                 window_mass: float = 1e-22, workers: Optional[int] = None, refine: bool = True):
        h = check_real(value_discretization, "value_discretization")  # NaN: refused below
        if not (0 < h <= 1.0):
            raise ValueError(
                f"value_discretization must be in (0, 1] (coarser grids cannot give a useful "
                f"bound), got {value_discretization!r}"
            )
        for v, n in ((tail_mass, "tail_mass"), (window_mass, "window_mass")):
            if not (0 < check_real(v, n) < 1e-6):
                raise ValueError(f"{n} must be in (0, 1e-6), got {v!r}")
        self.value_discretization = h
        self.tail_mass = float(tail_mass)
        self.window_mass = float(window_mass)
        self.workers = workers
        self.refine = bool(refine)
        self._events: List[Tuple[object, int]] = []  # distinct leaf events with their counts
        self._cache: Optional[dict] = None
        self._memo: dict = {}  # this accountant's discretizations (see _step_pmf)
        self._init_base()

    name = "pld"

    def _config(self):
        return {"value_discretization": self.value_discretization, "tail_mass": self.tail_mass,
                "window_mass": self.window_mass, "workers": self.workers, "refine": self.refine}

    # ------------------------------------------------------------------ composition
    def _prepare(self, event):
        """The event's leaves with their counts; each leaf's discretization is computed (and
        cached) now, so that unsupported events and errors surface before any change.  Gaussian
        leaves (always supported) are discretized only if a query needs it: an all-Gaussian
        ledger is answered in closed form (:meth:`get_epsilon`), and discretizing one Gaussian
        at epsilon ~64 took 0.24 s."""
        leaves = _flatten(event, 1, [])
        with self._lock:  # the memo is this accountant's state (rebuilt under the lock by _lanes)
            for leaf, _ in leaves:
                if self._closed_form and type(leaf) is ev.Gaussian:
                    continue
                _step_pmf(leaf, self.value_discretization, self.tail_mass, "remove", self._memo)
        return leaves

    def _apply(self, event, leaves, count):
        for leaf, c in leaves:
            if not c:
                continue
            for k, (d, c0) in enumerate(self._events):
                if d is leaf or (type(d) is type(leaf) and _same(d, leaf)):
                    self._events[k] = (d, c0 + c * count)
                    break
            else:
                self._events.append((leaf, c * count))
        self._cache = None

    def _copy_into(self, new):
        new._events = list(self._events)
        new._memo = dict(self._memo)
        # composed lanes are shared read-mostly; the copy gets its own dicts for lazily added parts
        new._cache = None if self._cache is None else {k: dict(v) for k, v in self._cache.items()}

    def __getstate__(self):
        # events, not PMFs: discretizations and composed lanes are rebuilt on the first query
        state = super().__getstate__()
        state["_cache"] = None
        state["_memo"] = {}
        state.pop("grid_step", None)
        return state

    def _steps(self, direction: str, h: float):
        steps = []
        for d, c in self._events:
            steps.append((_step_pmf(d, h, self.tail_mass, direction, self._memo), c))
        if not steps:
            steps = [(StepPMF(h, 0, np.ones(1), 0.0, 0, np.ones(1), 0.0), 1)]
        return steps

    def _grid_step(self, dirs) -> float:
        """Grid step actually used: ``value_discretization``, refined (at most 64x) when the grid is
        coarse relative to the spread of the composed loss.

        Connect-the-dots adds variance (at most h^2/4 per mechanism, 0 for atoms on grid points;
        computed exactly by the native split); when that excess exceeds ``1e-3`` of the composed
        loss's variance and 1e-8 in absolute terms (many compositions of mechanisms whose loss
        spreads over only a few grid points), the bound would be needlessly loose, so h shrinks
        until the ratio is 1e-3 (or by the factor 64)."""
        h = self.value_discretization
        K = sum(c for _, c in self._events)
        if K == 0 or not self.refine:
            return h
        sums = []
        for direction in dirs:
            var = excess = 0.0
            for sp, c in self._steps(direction, h):
                w, _, v = _pld.pmf_moments(sp.p)
                if w > 0:
                    var += c * v * h * h
                excess += c * sp.excess_var
            sums.append((var, excess))
        return refined_step(h, sums)

    def _lanes(self) -> dict:
        if self._cache is not None:
            return self._cache
        asym = any(not symmetric(d) for d, _ in self._events)
        dirs = ["remove", "add"] if asym else ["remove"]
        h = self._grid_step(dirs)
        while True:
            try:
                steps = {d: self._steps(d, h) for d in dirs}
                out = {d: {"pess": _compose_lane(steps[d], h, self.window_mass, False, self.workers)}
                       for d in dirs}
                break
            except ValueError as exc:
                # A refined grid too large for some mechanism, or a composed window over the
                # memory budget: back off to the configured grid, then coarser.  Any grid gives
                # a certified upper bound (connect-the-dots); a coarser one a looser one.
                # A mechanism refused at the configured grid is refused (its range, not the
                # composition, is the problem); with refine=False the grid is exactly
                # value_discretization (callers that combine lanes rely on it: the budget's
                # incremental composition), so a window over the budget is refused, before
                # anything is allocated.
                coarse = h >= self.value_discretization
                if h >= 1.0 or (coarse and not (self.refine and isinstance(exc, GridTooLargeError))):
                    raise
                h = min(self.value_discretization, 2 * h) if not coarse else min(1.0, 2 * h)
        if h > self.value_discretization:
            warnings.warn(
                f"PLDAccountant: the composed privacy-loss distribution does not fit in "
                f"{MAX_COMPOSED_BYTES / 2 ** 30:.3g} GiB at value_discretization="
                f"{self.value_discretization:.4g}; composed on the coarser grid {h:.4g} instead "
                f"(still a certified upper bound, a looser one)", GridCoarsenedWarning, stacklevel=4)
        self.grid_step = h
        # keep only what the current grids use (earlier refinements' grids are stale)
        self._memo = {k: v for k, v in self._memo.items() if k[2] in (h, self.value_discretization)}
        self._cache = out
        return out

    def _opt(self, lane: dict, direction: str) -> ComposedPLD:
        if "opt" not in lane:
            h = self.grid_step
            lane["opt"] = _compose_lane(self._steps(direction, h), h, self.window_mass, True, self.workers)
        return lane["opt"]

    @_locked
    def composed(self) -> Dict[str, ComposedPLD]:
        """The pessimistic composed PLD of each lane ('remove' and, if needed, 'add')."""
        return {k: v["pess"] for k, v in self._lanes().items()}

    # ------------------------------------------------------------------ queries
    # Below SMALL_DELTA the FFT's absolute round-off (~1e-13 of the total mass) would dominate,
    # so the right tail is recomputed from an exponentially tilted composition (cached per tilt).
    SMALL_DELTA = 1e-6

    @staticmethod
    def _tilt_lambda(base: ComposedPLD, eps: float) -> Optional[float]:
        """The tilt read at ``eps`` (None: the base lane itself is read)."""
        ctx = getattr(base, "ctx", None)
        if ctx is None or ctx.get("exact") or not math.isfinite(eps):
            return None
        if "K_tilt" not in ctx:
            ctx["K_tilt"] = sum(c * _log_mgf(p, lo, ctx["h"], _TILT_GRID) for p, lo, c in ctx["pieces"])
        with np.errstate(over="ignore"):  # lambda * eps = inf at huge eps: that tilt wins, as it should
            return float(_TILT_GRID[int(np.argmin(ctx["K_tilt"] - _TILT_GRID * eps))])

    def _tilt_for(self, base: ComposedPLD, eps: float) -> ComposedPLD:
        lam = self._tilt_lambda(base, eps)
        if lam is None:
            return base
        ctx = base.ctx
        key = ("tilt", lam)
        cache = ctx.setdefault("tilted", {})
        if key not in cache:
            while len(cache) >= 1:  # bounded memory: a tilted lane is about as large as the base
                cache.pop(next(iter(cache)))
            cache[key] = _tilted(base, lam)
        return cache[key]

    def _lane_eps(self, pld: ComposedPLD, delta: float, lower: bool) -> float:
        f = (lambda P: P.lower_epsilon(delta)) if lower else (lambda P: float(P.epsilon(delta)[0]))
        e = f(pld)
        if delta < self.SMALL_DELTA:
            # The tilt that gives relative accuracy depends on where the lane's own epsilon
            # lies (for the optimistic bound: before its Hoeffding shift c is added, which
            # is where its masses are read): iterate to a fixed point (the first value, from
            # the untilted FFT, can be far off where round-off dominates).
            dq = min(1.0, delta * (1.0 + 1e-3)) if lower else delta  # (lower_epsilon's pfail)
            raw = float(pld.epsilon(dq)[0])
            # A fixed point is detected on the tilt itself, not on id(P): the one-entry cache
            # frees the previous tilted lane, and a new one could be allocated at its address,
            # ending the iteration early at a looser (still certified) epsilon that depended on
            # the allocator (seen as a flaky tightness test).
            seen = set()
            for _ in range(8):
                if not math.isfinite(raw):
                    break
                lam = self._tilt_lambda(pld, raw)
                if lam in seen:
                    break
                seen.add(lam)
                P = self._tilt_for(pld, raw)
                raw_t = float(P.epsilon(dq)[0])
                if raw_t < getattr(P, "valid_from", -math.inf) + P.h:
                    break  # below the tilted window: the base lane's value stands
                raw, e = raw_t, f(P)
        return e

    def _lane_delta(self, pld: ComposedPLD, eps: float, lower: bool) -> float:
        f = (lambda P: P.lower_delta(eps)) if lower else (lambda P: float(P.delta(eps)[0]))
        d = f(pld)
        if d < self.SMALL_DELTA:
            # read where the lane's masses are used (optimistic: below eps by its shift)
            at = eps - pld.shift_mean if lower else eps
            P = self._tilt_for(pld, at)
            if at >= getattr(P, "valid_from", -math.inf) + P.h:
                d = f(P)
        return d

    #: Whether all-Gaussian ledgers are answered in closed form (see the module docstring;
    #: tests of the discretization on Gaussian references turn it off)
    _closed_form = True

    def _gaussian_mu(self) -> Optional[float]:
        """The composed mu of an all-Gaussian ledger (:func:`gaussian_ledger_mu`), else None."""
        return gaussian_ledger_mu(self._events) if self._closed_form else None

    @_locked
    def get_delta(self, epsilon: float) -> float:
        """Certified (pessimistic) delta at ``epsilon`` (max over the lanes; an all-Gaussian
        ledger: the analytic Gaussian's delta, rounded up)."""
        e = _check_eps(epsilon)
        mu = self._gaussian_mu()
        if mu is not None:
            return gaussian_ledger_delta(mu, e)
        lanes = self._lanes()
        r = rounding_margin(self.grid_step)
        # the margin is on the finite part (the +inf atom is exact: 1 - prod (1 - p_j)^c_j)
        d_pld = min(1.0, float(max(l["pess"].p_inf + max(0.0, d - l["pess"].p_inf) * (1.0 + r)
                                   for l in lanes.values()
                                   for d in (self._lane_delta(l["pess"], e, False),))))
        return min(d_pld, basic.ledger_delta(tuple(self._ledger), e))

    @_locked
    def get_epsilon(self, delta: float) -> float:
        """Certified (pessimistic) smallest epsilon >= 0 at ``delta`` (max over the lanes; an
        all-Gaussian ledger: the analytic Gaussian's epsilon, on the safe side)."""
        delta = check_delta(delta, allow_zero=False)
        mu = self._gaussian_mu()
        if mu is not None:
            return gaussian_ledger_epsilon(mu, delta)
        lanes = self._lanes()
        # (near 1 the complement carries the margin instead: see ComposedPLD._near_one)
        r = rounding_margin(self.grid_step)
        e = max(self._lane_eps(l["pess"], _finite_moved(delta, l["pess"].p_inf, 1.0 / (1.0 + r))
                               if delta <= 1.0 - ComposedPLD.NEAR_ONE else delta, False)
                for l in lanes.values())
        return max(min(e, basic.ledger_epsilon(tuple(self._ledger), delta)), 0.0)

    @_locked
    def get_delta_bounds(self, epsilon: float) -> Tuple[float, float]:
        """(optimistic, pessimistic) delta at ``epsilon``: the true delta lies between."""
        e = _check_eps(epsilon)
        lanes = self._lanes()
        lo = max(self._lane_delta(self._opt(l, k), e, True) for k, l in lanes.items())
        hi = self.get_delta(e)
        return min(lo * (1.0 - rounding_margin(self.grid_step)), hi), hi

    @_locked
    def get_epsilon_bounds(self, delta: float) -> Tuple[float, float]:
        """(optimistic, pessimistic) epsilon at ``delta``: the true epsilon lies between."""
        delta = check_delta(delta, allow_zero=False)
        lanes = self._lanes()
        r = rounding_margin(self.grid_step)
        lo = 0.0
        for k, l in lanes.items():
            opt = self._opt(l, k)
            d = _finite_moved(delta, opt.p_inf, 1.0 + r)
            if d < 1.0:
                lo = max(lo, self._lane_eps(opt, d, True))
        hi = self.get_epsilon(delta)
        return min(max(lo, 0.0), hi), hi


def _finite_moved(delta: float, p_inf: float, factor: float) -> float:
    """delta with its finite part (above the exact +inf atom) scaled by ``factor``."""
    return delta if delta <= p_inf else p_inf + (delta - p_inf) * factor


def _same(a, b) -> bool:
    try:
        return a == b
    except Exception:
        return False


def _check_eps(epsilon) -> float:
    e = check_real(epsilon, "epsilon")
    if not e >= 0 or math.isnan(e):
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    return e
