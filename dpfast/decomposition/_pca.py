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

from dpfast import _fixed, _stats, accounting
from dpfast._base import RANDOM_STATE, Interval, PrivateEstimator, StrOptions, check_fitted, validate_X
from dpfast._dask_utils import fit_rows, frame_or_array_rows, is_dask_collection, sum_by_partitions
from dpfast._threads import default_threads
from dpfast._validation import as_array, check_delta, check_epsilon, feature_bounds
from dpfast.accounting.calibration import accountant_gaussian_multiplier
from dpfast.budget import detached
from dpfast.calibrate import laplace_scale
from dpfast.mechanisms import bingham, gaussian_noise, laplace_noise
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
    the limit of its MCMC and is much slower; ``method="bingham"`` samples the same law exactly
    (see ``method`` below and docs/theory for the comparison).

    Dask input: ``fit`` (and ``transform``, lazily) accept a ``dask.array.Array`` or
    ``dask.dataframe.DataFrame``.  The public checks read metadata only, the charge comes next,
    then one pass in which every partition returns the exact statistic of its rows (integers: the
    sums are exact sums of products of factors on the grid ``2^-26`` of the public bound 1, :mod:`dpfast._fixed`),
    added exactly on the client and rounded once, then the one draw: no row leaves the cluster.
    The release equals the in-memory fit's bit for bit for the same data and ``random_state``,
    for every partitioning (a partitioning chosen from the data moves no bit of it).
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
    bounds : (lower, upper), dict or None
        Public range of every feature (a pair of scalars, two arrays of length d, or a dict
        ``{feature: (lower, upper)}`` keyed by column name or index as in the other estimators;
        :func:`dpfast._validation.feature_bounds`; every width ``upper - lower`` a finite double):
        rows are clamped to it and centred at its midpoint before the norm clipping.
    centered : bool
        The user declares that the data are centred (a public fact): no mean is released and
        ``mean_`` is 0 (the midpoint of ``bounds`` if given).
    method : {"covariance", "bingham"}
        ``"covariance"`` (default): the one noisy second-moment release above.  ``"bingham"``:
        pure epsilon-DP whatever ``delta`` (``delta_`` is 0), the components drawn one by one
        from the Bingham distribution (Chaudhuri, Sarwate & Sinha 2013, PPCA, Algorithm 1) by
        the exact sampler of :func:`dpfast.mechanisms.bingham` (Kent, Ganeiber & Mardia 2018),
        with the budget split evenly over k + 2 parts (k = ``n_components``, an int or None;
        a float is refused): (1) the count and, unless ``centered``, the sum of the rows
        (Laplace, l1 sensitivity 1 + sqrt(d)), giving the mean m; (2) k Bingham draws, each the
        exponential mechanism with utility v^T G v on the sphere of the orthogonal complement of
        the components already drawn, G = sum_rows u u^T, u = (x - m) clipped to norm R then
        divided by R (add/remove one row moves v^T G v by at most 1: sensitivity 1; the
        complement is a function of earlier outputs, so this is adaptive composition, the
        deflation diffprivlib also uses); (3) the k Rayleigh quotients v_i^T G v_i and the
        remainder trace(G) - sum_i v_i^T G v_i (Laplace, l1 sensitivity sum_i (v_i^T u)^2 +
        |u|^2 - sum_i (v_i^T u)^2 = |u|^2 <= 1), giving ``explained_variance_`` and the ratio.
        Only the first component is PPCA exactly as CSS13 state it; the others are its
        deflation (each epsilon / (k + 2)-DP).  Pick it for a few components at small d, or
        when pure DP is required and d is too large for the Laplace covariance (whose l1
        sensitivity grows like d / 2); Analyze Gauss (``delta > 0``) is more accurate otherwise.
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
        "bounds": ["array-like", dict, None],
        "centered": ["boolean"],
        "method": [StrOptions({"covariance", "bingham"})],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, n_components: Any = None, *, epsilon: float = 1.0, delta: float = 1e-5,
                 norm_bound: Any = None, bounds: Any = None, centered: bool = False, method: str = "covariance",
                 random_state: Any = None):
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.norm_bound = norm_bound
        self.bounds = bounds
        self.centered = centered
        self.method = method
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags

    # ------------------------------------------------------------------ public checks
    def _geometry(self, d: int):
        """(c, lo, hi, R) from public parameters and d only; errors before the charge."""
        if self.bounds is not None:
            lo, hi = feature_bounds(self.bounds, d, getattr(self, "feature_names_in_", None), arrays=True)
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

    def _exact_statistic(self, Xa, c, lo, hi, R):
        """The exact vector v(X) (see the class docstring) as integers: the fixed-point sums
        (:mod:`dpfast._fixed`, the Gram kernels' factor grid: every entry of ``u`` and the
        trailing 1 truncated once to ``q = trunc(u_j 2^26)``, the products ``q_j q_k`` exact
        integers on the grid ``2^-52``) of the mapped rows, an object array of Python ints (the
        count ``n`` is the sum of ``2^52``).  Exact: the partitions of a Dask fit add in any order
        to the same integers.  One native pass (``dpfast._stats.pca_gram``: rows read by their
        strides; GIL released).  Per row: ``y = clip(x, lo, hi) - c`` (no box: ``x - c``); a row
        longer than ``R`` (or whose norm overflows; one with infinite entries taken as the ray of
        their signs) is scaled onto the sphere of radius ``R``; ``u = y / R``, rescaled once more
        when rounding left ``|u| > 1``."""
        n, d = Xa.shape
        X = np.asarray(Xa)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        f64 = np.float64
        G = _fixed.ints(_stats.pca_gram(X, None if lo is None else np.ascontiguousarray(lo, dtype=f64),
                                        None if hi is None else np.ascontiguousarray(hi, dtype=f64),
                                        np.ascontiguousarray(c, dtype=f64), float(R), default_threads()))
        G = G.reshape(d + 1, d + 1)
        iu = _upper_index(d)
        parts = [G[:d, :d][iu]]
        if not self.centered:
            parts.append(G[:d, d])
        parts.append(G[d:, d])
        return np.concatenate(parts)

    def _statistic(self, Xa, c, lo, hi, R):
        """The exact vector v(X) as float64: :meth:`_exact_statistic` rounded once per entry."""
        return _fixed.to_float(self._exact_statistic(Xa, c, lo, hi, R), _fixed.GRAM_SCALE)

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
        if self.method == "bingham":
            return self._fit_bingham(Xa, c, lo, hi, R, budget)
        event, (kind, s), eps, delta, accountant = self._event(d)
        gen = check_random_state(self.random_state)
        self._charge(event, budget)
        exact = self._statistic(Xa, c, lo, hi, R)
        with detached():  # the fit's event covers the draws
            noise = laplace_noise(s, exact.size, rng=gen) if kind == "laplace" else gaussian_noise(s, exact.size, rng=gen)
        self._from_release(exact + noise, c, R, d)
        self._record_release(event, eps, delta, accountant)

    # ------------------------------------------------------------------ method="bingham"
    def _bingham_plan(self, d: int):
        """(k, eps0, event) of method="bingham" from public parameters only."""
        k = self.n_components
        if k is not None and not (isinstance(k, Integral) and not isinstance(k, bool)):
            raise ValueError("method='bingham' needs n_components an int or None (a float would choose k "
                             "from the released spectrum, which this method releases only for k components)")
        k = d if k is None else int(k)
        eps = check_epsilon(self.epsilon, allow_array=False)
        eps0 = eps / (k + 2)
        if eps0 * (k + 2) > eps:
            eps0 = math.nextafter(eps0, 0.0)
        if not eps0 > 0:
            raise ValueError("epsilon / (n_components + 2) underflows to 0")
        s_count = 1.0 if self.centered else 1.0 + math.sqrt(d)
        b_count = float(laplace_scale(eps0, s_count))
        b_var = float(laplace_scale(eps0, 1.0))
        event = accounting.Composed((accounting.Laplace(scale=b_count, sensitivity=s_count),
                                     accounting.SelfComposed(accounting.PureDP(epsilon=eps0), k),
                                     accounting.Laplace(scale=b_var, sensitivity=1.0)))
        return k, eps0, b_count, b_var, event, eps

    @staticmethod
    def _clipped_rows(Xa, shift, lo, hi, R):
        """(rows clamped to the box, minus ``shift``, scaled to norm <= R) / R."""
        # a C-order copy whatever the input's layout (the sums' rounding then depends on the rows only)
        U = np.array(Xa, dtype=np.float64, order="C")
        if lo is not None:
            np.clip(U, lo, hi, out=U)
        with np.errstate(over="ignore", invalid="ignore"):
            U = U - shift
            nrm = np.sqrt(np.einsum("ij,ij->i", U, U))
        bad = ~np.isfinite(nrm)
        if bad.any():  # inf entries: the ray of their signs
            Z = U[bad]
            inf = np.isinf(Z)
            U[bad] = np.where(inf, np.sign(Z), 0.0) / np.sqrt(np.maximum(inf.sum(axis=1), 1))[:, None] * R
            nrm[bad] = R
        U = U / np.maximum(nrm, R)[:, None]
        over = np.einsum("ij,ij->i", U, U) > 1.0
        if over.any():
            U[over] /= np.nextafter(np.sqrt(np.einsum("ij,ij->i", U[over], U[over])), np.inf)[:, None]
        return U

    def _fit_bingham(self, Xa, c, lo, hi, R, budget) -> None:
        n, d = Xa.shape
        k, eps0, b_count, b_var, event, eps = self._bingham_plan(d)
        gen = check_random_state(self.random_state)
        self._charge(event, budget)
        # (1) the count and (unless centred) the sum of the clipped rows: the mean
        U0 = self._clipped_rows(Xa, c, lo, hi, R)
        first = np.array([float(n)]) if self.centered else np.concatenate([[float(n)], U0.sum(axis=0)])
        with detached():
            first = first + laplace_noise(b_count, first.size, rng=gen)
        n_t = max(float(first[0]), 2.0)
        mean_u = np.zeros(d) if self.centered else first[1:] / n_t
        nm = float(np.linalg.norm(mean_u))
        if nm > 1.0:  # post-processing: the mean of rows in the unit ball is in the unit ball
            mean_u = mean_u / nm
        mean = c + R * mean_u
        # (2) k Bingham draws on the deflated second moment of the rows centred at the released mean
        U = self._clipped_rows(Xa, mean, lo, hi, R)
        G = U.T @ U
        basis = np.eye(d)  # orthonormal basis (columns) of the complement of the components so far
        comps = np.empty((k, d))
        with detached():
            for i in range(k):
                w = bingham(basis.T @ G @ basis, 1.0, eps0, rng=gen)
                v = basis @ w
                v /= np.linalg.norm(v)
                comps[i] = v
                # the complement of v within span(basis): a function of the outputs only
                q, _ = np.linalg.qr(np.concatenate([comps[:i + 1].T, np.eye(d)], axis=1))
                basis = q[:, i + 1:d]
            # (3) the Rayleigh quotients and the remainder of the trace (l1 sensitivity |u|^2 <= 1)
            quot = np.einsum("ij,jk,ik->i", comps, G, comps)
            stats_ = np.concatenate([quot, [float(np.trace(G)) - float(quot.sum())]])
            stats_ = stats_ + laplace_noise(b_var, stats_.size, rng=gen)
        stats_ = np.clip(stats_, 0.0, None)
        q_t, rest = stats_[:k], float(stats_[k])
        order = np.argsort(-q_t, kind="stable")
        comps, q_t = comps[order], q_t[order]
        idx = np.argmax(np.abs(comps), axis=1)
        comps *= np.sign(comps[np.arange(k), idx])[:, None]
        ev = (R * R) * q_t / (n_t - 1.0)
        total = float(q_t.sum()) + rest
        self.components_ = comps
        self.n_components_ = k
        self.explained_variance_ = ev
        self.explained_variance_ratio_ = q_t / total if total > 0 else np.full(k, 1.0 / d)
        self.singular_values_ = np.sqrt(ev * (n_t - 1.0))
        self.noise_variance_ = (R * R) * rest / (d - k) / (n_t - 1.0) if k < d else 0.0
        self.mean_ = mean
        self.n_samples_ = n_t
        self._n_features_out = k
        self._record_release(event, eps, 0.0, None)

    def _fit_dask(self, X, budget) -> None:
        """:meth:`fit` on a Dask collection (class docstring): metadata checks, charge, one pass
        of per-partition :meth:`_exact_statistic` (integers) added exactly and rounded once, one draw."""
        self._validate_params()
        self._reset_fit()
        Xd, d = fit_rows(self, X)
        self._n_components_check(d)
        if self.method == "bingham":  # its draws read the Gram matrix of the rows again, k times
            raise ValueError("method='bingham' takes in-memory data only; use method='covariance' on Dask")
        c, lo, hi, R = self._geometry(d)
        event, (kind, s), eps, delta, accountant = self._event(d)
        gen = check_random_state(self.random_state)
        self._charge(event, budget)
        exact = _fixed.to_float(sum_by_partitions(self._exact_statistic, Xd, args=(c, lo, hi, R), out_dtype=object),
                                _fixed.GRAM_SCALE)
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

