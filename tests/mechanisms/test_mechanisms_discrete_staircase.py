"""The discrete staircase mechanism against its law (Geng & Viswanath 2016, "The optimal
noise-adding mechanism in differential privacy", Section V, the discrete setting -- GV).

The pmf is written here from GV's definition, not from the sampler: with b = e^-eps and
|i| = k Delta + j (0 <= j < Delta), P_r(i) = a b^(k + [j >= r]),
a = (1 - b) / (2 r + 2 b (Delta - r) - (1 - b)).  Chi-square at fixed seeds with ALPHA = 1e-4
over the cells with expected count >= 5 (the rest pooled); the privacy check is exact: the
exponent of b is an integer function, and P_r(i) / P_r(i + d) = b^(e(i) - e(i + d)).
"""
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from dpfast import PrivacyBudget, accounting as A
from dpfast.budget import BudgetExceededError
from dpfast.mechanisms import discrete_laplace, discrete_staircase, discrete_staircase_r, event_of
from dpfast.mechanisms.staircase import _centre_thresholds, _ds_moments, _exp_fixed
from dpfast.random import SecureRandom

N = 200_000
ALPHA = 1e-4


def _exponent(i, D, r):
    """e(i) with P_r(i) = a b^e(i) (GV's definition: step k, then b once more past r)."""
    m = np.abs(np.asarray(i, dtype=np.int64))
    k, j = m // D, m % D
    return k + (j >= r)


def _pmf(i, D, r, eps):
    b = math.exp(-eps)
    a = (1 - b) / (2 * r + 2 * b * (D - r) - (1 - b))
    return a * b ** _exponent(i, D, r).astype(np.float64)


@pytest.mark.parametrize("D,r,eps", [(1, 1, 0.7), (5, 3, 1.0), (7, 1, 4.0), (6, 6, 0.3), (10, 4, 2.0)])
def test_pmf_is_normalised_and_moments_match_the_closed_forms(D, r, eps):
    i = np.arange(-D * int(80 / eps + 5), D * int(80 / eps + 5) + 1)
    p = _pmf(i, D, r, eps)
    assert abs(p.sum() - 1) < 1e-12
    l1, l2 = (float(_ds_moments(np.array([r]), D, eps, c)[0]) for c in ("l1", "l2"))
    assert l1 == pytest.approx(float(np.sum(np.abs(i) * p)), rel=1e-10)
    assert l2 == pytest.approx(float(np.sum(i * i * p)), rel=1e-10)


def test_second_moment_at_r1_matches_an_independent_derivation():
    """E X^2 of P_1 in closed form (C. Harrison, "Analytical variance of the discrete staircase
    mechanism", 2024)."""
    for D, eps in [(1, 1.0), (3, 0.5), (10, 2.0), (50, 5.0)]:
        E = math.exp(eps)
        ref = D * (8 * D * D * E + 2 * D * D * E * E + 2 * D * D + 3 * D * E * E - 3 * D - 2 * E + E * E + 1) / (
            3 * (E - 1) ** 2 * (2 * D + E - 1))
        assert float(_ds_moments(np.array([1]), D, eps, "l2")[0]) == pytest.approx(ref, rel=1e-10)


@pytest.mark.parametrize("D", [1, 2, 5, 10, 40])
@pytest.mark.parametrize("eps", [0.2, 1.0, 3.0, 8.0])
def test_optimal_r_is_the_brute_force_minimiser(D, eps):
    i = np.arange(-D * int(80 / eps + 5), D * int(80 / eps + 5) + 1)
    for cost, f in (("l1", np.abs), ("l2", np.square)):
        costs = [float(np.sum(f(i) * _pmf(i, D, r, eps))) for r in range(1, D + 1)]
        best = int(np.argmin(costs)) + 1
        got = discrete_staircase_r(D, eps, cost=cost)
        assert costs[got - 1] <= costs[best - 1] * (1 + 1e-9)


def test_optimal_r_tracks_the_continuous_gamma_for_large_delta():
    """r*/Delta -> GV's continuous gamma* = 1 / (1 + e^(eps/2)) (the discrete law at scale Delta)."""
    for eps in (0.5, 1.0, 2.0):
        D = 2000
        assert discrete_staircase_r(D, eps) / D == pytest.approx(1 / (1 + math.exp(eps / 2)), abs=2e-3)


@pytest.mark.parametrize("D,r", [(1, 1), (2, 1), (2, 2), (5, 1), (5, 3), (5, 5), (9, 4)])
def test_epsilon_dp_exactly(D, r):
    """P_r(i) / P_r(i + d) = b^(e(i) - e(i + d)) <= b^-1 = e^eps for all |d| <= Delta: the exponent
    moves by at most 1 (exact integers), and by exactly 1 somewhere (the bound is attained)."""
    i = np.arange(-6 * D - 3, 6 * D + 4)
    worst = -10
    for d in range(-D, D + 1):
        diff = _exponent(i + d, D, r) - _exponent(i, D, r)
        worst = max(worst, int(diff.max()))
    assert worst == 1


@pytest.mark.parametrize("D,eps,r", [(1, 1.0, None), (5, 1.0, 3), (5, 3.0, None), (10, 0.5, None), (4, 2.0, 4),
                                     (3, 12.0, 1)])
