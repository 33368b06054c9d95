"""dpfast._stats, the one-pass kernels of the toolbox (csrc/stats/): every sum is EXACT on a
fixed-point grid (csrc/stats/stats.hpp "fixed-point grid", dpfast._fixed), so each kernel is
checked bit for bit against a Python reference of its integer terms (q = rint(fl(t S))), for
chunking invariance (split rows add up to the whole), and for bit-identity for 1, 2 and 3
threads, for C, Fortran and strided layouts and for float32 vs float64 input holding the same
values; plus the accumulator on data whose float sum depends on the order (Fraction), a record at
the bound, monotonicity, and the non-finite flags."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from dpfast import _stats

THREADS = (1, 2, 3)


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
# _stats.moments returns EXACT fixed-point sums (dpfast._fixed; csrc/stats/stats.hpp "fixed-point
# grid"): per column sum q(y) and sum q(y^2), q(t) = round_half_even(fl(t S)), S = fl(2^50 / B).
# moments() below passes the bound the toolbox uses (cap, or max(|lo|, |hi|) without one) and
# returns the sums as (2, d) int64 arrays [hi, lo] (for same_bits); ints() makes Python ints.
def _bound(lo, hi, cap):
    return cap if math.isfinite(cap) else max(abs(lo), abs(hi))


def _pair(t):
    return None if t is None else np.stack([t[0], t[1].view(np.int64)])


def moments(x, lo, hi, c, cap, nan, order, threads):
    s1, s2, cnt, bad = _stats.moments(x, lo, hi, c, cap, _bound(lo, hi, cap), nan, order, threads)
    return _pair(s1), _pair(s2), cnt, bad


def ints(t):
    return [int(h) * 2**64 + int(v) % 2**64 for h, v in zip(t[0], t[1])]


def _grid(t, B):
    """The integer q(t) of float64 terms t (NumPy: the same product, np.rint rounds half to even)."""
    S = 0.0 if B == 0 else 2.0**50 / B
    return [int(v) for v in np.rint(np.asarray(t, dtype=np.float64) * S)]


def _terms(x, lo, hi, c, cap):
    ylo, yhi = max(-cap, lo - c), min(cap, hi - c)  # (the test data stay away from y_range's ulp cases)
    return np.clip(np.clip(x, lo, hi) - c, ylo, yhi)


@pytest.mark.parametrize("shape", [(1237, 1), (301, 3), (40, 17), (9001, 2)])
def test_moments_are_the_exact_integer_sums_of_the_grid_terms(shape):
    """Every term is mapped to the grid by itself (q = rint(fl(y S))) and the integers are summed
    exactly: the kernel's sums equal those of the Python reference, bit for bit; so do the
    squares' (grid bound B^2) and the float conversion is the correctly rounded ratio."""
    from dpfast import _fixed

    rng = np.random.default_rng(1)
    x = rng.uniform(-2.0, 3.0, shape)
    lo, hi = -1.0, 2.5
    c, r = 0.5 * (lo + hi), 0.5 * (hi - lo)
    s1, s2, cnt, bad = moments(x, lo, hi, c, r, False, 2, 2)
    assert cnt is None and bad == 0
    y = _terms(x, lo, hi, c, r)
    for j in range(shape[1]):
        e1 = builtins_sum(_grid(y[:, j], r))
        e2 = builtins_sum(_grid(y[:, j] * y[:, j], r * r))
        assert ints(s1)[j] == e1 and ints(s2)[j] == e2
        f = _fixed.to_float([e1], r)[0]
        assert f == float(Fraction(e1) * Fraction(r) / 2**50)
        # and close to the float64 sum of the terms (grid step r 2^-50 per term)
        assert abs(f - math.fsum(y[:, j])) <= shape[0] * r * 2.0**-50


builtins_sum = sum


