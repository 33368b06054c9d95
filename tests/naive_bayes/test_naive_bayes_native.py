"""GaussianNB's statistics through the native pass (dpfast._stats.class_moments): the fit's
released attributes are bit-identical for DPFAST_NUM_THREADS = 1, 2, 3, for C / Fortran input and
float32 vs float64 input holding the same values; _statistics matches its NumPy definition."""
from __future__ import annotations

import numpy as np
import pytest

from dpfast.naive_bayes import GaussianNB

from _native_checks import assert_bit_identical

RNG = np.random.default_rng(5)
X32 = RNG.normal(size=(70_001, 4)).astype(np.float32)
X = X32.astype(np.float64)
Y = RNG.integers(0, 3, X.shape[0])


def _fit(data, y=Y):
    m = GaussianNB(1.0, (-2.0, 2.0), classes=[0, 1, 2], random_state=3).fit(data, y)
    return np.concatenate([m.theta_.ravel(), m.var_.ravel(), m.class_count_])


def test_fit_bit_identical_across_threads_layouts_dtypes(monkeypatch):
    assert_bit_identical(monkeypatch, _fit, X, float32=X32)


@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (-3.0, 5.0)])
def test_statistics_match_numpy_definition(bounds):
    d = X.shape[1]
    lo, hi = np.full(d, bounds[0]), np.full(d, bounds[1])
    got = GaussianNB._statistics(X[:3000], Y[:3000], 3, lo, hi)
    r = 0.5 * (hi - lo)
    with np.errstate(over="ignore"):
        s = lo + hi
    c = np.where(np.isfinite(s), 0.5 * s, lo + r)
    u = np.clip((np.clip(X[:3000], lo, hi) - c) / r, -1.0, 1.0)
    onehot = np.eye(3)[Y[:3000]].T
    ref = np.hstack([onehot.sum(1)[:, None], onehot @ u, onehot @ (u * u) - 0.5 * onehot.sum(1)[:, None]])
    # summation error bound: 3000 terms of |u| <= 1 (Higham 2002, Thm 4.3), both sides
    np.testing.assert_allclose(got, ref, rtol=0, atol=2 * 3001 * 2.0 ** -53 * 3000)


def test_exact_statistics_are_partition_invariant_integers_and_bound_records_are_bounds():
    """GaussianNB's statistics are exact fixed-point sums (grid bound 1, dpfast._fixed): any split
    of the rows adds up to the whole (the Dask partitions), and a row at a bound contributes
    exactly +-1 to sum u and 1/2 to sum (u^2 - 1/2)."""
    from dpfast.naive_bayes._gaussian import _statistic_floats

    rng = np.random.default_rng(11)
    X = rng.uniform(-3, 3, (5000, 3))
    y = rng.integers(0, 2, 5000)
    lo, hi = np.full(3, -2.0), np.array([2.0, 1.0, 0.7])
    n, t1, t2 = GaussianNB._exact_statistics(X, y, 2, lo, hi)
    parts = [GaussianNB._exact_statistics(np.ascontiguousarray(X[a:b]), y[a:b], 2, lo, hi)
             for a, b in [(0, 1), (1, 4097), (4097, 5000)]]
    for j, whole in enumerate((n, t1, t2)):
        total = parts[0][j] + parts[1][j] + parts[2][j]
        assert total.tolist() == np.asarray(whole).tolist()
    row = np.array([[2.0, -2.0, 0.7]])
    stats = _statistic_floats(GaussianNB._exact_statistics(row, np.array([1]), 2, lo, hi))
    assert stats[1].tolist() == [1.0, 1.0, -1.0, 1.0, 0.5, 0.5, 0.5]
    assert stats[0].tolist() == [0.0] * 7
