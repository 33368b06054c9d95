"""The staircase mechanism against its law (Geng & Viswanath 2016, "The optimal noise-adding
mechanism in differential privacy" -- GV).

The law is written here from GV's density (their eq. for f_gamma), not from the sampler:
f(x) = a b^k on |x| in [k D, (k + gamma) D), a b^(k+1) on [(k + gamma) D, (k + 1) D),
a = (1 - b) / (2 D (gamma + (1 - gamma) b)), b = e^-eps.  KS and chi-square at fixed seeds with
ALPHA = 1e-4; moment tolerances are 5 standard errors from n.
"""
import math

import numpy as np
import pytest
from scipy import integrate, stats

import dpfast
from dpfast import PrivacyBudget, accounting as A
from dpfast.budget import BudgetExceededError
from dpfast.mechanisms import event_of, staircase, staircase_gamma

N = 200_000
ALPHA = 1e-4


def _density(x, eps, D, g):
    b = math.exp(-eps)
    a = (1 - b) / (2 * D * (g + (1 - g) * b))
    t = np.abs(x) / D
    k = np.floor(t)
    r = t - k
    return a * b ** k * np.where(r < g, 1.0, b)


def _cdf(x, eps, D, g):
    """P[X <= x]: 1/2 + sign(x) * (mass of [0, |x|]) (symmetric law)."""
    b = math.exp(-eps)
    a = (1 - b) / (2 * D * (g + (1 - g) * b))
    t = np.abs(np.asarray(x, dtype=np.float64)) / D
    k = np.floor(t)
    r = t - k
    full = (1 - b ** k) / 2  # the whole periods [0, k D): sum_j a D b^j (g + (1 - g) b)
    part = a * D * b ** k * (np.minimum(r, g) + b * np.maximum(r - g, 0.0))
    return 0.5 + np.sign(x) * (full + part)


def test_density_is_normalised_and_cdf_consistent():
    for eps, D, g in [(0.5, 1.0, staircase_gamma(0.5)), (3.0, 2.0, 0.3), (8.0, 0.5, staircase_gamma(8.0))]:
        total = 2 * sum(integrate.quad(lambda x: _density(x, eps, D, g), k * D, (k + 1) * D, points=[(k + g) * D])[0]
                        for k in range(int(60 / eps) + 5))
        assert abs(total - 1) < 1e-8
        xs = np.linspace(-5 * D, 5 * D, 41)
        brk = np.sort(np.concatenate([np.arange(0, 6) * D, (np.arange(0, 6) + g) * D]))

        def mass(x):  # integral of the density over [0, x], piecewise between its jumps
            pts = np.concatenate([[0.0], brk[(brk > 0) & (brk < x)], [x]])
            return sum(integrate.quad(lambda u: _density(u, eps, D, g), p, q)[0] for p, q in zip(pts[:-1], pts[1:]))
        num = [0.5 + math.copysign(mass(abs(x)), x) for x in xs]
        assert np.allclose(_cdf(xs, eps, D, g), num, atol=1e-7)


@pytest.mark.parametrize("eps,D,gamma", [(0.5, 1.0, None), (2.0, 3.0, None), (6.0, 1.0, None), (1.0, 1.0, 0.7)])
def test_staircase_matches_the_gv_law(eps, D, gamma):
    g = staircase_gamma(eps) if gamma is None else gamma
    x = staircase(np.zeros(N), D, eps, rng=20260, gamma=gamma)
    assert stats.kstest(x, lambda v: _cdf(v, eps, D, g)).pvalue > ALPHA
    # chi-square over the steps of the staircase (each step is where the density is flat)
    k_max = 6
    edges = np.sort(np.concatenate([np.arange(-k_max, k_max + 1) * D, (np.arange(-k_max, k_max) + g) * D,
                                    -(np.arange(0, k_max) + g) * D]))
    edges = np.unique(edges)
    cdf = np.concatenate([[0.0], _cdf(edges, eps, D, g), [1.0]])
    probs = np.diff(cdf)
    counts = np.bincount(np.searchsorted(edges, x, side="right"), minlength=edges.size + 1)
    keep = probs * N >= 5
    rest = (~keep)
    obs = np.concatenate([counts[keep], [counts[rest].sum()]])
    exp_ = np.concatenate([probs[keep], [probs[rest].sum()]]) * N
    if exp_[-1] < 5:
        obs, exp_ = obs[:-1], exp_[:-1] * (N / exp_[:-1].sum()) * (obs[:-1].sum() / N)
    assert stats.chisquare(obs, exp_).pvalue > ALPHA


