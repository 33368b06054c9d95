"""Multinomial (softmax) logistic regression: the K-output objective, its certified minimiser
and Gaussian output perturbation.

Objective (sum over examples, as for the GLMs of :mod:`dpfast._solver`):

    F(W) = sum_i w_i l(W; x_i, y_i) + (lambda/2) ||W||_F^2,   l = -log softmax(W^T x)_y,

with W in R^{d x K} (d includes the bias feature).  The loss, its gradient and the constants
L = sqrt(2) ||x||, beta = ||x||^2 / 2 live in ``csrc/losses/losses.hpp`` (one home); the pass
over the rows is the native, chunked ``dpfast._multinomial.loss_and_grad`` (deterministic for
any thread count).  The minimiser is the native L-BFGS of the GLM solvers driven on the
flattened W (``dpfast._glm.minimize_callable``, the driver of the Dask path), followed, when it
has not certified ||grad F||_F <= tau, by the accelerated method of
:mod:`dpfast._certify` for an iteration count proved sufficient on every data set
(no data-dependent refusal).

Privacy (output perturbation; Chaudhuri, Monteleoni & Sarwate 2011, "Differentially private
empirical risk minimization", JMLR 12, Corollary 8 and its proof through their Lemma 7, with
the Gaussian noise of Wu et al. 2017, "Bolt-on differential privacy", SIGMOD): for any convex,
differentiable, L-Lipschitz loss of a vector parameter, the minimisers of lambda-strongly
convex neighbouring objectives (add/remove one example) are within L/lambda; the argument uses
only convexity, the gradient-norm bound and strong convexity, so it holds for the flattened
W in R^{dK} with the Frobenius norm and L = sqrt(2) * (row-norm bound).  A point with
||grad F||_F <= tau is within tau/lambda of the exact minimiser (strong convexity), so the
released point has L2 sensitivity (L + 2 tau)/lambda; the noise is the analytic Gaussian
mechanism's (Balle & Wang 2018) on all d K coordinates: one Gaussian release, one event.

Not covered, refused with ``ValueError``: objective perturbation and Algorithm 1 ("amp").
The tight analysis of Redberg, Koskela & Wang (2024) (Theorems 3.1, 3.2, 4.1) assumes a GLM,
whose per-example Hessian has rank one; the softmax Hessian has rank K - 1.  Their Theorem E.1
(non-GLM losses) states an RDP bound with a d log(1 - beta/lambda) Jacobian term for the *exact*
minimiser of an *unclipped* loss only (as printed, its second term reads L/(2 sigma^2) where the
derivation gives L^2/(2 sigma^2)); no cited theorem covers the approximate minimiser with output
noise or gradient clipping for a rank-(K-1) Hessian, and the Frobenius-clipped softmax gradient
is not the gradient of a convex loss.  Gradient clipping (``clip_norm`` below the natural bound) is
refused for the same reason.
"""
from __future__ import annotations

import numpy as np

from dpfast import _glm, _multinomial, _threads
from dpfast._certify import certified_descent, check_certifiable
from dpfast._solver import MappedRows, default_solver_threads
from dpfast._validation import check_positive, check_real
from dpfast.linear_model._mechanisms import row_norms
from dpfast.random import standard_normal

__all__ = ["multinomial_oracle", "minimize_multinomial_certified", "fit_multinomial_output"]


def _rows(X):
    """(data, indices, indptr, n, dx, rscale, icpt) for the native pass (no copy of C-ordered dense
    rows or of CSR data in float32/float64 with int64 indices)."""
    import scipy.sparse as sp

    if isinstance(X, MappedRows):  # dense or CSR rows; the kernel applies the row map and the bias
        if sp.issparse(X.X):
            data, indices, indptr, n, dx, _, _ = _rows(X.X)
            return data, indices, indptr, n, dx, X.scale, X.intercept
        data = X.X if X.X.flags.c_contiguous else np.ascontiguousarray(X.X)
        n, dx = data.shape
        return data, None, None, n, dx, X.scale, X.intercept
    if sp.issparse(X):
        Xc = sp.csr_matrix(X)
        if not Xc.has_canonical_format:
            Xc = Xc.copy()
            Xc.sum_duplicates()
        data = Xc.data if Xc.data.dtype in (np.float32, np.float64) else Xc.data.astype(np.float64)
        n, dx = Xc.shape
        return (np.ascontiguousarray(data), np.ascontiguousarray(Xc.indices, dtype=np.int64),
                np.ascontiguousarray(Xc.indptr, dtype=np.int64), n, dx, None, 0.0)
    X = np.asarray(X)
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    X = np.ascontiguousarray(X)
    n, dx = X.shape
    return X, None, None, n, dx, None, 0.0


