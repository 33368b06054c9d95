"""Bounded-domain Laplace and geometric mechanisms: outputs confined to ``[lower, upper]``
(see :doc:`/theory/mechanisms`, "Bounded-domain Laplace and geometric").

Three ways to keep a noisy release inside a public interval, as diffprivlib names them:

* **truncated** (``LaplaceTruncated`` / ``GeometricTruncated``): the plain Laplace (discrete
  Laplace) release, clamped to the interval.  A clamp is post-processing, so the guarantee and
  the event are those of the plain mechanism with the plain scale ``sensitivity / epsilon``;
  the law has atoms at the two ends.
* **folded** (``LaplaceFolded`` / ``GeometricFolded``): the plain release reflected back into
  the interval at its ends (at ``lower - 1/2`` and ``upper + 1/2`` on the integers, so that
  every integer of the range keeps one preimage per period).  Also post-processing.
* **bounded** (``LaplaceBoundedDomain``; Holohan, Antonatos, Braghin & Mac Aonghusa 2018, "The
  bounded Laplace mechanism in differential privacy", JPC 10(1)): the Laplace density
  conditioned on the interval, ``f(y | x) = exp(-|y - x| / b) / (2 b C(x))`` on ``[l, u]`` with
  ``C(x) = 1 - (exp(-(x - l)/b) + exp(-(u - x)/b)) / 2``.  The normalising constant depends on
  x, so ``b = sensitivity / epsilon`` is *not* enough: :func:`bounded_laplace_scale` solves
  their fixed-point condition ``b >= Delta / (epsilon - log(1 - delta) - log DeltaC(b))``,
  ``DeltaC(b) = C(l + Delta) / C(l)``, with :func:`dpfast._safe_root.safe_root`.

The input of every mechanism here is first clamped to ``[lower, upper]`` (a 1-Lipschitz map:
the sensitivity is unchanged; Holohan et al.'s guarantee is stated for inputs in the domain), so
an out-of-range value is never an error that depends on the data.  The continuous ones are not
floating-point safe (as :mod:`dpfast.mechanisms.continuous`); the geometric ones are exact
(integer arithmetic, :func:`dpfast.mechanisms.discrete_laplace_mechanism`'s sampler).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Optional

import numpy as np

from dpfast._rational import Rational, RationalLike
from dpfast._safe_root import NoSafeValue, safe_root
from dpfast._validation import Bounds, Delta, Epsilon, Positive, check_values, validate_params
from dpfast.accounting import events as _ev
from dpfast.mechanisms import _events
from dpfast.mechanisms.continuous import _laplace_plan
from dpfast.mechanisms.discrete import _dlm_plan
from dpfast.random import RNG, RandomLike

if TYPE_CHECKING:
    from dpfast.budget import PrivacyBudget

__all__ = [
    "truncated_laplace",
    "folded_laplace",
    "bounded_laplace",
    "bounded_laplace_scale",
    "truncated_geometric",
    "folded_geometric",
]


def _clamped(values, lo: float, hi: float) -> np.ndarray:
    arr = check_values(values)
    return np.clip(arr, arr.dtype.type(lo), arr.dtype.type(hi))


def _fold_real(y: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Reflect ``y`` into [lo, hi] at its ends (period 2 (hi - lo))."""
    d = hi - lo
    z = np.mod(y - lo, 2.0 * d)
    z = np.where(z > d, 2.0 * d - z, z)
    return np.clip(lo + z, lo, hi)


# ----------------------------------------------------------------------------- truncated / folded Laplace

@validate_params(sensitivity=Positive(allow_array=False), epsilon=Epsilon(allow_array=False), bounds=Bounds(),
                 rng=RNG)
