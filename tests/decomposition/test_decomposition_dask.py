"""PCA on Dask collections (issue 24): the release equals the in-memory fit's up to the order of
the sums, for any partitioning; public checks before the charge; non-finite data after it with a
fixed message; lazy transform; no data gathered on the client."""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402
import pandas as pd  # noqa: E402

from dpfast import PrivacyBudget  # noqa: E402
from dpfast.decomposition import PCA  # noqa: E402

from _dask_checks import no_gather, rounding_tol  # noqa: E402

N, D = 4000, 5


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(N, D)) * np.array([3.0, 2.0, 1.0, 0.5, 0.1])


@pytest.fixture(autouse=True)
def _sync():
    with dask.config.set(scheduler="synchronous"):
        yield


def _close(a, b, tol):
    # the released vector differs by the sums' rounding (<= tol relative to its unit entries);
    # the eigen-decomposition moves by tol / gap (the gaps of these spectra are >= 0.1 relative)
    for name in ("explained_variance_", "mean_", "n_samples_"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=100 * tol, atol=100 * tol, err_msg=name)
    np.testing.assert_allclose(a.components_, b.components_, atol=1000 * tol)


@pytest.mark.parametrize("kw", [dict(norm_bound=12.0), dict(bounds=(-8, 8), delta=0.0),
                                dict(norm_bound=4.0, centered=True)])
def test_dask_fit_equals_in_memory_for_any_partitioning(kw):
    X = _data()
    ref = PCA(3, epsilon=1.0, random_state=4, **kw).fit(X)
    tol = rounding_tol(N, 1.0)
    for chunk in (N, 1111, 250):
        with no_gather():
            got = PCA(3, epsilon=1.0, random_state=4, **kw).fit(da.from_array(X, chunks=(chunk, 3)))
        _close(got, ref, tol)
        assert got.event_ == ref.event_ and got.epsilon_ == ref.epsilon_ and got.delta_ == ref.delta_
        assert got.n_samples_ == ref.n_samples_  # the count: an exact integer + the same noise


def test_dataframe_and_lazy_transform():
    X = _data(1)
    pdf = pd.DataFrame(X, columns=[f"f{j}" for j in range(D)])
    ref = PCA(2, epsilon=2.0, norm_bound=12.0, random_state=1).fit(pdf)
    got = PCA(2, epsilon=2.0, norm_bound=12.0, random_state=1).fit(dd.from_pandas(pdf, npartitions=3))
    _close(got, ref, rounding_tol(N, 1.0))
    assert list(got.feature_names_in_) == list(pdf.columns)
    Xd = da.from_array(X, chunks=(900, D))
    T = got.transform(Xd)
    assert isinstance(T, da.Array)
    np.testing.assert_allclose(T.compute(), got.transform(pdf), atol=1e-12)


def test_public_failures_before_the_charge():
    Xd = da.from_array(_data(), chunks=(1000, D))
    for kw in (dict(), dict(norm_bound=1.0, bounds=np.zeros((2, D + 1))), dict(norm_bound=1.0, n_components=D + 1)):
        gen = np.random.default_rng(0)
        state = gen.bit_generator.state
        budget = PrivacyBudget(10.0, 1e-3)
        with pytest.raises(ValueError):
            PCA(random_state=gen, **kw).fit(Xd, budget=budget)
        assert budget.ledger == () and gen.bit_generator.state == state


def test_non_finite_data_fail_after_the_charge_with_a_fixed_message():
    X = _data()
    X[2345, 1] = np.inf
    budget = PrivacyBudget(10.0, 1e-3)
    with pytest.raises(ValueError) as info:
        PCA(2, norm_bound=3.0).fit(da.from_array(X, chunks=(1000, D)), budget=budget)
    assert str(info.value) == "X contains NaN or infinite entries"
    assert len(budget.ledger) == 1