def test_optimal_gamma_and_expected_absolute_noise():
    # GV Theorem 4: gamma* = 1/(1 + e^{eps/2}); E|X| = D e^{eps/2} / (e^eps - 1) at gamma* (the
    # closed form is checked against the density by quadrature, then the sampler against it)
    for eps in (0.3, 2.0, 7.0):
        g = staircase_gamma(eps)
        assert g == pytest.approx(1 / (1 + math.exp(eps / 2)), rel=1e-15)
        e_abs = 2 * sum(integrate.quad(lambda x: x * _density(x, eps, 1.0, g), k, k + 1, points=[k + g])[0]
                        for k in range(int(60 / eps) + 5))
        closed = math.exp(eps / 2) / (math.exp(eps) - 1)
        assert e_abs == pytest.approx(closed, rel=1e-7)
        x = staircase(np.zeros(N), 1.0, eps, rng=11)
        sd = math.sqrt(np.var(np.abs(x)) / N)
        assert abs(np.abs(x).mean() - closed) < 5 * sd
        # beats Laplace's E|X| = D / eps beyond small epsilon
        if eps >= 2:
            assert closed < 1.0 / eps


def test_density_ratio_is_bounded_by_e_eps_for_every_shift_up_to_the_sensitivity():
    # the eps-DP property of the law itself (GV Section II): f(x) <= e^eps f(x + d), |d| <= D
    eps, D = 1.5, 2.0
    g = staircase_gamma(eps)
    xs = np.linspace(-12, 12, 4801)
    for d in np.linspace(-D, D, 41):
        r = np.log(_density(xs, eps, D, g)) - np.log(_density(xs + d, eps, D, g))
        assert r.max() <= eps + 1e-12
    # and a shift of D/2 can already cost the whole epsilon (why arrays compose per entry)
    r = np.log(_density(xs, eps, D, g)) - np.log(_density(xs + 0.5 * D, eps, D, g))
    assert r.max() == pytest.approx(eps)


def test_events_budget_shapes_and_dtype():
    assert event_of(staircase, 1.0, 1.0, 0.5) == A.PureDP(epsilon=0.5)
    assert event_of(staircase, np.zeros(4), 1.0, 0.5) == A.SelfComposed(A.PureDP(epsilon=0.5), 4)
    b = PrivacyBudget(1.0, 1e-9)
    gen = np.random.default_rng(3)
    state = gen.bit_generator.state
    with pytest.raises(BudgetExceededError):
        staircase(np.zeros(3), 1.0, 0.5, rng=gen, budget=b)
    assert gen.bit_generator.state == state
    out = staircase(np.zeros((2, 3), dtype=np.float32), 1.0, 1.0, rng=1)
    assert out.shape == (2, 3) and out.dtype == np.float32
    assert isinstance(staircase(0.0, 1.0, 1.0, rng=1), np.floating)
    assert np.array_equal(staircase(np.zeros(5), 1.0, 1.0, rng=7), staircase(np.zeros(5), 1.0, 1.0, rng=7))
    assert dpfast.staircase is staircase


@pytest.mark.parametrize("kw,exc", [(dict(gamma=0.0), ValueError), (dict(gamma=1.5), ValueError),
                                    (dict(gamma="x"), TypeError), (dict(epsilon=0.0), ValueError),
                                    (dict(sensitivity=-1.0), ValueError), (dict(values=[np.nan]), ValueError),
                                    (dict(epsilon=5000.0), ValueError), (dict(sensitivity=1e308, epsilon=1e-10), ValueError)])
def test_staircase_errors(kw, exc):
    args = dict(values=np.zeros(2), sensitivity=1.0, epsilon=1.0)
    gamma = kw.pop("gamma", None)
    args.update(kw)
    with pytest.raises(exc):
        staircase(**args, rng=1, gamma=gamma)