def truncated_laplace(values, sensitivity: float, epsilon: float, bounds, rng: RandomLike = None, *,
                      budget: Optional["PrivacyBudget"] = None):
    """The truncated Laplace mechanism (diffprivlib's ``LaplaceTruncated``):
    ``clip(clip(values, lower, upper) + Lap(sensitivity / epsilon), lower, upper)``.

    Guarantee: epsilon-DP when ``sensitivity`` bounds the **l1** sensitivity of ``values`` (as
    :func:`dpfast.laplace`; clamping the input is 1-Lipschitz and clamping the output is
    post-processing, Dwork & Roth 2014, Proposition 2.1).  Law of one entry with clamped input
    x and b = sensitivity / epsilon: the Laplace(x, b) density on (lower, upper), plus atoms
    exp(-(x - lower)/b)/2 at ``lower`` and exp(-(upper - x)/b)/2 at ``upper``.

    Parameters
    ----------
    values : array_like
        Finite reals (any shape), clamped to ``bounds`` first.
    sensitivity, epsilon : float
        > 0.
    bounds : (float, float)
        The public output domain (lower < upper).
    rng : None, int, numpy.random.Generator or SecureRandom
    budget : PrivacyBudget, optional
        Charged before the draw with the event of :func:`dpfast.laplace` on the same call
        (``Laplace(scale=sensitivity/epsilon, sensitivity)``).

    Not floating-point safe (see :mod:`dpfast.mechanisms.continuous`).
    """
    return _truncated_laplace_plan(values, sensitivity, epsilon, bounds).release(rng, budget)


@_events.planned_by(truncated_laplace)
def _truncated_laplace_plan(values, sensitivity, epsilon, bounds) -> _events.Plan:
    lo, hi = bounds
    inner = _laplace_plan(_clamped(values, lo, hi), sensitivity, epsilon)

    def draw(gen):
        out = inner.draw(gen)
        return np.clip(out, out.dtype.type(lo), out.dtype.type(hi))

    return _events.Plan("truncated_laplace", inner.build, inner.args, draw)


@validate_params(sensitivity=Positive(allow_array=False), epsilon=Epsilon(allow_array=False), bounds=Bounds(),
                 rng=RNG)
def folded_laplace(values, sensitivity: float, epsilon: float, bounds, rng: RandomLike = None, *,
                   budget: Optional["PrivacyBudget"] = None):
    """The folded Laplace mechanism (diffprivlib's ``LaplaceFolded``): ``clip(values, lower,
    upper) + Lap(sensitivity / epsilon)`` reflected back into ``[lower, upper]`` at its ends.

    Guarantee: epsilon-DP for an **l1** ``sensitivity`` (reflection is post-processing of the
    Laplace release).  Law of one entry with clamped input x: density
    sum_k [p(2 k D + y) + p(2 k D + 2 lower - y)] on [lower, upper], D = upper - lower,
    p the Laplace(x, b) density (the sum over the preimages of the reflection).

    Parameters and event as :func:`truncated_laplace`.  Not floating-point safe.
    """
    return _folded_laplace_plan(values, sensitivity, epsilon, bounds).release(rng, budget)


@_events.planned_by(folded_laplace)
def _folded_laplace_plan(values, sensitivity, epsilon, bounds) -> _events.Plan:
    lo, hi = bounds
    inner = _laplace_plan(_clamped(values, lo, hi), sensitivity, epsilon)

    def draw(gen):
        out = inner.draw(gen)
        res = _fold_real(np.asarray(out, dtype=np.float64), lo, hi).astype(np.asarray(out).dtype, copy=False)
        return res[()] if res.ndim == 0 else res

    return _events.Plan("folded_laplace", inner.build, inner.args, draw)


# ----------------------------------------------------------------------------- bounded Laplace

def _log_delta_c(b: float, sens: float, d: float) -> float:
    """log DeltaC(b) = log C(l + s) - log C(l), s = min(sensitivity, D) (Holohan et al. 2018,
    Definition 3.4 / Lemma 4.2), in expm1 form (no cancellation for b >> D)."""
    s = min(sens, d)
    num = -math.expm1(-s / b) - math.expm1(-(d - s) / b)  # 2 - e^{-s/b} - e^{-(D-s)/b}
    den = -math.expm1(-d / b)                             # 1 - e^{-D/b}
    return math.log(num) - math.log(den)