def test_moments_accumulator_is_exact_where_float_sums_depend_on_the_order():
    """[1e16, 1, -1e16]-like data scaled into the bounds: 8192 terms at the bound B = 1, 8192 at
    one grid step 2^-50 and 8192 at -1.  A float64 sum loses the small terms in one order and
    not in another; the exact sums give the Fraction sum correctly rounded (2^-37) in every order,
    for every thread count and through the release statistic."""
    from dpfast import _fixed

    small = 2.0**-50
    base = np.concatenate([np.ones(8192), np.full(8192, small), -np.ones(8192)])
    exact = Fraction(8192) * Fraction(small)
    orders = [base, base[::-1], np.random.default_rng(0).permutation(base), np.sort(base)]
    floats = {float(np.cumsum(o)[-1]) for o in orders}
    assert len(floats) > 1  # the float sums depend on the order (the test means something)
    for o in orders:
        for t in THREADS:
            s1 = moments(np.ascontiguousarray(o.reshape(-1, 1)), -1.0, 1.0, 0.0, np.inf, False, 1, t)[0]
            assert ints(s1) == [8192]
            assert _fixed.to_float(ints(s1), 1.0)[0] == float(exact) == 2.0**-37
    # [1e16, 1, -1e16] / 1e16 itself: 1e-16 is 0.11 grid steps, its grid value 0: the sum is 0
    s1 = moments(np.array([[1.0], [1e-16], [-1.0]]), -1.0, 1.0, 0.0, np.inf, False, 1, 1)[0]
    assert ints(s1) == [0]


@pytest.mark.parametrize("shape", [(300_001, 1), (70_001, 5)])
def test_moments_invariant_to_threads_and_chunking(shape):
    """The sums of any split of the rows into pieces add up to the sums of the whole (the Dask
    partition invariance at the kernel level), and the same for 1, 2, 3 threads."""
    rng = np.random.default_rng(2)
    x = rng.uniform(-0.5, 1.5, shape)
    res = [moments(x, 0.0, 1.0, 0.5, 0.5, False, 2, t) for t in THREADS]
    same_bits(res)
    whole1, whole2 = ints(res[0][0]), ints(res[0][1])
    for cuts in ([7, 65_537, 65_600], sorted(rng.integers(0, shape[0], 6))):
        parts = np.split(x, cuts)
        p1 = [0] * shape[1]
        p2 = [0] * shape[1]
        for p in parts:
            if p.shape[0]:
                r = moments(np.ascontiguousarray(p), 0.0, 1.0, 0.5, 0.5, False, 2, 1)
                p1 = [a + b for a, b in zip(p1, ints(r[0]))]
                p2 = [a + b for a, b in zip(p2, ints(r[1]))]
        assert p1 == whole1 and p2 == whole2


@pytest.mark.parametrize("bounds", [(-0.1, 0.3), (-1.0, 1.0), (2.0, 7.77), (-1e300, 3.0), (-5e-290, 1e-290),
                                    (-123.456, 0.0)])
def test_a_record_at_the_bound_is_exactly_the_bound(bounds):
    """q(+-B) = +-2^50 (the grid value is the bound itself), |q| <= 2^50 for every term, and q is
    monotone in the term (a sweep through the range, including the ulps next to the bounds)."""
    from dpfast import _fixed

    lo, hi = bounds
    B = max(abs(lo), abs(hi))
    at = hi if abs(hi) >= abs(lo) else lo
    s1 = moments(np.array([[at]]), lo, hi, 0.0, np.inf, False, 1, 1)[0]
    assert abs(ints(s1)[0]) == 2**50
    assert _fixed.to_float(ints(s1), B)[0] == at
    c, r = 0.5 * (lo + hi), 0.5 * (hi - lo)
    if math.isfinite(r) and np.isfinite(r * r) and r * r > 1e-290:
        # the centred forms: a record at the upper bound has y = r (when hi - c rounds to r) and y^2 = B^2
        s1, s2, _, _ = moments(np.array([[hi]]), lo, hi, c, r, False, 2, 1)
        if hi - c == r:
            assert ints(s1) == [2**50] and ints(s2) == [2**50]
    sweep = np.concatenate([np.linspace(lo, hi, 2001), [np.nextafter(hi, -np.inf), np.nextafter(lo, np.inf)],
                            [lo - 1.0, hi + 1.0]])
    sweep.sort()
    qs = [ints(moments(np.array([[v]]), lo, hi, 0.0, np.inf, False, 1, 1)[0])[0] for v in sweep]
    assert all(a <= b for a, b in zip(qs, qs[1:]))
    assert max(abs(q) for q in qs) <= 2**50
    assert qs == _grid(np.clip(sweep, lo, hi), B)


