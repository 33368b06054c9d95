"""Audit: every exact sampler against its exact law by a chi-square goodness-of-fit test.

Laws are written here from their definitions, not from dpfast's code:

* discrete Laplace Lap_Z(t): P[Y = y] = (1-p)/(1+p) p^|y|, p = e^(-1/t) (Canonne, Kamath &
  Steinke 2020, Def. 27);
* discrete Gaussian N_Z(0, s2): P[Y = y] proportional to exp(-y^2 / (2 s2)) (CKS20, Def. 1),
  normalised by the sum over |y| <= 60 sqrt(s2) + 10 (the rest is below 1e-700);
* Bernoulli(exp(-gamma)) (CKS20, Alg. 1);
* randomized response: truth w.p. e^eps/(e^eps + k - 1), each other category 1/(e^eps + k - 1)
  (Warner 1965; Kairouz, Oh & Viswanath 2014);
* exponential mechanism: P(i) proportional to exp(eps u_i / (2 Delta)) (McSherry & Talwar 2007);
* report-noisy-max with noise of scale b = 2 Delta/eps: P(i) = integral of
  pdf(x - s_i) prod_{j != i} cdf(x - s_j) dx (the definition of the argmax), by quadrature.

Statistics: each test draws N samples (fixed seed for a seeded Generator; fresh OS entropy for
``SecureRandom``) and computes Pearson's statistic over cells with expected count >= 5, the
cells below that merged into one; if that merged cell still expects < 5, it is tested on its
own with an exact binomial upper tail (too many rare outcomes) and added to its neighbour for
the chi-square.  Each test rejects at ALPHA = 1e-5; with fewer than 100 tests in this file the
family-wise false-alarm probability is < 1e-3 (Bonferroni).  Critical values from scipy.stats.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate, stats

from dpfast.mechanisms import (
    bernoulli_exp,
    discrete_gaussian,
    discrete_gaussian_mechanism,
    discrete_laplace,
    discrete_laplace_mechanism,
    exponential_mechanism,
    randomized_response,
    report_noisy_max,
)
from dpfast.random import SecureRandom

from _audit_stats import chi_square_ok as _chi_square_ok

ALPHA = 1e-5
N = 200_000


def _rngs():
    return [pytest.param("seeded", id="seeded"), pytest.param("secure", id="SecureRandom")]


def _make(kind, seed):
    return np.random.default_rng(seed) if kind == "seeded" else SecureRandom()


def chi_square_ok(observed, probs, alpha=ALPHA):
    return _chi_square_ok(observed, probs, alpha)


def _integer_law_check(samples, pmf_of, lo, hi):
    """Cells: each integer in [lo, hi] plus the two tails, with exact tail probabilities."""
    samples = np.asarray(samples).ravel()
    ys = np.arange(lo, hi + 1)
    p_in = np.array([pmf_of(int(y)) for y in ys])
    p_left = pmf_of("left", lo)
    p_right = pmf_of("right", hi)
    probs = np.concatenate([[p_left], p_in, [p_right]])
    obs = np.concatenate([[np.sum(samples < lo)],
                          np.bincount((samples[(samples >= lo) & (samples <= hi)] - lo).astype(np.int64),
                                      minlength=ys.size),
                          [np.sum(samples > hi)]])
    return chi_square_ok(obs, probs / probs.sum())


# ----------------------------------------------------------------------------- discrete Laplace
def _dlap_pmf(t: float):
    p = math.exp(-1.0 / t)
    c = (1 - p) / (1 + p)

    def pmf(y, edge=None):
        if y == "left":  # P[Y < edge] = P[Y > -edge] = c p^(1-edge) / (1-p) for edge <= 0
            return c * p ** (1 - edge) / (1 - p)
        if y == "right":
            return c * p ** (edge + 1) / (1 - p)
        return c * p ** abs(y)

    return pmf


@pytest.mark.parametrize("scale", [Fraction(1, 3), Fraction(1), Fraction(7, 2), Fraction(40)])
@pytest.mark.parametrize("kind", _rngs())
def test_discrete_laplace_law(scale, kind):
    y = discrete_laplace(scale, size=N, rng=_make(kind, 11))
    k = int(math.ceil(12 * float(scale))) + 2
    ok, msg = _integer_law_check(y, _dlap_pmf(float(scale)), -k, k)
    assert ok, msg


@pytest.mark.parametrize("kind", _rngs())
def test_discrete_laplace_mechanism_law(kind):
    """sensitivity 3, epsilon 1/2 on the integers: noise Lap_Z(6) around the value."""
    out = discrete_laplace_mechanism(np.full(N, 5, dtype=np.int64), 3, Fraction(1, 2), rng=_make(kind, 12))
    ok, msg = _integer_law_check(np.asarray(out) - 5, _dlap_pmf(6.0), -80, 80)
    assert ok, msg


# ----------------------------------------------------------------------------- discrete Gaussian
def _dgauss_pmf(s2: float):
    m = int(60 * math.sqrt(s2)) + 10
    ys = np.arange(-m, m + 1, dtype=np.float64)
    w = np.exp(-ys * ys / (2 * s2))
    z = w.sum()

    def pmf(y, edge=None):
        if y == "left":
            return float(w[ys < edge].sum() / z)
        if y == "right":
            return float(w[ys > edge].sum() / z)
        return math.exp(-y * y / (2 * s2)) / z

    return pmf


@pytest.mark.parametrize("s2", [Fraction(1, 4), Fraction(1), Fraction(10, 3), Fraction(200)])
@pytest.mark.parametrize("kind", _rngs())
def test_discrete_gaussian_law(s2, kind):
    y = discrete_gaussian(s2, size=N, rng=_make(kind, 21))
    k = int(math.ceil(6 * math.sqrt(float(s2)))) + 2
    ok, msg = _integer_law_check(y, _dgauss_pmf(float(s2)), -k, k)
    assert ok, msg


@pytest.mark.parametrize("kind", _rngs())
def test_discrete_gaussian_mechanism_law(kind):
    """The mechanism's noise follows N_Z(0, s2) for the s2 it documents (discrete_gaussian_sigma2)."""
    from dpfast.mechanisms import discrete_gaussian_sigma2

    s2 = discrete_gaussian_sigma2(2.0, 1.0, 1e-5, method="zcdp")
    out = discrete_gaussian_mechanism(np.zeros(N, dtype=np.int64), 2, 1.0, 1e-5, rng=_make(kind, 22), method="zcdp")
    k = int(math.ceil(6 * math.sqrt(float(s2)))) + 2
    ok, msg = _integer_law_check(np.asarray(out), _dgauss_pmf(float(s2)), -k, k)
    assert ok, msg


