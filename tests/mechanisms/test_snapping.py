"""The snapping mechanism (Mironov 2012): outputs on the power-of-two grid, distribution of
the snapped, clamped Laplace against its exact law (chi-square, 10^6 draws), the epsilon
accounting formula, and every error path."""
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpfast import _exact
from dpfast.mechanisms.snapping import snapping, snapping_epsilon, snapping_scale
from dpfast.random import SecureRandom

N = 10**6


def laplace_cdf(z, lam):
    z = np.asarray(z, dtype=float)
    return np.where(z < 0, 0.5 * np.exp(z / lam), 1 - 0.5 * np.exp(-z / lam))


def snapped_law(x, lam, big, bound):
    """Output values and probabilities of clamp_B(round_Lambda(x + Lap(lam))), x in [-B, B]
    (real arithmetic; floating-point effects are ~1e-16 relative, far below 10^6 draws' resolution)."""
    kmin, kmax = math.floor(-bound / big) - 1, math.ceil(bound / big) + 1
    probs = {}
    for k in range(kmin, kmax + 1):
        lo = -np.inf if k == kmin else (k - 0.5) * big
        hi = np.inf if k == kmax else (k + 0.5) * big
        p = float(laplace_cdf(hi - x, lam) - laplace_cdf(lo - x, lam))
        v = min(max(k * big, -bound), bound)
        probs[v] = probs.get(v, 0.0) + p
    vals = np.array(sorted(probs))
    return vals, np.array([probs[v] for v in vals])


def chisquare_against(out, vals, probs):
    idx = np.searchsorted(vals, out)
    assert np.all(vals[np.clip(idx, 0, vals.size - 1)] == out), "output off the snapping grid"
    counts = np.bincount(idx, minlength=vals.size)
    exp = N * probs
    # merge low-expectation bins from the outside in (symmetric-ish tails)
    keep = exp >= 5
    obs_m = list(counts[keep])
    exp_m = list(exp[keep])
    if (~keep).any():
        obs_m.append(counts[~keep].sum())
        exp_m.append(exp[~keep].sum())
        if exp_m[-1] < 5:
            o, e = obs_m.pop(), exp_m.pop()
            obs_m[-1] += o
            exp_m[-1] += e
    exp_m = np.array(exp_m)
    return stats.chisquare(obs_m, exp_m * (N / exp_m.sum())).pvalue


@pytest.mark.parametrize("x, bound", [(0.3, 10.0), (-2.2, 7.0), (9.5, 7.0)])
def test_snapping_matches_the_snapped_clamped_laplace(x, bound):
    out = snapping(np.full(N, x), 1.0, 1.0, bound, rng=17)
    lam = snapping_scale(1.0, bound)
    big = 2.0 ** math.ceil(math.log2(lam))
    assert big == 2.0  # lambda slightly above 1 -> Lambda = 2
    vals, probs = snapped_law(min(max(x, -bound), bound), lam, big, bound)
    assert chisquare_against(out, vals, probs) > 1e-4
    assert np.all(np.abs(out) <= bound)
    on_grid = np.abs(out) < bound
    np.testing.assert_array_equal(out[on_grid] / big, np.rint(out[on_grid] / big))


def test_snapping_with_bound_below_the_noise_scale_clamps_after_snapping():
    # eps = 0.1, B = 1: lambda ~ 10 >= B, internal bound 2 lambda, output clamped to [-1, 1]
    out = snapping(np.zeros(N), 1.0, 0.1, 1.0, rng=3)
    lam = snapping_scale(0.1, 1.0)
    assert set(np.unique(out)) <= {-1.0, 0.0, 1.0}
    p0 = float(laplace_cdf(8.0, lam) - laplace_cdf(-8.0, lam))  # Lambda = 16: |x+L| < 8 -> 0
    assert abs((out == 0).mean() - p0) < 5 * math.sqrt(p0 * (1 - p0) / N)


def test_snapping_scales_with_the_sensitivity():
    sens = 0.25  # a power of two: the scaling is exact
    out = snapping(np.full(200_000, 0.1), sens, 1.0, 2.0, rng=5)
    grid = out / (2.0 * sens)  # Lambda = 2 in sensitivity units
    inside = np.abs(out) < 2.0
    np.testing.assert_array_equal(grid[inside], np.rint(grid[inside]))
    # non-power-of-two sensitivity: the law of out / sens is the snapped Laplace in
    # sensitivity units (lambda ~ 1, Lambda = 2); compare second moments with it exactly
    wide = snapping(np.zeros(200_000), 3.0, 1.0, 60.0, rng=6) / 3.0
    vals, probs = snapped_law(0.0, snapping_scale(1.0, 60.0, 3.0) / 3.0, 2.0, 20.0)
    m2, m4 = float((probs * vals**2).sum()), float((probs * vals**4).sum())
    assert abs((wide**2).mean() - m2) < 5 * math.sqrt((m4 - m2 * m2) / wide.size)


