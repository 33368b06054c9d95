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


def _real(x, name: str) -> float:
    if isinstance(x, (str, bytes, bool)) or x is None:
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}")
    try:
        v = float(x)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}") from exc
    if math.isnan(v):
        raise ValueError(f"{name} must not be NaN")
    return v


def _description(sigma: float, q: float):
    return Gaussian(sigma) if q == 1.0 else PoissonSubsampledGaussian(sigma, q)


#: Noise multipliers searched: [SIGMA_MIN, SIGMA_MAX] (outside, the answer is refused or clamped).
SIGMA_MIN, SIGMA_MAX = 1e-6, 1e8
#: Smallest accepted ``rtol``: the epsilons compared are themselves accurate to about 1e-12.
RTOL_MIN = 1e-12
#: Cap on the bisection steps of :func:`_solve` (from a bracket of width <= ln(1e14) down to
#: RTOL_MIN takes ~45; the cap only guards against a non-terminating loop).
_MAX_BISECT = 200


def _solve(eps_of, target: float, start: float, rtol: float, lo_factor: float = 0.5):
    """Smallest sigma (to relative rtol) with eps_of(sigma) <= target; eps_of is decreasing.

    Bracket geometrically from ``start`` (within [SIGMA_MIN, SIGMA_MAX]), then Brent's method on
    log eps vs log sigma; returns the upper end of the final bracket (whose epsilon was verified
    <= target).  Every loop is bounded.  A sigma whose epsilon cannot be computed (e.g. a
    privacy-loss range too wide for the grid) counts as not verified."""
    cache = {}
    failure = []

    def f(ls):
        if ls not in cache:
            try:
                e = eps_of(math.exp(ls))
            except ValueError as exc:  # not computable: not verified, so never returned
                failure.append(exc)
                e = math.inf
            cache[ls] = (math.log(e) if e > 0 else -745.0) - math.log(target) if math.isfinite(e) else 745.0
        return cache[ls]

    start = min(max(start, SIGMA_MIN), SIGMA_MAX)
    hi = math.log(start)
    if f(hi) > 0:
        lo = hi
        step = math.log(2.0)
        while f(hi) > 0:
            if hi >= math.log(SIGMA_MAX):
                msg = f"no noise multiplier up to {SIGMA_MAX:g} reaches the target epsilon"
                if failure:
                    raise ValueError(f"{msg} ({failure[-1]})") from failure[-1]
                raise ValueError(msg)
            lo, hi = hi, min(hi + step, math.log(SIGMA_MAX))
            step *= 2
    else:
        lo = hi + math.log(lo_factor)
        step = -math.log(lo_factor)
        while f(lo) <= 0:
            if lo <= math.log(SIGMA_MIN):
                return SIGMA_MIN  # verified; smaller multipliers are not searched
            hi, lo = lo, max(lo - step, math.log(SIGMA_MIN))
            step *= 2
    xt = rtol / 4
    try:
        optimize.brentq(f, lo, hi, xtol=xt, rtol=1e-15, maxiter=100)
    except (ValueError, RuntimeError):  # no sign change / not converged: bisection below
        pass
    # tightest verified bracket from the evaluations made
    ok = [x for x, v in cache.items() if v <= 0]
    bad = [x for x, v in cache.items() if v > 0]
    hi = min(ok)
    lo = max([x for x in bad if x < hi], default=hi - 1.0)
    for _ in range(_MAX_BISECT):
        if hi - lo <= rtol:
            break
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:  # no double strictly between: as close as floating point allows
            break
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
    improved conversion) was computed and is <= target_epsilon.  ``rtol`` is in [1e-12, 0.5);
    the search covers noise multipliers in [1e-6, 1e8] (a target met at 1e-6 returns the
    smallest verified value found; one not met at 1e8 raises ValueError), and every loop in it
    is bounded, so it always returns or raises.

    Work is reused across the search: the bracket comes from the cheap RDP calibration (RDP
    epsilons are upper bounds, so the PLD's z is below the RDP one); the PLD search first runs
    on a grid 16 times coarser (still a certified upper bound, so its z is valid), and the final
    refinement at ``value_discretization`` starts from that bracket; Brent's method on
    log epsilon vs log z; discretizations are cached per description.
    """
    e = _real(target_epsilon, "target_epsilon")
    if not 0 < e < math.inf:
        raise ValueError(f"target_epsilon must be finite and > 0, got {target_epsilon!r}")
    delta = check_delta(delta, allow_zero=False)
    q = _real(sample_rate, "sample_rate")
    if not 0 < q <= 1:
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
    steps = _check_count(steps)
    if steps == 0:
        raise ValueError("steps must be >= 1")
    if not isinstance(accountant, str) or accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    rtol = _real(rtol, "rtol")
    if not RTOL_MIN <= rtol < 0.5:
        raise ValueError(f"rtol must be in [{RTOL_MIN:g}, 0.5), got {rtol!r}")
    h = _real(value_discretization, "value_discretization")
    if not 0 < h <= 1:
        raise ValueError(f"value_discretization must be in (0, 1], got {value_discretization!r}")

    def eps_rdp(z):
        return RDPAccountant(orders).compose(_description(z, q), steps).get_epsilon(delta)

    # RDP: start from the GDP/CLT-style guess z ~ q sqrt(T) / mu (any start works)
    guess = max(1e-3, q * math.sqrt(steps) * math.sqrt(2 * math.log(1 / delta)) / e) if q < 1 else \
        math.sqrt(steps * 2 * math.log(1.25 / delta)) / e
    z_rdp = _solve(eps_rdp, e, max(guess, 0.3), rtol if accountant == "rdp" else 1e-2)
    if accountant == "rdp" or z_rdp == SIGMA_MIN:  # (the PLD's multiplier is below the RDP one)
        return z_rdp

    def eps_pld(h, refine=True):
        return lambda z: PLDAccountant(h, refine=refine).compose(_description(z, q), steps).get_epsilon(delta)

    coarse = min(16 * h, 0.05)
    z_c = _solve(eps_pld(coarse, False), e, z_rdp, 1e-2, lo_factor=0.8) if coarse > h else z_rdp
    return _solve(eps_pld(h), e, z_c, rtol, lo_factor=0.97)
