"""Random decision trees released under differential privacy: the engine shared by
:class:`dpfast.tree.DecisionTreeClassifier` (one tree) and
:class:`dpfast.ensemble.RandomForestClassifier` (an ensemble).

A public-internal module (its names are for :mod:`dpfast.tree` and :mod:`dpfast.ensemble`; users
import the estimators).  Neighbouring relation: add or remove one row (its features and its
label); the number of rows and the class sizes are private.

The shape of every tree is complete binary of depth ``D`` in heap order (node ``i`` has the
children ``2i+1`` and ``2i+2``; the ``M = 2^D - 1`` split nodes come first, leaf ``l`` is node
``M + l``).  Split node ``i`` holds a feature and a threshold drawn from public randomness
(:func:`draw_forest`); a row goes right when ``x[feature] > threshold``.  The only pass over the
private rows is :func:`leaf_counts` (native: ``dpfast._trees``, ``csrc/tree/random_trees.hpp``).
"""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy.special import lambertw

from dpfast import _threads, _trees, accounting
from dpfast._base import (
    PUBLIC_LABELS,
    RANDOM_STATE,
    DaskDispatchMixin,
    DPClassifierMixin,
    Interval,
    PrivateEstimator,
    StrOptions,
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
from dpfast._validation import check_epsilon, check_label_set, feature_bounds, public_classes
from dpfast.accounting import ReportNoisyMax, SelfComposed
from dpfast.budget import detached
from dpfast.mechanisms import discrete_laplace_mechanism, event_of, report_noisy_max
from dpfast.random import check_random_state

__all__ = ["RandomTreesClassifier", "tree_bounds", "draw_forest", "leaf_counts", "route", "forest_proba",
           "leaf_distribution",
           "release_leaves", "fit_dask",
           "auto_mechanism", "auto_n_trees", "auto_n_trees_label", "auto_count_share", "MAX_DEPTH", "MAX_TABLE",
           "AUTO_MAX_TREES", "AUTO_RHO_TREES", "AUTO_RHO_LABEL", "auto_label_x", "label_epsilon",
           "label_forest_sizes_allowed", "label_event"]

#: deepest tree (2^30 leaves is already far beyond any table that fits MAX_TABLE)
MAX_DEPTH = 30
#: most entries of the (n_trees, 2^max_depth, n_classes) count table (64 MiB of int64)
MAX_TABLE = 1 << 23
#: ``n_estimators="auto"``: the most trees (Geurts et al. 2006's default ensemble size)
AUTO_MAX_TREES = 100
#: ``n_estimators="auto"``: the per-tree signal-to-noise ratio rho = n epsilon / (T 2^D) at which the
#: variance of the forest's class margin is least, sqrt(v / 4) with the partition variance v of a
#: margin in [-1, 1] bounded by 1 (docs/theory/trees.rst, "Sizing the forest")
AUTO_RHO_TREES = 2.0
#: ``leaf_mechanism="auto"``: "label" below this rho, where the noise's standard deviation
#: sqrt(2) T / epsilon exceeds a leaf's mean count n / 2^D (docs/theory/trees.rst)
AUTO_RHO_LABEL = np.sqrt(2.0)


def tree_bounds(bounds, n_features: int, feature_names=None) -> tuple[np.ndarray, np.ndarray]:
    """``bounds`` -> (lower, upper) float64 arrays of length ``n_features``
    (:func:`dpfast._validation.feature_bounds`: a pair of scalars for every feature, or a dict keyed
    by column name or index; finite, ``lower < upper``, a finite width).  Public values only
    (called before the charge)."""
    return feature_bounds(bounds, n_features, feature_names, purpose=", from which the random splits are drawn")


def draw_forest(gen: np.random.Generator, lo: np.ndarray, hi: np.ndarray, n_trees: int,
                depth: int) -> tuple[np.ndarray, np.ndarray]:
    """(feature, threshold), both of shape (n_trees, 2^depth - 1): random trees from public
    randomness only (Geurts, Ernst & Wehenkel 2006's totally randomized trees; the construction of
    Fletcher & Islam 2017 and diffprivlib).  At every split node the feature is uniform over the
    ``d`` features and the threshold uniform over that feature's range *in the node's box* -- the
    public ``bounds`` narrowed by the splits above it -- so no split is wasted outside its
    region.  Level by level, tree by tree (the draw order is part of the reproducibility
    contract of ``random_state``)."""
    d = lo.size
    M = (1 << depth) - 1
    feature = np.empty((n_trees, M), dtype=np.int64)
    u = np.empty((n_trees, M), dtype=np.float64)
    for t in range(n_trees):  # the draws, in their order
        for level in range(depth):
            first, width = (1 << level) - 1, 1 << level
            feature[t, first:first + width] = gen.integers(0, d, size=width)
            u[t, first:first + width] = gen.random(width)
    # the thresholds, every tree at once (elementwise the same operations: the same bits)
    threshold = np.empty((n_trees, M), dtype=np.float64)
    blo = np.broadcast_to(lo, (n_trees, 1, d)).copy()
    bhi = np.broadcast_to(hi, (n_trees, 1, d)).copy()
    trees = np.arange(n_trees)[:, None]
    for level in range(depth):
        first, width = (1 << level) - 1, 1 << level
        f = feature[:, first:first + width]
        rows = np.arange(width)[None, :]
        a, b = blo[trees, rows, f], bhi[trees, rows, f]
        thr = np.minimum(np.maximum(a + u[:, first:first + width] * (b - a), a), b)
        threshold[:, first:first + width] = thr
        if level + 1 < depth:  # children boxes: left (upper[f] = thr), right (lower[f] = thr)
            clo = np.repeat(blo, 2, axis=1)
            chi = np.repeat(bhi, 2, axis=1)
            chi[trees, 2 * rows, f] = thr
            clo[trees, 2 * rows + 1, f] = thr
            blo, bhi = clo, chi
    return feature, threshold


def leaf_counts(X: np.ndarray, y_idx: np.ndarray, n_classes: int, feature: np.ndarray, threshold: np.ndarray,
                depth: int, tree_of_row: np.ndarray | None = None) -> np.ndarray:
    """(n_trees, 2^depth, n_classes) int64: the rows of each class in each leaf of each tree (a
    row feeds tree ``tree_of_row[i]``, or every tree when None).  One native pass, threads over
    rows, bit-identical for any thread count (integer counts)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y_idx, dtype=np.int64)
    tor = None if tree_of_row is None else np.ascontiguousarray(tree_of_row, dtype=np.int64)
    return _trees.leaf_counts(X, y, int(n_classes), tor, np.ascontiguousarray(feature, dtype=np.int64),
                              np.ascontiguousarray(threshold, dtype=np.float64), int(depth),
                              _threads.default_threads())


def route(X: np.ndarray, feature: np.ndarray, threshold: np.ndarray, depth: int) -> np.ndarray:
    """(n, n_trees) int64: the leaf of every row in every tree (native, threads over rows)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    return _trees.route(X, feature, threshold, int(depth), _threads.default_threads())


def forest_proba(X: np.ndarray, feature: np.ndarray, threshold: np.ndarray, depth: int,
                 leaf_proba: np.ndarray) -> np.ndarray:
    """(n, K): per row, the mean over the ``T`` trees of ``leaf_proba[t, leaf of the row in t]``:
    the sum in tree order divided by ``T`` (native ``proba_sum``, one pass, threads over rows,
    the same bits for any thread count)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    proba = np.ascontiguousarray(leaf_proba, dtype=np.float64)
    return _trees.proba_sum(X, feature, threshold, int(depth), proba, _threads.default_threads()) / proba.shape[0]


def auto_count_share(depth: int) -> float:
    """The share of epsilon that ``"auto"`` spends on the noisy row count: ``min(1/2,
    2^(-(2 depth + 1) / 3))`` (0.079 at depth 5), a function of public parameters only.

    Derivation (docs/theory/trees.rst, "The auto rule").  Spending a share ``s`` on the count
    raises the leaves' noise variance by ``1 / (1 - s)^2 ~ 1 + 2 s``; at the balanced forest size
    the noise is half of the risk, so the relative loss is ``s``.  A count of scale ``1 / (s
    epsilon)`` misses ``n`` by the relative error ``r = sqrt(2) / (s n epsilon)``, and sizing the
    forest ``1 + r`` times off its optimum costs ``r^2 / 2`` of the convex, balanced risk ``a / T
    + b T``.  ``s + 1 / (s n epsilon)^2`` is least at ``s = (2 / (n epsilon)^2)^(1/3)``; taken where
    the rule starts to use more than one tree, ``n epsilon = AUTO_RHO_TREES 2^D`` (below it the
    forest is one tree whatever the count), this is ``2^(-(2 D + 1) / 3)``."""
    return float(min(0.5, 2.0 ** (-(2 * int(depth) + 1) / 3.0)))


def auto_n_trees(n_noisy: int, epsilon: float, depth: int, cap: int) -> int:
    """``n_estimators="auto"``: the integer minimiser of ``1 / T + T / T*^2`` with ``T* = n~
    epsilon / (AUTO_RHO_TREES 2^depth)`` -- the least ``T >= 1`` with ``T (T + 1) >= T*^2`` --
    clipped to ``[1, cap]``.  Post-processing of the released count ``n~``.

    Derivation (docs/theory/trees.rst, "Sizing the forest").  A prediction is the sign of the
    forest's margin between two classes, the mean over ``T`` trees of a leaf's frequency margin.
    Its variance has two parts: the random partition's, ``v / T`` with ``v <= 1`` (the variance of
    a value in [-1, 1]); and the leaf noise's: a leaf holds ``m = n / 2^D`` rows on average, each
    count gets discrete Laplace noise of variance ``2 (T / epsilon)^2`` (sensitivity ``T``), the
    margin's noise is a difference of two, ``4 T^2 / (epsilon m)^2`` per tree, ``4 T / (epsilon
    m)^2`` averaged over ``T``.  ``v / T + 4 T 4^D / (n epsilon)^2`` is least at ``T* = sqrt(v) n
    epsilon / 2^(D + 1)``: per tree, ``rho = n epsilon / (T 2^D) = 2 / sqrt(v) >= 2``, taken at
    ``v = 1``.  The "label" release has the same ``rho`` per tree (``n / T`` rows against noise
    ``1 / epsilon``)."""
    t_star = max(n_noisy, 0) * epsilon / (AUTO_RHO_TREES * float(1 << int(depth)))
    t = max(int(np.ceil((np.sqrt(1.0 + 4.0 * t_star * t_star) - 1.0) / 2.0)), 1)
    while t > 1 and (t - 1) * t >= t_star * t_star:  # guard the float rounding of the root
        t -= 1
    return int(min(t, int(cap)))


def auto_label_x(n_classes: int) -> float:
    """The per-tree ``x = epsilon g / T`` at which a forest of ``T`` leaf labels has the largest vote
    signal-to-noise ratio ``T (1 - (K / 2) exp(-x))^2`` (``K = n_classes``, ``g`` the count gap of the
    row's leaf over all rows): the root of ``exp(x) = (K / 2) (1 + 2 x)``, 1.256 for two classes,
    2.02 for three (docs/theory/trees.rst, "Sizing a forest of labels").  In closed form: with
    ``y = x + 1/2`` the equation is ``y exp(-y) = exp(-1/2) / K``, whose root above 1 is
    ``y = -W_{-1}(-exp(-1/2) / K)`` (Lambert W's lower branch; the argument lies in ``[-1/e, 0)``
    for ``K >= 2``).  Public parameters only."""
    K = float(max(int(n_classes), 2))
    return float(-lambertw(-np.exp(-0.5) / K, k=-1).real - 0.5)


def auto_n_trees_label(n_noisy: int, epsilon: float, depth: int, cap: int, n_classes: int = 2) -> int:
    """``n_estimators="auto"`` for a forest of leaf labels (``"label"``): the integer maximiser of
    the vote signal-to-noise ratio ``T max(0, 1 - (K / 2) exp(-a / T))^2`` with ``a = n~ epsilon
    (2/3)^depth`` (``K = n_classes``), clipped to ``[1, cap]``.  Post-processing of the released
    count ``n~``.

    Derivation (docs/theory/trees.rst, "Sizing a forest of labels").  A tree's vote at a row is
    one class, bounded whatever its source (the random partition or the label noise), so the
    forest's vote margin between the row's class and another, over ``T`` trees, has variance at
    most ``1 / T``.  Its mean is one tree's: every tree counts every row, its leaf's count gap
    ``g`` is selected at ``epsilon / T`` (:func:`label_epsilon`), and permute-and-flip (McKenna &
    Sheldon 2020) picks each of the ``K - 1`` other classes with probability about ``exp(-epsilon
    g / T) / 2``, so the margin is ``1 - (K / 2) exp(-epsilon g / T)``.  The squared ratio ``T (1 - (K / 2) exp(-epsilon g / T))^2`` is
    unimodal in ``T``, largest at ``epsilon g / T = auto_label_x(K)``.  The gap is taken for a pure
    leaf at the row's own leaf, whose share of the rows is ``(2/3)^depth`` in expectation when the
    rows spread evenly over the bounds' box (a uniform threshold keeps ``U^2 + (1 - U)^2`` of a
    node's rows around a row, 2/3 on average).  Two trees are skipped
    (:func:`label_forest_sizes_allowed`): where the maximiser is 2, the better of 1 and 3."""
    a = max(int(n_noisy), 0) * float(epsilon) * (2.0 / 3.0) ** int(depth)
    if a <= 0.0:
        return 1
    half_k = max(int(n_classes), 2) / 2.0

    def snr(t):
        return t * max(0.0, 1.0 - half_k * np.exp(-a / t)) ** 2

    t = max(int(np.floor(a / auto_label_x(n_classes))), 1)  # the continuous optimum lies in [t, t + 1]
    if snr(t + 1) > snr(t):
        t += 1
    t = min(t, max(int(cap), 1))
    if not label_forest_sizes_allowed(t):  # 2: the better of its neighbours 1 and 3 (within the cap)
        t = 3 if cap >= 3 and snr(3) > snr(1) else 1
    return int(t)


def auto_mechanism(n_noisy: int, epsilon: float, n_trees: int, depth: int) -> str:
    """The leaf mechanism ``leaf_mechanism="auto"`` picks from the released row count:
    ``"label"`` when the per-tree signal-to-noise ratio ``rho = n~ epsilon / (n_trees 2^depth)``
    is below ``AUTO_RHO_LABEL = sqrt(2)``, else ``"counts"``.  Post-processing of the noisy count.

    Derivation (docs/theory/trees.rst, "The auto rule").  Per tree the two releases have the same
    ``rho``; they differ in what is released.  A count table carries each leaf's class
    frequencies, which the forest's average uses, but only while they are above the noise: a
    leaf's mean count ``n / 2^D`` exceeds the noise's standard deviation ``sqrt(2) n_trees /
    epsilon`` exactly when ``rho > sqrt(2)``.  Below it the released frequencies are mostly
    noise, and the best use of the leaf is its majority label, which permute-and-flip selects
    with a smaller error than the argmax of noisy counts (for two classes with count gap ``g``:
    ``exp(-epsilon g) / 2`` against ``(1 + epsilon g / 2) exp(-epsilon g) / 2``)."""
    return "label" if n_noisy * epsilon < AUTO_RHO_LABEL * n_trees * (1 << int(depth)) else "counts"


def label_epsilon(epsilon: float, n_trees: int) -> float:
    """The per-tree epsilon of a forest of leaf labels: ``epsilon / n_trees``, stepped down with
    ``nextafter`` until ``n_trees * e <= epsilon`` in floating point (checked by the
    multiplication), so that the sequential composition of the ``n_trees`` trees (every tree
    reads every row) stays within ``epsilon``.  Public parameters only."""
    t = int(n_trees)
    e = float(epsilon) / t
    while t * e > epsilon:
        e = float(np.nextafter(e, 0.0))
    if not e > 0.0:  # (a public refusal, before the charge: the caller plans the event first)
        raise ValueError(f"epsilon / n_estimators underflows to 0 (epsilon={epsilon!r}, {t} trees of labels): "
                         "epsilon is too small for this many trees")
    return e


def label_event(epsilon: float, n_trees: int):
    """The event of a forest of leaf labels at ``epsilon``: ``n_trees`` permute-and-flip selections
    per leaf, the leaves of one tree holding disjoint rows (parallel composition, McSherry 2009),
    the trees each reading every row (sequential composition):
    ``SelfComposed(ReportNoisyMax(label_epsilon(epsilon, n_trees)), n_trees)``."""
    return SelfComposed(ReportNoisyMax(label_epsilon(epsilon, n_trees)), int(n_trees))


def label_forest_sizes_allowed(n_trees: int) -> bool:
    """Whether ``n_estimators="auto"`` may size a forest of labels with ``n_trees`` trees: any size
    but 2.  Two votes tie whenever the trees disagree, and a tie goes to the first class, so two
    trees vote no better than one: where they disagree the tie-break, not the data, decides
    (docs/theory/trees.rst, "Sizing a forest of labels")."""
    return int(n_trees) != 2


def leaf_distribution(noisy: np.ndarray) -> np.ndarray:
    """Per leaf, the class distribution estimated from released noisy counts (post-processing).

    ``noisy``: (n_trees, 2^D, K).  A leaf's distribution is its counts clipped at 0 and
    normalised.  A leaf with no positive count (empty, or its noise all negative) backs off to
    its nearest ancestor that has one, the ancestor's counts being the sums of its leaves'
    noisy counts; uniform when even the root has none.  (Without the back-off such a leaf would
    be uniform, and a single tree's argmax would then always fall on the first class.)
    """
    T, L, K = noisy.shape
    D = L.bit_length() - 1
    out = np.full((T, L, K), 1.0 / K)
    done = np.zeros((T, L), dtype=bool)
    counts = noisy.astype(np.float64)
    for level in range(D, -1, -1):  # level D: the leaves; level 0: the root
        span = L >> level  # leaves under a node of this level
        node = counts.reshape(T, 1 << level, span, K).sum(axis=2)
        pos = np.maximum(node, 0.0)
        total = pos.sum(axis=-1, keepdims=True)
        ok = (total[..., 0] > 0)
        dist = pos / np.where(total > 0, total, 1.0)
        ok_leaf = np.repeat(ok, span, axis=1) & ~done
        out[ok_leaf] = np.repeat(dist, span, axis=1)[ok_leaf]
        done |= ok_leaf
    return out


def release_leaves(est, gen, plan, classes, lo, hi, sizes, counts):
    """Everything of a fit after its charge, the same for in-memory and Dask data: the noisy row
    count when something is ``"auto"`` (the forest's size, the leaf mechanism), the trees, then the
    leaves' release -- in this order from ``gen``.  ``plan``: :meth:`RandomTreesClassifier._plan`'s
    tuple; ``sizes``: the rows of each partition (in memory one, ``[n]``; read only for the row
    count); ``counts(feature, threshold)``: the exact ``(n_trees, 2^depth, n_classes)`` int64 leaf
    counts, every row in every tree (both mechanisms).  Sets the fitted attributes and the release
    record of ``est``; returns it."""
    event, n_trees, cap, depth, eps_n, eps_leaf = plan
    k = classes.size
    mechanism = est.leaf_mechanism
    if eps_n > 0.0:
        with detached():  # the fit's event covers the draw
            n_noisy = int(discrete_laplace_mechanism(np.array([sum(int(m) for m in sizes)], dtype=np.int64), 1,
                                                     eps_n, rng=gen)[0])
        est.n_samples_noisy_ = n_noisy
        sized = n_trees is None
        if sized:
            n_trees = auto_n_trees(n_noisy, eps_leaf, depth, cap)
        if mechanism == "auto":
            mechanism = auto_mechanism(n_noisy, eps_leaf, n_trees, depth)
        if sized and mechanism == "label":  # a forest of labels is sized by its own model
            n_trees = auto_n_trees_label(n_noisy, eps_leaf, depth, cap, k)
    assert n_trees is not None
    feature, threshold = draw_forest(gen, lo, hi, n_trees, depth)
    L = 1 << depth
    if mechanism == "counts":
        with detached():  # noise first: its size is public
            noise = discrete_laplace_mechanism(np.zeros((n_trees, L, k), dtype=np.int64), n_trees, eps_leaf, rng=gen)
        noisy = counts(feature, threshold) + noise
        est.leaf_counts_ = noisy
        est.leaf_proba_ = leaf_distribution(noisy)
    else:
        # every tree reads every row: the trees compose sequentially at label_epsilon each
        exact = counts(feature, threshold)
        with detached():
            labels = report_noisy_max(exact.astype(np.float64), 1.0, label_epsilon(eps_leaf, n_trees), axis=-1,
                                      noise="exponential", monotonic=True, rng=gen)
        labels = np.asarray(labels, dtype=np.int64).reshape(n_trees, L)
        est.leaf_labels_ = labels
        est.leaf_proba_ = np.eye(k)[labels]
    est.n_estimators_ = int(n_trees)
    est.leaf_mechanism_ = mechanism
    est.feature_ = feature
    est.threshold_ = threshold
    est.classes_ = classes
    est.n_classes_ = int(k)
    # a label forest's SelfComposed(ReportNoisyMax(e), T) spends T e (<= epsilon, label_epsilon)
    spent = event.count * event.event.epsilon if isinstance(event, SelfComposed) else event.epsilon
    est._record_release(event, spent, 0.0, None)
    return est


class RandomTreesClassifier(DaskDispatchMixin, DPClassifierMixin, PrivateEstimator):
    """Base of the random-tree classifiers (see :class:`dpfast.ensemble.RandomForestClassifier`
    for the mechanisms and the guarantee); subclasses fix how many trees there are."""

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "bounds": ["array-like", dict, None],
        "classes": ["array-like", None],
        "max_depth": [Interval(Integral, 0, MAX_DEPTH, closed="both")],
        "leaf_mechanism": [StrOptions({"auto", "counts", "label"})],
        "random_state": RANDOM_STATE,
    }
    _expected_failures = {
        "check_classifiers_classes": PUBLIC_LABELS,
        "check_classifiers_train": PUBLIC_LABELS + " (predict_proba has len(classes) columns)",
    }

    def _n_trees(self) -> int | None:  # pragma: no cover - abstract
        """The number of trees, or None for ``n_estimators="auto"``."""
        raise NotImplementedError

    def _plan(self, n_classes: int):
        """(event, n_trees or None (auto), the cap of "auto", depth, epsilon of the row count, epsilon
        of the leaves) of one fit, from public parameters only; ValueError before the charge."""
        eps = float(check_epsilon(self.epsilon, allow_array=False))
        n_trees, depth = self._n_trees(), int(self.max_depth)
        per_tree = (1 << depth) * n_classes
        cap = n_trees if n_trees is not None else min(AUTO_MAX_TREES, MAX_TABLE // per_tree)
        if cap < 1 or cap * per_tree > MAX_TABLE:
            raise ValueError(f"n_estimators * 2**max_depth * n_classes = {max(cap, 1) * per_tree} "
                             f"exceeds {MAX_TABLE} leaf counts; lower max_depth or n_estimators")
        if n_trees is not None and self.leaf_mechanism == "counts":
            # one discrete Laplace release of every count: l1 sensitivity n_trees (a row is counted
            # once in every tree); the event is the pure epsilon of the (rounded-up) scale used
            return event_of(discrete_laplace_mechanism, np.zeros(1, dtype=np.int64), n_trees, eps), \
                n_trees, cap, depth, 0.0, eps
        if n_trees is not None and self.leaf_mechanism == "label":
            # permute-and-flip per leaf at label_epsilon(eps, n_trees): the leaves of a tree hold
            # disjoint rows (parallel composition), every tree reads every row (sequential)
            return label_event(eps, n_trees), n_trees, cap, depth, 0.0, eps
        # something is "auto": a noisy row count at auto_count_share(depth) * epsilon picks it, the
        # leaves run at the rest; basic composition of two pure releases, the sum kept <= epsilon
        eps_n = eps * auto_count_share(depth)
        eps_leaf = eps - eps_n
        while eps_n + eps_leaf > eps:
            eps_leaf = float(np.nextafter(eps_leaf, 0.0))
        # the count's exact sampler must take the scale 1 / eps_n: checked here, before the charge
        # (drawn after it, a share that underflows or a scale beyond the sampler's range refused a
        # charged fit)
        try:
            event_of(discrete_laplace_mechanism, np.zeros(1, dtype=np.int64), 1, eps_n)
        except ValueError as exc:
            raise ValueError(f"epsilon={eps!r} is too small for 'auto' (n_estimators or leaf_mechanism): its noisy "
                             f"row count at {auto_count_share(depth):.3g} * epsilon cannot be drawn ({exc})") from None
        return accounting.PureDP(eps), n_trees, cap, depth, eps_n, eps_leaf

    def fit(self, X, y, *, budget: Any = None):
        """Release the random trees' leaves (see the class docstring).  Returns self.

        ``budget``: a :class:`dpfast.PrivacyBudget` (or None for the one of an enclosing
        ``with budget:``) charged with ``event_`` before anything random is drawn.
        """
        self._validate_params()
        self._reset_fit()
        Xa = validate_X(self, X, reset=True, dtype=np.float64)
        yv = validate_y(self, y, Xa.shape[0], classifier=True)
        classes, idx = check_label_set(yv, self.classes)
        k, d = classes.size, Xa.shape[1]
        lo, hi = tree_bounds(self.bounds, d, getattr(self, "feature_names_in_", None))
        plan = self._plan(k)
        gen = check_random_state(self.random_state)
        self._charge(plan[0], budget)
        depth = plan[3]
        return release_leaves(self, gen, plan, classes, lo, hi, [Xa.shape[0]], lambda feature, threshold:
                              leaf_counts(Xa, idx, k, feature, threshold, depth))

    def apply(self, X) -> np.ndarray:
        """The leaf index (0 .. 2^max_depth - 1) of every row in every tree, shape (n, n_trees)."""
        check_fitted(self)
        Xa = validate_X(self, X, reset=False, dtype=np.float64)
        return route(Xa, self.feature_, self.threshold_, int(self.max_depth))

    def predict_proba(self, X) -> np.ndarray:
        """Mean over the trees of the class distribution of the row's leaf (post-processing)."""
        check_fitted(self)
        Xa = validate_X(self, X, reset=False, dtype=np.float64)
        return forest_proba(Xa, self.feature_, self.threshold_, int(self.max_depth), self.leaf_proba_)

    def predict_log_proba(self, X) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X) -> np.ndarray:
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]


# ----------------------------------------------------------------------------- Dask input
def _leaf_count_partition(Xk, yk, classes, k, feature, threshold, depth):
    """One partition's exact leaf counts (:func:`leaf_counts` of its rows, every row in every
    tree), or the fixed message of labels outside the public set (the rows and the lengths are
    checked by :func:`~dpfast._dask_utils.sum_by_partitions`)."""
    try:
        _, idx = check_label_set(yk, classes)
    except (TypeError, ValueError):
        return PartitionError(BAD_LABELS)
    return leaf_counts(Xk, idx, k, feature, threshold, depth)


def fit_dask(est, X, y, *, budget: Any = None):
    """:meth:`RandomTreesClassifier.fit` on a Dask Array or DataFrame ``X`` (``y`` a Dask Array or
    Series chunked like X's rows, or NumPy), without gathering the rows on the client.

    The trees come from public randomness within the public ``bounds``; the only pass over the
    data is the leaf counts, a sum over the row partitions: every partition returns
    :func:`leaf_counts` of its rows (native ``dpfast._trees``), the integer tables added in
    partition order (exact).  Public checks on metadata, the one charge, then the draws of the
    in-memory fit in its order (the noisy row count of ``"auto"`` -- size or leaf -- the forest, the
    count noise or the label selections), so the released model is the in-memory one for the same data and
    ``random_state``, bit for bit, whatever the partitioning.  ``"auto"`` needs the partitions'
    lengths (the row count): a DataFrame's are counted first.  Bad data found in the pass
    (NaN or inf, a label outside ``classes``, a ``y`` of another length) raise ``ValueError``
    after the charge, naming no row or value."""
    est._validate_params()
    est._reset_fit()
    if y is None:
        raise ValueError(f"{type(est).__name__} requires y to be passed, but the target y is None")
    classes = public_classes(est.classes)
    k = classes.size
    plan = est._plan(k)
    # the partitions' lengths: for the noisy row count ("auto"), or to split NumPy labels like X
    lengths = plan[4] > 0.0 or not is_dask_collection(y)
    Xd, d = fit_rows(est, X, known_chunks=lengths)
    yp = vector_parts(y, Xd, "y")
    lo, hi = tree_bounds(est.bounds, d, getattr(est, "feature_names_in_", None))
    gen = check_random_state(est.random_state)
    est._charge(plan[0], budget)

    def counts(feature, threshold):
        return sum_by_partitions(_leaf_count_partition, Xd, [yp],
                                 (est.classes, k, feature, threshold, plan[3]), out_dtype=np.int64)

    return release_leaves(est, gen, plan, classes, lo, hi, Xd.chunks[0], counts)


RandomTreesClassifier._dask_fit = staticmethod(fit_dask)  # DaskDispatchMixin: fit on Dask collections
