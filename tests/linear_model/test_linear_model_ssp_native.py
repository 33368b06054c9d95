"""LinearRegression(method="ssp") through the native Gram pass (dpfast._stats.ssp_gram): the
released coefficients are bit-identical for DPFAST_NUM_THREADS = 1, 2, 3 and for C / Fortran
input; ssp_statistics matches Z'WZ, Z'Wy within the summation bound."""
from __future__ import annotations

import numpy as np

from dpfast.linear_model import LinearRegression
from dpfast.linear_model._ssp import ssp_statistics

from _native_checks import assert_bit_identical

RNG = np.random.default_rng(8)
X = RNG.normal(size=(60_001, 5)) / 5
Y = np.clip(X @ RNG.normal(size=5) + 0.1 * RNG.normal(size=X.shape[0]), -1, 1)


def _fit(data):
    m = LinearRegression(1.0, 1e-5, method="ssp", random_state=4).fit(data, Y)
    return np.concatenate([m.coef_, [m.intercept_]])


def test_fit_bit_identical_across_threads_and_layouts(monkeypatch):
    assert_bit_identical(monkeypatch, _fit, X)


def test_ssp_statistics_match_definition():
    n = 5000
    Z, y, w = X[:n], Y[:n], RNG.uniform(0, 1, n)
    for wv in (None, w):
        A, b = ssp_statistics(Z, y, wv)
        W = np.ones(n) if wv is None else wv
        assert np.array_equal(A, A.T)
        bound = (n + 2) * 2.0 ** -53  # Higham 2002, Thm 4.3, relative to sum |terms|
        # the factor grid: each factor truncated by less than 2^-26 P (P = 1, the power of two
        # above the columns' largest magnitude, here below 1): a term moves by less than 2^-25
        grid = n * 2.0**-25
        np.testing.assert_allclose(A, (Z * W[:, None]).T @ Z, rtol=0,
                                   atol=grid + 2 * bound * float((np.abs(Z) ** 2).sum()))
        np.testing.assert_allclose(b, Z.T @ (W * y), rtol=0, atol=grid + 2 * bound * float(np.abs(Z).sum()))
