"""Private linear models on Dask collections (issue 9; dpfast/linear_model/_dask.py).

Expected values come from the in-memory fit of the same data (an independent code path for the
passes: one NumPy array, the kernel's own row blocks) and from scikit-learn-free formulas for
the scores.  The in-memory and Dask fits differ only in how float64 partial sums are grouped,
so the released models agree to ~1e-12 relative; 1e-6 is the issue's bound.
"""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
import dask  # noqa: E402
import pandas as pd  # noqa: E402

from dpfast.io import read_npy_rows  # noqa: E402
from dpfast.linear_model import (  # noqa: E402
    LinearRegression,
    LogisticRegression,
    _dask,  # noqa: E402
)

from _fit_data import (  # noqa: E402,F401
    REL,
    assert_close as _close,
    assert_same_model_on_every_scheduler,
    fit_data as _data,
    params as _params,
)


@pytest.fixture(scope="module")
def cluster2():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cl:
        yield cl


# ----------------------------------------------------------------------------- equality with in-memory

@pytest.mark.parametrize("row_norm", ["normalize", "clip"])
@pytest.mark.parametrize("method", ["amp", "objective", "output"])
def test_logistic_dask_fit_equals_in_memory_fit(row_norm, method):
    X, y, _, _ = _data()
    kw = dict(row_norm=row_norm, method=method, random_state=11)
    ref = LogisticRegression(**kw).fit(X, y)
    with dask.config.set(scheduler="threads"):
        got = LogisticRegression(**kw).fit(da.from_array(X, chunks=(1700, -1)), da.from_array(y, chunks=1700))
    _close(got, ref)
    assert got.epsilon_ == ref.epsilon_ and got.delta_ == ref.delta_ and got.accountant_ == ref.accountant_
    assert got.event_ == ref.event_


def test_multiclass_regression_and_weights_equal_in_memory():
    X, _, y3, yr = _data(seed=1)
    Xc = X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))  # rows within the bound for "check"
    sw = np.linspace(0.1, 1.0, X.shape[0])
    with dask.config.set(scheduler="sync"):
        Xd = da.from_array(Xc, chunks=(2500, -1))
        ref = LogisticRegression(classes=[0, 1, 2], random_state=2).fit(Xc, y3)
        got = LogisticRegression(classes=[0, 1, 2], random_state=2).fit(Xd, da.from_array(y3, chunks=2500))
        _close(got, ref)
        for loss in ("squared", "huber"):
            ref = LinearRegression(loss=loss, random_state=3).fit(Xc, yr, sample_weight=sw)
            got = LinearRegression(loss=loss, random_state=3).fit(Xd, yr, sample_weight=da.from_array(sw, chunks=2500))
            _close(got, ref)


def test_float32_and_no_intercept_equal_in_memory():
    X, y, _, _ = _data(seed=2)
    X32 = X.astype(np.float32)
    for kw in (dict(row_norm="normalize"), dict(row_norm="clip", fit_intercept=False)):
        ref = LogisticRegression(random_state=5, **kw).fit(X32, y)
        with dask.config.set(scheduler="threads"):
            got = LogisticRegression(random_state=5, **kw).fit(da.from_array(X32, chunks=(1000, -1)), y)
        _close(got, ref)


def test_predictions_and_scores_on_dask_equal_in_memory():
    X, y, y3, yr = _data(seed=3)
    Xd = da.from_array(X, chunks=(1500, -1))
    with dask.config.set(scheduler="threads"):
        clf = LogisticRegression(row_norm="normalize", random_state=0).fit(X, y)
        assert isinstance(clf.predict(Xd), da.Array)
        np.testing.assert_array_equal(clf.predict(Xd).compute(), clf.predict(X))
        np.testing.assert_allclose(clf.predict_proba(Xd).compute(), clf.predict_proba(X), rtol=1e-12)
        np.testing.assert_allclose(clf.decision_function(Xd).compute(), clf.decision_function(X), rtol=1e-12)
        acc = np.mean(clf.predict(X) == y)  # the accuracy formula
        assert clf.score(Xd, da.from_array(y, chunks=1500)) == pytest.approx(acc, rel=1e-12)
        multi = LogisticRegression(classes=[0, 1, 2], row_norm="normalize", random_state=0).fit(X, y3)
        np.testing.assert_allclose(multi.predict_proba(Xd).compute(), multi.predict_proba(X), rtol=1e-12)
        reg = LinearRegression(row_norm="normalize", random_state=0).fit(X, yr)
        pred = reg.predict(X)
        r2 = 1 - np.sum((yr - pred) ** 2) / np.sum((yr - yr.mean()) ** 2)
        assert reg.score(Xd, yr) == pytest.approx(r2, rel=1e-10)


