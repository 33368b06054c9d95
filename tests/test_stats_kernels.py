"""dpfast._stats, the one-pass kernels of the toolbox (csrc/stats/): each kernel against an exact
(Fraction / math.fsum) or float64 reference with a tolerance from the summation error bound, and
bit-identity for 1, 2 and 3 threads, for C, Fortran and strided layouts and for float32 vs
float64 input holding the same values.

Error bound used (Higham 2002, Thm 4.3 / eq. 4.4): any summation order of m terms, each computed
with a relative error <= u, lies within (m + 1) u / (1 - (m + 1) u) * sum |t_i| of the exact sum
(u = 2^-53; a product of two rounded factors adds one more u): the tolerances below are that.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from dpfast import _stats

U = 2.0 ** -53
THREADS = (1, 2, 3)


def gamma(m: int) -> float:
    return (m * U) / (1.0 - m * U)


def same_bits(results) -> None:
    first = results[0]
    for r in results[1:]:
        for a, b in zip(first, r):
            if a is None:
                assert b is None
                continue
            a, b = np.asarray(a), np.asarray(b)
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes()


# ----------------------------------------------------------------------------- moments
def _exact_moments(x, lo, hi, c):
    """Fraction sums of y = clamp(x, lo, hi) - c and y^2 per column of a 2-d array."""
    s1, s2 = [], []
    for j in range(x.shape[1]):
        ys = [Fraction(min(max(float(v), lo), hi)) - Fraction(c) for v in x[:, j]]
        s1.append(sum(ys, Fraction(0)))
        s2.append(sum((y * y for y in ys), Fraction(0)))
    return s1, s2


@pytest.mark.parametrize("shape", [(1237, 1), (301, 3), (40, 17)])
def test_moments_against_exact_sums(shape):
    rng = np.random.default_rng(1)
    x = rng.uniform(-2.0, 3.0, shape)
    lo, hi = -1.0, 2.5
    c, r = 0.5 * (lo + hi), 0.5 * (hi - lo)
    s1, s2, cnt, bad = _stats.moments(x, lo, hi, c, r, False, 2, 2)
    assert cnt is None and bad == 0
    e1, e2 = _exact_moments(x, lo, hi, c)
    m = shape[0]
    for j in range(shape[1]):
        a1 = sum(abs(min(max(v, lo), hi) - c) for v in x[:, j])
        assert abs(Fraction(s1[j]) - e1[j]) <= gamma(m + 2) * a1 * 1.01
        # y^2: y carries one rounding (2u relative in y^2), the square one more
        assert abs(Fraction(s2[j]) - e2[j]) <= gamma(m + 4) * float(e2[j]) * 1.01


def test_moments_long_column_fsum_and_threads():
    """Many chunks (10^6 rows > 2^16 per chunk): the merged sum is within the bound of the
    correctly rounded sum (math.fsum of the clamped values and -c), the same for 1, 2, 3 threads."""
    rng = np.random.default_rng(2)
    x = rng.uniform(-0.5, 1.5, (300_001, 1))
    lo, hi = 0.0, 1.0
    c, r = 0.5, 0.5
    res = [_stats.moments(x, lo, hi, c, r, False, 2, t) for t in THREADS]
    same_bits(res)
    y = np.clip(x[:, 0], lo, hi)
    exact = math.fsum(np.concatenate([y, np.full(y.size, -c)]))
    assert abs(res[0][0][0] - exact) <= gamma(x.shape[0] + 2) * float(np.abs(y - c).sum()) * 1.01


def test_moments_sum_mode_and_capped_terms():
    """c = 0, cap = inf: plain clamped sums.  With a centre, every term respects the cap and
    lo <= y + c <= hi (bounds a few ulps apart, where the rounded x - c could exceed both)."""
    x = np.array([[-5.0], [0.25], [7.0]])
    s1, _, _, _ = _stats.moments(x, -1.0, 1.0, 0.0, np.inf, False, 1, 1)
    assert s1[0] == -1.0 + 0.25 + 1.0
    lo, hi = 1060.3046685859608, 1060.304668585962
    c, r = 0.5 * (lo + hi), 0.5 * (hi - lo)
    for v in (0.0, 2000.0):
        s1, s2, _, _ = _stats.moments(np.array([[v]]), lo, hi, c, r, False, 2, 1)
        assert abs(s1[0]) <= r and s2[0] <= r * r * (1 + 4 * U)
        assert lo <= Fraction(s1[0]) + Fraction(c) <= hi


def test_moments_nan_mode_and_non_finite_flag():
    x = np.array([[1.0, np.nan], [np.nan, 2.0], [0.5, 0.25], [3.0, np.nan]])
    s1, s2, cnt, bad = _stats.moments(x, 0.0, 2.0, 0.0, np.inf, True, 2, 1)
    assert bad == 0
    assert cnt.tolist() == [3, 2]
    assert s1.tolist() == [1.0 + 0.5 + 2.0, 2.0 + 0.25]
    assert s2.tolist() == [1.0 + 0.25 + 4.0, 4.0 + 0.0625]
    # a NaN outside the nan forms, or an infinity in them, is reported
    assert _stats.moments(x, 0.0, 2.0, 0.0, np.inf, False, 1, 1)[3] > 0
    x1 = np.array([[1.0], [np.inf]])
    assert _stats.moments(x1, 0.0, 2.0, 0.0, np.inf, True, 1, 1)[3] > 0
    col = np.full((100_003, 1), 0.5)
    col[77_777, 0] = -np.inf
    assert _stats.moments(col, 0.0, 1.0, 0.5, 0.5, False, 1, 3)[3] > 0


@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("shape", [(200_003, 1), (70_001, 5)])
def test_moments_bit_identical_threads_and_dtypes(shape, nan):
    rng = np.random.default_rng(3)
    x32 = rng.uniform(-1.0, 2.0, shape).astype(np.float32)
    if nan:
        x32[rng.random(shape) < 0.1] = np.nan
    x64 = x32.astype(np.float64)
    res = [_stats.moments(x64, 0.0, 1.0, 0.5, 0.5, nan, 2, t) for t in THREADS]
    res.append(_stats.moments(x32, 0.0, 1.0, 0.5, 0.5, nan, 2, 2))
    same_bits(res)


def test_moments_refuses_bad_arguments():
    x = np.zeros((3, 1))
    with pytest.raises(ValueError, match="C-contiguous"):
        _stats.moments(np.asfortranarray(np.zeros((3, 2))), 0.0, 1.0, 0.5, 0.5, False, 1, 1)
    with pytest.raises(TypeError):
        _stats.moments(x.astype(np.int64), 0.0, 1.0, 0.5, 0.5, False, 1, 1)
    with pytest.raises(ValueError, match="order"):
        _stats.moments(x, 0.0, 1.0, 0.5, 0.5, False, 3, 1)
    with pytest.raises(ValueError):
        _stats.moments(x, 1.0, 0.0, 0.5, 0.5, False, 1, 1)


# ----------------------------------------------------------------------------- per-class moments
def _nb_terms(x, lo, hi, c, r):
    return np.clip((np.clip(x, lo, hi) - c) / r, -1.0, 1.0)


def test_class_moments_against_exact_sums():
    rng = np.random.default_rng(4)
    n, d, k = 2000, 4, 3
    x = rng.normal(size=(n, d)) * 3
    lab = rng.integers(0, k, n)
    lo, hi = np.array([-2.0, -1.0, 0.0, -5.0]), np.array([2.0, 3.0, 1.0, 5.0])
    c, r = 0.5 * (lo + hi), 0.5 * (hi - lo)
    cnt, s1, s2 = _stats.class_moments(x, lab, k, lo, hi, c, r, 2)
    u = _nb_terms(x, lo, hi, c, r)  # elementwise: the same roundings as the kernel
    assert cnt.tolist() == np.bincount(lab, minlength=k).tolist()
    for g in range(k):
        rows = u[lab == g]
        for j in range(d):
            e1 = sum((Fraction(v) for v in rows[:, j]), Fraction(0))
            e2 = sum((Fraction(v) * Fraction(v) for v in rows[:, j]), Fraction(0))
            m = rows.shape[0]
            assert abs(Fraction(s1[g, j]) - e1) <= gamma(m) * float(np.abs(rows[:, j]).sum()) * 1.01
            assert abs(Fraction(s2[g, j]) - e2) <= gamma(m + 1) * float(e2) * 1.01


def test_class_moments_bit_identical_threads_layouts_dtypes():
    rng = np.random.default_rng(5)
    n, d, k = 150_001, 6, 4
    x32 = rng.normal(size=(n, d)).astype(np.float32)
    x = x32.astype(np.float64)
    lab = rng.integers(0, k, n)
    lo, hi = np.full(d, -1.5), np.full(d, 1.5)
    c, r = np.zeros(d), np.full(d, 1.5)
    res = [_stats.class_moments(x, lab, k, lo, hi, c, r, t) for t in THREADS]
    res.append(_stats.class_moments(np.asfortranarray(x), lab, k, lo, hi, c, r, 2))
    res.append(_stats.class_moments(x32, lab, k, lo, hi, c, r, 3))
    wide = np.zeros((n, 2 * d))
    wide[:, ::2] = x
    res.append(_stats.class_moments(wide[:, ::2], lab, k, lo, hi, c, r, 2))
    same_bits(res)


def test_class_moments_refuses_labels_out_of_range():
    x = np.zeros((3, 2))
    z = np.zeros(2)
    with pytest.raises(ValueError, match="class index"):
        _stats.class_moments(x, np.array([0, 2, 1]), 2, z - 1, z + 1, z, z + 1, 1)
    with pytest.raises(ValueError, match="labels"):
        _stats.class_moments(x, np.array([0, 1]), 2, z - 1, z + 1, z, z + 1, 1)


# ----------------------------------------------------------------------------- Gram (PCA, SSP)
def _pca_rows(x, lo, hi, c, R):
    """The PCA row map in NumPy (as dpfast.decomposition.PCA did before the kernel)."""
    y = (np.clip(x, lo, hi) if lo is not None else x) - c
    sq = np.einsum("ij,ij->i", y, y)
    long_ = ~(sq <= R * R)
    if long_.any():
        z = y[long_]
        z = z / np.abs(z).max(axis=1)[:, None]
        z = z / np.sqrt(np.einsum("ij,ij->i", z, z))[:, None]
        y[long_] = z * R
    u = y / R
    nu = np.einsum("ij,ij->i", u, u)
    over = nu > 1.0
    u[over] /= np.nextafter(np.sqrt(nu[over]), np.inf)[:, None]
    return u


def _fsum_gram(A, B):
    return np.array([[math.fsum(A[:, j] * B[:, k]) for k in range(B.shape[1])] for j in range(A.shape[1])])


@pytest.mark.parametrize("box", [True, False])
def test_pca_gram_against_reference(box):
    rng = np.random.default_rng(6)
    n, d = 3000, 5
    x = rng.normal(size=(n, d)) * 0.6
    lo, hi = (np.full(d, -1.0), np.full(d, 1.0)) if box else (None, None)
    c = np.zeros(d) if box else np.full(d, 0.1)
    R = 1.2
    G = _stats.pca_gram(x, lo, hi, c, R, 2)
    u = _pca_rows(x.copy(), lo, hi, c, R)
    ref = _fsum_gram(u, u)
    tol = gamma(n + 8) * _fsum_gram(np.abs(u), np.abs(u)) * 1.01 + 1e-13  # the row maps differ by a few ulps
    iu = np.triu_indices(d)
    assert np.all(np.abs(G[:d, :d][iu] - ref[iu]) <= tol[iu] + 1e-12 * n)
    assert np.allclose(G[:d, d], u.sum(0), rtol=1e-12, atol=1e-12 * n)
    assert G[d, d] == n
    assert np.all(np.tril(G, -1) == 0.0)


@pytest.mark.parametrize("row", [[3.0, 4.0, 0.0], [1e300, -1e300, 1e300], [np.inf, 1.0, -np.inf], [0.3, 0.4, 0.0]])
def test_pca_gram_one_row_has_norm_at_most_one(row):
    """Sensitivity: every mapped row has ||u|| <= 1 exactly (trace of its Gram matrix)."""
    x = np.array([row])
    G = _stats.pca_gram(x, None, None, np.zeros(3), 0.5, 1)
    assert np.trace(G[:3, :3]) <= 1.0
    assert np.all(np.isfinite(G))


def test_ssp_gram_against_reference_and_weights():
    rng = np.random.default_rng(7)
    n, d = 4000, 6
    Z = rng.normal(size=(n, d)) / 3
    y = np.clip(rng.normal(size=n), -1, 1)
    w = rng.uniform(0, 1, n)
    for wv in (None, w):
        G = _stats.ssp_gram(Z, y, wv, 2)
        Zy = np.hstack([Z, y[:, None]])
        W = Zy if wv is None else Zy * wv[:, None]
        ref = _fsum_gram(W, Zy)
        tol = gamma(n + 2) * _fsum_gram(np.abs(W), np.abs(Zy)) * 1.01
        iu = np.triu_indices(d + 1)
        assert np.all(np.abs(G[iu] - ref[iu]) <= tol[iu])


def test_gram_bit_identical_threads_layouts_dtypes():
    rng = np.random.default_rng(8)
    n, d = 120_001, 7
    x32 = rng.uniform(-1, 2, (n, d)).astype(np.float32)
    x = x32.astype(np.float64)
    lo, hi, c = np.zeros(d), np.ones(d), np.full(d, 0.5)
    pca = [_stats.pca_gram(v, lo, hi, c, 1.0, t)
           for v, t in [(x, 1), (x, 2), (x, 3), (np.asfortranarray(x), 2), (x32, 3)]]
    same_bits([(g,) for g in pca])
    y, w = rng.uniform(-1, 1, n), rng.uniform(0, 1, n)
    ssp = [_stats.ssp_gram(v, y, w, t) for v, t in [(x, 1), (x, 2), (x, 3), (np.asfortranarray(x), 3), (x32, 2)]]
    same_bits([(g,) for g in ssp])


# ----------------------------------------------------------------------------- k-means step
def test_kmeans_step_against_reference_and_ties():
    rng = np.random.default_rng(9)
    n, d, k = 5000, 3, 4
    U = rng.uniform(-1, 1, (n, d))
    C = rng.uniform(-1, 1, (k, d))
    lab, cnt, sums = _stats.kmeans_step(U, C, True, True, 2)
    D = ((U[:, None, :] - C[None]) ** 2).sum(-1)
    srt = np.sort(D, axis=1)
    clear = srt[:, 1] - srt[:, 0] > 1e-12  # no near-tie: the label is determined
    assert np.array_equal(lab[clear], np.argmin(D, axis=1)[clear])
    assert cnt.tolist() == np.bincount(lab, minlength=k).tolist()
    for g in range(k):
        rows = U[lab == g]
        ref = np.array([math.fsum(rows[:, j]) for j in range(d)])
        assert np.all(np.abs(sums[g] - ref) <= gamma(rows.shape[0]) * np.abs(rows).sum(0) * 1.01)
    # ties go to the lowest index
    lab, _, _ = _stats.kmeans_step(np.zeros((2, 2)), np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]), True, False, 1)
    assert lab.tolist() == [0, 0]


def test_kmeans_step_bit_identical_threads_layouts_dtypes():
    rng = np.random.default_rng(10)
    n, d, k = 100_003, 4, 5
    U32 = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    Uc = U32.astype(np.float64)
    C = rng.uniform(-1, 1, (k, d))
    res = [_stats.kmeans_step(v, C, True, True, t)
           for v, t in [(Uc, 1), (Uc, 2), (Uc, 3), (np.asfortranarray(Uc), 2), (U32, 3)]]
    same_bits(res)


# ----------------------------------------------------------------------------- histogram
def test_histogram_equals_numpy():
    rng = np.random.default_rng(11)
    x = rng.uniform(-0.5, 1.5, 100_001)
    e = np.linspace(0.0, 1.0, 11)
    x[:12] = np.concatenate([e, [np.nextafter(1.0, 2.0)]])  # every edge, and just past the last
    for uniform in (True, False):
        for t in THREADS:
            h, bad = _stats.histogram(x[:, None], [e], [uniform], t)
            assert bad == 0 and h.dtype == np.int64
            assert np.array_equal(h, np.histogram(x, e)[0])
    edges = np.array([-1.0, 0.0, 0.1, 0.5, 2.0])
    h, _ = _stats.histogram(x[:, None], [edges], [False], 2)
    assert np.array_equal(h, np.histogram(x, edges)[0])
    S = rng.normal(size=(50_000, 3))
    E = [np.linspace(-2, 2, 5), np.array([-1.0, 0.0, 0.3, 3.0]), np.linspace(-1, 1, 8)]
    ref = np.histogramdd(S, bins=E)[0]
    for t in THREADS:
        h, _ = _stats.histogram(S, E, [True, False, True], t)
        assert np.array_equal(h, ref)
    h, _ = _stats.histogram(np.asfortranarray(S).astype(np.float32), E, [True, False, True], 2)
    assert np.array_equal(h, np.histogramdd(S.astype(np.float32).astype(np.float64), bins=E)[0])


def test_histogram_reports_non_finite_and_refuses_bad_edges():
    x = np.array([[0.5], [np.nan], [np.inf]])
    h, bad = _stats.histogram(x, [np.linspace(0, 1, 3)], [True], 1)
    assert bad == 2 and h.tolist() == [0, 1]
    with pytest.raises(ValueError, match="increasing"):
        _stats.histogram(x, [np.array([0.0, 0.0, 1.0])], [False], 1)
    with pytest.raises(ValueError, match="one column per dimension"):
        _stats.histogram(np.zeros((3, 2)), [np.linspace(0, 1, 3)], [True], 1)


# ----------------------------------------------------------------------------- baseline vs AVX2
@pytest.mark.skipif(not _stats.avx2, reason="no AVX2 on this machine: only the baseline build runs")
def test_baseline_and_avx2_builds_give_the_same_bits():
    code = r"""
