"""Calibration: the one home of noise calibration, both closed forms and accountant searches.

* Closed forms (Laplace and Gaussian; the user-facing path is :mod:`dpfast.calibrate`, which
  re-exports them): :func:`laplace_scale`, :func:`laplace_epsilon`, :func:`gaussian_sigma`,
  :func:`gaussian_delta`, :func:`gaussian_epsilon`, :func:`gaussian_log_delta`.  See
  :doc:`/theory/mechanisms` (Samplers).
* One accountant-driven search for every caller (:func:`calibrate_parameter`): given
  ``make_event(x)`` (an event whose privacy loss decreases as the noise parameter x grows), the
  smallest x, to a relative tolerance, whose composed epsilon at ``delta`` -- computed by the
  chosen accountant -- is at most the target.  The answer is always on the safe side: its
  epsilon was computed and verified.  :func:`calibrate_noise_multiplier` (DP-SGD) stages that
  search to reuse work.

The other privacy formulas each have one home: composition and conversions in
:mod:`dpfast.accounting` (objective perturbation and AMP in ``accounting.objective_perturbation``,
mu-GDP in ``accounting.gdp``), the discrete Gaussian in ``mechanisms.discrete``, randomized
response in ``accounting.pairs.rr_log_probabilities``, the neighbour factor in
``accounting.Neighbours.sum_factor``.  Every inversion of a privacy figure (the smallest safe
noise, the largest safe mu) is :func:`dpfast._safe_root.safe_root`.
"""
from __future__ import annotations

import functools
import math
import warnings
from typing import Any, Callable, Optional, Sequence, Union, overload

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
    check_delta,
    check_epsilon,
    check_real,
    validate_params,
)
from dpfast.accounting.base import PrivacyAccountant, check_count, make_accountant
from dpfast.accounting.events import DpEvent, Gaussian, PoissonSampled, SelfComposed
from dpfast.accounting.pld import GridCoarsenedWarning, PLDAccountant

__all__ = [
    "laplace_scale",
    "laplace_epsilon",
    "gaussian_sigma",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_log_delta",
    "calibrate_parameter",
    "calibrate_noise_multiplier",
    "accountant_gaussian_multiplier",
    "certified_gaussian_multiplier",
]

# Array arguments of the broadcasting functions: a float (numpy's float64 included) gives a float,
# an array or a sequence an array; other array-likes (a 0-d array) either, as their shape says.
_Array = Union[npt.NDArray[Any], Sequence[float]]
_FloatArray = npt.NDArray[np.float64]


# ----------------------------------------------------------------------------------------------
# closed forms: Laplace and Gaussian
# ----------------------------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------------------------
# searches with an accountant
# ----------------------------------------------------------------------------------------------
def _dpsgd_event(sigma: float, q: float) -> DpEvent:
    return Gaussian(sigma) if q == 1.0 else PoissonSampled(q, Gaussian(sigma))


#: Noise multipliers searched: [SIGMA_MIN, SIGMA_MAX] (outside, the answer is refused or clamped).
SIGMA_MIN, SIGMA_MAX = 1e-6, 1e8
#: Smallest accepted ``rtol``: the epsilons compared are themselves accurate to about 1e-12.
RTOL_MIN = 1e-12
def _solve(eps_of: Callable[[float], float], target: float, start: float, rtol: float, lo_factor: float = 0.5,
           lo_bound: float = SIGMA_MIN, hi_bound: float = SIGMA_MAX) -> float:
    """Smallest sigma in [lo_bound, hi_bound] (to relative rtol) with eps_of(sigma) <= target,
    for eps_of decreasing: :func:`dpfast._safe_root.safe_root` on log eps - log target, bracketing
    from ``start`` in steps of ``lo_factor``.  The answer's epsilon was computed and is <= target;
    a sigma whose epsilon cannot be computed (e.g. a privacy-loss range too wide for the grid)
    counts as not verified."""
    log_target = math.log(target)

    def excess(sigma: float) -> float:
        e = eps_of(sigma)
        return (math.log(e) if e > 0 else -745.0) - log_target

    try:
        return safe_root(excess, start, rtol=rtol, lo=lo_bound, hi=hi_bound, step=-math.log(lo_factor))
    except NoSafeValue as exc:
        cause = f" ({exc.__cause__})" if exc.__cause__ is not None else ""
        raise ValueError(f"no noise multiplier up to {hi_bound:g} reaches the target epsilon{cause}") from exc


