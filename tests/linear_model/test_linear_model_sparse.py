"""Privacy pins for the sparse fit path (issue 12, item 5: faster CSR fits must not move a privacy figure).

A private ``LogisticRegression`` on CSR rows must release exactly what Algorithm 1 of Redberg,
Koskela & Wang (2024) prescribes whatever the CSR encoding (index dtype, index order) and however
the solver gets there: the same calibration (epsilon, delta, sigma, lambda, tau, sigma_out) as
the same rows given densely, the same objective noise b and the same output noise (both drawn
from the seeded generator before/after the solve, independent of the layout), and a point
theta~ whose gradient norm, computed here by an independent NumPy implementation of the
gradient-clipped logistic objective, is <= tau (Theorem 4.1 holds for any such point).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from dpfast.linear_model import LogisticRegression, _mechanisms as mech, calibrate_amp

from _reference_solver import _clipped_logistic

TAU = 0.01


def _sparse_rows(n=3000, d=300, k=9, seed=0):
    """n rows with k distinct non-zero columns each, scaled to l2 norm 1, and {0, 1} labels."""
    rng = np.random.default_rng(seed)
    cols = np.argsort(rng.random((n, d)), axis=1)[:, :k]
    vals = rng.random((n, k)) + 0.1
    vals /= np.linalg.norm(vals, axis=1, keepdims=True)
    X = sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(0, (n + 1) * k, k)), shape=(n, d))
    w = rng.normal(size=d) * 3.0
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ w)))).astype(np.int64)
    return X, y


def _encodings(X):
    """The same matrix as dense, CSR (int32 sorted), CSR int64 indices, CSR with unsorted indices."""
    X64 = sp.csr_matrix((X.data, X.indices.astype(np.int64), X.indptr.astype(np.int64)), shape=X.shape)
    order = np.concatenate([np.arange(a, b)[::-1] for a, b in zip(X.indptr[:-1], X.indptr[1:])])
    Xu = sp.csr_matrix((X.data[order], X.indices[order], X.indptr.copy()), shape=X.shape)
    Xu.has_sorted_indices = False
    return {"dense": X.toarray(), "csr": X, "csr_i64": X64, "csr_unsorted": Xu}


def _fit_recording(monkeypatch, X, y, seed):
    """Fit, recording the objective noise b and the solver's point theta~ (before output noise)."""
    rec = {}
    solve = mech._minimize_certified

    def spy(Xd, yy, loss, **kw):
        out = solve(Xd, yy, loss, **kw)
        rec.update(b=np.array(kw["linear"]), theta=np.array(out[0]), alpha=kw["alpha"], clip=kw["clip"],
                   tol=kw["tol"])
        return out

    monkeypatch.setattr(mech, "_minimize_certified", spy)
    m = LogisticRegression(1.0, 1e-5, random_state=seed).fit(X, y)
    monkeypatch.undo()
    return m, rec


def _gradient_norm(X, y01, theta, b, lam, C):
    """||grad F(theta)||_2 of sum_i l_C(y_i, [x_i, 1].theta) + lam/2 ||theta||^2 + b.theta (NumPy)."""
    Xd = np.hstack([np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64), np.ones((X.shape[0], 1))])
    y = np.where(y01 == 1, 1.0, -1.0)
    c = C / np.linalg.norm(Xd, axis=1)  # derivative bound of the clipped loss: |l_C'| ||x_i|| <= C
    _, der = _clipped_logistic(Xd @ theta, y, c)
    return float(np.linalg.norm(Xd.T @ der + lam * theta + b))


