"""DP-Lloyd k-means (see :class:`KMeans`)."""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import ClusterMixin, TransformerMixin

from dpfast import _fixed, _stats, accounting
from dpfast._base import RANDOM_STATE, Interval, PrivateEstimator, check_fitted, validate_X
from dpfast._dask_utils import (
    fit_rows,
    frame_or_array_rows,
    is_dask_collection,
    persist_by_partitions,
    sum_by_partitions,
)
from dpfast._threads import default_threads
from dpfast._validation import check_epsilon, feature_bounds
from dpfast.accounting.events import self_composed
from dpfast.budget import detached
from dpfast.mechanisms import laplace_noise
from dpfast.random import check_random_state

__all__ = ["KMeans"]

#: Su et al. (2016): eps_count : eps_dim = (4 d rho^2)^(1/3) : 1 (eps_dim = the budget of one
#: coordinate of the sum, eps_sum = d eps_dim) minimises the first-order mean squared error of a
#: noisy centroid, rho ~ 0.225 (their normalised centroid coordinate); see budget_split.
_RHO = 0.225
#: above this many clusters the initialisation skips the pairwise-distance test (k^2 memory)
_PACK_MAX = 256


def budget_split(epsilon: float, max_iter: int, d: int) -> tuple[float, float]:
    """(eps_count, eps_sum) per iteration (Su, Cao, Li, Bertino & Jin 2016, DPLloyd's budget
    allocation): ``epsilon / max_iter = eps_count + d * eps_dim`` with ``eps_count : eps_dim =
    (4 d rho^2)^(1/3) : 1``, ``rho = 0.225``; ``eps_sum = d * eps_dim`` (the sum vector's Laplace
    has l1 sensitivity d, so each coordinate's noise is that of an ``eps_dim`` release of
    sensitivity 1).  The ratio minimises the first-order MSE of a noisy centroid ``(S + L)/(C +
    L0)`` per cluster, ``sum_j 2 (d/eps_sum)^2 + 2 ||c||^2 / eps_count^2`` over ``C^2`` with
    ``||c||^2 = 4 d rho^2``: setting the derivatives equal gives ``eps_count^3 = 4 d rho^2
    eps_dim^3``.  (dpfast's first KMeans used ``eps_sum / eps_count = (4 d rho^2)^(1/3)``, which gives
    the count more than the sum; diffprivlib 0.6.6's ``_split_epsilon`` normalises by ``d eps_dim +
    eps_count`` as here but returns the two shares swapped, so one step spends ``(1 + d q) / (d + q)``
    times its per-step epsilon, q = (4 d rho^2)^(1/3): 2.28x at d = 64.)  Provenance: Su et al.'s
    text was not available; the ratio is re-derived above and is the one their published
    iteration-count rule implies (its factor ``(d + q)^3`` is ``eps'^2 C^2 / 2`` times this
    optimum's MSE, a function of ``d + q`` only under this split; :doc:`/theory/clustering`,
    "The budget split: derivation and provenance").  Public parameters only."""
    per = epsilon / max_iter
    c = (4.0 * d * _RHO * _RHO) ** (1.0 / 3.0)  # eps_count / eps_dim
    return per * c / (d + c), per * d / (d + c)


def step_event(eps_count: float, eps_sum: float, d: int):
    """The event of one noisy Lloyd step on d features in unit coordinates: the k counts with
    Laplace(1/eps_count) (l1 sensitivity 1) and the k*d centred unit sums with Laplace(d/eps_sum)
    (l1 sensitivity d), composed."""
    return accounting.Composed((accounting.Laplace(scale=1.0 / eps_count, sensitivity=1.0),
                                accounting.Laplace(scale=d / eps_sum, sensitivity=float(d))))


def event_epsilon(event) -> float:
    """The pure epsilon of a KMeans event by basic composition: max_iter * (eps_count + eps_sum),
    each Laplace leaf stating its own epsilon (sensitivity / scale)."""
    count = event.count if isinstance(event, accounting.SelfComposed) else 1
    step = event.event if isinstance(event, accounting.SelfComposed) else event
    assert isinstance(step, accounting.Composed)
    leaves = [e for e in step.events if isinstance(e, accounting.Laplace)]
    assert len(leaves) == len(step.events)
    return float(count * sum(e.epsilon for e in leaves))