def test_dataframe_input():
    X, y, _, _ = _data(seed=4)
    cols = [f"f{j}" for j in range(X.shape[1])]
    ddf = dd.from_pandas(pd.DataFrame(X, columns=cols), npartitions=3)
    ys = dd.from_pandas(pd.Series(y, name="y"), npartitions=3)
    ref = LogisticRegression(row_norm="normalize", random_state=8).fit(X, y)
    with dask.config.set(scheduler="threads"):
        got = LogisticRegression(row_norm="normalize", random_state=8).fit(ddf, ys)
        _close(got, ref)
        assert list(got.feature_names_in_) == cols
        np.testing.assert_array_equal(got.predict(ddf).compute(), got.predict(pd.DataFrame(X, columns=cols)))


def test_out_of_core_memmap(tmp_path):
    X, y, _, _ = _data(n=8000, seed=5)
    path = tmp_path / "X.npy"
    np.save(path, X.astype(np.float32))
    ref = LogisticRegression(row_norm="normalize", random_state=4).fit(np.load(path), y)
    # dask's from_array copies a memmap whole (it calls .copy()); read_npy_rows maps it per chunk
    Xd = read_npy_rows(str(path), 1000)
    assert Xd.chunks[0] == (1000,) * 8
    with dask.config.set(scheduler="threads"):
        assert isinstance(Xd.blocks[3].compute(), np.memmap)  # a view of the file, not a copy
        got = LogisticRegression(row_norm="normalize", random_state=4).fit(Xd, y)
    _close(got, ref)


# ----------------------------------------------------------------------------- determinism across workers

@pytest.mark.slow
def test_bit_identical_for_one_and_two_workers(cluster2):
    X, y, _, _ = _data(n=20000, d=12, seed=6)  # 1.9 MB
    Xd = da.from_array(X, chunks=(3000, -1))
    yd = da.from_array(y, chunks=3000)
    assert_same_model_on_every_scheduler(lambda X_, y_: LogisticRegression(row_norm="normalize", random_state=9).fit(X_, y_),
                                         Xd, yd, X, y, cluster2)


@pytest.mark.slow
def test_passes_on_held_chunks_are_actor_calls_with_the_task_path_numbers(cluster2, monkeypatch):
    # X persisted on the 2 workers: each pass is one call to an actor per worker (_ChunkGroup)
    # instead of a task through the scheduler; the model is the task path's, bit for bit
    X, y, _, _ = _data(n=20000, d=12, seed=6)
    made = []
    orig = _dask._group_actors
    monkeypatch.setattr(_dask, "_group_actors", lambda *a: made.append(orig(*a)) or made[-1])
    with distributed.Client(cluster2) as client:
        Xp, yp = client.persist([da.from_array(X, chunks=(3000, -1)), da.from_array(y, chunks=3000)])
        distributed.wait([Xp, yp])
        with_actors = LogisticRegression(row_norm="normalize", random_state=9).fit(Xp, yp)
        assert made and all(a is not None and len(a) == 2 for a in made)  # one actor per worker
        monkeypatch.setattr(_dask, "_group_actors", lambda *a: None)
        with_tasks = LogisticRegression(row_norm="normalize", random_state=9).fit(Xp, yp)
    np.testing.assert_array_equal(_params(with_actors), _params(with_tasks))


# ----------------------------------------------------------------------------- faults

@pytest.mark.slow
@pytest.mark.parametrize("persisted", [False, True])
def test_killed_worker_gives_the_same_model_or_raises(cluster2, monkeypatch, persisted):
    # persisted: X held by the cluster (the fit's passes are tasks on its futures, one per worker);
    # else a graph computed in every pass.  The persisted case gets a cluster of its own: the
    # first case kills a worker of cluster2, and its nanny's restart is not awaited here.
    X, y, _, _ = _data(n=20000, d=12, seed=7)
    ref = LogisticRegression(row_norm="normalize", random_state=3, tol=1e-4).fit(X, y)
    Xd = da.from_array(X, chunks=(2500, -1))
    orig = _dask.DaskDesign.oracle
    killed = []

    def run(cluster):
        def oracle(self, *a, **k):
            fg = orig(self, *a, **k)
            calls = [0]

            def wrapped(theta):
                calls[0] += 1
                if calls[0] == 3 and not killed:  # mid-fit, after the bounds were persisted on both workers
                    nanny = next(iter(cluster.workers.values()))
                    nanny.process.process.kill()
                    killed.append(True)
                return fg(theta)

            return wrapped

        monkeypatch.setattr(_dask.DaskDesign, "oracle", oracle)
        est = LogisticRegression(row_norm="normalize", random_state=3, tol=1e-4)
        with distributed.Client(cluster) as client:
            client.wait_for_workers(2, timeout=120)
            Xf = Xd
            if persisted:
                Xf = client.persist(Xd)
                distributed.wait(Xf)
            try:
                est.fit(Xf, y)
            except Exception:
                assert not hasattr(est, "coef_")  # nothing released
            else:
                np.testing.assert_allclose(_params(est), _params(ref), rtol=REL, atol=0)

    if persisted:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                      silence_logs=40) as cl:
            run(cl)
    else:
        run(cluster2)
    assert killed


