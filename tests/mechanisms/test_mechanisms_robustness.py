"""Hardening of the mechanisms, samplers and calibration against extreme and malformed input
(issue 15, items 7, 8, 13, 14, 15): exact integer range checks, selection with large utility
offsets, clear ValueError/TypeError instead of ZeroDivisionError/OverflowError/silent changes.

Expected values come from exact integer arithmetic (Python ints), closed-form laws (softmax)
and scipy.stats, never from the code under test.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpfast.mechanisms import (
    discrete_gaussian,
    discrete_gaussian_delta,
    discrete_gaussian_mechanism,
    discrete_gaussian_sigma2,
    discrete_laplace,
    discrete_laplace_mechanism,
    zcdp_delta,
)

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


# ----------------------------------------------------------------------------- item 7: exact lattice checks

def test_int64_minimum_is_refused_not_released():
    # Regression: abs(-2**63) wraps to -2**63 in int64, passed the < 2**53 check, and the value
    # was released unchanged.
    with pytest.raises(ValueError, match=r"values/granularity must be < 2\*\*53"):
        discrete_laplace_mechanism(np.array([-2**63]), 1, 1.0, rng=0)
    with pytest.raises(ValueError, match=r"values/granularity must be < 2\*\*53"):
        discrete_gaussian_mechanism(np.array([-2**63]), 1, 1.0, 1e-5, rng=0)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("mech", ["laplace", "gaussian"])
def test_integer_dtype_extremes(dtype, mech):
    info = np.iinfo(dtype)
    vals = np.array([info.min, info.max], dtype=dtype)
    run = (lambda v, rng: discrete_laplace_mechanism(v, 2, 1.0, rng=rng)) if mech == "laplace" else \
        (lambda v, rng: discrete_gaussian_mechanism(v, 2, 1.0, 1e-6, rng=rng, method="zcdp"))
    fits = max(abs(int(info.min)), int(info.max)) < 2**53
    if not fits:
        with pytest.raises(ValueError, match="values"):
            run(vals, 0)
        return
    out = run(vals, 3)
    # the noise alone, from the same generator state (lattice 0 + noise)
    noise = run(np.zeros(2, dtype=np.int64), 3)
    assert out.dtype == np.int64
    assert [int(o) for o in out] == [int(v) + int(n) for v, n in zip(vals, noise)]


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_integer_extremes_just_inside_and_outside_the_lattice_bound(dtype):
    ok = np.array([2**53 - 1], dtype=dtype)
    assert int(discrete_laplace_mechanism(ok, 1, 50.0, rng=1)[0]) - (2**53 - 1) == \
        int(discrete_laplace_mechanism(np.zeros(1, np.int64), 1, 50.0, rng=1)[0])
    with pytest.raises(ValueError, match=r"< 2\*\*53"):
        discrete_laplace_mechanism(np.array([2**53], dtype=dtype), 1, 1.0, rng=1)
    if dtype == np.uint64:
        with pytest.raises(ValueError, match="values"):
            discrete_laplace_mechanism(np.array([2**64 - 1], dtype=dtype), 1, 1.0, rng=1, granularity=2**40)


def test_rational_granularity_products_are_checked_exactly():
    # k = v * q / p: with q = 3, |v| = 2**62 would need |k| = 3 * 2**62 (int64 wraps)
    with pytest.raises(ValueError, match=r"< 2\*\*53"):
        discrete_laplace_mechanism(np.array([-2**62]), 1, 1.0, rng=0, granularity="1/3")
    # largest accepted: |v| q < 2**53 p  (p = 1, q = 3)
    v = (2**53 - 1) // 3
    out = discrete_laplace_mechanism(np.array([-v], dtype=np.int64), 1, 1.0, rng=2, granularity="1/3")
    noise = discrete_laplace_mechanism(np.zeros(1, np.int64), 1, 1.0, rng=2, granularity="1/3")
    # float output on the lattice Z/3: -v + noise, to double precision
    assert out[0] == pytest.approx(-v + float(noise[0]), rel=2**-52)


def test_large_integer_granularity_saturates_instead_of_wrapping():
    # granularity 2**61, values -2**62 (k = -2): k + noise below -4 would be < -2**63; the output
    # saturates at the most negative multiple of 2**61 that int64 holds (post-processing).
    g = 2**61
    seed = 11
    vals = np.full(2000, -2**62, dtype=np.int64)
    out = discrete_laplace_mechanism(vals, 8 * g, 1.0, rng=seed, granularity=g)
    noise = discrete_laplace(8, size=2000, rng=seed)  # same draws: scale 8 lattice units
    lim = (2**63 - 1) // g
    expect = [max(-lim, min(lim, -2 + int(n))) * g for n in noise]
    assert [int(o) for o in out] == expect
    assert min(expect) == -lim * g  # the saturation was exercised


def test_epsilon_underflow_is_a_value_error():
    # Regression: float(Fraction) in the error message raised OverflowError.
    with pytest.raises(ValueError, match="sensitivity/\\(granularity\\*epsilon\\) must be <= 2\\*\\*40"):
        discrete_laplace_mechanism(np.array([5]), 1, 1e-320, rng=0)
    with pytest.raises(ValueError, match=r"<= 2\*\*40"):
        discrete_laplace_mechanism(np.array([5]), 1e308, 1e-308, rng=0)


# ----------------------------------------------------------------------------- item 14: no silent scale change

@pytest.mark.parametrize("sampler, name", [(discrete_laplace, "scale"), (discrete_gaussian, "sigma2")])
def test_tiny_float_parameter_raises_instead_of_changing_the_law(sampler, name):
    # Regression: 1e-30 became 2**-63 (Laplace) / ~2**-61 (Gaussian) silently.
    with pytest.raises(ValueError, match=f"{name} = 1e-30 cannot be represented"):
        sampler(1e-30, rng=0)
    # small but representable values are still accepted as documented
    sampler(1e-12, size=3, rng=0)


# ----------------------------------------------------------------------------- item 13: accounting helpers

def test_discrete_accounting_helpers_extremes():
    # sensitivity whose square overflows: no "rho must be > 0, got NaN", a clear refusal
    with pytest.raises(ValueError, match="sigma exceeds 2\\*\\*31.*sensitivity=1e\\+308"):
        discrete_gaussian_sigma2(1e308, 1.0, 1e-5)
    with pytest.raises(ValueError, match="sigma exceeds 2\\*\\*31"):
        discrete_gaussian_mechanism(np.array([1]), 1e308, 1.0, 1e-5, rng=0)
    # huge epsilon: e^epsilon overflowed (OverflowError); the exact delta is positive but
    # below the smallest double: the smallest positive double is returned (an upper bound)
    assert discrete_gaussian_delta(1, 1, 1e308) == 5e-324
    # rho-zCDP with huge rho: the trivial delta 1 (was OverflowError)
    assert zcdp_delta(1e308, 1.0) == 1.0
    with pytest.raises(TypeError, match="sensitivity"):
        discrete_gaussian_delta(1, [1], 1.0)
    with pytest.raises(ValueError, match=r"sensitivity must be a positive integer in \[1, 2\*\*53\]"):
        discrete_gaussian_delta(1, float("nan"), 1.0)
    with pytest.raises(TypeError, match="epsilon"):
        zcdp_delta(0.5, "1")


def test_ragged_values_are_a_type_error():
    with pytest.raises(TypeError, match="values must be a rectangular array"):
        discrete_laplace_mechanism([[1, 2], [3]], 1, 1.0, rng=0)


# ----------------------------------------------------------------------------- item 8: large utility offsets

from dpfast.mechanisms import (  # noqa: E402
    ExponentialMechanismStream,
    exponential_mechanism,
    private_quantile,
    report_noisy_max,
    top_k,
)

OFFSET_U = np.array([0.0, 16.0, 32.0]) + 1e17  # issue 15 item 8; doubles near 1e17 are 16 apart
OFFSET_P = np.exp(np.array([0.0, 16.0, 32.0]) / 32.0)  # softmax of eps u / (2 Delta), Delta = 16, eps = 1
OFFSET_P /= OFFSET_P.sum()  # (0.186, 0.307, 0.506)
N_DRAWS = 20000
ALPHA = 1e-4


def _chi2_ok(counts: np.ndarray, p: np.ndarray) -> tuple[bool, float]:
    stat = float(((counts - counts.sum() * p) ** 2 / (counts.sum() * p)).sum())
    return stat < stats.chi2.ppf(1 - ALPHA, df=p.size - 1), stat


def test_chi_square_has_power_against_the_biased_law():
    # The biased frequencies of the issue, (0.23, 0.33, 0.44): at N_DRAWS the expected statistic
    # is N * sum (b - p)^2 / p ~ 400, far above the critical value (~18.4): the test can fail.
    biased = np.array([0.23, 0.33, 0.44])
    assert not _chi2_ok(np.round(biased * N_DRAWS), OFFSET_P)[0]


@pytest.mark.parametrize("how", ["exponential_mechanism", "report_noisy_max", "top_k", "stream", "stream_rising"])
def test_selection_with_large_offset_follows_softmax(how):
    rng = np.random.default_rng(20240515)
    if how == "exponential_mechanism":
        idx = exponential_mechanism(np.broadcast_to(OFFSET_U, (N_DRAWS, 3)), 16.0, 1.0, rng=rng)
    elif how == "report_noisy_max":  # Gumbel noise: the same law
        idx = report_noisy_max(np.broadcast_to(OFFSET_U, (N_DRAWS, 3)), 16.0, 1.0, rng=rng)
    elif how == "top_k":  # the first pick of one-shot top-1 is the exponential mechanism
        idx = top_k(np.broadcast_to(OFFSET_U, (N_DRAWS, 3)), 1, 16.0, 1.0, rng=rng)[:, 0]
    else:
        idx = np.empty(N_DRAWS, dtype=np.int64)
        for t in range(N_DRAWS):
            s = ExponentialMechanismStream(16.0, 1.0, rng=rng)
            if how == "stream":
                s.update(OFFSET_U[:2]).update(OFFSET_U[2:])
            else:  # one candidate per chunk: the reference utility moves up twice
                s.update(OFFSET_U[:1]).update(OFFSET_U[1:2]).update(OFFSET_U[2:])
            idx[t] = s.result()
    counts = np.bincount(idx, minlength=3)
    ok, stat = _chi2_ok(counts, OFFSET_P)
    assert ok, (counts / N_DRAWS, stat)


def test_quantile_with_huge_epsilon_keeps_the_width_weights():
    # x = [0.3] on [0, 1], q = 0.5: both intervals are at distance 0.5 from the target, so the
    # interval is chosen with probability proportional to its width (0.3, 0.7) for EVERY epsilon.
    # With eps/2 = 5e299 the keys were -2.5e299 + noise = -2.5e299: the noise was lost and the
    # first interval always won.
    rng = np.random.default_rng(7)
    n = 4000
    below = sum(private_quantile([0.3], 0.5, 1e300, (0.0, 1.0), rng=rng) < 0.3 for _ in range(n))
    assert stats.binomtest(int(below), n, 0.3).pvalue > ALPHA


# ----------------------------------------------------------------------------- items 13, 14: continuous, calibrate, snapping

from dpfast import calibrate  # noqa: E402
from dpfast.mechanisms import gaussian, gaussian_noise, laplace, laplace_noise, snapping  # noqa: E402


@pytest.mark.parametrize("call", [
    lambda: gaussian(1.0, 1e308, 1.0, 1e-5, rng=0),
    lambda: gaussian(np.ones(2), 1e308, 1.0, 1e-5, rng=0),
    lambda: calibrate.gaussian_sigma(1.0, 1e-5, 1e308),
    lambda: calibrate.gaussian_sigma([1.0, 2.0], 1e-5, 1e308),
    lambda: calibrate.gaussian_sigma(0.5, 1e-5, 1e308, calibration="classical"),
])
def test_gaussian_sigma_overflow_is_a_value_error(call):
    # Regression: ZeroDivisionError (sigma = inf, then sensitivity / sigma = 0 divided into epsilon)
    with pytest.raises(ValueError, match="overflows a double"):
        call()


def test_gaussian_log_delta_domain():
    # Regression: mu = -1 returned -inf (delta 0, "perfect privacy"); mu = 0 raised ZeroDivisionError.
    with pytest.raises(ValueError, match="mu must be >= 0"):
        calibrate.gaussian_log_delta(-1.0, 1.0)
    with pytest.raises(ValueError, match="epsilon must be >= 0"):
        calibrate.gaussian_log_delta(1.0, float("nan"))
    with pytest.raises(TypeError, match="mu must be a real number"):
        calibrate.gaussian_log_delta("1", 1.0)
    assert calibrate.gaussian_log_delta(0.0, 1.0) == -math.inf  # infinite noise: delta = 0
    # the Balle-Wang formula at a regular point, from scipy.stats.norm
    mu, eps = 1.3, 0.7
    ref = stats.norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * stats.norm.cdf(-mu / 2 - eps / mu)
    assert math.exp(calibrate.gaussian_log_delta(mu, eps)) == pytest.approx(ref, rel=1e-12)


def test_gaussian_epsilon_of_vanishing_noise_is_a_value_error():
    # Regression: RuntimeError from the root search (sigma = 1e-320: mu = inf)
    for sigma in (1e-320, 1e-200):
        with pytest.raises(ValueError, match="sensitivity / sigma"):
            calibrate.gaussian_epsilon(sigma, 1e-5)


@pytest.mark.parametrize("kw", [dict(bound=1e308), dict(sensitivity=1e-320)])
def test_snapping_huge_bound_ratio_is_a_value_error(kw):
    # Regression: OverflowError from float(Fraction)
    args = dict(values=1.0, sensitivity=1.0, epsilon=1.0, bound=1.0, rng=0) | kw
    with pytest.raises(ValueError, match="exceeds the double range"):
        snapping(**args)


@pytest.mark.parametrize("call", [
    lambda: laplace_noise(1.0, size=2.7, rng=0),
    lambda: gaussian_noise(1.0, size=(2, 1.5), rng=0),
    lambda: laplace_noise(1.0, size="3", rng=0),
    lambda: laplace_noise(1.0, size=True, rng=0),
    lambda: discrete_laplace(1, size=(2, 1.5), rng=0),
])
def test_non_integer_sizes_are_type_errors(call):
    # Regression: sizes were truncated by int() (2.7 -> 2, (2, 1.5) -> (2, 1))
    with pytest.raises(TypeError, match="size must be None, an int or a tuple of ints"):
        call()


def test_integer_like_sizes_still_work():
    assert laplace_noise(1.0, size=np.int64(3), rng=0).shape == (3,)
    assert gaussian_noise(1.0, size=[2, np.int32(2)], rng=0).shape == (2, 2)
    with pytest.raises(ValueError, match="non-negative"):
        laplace_noise(1.0, size=-1, rng=0)


@pytest.mark.parametrize("call", [
    lambda: laplace_noise(3e38, size=1000, rng=0, dtype=np.float32),
    lambda: gaussian_noise(1e38, size=1000, rng=0, dtype=np.float32),
    lambda: laplace(np.zeros(3, np.float32), 1.0, 1e-37, rng=0),
    lambda: laplace(1.0, 1e307, 1.0, rng=0),
])
def test_scales_whose_noise_overflows_the_dtype_are_refused(call):
    # Regression: float32 laplace_noise(3e38) returned +-inf entries.  Laplace noise reaches
    # 53 ln 2 = 36.7 scales (uniforms on the 2^-53 grid), so 3e38 * 36.7 overflows float32.
    with pytest.raises(ValueError, match="too large for float"):
        call()
    # the largest accepted float32 scale never gives inf
    top = float(np.finfo(np.float32).max) / 40.0
    assert np.isfinite(laplace_noise(top, size=10000, rng=1, dtype=np.float32)).all()


# ----------------------------------------------------------------------------- item 15: memory

import tracemalloc  # noqa: E402

from dpfast.mechanisms import private_median  # noqa: E402


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_scalar_base_measure_is_not_materialized():
    # Regression: a scalar base_measure was broadcast, copied and logged at the utilities' full
    # shape (8 bytes per utility, twice).  4e6 float32 utilities = 16 MB; the float64 copies
    # alone would be 32 MB each.
    u = np.zeros((2000, 2000), dtype=np.float32)
    peak = _peak_bytes(lambda: exponential_mechanism(u, 1.0, 1.0, base_measure=2.0, rng=0))
    assert peak < 8 * u.size / 4, peak  # well below one float64 copy
    # same law as the uniform measure: the same index for the same seed
    v = np.random.default_rng(0).normal(size=(50, 30))
    np.testing.assert_array_equal(exponential_mechanism(v, 1.0, 1.0, base_measure=3.0, rng=4),
                                  exponential_mechanism(v, 1.0, 1.0, rng=4))
    assert top_k(v, 3, 1.0, 1.0, base_measure=np.full(30, 2.0), rng=1).shape == (50, 3)
    with pytest.raises(ValueError, match="positive entry"):
        exponential_mechanism(v, 1.0, 1.0, base_measure=0.0, rng=0)
    with pytest.raises(ValueError, match="does not broadcast"):
        exponential_mechanism(v, 1.0, 1.0, base_measure=np.ones(7), rng=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_private_median_copies_its_input_at_most_once(dtype):
    # Regression: clip and sort each made a copy (plus a float64 conversion for float32).  One
    # float64 buffer of n + 2 edges is the only allocation of the data's size.
    x = np.random.default_rng(0).normal(size=1_000_000).astype(dtype)
    xs = x[::1]
    peak = _peak_bytes(lambda: private_median(xs, 1.0, (-5.0, 5.0), rng=0))
    one_copy = 8 * x.size
    assert peak < 1.5 * one_copy, peak / one_copy


def test_ragged_utilities_are_a_type_error_naming_the_argument():
    with pytest.raises(TypeError, match="utilities must be a rectangular array"):
        exponential_mechanism([[1, 2], [3]], 1.0, 1.0, rng=0)
    with pytest.raises(TypeError, match="scores must be a rectangular array"):
        report_noisy_max([[1, 2], [3]], 1.0, 1.0, rng=0)


# ----------------------------------------------------------------------------- randomized response category range

@pytest.mark.parametrize("k", [2**63, np.uint64(2**63), 2**64 + 5, 2**1100])
def test_categories_beyond_int64_are_a_value_error_naming_the_range(k):
    # Regression: pybind11's "incompatible function arguments" TypeError (or an OverflowError
    # from the probabilities) instead of a message naming categories and the allowed range.
    from dpfast.mechanisms import randomized_response, randomized_response_debias, randomized_response_probabilities

    with pytest.raises(ValueError, match=r"categories must be an int in \[2, 2\*\*63 - 1\]"):
        randomized_response(np.array([0, 1]), 1.0, rng=0, categories=k)
    with pytest.raises(ValueError, match=r"categories must be an int in \[2, 2\*\*63 - 1\]"):
        randomized_response_probabilities(1.0, k)
    with pytest.raises(ValueError, match=r"categories must be an int in \[2, 2\*\*63 - 1\]"):
        randomized_response_debias(np.array([0, 1]), 1.0, categories=k)


def test_largest_category_count_works_and_reports_stay_in_range():
    from dpfast.mechanisms import randomized_response

    k = 2**63 - 1
    out = randomized_response(np.array([0, k - 1, 5]), 1.0, rng=0, categories=k)
    assert out.dtype == np.int64 and all(0 <= int(v) < k for v in out)


def test_debias_with_more_categories_than_memory_is_a_value_error():
    from dpfast.mechanisms import randomized_response_debias

    with pytest.raises(ValueError, match="categories=1000000000000"):
        randomized_response_debias(np.array([0, 1]), 1.0, categories=10**12)


# ----------------------------------------------------------------------------- C2 sweep regressions
# One row per class of result that the sweep (every public name, extreme value per argument)
# found to be neither a value nor a ValueError/TypeError naming the argument.

def _sweep_cases():
    import dpfast.calibrate as C
    import dpfast.mechanisms as M
    from dpfast.random import ChaCha20

    V, I = np.array([0.5, -1.0, 2.0]), np.array([0, 1, 1])
    ragged = [[1.0], [1.0, 2.0]]
    pair = np.array([1.0, 2.0])
    return [
        # (call, exception, pattern naming the argument)
        (lambda: C.gaussian_log_delta(pair, 1.0), TypeError, "mu"),
        (lambda: C.gaussian_log_delta(0.5, pair), TypeError, "epsilon"),
        (lambda: C.gaussian_log_delta(np.array([]), 1.0), TypeError, "mu"),
        (lambda: C.gaussian_delta(2.0, pair), TypeError, "epsilon"),
        (lambda: C.gaussian_delta(2.0, None), TypeError, "epsilon"),
        (lambda: C.gaussian_delta(2.0, "abc"), TypeError, "epsilon"),
        (lambda: C.gaussian_sigma(1.0, 1e-5, 1.0, calibration=pair), TypeError, "calibration"),
        (lambda: M.gaussian(V, 1.0, 1.0, 1e-5, rng=0, calibration=np.array([])), TypeError, "calibration"),
        (lambda: M.discrete_gaussian_sigma2(1.0, 1.0, 1e-5, method=pair), TypeError, "method"),
        (lambda: M.discrete_gaussian_mechanism(I, 1, 1.0, 1e-5, rng=0, method=pair), TypeError, "method"),
        (lambda: M.laplace_noise(1.0, 3, rng=0, dtype="abc"), TypeError, "dtype"),
        (lambda: M.gaussian_noise(1.0, 3, rng=0, dtype=1.0), TypeError, "dtype"),
        (lambda: M.laplace_noise(1.0, ragged, rng=0), TypeError, "size"),
        (lambda: M.discrete_laplace(1.5, ragged, rng=0), TypeError, "size"),
        (lambda: M.bernoulli_exp(0.5, ragged, rng=0), TypeError, "size"),
        (lambda: M.laplace(ragged, 1.0, 1.0, rng=0), TypeError, "values"),
        (lambda: M.gaussian(ragged, 1.0, 1.0, 1e-5, rng=0), TypeError, "values"),
        (lambda: M.snapping(ragged, 1.0, 1.0, 10.0, rng=0), TypeError, "values"),
        (lambda: M.private_median(ragged, 1.0, (-5.0, 5.0), rng=0), TypeError, "x"),
        (lambda: M.private_quantile(ragged, 0.3, 1.0, (-5.0, 5.0), rng=0), TypeError, "x"),
        (lambda: M.randomized_response(ragged, 1.0, rng=0), TypeError, "bits"),
        (lambda: M.randomized_response(I, 1.0, rng=0, categories=ragged), TypeError, "categories"),
        (lambda: M.randomized_response(np.array([0, 5]), 1.0, rng=0, categories=3), ValueError, "bits"),
        (lambda: M.randomized_response_debias(ragged, 1.0), TypeError, "reports"),
        (lambda: M.laplace(V, np.ones((2, 3)).T, 1.0, rng=0), ValueError, "sensitivity"),
        (lambda: M.laplace(V, 1e308, 1.0, rng=0), ValueError, "sensitivity"),
        (lambda: M.gaussian(V, 1.0, np.ones((3, 2)), 1e-5, rng=0), ValueError, "epsilon"),
        (lambda: M.exponential_mechanism_stream(1.0, 1.0, 1.0, rng=0), TypeError, "chunks"),
        (lambda: M.exponential_mechanism_stream(None, 1.0, 1.0, rng=0), TypeError, "chunks"),
        (lambda: M.exponential_mechanism_stream(np.array(1.0), 1.0, 1.0, rng=0), TypeError, "chunks"),
        (lambda: M.exponential_mechanism_stream([], 1.0, 1.0, rng=0), ValueError, "chunks"),
        (lambda: M.exponential_mechanism_stream([np.array(["a"], dtype=object)], 1.0, 1.0, rng=0), TypeError, "chunks"),
        (lambda: M.ExponentialMechanismStream(1.0, 1.0, rng=0).update(V, base_measure=ragged), TypeError, "base_measure"),
        (lambda: ChaCha20(-1), ValueError, "seed"),
        (lambda: ChaCha20(np.array(1.0)), TypeError, "seed"),
        (lambda: ChaCha20(np.True_), TypeError, "seed"),
        (lambda: M.randomized_response_debias(I, 1e-320), ValueError, "epsilon"),
        (lambda: M.discrete_gaussian_sigma2(1e-320, 1.0, 1e-5), None, None),  # a value (was ZeroDivisionError)
        # sensitivity below one lattice unit: neighbours coincide on the lattice, so a (tiny-noise) value
        (lambda: M.discrete_gaussian_mechanism(I, 1e-320, 1.0, 1e-5, rng=0), None, None),
    ]


@pytest.mark.parametrize("case", range(39))
def test_sweep_regressions_raise_value_or_type_error_naming_the_argument(case):
    import warnings

    call, exc, pattern = _sweep_cases()[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning on the way either
        if exc is None:
            call()
            return
        with pytest.raises(exc, match=pattern):
            call()


@pytest.mark.parametrize("call, expect", [
    # extremes where an overflowing term made SciPy's minimizer warn (or a tiny sigma2 overflowed
    # -k^2 / (2 sigma2)); the values are the limits: delta 1 for no privacy, and for huge
    # epsilon the smallest positive double (the exact delta is positive; 0 would claim pure DP)
    (lambda: zcdp_delta(1e308, 1.0), 1.0),
    (lambda: zcdp_delta(0.5, 1e308), 5e-324),
    (lambda: discrete_gaussian_delta(1e-320, 1, 1.0), 1.0),  # (no noise: P[Y > -1/2] = 1)
])
def test_extreme_accounting_values_without_runtime_warnings(call, expect):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert call() == expect


def test_sweep_regressions_table_size():
    assert len(_sweep_cases()) == 39


def test_huge_fraction_arguments_are_a_value_error_naming_the_argument():
    # Regression: Fraction(10**400, 3) -> float64 raised OverflowError from NumPy.

    from dpfast.mechanisms import laplace, randomized_response

    with pytest.raises(ValueError, match="sensitivity"):
        laplace(np.zeros(3), Fraction(10**400, 3), 1.0, rng=1)
    with pytest.raises(ValueError, match="epsilon"):
        randomized_response(np.array([0, 1]), Fraction(10**400, 3), rng=1)


@pytest.mark.parametrize("call", [
    lambda d: d.laplace_noise(1.0, size=2**38),
    lambda d: d.gaussian_noise(1.0, size=(2**20, 2**20), dtype=np.float32),
    lambda d: d.discrete_laplace(2.0, size=(2**20, 2**20)),
])
def test_outputs_larger_than_memory_are_refused_before_allocating(call):
    """Issue 15 item 15: 0.1 asked NumPy for terabytes (MemoryError, or an out-of-memory kill)."""
    import dpfast
    from dpfast._validation import physical_memory

    if physical_memory() is None:  # pragma: no cover - non-POSIX
        pytest.skip("the OS does not report physical memory")
    with pytest.raises(ValueError, match="GiB, more than this machine"):
        call(dpfast)
