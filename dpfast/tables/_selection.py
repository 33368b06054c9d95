"""Private partition selection rules of :func:`dpfast.tables.aggregate` (no pandas needed).

Laplace thresholding (Wilson et al. 2020, "Differentially private SQL with bounded user
contribution") and the optimal truncated-geometric rule (Desfontaines, Voss, Gipson &
Mandayam 2022, "Differentially private partition selection", Theorem 1).  This module imports
only NumPy and dpfast's validators, so users of the formulas (``dpfast.preprocessing``'s
encoders) do not pull pandas in.
"""
from __future__ import annotations

import math

import numpy as np

from dpfast._validation import check_delta, check_epsilon, check_int

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
    b = l0 / epsilon
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

    Floating point: the recurrence runs at ``eps (1 - 2^-40)`` and ``delta (1 - 2^-40)``, so
    the computed values stay below the exact ones for (eps, delta) despite rounding; the draw
    ``U < pi - 2^-52`` with a 53-bit uniform ``U`` releases with probability <= pi.
    """
    n_max = check_int(n_max, "n_max", lo=0)
    if n_max > 10 ** 7:
        raise ValueError(f"n_max must be <= 10**7, got {n_max}")
    l0 = check_int(l0, "l0")
    epsilon = check_epsilon(epsilon, allow_array=False)
    delta = check_delta(delta, allow_zero=False)
    short = _selection_pi(n_max, l0, epsilon, delta)
    pi = np.ones(n_max + 1)
    pi[:short.size] = short
    return pi


def _selection_pi(n_max: int, l0: int, epsilon: float, delta: float) -> np.ndarray:
    """pi(0..m) of :func:`selection_probabilities` up to m = n_max or the first n with pi(n) = 1
    (pi stays 1 beyond: index with ``min(n, size - 1)``)."""
    e = (epsilon / l0) * (1.0 - 2.0 ** -40)
    d = (delta / l0) * (1.0 - 2.0 ** -40)
    e = min(e, 700.0)  # a smaller epsilon is safe (smaller pi); keeps exp finite
    ee, em = math.exp(e), math.exp(-e)
    out = [0.0]
    p = 0.0
    while len(out) <= n_max and p < 1.0:
        p = min(ee * p + d, 1.0 + em * (p + d - 1.0), 1.0)
        out.append(p)
    return np.array(out)