def calibrate_noise_multiplier(target_epsilon: float, delta: float, sample_rate: float, steps: int,
                               accountant: str = "pld", *, value_discretization: float = 1e-4,
                               rtol: float = 1e-3, orders: Optional[npt.ArrayLike] = None) -> float:
    """Smallest noise multiplier z (to relative ``rtol``) for which ``steps`` compositions of the
    Poisson-subsampled Gaussian (rate ``sample_rate``; q = 1: the Gaussian) are
    (target_epsilon, delta)-DP under add/remove neighbours.

    The returned z is always on the safe side: its epsilon (pessimistic PLD, or RDP with the
    improved conversion) was computed and is <= target_epsilon.  ``rtol`` is in [1e-12, 0.5);
    the search covers noise multipliers in [1e-6, 1e8] (a target met at 1e-6 returns the
    smallest verified value found; one not met at 1e8 raises ValueError), and every loop in it
    is bounded, so it always returns or raises.  When ``sample_rate * steps <= delta`` every
    noise multiplier meets the target ((0, q T)-DP by basic composition) and 1e-6 is returned
    at once.

    Full batches (``sample_rate`` 1) with ``"pld"``: the analytic Gaussian's multiplier for
    sensitivity sqrt(steps), times 1 + min(rtol, 1e-9), verified by the accountant (which answers
    Gaussians in closed form); the search below only when that fails.

    Work is reused across the search: the bracket comes from the cheap RDP calibration (RDP
    epsilons are upper bounds, so the PLD's z is below the RDP one); the PLD search first runs
    on a grid 16 times coarser (still a certified upper bound, so its z is valid), and the final
    refinement at ``value_discretization`` starts from that bracket; Brent's method on
    log epsilon vs log z; discretizations are cached per event.
    """
    e = check_epsilon(check_real(target_epsilon, "target_epsilon", allow_nan=False), allow_array=False,
                      name="target_epsilon")
    delta = check_delta(delta, allow_zero=False)
    q = check_real(sample_rate, "sample_rate", allow_nan=False)
    if not 0 < q <= 1:
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
    steps = check_count(steps)
    if steps == 0:
        raise ValueError("steps must be >= 1")
    if not isinstance(accountant, str) or accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    rtol = check_real(rtol, "rtol", allow_nan=False)
    if not RTOL_MIN <= rtol < 0.5:
        raise ValueError(f"rtol must be in [{RTOL_MIN:g}, 0.5), got {rtol!r}")
    h = check_real(value_discretization, "value_discretization", allow_nan=False)
    if not 0 < h <= 1:
        raise ValueError(f"value_discretization must be in (0, 1], got {value_discretization!r}")

    if q * steps <= delta:
        # Every step is (0, q)-DP whatever z (the hockey-stick divergence at epsilon 0 of either
        # pair is q TV(N(0, z^2), N(1, z^2)) <= q), so the steps are (0, q steps)-DP by basic
        # composition: every z meets the target, the search's floor is the answer.  (Searching
        # took 14-50 s at q = 1e-45: tiny z give privacy-loss ranges far too wide for a grid.)
        return SIGMA_MIN

    def event(z: float) -> DpEvent:
        return SelfComposed(_dpsgd_event(z, q), steps)

    if q == 1.0 and accountant == "pld":
        # steps Gaussians of multiplier z are exactly one Gaussian of l2 sensitivity sqrt(steps)
        # and noise z (Dong, Roth & Su 2022, Cor. 3.3), whose smallest noise is the analytic
        # Gaussian's, and the PLD accountant answers them in that closed form: verified just
        # above it (the search below ended anywhere within rtol of the root: up to 1e-3 above)
        try:
            z_try = float(gaussian_sigma(e, delta, math.sqrt(steps))) * (1.0 + min(rtol, 1e-9))
        except (ValueError, OverflowError):
            z_try = math.nan
        if SIGMA_MIN <= z_try <= SIGMA_MAX and PLDAccountant(h).compose(event(z_try)).get_epsilon(delta) <= e:
            return z_try

    # RDP: start from the GDP/CLT-style guess z ~ q sqrt(T) / mu (any start works)
    guess = max(1e-3, q * math.sqrt(steps) * math.sqrt(2 * math.log(1 / delta)) / e) if q < 1 else \
        math.sqrt(steps * 2 * math.log(1.25 / delta)) / e
    rdp = make_accountant("rdp", orders=orders)
    z_rdp = calibrate_parameter(event, e, delta, rdp, start=max(guess, 0.3),
                      rtol=rtol if accountant == "rdp" else 1e-2)
    if accountant == "rdp" or z_rdp == SIGMA_MIN:  # (the PLD's multiplier is below the RDP one)
        return z_rdp
    coarse = min(16 * h, 0.05)
    z_c = calibrate_parameter(event, e, delta, PLDAccountant(coarse, refine=False), start=z_rdp, rtol=1e-2,
                    lo_factor=0.8) if coarse > h else z_rdp
    return calibrate_parameter(event, e, delta, PLDAccountant(h), start=z_c, rtol=rtol, lo_factor=0.97)


