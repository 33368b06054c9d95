"""Noise scales from (epsilon, delta, sensitivity), and back.

Spec: ``mechanisms.md`` (Samplers), ``lectures.md`` B2-B4.  Every calibration formula of
dpfast lives here; mechanisms, accountants and estimators call these functions.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, special

from dpfast._safe_root import smallest_safe_root
from dpfast._validation import check_delta, check_epsilon, check_positive

__all__ = [
    "laplace_scale",
    "laplace_epsilon",
    "gaussian_sigma",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_log_delta",
]


def laplace_scale(epsilon, sensitivity=1.0):
    """Scale b = sensitivity / epsilon of the epsilon-DP Laplace mechanism.

    Spec: ``mechanisms.md`` Samplers/Laplace; ``lectures.md`` B2.  ``sensitivity`` is the
    l1 sensitivity (> 0, finite); ``epsilon`` > 0 and finite.  Accepts arrays (broadcast);
    returns a float for scalar input.
    """
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive(sensitivity, "sensitivity")
    return np.divide(sensitivity, epsilon) if np.ndim(epsilon) or np.ndim(sensitivity) else sensitivity / epsilon


def laplace_epsilon(scale, sensitivity=1.0):
    """epsilon = sensitivity / scale: the (exact, pure) epsilon of Lap(scale) noise.

    Inverse of :func:`laplace_scale` (``lectures.md`` B2).  Accepts arrays (broadcast).
    """
    scale = check_positive(scale, "scale")
    sensitivity = check_positive(sensitivity, "sensitivity")
    return np.divide(sensitivity, scale) if np.ndim(scale) or np.ndim(sensitivity) else sensitivity / scale


def _log_sub_exp(la: float, lb: float) -> float:
    """log(e^la - e^lb) for la >= lb."""
    if lb == -math.inf:
        return la
    if lb >= la:
        return -math.inf
    return la + math.log(-math.expm1(lb - la))


def _check_log_delta_args(mu, epsilon) -> None:
    for name, v in (("mu", mu), ("epsilon", epsilon)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a real number >= 0, got {type(v).__name__}")
        if not v >= 0:
            raise ValueError(f"{name} must be >= 0, got {v!r}")


def gaussian_log_delta(mu: float, epsilon: float) -> float:
    """log delta(eps) of the Gaussian mechanism with mu = sensitivity / sigma.

    delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)  (Balle & Wang 2018, Thm 8;
    lectures B4; equivalently the mu-GDP privacy profile, lectures D13).  Evaluated in log
    space so that it stays accurate for delta down to 1e-300.  ``mu`` must be >= 0 (``mu = 0``,
    infinite noise: delta = 0, log delta = -inf) and ``epsilon`` >= 0 (``inf`` allowed).
    """
    try:
        ok = mu >= 0.0 and epsilon >= 0.0  # False for NaN
    except TypeError:
        ok = False
    if not ok:
        _check_log_delta_args(mu, epsilon)
    if epsilon == math.inf or mu == 0.0:
        return -math.inf
    a = mu / 2.0 - epsilon / mu
    b = -mu / 2.0 - epsilon / mu
    return _log_sub_exp(float(special.log_ndtr(a)), epsilon + float(special.log_ndtr(b)))


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """Exact delta(epsilon) of the Gaussian mechanism N(0, sigma^2) with l2 sensitivity.

    This is the tight hockey-stick divergence (Balle & Wang 2018, Theorem 8), valid for
    every epsilon >= 0 (spec ``mechanisms.md``, Gaussian; lectures B4).
    """
    sigma = check_positive(sigma, "sigma", allow_array=False)
    sensitivity = check_positive(sensitivity, "sensitivity", allow_array=False)
    epsilon = float(epsilon)
    if not epsilon >= 0 or math.isnan(epsilon):
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    return math.exp(gaussian_log_delta(sensitivity / sigma, epsilon))


def gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest epsilon >= 0 for which N(0, sigma^2) noise is (epsilon, delta)-DP (exact).

    Inverse of :func:`gaussian_delta` in epsilon, solved with ``scipy.optimize.brentq`` to
    1e-12 relative.  Returns 0.0 when delta >= delta(0).
    """
    sigma = check_positive(sigma, "sigma", allow_array=False)
    sensitivity = check_positive(sensitivity, "sensitivity", allow_array=False)
    delta = check_delta(delta, allow_zero=False)
    mu = sensitivity / sigma
    if mu == math.inf:
        raise ValueError(f"sensitivity / sigma = {sensitivity!r} / {sigma!r} overflows: with (almost) no "
                         "noise no finite epsilon holds; sigma must be > sensitivity * 1e-150")
    if mu > 1e150:  # delta(eps) ~ Phi(mu/2 - eps/mu): the root is ~ mu^2/2 > 1e299, beyond the search
        raise ValueError(f"sensitivity / sigma = {mu:.6g} is too large (epsilon would exceed 1e299); "
                         "sigma must be > sensitivity * 1e-150")
    target = math.log(delta)
    return smallest_safe_root(lambda e: gaussian_log_delta(mu, e) - target,  # decreasing in e
                              max(1.0, mu * mu), xtol=1e-300, rtol=1e-13)


