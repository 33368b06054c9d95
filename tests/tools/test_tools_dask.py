"""dpfast.tools on Dask collections (issue 24): statistics and histograms as one pass of the
in-memory statistic per row partition, added in partition order after the charge; equal to the
NumPy release for the same data and rng up to the order of the sums (counts and histograms
exactly); quantiles refuse Dask input before the charge."""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402
import pandas as pd  # noqa: E402

from dpfast import PrivacyBudget, tools  # noqa: E402

from _dask_checks import no_gather, rounding_tol  # noqa: E402

N = 4000
B = (-2.0, 2.0)


def _data(seed=0, nan=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 3, 2))
    if nan:
        X[::7, 1, 0] = np.nan
    return X


@pytest.fixture(autouse=True)
def _sync():
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.mark.parametrize("name", ["mean", "var", "std", "sum", "nanmean", "nanvar", "nanstd", "nansum"])
@pytest.mark.parametrize("axis", [None, 0])
@pytest.mark.parametrize("keepdims", [False, True])
def test_statistics_equal_numpy_for_any_partitioning(name, axis, keepdims):
    X = _data(nan=name.startswith("nan"))
    f = getattr(tools, name)
    ref = f(X, 1.0, B, axis=axis, keepdims=keepdims, rng=3)
    # sums of up to 6 N terms of magnitude <= 2 (sum), 4 (squares); var/std divide by the noisy count >= 1
    tol = rounding_tol(6 * N, 4.0)
    for chunks in ((N, 3, 2), (1000, 1, 2), (333, 3, 1)):
        with no_gather():
            got = f(da.from_array(X, chunks=chunks), 1.0, B, axis=axis, keepdims=keepdims, rng=3)
        assert np.shape(got) == np.shape(ref) and np.asarray(got).dtype == np.asarray(ref).dtype
        np.testing.assert_allclose(got, ref, atol=tol, rtol=0)


def test_count_nonzero_and_histograms_are_exactly_numpy():
    X = _data(1)
    Xd = da.from_array(X, chunks=(700, 2, 2))
    np.testing.assert_array_equal(tools.count_nonzero(Xd > 0, 1.0, axis=0, rng=1),
                                  tools.count_nonzero(X > 0, 1.0, axis=0, rng=1))
    x, y = X[:, 0, 0], X[:, 1, 1]
    xd, yd = Xd[:, 0, 0], Xd[:, 1, 1]
    with no_gather():
        h = tools.histogram(xd, 1.0, bins=12, range=(-3, 3), rng=2)
        h2 = tools.histogram2d(xd, yd, 1.0, bins=5, range=[(-3, 3), (-3, 3)], rng=2)
        hd = tools.histogramdd(Xd.reshape(N, 6)[:, :3], 1.0, bins=4, range=[(-3, 3)] * 3, density=True, rng=2)
    np.testing.assert_array_equal(h[0], tools.histogram(x, 1.0, bins=12, range=(-3, 3), rng=2)[0])
    np.testing.assert_array_equal(h2[0], tools.histogram2d(x, y, 1.0, bins=5, range=[(-3, 3), (-3, 3)], rng=2)[0])
    np.testing.assert_array_equal(hd[0], tools.histogramdd(X.reshape(N, 6)[:, :3], 1.0, bins=4, range=[(-3, 3)] * 3,
                                                           density=True, rng=2)[0])
    # x as Dask, y as NumPy
    np.testing.assert_array_equal(tools.histogram2d(xd, y, 1.0, bins=5, range=[(-3, 3), (-3, 3)], rng=2)[0], h2[0])


def test_dataframe_and_series():
    X = _data(2)[:, :, 0]
    pdf = pd.DataFrame(X, columns=list("abc"))
    ddf = dd.from_pandas(pdf, npartitions=3)
    np.testing.assert_allclose(tools.mean(ddf, 1.0, B, axis=0, rng=4), tools.mean(X, 1.0, B, axis=0, rng=4),
                               atol=rounding_tol(N, 2.0))
    np.testing.assert_allclose(tools.sum(ddf["a"], 1.0, B, rng=4), tools.sum(X[:, 0], 1.0, B, rng=4),
                               atol=rounding_tol(N, 2.0))
    # partitions of unknown length (a frame's): histograms of a Series, of two Series, of a frame
    rg = [(-3, 3), (-3, 3)]
    np.testing.assert_array_equal(tools.histogram(ddf["a"], 1.0, bins=6, range=(-3, 3), rng=5)[0],
                                  tools.histogram(X[:, 0], 1.0, bins=6, range=(-3, 3), rng=5)[0])
    np.testing.assert_array_equal(tools.histogram2d(ddf["a"], ddf["b"], 1.0, bins=3, range=rg, rng=5)[0],
                                  tools.histogram2d(X[:, 0], X[:, 1], 1.0, bins=3, range=rg, rng=5)[0])
    np.testing.assert_array_equal(tools.histogramdd(ddf[["a", "b"]], 1.0, bins=3, range=rg, rng=5)[0],
                                  tools.histogramdd(X[:, :2], 1.0, bins=3, range=rg, rng=5)[0])


def test_public_failures_before_the_charge_and_data_failures_after():
    Xd = da.from_array(_data(), chunks=(1000, 3, 2))
    bad = [lambda b, g: tools.mean(Xd, 1.0, B, axis=1, budget=b, rng=g),
           lambda b, g: tools.var(Xd, 1.0, (2.0, -2.0), budget=b, rng=g),
           lambda b, g: tools.histogram(Xd[:, 0, 0], 1.0, bins=5, budget=b, rng=g),  # no public range
           lambda b, g: tools.median(Xd, 1.0, B, budget=b, rng=g),
           lambda b, g: tools.quantile(Xd, 0.3, 1.0, B, budget=b, rng=g),
           lambda b, g: tools.mean(da.from_array(np.array(["a", "b"])), 1.0, B, budget=b, rng=g)]
    for call in bad:
        gen = np.random.default_rng(0)
        state = gen.bit_generator.state
        budget = PrivacyBudget(10.0, 1e-3)
        with pytest.raises((ValueError, TypeError)):
            call(budget, gen)
        assert budget.ledger == () and gen.bit_generator.state == state
    X = _data()
    X[1717, 2, 1] = np.inf
    for f, msg in ((tools.mean, "a must be finite"), (tools.nanvar, "a must not contain inf")):
        budget = PrivacyBudget(10.0, 1e-3)
        with pytest.raises(ValueError) as info:
            f(da.from_array(X, chunks=(1000, 3, 2)), 1.0, B, budget=budget)
        assert str(info.value).startswith(msg) and "1717" not in str(info.value)
        assert len(budget.ledger) == 1
