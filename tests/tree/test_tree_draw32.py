"""draw_forest draws tree by tree, level by level (the reproducibility contract of random_state),
then computes the thresholds of every tree at once (forest32): the same forest, bit for bit, and
the same generator state after, as the per-tree loop it replaced (kept here as the reference)."""
import numpy as np
import pytest

from dpfast.tree import random_trees as RT


def _draw_forest_per_tree(gen, lo, hi, n_trees, depth):
    d = lo.size
    M = (1 << depth) - 1
    feature = np.empty((n_trees, M), dtype=np.int64)
    threshold = np.empty((n_trees, M), dtype=np.float64)
    for t in range(n_trees):
        blo, bhi = lo[None, :].copy(), hi[None, :].copy()
        for level in range(depth):
            width = 1 << level
            first = width - 1
            f = gen.integers(0, d, size=width)
            u = gen.random(width)
            rows = np.arange(width)
            a, b = blo[rows, f], bhi[rows, f]
            thr = np.minimum(np.maximum(a + u * (b - a), a), b)
            feature[t, first:first + width] = f
            threshold[t, first:first + width] = thr
            if level + 1 < depth:
                clo = np.repeat(blo, 2, axis=0)
                chi = np.repeat(bhi, 2, axis=0)
                chi[2 * rows, f] = thr
                clo[2 * rows + 1, f] = thr
                blo, bhi = clo, chi
    return feature, threshold


@pytest.mark.parametrize("T,D,d", [(100, 5, 10), (1, 0, 3), (3, 1, 1), (7, 8, 4), (2, 3, 30), (5, 6, 2)])
def test_draw_forest_is_the_per_tree_loop_bit_for_bit(T, D, d):
    lo = np.linspace(-3.0, -1.0, d)
    hi = lo + np.linspace(1e-300, 2.0, d)  # a tiny width too
    g1, g2 = np.random.default_rng(T + D), np.random.default_rng(T + D)
    f1, t1 = _draw_forest_per_tree(g1, lo, hi, T, D)
    f2, t2 = RT.draw_forest(g2, lo, hi, T, D)
    assert f1.tobytes() == f2.tobytes() and t1.tobytes() == t2.tobytes()
    assert g1.bit_generator.state == g2.bit_generator.state
