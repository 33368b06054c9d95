"""Tests of the native GLM solvers (dpfast._solver, dpfast._glm).

References are written here from the formulas of spec objective_perturbation.md (losses,
gradient-clipped loss of Algorithm 1), independently of the C++ code; optima are compared
with scipy.optimize L-BFGS-B run on that NumPy reference and with scikit-learn.
"""
from __future__ import annotations

import threading
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import optimize, special
from sklearn import linear_model as sklm

from dpfast import _glm
from dpfast._solver import (
    LOSSES,
    GLMResult,
    glm_loss_and_grad,
    loss_constants,
    minimize_glm,
)

# ----------------------------------------------------------------------------- references


def ref_loss(loss, z, y, delta=1.0):
    """Value and derivative in z of the unclipped losses (NumPy)."""
    z = np.asarray(z, float)
    if loss == "logistic":
        m = y * z
        return np.logaddexp(0.0, -m), -y / (1.0 + np.exp(m))
    if loss == "squared":
        r = z - y
        return 0.5 * r * r, r
    if loss == "huber":
        r = z - y
        a = np.abs(r)
        return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta)), np.clip(r, -delta, delta)
    if loss == "smoothed_hinge":
        m = y * z
        val = np.where(m >= 1, 0.0, np.where(m <= 0, 0.5 - m, 0.5 * (1 - m) ** 2))
        dm = np.where(m >= 1, 0.0, np.where(m <= 0, -1.0, m - 1.0))
        return val, dm * y
    raise ValueError(loss)


def ref_objective(theta, X, y, loss, alpha=0.0, linear=None, quadratic=None, w=None, clip=None, delta=1.0):
    """F and grad F with per-example gradients clipped *as vectors* (Algorithm 1, step 1).

    The clipped loss value is obtained by integrating the clipped derivative along the
    margin: l_C(z) = l(z*) + c (z - z*) beyond the breakpoint z*, found here numerically by
    bisection on |l'| = c (independent of the closed forms in csrc/losses/losses.hpp).
    """
    Xd = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    z = Xd @ theta
    val, der = ref_loss(loss, z, y, delta)
    if clip is not None:
        norms = np.linalg.norm(Xd, axis=1)
        gvec = der[:, None] * Xd  # per-example gradient vectors
        gn = np.linalg.norm(gvec, axis=1)
        scale = np.where(gn > clip, clip / np.maximum(gn, 1e-300), 1.0)
        gvec = gvec * scale[:, None]
        der_c = der * scale
        # value: linear continuation from the breakpoint (vectorised bisection on |l'(u)| = c,
        # moving from z_i towards the loss's flat side, y_i)
        val = val.copy()
        idx = np.nonzero(scale < 1.0)[0]
        if idx.size:
            c, yi, lo = clip / norms[idx], y[idx], z[idx]
            absd = lambda u: np.abs(ref_loss(loss, u, yi, delta)[1])
            step = yi - lo
            while True:
                far = absd(lo + step) > c
                if not far.any():
                    break
                step = np.where(far, 2.0 * step, step)
            a_, b_ = lo, lo + step
            for _ in range(120):
                mid = 0.5 * (a_ + b_)
                big = absd(mid) > c
                a_, b_ = np.where(big, mid, a_), np.where(big, b_, mid)
            zs = 0.5 * (a_ + b_)
            val[idx] = ref_loss(loss, zs, yi, delta)[0] + der_c[idx] * (z[idx] - zs)
        der = der_c
    wv = np.ones(len(y)) if w is None else w
    f = float(np.sum(wv * val) + 0.5 * alpha * theta @ theta)
    g = Xd.T @ (wv * der) + alpha * theta
    if linear is not None:
        f += float(linear @ theta)
        g = g + linear
    if quadratic is not None:
        f += 0.5 * float(theta @ quadratic @ theta)
        g = g + quadratic @ theta
    return f, g


def make_data(n, d, loss, seed=0, density=None, scale=2.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if density is not None:
        X *= rng.random((n, d)) < density
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    X = X / np.maximum(norms, 1e-12) * rng.uniform(0.3, 1.0, size=(n, 1))
    w = rng.normal(size=d) * scale
    if loss in ("logistic", "smoothed_hinge"):
        y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ w)), 1.0, -1.0)
    else:
        y = X @ w + 0.3 * rng.normal(size=n)
        y[:3] += 5.0  # a few outliers so that Huber's linear part is used
    return X, y


