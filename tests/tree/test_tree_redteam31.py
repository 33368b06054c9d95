"""Red team, stop 31 (second pass): the bit-sliced leaf-count kernel (csrc/tree/random_trees.hpp).

The sliced kernel must give the descent's integers for any forest and any data: a value's rank
among its feature's distinct thresholds decides x > t exactly, whatever the values (ties, -0.0,
subnormals, infinities, NaN), the number of distinct thresholds (32767 is the int16 limit of the
ranks), the number of classes (16 is its limit), the rows (n not a multiple of 64, n = 1) and the
threads.  And it must never read outside its buffers: it stored a node's feature as int16, so a
forest splitting on column 32768 or beyond of a wide X read 4 MiB before its rank buffer
(segmentation fault on main, ebaac85), and it kept a 16 KiB rank grid for every column of X, used
or not (655 MB at 40,000 columns).
"""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dpfast import _trees

pytestmark = pytest.mark.skipif(not _trees.sliced, reason="the sliced kernel needs AVX2 + POPCNT")

SPECIAL = np.array([0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, np.inf, -np.inf, 1.0, -1.0, 1e308,
                    -1e308, 0.5])


def _both(X, y, K, f, thr, D, threads=(1, 2, 3)):
    """The descent's counts; the sliced kernel (forced and auto) gives them for every thread count."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.int64)
    f = np.ascontiguousarray(f, dtype=np.int64)
    thr = np.ascontiguousarray(thr, dtype=np.float64)
    ref = _trees.leaf_counts(X, y, K, None, f, thr, D, 1, 1)
    for nt in threads:
        for kernel in (0, 2):
            got = _trees.leaf_counts(X, y, K, None, f, thr, D, nt, kernel)
            np.testing.assert_array_equal(got, ref, err_msg=f"kernel {kernel}, {nt} threads")
    assert ref.sum() == X.shape[0] * f.shape[0]
    return ref


def test_columns_beyond_int16_are_read_where_they_are():
    # run in a child: on main the kernel reads far outside its rank buffer (a crash, not a failure)
    code = textwrap.dedent("""
        import numpy as np
        from dpfast import _trees
        rng = np.random.default_rng(0)
        d, n, T, D = 33000, 70, 10, 5
        X = rng.random((n, d)); y = rng.integers(0, 3, n)
        f = rng.integers(32760, d, size=(T, 2**D - 1)); thr = rng.random((T, 2**D - 1))
        ref = _trees.leaf_counts(X, y, 3, None, f, thr, D, 1, 1)
        for kernel in (0, 2):
            assert (_trees.leaf_counts(X, y, 3, None, f, thr, D, 2, kernel) == ref).all(), kernel
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


@pytest.mark.parametrize("n_used", [4096, 4097])
def test_many_split_features_fall_back_to_the_same_counts(n_used):
    # more features split on than the kernel keeps ranks for: the descent, the same integers
    rng = np.random.default_rng(n_used)
    D, T = 1, n_used
    f = np.arange(n_used).reshape(T, 1)
    thr = rng.random((T, 1))
    X = rng.random((65, n_used))
    _both(X, rng.integers(0, 2, 65), 2, f, thr, D, threads=(1,))


@pytest.mark.parametrize("n_cuts", [32767, 32768])
def test_the_int16_limit_of_distinct_thresholds(n_cuts):
    # D = 1, one feature, n_cuts trees with distinct thresholds 0 .. n_cuts - 1; rows on, between
    # and beyond them (ranks 0 and 32767 included)
    rng = np.random.default_rng(n_cuts)
    thr = np.arange(n_cuts, dtype=np.float64).reshape(-1, 1)
    f = np.zeros((n_cuts, 1), dtype=np.int64)
    x = np.concatenate([[-1.0, 0.0, -0.0, n_cuts - 1.0, n_cuts - 0.5, float(n_cuts), np.inf, -np.inf],
                        rng.integers(0, n_cuts, 57) + rng.choice([0.0, 0.5], 57)])
    _both(x.reshape(-1, 1), rng.integers(0, 2, x.size), 2, f, thr, 1, threads=(1,))


@pytest.mark.parametrize("K", [1, 2, 15, 16, 17])
@pytest.mark.parametrize("n", [1, 63, 64, 65, 129])
def test_adversarial_values_classes_and_row_counts(K, n):
    rng = np.random.default_rng(K * 1000 + n)
    D, T, d = 3, 20, 3
    M = 2 ** D - 1
    # thresholds: the special values themselves and small integers (so rows tie with them)
    thr = rng.choice(np.concatenate([SPECIAL, [-2.0, 2.0, 3.0]]), size=(T, M))
    pool = np.concatenate([SPECIAL, [np.nan, -2.0, 2.0, 3.0, np.nextafter(0.5, 1), np.nextafter(1.0, 0)]])
    X = rng.choice(pool, size=(n, d))
    f = rng.integers(0, d, (T, M))
    _both(X, rng.integers(0, K, n), K, f, thr, D)


def test_threads_split_rows_at_any_boundary():
    # 2 and 3 threads split 12,301 rows off the 64-row blocks; tiny-range and huge-range features
    rng = np.random.default_rng(7)
    n, d, D, T = 12301, 4, 6, 12
    M = 2 ** D - 1
    X = np.column_stack([rng.integers(-3, 4, n).astype(float), rng.standard_normal(n) * 1e-310,
                         rng.standard_normal(n) * 1e300, rng.random(n)])
    thr = np.column_stack([rng.integers(-3, 4, T * M).astype(float), rng.standard_normal(T * M) * 1e-310,
                           rng.standard_normal(T * M) * 1e300, rng.random(T * M)])
    f = rng.integers(0, d, (T, M))
    thr = thr[np.arange(T * M), f.ravel()].reshape(T, M)
    _both(X, rng.integers(0, 5, n), 5, f, thr, D)
