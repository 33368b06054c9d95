"""Red team, stop 31: attacks on the exact fixed-point sums (dpfast._fixed) and the 26-bit Gram grid.

No hole found; kept as regression tests.  Measured in the session (larger sweeps than here):
22,005 bounds B (2^-969..2^1023, 0.1, 1/3, 0.75, the extremes 2^-970 and DBL_MAX): a term at +-B
maps to exactly +-2^50, the next double below B to <= 2^50, -0.0 to 0, the smallest subnormal to
|q| <= 1; 216,726 single-row PCA Grams (d 1..1000, R 1e-7..1e7, rows at the bound times 1 +- 1e-15,
on and next to the 2^-26 grid, cancelling rows): the quantised row's squared length never exceeds
2^52 (max excess 0); one-row, empty and column-split Dask partitions give the in-memory bits for
every exact-sum release (the nan forms included, with -0.0, subnormals and values next to the bound).
"""
import math

import numpy as np
import pytest

from dpfast import _fixed, _stats, tools
from dpfast.tools._statistics import _column_sums

try:  # (at import: dask's own import takes ~1 s)
    import dask
    import dask.array as da
except ImportError:  # pragma: no cover
    dask = da = None


def _q(t, B):
    """The grid integer of one term (the native kernel, one row)."""
    return int(_column_sums(np.array([[t]]), 0, -B, B, 0.0, np.inf, B, False, 1)[0][0])


@pytest.mark.parametrize("B", [math.ldexp(1.0, -970), 1e-290, 0.1, 1.0 / 3.0, 0.75, 1.0, 3.0, 1e300,
                               1.7976931348623157e308])
def test_grid_at_the_bound_and_special_values(B):
    one = 1 << _fixed.FIXED_BITS
    assert _q(B, B) == one and _q(-B, B) == -one
    assert _q(np.nextafter(B, 0.0), B) <= one
    assert _q(-0.0, B) == 0
    assert abs(_q(5e-324, B)) <= 1
    if B < 1.7e308:  # beyond the bound (clamped): the bound's integer, never more
        assert _q(np.nextafter(B, np.inf), B) == one


def test_grid_map_is_monotone_and_bounded_on_random_terms():
    r = np.random.default_rng(0)
    for B in (0.1, 1.0 / 3.0, 1e-200, 1e200):
        t = np.sort(np.r_[r.uniform(-B, B, 300), -B, B, 0.0])
        q = [_q(v, B) for v in t]
        assert all(a <= b for a, b in zip(q, q[1:]))
        assert max(abs(v) for v in q) == 1 << _fixed.FIXED_BITS


def test_check_bound_refuses_unrepresentable_scales():
    for B in (math.inf, math.nan, -1.0, 1e-300, 5e-324):
        with pytest.raises(ValueError):
            _fixed.check_bound(B)
    assert _fixed.check_bound(0.0) == 0.0


@pytest.mark.parametrize("d", [1, 3, 8, 50])
def test_quantised_pca_rows_never_exceed_the_unit_norm(d):
    """Rows scaled onto the sphere (norm R (1 + 1e-15), R, R (1 - 1e-15), 5 R), rows on the 2^-26 grid
    times (1 + 2^-52): the truncated row's squared length sum q_j^2 <= 2^52."""
    r = np.random.default_rng(d)
    for R in (1.0, 3.0, 1e-7):
        Z = r.standard_normal((20, d))
        U = Z / np.linalg.norm(Z, axis=1, keepdims=True)
        grid = np.floor(np.abs(U) * 2.0 ** 26) * np.sign(U) * 2.0 ** -26
        rows = np.vstack([U * R * s for s in (1 + 1e-15, 1.0, 1 - 1e-15, 5.0)] + [grid * R * (1 + 2.0 ** -52)])
        for x in rows:
            G = _fixed.ints(_stats.pca_gram(np.ascontiguousarray(x[None]), None, None, np.zeros(d), float(R), 1))
            G = G.reshape(d + 1, d + 1)
            assert sum(int(G[j, j]) for j in range(d)) <= 1 << 52
            assert G[d, d] == 1 << 52


def test_gram_blocks_at_the_factor_bound_do_not_overflow():
    """5000 rows at +-1 (factor 2^26, products 2^52: 1024-row blocks sum to 2^62) across 5 blocks."""
    for s in (1.0, -1.0):
        X = np.full((5000, 1), 7.0 * s)
        G = _fixed.ints(_stats.pca_gram(X, None, None, np.zeros(1), 7.0, 1)).reshape(2, 2)
        assert G[0, 0] == 5000 << 52 and G[0, 1] == int(s) * (5000 << 52) and G[1, 1] == 5000 << 52


def test_dask_one_row_and_column_split_partitions_give_the_in_memory_bits():
    if da is None:  # pragma: no cover
        pytest.skip("dask is not installed")
    r = np.random.default_rng(0)
    X = r.uniform(-1, 1, (31, 3))
    X[0] = [1.0, -1.0, -0.0]
    X[1] = [5e-324, -5e-324, np.nextafter(1, 2)]
    X[2] = [np.nextafter(-1, -2), 1e-300, 1 - 2.0 ** -53]
    X[4, 1] = np.nan
    with dask.config.set(scheduler="synchronous"):
        for f, bounds in ((tools.nansum, (0.25, 0.75)), (tools.nanvar, (-1, 1))):
            ref = np.asarray(f(X, 1.0, bounds=bounds, axis=0, rng=0)).tobytes()
            for chunks in (((1,) * 31, 3), ((0, 31, 0), (1, 2)), ((15, 16), (2, 1))):
                got = f(da.from_array(X, chunks=chunks), 1.0, bounds=bounds, axis=0, rng=0)
                assert np.asarray(got).tobytes() == ref, (f.__name__, bounds, chunks)