def scipy_opt(X, y, loss, **kw):
    d = X.shape[1]
    res = optimize.minimize(
        lambda t: ref_objective(t, X, y, loss, **kw),
        np.zeros(d),
        jac=True,
        method="L-BFGS-B",
        options=dict(gtol=1e-11, ftol=1e-16, maxiter=20000, maxcor=20),
    )
    return res.x


# ----------------------------------------------------------------------------- losses


@pytest.mark.parametrize("loss", LOSSES)
def test_loss_values_and_derivatives(loss):
    rng = np.random.default_rng(1)
    z = rng.uniform(-4, 4, size=400)
    y = rng.choice([-1.0, 1.0], size=400) if loss in ("logistic", "smoothed_hinge") else rng.normal(size=400)
    delta = 0.7
    v, d1, d2 = _glm.loss_eval(LOSSES.index(loss), delta, z, y, np.array([np.inf]))
    rv, rd = ref_loss(loss, z, y, delta)
    np.testing.assert_allclose(v, rv, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(d1, rd, rtol=1e-13, atol=1e-14)
    h = 1e-6
    vp = _glm.loss_eval(LOSSES.index(loss), delta, z + h, y, np.array([np.inf]))
    vm = _glm.loss_eval(LOSSES.index(loss), delta, z - h, y, np.array([np.inf]))
    np.testing.assert_allclose((vp[0] - vm[0]) / (2 * h), d1, atol=1e-6)
    # second derivative against differences of the first, away from the kinks
    kink = {"huber": np.abs(np.abs(z - y) - delta), "smoothed_hinge": np.minimum(np.abs(y * z), np.abs(y * z - 1))}
    ok = kink.get(loss, np.full(z.shape, 1.0)) > 1e-4
    np.testing.assert_allclose(((vp[1] - vm[1]) / (2 * h))[ok], d2[ok], atol=1e-5)
    lip, smooth = loss_constants(loss, huber_delta=delta)
    assert np.all(np.abs(d1) <= lip + 1e-15) and np.all(d2 <= smooth + 1e-15)


@pytest.mark.parametrize("loss", LOSSES)
def test_clipped_loss_semantics(loss):
    """l_C' = clamp(l', -c, c); l_C is continuous with derivative l_C' (linear continuation)."""
    rng = np.random.default_rng(2)
    z = np.sort(rng.uniform(-6, 6, size=2001))
    y = np.full_like(z, 1.0) if loss in ("logistic", "smoothed_hinge") else np.full_like(z, 0.5)
    code = LOSSES.index(loss)
    for c in (0.05, 0.3, 0.9, 5.0):
        v, d1, d2 = _glm.loss_eval(code, 1.0, z, y, np.array([c]))
        rv, rd = ref_loss(loss, z, y, 1.0)
        np.testing.assert_allclose(d1, np.clip(rd, -c, c), atol=1e-14)
        inside = np.abs(rd) <= c
        np.testing.assert_allclose(v[inside], rv[inside], rtol=1e-13, atol=1e-14)
        assert np.all(d2[~inside] == 0.0)
        # integrate the derivative: trapezoid rule reproduces value differences
        trap = np.concatenate([[0.0], np.cumsum(0.5 * (d1[1:] + d1[:-1]) * np.diff(z))])
        np.testing.assert_allclose(v - v[0], trap, atol=2e-4)
        assert np.all(v <= rv + 1e-12)  # clipping only lowers the loss (l_C <= l)


def test_loss_constants_values():
    assert loss_constants("logistic") == (1.0, 0.25)
    assert loss_constants("squared") == (np.inf, 1.0)
    assert loss_constants("huber", huber_delta=0.5) == (0.5, 1.0)
    assert loss_constants("smoothed_hinge") == (1.0, 1.0)
    with pytest.raises(ValueError, match="loss must be one of"):
        loss_constants("hinge")


# ----------------------------------------------------------------------------- objective


def layouts(X):
    return {
        "C64": np.ascontiguousarray(X),
        "F64": np.asfortranarray(X),
        "C32": np.ascontiguousarray(X, dtype=np.float32),
        "F32": np.asfortranarray(X, dtype=np.float32),
        "CSR64": sp.csr_matrix(X),
        "CSR32i64": sp.csr_matrix(
            (X[X != 0].astype(np.float32), np.nonzero(X)[1].astype(np.int64), np.r_[0, np.cumsum((X != 0).sum(1))].astype(np.int64)),
            shape=X.shape,
        ),
    }


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("clip", [None, 0.35])
def test_loss_and_grad_matches_reference(loss, clip):
    X, y = make_data(300, 7, loss, seed=3, density=0.6)
    rng = np.random.default_rng(4)
    theta = rng.normal(size=7) * 2
    w = rng.uniform(0.2, 2.0, size=300)
    lin = rng.normal(size=7)
    A = rng.normal(size=(7, 7))
    Q = A @ A.T / 7
    kw = dict(alpha=0.3, linear=lin, quadratic=Q, sample_weight=w, clip_norm=clip, huber_delta=0.8)
    fr, gr = ref_objective(theta, X, y, loss, alpha=0.3, linear=lin, quadratic=Q, w=w, clip=clip, delta=0.8)
    for name, Xl in layouts(X).items():
        f, g = glm_loss_and_grad(Xl, y, loss, theta, **kw)
        tol = 1e-5 if "32" in name else 1e-10
        if "32" in name:  # the reference on the float32-rounded matrix
            fr32, gr32 = ref_objective(theta, np.asarray(Xl.toarray() if sp.issparse(Xl) else Xl, dtype=np.float64), y,
                                       loss, alpha=0.3, linear=lin, quadratic=Q, w=w, clip=clip, delta=0.8)
            np.testing.assert_allclose(f, fr32, rtol=1e-10)
            np.testing.assert_allclose(g, gr32, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(f, fr, rtol=tol)
        np.testing.assert_allclose(g, gr, rtol=tol, atol=tol)
    # gradient against central finite differences of F itself
    h = 1e-6
    fd = np.array([(glm_loss_and_grad(X, y, loss, theta + h * e, **kw)[0]
                    - glm_loss_and_grad(X, y, loss, theta - h * e, **kw)[0]) / (2 * h) for e in np.eye(7)])
    np.testing.assert_allclose(fd, glm_loss_and_grad(X, y, loss, theta, **kw)[1], rtol=1e-6, atol=1e-5)


# ----------------------------------------------------------------------------- optima


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("clip", [None, 0.5])
def test_minimizer_matches_scipy(loss, clip):
    X, y = make_data(400, 6, loss, seed=5)
    rng = np.random.default_rng(6)
    lin = rng.normal(size=6)
    ref = scipy_opt(X, y, loss, alpha=2.0, linear=lin, clip=clip)
    for solver in ("lbfgs", "sag", "saga"):
        for name, Xl in layouts(X).items():
            if "32" in name:
                continue
            r = minimize_glm(Xl, y, loss, alpha=2.0, linear=lin, clip_norm=clip, solver=solver, tol=1e-9, rng=0)
            assert r.converged and r.grad_norm <= 1e-9, (solver, name, r)
            np.testing.assert_allclose(r.coef, ref, atol=1e-6, err_msg=f"{solver} {name}")


def test_float32_input_converges():
    X, y = make_data(500, 8, "logistic", seed=7)
    X32 = X.astype(np.float32)
    ref = scipy_opt(X32.astype(np.float64), y, "logistic", alpha=1.0)
    for solver in ("lbfgs", "sag"):
        for Xl in (X32, np.asfortranarray(X32), sp.csr_matrix(X32)):
            r = minimize_glm(Xl, y, "logistic", alpha=1.0, solver=solver, tol=1e-9, rng=1)
            assert r.converged
            np.testing.assert_allclose(r.coef, ref, atol=1e-6)


def test_quadratic_term():
    X, y = make_data(300, 5, "squared", seed=8)
    rng = np.random.default_rng(9)
    A = rng.normal(size=(5, 5))
    Q = A @ A.T
    ref = scipy_opt(X, y, "squared", alpha=0.5, quadratic=Q)
    r = minimize_glm(X, y, "squared", alpha=0.5, quadratic=Q, tol=1e-9)
    np.testing.assert_allclose(r.coef, ref, atol=1e-6)
    # closed form for the squared loss: (X^T X + alpha I + Q) theta = X^T y
    np.testing.assert_allclose(r.coef, np.linalg.solve(X.T @ X + 0.5 * np.eye(5) + Q, X.T @ y), atol=1e-8)


def test_matches_sklearn_logistic_and_ridge():
    X, y = make_data(2000, 10, "logistic", seed=10)
    alpha = 0.5
    clf = sklm.LogisticRegression(C=1.0 / alpha, fit_intercept=False, tol=1e-12, max_iter=10000).fit(X, y)
    for solver in ("lbfgs", "sag", "saga"):
        r = minimize_glm(X, y, "logistic", alpha=alpha, solver=solver, tol=1e-9, rng=2)
        np.testing.assert_allclose(r.coef, clf.coef_[0], atol=1e-6)
    Xr, yr = make_data(1000, 8, "squared", seed=11)
    ridge = sklm.Ridge(alpha=alpha, fit_intercept=False, solver="cholesky").fit(Xr, yr)
    r = minimize_glm(Xr, yr, "squared", alpha=alpha, tol=1e-9)
    np.testing.assert_allclose(r.coef, ridge.coef_, atol=1e-6)


# ----------------------------------------------------------------------------- guarantee


@pytest.mark.parametrize("solver", ["lbfgs", "sag", "saga"])
def test_reported_gradient_norm_is_exact(solver):
    X, y = make_data(3000, 12, "logistic", seed=12)
    b = np.random.default_rng(13).normal(size=12) * 3
    for tol in (1e-1, 1e-4):
        r = minimize_glm(X, y, "logistic", alpha=1.0, linear=b, clip_norm=0.6, solver=solver, tol=tol, rng=3)
        assert isinstance(r, GLMResult) and r.solver == solver
        f, g = glm_loss_and_grad(X, y, "logistic", r.coef, alpha=1.0, linear=b, clip_norm=0.6)
        assert r.grad_norm == pytest.approx(np.linalg.norm(g), rel=1e-12, abs=1e-14)
        assert r.fun == pytest.approx(f, rel=1e-13)
        assert r.converged and r.grad_norm <= tol
    # out of iterations: reported honestly
    r = minimize_glm(X, y, "logistic", alpha=1e-3, linear=b, solver=solver, tol=1e-12, max_iter=1, rng=3)
    assert not r.converged and r.grad_norm > 1e-12 and r.n_iter == 1


def test_sag_theory_step_and_reproducibility():
    X, y = make_data(2000, 6, "logistic", seed=14)
    sq = np.einsum("ij,ij->i", X, X)
    lmax = 0.25 * sq.max() + 1.0 / 2000
    r1 = minimize_glm(X, y, "logistic", alpha=1.0, solver="sag", step_size="theory", tol=1e-6, rng=5)
    assert r1.step_size == pytest.approx(1.0 / (16 * lmax), rel=1e-12) and r1.converged
    r2 = minimize_glm(X, y, "logistic", alpha=1.0, solver="sag", step_size="auto", tol=1e-6, rng=5)
    assert r2.step_size == pytest.approx(1.0 / lmax, rel=1e-12) and r2.converged
    r3 = minimize_glm(X, y, "logistic", alpha=1.0, solver="sag", step_size="auto", tol=1e-6, rng=5)
    assert np.array_equal(r2.coef, r3.coef)  # same seed, same bits
    r4 = minimize_glm(X, y, "logistic", alpha=1.0, solver="saga", tol=1e-6, rng=np.random.default_rng(5))
    assert r4.step_size == pytest.approx(1.0 / (3 * lmax), rel=1e-12) and r4.converged


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["C", "F", "CSR"])
def test_deterministic_across_thread_counts(fmt):
    X, y = make_data(40000, 8, "logistic", seed=15, density=0.5 if fmt == "CSR" else None)
    Xl = {"C": X, "F": np.asfortranarray(X), "CSR": sp.csr_matrix(X)}[fmt]
    outs = [minimize_glm(Xl, y, "logistic", alpha=1.0, clip_norm=0.5, tol=1e-8, n_threads=t) for t in (1, 2, 3)]
    for o in outs[1:]:
        assert np.array_equal(o.coef, outs[0].coef) and o.grad_norm == outs[0].grad_norm
    sg = [minimize_glm(Xl, y, "logistic", alpha=1.0, solver="sag", tol=1e-4, n_threads=t, rng=7, max_iter=30)
          for t in (1, 2)]
    assert np.array_equal(sg[0].coef, sg[1].coef)


@pytest.mark.slow
def test_no_copy_of_X():
    """Peak Python-heap allocation during a solve stays far below the size of X."""
    rng = np.random.default_rng(16)
    X = rng.normal(size=(50000, 40))  # 16 MB
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(rng.random(50000) < 0.5, 1.0, -1.0)
    Xs = sp.random(50000, 400, density=0.02, format="csr", random_state=1, dtype=np.float64)  # 3.2 MB
    for Xl in (X, np.asfortranarray(X), X.astype(np.float32), Xs):
        if not sp.issparse(Xl):
            Xl.flags.writeable = False
        tracemalloc.start()
        r = minimize_glm(Xl, y, "logistic", alpha=1.0, tol=1e-3)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert r.converged
        nbytes = Xl.data.nbytes if sp.issparse(Xl) else Xl.nbytes
        assert peak < 0.1 * nbytes, (type(Xl), peak, nbytes)


def test_gil_released():
    X, y = make_data(200000, 20, "logistic", seed=17)
    ticks = []
    done = threading.Event()

    def counter():
        while not done.is_set():
            ticks.append(1)
            done.wait(0.001)

    t = threading.Thread(target=counter)
    t.start()
    minimize_glm(X, y, "logistic", alpha=1e-2, tol=1e-10, n_threads=1)
    done.set()
    t.join()
    assert len(ticks) > 5


# ----------------------------------------------------------------------------- bad input


def test_validation_errors():
    X, y = make_data(50, 3, "logistic", seed=18)
    with pytest.raises(ValueError, match="labels in"):
        minimize_glm(X, (y + 1) / 2, "logistic", alpha=1.0)
    with pytest.raises(ValueError, match="labels in"):
        minimize_glm(X, (y + 1) / 2, "smoothed_hinge", alpha=1.0)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        minimize_glm(Xn, y, "logistic", alpha=1.0)
    Xi = X.copy()
    Xi[7, 2] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        minimize_glm(sp.csr_matrix(Xi), y, "logistic", alpha=1.0, solver="sag", rng=0)
    with pytest.raises(ValueError, match="NaN or infinite"):
        glm_loss_and_grad(np.asfortranarray(Xi), y, "logistic", np.zeros(3))
    yb = y.copy()
    yb[0] = np.inf
    with pytest.raises(ValueError, match="y contains NaN"):
        minimize_glm(X, yb, "squared", alpha=1.0)
    with pytest.raises(ValueError, match=r"y must have shape \(50,\)"):
        minimize_glm(X, y[:-1], "logistic", alpha=1.0)
    with pytest.raises(ValueError, match="2-d"):
        minimize_glm(X[:, 0], y, "logistic", alpha=1.0)
    with pytest.raises(ValueError, match="loss must be one of"):
        minimize_glm(X, y, "hinge", alpha=1.0)
    with pytest.raises(ValueError, match="solver must be one of"):
        minimize_glm(X, y, "logistic", alpha=1.0, solver="newton")
    with pytest.raises(ValueError, match="sample_weight must be >= 0"):
        minimize_glm(X, y, "logistic", alpha=1.0, sample_weight=-np.ones(50))
    with pytest.raises(ValueError, match="alpha must be finite and >= 0"):
        minimize_glm(X, y, "logistic", alpha=-1.0)
    with pytest.raises(ValueError, match="clip_norm must be > 0"):
        minimize_glm(X, y, "logistic", alpha=1.0, clip_norm=0.0)
    with pytest.raises(ValueError, match="quadratic is supported by solver='lbfgs' only"):
        minimize_glm(X, y, "logistic", alpha=1.0, quadratic=np.eye(3), solver="sag")
    with pytest.raises(ValueError, match="symmetric"):
        minimize_glm(X, y, "logistic", alpha=1.0, quadratic=np.triu(np.ones((3, 3))))
    with pytest.raises(ValueError, match=r"linear must have shape \(3,\)"):
        minimize_glm(X, y, "logistic", alpha=1.0, linear=np.ones(4))
    with pytest.raises(ValueError, match="tol must be > 0"):
        minimize_glm(X, y, "logistic", alpha=1.0, tol=0.0)
    with pytest.raises(ValueError, match="step_size"):
        minimize_glm(X, y, "logistic", alpha=1.0, solver="sag", step_size="big")
    with pytest.raises(TypeError, match="X must hold real numbers"):
        minimize_glm(X.astype(object).astype(str), y, "logistic", alpha=1.0)
    with pytest.raises(TypeError, match="rng must be"):
        minimize_glm(X, y, "logistic", alpha=1.0, solver="sag", rng="seed")


def test_convertible_inputs():
    """Integer matrices, strided views, COO/CSC and duplicate CSR entries are accepted (copied once)."""
    X, y = make_data(200, 4, "squared", seed=19)
    ref = minimize_glm(X, y, "squared", alpha=1.0, tol=1e-10).coef
    Xbig = np.zeros((200, 8))
    Xbig[:, ::2] = X
    np.testing.assert_allclose(minimize_glm(Xbig[:, ::2], y, "squared", alpha=1.0, tol=1e-10).coef, ref, atol=1e-9)
    np.testing.assert_allclose(minimize_glm(sp.csc_matrix(X), y, "squared", alpha=1.0, tol=1e-10).coef, ref, atol=1e-9)
    half = sp.coo_matrix(X / 2)
    dup = sp.csr_matrix((np.r_[half.data, half.data], (np.r_[half.row, half.row], np.r_[half.col, half.col])),
                        shape=X.shape)
    dup = sp.csr_matrix((dup.data, dup.indices, dup.indptr), shape=X.shape)  # keep duplicates
    r = minimize_glm(dup, y, "squared", alpha=1.0, clip_norm=0.3, tol=1e-10)
    np.testing.assert_allclose(r.coef, minimize_glm(X, y, "squared", alpha=1.0, clip_norm=0.3, tol=1e-10).coef, atol=1e-9)
    Xi = np.round(X * 10).astype(np.int64)
    np.testing.assert_allclose(minimize_glm(Xi, y, "squared", alpha=1.0, tol=1e-10).coef,
                               minimize_glm(Xi.astype(float), y, "squared", alpha=1.0, tol=1e-10).coef, atol=1e-12)


@pytest.mark.parametrize("solver", ["sag", "saga"])
def test_sag_strong_regularization_and_linear_term(solver):
    """alpha/n dominating the smoothness (step capped at n/(2 alpha)) and a large linear term."""
    X, y = make_data(300, 5, "logistic", seed=20, density=0.7)
    b = np.random.default_rng(21).normal(size=5) * 50
    for Xl in (X, sp.csr_matrix(X)):
        ref = minimize_glm(Xl, y, "logistic", alpha=1e4, linear=b, tol=1e-10).coef
        r = minimize_glm(Xl, y, "logistic", alpha=1e4, linear=b, solver=solver, tol=1e-8, rng=4)
        assert r.converged and r.step_size <= 300 / (2 * 1e4) + 1e-15
        np.testing.assert_allclose(r.coef, ref, atol=1e-9)
        ref = minimize_glm(Xl, y, "logistic", alpha=0.01, linear=b, tol=1e-10).coef
        r = minimize_glm(Xl, y, "logistic", alpha=0.01, linear=b, solver=solver, tol=1e-8, rng=4, max_iter=5000)
        assert r.converged
        np.testing.assert_allclose(r.coef, ref, atol=1e-6)


def test_wide_sparse_matches_reference():
    """d larger than the partial-gradient budget per chunk (2^22 / d chunks at most)."""
    rng = np.random.default_rng(22)
    n, d = 6000, 300_000
    rows = np.repeat(np.arange(n), 4)
    cols = rng.integers(0, d, size=4 * n)
    X = sp.csr_matrix((rng.normal(size=4 * n) / 2, (rows, cols)), shape=(n, d))
    X.sum_duplicates()
    y = rng.choice([-1.0, 1.0], size=n)
    theta = rng.normal(size=d)
    f1, g1 = glm_loss_and_grad(X, y, "logistic", theta, alpha=0.5, clip_norm=0.4, n_threads=1)
    f2, g2 = glm_loss_and_grad(X, y, "logistic", theta, alpha=0.5, clip_norm=0.4, n_threads=2)
    assert f1 == f2 and np.array_equal(g1, g2)
    z = X @ theta
    val, der = ref_loss("logistic", z, y)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    c = np.where(norms > 0, 0.4 / np.maximum(norms, 1e-300), np.inf)
    np.testing.assert_allclose(g1, X.T @ np.clip(der, -c, c) + 0.5 * theta, rtol=1e-12, atol=1e-12)


def test_vectorised_logistic_accuracy():
    """The blocked, vectorised logistic loss of the passes over X is accurate to a few ulp."""
    rng = np.random.default_rng(23)
    z = np.concatenate([[0.0, 1e-300, -1e-17, 1e-8, 707.0, -707.0, 709.5, -745.5, 800.0, -800.0],
                        rng.uniform(-40, 40, 300), rng.standard_normal(200) * 1e-3])
    n = len(z)
    y = rng.choice([-1.0, 1.0], size=n)
    X = np.diag(np.where(z == 0, 1.0, z))  # row i has margin z_i at theta = 1 (or 0 -> margin 1*... )
    theta = np.where(z == 0, 0.0, 1.0)
    m = y * (X @ theta)
    f, g = glm_loss_and_grad(X, y, "logistic", theta)
    ref_val = np.logaddexp(0.0, -m)
    ref_der = -y * special.expit(-m)
    np.testing.assert_allclose(f, ref_val.sum(), rtol=1e-14)
    np.testing.assert_allclose(g, ref_der * np.diag(X), rtol=2e-15, atol=1e-300)
    for k in range(0, n, 37):  # single rows: values one at a time (padded lanes)
        fk, _ = glm_loss_and_grad(X[k:k + 1], y[k:k + 1], "logistic", theta)
        np.testing.assert_allclose(fk, ref_val[k], rtol=4e-16 * 8, atol=1e-300)


@pytest.mark.slow
def test_baseline_build_agrees_with_dispatched_one():
    """The kernels are compiled twice (baseline x86-64 and AVX2); both give the same optimum."""
    import json
    import os
    import subprocess
    import sys

    code = (
        "import json, numpy as np, scipy.sparse as sp\n"
        "from dpfast import _glm\n"
        "from dpfast._solver import minimize_glm\n"
        "rng = np.random.default_rng(24)\n"
        "X = rng.normal(size=(3000, 9)); X /= np.linalg.norm(X, axis=1, keepdims=True)\n"
        "y = np.where(rng.random(3000) < 0.5, 1.0, -1.0)\n"
        "out = [minimize_glm(Xl, y, 'logistic', alpha=1.0, clip_norm=0.5, tol=1e-9, solver=s, rng=0).coef.tolist()\n"
        "       for Xl in (X, np.asfortranarray(X, dtype=np.float32), sp.csr_matrix(X)) for s in ('lbfgs', 'saga')]\n"
        "print(json.dumps([bool(_glm.has_avx2), out]))\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
    res = {}
    for flag in ("0", "1"):
        env = dict(os.environ, DPFAST_GLM_NO_AVX2=flag, PYTHONPATH=root)
        p = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True)
        res[flag] = json.loads(p.stdout)
    assert res["1"][0] is False
    np.testing.assert_allclose(np.array(res["0"][1]), np.array(res["1"][1]), atol=1e-8)


@pytest.mark.parametrize("scale, C", [(1e-170, 1e-300), (1.0, 0.3), (1e150, 1e-10), (3.0, 1e-300)])
def test_clipped_per_example_gradient_within_C_after_rounding(scale, C):
    """Algorithm 1's bound |l_C'| ||x|| <= C holds for the exact norm of x, also when the float64 sum of
    squares underflows (0.1 did not clip at all then: entries 1e-170 gave gradients of norm 2e-170 for C=1e-300)."""
    from fractions import Fraction

    d = 7
    rng = np.random.default_rng(5)
    for trial in range(20):
        x = scale * rng.uniform(0.5, 1.0, size=(1, d)) * rng.choice([-1.0, 1.0], size=(1, d))
        theta = rng.normal(size=d) / scale
        _, g = glm_loss_and_grad(x, np.array([1e3]), "squared", theta, alpha=0.0, clip_norm=C, n_threads=1)
        der = g / x[0]  # g = l_C' x exactly up to one rounding per entry; bound the exact norm of the output
        exact_sq = sum(Fraction(float(v)) ** 2 for v in g)
        assert exact_sq <= Fraction(C) ** 2, (trial, float(exact_sq) ** 0.5 / C)
        assert np.all(np.isfinite(der))