def calibrate_parameter(make_event: Callable[[float], DpEvent], epsilon: float, delta: float,
              accountant: Union[str, PrivacyAccountant] = "pld", lo: float = SIGMA_MIN,
              hi: float = SIGMA_MAX, *, start: float = 1.0, rtol: float = 1e-3,
              lo_factor: float = 0.5) -> float:
    """Smallest noise parameter x in [``lo``, ``hi``] (to relative ``rtol``) for which the event
    ``make_event(x)`` is (``epsilon``, ``delta``)-DP according to ``accountant``.

    ``make_event`` must give events whose privacy loss decreases as x grows (a noise multiplier,
    a noise scale...); wrap a repeated release in :class:`~dpfast.accounting.SelfComposed`.
    ``accountant``: ``"pld"`` / ``"rdp"`` or an accountant instance whose configuration is used
    (each evaluation composes into a fresh, empty one: :func:`make_accountant`).

    The answer is on the safe side: make_event(answer)'s epsilon was computed and is <=
    ``epsilon`` (a value whose epsilon cannot be computed counts as not private).  Search:
    :func:`dpfast._safe_root.safe_root` (geometric bracketing from ``start`` in steps of
    ``lo_factor``, Brent's method on log epsilon against log x, then bisection of the verified
    bracket; every loop is bounded).  A target met at ``lo`` returns ``lo``; one not met at ``hi`` raises
    ValueError.
    """
    if not callable(make_event):
        raise TypeError("make_event must be a callable x -> DpEvent")
    e = check_epsilon(check_real(epsilon, "epsilon", allow_nan=False), allow_array=False)
    delta = check_delta(delta, allow_zero=False)
    rtol = check_real(rtol, "rtol", allow_nan=False)
    if not RTOL_MIN <= rtol < 0.5:
        raise ValueError(f"rtol must be in [{RTOL_MIN:g}, 0.5), got {rtol!r}")
    lo, hi = check_real(lo, "lo", allow_nan=False), check_real(hi, "hi", allow_nan=False)
    if not 0 < lo < hi < math.inf:
        raise ValueError(f"need 0 < lo < hi < inf, got lo={lo!r}, hi={hi!r}")
    template = make_accountant(accountant)  # validates the name once

    def eps_of(x: float) -> float:
        # a trial value composed on a coarser grid is still verified (an upper bound): the
        # search's internal accountants do not warn about it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GridCoarsenedWarning)
            return make_accountant(template).compose(make_event(x)).get_epsilon(delta)

    return _solve(eps_of, e, check_real(start, "start", allow_nan=False), rtol, lo_factor, lo, hi)