# ----------------------------------------------------------------------------- bad input

def _unfitted_and_rng_untouched(est, gen, state):
    assert not hasattr(est, "coef_")
    assert gen.bit_generator.state == state


@pytest.mark.parametrize("case", ["columns", "y_chunks", "nan", "norm", "unknown", "solver", "y_length"])
def test_bad_input_raises_before_any_release(case):
    X, y, _, _ = _data(n=3000, seed=8)
    Xc = X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    kw = dict(random_state=gen)
    yd = da.from_array(y, chunks=1000)
    if case == "columns":
        Xd, msg = da.from_array(Xc, chunks=(1000, 4)), "chunked across columns"
    elif case == "y_chunks":
        Xd, yd, msg = da.from_array(Xc, chunks=(1000, -1)), da.from_array(y, chunks=700), "row chunks"
    elif case == "nan":
        Xn = Xc.copy()
        Xn[1500, 2] = np.nan
        # the in-memory fit's message, naming no chunk or row (where the bad rows are is private)
        Xd, msg = da.from_array(Xn, chunks=(1000, -1)), r"^X contains NaN or infinite entries"
    elif case == "norm":
        Xn = Xc.copy()
        Xn[2100] *= 3.0
        Xd, msg = da.from_array(Xn, chunks=(1000, -1)), r"^X has rows with l2 norm above norm_bound=1 "
        kw["row_norm"] = "check"  # the default clips
    elif case == "unknown":
        Xd = da.from_array(Xc, chunks=(1000, -1))
        Xd, msg = Xd[Xd[:, 0] < 10], "unknown chunk sizes"
    elif case == "solver":
        Xd, msg = da.from_array(Xc, chunks=(1000, -1)), "solver='lbfgs'"
        kw["solver"] = "sag"
    else:
        Xd, yd, msg = da.from_array(Xc, chunks=(1000, -1)), y[:-1], "rows"
    est = LogisticRegression(**kw)
    with dask.config.set(scheduler="sync"), pytest.raises(ValueError, match=msg):
        est.fit(Xd, yd)
    _unfitted_and_rng_untouched(est, gen, state)


def test_is_dask_collection():
    X = np.ones((4, 2))
    assert not _dask.is_dask_collection(X)
    assert _dask.is_dask_collection(da.from_array(X, chunks=2))
    assert _dask.is_dask_collection(dd.from_pandas(pd.DataFrame(X), npartitions=1))


# ----------------------------------------------------------------------------- randomness per chunk

def test_map_blocks_with_a_fixed_seed_repeats_noise_and_chunk_rngs_do_not():
    import dpfast

    x = da.zeros(4000, chunks=1000)
    same = x.map_blocks(lambda b: dpfast.laplace(b, sensitivity=1.0, epsilon=1.0, rng=0), dtype=float).compute()
    assert all(np.array_equal(same[:1000], same[k:k + 1000]) for k in (1000, 2000, 3000))  # the pitfall
    rngs = _dask.chunk_rngs(x.numblocks[0], seed=123)
    noisy = x.map_blocks(
        lambda b, block_info=None: dpfast.laplace(b, sensitivity=1.0, epsilon=1.0,
                                                  rng=rngs[block_info[0]["chunk-location"][0]]),
        dtype=float).compute()
    parts = noisy.reshape(4, 1000)
    assert len({p.tobytes() for p in parts}) == 4
    # independent streams: the 4 x 1000 draws are Laplace(1) as a whole (KS at the 1e-3 level)
    from scipy import stats

    assert stats.kstest(noisy, stats.laplace(scale=1.0).cdf).pvalue > 1e-3
    corr = np.corrcoef(parts)[np.triu_indices(4, 1)]
    assert np.abs(corr).max() < 4.0 / np.sqrt(1000)  # 4 standard errors of a correlation of 1000 pairs


# ----------------------------------------------------------------------------- labels kept on the workers

