"""Red-team: the binary features' smoothing at extreme (valid) ``alpha``.

``alpha`` is any real in (0, inf).  The smoothed frequency p = (n~ h + alpha) / (n~ + 2 alpha)
(h in [0, 1] the released frequency of the upper value) lies strictly in (0, 1) for every such
alpha, so the released log-probabilities of a binary feature are finite and the prediction is a
proper distribution.  Formed in doubles, n~ + 2 alpha overflows for alpha near 1e308 (p = 0 and
log 0) and p rounds to 1 when alpha / n~ < 2**-53 (log(1 - p) = -inf, NaN probabilities).
"""
import warnings

import numpy as np
import pytest

from dpfast.naive_bayes import GaussianNB


def _data():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, (60, 3)).astype(float)
    X[:, 0] = 0.0  # class-independent constant column: h = 0 up to the noise
    y = rng.integers(0, 2, 60)
    return X, y


@pytest.mark.parametrize("alpha", [1e308, 1e-320, 1e-20, 1.0])
@pytest.mark.parametrize("h_sign", [-1.0, 1.0])
def test_extreme_alpha_gives_finite_log_probabilities(alpha, h_sign):
    """Released statistics with a binary column's frequency exactly 0 or 1 (S1 = -+n~: the
    noise can put it there, the mean is clipped to [-1, 1]) and a class of 1e15 rows."""
    X, y = _data()
    lo, hi = np.zeros(3), np.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no log(0) / divide warnings
        m = GaussianNB(1.0, (0, 1), binary_features=[0, 1, 2], alpha=alpha, random_state=0).fit(X, y)
        n = np.array([30.0, 1e15])
        noisy = np.zeros((2, 7))
        noisy[:, 0] = n
        noisy[:, 1:4] = h_sign * n[:, None]
        m._post_process(noisy, lo, hi, None)
        proba = m.predict_proba(np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]))
    assert np.isfinite(m._log_p).all() and np.isfinite(m._log_q).all()
    assert (m._log_p <= 0).all() and (m._log_q <= 0).all()
    # p + q = 1 (the two log-probabilities are of complementary events)
    np.testing.assert_allclose(np.exp(m._log_p) + np.exp(m._log_q), 1.0, rtol=1e-12)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    assert np.isfinite(m.theta_).all() and np.isfinite(m.var_).all()
    if alpha == 1e308:  # alpha >> n~: p = 1/2 up to n~ / alpha
        np.testing.assert_allclose(m.theta_, 0.5, rtol=1e-12)
    if alpha == 1.0:  # the closed form (n~ h + alpha) / (n~ + 2 alpha), h = 0 or 1
        h = (1.0 + h_sign) / 2
        np.testing.assert_allclose(m.theta_, ((n * h + 1.0) / (n + 2.0))[:, None] * np.ones(3), rtol=1e-12)


def test_smoothing_matches_the_formula_at_ordinary_alpha():
    """At alpha = 1 the log-probabilities equal the closed form in exact rational arithmetic."""
    from fractions import Fraction
    X, y = _data()
    m = GaussianNB(1e6, (0, 1), binary_features=[1], alpha=1.0, random_state=3).fit(X, y)
    for k in range(2):
        n = Fraction(m.class_count_[k])
        p = Fraction(m.theta_[k, 1])  # theta = 0 + 1 * p for bounds (0, 1)
        assert 0 < p < 1
        np.testing.assert_allclose(m._log_p[k, 0], np.log(float(p)), rtol=1e-12)
        np.testing.assert_allclose(m._log_q[k, 0], np.log1p(-float(p)), rtol=1e-12)
        assert n >= 1
