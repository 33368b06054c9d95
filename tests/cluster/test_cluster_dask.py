"""KMeans on Dask collections (issue 24): the data read once (persisted in unit coordinates),
one pass per Lloyd step, the release equal to the in-memory fit's up to the order of the sums;
public checks before the charge; non-finite data after it with a fixed message."""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402
import pandas as pd  # noqa: E402

from dpfast import PrivacyBudget  # noqa: E402
from dpfast.cluster import KMeans  # noqa: E402

from _dask_checks import no_gather, rounding_tol  # noqa: E402

N = 6000


def _blobs(seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(m, 0.3, size=(N // 3, 2)) for m in (-2.0, 0.0, 2.0)])


@pytest.fixture(autouse=True)
def _sync():
    with dask.config.set(scheduler="synchronous"):
        yield


def test_dask_fit_equals_in_memory_for_any_partitioning():
    X = _blobs()
    kw = dict(n_clusters=3, epsilon=1.0, bounds=(-4, 4), max_iter=5, random_state=5)
    ref = KMeans(**kw).fit(X)
    # each step's centre is sum/count of unit rows: the sums' rounding, times the box half-width 4,
    # compounded over 5 steps (the blobs are far from the assignment's ties)
    tol = 5 * 4 * rounding_tol(N, 1.0)
    for chunk in (N, 1500, 777):
        with no_gather():
            got = KMeans(**kw).fit(da.from_array(X, chunks=(chunk, 1)))
        np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, atol=tol, rtol=0)
        assert got.event_ == ref.event_ and got.epsilon_ == ref.epsilon_ and got.n_iter_ == 5


def test_rows_are_read_once_and_each_step_is_one_pass():
    X = _blobs(1)
    reads = []

    def source(block, block_info=None):
        reads.append(block_info[None]["chunk-location"][0])
        return block

    Xd = da.from_array(X, chunks=(1000, 2)).map_blocks(source, dtype=X.dtype)
    KMeans(3, epsilon=1.0, bounds=(-4, 4), max_iter=7, random_state=0).fit(Xd)
    assert sorted(reads) == list(range(Xd.numblocks[0]))  # every partition read exactly once


def test_dataframe_and_lazy_predict():
    X = _blobs(2)
    pdf = pd.DataFrame(X, columns=["x", "y"])
    kw = dict(n_clusters=3, epsilon=2.0, bounds={"x": (-4, 4), "y": (-4, 4)}, random_state=9)
    ref = KMeans(**kw).fit(pdf)
    got = KMeans(**kw).fit(dd.from_pandas(pdf, npartitions=4))
    np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, atol=5 * 4 * rounding_tol(N, 1.0))
    lab = got.predict(da.from_array(X, chunks=(1000, 2)))
    assert isinstance(lab, da.Array)
    np.testing.assert_array_equal(lab.compute(), got.predict(pdf))


def test_public_failures_before_the_charge_and_data_failures_after():
    Xd = da.from_array(_blobs(), chunks=(1000, 2))
    for kw in (dict(bounds=None), dict(bounds={0: (-1, 1)}), dict(bounds=(1, -1))):
        gen = np.random.default_rng(0)
        state = gen.bit_generator.state
        budget = PrivacyBudget(10.0, 1e-3)
        with pytest.raises(ValueError):
            KMeans(3, random_state=gen, **kw).fit(Xd, budget=budget)
        assert budget.ledger == () and gen.bit_generator.state == state
    X = _blobs()
    X[4321, 0] = np.nan
    budget = PrivacyBudget(10.0, 1e-3)
    with pytest.raises(ValueError) as info:
        KMeans(3, bounds=(-4, 4)).fit(da.from_array(X, chunks=(1000, 2)), budget=budget)
    assert str(info.value) == "X contains NaN or infinite entries"
    assert len(budget.ledger) == 1


@pytest.mark.slow
def test_local_cluster_gives_the_synchronous_release():
    """On a 2-process LocalCluster (the persisted rows on the workers, partials added in
    partition order on the client) every one-pass release of issue 24 is bit-identical to the
    synchronous scheduler's for the same partitioning."""
    distributed = pytest.importorskip("distributed")
    from dpfast import tools
    from dpfast.decomposition import PCA
    from dpfast.linear_model import LinearRegression
    from dpfast.naive_bayes import GaussianNB

    X = _blobs(3)
    y = (X[:, 0] > 0).astype(int)
    yr = X @ np.array([0.3, -0.2])

    def fits():
        Xd, yd = da.from_array(X, chunks=(700, 2)), da.from_array(y, chunks=700)
        return [KMeans(3, bounds=(-4, 4), random_state=1).fit(Xd).cluster_centers_,
                PCA(2, norm_bound=6.0, random_state=1).fit(Xd).components_,
                GaussianNB(bounds=(-4, 4), random_state=1).fit(Xd, yd).theta_,
                LinearRegression(method="ssp", norm_bound=6.0, label_bound=2.0, random_state=1).fit(
                    Xd, da.from_array(yr, chunks=700)).coef_,
                tools.var(Xd, 1.0, (-4, 4), axis=0, rng=1),
                tools.histogram2d(Xd[:, 0], Xd[:, 1], 1.0, bins=4, range=[(-4, 4), (-4, 4)], rng=1)[0]]

    ref = fits()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cl, distributed.Client(cl):
        got = fits()
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)