def test_moments_sum_mode_and_capped_terms():
    """c = 0, cap = inf: plain clamped sums (on the grid of 1: exact here).  With a centre, every
    term respects the cap and lo <= y + c <= hi (bounds a few ulps apart, where the rounded
    x - c could exceed both): the grid value stays within [-r, r]."""
    from dpfast import _fixed

    x = np.array([[-5.0], [0.25], [7.0]])
    s1 = moments(x, -1.0, 1.0, 0.0, np.inf, False, 1, 1)[0]
    assert _fixed.to_float(ints(s1), 1.0)[0] == -1.0 + 0.25 + 1.0
    lo, hi = 1060.3046685859608, 1060.304668585962
    c, r = 0.5 * (lo + hi), 0.5 * (hi - lo)
    for v in (0.0, 2000.0):
        s1, s2, _, _ = moments(np.array([[v]]), lo, hi, c, r, False, 2, 1)
        assert abs(ints(s1)[0]) <= 2**50 and 0 <= ints(s2)[0] <= 2**50


def test_moments_uncentred_pass_equals_the_grid_terms_and_flags_every_bad_element():
    """c = 0 (sum, and mean on bounds symmetric about 0): the AVX2 one-column pass skips the
    subtraction x - c; the sums are still the grid terms of clamp(x) (signed zeros, subnormals and
    values at the bounds included), equal for c = 0 and c = -0, and a NaN or infinity in any
    position (the 8-lane body or the remainder) is still reported."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-3, 3, (65_536 + 13, 1))
    x[:12, 0] = [-0.0, 0.0, 5e-324, -5e-324, -2.0, 2.0, 1.5, -1.5, 2.5, -2.5, 1e300, -1e300]
    for lo, hi in ((-2.0, 2.0), (-1.0, 2.5), (0.0, 1.0)):
        B = max(abs(lo), abs(hi))
        want = builtins_sum(_grid(np.clip(x[:, 0], lo, hi), B))
        for c in (0.0, -0.0):
            for t in THREADS:
                s1, _, _, bad = _stats.moments(x, lo, hi, c, np.inf, B, False, 1, t)
                assert bad == 0 and ints(_pair(s1)) == [want]
    for pos in (0, 5, 8 * 4096, 65_536 + 12):
        for v in (np.nan, np.inf, -np.inf):
            y = x.copy()
            y[pos, 0] = v
            assert _stats.moments(y, -2.0, 2.0, 0.0, np.inf, 2.0, False, 1, 1)[3] == 1


def test_moments_nan_mode_and_non_finite_flag():
    """NaN elements add nothing, whatever the bounds (bounds excluding 0 included: a NaN once
    added the lower bound in the one-column pass) and are not counted."""
    from dpfast import _fixed

    x = np.array([[1.0, np.nan], [np.nan, 2.0], [0.5, 0.25], [3.0, np.nan]])
    s1, s2, cnt, bad = moments(x, 0.0, 2.0, 0.0, np.inf, True, 2, 1)
    assert bad == 0
    assert cnt.tolist() == [3, 2]
    assert _fixed.to_float(ints(s1), 2.0).tolist() == [1.0 + 0.5 + 2.0, 2.0 + 0.25]
    assert _fixed.to_float(ints(s2), 4.0).tolist() == [1.0 + 0.25 + 4.0, 4.0 + 0.0625]
    for n in (5, 1001):  # the one-column pass (vector lanes and the remainder)
        col = np.full((n, 1), np.nan)
        col[3, 0] = 3.0
        s1, _, cnt, bad = moments(col, 2.0, 5.0, 0.0, np.inf, True, 1, 1)
        assert bad == 0 and cnt.tolist() == [1]
        assert ints(s1) == _grid([3.0], 5.0)  # 3 on the grid of B = 5 (a NaN adds nothing, not 2)
    # a NaN outside the nan forms, or an infinity in them, is reported
    assert moments(x, 0.0, 2.0, 0.0, np.inf, False, 1, 1)[3] > 0
    x1 = np.array([[1.0], [np.inf]])
    assert moments(x1, 0.0, 2.0, 0.0, np.inf, True, 1, 1)[3] > 0
    col = np.full((100_003, 1), 0.5)
    col[77_777, 0] = -np.inf
    assert moments(col, 0.0, 1.0, 0.5, 0.5, False, 1, 3)[3] > 0


@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("shape", [(200_003, 1), (70_001, 5)])
def test_moments_bit_identical_threads_and_dtypes(shape, nan):
    rng = np.random.default_rng(3)
    x32 = rng.uniform(-1.0, 2.0, shape).astype(np.float32)
    if nan:
        x32[rng.random(shape) < 0.1] = np.nan
    x64 = x32.astype(np.float64)
    res = [moments(x64, 0.0, 1.0, 0.5, 0.5, nan, 2, t) for t in THREADS]
    res.append(moments(x32, 0.0, 1.0, 0.5, 0.5, nan, 2, 2))
    same_bits(res)


def test_moments_refuses_bad_arguments():
    x = np.zeros((3, 1))
    with pytest.raises(ValueError, match="C-contiguous"):
        moments(np.asfortranarray(np.zeros((3, 2))), 0.0, 1.0, 0.5, 0.5, False, 1, 1)
    with pytest.raises(TypeError):
        moments(x.astype(np.int64), 0.0, 1.0, 0.5, 0.5, False, 1, 1)
    with pytest.raises(ValueError, match="order"):
        moments(x, 0.0, 1.0, 0.5, 0.5, False, 3, 1)
    with pytest.raises(ValueError):
        moments(x, 1.0, 0.0, 0.5, 0.5, False, 1, 1)
    with pytest.raises(ValueError, match="grid bound"):  # terms beyond the grid's bound
        _stats.moments(x, -2.0, 2.0, 0.0, np.inf, 1.0, False, 1, 1)
    with pytest.raises(ValueError, match="fixed-point grid"):  # 2^50 / B overflows
        _stats.moments(x, 0.0, 1e-310, 0.0, np.inf, 1e-310, False, 1, 1)


# ----------------------------------------------------------------------------- per-class moments
def _nb_terms(x, lo, hi, c, r):
    return np.clip((np.clip(x, lo, hi) - c) / r, -1.0, 1.0)


def class_moments(x, lab, k, lo, hi, c, r, threads):
    """_stats.class_moments with its exact sums as (2, k d) int64 arrays [hi, lo] (same_bits)."""
    cnt, s1, s2 = _stats.class_moments(x, lab, k, lo, hi, c, r, threads)
    return cnt, _pair(s1), _pair(s2)


def test_class_moments_are_the_exact_integer_sums_of_the_grid_terms():
    """Per class and feature: sum q(u) and sum q(u^2) with q(t) = round(t 2^50) (grid bound 1),
    equal to the Python reference bit for bit; and split rows add up to the whole."""
    rng = np.random.default_rng(4)
    n, d, k = 9000, 4, 3
    x = rng.normal(size=(n, d)) * 3
    lab = rng.integers(0, k, n)
    lo, hi = np.array([-2.0, -1.0, 0.0, -5.0]), np.array([2.0, 3.0, 1.0, 5.0])
    c, r = 0.5 * (lo + hi), 0.5 * (hi - lo)
    cnt, s1, s2 = class_moments(x, lab, k, lo, hi, c, r, 2)
    u = _nb_terms(x, lo, hi, c, r)  # elementwise: the same roundings as the kernel
    assert cnt.tolist() == np.bincount(lab, minlength=k).tolist()
    got1, got2 = ints(s1), ints(s2)
    for g in range(k):
        rows = u[lab == g]
        for j in range(d):
            assert got1[g * d + j] == builtins_sum(_grid(rows[:, j], 1.0))
            assert got2[g * d + j] == builtins_sum(_grid(rows[:, j] * rows[:, j], 1.0))
    p1, p2 = [0] * (k * d), [0] * (k * d)
    for a, b in [(0, 5), (5, 4100), (4100, n)]:
        _, t1, t2 = class_moments(np.ascontiguousarray(x[a:b]), lab[a:b], k, lo, hi, c, r, 1)
        p1 = [v + w for v, w in zip(p1, ints(t1))]
        p2 = [v + w for v, w in zip(p2, ints(t2))]
    assert p1 == got1 and p2 == got2


def test_class_moments_bit_identical_threads_layouts_dtypes():
    rng = np.random.default_rng(5)
    n, d, k = 150_001, 6, 4
    x32 = rng.normal(size=(n, d)).astype(np.float32)
    x = x32.astype(np.float64)
    lab = rng.integers(0, k, n)
    lo, hi = np.full(d, -1.5), np.full(d, 1.5)
    c, r = np.zeros(d), np.full(d, 1.5)
    res = [class_moments(x, lab, k, lo, hi, c, r, t) for t in THREADS]
    res.append(class_moments(np.asfortranarray(x), lab, k, lo, hi, c, r, 2))
    res.append(class_moments(x32, lab, k, lo, hi, c, r, 3))
    wide = np.zeros((n, 2 * d))
    wide[:, ::2] = x
    res.append(class_moments(wide[:, ::2], lab, k, lo, hi, c, r, 2))
    same_bits(res)


def test_class_moments_refuses_labels_out_of_range():
    x = np.zeros((3, 2))
    z = np.zeros(2)
    with pytest.raises(ValueError, match="class index"):
        _stats.class_moments(x, np.array([0, 2, 1]), 2, z - 1, z + 1, z, z + 1, 1)
    with pytest.raises(ValueError, match="labels"):
        _stats.class_moments(x, np.array([0, 1]), 2, z - 1, z + 1, z, z + 1, 1)


# ----------------------------------------------------------------------------- Gram (PCA, SSP)
def pca_gram(x, lo, hi, c, R, threads):
    """_stats.pca_gram's exact sums as a (d+1, d+1) object array of Python ints."""
    G = _stats.pca_gram(x, lo, hi, c, R, threads)
    d1 = x.shape[1] + 1
    return np.array(ints(G), dtype=object).reshape(d1, d1)


