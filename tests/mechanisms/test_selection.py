"""Report-noisy-max, exponential mechanism, top-k, streaming (dpfast.mechanisms.selection).

Laws are checked by chi-square at fixed seeds against probabilities computed here,
independently of the kernel: softmax for the exponential mechanism / Gumbel noise
(lectures.md B7, B8), the permute-and-flip law for exponential noise (mechanisms.md
"Report-noisy-max"), and a quadrature for Laplace noise.  Each law test also checks that a
wrong law (e.g. the missing factor 2) is rejected by the same samples, so the tests can fail.
"""
import itertools
import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpfast.mechanisms.selection import (
    ExponentialMechanismStream,
    exponential_mechanism,
    exponential_mechanism_stream,
    report_noisy_max,
    top_k,
)
from dpfast.random import SecureRandom

ALPHA = 1e-3  # per-test false-alarm rate of the fixed-seed goodness-of-fit tests


def softmax(z):
    z = np.asarray(z, dtype=np.float64)
    w = np.exp(z - z.max())
    return w / w.sum()


def chi2_pvalue(counts, probs):
    counts = np.asarray(counts, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    assert abs(probs.sum() - 1) < 1e-12
    keep = probs > 0
    assert counts[~keep].sum() == 0, "a zero-probability outcome was drawn"
    expected = counts.sum() * probs[keep]
    stat = ((counts[keep] - expected) ** 2 / expected).sum()
    return stats.chi2.sf(stat, keep.sum() - 1)


def draws(fn, u, n_draws, **kw):
    """n_draws independent selections over the candidate vector u, in one batched call."""
    batch = np.broadcast_to(np.asarray(u, dtype=np.float64), (n_draws, len(u)))
    return fn(batch, **kw)


# Independent reference laws ---------------------------------------------------------------
def permute_and_flip_law(s, b):
    """P(i) for argmax_i (s_i + b E_i), E_i ~ Exp(1): p_i * int_0^1 prod_{j!=i} (1 - p_j t) dt
    with p_j = exp((s_j - max s)/b) (substitute t = exp(-(y - max s)/b) in the race integral)."""
    p = np.exp((np.asarray(s, float) - np.max(s)) / b)
    out = []
    for i in range(len(p)):
        poly = np.polynomial.Polynomial([1.0])
        for j in range(len(p)):
            if j != i:
                poly = poly * np.polynomial.Polynomial([1.0, -p[j]])
        anti = poly.integ()
        out.append(p[i] * (anti(1.0) - anti(0.0)))
    return np.array(out)


def laplace_rnm_law(s, b):
    """P(i) = int f(x - s_i) prod_{j != i} F(x - s_j) dx for Laplace(0, b), by quadrature."""
    s = [float(v) for v in s]

    def pdf(x):
        return math.exp(-abs(x) / b) / (2 * b)

    def cdf(x):
        return 0.5 * math.exp(x / b) if x < 0 else 1 - 0.5 * math.exp(-x / b)

    out = []
    for i in range(len(s)):
        def integrand(x, i=i):
            val = pdf(x - s[i])
            for j in range(len(s)):
                if j != i:
                    val *= cdf(x - s[j])
            return val

        pts = list(s)
        val, _ = integrate.quad(integrand, min(s) - 60 * b, max(s) + 60 * b, points=pts, limit=200,
                                epsabs=1e-13, epsrel=1e-12)
        out.append(val)
    return np.array(out)


U5 = np.array([0.0, 1.0, 2.5, 3.0, -1.0])


# Exponential mechanism and Gumbel RNM ------------------------------------------------------
@pytest.mark.parametrize("monotonic", [False, True])
def test_exponential_mechanism_frequencies_are_softmax(monotonic):
    eps, delta_u, n = 1.3, 2.0, 300_000
    out = draws(exponential_mechanism, U5, n, sensitivity=delta_u, epsilon=eps,
                monotonic=monotonic, rng=12345)
    counts = np.bincount(out, minlength=len(U5))
    factor = 1.0 if monotonic else 2.0
    right = softmax(eps * U5 / (factor * delta_u))
    wrong = softmax(eps * U5 / ((3.0 - factor) * delta_u))  # the other convention
    assert chi2_pvalue(counts, right) > ALPHA
    assert chi2_pvalue(counts, wrong) < 1e-12


def test_lectures_two_item_fact():
    # lectures.md H7: gap 10, eps 1: P[B] = 1/(1 + e^5) = 0.0066928509242848554.
    n = 1_000_000
    out = draws(exponential_mechanism, [10.0, 0.0], n, sensitivity=1.0, epsilon=1.0, rng=7)
    p_b = 0.0066928509242848554
    se = math.sqrt(p_b * (1 - p_b) / n)
    assert abs(out.mean() - p_b) < 4 * se
    assert out.mean() < 0.013475893998170934  # the Ex. 7.2 bound


def test_lectures_utility_tail_bound():
    # lectures.md H8 (AW Thm 7.2): |Y| = 1000, Delta = 1, eps = 1, t = log 20:
    # P[u <= OPT - 19.806975105072254] <= 0.05.  Worst case for the bound: one optimum, all
    # other utilities just at the threshold, so the exact probability is 999 e^{-9.90} / (...)
    gap = 2 * (math.log(1000) + math.log(20))
    assert abs(gap - 19.806975105072254) < 1e-12
    u = np.full(1000, -gap)
    u[0] = 0.0
    n = 20_000
    out = draws(exponential_mechanism, u, n, sensitivity=1.0, epsilon=1.0, rng=2)
    p_bad = 999 * math.exp(-gap / 2) / (1 + 999 * math.exp(-gap / 2))
    assert p_bad <= 0.05
    freq = (out != 0).mean()
    assert abs(freq - p_bad) < 4 * math.sqrt(p_bad * (1 - p_bad) / n)


def test_base_measure_law_and_zero_weight_never_chosen():
    mu = np.array([1.0, 0.0, 3.0, 0.5, 2.0])
    n = 200_000
    out = draws(exponential_mechanism, U5, n, sensitivity=1.0, epsilon=1.0, base_measure=mu, rng=3)
    counts = np.bincount(out, minlength=5)
    assert counts[1] == 0
    with np.errstate(divide="ignore"):
        right = softmax(U5 / 2 + np.log(mu))
    assert chi2_pvalue(counts, right) > ALPHA
    assert chi2_pvalue(counts[[0, 2, 3, 4]], softmax(U5[[0, 2, 3, 4]] / 2)) < 1e-12


def test_gumbel_rnm_has_the_exponential_mechanism_law():
    n = 200_000
    out = draws(report_noisy_max, U5, n, sensitivity=1.0, epsilon=2.0, noise="gumbel", rng=11)
    assert chi2_pvalue(np.bincount(out, minlength=5), softmax(U5)) > ALPHA


# Exponential noise = permute-and-flip (not the softmax law) ---------------------------------
def test_exponential_rnm_closed_form_two_items():
    # mechanisms.md test fact: u = (0, 1), eps = 1, Delta = 1, scale b = 2:
    # P(pick 1) = 1 - exp(-1/2)/2 (permute-and-flip: 1/2 + 1/2 (1 - e^{-1/2})).
    n = 1_000_000
    out = draws(report_noisy_max, [0.0, 1.0], n, sensitivity=1.0, epsilon=1.0, noise="exponential", rng=5)
    p1 = 1 - math.exp(-0.5) / 2
    se = math.sqrt(p1 * (1 - p1) / n)
    assert abs(out.mean() - p1) < 4 * se
    p1_softmax = 1 / (1 + math.exp(-0.5))  # what the exponential mechanism would give
    assert abs(out.mean() - p1_softmax) > 20 * se


@pytest.mark.parametrize("monotonic", [False, True])
def test_exponential_rnm_is_permute_and_flip(monotonic):
    eps, delta_u, n = 1.0, 1.0, 300_000
    b = (1.0 if monotonic else 2.0) * delta_u / eps
    out = draws(report_noisy_max, U5, n, sensitivity=delta_u, epsilon=eps, noise="exponential",
                monotonic=monotonic, rng=99)
    counts = np.bincount(out, minlength=5)
    law = permute_and_flip_law(U5, b)
    assert abs(law.sum() - 1) < 1e-12
    assert chi2_pvalue(counts, law) > ALPHA
    assert chi2_pvalue(counts, softmax(U5 / b)) < 1e-12


def test_permute_and_flip_law_matches_the_permute_and_flip_algorithm():
    # The reference law itself, checked against the algorithm of McKenna & Sheldon 2020
    # simulated in plain NumPy: visit candidates in random order, accept r w.p. p_r.
    rng = np.random.default_rng(0)
    b, n = 2.0, 100_000
    p = np.exp((U5 - U5.max()) / b)
    perms = np.argsort(rng.random((n, 5)), axis=1)
    accept = rng.random((n, 5)) < p[perms]
    first = perms[np.arange(n), accept.argmax(axis=1)]  # the best has p = 1, so always accepted
    assert chi2_pvalue(np.bincount(first, minlength=5), permute_and_flip_law(U5, b)) > ALPHA


def test_laplace_rnm_law():
    eps, n = 1.0, 200_000
    b = 2.0 / eps
    out = draws(report_noisy_max, U5, n, sensitivity=1.0, epsilon=eps, noise="laplace", rng=21)
    counts = np.bincount(out, minlength=5)
    law = laplace_rnm_law(U5, b)
    assert abs(law.sum() - 1) < 1e-8
    law = law / law.sum()
    assert chi2_pvalue(counts, law) > ALPHA
    assert chi2_pvalue(counts, laplace_rnm_law(U5, b / 2) / laplace_rnm_law(U5, b / 2).sum()) < 1e-12


# Exactness of the skipping kernel: same words, same index as the plain computation ---------
def _plain(u, c, noise, seed):
    raw = np.random.default_rng(seed).bit_generator.random_raw(u.size) >> np.uint64(12)
    m = raw.astype(np.float64)
    uu = (2 * m + 1) * 2.0**-53
    one_minus = (2.0**53 - 2 * m - 1) * 2.0**-53
    with np.errstate(divide="ignore"):
        if noise == "gumbel":
            nz = -np.log(-np.log(uu))
        elif noise == "exponential":
            nz = -np.log(one_minus)
        else:
            nz = np.where(raw < np.uint64(2**51), np.log(2 * uu), -np.log(2 * one_minus))
    return int(np.argmax(c * u + nz))


@pytest.mark.parametrize("noise", ["gumbel", "exponential", "laplace"])
def test_kernel_equals_plain_argmax_on_the_same_words(noise):
    for seed in range(6):
        r = np.random.default_rng(1000 + seed)
        n = int(r.integers(1, 200_000))
        u = r.normal(scale=r.choice([0.1, 3.0, 50.0]), size=n)
        if seed % 2:
            u = np.sort(u)  # increasing utilities: many record changes
        if seed % 3 == 2:
            u = u + 1e6  # large magnitudes: the skip margins must still be exact
        got = report_noisy_max(u, 1.0, 2.0, noise=noise, rng=seed)
        assert got == _plain(u, 1.0, noise, seed)
    # one heavy candidate (a record that is hard to beat) and many near-ties
    u = np.zeros(100_000)
    u[500] = 30.0
    u[::7] = 1e-12
    for seed in range(3):
        assert report_noisy_max(u, 1.0, 2.0, noise=noise, rng=seed) == _plain(u, 1.0, noise, seed)


# Batching, axis, reproducibility, dtypes ---------------------------------------------------
def test_batched_shapes_and_axis():
    u = np.random.default_rng(0).normal(size=(3, 7, 4))
    assert exponential_mechanism(u, 1, 1, rng=0).shape == (3, 7)
    a = exponential_mechanism(u, 1, 1, axis=1, rng=4)
    assert a.shape == (3, 4) and a.dtype == np.int64 and a.max() < 7
    b = exponential_mechanism(np.moveaxis(u, 1, -1), 1, 1, rng=4)
    np.testing.assert_array_equal(a, b)
    assert isinstance(exponential_mechanism(u[0, 0], 1, 1, rng=0), int)
    assert top_k(u, 2, 1, 1, axis=0, rng=0).shape == (7, 4, 2)


def test_rows_are_independent_selections_in_order():
    u = np.random.default_rng(1).normal(size=(5, 50))
    batched = report_noisy_max(u, 1, 1, rng=8)
    g = np.random.default_rng(8)
    one_by_one = [report_noisy_max(row, 1, 1, rng=g) for row in u]
    np.testing.assert_array_equal(batched, one_by_one)


def test_same_seed_same_output_and_generators():
    u = np.random.default_rng(2).normal(size=(100, 30))
    a = exponential_mechanism(u, 1, 5, rng=42)
    np.testing.assert_array_equal(a, exponential_mechanism(u, 1, 5, rng=42))
    np.testing.assert_array_equal(a, exponential_mechanism(u, 1, 5, rng=np.random.default_rng(42)))
    assert not np.array_equal(a, exponential_mechanism(u, 1, 5, rng=43))
    s = exponential_mechanism(u, 1, 5, rng=SecureRandom())
    assert s.shape == (100,) and (s >= 0).all() and (s < 30).all()


def test_float32_and_int_inputs():
    u = np.random.default_rng(3).normal(size=(20, 100)).astype(np.float32)
    np.testing.assert_array_equal(exponential_mechanism(u, 1, 3, rng=1),
                                  exponential_mechanism(u.astype(np.float64), 1, 3, rng=1))
    counts = np.arange(10) * 3
    assert exponential_mechanism(counts, 1, 100, rng=0) == 9
    assert report_noisy_max(counts.tolist(), 1, 100, noise="laplace", rng=0) == 9


def test_threads_release_the_gil_and_stay_reproducible():
    import threading

    u = np.random.default_rng(4).normal(size=(8, 200_000))
    expected = [exponential_mechanism(u, 1.0, 2.0, rng=s) for s in range(4)]
    results = [None] * 4

    def work(s):
        results[s] = exponential_mechanism(u, 1.0, 2.0, rng=s)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in range(4):
        np.testing.assert_array_equal(results[s], expected[s])
    # one generator shared by threads: its lock serialises the kernels (no crash, valid output)
    g = np.random.default_rng(0)
    shared = [None] * 4
    threads = [threading.Thread(target=lambda s=s: shared.__setitem__(s, exponential_mechanism(u, 1.0, 2.0, rng=g)))
               for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.shape == (8,) and (r >= 0).all() for r in shared)


# Numerical range: huge utilities, many candidates --------------------------------------------
def test_huge_utilities_are_stable():
    n = 200_000
    u = 1e6 + np.array([0.0, -1.0, -2.0])
    out = draws(exponential_mechanism, u, n, sensitivity=1.0, epsilon=1.0, rng=17)
    assert chi2_pvalue(np.bincount(out, minlength=3), softmax([0.0, -0.5, -1.0])) > ALPHA
    # utilities of opposite huge signs: the large one always wins
    assert (draws(exponential_mechanism, [-1e6, 1e6, 0.0], 1000, sensitivity=1.0, epsilon=1.0, rng=1) == 1).all()
    # eps * u / Delta ~ 1e300 is still fine (never exponentiated)
    assert exponential_mechanism([1e300, 0.0, -1e300], 1.0, 1.0, rng=0) == 0
    assert report_noisy_max([1e6, 1e6 + 1], 1.0, 1e-3, noise="laplace", rng=0) in (0, 1)


def test_many_candidates_law_with_one_heavy_candidate():
    # 10^6 candidates of utility 0 and one with exp(c u) = 10^6: it wins w.p. 1/2.
    n, draws_ = 1_000_000, 60
    c = 0.5  # eps = 1, Delta = 1
    u = np.zeros(n + 1)
    u[n // 3] = math.log(n) / c
    g = np.random.default_rng(123)
    wins = sum(exponential_mechanism(u, 1.0, 1.0, rng=g) == n // 3 for _ in range(draws_))
    assert stats.binomtest(wins, draws_, 0.5).pvalue > ALPHA


# Streaming -------------------------------------------------------------------------------------
def test_stream_equals_one_shot_for_any_chunking():
    r = np.random.default_rng(5)
    u = r.normal(scale=4, size=300_001)
    mu = r.random(u.size)
    mu[r.random(u.size) < 0.1] = 0
    for seed in range(4):
        for noise in ("gumbel", "exponential", "laplace"):
            one_shot = report_noisy_max(u, 1.0, 1.0, noise=noise, rng=seed)
            cuts = np.sort(r.choice(np.arange(1, u.size), size=7, replace=False))
            chunks = np.split(u, cuts)
            assert exponential_mechanism_stream(chunks, 1.0, 1.0, noise=noise, rng=seed) == one_shot
        em = exponential_mechanism(u, 1.0, 1.0, base_measure=mu, rng=seed)
        pairs = [(a, b) for a, b in zip(np.split(u, cuts), np.split(mu, cuts))]
        assert exponential_mechanism_stream(pairs, 1.0, 1.0, rng=seed) == em


def test_stream_law_and_memory_interface():
    g = np.random.default_rng(77)
    n = 20_000
    res = np.empty(n, dtype=np.int64)
    for t in range(n):
        s = ExponentialMechanismStream(1.0, 1.3, rng=g)
        s.update(U5[:2]).update(U5[2:3]).update(U5[3:])
        res[t] = s.result()
    assert s.n_candidates == 5
    assert chi2_pvalue(np.bincount(res, minlength=5), softmax(1.3 * U5 / 2)) > ALPHA


@pytest.mark.slow
def test_stream_of_ten_million_candidates_matches_one_shot():
    n, chunk = 10_000_000, 1_000_000

    def chunks():
        for k in range(n // chunk):
            yield np.random.default_rng(k).standard_normal(chunk)

    got = exponential_mechanism_stream(chunks(), 1.0, 4.0, rng=9)
    one = exponential_mechanism(np.concatenate(list(chunks())), 1.0, 4.0, rng=9)
    assert got == one


# top-k -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("monotonic", [False, True])
def test_top_k_is_peeling_exponential_mechanism(monotonic):
    u = np.array([0.0, 1.0, 2.0, 0.5])
    eps, k, n = 2.0, 2, 300_000
    out = top_k(np.broadcast_to(u, (n, 4)), k, 1.0, eps, monotonic=monotonic, rng=31)
    assert out.shape == (n, 2) and (out[:, 0] != out[:, 1]).all()
    pairs = list(itertools.permutations(range(4), 2))
    codes = out[:, 0] * 4 + out[:, 1]
    counts = np.bincount(codes, minlength=16)[[a * 4 + b for a, b in pairs]]

    def peeling(c):
        p = softmax(c * u)
        return np.array([p[a] * p[b] / (1 - p[a]) for a, b in pairs])

    f = 1.0 if monotonic else 2.0
    assert chi2_pvalue(counts, peeling(eps / (f * k))) > ALPHA  # epsilon / k per round
    assert chi2_pvalue(counts, peeling(eps / f)) < 1e-12  # epsilon per round would be k*eps-DP


def test_top_k_order_ties_and_base_measure():
    u = np.arange(20.0)
    np.testing.assert_array_equal(top_k(u, 5, 1.0, 1e6, rng=0), [19, 18, 17, 16, 15])
    np.testing.assert_array_equal(top_k(u, 20, 1.0, 1e9, rng=0), np.arange(20)[::-1])
    mu = np.ones(20)
    mu[19] = 0
    out = top_k(np.broadcast_to(u, (500, 20)), 3, 1.0, 1.0, base_measure=mu, rng=2)
    assert not (out == 19).any()
    with pytest.raises(ValueError, match="at least k"):
        top_k(u, 20, 1.0, 1.0, base_measure=mu)


# Error paths -----------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [exponential_mechanism, report_noisy_max])
def test_bad_privacy_parameters(fn):
    u = [1.0, 2.0]
    for eps in (0, -1.0, float("inf"), float("nan"), np.inf):
        with pytest.raises(ValueError, match="epsilon"):
            fn(u, 1.0, eps)
    for sens in (0, -2, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="sensitivity"):
            fn(u, sens, 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        fn(u, 1.0, [1.0, 2.0])
    with pytest.raises(ValueError, match="overflows"):
        fn([1e300, 1.0], 1e-300, 1.0)
    with pytest.raises(TypeError):
        fn(u, 1.0, 1.0, monotonic="yes")


@pytest.mark.parametrize("fn", [exponential_mechanism, report_noisy_max])
def test_bad_utilities(fn):
    with pytest.raises(ValueError, match="NaN"):
        fn([1.0, np.nan, 2.0], 1, 1)
    with pytest.raises(ValueError, match="NaN"):
        fn(np.array([[1.0, 2.0], [np.nan, 0.0]], dtype=np.float32), 1, 1)
    with pytest.raises(ValueError, match="infinite"):
        fn([1.0, -np.inf], 1, 1)
    with pytest.raises(ValueError, match="no candidates"):
        fn([], 1, 1)
    with pytest.raises(ValueError, match="no candidates"):
        fn(np.zeros((3, 0)), 1, 1)
    with pytest.raises(ValueError, match="at least one dimension"):
        fn(3.0, 1, 1)
    with pytest.raises(ValueError, match="axis"):
        fn([1.0, 2.0], 1, 1, axis=1)
    with pytest.raises(TypeError, match="axis"):
        fn([1.0, 2.0], 1, 1, axis=0.5)
    with pytest.raises(TypeError):
        fn(["a", "b"], 1, 1)
    with pytest.raises(TypeError):
        fn("ab", 1, 1)
    with pytest.raises(TypeError, match="rng"):
        fn([1.0, 2.0], 1, 1, rng="seed")


def test_bad_noise():
    with pytest.raises(ValueError, match="noise must be one of"):
        report_noisy_max([1.0, 2.0], 1, 1, noise="gaussian")
    with pytest.raises(ValueError, match="noise must be one of"):
        ExponentialMechanismStream(1, 1, noise=None)


def test_bad_base_measure():
    u = np.zeros((2, 3))
    with pytest.raises(ValueError, match="non-negative"):
        exponential_mechanism(u, 1, 1, base_measure=[1, -1, 1])
    with pytest.raises(ValueError, match="finite"):
        exponential_mechanism(u, 1, 1, base_measure=[1, np.nan, 1])
    with pytest.raises(ValueError, match="finite"):
        exponential_mechanism(u, 1, 1, base_measure=[1, np.inf, 1])
    with pytest.raises(ValueError, match="positive entry"):
        exponential_mechanism(u, 1, 1, base_measure=[[1, 1, 1], [0, 0, 0]])
    with pytest.raises(ValueError, match="broadcast"):
        exponential_mechanism(u, 1, 1, base_measure=[1, 1])
    with pytest.raises(TypeError):
        exponential_mechanism(u, 1, 1, base_measure="abc")


def test_bad_top_k():
    u = np.arange(5.0)
    for k in (0, 6, -1):
        with pytest.raises(ValueError, match="k must be between"):
            top_k(u, k, 1, 1)
    for k in (2.0, True, "2"):
        with pytest.raises(TypeError, match="k must be an int"):
            top_k(u, k, 1, 1)
    with pytest.raises(ValueError, match="epsilon"):
        top_k(u, 2, 1, 0)
    with pytest.raises(ValueError, match="NaN"):
        top_k([1.0, np.nan], 1, 1, 1)


def test_bad_stream_use():
    s = ExponentialMechanismStream(1.0, 1.0, rng=0)
    with pytest.raises(ValueError, match="no candidates"):
        s.result()
    with pytest.raises(ValueError, match="1-D"):
        s.update(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="NaN"):
        s.update([np.nan])
    with pytest.raises(ValueError, match="does not match"):
        s.update([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="non-negative"):
        s.update([1.0, 2.0], [1.0, -2.0])
    assert s.n_candidates == 0  # failed updates consumed nothing
    s.update([1.0, 2.0], [0.0, 0.0])
    with pytest.raises(ValueError, match="positive entry"):
        s.result()
    with pytest.raises(ValueError, match="epsilon"):
        ExponentialMechanismStream(1.0, -1.0)
    with pytest.raises(ValueError, match="pair"):
        exponential_mechanism_stream([(np.zeros(2), np.ones(2), 1)], 1.0, 1.0)
    with pytest.raises(ValueError, match="no candidates"):
        exponential_mechanism_stream([], 1.0, 1.0)
