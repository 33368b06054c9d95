"""Incremental PLD composition for a growing ledger (used by :class:`dpfast.PrivacyBudget`).

:class:`dpfast.accounting.PLDAccountant` recomposes every distinct event at each query (one FFT
pair over all of them), so a budget that asks "does the next release fit?" after each of n
releases with distinct parameters pays O(n) compositions per charge (about n^3 in all).
:class:`IncrementalPLD` keeps the composed pessimistic privacy-loss distribution (PLD) of the
ledger and convolves each new event's PLD into it, so one charge costs one convolution of the
ledger's PMF with the event's, whatever the ledger's length.

Why it is an upper bound.  Each event's PMF is the accountant's own pessimistic discretization
(connect-the-dots on the grid h*Z, Doroshenko et al. 2022; an event composed ``count`` times is
composed by :class:`PLDAccountant` itself), and composition of dominating pairs is convolution of
their PLDs (Zhu, Dong & Wang 2022), so the convolution of pessimistic PMFs is pessimistic.  After
each convolution the tails are cut to the Chernoff window of the composed loss (as the
accountant cuts its FFT window): the upper tail is replaced by its bound (<= ``window_mass``) on
the +inf atom and the lower tail by its bound on the lowest kept loss -- both move mass to larger
losses, which can only increase delta(epsilon) = P(L = inf) + E[(1 - e^{eps - L})+].
The +inf atoms compose exactly: P(inf) = 1 - prod (1 - p_inf_i).  Small convolutions are direct
(nonnegative sums: relative accuracy in the tails); large ones use an FFT, whose absolute
round-off (~1e-16 of the largest mass per entry) is the accountant's own.

Grid.  The grid is the accountant's ``value_discretization`` h0 until the accountant's refinement
rule (connect-the-dots' added variance > 1e-3 of the composed variance, :meth:`PLDAccountant.
_grid_step`; the sums it needs are additive over events and kept here) asks for a finer one;
then the grid becomes h0 / 2^k (k <= 6), at least as fine as the accountant's, and the whole
ledger is recomposed once at it (at most six times in a ledger's life).  The epsilon reported is
therefore the accountant's on the same ledger up to the discretization and truncation errors
(tests/budget/test_budget.py checks 1e-6 relative at equal grids).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Dict, List, Optional, Tuple

import numpy as np
from scipy import fft as sfft

from dpfast import _pld
from dpfast.accounting import basic, events as ev
from dpfast.accounting._discretize import MAX_POINTS
from dpfast.accounting.pld import (
    _T_GRID,
    ComposedPLD,
    PLDAccountant,
    _finite_moved,
    _flatten,
    _log_mgf,
    _step_pmf,
    gaussian_ledger_delta,
    gaussian_ledger_epsilon,
    gaussian_mu2_terms,
    mu_from_sum,
    refined_step,
    rounding_margin,
    symmetric,
)

__all__ = ["IncrementalPLD"]

_DIRECT_OPS = 5e6  # direct convolution below this many multiply-adds, FFT above
_MAX_REFINE = 6  # the accountant refines by at most 64x


def _convolve(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Full linear convolution: direct for small products (exact up to relative rounding, the
    sums being of nonnegative terms), else by FFT (overlap-add when one side is much shorter,
    so that a long ledger PMF costs O(N log m) with an m-point event); negative round-off
    clipped.  (scipy.fft only: scipy.signal would add a second to the first charge's import.)"""
    if p.size < q.size:
        p, q = q, p
    n, m = p.size, q.size
    if n * m <= _DIRECT_OPS or m <= 8:
        return np.convolve(p, q)
    N = sfft.next_fast_len(8 * m, real=True)
    if N >= n:  # comparable sizes: one FFT pair
        N = sfft.next_fast_len(n + m - 1, real=True)
        out = sfft.irfft(sfft.rfft(p, N) * sfft.rfft(q, N), N)[: n + m - 1]
    else:  # overlap-add: blocks of L = N - m + 1 points, each convolved with q in N points
        L = N - m + 1
        nb = -(-n // L)
        blocks = np.zeros(nb * L)
        blocks[:n] = p
        r = sfft.irfft(sfft.rfft(blocks.reshape(nb, L), N, axis=1) * sfft.rfft(q, N), N, axis=1)
        acc = np.zeros((nb + 1, L))
        acc[:nb] = r[:, :L]
        acc[1:, : m - 1] += r[:, L:]
        out = acc.reshape(-1)[: n + m - 1]
    return np.maximum(out, 0.0, out=out)


def _trim(p: np.ndarray, A: int, p_inf: float, K_up: np.ndarray, K_dn: np.ndarray, h: float,
          tol: float) -> Tuple[np.ndarray, int, float]:
    """Cut ``p`` (losses (A + m) h) to the Chernoff window of the composed loss, as
    :func:`dpfast.accounting.pld._compose_lane` does: with K the log-MGF of the ledger's
    pessimistic PMF (a sum over its events), P(L >= b) <= exp(K(t) - t b) and P(L <= a) <=
    exp(K(-t) + t a).  The mass above the window is *replaced* by that bound on the +inf atom and
    the mass below by the bound on the lowest kept loss: both bound the tail masses of the exact
    convolution, so the cut stays pessimistic where the FFT's round-off (not the masses)
    dominates the tail entries -- cutting by the entries' own sums would keep that noise and let
    the array grow.  (What earlier cuts moved, <= ``tol`` a charge, is not tracked into the
    bound; below the window losses are negative, where delta(eps >= 0) does not look.)"""
    logtol = math.log(tol)
    b_min = float(np.min((K_up - logtol) / _T_GRID))
    a_max = float(np.max(-(K_dn - logtol) / _T_GRID))
    hi = A + p.size - 1
    hi_idx = min(hi, math.ceil(b_min / h) + 1) if math.isfinite(b_min) else hi
    lo_idx = max(A, math.floor(a_max / h) - 1) if math.isfinite(a_max) else A
    if hi_idx < lo_idx:  # degenerate: keep everything
        return p, A, p_inf
    with np.errstate(over="ignore"):
        up_mass = 0.0 if hi_idx >= hi else float(np.min(np.exp(K_up - _T_GRID * (hi_idx + 1) * h)))
        low_mass = 0.0 if lo_idx <= A else float(np.min(np.exp(K_dn + _T_GRID * (lo_idx - 1) * h)))
    if up_mass == 0.0 and low_mass == 0.0:
        return p, A, p_inf
    out = p[lo_idx - A: hi_idx - A + 1].copy()
    out[0] += low_mass
    return out, lo_idx, min(1.0, p_inf + up_mass)


class IncrementalPLD:
    """The pessimistic composed PLD of a ledger of events, extended one event at a time.

    ``extended(event)`` returns a new object (``self`` is never changed, so a refused charge
    leaves nothing behind); ``epsilon(delta)`` is the certified epsilon (max over the remove and
    add lanes).  Parameters as :class:`PLDAccountant`'s."""

    def __init__(self, value_discretization: float = 1e-4, *, tail_mass: float = 1e-30,
                 window_mass: float = 1e-22):
        cfg = PLDAccountant(value_discretization, tail_mass=tail_mass, window_mass=window_mass)._config()
        self.h0 = cfg["value_discretization"]
        self.tail_mass = cfg["tail_mass"]
        self.window_mass = cfg["window_mass"]
        self.h = self.h0
        self.events: List[object] = []
        self.neighbours = None
        self.asym = False
        self.count = 0
        # basic composition's running (eps, delta) sums (exact), None once an event has no closed form
        self.basic: Optional[Tuple[Fraction, Fraction]] = (Fraction(0), Fraction(0))
        # sum of c / z^2 (rounded up, exact) while every leaf is a Gaussian, else None: such a
        # ledger is answered in closed form, as PLDAccountant answers it (pld.gaussian_ledger_mu)
        self.gauss_mu2: Optional[Fraction] = Fraction(0)
        # True while the lanes, sums and grid are not built (Gaussians alone: see extended())
        self.lazy = False
        # per direction: [variance, connect-the-dots excess] at h0 (the refinement rule's sums)
        self.sums: Dict[str, List[float]] = {"remove": [0.0, 0.0], "add": [0.0, 0.0]}
        self.lanes: Dict[str, Tuple[np.ndarray, int, float]] = {"remove": (np.ones(1), 0, 0.0)}
        # per direction: the log-MGF of the composed PMF at +-_T_GRID, on the current grid
        self.mgf: Dict[str, Tuple[np.ndarray, np.ndarray]] = {d: (np.zeros(_T_GRID.size), np.zeros(_T_GRID.size))
                                                             for d in ("remove", "add")}

    # ------------------------------------------------------------------ the grid rule
    def _wanted_grid(self) -> float:
        """The grid :meth:`PLDAccountant._grid_step` would use for this ledger."""
        if self.count == 0:
            return self.h0
        return refined_step(self.h0, [self.sums[d] for d in (["remove", "add"] if self.asym else ["remove"])])

    def _grid_for(self, wanted: float) -> float:
        """The grid for a ledger whose refinement rule asks for ``wanted``: h0, or the coarsest
        h0 / 2^k <= wanted (k <= _MAX_REFINE)."""
        if wanted >= self.h0:
            return self.h0
        return self.h0 / 2.0 ** min(_MAX_REFINE, math.ceil(math.log2(self.h0 / wanted) - 1e-12))

    def _mgf_of(self, leaves, h: float, direction: str) -> Tuple[np.ndarray, np.ndarray]:
        up, dn = np.zeros(_T_GRID.size), np.zeros(_T_GRID.size)
        for leaf, c in leaves:
            if c:
                sp = _step_pmf(leaf, h, self.tail_mass, direction)
                up += c * _log_mgf(sp.p, sp.lo, h, _T_GRID)
                dn += c * _log_mgf(sp.p, sp.lo, h, -_T_GRID)
        return up, dn

    def _accountant(self, h: float) -> PLDAccountant:
        return PLDAccountant(h, tail_mass=self.tail_mass, window_mass=self.window_mass, refine=False)

    # ------------------------------------------------------------------ composition
    def extended(self, event) -> "IncrementalPLD":
        """This ledger with ``event`` composed once more (a new object).  Raises as
        :meth:`PLDAccountant.compose` (TypeError, ValueError for another neighbouring relation
        or a grid too large, UnsupportedEventError) before anything is built."""
        if not isinstance(event, ev.DpEvent):
            raise TypeError(f"expected a DpEvent (dpfast.accounting.events), got {type(event).__name__}")
        nb = ev.event_neighbours(event)
        if self.neighbours is not None and nb != self.neighbours:
            raise ValueError(f"cannot compose a {nb.value!r} event with {self.neighbours.value!r} ones "
                             "(one neighbouring relation per accountant)")
        leaves = _flatten(event, 1, [])
        new = IncrementalPLD.__new__(IncrementalPLD)
        new.__dict__.update(self.__dict__)
        new.__dict__.pop("_full_acc", None)  # the from-scratch cache is of this ledger, not the new one
        new.events = self.events + [event]
        prev = self.basic
        g = basic.approx_dp(event) if prev is not None else None
        new.basic = None if g is None or prev is None else (prev[0] + g[0], prev[1] + g[1])
        new.neighbours = nb
        prev_mu2 = getattr(self, "gauss_mu2", None)
        g2 = gaussian_mu2_terms(leaves) if prev_mu2 is not None else None
        new.gauss_mu2 = None if g2 is None or prev_mu2 is None else prev_mu2 + g2
        if new._gaussian_mu() is not None:
            # Gaussians alone: epsilon() and delta() answer in closed form, so the lanes are not
            # built (discretizing and convolving one Gaussian at epsilon ~64 took seconds a
            # charge); they are built from scratch, once, if another kind of event joins
            new.count += sum(c for _, c in leaves)
            new.lazy = True
            return new
        if getattr(self, "lazy", False):
            new._materialize()
            return new
        new.sums = {d: list(v) for d, v in self.sums.items()}
        for leaf, c in leaves:
            new._add_leaf(leaf, c)
        wanted = new._wanted_grid()
        if wanted < self.h:  # finer grid needed: the whole ledger recomposed
            new._recompose(self._grid_for(wanted))
            return new
        try:
            lanes_e = self._accountant(self.h).compose(event).composed()
        except ValueError:
            if self.h >= self.h0:
                raise
            new._recompose(min(self.h0, 2.0 * self.h))  # this event is too wide for the fine grid
            return new
        dirs = ["remove", "add"] if new.asym else ["remove"]
        new.lanes, new.mgf = {}, dict(self.mgf)
        for d in ("remove", "add"):
            up, dn = self._mgf_of(leaves, self.h, d)
            new.mgf[d] = (self.mgf[d][0] + up, self.mgf[d][1] + dn)
        for d in dirs:
            p1, A1, inf1 = self.lanes.get(d, self.lanes["remove"])
            e = lanes_e.get(d, lanes_e["remove"])
            p = _convolve(p1, e.p)
            p_inf = -math.expm1(math.log1p(-min(inf1, 1.0)) + math.log1p(-min(e.p_inf, 1.0))) \
                if max(inf1, e.p_inf) < 1.0 else 1.0
            new.lanes[d] = new._checked(_trim(p, A1 + e.A, p_inf, *new.mgf[d], self.h, self.window_mass))
        return new

    def _add_leaf(self, leaf, c: int) -> None:
        """Count ``c`` compositions of ``leaf`` into the refinement rule's sums (at h0)."""
        if not c:
            return
        self.count += c
        self.asym = self.asym or not symmetric(leaf)
        for d in ("remove", "add"):
            sp = _step_pmf(leaf, self.h0, self.tail_mass, d)  # raises for unsupported events
            w, _, v = _pld.pmf_moments(sp.p)
            if w > 0:
                self.sums[d][0] += c * v * self.h0 * self.h0
            self.sums[d][1] += c * sp.excess_var

    def _materialize(self) -> None:
        """Build the lanes of a ledger charged while it held Gaussians alone (``lazy``): the
        refinement sums, the grid and the composition from scratch, as for a ledger extended one
        event at a time (ValueError where an event is too wide for any grid, as there)."""
        self.count, self.asym = 0, False
        self.sums = {"remove": [0.0, 0.0], "add": [0.0, 0.0]}
        for event in self.events:
            for leaf, c in _flatten(event, 1, []):
                self._add_leaf(leaf, c)
        self._recompose(self._grid_for(self._wanted_grid()))
        self.lazy = False

    def _checked(self, lane):
        if lane[0].size > MAX_POINTS * 4:
            raise ValueError(f"the composed privacy-loss distribution needs {lane[0].size} grid points at "
                             f"value_discretization={self.h}: use a coarser value_discretization")
        return lane

    def _recompose(self, h: float) -> None:
        """Compose the whole ledger from scratch at grid ``h`` (backing off to coarser grids,
        up to h0, when an event's range is too wide for it), as the accountant does."""
        while True:
            try:
                acc = self._accountant(h)
                for e in self.events:
                    acc.compose(e)
                lanes = acc.composed()
                break
            except ValueError:
                if h >= self.h0:
                    raise
                h = min(self.h0, 2.0 * h)
        self.h = h
        leaves = [lc for e in self.events for lc in _flatten(e, 1, [])]
        self.mgf = {d: self._mgf_of(leaves, h, d) for d in ("remove", "add")}
        # the accountant's lanes are already cut to this window
        self.lanes = {d: self._checked((np.asarray(c.p, dtype=np.float64), c.A, c.p_inf)) for d, c in lanes.items()}

    # ------------------------------------------------------------------ queries
    def _gaussian_mu(self) -> Optional[float]:
        """The composed mu of an all-Gaussian ledger (rounded up), else None: such a ledger is
        answered in closed form, the value :class:`PLDAccountant` reports for it (so a release
        calibrated by that accountant at the budget's epsilon fits: the lanes' discretization is
        a hair looser)."""
        # (getattr: an object pickled before the attribute existed answers by its lanes)
        return mu_from_sum(getattr(self, "gauss_mu2", None)) if PLDAccountant._closed_form else None

    def epsilon(self, delta: float) -> float:
        """Certified (pessimistic) epsilon at ``delta``: max over the lanes, >= 0."""
        mu = self._gaussian_mu()
        if mu is not None:
            return gaussian_ledger_epsilon(mu, delta)
        if getattr(self, "lazy", False):  # (the closed form switched off since: tests)
            self._materialize()
        # the accountant's rounding margin on the finite part of delta (PLDAccountant.get_epsilon):
        # epsilon is read at a delta lowered by it, so round-off cannot report below the exact value.
        r = rounding_margin(self.h)
        e = max(float(ComposedPLD(p, A, self.h, p_inf).epsilon(
                    _finite_moved(delta, p_inf, 1.0 / (1.0 + r)) if delta <= 1.0 - ComposedPLD.NEAR_ONE
                    else delta)[0])
                for p, A, p_inf in self.lanes.values())
        if delta < PLDAccountant.SMALL_DELTA and self.events:
            # Below SMALL_DELTA the untilted lanes' tails are not reliably pessimistic (a budget of
            # 10 Gaussian(5.0) read 5.01416 at 1e-15, exact 5.01471): the accountant recomposes a
            # tilted lane there.  Take its certified value too (from scratch: O(ledger) per charge,
            # for such budgets only).
            e = max(e, self._from_scratch().get_epsilon(delta))
        if self.basic is not None and basic.at_least(delta, self.basic[1]):
            e = min(e, basic.round_up(self.basic[0]))  # both bounds hold (dpfast.accounting.basic)
        return max(e, 0.0)

    def _from_scratch(self) -> PLDAccountant:
        acc = getattr(self, "_full_acc", None)
        if acc is None:
            acc = PLDAccountant(self.h, tail_mass=self.tail_mass, window_mass=self.window_mass)
            for event in self.events:
                acc.compose(event)
            self._full_acc = acc
        return acc

    def delta(self, epsilon: float) -> float:
        """Certified (pessimistic) delta at ``epsilon``: max over the lanes."""
        mu = self._gaussian_mu()
        if mu is not None:
            return gaussian_ledger_delta(mu, epsilon)
        if getattr(self, "lazy", False):
            self._materialize()
        r = rounding_margin(self.h)
        d = min(1.0, max(p_inf + max(0.0, float(ComposedPLD(p, A, self.h, p_inf).delta(epsilon)[0]) - p_inf) * (1.0 + r)
                         for p, A, p_inf in self.lanes.values()))
        if d < PLDAccountant.SMALL_DELTA and self.events:  # see epsilon(): the tilted tail
            d = max(d, self._from_scratch().get_delta(epsilon))
        if self.basic is not None and basic.at_least(epsilon, self.basic[0]):
            d = min(d, basic.round_up(self.basic[1]))
        return d
