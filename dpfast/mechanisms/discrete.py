"""Exact discrete samplers and mechanisms on an integer lattice (see :doc:`/theory/mechanisms`,
"Discrete Laplace / discrete Gaussian"; Canonne, Kamath & Steinke 2020, "The Discrete
Gaussian for Differential Privacy", NeurIPS 2020 -- CKS20 below).

The samplers are floating-point safe: they draw uniform integers from the generator's bit
stream and make every accept/reject decision with integer arithmetic on exact rationals
(CKS20 Algorithms 1-3, native code in ``csrc/samplers/{exact_arith,discrete}.hpp``).  Their
outputs are integers whose law is exactly the stated one for an ideal uniform bit stream
(with :class:`dpfast.random.SecureRandom`, up to the security of ChaCha20).  Only the
*calibration* helpers (choosing sigma^2 from epsilon and delta) use floating point, and they
round the noise parameter up, never down.

Parameters are exact rationals: an ``int``, a ``fractions.Fraction``, a string like
``"7/3"``, or a float taken at its exact binary value.

Sources: the algorithms are Algorithms 1-3 of Canonne, Kamath & Steinke (2020).  Theorem and
corollary numbers cited below (Theorem 7: exact (eps, delta) in one dimension; Theorem 14:
zCDP of the multivariate discrete Gaussian; Corollary 13: zCDP -> (eps, delta)) follow the
arXiv version (2004.00010) from memory so the
numbers are unverified; the formulas themselves are re-derived or cross-checked in
``tests/mechanisms/test_discrete.py`` (hockey-stick sum, brute-force minimisation over alpha).

Randomness: draws are made in blocks of ``dpfast._exact.EXACT_BLOCK`` (16384); block b uses
its own ChaCha20 keystream whose 256-bit key is read, in block order, from the ``rng``
generator (4 words per block).  Blocks run on several threads (``DPFAST_NUM_THREADS``, default
up to 4 cores) and the output depends only on the generator's state, never on the thread
count; with :class:`~dpfast.random.SecureRandom` every keystream is keyed by ChaCha20
output, i.e. still cryptographically secure.  A scalar draw equals the first element of a
vector draw from the same state.
"""
from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import TYPE_CHECKING, Optional, Sequence, Union

import numpy as np

from dpfast import _exact
from dpfast._rational import Rational, RationalLike, fit_rational, to_fraction
from dpfast._safe_root import NoSafeValue, safe_root
from dpfast._threads import default_threads
from dpfast._validation import Delta, Epsilon, NonNegative, Options, Positive, check_real, check_size, validate_params
from dpfast.mechanisms import _events
from dpfast.random import RNG, RandomLike, native_stream

if TYPE_CHECKING:
    from dpfast.budget import PrivacyBudget

__all__ = [
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "discrete_laplace_mechanism",
    "discrete_gaussian_mechanism",
    "discrete_gaussian_sigma2",
    "discrete_gaussian_delta",
    "zcdp_delta",
]

Size = Union[None, int, Sequence[int]]

_MAX_SCALE = Fraction(2**40)  # discrete Laplace scale t/s (keeps |Y| < 2^62 w.p. 1 - exp(-2^21))
_MAX_LATTICE = 2**53  # |lattice coordinate| of mechanism inputs
_INT64_MAX = 2**63 - 1


def _n_threads(n: int) -> int:
    """Threads for an exact kernel on n draws.  The output does not depend on it: each block
    of ``_exact.EXACT_BLOCK`` draws has its own ChaCha20 keystream keyed, in order, from the
    caller's generator.  ``DPFAST_NUM_THREADS`` overrides the default (up to 4 cores)."""
    if n <= _exact.EXACT_BLOCK:
        return 1
    return default_threads(upper=256)  # the kernels accept [1, 256]


def _split128(v: int) -> tuple[int, int]:
    return v >> 64, v & ((1 << 64) - 1)


def _out(size: Size, dtype) -> np.ndarray:
    shape = check_size(size, itemsize=np.dtype(dtype).itemsize)
    if shape is None:
        return np.empty((), dtype=dtype)
    try:
        return np.empty(shape, dtype=dtype)
    except ValueError as exc:  # "array is too big" / "maximum supported dimension"
        raise ValueError(f"size {size!r} is too large: {exc}") from None
    except MemoryError:  # check_size's limits passed, but less is free now: still before any draw
        raise ValueError(f"size {size!r} needs {math.prod(shape) * np.dtype(dtype).itemsize / 2**30:.3g} GiB "
                         "of memory, which cannot be allocated now") from None