def initial_centers(k: int, lo: np.ndarray, hi: np.ndarray, gen) -> np.ndarray:
    """Data-independent initial centres in the box (after Su et al.'s sphere packing): k points
    drawn uniformly in the box shrunk by a margin a, at pairwise (unit-coordinate) distance >= 2a,
    with a halved from 1/2 until 200 draws find such a set (a = 0 always does; for k > 256 the
    distance test is skipped: k points uniform in the box shrunk by 1/2).  Reads only public
    values and ``gen``."""
    d = lo.size
    c, r = 0.5 * lo + 0.5 * hi, 0.5 * (hi - lo)
    a = 0.5
    while True:
        for _ in range(200):
            u = gen.uniform(-1.0 + a, 1.0 - a, size=(k, d)) if a < 1.0 else np.zeros((k, d))
            if k == 1 or a == 0.0 or k > _PACK_MAX:
                return c + r * u
            diff = u[:, None, :] - u[None, :, :]
            dist = np.sqrt((diff * diff).sum(-1))[np.triu_indices(k, 1)]
            if (dist >= 2.0 * a).all():
                return c + r * u
        a = a / 2.0 if a > 1e-3 else 0.0


def _float_rows(U) -> np.ndarray:
    U = np.asarray(U)
    return U if U.dtype in (np.float32, np.float64) else U.astype(np.float64)


