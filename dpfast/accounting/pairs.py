"""Randomized response's probabilities and the finite dominating pairs shared by the RDP and PLD
registrations: the one home of this math (the mechanism in
:mod:`dpfast.mechanisms.randomized_response` imports :func:`rr_log_probabilities` from here).
Public-internal: not in ``dpfast.accounting.__all__``."""
from __future__ import annotations

import math

import numpy as np


def rr_log_probabilities(epsilon, k: int):
    """(log p, log q) of k-ary randomized response: the one home of its probabilities.

    p = e^eps / (e^eps + k - 1) (the true category), q = 1 / (e^eps + k - 1) (each other one):
    Warner (1965) for k = 2; Wang, Blocki, Li & Jha (2017), "Locally differentially private
    protocols for frequency estimation", Section 4 (direct encoding) for k > 2.  Computed as
    log p = -log(1 + (k - 1) e^-eps), log q = -eps + log p: no overflow for large eps and exact
    for Python ints k of any size (``math.log(k - 1)``).  Used by the mechanism
    (:func:`dpfast.mechanisms.randomized_response_probabilities`) and by :func:`rr_pair`.
    ``epsilon``: a float or float array (not validated).
    """
    e = np.asarray(epsilon, dtype=np.float64)
    log_p = -np.logaddexp(0.0, math.log(k - 1) - e)
    log_q = log_p - e
    if e.ndim == 0:
        return float(log_p), float(log_q)
    return log_p, log_q


def rr_pair(epsilon: float, k: int):
    """Worst-case pair of k-ary randomized response, P = M(x), Q = M(x'), with the k - 2
    categories that are neither x's nor x''s merged into one outcome.

    The privacy loss of k-RR takes the values +eps (the true category of x), -eps (that of
    x') and 0 (the others), so merging outcomes of equal likelihood ratio changes neither the
    Renyi divergences nor the PLD, and costs O(1) for any k (k = 2**64 is fine).  Masses in
    log space: hi = e^eps / (e^eps + k - 1), lo = 1 / (e^eps + k - 1), rest = (k - 2) lo, no
    overflow for large eps or k (lo underflows to 0 above eps ~ 745: then an infinite loss
    atom, a pessimistic answer).
    """
    log_hi, log_lo = rr_log_probabilities(float(epsilon), k)
    hi, lo = math.exp(log_hi), math.exp(log_lo)
    if k == 2:
        return np.array([hi, lo]), np.array([lo, hi])
    rest = math.exp(math.log(k - 2) - epsilon + log_hi)  # (k - 2) q, as (log(k-2) - eps) - L
    return np.array([hi, lo, rest]), np.array([lo, hi, rest])


def approx_dp_pair(epsilon: float, delta: float):
    """The tight dominating pair of (epsilon, delta)-DP (Kairouz, Oh & Viswanath 2015, Thm 2.1;
    Zhu, Dong & Wang 2022, Prop. 8): P = (delta, (1-delta) e^eps/(1+e^eps), (1-delta)/(1+e^eps), 0),
    Q = its mirror image.  Its hockey-stick curve is delta + (1-delta)(e^eps0 - e^eps)_+/(1+e^eps0)."""
    a = math.exp(-float(np.logaddexp(0.0, -epsilon)))  # e^eps/(1+e^eps), no overflow
    b = math.exp(-float(np.logaddexp(0.0, epsilon)))  # 1/(1+e^eps)
    p = np.array([delta, (1 - delta) * a, (1 - delta) * b, 0.0])
    return p, p[::-1].copy()
