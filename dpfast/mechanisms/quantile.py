"""Private quantiles and the private median by the exponential mechanism over intervals.

See: :doc:`/theory/mechanisms` "Private quantiles"; :doc:`/theory/mechanisms` (AW §7.3, Alg. 3 and Alg. 4,
with the corrected weight ``exp(-(eps/2)|i - q n|)``); Smith 2011, "Privacy-preserving
statistical estimation with optimal convergence rates" (STOC).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Optional, Tuple, Union

import numpy as np

from dpfast import _selection
from dpfast._validation import Bounds, Epsilon, as_array, check_values, validate_params
from dpfast.mechanisms import _events
from dpfast.random import RNG, RandomLike

if TYPE_CHECKING:
    from dpfast.budget import PrivacyBudget

__all__ = ["private_quantile", "private_median"]


def _check_levels(q) -> np.ndarray:
    if isinstance(q, float) or type(q) is int:  # fast path for one level
        if not 0.0 <= q <= 1.0:  # also False for NaN
            raise ValueError(f"q must be in [0, 1], got {q!r}")
        return np.array(float(q))
    if isinstance(q, (str, bytes)):
        raise TypeError("q must be a number or an array of numbers in [0, 1]")
    qa = as_array(q, "q", np.float64)  # (a number beyond a double: ValueError)
    if qa.size == 0:
        raise ValueError("q must hold at least one quantile level")
    if np.isnan(qa).any() or (qa < 0).any() or (qa > 1).any():
        raise ValueError(f"q must be in [0, 1], got {q!r}")
    return qa


@validate_params(epsilon=Epsilon(allow_array=False), bounds=Bounds(), rng=RNG)
def private_quantile(
    x,
    q,
    epsilon: float,
    bounds: Tuple[float, float],
    rng: RandomLike = None,
    *,
    budget: Optional["PrivacyBudget"] = None,
) -> Union[float, np.ndarray]:
    """Differentially private q-quantile(s) of ``x`` on ``[lower, upper]``; epsilon-DP in total.

    The exponential mechanism with utility ``u(t) = -|#{i : x_i <= t} - q n|`` and base
    measure Lebesgue on ``bounds`` (Smith 2011; :doc:`/theory/mechanisms`, AW Alg. 3/4):

    1. clamp ``x`` to ``bounds`` and sort it: ``lower = e_0 <= e_1 <= ... <= e_n <= e_{n+1} = upper``;
    2. pick interval ``i`` in ``0..n`` with probability proportional to
       ``(e_{i+1} - e_i) * exp(-(eps_q / 2) |i - q n|)`` -- by the Gumbel-max trick on the
       log-weights, empty intervals (log 0) dropped;
    3. return a uniform point of ``[e_i, e_{i+1}]``.

    The output density is therefore proportional to ``exp(-(eps_q/2) |#{x_i <= t} - q n|)``
    on ``bounds`` (piecewise constant).  ``u`` has sensitivity 1 under replace-one *and*
    under add/remove neighbours (adding a point moves ``#{x_i <= t} - q n`` by ``1 - q`` or
    ``-q``), so each draw is ``eps_q``-DP under either relation.

    Several levels: the budget is split equally, ``eps_q = epsilon / len(q)`` for each level
    (independent draws, basic composition), so the whole array is epsilon-DP.  (The joint
    mechanism of Gillenwater, Joseph & Kulesza 2021 is not implemented.)  Note that the AW
    Alg. 4 weight ``exp(-eps |i - q n|)`` as printed would be 2 eps-DP; the corrected
    ``eps/2`` weight is used (see :doc:`/theory/mechanisms`, DISCREPANCY).

    Parameters
    ----------
    x : array_like
        Data (any shape, flattened); finite reals.
    q : float or array_like
        Quantile level(s) in [0, 1].
    epsilon : float
        Total privacy budget (> 0, finite), split equally over the levels.
    bounds : (lower, upper)
        Public range, lower < upper; data are clamped to it and the output lies in it.
    rng : None, int, numpy.random.Generator or dpfast.random.SecureRandom
    budget : PrivacyBudget, optional
        Charged before any randomness is drawn (default: the ``with budget:`` default, if
        any) with one event for the call, the m draws of ``ExponentialMechanism(epsilon / m)``
        for m levels; ``BudgetExceededError`` when it does not fit (nothing drawn, ``rng``
        untouched).

    Returns
    -------
    float, or ndarray of ``q``'s shape
    """
    return _quantile_plan(x, q, epsilon, bounds).release(rng, budget)


@_events.planned_by(private_quantile)
def _quantile_plan(x, q, epsilon: float, bounds: Tuple[float, float]) -> _events.Plan:
    lo, hi = bounds
    if not math.isfinite(hi - lo):
        # interval widths would overflow to inf: an infinite log-weight wins whatever the
        # utilities, which breaks the exponential mechanism's guarantee
        raise ValueError(f"bounds must have a finite width upper - lower, got {bounds!r}")
    qa = _check_levels(q)
    xa = check_values(x, "x")  # float32/float64 kept as they are (no copy)
    n = xa.size
    edges = np.empty(n + 2, dtype=np.float64)
    edges[0], edges[-1] = lo, hi
    # the only copy of the data: clamped straight into the edge buffer (any layout, float32
    # widened on the fly), then sorted in place
    inner = edges[1:-1]
    np.clip(xa, lo, hi, out=inner.reshape(xa.shape))
    inner.sort()
    targets = np.ascontiguousarray(qa.ravel() * n)
    c = 0.5 * epsilon / qa.size

    def draw(gen):
        bg = gen.bit_generator
        with bg.lock:  # as dpfast.random.native_stream
            out = _selection.quantile_draws(bg.capsule, edges, targets, c)
        if qa.ndim == 0:
            return float(out[0])
        return out.reshape(qa.shape)

    return _events.Plan("private_quantile", _events.exponential_event, (Fraction(epsilon) / qa.size, qa.size),
                        draw)


@validate_params(epsilon=Epsilon(allow_array=False), bounds=Bounds(), rng=RNG)
def private_median(
    x,
    epsilon: float,
    bounds: Tuple[float, float],
    rng: RandomLike = None,
    *,
    budget: Optional["PrivacyBudget"] = None,
) -> float:
    """Differentially private median: :func:`private_quantile` with ``q = 0.5``; epsilon-DP.

    See :doc:`/theory/mechanisms` (median utility ``-|1/2 - F_n(m)|``, corrected sign, G12).
    ``budget``: as in :func:`private_quantile` (event ``ExponentialMechanism(epsilon)``).
    """
    return _median_plan(x, epsilon, bounds).release(rng, budget)


@_events.planned_by(private_median)
def _median_plan(x, epsilon: float, bounds: Tuple[float, float]) -> _events.Plan:
    return _quantile_plan(x, 0.5, epsilon, bounds)
