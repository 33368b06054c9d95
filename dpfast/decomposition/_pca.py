"""Differentially private PCA by perturbing the second-moment matrix (one pass over the data).

Neighbouring relation: add or remove one row (the number of rows n is private and released
noisily with the rest).  See :class:`PCA` for the guarantee and the mechanism.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin

from dpfast import accounting
from dpfast._base import RANDOM_STATE, Interval, PrivateEstimator, check_fitted, validate_X
from dpfast._dask_utils import (
    BAD_ROWS,
    PartitionError,
    add_in_order,
    frame_or_array_rows,
    is_dask_collection,
    partials,
    row_parts,
    set_feature_names,
)
from dpfast._validation import as_array, check_delta, check_epsilon
from dpfast.accounting.calibration import accountant_gaussian_multiplier
from dpfast.budget import detached
from dpfast.calibrate import laplace_scale
from dpfast.mechanisms import gaussian_noise, laplace_noise
from dpfast.random import check_random_state

__all__ = ["PCA", "pca_sensitivity"]

#: The accountant that states the guarantee of the Gaussian release (dpfast's default).
ACCOUNTANT = "pld"


def pca_sensitivity(n_features: int, centered: bool, kind: str) -> float:
    """Sensitivity of the released vector ``v(X) = sum_rows w(x)`` with, for a row x of l2 norm
    at most R (after clipping), ``w(x) = (upper(x x^T) / R^2, x / R, 1)`` -- the upper triangle
    (diagonal included) of the outer product, the row and the count; ``centered=True`` drops the
    ``x / R`` block.  Add/remove one row moves v by w(x), so:

    * ``kind="l2"``: ``|upper(x x^T)|_2^2 = (|x|^4 + sum x_i^4) / 2 <= |x|^4 <= R^4``, hence
      ``sqrt(1 + 1 + 1) = sqrt(3)`` (``sqrt(2)`` centered) -- the sensitivity 1 of Analyze
      Gauss (Dwork et al. 2014, Alg. 1) for the matrix block;
    * ``kind="l1"``: ``sum_{i<=j} |x_i x_j| = (|x|_1^2 + |x|_2^2) / 2 <= (d + 1) R^2 / 2`` and
      ``|x|_1 <= sqrt(d) R``, hence ``(d + 1) / 2 + sqrt(d) + 1`` (without ``sqrt(d)`` centered).
    Both bounds are attained (up to the diagonal term) by a row ``R (1, ..., 1) / sqrt(d)``.
    """
    d = int(n_features)
    if kind == "l2":
        return math.sqrt(2.0 if centered else 3.0)
    if kind == "l1":
        return (d + 1) / 2.0 + (0.0 if centered else math.sqrt(d)) + 1.0
    raise ValueError(f"kind must be 'l1' or 'l2', got {kind!r}")


def _upper_index(d: int):
    return np.triu_indices(d)


class PCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, PrivateEstimator):
    """Principal component analysis with differential privacy (scikit-learn's ``PCA`` contract).

    Guarantee (add/remove one row; n private): ``fit`` is ``(epsilon, delta)``-DP for
    ``delta > 0`` -- the Gaussian mechanism on the second-moment matrix, *Analyze Gauss*
    (Dwork, Talwar, Thakurta & Zhang 2014, "Analyze Gauss: optimal bounds for
    privacy-preserving principal component analysis", STOC, Alg. 1 and Thm. 3), with the noise
    calibrated exactly (Balle & Wang 2018, Thm. 8, then the PLD accountant) -- and pure
    ``epsilon``-DP for ``delta = 0`` -- the Laplace mechanism (Dwork, McSherry, Nissim & Smith
    2006) on the same matrix, the covariance perturbation of SuLQ (Blum, Dwork, McSherry &
    Nissim 2005).  Everything else (eigendecomposition, ``transform``) is post-processing.

    Mechanism.  Each row is clamped to the public box ``bounds`` (if given) and shifted by its
    midpoint c (else c = 0), then scaled down to l2 norm at most ``norm_bound`` = R.  One
    vector is released, ``v = sum_rows (upper(x x^T) / R^2, x / R, 1)`` (the upper triangle
    with the diagonal, the row sum -- dropped when ``centered=True`` -- and the count), plus iid
    noise on every coordinate: Gaussian of standard deviation ``z * sqrt(3)`` (``sqrt(2)``
    centered), or Laplace of scale ``l1 / epsilon`` (:func:`pca_sensitivity`).  The noisy
    upper triangle is mirrored into a symmetric matrix M (Analyze Gauss's symmetric noise), and
    with ``n~ = max(noisy count, 2)``, ``s = R * noisy sum``: ``mean_ = c + s / n~`` and the
    scatter ``R^2 M - s s^T / n~``, whose eigenvectors are ``components_`` and whose
    eigenvalues (clipped at 0) over ``n~ - 1`` are ``explained_variance_`` (scikit-learn's
    normalisation).  The mean costs no separate budget: it is part of the one Gaussian (or
    Laplace) release, at the price of the sqrt(3) vs sqrt(2) sensitivity.

    When to use which.  ``delta > 0`` (default 1e-5): Analyze Gauss, the optimal error
    O(sqrt(d)/epsilon) on the subspace (Dwork et al. 2014), and a single pass.  ``delta = 0``:
    the Laplace variant, whose l1 sensitivity grows like d/2, so it is accurate for a few tens
    of features at most.  diffprivlib's PCA samples the components from the Bingham
    distribution (Chaudhuri, Sarwate & Sinha 2013) by Gibbs sampling, which is pure DP only in
    the limit of its MCMC and is much slower; see docs/theory for the comparison.

    Dask input: ``fit`` (and ``transform``, lazily) accept a ``dask.array.Array`` or
    ``dask.dataframe.DataFrame``.  The public checks read metadata only, the charge comes next,
    then one pass in which every partition returns :meth:`_statistic` of its rows, the partials
    added on the client in partition order, then the one draw: no row leaves the cluster.  The
    release equals the in-memory fit's for the same data and ``random_state`` up to the order of
    the float64 sums (relative 1e-15); a different partitioning changes it at that level only.
    NaN or infinite entries found in the pass raise ``ValueError`` after the charge, naming no
    row or value.

    Parameters
    ----------
    n_components : int, float in (0, 1) or None
        Number of components kept (None: all d); a float keeps the fewest components whose
        released explained-variance ratio reaches it (post-processing).
    epsilon : float
        Privacy budget (> 0, finite).
    delta : float
        In [0, 1); 0 selects the Laplace (pure DP) mechanism.
    norm_bound : float or None
        Public bound R on the l2 norm of each (shifted) row; rows above it are scaled down to
        it.  Required unless ``bounds`` is given, in which case it defaults to the half-diagonal
        of the box (no row is scaled).
    bounds : (lower, upper) or None
        Public range of every feature (a pair of scalars, or two arrays of length d): rows are
        clamped to it and centred at its midpoint before the norm clipping.
    centered : bool
        The user declares that the data are centred (a public fact): no mean is released and
        ``mean_`` is 0 (the midpoint of ``bounds`` if given).
    random_state : None, int, numpy Generator or dpfast.random.SecureRandom

    Attributes
    ----------
    components_, explained_variance_, explained_variance_ratio_, singular_values_, mean_,
    n_components_, n_samples_ (the noisy count n~), noise_variance_ (the mean of the discarded
    eigenvalues, as scikit-learn) ; ``event_`` (``Gaussian`` or ``Laplace``), ``epsilon_``,
    ``delta_``, ``accountant_`` (None for pure DP).
    """

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left"), Interval(Real, 0, 1, closed="neither"), None],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="left")],
        "norm_bound": [Interval(Real, 0, None, closed="neither"), None],
        "bounds": ["array-like", None],
        "centered": ["boolean"],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, n_components: Any = None, *, epsilon: float = 1.0, delta: float = 1e-5,
                 norm_bound: Any = None, bounds: Any = None, centered: bool = False, random_state: Any = None):
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.norm_bound = norm_bound
        self.bounds = bounds
        self.centered = centered
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags

    # ------------------------------------------------------------------ public checks
    def _geometry(self, d: int):
        """(c, lo, hi, R) from public parameters and d only; errors before the charge."""
        if self.bounds is not None:
            b = as_array(self.bounds, "bounds", np.float64)
            if b.shape == (2,):
                lo, hi = np.full(d, b[0]), np.full(d, b[1])
            elif b.shape == (2, d):
                lo, hi = b[0].copy(), b[1].copy()
            else:
                raise ValueError(f"bounds must be a pair (lower, upper) of scalars or of arrays of length "
                                 f"n_features={d}; got shape {b.shape}")
            if not (np.isfinite(lo).all() and np.isfinite(hi).all() and (lo < hi).all()):
                raise ValueError("bounds must be finite with lower < upper for every feature")
            c = lo + 0.5 * (hi - lo)
            half = float(np.linalg.norm(0.5 * (hi - lo)))
        else:
            lo = hi = None  # type: ignore[assignment]  # no box: rows are only norm-clipped
            c = np.zeros(d)
            half = None
        if self.norm_bound is None:
            if half is None:
                raise ValueError("norm_bound must be given (the public bound on the l2 norm of a row), or bounds "
                                 "(the public range of every feature); reading it off the data would not be private")
            R = half
        else:
            R = float(self.norm_bound)
        if not (math.isfinite(R) and R > 0 and math.isfinite(R * R) and R * R > 0):
            raise ValueError("norm_bound must be positive and finite with norm_bound**2 a positive finite double")
        return c, lo, hi, R

    def _n_components_check(self, d: int) -> None:
        k = self.n_components
        if isinstance(k, Integral) and not isinstance(k, bool) and int(k) > d:
            raise ValueError(f"n_components={k} must be at most n_features={d}")

    def _event(self, d: int):
        eps = check_epsilon(self.epsilon, allow_array=False)
        delta = check_delta(self.delta)
        centered = bool(self.centered)
        if delta == 0:
            l1 = pca_sensitivity(d, centered, "l1")
            scale = float(laplace_scale(eps, l1))
            event = accounting.Laplace(scale=scale, sensitivity=l1)
            return event, ("laplace", scale), event.epsilon, 0.0, None
        l2 = pca_sensitivity(d, centered, "l2")
        z, eps_acc, accountant = accountant_gaussian_multiplier(eps, delta, l2, ACCOUNTANT)
        return (accounting.Gaussian(noise_multiplier=z, sensitivity=l2), ("gaussian", z * l2), eps_acc, delta,
                accountant)

    # ------------------------------------------------------------------ fit
    #: rows per block of the one pass (a reused buffer that stays in cache; a fixed block size
    #: fixes the order of the sums, so the same rows give the same bits)
    _BLOCK = 8192

    def _statistic(self, Xa, c, lo, hi, R):
        """The exact vector v(X) (see the class docstring): rows clamped, shifted, norm-clipped,
        in one pass over X by blocks of :attr:`_BLOCK` rows (C-order buffer whatever the input's
        layout, so the same rows give the same bits)."""
        n, d = Xa.shape
        G = np.zeros((d, d))
        S = np.zeros(d)
        buf = np.empty((min(n, self._BLOCK), d))
        for start in range(0, n, self._BLOCK):
            X_b = Xa[start:start + self._BLOCK]
            U = buf[:X_b.shape[0]]
            with np.errstate(over="ignore", invalid="ignore"):
                if lo is None:
                    np.subtract(X_b, c, out=U)
                else:
                    np.clip(X_b, lo, hi, out=U)
                    np.subtract(U, c, out=U)
                sq = np.einsum("ij,ij->i", U, U)
            long_ = ~(sq <= R * R)  # longer than R, or a norm that overflows (inf entries included)
            if long_.any():
                # scale those rows to the sphere without overflow: a row with inf entries is taken
                # as the ray of their signs; other rows as y / max|y|, then divided by their norm
                Z = U[long_]
                inf = np.isinf(Z)
                Z = np.where(inf.any(axis=1)[:, None], np.where(inf, np.sign(Z), 0.0), Z)
                Z /= np.abs(Z).max(axis=1)[:, None]
                Z /= np.sqrt(np.einsum("ij,ij->i", Z, Z))[:, None]
                U[long_] = Z * R
            np.divide(U, R, out=U)
            # rounding can leave |u| a few ulps above 1: rescale those rows once more (per row)
            nu = np.einsum("ij,ij->i", U, U)
            over = nu > 1.0
            if over.any():
                U[over] /= np.nextafter(np.sqrt(nu[over]), np.inf)[:, None]
            G += U.T @ U
            S += U.sum(axis=0)
        iu = _upper_index(d)
        parts = [G[iu]]
        if not self.centered:
            parts.append(S)
        parts.append(np.array([float(n)]))
        return np.concatenate(parts)

    def fit(self, X, y=None, *, budget: Any = None) -> "PCA":
        """Release the principal components (see the class docstring).  Returns self.

        ``budget``: a :class:`dpfast.PrivacyBudget` (or None for the one of an enclosing
        ``with budget:``) charged with ``event_`` before any noise is drawn."""
        self._fit(X, budget)
        return self

    def fit_transform(self, X, y=None, *, budget: Any = None):
        return self.fit(X, budget=budget).transform(X)

    def _fit(self, X, budget) -> None:
        if is_dask_collection(X):
            self._fit_dask(X, budget)
            return
        self._validate_params()
        self._reset_fit()
        Xa = validate_X(self, X, reset=True, dtype=np.float64)
        d = Xa.shape[1]
        self._n_components_check(d)
        c, lo, hi, R = self._geometry(d)
        event, (kind, s), eps, delta, accountant = self._event(d)
        gen = check_random_state(self.random_state)
        self._charge(event, budget)
        exact = self._statistic(Xa, c, lo, hi, R)
        with detached():  # the fit's event covers the draws
            noise = laplace_noise(s, exact.size, rng=gen) if kind == "laplace" else gaussian_noise(s, exact.size, rng=gen)
        self._from_release(exact + noise, c, R, d)
        self._record_release(event, eps, delta, accountant)

    def _fit_dask(self, X, budget) -> None:
        """:meth:`fit` on a Dask collection (class docstring): metadata checks, charge, one pass
        of per-partition :meth:`_statistic` added in partition order, one draw."""
        self._validate_params()
        self._reset_fit()
        Xd = frame_or_array_rows(X)
        d = int(Xd.shape[1])
        set_feature_names(self, X)
        self.n_features_in_ = d
        self._n_components_check(d)
        c, lo, hi, R = self._geometry(d)
        event, (kind, s), eps, delta, accountant = self._event(d)
        gen = check_random_state(self.random_state)
        self._charge(event, budget)
        exact = add_in_order(partials(_pca_partition, [row_parts(Xd)], c, lo, hi, R, self._statistic))
        with detached():  # the fit's event covers the draws
            noise = laplace_noise(s, exact.size, rng=gen) if kind == "laplace" else gaussian_noise(s, exact.size, rng=gen)
        self._from_release(exact + noise, c, R, d)
        self._record_release(event, eps, delta, accountant)

    def _from_release(self, v: np.ndarray, c: np.ndarray, R: float, d: int) -> None:
        """Post-processing of the noisy vector v into scikit-learn's attributes."""
        iu = _upper_index(d)
        m = len(iu[0])
        M = np.zeros((d, d))
        M[iu] = v[:m]
        M = M + np.triu(M, 1).T  # symmetric: the upper noise mirrored (Analyze Gauss)
        n = max(float(v[-1]), 2.0)
        if self.centered:
            mean_u = np.zeros(d)
            scatter = M
        else:
            su = v[m:m + d]
            mean_u = su / n
            scatter = M - np.outer(su, su) / n
        scatter = 0.5 * (scatter + scatter.T)
        w, V = np.linalg.eigh(scatter)
        order = np.argsort(w)[::-1]
        w, V = np.clip(w[order], 0.0, None), V[:, order]
        ev = (R * R) * w / (n - 1.0)
        total = float(ev.sum())
        ratio = ev / total if total > 0 else np.full(d, 1.0 / d)
        k = self.n_components
        if k is None:
            k = d
        elif isinstance(k, Real) and not isinstance(k, Integral):
            k = int(min(np.searchsorted(np.cumsum(ratio), float(k), side="left") + 1, d))
        k = int(k)
        comps = V[:, :k].T.copy()
        # sign convention of scikit-learn >= 1.5 (svd_flip on the components): the entry of
        # largest magnitude in each component is positive
        idx = np.argmax(np.abs(comps), axis=1)
        comps *= np.sign(comps[np.arange(k), idx])[:, None]
        self.components_ = comps
        self.n_components_ = k
        self.explained_variance_ = ev[:k]
        self.explained_variance_ratio_ = ratio[:k]
        self.singular_values_ = np.sqrt(ev[:k] * (n - 1.0))
        self.noise_variance_ = float(ev[k:].mean()) if k < d else 0.0
        self.mean_ = c + R * mean_u
        self.n_samples_ = n
        self._n_features_out = k

    # ------------------------------------------------------------------ post-processing
    def transform(self, X):
        """Project X on the released components: ``(X - mean_) @ components_.T``."""
        check_fitted(self)
        if is_dask_collection(X):  # lazily, chunk by chunk
            Xd = frame_or_array_rows(X)
            if Xd.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {Xd.shape[1]} features, PCA was fitted with {self.n_features_in_}")
            mean, comps = self.mean_, self.components_
            return Xd.map_blocks(lambda b: (np.asarray(b, dtype=np.float64) - mean) @ comps.T,
                                 chunks=(Xd.chunks[0], (comps.shape[0],)), dtype=np.float64)
        Xa = validate_X(self, X, reset=False, dtype=np.float64)
        return (Xa - self.mean_) @ self.components_.T

    def inverse_transform(self, X):
        """Back to feature space: ``X @ components_ + mean_``."""
        check_fitted(self)
        Xa = as_array(X, "X", np.float64)
        if Xa.ndim != 2 or Xa.shape[1] != self.n_components_:
            raise ValueError(f"X must have shape (n_samples, {self.n_components_})")
        return Xa @ self.components_ + self.mean_


def _pca_partition(block, c, lo, hi, R, statistic):
    """One partition's exact vector v (:meth:`PCA._statistic` of its rows; its last entry the
    partition's row count), or the fixed message of non-finite data."""
    Xk = np.ascontiguousarray(block, dtype=np.float64)
    if not np.isfinite(Xk).all():
        return PartitionError(BAD_ROWS)
    return statistic(Xk, c, lo, hi, R)
