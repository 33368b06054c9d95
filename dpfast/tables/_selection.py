"""Private partition selection rules of :func:`dpfast.tables.aggregate` (no pandas needed).

Laplace thresholding (Wilson et al. 2020, "Differentially private SQL with bounded user
contribution") and the optimal truncated-geometric rule (Desfontaines, Voss, Gipson &
Mandayam 2022, "Differentially private partition selection", Theorem 1).  This module imports
only NumPy and dpfast's validators, so users of the formulas (``dpfast.preprocessing``'s
encoders) do not pull pandas in.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpfast._validation import check_delta, check_epsilon, check_int
from dpfast.calibrate import laplace_scale

__all__ = ["selection_threshold", "selection_probabilities"]


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
    Desfontaines et al. 2022 show the truncated-geometric rule
    (:func:`selection_probabilities`) is optimal; Laplace thresholding is a valid (close)
    alternative.
    """
    l0 = check_int(l0, "l0")
    epsilon = check_epsilon(epsilon, allow_array=False)
    delta = check_delta(delta, allow_zero=False)
    b = float(laplace_scale(epsilon, l0))
    return 1.0 + b * math.log(l0 / (2.0 * delta))


def selection_probabilities(n_max: int, l0: int, epsilon: float, delta: float) -> np.ndarray:
    """Release probabilities ``pi(0..n_max)`` of the optimal partition-selection rule.

    Desfontaines et al. 2022, Theorem 1: for a unit contributing to one partition, the
    (eps, delta)-DP rule releasing a partition of ``n`` distinct units with the largest
    probability is ``pi(0) = 0`` and
    ``pi(n) = min(e^eps pi(n-1) + delta, 1 + e^-eps (pi(n-1) + delta - 1), 1)``
    (it equals thresholding a truncated two-sided geometric noise).  A unit in up to ``l0``
    partitions: each partition's rule runs at ``(eps/l0, delta/l0)``; the <= l0 decisions a
    unit changes are independent, so basic composition over them gives (eps, delta).

    Floating point: the values returned are the release probabilities actually used, each a
    multiple of ``2^-53``: :func:`dpfast.tables.aggregate` releases a group of ``n`` units iff
    ``U < pi(n)`` for a uniform ``U`` on the grid ``{0, 2^-53, ..., 1 - 2^-53}`` (what
    ``Generator.random`` draws), which happens with probability exactly ``pi(n)``.  The
    recurrence runs on that grid in exact integer arithmetic, from the previous *rounded*
    value, with a lower bound of ``e^eps`` (an upper bound of ``e^-eps``) and ``delta``
    rounded down, each step rounded down: every released probability satisfies both
    inequalities of the theorem exactly, whatever (eps, delta).  Each value is within about
    ``2^-52`` of the real optimum.  A per-group delta ``delta / l0`` below ``2^-53`` cannot be
    realised by that uniform (every pi(n) would round to 0): ``ValueError``.
    """
    n_max = check_int(n_max, "n_max", lo=0)
    if n_max > 10 ** 7:
        raise ValueError(f"n_max must be <= 10**7, got {n_max}")
    l0 = check_int(l0, "l0")
    epsilon = check_epsilon(epsilon, allow_array=False)
    delta = check_delta(delta, allow_zero=False)
    short = _selection_pi(n_max, l0, epsilon, delta)
    pi = np.full(n_max + 1, short[-1])  # constant beyond
    pi[:short.size] = short
    return pi


_GRID_BITS = 53  # Generator.random() draws k 2^-53, k uniform in [0, 2^53)


def _selection_pi(n_max: int, l0: int, epsilon: float, delta: float) -> np.ndarray:
    """pi(0..m) of :func:`selection_probabilities` up to m = n_max or the first n from which pi
    is constant (1): index with ``min(n, size - 1)``; multiples of 2^-53, exact.  A per-group
    delta below 2^-53 raises ``ValueError`` (no group could be released).

    With ``N = 2^53`` and ``pi(n) = k_n / N``: ``k_0 = 0`` and
    ``k_n = min(floor(E k_{n-1}) + D, N - ceil((N - k_{n-1} - D) F), N)`` with ``D =
    floor(delta N / l0)``, ``E <= e^e`` and ``F >= e^-e`` (``e <= eps / l0``): then
    ``k_n / N <= e^e pi(n-1) + delta / l0`` and ``1 - pi(n-1) <= e^e (1 - pi(n)) + delta / l0``
    hold exactly (Python integers), not only up to rounding.
    """
    N = 1 << _GRID_BITS
    e_exact = Fraction(epsilon) / l0
    e = min(float(e_exact), 700.0)  # a smaller epsilon is safe (smaller pi); keeps exp finite
    if Fraction(e) > e_exact:
        e = math.nextafter(e, 0.0)
    # math.exp is within 1 ulp (2^-52 relative): a 2^-50 relative margin makes these bounds
    E = max(1.0, math.exp(e) * (1.0 - 2.0 ** -50))        # <= e^e
    F = min(1.0, math.exp(-e) * (1.0 + 2.0 ** -50))       # >= e^-e
    ea, eb = E.as_integer_ratio()                          # eb, fb: powers of two
    fa, fb = F.as_integer_ratio()
    es, fs = eb.bit_length() - 1, fb.bit_length() - 1
    dfr = Fraction(delta) * N / l0
    D = dfr.numerator // dfr.denominator                   # floor(delta N / l0)
    if D == 0:
        # pi(1) <= delta / l0 < 2^-53 rounds to 0, and then every pi(n) does: no group could
        # ever be released.  Refused rather than run as a rule that never releases.
        raise ValueError(f"the per-group delta of partition selection, delta / max_groups_per_unit = "
                         f"{float(Fraction(delta) / l0):.3g}, is below 2**-53 (the resolution of the uniform "
                         f"the selection draws): raise delta (or its weight) or lower max_groups_per_unit")
    out = [0]
    k = 0
    while len(out) <= n_max and k < N:
        a = ((ea * k) >> es) + D                           # floor(E k) + D
        r = N - k - D
        b = N - (-((-(r * fa)) >> fs)) if r > 0 else N     # N - ceil(r F)
        nk = min(a, b, N)
        if nk == k:  # a fixed point (e.g. delta N / l0 < 1): k_n = k for every later n
            break
        k = nk
        out.append(k)
    return np.array(out, dtype=np.float64) / N             # exact: k <= 2^53