def _result(out: np.ndarray, size: Size):
    return out.item() if size is None else out


# ----------------------------------------------------------------------------- parameters

def _fit(fr: Fraction, fits, from_float: bool, *, mode: str, name: str, limits: str) -> Fraction:
    """``fit_rational`` for a sampler parameter; ``mode="nearest"`` only rounds float input (an
    exact rational must fit as it is).  Raises ValueError naming the native ``limits``."""
    res = fit_rational(fr, fits, mode=("exact" if (mode == "nearest" and not from_float) else mode))
    if res is None:
        raise ValueError(f"{name} = {fr} does not fit the native sampler{limits}")
    return res


def _fmt(fr: Fraction) -> str:
    """A short decimal rendering of a rational of any size (``float()`` overflows past 1e308)."""
    try:
        return f"{float(fr):.6g}"
    except OverflowError:
        return f"about 10**{len(str(fr.numerator // fr.denominator)) - 1}"


def _check_close(fr: Fraction, fitted: Fraction, rel: Fraction, name: str, hint: str) -> None:
    """Refuse an approximation of ``fr`` with relative error above ``rel`` (e.g. a scale of 1e-30
    that would become 2**-63: a different noise law than the one asked for)."""
    if abs(fitted - fr) > rel * fr:
        raise ValueError(f"{name} = {_fmt(fr)} cannot be represented by the native sampler within "
                         f"relative error {_fmt(rel)}; {hint}")


def _laplace_fits(fr: Fraction) -> bool:
    return fr.numerator < 2**64 and fr.denominator < 2**64 and fr <= _MAX_SCALE


def _laplace_params(scale: Fraction, from_float: bool, *, mode: str, name: str) -> tuple[int, int]:
    """(s, t) with t/s = the scale to sample (exactly ``scale`` when it fits)."""
    if scale > _MAX_SCALE:
        raise ValueError(f"{name} must be <= 2**40 (got {_fmt(scale)}); such noise swamps any int64 output")
    fr = _fit(scale, _laplace_fits, from_float, mode=mode, name=name,
              limits=": numerator and denominator must be < 2**64 and the value at least 2**-63; "
                     "pass a simpler fraction")
    if mode == "nearest":
        _check_close(scale, fr, Fraction(1, 2**62), name,
                     "it must be at least about 2**-60 (below that Lap_Z(scale) is 0 with probability "
                     "> 1 - 2**-(2**60) anyway)")
    return fr.denominator, fr.numerator


