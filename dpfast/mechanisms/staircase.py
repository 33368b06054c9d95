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

import math
from typing import TYPE_CHECKING, Optional

import numpy as np

from dpfast._validation import Epsilon, Positive, check_values, validate_params
from dpfast.mechanisms import _events
from dpfast.random import RNG, RandomLike, standard_exponential

if TYPE_CHECKING:
    from dpfast.budget import PrivacyBudget

__all__ = ["staircase", "staircase_gamma"]


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
