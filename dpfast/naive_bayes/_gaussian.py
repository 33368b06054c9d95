"""Gaussian naive Bayes from noisy per-class sufficient statistics (pure epsilon-DP).

Neighbouring relation: add or remove one row (its features and its label); the number of rows
and the class sizes are private too.
"""
from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np
from scipy.special import logsumexp

from dpfast import _fixed, _stats, accounting
from dpfast._base import (
    PUBLIC_LABELS,
    RANDOM_STATE,
    DaskDispatchMixin,
    DPClassifierMixin,
    Interval,
    PrivateEstimator,
    check_fitted,
    validate_X,
    validate_y,
)
from dpfast._dask_utils import (
    BAD_LABELS,
    PartitionError,
    fit_rows,
    is_dask_collection,
    sum_by_partitions,
    vector_parts,
)
from dpfast._threads import default_threads
from dpfast._validation import as_array, check_epsilon, check_label_set, feature_bounds, public_classes
from dpfast.budget import detached
from dpfast.calibrate import laplace_scale
from dpfast.mechanisms import laplace_noise
from dpfast.random import check_random_state

__all__ = ["GaussianNB", "gaussian_nb_sensitivity"]


def gaussian_nb_sensitivity(n_features: int, n_binary: int = 0) -> float:
    """l1 sensitivity of the released vector (counts, sums of every feature, centred sums of
    squares of the ``n_features - n_binary`` Gaussian features, for every class) under
    add/remove of one row: ``1 + d + (d - d_b)/2`` (see :class:`GaussianNB`)."""
    d, db = int(n_features), int(n_binary)
    if not 0 <= db <= d:
        raise ValueError(f"n_binary must be in [0, n_features={d}], got {db}")
    return 1.0 + d + 0.5 * (d - db)


def _binary_mask(binary_features, d: int, feature_names=None) -> np.ndarray:
    """Boolean mask of length d from the public ``binary_features``: None (no binary feature), a
    boolean mask of length d, or a sequence of feature indices or (DataFrame input) column
    names.  Public values only (called before the charge)."""
    mask = np.zeros(d, dtype=bool)
    if binary_features is None:
        return mask
    if isinstance(binary_features, (str, bytes)) or np.ndim(binary_features) != 1:
        raise ValueError("binary_features must be None, a boolean mask of length n_features, or a sequence "
                         "of feature indices or column names")
    items = list(binary_features)
    if items and all(isinstance(v, (bool, np.bool_)) for v in items):
        if len(items) != d:
            raise ValueError(f"binary_features as a boolean mask must have length n_features={d}, got {len(items)}")
        return np.array(items, dtype=bool)
    names = [str(c) for c in feature_names] if feature_names is not None else None
    for v in items:
        if isinstance(v, (bool, np.bool_)):
            raise ValueError("binary_features mixes booleans with indices or names")
        if isinstance(v, (int, np.integer)):
            j = int(v)
            if not -d <= j < d:
                raise ValueError(f"binary_features has an index outside [-{d}, {d}) (NumPy indexing): {j}")
            mask[j] = True
        elif isinstance(v, str) and names is not None and v in names:
            mask[names.index(v)] = True
        else:
            raise ValueError(f"binary_features has an entry that is not a feature index or column name: {v!r}")
    return mask


