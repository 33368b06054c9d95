"""dpfast.ensemble.RandomForestClassifier: the forest-level structure of the two leaf releases
(every row in every tree for "counts", one uniformly drawn tree per row for "label"), the
averaging of the trees, the event, the budget and the parameters."""
import numpy as np
import pytest
from scipy import stats

from dpfast import PrivacyBudget
from dpfast.budget import BudgetExceededError
from dpfast.ensemble import RandomForestClassifier
from dpfast.tree import random_trees as RT


def _data(n=400, d=3, k=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = ((X[:, 0] > 0).astype(int) + (X[:, 1] > 0)) % k
    return X, y


def test_counts_forest_at_huge_epsilon_is_the_exact_probabilistic_average():
    X, y = _data(3000)
    m = RandomForestClassifier(1e9, (-1, 1), classes=[0, 1, 2], n_estimators=6, max_depth=4,
                               leaf_mechanism="counts", random_state=1).fit(X, y)
    exact = RT.leaf_counts(X, y, 3, m.feature_, m.threshold_, 4)
    np.testing.assert_array_equal(m.leaf_counts_, exact)
    assert np.all(exact.sum(axis=(1, 2)) == 3000)  # every row in every tree
    leaves = m.apply(X)
    ref = np.mean([m.leaf_proba_[t][leaves[:, t]] for t in range(6)], axis=0)
    np.testing.assert_allclose(m.predict_proba(X), ref)
    np.testing.assert_allclose(m.predict_proba(X).sum(axis=1), 1.0)
    assert m.event_.epsilon <= 1e9


def test_label_forest_splits_the_rows_uniformly_and_releases_each_leaf_majority():
    """Reproduces the draws of a "label" fit from its seed (the trees, then one uniform tree per
    row): at a huge epsilon, permute-and-flip returns every leaf's unique majority, and the tree
    sizes of the split are a uniform multinomial (chi-square)."""
    X, y = _data(4000)
    T, D = 5, 3
    m = RandomForestClassifier(1e9, (-1, 1), classes=[0, 1, 2], n_estimators=T, max_depth=D, leaf_mechanism="label",
                               random_state=4).fit(X, y)
    gen = np.random.default_rng(4)
    f, th = RT.draw_forest(gen, np.full(3, -1.0), np.full(3, 1.0), T, D)
    np.testing.assert_array_equal(f, m.feature_)
    part = gen.integers(0, T, size=4000)
    exact = RT.leaf_counts(X, y, 3, f, th, D, part)
    assert exact.sum() == 4000  # each row in one tree
    top = np.sort(exact, axis=-1)
    unique = top[..., -1] > top[..., -2]
    np.testing.assert_array_equal(m.leaf_labels_[unique], np.argmax(exact, axis=-1)[unique])
    assert stats.chisquare(np.bincount(part, minlength=T)).pvalue > 1e-4
    votes = np.mean([np.eye(3)[m.leaf_labels_[t][m.apply(X)[:, t]]] for t in range(T)], axis=0)
    np.testing.assert_allclose(m.predict_proba(X), votes)


def test_forest_event_and_budget():
    X, y = _data()
    b = PrivacyBudget(1.0, 1e-6)
    m = RandomForestClassifier(0.6, (-1, 1), classes=[0, 1, 2], random_state=0).fit(X, y, budget=b)
    assert m.epsilon_ <= 0.6 and m.epsilon_ == pytest.approx(0.6)
    assert m.delta_ == 0.0 and m.accountant_ is None
    with pytest.raises(BudgetExceededError):
        RandomForestClassifier(0.6, (-1, 1), classes=[0, 1, 2], random_state=0).fit(X, y, budget=b)
    with b:
        RandomForestClassifier(0.4, (-1, 1), classes=[0, 1, 2], leaf_mechanism="label", random_state=0).fit(X, y)
    assert b.remaining() < 1e-4 and len(b.ledger) == 2  # (the accountant composes at delta 1e-6)


def test_counts_scale_grows_with_the_number_of_trees():
    """The count table's l1 sensitivity is n_estimators: the discrete Laplace noise of a
    10-tree forest at epsilon has the variance of scale 10 / epsilon, 2p / (1 - p)^2 with
    p = exp(-epsilon / 10)."""
    X, y = _data(50, 2, 2)
    m = RandomForestClassifier(5.0, (-1, 1), n_estimators=10, max_depth=6, leaf_mechanism="counts",
                               random_state=2).fit(X, y)
    noise = (m.leaf_counts_ - RT.leaf_counts(X, y, 2, m.feature_, m.threshold_, 6)).ravel()
    p = np.exp(-5.0 / 10)
    var = 2 * p / (1 - p) ** 2
    # sample variance of N = 1280 draws: relative standard error about sqrt((kurtosis - 1) / N) < 0.1
    assert abs(noise.var() / var - 1) < 0.35


def test_parameters_are_validated_before_the_charge():
    X, y = _data(100)
    b = PrivacyBudget(1.0, 1e-6)
    bad = (dict(n_estimators=0), dict(max_depth=-1), dict(max_depth=31), dict(leaf_mechanism="em"),
           dict(n_estimators=10**6, max_depth=10), dict(epsilon=-1.0), dict(classes=[0, 1]))
    for kw in bad:
        params = dict(epsilon=1.0, bounds=(-1, 1), classes=[0, 1, 2])
        params.update(kw)
        with pytest.raises((ValueError, TypeError)):
            RandomForestClassifier(**params).fit(X, y, budget=b)
    assert not b.ledger
