"""The staircase mechanism (see :doc:`/theory/mechanisms`, "Staircase mechanism"; Geng &
Viswanath 2016, "The optimal noise-adding mechanism in differential privacy", IEEE Trans.
Inf. Theory 62(2), 925-951; arXiv 1212.1186, 2014 -- GV below).

For a real query of sensitivity Delta, GV show that among all epsilon-DP noise-adding
mechanisms the one minimising E|X| (and, with another gamma, E X^2) has a staircase-shaped
density: with b = e^{-epsilon} and gamma in (0, 1],

    f(x) = a(gamma) b^k        for |x| in [k Delta, (k + gamma) Delta),
    f(x) = a(gamma) b^(k+1)    for |x| in [(k + gamma) Delta, (k + 1) Delta),    k = 0, 1, ...
    a(gamma) = (1 - b) / (2 Delta (gamma + (1 - gamma) b)),

and the optimal gamma for the l1 cost is gamma* = 1 / (1 + e^{epsilon/2}) (GV Theorem 4).
Its expected |noise| is Delta e^{epsilon/2} / (e^epsilon - 1) against Laplace's
Delta / epsilon: equal as epsilon -> 0, exponentially smaller for large epsilon (the regime
to pick it in; for epsilon <~ 2 the two are within a few per cent).

Sampler (GV Algorithm 1, exact for ideal uniforms): S a uniform sign, G geometric with
P[G = i] = (1 - b) b^i, U uniform on [0, 1), B Bernoulli with
P[B = 1] = (1 - gamma) b / (gamma + (1 - gamma) b); the noise is

    X = S Delta ((1 - B)(G + gamma U) + B (G + gamma + (1 - gamma) U)).

G is floor(E / epsilon) for E standard exponential (:func:`dpfast.random.standard_exponential`):
P[G >= i] = P[E >= i epsilon] = b^i.  Not floating-point safe (doubles built with log).
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import TYPE_CHECKING, Optional, cast

import numpy as np

from dpfast import _exact
from dpfast._rational import Rational, RationalLike
from dpfast._validation import Epsilon, Options, Positive, check_values, validate_params
from dpfast.mechanisms import _events
from dpfast.mechanisms.discrete import _MAX_SCALE, _laplace_params, _n_threads
from dpfast.random import RNG, RandomLike, native_stream, standard_exponential

if TYPE_CHECKING:
    from dpfast.budget import PrivacyBudget

__all__ = ["staircase", "staircase_gamma", "discrete_staircase", "discrete_staircase_r"]


@validate_params(epsilon=Epsilon(allow_array=False))
def staircase_gamma(epsilon: float) -> float:
    """GV's optimal gamma for the l1 cost: 1 / (1 + e^{epsilon/2}) (GV 2016, Theorem 4)."""
    return _gamma_star(epsilon)


def _gamma_star(epsilon: float) -> float:
    return 1.0 / (1.0 + math.exp(epsilon / 2)) if epsilon < 1400 else 0.0


def _check_gamma(gamma, epsilon: float) -> float:
    if gamma is None:
        g = _gamma_star(epsilon)
        if not g > 0.0:
            raise ValueError("epsilon is too large for the staircase mechanism's optimal gamma (it underflows to 0)")
        return g
    if isinstance(gamma, (bool, np.bool_)) or not isinstance(gamma, (int, float, np.integer, np.floating)):
        raise TypeError(f"gamma must be a real number in (0, 1] or None, got {type(gamma).__name__}")
    g = float(gamma)
    if not (0.0 < g <= 1.0):
        raise ValueError(f"gamma must be in (0, 1], got {gamma!r}")
    return g


def staircase_draw(gen: np.random.Generator, shape: tuple, epsilon: float, sensitivity: float,
                   gamma: float) -> np.ndarray:
    """Staircase noise of ``shape`` by GV Algorithm 1 (see the module docstring)."""
    b = math.exp(-epsilon)
    p1 = (1.0 - gamma) * b / (gamma + (1.0 - gamma) * b)
    n = math.prod(shape)
    e = np.asarray(standard_exponential(gen, n), dtype=np.float64).reshape(-1)
    g = np.floor(e / epsilon)
    u = gen.random((3, n))
    sign = np.where(u[0] < 0.5, -1.0, 1.0)
    step_b = u[1] < p1
    mag = np.where(step_b, g + gamma + (1.0 - gamma) * u[2], g + gamma * u[2])
    return (sign * sensitivity * mag).reshape(shape)