def _q26(v):
    """The Gram kernels' factor grid: clamp to [-1, 1] (NaN to -1), then trunc(v 2^26) as Python ints."""
    v = np.where(np.isnan(v), -1.0, np.clip(v, -1.0, 1.0))
    return np.trunc(v * 2.0**26).astype(np.int64)


def _grid_gram(A, B):
    """The exact Gram sums in Python: term (j, k) = qa_j qb_k, qa = _q26(fl(w b')), qb = _q26(b'),
    b' = clamp(z 2^-e, -1, 1) (A holds fl(w b'), the weighting done by the caller); Python ints."""
    QA, QB = _q26(A), _q26(B)
    return [[builtins_sum(int(a) * int(b) for a, b in zip(QA[:, j].tolist(), QB[:, k].tolist()))
             for k in range(B.shape[1])] for j in range(A.shape[1])]


@pytest.mark.parametrize("box", [True, False])
def test_pca_gram_is_the_exact_sum_of_the_grid_terms(box):
    """Every entry of sum [u, 1][u, 1]^T is the exact sum of q = trunc(u_j 2^26) trunc(u_k 2^26)
    (the factor grid of bound 1), the Python reference bit for bit (the row map: the NumPy
    reference of PCA's map); the count n is n 2^52 exactly; split rows add up to the whole."""
    rng = np.random.default_rng(6)
    n, d = 3000, 5
    x = rng.uniform(-1, 1, (n, d)) / 4  # in the unit ball: the row map is the identity, exactly
    lo, hi = (np.full(d, -1.0), np.full(d, 1.0)) if box else (None, None)
    G = pca_gram(x, lo, hi, np.zeros(d), 1.0, 2)
    u = np.hstack([x, np.ones((n, 1))])
    ref = _grid_gram(u, u)
    for j in range(d + 1):
        for k in range(j, d + 1):
            assert G[j, k] == ref[j][k]
            assert all(G[k2, j] == 0 for k2 in range(j + 1, d + 1))
    assert G[d, d] == n * 2**52
    # rows the map moves (clamped, centred, scaled onto the sphere): split rows add up to the whole
    x = rng.normal(size=(n, d)) * 0.6
    c = np.zeros(d) if box else np.full(d, 0.1)
    G = pca_gram(x, lo, hi, c, 1.2, 2)
    parts = [pca_gram(np.ascontiguousarray(x[a:b]), lo, hi, c, 1.2, 1) for a, b in [(0, 3), (3, 2500), (2500, n)]]
    assert (parts[0] + parts[1] + parts[2]).tolist() == G.tolist()


