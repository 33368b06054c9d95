"""dpfast.ensemble.RandomForestClassifier: the forest-level structure of the two leaf releases
(every row in every tree, counted with noise for "counts", selected as the leaf's label at
epsilon / n_trees per tree for "label"), the
averaging of the trees, the event, the budget and the parameters."""
import numpy as np
import pytest

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


def test_label_forest_counts_every_row_in_every_tree_and_releases_each_leaf_majority():
    """Reproduces the draws of a "label" fit from its seed (the trees, then the selections): every
    tree counts every row, and at a huge epsilon permute-and-flip returns every leaf's unique
    majority of those counts; the vote is the trees' mean."""
    X, y = _data(4000)
    T, D = 5, 3
    m = RandomForestClassifier(1e9, (-1, 1), classes=[0, 1, 2], n_estimators=T, max_depth=D, leaf_mechanism="label",
                               random_state=4).fit(X, y)
    gen = np.random.default_rng(4)
    f, th = RT.draw_forest(gen, np.full(3, -1.0), np.full(3, 1.0), T, D)
    np.testing.assert_array_equal(f, m.feature_)
    exact = RT.leaf_counts(X, y, 3, f, th, D)
    assert np.all(exact.sum(axis=(1, 2)) == 4000)  # every row in every tree
    top = np.sort(exact, axis=-1)
    unique = top[..., -1] > top[..., -2]
    assert unique.mean() >= 0.75  # (empty leaves tie)
    np.testing.assert_array_equal(m.leaf_labels_[unique], np.argmax(exact, axis=-1)[unique])
    votes = np.mean([np.eye(3)[m.leaf_labels_[t][m.apply(X)[:, t]]] for t in range(T)], axis=0)
    np.testing.assert_allclose(m.predict_proba(X), votes)


def test_label_forest_selections_run_at_label_epsilon_and_the_event_is_their_composition():
    """The selections are report-noisy-max (one-sided exponential noise) at label_epsilon(eps, T)
    on every tree's exact counts: reproduced from the seed's stream.  The event is the sequential
    composition of the T trees, SelfComposed(ReportNoisyMax(e), T) with T e <= eps (checked by
    multiplication, not by the code's own rule), epsilon_ = T e."""
    from dpfast.accounting import ReportNoisyMax, SelfComposed
    from dpfast.mechanisms import report_noisy_max

    X, y = _data(500)
    for eps, T in ((0.3, 7), (1.0, 3), (0.1, 10), (2.0, 1)):
        m = RandomForestClassifier(eps, (-1, 1), classes=[0, 1, 2], n_estimators=T, max_depth=3,
                                   leaf_mechanism="label", random_state=9).fit(X, y)
        e = m.event_.event.epsilon
        assert m.event_ == SelfComposed(ReportNoisyMax(e), T)
        assert T * e <= eps and e == pytest.approx(eps / T, rel=1e-15)
        assert m.epsilon_ == T * e and m.delta_ == 0.0
        gen = np.random.default_rng(9)
        f, th = RT.draw_forest(gen, np.full(3, -1.0), np.full(3, 1.0), T, 3)
        exact = RT.leaf_counts(X, y, 3, f, th, 3)
        ref = report_noisy_max(exact.astype(np.float64), 1.0, e, axis=-1, noise="exponential", monotonic=True,
                               rng=gen)
        np.testing.assert_array_equal(m.leaf_labels_, np.asarray(ref).reshape(T, 8))


def test_label_epsilon_composes_within_epsilon():
    rng = np.random.default_rng(0)
    for eps in np.concatenate([rng.uniform(1e-3, 20, 300), [0.1, 0.3, 0.7, 1.0, 10.0]]):
        for T in (1, 2, 3, 7, 10, 49, 99, 100):
            e = RT.label_epsilon(eps, T)
            assert T * e <= eps and e <= eps / T, (eps, T)
            assert e >= eps / T * (1 - 4 * np.finfo(float).eps), (eps, T)  # a rounding step from eps / T
    assert RT.label_epsilon(1.0, 1) == 1.0


def test_label_epsilon_underflow_is_refused_by_name_before_the_charge():
    # 5e-324 / 10 rounds to 0: the per-tree epsilon, not "epsilon must be > 0, got 0.0" from the event
    with pytest.raises(ValueError, match="epsilon / n_estimators underflows to 0"):
        RT.label_epsilon(5e-324, 10)
    X = np.random.default_rng(0).random((40, 3))
    y = (X[:, 0] > 0.5).astype(int)
    budget = PrivacyBudget(1.0, 1e-6)
    est = RandomForestClassifier(epsilon=5e-324, n_estimators=10, leaf_mechanism="label", bounds=(0, 1),
                                 random_state=0)
    with pytest.raises(ValueError, match="underflows to 0"):
        est.fit(X, y, budget=budget)
    assert not budget.ledger and not hasattr(est, "event_")


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


def test_auto_label_forest_spends_within_epsilon(monkeypatch):
    """With "auto" the event is PureDP(epsilon) fixed before the charge (the size follows the noisy
    count); what runs is the count at eps_n then T selections at label_epsilon(eps_leaf, T) each:
    recorded from the selection call, eps_n + T e <= epsilon (basic composition)."""
    seen = []
    real = RT.report_noisy_max

    def spy(scores, sensitivity, epsilon, **kw):
        seen.append((scores.shape, epsilon))
        return real(scores, sensitivity, epsilon, **kw)

    monkeypatch.setattr(RT, "report_noisy_max", spy)
    X, y = _data(400, 3, 2)
    sizes = set()
    for s in range(6):  # n eps' ~ 14 < sqrt(2) 2^4: mostly labels, 1 or 3 trees
        m = RandomForestClassifier(0.04, (-1, 1), max_depth=4, random_state=s).fit(X, y)
        _, _, _, _, eps_n, eps_leaf = m._plan(2)
        assert m.event_ == RT.accounting.PureDP(0.04)
        if m.leaf_mechanism_ == "label":
            (shape, e), = seen
            T = m.n_estimators_
            sizes.add(T)
            assert shape == (T, 16, 2) and e == RT.label_epsilon(eps_leaf, T)
            assert eps_n + T * e <= 0.04
        seen.clear()
    assert max(sizes) > 1
