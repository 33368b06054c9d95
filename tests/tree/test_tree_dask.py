"""DecisionTreeClassifier / RandomForestClassifier on Dask collections (issue 24): the trees drawn
from public randomness on the client, the leaf counts one pass of per-partition sums (integer
tables added in partition order), one charge, the draws of the in-memory fit in its order: the
released model equals the in-memory one bit for bit, for any partitioning and scheduler; public
checks before the charge, data failures after it naming no value; no data gathered on the client."""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402
import pandas as pd  # noqa: E402

from dpfast import PrivacyBudget  # noqa: E402
from dpfast.ensemble import RandomForestClassifier  # noqa: E402
from dpfast.random import ChaCha20  # noqa: E402
from dpfast.tree import DecisionTreeClassifier  # noqa: E402

from _dask_checks import class_blobs, no_gather  # noqa: E402

N, D = 3000, 4
BOUNDS = (-3.0, 6.0)


def _data(seed=0):
    return class_blobs(N, D, seed)


@pytest.fixture(autouse=True)
def _sync():
    with dask.config.set(scheduler="synchronous"):
        yield


def _released(est) -> dict:
    """Every fitted attribute (public, trailing underscore) of a fitted estimator."""
    return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}


def _assert_same_release(got, ref):
    a, b = _released(ref), _released(got)
    assert a.keys() == b.keys()
    for name, v in a.items():
        w = b[name]
        if isinstance(v, np.ndarray):
            assert w.dtype == v.dtype and w.shape == v.shape, name
            np.testing.assert_array_equal(w, v, err_msg=name)
        else:
            assert w == v, name


# (estimator, parameters, the leaf mechanism the fit ends with): "auto" both ways (the leaf rule
# compares n eps' with sqrt(2) T 2^D: 3000 * 0.01 < 1.42 * 7 * 2^6; 3000 * 2 > 1.42 * 7 * 2^4), and
# the "auto" forest size from the same noisy count
CONFIGS = [
    (DecisionTreeClassifier, dict(epsilon=1.0, max_depth=4, leaf_mechanism="counts"), "counts"),
    (DecisionTreeClassifier, dict(epsilon=1.0, max_depth=4, leaf_mechanism="label"), "label"),
    (RandomForestClassifier, dict(epsilon=1.0, max_depth=4, n_estimators=7, leaf_mechanism="counts"), "counts"),
    (RandomForestClassifier, dict(epsilon=1.0, max_depth=4, n_estimators=7, leaf_mechanism="label"), "label"),
    (RandomForestClassifier, dict(epsilon=0.01, max_depth=6, n_estimators=7), "label"),
    (RandomForestClassifier, dict(epsilon=2.0, max_depth=4, n_estimators=7), "counts"),
    (RandomForestClassifier, dict(epsilon=2.0, max_depth=3), "counts"),  # n_estimators="auto" too
    (RandomForestClassifier, dict(epsilon=1.0, max_depth=3, leaf_mechanism="label"), "label"),
    (DecisionTreeClassifier, dict(epsilon=0.01, max_depth=6), "label"),
    # "auto" both ways picking labels, then sized by the label rule (auto_n_trees_label: 3 trees here)
    (RandomForestClassifier, dict(epsilon=0.005, max_depth=4), "label"),
]


@pytest.mark.parametrize("cls,kw,mechanism", CONFIGS)
def test_dask_fit_equals_in_memory_bit_for_bit(cls, kw, mechanism):
    X, y = _data()
    params = dict(bounds=BOUNDS, classes=[0, 1, 2], random_state=7, **kw)
    ref = cls(**params).fit(X, y)
    assert ref.leaf_mechanism_ == mechanism
    if kw.get("epsilon") == 0.005:
        assert ref.n_estimators_ == 3
    for chunk in (N, 1000, 377):  # one partition and several (of unequal sizes)
        with no_gather():
            got = cls(**params).fit(da.from_array(X, chunks=(chunk, 2)), da.from_array(y, chunks=chunk))
        _assert_same_release(got, ref)
    with dask.config.set(scheduler="threads", num_workers=3):  # any scheduler: the same bits
        got = cls(**params).fit(da.from_array(X, chunks=(500, D)), da.from_array(y, chunks=500))
    _assert_same_release(got, ref)


def test_label_mode_is_the_in_memory_release_for_chacha():
    # every tree counts every row (no row -> tree draw): the trees and the selections come from
    # the client's stream in the in-memory order, for the ChaCha20 bit generator too
    X, y = _data(1)
    kw = dict(epsilon=1.0, bounds=BOUNDS, classes=[0, 1, 2], max_depth=3, n_estimators=5, leaf_mechanism="label")
    ref = RandomForestClassifier(random_state=np.random.Generator(ChaCha20(11)), **kw).fit(X, y)
    got = RandomForestClassifier(random_state=np.random.Generator(ChaCha20(11)), **kw).fit(
        da.from_array(X, chunks=(333, D)), da.from_array(y, chunks=333))
    np.testing.assert_array_equal(got.leaf_labels_, ref.leaf_labels_)
    np.testing.assert_array_equal(got.threshold_, ref.threshold_)


