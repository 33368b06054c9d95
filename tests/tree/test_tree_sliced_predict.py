"""dpfast._trees.proba_sum's sliced kernel (forest32): each row's leaf from the 64-row node masks
ORed per level, the class sums in tree order.  It must give the descent's sums bit for bit (the
same float additions in the same order) for any forest, any data and any thread count: rows
that tie with thresholds, -0.0 and 0.0, +-inf, NaN (goes left), partial 64-row blocks, n = 1,
1 to 65 classes (the three accumulation paths: K = 2, 3 .. 64 gathered, more), depth 1 to 8,
strided rows, and the fallbacks (a NaN threshold, depth 9, too many distinct thresholds)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dpfast import _trees
from dpfast.tree import random_trees as RT

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -1.0, 1.0])


def _case(n, d, K, T, D, seed):
    rng = np.random.default_rng(seed)
    f, th = RT.draw_forest(np.random.default_rng(seed + 1), np.full(d, -1.0), np.full(d, 1.0), T, D)
    th[0, 0] = th[-1, -1]  # one threshold twice
    X = rng.uniform(-1, 1, size=(n, d))
    pool = np.concatenate([th.ravel(), SPECIAL])
    hit = rng.random((n, d)) < 0.3
    X[hit] = rng.choice(pool, size=int(hit.sum()))
    proba = rng.dirichlet(np.ones(K), size=(T, 1 << D)) if K > 1 else rng.random((T, 1 << D, 1))
    return X, f, th, proba


def _reference(X, f, th, D, proba):
    """The NumPy sums: per row, 0.0 + the trees' leaf values in tree order (the same additions)."""
    T = f.shape[0]
    out = np.zeros((X.shape[0], proba.shape[2]))
    for t in range(T):
        node = np.zeros(X.shape[0], dtype=np.int64)
        for _ in range(D):
            node = 2 * node + 1 + (X[np.arange(X.shape[0]), f[t, node]] > th[t, node])
        out += proba[t, node - ((1 << D) - 1)]
    return out


def _check(X, f, th, D, proba, threads=(1, 2, 3)):
    ref = _reference(X, f, th, D, proba)
    desc = _trees.proba_sum(X, f, th, D, proba, 1, 1)
    assert desc.tobytes() == ref.tobytes()
    for nt in threads:
        for kernel in (0, 1, 2):
            got = _trees.proba_sum(X, f, th, D, proba, nt, kernel)
            assert got.tobytes() == ref.tobytes(), (kernel, nt, np.abs(got - ref).max())
    return ref


@pytest.mark.parametrize("n,d,K,T,D", [(1, 3, 2, 12, 5), (63, 2, 2, 20, 3), (65, 4, 3, 10, 5), (130, 3, 5, 7, 6),
                                        (200, 2, 2, 3, 8), (129, 5, 1, 9, 1), (100, 3, 64, 4, 4),
                                        (70, 3, 65, 4, 4), (4100 * 3 + 5, 4, 2, 10, 5), (257, 6, 3, 5, 7)])
def test_sliced_predict_sums_are_the_descents_bits(n, d, K, T, D):
    X, f, th, proba = _case(n, d, K, T, D, seed=n + K + D)
    _check(X, f, th, D, proba)


def test_strided_and_broadcast_rows():
    X, f, th, proba = _case(300, 3, 2, 12, 5, seed=3)
    wide = np.zeros((300, 7))
    wide[:, 2:5] = X
    view = wide[:, 2:5]  # rows strided (ld 7)
    assert view.strides[0] == 56
    np.testing.assert_array_equal(_trees.proba_sum(view, f, th, 5, proba, 2, 2), _reference(X, f, th, 5, proba))
    one = np.broadcast_to(X[7], (150, 3))  # row stride 0
    assert one.strides[0] == 0
    got = _trees.proba_sum(one, f, th, 5, proba, 2, 2)
    np.testing.assert_array_equal(got, np.broadcast_to(_reference(X[7:8], f, th, 5, proba), (150, 2)))


def test_fallbacks_give_the_same_bits():
    """A NaN threshold, depth 9 (a leaf index beyond a byte) or more than 32767 distinct
    thresholds on a feature: kernel=2 sums by descent."""
    X, f, th, proba = _case(100, 2, 3, 6, 5, seed=5)
    th[2, 3] = np.nan
    _check(X, f, th, 5, proba, threads=(1,))
    X, f, th, proba = _case(80, 2, 2, 2, 9, seed=6)
    _check(X, f, th, 9, proba, threads=(1,))
    rng = np.random.default_rng(7)
    thr = np.arange(33000, dtype=np.float64).reshape(-1, 1)
    x = np.concatenate([[-1.0, 0.0, 32999.0, 33000.0, np.nan], rng.integers(0, 33000, 60) + 0.5]).reshape(-1, 1)
    _check(x, np.zeros((33000, 1), dtype=np.int64), thr, 1, rng.random((33000, 2, 2)), threads=(1,))


def test_binding_refuses_a_bad_kernel_or_table():
    X, f, th, proba = _case(10, 2, 2, 3, 3, seed=8)
    with pytest.raises(ValueError, match="kernel"):
        _trees.proba_sum(X, f, th, 3, proba, 1, 3)
    with pytest.raises(ValueError, match="kernel"):
        _trees.proba_sum(X, f, th, 3, proba, 1, -1)
    with pytest.raises(ValueError, match="proba"):
        _trees.proba_sum(X, f, th, 3, proba[:, :4], 1, 2)
    with pytest.raises(ValueError, match="feature"):
        _trees.proba_sum(X, np.full_like(f, 2), th, 3, proba, 1, 2)
    with pytest.raises(TypeError):
        _trees.proba_sum(X.astype(np.float32), f, th, 3, proba, 1, 2)


def test_no_avx2_build_path_gives_the_same_bits():
    """DPFAST_TREES_NO_AVX2=1 (the descent only): the same sums as the sliced kernel here."""
    X, f, th, proba = _case(500, 3, 3, 20, 5, seed=9)
    here = _trees.proba_sum(X, f, th, 5, proba, 2, 0)
    code = textwrap.dedent("""
        import sys, numpy as np
        from dpfast import _trees
        a = np.load(sys.argv[1])
        out = _trees.proba_sum(a["X"], a["f"], a["th"], 5, a["p"], 2, 0)
        print(_trees.sliced, out.tobytes().hex() == a["here"].tobytes().hex())
    """)
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "case.npz")
        np.savez(path, X=X, f=f, th=th, p=proba, here=here)
        r = subprocess.run([sys.executable, "-c", code, path], env=dict(os.environ, DPFAST_TREES_NO_AVX2="1"),
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["False", "True"]
