"""Private hyperparameter tuning (Papernot & Steinke, ICLR 2022): RDP of "run K times, release the best".

See: :doc:`/theory/erm` ("honest DP-SGD": K ~ Poisson(mu)) and :doc:`/theory/accounting`.
A base algorithm Q is run K times (K random, independent of the data) and the best output is
released.  Statements implemented (Papernot & Steinke 2022):

* **Truncated negative binomial** (Theorem 2), K ~ D_{eta,gamma} with eta > -1, 0 < gamma < 1,
  P[K = k] = (1-gamma)^k / (gamma^-eta - 1) prod_{l<k} (l+eta)/(l+1), k >= 1 (eta = 0: the
  logarithmic distribution).  If Q is (lambda, eps)-RDP and (lambda_hat, eps_hat)-RDP then the
  tuned algorithm is (lambda, eps')-RDP with
      eps' = eps + (1+eta)(1 - 1/lambda_hat) eps_hat + (1+eta) log(1/gamma)/lambda_hat
             + log(E[K])/(lambda - 1),
  E[K] = eta (1-gamma) / (gamma (1 - gamma^eta)) (eta != 0), (1/gamma - 1)/log(1/gamma) (eta = 0).
  lambda_hat is optimized over the accountant's orders (and lambda_hat = 1, where the eps_hat term
  vanishes).
* **Poisson** (Theorem 6), K ~ Poisson(mu): if Q is (lambda, eps)-RDP and (eps_hat, delta_hat)-DP
  with e^eps_hat <= 1 + 1/(lambda - 1), the tuned algorithm is
  (lambda, eps + mu delta_hat + log(mu)/(lambda - 1))-RDP (mu >= 1 required here: below 1
  the bound can go negative).  delta_hat is taken at
  eps_hat = log(1 + 1/(lambda-1)) from the base's own RDP curve (improved conversion), or from a
  user-supplied ``delta_of_epsilon``.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

from dpfast._validation import as_array, check_real
from dpfast.accounting import events as ev
from dpfast.accounting.events import check_tnb_params
from dpfast.accounting.rdp import (
    DEFAULT_ORDERS,
    _prep,
    check_orders,
    rdp_curve,
    rdp_to_delta,
)

__all__ = [
    "tnb_expected_count",
    "tuning_rdp_truncated_negative_binomial",
    "tuning_rdp_poisson",
]


def _tnb_log_expected_count(eta: float, gamma: float) -> float:
    """log E[K] of D_{eta,gamma}, in log space (no overflow for tiny gamma, no 0/0 for tiny eta).

    E[K] = eta (1-gamma) / (gamma (1 - gamma^eta)); with L = log gamma < 0,
    eta / (1 - gamma^eta) = 1 / (-expm1(eta L) / eta), and -expm1(x)/eta = -L (1 + x/2 + x^2/6 + ...)
    for tiny x = eta L (subnormal eta would lose its digits in the quotient); eta = 0 is the limit
    1 / (-L).
    """
    L = math.log(gamma)
    x = eta * L
    if abs(x) < 1e-5:
        # -expm1(x)/eta = -L (1 + x/2 + x^2/6 + x^3/24 + ...); the omitted terms are < 1e-20
        log_ratio = -math.log(-L) - math.log1p(x / 2 + x * x / 6 + x ** 3 / 24)
    else:
        log_ratio = math.log(eta) - math.log(-math.expm1(x)) if eta > 0 else \
            math.log(-eta) - math.log(math.expm1(x))
    return log_ratio + math.log1p(-gamma) - L


def tnb_expected_count(eta: float, gamma: float) -> float:
    """E[K] of the truncated negative binomial D_{eta,gamma} (Papernot & Steinke 2022, Sec. 2):
    eta (1-gamma) / (gamma (1 - gamma^eta)), and (1/gamma - 1)/log(1/gamma) at eta = 0
    (``inf`` when it exceeds the float range)."""
    eta, gamma = check_tnb_params(eta, gamma)
    lk = _tnb_log_expected_count(eta, gamma)
    try:
        return math.exp(lk)
    except OverflowError:
        return math.inf


def tuning_rdp_truncated_negative_binomial(orders, base_rdp, eta: float, gamma: float,
                                           hat_orders=None, hat_rdp=None) -> np.ndarray:
    """RDP curve of tuning with K ~ D_{eta,gamma} (Theorem 2; see the module docstring).

    ``base_rdp`` is the base algorithm's RDP at ``orders``; lambda_hat ranges over ``hat_orders``
    (default: ``orders``) with RDP ``hat_rdp`` (default: ``base_rdp``), and lambda_hat = 1.
    """
    a = check_orders(orders)
    r = as_array(base_rdp, "base_rdp", np.float64)
    if r.shape != a.shape:
        raise ValueError("base_rdp must have one value per order")
    eta, gamma = check_tnb_params(eta, gamma)
    log_ek = _tnb_log_expected_count(eta, gamma)
    ha = a if hat_orders is None else check_orders(hat_orders)
    # a NaN hat RDP made every candidate NaN and the curve NaN: refused (one value per hat order, >= 0)
    hr = r if hat_rdp is None else _prep(ha, hat_rdp)[1]
    with np.errstate(invalid="ignore"):
        cand = (1 + eta) * (1 - 1 / ha) * hr + (1 + eta) * math.log(1 / gamma) / ha
    best = min(float(np.nanmin(cand)), (1 + eta) * math.log(1 / gamma))
    return r + best + log_ek / (a - 1)


def tuning_rdp_poisson(orders, base_rdp, mu: float,
                       delta_of_epsilon: Optional[Callable[[float], float]] = None) -> np.ndarray:
    """RDP curve of tuning with K ~ Poisson(mu) (Theorem 6; see the module docstring)."""
    a = check_orders(orders)
    r = as_array(base_rdp, "base_rdp", np.float64)
    if r.shape != a.shape:
        raise ValueError("base_rdp must have one value per order")
    mu = check_real(mu, "mu")
    if not mu >= 1 or math.isinf(mu):
        # For mu < 1 the bound eps + mu delta_hat + log(mu)/(lambda - 1) can be negative (it
        # would certify 0-RDP for a mechanism that leaks), so it cannot hold there; mu >= 1 is
        # also the domain of dp-accounting's implementation of this theorem.
        raise ValueError(f"mu must be finite and >= 1, got {mu!r}")
    out = np.empty(a.shape)
    for k, lam in enumerate(a):
        if math.isinf(lam):
            out[k] = math.inf
            continue
        eps_hat = math.log1p(1.0 / (lam - 1.0))
        if delta_of_epsilon is not None:
            dh = float(delta_of_epsilon(eps_hat))
        else:
            dh = rdp_to_delta(a, r, eps_hat)[0]
        out[k] = r[k] + mu * dh + math.log(mu) / (lam - 1.0)
    return np.maximum(out, 0.0)


# the RDP accountant's registration of Tuned (next to the formulas it uses)
@rdp_curve.register
def _(event: ev.Tuned, orders):
    r = np.asarray(rdp_curve(event.event, orders), dtype=np.float64)
    if event.distribution == "poisson":
        return tuning_rdp_poisson(orders, r, event.mean)
    hat = np.unique(np.concatenate([orders, DEFAULT_ORDERS]))
    return tuning_rdp_truncated_negative_binomial(orders, r, event.eta, event.gamma, hat,
                                                  rdp_curve(event.event, hat))