class GaussianNB(DaskDispatchMixin, DPClassifierMixin, PrivateEstimator):
    """Gaussian naive Bayes whose parameters are released under epsilon-differential privacy.

    Guarantee (add/remove one row, labels and the class sizes private): ``fit`` is
    ``epsilon``-DP (Laplace mechanism, Dwork, McSherry, Nissim & Smith 2006), ``delta = 0``.
    ``predict``, ``predict_proba``, ``predict_log_proba`` and ``score`` are post-processing.

    Mechanism: noisy sufficient statistics (Foulds, Geumlek, Welling & Chaudhuri, UAI 2016,
    "On the theory and practice of privacy-preserving Bayesian data analysis", Sec. 3: one
    Laplace perturbation of an exponential family's sufficient statistics; naive Bayes is their
    running example), rather than Vaidya, Shafiq, Basu & Hong (WI-IAT 2013), the basis of
    diffprivlib's ``GaussianNB``, which perturbs each class's mean and variance separately with
    sensitivities ``(b - a) / n_k`` that need the private class size.  Each feature j is
    clamped to its public ``bounds`` ``[a_j, b_j]`` and mapped to ``u_j = (x_j - c_j) / r_j``
    in ``[-1, 1]`` (``c_j`` the midpoint, ``r_j`` the half-width; clamped again after
    rounding).  For every class k of the public label set, one pass computes
    ``n_k`` (count), ``S1_kj = sum u_j`` and ``S2_kj = sum (u_j^2 - 1/2)`` over the rows of
    class k.  Adding or removing one row of class k changes only class k's block, by
    ``(1, u, u^2 - 1/2)``: l1 norm ``<= 1 + d + d/2`` (``|u_j| <= 1``, ``|u_j^2 - 1/2| <= 1/2``).
    The blocks of different classes are functions of disjoint rows (parallel composition,
    McSherry 2009), so the whole vector of ``K (1 + 2d)`` statistics has l1 sensitivity
    ``1 + 1.5 d`` -- independent of K -- and one Laplace of scale ``(1 + 1.5 d) / epsilon`` on
    every coordinate makes it epsilon-DP.  Equal scales split the budget over counts, sums and
    squares in proportion to their sensitivities.  The event is one ``Laplace(scale,
    sensitivity=1 + 1.5 d)``.

    Binary features (``binary_features``, public: e.g. one-hot columns, whose two values are
    their bounds ``a_j, b_j``) get a Bernoulli likelihood instead of a Gaussian one, as
    categorical attributes do in Vaidya, Shafiq, Basu & Hong (WI-IAT 2013, "Differentially
    private naive Bayes classification": noisy class-conditional counts of each attribute value,
    sensitivity 1).  Their released statistic is ``S1_kj`` only: the count of rows of class k at
    the upper value is ``(n_k + S1_kj) / 2``, a post-processing of the released ``n_k`` and
    ``S1_kj``; their square sums are not released (for a 0/1 column they carry nothing new).  The
    l1 sensitivity becomes ``1 + d + d_g / 2`` (``d_g`` the number of Gaussian features) and the
    Laplace scale ``(1 + d + d_g / 2) / epsilon``; the guarantee holds whatever the values of a
    declared binary column are (they are clamped to its bounds like every feature).  Why: a
    Gaussian fitted to a 0/1 column of a rare category has a variance near 0, and its quadratic
    penalty ``(x - mu)^2 / (2 var) ~ 1 / (2 p)`` for a row at the other value swamps every other
    feature, where the Bernoulli's is ``-log p``; on UCI Adult (102 one-hot columns of 108)
    non-private Gaussian naive Bayes scores 0.54, the Gaussian/Bernoulli one 0.835
    (``benchmarks/bench_naive_bayes.py``).

    Post-processing (per class): ``n~_k = max(noisy n_k, 1)``, ``mean_u = clip(S1/n~_k, -1,
    1)``, ``E[u^2] = clip(S2/n~_k + 1/2, 0, 1)``, ``var_u = clip(E[u^2] - mean_u^2, 0, 1)``;
    then ``var_u`` is raised to at least ``min(b / n~_k, 1)`` (``b`` the Laplace scale: the noise
    on ``S2 / n~`` has standard deviation ``sqrt(2) b / n~``, so a smaller variance cannot be told
    from noise, and a near-zero variance would make one feature dominate the likelihood);
    ``theta_ = c + r mean_u``, ``var_ = r^2 var_u + var_smoothing * max_j r_j^2`` (the variance
    floor is a function of the public bounds, not of the data's variance as in scikit-learn);
    ``class_count_ = n~``; ``class_prior_ = n~ / sum n~`` unless ``priors`` is given.  A binary
    feature's probability of its upper value is the additively smoothed frequency (Lidstone /
    Laplace smoothing, as in scikit-learn's ``BernoulliNB``) ``p = (n~ (1 + mean_u) / 2 + alpha)
    / (n~ + 2 alpha)``; its ``theta_ = a + (b - a) p`` and ``var_ = (b - a)^2 p (1 - p)``.  At
    prediction a binary feature contributes ``t log p + (1 - t) log(1 - p)`` with ``t = clip((x -
    a) / (b - a), 0, 1)``, a Gaussian one its log density.

    Dask input (``fit``, ``predict``, ``predict_proba``, ``score``): a ``dask.array.Array`` or
    ``dask.dataframe.DataFrame`` ``X`` with ``y`` a dask Array/Series chunked like X's rows (or
    NumPy) is fitted without gathering the rows: the public checks read metadata only, the charge
    comes next, then one pass in which every partition returns the exact statistics of its rows
    (integers: the sums of ``u`` and ``u^2`` are fixed-point sums on the grid ``2^-50`` of the
    public bound 1, :mod:`dpfast._fixed`), added exactly on the client and rounded once, then the
    one draw (:func:`_dask_fit`).  The release equals the in-memory fit's bit for bit for the same
    data and ``random_state``, for every partitioning (a partitioning chosen from the data moves
    no bit of it).  Bad data found in the pass (NaN, a label outside
    ``classes``) raises ``ValueError`` after the charge, naming no row or value.

    When to use: tabular classification with known feature ranges; the noise does not grow with
    the number of classes and fit is one pass over the data.  Narrow, honest ``bounds`` matter
    more than anything else for accuracy.

    Parameters
    ----------
    epsilon : float
        Privacy budget (> 0, finite).
    bounds : (lower, upper) or dict
        Public range of the features: a pair of scalars for every feature, or a dict
        ``{feature: (lower, upper)}`` keyed by column name (DataFrame input) or index.
        Required; values outside are clamped to it.
    classes : sequence or None
        The public label set (``None`` means ``[0, 1]``); labels outside it raise ``ValueError``
        before the charge.  Never read off the private labels.
    priors : array-like of shape (n_classes,) or None
        Public class priors; ``None``: the noisy class frequencies.
    var_smoothing : float
        Variance floor, as a fraction of the largest squared half-width of the bounds.
    binary_features : None, boolean mask, or sequence of indices / column names
        The public set of binary features (two values, their bounds), given a Bernoulli
        likelihood; ``None``: every feature is Gaussian.
    alpha : float
        Additive (Laplace) smoothing of the binary features' probabilities (> 0).
    random_state : None, int, numpy Generator or dpfast.random.SecureRandom

    Attributes
    ----------
    classes_ : ndarray (the public label set, the order of predict_proba's columns)
    class_count_, class_prior_ : ndarray of shape (n_classes,), from the noisy counts
    theta_, var_ : ndarray of shape (n_classes, n_features), the released means and variances
    binary_features_ : ndarray of bool, shape (n_features,), the binary (Bernoulli) features
    event_ : ``Laplace`` (add/remove); ``epsilon_`` its epsilon, ``delta_ = 0``,
        ``accountant_`` None (pure DP).  (scikit-learn's ``epsilon_``, the additive variance
        floor, is not an attribute here: ``epsilon_`` is the privacy guarantee.)
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "bounds": ["array-like", dict, None],
        "classes": ["array-like", None],
        "priors": ["array-like", None],
        "var_smoothing": [Interval(Real, 0, None, closed="left")],
        "binary_features": ["array-like", None],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "random_state": RANDOM_STATE,
    }
    _expected_failures = {
        "check_classifiers_classes": PUBLIC_LABELS,
        "check_classifiers_train": PUBLIC_LABELS + " (predict_proba has len(classes) columns)",
        "check_classifiers_one_label": (
            "the label set is public (classes), so a fit on rows of one label still releases noisy statistics "
            "for every class in it, and the prediction is a function of those noisy statistics: it need not be "
            "the one label seen (asserting it would read the label set off the private labels)"),
    }

    def __init__(self, epsilon: float = 1.0, bounds: Any = None, *, classes=None, priors=None,
                 var_smoothing: float = 1e-9, binary_features=None, alpha: float = 1.0,
                 random_state: Any = None):
        self.epsilon = epsilon
        self.bounds = bounds
        self.classes = classes
        self.priors = priors
        self.var_smoothing = var_smoothing
        self.binary_features = binary_features
        self.alpha = alpha
        self.random_state = random_state

    def _event(self, d: int):
        """(event, Laplace scale) of one fit on d features (public parameters only; also sets the
        public mask ``_binary`` of the binary features)."""
        eps = check_epsilon(self.epsilon, allow_array=False)
        self._binary = _binary_mask(self.binary_features, d, getattr(self, "feature_names_in_", None))
        l1 = gaussian_nb_sensitivity(d, int(self._binary.sum()))
        scale = float(laplace_scale(eps, l1))
        return accounting.Laplace(scale=scale, sensitivity=l1), scale

    def _check_priors(self, k: int):
        if self.priors is None:
            return None
        p = as_array(self.priors, "priors", np.float64)
        if p.shape != (k,):
            raise ValueError(f"priors must have one entry per class ({k}), got shape {p.shape}")
        if not np.isfinite(p).all() or (p < 0).any() or not np.isclose(p.sum(), 1.0):
            raise ValueError("priors must be non-negative and sum to 1")
        return p

    def fit(self, X, y, *, budget: Any = None) -> "GaussianNB":
        """Release the class counts, means and variances (see the class docstring).  Returns self.

        ``budget``: a :class:`dpfast.PrivacyBudget` (or None for the one of an enclosing
        ``with budget:``) charged with ``event_`` before any noise is drawn.
        """
        self._validate_params()
        self._reset_fit()
        Xa = validate_X(self, X, reset=True, dtype=np.float64)
        yv = validate_y(self, y, Xa.shape[0], classifier=True)
        classes, idx = check_label_set(yv, self.classes)
        k, d = classes.size, Xa.shape[1]
        priors = self._check_priors(k)
        lo, hi = feature_bounds(self.bounds, d, getattr(self, "feature_names_in_", None), width="half_squared")
        event, scale = self._event(d)
        gen = check_random_state(self.random_state)
        self._scale = scale
        self._charge(event, budget)
        exact = _statistic_floats(self._exact_statistics(Xa, idx, k, lo, hi))
        with detached():  # the fit's event covers the draw
            noise = laplace_noise(scale, exact.size, rng=gen).reshape(exact.shape)
        self._post_process(exact + noise, lo, hi, priors)
        self.classes_ = classes
        self._record_release(event, event.epsilon, 0.0, None)
        return self

    @staticmethod
    def _exact_statistics(Xa, idx, k, lo, hi):
        """The exact statistics as integers: ``(n, T1, T2)`` -- the class counts (k,), and the
        fixed-point sums (:mod:`dpfast._fixed`, grid bound 1: ``q(t) = round(t 2^50)``) of ``u``
        and of ``u^2 - 1/2`` (``sum q(u^2) - 2^49 n_k``), (k, d) object arrays of Python ints.
        Exact: a Dask fit adds the partitions' values in any order and gets the same integers.

        ``u = clip((clip(x, lo, hi) - c) / r, -1, 1)`` per feature; one native pass
        (``dpfast._stats.class_moments``, GIL released)."""
        r = 0.5 * (hi - lo)
        with np.errstate(over="ignore"):
            s = lo + hi
        c = np.where(np.isfinite(s), 0.5 * s, lo + r)
        X = np.asarray(Xa)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        cnt, s1, s2 = _stats.class_moments(X, np.asarray(idx, dtype=np.int64), int(k),
                                           np.ascontiguousarray(lo, dtype=np.float64),
                                           np.ascontiguousarray(hi, dtype=np.float64),
                                           np.ascontiguousarray(c, dtype=np.float64),
                                           np.ascontiguousarray(r, dtype=np.float64), default_threads())
        shape = (int(k), X.shape[1])
        n = cnt.astype(object)
        t2 = _fixed.centred_squares(_fixed.ints(s2).reshape(shape), n[:, None])
        return n, _fixed.ints(s1).reshape(shape), t2

    @staticmethod
    def _statistics(Xa, idx, k, lo, hi) -> np.ndarray:
        """(k, 1 + 2d) statistics: [n_k, sum u, sum (u^2 - 1/2)] per class (one pass), each the
        exact sum of the grid values rounded once (:meth:`_exact_statistics`)."""
        return _statistic_floats(GaussianNB._exact_statistics(Xa, idx, k, lo, hi))

    def _post_process(self, noisy, lo, hi, priors) -> None:
        d = lo.size
        r = 0.5 * (hi - lo)
        with np.errstate(over="ignore"):
            s = lo + hi
        c = np.where(np.isfinite(s), 0.5 * s, lo + r)
        n = np.maximum(noisy[:, 0], 1.0)
        mean_u = np.clip(noisy[:, 1:d + 1] / n[:, None], -1.0, 1.0)
        sq_u = np.clip(noisy[:, d + 1:] / n[:, None] + 0.5, 0.0, 1.0)
        # noise-level floor: the Laplace noise on S2 / n~ has standard deviation sqrt(2) scale / n~,
        # so a smaller variance is indistinguishable from noise (post-processing of n~ and public scale)
        var_u = np.clip(sq_u - mean_u * mean_u, np.minimum(self._scale / n, 1.0)[:, None], 1.0)
        self.theta_ = np.clip(c + r * mean_u, lo, hi)
        self.var_ = r * r * var_u + float(self.var_smoothing) * float(np.max(r * r))
        # binary features: their noisy square sums are discarded unread (not released; see the class
        # docstring); p = smoothed frequency of the upper value from the released n~ and S1
        b = self._binary
        if b.any():
            # in log space: n~ + 2 alpha overflows for alpha near 1e308 (p = 0), and p rounds to 1
            # when alpha / n~ < 2**-53 (log(1 - p) = -inf); log p and log(1 - p) are both formed from
            # their own numerators, n~ h + alpha and n~ (1 - h) + alpha, so they stay finite
            a = float(self.alpha)
            nb, h = n[:, None], 0.5 * (1.0 + mean_u[:, b])
            with np.errstate(divide="ignore"):  # log 0 = -inf is what logaddexp needs for h = 0 or 1
                log_den = np.logaddexp(np.log(nb), np.log(2.0) + np.log(a))
                log_p = np.logaddexp(np.log(nb * h), np.log(a)) - log_den
                log_q = np.logaddexp(np.log(nb * (1.0 - h)), np.log(a)) - log_den
            p, q = np.exp(log_p), np.exp(log_q)
            w = (hi - lo)[b]
            self.theta_[:, b] = lo[b] + w * p
            self.var_[:, b] = w * w * p * q
            self._log_p = log_p
            self._log_q = log_q
        self.binary_features_ = b.copy()
        self._lo, self._hi = lo, hi
        self.class_count_ = n
        self.class_prior_ = n / n.sum() if priors is None else priors

    def _joint_log_likelihood(self, X):
        check_fitted(self)
        Xa = validate_X(self, X, reset=False, dtype=np.float64)
        with np.errstate(divide="ignore"):
            log_prior = np.log(self.class_prior_)
        jll = np.empty((Xa.shape[0], self.classes_.size))
        b = self.binary_features_
        g = ~b
        Xg = Xa[:, g]
        if b.any():
            lo, hi = self._lo[b], self._hi[b]
            t = np.clip((Xa[:, b] - lo) / (hi - lo), 0.0, 1.0)
        for i in range(self.classes_.size):
            n_ij = -0.5 * np.sum(np.log(2.0 * np.pi * self.var_[i, g]))
            n_ij = n_ij - 0.5 * np.sum((Xg - self.theta_[i, g]) ** 2 / self.var_[i, g], axis=1)
            if b.any():
                n_ij = n_ij + t @ self._log_p[i] + (1.0 - t) @ self._log_q[i]
            jll[:, i] = log_prior[i] + n_ij
        return jll

    def predict(self, X):
        jll = self._joint_log_likelihood(X)
        return self.classes_[np.argmax(jll, axis=1)]

    def predict_log_proba(self, X):
        jll = self._joint_log_likelihood(X)
        return jll - logsumexp(jll, axis=1, keepdims=True)

    def predict_proba(self, X):
        return np.exp(self.predict_log_proba(X))


def _statistic_floats(exact) -> np.ndarray:
    """(k, 1 + 2d) float64 statistics from :meth:`GaussianNB._exact_statistics`' integers, each
    rounded once, correctly (:func:`dpfast._fixed.to_float`, grid bound 1)."""
    n, t1, t2 = exact
    k, d = t1.shape
    out = np.empty((k, 1 + 2 * d))
    out[:, 0] = np.asarray(n).astype(np.float64)
    out[:, 1:d + 1] = _fixed.to_float(t1, 1.0)
    out[:, d + 1:] = _fixed.to_float(t2, 1.0)
    return out


# ----------------------------------------------------------------------------- Dask input
def _nb_partition(Xk, yk, classes, lo, hi, statistics):
    """One partition's exact statistics (:meth:`GaussianNB._exact_statistics` of its rows), or the fixed
    message of labels outside the public set (the rows and lengths are checked by
    :func:`~dpfast._dask_utils.sum_by_partitions`)."""
    try:
        ks, idx = check_label_set(yk, classes)
    except (TypeError, ValueError):
        return PartitionError(BAD_LABELS)
    return statistics(Xk, idx, ks.size, lo, hi)


def _dask_fit(est, X, y, *, budget: Any = None):
    """:meth:`GaussianNB.fit` for a Dask ``X`` (class docstring): public checks on metadata,
    charge, one pass of per-partition :meth:`GaussianNB._exact_statistics` (integers) added
    exactly, rounded once, one draw; the post-processing of the in-memory fit."""
    est._validate_params()
    est._reset_fit()
    if y is None:
        raise ValueError(f"{type(est).__name__} requires y to be passed, but the target y is None")
    Xd, d = fit_rows(est, X, known_chunks=not is_dask_collection(y))
    yp = vector_parts(y, Xd, "y")
    classes = public_classes(est.classes)
    k = classes.size
    priors = est._check_priors(k)
    lo, hi = feature_bounds(est.bounds, d, getattr(est, "feature_names_in_", None), width="half_squared")
    event, scale = est._event(d)
    gen = check_random_state(est.random_state)
    est._scale = scale
    est._charge(event, budget)
    exact = _statistic_floats(sum_by_partitions(_nb_partition, Xd, [yp],
                                                (est.classes, lo, hi, type(est)._exact_statistics), out_dtype=object))
    with detached():  # the fit's event covers the draw
        noise = laplace_noise(scale, exact.size, rng=gen).reshape(exact.shape)
    est._post_process(exact + noise, lo, hi, priors)
    est.classes_ = classes
    est._record_release(event, event.epsilon, 0.0, None)
    return est


GaussianNB._dask_fit = staticmethod(_dask_fit)  # DaskDispatchMixin: fit on Dask collections