@pytest.mark.parametrize("row", [[3.0, 4.0, 0.0], [1e300, -1e300, 1e300], [np.inf, 1.0, -np.inf], [0.3, 0.4, 0.0]])
def test_pca_gram_one_row_has_norm_at_most_one(row):
    """Sensitivity: every mapped row has ||u|| <= 1 and so has its quantised row (the factors are
    truncated toward zero): the trace of its Gram matrix is at most 2^52 exactly, every entry
    within the grid bound 2^52."""
    x = np.array([row])
    G = pca_gram(x, None, None, np.zeros(3), 0.5, 1)
    assert builtins_sum(G[j, j] for j in range(3)) <= 2**52
    assert max(abs(int(v)) for v in G.ravel()) <= 2**52


def _pca_row_map(row, lo, hi, c, R):
    """PCA's row map by its scalar definition (Python floats: IEEE doubles, the norms summed left
    to right), the reference of the kernel's vectorised map with its lane-sum pre-test."""
    z = [(min(max(v, a), b) if lo is not None else v) - ci
         for v, a, b, ci in zip(row, lo if lo is not None else row, hi if hi is not None else row, c)]
    sq = 0.0
    for v in z:
        sq += v * v
    if not sq <= R * R:
        if any(math.isinf(v) for v in z):
            z = [(1.0 if v > 0 else -1.0) if math.isinf(v) else 0.0 for v in z]
        mx = 0.0
        for v in z:
            mx = max(mx, abs(v))
        z = [v / mx for v in z]
        s2 = 0.0
        for v in z:
            s2 += v * v
        nrm = math.sqrt(s2)
        z = [(v / nrm) * R for v in z]
    z = [v / R for v in z]
    nu = 0.0
    for v in z:
        nu += v * v
    if nu > 1.0:
        s = math.nextafter(math.sqrt(nu), math.inf)
        z = [v / s for v in z]
    return z + [1.0]


