"""The closed forms of the Laplace and Gaussian mechanisms' calibration: their one home.

:func:`laplace_scale`, :func:`laplace_epsilon`, :func:`gaussian_sigma`, :func:`gaussian_delta`,
:func:`gaussian_epsilon`, :func:`gaussian_log_delta` (re-exported by
:mod:`dpfast.accounting.calibration` and, for users, :mod:`dpfast.calibrate`).  Kept apart from
the accountant searches of :mod:`dpfast.accounting.calibration` so that the accountants
themselves (:mod:`dpfast.accounting.pld` answers ledgers of Gaussians in closed form) can use
them without an import circle.  See :doc:`/theory/mechanisms` (Samplers).
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence, Union, overload

import numpy as np
import numpy.typing as npt
from scipy import special

from dpfast._safe_root import NoSafeValue, safe_root, smallest_safe_root
from dpfast._validation import (
    Delta,
    Epsilon,
    NonNegative,
    Options,
    Positive,
    validate_params,
)

__all__ = [
    "laplace_scale",
    "laplace_epsilon",
    "gaussian_sigma",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_log_delta",
]

# Array arguments of the broadcasting functions: a float (numpy's float64 included) gives a float,
# an array or a sequence an array; other array-likes (a 0-d array) either, as their shape says.
_Array = Union[npt.NDArray[Any], Sequence[float]]
_FloatArray = npt.NDArray[np.float64]


@overload
def laplace_scale(epsilon: float, sensitivity: float = 1.0) -> float: ...
@overload
def laplace_scale(epsilon: _Array, sensitivity: Union[float, _Array] = 1.0) -> _FloatArray: ...
@overload
def laplace_scale(epsilon: float, sensitivity: _Array) -> _FloatArray: ...
@overload
def laplace_scale(epsilon: npt.ArrayLike, sensitivity: npt.ArrayLike = 1.0) -> Union[float, _FloatArray]: ...


@validate_params(epsilon=Epsilon(), sensitivity=Positive())
def laplace_scale(epsilon: Any, sensitivity: Any = 1.0) -> Any:  # (the overloads above type it)
    """Scale b = sensitivity / epsilon of the epsilon-DP Laplace mechanism.

    See: :doc:`/theory/mechanisms` Samplers/Laplace; :doc:`/theory/mechanisms`.  ``sensitivity`` is the
    l1 sensitivity (> 0, finite); ``epsilon`` > 0 and finite.  Accepts arrays (broadcast);
    returns a float for scalar input.
    """
    if type(epsilon) is float and type(sensitivity) is float:  # (checked scalars) without np.ndim's cost
        return sensitivity / epsilon
    return np.divide(sensitivity, epsilon) if np.ndim(epsilon) or np.ndim(sensitivity) else sensitivity / epsilon


@overload
def laplace_epsilon(scale: float, sensitivity: float = 1.0) -> float: ...
@overload
def laplace_epsilon(scale: _Array, sensitivity: Union[float, _Array] = 1.0) -> _FloatArray: ...
@overload
def laplace_epsilon(scale: float, sensitivity: _Array) -> _FloatArray: ...
@overload
def laplace_epsilon(scale: npt.ArrayLike, sensitivity: npt.ArrayLike = 1.0) -> Union[float, _FloatArray]: ...


@validate_params(scale=Positive(), sensitivity=Positive())
def laplace_epsilon(scale: Any, sensitivity: Any = 1.0) -> Any:  # (the overloads above type it)
    """epsilon = sensitivity / scale: the (exact, pure) epsilon of Lap(scale) noise.

    Inverse of :func:`laplace_scale` (:doc:`/theory/mechanisms`).  Accepts arrays (broadcast).
    """
    return np.divide(sensitivity, scale) if np.ndim(scale) or np.ndim(sensitivity) else sensitivity / scale


_U = 2.0 ** -53  # unit roundoff of a double
# Error budgets of SciPy's special functions in units of _U, measured against 50-digit mpmath on
# 9,000 arguments (tests/test_calibrate.py::test_scipy_error_budgets_hold): log_ndtr(x) is within
# 3.8 ulps of |log Phi(x)| + |x| lambda(x) (the second term is its own scaling of the argument),
# erfcx within 7.9 ulps relative.  Used with a 4x margin.
_LOG_NDTR_ULPS = 16.0
_ERFCX_ULPS = 32.0
_LOG2 = math.log(2.0)
_SQRT1_2 = math.sqrt(0.5)


def _mills_bound(x: float, dx: float) -> float:
    """Upper bound of lambda = phi/Phi (the slope of log Phi) on [x - dx, x + dx].

    lambda decreases; lambda(y) <= -y + 1/(-y) < -y + 1 for y <= -1 (Gordon's Mills-ratio bound)
    and lambda(y) <= lambda(-1) < 1.53 for y >= -1, so lambda(y) <= max(-y, 0) + 1.6.
    """
    return max(dx - x, 0.0) + 1.6


@validate_params(mu=NonNegative(allow_inf=True), epsilon=NonNegative(allow_inf=True))
def gaussian_log_delta(mu: float, epsilon: float) -> float:
    """Rigorous upper bound of log delta(eps) of the Gaussian mechanism, mu = sensitivity / sigma.

    delta(eps) = Phi(a) - e^eps Phi(b), a = mu/2 - eps/mu, b = a - mu (Balle & Wang 2018,
    "Improving the Gaussian mechanism for differential privacy", Thm 8; equivalently the mu-GDP
    privacy profile of Dong, Roth & Su 2022, Cor. 2.13).  Evaluated in log space, so it stays
    accurate for delta down to 1e-300, and *rounded up*: the result is >= the exact log delta of
    every noise ratio within relative 2^-51 of ``mu`` (four roundings: ``mu = sensitivity / sigma``
    computed in double, with ``sigma`` and ``sensitivity`` themselves rounded products, is covered), and exceeds it by the
    evaluation's error bound only, typically < 1e-12 relative in delta.  Searches that invert it
    therefore land on the safe side.  ``mu`` must be >= 0 (``mu = 0``, infinite noise: delta = 0,
    log delta = -inf) and ``epsilon`` >= 0 (``inf`` allowed).

    Error bound (why it is an upper bound): write delta = Phi(a) (1 - e^d), d = eps + log Phi(b)
    - log Phi(a) < 0.  The computed a, b are within D = 6u (mu/2 + eps/mu) of the exact ones
    (u = 2^-53: 4u from mu, one rounding of eps/mu and one of the sum).  Each log Phi is known to
    within its evaluation budget plus slope x D, and d to within the sum of those errors; log delta
    <= log Phi(a) + log(1 - e^(d_low)) with d_low the smallest d consistent with them.  The
    subtraction 1 - e^d is where double evaluation loses accuracy (its error is amplified by
    1/(1 - e^d)); bounding d from below keeps the result safe however large the amplification.
    For a < -1 the two log Phi are taken from erfcx, where log Phi(x) = log(erfcx(-x/sqrt2)/2)
    - x^2/2 and the exact identity (b^2 - a^2)/2 = eps leaves d = log erfcx(-b/sqrt2) - log
    erfcx(-a/sqrt2): a difference of O(1) terms instead of O((eps/mu)^2) ones.
    """
    return _log_delta(mu, epsilon)


def _log_delta(mu: float, epsilon: float) -> float:
    """:func:`gaussian_log_delta` on checked arguments (the inner loop of the searches)."""
    if epsilon == math.inf or mu == 0.0:
        return -math.inf
    if mu == math.inf:
        return 0.0  # no noise: delta = 1 at every finite epsilon
    s = mu / 2.0 + epsilon / mu
    a = mu / 2.0 - epsilon / mu
    b = -s
    D = 6.0 * _U * s
    if a < -1.0:
        ta = -a * _SQRT1_2
        tb = s * _SQRT1_2
        ea = float(special.erfcx(ta))
        eb = float(special.erfcx(tb))
        if ea == 0.0 or not ta * ta < math.inf:
            return -math.inf  # log delta <= log Phi(a) < -1e308
        la = math.log(ea)
        lb = math.log(eb) if eb > 0.0 else -math.inf
        A = la - _LOG2 - ta * ta
        # argument errors of t = -x/sqrt2 (D/sqrt2 inherited, two roundings); |(log erfcx)'| <=
        # min(sqrt2, 1/t) for t > 0 (from the Mills-ratio bounds of erfcx)
        dta = D * _SQRT1_2 + 2.0 * _U * ta
        dtb = D * _SQRT1_2 + 2.0 * _U * tb
        ga = min(math.sqrt(2.0), 1.0 / (ta - dta)) if ta > dta else math.sqrt(2.0)
        gb = min(math.sqrt(2.0), 1.0 / (tb - dtb)) if tb > dtb else math.sqrt(2.0)
        ela = 1.01 * _ERFCX_ULPS * _U + ga * dta + _U * abs(la)
        elb = 1.01 * _ERFCX_ULPS * _U + gb * dtb + _U * abs(lb)
        eA = ela + dta * (2.0 * ta + dta) + 4.0 * _U * (abs(la) + _LOG2 + ta * ta)
        d = lb - la
        d_low = d - ela - elb - _U * abs(d)
    else:
        A = float(special.log_ndtr(a))
        lnb = float(special.log_ndtr(b))
        if A == -math.inf:
            return -math.inf
        la_slope = _mills_bound(a, D)
        lb_slope = _mills_bound(b, D)
        eA = _LOG_NDTR_ULPS * _U * (abs(A) + abs(a) * la_slope) * 1.01 + la_slope * D
        eB = _LOG_NDTR_ULPS * _U * (abs(lnb) + abs(b) * lb_slope) * 1.01 + lb_slope * D
        B = epsilon + lnb
        d = B - A
        d_low = d - eA - eB - _U * (abs(B) + abs(d))
    A_up = A + eA
    tail = math.log(-math.expm1(d_low)) if d_low < 0.0 else 0.0  # log(1 - e^d) <= this
    out = A_up + tail + 4.0 * _U * (abs(A) + eA + abs(tail) + 1.0)  # the final roundings
    if not out < 0.0:
        return 0.0  # delta <= 1 always (also catches NaN from inf - inf)
    return out


@validate_params(sigma=Positive(allow_array=False), epsilon=NonNegative(allow_inf=True),
                 sensitivity=Positive(allow_array=False))
def gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """delta(epsilon) of the Gaussian mechanism N(0, sigma^2) with l2 sensitivity, rounded up.

    The tight hockey-stick divergence (Balle & Wang 2018, Theorem 8), valid for every
    epsilon >= 0, evaluated by :func:`gaussian_log_delta`: never below the exact value and
    typically within 1e-12 relative of it.
    """
    # exp is within one ulp, so the next double up keeps the bound; delta <= 1 always
    return _delta_up(_log_delta(sensitivity / sigma, epsilon))


def _delta_up(log_delta: float) -> float:
    """exp(log_delta) rounded up: exp is within one ulp, so the next double up is an upper bound.

    An exp that underflows to 0 stays 0: the value is then below half the smallest subnormal, so
    it is below every positive delta it can be compared with (delta = 0 is never a target).
    """
    v = math.exp(log_delta)
    return 0.0 if v == 0.0 else min(1.0, math.nextafter(v, math.inf))


def _excess_over(delta: float) -> Callable[[float], float]:
    """f(log delta bound) > 0 iff that bound does not certify ``delta``; continuous where it matters.

    The comparison is made against log(delta) lowered by 4 ulps (log and the later exp are each
    within one ulp), and a bound whose rounded-up exp still exceeds ``delta`` (possible for
    subnormal delta) counts as failing: what :func:`gaussian_delta` reports is then <= delta too.
    """
    target = math.log(delta)
    target -= 4.0 * _U * max(1.0, abs(target))

    def excess(log_delta: float) -> float:
        r = log_delta - target
        if r <= 0.0 and _delta_up(log_delta) > delta:
            return _U  # (tiny, positive: not certified)
        return r

    return excess


@validate_params(sigma=Positive(allow_array=False), delta=Delta(allow_zero=False),
                 sensitivity=Positive(allow_array=False))
def gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest epsilon >= 0 for which N(0, sigma^2) noise is (epsilon, delta)-DP (exact).

    Inverse of :func:`gaussian_delta` in epsilon, solved by :func:`dpfast._safe_root.safe_root`
    to 1e-13 relative (the returned epsilon is certified as evaluated).  Returns 0.0 when delta >= delta(0).
    """
    mu = sensitivity / sigma
    if mu == math.inf:
        raise ValueError(f"sensitivity / sigma = {sensitivity!r} / {sigma!r} overflows: with (almost) no "
                         "noise no finite epsilon holds; sigma must be > sensitivity * 1e-150")
    if mu > 1e150:  # delta(eps) ~ Phi(mu/2 - eps/mu): the root is ~ mu^2/2 > 1e299, beyond the search
        raise ValueError(f"sensitivity / sigma = {mu:.6g} is too large (epsilon would exceed 1e299); "
                         "sigma must be > sensitivity * 1e-150")
    excess = _excess_over(delta)
    return smallest_safe_root(lambda e: excess(_log_delta(mu, e)),  # decreasing in e
                              max(1.0, mu * mu), xtol=1e-300, rtol=1e-13)


@functools.lru_cache(maxsize=4096)
def _analytic_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    excess = _excess_over(delta)
    # log delta decreases in sigma; the bound (gaussian_log_delta) covers the rounding of
    # sensitivity / sigma, so the returned sigma is certified as evaluated.
    try:
        return safe_root(lambda sigma: excess(_log_delta(sensitivity / sigma, epsilon)),
                         sensitivity, rtol=0.0, lo=max(sensitivity * 1e-300, 5e-324))
    except NoSafeValue as exc:
        raise ValueError(f"the Gaussian noise sigma for sensitivity={sensitivity!r}, epsilon={epsilon!r}, "
                         f"delta={delta!r} overflows a double; use a smaller sensitivity (rescale the query)") from exc


@overload
def gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0,
                   calibration: str = "analytic") -> float: ...
