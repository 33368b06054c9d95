"""Audit: certified empirical lower bounds on epsilon stay below each mechanism's claim.

A threshold attack on a worst-case neighbouring pair (D, D'): run the mechanism N times on
each, and for fixed thresholds t (chosen before sampling) consider S = {score > t} and its
complement.  (epsilon, delta)-DP implies P(S | A) <= e^eps P(S | B) + delta for both orders
(A, B) of the pair, so every S gives

    eps >= log((P(S | A) - delta) / P(S | B)).

With a Clopper-Pearson lower bound on P(S | A) and upper bound on P(S | B) (Clopper & Pearson
1934; the audit of Jagielski, Ullman & Oprea 2020 and Nasr et al. 2021 works this way), and a
Bonferroni split of ALPHA over all sets and both bounds, the maximum over S is a lower bound on
the mechanism's true epsilon with confidence 1 - ALPHA.  It must not exceed the claimed epsilon;
a mechanism deliberately given the noise for 4 epsilon must exceed it (the audit has power).
ALPHA = 1e-4 per test (fewer than 20 tests: family-wise < 2e-3).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpfast.linear_model import LinearRegression
from dpfast.mechanisms import (
    discrete_gaussian_mechanism,
    discrete_laplace_mechanism,
    exponential_mechanism,
    gaussian,
    laplace,
    randomized_response,
)
from dpfast.sgd import DPSGDRegressor

ALPHA = 1e-4
N = 400_000


def certified_epsilon_lower_bound(scores_a, scores_b, thresholds, delta=0.0, alpha=ALPHA) -> float:
    """Largest log((P_lo(S|X) - delta) / P_up(S|Y)) over S in {score > t, score <= t} and both
    orders (X, Y) of the pair, each probability bounded one-sidedly at level alpha / (2 m)."""
    a = np.asarray(scores_a, dtype=np.float64).ravel()
    b = np.asarray(scores_b, dtype=np.float64).ravel()
    m = 4 * len(thresholds)  # sets x orders
    lvl = alpha / (2 * m)
    best = 0.0
    for t in thresholds:
        for above in (True, False):
            ka = int(np.sum(a > t)) if above else int(np.sum(a <= t))
            kb = int(np.sum(b > t)) if above else int(np.sum(b <= t))
            for (k1, n1), (k2, n2) in (((ka, a.size), (kb, b.size)), ((kb, b.size), (ka, a.size))):
                lo = float(stats.beta.ppf(lvl, k1, n1 - k1 + 1)) if k1 > 0 else 0.0
                up = float(stats.beta.isf(lvl, k2 + 1, n2 - k2)) if k2 < n2 else 1.0
                if lo - delta > 0:
                    best = max(best, math.log((lo - delta) / up))
    return best


# ----------------------------------------------------------------------------- mechanisms
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_laplace(eps):
    """Sensitivity 1, values 0 vs 1: the loss is +-eps on the tails (tight)."""
    a = laplace(np.zeros(N), 1.0, eps, rng=np.random.default_rng(1))
    b = laplace(np.ones(N), 1.0, eps, rng=np.random.default_rng(2))
    lb = certified_epsilon_lower_bound(a, b, [1.0, 1.5, 2.0])
    assert 0.8 * eps <= lb <= eps, lb  # below the claim, and close to it (the attack is strong)


def test_audit_has_power_on_an_under_noised_laplace():
    """Noise for epsilon 4 released as if it were epsilon 1: the certified bound exceeds 1."""
    a = laplace(np.zeros(N), 1.0, 4.0, rng=np.random.default_rng(3))
    b = laplace(np.ones(N), 1.0, 4.0, rng=np.random.default_rng(4))
    assert certified_epsilon_lower_bound(a, b, [1.0, 1.5, 2.0]) > 1.0


def test_gaussian_analytic():
    """(eps, delta) = (1, 1e-5), sensitivity 1, values 0 vs 1; thresholds around the point where
    the likelihood ratio reaches e^eps (t = eps sigma^2 + 1/2 for sigma ~ 3.7)."""
    eps, delta = 1.0, 1e-5
    a = gaussian(np.zeros(N), 1.0, eps, delta, rng=np.random.default_rng(5))
    b = gaussian(np.ones(N), 1.0, eps, delta, rng=np.random.default_rng(6))
    lb = certified_epsilon_lower_bound(a, b, [4.0, 7.0, 10.0], delta=delta)
    assert 0.3 <= lb <= eps, lb


@pytest.mark.parametrize("eps,k", [(1.0, 2), (3.0, 2), (1.0, 6)])
def test_randomized_response(eps, k):
    """Inputs 0 vs 1: the report '1' has probability ratio exactly e^eps."""
    if k == 2:
        a = randomized_response(np.zeros(N, dtype=bool), eps, rng=np.random.default_rng(7)).astype(float)
        b = randomized_response(np.ones(N, dtype=bool), eps, rng=np.random.default_rng(8)).astype(float)
        th = [0.5]
    else:
        a = (randomized_response(np.zeros(N, dtype=np.int64), eps, rng=np.random.default_rng(7), categories=k) == 1)
        b = (randomized_response(np.ones(N, dtype=np.int64), eps, rng=np.random.default_rng(8), categories=k) == 1)
        th = [0.5]
    lb = certified_epsilon_lower_bound(a, b, th)
    assert 0.9 * eps <= lb <= eps, lb


def test_discrete_laplace_mechanism():
    eps = 1.0
    a = discrete_laplace_mechanism(np.zeros(N, dtype=np.int64), 1, eps, rng=np.random.default_rng(9))
    b = discrete_laplace_mechanism(np.ones(N, dtype=np.int64), 1, eps, rng=np.random.default_rng(10))
    lb = certified_epsilon_lower_bound(a, b, [0.5, 1.5, 2.5])
    assert 0.85 * eps <= lb <= eps, lb


def test_discrete_gaussian_mechanism():
    eps, delta = 1.0, 1e-5
    a = discrete_gaussian_mechanism(np.zeros(N, dtype=np.int64), 1, eps, delta, rng=np.random.default_rng(11))
    b = discrete_gaussian_mechanism(np.ones(N, dtype=np.int64), 1, eps, delta, rng=np.random.default_rng(12))
    lb = certified_epsilon_lower_bound(a, b, [3.5, 6.5, 9.5], delta=delta)
    assert 0.3 <= lb <= eps, lb


def test_exponential_mechanism():
    """k = 20 candidates, sensitivity 1: u(D) = 0, u(D') = (1, -1, ..., -1).  P(select 0)
    moves by e^(eps/2) / (e^(eps/2) + 19 e^(-eps/2)) / (1/20), i.e. log ratio ~0.92 eps at eps = 1."""
    eps, k, n = 1.0, 20, 200_000
    u_a = np.zeros((n, k))
    u_b = np.full((n, k), -1.0)
    u_b[:, 0] = 1.0
    a = exponential_mechanism(u_a, 1.0, eps, rng=np.random.default_rng(13)) == 0
    b = exponential_mechanism(u_b, 1.0, eps, rng=np.random.default_rng(14)) == 0
    lb = certified_epsilon_lower_bound(a, b, [0.5])
    assert 0.75 * eps <= lb <= eps, lb


# ----------------------------------------------------------------------------- estimators
def test_dp_sgd_one_step_canary():
    """DP-SGD, one full-batch step (sampling='shuffle', replace-one), two records: a zero record
    and a canary whose gradient saturates the clip at +C (D) or -C (D'), so the clipped sums
    differ by the full replace-one sensitivity 2C.  Score: the released weight."""
    n_fits = 2500
    X = np.array([[0.0], [1.0]])
    kw = dict(noise_multiplier=1.0, epochs=1, batch_size=2, learning_rate=1.0, fit_intercept=False,
              sampling="shuffle", accountant="rdp", delta=1e-5, clip_norm=1.0)
    a, b = [], []
    for s in range(n_fits):
        a.append(DPSGDRegressor(random_state=2 * s, **kw).fit(X, np.array([0.0, 1e6])).coef_[0])
        m = DPSGDRegressor(random_state=2 * s + 1, **kw).fit(X, np.array([0.0, -1e6]))
        b.append(m.coef_[0])
    claim = m.epsilon_
    lb = certified_epsilon_lower_bound(a, b, [0.0, 1.0, 2.0], delta=1e-5)
    assert lb <= claim, (lb, claim)
    assert lb > 0.2 * claim  # the canary is visible: the attack has some power here


def test_private_erm_output_perturbation():
    """LinearRegression(method='output'), no intercept, 3 unit rows with residuals ~1e3 (every
    loss derivative clipped, so the minimisers of D and D' = D + one such record are at the
    add/remove sensitivity's distance, see tests/linear_model/test_linear_model_sensitivity.py); score: projection
    of coef_ on the direction from the noiseless minimiser of D to that of D'."""
    from dpfast._solver import minimize_glm

    rng = np.random.default_rng(15)
    X = rng.normal(size=(3, 2))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = 1e3 * np.array([1.0, -1.0, 1.0])
    x_new, y_new = np.array([[0.6, 0.8]]), 1e3
    X2, y2 = np.vstack([X, x_new]), np.append(y, y_new)
    eps, delta, n_fits = 1.0, 1e-5, 20_000
    kw = dict(epsilon=eps, delta=delta, method="output", fit_intercept=False, alpha=1.0)
    m = LinearRegression(random_state=0, **kw).fit(X, y)
    C = m.calibration_.lipschitz
    w1 = minimize_glm(X, y, "squared", alpha=1.0, clip_norm=C, tol=1e-12).coef
    w2 = minimize_glm(X2, y2, "squared", alpha=1.0, clip_norm=C, tol=1e-12).coef
    direction = (w2 - w1) / np.linalg.norm(w2 - w1)
    a = [LinearRegression(random_state=2 * s, **kw).fit(X, y).coef_ @ direction for s in range(n_fits)]
    b = [LinearRegression(random_state=2 * s + 1, **kw).fit(X2, y2).coef_ @ direction for s in range(n_fits)]
    a, b = np.array(a) - w1 @ direction, np.array(b) - w1 @ direction
    sep = float(np.linalg.norm(w2 - w1))
    sigma = m.sigma_out_
    assert sep >= 0.99 * C / 1.0  # the pair is (nearly) worst case: distance L / lambda
    lb = certified_epsilon_lower_bound(a, b, [sigma * f for f in (1.0, 2.0, 3.0)], delta=delta)
    assert lb <= eps, lb
    assert lb > 0.2 * eps  # not vacuous
