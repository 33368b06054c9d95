"""Scalers that learn their statistics with differential privacy inside public bounds.

scikit-learn's scalers read the mean, variance, minimum and maximum straight off the private
data; these release them through a DP mechanism instead (``fit`` is the only step that reads
private data, ``transform`` is post-processing of the released statistics).  Neighbouring
relation: add or remove one row (the number of rows is private too).
"""
from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np
from sklearn.base import OneToOneFeatureMixin, TransformerMixin

from dpfast import accounting
from dpfast._base import RANDOM_STATE, Interval, PrivateEstimator, check_fitted, validate_X
from dpfast._validation import as_array, check_delta, check_epsilon, feature_bounds
from dpfast.accounting.calibration import accountant_gaussian_multiplier
from dpfast.accounting.events import self_composed
from dpfast.budget import detached
from dpfast.calibrate import laplace_scale
from dpfast.mechanisms import gaussian_noise, laplace_noise, private_quantile
from dpfast.preprocessing._privacy import ACCOUNTANT
from dpfast.random import check_random_state

__all__ = ["StandardScaler", "MinMaxScaler"]


def _centring(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Midpoint c and half-width r of the bounds, both finite; r > 0 or ValueError (public only).

    c = (lo + hi) / 2 where that sum is finite, else lo + r (both ends near the overflow
    threshold, same sign).  A width of one subnormal step halves to r = 0, which cannot scale
    anything: refused."""
    r = 0.5 * (hi - lo)
    if not (r > 0).all():
        raise ValueError("bounds are too narrow: upper - lower must be at least 2 * 5e-324 so that the half-width "
                         "is a positive double")
    with np.errstate(over="ignore"):
        s = lo + hi
    c = np.where(np.isfinite(s), 0.5 * s, lo + r)
    return c, r


def _unit_terms(Xa: np.ndarray, lo, hi, c, r) -> np.ndarray:
    """u = (clamp(x, lo, hi) - c) / r, clamped to [-1, 1] after rounding.

    The sensitivity of the released sums assumes |u| <= 1 for every row; in floating point the
    rounded c and r do not guarantee it: bounds a few ulps wide (1060.3046685859608,
    1060.304668585962) give u = 1.2 for a row at the bound (issue 21, item 7b).  Clamping u is a
    per-row map, so it costs no privacy, and it keeps every term u and u^2 - 1/2 within the
    bound the noise is calibrated for."""
    u = (np.clip(Xa, lo, hi) - c) / r
    return np.clip(u, -1.0, 1.0, out=u)


def _check_minmax_range(lo, hi, fr) -> None:
    """Refuse, from public values only, bounds for which MinMaxScaler's scale_ or min_ would not be
    a double: the scale (max - min) / (upper - lower) of the full public range, and the fallback
    scale (max - min) of a degenerate range (:func:`_minmax_scale`) applied to the bounds."""
    w = fr[1] - fr[0]
    with np.errstate(over="ignore", divide="ignore"):
        full = w / (hi - lo)
        big = np.maximum(np.abs(lo), np.abs(hi)) * np.maximum(full, w)
    if not np.isfinite(full).all():
        raise ValueError("bounds are too narrow for feature_range: (max - min) / (upper - lower) overflows a double; "
                         "rescale the feature first")
    if not (np.isfinite(fr[0] - big).all() and np.isfinite(fr[0] + big).all()):
        raise ValueError("bounds are too large for feature_range: the offset min_ = min - data_min_ * scale_ can "
                         "overflow a double; rescale the feature first")


def _minmax_scale(data_min, data_range, fr):
    """scale_ and min_ of MinMaxScaler from the released range (post-processing).

    A range that is 0, or so narrow that (max - min) / range overflows, is treated as a constant
    feature, as scikit-learn treats a zero range: scale (max - min), i.e. a range of 1.
    :func:`_check_minmax_range` has made that fallback finite."""
    w = fr[1] - fr[0]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        scale = w / np.where(data_range > 0, data_range, 1.0)
        offset = fr[0] - data_min * scale
    bad = ~(np.isfinite(scale) & np.isfinite(offset))
    scale[bad] = w
    offset[bad] = fr[0] - data_min[bad] * w
    return scale, offset


class _PrivateTransformer(OneToOneFeatureMixin, TransformerMixin, PrivateEstimator):
    """Common base of the DP scalers: unsupervised (no target), dense input only."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False  # a transformer: fit(X) reads no target
        return tags

    def _validate_X(self, X, *, reset: bool) -> np.ndarray:
        # float64: the bounded sums and their sensitivities are computed in double precision
        return validate_X(self, X, reset=reset, dtype=np.float64)


class StandardScaler(_PrivateTransformer):
    """Standardize features with a mean and variance released under differential privacy.

    Guarantee (add/remove one row, the number of rows n private): ``fit`` is
    ``epsilon``-DP with ``delta=0`` (Laplace mechanism, Dwork, McSherry, Nissim & Smith 2006)
    and ``(epsilon, delta)``-DP with ``delta > 0`` (Gaussian mechanism calibrated exactly,
    Balle & Wang 2018, "Improving the Gaussian mechanism", Thm. 8).  The released statistics
    and everything computed from them (``transform``) are post-processing.

    Mechanism.  Each feature j is clamped to its public ``bounds`` ``[a_j, b_j]`` and mapped to
    ``u_j = (x_j - c_j) / r_j``, clamped again to ``[-1, 1]`` after rounding (``c_j`` the
    midpoint, ``r_j`` the half-width; with bounds a few ulps wide the rounded quotient can
    otherwise exceed 1 and break the sensitivity).
    One noisy vector is released: the count n, the sums ``S1_j = sum u_j`` and the centred sums
    of squares ``S2_j = sum (u_j^2 - 1/2)`` (each term in ``[-1/2, 1/2]``).  Adding a row moves
    it by ``(1, u, u^2 - 1/2)``, so its l1 sensitivity is ``1 + d + d/2`` and its l2
    sensitivity ``sqrt(1 + d + d/4)`` for d features; every coordinate gets the same noise
    (Laplace of scale ``l1/epsilon``, or Gaussian of the analytic sigma for the l2
    sensitivity), i.e. the budget is split over count, sums and squares in proportion to
    their sensitivities.  Then, post-processing: ``n~ = max(noisy count, 1)``,
    ``mean_u = clip(S1/n~, -1, 1)``, ``E[u^2] = clip(S2/n~ + 1/2, 0, 1)``,
    ``var_u = clip(E[u^2] - mean_u^2, 0, 1)``; ``mean_ = c + r mean_u``, ``var_ = r^2 var_u``,
    ``scale_ = sqrt(var_)`` (1 where it is 0, as in scikit-learn).

    Parameters
    ----------
    epsilon : float
        Privacy budget (> 0, finite).
    delta : float
        0 (default): Laplace noise, pure epsilon-DP.  In (0, 1): Gaussian noise.
    bounds : (lower, upper) or dict
        Public range of the features: a pair of scalars for every feature, or a dict
        ``{feature: (lower, upper)}`` with one pair per feature, keyed by column name (DataFrame
        input) or by index -- the convention of :func:`dpfast.tables.aggregate`.  A 2-d array
        is refused as ambiguous.  Values outside are clamped to it before any statistic is
        computed.  The half-width r must satisfy 0 < r^2 < inf in double precision (r between
        about 1.5e-162 and 1.3e154), so that ``var_`` is a double; other bounds are refused
        before the charge.
    random_state : None, int, numpy Generator or dpfast.random.SecureRandom
        Randomness of the noise.

    Attributes
    ----------
    mean_, var_, scale_ : ndarray of shape (n_features,)
        The released statistics.
    n_samples_seen_ : float
        The noisy count n~ (private, released).
    event_ : the accounting event of ``fit`` (``Laplace`` or ``Gaussian``, add/remove).
    epsilon_, delta_ : the guarantee of ``fit``: ``delta = 0``, the Laplace event's epsilon;
        otherwise the accountant's epsilon for ``event_`` at ``delta_`` (<= epsilon).
    accountant_ : None (pure DP: the event states its epsilon) or ``"pld"``, the accountant.
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="left")],
        "bounds": ["array-like", dict, None],
        "random_state": RANDOM_STATE,
    }
    # scikit-learn's sparse-input checks special-case any estimator *named* StandardScaler and set
    # its ``with_mean=False``, a parameter of scikit-learn's scaler that this one does not have
    # (it releases the mean and the variance together, under one event, and takes dense input)
    _expected_failures = {
        name: ("scikit-learn's sparse-input check calls set_params(with_mean=False) on every estimator named "
               "StandardScaler; dpfast's StandardScaler has no with_mean (it releases mean and variance under one "
               "event and takes dense input only, which the check would otherwise confirm)")
        for name in ("check_estimator_sparse_array", "check_estimator_sparse_matrix")
    }

    def __init__(self, epsilon: float = 1.0, delta: float = 0.0, bounds: Any = None, *,
                 random_state: Any = None):
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.random_state = random_state

    def _event(self, d: int):
        """The release of one fit on d features (data-independent): (event, (noise kind, noise
        scale), epsilon_, delta_, accountant_).

        ``delta = 0``: Laplace of scale ``laplace_scale(epsilon, l1)``, the event's own pure
        epsilon (no accountant converts at delta = 0).  ``delta > 0``: the Gaussian noise
        multiplier is the smallest (to 1e-9) that the accountant (:data:`ACCOUNTANT`) finds
        (epsilon, delta)-DP, searched from the analytic sigma (Balle & Wang 2018) up -- the
        accountant's bound is a little looser than the analytic one -- so that ``epsilon_``,
        the accountant's value for the event, is <= epsilon and the event fits a budget of
        (epsilon, delta).  Where the accountant cannot discretise the event (epsilon ~ 1e5),
        the analytic sigma, with ``epsilon_ = epsilon`` and no accountant."""
        eps = check_epsilon(self.epsilon, allow_array=False)
        delta = check_delta(self.delta)  # in [0, 1) by the declarative constraints
        if delta == 0:
            l1 = 1.0 + 1.5 * d
            scale = float(laplace_scale(eps, l1))
            event = accounting.Laplace(scale=scale, sensitivity=l1)
            return event, ("laplace", scale), event.epsilon, 0.0, None
        l2 = math.sqrt(1.0 + 1.25 * d)
        z, eps_acc, accountant = accountant_gaussian_multiplier(eps, delta, l2, ACCOUNTANT)
        return accounting.Gaussian(noise_multiplier=z, sensitivity=l2), ("gaussian", z * l2), eps_acc, delta, accountant

    def fit(self, X, y=None, *, budget: Any = None) -> "StandardScaler":
        """Release the mean and variance privately (see the class docstring).  Returns self.

        ``budget``: a :class:`dpfast.PrivacyBudget` (or None for the one of an enclosing
        ``with budget:``, if any) charged with ``event_`` before any noise is drawn.
        """
        self._validate_params()  # declarative constraints, before any private value is read
        self._reset_fit()
        Xa = self._validate_X(X, reset=True)
        d = Xa.shape[1]
        lo, hi = feature_bounds(self.bounds, d, getattr(self, "feature_names_in_", None))
        c, r = _centring(lo, hi)
        with np.errstate(over="ignore", under="ignore"):
            r2 = r * r
        # var_ = r^2 var_u must be a double for every var_u in (0, 1]: refused otherwise (public)
        if not np.isfinite(r2).all():
            raise ValueError("bounds are too wide for StandardScaler: the variance can reach ((upper - lower) / 2)^2, "
                             "which overflows a double (half-width above 1.3e154); rescale the feature first")
        if not (r2 > 0).all():
            raise ValueError("bounds are too narrow for StandardScaler: ((upper - lower) / 2)^2 underflows to 0 "
                             "(half-width below 1.5e-162); rescale the feature first")
        event, (kind, s), eps, delta, accountant = self._event(d)
        gen = check_random_state(self.random_state)
        self._charge(event, budget)
        u = _unit_terms(Xa, lo, hi, c, r)
        exact = np.concatenate([[Xa.shape[0]], u.sum(axis=0), (u * u - 0.5).sum(axis=0)])
        with detached():  # samplers charge nothing today; the fit's event covers them anyway
            noise = laplace_noise(s, exact.size, rng=gen) if kind == "laplace" else gaussian_noise(s, exact.size, rng=gen)
        noisy = exact + noise
        n = max(float(noisy[0]), 1.0)
        mean_u = np.clip(noisy[1:d + 1] / n, -1.0, 1.0)
        sq_u = np.clip(noisy[d + 1:] / n + 0.5, 0.0, 1.0)
        var_u = np.clip(sq_u - mean_u * mean_u, 0.0, 1.0)
        self.mean_ = np.clip(c + r * mean_u, lo, hi)  # in the bounds after rounding, as the true mean
        self.var_ = r * r * var_u
        scale = np.sqrt(self.var_)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        self.n_samples_seen_ = n
        self._record_release(event, eps, delta, accountant)
        return self

    def transform(self, X):
        """(X - mean_) / scale_ (post-processing; X is not clamped)."""
        check_fitted(self)
        Xa = self._validate_X(X, reset=False)
        return (Xa - self.mean_) / self.scale_

    def inverse_transform(self, X):
        check_fitted(self)
        Xa = self._validate_X(X, reset=False)
        return Xa * self.scale_ + self.mean_


class MinMaxScaler(_PrivateTransformer):
    """Scale features to ``feature_range`` with a range released under differential privacy.

    Guarantee: ``fit`` is ``epsilon``-DP under add/remove (and replace-one) neighbours.  For each
    of the d features, the two quantiles at levels ``quantiles`` (default 1 % and 99 %) are
    released by :func:`dpfast.private_quantile` -- the exponential mechanism over the public
    ``bounds`` (Smith 2011; McSherry & Talwar 2007), ``epsilon / (2 d)``-DP each -- and the d
    features compose to ``epsilon`` (basic composition; the accounted event is the 2d-fold
    composition of ``ExponentialMechanism(epsilon / (2 d))``, which the PLD accountant bounds
    more tightly when composed with other releases).  What is released is a *private
    quantile range*, not the exact minimum and maximum (which have unbounded sensitivity): the
    true extremes may lie outside ``[data_min_, data_max_]``, and with ``clip=True`` (default)
    ``transform`` clips its output to ``feature_range``.

    Parameters
    ----------
    epsilon : float
        Privacy budget (> 0, finite).
    bounds : (lower, upper) or dict
        Public range of the features: a pair of scalars for every feature, or a dict
        ``{feature: (lower, upper)}`` keyed by column name or index (as for
        :class:`StandardScaler`).  Bounds so narrow (or so large) for ``feature_range`` that
        ``scale_`` or ``min_`` could overflow are refused before the charge; a released range
        that is 0 or too narrow to invert in double precision is treated as a constant feature
        (scale ``max - min``, as scikit-learn treats a zero range).
    feature_range : (min, max)
        Desired range of the transformed data.
    quantiles : (low, high)
        Quantile levels released as the data range, 0 <= low < high <= 1.  Levels 0 and 1 are
        allowed but poor: the exponential mechanism then picks almost uniformly between the
        bound and the extreme value.
    clip : bool
        Clip the transformed values to ``feature_range``.
    random_state : None, int, numpy Generator or dpfast.random.SecureRandom

    Attributes
    ----------
    data_min_, data_max_, data_range_, scale_, min_ : as in scikit-learn's MinMaxScaler, computed
        from the private quantiles.
    event_ : the accounting event of ``fit``; ``epsilon_`` and ``delta_`` (= 0) its guarantee,
        the basic composition of the 2d exponential mechanisms (pure DP: ``accountant_`` None).
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "bounds": ["array-like", dict, None],
        "feature_range": [tuple, list, np.ndarray],
        "quantiles": [tuple, list, np.ndarray],
        "clip": ["boolean"],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, epsilon: float = 1.0, bounds: Any = None, *, feature_range=(0.0, 1.0),
                 quantiles=(0.01, 0.99), clip: bool = True, random_state: Any = None):
        self.epsilon = epsilon
        self.bounds = bounds
        self.feature_range = feature_range
        self.quantiles = quantiles
        self.clip = clip
        self.random_state = random_state

    def _check_params(self):
        eps = check_epsilon(self.epsilon, allow_array=False)
        fr = as_array(self.feature_range, "feature_range", np.float64)
        with np.errstate(over="ignore"):
            width_ok = fr.shape == (2,) and bool(np.isfinite(fr[1] - fr[0]))
        if fr.shape != (2,) or not np.isfinite(fr).all() or not fr[0] < fr[1] or not width_ok:
            raise ValueError(f"feature_range must be a pair (min, max) of finite reals with min < max, "
                             f"got {self.feature_range!r}")
        q = as_array(self.quantiles, "quantiles", np.float64)
        if q.shape != (2,) or not (0.0 <= q[0] < q[1] <= 1.0):
            raise ValueError(f"quantiles must be a pair (low, high) with 0 <= low < high <= 1, got {self.quantiles!r}")
        return eps, fr, q

    def fit(self, X, y=None, *, budget: Any = None) -> "MinMaxScaler":
        """Release the quantile range privately (see the class docstring).  Returns self."""
        self._validate_params()  # declarative constraints, before any private value is read
        self._reset_fit()
        eps, fr, q = self._check_params()
        Xa = self._validate_X(X, reset=True)
        d = Xa.shape[1]
        lo, hi = feature_bounds(self.bounds, d, getattr(self, "feature_names_in_", None))
        _check_minmax_range(lo, hi, fr)
        event = self_composed(accounting.ExponentialMechanism(eps / (2 * d)), 2 * d)
        gen = check_random_state(self.random_state)
        self._charge(event, budget)
        qs = np.empty((d, 2))
        with detached():  # charged above with the whole fit's event, not again per call
            for j in range(d):
                # two levels share epsilon/d equally inside private_quantile: eps/(2d) each
                qs[j] = private_quantile(Xa[:, j], q, eps / d, (lo[j], hi[j]), rng=gen)
        qs.sort(axis=1)  # post-processing: the draws are independent and need not be ordered
        self.data_min_, self.data_max_ = qs[:, 0], qs[:, 1]
        self.data_range_ = self.data_max_ - self.data_min_
        self.scale_, self.min_ = _minmax_scale(self.data_min_, self.data_range_, fr)
        self._record_release(event, eps, 0.0, None)
        return self

    def transform(self, X):
        """X * scale_ + min_, clipped to feature_range when ``clip`` (post-processing)."""
        check_fitted(self)
        Xa = self._validate_X(X, reset=False)
        out = Xa * self.scale_ + self.min_
        if self.clip:
            fr = np.asarray(self.feature_range, dtype=np.float64)
            np.clip(out, fr[0], fr[1], out=out)
        return out

    def inverse_transform(self, X):
        check_fitted(self)
        Xa = self._validate_X(X, reset=False)
        return (Xa - self.min_) / self.scale_
