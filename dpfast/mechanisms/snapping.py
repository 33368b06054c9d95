"""The snapping mechanism: floating-point-safe Laplace noise for real values (see
:doc:`/theory/mechanisms`, "Snapping mechanism"; Mironov 2012, "On significance of the least
significant bits for differential privacy", CCS 2012, section 5).

Textbook Laplace noise computed in floating point leaks the input through the pattern of
representable outputs (Mironov 2012, section 3).  The snapping mechanism fixes this with
clamping and rounding to a coarse power-of-two grid:

    out = Delta * clamp_B( round_Lambda( clamp_B(x / Delta) (+) S (*) lambda (*) LN(U*) ) )

where x / Delta is the query in units of its sensitivity, B = bound / Delta, S a uniform sign,
U* uniform over the doubles of (0, 1) (exponent drawn geometrically from the leading zeros of
random words, 52 uniform mantissa bits), LN the C library's natural logarithm, (+) and (*)
IEEE double operations, Lambda the smallest power of two >= lambda and round_Lambda
rounding to the nearest multiple of Lambda.  Kernel: ``csrc/samplers/snapping.hpp``.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Optional

import numpy as np

from dpfast import _exact
from dpfast._validation import Epsilon, Positive, check_values, validate_params
from dpfast.mechanisms import _events
from dpfast.mechanisms.discrete import _n_threads
from dpfast.random import RNG, RandomLike, native_stream

if TYPE_CHECKING:
    from dpfast.budget import PrivacyBudget

__all__ = ["snapping", "snapping_epsilon", "snapping_scale"]

_ETA = Fraction(1, 2**53)  # unit roundoff of IEEE double
_MAX_RATIO = 2**46  # Mironov 2012 Theorem 1 needs B < 2^46 lambda


def _to_float(fr: Fraction) -> float:
    try:
        f = float(fr)
    except OverflowError:
        f = math.inf
    if not f < math.inf:
        raise ValueError(
            f"bound / sensitivity (or the noise scale it implies) exceeds the double range (about "
            f"10**{len(str(fr.numerator // fr.denominator)) - 1}); use a smaller bound or a larger sensitivity")
    return f


def _float_up(fr: Fraction) -> float:
    f = _to_float(fr)
    return math.nextafter(f, math.inf) if Fraction(f) < fr else f


def _float_down(fr: Fraction) -> float:
    f = _to_float(fr)
    return math.nextafter(f, -math.inf) if Fraction(f) > fr else f


def _epsilon_fraction(lam: Fraction, bound: Fraction) -> Fraction:
    # (1 + 2^-52 B)(1 + 2^-49 B) / lambda + 2^-52  -- see snapping_epsilon
    return (1 + 2 * _ETA * bound) * (1 + 16 * _ETA * bound) / lam + 2 * _ETA


@validate_params(scale=Positive(allow_array=False), bound=Positive(allow_array=False))
def snapping_epsilon(scale: float, bound: float) -> float:
    """Privacy of the snapping mechanism with noise scale ``scale`` (lambda) and clamping
    bound ``bound`` (B), both in units of the query's sensitivity (see :doc:`/theory/mechanisms`).

    Returns (an upper bound on) its epsilon, rounded up:

        epsilon = (1 + 2^-52 B)(1 + 2^-49 B) / lambda + 2^-52,     valid for lambda < B < 2^46 lambda.

    Reading implemented: Mironov 2012, Theorem 1 as usually quoted -- the snapping mechanism is
    (1/lambda + 2^-49 B/lambda)-DP for a sensitivity-1 query when lambda < B < 2^46 lambda,
    assuming a correctly rounded logarithm -- made conservative in two ways: the additive
    2 eta = 2^-52 of the (epsilon - 2 eta)/(1 + 12 B eta) reading used by diffprivlib (Covington
    et al.), and a factor (1 + 2^-52 B) for the rounding of x / sensitivity when the
    sensitivity is not a power of two (a relative input error below 2 eta B; heuristic).
    UNVERIFIED against the paper's text (from the published statement, Mironov 2012); the deviations from the
    theorem's assumptions are listed in :func:`snapping`.
    """
    lam, b = Fraction(scale), Fraction(bound)
    if not lam < b < _MAX_RATIO * lam:
        raise ValueError(
            f"the snapping mechanism's guarantee needs scale < bound < 2**46 * scale "
            f"(in sensitivity units); got scale={float(lam):.6g}, bound={float(b):.6g}"
        )
    return _float_up(_epsilon_fraction(lam, b))


def _plan(epsilon: float, bound_s: Fraction) -> tuple[Fraction, Fraction]:
    """(lambda, B_internal) achieving ``epsilon`` with the clamp bound at least ``bound_s``."""
    eps = Fraction(epsilon) - 2 * _ETA
    if eps <= 0:
        raise ValueError(f"epsilon must exceed 2**-52 for the snapping mechanism, got {epsilon!r}")

    def lam_for(b: Fraction) -> Fraction:
        return (1 + 2 * _ETA * b) * (1 + 16 * _ETA * b) / eps

    b_int = bound_s
    lam = lam_for(b_int)
    if not b_int > lam:
        # The theorem needs B > lambda: clamp internally to a wider bound (2 lambda) and
        # clamp the output to the requested bound afterwards (post-processing).
        b_int = Fraction(_float_up(2 * lam))
        lam = lam_for(b_int)
    if not b_int < _MAX_RATIO * lam:
        raise ValueError(
            "bound / sensitivity must be < 2**46 times the noise scale for the snapping mechanism "
            f"(bound/sensitivity = {float(bound_s):.6g}, scale = {float(lam):.6g}); "
            "reduce the bound or epsilon"
        )
    return lam, b_int


@validate_params(epsilon=Epsilon(allow_array=False), sensitivity=Positive(allow_array=False),
                 bound=Positive(allow_array=False))
def snapping_scale(epsilon: float, bound: float, sensitivity: float = 1.0) -> float:
    """Noise scale lambda (in data units, i.e. times ``sensitivity``) that :func:`snapping`
    uses for ``epsilon`` and ``bound``: the smallest lambda with
    :func:`snapping_epsilon` <= epsilon (up to rounding of lambda upwards)."""
    lam, _ = _plan(epsilon, Fraction(bound) / Fraction(sensitivity))
    return _float_up(lam) * sensitivity


@validate_params(sensitivity=Positive(allow_array=False), epsilon=Epsilon(allow_array=False),
                 bound=Positive(allow_array=False), rng=RNG)
def snapping(values, sensitivity: float, epsilon: float, bound: float, rng: RandomLike = None, *,
             budget: Optional["PrivacyBudget"] = None):
    """epsilon-DP release of real ``values`` in [-bound, bound] by the snapping mechanism.

    Each entry is clamped to [-bound, bound], perturbed with Laplace noise of scale
    lambda * sensitivity built from a uniform over all doubles in (0, 1) (exact 53-bit
    mantissa construction), rounded to the nearest multiple of Lambda * sensitivity
    (Lambda = smallest power of two >= lambda) and clamped again.  lambda is the smallest
    scale with :func:`snapping_epsilon` <= ``epsilon``:
    lambda = (1 + 2^-52 B)(1 + 2^-49 B) / (epsilon - 2^-52), B = bound / sensitivity; when
    B <= lambda the internal clamp uses 2 lambda instead (the theorem needs B > lambda) and
    the output is clamped to the requested bound afterwards (post-processing).

    Guarantee: epsilon-DP for one value that changes by at most ``sensitivity`` (in absolute
    value) between neighbouring datasets.  Entries of an array are independent snapping
    mechanisms: if k entries can change, the release is k * epsilon-DP by basic composition
    (Mironov's analysis is one-dimensional; there is no l1-vector version here), each
    changing by at most ``sensitivity``.  Accounting: see :func:`snapping_epsilon` (Mironov 2012 Theorem 1,
    made conservative; UNVERIFIED against the paper text).  Deviations from the theorem's
    assumptions: the logarithm is the C library's ``log`` (glibc: error < 1 ulp, not proven
    correctly rounded); a non-power-of-two sensitivity adds one rounding of x / sensitivity
    (covered heuristically by the (1 + 2^-52 B) factor).  Use with
    :class:`dpfast.random.SecureRandom` for cryptographic guarantees.

    Output dtype follows the input (float32 stays float32, others become float64).
    ``budget``: charged before any noise is drawn (default: the ``with budget:`` default, if
    any) with the n compositions of ``PureDP(epsilon)`` of an n-entry array (every entry may
    change: the guarantee above; an empty array is charged as one entry), one event for the call; ``BudgetExceededError`` when it
    does not fit (nothing drawn, ``rng`` untouched).
    See: :doc:`/theory/mechanisms` (Snapping mechanism).
    """
    return _snapping_plan(values, sensitivity, epsilon, bound).release(rng, budget)


@_events.planned_by(snapping)
def _snapping_plan(values, sensitivity: float, epsilon: float, bound: float) -> _events.Plan:
    arr = check_values(values)
    sens, bnd = sensitivity, bound
    bound_s = Fraction(bnd) / Fraction(sens)
    lam, b_int = _plan(epsilon, bound_s)
    lam_f = _float_up(lam)
    big_lambda = math.ldexp(1.0, math.frexp(lam_f)[1])  # 2^e > lam_f ...
    if big_lambda / 2 >= lam_f:  # ... and lam_f an exact power of two: use it
        big_lambda /= 2
    b_int_f = _float_down(b_int)
    x = np.ascontiguousarray(arr, dtype=np.float64).reshape(-1)
    if sens != 1.0:
        x = x / sens
    if b_int > bound_s:  # widened internal bound: still clamp the input to the requested one
        x = np.clip(x, -_float_down(bound_s), _float_down(bound_s))
    out = np.empty_like(x)

    def draw(gen):
        with native_stream(gen) as cap:
            _exact.snapping_fill(cap, x, lam_f, big_lambda, b_int_f, out, _n_threads(out.size))
        if b_int > bound_s:
            bs = _float_down(bound_s)
            np.clip(out, -bs, bs, out=out)
        if sens != 1.0:
            np.multiply(out, sens, out=out)
            np.clip(out, -bnd, bnd, out=out)
        res = out.reshape(arr.shape).astype(arr.dtype, copy=False)
        return res[()] if res.ndim == 0 else res

    return _events.Plan("snapping", _events.exponential_event, (epsilon, max(x.size, 1), "PureDP"), draw)
