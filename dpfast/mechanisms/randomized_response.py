"""Randomized response, binary and k-ary, with the unbiased frequency estimator.

See: :doc:`/theory/mechanisms` (Samplers: Randomized response) and :doc:`/theory/mechanisms`.

* Binary (``categories=None``): each bit is reported truthfully with probability
  p = e^eps / (1 + e^eps) and flipped otherwise (Warner 1965; this is the "coin" form with
  p_coin = 2/(1+e^eps)).  epsilon-local-DP, hence epsilon-DP for each respondent's bit.
* k-ary (``categories=k`` or a sequence of k labels), EXT (generalised / direct encoding RR,
  Warner 1965; Kairouz, Oh & Viswanath 2014; Wang et al. 2017 "Locally differentially private
  protocols for frequency estimation"): the truth with probability p = e^eps/(e^eps + k - 1),
  each of the other k - 1 categories with probability q = 1/(e^eps + k - 1).  Since
  p/q = e^eps, each report is epsilon-local-DP.

Sampling (native kernel ``dpfast._core.rr_binary`` / ``rr_kary``, GIL released): one 64-bit
word w per entry, flipped iff w < thr, so P(flip) = thr / 2^64 exactly; a k-ary flip draws one
more word for the replacement category (Lemire's unbiased bounded integers, exactly uniform on
the k - 1 others).  thr is computed in exact integer arithmetic from a rigorous lower bound
on e^eps (:func:`_flip_threshold`), so the *realised* probabilities satisfy
p'/q' = (2^64 - thr)(k - 1)/thr <= e^eps exactly for the double epsilon given: the rounding
to a multiple of 2^-64 only adds privacy.  Entries are
processed in order, so the same seed gives the same output and n scalar calls on one
Generator reproduce one call of length n.
"""
from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Optional, Sequence, Union

import numpy as np
from numpy.typing import ArrayLike

from dpfast import _core
from dpfast._validation import Epsilon, as_array, validate_params
from dpfast.accounting.pairs import rr_log_probabilities
from dpfast.mechanisms import _events
from dpfast.random import RNG, RandomLike, native_stream

if TYPE_CHECKING:
    from dpfast.budget import PrivacyBudget

__all__ = [
    "randomized_response",
    "randomized_response_debias",
    "randomized_response_probabilities",
]

Categories = Union[None, int, Sequence, np.ndarray]


@validate_params(epsilon=Epsilon())
def randomized_response_probabilities(epsilon: ArrayLike, categories: int = 2):
    """(p, q): the probabilities of reporting the true category and one given other category.

    p = e^eps / (e^eps + k - 1), q = 1 / (e^eps + k - 1), so p + (k - 1) q = 1 and
    p / q = e^eps (:doc:`/theory/mechanisms` Randomized response).  For k = 2, p = e^eps/(1+e^eps)
    (:doc:`/theory/mechanisms`).  Computed by :func:`rr_log_probabilities` (accurate for large eps).
    Accepts array ``epsilon``.
    """
    k = _check_k(categories)
    log_p, log_q = rr_log_probabilities(np.asarray(epsilon, dtype=np.float64), k)
    p, q = np.exp(log_p), np.exp(log_q)
    if np.ndim(epsilon) == 0:
        return float(p), float(q)
    return p, q


def _check_k(k) -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"categories must be None, an int >= 2 or a sequence of labels, got {k!r}")
    if k < 2:
        raise ValueError(f"the number of categories must be >= 2, got {k}")
    if k > _MAX_K:  # category indices are int64 in the sampler
        raise ValueError(f"categories must be an int in [2, 2**63 - 1], got {k}")
    return int(k)


_MAX_K = 2**63 - 1


def _resolve_categories(categories: Categories):
    """Return (k, labels or None)."""
    if categories is None:
        return 2, None
    if isinstance(categories, (str, bytes)):
        raise TypeError("categories must be None, an int >= 2 or a sequence of labels, got a string")
    if isinstance(categories, (int, np.integer, float, np.floating, bool, np.bool_)):
        return _check_k(categories), None
    labels = as_array(categories, "categories")
    if labels.ndim == 0:
        return _check_k(categories), None
    if labels.ndim != 1:
        raise ValueError(f"categories must be a 1-D sequence of labels, got shape {labels.shape}")
    if labels.size < 2:
        raise ValueError(f"categories must hold at least 2 labels, got {labels.size}")
    if np.unique(labels).size != labels.size:
        raise ValueError("categories must be distinct labels")
    return labels.size, labels


