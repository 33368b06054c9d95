"""dpfast.naive_bayes.GaussianNB: the sensitivity and law of the released statistics, the event,
the budget, the scikit-learn contract, and equivalence with scikit-learn at a huge epsilon."""
import numpy as np
import pytest
from scipy import stats
from sklearn.naive_bayes import GaussianNB as SkNB

from dpfast import PrivacyBudget
from dpfast.naive_bayes import GaussianNB
from dpfast.naive_bayes._gaussian import gaussian_nb_sensitivity


def _data(n=300, d=3, k=3, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, size=n)
    X = rng.normal(size=(n, d)) + y[:, None]
    return np.clip(X, -3, 5), y


def test_statistics_sensitivity_is_attained_and_not_exceeded():
    """Adding any one row moves the (K, 1 + 2d) statistics by at most 1 + 1.5 d in l1, only in the
    row's class block; a row at a bound attains it."""
    d, k = 4, 3
    X, y = _data(50, d, k)
    lo, hi = np.full(d, -3.0), np.full(d, 5.0)
    base = GaussianNB._statistics(X, y, k, lo, hi)
    rng = np.random.default_rng(1)
    worst = 0.0
    rows = [rng.uniform(-6, 7, size=d) for _ in range(200)] + [hi.copy(), lo.copy()]
    for row in rows:
        c = int(rng.integers(k))
        moved = GaussianNB._statistics(np.vstack([X, row]), np.append(y, c), k, lo, hi) - base
        assert np.all(np.delete(moved, c, axis=0) == 0)  # disjoint classes: other blocks unchanged
        worst = max(worst, np.abs(moved).sum())
    assert worst <= gaussian_nb_sensitivity(d) + 1e-9
    assert worst == pytest.approx(gaussian_nb_sensitivity(d))


def test_event_epsilon_and_budget():
    X, y = _data()
    b = PrivacyBudget(2.0, 1e-6)
    m = GaussianNB(0.7, (-3, 5), classes=[0, 1, 2], random_state=0).fit(X, y, budget=b)
    assert m.event_.sensitivity == gaussian_nb_sensitivity(3)
    assert m.event_.scale == pytest.approx(gaussian_nb_sensitivity(3) / 0.7)
    assert m.epsilon_ == m.event_.epsilon == pytest.approx(0.7)
    assert m.delta_ == 0.0 and m.accountant_ is None
    from dpfast.budget import BudgetExceededError
    with pytest.raises(BudgetExceededError):
        GaussianNB(1.5, (-3, 5), classes=[0, 1, 2], random_state=0).fit(X, y, budget=b)
    m2 = GaussianNB(1.5, (-3, 5), classes=[0, 1, 2], random_state=0)
    with pytest.raises(BudgetExceededError):
        m2.fit(X, y, budget=b)
    assert not hasattr(m2, "theta_")


def test_released_count_follows_the_laplace_law():
    """class_count_ = n_k + Laplace(0, (1 + 1.5 d) / epsilon) (floored at 1): with n_k far above
    the noise the floor never binds, and a KS test against the exact law passes."""
    X, y = _data(300, 2, 2)
    n0 = int(np.sum(y == 0))
    eps, scale = 1.0, gaussian_nb_sensitivity(2) / 1.0
    draws = np.array([GaussianNB(eps, (-3, 5), random_state=s).fit(X, y).class_count_[0] for s in range(200)])
    assert stats.kstest(draws - n0, stats.laplace(scale=scale).cdf).pvalue > 1e-3


@pytest.mark.slow
def test_released_sums_follow_the_laplace_law():
    """theta_ of a class = c + r clip(S1_noisy / n~): invert it and test S1 noise against the law
    (a data set whose class means sit mid-range, so the clip never binds)."""
    X, y = _data(2000, 2, 2)
    lo, hi = -3.0, 5.0
    c, r = 1.0, 4.0
    exact = GaussianNB._statistics(X, y, 2, np.full(2, lo), np.full(2, hi))
    scale = gaussian_nb_sensitivity(2)
    res = []
    for s in range(3000):
        m = GaussianNB(1.0, (lo, hi), random_state=s).fit(X, y)
        res.append((m.theta_[0, 0] - c) / r * m.class_count_[0] - exact[0, 1])
    assert stats.kstest(np.array(res), stats.laplace(scale=scale).cdf).pvalue > 1e-3


def test_equivalent_to_sklearn_at_huge_epsilon():
    X, y = _data(500, 4, 3)
    m = GaussianNB(1e12, (-3, 5), classes=[0, 1, 2], var_smoothing=0.0, random_state=0).fit(X, y)
    s = SkNB(var_smoothing=1e-300).fit(X, y)
    np.testing.assert_allclose(m.theta_, s.theta_, atol=1e-8)
    np.testing.assert_allclose(m.var_, s.var_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(m.class_prior_, s.class_prior_, atol=1e-9)
    np.testing.assert_allclose(m.predict_proba(X), s.predict_proba(X), atol=1e-6)
    np.testing.assert_array_equal(m.predict(X), s.predict(X))
    np.testing.assert_allclose(m.predict_log_proba(X), s.predict_log_proba(X), atol=1e-6)


def test_public_priors_and_variance_floor():
    X, y = _data(100, 2, 2)
    m = GaussianNB(1.0, (-3, 5), priors=[0.3, 0.7], var_smoothing=1e-3, random_state=0).fit(X, y)
    np.testing.assert_array_equal(m.class_prior_, [0.3, 0.7])
    assert np.all(m.var_ >= 1e-3 * 16.0)
    assert np.all((m.theta_ >= -3) & (m.theta_ <= 5))


def test_dict_bounds_by_column_name():
    pd = pytest.importorskip("pandas")
    X, y = _data(100, 2, 2)
    df = pd.DataFrame(X, columns=["a", "b"])
    m = GaussianNB(1.0, {"a": (-3, 5), "b": (-3, 5)}, random_state=0).fit(df, y)
    m2 = GaussianNB(1.0, (-3, 5), random_state=0).fit(X, y)
    np.testing.assert_array_equal(m.theta_, m2.theta_)
    with pytest.raises(ValueError, match="missing"):
        GaussianNB(1.0, {"a": (-3, 5)}).fit(df, y)


def test_errors_before_the_charge():
    X, y = _data(100, 2, 3)
    b = PrivacyBudget(1.0, 1e-6)
    for kw in (dict(), dict(bounds=(1, 0)), dict(bounds=(-3, 5)), dict(bounds=(-3, 5), classes=[0, 1, 2],
                                                                       priors=[1.0])):
        with pytest.raises(ValueError):
            GaussianNB(1.0, **kw).fit(X, y, budget=b)
    GaussianNB(1.0, (-3, 5), classes=[0, 1, 2]).fit(X, y, budget=b)  # the whole budget is still there
