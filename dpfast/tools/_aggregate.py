"""Subsample-and-aggregate with the noisy widened winsorized mean: :func:`subsample_and_aggregate`.

Smith (2011), "Privacy-preserving statistical estimation with optimal convergence rates"
(STOC), as given in Awan's lecture notes §8, Algorithms 1-2 (the spec digest's B12):

* Algorithm 1: ``k = n^(1/2 - eta)`` blocks (``eta = 1/10``), a random partition of the rows,
  ``z_i = T(block i)``, and per coordinate ``j`` of ``T``'s output ``M_j = W(z|_j, epsilon/d)``.
* Algorithm 2, ``W(z, eps)`` on the public range ``[lo, hi]`` (``Lambda``): ``rad = k^(1/3 + eta)``;
  ``a``, ``b`` = private quantiles of ``z`` at 1/4 and 3/4, each at ``eps/4`` (Alg. 3/4 with the
  corrected weight ``exp(-(eps/2)|i - qk|)``: :func:`dpfast.mechanisms.private_quantile`);
  ``m = (a + b)/2``, ``iqr = |b - a|``; ``u = m + 4 rad iqr``, ``l = m - 4 rad iqr``;
  output ``mean(clamp(z, l, u)) + Lap(2 (u - l) / (k eps))`` -- the clamped mean has
  sensitivity ``(u - l)/k`` when one ``z_i`` changes, released at ``eps/2``.

Deviations, all on the safe side or post-processing, none changing Theorem 8.2's rate:

1. ``[l, u]`` is intersected with ``[lo, hi]``: the ``z_i`` are clamped to ``[lo, hi]`` (Alg. 4
   step 2), so the clamped mean is unchanged and its sensitivity can only shrink.
2. Neighbours: add/remove one row (as all of :mod:`dpfast.tools`; the notes use replace-one).
   The partition is i.i.d.: each row gets an independent uniform block label.  For ``X`` and
   ``X`` plus one row, the labels of the shared rows have the same law, so the two runs couple
   with every block equal but the added row's: one ``z_i`` changes (an empty block's ``z_i`` is
   the public midpoint of ``[lo, hi]``), which is what ``W`` is private against (its quantile
   utility and its clamped mean are replace-one on ``z``), and the coupling carries the
   guarantee over (joint convexity of the hockey-stick divergence).  A balanced partition
   (a permutation cut in equal blocks) does not couple this way when ``n`` is private.
3. ``k`` must not depend on the private ``n``: ``n_blocks`` (public), or by default
   ``k = floor(n_hat^(2/5))`` from a noisy count ``n_hat = n + Lap(1/eps_count)``,
   ``eps_count = epsilon / 20`` (a rough count suffices: ``k`` moves by ``0.4 k / n`` per unit
   of count error).  ``W`` then gets ``epsilon - eps_count``.

Remark 8.4 of the notes (the rate of the Laplace noise) is GARBLED; the digest's B12 corrects
it: with ``iqr ~ (k/n)^(1/2)``, ``(u - l)/k = 8 k^(1/3+eta) (k/n)^(1/2) / k = Theta(k^(eta - 1/6)
n^(-1/2)) = Theta(n^-0.527)`` for ``k = n^0.4``: still ``o(n^-1/2)``, barely (Thm 8.2:
``M(X) - T(X) = o_p(n^-1/2)``).  The test suite fits that slope; the gallery plots it.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Optional, Tuple

import numpy as np

from dpfast import budget as _budget
from dpfast._dask_utils import is_dask_collection
from dpfast._validation import Epsilon, as_array, check_int, validate_params
from dpfast.accounting import Composed, ExponentialMechanism, Laplace, SelfComposed
from dpfast.mechanisms import laplace_noise, private_quantile
from dpfast.random import RNG
from dpfast.tools._statistics import _midpoint, _scales

if TYPE_CHECKING:
    from dpfast.budget import PrivacyBudget

__all__ = ["subsample_and_aggregate"]

#: Algorithm 1-2's eta (AW §8): k = n^(1/2 - eta), rad = k^(1/3 + eta)
ETA = 0.1
#: the share of epsilon spent on the noisy count that sets k when n_blocks is None
COUNT_SHARE = 1.0 / 20.0
#: the largest number of blocks (public; also caps k from a noisy count)
MAX_BLOCKS = 1_000_000
_DBL_MAX = float(np.finfo(np.float64).max)


def _box(bounds) -> Tuple[np.ndarray, np.ndarray, bool]:
    """(lo, hi, vector?) from public bounds: a pair of scalars (scalar statistic) or a pair of
    1-d arrays of one length d (a statistic returning d values)."""
    if bounds is None:
        raise ValueError("bounds must be given: the public range (lower, upper) of the statistic's value "
                         "(Lambda in Smith 2011); tools.bounds estimates it privately")
    if isinstance(bounds, (str, bytes)):
        raise TypeError("bounds must be a pair (lower, upper)")
    try:
        lo, hi = bounds
    except (TypeError, ValueError):
        raise ValueError("bounds must be a pair (lower, upper) of scalars or of 1-d arrays") from None
    lo_a, hi_a = as_array(lo, "bounds", np.float64), as_array(hi, "bounds", np.float64)
    if lo_a.shape != hi_a.shape or lo_a.ndim > 1 or lo_a.size == 0:
        raise ValueError("bounds must be a pair of scalars or of 1-d arrays of one (non-zero) length")
    vector = lo_a.ndim == 1
    lo_a, hi_a = np.atleast_1d(lo_a).copy(), np.atleast_1d(hi_a).copy()
    if not (np.isfinite(lo_a).all() and np.isfinite(hi_a).all()):
        raise ValueError("bounds must be finite")
    if not (lo_a < hi_a).all():
        raise ValueError("bounds must satisfy lower < upper")
    with np.errstate(over="ignore"):
        if not np.isfinite(hi_a - lo_a).all():
            raise ValueError("bounds must have a finite width upper - lower")
    return lo_a, hi_a, vector


def _n_blocks(n_blocks) -> Optional[int]:
    if n_blocks is None:
        return None
    k = check_int(n_blocks, "n_blocks", 2)
    if k > MAX_BLOCKS:
        raise ValueError(f"n_blocks must be at most {MAX_BLOCKS}")
    return k


def blocks_from_count(n_hat: float) -> int:
    """Algorithm 1's ``k = n^(1/2 - eta)`` (floored) from a released count, in [2, MAX_BLOCKS]."""
    return int(min(MAX_BLOCKS, max(2.0, math.floor(max(n_hat, 1.0) ** (0.5 - ETA)))))