@functools.lru_cache(maxsize=4096)
def _analytic_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    target = math.log(delta)
    # log delta decreases in sigma; solve in log(sigma/sensitivity) for scale invariance.
    f = lambda t: gaussian_log_delta(math.exp(-t), epsilon) - target
    lo, hi = -1.0, 1.0
    while f(lo) < 0:
        lo -= 2.0
    while f(hi) > 0:
        hi += 2.0
    t = optimize.brentq(f, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500)
    sigma = sensitivity * math.exp(t)
    if not sigma < math.inf:
        raise ValueError(f"the Gaussian noise sigma for sensitivity={sensitivity!r}, epsilon={epsilon!r}, "
                         f"delta={delta!r} overflows a double; use a smaller sensitivity (rescale the query)")
    # brentq may land a hair on the wrong side; the smallest *valid* sigma is what is promised.
    while gaussian_log_delta(sensitivity / sigma, epsilon) > target:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def gaussian_sigma(epsilon, delta: float, sensitivity=1.0, calibration: str = "analytic"):
    """Noise standard deviation for the (epsilon, delta)-DP Gaussian mechanism.

    Parameters
    ----------
    epsilon : float or array
        > 0.
    delta : float
        In (0, 1).
    sensitivity : float or array
        l2 sensitivity, > 0.
    calibration : {"analytic", "classical"}
        ``"analytic"``: the smallest sigma with
        Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D) <= delta (Balle & Wang 2018,
        Theorem 8; lectures B4), solved to 1e-12 relative with ``scipy.optimize.brentq``;
        exact for every epsilon.
        ``"classical"``: D sqrt(2 ln(1.25/delta)) / eps (Dwork & Roth, Thm A.1; lectures B3),
        valid for epsilon < 1 only, so epsilon >= 1 raises.

    Returns
    -------
    float for scalar ``epsilon`` and ``sensitivity``, else an ndarray of their broadcast shape.

    Spec: ``mechanisms.md`` Samplers/Gaussian; ``lectures.md`` B3, B4, H1.11-13.
    Test fact (spec): eps=1, delta=1e-5, D=1 gives classical 4.8448 and analytic 3.7306.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta, allow_zero=False)
    sensitivity = check_positive(sensitivity, "sensitivity")
    if calibration == "analytic" and type(epsilon) is float and type(sensitivity) is float:
        return _analytic_sigma(epsilon, delta, sensitivity)  # fast path (cached)
    if calibration == "classical":
        if np.any(np.asarray(epsilon) >= 1):
            raise ValueError(
                "the classical Gaussian calibration holds only for epsilon < 1; "
                "use calibration='analytic' (exact for every epsilon)"
            )
        c = math.sqrt(2.0 * math.log(1.25 / delta))
        if np.ndim(epsilon) == 0 and np.ndim(sensitivity) == 0:
            return _finite_sigma(sensitivity * c / epsilon)
        with np.errstate(over="ignore"):
            return _finite_sigma(np.multiply(sensitivity, c) / epsilon)
    if calibration != "analytic":
        raise ValueError(f"calibration must be 'analytic' or 'classical', got {calibration!r}")
    if np.ndim(epsilon) == 0 and np.ndim(sensitivity) == 0:
        return _analytic_sigma(epsilon, delta, sensitivity)
    eps_b, sens_b = np.broadcast_arrays(np.asarray(epsilon, float), np.asarray(sensitivity, float))
    # sigma is linear in the sensitivity: solve once per distinct epsilon.
    uniq, inv = np.unique(eps_b, return_inverse=True)
    unit = np.array([_analytic_sigma(float(e), delta, 1.0) for e in uniq])
    with np.errstate(over="ignore"):
        return _finite_sigma(unit[inv].reshape(eps_b.shape) * sens_b)


def _finite_sigma(sigma):
    """sigma, refusing a value that overflowed (sensitivity / epsilon too large for a double)."""
    if not np.all(np.isfinite(sigma)):
        raise ValueError("the Gaussian noise sigma overflows a double (sensitivity / epsilon too large); "
                         "rescale the query")
    return sigma
