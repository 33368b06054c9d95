"""Private estimation of the bounds of the data: :func:`bounds` (diffprivlib issue #20).

Method: two private quantiles, at ``tail`` and ``1 - tail``, by the exponential mechanism over
intervals (Smith 2011, "Privacy-preserving statistical estimation with optimal convergence
rates", STOC; AW §7.3, Alg. 3/4 with the corrected weight; :func:`dpfast.mechanisms.private_quantile`)
run on ``t = asinh(x / scale)``.  The transform is monotone, so ranks, the utility
``-|#{x_i <= t} - q N|`` (sensitivity 1 under add/remove and replace-one) and the privacy
guarantee are those of the quantile mechanism; only its base measure changes: Lebesgue in
``asinh(x / scale)``, i.e. uniform near 0 and log-uniform (``dx / |x|``) far from it.  Every
finite double lies in ``|asinh(x / scale)| <= A = log(2 DBL_MAX / scale) + 1``, so the public
"range" is all of the doubles and no user bound is needed: the price of not knowing the
scale is ``log(2 A / w)`` in the rank error below, ~7 for ordinary data, instead of
``log(range / width)`` for a Lebesgue base measure on a guessed finite range.

Compared with the log-scale histogram of Google's ``ApproxBounds`` (differential-privacy
library; PipelineDP): a Laplace-noised histogram of ``sign(x) * 2^ceil(log2 |x|)`` bins and the
most extreme bins whose noisy count exceeds a threshold -- also pure epsilon and scale-free --
this mechanism returns a continuous value (not a power of two, which can be 2x loose), and its
guarantee is about coverage (how many points fall outside), which is what a clamp needs, where
the histogram's threshold guarantees the opposite side (the bounds lie within the data's
range).  Karwa & Vadhan (2018, "Finite sample differentially private confidence intervals",
ITCS) estimate a range by a histogram of width-sigma bins for Gaussian data with a known
variance range; their guarantee needs that model.

Guarantee (utility; McSherry & Talwar 2007, Smith 2011): for one column of ``N`` values and one
level ``q`` drawn with exponential-mechanism parameter ``e`` (``epsilon / (2 c)`` for ``c``
columns with ``axis=0``; ``epsilon / (2 d)`` per element with ``axis=None`` and ``d`` elements
per row, N = n d), for every ``r > 0``::

    P(|#{x_i <= T} - q N| >= r) <= (2 A / w(r/2)) exp(-e r / 4)

where ``w(s)`` is the asinh-width of ``{t : |#{x_i <= t} - q N| <= s}`` (a property of the
data).  Hence with probability ``>= 1 - 2 beta`` at most ``2 (tail N + r)`` values lie outside
``[lower, upper]``, ``r = (4 / e) log(2 A / (w beta))``.  (The density ratio: a point with
rank error >= r has weight <= exp(-e r/2) over a measure <= 2A; the set with error <= r/2 has
weight >= exp(-e r/4) over measure w.)
"""
from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Optional, Tuple, Union

import numpy as np

from dpfast import budget as _budget
from dpfast._dask_utils import is_dask_collection
from dpfast._validation import Epsilon, check_positive, check_real, validate_params
from dpfast.accounting import ExponentialMechanism, SelfComposed
from dpfast.mechanisms import private_quantile
from dpfast.random import RNG
from dpfast.tools._statistics import _axis, _check_row_size, _data, _shape

if TYPE_CHECKING:
    from dpfast.budget import PrivacyBudget

__all__ = ["bounds"]

_DBL_MAX = float(np.finfo(np.float64).max)


def asinh_range(scale: float) -> float:
    """A with ``|asinh(x / scale)| <= A`` for every finite double x (public):
    ``asinh(u) <= log(2u) + 1/(4u^2)`` for ``u >= 1``, and ``DBL_MAX / scale >= 1``."""
    return math.log(2.0) + math.log(_DBL_MAX) - math.log(scale) + 1.0


def _check_tail(tail) -> float:
    if isinstance(tail, (bool, np.bool_)) or not isinstance(tail, numbers.Real):
        raise TypeError(f"tail must be a number in (0, 0.5), got {type(tail).__name__}")
    t = check_real(tail, "tail", allow_nan=False)  # (a Fraction beyond a double: ValueError)
    if not 0.0 < t < 0.5:
        raise ValueError(f"tail must be in (0, 0.5), got {tail!r}")
    return t


def _check_scale(scale) -> float:
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be a positive number, got {type(scale).__name__}")
    s = float(check_positive(scale, "scale", allow_array=False))
    if not s <= _DBL_MAX:
        raise ValueError(f"scale must be finite, got {scale!r}")
    return s


def _back(t: np.ndarray, scale: float) -> np.ndarray:
    with np.errstate(over="ignore"):
        v = scale * np.sinh(t)
    return np.clip(v, -_DBL_MAX, _DBL_MAX)