def _tau(fr: Fraction) -> int:
    return math.isqrt(fr.numerator // fr.denominator) + 1


def _gauss_fits(fr: Fraction) -> bool:
    n, d = fr.numerator, fr.denominator
    tau = _tau(fr)
    return tau <= 2**40 and d * tau < 2**62 and 2 * n * d * tau * tau < 2**127


def _gauss_params(sigma2: Fraction, from_float: bool, *, mode: str, name: str) -> tuple[int, int, int]:
    if sigma2 >= 2**62:
        raise ValueError(f"{name} must be < 2**62 (got {_fmt(sigma2)})")
    fr = _fit(sigma2, _gauss_fits, from_float, mode=mode, name=name,
              limits=" (need tau = floor(sigma)+1 <= 2**40, denominator * tau < 2**62 and "
                     "2 * numerator * denominator * tau**2 < 2**127); pass a fraction with a smaller denominator")
    if mode == "nearest":
        _check_close(sigma2, fr, Fraction(1, 2**40), name,
                     "it must be at least about 2**-20 (below that N_Z(0, sigma2) is 0 with probability "
                     "> 1 - 2**-(2**19) anyway)")
    return fr.numerator, fr.denominator, _tau(fr)


# ----------------------------------------------------------------------------- samplers

@validate_params(rng=RNG)
def bernoulli_exp(gamma: RationalLike, size: Size = None, rng: RandomLike = None):
    """Exact Bernoulli(exp(-gamma)) draws for a rational ``gamma >= 0`` (CKS20 Algorithm 1).

    Integer arithmetic only: for gamma in [0, 1], draw Bernoulli(gamma/K) for K = 1, 2, ...
    until the first failure and return whether K is odd; for gamma > 1, floor(gamma) trials of
    Bernoulli(exp(-1)) then Bernoulli(exp(-frac(gamma))).  ``gamma``'s numerator and
    denominator must be < 2**127 (a float is approximated to the nearest such fraction).

    Returns a bool (``size=None``) or a bool array of shape ``size``.
    """
    fr, from_float = to_fraction(gamma, "gamma", allow_zero=True)
    fits = lambda f: f.numerator < 2**127 and f.denominator < 2**127  # noqa: E731
    fr2 = fit_rational(fr, fits, mode="nearest" if from_float else "exact", max_den_bits=126)
    if fr2 is None:
        shown = repr(gamma) if len(repr(gamma)) <= 40 else f"a number of {fr.numerator.bit_length()} bits"
        raise ValueError(f"gamma = {shown} does not fit: numerator and denominator must be < 2**127")
    # The bool output is filled in place through a uint8 view (0/1 bytes): no second array of
    # the output's size (which made bernoulli_exp's peak memory twice the output's).
    res = _out(size, np.bool_)
    out = res.reshape(-1).view(np.uint8)
    with native_stream(rng) as cap:
        _exact.bernoulli_exp_fill(cap, *_split128(fr2.numerator), *_split128(fr2.denominator), out,
                                  _n_threads(out.size))
    return bool(res) if size is None else res


@validate_params(rng=RNG)
def discrete_laplace(scale: RationalLike, size: Size = None, rng: RandomLike = None):
    """Exact discrete Laplace draws Lap_Z(scale): P[Y = y] = (1-p)/(1+p) * p^|y|, p = exp(-1/scale).

    CKS20 Algorithm 2 with scale = t/s (integers): a geometric X with P[X = x] proportional to
    exp(-x/t) built from U uniform on {0..t-1} accepted with probability exp(-U/t) and
    V ~ Geometric(1 - e^-1), then Y = floor(X/s) with a uniform sign (the draw -0 is rejected).
    No floating point is used.  ``scale`` is an exact rational in (0, 2**40] with numerator and
    denominator < 2**64 (a float too fine for that is approximated to the nearest such
    fraction, relative error < 2**-62; a float that cannot be, i.e. below about 2**-60, raises
    ``ValueError`` instead of silently sampling another scale).  Variance: 2p/(1-p)^2.

    Returns an int (``size=None``) or an int64 array of shape ``size``.
    See: :doc:`/theory/mechanisms` (Discrete Laplace / discrete Gaussian).
    """
    fr, from_float = to_fraction(scale, "scale")
    s, t = _laplace_params(fr, from_float, mode="nearest", name="scale")
    out = _out(size, np.int64)
    with native_stream(rng) as cap:
        _exact.discrete_laplace_fill(cap, s, t, out.reshape(-1), _n_threads(out.size))
    return _result(out, size)


@validate_params(rng=RNG)
def discrete_gaussian(sigma2: RationalLike, size: Size = None, rng: RandomLike = None):
    """Exact discrete Gaussian draws N_Z(0, sigma2): P[Y = y] proportional to exp(-y^2 / (2 sigma2)).

    CKS20 Algorithm 3: Y ~ Lap_Z(tau) with tau = floor(sigma) + 1, accepted with probability
    exp(-(|Y| - sigma^2/tau)^2 / (2 sigma^2)), that exponent being an exact rational evaluated
    with 128/256-bit integers.  ``sigma2`` (the variance parameter sigma^2, an exact rational)
    needs floor(sigma) < 2**40, denominator * tau < 2**62 and 2 n d tau^2 < 2**127 for
    sigma^2 = n/d; a float that does not fit is approximated to the nearest fraction that does
    (relative error < 2**-40; a float that cannot be, i.e. below about 2**-20, raises ``ValueError``).
    The variance of N_Z(0, sigma^2) is slightly below sigma^2 (CKS20; checked in the tests).

    Returns an int (``size=None``) or an int64 array of shape ``size``.
    See: :doc:`/theory/mechanisms` (Discrete Laplace / discrete Gaussian).
    """
    fr, from_float = to_fraction(sigma2, "sigma2")
    n, d, tau = _gauss_params(fr, from_float, mode="nearest", name="sigma2")
    out = _out(size, np.int64)
    with native_stream(rng) as cap:
        _exact.discrete_gaussian_fill(cap, *_split128(n), *_split128(d), tau, out.reshape(-1), _n_threads(out.size))
    return _result(out, size)


# ----------------------------------------------------------------------------- accounting

@validate_params(rho=Positive(allow_array=False), epsilon=NonNegative())
def zcdp_delta(rho: float, epsilon: float) -> float:
    """delta such that a rho-zCDP mechanism is (epsilon, delta)-DP (CKS20 Corollary 13):

        delta = inf_{alpha > 1} exp((alpha - 1)(alpha rho - epsilon)) / (alpha - 1) * (1 - 1/alpha)^alpha,

    evaluated in log space and minimized over alpha numerically (the value at any alpha is a
    valid delta, so an inexact minimizer only over-reports delta).  The returned value is
    rounded up: the log is raised by a bound on its floating-point error before
    exponentiating, and a delta below the smallest positive double (e.g. rho = 0.5,
    epsilon = 40: 1.4e-341) is returned as 5e-324, never 0.0 (0 would claim pure DP).
    """
    return _zcdp_delta(rho, epsilon)


def _zcdp_delta(rho: float, epsilon: float) -> float:
    """:func:`zcdp_delta` on validated input; ``rho = inf`` (a sensitivity whose square
    overflows) gives the trivial delta 1."""
    if not rho < math.inf:
        return 1.0
    if rho == 0.0:  # (a sensitivity whose square underflows) no privacy loss: the infimum is 0
        return 0.0
    from scipy.optimize import minimize_scalar

    def terms(log_am1: float):
        am1 = math.exp(log_am1)  # alpha - 1 > 0
        a = am1 + 1.0
        return am1 * (a * rho - epsilon), -math.log(am1), a * math.log1p(-1.0 / a)

    def log_delta(log_am1: float) -> float:
        v = math.fsum(terms(log_am1))
        # an overflowing term (huge rho or epsilon) gives +-inf or inf - inf; clamp so that the
        # minimizer sees finite values (no RuntimeWarning) with the same minimum
        return 1e300 if not v <= 1e300 else max(v, -1e300)

    def upper(log_am1: float) -> float:
        # the log at alpha, raised by a bound on its rounding error: each term is a product
        # or log of a few correctly rounded operations (relative error <= 8u each, u = 2^-53;
        # alpha itself is what it is: any alpha > 1 gives a valid delta)
        t = terms(log_am1)
        v = log_delta(log_am1)
        return v + 8 * 2.0 ** -53 * (sum(abs(x) for x in t) + abs(v)) if abs(v) < 1e300 else v

    res = minimize_scalar(log_delta, bounds=(-30.0, 30.0), method="bounded",
                          options={"xatol": 1e-12, "maxiter": 500})
    # also try the optimum of the leading term, alpha* = (epsilon + rho) / (2 rho)
    a0 = (epsilon + rho) / (2 * rho)
    best = upper(float(res.x))
    if a0 > 1.0 and math.isfinite(a0):
        best = min(best, upper(math.log(a0 - 1.0)))
    if not best < 0.0:  # also NaN (inf - inf in an overflowing term): the trivial bound
        return 1.0
    # exp is correctly rounded to within 1 ulp: step up one; an underflow gives the smallest
    # positive double, an upper bound (the true delta of a Gaussian is never 0)
    return min(1.0, max(math.nextafter(math.exp(best), math.inf), 5e-324))


@validate_params(epsilon=NonNegative())
def discrete_gaussian_delta(sigma2: RationalLike, sensitivity: int, epsilon: float) -> float:
    """Exact (epsilon, delta) of the one-dimensional discrete Gaussian mechanism (CKS20 Theorem 7).

    For an integer-valued query with |q(x) - q(x')| <= ``sensitivity`` (an integer) and
    Y ~ N_Z(0, sigma^2), q(x) + Y is (epsilon, delta)-DP with

        delta = P[Y > epsilon sigma^2 / Delta - Delta / 2] - e^epsilon P[Y > epsilon sigma^2 / Delta + Delta / 2]

    (the hockey-stick divergence between N_Z(0, sigma^2) and its shift by Delta, derived again
    in the test suite).  Tails are summed over |k| <= 40 sigma in floating point, so this is an
    accounting helper, not a sampler; it supports sigma <= 10^5 (above, use :func:`zcdp_delta`).
    See: :doc:`/theory/mechanisms` (Discrete Laplace / discrete Gaussian: "the exact (eps, delta) of their Theorem 7").
    """
    fr, _ = to_fraction(sigma2, "sigma2")
    s2 = check_real(fr, "sigma2")
    if s2 > 1e10:
        raise ValueError("discrete_gaussian_delta supports sigma2 <= 1e10; use zcdp_delta for larger sigma")
    if isinstance(sensitivity, (bool, np.bool_)) or not isinstance(sensitivity, (numbers.Real, np.number)):
        raise TypeError(f"sensitivity must be a positive integer (lattice units), got {type(sensitivity).__name__}")
    sens_f = check_real(sensitivity, "sensitivity")  # (beyond a double: ValueError, not OverflowError)
    if not (math.isfinite(sens_f) and int(sensitivity) == sensitivity and 1 <= sensitivity <= 2**53):
        raise ValueError(f"sensitivity must be a positive integer in [1, 2**53] (lattice units), got {sensitivity!r}")
    delta_ = int(sensitivity)
    return _dg_delta(fr, delta_, epsilon)


def _dg_delta(sigma2: Fraction, d: int, epsilon: float) -> float:
    """CKS20 Theorem 7's delta, rounded up.

    Summed as the hockey-stick divergence itself, a sum of non-negative terms (no difference
    of two tails, whose cancellation left the value up to 9.5e-14 (relative) below the exact
    one): with P = N_Z(d, sigma^2), Q = N_Z(0, sigma^2), loss L(k) = (k - d/2) d / sigma^2,

        delta = sum_k P(k) (1 - e^{epsilon - L(k)})_+ = (1/Z) sum_{k > k0} w_{k-d} (1 - e^{epsilon - L(k)}),

    w_j = exp(-j^2 / (2 sigma^2)), k0 = epsilon sigma^2 / d + d / 2.  In log space (no
    underflow), over j = k - d > k0 - d, from max(k0 - d, -12 sigma) to 12 sigma beyond
    max(k0 - d, 0), plus a geometric bound on the weights left out (each side: sum_{j >= j0} w_j <= w_j0 / (1 - exp(-(2 j0 + 1) / (2 sigma^2))));
    Z = sqrt(2 pi sigma^2) sum_m exp(-2 pi^2 sigma^2 m^2) by Poisson summation (|m| <= 6), or
    summed directly for sigma^2 < 1 -- truncations that only lower Z.  sigma^2 is rounded down
    to a double (less noise: a larger delta).  The rounding error (a few 1e-15 relative: the
    exponents are below ~100 and every term is non-negative) is covered by raising the result
    by a relative 1e-12; it is never 0 (5e-324 when it underflows: the true delta is positive).
    """
    s2 = float(sigma2)
    if Fraction(s2) > sigma2:
        s2 = math.nextafter(s2, 0.0)
    if not s2 > 0:  # (sigma2 underflows) no noise: two point masses
        return 1.0
    sigma = math.sqrt(s2)
    with np.errstate(under="ignore", over="ignore", divide="ignore", invalid="ignore"):
        if s2 >= 1.0:
            m = np.arange(-6, 7, dtype=np.float64)
            logz = 0.5 * math.log(2 * math.pi * s2) + math.log(float(np.sum(np.exp(-2 * math.pi ** 2 * s2 * m * m))))
        else:
            kz = np.arange(-20, 21, dtype=np.float64)
            logz = math.log(float(np.sum(np.exp(-kz * kz / (2 * s2)))))  # >= 0 (k = 0 gives 1)
        # in j = k - d: positive terms for j > c = epsilon sigma^2 / d - d / 2
        c = epsilon * s2 / d - d / 2
        if c > 0 and c * (c / (2 * s2)) > 1500.0:
            return 5e-324  # delta <= P[Y > c] < exp(-c^2 / (2 sigma^2)) / (1 - r): underflows
        j_first = math.floor(c)  # (one early at worst: that term's factor is 0 and dropped)
        w = int(math.ceil(12 * sigma)) + 2
        jlo = max(j_first, -w)
        jhi = max(jlo, 0) + w
        j = np.arange(jlo, jhi + 1, dtype=np.float64)  # exact integers
        x = (epsilon - j * (d / s2)) - d * (d / (2 * s2))  # epsilon - L(k), <= 0 for j > c
        logt = -(j * j) / (2 * s2) + np.log(-np.expm1(np.minimum(x, 0.0)))
        logt = logt[np.isfinite(logt)]
        terms = [-math.inf]
        if logt.size:
            mx = float(np.max(logt))
            terms[0] = mx + math.log(float(np.sum(np.exp(logt - mx))))

        def log_rest(j0: int) -> float:
            r = math.exp(-(2 * j0 + 1) / (2 * s2))
            return -(j0 * (j0 / (2 * s2))) - math.log1p(-r) if r < 1 else 0.0

        if j_first < jlo:  # j in [j_first, -w): |j| > w
            terms.append(log_rest(w + 1))
        terms.append(log_rest(jhi + 1))  # j > jhi
        mx = max(terms)
        log_delta = mx + math.log(sum(math.exp(t - mx) for t in terms)) - logz
    out = math.exp(min(log_delta + 1e-12, 0.0))
    return min(1.0, max(math.nextafter(out, math.inf), 5e-324))


def _round_up_sigma2(s2: float) -> Fraction:
    """A rational >= s2 with a small power-of-two denominator that fits the sampler."""
    fr = Fraction(s2)
    res = fit_rational(fr, lambda f: f.denominator <= 2**20 and _gauss_fits(f), mode="up", max_den_bits=20)
    if res is None:
        raise ValueError(f"sigma^2 = {s2:.6g} is too large for the native sampler")
    return res


@validate_params(sensitivity=Positive(allow_array=False), epsilon=Epsilon(allow_array=False),
                 delta=Delta(allow_zero=False), method=Options("zcdp", "exact"))
def discrete_gaussian_sigma2(sensitivity: float, epsilon: float, delta: float, *, method: str = "zcdp") -> Fraction:
    """Smallest sigma^2 (an exact ``Fraction``, rounded up to a multiple of 2^-20) for which
    N_Z(0, sigma^2) noise on a query of l2 sensitivity ``sensitivity`` (lattice units) is
    (epsilon, delta)-DP.

    ``method="zcdp"`` (any dimension): the mechanism is rho-zCDP with
    rho = sensitivity^2 / (2 sigma^2) (CKS20 Theorem 14, multivariate; Theorem 4 in one
    dimension), converted by :func:`zcdp_delta`.  ``method="exact"`` (one-dimensional queries,
    integer sensitivity): CKS20 Theorem 7 via :func:`discrete_gaussian_delta`; tighter.
    """
    sens = sensitivity
    if method == "exact":
        if int(sens) != sens:
            raise ValueError("method='exact' needs an integer sensitivity (in lattice units)")

        def dfun(sig: float) -> float:
            return discrete_gaussian_delta(sig * sig, int(sens), epsilon)
    else:
        def dfun(sig: float) -> float:
            return _zcdp_delta(sens * sens / (2 * sig * sig), epsilon)  # overflow to inf: delta 1

    target = delta * (1 - 1e-9)
    cap = 1e6 if method == "exact" else 2.0**31
    try:
        sig = safe_root(lambda sig: dfun(sig) - target, min(max(1.0, sens), cap), rtol=1e-10, lo=1e-3, hi=cap)
    except NoSafeValue:
        if method == "exact":
            raise ValueError("method='exact' supports sigma <= 1e5; use method='zcdp'") from None
        raise ValueError(f"the required sigma exceeds 2**31 (the sampler's limit): sensitivity={sens!r} "
                         f"is too large or epsilon={epsilon!r} / delta={delta!r} too small") from None
    return _round_up_sigma2(sig * sig)


# ----------------------------------------------------------------------------- mechanisms

def _lattice_coords(values, g: Fraction, name: str = "values") -> tuple[np.ndarray, np.ndarray]:
    """Integer lattice coordinates k with values = k * g (|k| < 2**53), and the array of values.

    Every range check is exact: integer inputs are bounded through their extremes as Python
    ints (``abs`` of an int64 -2**63 wraps to itself in NumPy) before any int64 product is
    formed, and the products formed afterwards are proven not to overflow by those bounds.
    """
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be numeric, got {type(values).__name__}")
    try:
        arr = np.asarray(values)
    except ValueError as exc:  # ragged nested lists
        raise TypeError(f"{name} must be a rectangular array of numbers: {exc}") from None
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be an integer or float array, got dtype {arr.dtype}")
    p, q = g.numerator, g.denominator  # g = p / q, both < 2**62
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) > _INT64_MAX:
            raise ValueError(f"{name} must be < 2**63 (int64 lattice arithmetic and output)")
        if arr.size:
            mag = max(abs(int(arr.min())), abs(int(arr.max())))  # exact, as Python ints
            # |k| = |v| q / p < 2**53  <=>  |v| q < 2**53 p
            if mag * q >= _MAX_LATTICE * p:
                raise ValueError(f"{name}/granularity must be < 2**53 in magnitude "
                                 f"(got |{name}| up to {mag} with granularity={g})")
        a = arr.astype(np.int64)  # exact: every entry is in the int64 range
        if p != 1:
            if arr.size and np.any(a % p):
                raise ValueError(f"{name} must be multiples of granularity={g}")
            a = a // p
        # |a| = |v| / p < 2**53 / q, so a * q cannot overflow
        k = a * q if q != 1 else a
    else:
        a = arr.astype(np.float64)
        if not np.isfinite(a).all():
            raise ValueError(f"{name} contains NaN or infinite entries")
        with np.errstate(over="ignore"):
            kf = a / float(g)  # may overflow to inf: caught by the bound below
        k = np.rint(kf)
        if arr.size and not np.abs(k).max() < _MAX_LATTICE:
            raise ValueError(f"{name}/granularity must be < 2**53 in magnitude")
        if arr.size and np.any(np.abs(kf - k) > 1e-9 * np.maximum(1.0, np.abs(kf))):
            raise ValueError(
                f"{name} must lie on the lattice granularity*Z (granularity={g}); round them to it "
                "first, and account for the rounding in the sensitivity"
            )
        k = k.astype(np.int64)
    return k, arr