def widened_range(a: float, b: float, k: int, lo: float, hi: float) -> Tuple[float, float]:
    """Algorithm 2, lines 1 and 5-7: ``[m - 4 rad iqr, m + 4 rad iqr]`` from the released
    quartiles, intersected with ``[lo, hi]`` (post-processing of released values)."""
    rad = k ** (1.0 / 3.0 + ETA)
    m, iqr = _midpoint(a, b), abs(b - a)
    return max(m - 4.0 * rad * iqr, lo), min(m + 4.0 * rad * iqr, hi)


def block_labels(n: int, k: int, gen: np.random.Generator) -> np.ndarray:
    """An independent uniform block in 0..k-1 for each of the n rows (the add/remove coupling:
    the first n labels of n + 1 rows are the n labels of n rows, same stream).  int16 labels
    when k allows (NumPy's stable sort of 16-bit keys is a radix sort: O(n))."""
    return gen.integers(0, k, size=n, dtype=np.int16 if k <= np.iinfo(np.int16).max else np.int32)


def block_values(statistic: Callable, X, labels: np.ndarray, k: int, lo: np.ndarray, hi: np.ndarray,
                 vector: bool) -> np.ndarray:
    """``z``: shape (k, d), row i = statistic(rows labelled i) clamped to the box; an empty
    block or a NaN coordinate takes the public midpoint of the box."""
    d = lo.size
    centre = _midpoint(lo, hi)
    z = np.tile(centre, (k, 1))
    order = np.argsort(labels, kind="stable")
    ends = np.cumsum(np.bincount(labels, minlength=k))
    take = X.iloc.__getitem__ if hasattr(X, "iloc") else X.__getitem__
    start = 0
    for i in range(k):
        end = int(ends[i])
        if end > start:
            v = np.asarray(statistic(take(order[start:end])), dtype=np.float64)
            if (v.shape != (d,)) if vector else (v.size != 1):
                raise ValueError(f"statistic must return {'an array of shape (%d,)' % d if vector else 'a scalar'} "
                                 "as the bounds declare (the budget was charged)")
            v = v.reshape(d)
            z[i] = np.where(np.isnan(v), centre, np.clip(v, lo, hi))
        start = end
    return z


