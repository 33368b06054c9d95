"""Discretization of one mechanism's privacy-loss distribution on the grid h*Z.

See: :doc:`/theory/accounting` ("Pessimistic discretization").  Every function returns a
:class:`StepPMF`: P-masses of a *pessimistic* discrete pair (connect-the-dots, Doroshenko,
Ghazi, Kamath, Kumar & Manurangsi 2022: its hockey-stick curve interpolates the true one by
chords in e^eps, so it dominates the mechanism and compositions of it are upper bounds) and of
an *optimistic* companion whose losses are never above the true ones (so composed deltas are
lower bounds).  For the floor-rounded companion, ``opt_shift`` is a lower bound on the mean
rounding deficit E[min(L - L_opt, h)] (Jensen in each bin: E[L | bin] >= log(dP/dQ)); the
accountant adds back sum(count * opt_shift) - t, valid except with probability
exp(-2 t^2 / (K h^2)) by Hoeffding's inequality (the deficits are independent and in [0, h]).  Only P-masses are needed: delta(eps) = E_P[(1 - e^(eps - L))_+] + P(L = inf).
The native kernels are in ``csrc/pld/pld.hpp`` (module ``dpfast._pld``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from dpfast import _pld

__all__ = ["StepPMF", "MAX_POINTS"]

#: Largest number of grid points of one mechanism's discretized PLD (memory bound: 8 bytes each).
MAX_POINTS = 20_000_000


@dataclass(frozen=True)
class StepPMF:
    """P-masses on losses (lo + j) h (pessimistic) and (opt_lo + j) h (optimistic), plus +inf atoms."""

    h: float
    lo: int
    p: np.ndarray
    p_inf: float
    opt_lo: int
    opt: np.ndarray
    opt_inf: float
    opt_shift: float = 0.0  # lower bound on E[min(L - L_opt, h)] (Hoeffding correction)
    excess_var: float = 0.0  # variance added by connect-the-dots (refinement decision)


def _check_size(n: int, h: float, what: str) -> None:
    if n > MAX_POINTS:
        raise ValueError(
            f"the privacy-loss range of {what} needs {n} grid points at value_discretization={h}; "
            f"more than the limit {MAX_POINTS}: use a coarser value_discretization"
        )


def _index_range(e_lo: float, e_hi: float, h: float, what: str):
    """Grid indices (i_lo, i_hi) = (floor(e_lo/h) - 1, ceil(e_hi/h) + 1), refused with a
    ValueError (before any float-to-int conversion can overflow) when the range needs more
    than :data:`MAX_POINTS` points or is not finite."""
    span = (e_hi - e_lo) / h
    if not (math.isfinite(e_lo) and math.isfinite(e_hi) and span <= MAX_POINTS):
        raise ValueError(
            f"the privacy-loss range of {what}, [{e_lo:.4g}, {e_hi:.4g}], needs more than {MAX_POINTS} "
            f"grid points at value_discretization={h}: the mechanism's parameters give essentially no "
            f"privacy (use RDP accounting, or a coarser value_discretization)"
        )
    return math.floor(e_lo / h) - 1, math.ceil(e_hi / h) + 1


#: Noise multipliers above this are accounted as this one (pessimistic: less noise dominates
#: more noise); every loss is then below ~1e-100 in magnitude, far below any grid step, and
#: z^2 stays finite in the kernels.
SIGMA_CAP = 1e100


def _z(tail: float) -> float:
    return float(-special.ndtri(tail))


def subsampled_gaussian_pmf(sigma: float, q: float, direction: str, h: float, tail: float) -> StepPMF:
    """Remove or add pair of the Poisson-subsampled Gaussian (q = 1: the Gaussian mechanism).

    Truncation: losses are kept on [e_lo, e_hi] where the mass outside is < ``tail``
    (pessimistically: mass above goes to +inf by connect-the-dots, mass below is moved up).
    """
    z = _z(tail)
    sigma = min(sigma, SIGMA_CAP)
    l1q = math.log1p(-q) if q < 1 else -math.inf
    lq = math.log(q)

    def loss_remove(u):
        # log(1 - q + q e^{(2x - 1)/(2 sigma^2)}) with u = x - 1/2, as (u/sigma)/sigma so that a
        # tiny sigma gives inf (refused below), not a ZeroDivisionError or an overflowed sigma^2
        with np.errstate(over="ignore"):
            return float(np.logaddexp(l1q, lq + np.float64(u) / sigma / sigma))

    if direction == "remove":
        e_hi = loss_remove(0.5 + sigma * z)
        e_lo = l1q if q < 1 else loss_remove(-sigma * z - 0.5)
    elif direction == "add":
        e_hi = -l1q if q < 1 else -loss_remove(-sigma * z - 0.5)
        e_lo = -loss_remove(sigma * z - 0.5)
    else:
        raise ValueError(f"direction must be 'remove' or 'add', got {direction!r}")
    i_lo, i_hi = _index_range(e_lo, e_hi, h, f"the subsampled Gaussian (noise_multiplier={sigma:.4g})")
    n = i_hi - i_lo + 1
    _check_size(n, h, "the subsampled Gaussian")
    pess, opt, pinf, shift, ex = _pld.subsampled_gaussian_ctd(sigma, q, direction == "remove", float(i_lo), h, n)
    return StepPMF(h, i_lo, pess, float(pinf), i_lo, opt, 0.0, float(shift), float(ex))


def _bins_from_atoms(losses, pm, qm, i0: int, n: int, h: float, dP, dQ):
    j = np.ceil(np.asarray(losses) / h).astype(np.int64) - i0
    j = np.clip(j, 0, n)
    np.add.at(dP, j, pm)
    np.add.at(dQ, j, qm)


def discrete_pair_pmf(p: np.ndarray, q: np.ndarray, h: float) -> StepPMF:
    """Finite pair (P, Q): atoms at log(p/q), P(L = inf) = P(q = 0)."""
    keep = p > 0
    p, q = p[keep], q[keep]
    finite = q > 0
    p_inf = float(p[~finite].sum())
    pf, qf = p[finite], q[finite]
    if pf.size == 0:
        return StepPMF(h, 0, np.zeros(1), p_inf, 0, np.zeros(1), p_inf)
    losses = np.log(pf) - np.log(qf)
    i_lo, i_hi = _index_range(float(losses.min()), float(losses.max()), h, "the discrete pair")
    n = i_hi - i_lo + 1
    _check_size(n, h, "the discrete pair")
    dP = np.zeros(n + 1)
    dQ = np.zeros(n + 1)
    _bins_from_atoms(losses, pf, qf, i_lo, n, h, dP, dQ)
    pess, opt, pinf, shift, ex = _pld.ctd_split(dP, dQ, float(i_lo), h)
    return StepPMF(h, i_lo, pess, float(pinf) + p_inf, i_lo, opt, p_inf, float(shift), float(ex))


def laplace_pmf(t: float, h: float) -> StepPMF:
    """Laplace mechanism with sensitivity/scale = t (scale 1, sensitivity t).

    P = Lap(0,1), Q = Lap(t,1), L(x) = |x - t| - |x|: atoms P(L = t) = 1/2, P(L = -t) = e^-t/2,
    Q(L = -t) = 1/2, Q(L = t) = e^-t/2; on (-t, t) the P-density of L is e^(-(t-l)/2)/4 and the
    Q-density e^(-(t+l)/2)/4 (change of variables x = (t - l)/2).
    """
    i_lo, i_hi = _index_range(-t, t, h, f"the Laplace mechanism (sensitivity/scale={t:.4g})")
    n = i_hi - i_lo + 1
    _check_size(n, h, "the Laplace mechanism")
    edges = (i_lo + np.arange(n)) * h
    a = np.concatenate([[-np.inf], edges])  # bin j = (a_j, b_j]
    b = np.concatenate([edges, [np.inf]])
    ac = np.clip(a, -t, t)
    bc = np.clip(b, -t, t)
    w = np.maximum(bc - ac, 0.0)
    em = -np.expm1(-w / 2)
    dP = 0.5 * np.exp(-(t - bc) / 2) * em
    dQ = 0.5 * np.exp(-(t + ac) / 2) * em
    _bins_from_atoms(np.array([t, -t]), np.array([0.5, 0.5 * math.exp(-t)]),
                     np.array([0.5 * math.exp(-t), 0.5]), i_lo, n, h, dP, dQ)
    pess, opt, pinf, shift, ex = _pld.ctd_split(dP, dQ, float(i_lo), h)
    return StepPMF(h, i_lo, pess, float(pinf), i_lo, opt, 0.0, float(shift), float(ex))


def _from_dots(masses: np.ndarray, pinf: float, worst: float, i_lo: int, m: int, h: float,
               what: str) -> StepPMF:
    if worst < -1e-9:
        raise ValueError(
            f"{what}: the privacy profile is not convex in e^eps (a connect-the-dots mass is "
            f"{worst:.3g} < 0), so it is not the hockey-stick curve of any pair of distributions"
        )
    n = (masses.size - 1) * m + 1
    _check_size(n, h, what)
    p = np.zeros(n)
    p[::m] = masses
    opt = p.copy()
    opt[-1] += pinf  # optimistic: every dot one dot lower, the +inf mass at the top dot
    return StepPMF(h, i_lo, p, float(pinf), i_lo - m, opt, 0.0)


def symmetric_subsampled_gaussian_pmf(sigma: float, q: float, h: float, tail: float) -> StepPMF:
    """Profile max(delta_remove, delta_add) of the subsampled Gaussian, by connect-the-dots."""
    z = _z(tail)
    sigma = min(sigma, SIGMA_CAP)
    with np.errstate(over="ignore"):
        e_hi = float(np.logaddexp(math.log1p(-q), math.log(q) + np.float64(0.5 + sigma * z) / sigma / sigma))
    i_hi = _index_range(-e_hi, e_hi, h, f"the subset-sampled Gaussian (noise_multiplier={sigma:.4g})")[1]
    i_lo = -i_hi
    n = i_hi - i_lo + 1
    _check_size(n, h, "the subset-sampled Gaussian")
    d, pinf, worst = _pld.symmetric_subsampled_gaussian_ctd(sigma, q, float(i_lo), h, n)
    sp = _from_dots(d, pinf, worst, i_lo, 1, h, "the subset-sampled Gaussian")
    return StepPMF(sp.h, sp.lo, sp.p, sp.p_inf, sp.opt_lo, sp.opt, sp.opt_inf, 0.0, h * h / 4.0)


def profile_pmf(delta_fn, h: float, tail: float, step: float, eps_min: float, symmetric: bool) -> StepPMF:
    """Connect-the-dots PLD of a privacy profile (see FromPrivacyProfile)."""
    m = max(1, int(round(step / h)))
    s = m * h
    # upper end: first power of two with delta <= tail, or where delta stops decreasing (+inf atom)
    hi, prev = 1.0, None
    while True:
        dv = float(delta_fn(np.array([hi]))[0])
        if dv <= tail or (prev is not None and dv >= prev * (1 - 1e-12)) or hi >= 4096:
            break
        prev = dv
        hi *= 2.0
    if not symmetric and not abs(eps_min) <= MAX_POINTS * s / 2:
        raise ValueError(
            f"epsilon_min must be in [-{MAX_POINTS * s / 2:.4g}, {MAX_POINTS * s / 2:.4g}] (half the largest "
            f"privacy-loss range the PLD grid holds at profile_step={s}), got {eps_min!r}"
        )
    i_hi = (math.ceil(hi / h / m) + 1) * m
    i_lo = -i_hi if symmetric else math.floor(eps_min / s) * m
    i_hi = max(i_hi, i_lo + 2 * m)  # the profile is known only above epsilon_min: dots up to there
    n_dots = (i_hi - i_lo) // m + 1
    _check_size((n_dots - 1) * m + 1, h, "the privacy profile")
    eps = (i_lo + m * np.arange(n_dots)) * h
    d = np.empty(n_dots)
    if symmetric:
        neg = eps < 0
        d[~neg] = delta_fn(eps[~neg])
        d[neg] = -np.expm1(eps[neg]) + np.exp(eps[neg]) * delta_fn(-eps[neg])
    else:
        d[:] = delta_fn(eps)
    d = np.minimum.accumulate(np.clip(d, 0.0, 1.0))  # a profile is non-increasing
    masses, pinf, worst = _pld.profile_ctd(d, s)
    return _from_dots(masses, pinf, worst, i_lo, m, h, "the privacy profile")
