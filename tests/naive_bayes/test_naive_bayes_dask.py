"""GaussianNB on Dask collections (issue 24): one pass of per-partition statistics, the release
equal to the in-memory fit's up to the order of the sums; public checks before the charge, data
failures after it naming no value; no data gathered on the client."""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402
import pandas as pd  # noqa: E402

from dpfast import PrivacyBudget  # noqa: E402
from dpfast.naive_bayes import GaussianNB  # noqa: E402

from _dask_checks import class_blobs, no_gather, rounding_tol  # noqa: E402

N, D = 3000, 4


def _data(seed=0):
    return class_blobs(N, D, seed)


@pytest.fixture(autouse=True)
def _sync():
    with dask.config.set(scheduler="synchronous"):
        yield


def _close(a, b, tol):
    for name in ("theta_", "var_", "class_count_", "class_prior_"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=tol, err_msg=name)


def test_dask_fit_equals_in_memory_and_does_not_depend_on_partitioning():
    X, y = _data()
    kw = dict(epsilon=2.0, bounds=(-3, 6), classes=[0, 1, 2], random_state=7)
    ref = GaussianNB(**kw).fit(X, y)
    tol = rounding_tol(N, 1.0) * 81  # unit statistics, then scaled by r^2 <= 4.5^2
    for chunk in (N, 1000, 377):
        with no_gather():
            got = GaussianNB(**kw).fit(da.from_array(X, chunks=(chunk, 2)), da.from_array(y, chunks=chunk))
        _close(got, ref, tol)
        np.testing.assert_array_equal(got.class_count_, ref.class_count_)  # counts: exact integers + the same noise
        assert got.event_ == ref.event_ and got.epsilon_ == ref.epsilon_ and got.delta_ == 0.0
    # bit-identical for the same partitioning, whatever the scheduler
    a = GaussianNB(**kw).fit(da.from_array(X, chunks=(500, D)), da.from_array(y, chunks=500))
    with dask.config.set(scheduler="threads", num_workers=3):
        b = GaussianNB(**kw).fit(da.from_array(X, chunks=(500, D)), da.from_array(y, chunks=500))
    _close(a, b, 0.0)


def test_dataframe_numpy_labels_and_lazy_predictions():
    X, y = _data(1)
    bounds = {c: (-3, 6) for c in "abcd"}
    kw = dict(epsilon=1.0, bounds=bounds, classes=[0, 1, 2], random_state=3)
    pdf = pd.DataFrame(X, columns=list("abcd"))
    ref = GaussianNB(**kw).fit(pdf, y)
    ddf = dd.from_pandas(pdf, npartitions=4)
    got = GaussianNB(**kw).fit(ddf, dd.from_pandas(pd.Series(y), npartitions=4))
    _close(got, ref, rounding_tol(N, 1.0) * 81)
    assert list(got.feature_names_in_) == list("abcd")
    got2 = GaussianNB(**kw).fit(ddf, y)  # NumPy labels split like the frame's partitions
    _close(got2, ref, rounding_tol(N, 1.0) * 81)
    Xd = da.from_array(X, chunks=(700, D))
    pred = got.predict(ddf)
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), ref.predict(pdf))
    assert got.score(ddf, dd.from_pandas(pd.Series(y), npartitions=4)) == pytest.approx(ref.score(pdf, y), abs=1e-12)
    kw["bounds"] = (-3, 6)
    assert np.isfinite(GaussianNB(**kw).fit(Xd, y).predict_proba(Xd).compute()).all()


def test_public_failures_before_the_charge():
    X, y = _data()
    Xd, yd = da.from_array(X, chunks=(1000, D)), da.from_array(y, chunks=1000)
    cases = [
        dict(bounds=None),                                   # bounds are required
        dict(bounds={0: (0, 1)}),                            # a dict missing features (n_features from metadata)
        dict(priors=[0.5, 0.5]),                             # one prior per public class
        dict(classes=[1]),                                   # a label set of one class
    ]
    for bad in cases:
        kw = dict(epsilon=1.0, bounds=(-3, 6), classes=[0, 1, 2], random_state=np.random.default_rng(0))
        kw.update(bad)
        gen_state = kw["random_state"].bit_generator.state
        budget = PrivacyBudget(10.0, 1e-3)
        with pytest.raises((ValueError, TypeError)):
            GaussianNB(**kw).fit(Xd, yd, budget=budget)
        assert budget.ledger == () and kw["random_state"].bit_generator.state == gen_state
    with pytest.raises(ValueError, match="chunks"):  # labels chunked unlike X: metadata
        GaussianNB(bounds=(-3, 6), classes=[0, 1, 2]).fit(Xd, da.from_array(y, chunks=700))
    with pytest.raises(TypeError, match="real numbers"):
        GaussianNB(bounds=(-3, 6)).fit(da.from_array(X.astype(str), chunks=(1000, D)), yd)


@pytest.mark.parametrize("what", ["nan", "inf", "label"])
def test_data_failures_after_the_charge_name_no_value(what):
    X, y = _data()
    X = X.copy()
    y = y.copy()
    if what == "nan":
        X[1234, 2] = np.nan
    elif what == "inf":
        X[17, 0] = -np.inf
    else:
        y[2500] = 987654
    budget = PrivacyBudget(10.0, 1e-3)
    with pytest.raises(ValueError) as info:
        GaussianNB(epsilon=1.0, bounds=(-3, 6), classes=[0, 1, 2]).fit(
            da.from_array(X, chunks=(1000, D)), da.from_array(y, chunks=1000), budget=budget)
    # the fixed messages: no row, chunk or value
    assert str(info.value) in ("X contains NaN or infinite entries",
                               "y has labels outside the public label set (classes)")
    assert len(budget.ledger) == 1  # charged: the failure depends on the private data


def test_dask_fit_with_binary_features_equals_in_memory():
    X, y = _data(2)
    X = X.copy()
    X[:, 2:] = (X[:, 2:] > 1).astype(float)
    kw = dict(epsilon=1.5, bounds={0: (-3, 6), 1: (-3, 6), 2: (0, 1), 3: (0, 1)}, classes=[0, 1, 2],
              binary_features=[2, 3], random_state=4)
    ref = GaussianNB(**kw).fit(X, y)
    with no_gather():
        got = GaussianNB(**kw).fit(da.from_array(X, chunks=(700, 2)), da.from_array(y, chunks=700))
    _close(got, ref, rounding_tol(N, 1.0) * 81)
    assert got.event_ == ref.event_
    np.testing.assert_array_equal(got.binary_features_, ref.binary_features_)
    np.testing.assert_array_equal(got.predict(X), ref.predict(X))