def multinomial_oracle(X, y, n_classes: int, *, alpha: float = 0.0, sample_weight=None, n_threads=None):
    """``evaluate(w) -> (F(W), grad F(W))`` on the flattened W (d x K, row-major).

    ``X``: dense rows, CSR, or :class:`~dpfast._solver.MappedRows` (row map and
    bias feature applied in the kernel); ``y``: labels as indices in [0, n_classes).  The value
    does not depend on ``n_threads`` (fixed chunks reduced in order).
    """
    data, indices, indptr, n, dx, rscale, icpt = _rows(X)
    K = int(n_classes)
    if K < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes!r}")
    yv = np.ascontiguousarray(y, dtype=np.int64)
    if yv.shape != (n,):
        raise ValueError(f"y must have shape ({n},) to match X, got {yv.shape}")
    w = None if sample_weight is None else np.ascontiguousarray(sample_weight, dtype=np.float64)
    d = dx + (icpt != 0.0)
    # the GLM solvers' thread policy; the value is the same for any count
    nt = default_solver_threads() if n_threads is None else _threads.check_threads(n_threads)
    a = float(alpha)

    def evaluate(flat):
        W = np.ascontiguousarray(flat, dtype=np.float64).reshape(d, K)
        f, G, ok = _multinomial.loss_and_grad(data, indices, indptr, n, dx, yv, w, K, a, W, nt, rscale, icpt)
        if not ok:
            raise ValueError("X contains NaN or infinite entries (or a row whose scores overflow float64)")
        return float(f), G.ravel()

    evaluate.shape = (d, K)
    return evaluate


def minimize_multinomial_certified(X, y, n_classes: int, *, alpha: float, tol: float, max_iter: int, lipschitz: float,
                                   smoothness_factor: float, sample_weight=None, n_threads=None):
    """A flattened W with ||grad F(W)||_F <= tol on every data set: ``(W, grad_norm, n_iter, solver)``.

    The native L-BFGS runs ``max_iter`` iterations; if it has not certified tol, Nesterov's
    method continues (:func:`dpfast._certify.certified_descent`; F is
    lambda-strongly convex and (lambda + beta_x sum_i w_i ||x_i||^2)-smooth, beta_x =
    ``smoothness_factor`` = 1/2).  ``check_certifiable`` refuses, from public quantities only
    (n, L), a tol that float64 cannot certify.
    """
    n = X.shape[0]
    check_certifiable(tol, 2.0 * n * lipschitz)
    evaluate = multinomial_oracle(X, y, n_classes, alpha=alpha, sample_weight=sample_weight, n_threads=n_threads)
    d, K = evaluate.shape
    theta = np.zeros(d * K)
    n_iter, _n_eval, _conv, _fun, gnorm, _status = _glm.minimize_callable(evaluate, theta, float(tol), int(max_iter), 10)
    if gnorm <= tol:
        return theta, float(gnorm), int(n_iter), "lbfgs"
    sq = row_norms(X) ** 2
    weighted = float(sq.sum() if sample_weight is None else np.dot(sample_weight, sq))
    W, gn, passes = certified_descent(lambda th: evaluate(th)[1], theta, tol=tol, strong_convexity=alpha,
                                      smoothness=alpha + smoothness_factor * weighted)
    return W, float(gn), int(n_iter) + passes, "nesterov"


def fit_multinomial_output(X, y, n_classes: int, cal, *, smoothness_factor: float, sample_weight, max_iter: int,
                           gen, noise: bool = True):
    """Gaussian output perturbation of the certified minimiser: ``(W (d, K), grad_norm, n_iter, solver)``.

    ``cal``: the output-perturbation :class:`~dpfast.linear_model.PrivacyCalibration`
    (sensitivity (L + 2 tau)/lambda, noise ``cal.sigma_out`` per coordinate).  ``noise=False``
    is for tests only (the non-private certified minimiser).
    """
    if cal.method != "output":
        raise ValueError(f"multinomial logistic regression supports method='output' only, got {cal.method!r}")
    W, gnorm, n_iter, used = minimize_multinomial_certified(
        X, y, n_classes, alpha=cal.regularization, tol=cal.tau, max_iter=max_iter, lipschitz=cal.lipschitz,
        smoothness_factor=smoothness_factor, sample_weight=sample_weight)
    W = np.array(W, dtype=np.float64, copy=True)
    if noise:
        W += cal.sigma_out * standard_normal(gen, W.size)  # the package's one Gaussian sampler
    return W.reshape(-1, int(n_classes)), gnorm, n_iter, used


def check_multinomial_clip(clip_norm, natural: float) -> None:
    """``ValueError`` for a clip_norm that would act (below the natural bound ``natural`` = sqrt(2) R)."""
    if clip_norm is None:
        return
    C = check_positive(check_real(clip_norm, "clip_norm"), "clip_norm", allow_array=False)
    if C < natural:
        raise ValueError(
            f"clip_norm={C:.6g} is below the multinomial loss's own gradient bound sqrt(2) * row norm = {natural:.6g}: "
            "a clipped softmax gradient is not the gradient of a convex loss, which output perturbation's "
            "sensitivity bound needs; leave clip_norm=None (the loss is already sqrt(2) R-Lipschitz)"
        )
