"""An independent reference for the GLM objective (scipy L-BFGS-B), used by the tests only.

F(theta) = sum_i w_i l_C(y_i, x_i.theta) + (alpha/2)||theta||^2 + linear.theta, with l_C the
gradient-clipped loss of Algorithm 1 (spec objective_perturbation.md): the derivative in the
margin is clamped to +-C/||x_i||, i.e. the loss is extended linearly beyond those points.
Written from the formulas, not from dpfast's code.
"""
from __future__ import annotations

import numpy as np
from scipy import optimize


def _clipped_logistic(u, y, c):
    """Value and derivative (in u) of log(1 + exp(-y u)) with |derivative| clamped to c."""
    m = y * u
    val = np.logaddexp(0.0, -m)
    d = -1.0 / (1.0 + np.exp(m))  # derivative in m, in (-1, 0)
    with np.errstate(divide="ignore"):
        mstar = np.where(c < 1.0, np.log(np.maximum(1.0 / np.minimum(c, 1.0) - 1.0, 1e-300)), -np.inf)
    lin = m < mstar
    if np.any(lin):
        ms = mstar[lin]
        val = val.copy()
        val[lin] = np.logaddexp(0.0, -ms) - c[lin] * (m[lin] - ms)
        d = d.copy()
        d[lin] = -c[lin]
    return val, d * y


def _clipped_squared(u, y, c):
    r = u - y
    a = np.abs(r)
    val = np.where(a <= c, 0.5 * r * r, c * a - 0.5 * c * c)
    d = np.clip(r, -c, c)
    return val, d


def objective(theta, X, y, loss, alpha, linear=None, clip=None, sample_weight=None):
    X = np.asarray(X, dtype=np.float64)
    u = X @ theta
    norms = np.linalg.norm(X, axis=1)
    if clip is None:
        c = np.full(len(y), np.inf)
    else:
        with np.errstate(divide="ignore"):
            c = np.where(norms > 0, clip / np.maximum(norms, 1e-300), np.inf)
    if loss == "logistic":
        val, d = _clipped_logistic(u, y, c)
    elif loss == "squared":
        val, d = _clipped_squared(u, y, c)
    else:
        raise ValueError(loss)
    w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
    f = float(w @ val) + 0.5 * alpha * float(theta @ theta)
    g = X.T @ (w * d) + alpha * theta
    if linear is not None:
        f += float(linear @ theta)
        g = g + linear
    return f, g


def reference_minimize(X, y, loss, *, alpha, linear=None, clip=None, sample_weight=None, tol=1e-10):
    d = np.asarray(X).shape[1]
    res = optimize.minimize(
        objective, np.zeros(d), args=(X, y, loss, alpha, linear, clip, sample_weight), jac=True,
        method="L-BFGS-B", options={"maxiter": 20000, "gtol": tol, "ftol": 0.0, "maxcor": 20},
    )
    f, g = objective(res.x, X, y, loss, alpha, linear, clip, sample_weight)
    return res.x, float(np.linalg.norm(g))