def bounded_laplace_loss(b: float, sensitivity: float, width: float) -> float:
    """The largest privacy loss of the bounded Laplace mechanism of scale ``b`` on a domain of
    ``width`` for inputs at most ``sensitivity`` apart: ``min(sensitivity, width) / b + log DeltaC(b)``
    (the pointwise log density ratio at its worst: x = lower, x' = lower + sensitivity, y = lower)."""
    return min(sensitivity, width) / b + _log_delta_c(b, sensitivity, width)


@validate_params(epsilon=Epsilon(allow_array=False), delta=Delta(allow_zero=True),
                 sensitivity=Positive(allow_array=False), bounds=Bounds())
def bounded_laplace_scale(epsilon: float, delta: float, sensitivity: float, bounds) -> float:
    """The scale b of the bounded Laplace mechanism (Holohan et al. 2018): the smallest b with

        min(Delta, D) / b + log DeltaC(b) <= epsilon - log(1 - delta),
        DeltaC(b) = (2 - e^{-Delta/b} - e^{-(D - Delta)/b}) / (1 - e^{-D/b}),   D = upper - lower,

    their fixed-point condition b = Delta / (epsilon - log DeltaC(b) - log(1 - delta)) (the
    condition of their Theorem on the fixed point, the same one diffprivlib's
    ``LaplaceBoundedDomain`` iterates), solved on the safe side by
    :func:`dpfast._safe_root.safe_root` (the returned b satisfies it as evaluated, with a
    relative margin of 1e-12 on the right-hand side for the rounding of the left).

    Why it is (epsilon, delta)-DP: the density ratio f(y|x) / f(y|x') = exp((|y - x'| - |y - x|)/b)
    C(x') / C(x) is at most exp(L(b)) for |x - x'| <= Delta (the worst case is an input at an end
    of the domain; ``tests/mechanisms/test_mechanisms_bounded.py`` maximises it over a grid), so
    e^epsilon f(y|x') >= (1 - delta) f(y|x) everywhere and P[S|x] - e^epsilon P[S|x'] <=
    delta P[S|x] <= delta for every event S.  ``delta = 0``: pure epsilon-DP.
    """
    lo, hi = bounds
    d = hi - lo
    if not (math.isfinite(d) and d > 0):
        raise ValueError("bounds: upper - lower must be a finite positive double")
    target = epsilon - math.log1p(-delta)
    margin = 1e-12 * (abs(target) + 1.0)

    def excess(b: float) -> float:
        if not b > 0.0:
            raise ValueError("no noise")
        val = bounded_laplace_loss(b, sensitivity, d)
        if not math.isfinite(val):
            raise ValueError("not computable")
        return val - (target - margin)

    start = max(min(sensitivity, d) / target, 1e-300)  # the root is >= this (DeltaC >= 1)
    try:
        return safe_root(excess, start, rtol=1e-10)
    except NoSafeValue:
        raise ValueError(f"no bounded Laplace scale satisfies epsilon={epsilon!r}, delta={delta!r} for "
                         f"sensitivity={sensitivity!r} on a domain of width {d!r} (the scale overflows)") from None


def _bounded_event(epsilon: float, delta: float, n: int):
    ev = _ev.PureDP(epsilon=epsilon) if delta == 0 else _ev.ApproxDP(epsilon=epsilon, delta=delta)
    return _ev.self_composed(ev, n)


@validate_params(sensitivity=Positive(allow_array=False), epsilon=Epsilon(allow_array=False),
                 bounds=Bounds(), delta=Delta(allow_zero=True), rng=RNG)
