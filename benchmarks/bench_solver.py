"""Native GLM solvers (dpfast._solver) against scikit-learn and scipy.

Objective (all sides): sum_i log(1 + exp(-y_i x_i.theta)) + (alpha/2)||theta||^2, no
intercept, rows with ||x|| <= 1.  Peers: scikit-learn ``LogisticRegression`` (lbfgs, sag;
C = 1/alpha) and ``scipy.optimize.minimize(method="L-BFGS-B")`` on a NumPy loss/gradient.

Equal tolerance: dpfast stops on ||grad F||_2 <= tol for the *sum* objective; sklearn's lbfgs
stops on max_j |grad_j| <= tol_sk of the *mean* objective, so it gets tol_sk = tol / n (its
criterion is then the looser one).  sklearn's sag stops on the relative change of the
weights instead; we report the gradient norm it reaches and run dpfast's SAG to that norm.

CI smoke: ``pytest benchmarks/bench_solver.py --benchmark-disable``.  Full figures:
``DPFAST_BENCH_FULL=1 python benchmarks/bench_solver.py`` (prints the tables recorded in
benchmarks/results/solver.md).
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

try:
    from _bench import FULL, size
except ImportError:  # run as a script from the repo root
    sys.path.insert(0, "benchmarks")
    from _bench import FULL, size

from dpfast._solver import glm_loss_and_grad, minimize_glm

from _bench import best_time  # noqa: E402  (benchmarks/ is on sys.path under pytest and as a script)

ALPHA = 1.0


def make_logistic(n: int, d: int, seed: int = 0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=np.float64)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = rng.normal(size=d) * 3.0
    y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ w))), 1.0, -1.0)
    return X.astype(dtype, copy=False), y


def make_sparse(n: int, d: int, density: float, seed: int = 0):
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    nnz_row = max(1, int(round(d * density)))
    width = d // nnz_row  # one column per bucket of `width` columns: distinct and sorted
    indptr = np.arange(0, (n + 1) * nnz_row, nnz_row, dtype=np.int64)
    indices = (rng.integers(0, width, size=(n, nnz_row), dtype=np.int64)
               + width * np.arange(nnz_row, dtype=np.int64)).astype(np.int32)
    data = rng.random((n, nnz_row)) + 0.1
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    X = sp.csr_matrix((data.ravel(), indices.ravel(), indptr.astype(np.int32)), shape=(n, d))
    X.has_canonical_format = True  # true by construction
    w = rng.normal(size=d) * 3.0
    y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ w))), 1.0, -1.0)
    return X, y


def gradnorm(X, y, coef):
    return float(np.linalg.norm(glm_loss_and_grad(X, y, "logistic", coef, alpha=ALPHA)[1]))


# ----------------------------------------------------------------------------- pytest-benchmark

N_SMALL = size(5_000, 200_000)


@pytest.fixture(scope="module")
def dense_data():
    return make_logistic(N_SMALL, 50)


def test_dpfast_lbfgs(benchmark, dense_data):
    X, y = dense_data
    r = benchmark(minimize_glm, X, y, "logistic", alpha=ALPHA, tol=1e-6)
    assert r.converged


def test_dpfast_lbfgs_clipped(benchmark, dense_data):
    X, y = dense_data
    b = np.random.default_rng(1).normal(size=X.shape[1]) * 10
    r = benchmark(minimize_glm, X, y, "logistic", alpha=ALPHA, linear=b, clip_norm=np.sqrt(2), tol=1e-2)
    assert r.converged


def test_dpfast_sag(benchmark, dense_data):
    X, y = dense_data
    r = benchmark(minimize_glm, X, y, "logistic", alpha=ALPHA, solver="sag", tol=1e-3, rng=0)
    assert r.converged


def test_sklearn_lbfgs(benchmark, dense_data):
    sklm = pytest.importorskip("sklearn.linear_model")
    X, y = dense_data
    clf = sklm.LogisticRegression(C=1 / ALPHA, fit_intercept=False, tol=1e-6 / len(y), max_iter=1000)
    benchmark(clf.fit, X, y)


def test_sklearn_sag(benchmark, dense_data):
    sklm = pytest.importorskip("sklearn.linear_model")
    X, y = dense_data
    clf = sklm.LogisticRegression(C=1 / ALPHA, fit_intercept=False, solver="sag", tol=1e-4, max_iter=1000)
    benchmark(clf.fit, X, y)


def test_dpfast_lbfgs_csr(benchmark):
    X, y = make_sparse(size(5_000, 1_000_000), size(1_000, 10_000), 0.01)
    r = benchmark.pedantic(minimize_glm, args=(X, y, "logistic"), kwargs=dict(alpha=ALPHA, tol=1e-3),
                           rounds=1, iterations=1)
    assert r.converged


# ----------------------------------------------------------------------------- script


def main():  # pragma: no cover - manual full benchmark
    from scipy import optimize
    from sklearn.linear_model import LogisticRegression

    print(f"full={FULL}")
    rows = []
    cases = [(100_000, 50), (200_000, 50), (1_000_000, 100)] if FULL else [(20_000, 50)]
    tol = 1e-6
    for n, d in cases:
        X, y = make_logistic(n, d)
        rep = 3 if n <= 200_000 else 2
        t_dp, r = best_time(lambda: minimize_glm(X, y, "logistic", alpha=ALPHA, tol=tol), rep)
        t_dp1, _ = best_time(lambda: minimize_glm(X, y, "logistic", alpha=ALPHA, tol=tol, n_threads=1), rep)
        clf = LogisticRegression(C=1 / ALPHA, fit_intercept=False, tol=tol / n, max_iter=1000)
        t_sk, _ = best_time(lambda: clf.fit(X, y), rep)
        g_sk = gradnorm(X, y, clf.coef_[0])
        clf4 = LogisticRegression(C=1 / ALPHA, fit_intercept=False, max_iter=1000)  # default tol 1e-4
        t_sk4, _ = best_time(lambda: clf4.fit(X, y), rep)
        g_sk4 = gradnorm(X, y, clf4.coef_[0])

        def f_scipy(t):
            m = y * (X @ t)
            return np.logaddexp(0, -m).sum() + 0.5 * ALPHA * t @ t, X.T @ (-y / (1 + np.exp(m))) + ALPHA * t

        t_sp, rs = best_time(lambda: optimize.minimize(f_scipy, np.zeros(d), jac=True, method="L-BFGS-B",
                                                   options=dict(gtol=tol / np.sqrt(d), maxiter=1000)), rep)
        rows.append(
            f"| {n:,} x {d} | lbfgs | dpfast {t_dp:.3f} s (1 thread {t_dp1:.3f}) , {r.n_iter} it, "
            f"{r.n_eval} passes, ||g|| {r.grad_norm:.1e} | sklearn tol={tol}/n {t_sk:.3f} s (||g|| {g_sk:.1e}); "
            f"sklearn default tol {t_sk4:.3f} s (||g|| {g_sk4:.1e}) | scipy {t_sp:.3f} s ({rs.nit} it, ||g|| "
            f"{gradnorm(X, y, rs.x):.1e}) | {t_dp / t_sk:.2f} / {t_dp / t_sk4:.2f} | "
            f"max|coef-sk| {np.abs(r.coef - clf.coef_[0]).max():.1e} |"
        )
        print(rows[-1], flush=True)
        if n <= 200_000:
            sag = LogisticRegression(C=1 / ALPHA, fit_intercept=False, solver="sag", tol=1e-6, max_iter=1000)
            t_sag, _ = best_time(lambda: sag.fit(X, y), 1)
            g_sag = gradnorm(X, y, sag.coef_[0])
            t_ds, rd = best_time(lambda: minimize_glm(X, y, "logistic", alpha=ALPHA, solver="sag", tol=g_sag, rng=0), 1)
            t_dsa, rda = best_time(lambda: minimize_glm(X, y, "logistic", alpha=ALPHA, solver="saga", tol=g_sag, rng=0), 1)
            rows.append(
                f"| {n:,} x {d} | sag | dpfast sag {t_ds:.3f} s ({rd.n_iter} epochs, ||g|| {rd.grad_norm:.1e}); "
                f"saga {t_dsa:.3f} s ({rda.n_iter} epochs) | sklearn sag tol=1e-6 {t_sag:.3f} s "
                f"({sag.n_iter_[0]} epochs, ||g|| {g_sag:.1e}) | | {t_ds / t_sag:.2f} | |"
            )
            print(rows[-1], flush=True)
    # sparse
    ns, ds = (1_000_000, 10_000) if FULL else (50_000, 2_000)
    X, y = make_sparse(ns, ds, 0.01)
    t_sp, r = best_time(lambda: minimize_glm(X, y, "logistic", alpha=ALPHA, tol=1e-3), 1)
    clf = LogisticRegression(C=1 / ALPHA, fit_intercept=False, tol=1e-3 / ns, max_iter=1000)
    t_sk, _ = best_time(lambda: clf.fit(X, y), 1)
    rows.append(
        f"| CSR {ns:,} x {ds:,}, 1% | lbfgs | dpfast {t_sp:.3f} s ({r.n_iter} it, ||g|| {r.grad_norm:.1e}) | "
        f"sklearn {t_sk:.3f} s (||g|| {gradnorm(X, y, clf.coef_[0]):.1e}) | | {t_sp / t_sk:.2f} | |"
    )
    print(rows[-1], flush=True)
    t_ss, r = best_time(lambda: minimize_glm(X, y, "logistic", alpha=ALPHA, solver="sag", tol=1e-3, rng=0), 1)
    rows.append(f"| CSR {ns:,} x {ds:,}, 1% | sag | dpfast {t_ss:.3f} s ({r.n_iter} epochs, ||g|| {r.grad_norm:.1e}) | | | | |")
    print(rows[-1], flush=True)


if __name__ == "__main__":
    main()