import hashlib, numpy as np
from dpfast import _stats
rng = np.random.default_rng(0)
x = rng.uniform(-1, 2, (70_001, 7)); y = rng.uniform(-1, 1, 70_001); lab = rng.integers(0, 3, 70_001)
z = np.zeros(7); o = np.ones(7)
out = [_stats.moments(x[:, :1].copy(), 0.0, 1.0, 0.5, 0.5, False, 2, 2)[:2], _stats.moments(x, 0.0, 1.0, 0.5, 0.5, True, 2, 2)[:3],
       _stats.class_moments(x, lab, 3, z, o, z + 0.5, o * 0.5, 2), (_stats.pca_gram(x, z, o, z + 0.5, 1.0, 2),),
       (_stats.ssp_gram(x, y, None, 2),), _stats.kmeans_step(x, x[:4].copy(), True, True, 2)]
h = hashlib.sha256()
for t in out:
    for a in t:
        h.update(np.ascontiguousarray(a).tobytes())
print(h.hexdigest())
"""
    digests = set()
    for flag in ("0", "1"):
        env = dict(os.environ, DPFAST_STATS_NO_AVX2=flag)
        digests.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                   check=True).stdout.strip())
    assert len(digests) == 1



@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("order", [1, 2])
def test_moments_flag_is_exact_for_huge_finite_values(nan, order):
    """The one-column pass flags a chunk when a lane of its unclamped sum is not finite and then
    rescans it: finite values whose sums overflow (or meet +inf and -inf in the fold) are not
    reported; one infinite element (or NaN outside the nan forms) in any position is, per chunk."""
    n = 3 * 65_536 + 11
    x = np.full((n, 1), 1.7e308)
    x[1::2] = -1.7e308
    x[::7] = 0.25
    for t in THREADS:
        s1, s2, cnt, bad = _stats.moments(x, 0.0, 1.0, 0.5, 0.5, nan, order, t)
        assert bad == 0
        assert np.isfinite(s1[0]) and abs(s1[0]) <= 0.5 * n
    for pos in (0, 9, 65_535, 65_536, n - 1):
        y = x.copy()
        y[pos, 0] = np.inf
        assert _stats.moments(y, 0.0, 1.0, 0.5, 0.5, nan, order, 2)[3] == 1
        y[pos, 0] = np.nan
        assert _stats.moments(y, 0.0, 1.0, 0.5, 0.5, nan, order, 2)[3] == (0 if nan else 1)
    y = x.copy()
    y[[3, 70_000, n - 2], 0] = -np.inf  # three chunks
    assert _stats.moments(y, 0.0, 1.0, 0.5, 0.5, nan, order, 3)[3] == 3


def _misaligned(a):
    """A copy of ``a`` whose data pointer is off its item size's alignment (as a buffer unpickled
    from a network frame: dask.distributed's workers get such partitions)."""
    a = np.ascontiguousarray(a)
    buf = np.zeros(a.nbytes + 1, dtype=np.uint8)
    m = np.frombuffer(buf[1:].data, dtype=a.dtype).reshape(a.shape)
    m[...] = a
    assert not m.flags.aligned
    return m