def bounded_laplace(values, sensitivity: float, epsilon: float, bounds, delta: float = 0.0,
                    rng: RandomLike = None, *, budget: Optional["PrivacyBudget"] = None):
    """The bounded Laplace mechanism (Holohan, Antonatos, Braghin & Mac Aonghusa 2018;
    diffprivlib's ``LaplaceBoundedDomain``): each entry, clamped to ``[lower, upper]``, is
    released from the Laplace density of scale b restricted to ``[lower, upper]`` and renormalised,
    b = :func:`bounded_laplace_scale` (epsilon, delta, sensitivity, bounds).

    Guarantee: each entry is (epsilon, delta)-DP when that entry changes by at most
    ``sensitivity`` between neighbouring data sets (the proof is in
    :func:`bounded_laplace_scale`).  An array of n entries, any of which may change, is the
    n-fold composition (event ``SelfComposed(PureDP(epsilon), n)``, or of ``ApproxDP(epsilon,
    delta)``; one entry: the leaf itself).  The release is unbiased only at the domain's centre:
    it is the estimator to use when the output must be a plausible value of the domain.

    Sampler: exact inverse CDF (no rejection loop): a uniform picks the side of x with
    probability proportional to its mass (1 - e^{-(x - l)/b}) : (1 - e^{-(u - x)/b}), and the
    same uniform, rescaled, inverts that side's truncated exponential (``log1p``/``expm1``: no
    cancellation when b is much larger than the domain).  Not floating-point safe.

    Parameters
    ----------
    values : array_like
        Finite reals, clamped to ``bounds``.
    sensitivity, epsilon : float
        > 0.
    bounds : (float, float)
    delta : float
        In [0, 1); 0 (default): pure epsilon-DP.
    rng, budget
        As :func:`dpfast.laplace`; the charge comes before the draw.
    """
    return _bounded_laplace_plan(values, sensitivity, epsilon, bounds, delta).release(rng, budget)


@_events.planned_by(bounded_laplace)
def _bounded_laplace_plan(values, sensitivity, epsilon, bounds, delta) -> _events.Plan:
    lo, hi = bounds
    b = bounded_laplace_scale(epsilon, delta, sensitivity, bounds)
    arr = _clamped(values, lo, hi)
    x = np.asarray(arr, dtype=np.float64)

    def draw(gen):
        res = _bounded_draw(gen, x, b, lo, hi).astype(arr.dtype, copy=False)
        return res[()] if res.ndim == 0 else res

    return _events.Plan("bounded_laplace", _bounded_event, (epsilon, delta, max(x.size, 1)), draw)


def _bounded_draw(gen: np.random.Generator, x: np.ndarray, b: float, lo: float, hi: float) -> np.ndarray:
    """Exact inverse-CDF draws of the Laplace(x, b) law conditioned on [lo, hi] (see
    :func:`bounded_laplace`)."""
    a_left = -np.expm1(-(x - lo) / b)   # 2 x the Laplace mass of [lo, x]
    a_right = -np.expm1(-(hi - x) / b)  # 2 x the mass of [x, hi]
    v = gen.random(x.shape) * (a_left + a_right)
    left = v < a_left
    with np.errstate(divide="ignore", invalid="ignore"):
        w_left = np.where(left, v, 0.0)                     # uniform on [0, a_left) given left
        w_right = np.where(left, 0.0, v - a_left)           # uniform on [0, a_right) given right
        t = np.where(left, -b * np.log1p(-w_left), -b * np.log1p(-w_right))
    y = np.where(left, x - t, x + t)
    return np.clip(y, lo, hi)


# ----------------------------------------------------------------------------- geometric

def _int_bounds(bounds) -> tuple[int, int]:
    lo, hi = bounds
    if lo != math.floor(lo) or hi != math.floor(hi) or max(abs(lo), abs(hi)) >= 2.0**53:
        raise ValueError(f"bounds must be integers below 2**53 in magnitude for a geometric mechanism, got {bounds!r}")
    return int(lo), int(hi)


