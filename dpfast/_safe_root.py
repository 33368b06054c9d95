"""The one safe-side inversion behind every calibration in dpfast.

Every calibration inverts a monotone privacy figure: the smallest noise (sigma, lambda, a noise
multiplier, epsilon itself...) whose delta or epsilon meets a target, or the largest mu.  A root
finder may stop a hair on the unsafe side of the root; what dpfast promises is a value that
*satisfies* the bound as evaluated.  :func:`safe_root` is the single implementation of that
promise (hand-written searches were once found returning unsafe values, and eight of them had
grown in the package): bracket geometrically in log x, Brent's method (Brent 1973, *Algorithms
for Minimization without Derivatives*, ch. 4; ``scipy.optimize.brentq``) in log x to the
tolerance, then bisection of the tightest *verified* bracket; the answer is always the bracket's
end whose excess was evaluated and found <= 0.  Every loop is bounded by a fixed number of
evaluations.  ``tests/test_safe_root.py`` fails when a root search is written anywhere else.
"""
from __future__ import annotations

import math
from typing import Callable

from scipy import optimize

__all__ = ["safe_root", "smallest_safe_root", "NoSafeValue"]

_TINY = 5e-324  # the smallest positive double
_HUGE = 1.7976931348623157e308  # the largest double
#: Caps of the three stages (each far above what a search that can end needs: the doubling
#: bracket leaves the doubles within ~12 steps each way, Brent converges in < 60 iterations, and
#: bisection of a bracket reaches adjacent doubles within ~64 + 11 (geometric) + 53 steps).
MAX_BRACKET = 64
#: Step reductions of the bracketing after a point where the excess could not be computed.
MAX_SHRINK = 16
MAX_BRENT = 200
MAX_BISECT = 2200


class NoSafeValue(ValueError):
    """No value in the searched range satisfies the bound (raised by :func:`safe_root`)."""