def _to_indices(values, k: int, labels, binary: bool, name: str) -> np.ndarray:
    """Category indices in [0, k) of ``values`` (validated).

    With labels: int64 indices into ``labels``.  Without: the input array itself (bool,
    integer or integral float), checked to lie in [0, k).
    """
    if isinstance(values, (str, bytes)) and labels is None:
        raise TypeError(f"{name} must be an array of {'bits' if binary else 'category indices'}, got a string")
    arr = as_array(values, name)
    if labels is not None:
        order = np.argsort(labels, kind="stable")
        sorted_labels = labels[order]
        try:
            pos = np.searchsorted(sorted_labels, arr)
        except TypeError as exc:
            raise TypeError(f"{name} are not comparable with the category labels") from exc
        pos = np.clip(pos, 0, k - 1)
        ok = sorted_labels[pos] == arr
        if not np.all(ok):  # (the message names no value: the entries are private)
            raise ValueError(f"{name} contain values that are not among the categories")
        return order[pos]
    if arr.dtype == np.bool_:
        return arr
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contain NaN or infinite entries")
        if not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must be integers (category indices), got non-integral floats")
    elif arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be a bool or integer array, got dtype {arr.dtype}")
    if arr.size:
        lo, hi = arr.min(), arr.max()
        if lo < 0 or hi >= k:
            allowed = "{0, 1}" if binary else f"{{0, ..., {k - 1}}}"
            # no observed range in the message: its ends are private values
            raise ValueError(f"{name} must take values in {allowed}; some entries lie outside it")
    return arr


#: Fixed-point fraction bits of the lower bound on e^eps in :func:`_exp_lower_fixed`: its
#: relative error is below 1e-40, so the 64-bit threshold is the exact minimum except where the
#: true value lies within ~1e-21 of an integer, and then it errs upward (more privacy).
_EXP_BITS = 160
#: e^89 > 2^128 > 2^64 (k - 1) for every k <= 2^63: from here on the threshold is 1.
_EPS_THR_ONE = 89.0


def _exp_lower_fixed(x: float) -> int:
    """An integer N with N / 2^160 <= e^x, for a double 0 < x < 89, within a relative 1e-40.

    Integer arithmetic only, every rounding downward: r = floor(x 2^160 / 2^m) <= x / 2^m with
    x / 2^m < 2^-12; the Taylor sum of e^r with each term floored (a lower bound: every term of
    e^r's series is positive, and the dropped tail too); then m squarings, each floored
    (squaring is increasing on positive numbers), give a lower bound on (e^(x/2^m))^(2^m) = e^x.
    """
    a, b = x.as_integer_ratio()  # exact: x = a / 2^s
    s = b.bit_length() - 1
    m = max(0, math.frexp(x)[1] + 12)
    shift = _EXP_BITS - m - s
    r = a << shift if shift >= 0 else a >> -shift
    total = term = 1 << _EXP_BITS
    j = 0
    while term:
        j += 1
        term = (term * r >> _EXP_BITS) // j
        total += term
    for _ in range(m):
        total = total * total >> _EXP_BITS
    return total