@pytest.mark.parametrize("d", [1, 7, 8, 13])
@pytest.mark.parametrize("box", [True, False])
def test_pca_gram_row_map_is_the_scalar_definition_at_the_norm_bound(d, box):
    """The vectorised row map decides ``sq <= R^2`` and ``nu > 1`` from a lane sum only away from
    the bound: rows whose norm is within a few ulps of R (both sides), exactly R, at the box
    bounds, huge and infinite give the scalar definition's bits (grid sums equal, term by term)."""
    rng = np.random.default_rng(d)
    R = 0.5 * math.sqrt(d) if box else 1.3
    lo, hi = (np.zeros(d), np.ones(d)) if box else (None, None)
    c = np.full(d, 0.5)
    rows = [np.zeros(d), np.ones(d), np.full(d, -3.0), np.full(d, 1e300)]
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    for k in range(-12, 13):
        rows.append(c + u * (R * (1 + k * 2.0**-52)) * (0.999 if box else 1.0))
    rows.append(np.where(np.arange(d) == 0, np.inf, 0.2))
    rows += list(rng.uniform(-0.5, 1.5, (40, d)))
    x = np.array(rows)
    G = pca_gram(x, lo, hi, c, R, 1)
    Z = np.array([_pca_row_map(r.tolist(), None if lo is None else lo.tolist(),
                               None if hi is None else hi.tolist(), c.tolist(), R) for r in x])
    ref = _grid_gram(Z, Z)
    assert [[G[j, k] for k in range(j, d + 1)] for j in range(d + 1)] == \
        [[ref[j][k] for k in range(j, d + 1)] for j in range(d + 1)]


