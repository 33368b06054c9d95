"""A forest of random decision trees released under differential privacy (see
:class:`RandomForestClassifier`)."""
from __future__ import annotations

from numbers import Integral
from typing import Any

from dpfast._base import Interval, StrOptions
from dpfast.tree.random_trees import RandomTreesClassifier

__all__ = ["RandomForestClassifier"]


class RandomForestClassifier(RandomTreesClassifier):
    """A random forest whose leaves are released under epsilon-differential privacy.

    Guarantee (add/remove one row, labels and the class sizes private): ``fit`` is
    ``epsilon``-DP, ``delta = 0``.  ``predict``, ``predict_proba``, ``predict_log_proba``,
    ``apply`` and ``score`` are post-processing.

    Trees (data-independent given their number).  ``n_estimators_`` complete binary trees of depth ``max_depth``;
    at every split node the feature is uniform over the features and the threshold uniform over
    that feature's range in the node's box (the public ``bounds``, narrowed by the splits above):
    totally randomized trees (Geurts, Ernst & Wehenkel 2006), the construction of Jagannathan,
    Pillaipakkamnekandath & Wright (2012), Fletcher & Islam (2017) and diffprivlib.  They are
    drawn from ``random_state`` alone (and, with ``n_estimators="auto"``, their number from the released
    row count), so the shape, the features and the thresholds are public;
    values outside the bounds are routed as if clamped to them.  The data are read once, to
    count the rows of each class in each leaf (native, ``csrc/tree/random_trees.hpp``).

    Leaves (the one private release), by ``leaf_mechanism``:

    * ``"counts"``: every row is counted in every tree; the whole table of
      ``n_estimators * 2^max_depth * n_classes`` class counts gets exact discrete Laplace noise
      (Canonne, Kamath & Steinke 2020) of scale ``n_estimators / epsilon``: adding or removing a
      row changes one count per tree by 1 (l1 sensitivity ``n_estimators``), so the release is
      epsilon-DP (Dwork, McSherry, Nissim & Smith 2006), with no floating-point noise.  A leaf's
      class distribution is its noisy counts clipped at 0 and normalised (uniform when none is
      positive); ``predict_proba`` averages the trees' distributions at the row's leaves --
      probabilistic averaging of noisy leaf counts (Jagannathan et al. 2012; Bojarski,
      Choromanska, Choromanski & LeCun 2014).
    * ``"label"``: every tree counts every row, and every leaf releases only its majority label,
      by permute-and-flip (McKenna & Sheldon 2020; as report-noisy-max with one-sided exponential
      noise) with the class counts as a monotone utility of sensitivity 1, at ``e =
      label_epsilon(epsilon, n_estimators_)`` (``epsilon / n_estimators_``, stepped down until
      ``n_estimators_ * e <= epsilon`` in floating point).  Leaves of one tree hold disjoint rows
      (parallel composition, McSherry 2009) and the trees compose sequentially: ``event_`` is
      ``SelfComposed(ReportNoisyMax(e), n_estimators)`` for a fixed size.  ``predict_proba`` is
      the fraction of trees voting for each class.  diffprivlib's forest (Fletcher & Islam 2017)
      instead gives each tree a contiguous chunk of the rows at ``epsilon``; per tree the
      signal-to-noise ratio is the same, but counting every row removes the subsample's error (a
      chunk's leaf majority, its empty leaves), and a chunk boundary that moves when one row is
      added no longer lets one row change the data of every tree.
    * ``"auto"`` (default): a share ``s = min(1/2, 2^(-(2 max_depth + 1) / 3))`` of epsilon (0.079
      at depth 5, ``auto_count_share``) buys a discrete Laplace count ``n~`` of the rows (attribute
      ``n_samples_noisy_``); the rest runs ``"label"`` when the per-tree signal-to-noise ratio
      ``rho = n~ epsilon' / (n_estimators_ 2^max_depth)`` is below ``sqrt(2)`` -- the noise's
      standard deviation exceeds a leaf's mean count, so the released frequencies would be mostly
      noise and only the majority label is worth releasing -- and ``"counts"`` otherwise
      (``leaf_mechanism_``).  Basic composition of two pure releases: ``event_`` is
      ``PureDP(epsilon)``.

    Forest size.  ``n_estimators="auto"`` (default) takes the integer minimiser of the forest's
    margin variance ``v / T + 4 T 4^D / (n~ epsilon')^2`` -- the random partition's share against
    the leaf noise's, with the partition variance ``v`` of a margin in [-1, 1] bounded by 1 -- that
    is ``T ~ n~ epsilon' / 2^(max_depth + 1)`` (per-tree ``rho = 2``), clipped to ``[1, 100]``
    (``auto_n_trees``; attribute ``n_estimators_``).  A forest of labels (``"label"``, or ``"auto"``
    picking it) is sized by its own model instead: a tree's vote is bounded, and the label noise
    shrinks its mean, so ``T`` maximises the vote's signal-to-noise ratio ``T (1 - (K / 2) exp(-a /
    T))^2``, ``a = n~ epsilon' (2/3)^max_depth`` the gap of a pure leaf holding the expected share
    ``(2/3)^max_depth`` of the rows around a row (``auto_n_trees_label``; up to 4-5 trees where
    ``"auto"`` picks labels at depth 5, never 2: a 2-tree vote is decided by the tie-break).  It spends the same noisy count, so ``"auto"``
    size with any leaf mechanism is ``PureDP(epsilon)`` too.  The derivations of the three rules
    are in :doc:`/theory/trees`; they assume the rows spread evenly over the leaves, the
    worst case for the noise, so on data that crowd into a few leaves the size is on the small
    side.

    Which to use.  Paired against diffprivlib's forest at its defaults (300 seeds, fresh splits,
    ``benchmarks/bench_trees_paired.py``, ``benchmarks/RESULTS.md``), the defaults (``"auto"`` size
    and leaf) are better on digits at every epsilon, on wine at 0.1 and 10 and on breast-cancer at
    1 and 10 (+0.014 to +0.37), and level on wine at 1 (+0.011 +- 0.008) and breast-cancer at 0.1
    (-0.006 +- 0.007, where every size and release tried lands within 0.015 of diffprivlib); on
    Adult both predict the majority class.  At a fixed size ``"counts"`` is the more accurate at epsilon 1 and 10, by a wide margin
    on the multi-class sets: a leaf's counts say how sure it is, a label does not.  Per tree the
    two have the same signal-to-noise ratio (``n / 2^D`` rows per leaf against noise
    ``n_estimators / epsilon``, counted or selected), and so would counts over disjoint rows (sensitivity 1 instead of
    ``n_estimators``, ``n / n_estimators`` rows per tree): parallel composition across the trees
    does not change it.  Fletcher & Islam's smooth-sensitivity majority label (2017) is not used:
    it needs a data-dependent noise scale, which dpfast's fixed-event accounting does not express.

    Parameters
    ----------
    epsilon : float
        Privacy budget (> 0, finite).
    bounds : (lower, upper) or dict
        Public range of the features: a pair of scalars for every feature, or a dict
        ``{feature: (lower, upper)}`` keyed by column name (DataFrame input) or index.  Required:
        the splits are drawn from it.  (diffprivlib's ``(lower_array, upper_array)`` is
        ``dict(enumerate(zip(lower, upper)))``.)
    classes : sequence or None
        The public label set (``None`` means ``[0, 1]``); labels outside it raise ``ValueError``
        before the charge.  Never read off the private labels.
    n_estimators : int or "auto"
        Number of trees (>= 1), or ``"auto"`` (default): sized from the noisy row count (above).
    max_depth : int
        Depth of every tree (0 .. 30; ``n_estimators * 2^max_depth * n_classes`` at most 2^23; with
        ``n_estimators="auto"`` at least one tree must fit, and at most ``2^23 / (2^max_depth
        n_classes)`` are used).
    leaf_mechanism : {"auto", "counts", "label"}
        The leaf release (above).
    random_state : None, int or numpy Generator
        The trees and the noise (the row count of ``"auto"``, the count noise or the label
        selections; every tree reads every row, so no rows are split among the trees).

    Attributes
    ----------
    classes_ : ndarray (the public label set, the order of predict_proba's columns)
    n_classes_ : int
    feature_, threshold_ : ndarray of shape (n_estimators, 2^max_depth - 1)
        The split nodes in heap order (node i has children 2i+1, 2i+2); a row goes right when
        ``x[feature] > threshold``.
    leaf_counts_ : int64 ndarray of shape (n_estimators, 2^max_depth, n_classes)
        The released noisy counts (``"counts"``).
    leaf_labels_ : int64 ndarray of shape (n_estimators, 2^max_depth)
        The released leaf labels, indices into ``classes_`` (``"label"``).
    leaf_proba_ : ndarray of shape (n_estimators, 2^max_depth, n_classes)
        Each leaf's class distribution (post-processing of the release; a leaf with no positive
        noisy count backs off to its nearest ancestor's summed counts).
    leaf_mechanism_ : str
        The leaf release used (``"counts"`` or ``"label"``).
    n_estimators_ : int
        The number of trees fitted (``n_estimators``, or the ``"auto"`` size).
    n_samples_noisy_ : int
        The released row count (when ``n_estimators`` or ``leaf_mechanism`` is ``"auto"``).
    event_ : PureDP or SelfComposed
        ``PureDP`` (``"counts"``, or anything ``"auto"``), or
        ``SelfComposed(ReportNoisyMax(e), n_estimators)`` (``"label"`` at a fixed size,
        ``e = label_epsilon(epsilon, n_estimators)``);
        ``epsilon_`` its epsilon (at most ``epsilon``: with ``"counts"`` the discrete Laplace scale is
        rounded up to a rational the exact sampler takes; with ``"label"`` ``n_estimators * e``),
        ``delta_ = 0``, ``accountant_`` None.
    """

    _parameter_constraints = {
        **RandomTreesClassifier._parameter_constraints,
        "n_estimators": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    }

    def __init__(self, epsilon: float = 1.0, bounds: Any = None, *, classes=None, n_estimators: int | str = "auto",
                 max_depth: int = 5, leaf_mechanism: str = "auto", random_state: Any = None):
        self.epsilon = epsilon
        self.bounds = bounds
        self.classes = classes
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.leaf_mechanism = leaf_mechanism
        self.random_state = random_state

    def _n_trees(self) -> int | None:
        return None if isinstance(self.n_estimators, str) else int(self.n_estimators)