def certified_gaussian_multiplier(epsilon: float, delta: float, sensitivity: float = 1.0,
                                  accountant: str = "pld", hi: float = SIGMA_MAX) -> float:
    """Smallest noise multiplier z in [z0, ``hi``] (to relative 1e-9) for which one
    ``Gaussian(z, sensitivity)`` is (epsilon, delta)-DP by ``accountant`` (``"pld"``, ``"rdp"``),
    verified by it: the one Gaussian multiplier search of the package.

    z0 is the analytic Gaussian's multiplier (Balle & Wang 2018, Theorem 8), exact, so no valid z
    lies below it and the accountants' (upper-bound) epsilons only ask for more.  First trial:
    z0 (1 + 1e-9), one evaluation (the PLD accountant answers a Gaussian with the same closed
    form, rounded up, so it passes: microseconds, where the discretized PLD took up to 1 s and
    rejected it for 43 of 75 (epsilon, delta) in [0.01, 5] x {1e-3, 1e-5, 1e-8}); otherwise
    :func:`calibrate_parameter`
    (:func:`dpfast._safe_root.safe_root`) searches [z0, hi] from z0.  Raises ValueError where the
    accountant cannot evaluate the event at z0 (a privacy-loss range too wide for its grid) or
    certifies no z up to ``hi``."""
    z0 = float(gaussian_sigma(epsilon, delta, sensitivity)) / sensitivity

    def make(z: float) -> DpEvent:
        return Gaussian(noise_multiplier=z, sensitivity=sensitivity)

    z_try = z0 * (1.0 + 1e-9)
    with warnings.catch_warnings():  # a trial on a coarsened grid is still an upper bound
        warnings.simplefilter("ignore", GridCoarsenedWarning)
        if make_accountant(accountant).compose(make(z_try)).get_epsilon(delta) <= epsilon:
            return z_try
    return float(calibrate_parameter(make, epsilon, delta, accountant, lo=z0, hi=hi, start=z0, rtol=1e-9))


@functools.lru_cache(maxsize=128)
def accountant_gaussian_multiplier(epsilon: float, delta: float, sensitivity: float,
                                   accountant: str = "pld") -> tuple[float, float, Optional[str]]:
    """(noise multiplier, epsilon_, accountant_) of one Gaussian of l2 ``sensitivity`` at
    (epsilon, delta): the smallest multiplier (to 1e-9) that ``accountant`` finds (epsilon, delta)-DP
    in [z0, 2 z0], z0 the analytic one (Balle & Wang 2018, Thm. 8), which the accountant's
    bound puts a hair above epsilon (:func:`certified_gaussian_multiplier`), and the
    accountant's epsilon for it.  Where the accountant certifies none there (the PLD accountant
    answers a Gaussian in closed form up to mu = 1e150; it used to fail to discretise a
    multiplier ~1e-3, epsilon ~1e3): the analytic multiplier, ``epsilon`` and no accountant.
    Cached: public parameters only."""
    z0 = float(gaussian_sigma(epsilon, delta, sensitivity)) / sensitivity
    try:
        z = certified_gaussian_multiplier(epsilon, delta, sensitivity, accountant, hi=2.0 * z0)
    except ValueError:
        return z0, epsilon, None
    event = Gaussian(noise_multiplier=z, sensitivity=sensitivity)
    return z, float(make_accountant(accountant).compose(event).get_epsilon(delta)), accountant
