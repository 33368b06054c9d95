"""The one search behind every "smallest epsilon that is (epsilon, delta)-DP" in dpfast.

Privacy conversions invert a non-increasing function (delta, or log delta, minus its target) with
``scipy.optimize.brentq``.  Brent's method may stop a hair on the unsafe side of the root; what
dpfast promises is a value that *satisfies* the bound as evaluated, so the result is nudged up
until it does.  Keeping the bracket, the solve and the nudge in one place keeps that promise
uniform (two conversions that did it by hand were once found returning unsafe values).
"""
from __future__ import annotations

import math
from typing import Callable

from scipy import optimize


def _next_up(x: float) -> float:
    return math.nextafter(x, math.inf)


#: Caps of the loops below (a search that has not ended within them cannot end: the doubling
#: leaves the doubles after ~2100 steps, the nudges are far more than any brentq tolerance needs).
MAX_DOUBLINGS = 2100
MAX_NUDGES = 100_000


def smallest_safe_root(
    excess: Callable[[float], float],
    hi: float,
    *,
    xtol: float,
    rtol: float,
    nudge: Callable[[float], float] = _next_up,
) -> float:
    """Smallest x >= 0 with ``excess(x) <= 0``, for ``excess`` non-increasing on [0, inf).

    Returns 0.0 when ``excess(0) <= 0``.  Otherwise ``hi`` is doubled until ``excess(hi) <= 0``
    and a lower end lo > 0 with ``excess(lo) > 0`` is found by dividing by 2^32 (the root may be
    anywhere down to the smallest subnormal: a bracket [0, hi] would need ~1000 bisections to
    reach a root near 1e-300, beyond brentq's iteration cap); the root is found by brentq in
    log x to relative ``rtol`` (and absolute ``xtol``), and the result is moved up by ``nudge``
    (default: to the next double) until ``excess`` is <= 0 there: never a point on the unsafe side.
    Raises ValueError when no finite x satisfies the bound or a loop exceeds its cap.
    """
    if excess(0.0) <= 0:
        return 0.0
    hi = float(hi)
    if not 0.0 < hi < math.inf:
        raise ValueError(f"the search needs a finite starting point > 0, got {hi!r}")
    for _ in range(MAX_DOUBLINGS):
        if excess(hi) <= 0:
            break
        hi *= 2.0
        if not hi < math.inf:
            raise ValueError("no finite value satisfies the bound (the search passed the largest double)")
    else:
        raise ValueError(f"no value up to {hi:.4g} satisfies the bound (search capped)")
    lo = hi
    for _ in range(80):  # 2^-32 per step: below the smallest double after <= 67 steps
        lo = lo * 2.0 ** -32
        if lo == 0.0:
            lo = 5e-324  # the smallest positive double
            if excess(lo) <= 0:
                return lo
            break
        if excess(lo) > 0:
            break
        hi = lo
    if excess(hi) <= 0 and hi <= xtol:
        return hi
    t = optimize.brentq(lambda u: excess(math.exp(u)), math.log(lo), math.log(hi),
                        xtol=max(rtol, 1e-15), rtol=4 * 2.0 ** -52, maxiter=500)
    x = min(max(math.exp(t), lo), hi)
    for _ in range(MAX_NUDGES):
        if excess(x) <= 0:
            return x
        x = nudge(x)
        if not x < math.inf:
            break
    if excess(hi) <= 0:  # the bracket's upper end is a safe point
        return hi
    raise ValueError("the search for the smallest safe value did not settle (nudge loop capped)")