def _from_lattice(k: np.ndarray, arr: np.ndarray, g: Fraction):
    """k * g in the output dtype.  |k| < 2**53 + 2**62 < 2**63 (the samplers redraw |Y| >= 2**62),
    so the sum k + noise never wraps.  For int64 output the product k * p can exceed int64; it is
    saturated to the largest multiples of the granularity that int64 holds (a clamp applied to the
    released noisy value: post-processing, so the privacy guarantee is unchanged)."""
    if arr.dtype.kind in "iu" and g.denominator == 1:
        p = g.numerator
        if p != 1:
            lim = _INT64_MAX // p
            k = np.clip(k, -lim, lim)
        res = k * p
    else:
        dt = arr.dtype if arr.dtype.kind == "f" else np.float64
        res = (k.astype(np.float64) * float(g)).astype(dt, copy=False)
    return res[()] if res.ndim == 0 else res


def _granularity(granularity) -> Fraction:
    g, _ = to_fraction(granularity, "granularity")
    if g.numerator >= 2**62 or g.denominator >= 2**62:
        raise ValueError(f"granularity numerator and denominator must be < 2**62, got {g}")
    return g


@validate_params(sensitivity=Rational(), epsilon=Rational(), rng=RNG)
def discrete_laplace_mechanism(
    values,
    sensitivity: RationalLike,
    epsilon: RationalLike,
    rng: RandomLike = None,
    *,
    granularity: RationalLike = 1,
    budget: Optional["PrivacyBudget"] = None,
):
    """epsilon-DP release of lattice-valued ``values`` with exact discrete Laplace noise.

    ``values`` (any shape) must lie on the lattice granularity * Z (integers by default; a
    float within relative 1e-9 of a lattice point, such as 0.30000000000000004 on 0.1 * Z,
    is taken as that point; anything else raises ``ValueError``); each entry gets independent Lap_Z(scale) noise in lattice units, scale = (sensitivity /
    granularity) / epsilon computed exactly as a rational and rounded *up* if it must be
    approximated to fit the sampler, so the guarantee is never weaker than requested.

    Guarantee: epsilon-DP for neighbouring datasets whose ``values`` differ by at most
    ``sensitivity`` in l1 norm (same units as ``values``; the neighbouring relation is the one
    under which that sensitivity was computed).  Integer ``values`` with an integer
    granularity give an int64 result; otherwise floats (float32 in, float32 out).  The
    output is always granularity times an integer: no floating-point noise bits.

    ``budget``: charged before any noise is drawn (default: the ``with budget:`` default, if
    any) with one event for the whole array, ``PureDP`` at the epsilon of the scale actually
    used (at most ``epsilon``); ``BudgetExceededError`` when it does not fit (nothing drawn).

    See: :doc:`/theory/mechanisms` (Discrete Laplace / discrete Gaussian); CKS20 Algorithm 2.
    """
    return _dlm_plan(values, sensitivity, epsilon, granularity).release(rng, budget)