@validate_params(sensitivity=Positive(allow_array=False), epsilon=Epsilon(allow_array=False), rng=RNG)
def staircase(values, sensitivity: float, epsilon: float, rng: RandomLike = None, *, gamma: Optional[float] = None,
              budget: Optional["PrivacyBudget"] = None):
    """The staircase mechanism (Geng & Viswanath 2016): ``values`` + i.i.d. staircase noise.

    Guarantee (GV 2016, Section II / Theorem 4; :doc:`/theory/mechanisms`): for a query whose
    entries each change by at most ``sensitivity`` between neighbouring data sets, each noisy
    entry is epsilon-DP for every gamma in (0, 1]: f(x) / f(x + d) <= e^epsilon whenever
    |d| <= Delta (the density drops by the factor b = e^{-epsilon} once per period Delta).  A
    shift smaller than Delta can still cost the full epsilon, so, unlike Laplace, splitting
    ``sensitivity`` over coordinates does not share it: an array of n entries is the n-fold
    composition, event ``SelfComposed(PureDP(epsilon), n)`` (one entry: ``PureDP(epsilon)``).
    Use it for scalar (or few) releases at moderate-to-large epsilon, where it is optimal (its
    E|noise| = Delta e^{epsilon/2} / (e^epsilon - 1), vs Laplace's Delta / epsilon).

    Parameters
    ----------
    values : array_like
        Finite reals (any shape); float32 stays float32.
    sensitivity : float
        > 0: the most any one entry changes.
    epsilon : float
        > 0.
    rng : None, int, numpy.random.Generator or SecureRandom
    gamma : float in (0, 1], optional
        The staircase's step split; default GV's optimum 1 / (1 + e^{epsilon/2}).
    budget : PrivacyBudget, optional
        Charged before any draw.

    Not floating-point safe (see :mod:`dpfast.mechanisms.continuous`).
    """
    return _staircase_plan(values, sensitivity, epsilon, gamma).release(rng, budget)


@_events.planned_by(staircase)
def _staircase_plan(values, sensitivity, epsilon, gamma) -> _events.Plan:
    g = _check_gamma(gamma, epsilon)
    arr = check_values(values)
    if not math.isfinite(sensitivity * (1.0 + 60.0 / epsilon)):
        raise ValueError("sensitivity / epsilon is too large: the staircase noise would overflow")

    def draw(gen):
        noise = staircase_draw(gen, arr.shape, epsilon, sensitivity, g)
        res = (arr + noise).astype(arr.dtype, copy=False)
        return res[()] if res.ndim == 0 else res

    return _events.Plan("staircase", _events.exponential_event, (epsilon, max(arr.size, 1), "PureDP"), draw)


# ----------------------------------------------------------------------------- discrete staircase
#
# GV 2016, the discrete setting (Section V of the IEEE version; the section number is from memory,
# the pmf below is as quoted, with its a(r), in C. Harrison 2024, "Analytical variance of the
# discrete staircase mechanism", and re-derived in the tests' normalisation check): for an integer-valued
# query of integer sensitivity Delta, an optimal epsilon-DP integer noise has the staircase pmf
#
#     P_r(i) = a(r)          for 0 <= i < r,
#     P_r(i) = a(r) b        for r <= i < Delta,
#     P_r(i) = b^k P_r(i - k Delta)   for k Delta <= i < (k + 1) Delta,  k = 1, 2, ...,
#     P_r(-i) = P_r(i),      a(r) = (1 - b) / (2 r + 2 b (Delta - r) - (1 - b)),   b = e^-epsilon,
#
# with r in {1, ..., Delta} (the discrete analogue of gamma Delta).  Read as runs of equal mass:
# a centre run {-(r-1), ..., r-1} of 2r - 1 points of mass a, then on each side, for m >= 1, the
# run [r + (m-1) Delta, r + m Delta) of Delta points of mass a b^m (the tail of step m - 1
# followed by the head of step m).  The sampler draws exactly that: (1) the centre run with
# probability p = (2r-1)(1-b) / ((2r-1)(1-b) + 2 Delta b) (an exact Bernoulli, below), a uniform
# point of it; (2) otherwise m - 1 ~ Geometric(b), P[m - 1 = g] = (1 - b) b^g (folded from the
# exact discrete Laplace sampler: Y ~ Lap_Z(1/epsilon) -> Y if Y >= 0 else -Y - 1), a uniform
# point of the run, a uniform side.

_DS_MAX_SENS = 2**40
_DS_MAX_EPS = Fraction(10**4)
_DS_ENUMERATE = 2**22  # the optimal r is found by enumerating r = 1..Delta up to this Delta
_U64 = 2**64