@overload
def gaussian_sigma(epsilon: _Array, delta: float, sensitivity: Union[float, _Array] = 1.0,
                   calibration: str = "analytic") -> _FloatArray: ...
@overload
def gaussian_sigma(epsilon: float, delta: float, sensitivity: _Array,
                   calibration: str = "analytic") -> _FloatArray: ...
@overload
def gaussian_sigma(epsilon: npt.ArrayLike, delta: float, sensitivity: npt.ArrayLike = 1.0,
                   calibration: str = "analytic") -> Union[float, _FloatArray]: ...


@validate_params(epsilon=Epsilon(), delta=Delta(allow_zero=False), sensitivity=Positive(),
                 calibration=Options("analytic", "classical"))
def gaussian_sigma(epsilon: Any, delta: float, sensitivity: Any = 1.0,
                   calibration: str = "analytic") -> Any:  # (the overloads above type it)
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
        Theorem 8), the smallest double so certified (:func:`dpfast._safe_root.safe_root`);
        exact for every epsilon.
        ``"classical"``: D sqrt(2 ln(1.25/delta)) / eps (Dwork & Roth, Thm A.1),
        valid for epsilon < 1 only, so epsilon >= 1 raises.

    Returns
    -------
    float for scalar ``epsilon`` and ``sensitivity``, else an ndarray of their broadcast shape.

    See: :doc:`/theory/mechanisms` Samplers/Gaussian; :doc:`/theory/mechanisms`.
    Test fact: eps=1, delta=1e-5, D=1 gives classical 4.8448 (Dwork & Roth 2014, Theorem A.1)
    and analytic 3.7306 (Balle & Wang 2018, Theorem 8).
    """
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
    if np.ndim(epsilon) == 0 and np.ndim(sensitivity) == 0:
        return _analytic_sigma(epsilon, delta, sensitivity)
    eps_b, sens_b = np.broadcast_arrays(np.asarray(epsilon, float), np.asarray(sensitivity, float))
    # sigma is linear in the sensitivity: solve once per distinct epsilon.
    uniq, inv = np.unique(eps_b, return_inverse=True)
    unit = np.array([_analytic_sigma(float(e), delta, 1.0) for e in uniq])
    with np.errstate(over="ignore", under="ignore"):
        sigma = _finite_sigma(unit[inv].reshape(eps_b.shape) * sens_b)
    # A normal product is within one rounding of unit * sens, which gaussian_log_delta's bound
    # covers; a subnormal one is not (relative rounding up to 1/2): solve those directly.
    tiny = sigma < np.finfo(np.float64).tiny
    for i in zip(*np.nonzero(tiny)):
        sigma[i] = _analytic_sigma(float(eps_b[i]), delta, float(sens_b[i]))
    return sigma


def _finite_sigma(sigma: Any) -> Any:
    """sigma, refusing a value that overflowed (sensitivity / epsilon too large for a double)."""
    if not np.all(np.isfinite(sigma)):
        raise ValueError("the Gaussian noise sigma overflows a double (sensitivity / epsilon too large); "
                         "rescale the query")
    return sigma
