"""Red team 32: the forest's native predict_proba / apply and leaf counts after 44f7114, attacked
through the estimator and the binding: X of another width, layout, dtype, NaN/inf rows, 0 rows,
Dask; forests unpickled from a tampered pickle (feature indices out of range or of another dtype,
thresholds NaN/inf/float32, depth, leaf_proba shape).  No hole: every case is a clear Python
error or the result of a NumPy reference descent (run under .ci/sanitize: no ASan/UBSan report)."""
import pickle

import numpy as np
import pytest

from dpfast import _trees
from dpfast.ensemble import RandomForestClassifier

D = 4


@pytest.fixture(scope="module")
def est():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (300, D))
    y = (X[:, 0] > 0.5).astype(int)
    return RandomForestClassifier(epsilon=1.0, bounds=(0.0, 1.0), classes=[0, 1], max_depth=3, n_estimators=7,
                                  random_state=1).fit(X, y)


def _descent(X, feature, threshold, depth):
    """(n, T) leaves by the definition: at node a go right iff x[feature[a]] > threshold[a]."""
    X = np.asarray(X, dtype=np.float64)
    T = feature.shape[0]
    out = np.zeros((X.shape[0], T), dtype=np.int64)
    for t in range(T):
        a = np.zeros(X.shape[0], dtype=np.int64)
        for _ in range(depth):
            right = X[np.arange(X.shape[0]), feature[t, a]] > threshold[t, a]
            a = 2 * a + 1 + right
        out[:, t] = a - (2 ** depth - 1)
    return out


def _proba_ref(est, X):
    leaves = _descent(X, est.feature_, est.threshold_, int(est.max_depth))
    T = est.feature_.shape[0]
    return sum(est.leaf_proba_[t, leaves[:, t]] for t in range(T)) / T


def _tamper(est, **kw):
    e = pickle.loads(pickle.dumps(est))
    for k, v in kw.items():
        setattr(e, k, v)
    return pickle.loads(pickle.dumps(e))


def test_predict_inputs(est):
    rng = np.random.default_rng(1)
    Xt = rng.uniform(-0.5, 1.5, (37, D))
    ref = _proba_ref(est, Xt)
    np.testing.assert_allclose(est.predict_proba(Xt), ref, rtol=1e-15, atol=0)
    for X in (np.asfortranarray(Xt), Xt[::-1][::-1], np.repeat(Xt, 2, axis=0)[::2], Xt.astype(object)):
        np.testing.assert_array_equal(est.predict_proba(X), est.predict_proba(Xt))
    for X in (Xt.astype(np.float32), (Xt > 0.5), (Xt * 3).astype(np.int8), Xt.astype(np.float16)):
        np.testing.assert_allclose(est.predict_proba(X), _proba_ref(est, np.asarray(X, dtype=np.float64)), rtol=1e-15)
    np.testing.assert_array_equal(est.apply(Xt), _descent(Xt, est.feature_, est.threshold_, 3))
    # refused: another width, NaN/inf rows, 0 rows, 1-D/3-D, complex
    for X in (np.hstack([Xt, Xt]), Xt[:, :2], np.full((2, D), np.nan), np.full((2, D), np.inf), np.empty((0, D)),
              Xt[0], Xt[None], Xt.astype(complex)):
        with pytest.raises(ValueError):
            est.predict_proba(X)


def test_predict_dask(est):
    da = pytest.importorskip("dask.array")
    Xt = np.random.default_rng(2).uniform(0, 1, (23, D))
    got = est.predict_proba(da.from_array(Xt, chunks=(5, D))).compute()
    np.testing.assert_array_equal(got, est.predict_proba(Xt))


