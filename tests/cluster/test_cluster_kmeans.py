"""dpfast.cluster.KMeans: the law of one noisy step, its sensitivity at the bound, Lloyd at a huge
epsilon, the event / epsilon_ / budget, data-independent initialisation, and the scikit-learn
contract (check_estimator with the declared DP exceptions)."""
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import make_blobs
from sklearn.utils.estimator_checks import check_estimator

from dpfast import accounting as acc
from dpfast._base import expected_failed_checks
from dpfast.budget import BudgetExceededError, PrivacyBudget
from dpfast.cluster import KMeans
from dpfast.cluster._kmeans import budget_split, initial_centers, noisy_step, step_event


def _blobs(n=600, seed=0):
    X, _ = make_blobs(n, centers=[[-5, -5], [5, 5], [5, -5]], cluster_std=0.5, random_state=seed)
    return X


def test_budget_split_follows_su_et_al_and_sums_to_epsilon():
    # Su et al. (2016): per iteration eps = eps_count + d * eps_dim, eps_count / eps_dim =
    # (4 d rho^2)^(1/3), rho = 0.225; the sum vector's budget is eps_sum = d * eps_dim
    for d in (1, 2, 64):
        ec, es = budget_split(2.0, 4, d)
        assert ec + es == pytest.approx(0.5, rel=1e-14)
        assert ec / (es / d) == pytest.approx((4 * d * 0.225 ** 2) ** (1 / 3), rel=1e-14)
    # d = 2: eps_count / eps_dim = 0.405^(1/3) = 0.7399...: the sums get 2 / 2.7399 of the step
    ec, es = budget_split(1.0, 1, 2)
    assert es == pytest.approx(2 / (2 + 0.405 ** (1 / 3)), rel=1e-14)


def test_budget_split_minimises_the_centroid_mse():
    # the first-order MSE 2 d (d / eps_sum)^2 + 2 (4 d rho^2) / eps_count^2 is smallest at the split
    d, per = 5, 0.3
    ec, es = budget_split(per, 1, d)

    def mse(e_c):
        return 2 * d * (d / (per - e_c)) ** 2 + 2 * 4 * d * 0.225 ** 2 / e_c ** 2
    grid = np.linspace(0.001, per - 0.001, 20001)
    assert grid[np.argmin(mse(grid))] == pytest.approx(ec, abs=2e-5)


def test_event_and_epsilon_equality():
    X = _blobs()
    km = KMeans(3, 0.7, bounds=(-10, 10), max_iter=4, random_state=0).fit(X)
    ec, es = budget_split(0.7, 4, 2)
    assert km.event_ == acc.SelfComposed(step_event(ec, es, 2), 4)
    assert km.event_.event.events[0] == acc.Laplace(scale=1 / ec, sensitivity=1.0)
    assert km.event_.event.events[1] == acc.Laplace(scale=2 / es, sensitivity=2.0)
    assert km.epsilon_ == pytest.approx(0.7, rel=1e-12) and km.epsilon_ <= 0.7 * (1 + 1e-15)
    assert km.delta_ == 0.0 and km.accountant_ is None
    assert km.n_iter_ == 4 and km.cluster_centers_.shape == (3, 2)
    assert not hasattr(km, "labels_") and not hasattr(km, "inertia_")


def test_budget_charged_before_any_draw():
    X = _blobs()
    g = np.random.default_rng(7)
    state = g.bit_generator.state
    b = PrivacyBudget(0.1, 1e-9)
    km = KMeans(3, 1.0, bounds=(-10, 10), random_state=g)
    with pytest.raises(BudgetExceededError):
        km.fit(X, budget=b)
    assert g.bit_generator.state == state and not hasattr(km, "cluster_centers_") and b.ledger == ()
    b = PrivacyBudget(1.01, 1e-9)  # the PLD accountant discretises: a hair above the pure epsilon
    km.fit(X, budget=b)
    assert [c.event for c in b.ledger] == [km.event_]
    assert km.epsilon_ <= b.spent() <= 1.01


@pytest.mark.parametrize("bad", [dict(bounds=None), dict(bounds=(1.0, 0.0)), dict(bounds=[(0, 1), (0, 1)]),
                                 dict(bounds=(0, 1), epsilon=0.0), dict(bounds=(0, 1), max_iter=0),
                                 dict(bounds=(0, 1), n_clusters=0), dict(bounds={0: (0, 1)})])
def test_bad_public_parameters_refused(bad):
    with pytest.raises(ValueError):
        KMeans(**{"n_clusters": 2, **bad}).fit(_blobs(50))


