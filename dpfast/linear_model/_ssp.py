"""Sufficient-statistic perturbation (SSP) for least squares: the Gaussian mechanism on the
augmented second-moment matrix (Analyze Gauss), then a PSD projection and a ridge.

Mechanism (Awan's lecture notes section 3.8, the spec digest's E3; Dwork, Talwar, Thakurta &
Zhang 2014, "Analyze Gauss", Algorithm 1; Wang 2018, "Revisiting differentially private linear
regression", Algorithm 2 "SSP"): with rows z_i = (x_i, s) (s the bias column, 0 when there is no
intercept), ||x_i|| <= R and labels clipped to |y_i| <= B, release

    A~ = sum_i z_i z_i^T + E,  b~ = sum_i y_i z_i + e,

E symmetric with its upper triangle (diagonal included) and e i.i.d. N(0, sigma^2), sigma = z Delta.
yᵀy is not released.  Delta is the exact l2 sensitivity under add/remove of the released vector
(upper triangle of z z^T, then y z), see :func:`ssp_sensitivity`.  The estimate
theta = (P_+(A~) + lambda I)^{-1} b~ (P_+: eigenvalues clipped at 0) is post-processing.
"""
from __future__ import annotations

import math

import numpy as np

from dpfast import _stats
from dpfast._threads import default_threads
from dpfast.accounting import Gaussian
from dpfast.accounting.erm_calibration import check_accountant, gaussian_multiplier
from dpfast.random import standard_normal

__all__ = ["ssp_sensitivity", "ssp_statistics", "ssp_calibrate", "ssp_solve"]


def ssp_sensitivity(norm_bound: float, intercept: float, label_bound: float) -> float:
    """l2 sensitivity (add/remove one row) of (upper triangle of Z^T Z, Z^T y).

    One row contributes the vector u = ((a_j a_k)_{j<=k}, y a) with a = (x, s).  Its squared norm
    is sum_{j<=k} a_j^2 a_k^2 + y^2 ||a||^2 = (||a||_2^4 + ||a||_4^4)/2 + y^2 ||a||^2; with
    ||x||_2 <= R, ||x||_4^4 <= ||x||_2^4 and |y| <= B the supremum is reached at x = R e_1, y = B:

        Delta^2 = ((R^2 + s^2)^2 + R^4 + s^4)/2 + B^2 (R^2 + s^2)

    (s = 0 without an intercept: Delta^2 = R^4 + B^2 R^2)."""
    R, s, B = float(norm_bound), float(intercept), float(label_bound)
    A = R * R + s * s
    return math.sqrt((A * A + R ** 4 + s ** 4) / 2.0 + B * B * A)


def ssp_calibrate(epsilon: float, delta: float, sensitivity: float, accountant: str = "best"):
    """(event, sigma, accountant): the smallest Gaussian noise multiplier z (relative 1e-9) that the
    accountant certifies at (epsilon, delta) (the analytic Gaussian of Balle & Wang 2018 as the
    starting point, :func:`dpfast.accounting.calibration.certified_gaussian_multiplier`); the event is
    ``Gaussian(z, sensitivity)`` and the noise on every released coordinate is sigma = z sensitivity."""
    check_accountant(accountant)
    z, which = gaussian_multiplier(float(epsilon), float(delta), 1, accountant)
    sigma = z * float(sensitivity)
    if not (0.0 < sigma < math.inf):
        raise ValueError(f"the SSP noise is not representable in double precision (sigma {sigma!r}); "
                         "rescale norm_bound, label_bound or intercept_scaling")
    return Gaussian(noise_multiplier=z, sensitivity=float(sensitivity)), sigma, which


def ssp_statistics(Z: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(Z^T W Z, Z^T W y) in float64, W = diag(w) (identity when w is None); weights in [0, 1]
    scale one row's contribution by w, so the sensitivity of :func:`ssp_sensitivity` holds.

    One native pass (``dpfast._stats.ssp_gram``: the upper triangle of [Z, y]^T W [Z, y] with
    every entry summed in row order within fixed row chunks merged in a fixed order, so the bits
    do not depend on the thread count or on Z's layout; GIL released), mirrored to the full
    symmetric matrix."""
    Z = np.asarray(Z)
    if Z.dtype not in (np.float32, np.float64):
        Z = Z.astype(np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    wv = None if w is None else np.ascontiguousarray(w, dtype=np.float64)
    G = _stats.ssp_gram(Z, y, wv, default_threads())
    d = Z.shape[1]
    A = np.triu(G[:d, :d])
    A = A + np.triu(A, 1).T
    return A, G[:d, d].copy()


def ssp_noise(gen, dim: int, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """(E, e): E symmetric (dim, dim) with i.i.d. N(0, sigma^2) upper triangle (diagonal
    included), e (dim,) i.i.d. N(0, sigma^2); one draw of dim (dim + 1)/2 + dim standard normals."""
    iu = np.triu_indices(dim)
    draws = sigma * standard_normal(gen, iu[0].size + dim)
    E = np.zeros((dim, dim))
    E[iu] = draws[: iu[0].size]
    E = E + np.triu(E, 1).T
    return E, draws[iu[0].size:]


def ssp_solve(A: np.ndarray, b: np.ndarray, ridge: float) -> np.ndarray:
    """theta = (P_+(A) + ridge I)^{-1} b, P_+ the projection onto the PSD cone (Frobenius):
    eigenvalues of the symmetric A clipped at 0 (post-processing of the released A, b)."""
    w, V = np.linalg.eigh(A)
    w = np.maximum(w, 0.0) + float(ridge)
    return V @ ((V.T @ b) / w)