def _numpy_error(est, X, y, sw=None):
    with pytest.raises((ValueError, TypeError)) as info:
        est.fit(X, y, sample_weight=sw)
    return type(info.value), str(info.value)


def _bad_labels(case, y):
    if case == "plus_minus":  # {-1, +1} labels with classes=None: the hint names classes=[-1, 1]
        return np.where(y == 1, 1, -1)
    if case == "many_labels":  # more distinct labels in one chunk than the summary keeps
        out = y.copy()
        out[1000:2000] = np.arange(1000)
        return out
    if case == "many_floats":  # many distinct floats and one non-integral one
        out = y.astype(float)
        out[:1000] = np.arange(1000)
        out[2222] = 3.25
        return out
    out = y.astype(float) if case != "outside_set" else y.copy()
    out[{"nan_label": 2500, "inf_label": 10, "continuous": 2900, "outside_set": 1999}[case]] = {
        "nan_label": np.nan, "inf_label": np.inf, "continuous": 0.5, "outside_set": 2}[case]
    return out


@pytest.mark.parametrize("case", ["nan_label", "inf_label", "continuous", "outside_set", "plus_minus",
                                  "many_labels", "many_floats"])
def test_dask_labels_raise_the_in_memory_error_before_any_release(case):
    # the labels stay on the workers; the chunks' summaries must give the in-memory fit's error, word for word
    X, y, _, _ = _data(n=3000, seed=10)
    Xc = X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    yb = _bad_labels(case, y)
    want = _numpy_error(LogisticRegression(random_state=0), Xc, yb)
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    est = LogisticRegression(random_state=gen)
    with dask.config.set(scheduler="sync"):
        got = _numpy_error(est, da.from_array(Xc, chunks=(1000, -1)), da.from_array(yb, chunks=1000))
    assert got == want
    _unfitted_and_rng_untouched(est, gen, state)


@pytest.mark.parametrize("case", ["nan_target", "weight_range", "weight_nan", "labels_before_rows"])
def test_dask_targets_and_weights_raise_the_in_memory_error(case):
    X, y, _, yr = _data(n=3000, seed=11)
    Xc = X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    sw = np.full(3000, 0.5)
    est_cls, target = LinearRegression, yr.copy()
    if case == "nan_target":
        target[2100] = np.nan
    elif case == "weight_range":
        sw[1500] = 1.5
    elif case == "weight_nan":
        sw[700] = np.nan
    else:  # a bad label and a row over the bound: the label's error first, as in memory
        est_cls, target = LogisticRegression, y.copy()
        target[5] = 7
        Xc = Xc.copy()
        Xc[2500] *= 5.0
    want = _numpy_error(est_cls(random_state=0), Xc, target, sw)
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    est = est_cls(random_state=gen)
    with dask.config.set(scheduler="sync"):
        got = _numpy_error(est, da.from_array(Xc, chunks=(1000, -1)), da.from_array(target, chunks=1000),
                           da.from_array(sw, chunks=1000))
    assert got == want
    _unfitted_and_rng_untouched(est, gen, state)


def test_dask_string_labels_and_weights_equal_in_memory():
    X, y, y3, _ = _data(n=4000, seed=12)
    Xc = X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    names = np.array(["low", "mid", "high"])[y3]
    sw = np.linspace(0.2, 1.0, 4000)
    ref = LogisticRegression(classes=["low", "mid", "high"], random_state=1).fit(Xc, names, sample_weight=sw)
    with dask.config.set(scheduler="threads"):
        got = LogisticRegression(classes=["low", "mid", "high"], random_state=1).fit(
            da.from_array(Xc, chunks=(1000, -1)), da.from_array(names, chunks=1000),
            sample_weight=da.from_array(sw, chunks=1000))
    _close(got, ref)
    assert list(got.classes_) == ["low", "mid", "high"]


def test_label_summary_keeps_what_the_checks_read():
    # more distinct values than the cap: the four smallest, one outside the label set, the
    # non-finite ones and one non-integral one stand in for the chunk
    v = np.r_[np.arange(200.0), np.inf, 7.5, -np.inf, np.nan]
    rep = _dask._label_summary(v, True, None, 64)
    assert rep.size <= 10
    assert np.isnan(rep).any() and np.isposinf(rep).any() and np.isneginf(rep).any()
    assert 7.5 in rep and np.any(~np.isin(rep[np.isfinite(rep)], [0, 1]))
    assert list(_dask._label_summary(np.array([1, 0, 1, 1]), True, None, 64)) == [0, 1]
    assert list(_dask._label_summary(np.array([0.5, np.inf, 2.0]), False, None, 64)) == [np.inf]


# ----------------------------------------------------------------------------- the preconditioned solver

