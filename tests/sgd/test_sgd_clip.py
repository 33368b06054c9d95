"""Per-example clipping, ghost norms and O(batch) samplers of dpfast.sgd (spec mechanisms.md, DP-SGD)."""
import time

import numpy as np
import pytest

from dpfast import _clip
from dpfast._loss_table import binary_labels, code as loss_code
from dpfast.random import fill_noise, native_stream
from dpfast.sgd import clip_gradients, clipped_sum, per_example_norms

from _lattices import _fraction_on_lattices, _ziggurat_lattices_2_31


def _grads(rng, B=64, P=33, dtype=np.float64):
    # Norms spread over [0.01, 100] so that about half are clipped at C = 1.
    G = rng.standard_normal((B, P))
    G /= np.linalg.norm(G, axis=1, keepdims=True)
    G *= np.logspace(-2, 2, B)[:, None]
    G[3] = 0.0  # a zero gradient is left alone
    return G.astype(dtype)


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), (np.float32, 1e-6)])
def test_clip_gradients_bounds_and_untouched(dtype, rtol):
    rng = np.random.default_rng(1)
    G = _grads(rng, dtype=dtype)
    C = 1.0
    out = clip_gradients(G, C)
    assert out.dtype == dtype and out.shape == G.shape
    norms = np.linalg.norm(out.astype(np.float64), axis=1)
    assert (norms <= C * (1 + rtol)).all()
    orig = np.linalg.norm(G.astype(np.float64), axis=1)
    small = orig <= C
    assert small.sum() > 10 and (~small).sum() > 10
    np.testing.assert_array_equal(out[small], G[small])  # bit-for-bit
    # Clipped rows keep their direction and have norm C.
    np.testing.assert_allclose(norms[~small], C, rtol=rtol)
    np.testing.assert_allclose(out[~small] * orig[~small, None], G[~small] * C, rtol=10 * rtol, atol=0)


