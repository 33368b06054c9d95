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

from dpfast import _fixed, _stats
from dpfast._threads import default_threads
from dpfast.accounting import Gaussian
from dpfast.accounting.erm_calibration import check_accountant, gaussian_multiplier
from dpfast.random import standard_normal

__all__ = ["ssp_sensitivity", "ssp_statistics", "ssp_exact", "ssp_floats", "ssp_exponents", "ssp_calibrate",
           "ssp_solve"]


def ssp_sensitivity(norm_bound: float, intercept: float, label_bound: float) -> float:
    """l2 sensitivity (add/remove one row) of (upper triangle of Z^T Z, Z^T y).

    One row contributes the vector u = ((a_j a_k)_{j<=k}, y a) with a = (x, s).  Its squared norm
    is sum_{j<=k} a_j^2 a_k^2 + y^2 ||a||^2 = (||a||_2^4 + ||a||_4^4)/2 + y^2 ||a||^2; with
    ||x||_2 <= R, ||x||_4^4 <= ||x||_2^4 and |y| <= B the supremum is reached at x = R e_1, y = B:

        Delta^2 = ((R^2 + s^2)^2 + R^4 + s^4)/2 + B^2 (R^2 + s^2)

    (s = 0 without an intercept: Delta^2 = R^4 + B^2 R^2)."""
    R, s, B = float(norm_bound), float(intercept), float(label_bound)
    A = R * R + s * s
    try:
        return math.sqrt((A * A + R ** 4 + s ** 4) / 2.0 + B * B * A)
    except OverflowError:  # (float ** raises where * gives inf): not representable, refused by the calibration
        return math.inf


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


def ssp_exponents(col_bounds) -> np.ndarray:
    """The column bound exponents of the exact Gram sums: the smallest ``e`` with ``2^e >= b`` for
    each public column bound ``b > 0`` (Z's columns, then y's)."""
    out = []
    for b in col_bounds:
        m, e = math.frexp(float(b))
        out.append(e - 1 if m == 0.5 else e)
    return np.asarray(out, dtype=np.int64)


#: the column bound exponents the native Gram kernel accepts (csrc/bindings/stats.cpp ssp_gram)
_EXPONENT_RANGE = (-900, 900)


def check_ssp_exponents(col_bounds) -> None:
    """Refuse (ValueError, public parameters: call it before the charge) column bounds whose
    power-of-two grid exponent (:func:`ssp_exponents`) is outside the native kernel's range."""
    e = ssp_exponents(col_bounds)
    if e.size and not (e.min() >= _EXPONENT_RANGE[0] and e.max() <= _EXPONENT_RANGE[1]):
        raise ValueError("norm_bound, label_bound and intercept_scaling must lie within [2**-900, 2**900] "
                         "(the grid of the exact Gram sums)")


def ssp_exact(Z: np.ndarray, y: np.ndarray, w: np.ndarray | None, col_bounds) -> np.ndarray:
    """The upper triangle of [Z, y]^T W [Z, y] as EXACT integers ((d+1)^2 object array of Python
    ints, row-major): entry (j, k) the exact sum of the products ``trunc(fl(w b_j) 2^26)
    trunc(b_k 2^26)``, ``b = clamp(z 2^-e, -1, 1)`` (:mod:`dpfast._fixed` GRAM_BITS: grid value
    ``q 2^(e_j + e_k - 52)``), ``2^e_j >= col_bounds[j]`` (Z's columns, then
    y's; :func:`ssp_exponents`).  Exact: a Dask fit's partitions add in any order to the same
    integers.  One native pass (``dpfast._stats.ssp_gram``, GIL released)."""
    Z = np.asarray(Z)
    if Z.dtype not in (np.float32, np.float64):
        Z = Z.astype(np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    wv = None if w is None else np.ascontiguousarray(w, dtype=np.float64)
    return _fixed.ints(_stats.ssp_gram(Z, y, wv, ssp_exponents(col_bounds), default_threads()))


def ssp_floats(G, col_bounds) -> tuple[np.ndarray, np.ndarray]:
    """(Z^T W Z, Z^T W y) in float64 from :func:`ssp_exact`'s integers, each entry rounded once,
    mirrored to the full symmetric matrix."""
    e = ssp_exponents(col_bounds)
    d = e.size - 1
    G = np.asarray(G, dtype=object).reshape(d + 1, d + 1)
    iu = np.triu_indices(d + 1)
    vals = np.zeros((d + 1, d + 1))
    vals[iu] = [_fixed.to_float([G[j, k]], math.ldexp(_fixed.GRAM_SCALE, int(e[j] + e[k])))[0] for j, k in zip(*iu)]
    A = vals[:d, :d]
    A = A + np.triu(A, 1).T
    return A, vals[:d, d].copy()


def ssp_statistics(Z: np.ndarray, y: np.ndarray, w: np.ndarray | None = None, col_bounds=None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(Z^T W Z, Z^T W y) in float64, W = diag(w) (identity when w is None); weights in [0, 1]
    scale one row's contribution by w, so the sensitivity of :func:`ssp_sensitivity` holds.

    Exact sums on a fixed-point grid (:func:`ssp_exact`; the same bits for any thread count,
    layout, chunking or Dask partitioning), rounded once.  ``col_bounds``: the public bounds of
    Z's columns then y's (the estimators pass the norm, intercept and label bounds); None takes
    the arrays' own largest magnitudes (tests and non-private use only: a grid read off the data
    is not a public parameter)."""
    if col_bounds is None:
        Za, ya = np.abs(np.asarray(Z, dtype=np.float64)), np.abs(np.asarray(y, dtype=np.float64))
        col_bounds = [max(float(v), 1.0) for v in (*(Za.max(axis=0) if Za.size else np.ones(Za.shape[1])),
                                                    ya.max() if ya.size else 1.0)]
    return ssp_floats(ssp_exact(Z, y, w, col_bounds), col_bounds)


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
