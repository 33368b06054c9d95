"""dpfast.decomposition.PCA: the law of the released vector (Gaussian / Laplace, iid, calibrated
scale), the mirrored symmetric matrix, the sensitivity at the norm bound, agreement with
scikit-learn's PCA at a huge epsilon, the budget and the scikit-learn contract."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.linalg import subspace_angles
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA as SkPCA

from dpfast import accounting
from dpfast.budget import BudgetExceededError, PrivacyBudget
from dpfast.calibrate import gaussian_sigma
from dpfast.decomposition import PCA
from dpfast.decomposition._pca import pca_sensitivity

ALPHA = 1e-3  # per-test false-alarm rate of the distributional checks


def _exact_vector(X, R, centered):
    """v(X) written from the definition (rows inside the ball: no clipping): the upper triangle of
    U^T U, the row sum and the count, U = X / R."""
    U = X / R
    iu = np.triu_indices(X.shape[1])
    parts = [(U.T @ U)[iu]] + ([] if centered else [U.sum(axis=0)]) + [[float(X.shape[0])]]
    return np.concatenate(parts)


def _released_vectors(monkeypatch, X, n_fits, **params):
    got = []
    orig = PCA._from_release

    def capture(self, v, c, R, d):
        got.append(v.copy())
        return orig(self, v, c, R, d)

    monkeypatch.setattr(PCA, "_from_release", capture)
    ests = [PCA(random_state=s, **params).fit(X) for s in range(n_fits)]
    return np.array(got), ests


def _rows_in_ball(n, d, R, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X * (R * rng.uniform(0, 1, n) / np.linalg.norm(X, axis=1))[:, None]


@pytest.mark.parametrize("centered", [False, True])
def test_gaussian_noise_is_iid_with_the_calibrated_sigma(monkeypatch, centered):
    d, R, eps, delta = 12, 3.0, 1.0, 1e-5
    X = _rows_in_ball(40, d, R)
    V, ests = _released_vectors(monkeypatch, X, 40, epsilon=eps, delta=delta, norm_bound=R, centered=centered)
    noise = V - _exact_vector(X, R, centered)
    ev = ests[0].event_
    l2 = math.sqrt(2.0 if centered else 3.0)  # |w(x)|_2 <= sqrt(1 + [1] + 1) (docstring of pca_sensitivity)
    assert isinstance(ev, accounting.Gaussian) and ev.sensitivity == pytest.approx(l2, rel=1e-15)
    # the event is (eps, delta)-DP by the accountant, and no looser than the analytic Gaussian
    assert ests[0].epsilon_ <= eps
    assert ests[0].epsilon_ == accounting.make_accountant("pld").compose(ev).get_epsilon(delta)
    sigma = ev.noise_multiplier * l2
    assert sigma >= float(gaussian_sigma(eps, delta, l2)) * (1 - 1e-9)
    assert stats.kstest(noise.ravel() / sigma, "norm").pvalue > ALPHA
    # independence: the correlation of neighbouring coordinates and of fits, |r| < 4 / sqrt(N)
    a, b = noise[:, :-1].ravel(), noise[:, 1:].ravel()
    assert abs(np.corrcoef(a, b)[0, 1]) < 4 / math.sqrt(a.size)
    a, b = noise[:-1].ravel(), noise[1:].ravel()
    assert abs(np.corrcoef(a, b)[0, 1]) < 4 / math.sqrt(a.size)


def test_laplace_noise_has_the_l1_scale(monkeypatch):
    d, R, eps = 10, 2.0, 2.0
    X = _rows_in_ball(30, d, R, seed=1)
    V, ests = _released_vectors(monkeypatch, X, 40, epsilon=eps, delta=0.0, norm_bound=R)
    noise = V - _exact_vector(X, R, False)
    l1 = (d + 1) / 2 + math.sqrt(d) + 1  # upper(x x^T) + x + count, at |x|_2 = R
    ev = ests[0].event_
    assert isinstance(ev, accounting.Laplace) and ev.sensitivity == pytest.approx(l1, rel=1e-15)
    assert ests[0].epsilon_ == pytest.approx(eps, rel=1e-12) and ests[0].accountant_ is None
    assert ests[0].delta_ == 0.0
    assert stats.kstest(noise.ravel(), "laplace", args=(0, l1 / eps)).pvalue > ALPHA


def test_the_released_matrix_is_the_mirrored_upper_triangle():
    # post-processing alone: a known noisy vector, PSD, gives back R^2 (M - s s^T / n) / (n - 1)
    d, R, n = 4, 2.0, 50.0
    rng = np.random.default_rng(3)
    A = rng.normal(size=(d, d))
    M = A @ A.T + 10 * np.eye(d)
    iu = np.triu_indices(d)
    v = np.concatenate([M[iu], np.zeros(d), [n]])
    p = PCA(norm_bound=R)
    p._from_release(v, np.zeros(d), R, d)
    cov = p.components_.T @ np.diag(p.explained_variance_) @ p.components_
    np.testing.assert_allclose(cov, R * R * M / (n - 1), rtol=1e-10)
    # only the upper triangle is read: lower-triangle garbage in a full matrix cannot enter


@pytest.mark.parametrize("d", [1, 3, 20])
def test_sensitivity_at_the_bound(d):
    R = 1.5
    base = _rows_in_ball(10, d, R, seed=d)
    p = PCA(norm_bound=R)
    p.centered = False
    c = np.zeros(d)
    v0 = p._statistic(base, c, None, None, R)
    l1, l2 = pca_sensitivity(d, False, "l1"), pca_sensitivity(d, False, "l2")
    rng = np.random.default_rng(d)
    rows = [np.full(d, R / math.sqrt(d)), np.full(d, 1e300), np.full(d, -np.finfo(float).max),
            *(rng.normal(size=d) * s for s in (0.1, 1.0, 100.0))]
    for row in rows:
        diff = p._statistic(np.vstack([base, row]), c, None, None, R) - v0
        assert np.linalg.norm(diff) <= l2 * (1 + 1e-12)
        assert np.abs(diff).sum() <= l1 * (1 + 1e-12)
    # the l1 bound is attained by the diagonal row on the sphere, up to the factor grid (each
    # entry 1/sqrt(d) >= 2^-3 truncated toward zero by less than 2^-26: a product within 2^-22)
    diff = p._statistic(np.vstack([base, rows[0]]), c, None, None, R) - v0
    assert np.abs(diff).sum() <= l1
    assert np.abs(diff).sum() == pytest.approx(l1, rel=2.0**-21)


def test_huge_epsilon_matches_scikit_learn():
    X = load_digits().data
    R = float(np.linalg.norm(X, axis=1).max()) + 1.0
    p = PCA(5, epsilon=1e6, norm_bound=R, random_state=0).fit(X)
    s = SkPCA(5).fit(X)
    assert np.max(subspace_angles(p.components_.T, s.components_.T)) < 1e-2
    np.testing.assert_allclose(p.explained_variance_, s.explained_variance_, rtol=1e-3)
    np.testing.assert_allclose(p.mean_, s.mean_, atol=1e-3)
    np.testing.assert_allclose(np.abs(p.transform(X)), np.abs(s.transform(X)), atol=0.5)
    assert p.singular_values_ == pytest.approx(s.singular_values_, rel=1e-3)


def test_bounds_centre_and_default_norm_bound():
    X = load_digits().data[:300]
    p = PCA(3, epsilon=1e6, bounds=(0.0, 16.0), random_state=0).fit(X)
    w, V = np.linalg.eigh(np.cov(X, rowvar=False))
    assert np.max(subspace_angles(p.components_.T, V[:, ::-1][:, :3])) < 1e-2
    q = PCA(2, epsilon=1e6, delta=0.0, bounds=(0.0, 16.0), centered=True, random_state=0).fit(X)
    np.testing.assert_array_equal(q.mean_, np.full(X.shape[1], 8.0))


def test_n_components_float_and_attributes():
    X = _rows_in_ball(200, 6, 1.0)
    p = PCA(0.5, epsilon=1e6, norm_bound=1.0, random_state=0).fit(X)
    assert 1 <= p.n_components_ <= 6
    assert np.cumsum(p.explained_variance_ratio_)[-1] >= 0.5
    assert p.components_.shape == (p.n_components_, 6)
    Z = p.transform(X)
    assert Z.shape == (200, p.n_components_)
    assert p.inverse_transform(Z).shape == X.shape
    assert list(p.get_feature_names_out()) == [f"pca{i}" for i in range(p.n_components_)]
    full = PCA(epsilon=1e6, norm_bound=1.0, random_state=0).fit(X)
    np.testing.assert_allclose(full.inverse_transform(full.transform(X)), X, atol=1e-3)


def test_pandas_input_and_feature_names():
    X = pd.DataFrame(_rows_in_ball(50, 3, 1.0), columns=["a", "b", "c"])
    p = PCA(2, norm_bound=1.0, random_state=0).fit(X)
    assert list(p.feature_names_in_) == ["a", "b", "c"]


def test_budget_is_charged_once_and_refusal_leaves_unfitted():
    X = _rows_in_ball(50, 3, 1.0)
    b = PrivacyBudget(1.0, 1e-5)
    p = PCA(epsilon=0.5, delta=1e-6, norm_bound=1.0, random_state=0).fit(X, budget=b)
    assert len(b.ledger) == 1 and b.ledger[0].event == p.event_
    small = PrivacyBudget(0.1, 1e-5)
    g = np.random.default_rng(0)
    state = g.bit_generator.state
    q = PCA(epsilon=1.0, norm_bound=1.0, random_state=g)
    with pytest.raises(BudgetExceededError):
        q.fit(X, budget=small)
    assert not hasattr(q, "components_") and g.bit_generator.state == state


def test_missing_norm_bound_is_an_error_before_reading_data():
    with pytest.raises(ValueError, match="norm_bound"):
        PCA().fit(np.ones((5, 2)))
    with pytest.raises(ValueError, match="n_components"):
        PCA(3, norm_bound=1.0).fit(np.ones((5, 2)))


def test_bounds_by_feature_name_or_index_and_overflowing_width_refused():
    # the bounds convention of the other estimators (dpfast._validation.feature_bounds)
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 2, size=(200, 3))
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    ref = PCA(2, epsilon=1.0, bounds=np.array([[-1, -2, -3], [2, 3, 4]]), random_state=0).fit(X)
    by_name = PCA(2, epsilon=1.0, bounds={"c": (-3, 4), "a": (-1, 2), "b": (-2, 3)}, random_state=0).fit(df)
    by_index = PCA(2, epsilon=1.0, bounds={0: (-1, 2), 1: (-2, 3), 2: (-3, 4)}, random_state=0).fit(X)
    for got in (by_name, by_index):
        np.testing.assert_array_equal(got.components_, ref.components_)
        np.testing.assert_array_equal(got.mean_, ref.mean_)
    b = PrivacyBudget(10.0, 1e-3)
    for bad in (dict(bounds={"a": (-1, 2)}), dict(bounds=(-1e308, 1e308), norm_bound=1.0)):
        with pytest.raises(ValueError, match="missing|finite width"):
            PCA(2, epsilon=1.0, random_state=0, **bad).fit(df, budget=b)
    assert b.ledger == ()