def safe_root(
    excess: Callable[[float], float],
    start: float,
    *,
    rtol: float,
    xtol: float = 0.0,
    lo: float = 0.0,
    hi: float = _HUGE,
    increasing: bool = False,
    smooth: bool = True,
    step: float = math.log(2.0),
) -> float:
    """The safe end of the root of a monotone ``excess``, verified: ``excess(result) <= 0``.

    Parameters
    ----------
    excess : callable float -> float or bool
        How far x is from satisfying the bound (> 0: not satisfied; <= 0: satisfied).  A bool
        is read as "not satisfied" (True) or "satisfied" (False).  An evaluation that raises
        ``ValueError`` or returns NaN counts as not satisfied: it is never returned.
    start : float
        Where the geometric bracketing starts (clamped into [lo, hi]).
    rtol, xtol : float
        The result is within ``max(xtol, rtol * result)`` of the unsafe side (rtol = 0: the
        adjacent double).
    lo, hi : float
        The searched range, 0 <= lo < hi <= the largest double.
    increasing : bool
        False: ``excess`` is non-increasing; the result is the smallest x in [lo, hi] with
        ``excess(x) <= 0`` (``lo`` when lo satisfies it).  True: ``excess`` is non-decreasing;
        the result is the largest such x (``hi`` when hi satisfies it).
    smooth : bool
        Whether ``excess`` is continuous enough for Brent's method; False (a yes/no predicate)
        goes from the bracket straight to bisection.
    step : float
        First step of the bracketing in log x (it doubles at every step).

    Returns
    -------
    float
        A point at which ``excess`` was evaluated and was <= 0.

    Raises
    ------
    NoSafeValue
        (a ValueError) when no point of [lo, hi] satisfies the bound; the message names the
        range, and the last ``ValueError`` raised by ``excess`` is chained.

    Notes
    -----
    The search runs in u = +-log x (the sign making the excess non-increasing in u): geometric
    bracketing from ``start`` with doubling steps (a step that lands where ``excess`` raises --
    not computable there, e.g. a calibration asked for an epsilon it cannot reach -- is taken
    again from the last unsafe point at a quarter of its length, up to MAX_SHRINK times, so that
    a region of failures beyond the root is not stepped into past the root), Brent's method to
    ``rtol`` / 4 in u, then
    bisection of the tightest bracket [unsafe, safe] among all evaluations (arithmetic in x once
    its ends are within a factor 2, geometric before), until it is within the tolerance or no
    double lies strictly between its ends.  At most MAX_BRACKET + MAX_BRENT + MAX_BISECT + 4
    evaluations (+ MAX_SHRINK); a non-monotone (noisy) excess still gives a point at which it was <= 0.
    """
    lo, hi, start = float(lo), float(hi), float(start)
    if not (0.0 <= lo < hi <= _HUGE):
        raise ValueError(f"the search needs 0 <= lo < hi <= {_HUGE!r}, got lo={lo!r}, hi={hi!r}")
    if not (rtol >= 0 and xtol >= 0):
        raise ValueError(f"rtol and xtol must be >= 0, got {rtol!r}, {xtol!r}")
    if not 0.0 < start < math.inf:
        raise ValueError(f"the search needs a finite starting point > 0, got {start!r}")
    sgn = 1.0 if increasing else -1.0  # x is safe below the root (increasing) or above it
    cache: dict[float, float] = {}
    failures: list[ValueError] = []

    failed: set = set()  # points where excess raised: not computable (neither side is known)

    def ev(x: float) -> float:
        """excess(x) as a finite float (+1e300: not satisfied), cached."""
        if x not in cache:
            try:
                v = excess(x)
            except ValueError as exc:  # not computable: not verified, never returned
                failures.append(exc)
                failed.add(x)
                v = math.inf
            v = float(v) if not isinstance(v, bool) else (1.0 if v else -1.0)
            cache[x] = 1e300 if (math.isnan(v) or v > 1e300) else max(v, -1e300)
        return cache[x]

    def safe(x: float) -> bool:
        return ev(x) <= 0

    # the range in u = -sgn * log x, where the excess does not increase
    x_of = (lambda u: math.exp(-sgn * u))
    u_lo_x, u_hi_x = math.log(max(lo, _TINY)), math.log(hi)
    u_min, u_max = (-u_hi_x, -u_lo_x) if increasing else (u_lo_x, u_hi_x)

    x_min, x_max = (hi, max(lo, _TINY)) if increasing else (max(lo, _TINY), hi)

    def xu(u: float) -> float:
        """x at u; the range's ends exactly at its ends (exp(log x) may differ from x)."""
        if u <= u_min:
            return x_min
        if u >= u_max:
            return x_max
        return min(max(x_of(u), lo if lo > 0 else _TINY), hi)

    def fail() -> NoSafeValue:
        msg = f"no value in [{lo:.6g}, {hi:.6g}] satisfies the bound"
        err = NoSafeValue(msg + (f" ({failures[-1]})" if failures else ""))
        if failures:
            err.__cause__ = failures[-1]
        return err

    # 0. the end of the range on the safe side of everything
    if not increasing and lo == 0.0 and safe(0.0):
        return 0.0
    # 1. geometric bracket in u: u_bad (unsafe) < u_ok (safe)
    u = min(max(-sgn * math.log(start), u_min), u_max)
    d = float(step)
    u_ok = u_bad = None
    if safe(xu(u)):
        u_ok = u
        for _ in range(MAX_BRACKET):
            if u_ok <= u_min:  # the range's end is safe (evaluated just now)
                return xu(u_ok)
            u = max(u_ok - d, u_min)
            d *= 2.0
            if safe(xu(u)):
                u_ok = u
            else:
                u_bad = u
                break
    else:
        u_bad = u
        shrinks = 0
        for _ in range(MAX_BRACKET + MAX_SHRINK):
            if u_bad >= u_max:
                raise fail()
            u = min(u_bad + d, u_max)
            d *= 2.0
            if safe(xu(u)):
                u_ok = u
                break
            if xu(u) in failed and shrinks < MAX_SHRINK:
                # Not computable there (e.g. a calibration asked for an epsilon it cannot
                # reach): the safe side may lie between the last unsafe point and this one, so
                # step again from the unsafe point with a quarter of the step, rather than
                # counting a failure as unsafe and stepping past the root.
                shrinks += 1
                d = (u - u_bad) / 4.0
                continue
            u_bad = u
    if u_ok is None or u_bad is None:
        raise fail()
    # 2. Brent's method in u (its evaluations tighten the verified bracket through the cache)
    if smooth:
        try:
            optimize.brentq(lambda t: ev(xu(t)), u_bad, u_ok, xtol=max(rtol / 4.0, 1e-300),
                            rtol=4 * 2.0 ** -52, maxiter=MAX_BRENT)
        except (ValueError, RuntimeError):  # no sign change seen / not converged: bisection below
            pass
    # 3. bisection in x of the tightest verified bracket
    oks = [x for x, v in cache.items() if v <= 0]
    x_ok = max(oks) if increasing else min(oks)
    bads = [x for x, v in cache.items() if v > 0 and ((x > x_ok) if increasing else (x < x_ok))]
    x_bad = (min(bads) if increasing else max(bads)) if bads else (hi if increasing else lo)
    for _ in range(MAX_BISECT):
        a, b = min(x_ok, x_bad), max(x_ok, x_bad)
        if b - a <= max(xtol, rtol * x_ok):
            break
        if a > 0 and b / a < 2.0:
            mid = a + 0.5 * (b - a)
        else:
            mid = math.sqrt(a) * math.sqrt(b) if a > 0 else b * 2.0 ** -32
        if not a < mid < b:  # no double strictly between: as close as floating point allows
            break
        if safe(mid):
            x_ok = mid
        else:
            x_bad = mid
    return x_ok


def smallest_safe_root(
    excess: Callable[[float], float],
    hi: float,
    *,
    xtol: float,
    rtol: float,
    nudge: Callable[[float], float] | None = None,
) -> float:
    """Smallest x >= 0 with ``excess(x) <= 0``, for ``excess`` non-increasing on [0, inf).

    :func:`safe_root` from ``hi`` (0.0 when ``excess(0) <= 0``); the result is a point where
    ``excess`` was evaluated <= 0.  ``nudge`` is accepted for the callers written before
    :func:`safe_root` (which stepped up from Brent's answer); the verified bracket end replaces it.
    """
    hi = float(hi)
    if not 0.0 < hi < math.inf:
        raise ValueError(f"the search needs a finite starting point > 0, got {hi!r}")
    try:
        return safe_root(excess, hi, rtol=rtol, xtol=xtol)
    except NoSafeValue as exc:
        raise NoSafeValue(f"no finite value satisfies the bound: {exc}") from exc