def test_ssp_gram_is_the_exact_sum_of_the_grid_terms():
    """Entry (j, k) of [Z, y]^T W [Z, y]: the exact sum of the products trunc(fl(w b'_j) 2^26)
    trunc(b'_k 2^26) on the grid of the column bounds 2^(e_j + e_k - 52) (Python reference bit for bit), with and without weights; values
    beyond a column's bound are clamped to it (a row can never move an entry by more than its bound)."""
    rng = np.random.default_rng(7)
    n, d = 4000, 6
    Z = rng.normal(size=(n, d)) / 3
    Z[0, 0] = 7.0  # beyond the bound 2^1: clamped
    y = np.clip(rng.normal(size=n), -1, 1)
    w = rng.uniform(0, 1, n)
    e = np.array([1, 1, 0, 1, 2, 1, 0])
    Zy = np.hstack([Z, y[:, None]])
    Bp = np.clip(Zy * np.ldexp(1.0, -e), -1, 1)
    for wv in (None, w):
        G = np.array(ints(_stats.ssp_gram(Z, y, wv, e, 2)), dtype=object).reshape(d + 1, d + 1)
        Ap = Bp if wv is None else Bp * wv[:, None]
        ref = _grid_gram(Ap, Bp)
        for j in range(d + 1):
            for k in range(j, d + 1):
                assert G[j, k] == ref[j][k]
    with pytest.raises(ValueError, match="exponents"):
        _stats.ssp_gram(Z, y, None, np.full(d + 1, 1000), 1)


def test_gram_bit_identical_threads_layouts_dtypes():
    rng = np.random.default_rng(8)
    n, d = 120_001, 7
    x32 = rng.uniform(-1, 2, (n, d)).astype(np.float32)
    x = x32.astype(np.float64)
    lo, hi, c = np.zeros(d), np.ones(d), np.full(d, 0.5)
    pca = [_pair(_stats.pca_gram(v, lo, hi, c, 1.0, t))
           for v, t in [(x, 1), (x, 2), (x, 3), (np.asfortranarray(x), 2), (x32, 3)]]
    same_bits([(g,) for g in pca])
    y, w = rng.uniform(-1, 1, n), rng.uniform(0, 1, n)
    e = np.full(d + 1, 1)
    ssp = [_pair(_stats.ssp_gram(v, y, w, e, t)) for v, t in [(x, 1), (x, 2), (x, 3), (np.asfortranarray(x), 3), (x32, 2)]]
    same_bits([(g,) for g in ssp])


# ----------------------------------------------------------------------------- k-means step
def kmeans_step(U, C, labels, sums, threads):
    """_stats.kmeans_step with its exact sums as a (2, k d) int64 array [hi, lo] (same_bits)."""
    lab, cnt, s = _stats.kmeans_step(U, C, labels, sums, threads)
    return lab, cnt, _pair(s)


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
    got = ints(sums)  # exact fixed-point sums (grid bound 1): the Python reference bit for bit
    for g in range(k):
        rows = U[lab == g]
        for j in range(d):
            assert got[g * d + j] == builtins_sum(_grid(rows[:, j], 1.0))
    # split rows add up to the whole (the Dask partitions)
    tot = [0] * (k * d)
    for a, b in [(0, 1), (1, 4097), (4097, n)]:
        tot = [v + w for v, w in zip(tot, ints(_stats.kmeans_step(np.ascontiguousarray(U[a:b]), C, False, True, 1)[2]))]
    assert tot == got
    # ties go to the lowest index
    lab, _, _ = _stats.kmeans_step(np.zeros((2, 2)), np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]), True, False, 1)
    assert lab.tolist() == [0, 0]


