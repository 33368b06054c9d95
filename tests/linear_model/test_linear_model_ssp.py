"""LinearRegression(method="ssp"): sensitivity at the bound, the noise law of the released
statistics, equivalence with OLS at a huge epsilon, errors before the charge."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpfast import PrivacyBudget
from dpfast.accounting import Gaussian
from dpfast.linear_model import LinearRegression, _ssp


def _stat_vector(Z, y):
    """The released vector: upper triangle of Z^T Z, then Z^T y."""
    A, b = _ssp.ssp_statistics(Z, y)
    return np.concatenate([A[np.triu_indices(A.shape[0])], b])


@pytest.mark.parametrize("R,s,B", [(1.0, 0.0, 1.0), (2.0, 1.0, 0.5), (0.5, 3.0, 4.0)])
def test_ssp_sensitivity_attained_at_the_bound(R, s, B):
    rng = np.random.default_rng(0)
    d = 4
    base = rng.normal(size=(10, d))
    base *= np.minimum(1.0, R / np.linalg.norm(base, axis=1))[:, None]
    yb = rng.uniform(-B, B, size=10)
    aug = lambda X: np.hstack([X, np.full((len(X), 1), s)]) if s > 0 else X
    delta = _ssp.ssp_sensitivity(R, s, B)
    worst = np.zeros((1, d))
    worst[0, 0] = R  # x = R e_1, y = B: the supremum of the bound
    diff = _stat_vector(aug(np.vstack([base, worst])), np.append(yb, B)) - _stat_vector(aug(base), yb)
    assert np.linalg.norm(diff) == pytest.approx(delta, rel=1e-12)
    # no row within the bounds moves the statistics further (random directions and norms)
    X = rng.normal(size=(2000, d))
    X *= (R * rng.uniform(0, 1, size=2000) ** 0.25 / np.linalg.norm(X, axis=1))[:, None]
    y = rng.choice([-B, B], size=2000)
    Z = aug(X)
    j, k = np.triu_indices(Z.shape[1])
    per_row = np.sqrt(((Z[:, j] * Z[:, k]) ** 2).sum(1) + ((y[:, None] * Z) ** 2).sum(1))
    assert per_row.max() <= delta * (1 + 1e-12)


def _data(n=200, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    return X, np.clip(X @ np.array([0.5, -0.3, 0.2]) + 0.1 + 0.1 * rng.normal(size=n), -1, 1)


@pytest.mark.slow
def test_ssp_released_statistics_follow_the_gaussian_law(monkeypatch):
    """A~ - Z^T Z (upper triangle) and b~ - Z^T y are i.i.d. N(0, sigma^2) with sigma = z Delta."""
    X, y = _data(n=50)
    seen = []
    monkeypatch.setattr(_ssp, "ssp_solve", lambda A, b, ridge: (seen.append((A, b)), np.zeros(len(b)))[1])
    Z = np.hstack([X * np.minimum(1, 1 / np.linalg.norm(X, axis=1))[:, None], np.ones((50, 1))])
    A0, b0 = _ssp.ssp_statistics(Z, y)
    iu = np.triu_indices(4)
    noise = []
    for seed in range(300):
        est = LinearRegression(1.0, 1e-5, method="ssp", random_state=seed).fit(X, y)
        A, b = seen[-1]
        assert np.array_equal(A, A.T)
        noise.append(np.concatenate([(A - A0)[iu], b - b0]) / est.sigma_)
    noise = np.concatenate(noise)  # 300 x 14 standardised draws
    assert isinstance(est.event_, Gaussian)
    assert est.sigma_ == est.event_.noise_multiplier * est.event_.sensitivity
    # KS at level 1e-3 for N = 4200 draws; a wrong scale by 5 % or any mean shift of 0.1 sd fails
    assert stats.kstest(noise, "norm").pvalue > 1e-3
    assert abs(noise.mean()) < 4 / math.sqrt(noise.size)
    assert abs(noise.var() - 1) < 4 * math.sqrt(2 / noise.size)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ssp_is_ols_at_a_huge_epsilon(fit_intercept):
    X, y = _data(n=5000)
    est = LinearRegression(1e4, 1e-5, method="ssp", accountant="rdp", fit_intercept=fit_intercept,
                           random_state=0).fit(X, y)
    Xc = X * np.minimum(1.0, 1.0 / np.linalg.norm(X, axis=1))[:, None]
    Z = np.hstack([Xc, np.ones((len(X), 1))]) if fit_intercept else Xc
    theta = np.linalg.lstsq(Z, y, rcond=None)[0]
    got = np.append(est.coef_, est.intercept_) if fit_intercept else est.coef_
    # perturbation bound: ||dtheta|| <= (||E|| ||theta|| + ||e|| + lambda ||theta||) / lambda_min(Z^T Z),
    # with ||E|| <= 4 sigma sqrt(dim) and ||e|| <= 4 sigma sqrt(dim) (overwhelmingly likely)
    dim = Z.shape[1]
    lmin = np.linalg.eigvalsh(Z.T @ Z)[0]
    tn = np.linalg.norm(theta)
    bound = (4 * est.sigma_ * math.sqrt(dim) * (1 + tn) + est.lambda_ * tn) / lmin
    assert np.linalg.norm(got - theta) <= 2 * bound
    assert bound < 1e-3  # the comparison is meaningful


def test_ssp_epsilon_and_budget():
    X, y = _data()
    b = PrivacyBudget(5.0, 1e-4)
    est = LinearRegression(1.0, 1e-5, method="ssp", random_state=0).fit(X, y, budget=b)
    assert est.epsilon_ <= 1.0 and est.delta_ == 1e-5
    assert est.lambda_ == pytest.approx(2 * est.sigma_ * 2.0)  # 2 sigma sqrt(d + 1), d = 3
    assert est.predict(X).shape == (len(X),)
    e2 = LinearRegression(1.0, 1e-5, method="ssp", random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.coef_, e2.coef_)  # random_state reproduces


@pytest.mark.parametrize("kwargs,fit_kw,match", [
    ({"loss": "huber"}, {}, "squared"),
    ({}, {"sample_weight": np.full(200, 2.0)}, "sample_weight"),
    ({"row_norm": "check", "norm_bound": 0.01}, {}, "norm_bound"),
])
def test_ssp_errors_before_the_charge(kwargs, fit_kw, match):
    X, y = _data()
    b = PrivacyBudget(5.0, 1e-4)
    with pytest.raises(ValueError, match=match):
        LinearRegression(1.0, 1e-5, method="ssp", **kwargs).fit(X, y, budget=b, **fit_kw)
    assert b.spent() == 0.0


def test_ssp_noise_is_the_draw_of_random_state(monkeypatch):
    """Fast check of the release: A~ - Z^T Z and b~ - Z^T y are exactly ``ssp_noise`` of the
    estimator's generator with sigma = z Delta (the law itself: the slow test above)."""
    from dpfast.random import check_random_state

    X, y = _data(n=30)
    seen = []
    monkeypatch.setattr(_ssp, "ssp_solve", lambda A, b, ridge: (seen.append((A, b)), np.zeros(len(b)))[1])
    est = LinearRegression(1.0, 1e-5, method="ssp", random_state=7).fit(X, y)
    Z = np.hstack([X * np.minimum(1, 1 / np.linalg.norm(X, axis=1))[:, None], np.ones((30, 1))])
    A0, b0 = _ssp.ssp_statistics(Z, y, col_bounds=[2.0] * 3 + [1.0, 1.0])  # the estimator's grids
    E, e = _ssp.ssp_noise(check_random_state(7), 4, est.sigma_)
    A, b = seen[0]
    # the same factor grids (step 2^-26 of the column bounds 2, 1): a last-bit difference of the
    # row maps moves a factor by at most one step, a term by at most (2 + 2) 2 2^-26 = 2^-23
    tol = 30 * 2.0**-23 + 1e-12 * est.sigma_ * 100
    np.testing.assert_allclose(A - A0, E, atol=tol)
    np.testing.assert_allclose(b - b0, e, atol=tol)
    assert est.event_.sensitivity == _ssp.ssp_sensitivity(1.0 * (1 + 8 * np.finfo(float).eps),
                                                          1.0 * (1 + 8 * np.finfo(float).eps), 1.0)


def test_ssp_weights_scale_each_rows_contribution():
    """Weights in [0, 1]: a row of weight w adds w u, so the sensitivity bound holds; weight 0 drops it."""
    X, y = _data(n=40)
    w = np.ones(40)
    w[:10] = 0.0
    a = LinearRegression(1.0, 1e-5, method="ssp", random_state=3).fit(X, y, sample_weight=w)
    b = LinearRegression(1.0, 1e-5, method="ssp", random_state=3).fit(X[10:], y[10:])
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-9, atol=1e-12)
    Z = np.hstack([X, np.ones((40, 1))])
    A, bb = _ssp.ssp_statistics(Z, y, np.full(40, 0.5))
    A1, b1 = _ssp.ssp_statistics(Z, y)
    # exact sums of products of factors on the grid 2^-26 of P (P the powers of two above the
    # column bounds; trunc(w b 2^26) vs w trunc(b 2^26): within one step): 40 terms of weight 1/2 vs 1
    tol = 40 * 2.0**-25 * (2 * max(np.abs(Z).max(), np.abs(y).max())) ** 2
    np.testing.assert_allclose(A, A1 / 2, rtol=0, atol=tol)
    np.testing.assert_allclose(bb, b1 / 2, rtol=0, atol=tol)
