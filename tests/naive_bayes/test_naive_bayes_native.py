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