def test_tampered_pickles_refused_or_exact(est):
    Xt = np.random.default_rng(3).uniform(0, 1, (9, D))
    bad = []
    for v in (D, 99, -1, 2 ** 62, -2 ** 63):
        f = est.feature_.copy()
        f[3, 2] = v
        bad.append(dict(feature_=f))
    bad += [dict(feature_=est.feature_.astype(np.int32)), dict(feature_=est.feature_.astype(np.uint64)),
            dict(feature_=np.asfortranarray(est.feature_)), dict(feature_=est.feature_[:, :-1].copy()),
            dict(feature_=est.feature_[:-1].copy()), dict(threshold_=est.threshold_.astype(np.float32)),
            dict(threshold_=est.threshold_.astype(object)), dict(max_depth=4), dict(max_depth=31),
            dict(max_depth=-1), dict(max_depth=2 ** 40), dict(leaf_proba_=est.leaf_proba_[:, :-1].copy()),
            dict(leaf_proba_=est.leaf_proba_[:, :, :0].copy()), dict(leaf_proba_=est.leaf_proba_[:, :, 0].copy()),
            dict(leaf_proba_=est.leaf_proba_[:-1].copy()), dict(n_features_in_=2)]
    for kw in bad:
        e = _tamper(est, **kw)
        with pytest.raises((ValueError, TypeError)):
            e.predict_proba(Xt if kw != dict(n_features_in_=2) else Xt[:, :2])
        if "leaf_proba_" not in kw:
            with pytest.raises((ValueError, TypeError)):
                e.apply(Xt if kw != dict(n_features_in_=2) else Xt[:, :2])
    # thresholds NaN (x > NaN is false: left), +-inf: the definition's leaves
    for thr in (np.full_like(est.threshold_, np.nan), np.where(np.arange(7)[:, None] % 2, np.inf, -np.inf)
                * np.ones_like(est.threshold_), -0.0 * np.ones_like(est.threshold_)):
        e = _tamper(est, threshold_=thr)
        np.testing.assert_array_equal(e.apply(Xt), _descent(Xt, e.feature_, thr, 3))
        np.testing.assert_allclose(e.predict_proba(Xt), _proba_ref(e, Xt), rtol=1e-15)


def test_leaf_counts_hostile_forests():
    # the sliced kernel (forced) and the descent on tampered forests: NaN/inf/-0.0 thresholds, a
    # forest on the last column of a wide X, rows by a zero stride; identical counts, in bounds
    rng = np.random.default_rng(4)
    n, d, T, depth = 130, 40000, 3, 2
    X = np.broadcast_to(rng.uniform(-1, 1, (1, d)), (n, d))  # row stride 0
    y = rng.integers(0, 3, n)
    f = np.full((T, 3), d - 1, dtype=np.int64)
    f[1] = [0, d // 2, d - 2]
    for thr in (np.array([[0.0, -0.0, 5e-324]] * T), np.array([[np.inf, -np.inf, 0.5]] * T),
                np.array([[np.nan, 0.0, 1.0]] * T)):
        ref = _trees.leaf_counts(np.ascontiguousarray(X), y, 3, None, f, thr, depth, 1, 1)
        assert ref.sum() == n * T
        for kernel in (0, 2):
            for nt in (1, 3):
                np.testing.assert_array_equal(_trees.leaf_counts(X, y, 3, None, f, thr, depth, nt, kernel), ref)
    with pytest.raises(ValueError, match="rows must be contiguous"):
        _trees.leaf_counts(np.asfortranarray(rng.uniform(size=(5, 3))), y[:5], 3, None, f[:, :3] % 3, thr, depth, 1, 2)
    with pytest.raises(ValueError, match="row stride"):
        _trees.route(rng.uniform(size=(5, 3))[::-1], f % 3, thr, depth, 1)
    with pytest.raises(ValueError):
        _trees.proba_sum(rng.uniform(size=(5, 3)), f % 3, thr, depth, np.ones((T, 4, 0)), 1)


def test_dask_partitions_hostile():
    # a 0-row partition, column chunks, Fortran-order blocks: the in-memory release; y chunked
    # unlike X's rows: refused (before the charge: tests/test_fail_before_charge.py has the case)
    dask = pytest.importorskip("dask")
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (300, 3))
    y = (X[:, 0] > 0.5).astype(int)
    kw = dict(epsilon=1.0, bounds=(0.0, 1.0), classes=[0, 1], max_depth=3, n_estimators=5)
    ref = RandomForestClassifier(random_state=3, **kw).fit(X, y)
    with dask.config.set(scheduler="synchronous"):
        for Xd in (da.concatenate([da.from_array(X[:0], chunks=(1, 3)), da.from_array(X, chunks=(100, 3))]),
                   da.from_array(X, chunks=(100, 1)), da.from_array(np.asfortranarray(X), chunks=(100, 3))):
            e = RandomForestClassifier(random_state=3, **kw).fit(Xd, da.from_array(y, chunks=100))
            np.testing.assert_array_equal(e.leaf_proba_, ref.leaf_proba_)
        with pytest.raises(ValueError, match="chunk"):
            RandomForestClassifier(random_state=3, **kw).fit(da.from_array(X, chunks=(100, 3)),
                                                             da.from_array(y, chunks=150))
