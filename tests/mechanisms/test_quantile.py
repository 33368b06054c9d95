"""Private quantiles / median (dpfast.mechanisms.quantile), lectures.md B9, Smith 2011.

The output law is checked by Kolmogorov-Smirnov against the exact CDF, computed here from
the definition -- density proportional to exp(-(eps/2) |#{x_i <= t} - q n|) on the bounds --
by evaluating the count at the midpoint of every piece between distinct clamped data points
(no interval-index bookkeeping shared with the implementation).  The same samples must
reject the law with the weight exp(-eps |.|) printed in AW Alg. 4 (2 eps-DP).
"""

import numpy as np
import pytest
from scipy import stats

from dpfast.mechanisms.quantile import private_median, private_quantile
from dpfast.random import SecureRandom

ALPHA = 1e-3

# duplicates (zero-width intervals) and points outside the bounds (clamped)
X = np.array([-3.0, 0.5, 1.0, 1.0, 1.0, 2.0, 2.5, 4.0, 4.5, 6.0, 7.0, 7.0, 9.5, 12.0, 15.0])
BOUNDS = (0.0, 10.0)


def exact_cdf(x, q, weight, bounds):
    """CDF of the density prop. to exp(-weight |#{x_i <= t} - q n|) on bounds (vectorized)."""
    lo, hi = bounds
    xc = np.clip(np.asarray(x, float), lo, hi)
    n = xc.size
    knots = np.unique(np.concatenate([[lo, hi], xc]))
    mids = 0.5 * (knots[:-1] + knots[1:])
    counts = (xc[None, :] <= mids[:, None]).sum(axis=1)
    dens = np.exp(-weight * np.abs(counts - q * n))
    mass = dens * np.diff(knots)
    cum = np.concatenate([[0.0], np.cumsum(mass)]) / mass.sum()

    def cdf(t):
        return np.interp(t, knots, cum)  # piecewise linear between knots

    return cdf


