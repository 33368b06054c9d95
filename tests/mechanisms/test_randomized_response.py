"""Randomized response, binary and k-ary (dpfast.mechanisms.randomized_response).

Frequencies are compared with the exact law by chi-square at fixed seeds (10^6 reports);
unbiasedness and the variance formula of the estimator by Monte-Carlo with tolerances of
5 standard errors derived from the number of replicates.
"""
import math

import numpy as np
import pytest
from scipy import stats

from dpfast.mechanisms.randomized_response import (
    randomized_response,
    randomized_response_debias,
    randomized_response_probabilities,
)

ALPHA = 1e-3


def test_probabilities_closed_forms():
    # lectures H1.1: eps = log 3 -> Pr[truth] = 0.75; eps = 1 -> e/(1+e)
    p, q = randomized_response_probabilities(math.log(3))
    assert p == pytest.approx(0.75, rel=1e-15) and q == pytest.approx(0.25, rel=1e-15)
    p, q = randomized_response_probabilities(1.0)
    assert p == pytest.approx(0.7310585786300049, rel=1e-15)
    assert p / q == pytest.approx(math.e, rel=1e-15)  # H1.3: ratio e^eps exactly
    for k in (3, 7, 100):
        for eps in (0.1, 1.0, 5.0, 40.0):
            p, q = randomized_response_probabilities(eps, k)
            assert p == pytest.approx(math.exp(eps) / (math.exp(eps) + k - 1), rel=1e-14)
            assert q == pytest.approx(1 / (math.exp(eps) + k - 1), rel=1e-14)
            assert p + (k - 1) * q == pytest.approx(1.0, rel=1e-15)
            assert p / q == pytest.approx(math.exp(eps), rel=1e-13)
    pa, qa = randomized_response_probabilities(np.array([1.0, 2.0]), 4)
    assert pa.shape == (2,) and qa[1] == pytest.approx(1 / (math.exp(2) + 3))