# ----------------------------------------------------------------------------- Bernoulli(exp(-g))
@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(12)])
@pytest.mark.parametrize("kind", _rngs())
def test_bernoulli_exp_law(gamma, kind):
    b = bernoulli_exp(gamma, size=N, rng=_make(kind, 31))
    p = math.exp(-float(gamma))
    ones = int(np.sum(b))
    ok, msg = chi_square_ok([N - ones, ones], [1 - p, p])
    assert ok, msg


# ----------------------------------------------------------------------------- randomized response
@pytest.mark.parametrize("eps", [1e-3, 30.0])
@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("kind", _rngs())
def test_randomized_response_law(eps, k, kind):
    """Truth w.p. e^eps/(e^eps + k - 1), every other category 1/(e^eps + k - 1); inputs cycle
    over all categories so each row of the channel is tested."""
    rng = _make(kind, 41)
    truth = np.arange(N) % k
    if k == 2:
        out = randomized_response(truth.astype(bool), eps, rng=rng).astype(np.int64)
    else:
        out = np.asarray(randomized_response(truth, eps, rng=rng, categories=k), dtype=np.int64)
    hi = 1.0 / (1.0 + (k - 1) * math.exp(-eps))
    lo = math.exp(-eps) * hi
    for a in range(k):
        counts = np.bincount(out[truth == a], minlength=k)
        probs = np.full(k, lo)
        probs[a] = hi
        ok, msg = chi_square_ok(counts, probs, alpha=ALPHA / k)
        assert ok, f"input {a}: {msg}"