def _geometric_plan(values, sensitivity: Fraction, epsilon: Fraction, bounds, label: str, post) -> _events.Plan:
    lo, hi = _int_bounds(bounds)
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"values must be an integer array for {label}, got dtype {arr.dtype}")
    k = np.clip(arr, lo, hi).astype(np.int64)
    inner = _dlm_plan(k, sensitivity, epsilon, 1)

    def draw(gen):
        out = np.asarray(inner.draw(gen), dtype=np.int64)
        res = post(out, lo, hi)
        return res[()] if res.ndim == 0 else res

    return _events.Plan(label, inner.build, inner.args, draw)


def _clip_int(y: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.clip(y, lo, hi)


def _fold_int(y: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Reflect integers into [lo, hi] at lo - 1/2 and hi + 1/2 (period 2 (hi - lo + 1))."""
    m = hi - lo + 1
    z = np.mod(y - lo, 2 * m)
    return lo + np.where(z >= m, 2 * m - 1 - z, z)


@validate_params(sensitivity=Rational(), epsilon=Rational(), bounds=Bounds(), rng=RNG)
def truncated_geometric(values, sensitivity: RationalLike, epsilon: RationalLike, bounds,
                        rng: RandomLike = None, *, budget: Optional["PrivacyBudget"] = None):
    """The truncated geometric mechanism (Ghosh, Roughgarden & Sundararajan 2009, "Universally
    utility-maximizing privacy mechanisms"; diffprivlib's ``GeometricTruncated``): integer
    ``values`` clamped to the integer range ``bounds``, plus exact two-sided geometric noise
    (:func:`dpfast.discrete_laplace_mechanism`, P[Y = y] proportional to exp(-epsilon |y| /
    sensitivity)), clamped to the range.

    Guarantee and event: those of :func:`dpfast.discrete_laplace_mechanism` on the same call
    (``PureDP`` at the epsilon of the noise used, l1 ``sensitivity``); the clamps are
    1-Lipschitz on the input and post-processing on the output.  Output: int64, in range.
    Exact: integer arithmetic only (floating-point safe).

    (dpfast's other "truncated geometric", :func:`dpfast.tables.selection_probabilities`, is the
    partition-selection rule of Desfontaines et al. 2022, a threshold on this noise; it draws
    nothing itself.)
    """
    return _truncated_geometric_plan(values, sensitivity, epsilon, bounds).release(rng, budget)


@_events.planned_by(truncated_geometric)
def _truncated_geometric_plan(values, sensitivity, epsilon, bounds) -> _events.Plan:
    return _geometric_plan(values, sensitivity, epsilon, bounds, "truncated_geometric", _clip_int)


@validate_params(sensitivity=Rational(), epsilon=Rational(), bounds=Bounds(), rng=RNG)
def folded_geometric(values, sensitivity: RationalLike, epsilon: RationalLike, bounds,
                     rng: RandomLike = None, *, budget: Optional["PrivacyBudget"] = None):
    """The folded geometric mechanism (diffprivlib's ``GeometricFolded``): as
    :func:`truncated_geometric`, but the noisy integer is reflected into the range at
    ``lower - 1/2`` and ``upper + 1/2`` (so ``lower - 1 -> lower``, ``upper + 1 -> upper``).

    Guarantee and event: those of :func:`dpfast.discrete_laplace_mechanism` (post-processing).
    Law: P[out = j] = sum over the preimages y of j (one per reflection) of P[x + Y = y].
    """
    return _folded_geometric_plan(values, sensitivity, epsilon, bounds).release(rng, budget)


@_events.planned_by(folded_geometric)
def _folded_geometric_plan(values, sensitivity, epsilon, bounds) -> _events.Plan:
    return _geometric_plan(values, sensitivity, epsilon, bounds, "folded_geometric", _fold_int)