def test_kmeans_step_bit_identical_threads_layouts_dtypes():
    rng = np.random.default_rng(10)
    n, d, k = 100_003, 4, 5
    U32 = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    Uc = U32.astype(np.float64)
    C = rng.uniform(-1, 1, (k, d))
    res = [kmeans_step(v, C, True, True, t)
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
m1, m2 = _stats.moments(x[:, :1].copy(), 0.0, 1.0, 0.5, 0.5, 0.5, False, 2, 2), _stats.moments(x, 0.0, 1.0, 0.5, 0.5, 0.5, True, 2, 2)
x0 = x[:, :1].copy(); x0[:5, 0] = [-0.0, 0.0, 5e-324, 1.0, -1.0]
m0 = _stats.moments(x0, -1.0, 1.5, 0.0, np.inf, 1.5, False, 1, 2)  # the uncentred (sum) pass
out = [(*m1[0], *m1[1]), (*m2[0], *m2[1], m2[2]), tuple(m0[0]),
       (lambda m: (m[0], *m[1], *m[2]))(_stats.class_moments(x, lab, 3, z, o, z + 0.5, o * 0.5, 2)), _stats.pca_gram(x, z, o, z + 0.5, 1.0, 2),
       _stats.ssp_gram(x, y, None, np.ones(8, dtype=np.int64), 2), (lambda m: (m[0], m[1], *m[2]))(_stats.kmeans_step(x, x[:4].copy(), True, True, 2))]
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
        s1, s2, cnt, bad = moments(x, 0.0, 1.0, 0.5, 0.5, nan, order, t)
        assert bad == 0
        assert abs(ints(s1)[0]) <= n * 2**50
    for pos in (0, 9, 65_535, 65_536, n - 1):
        y = x.copy()
        y[pos, 0] = np.inf
        assert moments(y, 0.0, 1.0, 0.5, 0.5, nan, order, 2)[3] == 1
        y[pos, 0] = np.nan
        assert moments(y, 0.0, 1.0, 0.5, 0.5, nan, order, 2)[3] == (0 if nan else 1)
    y = x.copy()
    y[[3, 70_000, n - 2], 0] = -np.inf  # three chunks
    assert moments(y, 0.0, 1.0, 0.5, 0.5, nan, order, 3)[3] == 3


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
    same_bits([moments(X, -1.0, 1.0, 0.0, 1.0, False, 2, 2), moments(M(X), -1.0, 1.0, 0.0, 1.0, False, 2, 2)])
    same_bits([class_moments(X, lab, 3, lo, hi, c, r, 2),
               class_moments(M(X), M(lab), 3, M(lo), M(hi), M(c), M(r), 2)])
    same_bits([(_pair(_stats.pca_gram(X, lo, hi, c, 2.0, 2)),), (_pair(_stats.pca_gram(M(X), M(lo), M(hi), M(c), 2.0, 2)),)])
    e = np.full(5, 3, dtype=np.int64)
    same_bits([(_pair(_stats.ssp_gram(X, y, w, e, 2)),), (_pair(_stats.ssp_gram(M(X), M(y), M(w), M(e), 2)),)])
    same_bits([kmeans_step(X, C, True, True, 2), kmeans_step(M(X), M(C), True, True, 2)])
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
        assert moments(x, 0.0, 1.0, 0.5, 0.5, nan, 2, t)[3] == 0
    rows = x.shape[0]
    for col in range(3):
        for pos in (0, rows // 2, rows - 1):
            y = x.copy()
            y[pos, col] = -np.inf
            assert moments(y, 0.0, 1.0, 0.5, 0.5, nan, 1, 2)[3] == 1
            y[pos, col] = np.nan
            assert moments(y, 0.0, 1.0, 0.5, 0.5, nan, 1, 2)[3] == (0 if nan else 1)


def test_gram_factor_at_the_bound_is_the_bound_and_blocks_cannot_overflow():
    """Rows at their columns' bounds (and beyond: clamped) give factors +-2^26 exactly, so every
    product is +-2^52: 5000 such rows (several 1024-row int64 blocks, each at the 2^62 limit of
    the design) sum to exactly +-5000 2^52 for any thread count; NaN factors go to -1."""
    n, d = 5000, 3
    Z = np.tile([2.0, -2.0, 9.0], (n, 1))
    y = np.full(n, -1.0)
    e = np.array([1, 1, 1, 0])
    sign = np.array([1, -1, 1, -1])
    for t in (1, 2, 3):
        G = np.array(ints(_stats.ssp_gram(Z, y, None, e, t)), dtype=object).reshape(d + 1, d + 1)
        for j in range(d + 1):
            for k in range(j, d + 1):
                assert G[j, k] == int(sign[j] * sign[k]) * n * 2**52
    Zn = np.array([[np.nan, 0.5, 0.0]])
    G = np.array(ints(_stats.ssp_gram(Zn, np.array([0.25]), None, np.zeros(4, dtype=np.int64), 1)),
                 dtype=object).reshape(4, 4)
    assert G[0, 0] == 2**52 and G[0, 1] == -(2**51) and G[0, 3] == -(2**50)