@validate_params(epsilon=Epsilon(allow_array=False), rng=RNG)
def subsample_and_aggregate(statistic: Callable, X, epsilon: float, *, bounds=None, n_blocks=None, rng=None,
                            budget: Optional["PrivacyBudget"] = None):
    """Any statistic made private by subsample-and-aggregate (Smith 2011; AW §8, Alg. 1-2).

    The rows of ``X`` (axis 0; an array or a DataFrame) are split into ``k`` random blocks,
    ``statistic`` is computed on each block, and each coordinate of the ``k`` results is
    aggregated by the noisy widened winsorized mean at ``epsilon / d``; epsilon-DP under
    add/remove one row, whatever ``statistic`` does (one row changes one block).  When
    ``statistic`` is generically asymptotically normal (AW Def. 8.1: the MLE, M-estimators,
    means of functions, regression coefficients) the result has ``statistic(X)``'s asymptotic
    distribution: ``M(X) - T(X) = o_p(n^-1/2)`` (AW Thm 8.2; rate ``n^-0.527``, see
    :mod:`dpfast.tools._aggregate`, which also lists the deviations from the notes).

    When to use: a statistic without a useful sensitivity bound (a median of a regression
    residual, an MLE) on large ``n``; the asymptotics set in late (``k eps`` must be large
    for the quartiles of ``z`` to be found: with ``epsilon = 1``, ``n`` in the millions).  For a
    mean, :func:`dpfast.tools.mean` is far more accurate.

    Parameters
    ----------
    statistic : callable, rows of ``X`` -> a number, or a 1-d array of ``d`` numbers.  It must
        not fail on any block (a failure after the charge leaves the budget charged).
    X : array-like or DataFrame, rows on axis 0.
    epsilon : float, the whole budget.
    bounds : (lower, upper), public and required: the range of ``statistic``'s value (Lambda),
        a pair of scalars, or of 1-d arrays of length ``d`` for a vector statistic.
        :func:`dpfast.tools.bounds` estimates a range of the data privately, not of a statistic.
    n_blocks : int >= 2, public, or None: ``floor(n_hat^0.4)`` from a noisy count at
        ``epsilon / 20`` (AW Alg. 1's ``n^(1/2 - eta)``; ``n`` is private).
    rng, budget : as every dpfast release; one event is charged before any draw:
        ``Composed((Laplace(1/eps_c, 1)`` [count, when ``n_blocks`` is None]``,
        SelfComposed(ExponentialMechanism(eps_w / (4 d)), 2 d), Laplace(2 d / eps_w, d)))`` --
        the quartiles and the ``d`` Laplace draws in units of their (released) sensitivity
        ``(u - l)/k``.

    Returns
    -------
    float (scalar bounds) or ndarray of shape (d,).
    """
    if not callable(statistic):
        raise TypeError("statistic must be a callable: rows of X -> a number or a 1-d array")
    lo, hi, vector = _box(bounds)
    k_public = _n_blocks(n_blocks)
    if isinstance(X, (str, bytes)) or not hasattr(X, "__len__"):
        raise TypeError("X must be an array-like or a DataFrame with rows on axis 0")
    if hasattr(X, "iloc") and is_dask_collection(X):
        # gathered, as np.asarray gathers a Dask Array below: a Dask DataFrame/Series cannot take
        # the row selection of the blocks (iloc selects columns only), a failure after the charge
        X = X.compute()
    if not hasattr(X, "iloc"):
        X = np.asarray(X)
        if X.ndim == 0:
            raise ValueError("X must have rows on axis 0 (at least 1-d)")
    d = lo.size
    eps_c = 0.0 if k_public is not None else epsilon * COUNT_SHARE
    eps_w = epsilon - eps_c
    if not eps_w / (4 * d) > 0.0:
        raise ValueError("epsilon / (4 d) underflows to 0: epsilon is too small")
    parts: list = []
    if eps_c:
        _scales(1.0 / eps_c)
        parts.append(Laplace(scale=1.0 / eps_c, sensitivity=1.0))
    # the largest Laplace scale any k >= 2 can need (u - l <= hi - lo), refused before the charge
    _scales(d * float(np.max(hi - lo)) / eps_w, 2.0 * d / eps_w)
    parts.append(SelfComposed(ExponentialMechanism(eps_w / (4 * d)), 2 * d))
    parts.append(Laplace(scale=2.0 * d / eps_w, sensitivity=float(d)))
    event = Composed(tuple(parts))
    n = len(X)
    _budget.charge(budget, event, "subsample_and_aggregate")
    gen = rng
    with _budget.detached():
        if k_public is None:
            n_hat = n + float(laplace_noise(1.0 / eps_c, rng=gen))
            k = blocks_from_count(n_hat)
        else:
            k = k_public
        labels = block_labels(n, k, gen)
        z = block_values(statistic, X, labels, k, lo, hi, vector)
        out = np.array([widened_winsorized_mean(z[:, j], eps_w / d, float(lo[j]), float(hi[j]), gen)
                        for j in range(d)])
    return out if vector else float(out[0])


def widened_winsorized_mean(z: np.ndarray, epsilon: float, lo: float, hi: float, gen: np.random.Generator) -> float:
    """AW Algorithm 2, ``W(z, epsilon)`` on ``[lo, hi]``: epsilon-DP when one ``z_i`` changes
    (k = len(z) public).  The caller has charged the event and passes a Generator; no checks."""
    k = z.size
    a, b = np.asarray(private_quantile(z, [0.25, 0.75], epsilon / 2, (lo, hi), gen))  # eps/4 per quartile
    l_, u_ = widened_range(float(a), float(b), k, lo, hi)
    w = np.clip(z, l_, u_)
    with np.errstate(over="ignore", invalid="ignore"):
        mu = float(np.mean(w))
    if not math.isfinite(mu):
        # values near the largest double: the sum overflowed.  About the centre of [l, u] each
        # term is within (u - l)/2 (finite: the bounds' width is), so this sum cannot
        c = float(_midpoint(l_, u_))
        mu = c + float(np.sum((w - c) / k))
    # Lap(2 (u - l) / (k eps)): sensitivity (u - l)/k at eps/2 (a standard draw, scaled: u = l is
    # no noise); divided before doubling, and the sum saturated (post-processing): never inf
    out = mu + float(laplace_noise(1.0, rng=gen)) * ((u_ - l_) / (k * epsilon) * 2.0)
    return float(np.clip(out, -_DBL_MAX, _DBL_MAX))
