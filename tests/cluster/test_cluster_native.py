"""KMeans through the native step (dpfast._stats.kmeans_step): released centres bit-identical for
DPFAST_NUM_THREADS = 1, 2, 3, for C / Fortran input and float32 vs float64 input holding the same
values; the assignment is the nearest centre (ties to the lowest index)."""
from __future__ import annotations

import numpy as np

from dpfast.cluster import KMeans
from dpfast.cluster._kmeans import _assign

from _native_checks import assert_bit_identical

RNG = np.random.default_rng(7)
X32 = RNG.uniform(-3.0, 3.0, (60_001, 3)).astype(np.float32)
X = X32.astype(np.float64)


def _fit(data):
    return KMeans(4, epsilon=1.0, bounds=(-3.0, 3.0), random_state=1).fit(data).cluster_centers_


def test_fit_bit_identical_across_threads_layouts_dtypes(monkeypatch):
    assert_bit_identical(monkeypatch, _fit, X, float32=X32)


def test_assign_is_nearest_centre():
    C = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [-2.0, 0.5, 0.0]])
    U = X[:5000]
    D = ((U[:, None, :] - C[None]) ** 2).sum(-1)
    srt = np.sort(D, axis=1)
    clear = srt[:, 1] - srt[:, 0] > 1e-9
    lab = _assign(U, C)
    assert lab.dtype == np.intp
    assert np.array_equal(lab[clear], D.argmin(1)[clear])
    assert _assign(np.zeros((1, 3)), np.array([[1.0, 0, 0], [0, 1.0, 0]])).tolist() == [0]