@functools.lru_cache(maxsize=4096)
def _flip_threshold_one(eps: float, k: int) -> int:
    """The smallest integer thr with thr / 2^64 >= (k - 1) / (E + k - 1) for a rational E <= e^eps.

    E = max(N / 2^160, 1 + eps) with N from :func:`_exp_lower_fixed` (e^x >= 1 + x is the sharper
    bound for eps below ~1e-40, where the fixed point rounds x away).  Integer arithmetic
    throughout, so the returned thr meets the inequality exactly (see :func:`_flip_threshold`).
    """
    if eps >= _EPS_THR_ONE:
        return 1
    e_num, e_den = _exp_lower_fixed(eps), 1 << _EXP_BITS
    a, b = eps.as_integer_ratio()  # exact: 1 + eps = (b + a) / b
    if (b + a) * e_den > e_num * b:
        e_num, e_den = b + a, b
    km1 = k - 1
    num, den = (km1 * e_den) << 64, e_num + km1 * e_den
    # ceil(num / den) >= 1 as num > 0; and E > 1 gives num / den < 2^64 (k - 1) / k
    # <= 2^64 - 2 for k <= 2^63, so thr fits a uint64 without clipping.
    return -(-num // den)


def _flip_threshold(epsilon, k: int) -> np.ndarray:
    """thr (uint64, the shape of ``epsilon``): the sampler flips iff a uniform 64-bit word w < thr,
    so it reports the truth with probability p' = (2^64 - thr)/2^64 and each given other
    category with q' = thr / (2^64 (k - 1)) -- exactly (w is uniform on [0, 2^64), and the
    replacement category is uniform on the k - 1 others by Lemire's unbiased method).

    thr is the smallest integer with thr / 2^64 >= (k - 1)/(e^eps + k - 1) (up to an upward
    error in the last unit from the 1e-40-accurate lower bound on e^eps), and at least 1.  Then

        p' / q' = (2^64 - thr)(k - 1) / thr <= e^eps

    holds exactly, in rational arithmetic, for the double eps the caller passed: the
    ratio bound of epsilon-local DP is met by the realised probabilities themselves, not only
    by the ideal p, q (issue 21 item 7c: computing the flip probability (k - 1) q as a double
    first and rounding it up to a multiple of 2^-64 left the *keep* probability p' = 1 - P_flip
    with a relative error of 2^-53 / p', an excess of 8e-13 in epsilon at k = 1000 and 7e-10 at
    k = 10^6 at small epsilon).  thr >= 1 keeps the ratio at most (2^64 - 1)(k - 1) < e^eps where
    the flip probability is below 2^-64 (eps >= 89 for every k).

    The threshold is computed once per distinct epsilon value (about 10 us each, cached), so an
    array of per-entry epsilons costs that per distinct value.
    """
    e = np.asarray(epsilon, dtype=np.float64)
    if e.ndim == 0:
        return np.asarray(_flip_threshold_one(float(e), k), dtype=np.uint64)
    vals, inv = np.unique(e, return_inverse=True)
    thr = np.array([_flip_threshold_one(float(v), k) for v in vals], dtype=np.uint64)
    return thr[inv.reshape(e.shape)]


@validate_params(epsilon=Epsilon(), rng=RNG)
def randomized_response(bits: ArrayLike, epsilon: ArrayLike, rng: RandomLike = None,
                        categories: Categories = None, *, budget: Optional["PrivacyBudget"] = None):
    """Randomized response on every entry of ``bits`` (binary) or of a categorical array.

    Guarantee (:doc:`/theory/mechanisms` Randomized response; :doc:`/theory/mechanisms`): each output
    entry is epsilon-local-DP with respect to the corresponding input entry (changing one
    respondent's value changes the probability of any report by a factor at most e^eps).
    With array ``epsilon`` (broadcast against ``bits``), entry i is epsilon_i-LDP.

    Parameters
    ----------
    bits : array_like
        ``categories=None``: bools or integers in {0, 1}.  ``categories=k``: integers in
        {0, ..., k-1}.  ``categories=labels``: entries of ``labels``.  Any shape.
    epsilon : float or array_like
        > 0 and finite.
    rng : None, int, numpy.random.Generator or SecureRandom
    categories : None, int >= 2, or a sequence of >= 2 distinct labels
        Binary: report the truth w.p. e^eps/(1+e^eps), else the flipped bit.  k-ary: the
        truth w.p. e^eps/(e^eps+k-1), else a uniformly chosen *other* category.
    budget : PrivacyBudget, optional
        Charged before any randomness is drawn (default: the ``with budget:`` default, if
        any) with one event for the whole array, ``RandomizedResponse(max epsilon, k,
        neighbours="replace_one")``: each respondent holds one entry, and the guarantee is
        for one respondent's value changing (see :mod:`dpfast.mechanisms._events`).

    Returns
    -------
    ndarray of the broadcast shape: bool input gives bool, integer input its integer dtype
    (Python ints: int64), labels give labels; a NumPy scalar for 0-d input.

    Raises
    ------
    ValueError
        Values outside the allowed set; bad ``epsilon``; fewer than 2 categories;
        duplicate labels; shapes that do not broadcast.
    TypeError
        Non-numeric ``bits`` without labels; ``categories`` of an unsupported type.
    BudgetExceededError
        The release does not fit in the budget (nothing drawn, ``rng`` untouched).
    """
    return _rr_plan(bits, epsilon, categories).release(rng, budget)


@_events.planned_by(randomized_response)
def _rr_plan(bits, epsilon, categories) -> _events.Plan:
    k, labels = _resolve_categories(categories)
    idx = _to_indices(bits, k, labels, categories is None, "bits")
    if np.ndim(epsilon) == 0:
        shape = idx.shape
    else:
        try:
            shape = np.broadcast_shapes(idx.shape, np.shape(epsilon))
        except ValueError:
            raise ValueError(f"shapes do not broadcast: values {idx.shape}, epsilon {np.shape(epsilon)}") from None
    thr = _flip_threshold(epsilon, k)
    thr = thr.reshape(1) if thr.size == 1 else np.ascontiguousarray(np.broadcast_to(thr, shape))

    def draw(gen):
        idx_b = idx if idx.shape == shape else np.broadcast_to(idx, shape)
        if k == 2:
            if idx_b.dtype == np.bool_ and idx_b.flags.c_contiguous:
                src = idx_b.view(np.uint8)  # no copy
            else:
                src = np.ascontiguousarray(idx_b, dtype=np.uint8)
            res = np.empty(shape, dtype=np.uint8)
            with native_stream(gen) as cap:
                _core.rr_binary(cap, res, src, thr)
        else:
            src = np.ascontiguousarray(idx_b, dtype=np.int64)
            res = np.empty(shape, dtype=np.int64)
            with native_stream(gen) as cap:
                _core.rr_kary(cap, res, src, k, thr)
        if labels is not None:
            out = labels[res]
        elif idx.dtype == np.bool_:
            out = res.view(np.bool_) if k == 2 else res  # bool input with k > 2 reports integers
        elif np.can_cast(np.min_scalar_type(k - 1), idx.dtype):
            out = res.astype(idx.dtype, copy=False)
        else:  # e.g. uint8 input with k > 256: the reports need a wider type
            out = res
        return out if np.ndim(out) else out[()]

    return _events.Plan("randomized_response", _events.randomized_response_event, (epsilon, k), draw)


@validate_params(epsilon=Epsilon(allow_array=False))
def randomized_response_debias(reports: ArrayLike, epsilon: float,
                               categories: Categories = None):
    """Unbiased estimate of the true category frequencies from randomized-response reports.

    With f_j the empirical frequency of category j among the n reports and p, q from
    :func:`randomized_response_probabilities`,

        pi_j = (f_j - q) / (p - q)

    (:doc:`/theory/mechanisms` Randomized response; for k = 2 this is :doc:`/theory/mechanisms`'s
    theta_hat = (Y_bar - p_coin/2) / (1 - p_coin)).  E[f_j] = q + (p - q) pi_j, so the
    estimator is unbiased; its entries sum to 1 but may fall outside [0, 1] (clipping would
    bias it).  Binary variance: (1/n)[e^eps/(e^eps-1)^2 + theta(1-theta)].

    Parameters
    ----------
    reports : array_like
        Outputs of :func:`randomized_response` (any shape; all entries are pooled).
    epsilon : float
        The epsilon the reports were produced with (scalar, > 0).
    categories : None, int or labels
        As in :func:`randomized_response`.

    Returns
    -------
    float (binary: the estimated proportion of ones) or ndarray of shape (k,) (the
    estimated frequency of each category, in the order of ``range(k)`` or of the labels).
    """
    k, labels = _resolve_categories(categories)
    binary = categories is None
    idx = _to_indices(reports, k, labels, binary, "reports")
    n = idx.size
    if n == 0:
        raise ValueError("reports is empty; need at least one report to estimate frequencies")
    p, q = randomized_response_probabilities(epsilon, k)
    # p - q = (e^eps - 1)/(e^eps + k - 1) = p * (-expm1(-eps)), without cancellation.
    gap = p * -np.expm1(-epsilon)
    if binary:
        f1 = np.count_nonzero(idx) / n
        with np.errstate(over="ignore"):
            est = float((f1 - q) / gap)
        return _finite_estimate(est, epsilon)
    try:
        f = np.bincount(idx.ravel().astype(np.int64, copy=False), minlength=k) / n
    except (MemoryError, ValueError):  # one frequency per category is returned
        raise ValueError(f"categories={k}: the {k} frequencies to return do not fit in memory") from None
    with np.errstate(over="ignore"):
        est = (f - q) / gap
    return _finite_estimate(est, epsilon)


def _finite_estimate(est, epsilon):
    """The estimate, refusing one that overflowed (epsilon so small that 1/(p - q) overflows)."""
    if not np.all(np.isfinite(est)):
        raise ValueError(f"epsilon={epsilon!r} is too small: the debiased frequencies overflow a double "
                         "(their scale is 1/(p - q) ~ 1/epsilon); use epsilon >= 1e-300")
    return est
