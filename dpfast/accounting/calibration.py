"""Noise multiplier for a target (epsilon, delta) of DP-SGD-style compositions.

Spec: ``accounting.md``; issue 3 ("calibration ... reuse work across the search").
"""
from __future__ import annotations

import math

from scipy import optimize

from dpfast._validation import check_delta
from dpfast.accounting._descriptions import Gaussian, PoissonSubsampledGaussian
from dpfast.accounting.pld import PLDAccountant
from dpfast.accounting.rdp import RDPAccountant, _check_count

__all__ = ["calibrate_noise_multiplier"]


def _description(sigma: float, q: float):
    return Gaussian(sigma) if q == 1.0 else PoissonSubsampledGaussian(sigma, q)


def _solve(eps_of, target: float, start: float, rtol: float, lo_factor: float = 0.5):
    """Smallest sigma (to relative rtol) with eps_of(sigma) <= target; eps_of is decreasing.

    Bracket geometrically from ``start``, then Brent's method on log eps vs log sigma; returns the
    upper end of the final bracket (whose epsilon was verified <= target)."""
    cache = {}

    def f(ls):
        if ls not in cache:
            e = eps_of(math.exp(ls))
            cache[ls] = (math.log(e) if e > 0 else -745.0) - math.log(target) if math.isfinite(e) else 745.0
        return cache[ls]

    hi = math.log(start)
    if f(hi) > 0:
        lo = hi
        step = math.log(2.0)
        while f(hi) > 0:
            lo, hi = hi, hi + step
            step *= 2
            if hi > math.log(1e8):
                raise ValueError("no noise multiplier up to 1e8 reaches the target epsilon")
    else:
        lo = hi + math.log(lo_factor)
        step = -math.log(lo_factor)
        while f(lo) <= 0:
            hi, lo = lo, lo - step
            step *= 2
            if lo < math.log(1e-6):
                return math.exp(hi)
    xt = rtol / 4
    try:
        optimize.brentq(f, lo, hi, xtol=xt, rtol=1e-15, maxiter=100)
    except ValueError:
        pass
    # tightest verified bracket from the evaluations made
    ok = [x for x, v in cache.items() if v <= 0]
    bad = [x for x, v in cache.items() if v > 0]
    hi = min(ok)
    lo = max([x for x in bad if x < hi], default=hi - 1.0)
    while hi - lo > rtol:
        mid = 0.5 * (lo + hi)
        if f(mid) <= 0:
            hi = mid
        else:
            lo = mid
    return math.exp(hi)


def calibrate_noise_multiplier(target_epsilon: float, delta: float, sample_rate: float, steps: int,
                               accountant: str = "pld", *, value_discretization: float = 1e-4,
                               rtol: float = 1e-3, orders=None) -> float:
    """Smallest noise multiplier z (to relative ``rtol``) for which ``steps`` compositions of the
    Poisson-subsampled Gaussian (rate ``sample_rate``; q = 1: the Gaussian) are
    (target_epsilon, delta)-DP under add/remove neighbours.

    The returned z is always on the safe side: its epsilon (pessimistic PLD, or RDP with the
    improved conversion) was computed and is <= target_epsilon.

    Work is reused across the search: the bracket comes from the cheap RDP calibration (RDP
    epsilons are upper bounds, so the PLD's z is below the RDP one); the PLD search first runs
    on a grid 16 times coarser (still a certified upper bound, so its z is valid), and the final
    refinement at ``value_discretization`` starts from that bracket; Brent's method on
    log epsilon vs log z; discretizations are cached per description.
    """
    e = float(target_epsilon)
    if not e > 0 or math.isinf(e) or math.isnan(e):
        raise ValueError(f"target_epsilon must be finite and > 0, got {target_epsilon!r}")
    delta = check_delta(delta, allow_zero=False)
    q = float(sample_rate)
    if not 0 < q <= 1:
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
    steps = _check_count(steps)
    if steps == 0:
        raise ValueError("steps must be >= 1")
    if accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    if not 0 < rtol < 0.5:
        raise ValueError(f"rtol must be in (0, 0.5), got {rtol!r}")

    def eps_rdp(z):
        return RDPAccountant(orders).compose(_description(z, q), steps).get_epsilon(delta)

    # RDP: start from the GDP/CLT-style guess z ~ q sqrt(T) / mu (any start works)
    guess = max(1e-3, q * math.sqrt(steps) * math.sqrt(2 * math.log(1 / delta)) / e) if q < 1 else \
        math.sqrt(steps * 2 * math.log(1.25 / delta)) / e
    z_rdp = _solve(eps_rdp, e, max(guess, 0.3), rtol if accountant == "rdp" else 1e-2)
    if accountant == "rdp":
        return z_rdp

    def eps_pld(h, refine=True):
        return lambda z: PLDAccountant(h, refine=refine).compose(_description(z, q), steps).get_epsilon(delta)

    h = float(value_discretization)
    coarse = min(16 * h, 0.05)
    z_c = _solve(eps_pld(coarse, False), e, z_rdp, 1e-2, lo_factor=0.8) if coarse > h else z_rdp
    return _solve(eps_pld(h), e, z_c, rtol, lo_factor=0.97)