# ----------------------------------------------------------------------------- selection
def _softmax(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


def _selection_counts(fn, u, n, **kw):
    idx = fn(np.broadcast_to(np.asarray(u, dtype=np.float64), (n, len(u))), **kw)
    return np.bincount(np.asarray(idx).ravel(), minlength=len(u))


@pytest.mark.parametrize("kind", _rngs())
@pytest.mark.parametrize("utilities,sensitivity,eps", [
    ([0.0, 16.0, 32.0], 16.0, 1.0),
    (np.array([0.0, 16.0, 32.0]) + 1e17, 16.0, 1.0),  # issue 15 item 8: law (0.19, 0.31, 0.51)
    ([-3.0, 0.0, 1.0, 2.5, 2.5], 1.0, 2.0),
    (np.array([1.0, 2.0, 4.0]) * 1e6, 1e6, 3.0),
])
def test_exponential_mechanism_law(utilities, sensitivity, eps, kind):
    u = np.asarray(utilities, dtype=np.float64)
    law = _softmax(eps * (u - u.max()) / (2 * sensitivity))
    counts = _selection_counts(exponential_mechanism, u, N, sensitivity=sensitivity, epsilon=eps,
                               rng=_make(kind, 51))
    ok, msg = chi_square_ok(counts, law)
    assert ok, f"law {np.round(law, 4)}, observed {np.round(counts / N, 4)}: {msg}"


def test_exponential_mechanism_large_offset_law_values():
    """The issue's numbers: [0, 16, 32] + 1e17, sensitivity 16, eps 1 -> (0.19, 0.31, 0.51)."""
    law = _softmax(np.array([0.0, 16.0, 32.0]) / 32.0)
    np.testing.assert_allclose(law, [0.19, 0.31, 0.51], atol=0.01)


@pytest.mark.parametrize("kind", _rngs())
def test_exponential_mechanism_base_measure_and_monotonic_law(kind):
    u = np.array([0.0, 1.0, 2.0, 3.0])
    mu = np.array([4.0, 1.0, 0.0, 2.0])  # the zero-weight candidate is never selected
    law = mu * np.exp(1.5 * u / 1.0)  # monotonic: eps u / Delta
    law /= law.sum()
    counts = _selection_counts(exponential_mechanism, u, N, sensitivity=1.0, epsilon=1.5, monotonic=True,
                               base_measure=mu, rng=_make(kind, 52))
    assert counts[2] == 0
    ok, msg = chi_square_ok(counts[[0, 1, 3]], law[[0, 1, 3]])
    assert ok, msg


def _rnm_law(scores, b, noise):
    """P(argmax_i (s_i + X_i) = i) for i.i.d. X of scale b, by quadrature of the definition."""
    dist = {"gumbel": stats.gumbel_r(scale=b), "exponential": stats.expon(scale=b),
            "laplace": stats.laplace(scale=b)}[noise]
    s = np.asarray(scores, dtype=np.float64)
    lo, hi = s.min() - 80 * b, s.max() + 80 * b
    out = []
    for i in range(s.size):
        others = np.delete(s, i)
        f = lambda x: dist.pdf(x - s[i]) * np.prod(dist.cdf(x - others))  # noqa: E731
        v, _ = integrate.quad(f, lo, hi, points=sorted(set(s.tolist())), limit=400, epsabs=1e-13, epsrel=1e-11)
        out.append(v)
    out = np.array(out)
    assert abs(out.sum() - 1) < 1e-7, out.sum()
    return out / out.sum()


@pytest.mark.parametrize("noise", ["gumbel", "exponential", "laplace"])
@pytest.mark.parametrize("kind", _rngs())
def test_report_noisy_max_law(noise, kind):
    scores = np.array([0.0, 1.0, 1.5, 3.0, 3.0])
    sens, eps = 1.0, 1.2
    law = _rnm_law(scores, 2 * sens / eps, noise)
    counts = _selection_counts(report_noisy_max, scores, N, sensitivity=sens, epsilon=eps, noise=noise,
                               rng=_make(kind, 61))
    ok, msg = chi_square_ok(counts, law)
    assert ok, f"law {np.round(law, 4)}, observed {np.round(counts / N, 4)}: {msg}"


@pytest.mark.parametrize("noise", ["gumbel", "exponential", "laplace"])
def test_report_noisy_max_law_large_offset(noise):
    """Same law after adding 1e17 to every score (issue 15 item 8 for report-noisy-max)."""
    scores = np.array([0.0, 16.0, 32.0])
    sens, eps = 16.0, 1.0
    law = _rnm_law(scores, 2 * sens / eps, noise)
    counts = _selection_counts(report_noisy_max, scores + 1e17, N, sensitivity=sens, epsilon=eps, noise=noise,
                               rng=np.random.default_rng(62))
    ok, msg = chi_square_ok(counts, law)
    assert ok, f"law {np.round(law, 4)}, observed {np.round(counts / N, 4)}: {msg}"
