"""The sliced leaf counts take up to 8 blocks of 64 rows at a time (their ranks within 16 KiB: 8
blocks up to 16 split features, 4 up to 32, 2 up to 64, then 1), each tree counting them into a
local table (forest32).  The descent's integers at every chunk boundary, for every thread count."""
import numpy as np
import pytest

from dpfast import _trees
from dpfast.tree import random_trees as RT

pytestmark = pytest.mark.skipif(not _trees.sliced, reason="the sliced kernel needs AVX2 + POPCNT")


@pytest.mark.parametrize("d", [1, 10, 17, 33, 64, 129])
@pytest.mark.parametrize("n", [1, 511, 512, 513, 1025, 64 * 8 * 3 + 65])
def test_counts_across_chunks_of_blocks(n, d):
    rng = np.random.default_rng(n * 1000 + d)
    T, D, K = 12, 5, 3
    f, th = RT.draw_forest(np.random.default_rng(d), np.full(d, -1.0), np.full(d, 1.0), T, D)
    X = rng.uniform(-1, 1, size=(n, d))
    hit = rng.random((n, d)) < 0.2
    X[hit] = rng.choice(np.concatenate([th.ravel(), [0.0, -0.0, np.inf, -np.inf, np.nan]]), size=int(hit.sum()))
    y = rng.integers(0, K, size=n)
    ref = _trees.leaf_counts(X, y, K, None, f, th, D, 1, 1)
    assert ref.sum() == n * T
    for nt in (1, 2, 3):
        np.testing.assert_array_equal(_trees.leaf_counts(X, y, K, None, f, th, D, nt, 2), ref)


@pytest.mark.parametrize("d,K", [(3, 2), (10, 3), (17, 5), (40, 2), (129, 2), (5, 33), (5, 64), (5, 70)])
@pytest.mark.parametrize("n", [1, 511, 513, 64 * 8 * 3 + 65])
def test_predict_sums_across_chunks_of_blocks(n, d, K):
    """The sliced predict's chunks (8 blocks up to 16 features and 4 classes, fewer beyond): the
    descent's sums bit for bit."""
    rng = np.random.default_rng(n + 7 * d + K)
    T, D = 12, 5
    f, th = RT.draw_forest(np.random.default_rng(d), np.full(d, -1.0), np.full(d, 1.0), T, D)
    X = rng.uniform(-1, 1, size=(n, d))
    hit = rng.random((n, d)) < 0.2
    X[hit] = rng.choice(np.concatenate([th.ravel(), [0.0, -0.0, np.inf, -np.inf, np.nan]]), size=int(hit.sum()))
    proba = rng.dirichlet(np.ones(K), size=(T, 1 << D))
    ref = _trees.proba_sum(X, f, th, D, proba, 1, 1)
    for nt in (1, 2, 3):
        assert _trees.proba_sum(X, f, th, D, proba, nt, 2).tobytes() == ref.tobytes()


@pytest.mark.parametrize("n", [16384 * 4 + 13, 16384 * 17 + 5])
def test_thread_chunks_give_the_same_counts_and_sums(n):
    """With 2+ threads the sliced kernels cut the rows into up to 8 chunks per thread of >= 16384
    rows (claimed as threads come free): the same counts and bits as one thread."""
    rng = np.random.default_rng(n)
    d, T, D, K = 4, 20, 5, 2
    f, th = RT.draw_forest(np.random.default_rng(1), np.full(d, -1.0), np.full(d, 1.0), T, D)
    X = rng.uniform(-1, 1, size=(n, d))
    X[::97, 0] = th[0, 0]
    y = rng.integers(0, K, size=n)
    ref = _trees.leaf_counts(X, y, K, None, f, th, D, 1, 1)
    proba = rng.dirichlet(np.ones(K), size=(T, 1 << D))
    pref = _trees.proba_sum(X, f, th, D, proba, 1, 1)
    for nt in (1, 2, 3, 5):
        np.testing.assert_array_equal(_trees.leaf_counts(X, y, K, None, f, th, D, nt, 2), ref)
        assert _trees.proba_sum(X, f, th, D, proba, nt, 2).tobytes() == pref.tobytes()
