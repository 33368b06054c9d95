"""Warm start of large L-BFGS fits from a row sample (issue 9; ``_mechanisms.warm_start_rows``).

Fits of n >= WARM_START_MIN_ROWS rows (2^17) first minimise the same (perturbed) objective on
the first ceil(n/16) rows, then run the full-data L-BFGS from that point to the certificate
||grad F|| <= tau.  Only the certified point is released, and every method's calibration holds
for any such point, so nothing about privacy changes.  Here the threshold is lowered so that
small data exercise the path; expected values come from an independent recomputation of the
full gradient (NumPy, not the native kernel), from the fit without warm start (the two certified
points of one lambda-strongly convex objective are within 2 tau / lambda) and from the in-memory
fit (for the Dask fit).
"""
from __future__ import annotations

import numpy as np
import pytest

from dpfast.linear_model import LinearRegression, LogisticRegression, _mechanisms as mech

from _fit_data import (  # noqa: E402,F401
    REL,
    assert_close as _close,
    assert_same_model_on_every_scheduler,
    fit_data as _data,
    params as _params,
)


@pytest.fixture
def low_threshold(monkeypatch):
    """Warm start from 1000 rows on (the sample of 6000 rows: the first 375)."""
    monkeypatch.setattr(mech, "WARM_START_MIN_ROWS", 1000)


@pytest.fixture
def no_warm_start(monkeypatch):
    def off():
        monkeypatch.setattr(mech, "WARM_START_MIN_ROWS", 1 << 62)
    return off


class _Spy:
    """Records the solver's inputs and its certified (pre-noise) point, and the sample fits."""

    def __init__(self, monkeypatch):
        self.calls, self.samples = [], []
        orig, orig_sample = mech._minimize_certified, mech.sample_start

        def spy(X_, y_, loss, **k):
            out = orig(X_, y_, loss, **k)
            self.calls.append(dict(k, X=X_, y=np.array(y_), loss=loss, theta=np.array(out[0]), gnorm=out[1]))
            return out

        def spy_sample(Xs, *a, **k):
            out = orig_sample(Xs, *a, **k)
            self.samples.append((Xs.shape[0], np.array(out)))
            return out

        monkeypatch.setattr(mech, "_minimize_certified", spy)
        monkeypatch.setattr(mech, "sample_start", spy_sample)


def _numpy_grad(call):
    """grad F of the gradient-clipped logistic objective, recomputed with NumPy (no native kernel)."""
    Z = call["X"].toarray()
    y, lam, b, C = call["y"], call["alpha"], call["linear"], call["clip"]
    w = call["sample_weight"]
    th = call["theta"]
    m = y * (Z @ th)
    dl = -y / (1.0 + np.exp(m))  # logistic l'(y, z) = -y sigma(-y z)
    norms = np.linalg.norm(Z, axis=1)
    if C is not None:
        lim = np.divide(C, norms, out=np.full_like(norms, np.inf), where=norms > 0)
        dl = np.clip(dl, -lim, lim)
    if w is not None:
        dl = dl * w
    g = Z.T @ dl + lam * th
    return g if b is None else g + b


def test_threshold_and_sample_size():
    assert mech.WARM_START_MIN_ROWS == 1 << 17 and mech.WARM_START_FRACTION == 16
    assert mech.warm_start_rows((1 << 17) - 1, "lbfgs") == 0
    assert mech.warm_start_rows(1 << 17, "lbfgs") == 1 << 13
    assert mech.warm_start_rows(4_000_001, "lbfgs") == 250_001  # ceil(n / 16)
    assert mech.warm_start_rows(4_000_000, "sag") == 0 and mech.warm_start_rows(4_000_000, "saga") == 0


def test_small_data_unchanged_bit_for_bit(monkeypatch, no_warm_start):
    # below the threshold (here the Adult-sized 32k rows) no sample fit runs: the outputs are the
    # ones of the solver started from 0, bit for bit
    X, y, _, _ = _data(n=32_000, d=6, seed=2)
    spy = _Spy(monkeypatch)
    got = LogisticRegression(row_norm="normalize", random_state=5).fit(X, y)
    assert spy.samples == []
    no_warm_start()
    ref = LogisticRegression(row_norm="normalize", random_state=5).fit(X, y)
    np.testing.assert_array_equal(_params(got), _params(ref))
    assert got.n_iter_ == ref.n_iter_


