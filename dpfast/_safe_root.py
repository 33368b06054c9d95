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


def smallest_safe_root(
    excess: Callable[[float], float],
    hi: float,
    *,
    xtol: float,
    rtol: float,
    nudge: Callable[[float], float] = _next_up,
) -> float:
    """Smallest x >= 0 with ``excess(x) <= 0``, for ``excess`` non-increasing on [0, inf).

    Returns 0.0 when ``excess(0) <= 0``.  Otherwise ``hi`` is doubled until ``excess(hi) <= 0``,
    the root is found by brentq to (``xtol``, ``rtol``), and the result is moved up by ``nudge``
    (default: to the next double) until ``excess`` is <= 0 there: never a point on the unsafe side.
    """
    if excess(0.0) <= 0:
        return 0.0
    while excess(hi) > 0:
        hi *= 2.0
    x = optimize.brentq(excess, 0.0, hi, xtol=xtol, rtol=rtol, maxiter=500)
    while excess(x) > 0:
        x = nudge(x)
    return x