@_events.planned_by(discrete_laplace_mechanism)
def _dlm_plan(values, sensitivity: Fraction, epsilon: Fraction, granularity) -> _events.Plan:
    g = _granularity(granularity)
    k, arr = _lattice_coords(values, g)
    scale = sensitivity / g / epsilon
    s, t = _laplace_params(scale, True, mode="up", name="sensitivity/(granularity*epsilon)")
    noise = np.empty(k.shape, dtype=np.int64)

    def draw(gen):
        with native_stream(gen) as cap:
            _exact.discrete_laplace_fill(cap, s, t, noise.reshape(-1), _n_threads(noise.size))
        return _from_lattice(k + noise, arr, g)

    # the noise is Lap_Z(t/s) in lattice units: epsilon = (sensitivity/granularity) * s / t
    return _events.Plan("discrete_laplace_mechanism", _events.pure_event, (sensitivity / g * Fraction(s, t),),
                        draw)


@validate_params(sensitivity=Rational(), epsilon=Epsilon(allow_array=False), delta=Delta(allow_zero=False),
                 rng=RNG)
def discrete_gaussian_mechanism(
    values,
    sensitivity: float,
    epsilon: float,
    delta: float,
    rng: RandomLike = None,
    *,
    granularity: RationalLike = 1,
    method: Optional[str] = None,
    budget: Optional["PrivacyBudget"] = None,
):
    """(epsilon, delta)-DP release of lattice-valued ``values`` with exact discrete Gaussian noise.

    ``values`` (any shape) must lie on granularity * Z; each entry gets independent
    N_Z(0, sigma^2) noise in lattice units, sigma^2 from :func:`discrete_gaussian_sigma2`
    with the l2 sensitivity in lattice units (sensitivity / granularity), rounded up.
    ``method``: ``"exact"`` (CKS20 Theorem 7; the default for a single value with an integer
    lattice sensitivity) or ``"zcdp"`` (CKS20 Theorem 14 + Corollary 13; the default otherwise,
    valid in any dimension).

    Guarantee: (epsilon, delta)-DP for neighbouring datasets whose ``values`` differ by at most
    ``sensitivity`` in l2 norm.  Output dtype as in :func:`discrete_laplace_mechanism`.
    ``budget``: charged before any noise is drawn (default: the ``with budget:`` default, if
    any) with ``ApproxDP(epsilon, delta)``, one event for the whole array;
    ``BudgetExceededError`` when it does not fit (nothing drawn).
    See: :doc:`/theory/mechanisms` (Discrete Laplace / discrete Gaussian); CKS20 Algorithm 3.
    """
    return _dgm_plan(values, sensitivity, epsilon, delta, granularity, method).release(rng, budget)


@_events.planned_by(discrete_gaussian_mechanism)
def _dgm_plan(values, sensitivity: Fraction, epsilon: float, delta: float, granularity, method) -> _events.Plan:
    g = _granularity(granularity)
    sens_lat = sensitivity / g
    sens_lat_f = check_real(sens_lat, "sensitivity / granularity")  # before the data is read
    k, arr = _lattice_coords(values, g)
    if method is None:
        method = "exact" if (k.size == 1 and sens_lat.denominator == 1 and sens_lat <= 10**4) else "zcdp"
    sigma2 = discrete_gaussian_sigma2(sens_lat_f, epsilon, delta, method=method)
    n, d, tau = _gauss_params(sigma2, False, mode="exact", name="sigma2")
    noise = np.empty(k.shape, dtype=np.int64)

    def draw(gen):
        with native_stream(gen) as cap:
            _exact.discrete_gaussian_fill(cap, *_split128(n), *_split128(d), tau, noise.reshape(-1),
                                          _n_threads(noise.size))
        return _from_lattice(k + noise, arr, g)

    return _events.Plan("discrete_gaussian_mechanism", _events.approx_dp_event, (epsilon, delta), draw)