def _assign(U: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Index of the nearest centre (squared Euclidean, ties to the lowest index) for each row.

    Native (``dpfast._stats.kmeans_step``): ``sum_t (u_t - c_t)^2`` per centre, in one pass,
    rows read by their strides; the labels do not depend on the thread count or the layout."""
    lab, _, _ = _stats.kmeans_step(_float_rows(U), np.ascontiguousarray(C, dtype=np.float64), True, False,
                                   default_threads())
    return lab.astype(np.intp, copy=False)


def step_exact(U: np.ndarray, C: np.ndarray):
    """The exact statistics of one Lloyd step in unit coordinates, as integers: every row of U
    assigned to its nearest centre of C, then the k counts and the (k, d) fixed-point sums
    (:mod:`dpfast._fixed`, grid bound 1: ``q(u) = round(u 2^50)``, u in [-1, 1]) of the rows per
    cluster, an object array of Python ints.  Exact: per partition on Dask, added in any order to
    the same integers.  One native pass (``dpfast._stats.kmeans_step``, GIL released)."""
    C = np.ascontiguousarray(C, dtype=np.float64)
    _, cnt, sums = _stats.kmeans_step(_float_rows(U), C, False, True, default_threads())
    return cnt.astype(object), _fixed.ints(sums).reshape(C.shape)


def step_floats(exact) -> tuple[np.ndarray, np.ndarray]:
    """(counts (k,), sums (k, d)) as float64 from :func:`step_exact`'s integers, each rounded once."""
    cnt, sums = exact
    return np.asarray(cnt).astype(np.float64), _fixed.to_float(sums, 1.0)


def step_statistics(U: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The statistics of one Lloyd step in unit coordinates (:func:`step_exact` rounded once): the
    k counts (float64) and the (k, d) sums of the rows per cluster (:func:`noisy_step` adds the
    noise); the same bits for any thread count, layout, chunking or Dask partitioning."""
    return step_floats(step_exact(U, C))


def unit_rows(Xa: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Rows clamped to the box and mapped to ``u = (x - c) / r`` in [-1, 1]^d (clamped again)."""
    c, r = 0.5 * lo + 0.5 * hi, 0.5 * (hi - lo)
    return np.clip((np.clip(Xa, lo, hi) - c) / r, -1.0, 1.0)


def noisy_step(U: np.ndarray, C: np.ndarray, eps_count: float, eps_sum: float, gen):
    """One DP-Lloyd step in unit coordinates (U, C in [-1, 1]^d): assign, then the noisy counts and
    sums (:func:`step_event`).  Returns (noisy counts (k,), noisy sums (k, d)); the caller has
    charged for the event."""
    k, d = C.shape
    counts, sums = step_statistics(U, C)
    with detached():
        nc = counts + laplace_noise(1.0 / eps_count, k, rng=gen)
        ns = sums + laplace_noise(d / eps_sum, k * d, rng=gen).reshape(k, d)
    return nc, ns


class KMeans(ClusterMixin, TransformerMixin, PrivateEstimator):
    """k-means clustering with cluster centres released under differential privacy (DP-Lloyd).

    Guarantee (add/remove one row; the number of rows is private): ``fit`` is ``epsilon``-DP
    (pure, ``delta_ = 0``).  Algorithm: DP-Lloyd, the SuLQ k-means of Blum, Dwork, McSherry &
    Nissim (2005, "Practical privacy: the SuLQ framework", Sec. 5) with the budget allocation of
    Su, Cao, Li, Bertino & Jin (2016, "Differentially private k-means clustering", CODASPY;
    DPLloyd-Improved): a fixed, public number ``max_iter`` of noisy Lloyd steps, each
    ``epsilon / max_iter``-DP, split between the count and each coordinate of the sums in the ratio
    ``(4 d rho^2)^(1/3) : 1`` (rho = 0.225; :func:`budget_split`), and a data-independent
    initialisation.

    Each feature is clamped to its public ``bounds`` and mapped to ``u = (x - c) / r`` in
    ``[-1, 1]^d`` (c the midpoint, r the half-width; clamped again after rounding).  One step
    assigns every row to its nearest current centre and releases the k counts and the k sums of
    ``u``.  Sensitivity per step: adding or removing one row changes one cluster's count by 1 (l1
    sensitivity 1) and one cluster's sum by a vector in ``[-1, 1]^d`` (l1 sensitivity d, i.e.
    half the box's l1 diameter in unit coordinates: centring halves the diameter).  The counts get
    Laplace(1/eps_count), the sums Laplace(d/eps_sum) per coordinate (Laplace mechanism, Dwork,
    McSherry, Nissim & Smith 2006), so a step is ``(eps_count + eps_sum)``-DP and, by basic
    (adaptive) composition over the ``max_iter`` steps, ``fit`` is ``epsilon``-DP.  The new centre
    is ``c + r * clip(sum / count, -1, 1)`` where the noisy count is at least 1, else the centre
    stays (post-processing).  ``event_`` is ``SelfComposed(Composed(Laplace, Laplace), max_iter)``.

    Initialisation (data-independent, after Su et al.'s sphere packing): k points uniform in the
    box shrunk by a margin a, pairwise at least 2a apart in unit coordinates, a halved from 1/2
    until such a set is drawn.  No private data is read.

    Dask input (``fit``, and ``predict`` lazily): the public checks read metadata only, the charge
    comes next, the rows are read once and kept on the workers in unit coordinates
    (``persist``), then each step is one pass in which every partition returns
    :func:`step_exact` for the current centres (counts, and the sums as exact fixed-point integers
    on the grid of the public bound 1, :mod:`dpfast._fixed`), added exactly on the client and
    rounded once, and the step's noise is drawn on the client.  The release equals the in-memory
    fit bit for bit for the same data and ``random_state``, for every partitioning (a partitioning
    chosen from the data moves no bit of it); NaN or infinite entries raise ``ValueError`` after
    the charge, naming no row or value.

    When to use: well-separated clusters and n large relative to ``k * d / epsilon``; the number
    of iterations is fixed (no convergence test on private data: it would leak).  Fewer iterations
    (default 5, the small fixed number Su et al. recommend) leave more budget per step.

    ``labels_`` and ``inertia_`` are not exposed: the labels of the training rows are per-row
    functions of the private data and the inertia is a private sum; call ``predict(X)`` /
    ``score(X)`` yourself (post-processing of the released centres on data you hold).
    ``fit_predict`` is ``fit(X).predict(X)``.

    Parameters
    ----------
    n_clusters : int
    epsilon : float
    bounds : (lower, upper) or dict -- the public box (required); a pair of scalars for every
        feature, or ``{feature: (lower, upper)}`` keyed by column name or index.
    max_iter : int -- the fixed, public number of noisy Lloyd steps (default 5; at most 10^4).
    n_clusters is at most 10^5.
    random_state : None, int, numpy Generator or dpfast.random.SecureRandom

    Attributes
    ----------
    cluster_centers_ : ndarray (n_clusters, n_features), the released centres.
    n_iter_ : int, = max_iter (public).
    event_, epsilon_, delta_ (0), accountant_ (None: pure DP, the event states its epsilon).
    """

    _parameter_constraints = {
        "n_clusters": [Interval(Integral, 1, 100_000, closed="both")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "bounds": ["array-like", dict, None],
        "max_iter": [Interval(Integral, 1, 10_000, closed="both")],
        "random_state": RANDOM_STATE,
    }

    _expected_failures = {
        "check_clustering": ("scikit-learn's clustering check reads labels_, the labels of the training rows; they are "
                             "per-row functions of the private data, not a DP release, so KMeans does not store them "
                             "(predict(X) gives them to whoever holds X)"),
    }

    def __init__(self, n_clusters: int = 8, epsilon: float = 1.0, bounds: Any = None, *, max_iter: int = 5,
                 random_state: Any = None):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.max_iter = max_iter
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags

    def _validate_X(self, X, *, reset: bool) -> np.ndarray:
        return validate_X(self, X, reset=reset, dtype=np.float64)

    def _event(self, d: int):
        eps = check_epsilon(self.epsilon, allow_array=False)
        ec, es = budget_split(eps, int(self.max_iter), d)
        return self_composed(step_event(ec, es, d), int(self.max_iter)), ec, es

    def fit(self, X, y=None, *, budget: Any = None) -> "KMeans":
        """Release ``cluster_centers_`` privately (see the class docstring).  ``budget``: a
        :class:`dpfast.PrivacyBudget` (or None for an enclosing ``with budget:``) charged with
        ``event_`` before any draw.  Returns self."""
        if is_dask_collection(X):
            return self._fit_dask(X, budget)
        self._validate_params()
        self._reset_fit()
        Xa = self._validate_X(X, reset=True)
        d, k = Xa.shape[1], int(self.n_clusters)
        lo, hi = feature_bounds(self.bounds, d, getattr(self, "feature_names_in_", None), width="half")
        event, ec, es = self._event(d)
        gen = check_random_state(self.random_state)
        self._charge(event, budget)
        c, r = 0.5 * lo + 0.5 * hi, 0.5 * (hi - lo)
        U = unit_rows(Xa, lo, hi)
        C = np.clip((initial_centers(k, lo, hi, gen) - c) / r, -1.0, 1.0)
        for _ in range(int(self.max_iter)):
            nc, ns = noisy_step(U, C, ec, es, gen)
            ok = nc >= 1.0
            C = np.where(ok[:, None], np.clip(ns / np.where(ok, nc, 1.0)[:, None], -1.0, 1.0), C)
        self.cluster_centers_ = np.clip(c + r * C, lo, hi)
        self.n_iter_ = int(self.max_iter)
        self._record_release(event, event_epsilon(event), 0.0, None)
        return self

    def _fit_dask(self, X, budget) -> "KMeans":
        """:meth:`fit` on a Dask collection (class docstring): metadata checks, the charge, the
        unit rows persisted once on the workers, then per step one pass in which every partition
        returns :func:`step_exact` (assignment, counts, exact sums) for the current centres, the
        integers added exactly and rounded once, and the step's noise drawn on the client."""
        self._validate_params()
        self._reset_fit()
        Xd, d = fit_rows(self, X)
        k = int(self.n_clusters)
        lo, hi = feature_bounds(self.bounds, d, getattr(self, "feature_names_in_", None), width="half")
        event, ec, es = self._event(d)
        gen = check_random_state(self.random_state)
        self._charge(event, budget)
        c, r = 0.5 * lo + 0.5 * hi, 0.5 * (hi - lo)
        U = persist_by_partitions(_unit_rows, Xd, (lo, hi))  # the data read once
        C = np.clip((initial_centers(k, lo, hi, gen) - c) / r, -1.0, 1.0)
        for _ in range(int(self.max_iter)):
            counts, sums = step_floats(sum_by_partitions(step_exact, U, args=(C,), dtype=None, check=None,
                                                         out_dtype=object))
            with detached():  # as noisy_step draws them: counts, then sums
                nc = counts + laplace_noise(1.0 / ec, k, rng=gen)
                ns = sums + laplace_noise(d / es, k * d, rng=gen).reshape(k, d)
            ok = nc >= 1.0
            C = np.where(ok[:, None], np.clip(ns / np.where(ok, nc, 1.0)[:, None], -1.0, 1.0), C)
        del U
        self.cluster_centers_ = np.clip(c + r * C, lo, hi)
        self.n_iter_ = int(self.max_iter)
        self._record_release(event, event_epsilon(event), 0.0, None)
        return self

    def _dask_rows(self, X):
        check_fitted(self)
        Xd = frame_or_array_rows(X)
        if Xd.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {Xd.shape[1]} features, KMeans was fitted with {self.n_features_in_}")
        return Xd

    def predict(self, X):
        """Index of the nearest released centre (post-processing; lazily for Dask input)."""
        check_fitted(self)
        if is_dask_collection(X):
            C = self.cluster_centers_
            return self._dask_rows(X).map_blocks(lambda b: _assign(np.asarray(b, dtype=np.float64), C),
                                                 drop_axis=1, dtype=np.intp)
        return _assign(self._validate_X(X, reset=False), self.cluster_centers_)

    def fit_predict(self, X, y=None, *, budget: Any = None):
        """``fit(X).predict(X)``: the labels are per-row outputs on the data you hold (not DP)."""
        return self.fit(X, budget=budget).predict(X)

    def transform(self, X):
        """Euclidean distances to the released centres (post-processing)."""
        check_fitted(self)
        Xa = self._validate_X(X, reset=False)
        C = self.cluster_centers_
        d2 = ((-2.0 * C) @ Xa.T + (C * C).sum(1)[:, None]).T + (Xa * Xa).sum(1)[:, None]
        return np.sqrt(np.maximum(d2, 0.0))

    def score(self, X, y=None, sample_weight=None) -> float:
        """Opposite of the k-means objective of X for the released centres (as scikit-learn's)."""
        check_fitted(self)
        Xa = self._validate_X(X, reset=False)
        D2 = self.transform(Xa) ** 2
        m = D2.min(axis=1)
        w = np.ones(len(m)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        return -float((w * m).sum())


def _unit_rows(Xk, lo, hi):
    """A partition's rows in unit coordinates (:func:`unit_rows`), kept on the worker for the steps."""
    return np.ascontiguousarray(unit_rows(Xk, lo, hi))