def test_snapping_epsilon_formula_and_calibration():
    lam, b = 3.0, 1000.0
    expect = (1 + Fraction(2, 2**53) * b) * (1 + Fraction(16, 2**53) * b) / Fraction(lam) + Fraction(2, 2**53)
    eps = snapping_epsilon(lam, b)
    assert Fraction(eps) >= expect and eps == pytest.approx(float(expect), rel=1e-15)
    assert eps > 1 / lam  # "slightly above 1/lambda"
    assert eps - 1 / lam < 2**-48 * b / lam + 2**-51
    for epsilon, bound, sens in [(1.0, 10.0, 1.0), (0.5, 1e6, 1.0), (2.0, 50.0, 0.3)]:
        lam = snapping_scale(epsilon, bound, sens)
        got = snapping_epsilon(lam / sens, bound / sens)
        assert got <= epsilon * (1 + 1e-15)
        assert got >= epsilon * (1 - 1e-12)


def test_snapping_dtypes_shapes_reproducibility_and_secure_rng():
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    a = snapping(x, 1.0, 1.0, 5.0, rng=9)
    assert a.shape == (3, 4) and a.dtype == np.float64
    np.testing.assert_array_equal(a, snapping(x, 1.0, 1.0, 5.0, rng=9))
    assert snapping(x.astype(np.float32), 1.0, 1.0, 5.0, rng=9).dtype == np.float32
    assert np.ndim(snapping(0.5, 1.0, 1.0, 5.0, rng=9)) == 0
    assert snapping([1, 2, 3], 1.0, 1.0, 5.0, rng=SecureRandom()).shape == (3,)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(epsilon=0.0), ValueError, "epsilon must be > 0"),
        (dict(epsilon=float("nan")), ValueError, "epsilon"),
        (dict(epsilon=float("inf")), ValueError, "finite"),
        (dict(epsilon=1e-17), ValueError, "2\\*\\*-52"),
        (dict(bound=0.0), ValueError, "bound must be > 0"),
        (dict(sensitivity=-1.0), ValueError, "sensitivity must be > 0"),
        (dict(values=[np.nan]), ValueError, "NaN"),
        (dict(values="abc"), TypeError, "numeric"),
        (dict(epsilon=100.0, bound=1e14), ValueError, "2\\*\\*46"),
    ],
)
def test_snapping_errors(kwargs, exc, match):
    args = dict(values=[0.0], sensitivity=1.0, epsilon=1.0, bound=10.0, rng=0)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        snapping(**args)


def test_snapping_epsilon_and_scale_errors():
    with pytest.raises(ValueError, match="scale < bound"):
        snapping_epsilon(2.0, 1.0)
    with pytest.raises(ValueError, match="2\\*\\*46"):
        snapping_epsilon(1.0, 2.0**47)
    with pytest.raises(ValueError, match="scale must be > 0"):
        snapping_epsilon(0.0, 1.0)
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        snapping_scale(-1.0, 1.0)


def test_snapping_binding_checks():
    cap = np.random.default_rng(0).bit_generator.capsule
    x = np.zeros(3)
    with pytest.raises(ValueError, match="power of two"):
        _exact.snapping_fill(cap, x, 1.0, 1.5, 10.0, np.empty(3))
    with pytest.raises(ValueError, match="power of two"):
        _exact.snapping_fill(cap, x, 3.0, 2.0, 10.0, np.empty(3))
    with pytest.raises(ValueError, match="lambda"):
        _exact.snapping_fill(cap, x, -1.0, 2.0, 10.0, np.empty(3))
    with pytest.raises(ValueError, match="bound"):
        _exact.snapping_fill(cap, x, 1.0, 2.0, float("inf"), np.empty(3))
    with pytest.raises(ValueError, match="same size"):
        _exact.snapping_fill(cap, x, 1.0, 2.0, 10.0, np.empty(4))


def test_inputs_are_clamped_to_the_requested_bound_even_when_widened():
    # B = 1 < lambda ~ 10: an input of 50 must act like 1, not like the internal bound 2 lambda
    a = snapping(np.full(200_000, 50.0), 1.0, 0.1, 1.0, rng=12)
    b = snapping(np.full(200_000, 1.0), 1.0, 0.1, 1.0, rng=12)
    np.testing.assert_array_equal(a, b)