@pytest.mark.parametrize("eps", [0.3, 1.0, 3.0])
def test_binary_frequencies_exact_law(eps):
    n = 10**6
    bits = np.zeros(n, dtype=bool)
    bits[: n // 4] = True
    out = randomized_response(bits, eps, rng=2024)
    p, q = randomized_response_probabilities(eps)
    # contingency (truth, report) against the exact law
    counts = np.array([
        [np.sum(~bits & ~out), np.sum(~bits & out)],
        [np.sum(bits & ~out), np.sum(bits & out)],
    ]).ravel()
    expected = np.array([[p, q], [q, p]]) * np.array([[3 * n / 4], [n / 4]])
    assert stats.chisquare(counts, expected.ravel()).pvalue > ALPHA


@pytest.mark.parametrize("k,eps", [(3, 0.5), (10, 2.0)])
def test_kary_frequencies_exact_law(k, eps):
    n = 10**6
    truth = np.arange(n) % k
    out = randomized_response(truth, eps, rng=7, categories=k)
    assert out.dtype == truth.dtype
    p, q = randomized_response_probabilities(eps, k)
    # joint table truth x report: p on the diagonal, q elsewhere
    table = np.bincount(truth * k + out, minlength=k * k)
    expected = np.full((k, k), q) + np.eye(k) * (p - q)
    expected *= (n / k)
    assert stats.chisquare(table, expected.ravel()).pvalue > ALPHA


def test_labels_and_dtypes():
    labels = ["red", "green", "blue"]
    vals = np.array(["red", "blue", "blue", "green"] * 1000)
    out = randomized_response(vals, 1.0, rng=1, categories=labels)
    assert out.dtype.kind == "U" and set(np.unique(out)) <= set(labels)
    # labels map to indices in the given order, so the same seed gives the same draws
    idx = np.array([labels.index(v) for v in vals])
    out_idx = randomized_response(idx, 1.0, rng=1, categories=3)
    np.testing.assert_array_equal(out, np.array(labels)[out_idx])
    assert randomized_response(np.array([0, 1], np.uint8), 1.0, rng=0).dtype == np.uint8
    assert randomized_response([0, 1, 1], 1.0, rng=0).dtype == np.int64
    assert randomized_response(np.array([0.0, 1.0]), 1.0, rng=0).dtype == np.float64
    s = randomized_response(True, 1.0, rng=0)
    assert isinstance(s, np.bool_)
    assert randomized_response(True, 1.0, rng=5) == randomized_response([True], 1.0, rng=5)[0]
    assert randomized_response(np.zeros((2, 3, 4), bool), 1.0, rng=0).shape == (2, 3, 4)
    wide = randomized_response(np.zeros(1000, np.uint8), 0.01, rng=0, categories=1000)
    assert wide.dtype == np.int64 and wide.max() > 255
    kb = randomized_response(np.zeros(1000, bool), 0.1, rng=0, categories=3)
    assert kb.dtype == np.int64 and set(np.unique(kb)) == {0, 1, 2}


def test_epsilon_broadcast_and_seed():
    n = 200_000
    eps = np.array([0.2, 1.0, 5.0])
    out = randomized_response(np.ones((n, 3), dtype=bool), eps, rng=3)
    p = randomized_response_probabilities(eps)[0]
    np.testing.assert_array_less(np.abs(out.mean(axis=0) - p), 5 * np.sqrt(p * (1 - p) / n))
    assert randomized_response(1, eps, rng=0).shape == (3,)
    a = randomized_response(np.arange(100) % 4, 1.0, rng=9, categories=4)
    np.testing.assert_array_equal(a, randomized_response(np.arange(100) % 4, 1.0, rng=9, categories=4))
    g = np.random.default_rng(0)
    assert not np.array_equal(randomized_response(np.zeros(100, bool), 1.0, rng=g),
                              randomized_response(np.zeros(100, bool), 1.0, rng=g))


def test_two_categories_equal_binary():
    bits = np.arange(1000) % 2
    np.testing.assert_array_equal(randomized_response(bits, 0.7, rng=4),
                                  randomized_response(bits, 0.7, rng=4, categories=2))
    rep = randomized_response(bits, 0.7, rng=4)
    est = randomized_response_debias(rep, 0.7, categories=2)
    assert est[1] == pytest.approx(randomized_response_debias(rep, 0.7), rel=1e-12)


def test_debias_closed_form():
    # reports with known counts: pi_j = (f_j - q) / (p - q)
    rep = np.array([0] * 50 + [1] * 30 + [2] * 20)
    eps, k = 1.5, 3
    e = math.exp(eps)
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    expect = (np.array([0.5, 0.3, 0.2]) - q) / (p - q)
    np.testing.assert_allclose(randomized_response_debias(rep, eps, categories=k), expect, rtol=1e-13)
    assert randomized_response_debias(rep, eps, categories=k).sum() == pytest.approx(1.0, rel=1e-13)
    # binary, lectures B1: theta_hat = (Ybar - pc/2)/(1 - pc) with pc = 2/(1+e^eps)
    y = np.array([1] * 37 + [0] * 63)
    pc = 2 / (1 + math.exp(eps))
    assert randomized_response_debias(y, eps) == pytest.approx((0.37 - pc / 2) / (1 - pc), rel=1e-13)
    labels = ["x", "y", "z"]
    np.testing.assert_allclose(
        randomized_response_debias(np.array(labels)[rep], eps, categories=labels), expect, rtol=1e-13)


def test_debias_unbiased_binary_and_variance():
    reps, n, theta, eps = 2000, 1000, 0.3, 1.0
    # respondents drawn i.i.d. Bernoulli(theta), as in lectures B1 / E1
    truth = np.random.default_rng(30).random((reps, n)) < theta
    out = randomized_response(truth, eps, rng=31)
    est = np.array([randomized_response_debias(row, eps) for row in out])
    var = (math.exp(eps) / (math.exp(eps) - 1) ** 2 + theta * (1 - theta)) / n  # lectures B1
    assert abs(est.mean() - theta) < 5 * math.sqrt(var / reps)
    # sample variance within 5 standard errors (sd of s^2 ~ var sqrt(2/(reps-1)))
    assert abs(est.var(ddof=1) - var) < 5 * var * math.sqrt(2 / (reps - 1))


def test_debias_unbiased_kary():
    reps, n, k, eps = 500, 2000, 4, 0.8
    pi = np.array([0.1, 0.2, 0.3, 0.4])
    truth = np.repeat(np.arange(k), (pi * n).astype(int))
    out = randomized_response(np.tile(truth, (reps, 1)), eps, rng=5, categories=k)
    est = np.array([randomized_response_debias(row, eps, categories=k) for row in out])
    p, q = randomized_response_probabilities(eps, k)
    f = q + (p - q) * pi
    var = f * (1 - f) / (n * (p - q) ** 2)  # exact: multinomial counts of independent reports
    # (per-row reports are independent but not identically distributed; the variance of f_j
    #  is sum_i P_ij(1-P_ij)/n^2 <= f(1-f)/n, so this bound is conservative)
    np.testing.assert_array_less(np.abs(est.mean(axis=0) - pi), 5 * np.sqrt(var / reps))


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------

def test_bad_values():
    with pytest.raises(ValueError, match=r"\{0, 1\}"):
        randomized_response([0, 2], 1.0)
    with pytest.raises(ValueError, match=r"\{0, 1\}"):
        randomized_response([-1, 0], 1.0)
    with pytest.raises(ValueError, match=r"\{0, \.\.\., 2\}"):
        randomized_response([0, 3], 1.0, categories=3)
    with pytest.raises(ValueError, match="non-integral"):
        randomized_response([0.5, 1.0], 1.0)
    with pytest.raises(ValueError, match="NaN"):
        randomized_response([np.nan, 1.0], 1.0)
    with pytest.raises(TypeError):
        randomized_response("0101", 1.0)
    with pytest.raises(TypeError):
        randomized_response(np.array([1 + 0j]), 1.0)
    with pytest.raises(ValueError, match="not among the categories"):
        randomized_response(["a", "d"], 1.0, categories=["a", "b", "c"])


def test_bad_values_name_no_private_value():
    # the entries are private: the refusal says what was violated, not which value broke it
    # (it said "got values in [0, 7777]" and "e.g. 'secret-7777'")
    bits = np.zeros(40, dtype=np.int64)
    bits[17] = 7777
    for kw in ({}, {"categories": 5}):
        with pytest.raises(ValueError) as exc:
            randomized_response(bits, 1.0, **kw)
        assert "7777" not in str(exc.value) and "17" not in str(exc.value)
    with pytest.raises(ValueError, match="not among the categories") as exc:
        randomized_response(["a", "secret-7777", "b"], 1.0, categories=["a", "b", "c"])
    assert "7777" not in str(exc.value)


def test_bad_categories():
    with pytest.raises(ValueError, match=">= 2"):
        randomized_response([0], 1.0, categories=1)
    with pytest.raises(TypeError):
        randomized_response([0], 1.0, categories=True)
    with pytest.raises(TypeError):
        randomized_response([0], 1.0, categories="abc")
    with pytest.raises(ValueError, match="distinct"):
        randomized_response(["a"], 1.0, categories=["a", "a", "b"])
    with pytest.raises(ValueError, match="at least 2"):
        randomized_response(["a"], 1.0, categories=["a"])
    with pytest.raises(ValueError, match="1-D"):
        randomized_response([0], 1.0, categories=[[0, 1], [2, 3]])
    with pytest.raises(TypeError):
        randomized_response_probabilities(1.0, 2.5)


@pytest.mark.parametrize("eps", [0.0, -1.0, np.inf, np.nan])
def test_bad_epsilon(eps):
    with pytest.raises(ValueError, match="epsilon"):
        randomized_response([0, 1], eps)
    with pytest.raises(ValueError, match="epsilon"):
        randomized_response_debias([0, 1], eps)


def test_debias_errors_and_broadcast_errors():
    with pytest.raises(ValueError, match="empty"):
        randomized_response_debias([], 1.0)
    with pytest.raises(ValueError, match="scalar"):
        randomized_response_debias([0, 1], [1.0, 2.0])
    with pytest.raises(ValueError, match="broadcast"):
        randomized_response(np.zeros(3, bool), [1.0, 2.0])
    with pytest.raises(TypeError, match="rng"):
        randomized_response([0, 1], 1.0, rng=1.5)


def test_binary_is_a_function_of_the_words():
    eps = 0.9
    bits = np.arange(5000) % 3 == 0
    words = np.random.default_rng(77).bit_generator.random_raw(bits.size)
    q = 1 / (1 + math.exp(eps))
    thr = np.uint64(math.ceil(q * 2**64))  # ceil(q 2^64): P(flip) = thr / 2^64 >= q
    np.testing.assert_array_equal(randomized_response(bits, eps, rng=77), bits ^ (words < thr))


@pytest.mark.parametrize("categories", [None, 6])
def test_scalar_calls_reproduce_vector_call(categories):
    vals = np.arange(300) % (2 if categories is None else categories)
    g1, g2 = np.random.default_rng(8), np.random.default_rng(8)
    vec = randomized_response(vals, 0.5, rng=g1, categories=categories)
    seq = np.array([randomized_response(int(v), 0.5, rng=g2, categories=categories) for v in vals])
    np.testing.assert_array_equal(vec, seq)
    assert g1.bit_generator.state == g2.bit_generator.state


def test_native_rr_checks_sizes():
    from dpfast import _core

    cap = np.random.default_rng(0).bit_generator.capsule
    with pytest.raises(ValueError):
        _core.rr_binary(cap, np.empty(3, np.uint8), np.zeros(2, np.uint8), np.zeros(1, np.uint64))
    with pytest.raises(ValueError):
        _core.rr_binary(cap, np.empty(3, np.uint8), np.zeros(3, np.uint8), np.zeros(2, np.uint64))
    with pytest.raises(ValueError):
        _core.rr_kary(cap, np.empty(3, np.int64), np.zeros(3, np.int64), 1, np.zeros(1, np.uint64))
    with pytest.raises(ValueError):
        _core.rr_kary(cap, np.empty(3, np.int64), np.zeros(4, np.int64), 3, np.zeros(1, np.uint64))


@pytest.mark.parametrize("k", [2, 3, 7])
@pytest.mark.parametrize("eps", [0.5, 8.0, 20.0, 40.0, 44.0, 45.0, 60.0, 800.0])
def test_flip_threshold_never_exceeds_epsilon(k, eps):
    """Regression: the flip threshold was floor(P_flip 2^64); for eps > ~44.4 that is 0 (the
    truth is always reported: infinite epsilon), and for eps ~ 40 it already exceeded eps.
    The sampled law keeps the truth w.p. 1 - thr/2^64 and each other category w.p.
    thr/(2^64 (k-1)); its privacy loss, computed exactly with integers, must be <= eps."""
    from fractions import Fraction

    from dpfast.mechanisms.randomized_response import _flip_threshold

    _, q = randomized_response_probabilities(eps, k)
    thr = int(_flip_threshold(eps, k))
    assert 1 <= thr < 2**64
    ratio = Fraction((2**64 - thr) * (k - 1), thr)  # P(truth) / P(a given other category)
    # log(ratio) <= eps, allowing only the double rounding of P_flip (relative 1e-15)
    assert math.log(ratio.numerator) - math.log(ratio.denominator) <= eps * (1 + 1e-15) + 1e-15
    # and the flip probability is not needlessly larger than the target (one unit of 2^-64 and
    # the rounding of the double (k - 1) q; test_realised_probabilities_meet_ratio_exactly
    # checks that thr is the smallest admissible threshold)
    fq = Fraction((k - 1) * q)
    assert Fraction(thr, 2**64) - fq <= Fraction(1, 2**64) + fq / 10**15 or thr == 1


# ---------------------------------------------------------------------------------------
# Rounding: the realised probabilities meet the ratio bound exactly (issue 21 item 7c)
# ---------------------------------------------------------------------------------------

import sys  # noqa: E402
from fractions import Fraction  # noqa: E402

_RR = sys.modules["dpfast.mechanisms.randomized_response"]  # the module (the package re-exports the function)


def _exp_bounds(eps: float):
    """Rational (lower, upper) bounds on e^eps from the Taylor series, independent of the code:
    S_N <= e^x <= S_N + t_{N+1} / (1 - x/(N+2)) for 0 <= x < N + 2 (terms t_j = x^j / j!)."""
    x = Fraction(eps)
    s, t, j = Fraction(1), Fraction(1), 0
    while True:
        j += 1
        t = t * x / j
        s += t
        if j > 2 * x + 2 and t < s * Fraction(1, 10**70):
            break
    t_next = t * x / (j + 1)
    return s, s + t_next / (1 - x / (j + 2))


def _kernel_thresholds(monkeypatch, bits, eps, k):
    """The threshold array the mechanism hands to the native kernel (P(flip) = thr / 2^64)."""
    seen = []
    name = "rr_binary" if k == 2 else "rr_kary"
    real = getattr(_RR._core, name)

    def spy(cap, out, src, *rest):
        seen.append(np.array(rest[-1], dtype=np.uint64))
        return real(cap, out, src, *rest)

    monkeypatch.setattr(_RR._core, name, spy)
    randomized_response(bits, eps, rng=0, categories=None if k == 2 else k)
    monkeypatch.undo()
    return seen[0]


# The worst points of a scan of eps in [0.01, 60] on 1181d15 (excess 8e-13 at k = 1000 and
# 7e-10 at k = 10^6), the k, and the ends of the range (threshold 1 from eps ~ 44 / 89).
@pytest.mark.parametrize("k", [2, 1000, 10**6])
@pytest.mark.parametrize("eps", [5e-324, 1e-9, 0.059991666666666665, 0.3, 1.0, 1.0798216666666667,
                                 8.268623333333332, 30.0, 60.0, 88.9, 89.0, 700.0])
def test_realised_probabilities_meet_ratio_exactly(monkeypatch, k, eps):
    thr = int(_kernel_thresholds(monkeypatch, np.array([0, 1]), eps, k)[0])
    assert 1 <= thr < 2**64
    # kernel: keep w.p. (2^64 - thr)/2^64, each other category w.p. thr/(2^64 (k - 1))
    ratio = Fraction((2**64 - thr) * (k - 1), thr)
    lo, hi = _exp_bounds(eps) if eps < 100 else (Fraction(2) ** 1000, None)
    assert ratio <= lo, f"p'/q' exceeds e^eps at k={k}, eps={eps}"
    if thr > 1:  # and the threshold is the smallest that does: thr - 1 would exceed e^eps
        assert Fraction((2**64 - thr + 1) * (k - 1), thr - 1) > hi


def test_realised_probabilities_array_epsilon(monkeypatch):
    eps = np.array([[0.059991666666666665, 1.0], [1.0798216666666667, 0.059991666666666665]])
    thr = _kernel_thresholds(monkeypatch, np.zeros((2, 2), np.int64), eps, 1000).ravel()
    assert thr.shape == (4,)
    for t, e in zip(thr.tolist(), eps.ravel()):
        assert Fraction((2**64 - t) * 999, t) <= _exp_bounds(float(e))[0]
    assert thr[0] == thr[3] != thr[1]


@pytest.mark.parametrize("k", [2, 1000])
def test_kernel_realises_threshold(monkeypatch, k):
    # The sampler flips iff the next raw 64-bit word w < thr, and a flipped entry becomes the
    # (Lemire) bounded draw o in [0, k - 1) shifted past the truth: replayed here in Python
    # from the raw words of the same PCG64 stream.
    n, eps = 400, 0.5 if k == 2 else 6.0
    truth = np.arange(n) % k
    thr = int(_kernel_thresholds(monkeypatch, truth, eps, k)[0])
    out = randomized_response(truth, eps, rng=np.random.Generator(np.random.PCG64(11)),
                              categories=None if k == 2 else k)
    words = iter(np.random.Generator(np.random.PCG64(11)).bit_generator.random_raw(4 * n).tolist())
    expect = []
    for v in truth.tolist():
        if next(words) >= thr:
            expect.append(v)
            continue
        if k == 2:  # the binary kernel flips the bit, no further word
            expect.append(1 - v)
            continue
        m = (k - 1) * next(words)
        if m % 2**64 < k - 1:
            while m % 2**64 < (2**64 - (k - 1)) % (k - 1):
                m = (k - 1) * next(words)
        o = m >> 64
        expect.append(o + (o >= v))
    np.testing.assert_array_equal(out, expect)
    assert 0 < np.sum(out != truth) < n