@pytest.mark.parametrize("seed", [0, 7])
def test_sparse_release_keeps_calibration_noise_and_certificate(monkeypatch, seed):
    X, y = _sparse_rows(seed=seed)
    fits = {name: _fit_recording(monkeypatch, Xe, y, seed) for name, Xe in _encodings(X).items()}
    ref, ref_rec = fits["dense"]
    cal = ref.calibration_
    # the calibration is the paper's (Section 5): tau 0.01, sigma_out 0.15, f = 1.3, C = sqrt(2) (unit rows and a
    # bias feature of 1, widened by the float64 rounding slack), smallest feasible lambda; it does not read the data
    assert cal.tau == TAU and cal.sigma_out == 0.15 and cal.noise_factor == 1.3 and cal.method == "amp"
    assert ref.clip_norm_ == pytest.approx(math.sqrt(2.0), rel=1e-14)
    assert cal == calibrate_amp(1.0, 1e-5, clip_norm=ref.clip_norm_, smoothness=ref.smoothness_, tau=TAU, sigma_out=0.15,
                                noise_factor=1.3)
    assert cal.epsilon <= 1.0 and cal.delta == 1e-5
    for name, (m, rec) in fits.items():
        assert m.calibration_ == cal, name
        assert (m.epsilon_, m.delta_, m.sigma_, m.lambda_, m.sigma_out_) == (
            ref.epsilon_, ref.delta_, ref.sigma_, ref.lambda_, ref.sigma_out_), name
        assert rec["alpha"] == cal.regularization and rec["tol"] == TAU and rec["clip"] == ref_rec["clip"]
        np.testing.assert_array_equal(rec["b"], ref_rec["b"], err_msg=name)  # same objective noise
        # Theorem 4.1 needs ||grad F(theta~)||_2 <= tau; checked by an independent implementation, with a
        # slack of the float64 rounding of a gradient whose terms add up to ~2 (n C + ||b||)
        slack = 64 * np.finfo(float).eps * 2 * (X.shape[0] * ref.clip_norm_ + np.linalg.norm(rec["b"]))
        gn = _gradient_norm(X, y, rec["theta"], rec["b"], cal.regularization, ref.clip_norm_)
        assert gn <= TAU + slack, (name, gn)
        assert m.grad_norm_[0] <= TAU
        # the released coefficients are theta~ plus the same output noise N(0, sigma_out^2 I)
        released = np.r_[m.coef_[0], m.intercept_[0]]
        noise = released - rec["theta"]
        ref_noise = np.r_[ref.coef_[0], ref.intercept_[0]] - ref_rec["theta"]
        np.testing.assert_allclose(noise, ref_noise, rtol=0, atol=1e-12 * (1 + np.abs(released).max()), err_msg=name)
        # theta~ of any two certified points are within 2 tau / lambda of each other (strong convexity)
        assert np.linalg.norm(rec["theta"] - ref_rec["theta"]) <= 2 * TAU / cal.regularization * (1 + 1e-9)


@pytest.mark.slow
def test_sparse_release_does_not_depend_on_the_thread_count(monkeypatch):
    X, y = _sparse_rows(n=40000, d=2000, k=20, seed=3)  # above the kernels' parallel-work threshold
    outs = []
    for threads in ("1", "2"):
        monkeypatch.setenv("DPFAST_NUM_THREADS", threads)
        m = LogisticRegression(1.0, 1e-5, random_state=1).fit(X, y)
        outs.append((m.coef_.copy(), m.intercept_.copy(), m.calibration_))
    assert np.array_equal(outs[0][0], outs[1][0]) and np.array_equal(outs[0][1], outs[1][1])
    assert outs[0][2] == outs[1][2]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("clip", [None, 0.6])
def test_mapped_csr_rows_match_the_materialised_design(dtype, clip):
    """CSR rows scaled and extended by a bias feature inside the kernels (no copy of X) give the
    objective of the materialised design [scale_i x_i, s], computed by the NumPy reference."""
    from dpfast._solver import MappedRows, glm_loss_and_grad, minimize_glm

    from _reference_solver import objective

    X, y01 = _sparse_rows(n=700, d=60, k=5, seed=11)
    X = X.astype(dtype)
    y = np.where(y01 == 1, 1.0, -1.0)
    rng = np.random.default_rng(12)
    scale = rng.uniform(0.5, 2.0, size=X.shape[0])
    theta = rng.normal(size=X.shape[1] + 1)
    lin = rng.normal(size=X.shape[1] + 1)
    design = np.hstack([X.toarray().astype(np.float64) * scale[:, None], np.full((X.shape[0], 1), 0.7)])
    fr, gr = objective(theta, design, y, "logistic", 0.4, lin, clip)
    f, g = glm_loss_and_grad(MappedRows(X, scale, 0.7), y, "logistic", theta, alpha=0.4, linear=lin, clip_norm=clip)
    rtol = 1e-6 if dtype == np.float32 else 1e-12  # float32 entries scaled in float64 vs a float64 product
    np.testing.assert_allclose(f, fr, rtol=rtol)
    np.testing.assert_allclose(g, gr, rtol=rtol, atol=rtol * np.abs(gr).max())
    # L-BFGS on mapped CSR rows runs preconditioned (diagonal in centered coordinates): it reaches the
    # reference's stationary point, with and without sample weights
    w = rng.uniform(0.0, 1.0, size=X.shape[0])
    for sw in (None, w):
        res = minimize_glm(MappedRows(X, scale, 0.7), y, "logistic", alpha=0.4, linear=lin, clip_norm=clip, tol=1e-8,
                           sample_weight=sw)
        g_ref = objective(res.coef, design, y, "logistic", 0.4, lin, clip, sw)[1]
        assert res.converged and np.linalg.norm(g_ref) <= 1e-6  # tol 1e-8 plus the rounding of two evaluation orders
    with pytest.raises(ValueError, match="lbfgs"):
        minimize_glm(MappedRows(X, scale, 0.7), y, "logistic", alpha=0.4, solver="sag", rng=0)
