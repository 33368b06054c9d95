"""PCA's statistic through the native pass (dpfast._stats.pca_gram): the released components are
bit-identical for DPFAST_NUM_THREADS = 1, 2, 3, for C / Fortran input and float32 vs float64 input
holding the same values; the statistic matches the NumPy row map within the summation bound."""
from __future__ import annotations

import numpy as np
import pytest

from dpfast.decomposition import PCA

from _native_checks import assert_bit_identical

RNG = np.random.default_rng(6)
X32 = RNG.uniform(0.0, 1.0, (60_001, 6)).astype(np.float32)
X = X32.astype(np.float64)


def _fit(data, **kw):
    m = PCA(3, epsilon=1.0, bounds=(0.0, 1.0), random_state=2, **kw).fit(data)
    return np.concatenate([m.components_.ravel(), m.explained_variance_, m.mean_])


@pytest.mark.parametrize("delta", [1e-5, 0.0])
def test_fit_bit_identical_across_threads_layouts_dtypes(monkeypatch, delta):
    assert_bit_identical(monkeypatch, lambda data: _fit(data, delta=delta), X, float32=X32)


@pytest.mark.parametrize("centered", [False, True])
def test_statistic_matches_numpy_row_map(centered):
    n, d = 4000, 6
    x = X[:n] * 3 - 1  # rows longer than R get scaled onto the sphere
    m = PCA(2, epsilon=1.0, bounds=(0.0, 1.0), norm_bound=0.8, centered=centered)
    lo, hi, c = np.zeros(d), np.ones(d), np.full(d, 0.5)
    v = m._statistic(x, c, lo, hi, 0.8)
    y = np.clip(x, lo, hi) - c
    nrm = np.sqrt((y * y).sum(1))
    y = np.where((nrm > 0.8)[:, None], y / nrm[:, None] * 0.8, y)
    u = y / 0.8
    iu = np.triu_indices(d)
    ref = [(u.T @ u)[iu]] + ([] if centered else [u.sum(0)]) + [np.array([float(n)])]
    # each |u_j u_k| <= 1: the factor grid (each factor truncated by less than 2^-26: a term moves
    # by less than 2^-25) plus n terms of the float reference (Higham 2002, Thm 4.3) and a few
    # ulps of the row maps
    np.testing.assert_allclose(v, np.concatenate(ref), rtol=0, atol=n * 2.0**-25 + 2 * (n + 8) * 2.0 ** -53 * n)
    assert v[-1] == n