def test_initialisation_is_data_independent():
    lo, hi = np.array([-1.0, 0.0]), np.array([1.0, 10.0])
    a = initial_centers(4, lo, hi, np.random.default_rng(3))
    b = initial_centers(4, lo, hi, np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    assert (a >= lo).all() and (a <= hi).all()
    # sphere packing: pairwise at least 2a apart in unit coordinates, a margin a from the faces
    u = (a - 0.5 * (lo + hi)) / (0.5 * (hi - lo))
    dist = np.sqrt(((u[:, None] - u[None]) ** 2).sum(-1))[np.triu_indices(4, 1)]
    margins = [0.5 / 2 ** j for j in range(12)] + [0.0]
    assert any((np.abs(u) <= 1 - m + 1e-12).all() and (dist >= 2 * m - 1e-12).all() for m in margins)


def test_noisy_step_law_counts_and_sums_are_laplace():
    """One step with fixed centres: noisy count minus the exact count is Laplace(1/eps_count) and
    a noisy unit-sum coordinate minus the exact one is Laplace(d/eps_sum) (KS tests, 2000 draws:
    the KS critical value at level 1e-4 is ~0.044)."""
    rng = np.random.default_rng(0)
    U = rng.uniform(-1, 1, size=(50, 3))
    C = np.array([[-0.5, 0, 0], [0.5, 0, 0]])
    lab = np.argmin(((U[:, None, :] - C[None]) ** 2).sum(-1), 1)
    cnt0 = np.sum(lab == 0)
    s0 = U[lab == 0].sum(0)
    ec, es = 0.3, 0.6
    g = np.random.default_rng(1)
    draws = [noisy_step(U, C, ec, es, g) for _ in range(2000)]
    nc = np.array([d[0][0] for d in draws]) - cnt0
    ns = np.array([d[1][0, 1] for d in draws]) - s0[1]
    assert stats.kstest(nc, stats.laplace(scale=1 / ec).cdf).pvalue > 1e-4
    assert stats.kstest(ns, stats.laplace(scale=3 / es).cdf).pvalue > 1e-4


def test_sensitivity_at_the_bound():
    """A row at a corner of the box (the worst case) moves its cluster's count by exactly 1 and its
    unit sum by a vector of l1 norm exactly d: the calibrated sensitivities, attained."""
    rng = np.random.default_rng(0)
    U = rng.uniform(-1, 1, size=(40, 4))
    C = np.array([[0.9, 0.9, 0.9, 0.9], [-0.9, -0.9, -0.9, -0.9]])
    corner = np.ones((1, 4))
    big = np.vstack([U, corner])
    ec = es = 1e12  # noise ~1e-12: the exact statistics show through
    a = noisy_step(U, C, ec, es, np.random.default_rng(0))
    b = noisy_step(big, C, ec, es, np.random.default_rng(0))
    assert np.abs(b[0] - a[0]).sum() == pytest.approx(1.0, abs=1e-9)
    assert np.abs(b[1] - a[1]).sum() == pytest.approx(4.0, abs=1e-9)
    # and through fit: values outside the box are clamped to it (the unit vector stays in [-1, 1]^d)
    km = KMeans(2, 1e9, bounds=(-1, 1), max_iter=1, random_state=0)
    far = np.vstack([U, 1e6 * corner])
    km.fit(far)
    assert (np.abs(km.cluster_centers_) <= 1).all()


def test_equivalent_to_lloyd_at_huge_epsilon():
    """At epsilon 1e12 the noise is ~1e-10: the centres are Lloyd's from the same initialisation."""
    X = _blobs()
    lo, hi = np.full(2, -10.0), np.full(2, 10.0)
    km = KMeans(3, 1e12, bounds=(-10, 10), max_iter=10, random_state=4).fit(X)
    init = initial_centers(3, lo, hi, np.random.default_rng(4))
    sk = SkKMeans(3, init=init, n_init=1, max_iter=10, tol=0.0, algorithm="lloyd").fit(X)
    np.testing.assert_allclose(np.sort(km.cluster_centers_, 0), np.sort(sk.cluster_centers_, 0), atol=1e-6)
    np.testing.assert_allclose(km.score(X), sk.score(X), rtol=1e-9)


def test_predict_transform_score_are_post_processing():
    X = _blobs()
    km = KMeans(3, 5.0, bounds=(-10, 10), random_state=0).fit(X)
    D = km.transform(X)
    np.testing.assert_array_equal(km.predict(X), D.argmin(1))
    assert km.score(X) == pytest.approx(-(D.min(1) ** 2).sum())
    assert km.predict(X).dtype.kind == "i"
    lab = KMeans(3, 5.0, bounds=(-10, 10), random_state=0).fit_predict(X)
    np.testing.assert_array_equal(lab, km.predict(X))


def test_dict_bounds_by_column_name():
    import pandas as pd
    X = pd.DataFrame(_blobs(), columns=["a", "b"])
    km = KMeans(3, 1.0, bounds={"a": (-10, 10), "b": (-10, 10)}, random_state=0).fit(X)
    ref = KMeans(3, 1.0, bounds=(-10, 10), random_state=0).fit(X.to_numpy())
    np.testing.assert_array_equal(km.cluster_centers_, ref.cluster_centers_)


def test_check_estimator_fails_exactly_the_declared_checks():
    est = KMeans(3, 1.0, bounds=(-10, 10), random_state=0)
    declared = expected_failed_checks(est)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(est, expected_failed_checks=declared, on_fail=None, on_skip=None)
    failed = [(r["check_name"], repr(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert failed == []
    assert {r["check_name"] for r in results if r["status"] == "xfail"} == set(declared)