def _ds_moments(r: np.ndarray, delta: int, epsilon: float, cost: str) -> np.ndarray:
    """E|X| (``cost="l1"``) or E X^2 (``"l2"``) of P_r, for an array of r (closed forms of the sums
    over the runs above; floating point: used to choose r, which any value in 1..Delta keeps DP)."""
    r = np.asarray(r, dtype=np.float64)
    D = float(delta)
    b = math.exp(-epsilon)
    om = -math.expm1(-epsilon)  # 1 - b
    c = 2.0 * r - 1.0
    a = om / (c * om + 2.0 * D * b)
    w0 = b / om  # sum_{j>=0} b^(j+1)
    w1 = b * b / (om * om)  # sum_j j b^(j+1)
    w2 = b * b * (1.0 + b) / (om ** 3)  # sum_j j^2 b^(j+1)
    if cost == "l1":
        # 2 sum_{x<r} x + 2 sum_m b^m sum_u (s_m + u), s_m = r + (m-1) D
        return a * (r * (r - 1.0) + 2.0 * (D * (r * w0 + D * w1) + 0.5 * D * (D - 1.0) * w0))
    su1 = r * w0 + D * w1  # sum_m b^m s_m
    su2 = r * r * w0 + 2.0 * r * D * w1 + D * D * w2  # sum_m b^m s_m^2
    per_run = D * su2 + D * (D - 1.0) * su1 + (D - 1.0) * D * (2.0 * D - 1.0) / 6.0 * w0
    return a * ((r - 1.0) * r * (2.0 * r - 1.0) / 3.0 + 2.0 * per_run)


