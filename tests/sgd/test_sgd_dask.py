"""Full-batch DP-GD on Dask (issue 9; dpfast/sgd/_dask.py, ``sampling="full"``).

Expected values: the in-memory full-batch fit of the same data (the kernel over all rows at
once), the closed form of the Gaussian mechanism's composition (T steps of noise multiplier z
are mu-GDP with mu = sqrt(T)/z; Dong, Roth & Su 2022, Cor. 3.3; delta(eps) of Balle & Wang
2018, Thm. 8), and the noise's variance for a one-step run.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
import dask  # noqa: E402
from scipy.stats import norm  # noqa: E402

from dpfast.sgd import DPSGDClassifier, DPSGDRegressor  # noqa: E402


def _data(n=8000, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True) * rng.uniform(0.5, 1.5, size=(n, 1))
    return X, (X[:, 0] > 0).astype(int), np.digitize(X[:, 0], [-0.3, 0.3]), X[:, 1] + 0.1 * rng.normal(size=n)


def _params(m):
    return np.r_[np.ravel(m.coef_), np.ravel(m.intercept_)]


def _close(a, b, rel=1e-6):
    a, b = _params(a), _params(b)
    assert np.isfinite(a).all()
    err = np.abs(a - b).max() / np.abs(b).max()
    assert err <= rel, f"relative difference {err:.3g}"


@pytest.mark.parametrize("kind", ["binary", "multinomial", "regression"])
def test_dask_full_batch_equals_in_memory_full_batch(kind):
    X, y, y3, yr = _data()
    common = dict(epsilon=1.0, sampling="full", epochs=25, random_state=4)
    if kind == "regression":
        make, yy = (lambda: DPSGDRegressor(learning_rate=0.5, **common)), yr
    elif kind == "binary":
        make, yy = (lambda: DPSGDClassifier(learning_rate=1.0, **common)), y
    else:
        make, yy = (lambda: DPSGDClassifier(learning_rate=1.0, classes=[0, 1, 2], **common)), y3
    ref = make().fit(X, yy)
    with dask.config.set(scheduler="threads"):
        got = make().fit(da.from_array(X, chunks=(1500, -1)), da.from_array(yy, chunks=1500))
        _close(got, ref)
        assert got.event_ == ref.event_ and got.epsilon_ == ref.epsilon_
        assert got.steps_ == 25 and got.sample_rate_ == 1.0 and got.neighbours_ == "add_remove"
        if kind != "regression":
            pred = got.predict(da.from_array(X, chunks=(1500, -1)))  # DaskDispatchMixin: a lazy dask Array
            np.testing.assert_array_equal(pred.compute(), ref.predict(X))
            np.testing.assert_allclose(got.predict_proba(da.from_array(X, chunks=(1500, -1))).compute(),
                                       got.predict_proba(X), rtol=1e-12)


def _gdp_delta(eps, mu):
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def test_full_batch_accounting_is_T_gaussian_compositions():
    X, y, _, _ = _data(n=3000)
    with dask.config.set(scheduler="sync"):
        m = DPSGDClassifier(epsilon=2.0, delta=1e-5, sampling="full", epochs=40, random_state=0).fit(
            da.from_array(X, chunks=(1000, -1)), y)
    mu = math.sqrt(40) / m.noise_multiplier_
    # PLD is certified (pessimistic): the closed form's delta at epsilon_ is <= delta, and close to it
    assert m.epsilon_ <= 2.0
    d_at = _gdp_delta(m.epsilon_, mu)
    assert d_at <= 1e-5 * (1 + 1e-9)
    assert d_at >= 0.5e-5, "the calibration should not be far from the target"


@pytest.mark.slow
def test_noise_is_added_once_per_step_on_the_client():
    # one step from theta = 0 with plain SGD: theta_1 - theta_1(no noise) = -lr z C xi / n, xi ~ N(0, I).
    # Noise drawn per chunk (4 chunks) would make the variance 4 times larger.
    X, _, _, yr = _data(n=2000, d=4, seed=1)
    Xd = da.from_array(X, chunks=(500, -1))
    kw = dict(sampling="full", epochs=1, learning_rate=1.0, clip_norm=0.5)
    with dask.config.set(scheduler="sync"):
        base = _params(DPSGDRegressor(noise_multiplier=0.0, random_state=0, **kw).fit(Xd, yr))
        dev = np.array([_params(DPSGDRegressor(noise_multiplier=1.0, random_state=s, **kw).fit(Xd, yr)) - base
                        for s in range(150)])
    sigma = 1.0 * 0.5 / X.shape[0]
    ratio = float(np.mean(dev ** 2)) / sigma ** 2
    N = dev.size  # 750 independent N(0, sigma^2) values: the ratio has sd sqrt(2/N) ~ 5 %
    assert abs(ratio - 1.0) < 5 * math.sqrt(2.0 / N)


@pytest.mark.slow
def test_bit_identical_for_one_and_two_workers():
    X, y, _, _ = _data(n=20000, d=10, seed=2)
    Xd, yd = da.from_array(X, chunks=(2500, -1)), da.from_array(y, chunks=2500)
    out = []
    for workers in (1, 2):
        with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                      dashboard_address=None, silence_logs=40) as cl, distributed.Client(cl):
            out.append(_params(DPSGDClassifier(epsilon=1.0, sampling="full", epochs=10, random_state=3).fit(Xd, yd)))
    np.testing.assert_array_equal(out[0], out[1])


@pytest.mark.parametrize("case", ["poisson", "nan", "columns"])
def test_bad_input_raises_before_any_charge_or_draw(case):
    X, y, _, _ = _data(n=3000)
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    kw = dict(epsilon=1.0, sampling="full", random_state=gen)
    Xd = da.from_array(X, chunks=(1000, -1))
    if case == "poisson":
        kw["sampling"], msg = "poisson", "sampling='full'"
    elif case == "nan":
        Xn = X.copy()
        Xn[2500, 1] = np.inf
        Xd, msg = da.from_array(Xn, chunks=(1000, -1)), r"^X contains NaN or infinite entries$"  # no chunk, no row
    else:
        Xd, msg = da.from_array(X, chunks=(1000, 3)), "chunked across columns"
    est = DPSGDClassifier(**kw)
    with dask.config.set(scheduler="sync"), pytest.raises(ValueError, match=msg):
        est.fit(Xd, y)
    assert not hasattr(est, "coef_") and not hasattr(est, "event_")
    assert gen.bit_generator.state == state


def test_dask_fit_records_feature_names_and_prediction_checks_them():
    # issue 21, item 12: a model fitted on columns [a, b, ...] refuses them reordered, as pandas does
    import pandas as pd

    dd = pytest.importorskip("dask.dataframe")
    X, y, _, _ = _data(n=2000)
    cols = [f"f{j}" for j in range(X.shape[1])]
    ddf = dd.from_pandas(pd.DataFrame(X, columns=cols), npartitions=2)
    with dask.config.set(scheduler="sync"):
        est = DPSGDClassifier(epsilon=1.0, sampling="full", epochs=2, random_state=0).fit(ddf, y)
        np.testing.assert_array_equal(est.feature_names_in_, cols)
        with pytest.raises(ValueError, match="feature names should match"):
            est.predict(ddf[cols[::-1]])
        np.testing.assert_array_equal(est.predict(ddf).compute(), est.predict(pd.DataFrame(X, columns=cols)))