def test_sampler_matches_the_gv_pmf(D, eps, r):
    r_ = discrete_staircase_r(D, eps) if r is None else r
    x = discrete_staircase(np.zeros(N, dtype=np.int64), D, eps, rng=20261127, r=r)
    assert x.dtype == np.int64
    lim = D * int(40 / eps + 3)
    cells = np.arange(-lim, lim + 1)
    p = _pmf(cells, D, r_, eps)
    counts = np.bincount(np.clip(x, -lim - 1, lim + 1) + lim + 1, minlength=2 * lim + 3)
    obs_in, out = counts[1:-1], counts[0] + counts[-1]
    exp_in = p * N
    keep = exp_in >= 5
    obs = np.concatenate([obs_in[keep], [obs_in[~keep].sum() + out]])
    exp_ = np.concatenate([exp_in[keep], [N - exp_in[keep].sum()]])
    if exp_[-1] < 5:  # pool the rare cells into the last kept one
        obs = np.concatenate([obs[:-2], [obs[-2] + obs[-1]]])
        exp_ = np.concatenate([exp_[:-2], [exp_[-2] + exp_[-1]]])
    assert stats.chisquare(obs, exp_).pvalue > ALPHA


def test_delta_one_is_the_geometric_mechanism():
    """At Delta = 1, P_1(i) = (1 - b)/(1 + b) b^|i|: the law of discrete_laplace(1/eps); two-sample
    chi-square on the common support."""
    eps = 0.8
    x = discrete_staircase(np.zeros(N, dtype=np.int64), 1, eps, rng=1)
    y = discrete_laplace(Fraction(5, 4), size=N, rng=2)
    lim = 12
    cx = np.bincount(np.clip(x, -lim, lim) + lim, minlength=2 * lim + 1)
    cy = np.bincount(np.clip(y, -lim, lim) + lim, minlength=2 * lim + 1)
    assert stats.chi2_contingency(np.vstack([cx, cy]))[1] > ALPHA


def test_exact_bounds_bracket_the_probabilities():
    mpmath.mp.prec = 400
    for x in (Fraction(0), Fraction(1, 3), Fraction(7, 2), Fraction(1000), Fraction(3602879701896397, 2**55)):
        for w in (64, 200):
            lo, hi = _exp_fixed(x, w)
            ref = mpmath.exp(mpmath.mpf(x.numerator) / x.denominator) * mpmath.mpf(2) ** w
            slack = 4 + int(x).bit_length()  # the powering of e^1 loses about log2(floor(x)) bits
            assert lo <= ref <= hi and hi - lo <= 2 + ref * mpmath.mpf(2) ** (-w + slack)
    for c, D, eps in ((1, 5, Fraction(1)), (5, 5, Fraction(3, 10)), (1, 10**6, Fraction(20)), (9, 7, Fraction(1, 8))):
        e = mpmath.exp(mpmath.mpf(eps.numerator) / eps.denominator)
        p = c * (e - 1) / (c * (e - 1) + 2 * D)
        for bits in (64, 128, 256):
            lo, hi = _centre_thresholds(c, D, eps, bits)
            assert lo <= p * mpmath.mpf(2) ** bits <= hi and hi - lo <= 2


def test_event_budget_and_reproducibility():
    v = np.array([3, -2, 7], dtype=np.int64)
    assert event_of(discrete_staircase, v, 4, 1.5) == A.SelfComposed(A.PureDP(1.5), 3)
    assert event_of(discrete_staircase, 5, 4, 1.5) == A.PureDP(1.5)
    a = discrete_staircase(v, 4, 1.5, rng=7)
    np.testing.assert_array_equal(a, discrete_staircase(v, 4, 1.5, rng=7))
    assert isinstance(discrete_staircase(v, 4, 1.5, rng=SecureRandom()), np.ndarray)
    b = PrivacyBudget(2.0, 1e-6)
    gen = np.random.default_rng(3)
    discrete_staircase(5, 4, 1.5, rng=gen, budget=b)
    state = gen.bit_generator.state
    with pytest.raises(BudgetExceededError):
        discrete_staircase(5, 4, 1.5, rng=gen, budget=b)
    assert gen.bit_generator.state == state  # nothing drawn
    # an epsilon whose 1/epsilon does not fit the native sampler is rounded down, never up
    eps = Fraction(2**70 + 1, 2**70)
    ev = event_of(discrete_staircase, 5, 2, eps)
    assert ev.epsilon <= eps and ev.epsilon > eps * (1 - Fraction(1, 2**40))


@pytest.mark.parametrize("kw", [dict(sensitivity=1.5), dict(sensitivity=0), dict(sensitivity=2**41), dict(r=0),
                                dict(r=5), dict(r=1.0), dict(r=True), dict(epsilon=0), dict(epsilon=20000),
                                dict(epsilon=Fraction(1, 2**39)), dict(values=np.array([1.5])),
                                dict(values="3"), dict(values=np.array([2**60])), dict(cost="l3")])
def test_bad_input_fails_before_the_charge(kw):
    args = dict(values=np.array([1, 2]), sensitivity=4, epsilon=1.0, r=None) | kw
    b = PrivacyBudget(1.0, 1e-6)
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    with pytest.raises((ValueError, TypeError)):
        discrete_staircase(args.pop("values"), args.pop("sensitivity"), args.pop("epsilon"), rng=gen, budget=b,
                           **args)
    assert b.spent() == 0.0
    assert gen.bit_generator.state == state
