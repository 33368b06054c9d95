"""dpfast.naive_bayes.GaussianNB with ``binary_features`` (Bernoulli likelihood, Vaidya et al. 2013's
categorical attributes): the sensitivity of the released statistics, the event, the law of the
released counts and frequencies, equivalence with scikit-learn's Gaussian + Bernoulli naive Bayes
at a huge epsilon, and the public-parameter errors before the charge."""
import numpy as np
import pytest
from scipy import stats
from sklearn.naive_bayes import BernoulliNB, GaussianNB as SkNB

from dpfast import PrivacyBudget
from dpfast.naive_bayes import GaussianNB
from dpfast.naive_bayes._gaussian import gaussian_nb_sensitivity


def _mixed(n=400, dg=2, db=3, k=2, seed=0):
    """dg Gaussian columns in [-3, 5], then db 0/1 columns whose frequency depends on the class."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, size=n)
    Xg = np.clip(rng.normal(size=(n, dg)) + y[:, None], -3, 5)
    p = 0.2 + 0.6 * (y[:, None] + np.arange(db)[None, :] % 2) / (k + 1)
    Xb = (rng.uniform(size=(n, db)) < p).astype(float)
    bounds = {j: (-3.0, 5.0) for j in range(dg)} | {dg + j: (0.0, 1.0) for j in range(db)}
    return np.hstack([Xg, Xb]), y, bounds, list(range(dg, dg + db))


def _released(stats_, binary):
    """The coordinates GaussianNB releases: n_k, S1 of every feature, S2 of the Gaussian ones."""
    d = binary.size
    keep = np.r_[0, 1 + np.arange(d), d + 1 + np.flatnonzero(~binary)]
    return stats_[:, keep]


def test_sensitivity_counts_only_the_released_coordinates():
    assert gaussian_nb_sensitivity(5, 3) == 1 + 5 + 1.0
    assert gaussian_nb_sensitivity(4) == gaussian_nb_sensitivity(4, 0) == 7.0
    with pytest.raises(ValueError):
        gaussian_nb_sensitivity(3, 4)
    dg, db, k = 2, 3, 2
    X, y, bounds, binary = _mixed(60, dg, db, k)
    lo = np.array([bounds[j][0] for j in range(dg + db)])
    hi = np.array([bounds[j][1] for j in range(dg + db)])
    mask = np.isin(np.arange(dg + db), binary)
    base = _released(GaussianNB._statistics(X, y, k, lo, hi), mask)
    rng = np.random.default_rng(3)
    rows = [rng.uniform(lo - 1, hi + 1) for _ in range(300)] + [hi.copy(), lo.copy()]
    worst = 0.0
    for row in rows:
        c = int(rng.integers(k))
        moved = _released(GaussianNB._statistics(np.vstack([X, row]), np.append(y, c), k, lo, hi), mask) - base
        assert np.all(np.delete(moved, c, axis=0) == 0)
        worst = max(worst, np.abs(moved).sum())
    assert worst <= gaussian_nb_sensitivity(dg + db, db) + 1e-9
    assert worst == pytest.approx(gaussian_nb_sensitivity(dg + db, db))  # a row at a bound attains it


def test_event_scale_and_mask_forms():
    X, y, bounds, binary = _mixed()
    b = PrivacyBudget(1.0, 1e-6)
    m = GaussianNB(0.5, bounds, binary_features=binary, random_state=0).fit(X, y, budget=b)
    l1 = gaussian_nb_sensitivity(5, 3)
    assert m.event_.sensitivity == l1 and m.event_.scale == pytest.approx(l1 / 0.5)
    assert m.epsilon_ == pytest.approx(0.5) and m.delta_ == 0.0 and m.accountant_ is None
    np.testing.assert_array_equal(m.binary_features_, [False, False, True, True, True])
    for form in ([False, False, True, True, True], np.array(binary), [-3, -2, -1]):
        m2 = GaussianNB(0.5, bounds, binary_features=form, random_state=0).fit(X, y)
        np.testing.assert_array_equal(m2.theta_, m.theta_)
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X, columns=["g0", "g1", "b0", "b1", "b2"])
    names = dict(zip(df.columns, bounds.values()))
    m3 = GaussianNB(0.5, names, binary_features=["b0", "b1", "b2"], random_state=0).fit(df, y)
    np.testing.assert_array_equal(m3.theta_, m.theta_)
    np.testing.assert_array_equal(m3.predict(df), m.predict(X))
    # no binary feature: the released model is the Gaussian one, unchanged
    g1 = GaussianNB(0.5, bounds, random_state=0).fit(X, y)
    g2 = GaussianNB(0.5, bounds, binary_features=[], random_state=0).fit(X, y)
    np.testing.assert_array_equal(g1.theta_, g2.theta_)
    assert not g1.binary_features_.any()


def test_released_count_and_frequency_follow_the_laplace_law():
    """class_count_ = n_k + Lap(b) and, inverting p = (n~ (1 + m) / 2 + alpha) / (n~ + 2 alpha),
    the released S1 of a binary column = S1 + Lap(b), b = (1 + d + d_g / 2) / epsilon: KS tests
    on 300 fits (frequencies mid-range and n_k >> b, so no clip binds)."""
    X, y, bounds, binary = _mixed(2000, 1, 2, 2, seed=5)
    lo = np.array([-3.0, 0.0, 0.0])
    hi = np.array([5.0, 1.0, 1.0])
    exact = GaussianNB._statistics(X, y, 2, lo, hi)
    eps, alpha = 2.0, 0.5
    scale = gaussian_nb_sensitivity(3, 2) / eps
    cnt, s1 = [], []
    for s in range(300):
        m = GaussianNB(eps, bounds, binary_features=binary, alpha=alpha, random_state=s).fit(X, y)
        n = m.class_count_[0]
        p = m.theta_[0, 1]  # bounds (0, 1): theta_ = p
        cnt.append(n - exact[0, 0])
        s1.append((2.0 * (p * (n + 2 * alpha) - alpha) - n) - exact[0, 2])
    assert stats.kstest(np.array(cnt), stats.laplace(scale=scale).cdf).pvalue > 1e-3
    assert stats.kstest(np.array(s1), stats.laplace(scale=scale).cdf).pvalue > 1e-3


@pytest.mark.parametrize("alpha", [1.0, 0.25])
def test_equivalent_to_sklearn_gaussian_plus_bernoulli_at_huge_epsilon(alpha):
    X, y, bounds, binary = _mixed(600, 2, 3, 3, seed=2)
    g = [0, 1]
    m = GaussianNB(1e13, bounds, classes=[0, 1, 2], binary_features=binary, alpha=alpha, var_smoothing=0.0,
                   random_state=0).fit(X, y)
    sg = SkNB(var_smoothing=1e-300).fit(X[:, g], y)
    sb = BernoulliNB(alpha=alpha, binarize=None).fit(X[:, binary], y)
    np.testing.assert_allclose(m.theta_[:, g], sg.theta_, atol=1e-8)
    np.testing.assert_allclose(np.log(m.theta_[:, binary]), sb.feature_log_prob_, atol=1e-8)
    jll = sg.predict_joint_log_proba(X[:, g]) + sb.predict_joint_log_proba(X[:, binary]) - np.log(sg.class_prior_)
    ref = jll - np.logaddexp.reduce(jll, axis=1, keepdims=True)
    np.testing.assert_allclose(m.predict_log_proba(X), ref, atol=1e-6)
    np.testing.assert_array_equal(m.predict(X), np.argmax(ref, axis=1))


def test_bad_binary_features_fail_before_the_charge():
    X, y, bounds, binary = _mixed(100)
    b = PrivacyBudget(1.0, 1e-6)
    for bad in ([5], [0, 7], [True, False], "b0", [[2, 3]], [1.5], ["nope"], [True, 2]):
        with pytest.raises(ValueError):
            GaussianNB(1.0, bounds, binary_features=bad).fit(X, y, budget=b)
    for bad_alpha in (0.0, -1.0):
        with pytest.raises(ValueError):
            GaussianNB(1.0, bounds, binary_features=binary, alpha=bad_alpha).fit(X, y, budget=b)
    GaussianNB(1.0, bounds, binary_features=binary).fit(X, y, budget=b)  # the whole budget is still there