def sample(q, eps, n_draws, seed, x=X, bounds=BOUNDS, per_call=1000):
    """n_draws independent eps-DP draws: q repeated per_call times with budget per_call * eps
    (the equal split gives each level exactly eps), then concatenated over calls."""
    g = np.random.default_rng(seed)
    reps = [private_quantile(x, np.full(per_call, q), eps * per_call, bounds, rng=g)
            for _ in range(n_draws // per_call)]
    return np.concatenate(reps)


def test_single_level_calls_have_the_exact_law():
    q, eps, n = 0.3, 2.0, 4000
    g = np.random.default_rng(2024)
    s = np.array([private_quantile(X, q, eps, BOUNDS, rng=g) for _ in range(n)])
    assert stats.kstest(s, exact_cdf(X, q, eps / 2, BOUNDS)).pvalue > ALPHA
    assert stats.kstest(s, exact_cdf(X, q, eps, BOUNDS)).pvalue < 1e-6


@pytest.mark.parametrize("q,eps", [(0.3, 2.0), (0.5, 0.7), (0.0, 1.5), (1.0, 3.0)])
def test_output_law_is_the_exact_piecewise_uniform_law(q, eps):
    s = sample(q, eps, 50_000, seed=int(100 * q + 10 * eps))
    assert ((s >= BOUNDS[0]) & (s <= BOUNDS[1])).all()
    right = exact_cdf(X, q, eps / 2, BOUNDS)
    assert stats.kstest(s, right).pvalue > ALPHA
    wrong = exact_cdf(X, q, eps, BOUNDS)  # the Alg. 4 misprint
    assert stats.kstest(s, wrong).pvalue < 1e-6


def test_interval_probabilities_equal_quadrature():
    # lectures.md H10: interval probabilities = normalised integrals of the density; checked
    # here through the frequency of each piece between distinct knots (chi-square).
    q, eps, n = 0.4, 1.0, 100_000
    s = sample(q, eps, n, seed=8)
    cdf = exact_cdf(X, q, eps / 2, BOUNDS)
    knots = np.unique(np.concatenate([[0.0, 10.0], np.clip(X, 0, 10)]))
    probs = np.diff(cdf(knots))
    counts = np.histogram(s, bins=knots)[0]
    expected = n * probs
    stat = ((counts - expected) ** 2 / expected).sum()
    assert stats.chi2.sf(stat, len(probs) - 1) > ALPHA


def test_several_levels_split_the_budget_equally():
    qs, eps, n = [0.25, 0.75], 2.0, 4000
    g = np.random.default_rng(4)
    s = np.array([private_quantile(X, qs, eps, BOUNDS, rng=g) for _ in range(n)])
    assert s.shape == (n, 2)
    for j, q in enumerate(qs):
        assert stats.kstest(s[:, j], exact_cdf(X, q, eps / len(qs) / 2, BOUNDS)).pvalue > ALPHA
        assert stats.kstest(s[:, j], exact_cdf(X, q, eps / 2, BOUNDS)).pvalue < 1e-6
    out = private_quantile(X, np.array([[0.1, 0.2], [0.3, 0.4]]), 1.0, BOUNDS, rng=0)
    assert out.shape == (2, 2)
    assert isinstance(private_quantile(X, 0.5, 1.0, BOUNDS, rng=0), float)


def test_empty_data_is_uniform_on_the_bounds():
    g = np.random.default_rng(1)
    s = private_quantile([], np.full(20_000, 0.5), 1.0, (-2.0, 3.0), rng=g)
    assert stats.kstest(s, stats.uniform(loc=-2, scale=5).cdf).pvalue > ALPHA


def test_accuracy_and_large_n():
    x = np.random.default_rng(0).normal(size=1_000_000)
    med = private_median(x, 1.0, (-10.0, 10.0), rng=3)
    assert abs(med - np.median(x)) < 0.01
    qs = private_quantile(x, [0.1, 0.9], 1.0, (-10.0, 10.0), rng=3)
    np.testing.assert_allclose(qs, np.quantile(x, [0.1, 0.9]), atol=0.02)


def test_median_reproducibility_and_generators():
    a = private_median(X, 1.0, BOUNDS, rng=5)
    assert a == private_median(X, 1.0, BOUNDS, rng=5)
    assert a == private_quantile(X, 0.5, 1.0, BOUNDS, rng=np.random.default_rng(5))
    assert a != private_median(X, 1.0, BOUNDS, rng=6)
    assert 0.0 <= private_median(X, 1.0, BOUNDS, rng=SecureRandom()) <= 10.0
    # float32 data, lists, 2-D data (flattened)
    assert private_median(X.astype(np.float32), 1.0, BOUNDS, rng=5) == a
    assert private_median(X.reshape(3, 5).tolist(), 1.0, BOUNDS, rng=5) == a


def test_huge_and_tiny_scales():
    x = 1e6 + np.arange(100.0)
    m = private_median(x, 1.0, (1e6 - 1e3, 1e6 + 1e3), rng=0)
    assert 1e6 <= m <= 1e6 + 100
    x = np.arange(100.0) * 1e-12
    m = private_median(x, 5.0, (0.0, 1e-10), rng=0)
    assert 0 <= m <= 1e-10
    # very large epsilon: one of the two intervals around the median (n = 11, q n = 5.5)
    m = private_median(np.arange(11.0), 1e6, (0.0, 10.0), rng=0)
    assert 4.0 <= m <= 6.0
    m = private_median(np.arange(10.0), 1e6, (0.0, 10.0), rng=0)  # q n = 5: [4, 5] only
    assert 4.0 <= m <= 5.0


def test_bad_inputs():
    for q in (-0.1, 1.5, np.nan, [0.5, 2.0]):
        with pytest.raises(ValueError, match=r"q must be in \[0, 1\]"):
            private_quantile(X, q, 1.0, BOUNDS)
    with pytest.raises(ValueError, match="at least one"):
        private_quantile(X, [], 1.0, BOUNDS)
    with pytest.raises(TypeError):
        private_quantile(X, "half", 1.0, BOUNDS)
    for eps in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="epsilon"):
            private_quantile(X, 0.5, eps, BOUNDS)
    for b in ((1.0, 0.0), (1.0, 1.0), (0.0, np.inf), (np.nan, 1.0)):
        with pytest.raises(ValueError, match="bounds"):
            private_quantile(X, 0.5, 1.0, b)
    with pytest.raises(ValueError, match="pair"):
        private_quantile(X, 0.5, 1.0, (0.0, 1.0, 2.0))
    with pytest.raises(ValueError, match="NaN or infinite"):
        private_quantile([1.0, np.nan], 0.5, 1.0, BOUNDS)
    with pytest.raises(ValueError, match="NaN or infinite"):
        private_median([1.0, np.inf], 1.0, BOUNDS)
    with pytest.raises(TypeError):
        private_median(["a"], 1.0, BOUNDS)
    with pytest.raises(ValueError, match="epsilon"):
        private_median(X, 0, BOUNDS)


def test_bounds_whose_width_overflows_are_rejected():
    # Regression: with bounds spanning more than DBL_MAX, the interval between -1e308 and
    # 1e308 had width inf, so log-weight +inf: it won whatever the utilities (not eps-DP),
    # and the "uniform point" in it was always its upper end.
    with pytest.raises(ValueError, match="finite width"):
        private_quantile([-1e308, 1e308, 0.0], 0.9, 1.0, (-1.7e308, 1.7e308), rng=0)
    # a wide but finite range still works
    assert -5e307 <= private_quantile([0.0, 1.0], 0.5, 1.0, (-5e307, 5e307), rng=0) <= 5e307