def test_misaligned_arrays_are_read_as_copies():
    """Every kernel takes arrays whose buffer is not aligned (the binding copies them: an unaligned
    typed read is undefined behaviour, which the sanitizer stage refuses) and gives the bits of
    the aligned input."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(1001, 4))
    lab = rng.integers(0, 3, 1001)
    lo, hi = -np.ones(4), np.ones(4)
    c, r = np.zeros(4), np.ones(4)
    y, w = rng.normal(size=1001), rng.uniform(size=1001)
    C = rng.normal(size=(3, 4))
    M = _misaligned
    same_bits([_stats.moments(X, -1.0, 1.0, 0.0, 1.0, False, 2, 2), _stats.moments(M(X), -1.0, 1.0, 0.0, 1.0, False, 2, 2)])
    same_bits([_stats.class_moments(X, lab, 3, lo, hi, c, r, 2),
               _stats.class_moments(M(X), M(lab), 3, M(lo), M(hi), M(c), M(r), 2)])
    same_bits([(_stats.pca_gram(X, lo, hi, c, 2.0, 2),), (_stats.pca_gram(M(X), M(lo), M(hi), M(c), 2.0, 2),)])
    same_bits([(_stats.ssp_gram(X, y, w, 2),), (_stats.ssp_gram(M(X), M(y), M(w), 2),)])
    same_bits([_stats.kmeans_step(X, C, True, True, 2), _stats.kmeans_step(M(X), M(C), True, True, 2)])
    e = [np.linspace(-2, 2, 5), np.linspace(-1, 1, 3)]
    same_bits([_stats.histogram(X[:, :2], e, [True, True], 2),
               _stats.histogram(M(X[:, :2]), [M(v) for v in e], [True, True], 2)])


@pytest.mark.parametrize("nan", [False, True])
def test_moments_columns_flag(nan):
    """d > 1 (the per-column pass): huge finite values are not flagged; one bad element in any
    column is (nan forms: an infinity only), counted per chunk, for any thread count."""
    x = np.full((50_003, 3), 1.7e308)
    x[1::2] = -1.7e308
    for t in THREADS:
        assert _stats.moments(x, 0.0, 1.0, 0.5, 0.5, nan, 2, t)[3] == 0
    rows = x.shape[0]
    for col in range(3):
        for pos in (0, rows // 2, rows - 1):
            y = x.copy()
            y[pos, col] = -np.inf
            assert _stats.moments(y, 0.0, 1.0, 0.5, 0.5, nan, 1, 2)[3] == 1
            y[pos, col] = np.nan
            assert _stats.moments(y, 0.0, 1.0, 0.5, 0.5, nan, 1, 2)[3] == (0 if nan else 1)