@pytest.mark.parametrize("mechanism", ["counts", "auto", "label"])  # label: no lengths read
def test_dataframe_numpy_labels_and_lazy_predictions(mechanism):
    X, y = _data(2)
    pdf = pd.DataFrame(X, columns=list("abcd"))
    kw = dict(epsilon=1.0, bounds={c: BOUNDS for c in "abcd"}, classes=[0, 1, 2], n_estimators=4, max_depth=3,
              leaf_mechanism=mechanism, random_state=3)
    ref = RandomForestClassifier(**kw).fit(pdf, y)
    ddf = dd.from_pandas(pdf, npartitions=4)
    got = RandomForestClassifier(**kw).fit(ddf, dd.from_pandas(pd.Series(y), npartitions=4))
    _assert_same_release(got, ref)
    assert list(got.feature_names_in_) == list("abcd")
    got2 = RandomForestClassifier(**kw).fit(ddf, y)  # NumPy labels split like the frame's partitions
    _assert_same_release(got2, ref)
    pred = got.predict(ddf)  # post-processing, lazily chunk by chunk
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), ref.predict(pdf))
    np.testing.assert_array_equal(got.predict_proba(ddf).compute(), ref.predict_proba(pdf))
    assert got.score(ddf, dd.from_pandas(pd.Series(y), npartitions=4)) == pytest.approx(ref.score(pdf, y), abs=1e-12)


def test_public_failures_before_the_charge():
    X, y = _data()
    Xd, yd = da.from_array(X, chunks=(1000, D)), da.from_array(y, chunks=1000)
    cases = [
        dict(bounds=None),                      # bounds are required
        dict(bounds={0: BOUNDS}),               # a dict missing features (n_features from metadata)
        dict(bounds=[BOUNDS, BOUNDS]),          # a 2-d array is ambiguous
        dict(classes=[1]),                      # a label set of one class
        dict(max_depth=30),                     # the count table is too large
        dict(epsilon=0.0),
    ]
    for cls in (DecisionTreeClassifier, RandomForestClassifier):
        for bad in cases:
            kw = dict(epsilon=1.0, bounds=BOUNDS, classes=[0, 1, 2], random_state=np.random.default_rng(0))
            kw.update(bad)
            gen_state = kw["random_state"].bit_generator.state
            budget = PrivacyBudget(10.0, 1e-3)
            with pytest.raises((ValueError, TypeError)):
                cls(**kw).fit(Xd, yd, budget=budget)
            assert budget.ledger == () and kw["random_state"].bit_generator.state == gen_state
    budget = PrivacyBudget(10.0, 1e-3)
    with pytest.raises(ValueError, match="chunks"):  # labels chunked unlike X: metadata
        DecisionTreeClassifier(1.0, BOUNDS, classes=[0, 1, 2]).fit(Xd, da.from_array(y, chunks=700), budget=budget)
    with pytest.raises(ValueError, match="requires y"):
        DecisionTreeClassifier(1.0, BOUNDS).fit(Xd, None, budget=budget)
    with pytest.raises(TypeError, match="real numbers"):
        DecisionTreeClassifier(1.0, BOUNDS).fit(da.from_array(X.astype(str), chunks=(1000, D)), yd, budget=budget)
    assert budget.ledger == ()


@pytest.mark.parametrize("mechanism", ["counts", "label"])
@pytest.mark.parametrize("what", ["nan", "inf", "label", "length"])
def test_data_failures_after_the_charge_name_no_value(what, mechanism):
    X, y = _data()
    X, y = X.copy(), y.copy()
    yd = None
    if what == "nan":
        X[1234, 2] = np.nan
    elif what == "inf":
        X[17, 0] = -np.inf
    elif what == "label":
        y[2500] = 987654
    else:  # as many partitions as X, of lengths unknown on the client and found wrong in the pass
        yd = dd.from_pandas(pd.Series(np.concatenate([y, y[:5]])), npartitions=3)
        assert yd.npartitions == 3
    if yd is None:
        yd = da.from_array(y, chunks=1000)
    budget = PrivacyBudget(10.0, 1e-3)
    with pytest.raises(ValueError) as info:
        RandomForestClassifier(1.0, BOUNDS, classes=[0, 1, 2], n_estimators=3, leaf_mechanism=mechanism,
                               random_state=0).fit(da.from_array(X, chunks=(1000, D)), yd, budget=budget)
    # the fixed messages: no row, chunk or value
    assert str(info.value) in ("X contains NaN or infinite entries",
                               "y has labels outside the public label set (classes)",
                               "y (or sample_weight) does not have one entry per row of X")
    assert "987654" not in str(info.value)
    assert len(budget.ledger) == 1  # charged: the failure depends on the private data


@pytest.mark.slow
def test_distributed_cluster_equals_in_memory():
    distributed = pytest.importorskip("distributed")
    X, y = _data(4)
    kw = dict(epsilon=0.5, bounds=BOUNDS, classes=[0, 1, 2], n_estimators=5, max_depth=4, random_state=9)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster):
        for mechanism in ("counts", "label"):
            ref = RandomForestClassifier(leaf_mechanism=mechanism, **kw).fit(X, y)
            got = RandomForestClassifier(leaf_mechanism=mechanism, **kw).fit(
                da.from_array(X, chunks=(700, D)), da.from_array(y, chunks=700))
            _assert_same_release(got, ref)
