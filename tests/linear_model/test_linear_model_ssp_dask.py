"""LinearRegression(method="ssp") on Dask collections (issue 24): one pass of per-partition
sufficient statistics (Z^T W Z, Z^T W y) added in partition order, then the in-memory fit's
noise and solve; equal to the in-memory fit up to the order of the sums."""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402
import pandas as pd  # noqa: E402

from dpfast import PrivacyBudget  # noqa: E402
from dpfast.linear_model import LinearRegression  # noqa: E402

from _dask_checks import no_gather, rounding_tol  # noqa: E402

N, D = 5000, 4


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) / 3.0
    y = X @ np.array([1.0, -1.0, 0.5, 0.0]) + 0.1 * rng.normal(size=N)
    return X, y, rng.uniform(size=N)


@pytest.fixture(autouse=True)
def _sync():
    with dask.config.set(scheduler="synchronous"):
        yield


def _ssp(**kw):
    return LinearRegression(method="ssp", epsilon=1.0, random_state=2, **kw)


# the statistics' entries are sums of N terms of magnitude <= R^2 + s^2 = 2; the solve multiplies
# their rounding by ||(A + lambda I)^{-1}|| <= 1/lambda (lambda ~ 2 sigma sqrt(d+1) > 1 here) times ||b|| <= 2 N
TOL = rounding_tol(N, 2.0) * 2 * N


@pytest.mark.parametrize("kw", [dict(), dict(fit_intercept=False, row_norm="normalize"), dict(norm_bound=0.5)])
def test_dask_fit_equals_in_memory_for_any_partitioning(kw):
    X, y, w = _data()
    ref = _ssp(**kw).fit(X, y, w)
    for chunk in (N, 1300, 333):
        with no_gather():
            got = _ssp(**kw).fit(da.from_array(X, chunks=(chunk, 2)), da.from_array(y, chunks=chunk),
                                 da.from_array(w, chunks=chunk))
        np.testing.assert_allclose(got.coef_, ref.coef_, atol=TOL, rtol=0)
        assert abs(got.intercept_ - ref.intercept_) <= TOL
        assert got.event_ == ref.event_ and got.epsilon_ == ref.epsilon_ and got.sigma_ == ref.sigma_
        assert got.lambda_ == ref.lambda_ and got.sensitivity_ == ref.sensitivity_


def test_dataframe_numpy_labels_and_float32():
    X, y, _ = _data(1)
    pdf = pd.DataFrame(X, columns=list("abcd"))
    ref = _ssp().fit(pdf, y)
    got = _ssp().fit(dd.from_pandas(pdf, npartitions=3), y)
    np.testing.assert_allclose(got.coef_, ref.coef_, atol=TOL)
    assert list(got.feature_names_in_) == list("abcd")
    X32 = X.astype(np.float32)
    ref32 = _ssp().fit(X32, y)
    got32 = _ssp().fit(da.from_array(X32, chunks=(1000, D)), da.from_array(y, chunks=1000))
    assert got32.sensitivity_ == ref32.sensitivity_  # the float32 slack of the norm bound, from the dtype
    np.testing.assert_allclose(got32.coef_, ref32.coef_, atol=TOL)
    pred = got32.predict(da.from_array(X, chunks=(1000, D)))
    np.testing.assert_allclose(pred.compute(), got32.predict(X), atol=1e-12)


def test_public_failures_before_the_charge():
    X, y, _ = _data()
    Xd, yd = da.from_array(X, chunks=(1000, D)), da.from_array(y, chunks=1000)
    for kw in (dict(loss="huber"), dict(alpha=np.inf), dict(label_bound=-1.0)):
        gen = np.random.default_rng(0)
        state = gen.bit_generator.state
        budget = PrivacyBudget(10.0, 1e-3)
        with pytest.raises((ValueError, TypeError)):
            LinearRegression(method="ssp", random_state=gen, **kw).fit(Xd, yd, budget=budget)
        assert budget.ledger == () and gen.bit_generator.state == state
    with pytest.raises(ValueError):  # NumPy labels of the wrong length: metadata
        _ssp().fit(Xd, y[:-1])


@pytest.mark.parametrize("what", ["nan_x", "nan_y", "weight", "norm"])
def test_data_failures_after_the_charge_name_no_value(what):
    X, y, w = _data()
    kw = {}
    if what == "nan_x":
        X[3210, 1] = np.nan
    elif what == "nan_y":
        y[77] = np.inf
    elif what == "weight":
        w[4000] = 1.5
    else:
        kw = dict(row_norm="check", norm_bound=0.1)
    budget = PrivacyBudget(10.0, 1e-3)
    with pytest.raises(ValueError) as info:
        _ssp(**kw).fit(da.from_array(X, chunks=(1000, D)), da.from_array(y, chunks=1000),
                       da.from_array(w, chunks=1000), budget=budget)
    msg = str(info.value)
    assert msg in ("X contains NaN or infinite entries", "y contains NaN or infinite values",
                   "sample_weight must be finite and lie in [0, 1]") or msg.startswith(
        "X has rows with l2 norm above norm_bound=0.1 (row_norm='check')")
    for secret in ("3210", "4000", "1.5"):
        assert secret not in msg
    assert len(budget.ledger) == 1