@validate_params(epsilon=Epsilon(allow_array=False), rng=RNG)
def bounds(a, epsilon: float, *, axis=None, tail: float = 0.01, scale: float = 1.0, rng=None,
           budget: Optional["PrivacyBudget"] = None
           ) -> Tuple[Union[float, np.ndarray], Union[float, np.ndarray]]:
    """Private ``(lower, upper)`` covering all but about ``2 tail`` of the data; epsilon-DP.

    The ``tail`` and ``1 - tail`` private quantiles of ``asinh(x / scale)`` by the exponential
    mechanism (Smith 2011) with the whole double range as its public range, mapped back: no
    bound is needed to estimate the bounds.  Neighbours: add/remove one row, as every
    :mod:`dpfast.tools` function.  See :mod:`dpfast.tools._bounds` for the comparison with
    the log-histogram of Google's ``ApproxBounds`` and for the guarantee: with probability
    ``>= 1 - 2 beta``, at most ``tail N + r`` values lie below ``lower`` and at most
    ``tail N + r`` above ``upper``, ``r = (4/e) log(2A / (w beta))`` (``e`` the mechanism's
    parameter per draw, ``w`` the data's asinh-width near the quantile, ``A ~ 711``).

    ``axis=None``: one pair for all elements (a row of ``d`` elements moves the rank by up to
    ``d``: each draw at ``epsilon / (2 d)`` per element).  ``axis=0``: one pair per column;
    every column reads every row, so the columns compose sequentially: ``epsilon`` is split
    equally over the ``2 c`` draws (``c`` columns).  Event: ``SelfComposed(
    ExponentialMechanism(epsilon / (2 c)), 2 c)`` (``c = 1`` for ``axis=None``).

    ``scale`` (public, default 1): where the base measure turns from uniform to log-uniform;
    the data's own unit is best, any positive value is valid.  The two draws are independent:
    they are sorted, and a degenerate pair is widened by one ulp (post-processing).

    To feed the bounds to another release with one budget, call both with it (``bounds`` is
    not read off the data silently anywhere in dpfast)::

        lo, hi = tools.bounds(x, 0.2, rng=rng, budget=budget)
        m = tools.mean(np.clip(x, lo, hi), 0.8, (lo, hi), rng=rng, budget=budget)

    Returns ``(lower, upper)``: floats for ``axis=None``, arrays of shape ``a.shape[1:]`` for
    ``axis=0``.
    """
    tail = _check_tail(tail)
    scale = _check_scale(scale)
    x = _data(a, False)
    axis = _axis(axis, x.ndim)
    _, d, _ = _shape(x, axis, False)
    _check_row_size(d)
    per = epsilon / d  # per element (axis=None) or per column (axis=0): as tools.quantile
    if not per / 2.0 > 0.0:
        raise ValueError("epsilon / d underflows to 0: epsilon is too small")
    A = asinh_range(scale)
    c = 1 if axis is None else d
    event = SelfComposed(ExponentialMechanism(epsilon / (2 * c)), 2 * c)
    _budget.charge(budget, event, "bounds")
    if is_dask_collection(x):
        # gathered once, after the charge (each quantile sorts its column in memory anyway): Dask's
        # arithmetic on an array of ONE row split with empty chunks (chunks (1, 0): a filter that
        # empties a partition) broadcasts that row into the empty chunks -- x / scale had the
        # record twice, a doubled sensitivity -- and its reshape of such an array fails
        x = np.asarray(x)
    if axis is None:
        cols = [x.ravel()]
    else:
        # d (public), never -1: NumPy does not infer -1 from 0 rows
        flat = x.reshape(x.shape[0], d)
        cols = [flat[:, j] for j in range(flat.shape[1])]
    levels = np.array([tail, 1.0 - tail])
    out = np.empty((2, c))
    with _budget.detached(), np.errstate(over="ignore"):
        for j, col in enumerate(cols):
            # x / scale overflows to +-inf for |x| > scale * DBL_MAX (scale < 1): clamp in the
            # transformed space, where every finite double lies in [-A, A], so that no data value
            # can make the mechanism refuse after the charge
            t = np.clip(np.arcsinh(col / scale), -A, A)
            out[:, j] = np.asarray(private_quantile(t, levels, per, (-A, A), rng))
    v = _back(np.sort(out, axis=0), scale)
    same = v[0] >= v[1]
    with np.errstate(over="ignore"):
        v[1] = np.where(same, np.nextafter(v[1], np.inf), v[1])
        v[0] = np.where(same & ~np.isfinite(v[1]), np.nextafter(v[0], -np.inf), v[0])
    v[1] = np.clip(v[1], -_DBL_MAX, _DBL_MAX)
    if axis is None:
        return float(v[0, 0]), float(v[1, 0])
    shape = x.shape[1:]
    return v[0].reshape(shape), v[1].reshape(shape)
