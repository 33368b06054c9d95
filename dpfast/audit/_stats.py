"""Exact binomial bounds and the certified epsilon lower bound of one event.

(epsilon, delta)-DP of a release M means, for every event E and both orders (D, D') of a
neighbouring pair, ``P[M(D) in E] <= e^epsilon P[M(D') in E] + delta`` (Dwork & Roth 2014,
Definition 2.4).  Any E therefore gives ``epsilon >= log((P[M(D) in E] - delta) / P[M(D') in E])``;
with a one-sided Clopper-Pearson lower bound on the first probability and upper bound on the
second (Clopper & Pearson 1934), each at level ``alpha / 2``, the right-hand side computed from
them is a lower bound on the release's epsilon with confidence ``1 - alpha`` (the method of
Jagielski, Ullman & Oprea 2020 and Nasr et al. 2021).  Vectorised over many events so the event
search costs one ``scipy.special`` call per feature.
"""
from __future__ import annotations

import numpy as np
from scipy import special


def cp_lower(k, n, alpha):
    """One-sided (1 - alpha) Clopper-Pearson lower bound of a binomial proportion (k of n)."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        lo = special.betaincinv(k, n - k + 1.0, alpha)
    return np.where(k <= 0, 0.0, lo)


def cp_upper(k, n, alpha):
    """One-sided (1 - alpha) Clopper-Pearson upper bound of a binomial proportion (k of n)."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        hi = special.betaincinv(k + 1.0, n - k, 1.0 - alpha)
    return np.where(k >= n, 1.0, hi)


def certified_epsilon(k_a, n_a, k_b, n_b, delta: float, alpha: float):
    """``log((p_lo - delta) / q_hi)`` with ``p_lo`` the lower bound of ``k_a / n_a`` and ``q_hi``
    the upper bound of ``k_b / n_b``, each at level ``alpha / 2``; ``-inf`` where ``p_lo <= delta``.

    With confidence ``1 - alpha`` this is <= the true epsilon of any (epsilon, delta)-DP release
    for the one event counted (fixed before the counts were drawn)."""
    p_lo = cp_lower(k_a, n_a, alpha / 2.0)
    q_hi = cp_upper(k_b, n_b, alpha / 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(p_lo - delta) - np.log(q_hi)
    return np.where(p_lo > delta, out, -np.inf)