def test_dense_preconditioned_fit_keeps_the_certificate_and_stays_within_2_tau_over_lambda_of_plain_lbfgs():
    # Dense L-BFGS now runs with the fixed diagonal preconditioner of the CSR path (the Dask fit
    # builds the same one from its chunks' column sums).  Privacy needs only ||grad F|| <= tau at
    # the released point: the calibration and the noise are unchanged, and the point moves within
    # 2 tau / lambda of the plain L-BFGS point (two certified points of one lambda-strongly convex F).
    from dpfast import _glm
    from dpfast.linear_model import _mechanisms as mech

    X, y, _, _ = _data(n=5000, d=10, seed=13)
    seen = {}
    orig = mech._minimize_certified

    def spy(X_, y_, loss, **k):
        out = orig(X_, y_, loss, **k)
        seen.update(k, y=y_, X=X_, theta=np.array(out[0]))
        return out

    try:
        mech._minimize_certified = spy
        est = LogisticRegression(row_norm="normalize", random_state=4).fit(X, y)
    finally:
        mech._minimize_certified = orig
    lam, tau = est.lambda_, est.calibration_.tau
    Xm = seen["X"]  # the MappedRows design the solver saw
    n, d = X.shape

    def fg(th):
        f, g, ok = _glm.loss_and_grad(Xm.X, None, None, 0, n, d, seen["y"], None, 0, 1.0, 0.0, lam,
                                      seen["linear"], None, th, 1, Xm.scale, Xm.intercept)
        return f, g

    theta = seen["theta"]
    assert np.linalg.norm(fg(theta)[1]) <= tau  # the certificate, recomputed independently
    plain = np.zeros(d + 1)
    res = _glm.minimize_callable(fg, plain, tau, 1000, 10)  # plain L-BFGS (the previous solver)
    assert res[4] <= tau
    assert np.linalg.norm(theta - plain) <= 2 * tau / lam
    pre = np.zeros(d + 1)
    S1, S2, W = _glm.precond_sums(Xm.X, n, d, None, Xm.scale, Xm.intercept, True, 1)
    res_p = _glm.minimize_callable(fg, pre, tau, 1000, 10, precond=(S1, S2, W, lam, 0.25, Xm.intercept))
    assert res_p[0] < res[0]  # fewer iterations than plain L-BFGS here
    np.testing.assert_allclose(pre, theta, rtol=1e-9, atol=1e-12)  # the in-memory solver's point


# ----------------------------------------------------------------------------- issue 21

def test_dask_predict_and_score_check_feature_names_as_pandas_input_does():
    import warnings

    X, y, _, yr = _data(n=3000, seed=12)
    cols = [f"f{j}" for j in range(X.shape[1])]
    df = pd.DataFrame(X, columns=cols)
    swapped = cols[1:2] + cols[:1] + cols[2:]
    ddf = dd.from_pandas(df, npartitions=3)
    yd = da.from_array(y, chunks=1000)
    with dask.config.set(scheduler="sync"):
        for est, target in ((LogisticRegression(random_state=0), y), (LinearRegression(random_state=0), yr)):
            est.fit(df, target)
            # pandas input refuses reordered columns; so must Dask input (it scored them silently)
            with pytest.raises(ValueError, match="feature names should match"):
                est.score(df[swapped], target)
            for call in (lambda Z: est.predict(Z), lambda Z: est.score(Z, da.from_array(target, chunks=1000)),
                         lambda Z: est.decision_function(Z) if hasattr(est, "classes_") else est.predict(Z)):
                with pytest.raises(ValueError, match="feature names should match"):
                    call(ddf[swapped])
            with pytest.raises(ValueError, match="feature names"):
                est.predict(ddf.rename(columns={cols[0]: "other"}))
            with warnings.catch_warnings():  # the right columns: no warning, the in-memory answer
                warnings.simplefilter("error")
                np.testing.assert_allclose(np.asarray(est.predict(ddf).compute(), dtype=float),
                                           np.asarray(est.predict(df), dtype=float), rtol=1e-12)
            # a Dask array carries no names: scikit-learn's warning, once (not once per chunk)
            with pytest.warns(UserWarning, match="does not have valid feature names") as rec:
                est.predict(da.from_array(X, chunks=(1000, -1))).compute()
            assert len([w for w in rec if "feature names" in str(w.message)]) == 1
        # a Dask fit records the names as a pandas fit does, so the same check applies
        got = LogisticRegression(random_state=0).fit(ddf, yd)
        np.testing.assert_array_equal(got.feature_names_in_, cols)
        with pytest.raises(ValueError, match="feature names should match"):
            got.score(ddf[swapped], yd)