@pytest.mark.parametrize("method", ["amp", "objective", "output"])
def test_warm_started_point_is_certified_and_within_2_tau_over_lambda(monkeypatch, low_threshold, no_warm_start,
                                                                       method):
    X, y, _, _ = _data(seed=3)
    spy = _Spy(monkeypatch)
    got = LogisticRegression(row_norm="normalize", method=method, random_state=7).fit(X, y)
    assert [s[0] for s in spy.samples] == [375]  # ceil(6000 / 16): one sample fit, then the full fit
    warm = spy.calls[-1]
    tau, lam = got.calibration_.tau, got.lambda_
    g = _numpy_grad(warm)  # the certificate on the released pre-noise point, recomputed independently
    assert np.linalg.norm(g) <= tau * (1 + 1e-9) + 1e-12
    assert abs(np.linalg.norm(g) - warm["gnorm"]) <= 1e-9 * max(1.0, np.linalg.norm(g)) + 1e-12
    no_warm_start()
    ref = LogisticRegression(row_norm="normalize", method=method, random_state=7).fit(X, y)
    assert len(spy.samples) == 1  # the second fit ran no sample fit
    cold = spy.calls[-1]
    np.testing.assert_array_equal(cold["linear"] if cold["linear"] is not None else 0,
                                  warm["linear"] if warm["linear"] is not None else 0)  # same noise b
    assert cold["alpha"] == warm["alpha"] and cold["clip"] == warm["clip"]  # same calibration
    assert np.linalg.norm(warm["theta"] - cold["theta"]) <= 2 * tau / lam
    # the output noise is the same draw: the released models differ by the pre-noise points' difference
    assert got.calibration_ == ref.calibration_ and got.epsilon_ == ref.epsilon_
    np.testing.assert_allclose(_params(got) - _params(ref),
                               _released_difference(got, warm["theta"] - cold["theta"]), atol=1e-9)


def _released_difference(est, dtheta):
    """The released (coef_, intercept_) difference for a difference dtheta of the solver's points
    (intercept_ is the solver's last coordinate times intercept_scaling)."""
    d = est.coef_.size
    return np.r_[dtheta[:d], dtheta[d:] * est.intercept_scaling]


def test_regression_and_weights_warm_start_certified(monkeypatch, low_threshold):
    X, _, _, yr = _data(seed=4)
    sw = np.random.default_rng(1).uniform(0.2, 1.0, size=X.shape[0])
    spy = _Spy(monkeypatch)
    LinearRegression(row_norm="clip", random_state=3).fit(X, yr, sample_weight=sw)
    assert len(spy.samples) == 1
    call = spy.calls[-1]
    assert call["gnorm"] <= call["tol"]


# ----------------------------------------------------------------------------- Dask: same warm start

def _dask():
    pytest.importorskip("distributed")
    return pytest.importorskip("dask.array"), pytest.importorskip("dask")


@pytest.mark.slow
@pytest.mark.parametrize("chunk", [375, 250, 1700])  # the sample is chunk 0 / spans two chunks / inside chunk 0
@pytest.mark.parametrize("method", ["amp", "objective", "output"])
def test_dask_warm_start_equals_in_memory(monkeypatch, low_threshold, method, chunk):
    da, dask = _dask()
    X, y, _, _ = _data()
    kw = dict(row_norm="normalize", method=method, random_state=11)
    spy = _Spy(monkeypatch)
    ref = LogisticRegression(**kw).fit(X, y)
    assert len(spy.samples) == 1
    with dask.config.set(scheduler="threads"):
        got = LogisticRegression(**kw).fit(da.from_array(X, chunks=(chunk, -1)), da.from_array(y, chunks=chunk))
    _close(got, ref)


@pytest.mark.slow
def test_dask_multiclass_regression_weights_warm_start_equal_in_memory(low_threshold):
    da, dask = _dask()
    X, _, y3, yr = _data(seed=5)
    sw = np.random.default_rng(2).uniform(0.2, 1.0, size=X.shape[0])
    Xd, sd = da.from_array(X, chunks=(1000, -1)), da.from_array(sw, chunks=1000)
    with dask.config.set(scheduler="threads"):
        _close(LogisticRegression(row_norm="clip", classes=[0, 1, 2], random_state=1).fit(
                   Xd, da.from_array(y3, chunks=1000), sd),
               LogisticRegression(row_norm="clip", classes=[0, 1, 2], random_state=1).fit(X, y3, sw))
        for loss in ("squared", "huber"):
            _close(LinearRegression(loss=loss, row_norm="normalize", random_state=2).fit(
                       Xd, da.from_array(yr, chunks=1000), sd),
                   LinearRegression(loss=loss, row_norm="normalize", random_state=2).fit(X, yr, sw))


@pytest.mark.slow
def test_dask_warm_start_bit_identical_for_one_and_two_workers(low_threshold):
    da, _ = _dask()
    X, y, _, _ = _data(n=20000, d=12, seed=6)
    Xd = da.from_array(X, chunks=(1000, -1))  # sample 1250 rows: chunks 0 and 1
    yd = da.from_array(y, chunks=1000)
    assert_same_model_on_every_scheduler(lambda X_, y_: LogisticRegression(row_norm="normalize", random_state=9).fit(X_, y_),
                                         Xd, yd, X, y)
