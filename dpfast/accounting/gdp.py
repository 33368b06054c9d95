"""f-DP and Gaussian DP: trade-off functions, mu-GDP composition, conversions, CLT.

See: :doc:`/theory/accounting` ("f-DP / GDP").
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import special

from dpfast._safe_root import NoSafeValue, safe_root
from dpfast._validation import as_array, check_delta, check_nonnegative, check_positive, check_real
from dpfast.accounting._closed_forms import _excess_over, gaussian_epsilon, gaussian_log_delta

__all__ = [
    "gaussian_tradeoff",
    "approx_dp_tradeoff",
    "gdp_compose",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "CLTResult",
    "clt_mu_poisson_gaussian",
]


def _mu(mu, name: str = "mu") -> float:
    return check_nonnegative(check_real(mu, name), name)


def gaussian_tradeoff(alpha, mu: float):
    """G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu), the mu-GDP trade-off function (Dong, Roth & Su 2022, Definition 2.7).

    ``alpha`` in [0, 1] (array or scalar); G_0 = 1 - alpha.
    """
    mu = _mu(mu)
    a = as_array(alpha, "alpha", np.float64)
    if np.isnan(a).any() or (a < 0).any() or (a > 1).any():
        raise ValueError("alpha must lie in [0, 1]")
    out = special.ndtr(special.ndtri(1.0 - a) - mu)
    return float(out) if out.ndim == 0 else out


def approx_dp_tradeoff(alpha, epsilon: float, delta: float = 0.0):
    """f_{eps,delta}(alpha) = max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)) (Dong, Roth & Su 2022, Proposition 2.5)."""
    e = check_nonnegative(check_real(epsilon, "epsilon"), "epsilon")
    d = check_delta(delta)
    a = as_array(alpha, "alpha", np.float64)
    if np.isnan(a).any() or (a < 0).any() or (a > 1).any():
        raise ValueError("alpha must lie in [0, 1]")
    # e^eps alpha as exp(eps + log alpha): no overflow (nor inf * 0) at large eps
    with np.errstate(divide="ignore", over="ignore"):
        up = np.exp(e + np.log(a))
    out = np.maximum(0.0, np.maximum(1 - d - up, math.exp(-e) * (1 - d - a))) + 0.0  # no -0.0
    return float(out) if out.ndim == 0 else out


def gdp_compose(mus) -> float:
    """G_{mu_1} x ... x G_{mu_k} = G_{sqrt(sum mu_i^2)} (exact)."""
    m = np.atleast_1d(as_array(mus, "mus", np.float64))
    if np.isnan(m).any() or (m < 0).any() or np.isinf(m).any():
        raise ValueError("every mu must be finite and >= 0")
    return float(math.sqrt(float(np.sum(m * m))))


def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) of mu-GDP (Dong, Roth & Su 2022, Corollary 2.13).

    Exact (``dpfast.calibrate.gaussian_log_delta``); mu = 0 gives 0.
    """
    mu = _mu(mu)
    e = check_real(epsilon, "epsilon")
    if not e >= 0 or math.isnan(e):
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    if mu == 0:
        return 0.0
    return math.exp(gaussian_log_delta(mu, e))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest eps >= 0 with gdp_delta(mu, eps) <= delta (exact inverse)."""
    mu = _mu(mu)
    delta = check_delta(delta, allow_zero=False)
    if mu == 0:
        return 0.0
    return gaussian_epsilon(1.0 / mu, delta)


def gdp_mu(epsilon: float, delta: float) -> float:
    """Largest mu such that mu-GDP is (epsilon, delta)-DP (inverse of :func:`gdp_delta` in mu)."""
    e = check_nonnegative(check_real(epsilon, "epsilon"), "epsilon")
    delta = check_delta(delta, allow_zero=False)
    # the same certified comparison as gaussian_sigma / gaussian_epsilon: log(delta) lowered for
    # the rounding of log and exp (a plain log(delta) target was a hair on the unsafe side)
    excess = _excess_over(delta)
    try:  # excess is non-decreasing in mu: the largest certified mu
        return safe_root(lambda mu: excess(gaussian_log_delta(mu, e)), 1.0, rtol=0.0,
                         lo=5e-324, hi=1e300, increasing=True)
    except NoSafeValue:  # no positive double is certified: 0-GDP (no release) is, trivially
        return 0.0


class CLTResult(NamedTuple):
    """mu of the central-limit approximation; ``approximate`` is always True."""

    mu: float
    approximate: bool


def clt_mu_poisson_gaussian(noise_multiplier: float, sample_rate: float, steps: int) -> CLTResult:
    """CLT approximation mu ~= q sqrt(T (e^{1/sigma^2} - 1)) for DP-SGD (Bu, Dong, Long & Su 2020).

    APPROXIMATE: an asymptotic statement, not a bound -- on the issue's workload it gives an
    epsilon below the tight one.  Never used by dpfast for certified numbers.
    """
    s = check_real(noise_multiplier, "noise_multiplier")
    q = check_real(sample_rate, "sample_rate")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)):
        raise TypeError(f"steps must be an integer, got {type(steps).__name__}")
    s = check_positive(s, "noise_multiplier", allow_array=False)
    if not 0 < q <= 1:
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps!r}")
    # 1/s^2 as (1/s)/s (no overflow of s^2); e^{1/s^2} - 1 may overflow to inf: mu = inf then
    with np.errstate(over="ignore"):
        em1 = float(np.expm1(np.float64(1.0) / s / s))
        return CLTResult(float(q * np.sqrt(np.float64(int(steps)) * em1)), True)