def _ds_optimal_r(delta: int, epsilon: float, cost: str) -> int:
    if delta > _DS_ENUMERATE:
        raise ValueError("sensitivity > 2**22: pass r explicitly (the optimal r is found by enumerating "
                         "r = 1..sensitivity, too many here)")
    r = np.arange(1, delta + 1, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        v = _ds_moments(r, delta, epsilon, cost)
    return int(np.nanargmin(v)) + 1


@validate_params(sensitivity=Rational(), epsilon=Rational(), cost=Options("l1", "l2"))
def discrete_staircase_r(sensitivity: RationalLike, epsilon: RationalLike, *, cost: str = "l1") -> int:
    """The optimal ``r`` of the discrete staircase (GV 2016, Section V) for an integer query of
    integer ``sensitivity`` Delta: the r in {1, ..., Delta} minimising E|X| (``cost="l1"``) or
    E X^2 (``"l2"``) of P_r, found by evaluating the closed-form cost at every r (GV show the
    optimum over all epsilon-DP integer noises is a P_r, so the best of the Delta candidates is
    the optimal mechanism).  Ties go to the smallest r.  Delta <= 2**22."""
    delta, eps = _ds_check(cast(Fraction, sensitivity), cast(Fraction, epsilon))  # Fractions after validation
    return _ds_optimal_r(delta, float(eps), cost)


def _ds_check(sensitivity: Fraction, epsilon: Fraction) -> tuple[int, Fraction]:
    if sensitivity.denominator != 1 or not 1 <= sensitivity <= _DS_MAX_SENS:
        raise ValueError(f"sensitivity must be a positive integer <= 2**40 for the discrete staircase, got {sensitivity}")
    if epsilon > _DS_MAX_EPS:
        raise ValueError(f"epsilon must be <= {_DS_MAX_EPS} for the discrete staircase, got {float(epsilon):.6g}")
    if sensitivity / epsilon > _MAX_SCALE:
        raise ValueError("sensitivity / epsilon must be <= 2**40 (such noise swamps any int64 output)")
    return int(sensitivity), epsilon


def _exp_fixed(x: Fraction, w: int) -> tuple[int, int]:
    """Integers (lo, hi) with lo <= e^x 2^w <= hi, for a rational x >= 0 (exact integer arithmetic:
    Taylor sums with a bound on the remainder, powers with directed rounding)."""
    def taylor(y: Fraction) -> tuple[int, int]:  # y in [0, 1]
        s, term, i = Fraction(0), Fraction(1), 0
        tiny = Fraction(1, 2 ** (w + 8))
        while True:
            s += term
            i += 1
            term = term * y / i
            if term < tiny:
                break
        # remainder sum_{j >= i} y^j / j! <= term / (1 - y / (i + 1)) <= 2 term
        return (s.numerator << w) // s.denominator, -((-(s + 2 * term).numerator << w) // (s + 2 * term).denominator)

    n0 = x.numerator // x.denominator
    f_lo, f_hi = taylor(x - n0)
    if n0 == 0:
        return f_lo, f_hi
    e_lo, e_hi = taylor(Fraction(1))
    p_lo, p_hi = 1 << w, 1 << w  # e^0
    base_lo, base_hi, k = e_lo, e_hi, n0
    while k:
        if k & 1:
            p_lo, p_hi = (p_lo * base_lo) >> w, -((-(p_hi * base_hi)) >> w)
        k >>= 1
        if k:
            base_lo, base_hi = (base_lo * base_lo) >> w, -((-(base_hi * base_hi)) >> w)
    return (p_lo * f_lo) >> w, -((-(p_hi * f_hi)) >> w)


@functools.lru_cache(maxsize=256)
def _centre_thresholds(c: int, delta: int, epsilon: Fraction, bits: int) -> tuple[int, int]:
    """Integers (L, H) with L <= p 2^bits <= H, p = c (e^eps - 1) / (c (e^eps - 1) + 2 Delta) the
    probability of the centre run (increasing in e^eps: bounds of e^eps give bounds of p)."""
    w = bits + 64 + int(epsilon).bit_length() * 2
    e_lo, e_hi = _exp_fixed(epsilon, w)
    one = 1 << w

    def p(e: int) -> Fraction:
        num = c * (e - one)
        return Fraction(num, num + 2 * delta * one)

    lo, hi = p(e_lo), p(e_hi)
    return (lo.numerator << bits) // lo.denominator, -((-hi.numerator << bits) // hi.denominator)


def _exact_bernoulli(gen: np.random.Generator, n: int, thresholds) -> np.ndarray:
    """n exact Bernoulli(p) draws: U = 0.u1u2... (64 uniform bits a word, drawn as needed) is
    compared with p through ``thresholds(bits) = (L, H)``, L <= p 2^bits <= H: U < p is decided
    when the bits drawn so far put U below L 2^-bits, U >= p when they put it at or above H 2^-bits.
    Integer comparisons only; an undecided draw (probability about 2^-63 per word) draws the
    next word."""
    u = gen.integers(0, _U64, size=n, dtype=np.uint64)
    lo, hi = thresholds(64)
    yes = np.ones(n, dtype=bool) if lo >= _U64 else u < np.uint64(lo)
    no = np.zeros(n, dtype=bool) if hi >= _U64 else u >= np.uint64(hi)
    for i in np.flatnonzero(~(yes | no)):
        acc, bits = int(u[i]), 64
        while True:
            acc = (acc << 64) | int(gen.integers(0, _U64, dtype=np.uint64))
            bits += 64
            lo_k, hi_k = thresholds(bits)
            if acc < lo_k:
                yes[i] = True
                break
            if acc >= hi_k:
                break
            if bits > 4096:  # probability < 2^-4000: p is irrational, the bounds shrink with bits
                raise RuntimeError("exact Bernoulli did not resolve in 4096 bits")
    return yes


def discrete_staircase_draw(gen: np.random.Generator, shape: tuple, delta: int, r: int, s: int, t: int) -> np.ndarray:
    """int64 discrete staircase noise P_r (see the comment above) for sensitivity ``delta`` and
    b = e^-(s/t): the exact sampler."""
    n = math.prod(shape)
    eps = Fraction(s, t)
    c = 2 * r - 1
    centre = _exact_bernoulli(gen, n, lambda bits: _centre_thresholds(c, delta, eps, bits))
    y = np.empty(n, dtype=np.int64)
    with native_stream(gen) as cap:
        _exact.discrete_laplace_fill(cap, s, t, y, _n_threads(n))
    g = np.where(y >= 0, y, -y - 1)  # Geometric(b): P[g] = (1 - b) b^g
    g = np.minimum(g, (2**62 - 2 * delta) // delta)  # never binds w.p. > 1 - e^-(2^21) (delta/eps <= 2^40)
    pos = gen.integers(0, delta, size=n, dtype=np.int64)
    side = gen.integers(0, 2, size=n, dtype=np.int64) * 2 - 1
    mid = gen.integers(0, c, size=n, dtype=np.int64) - (r - 1)
    out = np.where(centre, mid, side * (r + g * delta + pos))
    return out.reshape(shape)


@validate_params(sensitivity=Rational(), epsilon=Rational(), rng=RNG, cost=Options("l1", "l2"))
def discrete_staircase(values, sensitivity: RationalLike, epsilon: RationalLike, rng: RandomLike = None, *,
                       r: Optional[int] = None, cost: str = "l1", budget: Optional["PrivacyBudget"] = None):
    """The discrete staircase mechanism (Geng & Viswanath 2016, Section V): integer ``values`` +
    i.i.d. integer staircase noise P_r, exactly sampled.

    Law (GV, the discrete setting): with b = e^-epsilon, P_r(i) = a b^k for i in [k Delta, k Delta
    + r), a b^(k+1) for i in [k Delta + r, (k + 1) Delta) (i >= 0, k = 0, 1, ...), symmetric,
    a = (1 - b) / (2 r + 2 b (Delta - r) - (1 - b)).  GV prove that for an integer query of
    integer sensitivity Delta an epsilon-DP integer noise minimising a symmetric increasing cost
    is of this form for some r in {1, ..., Delta}; ``r=None`` takes the best r for ``cost``
    (:func:`discrete_staircase_r`: E|X| for ``"l1"``, E X^2 for ``"l2"``).  At Delta = 1 the only
    r is 1 and P_1 is the geometric (discrete Laplace) law; for Delta > 1 the staircase's cost is
    below the geometric mechanism's (P[Y = y] ~ e^-epsilon |y| / Delta) at every epsilon, by a
    factor that grows with epsilon (E|X| at Delta = 10: 0.96x at epsilon 1, 0.70x at 3, 0.006x at 10).

    Guarantee: for every r, P_r(i) / P_r(i + d) <= e^epsilon for every integer i and |d| <= Delta
    (along the runs of equal mass, any shift by at most Delta crosses at most one step of ratio
    b), so each noisy entry is epsilon-DP for a query whose entries each change by at most
    ``sensitivity``.  As for :func:`staircase`, a shift smaller than Delta can cost the full
    epsilon, so an array of n entries is the n-fold composition: event
    ``SelfComposed(PureDP(epsilon), n)`` (one entry: ``PureDP(epsilon)``), at the epsilon of the
    noise actually used: epsilon is an exact rational; when 1/epsilon does not fit the native
    sampler (numerator, denominator < 2**64) it is rounded to one that does, never above.

    Exact (floating-point safe): the centre-run Bernoulli compares uniform bits with integer
    bounds of its probability (exact rational Taylor bounds of e^epsilon), the geometric run index
    comes from the exact discrete Laplace sampler (CKS20 Algorithm 2), the positions are uniform
    integers; no float is computed from the noise.

    Parameters
    ----------
    values : array_like of integers
        Any shape; the output is int64 of the same shape (a NumPy int64 scalar for a 0-d input).
    sensitivity : int
        Delta, a positive integer <= 2**40: the most any one entry changes.
    epsilon : rational
        > 0 and <= 10**4 (an int, Fraction, "p/q" string, or a float at its exact binary value).
    rng : None, int, numpy.random.Generator or SecureRandom
    r : int in [1, sensitivity], optional
        The staircase's centre half-width; default the optimum for ``cost`` (needs Delta <= 2**22).
    cost : "l1" or "l2"
        The cost the default r minimises.
    budget : PrivacyBudget, optional
        Charged before any draw.
    """
    return _discrete_staircase_plan(values, sensitivity, epsilon, r, cost).release(rng, budget)


@_events.planned_by(discrete_staircase)
def _discrete_staircase_plan(values, sensitivity, epsilon, r, cost) -> _events.Plan:
    delta, eps = _ds_check(sensitivity, epsilon)
    s, t = _laplace_params(1 / eps, True, mode="up", name="1/epsilon")  # scale t/s >= 1/eps
    if Fraction(delta * t, s) > _MAX_SCALE:
        raise ValueError("sensitivity / epsilon must be <= 2**40 (such noise swamps any int64 output)")
    eps_used = Fraction(s, t)
    if r is None:
        r_ = _ds_optimal_r(delta, float(eps_used), cost)
    else:
        if isinstance(r, (bool, np.bool_)) or not isinstance(r, (int, np.integer)):
            raise TypeError(f"r must be an integer in [1, sensitivity] or None, got {type(r).__name__}")
        r_ = int(r)
        if not 1 <= r_ <= delta:
            raise ValueError(f"r must be in [1, sensitivity={delta}], got {r_}")
    if isinstance(values, (str, bytes)):
        raise TypeError("values must be integers")
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"values must be an integer array for discrete_staircase, got dtype {arr.dtype}")
    if arr.size and (int(arr.max()) >= 2**53 or int(arr.min()) <= -2**53):
        raise ValueError("values must be below 2**53 in magnitude")
    k = arr.astype(np.int64)

    def draw(gen):
        res = k + discrete_staircase_draw(gen, k.shape, delta, r_, s, t)
        return res[()] if res.ndim == 0 else res

    return _events.Plan("discrete_staircase", _events.exponential_event, (eps_used, max(arr.size, 1), "PureDP"),
                        draw)
