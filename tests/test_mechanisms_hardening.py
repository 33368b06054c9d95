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
    # huge epsilon: e^epsilon overflowed (OverflowError); the exact delta is 0 there
    assert discrete_gaussian_delta(1, 1, 1e308) == 0.0
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
