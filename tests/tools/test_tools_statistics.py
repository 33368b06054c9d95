"""dpfast.tools: the law of each release (the noise at fixed seeds against the calibrated
scale), sensitivities on neighbouring data sets at the bounds, NumPy equivalence at a huge
epsilon, the events and the budget."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dpfast
import dpfast.tools as T
from dpfast.accounting import Composed, Laplace, SelfComposed

HUGE = 1e9
RNG = np.random.default_rng(12345)
X = RNG.uniform(-1.0, 3.0, size=(200, 3))
B = (-1.0, 3.0)


# --------------------------------------------------------------- NumPy equivalence at huge eps
@pytest.mark.parametrize("axis", [None, 0])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("name", ["sum", "mean", "var", "std", "nansum", "nanmean", "nanvar", "nanstd"])
def test_numpy_equivalence_at_huge_epsilon(name, axis, keepdims):
    ours = getattr(T, name)(X, HUGE, B, axis=axis, keepdims=keepdims, rng=0)
    ref = getattr(np, name)(X, axis=axis, keepdims=keepdims)
    assert np.shape(ours) == np.shape(ref)
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)


def test_nan_forms_ignore_nan_and_ddof():
    x = X.copy()
    x[::7, 1] = np.nan
    for name in ["nanmean", "nanvar", "nanstd", "nansum"]:
        np.testing.assert_allclose(getattr(T, name)(x, HUGE, B, axis=0, rng=1), getattr(np, name)(x, axis=0),
                                   rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(T.var(X, HUGE, B, ddof=1, rng=1), np.var(X, ddof=1), rtol=1e-5)
    with pytest.raises(ValueError, match="finite"):
        T.mean(x, 1.0, B)


def test_count_quantile_histogram_equivalence():
    np.testing.assert_allclose(T.count_nonzero(X > 1, HUGE, axis=0, rng=2), np.count_nonzero(X > 1, axis=0),
                               atol=1e-3)
    q = T.quantile(X, [0.1, 0.5], HUGE, B, axis=0, rng=3)
    assert q.shape == (2, 3)
    # at a huge epsilon the draw lies between neighbouring order statistics
    np.testing.assert_allclose(q, np.quantile(X, [0.1, 0.5], axis=0), atol=0.1)
    assert abs(T.median(X[:, 0], HUGE, B, rng=4) - np.median(X[:, 0])) < 0.1
    assert abs(T.percentile(X[:, 0], 50, HUGE, B, rng=4) - np.median(X[:, 0])) < 0.1
    h, e = T.histogram(X[:, 0], HUGE, bins=7, range=B, rng=5)
    hr, er = np.histogram(X[:, 0], bins=7, range=B)
    np.testing.assert_allclose(h, hr, atol=1e-3)
    np.testing.assert_array_equal(e, er)
    h2 = T.histogram2d(X[:, 0], X[:, 1], HUGE, bins=[3, np.array([-1.0, 0.0, 3.0])], range=[B, None], rng=6)[0]
    np.testing.assert_allclose(h2, np.histogram2d(X[:, 0], X[:, 1], bins=[np.linspace(-1, 3, 4), [-1, 0, 3]])[0],
                               atol=1e-3)
    hd, _ = T.histogramdd(X, HUGE, bins=2, range=[B] * 3, density=True, rng=7)
    np.testing.assert_allclose(hd, np.histogramdd(X, bins=2, range=[B] * 3, density=True)[0], rtol=1e-6)


# --------------------------------------------------------------- the law of the noise
def _laplace_law(samples, b):
    """mean 0, variance 2 b^2 of Laplace(b); tolerances of 5 standard errors for the sample size."""
    k = samples.size
    assert abs(samples.mean()) < 5 * math.sqrt(2) * b / math.sqrt(k)
    # Var of X^2 for Laplace(b): E X^4 - (E X^2)^2 = 24 b^4 - 4 b^4 = 20 b^4
    assert abs((samples ** 2).mean() - 2 * b * b) < 5 * math.sqrt(20) * b * b / math.sqrt(k)


def test_sum_noise_law_axis0():
    eps = 0.7
    d, M = X.shape[1], 3.0
    draws = np.stack([T.sum(X, eps, B, axis=0, rng=s) for s in range(400)]) - X.sum(0)
    _laplace_law(draws.ravel(), d * M / eps)


def test_count_nonzero_and_histogram_noise_law():
    eps = 0.5
    draws = np.stack([T.count_nonzero(X, eps, rng=s) for s in range(1000)]) - X.size
    _laplace_law(draws, X.shape[1] / eps)
    h = np.stack([T.histogram(X[:, 0], eps, bins=5, range=B, rng=s)[0] for s in range(300)])
    _laplace_law((h - np.histogram(X[:, 0], 5, B)[0]).ravel(), 1.0 / eps)


def test_mean_numerator_law():
    # with a constant column at the midpoint the centred sum is 0: the numerator is pure noise,
    # and mean - c = noise_S / N_hat; at large n N_hat ~ n so (mean - c) n ~ Lap(2 d r / eps)
    n, eps = 100000, 1.0
    x = np.ones((n, 1))  # midpoint of (0, 2)
    draws = np.array([T.mean(x, eps, (0.0, 2.0), rng=s) for s in range(800)]) - 1.0
    _laplace_law(draws * n, 2 * 1.0 / eps * 1.0005)


# --------------------------------------------------------------- sensitivities at the bounds
def _neighbours():
    base = RNG.uniform(-1, 3, size=(50, 3))
    extreme = np.array([[3.0, -1.0, 3.0]])
    return base, np.vstack([base, extreme]), np.vstack([base, 1e6 * extreme])


def test_sum_sensitivity_on_neighbours_at_the_bound():
    base, nb, far = _neighbours()
    s0 = np.clip(base, *B).sum(0)
    s1 = np.clip(nb, *B).sum(0)
    s2 = np.clip(far, *B).sum(0)
    d, M = base.shape[1], 3.0
    assert np.abs(s1 - s0).sum() <= d * M + 1e-12
    np.testing.assert_array_equal(s1, s2)  # clamping: a far-out row is a row at the bound
    # the released sum differs by the same at a fixed seed: the noise does not depend on the data
    r0, r1 = T.sum(base, 1.0, B, axis=0, rng=9), T.sum(nb, 1.0, B, axis=0, rng=9)
    np.testing.assert_allclose(r1 - r0, s1 - s0, atol=1e-9)
    r2 = T.sum(far, 1.0, B, axis=0, rng=9)
    np.testing.assert_allclose(r2, r1)


def test_histogram_sensitivity_one_row_one_bin():
    base, nb, _ = _neighbours()
    h0 = T.histogramdd(base, 1.0, bins=3, range=[B] * 3, rng=11)[0]
    h1 = T.histogramdd(nb, 1.0, bins=3, range=[B] * 3, rng=11)[0]
    assert abs(np.abs(h1 - h0).sum() - 1.0) < 1e-9


# --------------------------------------------------------------- events and budget
@pytest.mark.parametrize("call", [
    lambda b: T.sum(X, 0.3, B, budget=b),
    lambda b: T.mean(X, 0.3, B, axis=0, budget=b),
    lambda b: T.var(X, 0.3, B, budget=b),
    lambda b: T.nanstd(X, 0.3, B, axis=0, budget=b),
    lambda b: T.count_nonzero(X, 0.3, budget=b),
    lambda b: T.quantile(X, [0.2, 0.8], 0.3, B, axis=0, budget=b),
    lambda b: T.median(X, 0.3, B, budget=b),
    lambda b: T.histogram(X[:, 0], 0.3, bins=4, range=B, budget=b),
    lambda b: T.histogramdd(X, 0.3, bins=2, range=[B] * 3, budget=b),
])
def test_each_release_charges_its_epsilon(call):
    budget = dpfast.PrivacyBudget(epsilon=1.0, delta=1e-9)
    call(budget)
    (charge,) = budget.ledger
    ev = charge.event
    if isinstance(ev, Laplace):
        assert ev.epsilon == pytest.approx(0.3)
    elif isinstance(ev, Composed):
        assert math.fsum(e.epsilon for e in ev.events) == pytest.approx(0.3)
    else:
        assert isinstance(ev, SelfComposed)
        assert ev.event.epsilon * ev.count == pytest.approx(0.3)
    # the accountant's epsilon of the one event is the requested 0.3 (pure DP)
    assert budget.spent() <= 0.3 * 1.01  # (PLD discretisation)


def test_refused_release_draws_nothing():
    budget = dpfast.PrivacyBudget(epsilon=0.5, delta=1e-9)
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    with pytest.raises(dpfast.BudgetExceededError):
        T.mean(X, 1.0, B, rng=gen, budget=budget)
    assert gen.bit_generator.state == state
    assert budget.ledger == ()


# --------------------------------------------------------------- bad input, before the charge
@pytest.mark.parametrize("call, err", [
    (lambda b: T.mean(X, 1.0, None, budget=b), (TypeError, ValueError)),
    (lambda b: T.mean(X, 1.0, (2.0, 1.0), budget=b), ValueError),
    (lambda b: T.mean(X, -1.0, B, budget=b), ValueError),
    (lambda b: T.sum(X, 1.0, B, axis=1, budget=b), ValueError),
    (lambda b: T.var(X, 1.0, B, ddof=-1, budget=b), ValueError),
    (lambda b: T.sum(X, 1.0, B, dtype=int, budget=b), TypeError),
    (lambda b: T.quantile(X, 1.5, 1.0, B, budget=b), ValueError),
    (lambda b: T.histogram(X[:, 0], 1.0, bins=4, budget=b), ValueError),
    (lambda b: T.histogram(X[:, 0], 1.0, bins="auto", range=B, budget=b), ValueError),
    (lambda b: T.histogram2d(X[:, 0], X[:1, 1], 1.0, bins=2, range=[B, B], budget=b), ValueError),
    (lambda b: T.nanmean(np.array([1.0, np.inf]), 1.0, B, budget=b), ValueError),
])
def test_bad_input_is_refused_before_the_charge(call, err):
    budget = dpfast.PrivacyBudget(epsilon=10.0, delta=1e-9)
    with pytest.raises(err):
        call(budget)
    assert budget.ledger == ()


def test_seeded_releases_are_reproducible():
    assert T.mean(X, 1.0, B, rng=3) == T.mean(X, 1.0, B, rng=3)
    np.testing.assert_array_equal(T.histogram(X[:, 0], 1.0, bins=3, range=B, rng=3)[0],
                                  T.histogram(X[:, 0], 1.0, bins=3, range=B, rng=3)[0])


def test_a_nan_row_contributes_nothing():
    base, _, _ = _neighbours()
    with_nan = np.vstack([base, np.full((1, 3), np.nan)])
    for name in ("nansum", "nanmean", "nanvar"):
        a = getattr(T, name)(base, 1.0, B, axis=0, rng=13)
        b = getattr(T, name)(with_nan, 1.0, B, axis=0, rng=13)
        np.testing.assert_array_equal(a, b)


def test_var_is_clamped_to_the_largest_variance_on_the_bounds():
    # any epsilon: the release lies in [0, r^2] (post-processing of the noisy moments)
    v = np.array([T.var(X, 0.01, B, rng=s) for s in range(50)])
    assert v.min() >= 0.0 and v.max() <= 4.0
    m = np.array([T.mean(X, 0.01, B, rng=s) for s in range(50)])
    assert m.min() >= -1.0 and m.max() <= 3.0