def test_clip_gradients_list_is_flat_clipping():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((20, 3, 4))
    b = rng.standard_normal((20, 5))
    outA, outb = clip_gradients([A, b], 2.0)
    assert outA.shape == A.shape and outb.shape == b.shape
    tot = np.sqrt((outA.reshape(20, -1) ** 2).sum(1) + (outb ** 2).sum(1))
    orig = np.sqrt((A.reshape(20, -1) ** 2).sum(1) + (b ** 2).sum(1))
    np.testing.assert_allclose(tot, np.minimum(orig, 2.0), rtol=1e-12)
    np.testing.assert_allclose(per_example_norms([A, b]), orig, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_clipped_sum_matches_sum_of_clipped(dtype):
    rng = np.random.default_rng(3)
    G = _grads(rng, B=100, P=17, dtype=dtype)
    s, norms = clipped_sum(G, 0.5, return_norms=True)
    ref = clip_gradients(G.astype(np.float64), 0.5).sum(0)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(s, ref, rtol=tol, atol=tol * 50)
    np.testing.assert_allclose(norms, np.linalg.norm(G.astype(np.float64), axis=1), rtol=1e-12 if dtype == np.float64 else 1e-6)
    # list input gives per-part sums of the flat-clipped gradients
    s1, s2 = clipped_sum([G[:, :5], G[:, 5:]], 0.5)
    np.testing.assert_allclose(np.concatenate([s1, s2]), ref, rtol=tol, atol=tol * 50)


def test_clipped_sum_noise_has_calibrated_variance():
    # Zero gradients: the output is pure noise N(0, (z C)^2).  The sample variance of N draws
    # has relative standard deviation sqrt(2/N); accept 6 of them.
    N = 200_000
    z, C = 1.3, 0.7
    s = clipped_sum(np.zeros((2, N)), C, noise_multiplier=z, rng=5)
    var = s.var()
    assert abs(var / (z * C) ** 2 - 1) < 6 * np.sqrt(2 / N)
    assert abs(s.mean()) < 6 * z * C / np.sqrt(N)
    # deterministic under the seed
    np.testing.assert_array_equal(s, clipped_sum(np.zeros((2, N)), C, noise_multiplier=z, rng=5))


@pytest.mark.parametrize(
    "bad,exc",
    [
        (dict(clip_norm=0.0), ValueError),
        (dict(clip_norm=-1.0), ValueError),
        (dict(clip_norm=np.nan), ValueError),
        (dict(clip_norm="1"), TypeError),
        (dict(G=np.array([[np.nan, 1.0]])), ValueError),
        (dict(G=np.array(["a", "b"])), TypeError),
        (dict(G=np.float64(1.0)), ValueError),
        (dict(G=[np.zeros((3, 2)), np.zeros((4, 2))]), ValueError),
    ],
)
def test_clip_validation(bad, exc):
    G = bad.get("G", np.ones((3, 2)))
    C = bad.get("clip_norm", 1.0)
    with pytest.raises(exc):
        clip_gradients(G, C)


def test_clipped_sum_noise_validation():
    with pytest.raises(ValueError):
        clipped_sum(np.ones((2, 2)), 1.0, noise_multiplier=-1.0)
    with pytest.raises(TypeError):
        clipped_sum(np.ones((2, 2)), 1.0, noise_multiplier="1")


# ---------------------------------------------------------------- GLM fused kernel vs NumPy


def _glm_reference(X, y, W, b, loss):
    """Materialized per-example gradients (B, d+1, K) of the GLM (NumPy reference; logistic
    labels y in {0, 1}: dl/dz = sigmoid(z) - y)."""
    Z = X @ W + (b if b is not None else 0)
    if loss == "softmax":
        P = np.exp(Z - Z.max(1, keepdims=True))
        P /= P.sum(1, keepdims=True)
        G = P.copy()
        G[np.arange(len(y)), y] -= 1
    elif loss == "logistic":
        G = (1 / (1 + np.exp(-Z[:, 0])) - y)[:, None]
    else:
        G = (Z[:, 0] - y)[:, None]
    Xa = np.hstack([X, np.ones((X.shape[0], 1))]) if b is not None else X
    return np.einsum("ij,ik->ijk", Xa, G)  # (B, d[+1], K)


@pytest.mark.parametrize("loss,K", [("logistic", 1), ("squared", 1), ("softmax", 4)])
@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_glm_norms_and_clipped_sum_match_materialized(loss, K, intercept, dtype):
    rng = np.random.default_rng(10 + loss_code(loss))
    n, d, C = 50, 6, 0.8
    X = (rng.standard_normal((n, d)) * rng.uniform(0.1, 2, (n, 1))).astype(dtype)
    y01 = None
    if loss == "softmax":
        yl, yr = rng.integers(0, K, n).astype(np.int64), None
    elif loss == "logistic":
        y01 = rng.integers(0, 2, n)
        yl, yr = None, binary_labels(loss, y01).astype(dtype)
    else:
        yl, yr = None, (3 * rng.standard_normal(n)).astype(dtype)
    W = rng.standard_normal((d, K)).astype(dtype)
    b = rng.standard_normal(K).astype(dtype) if intercept else None
    idx = np.array([0, 3, 3, 7, 8, 20, 21, 40, 49], dtype=np.int64)  # repeats allowed
    gW = np.empty((d, K), dtype)
    gb = np.empty(K, dtype) if intercept else None
    norms = np.empty(idx.size)
    factors = np.empty(idx.size)
    _clip.glm_clipped_sum(_clip.Workspace(), X, yr, yl, idx, W, b, loss_code(loss), C, gW, gb, norms, factors)
    f64 = lambda a: None if a is None else a.astype(np.float64)
    ylab = yl if loss == "softmax" else (f64(y01) if loss == "logistic" else f64(yr))
    Gi = _glm_reference(f64(X)[idx], ylab[idx], f64(W), f64(b), loss)
    ref_norms = np.linalg.norm(Gi.reshape(idx.size, -1), axis=1)
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(norms, ref_norms, rtol=rtol)
    np.testing.assert_allclose(factors, np.minimum(1, C / ref_norms), rtol=rtol)
    assert (factors < 1).any() and (factors == 1).any()
    ref_sum = (Gi * factors[:, None, None]).sum(0)
    np.testing.assert_allclose(gW, ref_sum[:d], rtol=10 * rtol, atol=10 * rtol)
    if intercept:
        np.testing.assert_allclose(gb, ref_sum[d], rtol=10 * rtol, atol=10 * rtol)


# ------------------------------------------------------------------------- MLP ghost norms


def _mlp_reference(X, y, params, d, h, K, act):
    W1 = params[: d * h].reshape(d, h)
    b1 = params[d * h: d * h + h]
    W2 = params[d * h + h: d * h + h + h * K].reshape(h, K)
    b2 = params[d * h + h + h * K:]
    pre = X @ W1 + b1
    H = np.maximum(pre, 0) if act == 0 else np.tanh(pre)
    Z = H @ W2 + b2
    P = np.exp(Z - Z.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    G2 = P.copy()
    G2[np.arange(len(y)), y] -= 1
    dH = G2 @ W2.T
    G1 = dH * ((pre > 0) if act == 0 else (1 - H ** 2))
    # explicit per-example gradients of every parameter, flat layout [W1, b1, W2, b2]
    gW1 = np.einsum("ij,ik->ijk", X, G1).reshape(len(y), -1)
    gW2 = np.einsum("ij,ik->ijk", H, G2).reshape(len(y), -1)
    layer1 = np.hstack([gW1, G1])
    layer2 = np.hstack([gW2, G2])
    return layer1, layer2


@pytest.mark.parametrize("act", [0, 1])
@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mlp_ghost_norms_match_materialized(act, mode, dtype):
    rng = np.random.default_rng(20 + act + 2 * mode)
    n, d, h, K = 40, 7, 5, 3
    X = (rng.standard_normal((n, d)) * rng.uniform(0.2, 3, (n, 1))).astype(dtype)
    y = rng.integers(0, K, n).astype(np.int64)
    P = d * h + h + h * K + K
    params = rng.standard_normal(P).astype(dtype)
    idx = np.sort(rng.choice(n, 25, replace=False)).astype(np.int64)
    C = 2.0
    grad = np.empty(P, dtype)
    norms = np.empty(2 * idx.size)
    factors = np.empty(2 * idx.size)
    _clip.mlp_clipped_sum(_clip.Workspace(), X, y, idx, h, K, act, params, C, mode, grad, norms, factors)
    L1, L2 = _mlp_reference(X[idx].astype(np.float64), y[idx], params.astype(np.float64), d, h, K, act)
    n1, n2 = np.linalg.norm(L1, axis=1), np.linalg.norm(L2, axis=1)
    rtol = 1e-12 if dtype == np.float64 else 2e-5
    # softmax saturation makes some gradients tiny (p - 1 cancels): tolerance relative to the largest
    np.testing.assert_allclose(norms[0::2], n1, rtol=rtol, atol=rtol * n1.max())
    np.testing.assert_allclose(norms[1::2], n2, rtol=rtol, atol=rtol * n2.max())
    old_err = np.seterr(divide="ignore")  # a dead relu layer has ghost norm 0 (factor 1)
    if mode == 0:
        f = np.minimum(1, C / np.sqrt(n1 ** 2 + n2 ** 2))
        f1 = f2 = f
    else:
        f1 = np.minimum(1, C / np.sqrt(2) / n1)
        f2 = np.minimum(1, C / np.sqrt(2) / n2)
    np.seterr(**old_err)
    np.testing.assert_allclose(factors[0::2], f1, rtol=rtol)
    np.testing.assert_allclose(factors[1::2], f2, rtol=rtol)
    assert (f1 < 1).any() and (f1 == 1).any()
    c1, c2 = L1 * f1[:, None], L2 * f2[:, None]
    tot = np.sqrt((c1 ** 2).sum(1) + (c2 ** 2).sum(1))
    assert (tot <= C * (1 + 1e-12)).all()
    dh = d * h + h
    np.testing.assert_allclose(grad[:dh], c1.sum(0)[np.r_[0:d * h, d * h:dh]], rtol=10 * rtol, atol=10 * rtol)
    np.testing.assert_allclose(grad[dh:], c2.sum(0), rtol=10 * rtol, atol=10 * rtol)


def test_mlp_forward_matches_reference():
    rng = np.random.default_rng(5)
    n, d, h, K = 30, 4, 6, 3
    X = rng.standard_normal((n, d))
    params = rng.standard_normal(d * h + h + h * K + K)
    out = np.empty((n, K))
    _clip.mlp_forward(X, h, K, 0, params, out)
    W1 = params[: d * h].reshape(d, h)
    b1 = params[d * h: d * h + h]
    W2 = params[d * h + h: d * h + h + h * K].reshape(h, K)
    b2 = params[d * h + h + h * K:]
    np.testing.assert_allclose(out, np.maximum(X @ W1 + b1, 0) @ W2 + b2, rtol=1e-12, atol=1e-12)


def test_kernel_rejects_bad_indices_and_labels():
    X = np.ones((5, 2))
    W = np.zeros((2, 3))
    with pytest.raises(IndexError):
        _clip.glm_clipped_sum(_clip.Workspace(), X, None, np.zeros(5, np.int64), np.array([5], np.int64), W, None,
                              loss_code("softmax"), 1.0, np.empty((2, 3)), None, None, None)
    with pytest.raises(ValueError):
        _clip.glm_clipped_sum(_clip.Workspace(), X, None, np.full(5, 3, np.int64), np.array([1], np.int64), W, None,
                              loss_code("softmax"), 1.0, np.empty((2, 3)), None, None, None)


# ------------------------------------------------------------------------------- samplers


def test_poisson_sample_distribution():
    gen = np.random.default_rng(7)
    n, q, R = 1000, 0.05, 2000
    counts = np.zeros(n)
    sizes = []
    with native_stream(gen) as cap:
        for _ in range(R):
            idx = _clip.poisson_sample(cap, n, q)
            assert (np.diff(idx) > 0).all() and (idx.size == 0 or (idx[0] >= 0 and idx[-1] < n))
            counts[idx] += 1
            sizes.append(idx.size)
    sizes = np.asarray(sizes)
    # batch size ~ Binomial(n, q): mean and variance
    assert abs(sizes.mean() - n * q) < 6 * np.sqrt(n * q * (1 - q) / R)
    assert abs(sizes.var() / (n * q * (1 - q)) - 1) < 6 * np.sqrt(2 / R)
    # every index included with probability q: chi-square over the n cells
    expected = R * q
    chi2 = ((counts - expected) ** 2 / (expected * (1 - q))).sum()
    assert abs(chi2 - n) < 6 * np.sqrt(2 * n)


def test_poisson_sample_is_O_batch():
    # n = 10^12: a pass over n would take hours; geometric skips touch only the batch.
    gen = np.random.default_rng(8)
    n = 10 ** 12
    t = time.perf_counter()
    with native_stream(gen) as cap:
        sizes = [_clip.poisson_sample(cap, n, 256 / n).size for _ in range(200)]
    assert time.perf_counter() - t < 2.0
    assert abs(np.mean(sizes) - 256) < 6 * 16 / np.sqrt(200)
    with native_stream(gen) as cap:
        assert _clip.poisson_sample(cap, 10, 1.0).tolist() == list(range(10))
        assert _clip.poisson_sample(cap, 10, 0.0).size == 0


def test_fixed_sample_uniform_subsets():
    gen = np.random.default_rng(9)
    n, m, R = 50, 10, 5000
    mark = np.zeros(n, np.uint8)
    counts = np.zeros(n)
    with native_stream(gen) as cap:
        for _ in range(R):
            idx = _clip.fixed_sample(cap, n, m, mark)
            assert idx.size == m and (np.diff(idx) > 0).all()
            counts[idx] += 1
    assert not mark.any()
    expected = R * m / n
    chi2 = ((counts - expected) ** 2 / (expected * (1 - m / n))).sum()
    assert abs(chi2 - (n - 1)) < 6 * np.sqrt(2 * n)


def test_dp_sgd_noise_is_standard_normal():
    # The normal sampler behind the DP-SGD noise (dpfast.random.fill_noise, the package's one
    # ziggurat, the same call the estimators make): Kolmogorov-Smirnov against N(0, 1), the tail
    # beyond the ziggurat's base strip r = 3.6542 (sampled by a separate branch), moments.
    from scipy import stats

    N = 400_000
    out = np.empty(N)
    with native_stream(np.random.default_rng(21)) as cap:
        fill_noise(cap, "normal", out)
    assert stats.kstest(out, "norm").pvalue > 1e-4
    r = 3.6541528853610087963519472518
    p_tail = 2 * stats.norm.sf(r)
    assert abs((np.abs(out) > r).mean() - p_tail) < 6 * np.sqrt(p_tail / N)
    assert abs(out.var() - 1) < 6 * np.sqrt(2 / N) and abs(out.mean()) < 6 / np.sqrt(N)
    out32, out64 = np.empty(1000, np.float32), np.empty(1000)
    for o in (out32, out64):
        with native_stream(np.random.default_rng(21)) as cap:
            fill_noise(cap, "normal", o)
    # float32 noise is the float64 variate rounded once (same words)
    np.testing.assert_array_equal(out32, out64.astype(np.float32))
    with pytest.raises(TypeError):
        with native_stream(np.random.default_rng(0)) as cap:
            fill_noise(cap, "normal", np.empty(3, np.int64))


def test_dp_sgd_noise_is_not_on_a_coarse_lattice():
    # Regression: the DP-SGD noise used a 32-bit abscissa, so every draw was a multiple of one of
    # 128 spacings ~1e-9 (a floating-point side channel, see the estimator test
    # test_one_step_release_resists_lattice_attack).  With a 52-bit abscissa a draw lands within
    # 1e-4 of a 2^31-lattice point by chance only: probability 1 - (1 - 2e-4)^128 ~ 2.5%.
    out = np.empty(20_000)
    with native_stream(np.random.default_rng(5)) as cap:
        fill_noise(cap, "normal", out)
    frac = _fraction_on_lattices(out, _ziggurat_lattices_2_31())
    assert frac < 0.05, frac


def test_poisson_gaps_have_full_resolution_in_the_tail():
    # Regression: gaps were floor(log U / log(1-q)) with U on the grid j 2^-53, so a stream whose
    # first 64 bits are zero (probability 2^-64, U < 2^-64 for any sampler reading the bits as a
    # binary expansion) gave the gap of U = 2^-53: P(G >= k) was 0 instead of (1-q)^k beyond
    # (1-q)^k = 2^-53, and off by up to 100% in relative terms just before.  With full relative
    # precision the first gap is >= 64 ln 2 / -log(1-q).  MT19937 with pos = 0 outputs the
    # tempered key words in order (tempering maps 0 to 0), so two zero key words = one zero u64.
    bg = np.random.MT19937(0)
    st = bg.state
    key = np.array(st["state"]["key"], dtype=np.uint32)
    key[:2] = 0
    st["state"]["key"], st["state"]["pos"] = key, 0
    bg.state = st
    n, q = 10 ** 6, 1e-3
    with native_stream(np.random.Generator(bg)) as cap:
        idx = _clip.poisson_sample(cap, n, q)
    assert idx.size == 0 or idx[0] >= np.floor(64 * np.log(2) / -np.log1p(-q))


@pytest.mark.parametrize("dtype,big", [(np.float32, 3e38), (np.float64, 1.7e308)])
def test_one_extreme_record_changes_the_clipped_sum_by_at_most_C(dtype, big):
    # Regression: a record with huge (finite) features overflowed its score or norm; clipping by
    # scaling then computed inf * 0 = NaN and the whole batch sum became NaN (unbounded
    # sensitivity: the record's presence was visible).  Now such an example contributes 0.
    rng = np.random.default_rng(0)
    n, d, C = 20, 4, 1.0
    X = rng.standard_normal((n, d)).astype(dtype)
    X[0] = big
    full, rest = np.arange(n, dtype=np.int64), np.arange(1, n, dtype=np.int64)
    with np.errstate(all="ignore"):
        for loss, K in [("logistic", 1), ("squared", 1), ("softmax", 3)]:
            W, b = np.ones((d, K), dtype), np.zeros(K, dtype)
            yr = binary_labels(loss, rng.integers(0, 2, n)).astype(dtype) if loss != "softmax" else None
            yl = rng.integers(0, K, n).astype(np.int64) if loss == "softmax" else None
            sums = []
            for idx in (full, rest):
                gW, gb = np.empty((d, K), dtype), np.empty(K, dtype)
                _clip.glm_clipped_sum(_clip.Workspace(), X, yr, yl, idx, W, b, loss_code(loss), C, gW, gb, None, None)
                sums.append(np.concatenate([gW.ravel(), gb]).astype(np.float64))
            assert np.isfinite(sums[0]).all(), loss
            assert np.linalg.norm(sums[0] - sums[1]) <= C * (1 + 1e-5), loss
        h, K = 5, 3
        P = d * h + h + h * K + K
        params = rng.standard_normal(P).astype(dtype)
        y = rng.integers(0, K, n).astype(np.int64)
        for mode in (0, 1):
            sums = []
            for idx in (full, rest):
                g = np.empty(P, dtype)
                _clip.mlp_clipped_sum(_clip.Workspace(), X, y, idx, h, K, 0, params, C, mode, g, None, None)
                sums.append(g.astype(np.float64))
            assert np.isfinite(sums[0]).all(), mode
            assert np.linalg.norm(sums[0] - sums[1]) <= C * (1 + 1e-5), mode


@pytest.mark.parametrize("parts", [[(3, 2)], [(3, 2), (4,)], [(0,)]])
def test_an_empty_poisson_batch_clips_to_zeros(parts):
    # Poisson sampling draws an empty batch with probability (1 - q)^n (data dependent): a user's
    # own DP-SGD loop must get its clipped sum (zeros: only the noise is released), not NumPy's
    # "cannot reshape array of size 0" (reshape(0, -1) is ambiguous)
    grads = [np.empty((0,) + s) for s in parts]
    arg = grads if len(grads) > 1 else grads[0]
    assert per_example_norms(arg).shape == (0,)
    clipped = clip_gradients(arg, 1.0)
    total = clipped_sum(arg, 1.0)
    if len(grads) == 1:
        clipped, total = [clipped], [total]
    for g, c, t in zip(grads, clipped, total):
        assert c.shape == g.shape
        np.testing.assert_array_equal(t, np.zeros(g.shape[1:]))
