"""Regularization learner (Algorithm 3) for linear predictors, with exact Perturb calibration.

See: :doc:`/theory/public_data` sections 1.6 (sum vs average), 2.3 (Algorithm 3), 3.2 (Lemma 2),
4.2-4.3 (calibration, linear instantiation), 4.6 (why the paper's constants are not used).
Block, Bun, Desai, Shetty & Wu 2024, Algorithm 3 + Algorithm 1.

Algorithm (native path, :func:`regularization_learner`)
---------------------------------------------------------
Rows x_i in R^p (an intercept column of ones is appended to private and public rows when
``fit_intercept``), public rows Z (m x p), ``S = Z^T Z / m``, ``M = 2 eta S + r I`` (r = ridge > 0).

1. Clip every private row to ``||x||_{M^{-1}} <= C`` (``x <- x min(1, C / ||x||_{M^{-1}})``): a
   per-record map fixed by public data, so it preserves neighbouring datasets.  Default C is
   the median of ``||z_k||_{M^{-1}}`` over the public rows (the largest lets one rare public
   row -- e.g. a rare one-hot category -- inflate the noise; on Adult the median was better,
   see benchmarks/results/public.md).
2. Oracle call 1 (``minimize_glm``, native L-BFGS), the objective **as implemented** (a sum):
   ``F_D(w) = sum_i l(y_i, <w, x_i>) + (1/2) w^T H w``, ``H = N M``
   (``quadratic = 2 N eta S``, ``alpha = N r``), i.e. N times Algorithm 3's averaged objective
   ``L_D(f_w) + eta ||f_w||_m^2`` plus a ridge ``(r/2)||w||^2`` (:doc:`/theory/public_data`), with N = n under
   replace-one (n is public there) and N = ``n_scale`` (a data-independent constant you pass)
   under add/remove.
3. Perturb: release ``t = Z w_bar + gamma zeta`` (Gaussian: (eps, delta); Laplace: eps).
4. Oracle call 2: ``w_hat = argmin ||Z w - t||^2`` (minimum norm; a function of (Z, t) only).

Stability of the objective as implemented (the bound the calibration uses)
---------------------------------------------------------------------------
The paper's Lemma 2 (``||f_bar - f_bar'||_m <= 2 / sqrt(eta n)``) needs a loss with range in
[0, 1] on a bounded class; the unconstrained GLM has neither, so dpfast uses the first-order
(Lipschitz) argument instead, which needs only |l'(y, v)| <= lam for all y, v
(``loss_constants``: logistic 1, smoothed hinge 1, Huber delta; squared loss is rejected):

* F_D is 1-strongly convex in ``||u||_H = sqrt(u^T H u)`` (the loss is convex).
* Let w = argmin F_D, w' = argmin F_D'.  Replace-one (record i -> i'):
  ``||w - w'||_H^2 <= <grad F_D(w') - grad F_D(w), w' - w> = <grad l_i(w') - grad l_i'(w'), w' - w>
  <= (||grad l_i(w')||_{H^-1} + ||grad l_i'(w')||_{H^-1}) ||w' - w||_H``, and
  ``||grad l_i(w)||_{H^-1} = |l'| ||x_i||_{H^-1} <= lam C / sqrt(N)``.  So
  ``||w - w'||_H <= rho_H = 2 lam C / sqrt(N)``; add/remove: one term, ``rho_H = lam C / sqrt(N)``.
* Solver slack: at the returned w~ with gradient g, strong convexity gives
  ``||w~ - w||_H <= ||g||_{H^-1}``.  dpfast requires ``||g||_{H^-1} <= tau = slack * rho_H``
  (checked exactly; when L-BFGS has not reached it, Nesterov's method continues in the H
  geometry for a number of iterations proved sufficient for every data set, so no
  data-dependent refusal can occur; :mod:`dpfast._certify`), so
  ``||w~ - w~'||_H <= rho_H + 2 tau``.
* Empirical norm: ``||f_u||_m = ||u||_S <= kappa ||u||_H``,
  ``kappa^2 = lambda_max(H^{-1/2} S H^{-1/2}) = max_j s_j / (N (2 eta s_j + r))`` (s_j the
  eigenvalues of S).  Hence **rho = kappa (rho_H + 2 tau)**, about ``2 lam C / (N sqrt(2 eta))``
  -- order 1/n, against the paper's 1/sqrt(eta n) (:doc:`/theory/public_data` "Lipschitz-refined" option, proved
  here).  Laplace also gets the l1 bound ``||Z u||_1 <= (sum_k ||z_k||_{H^-1}) ||u||_H``; the
  smaller of that and ``m rho`` is used.
* Release subset: Perturb may release the predictions at only the first ``release_size`` public
  rows R (all rows define S, M and C).  The argument above bounds ``||w~ - w~'||_H``, so it holds
  for any R, with kappa = sigma_max(R H^{-1/2}) / sqrt(|R|) and the l1 sum taken over R
  (:func:`regularization_stability`).  The Laplace noise grows with |R|, hence its default
  |R| = min(m, 2p).

Perturb then adds Gaussian noise calibrated to l2 sensitivity ``sqrt(m) rho`` (analytic) or
Laplace noise to l1 sensitivity (see :mod:`dpfast.public._perturb`).  Everything except the
private rows enters only through w~, so the released w_hat is (eps, delta)-DP (eps-DP) for
every public sample Z, whatever the private distribution.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from dpfast import _loss_table
from dpfast._certify import certified_descent, check_certifiable, dual_norm
from dpfast._solver import glm_gradient_oracle, glm_loss_and_grad, loss_constants, minimize_glm
from dpfast._validation import as_array, check_delta, check_epsilon, check_int, check_positive
from dpfast.accounting import Gaussian, Laplace
from dpfast.accounting.events import Neighbours
from dpfast.budget import refuse_unbudgeted
from dpfast.calibrate import gaussian_sigma, laplace_scale
from dpfast.public._perturb import _mechanism, perturb, project_linear
from dpfast.random import RandomLike

__all__ = [
    "RegularizationResult",
    "PublicGeometry",
    "public_geometry",
    "regularization_stability",
    "default_eta",
    "regularization_learner",
    "regularization_learner_generic",
    "LIPSCHITZ_LOSSES",
]

# The margin losses with a bounded derivative, from the native loss table: logistic,
# huber, smoothed_hinge.
LIPSCHITZ_LOSSES = tuple(
    name for name in _loss_table.MARGIN_LOSSES
    if _loss_table.TABLE[name].lipschitz_per_delta or math.isfinite(_loss_table.TABLE[name].lipschitz)
)


def _solver():
    return minimize_glm, glm_loss_and_grad, loss_constants


@dataclass(frozen=True)
class PublicGeometry:
    """Everything Algorithm 3 derives from the public sample (no private data).

    ``S`` public second moment; ``M = 2 eta S + r I``; ``eig_S`` eigenvalues of S and ``U`` its
    eigenvectors; ``public_norms`` = ||z_k||_{M^{-1}}; ``clip_norm`` C.
    """

    S: np.ndarray
    eig_S: np.ndarray
    U: np.ndarray
    eta: float
    ridge: float
    clip_norm: float
    public_norms: np.ndarray

    @property
    def eig_M(self) -> np.ndarray:
        return 2.0 * self.eta * self.eig_S + self.ridge

    def m_inv_norms(self, X: np.ndarray) -> np.ndarray:
        """||x||_{M^{-1}} for each row of X."""
        XU = X @ self.U
        return np.sqrt(np.einsum("ij,ij->i", XU, XU / self.eig_M))

    def clip(self, X: np.ndarray) -> np.ndarray:
        """Scale rows to ||x||_{M^{-1}} <= C (a per-record, public-data-defined map)."""
        norms = self.m_inv_norms(X)
        scale = np.minimum(1.0, self.clip_norm / np.maximum(norms, 1e-300))
        return X * scale[:, None]


def public_geometry(Z: np.ndarray, eta: float, ridge: Optional[float] = None, clip_norm: Optional[float] = None) -> PublicGeometry:
    """Public quantities for :func:`regularization_learner`.

    Defaults: ``ridge = 1e-2 * 2 eta * mean eig(S)``; ``clip_norm`` = median of the public rows'
    ``||z||_{M^-1}``.  Both depend on the public rows only.
    """
    Z = _check_matrix(Z, "Z")  # float64: a boolean Z would otherwise give a logical, not a numeric, Z^T Z
    m, p = Z.shape
    if m == 0 or p == 0:
        raise ValueError(f"Z must have at least one public row and one feature, got shape {Z.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        S = (Z.T @ Z) / m
    if not np.isfinite(S).all():
        raise ValueError("the public second moment Z^T Z / m overflows float64; rescale the public rows")
    S = 0.5 * (S + S.T)
    eig, U = np.linalg.eigh(S)
    eig = np.maximum(eig, 0.0)
    eta = check_positive(eta, "eta", allow_array=False)
    if ridge is None:
        ridge = 1e-2 * 2.0 * eta * max(float(eig.mean()), 1e-12)
        if not (0.0 < ridge < math.inf):  # a subnormal eta underflows it to 0, a huge one overflows
            raise ValueError(f"eta={eta!r} gives the default ridge 0.02 * eta * mean eig(S) = {ridge!r}, which must be "
                             "finite and > 0 in float64; use an eta nearer 1")
    ridge = check_positive(ridge, "ridge", allow_array=False)
    geo = PublicGeometry(S, eig, U, eta, ridge, 1.0, np.zeros(m))
    norms = geo.m_inv_norms(Z)
    if clip_norm is None:
        clip_norm = float(np.median(norms)) if np.median(norms) > 0 else 1.0
    clip_norm = check_positive(clip_norm, "clip_norm", allow_array=False)
    return PublicGeometry(S, eig, U, eta, ridge, clip_norm, norms)


def regularization_stability(
    geo: PublicGeometry,
    n_scale: float,
    lipschitz: float,
    neighbours: str = "replace_one",
    slack: float = 0.01,
    release_points: Optional[np.ndarray] = None,
) -> dict:
    """The stability bounds of the module docstring.

    ``release_points`` (default: all public rows) are the public rows R whose predictions
    Perturb releases.  Returns a dict with ``rho_H`` (H-norm bound on the exact minimisers),
    ``tau`` (the required ||grad||_{H^-1} at the returned solution), ``kappa``
    (= sigma_max(R H^{-1/2}) / sqrt(|R|), the worst ratio ||u||_{m} / ||u||_H on R), ``rho``
    (the bound on ||f_bar(D) - f_bar(D')||_m over R that Perturb is calibrated to) and ``l1``
    (= sum_{z in R} ||z||_{H^-1} (rho_H + 2 tau), a bound on the l1 sensitivity of the release).
    With R = all public rows, kappa^2 = max_j s_j / (N (2 eta s_j + r)).
    """
    N = check_positive(n_scale, "n_scale", allow_array=False)
    k = Neighbours.coerce(neighbours).sum_factor  # the neighbour factor's one home
    slack = check_positive(slack, "slack", allow_array=False)
    lipschitz = check_positive(lipschitz, "lipschitz", allow_array=False)  # NaN gave NaN bounds
    rho_H = k * lipschitz * geo.clip_norm / math.sqrt(N)
    tau = slack * rho_H
    total_H = rho_H + 2.0 * tau
    if release_points is None:
        kappa = math.sqrt(float(np.max(geo.eig_S / (N * geo.eig_M))))
        l1_norms = geo.public_norms
    else:
        R = np.asarray(release_points, dtype=np.float64)
        RW = (R @ geo.U) / np.sqrt(N * geo.eig_M)  # rows z^T H^{-1/2} (in S's eigenbasis)
        kappa = float(np.linalg.norm(RW, 2)) / math.sqrt(R.shape[0])
        l1_norms = np.linalg.norm(RW, axis=1) * math.sqrt(N)  # ||z||_{M^-1}
    l1 = float(np.sum(l1_norms)) / math.sqrt(N) * total_H  # ||z||_{H^-1} = ||z||_{M^-1} / sqrt(N)
    out = {"rho_H": rho_H, "tau": tau, "kappa": kappa, "rho": kappa * total_H, "l1": l1}
    # Perturb calibrates its noise to these bounds: an overflow (lipschitz 1e308, n_scale 5e-324:
    # inf, or 0 * inf = NaN) is refused here rather than turned into infinite or NaN noise.
    if not all(math.isfinite(v) for v in out.values()):
        raise ValueError("the stability bounds overflow a double for these lipschitz, n_scale, slack and "
                         f"public rows (rho_H={rho_H!r}, kappa={kappa!r}); rescale the loss or the public rows")
    return out


def default_eta(n: int, p: int, epsilon: float, delta: float, lipschitz: float = 1.0, m: int = 1) -> float:
    """Data-independent eta (accuracy only): balances the bias ~eta against the noise ~c lam p /(eta n).

    c is the noise multiplier of the release (analytic Gaussian sigma at unit sensitivity, or
    sqrt(2 m)/eps for Laplace); ``eta = sqrt(2 c lam p / n)`` clipped to [1e-3, 10].  Uses only
    public quantities (n is public under replace-one).
    """
    # Validated like every public entry point (n=NaN gave eta=NaN; a huge int an OverflowError).
    n = check_int(n, "n", 0, integral_reals=True)
    p = check_int(p, "p", 1, integral_reals=True)
    m = check_int(m, "m", 1, integral_reals=True)
    epsilon = check_epsilon(epsilon, allow_array=False)
    delta = check_delta(delta, allow_zero=True)
    lipschitz = check_positive(lipschitz, "lipschitz", allow_array=False)
    if delta > 0:
        c = float(gaussian_sigma(epsilon, delta, 1.0))
    else:
        c = float(laplace_scale(epsilon, math.sqrt(2.0 * m)))  # Laplace scale for l1 sensitivity sqrt(2m)
    try:
        ratio = p / max(n, 1)  # int / int: correctly rounded (float(n) could overflow)
    except OverflowError:
        ratio = math.inf
    val = 2.0 * c * lipschitz * ratio
    if not 0.0 < val < math.inf:  # an overflow or underflow on the way (inf * 0 = NaN): in logs
        log_c = math.log(c) if 0.0 < c < math.inf else 0.5 * math.log(2.0 * m) - math.log(epsilon)
        log_val = math.log(2.0) + log_c + math.log(lipschitz) + math.log(p) - math.log(max(n, 1))
        val = math.exp(min(log_val, 709.0))  # beyond e^709 the clip gives 10 anyway
    return float(np.clip(math.sqrt(val), 1e-3, 10.0))


@dataclass(frozen=True)
class RegularizationResult:
    """Released model of Algorithm 3 and its calibration (nothing here depends on the private
    data except through the DP release ``public_targets``, with one exception:
    ``solver_iterations`` counts the stage-1 solver's iterations on the private data, a
    non-private diagnostic that is not covered by the guarantee -- do not publish it).

    ``coef``: w_hat (on the augmented features when fit_intercept; the last entry is the
    intercept); ``public_targets``: the noisy public vector t; ``noise_scale`` gamma;
    ``stability`` rho; ``sensitivity`` (l2 or l1); ``mechanism``; ``eta``; ``clip_norm``;
    ``oracle_calls`` (2); ``solver_iterations``; ``fit_intercept``.
    """

    coef: np.ndarray
    public_targets: np.ndarray
    noise_scale: float
    stability: float
    sensitivity: float
    mechanism: str
    eta: float
    ridge: float
    clip_norm: float
    oracle_calls: int
    solver_iterations: int
    fit_intercept: bool
    neighbours: str = "replace_one"

    def description(self):
        """The release as a :mod:`dpfast.accounting` description (Gaussian or Laplace), for composition."""
        if self.mechanism == "gaussian":
            return Gaussian(self.noise_scale / self.sensitivity, self.sensitivity, neighbours=self.neighbours)
        return Laplace(self.noise_scale, self.sensitivity, neighbours=self.neighbours)

    def decision_function(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if self.fit_intercept:
            return X @ self.coef[:-1] + self.coef[-1]
        return X @ self.coef


def _augment(X: np.ndarray, fit_intercept: bool) -> np.ndarray:
    return np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X


def _check_matrix(X, name: str) -> np.ndarray:
    # C order: BLAS products round differently on other layouts, and a release must not depend on it
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (rows x features), got shape {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError(f"{name} contains NaN or infinite entries")
    return X


def _stage1_bounds(geo, n_rows: int, n_scale, lipschitz, neighbours, slack, release_points=None):
    """``(stability, h_eig)`` of stage 1, and what it refuses, from public quantities only (the
    geometry, N, the number of rows, the parameters): the regulariser ``H = N M`` must be positive
    definite and finite in float64, the stability bounds finite (tau > 0), and tau certifiable in
    float64 for a gradient of ``n_rows`` clipped rows.  :func:`regularization_learner` and the
    estimators call it before the charge and before any draw; :func:`_stage1` repeats it."""
    N = check_positive(n_scale, "n_scale", allow_array=False)
    with np.errstate(over="ignore", under="ignore"):
        h_eig = N * geo.eig_M  # H = Q + alpha I = U diag(h_eig) U^T
        q_max = 2.0 * (N * geo.eta) * float(np.abs(geo.S).max())  # the largest entry of Q = 2 N eta S
    if not (float(h_eig.min()) >= np.finfo(np.float64).tiny and np.isfinite(h_eig).all() and math.isfinite(q_max)):
        raise ValueError(
            f"the regulariser H = N (2 eta S + ridge I) is not positive definite and finite in float64 (N: n_scale, "
            f"or n under replace-one; eta={geo.eta:.3g}, ridge={geo.ridge:.3g}); use an n_scale or eta nearer 1"
        )
    stab = regularization_stability(geo, N, lipschitz, neighbours, slack, release_points)
    if not (stab["tau"] > 0 and all(math.isfinite(stab[k]) for k in ("tau", "rho", "l1"))):
        raise ValueError(
            f"the stability bound is not representable in float64 (tau={stab['tau']:.3g}, rho={stab['rho']:.3g}); "
            "use an n_scale, eta, clip_norm or slack nearer 1"
        )
    # public quantities only: a clipped row has ||x||_2 <= C sqrt(max eig M) and ||.||_{H^-1} <= ||.||_2 / sqrt(min h)
    per_row = lipschitz * geo.clip_norm * math.sqrt(float(geo.eig_M.max()) / float(h_eig.min()))
    check_certifiable(stab["tau"], 2.0 * n_rows * per_row,
                      f"the rows' gradients in the H^-1 norm, each <= {per_row:.3g}")
    return stab, h_eig


def _stage1(Xa, y, geo, n_scale, loss, huber_delta, lipschitz, neighbours, slack, max_iter, release_points=None):
    """Oracle call 1, certified on every data set.  Private: returns w_bar (never release it).

    The stability argument needs ``||g||_{H^-1} <= tau`` at the returned point.  L-BFGS runs
    first with ``max_iter``; when it has not certified tau, Nesterov's method continues in the
    H geometry, where F is 1-strongly convex and (1 + beta sum_i ||x_i||^2_{H^-1})-smooth
    (beta: the loss's curvature bound), for as many iterations as provably suffice
    (:func:`dpfast._certify.certified_descent`).  So the outcome never depends on
    whether a solver happened to converge: there is no refusal to observe.
    """
    minimize_glm, _, loss_constants = _solver()
    stab, h_eig = _stage1_bounds(geo, Xa.shape[0], n_scale, lipschitz, neighbours, slack, release_points)
    tau = stab["tau"]
    Xc = np.ascontiguousarray(geo.clip(Xa))
    Q = 2.0 * (n_scale * geo.eta) * geo.S  # the same product as 2 N eta S, without overflowing 2 N
    alpha = n_scale * geo.ridge

    def solve(g):  # H^-1 g
        return geo.U @ ((geo.U.T @ g) / h_eig)

    res = minimize_glm(Xc, y, loss, alpha=alpha, quadratic=Q, huber_delta=huber_delta,
                       tol=tau * math.sqrt(float(h_eig.min())),  # ||g||_2 <= this implies ||g||_{H^-1} <= tau
                       max_iter=max_iter)
    evaluate = glm_gradient_oracle(Xc, y, loss, alpha=alpha, quadratic=Q, huber_delta=huber_delta)
    if dual_norm(evaluate(res.coef)[1], solve) <= tau:
        return np.asarray(res.coef, dtype=np.float64), stab, int(res.n_iter)
    curvature = loss_constants(loss, huber_delta)[1]
    XU = Xc @ geo.U
    smooth = 1.0 + curvature * float(np.sum(XU * XU / h_eig))
    # strong convexity in the H norm: 1, up to S's rounding (geo.eig_S is clipped at 0)
    raw = np.linalg.eigvalsh(geo.S)
    mu = float(np.min((2.0 * geo.eta * raw + geo.ridge) / (2.0 * geo.eta * geo.eig_S + geo.ridge)))
    w, _, passes = certified_descent(lambda th: evaluate(th)[1], res.coef, tol=tau, strong_convexity=min(mu, 1.0),
                                     smoothness=smooth, solve=solve)
    return w, stab, int(res.n_iter) + passes


def regularization_learner(
    X_private,
    y_private,
    X_public,
    *,
    epsilon: float,
    delta: float = 0.0,
    loss: str = "logistic",
    eta: Optional[float] = None,
    ridge: Optional[float] = None,
    clip_norm: Optional[float] = None,
    fit_intercept: bool = True,
    huber_delta: float = 1.0,
    mechanism: Optional[str] = None,
    neighbours: str = "replace_one",
    n_scale: Optional[float] = None,
    slack: float = 0.01,
    max_iter: int = 1000,
    release_size: Optional[int] = None,
    rng: RandomLike = None,
) -> RegularizationResult:
    """Algorithm 3 + Perturb for linear predictors f_w(x) = <w, x> (:doc:`/theory/public_data`, 4.3).

    Guarantee: (epsilon, delta)-DP (``mechanism="gaussian"``, default when delta > 0) or
    epsilon-DP (``"laplace"``, default when delta == 0) with respect to one private row under
    ``neighbours`` ("replace_one", the paper's Definition 1; or "add_remove", which requires a
    data-independent ``n_scale``), for every public sample.  Derivation: module docstring.
    Assumes |l'| <= lam (``loss`` in ``LIPSCHITZ_LOSSES``; labels in {-1, +1} for logistic and
    smoothed hinge).  The optimality tolerance is always certified (``_stage1``); ``max_iter``
    only bounds the first solver.

    Needs m >= p public rows (p = number of columns, + 1 with ``fit_intercept``) so that the
    public points identify a linear predictor.  All m rows define S, M and C; the first
    ``release_size`` rows (default: all for Gaussian, ``min(m, 2p)`` for Laplace, whose noise
    grows with the number of released values) carry the Perturb release and the projection.
    """
    refuse_unbudgeted("regularization_learner")  # before any data is read: it cannot charge an open budget
    Xp = _check_matrix(X_private, "X_private")
    Z = _check_matrix(X_public, "X_public")
    n, d = Xp.shape
    if Z.shape[1] != d:
        raise ValueError(f"X_public has {Z.shape[1]} features but X_private has {d}")
    y = as_array(y_private, "y_private", np.float64)  # Fraction(10**400, 3): ValueError, not OverflowError
    if y.shape != (n,) or not np.isfinite(y).all():
        raise ValueError(f"y_private must be a finite 1-D array of length {n}")
    plan = _plan(n, Z, epsilon=epsilon, delta=delta, loss=loss, eta=eta, ridge=ridge, clip_norm=clip_norm,
                 fit_intercept=fit_intercept, huber_delta=huber_delta, mechanism=mechanism, neighbours=neighbours,
                 n_scale=n_scale, slack=slack, release_size=release_size)
    if _loss_table.TABLE[loss].labels == "pm1" and not ((y == -1.0) | (y == 1.0)).all():
        raise ValueError(f"{loss} loss needs labels in {{-1, +1}}")
    geo, N, lam, R, release_size = plan.geo, plan.N, plan.lipschitz, plan.release_points, plan.release_size
    Xa = _augment(Xp, fit_intercept)
    w_bar, stab, iters = _stage1(
        Xa, y, geo, N, loss, huber_delta, lam, neighbours, slack, max_iter, None if release_size == plan.m else R
    )
    rel = perturb(
        R @ w_bar, stability=stab["rho"], epsilon=plan.epsilon, delta=plan.delta, mechanism=plan.mechanism,
        l1_sensitivity=stab["l1"] if plan.mechanism == "laplace" else None, rng=rng,
    )
    del w_bar
    coef = project_linear(R, rel.noisy_values)
    return RegularizationResult(
        coef, rel.noisy_values, rel.noise_scale, stab["rho"], rel.sensitivity, rel.mechanism, geo.eta,
        geo.ridge, geo.clip_norm, 2, iters, fit_intercept, neighbours,
    )


@dataclass(frozen=True)
class _Plan:
    """What :func:`regularization_learner` decides from public quantities before it reads the
    private rows (n is public under replace-one; under add/remove it enters only the
    certifiability check, as the number of terms of the gradient)."""

    epsilon: float
    delta: float
    mechanism: str
    geo: PublicGeometry
    N: float
    lipschitz: float
    m: int
    release_size: int
    release_points: np.ndarray
    stability: dict


def _plan(n: int, X_public, *, epsilon, delta=0.0, loss="logistic", eta=None, ridge=None, clip_norm=None,
          fit_intercept=True, huber_delta=1.0, mechanism=None, neighbours="replace_one", n_scale=None, slack=0.01,
          release_size=None) -> _Plan:
    """Every refusal of :func:`regularization_learner` that depends on public quantities only
    (parameters, public rows, the private row count n), in one place, run before the private
    rows are read and before any draw; the estimators call it before the budget is charged."""
    Z = _check_matrix(X_public, "X_public")
    if loss not in LIPSCHITZ_LOSSES:
        raise ValueError(
            f"loss must be one of {LIPSCHITZ_LOSSES} (the stability bound needs a Lipschitz loss); got {loss!r}"
        )
    epsilon = check_epsilon(epsilon, allow_array=False)
    delta = check_delta(delta)
    mech = _mechanism(mechanism, delta)
    Za = _augment(Z, fit_intercept)
    m, p = Za.shape
    if m < p:
        raise ValueError(
            f"the regularization learner needs at least {p} public rows (one per coefficient"
            f"{', intercept included' if fit_intercept else ''}) so that the public points identify a linear "
            f"predictor; got m={m}"
        )
    if neighbours == "replace_one":
        N = float(n) if n_scale is None else check_positive(n_scale, "n_scale", allow_array=False)
    elif neighbours == "add_remove":
        if n_scale is None:
            raise ValueError(
                "neighbours='add_remove' needs a data-independent n_scale (the regulariser's scale in records): "
                "under add/remove the private count n is not public"
            )
        N = check_positive(n_scale, "n_scale", allow_array=False)
    else:
        raise ValueError(f"neighbours must be 'replace_one' or 'add_remove', got {neighbours!r}")
    _, _, loss_constants = _solver()
    lam = float(loss_constants(loss, huber_delta)[0])
    if not math.isfinite(lam):
        raise ValueError(f"loss {loss!r} is not Lipschitz; the stability bound does not apply")
    if release_size is None:
        release_size = m if mech == "gaussian" else min(m, 2 * p)
    if eta is None:
        eta = default_eta(int(N), p, epsilon, delta if mech == "gaussian" else 0.0, lam, int(release_size))
    release_size = int(release_size)
    if not p <= release_size <= m:
        raise ValueError(f"release_size must be in [{p}, {m}] (p coefficients, m public rows), got {release_size}")
    R = Za[:release_size]
    geo = public_geometry(Za, eta, ridge, clip_norm)
    stab, _ = _stage1_bounds(geo, n, N, lam, neighbours, slack, None if release_size == m else R)
    return _Plan(epsilon, delta, mech, geo, N, lam, m, release_size, R, stab)


def regularization_learner_generic(
    X_private,
    y_private,
    X_public,
    *,
    oracle: Callable,
    project: Callable,
    epsilon: float,
    delta: float = 0.0,
    eta: float,
    loss_range: float = 1.0,
    mechanism: Optional[str] = None,
    rng: RandomLike = None,
):
    """Algorithm 3 + Perturb with any ERM oracle (paper Lemma 2 calibration; replace-one only).

    ``oracle(X_private, y_private, X_public, eta) -> f_bar(Z)`` (the m predictions at the public
    points) must return the **exact** minimiser over a **convex** class F of the averaged
    objective ``(1/n) sum_i l(f(x_i), y_i) + eta ||f||_m^2`` for a loss l convex in f whose values,
    over the predictions F can make, lie in an interval of width ``loss_range``.
    ``project(Z, t) -> model`` is oracle call 2 (least squares on the public points); it must
    use only its arguments.  Under these assumptions (which dpfast cannot check),
    ``||f_bar(D) - f_bar(D')||_m <= rho = sqrt(loss_range / (eta n))`` for replace-one neighbours
    (Lemma 2 of the paper with the sharper strong-convexity modulus 2 eta of eta ||.||_m^2; :doc:`/theory/public_data` (our derivation): eta ||f - f*||^2 <= Phi_D(f) - Phi_D(f*) on both sides, and
    |L_D - L_D'| differences <= 2 loss_range / n).  Returns ``(model, PerturbResult, rho)``.
    """
    refuse_unbudgeted("regularization_learner_generic")  # before any data is read: it cannot charge an open budget
    Xp = np.asarray(X_private)
    n = len(Xp)
    if n == 0:  # rho = sqrt(w / (eta n)) needs a record (an empty X_private: ZeroDivisionError)
        raise ValueError("X_private must have at least one row")
    Z = _check_matrix(X_public, "X_public")
    eta = check_positive(eta, "eta", allow_array=False)
    w = check_positive(loss_range, "loss_range", allow_array=False)
    rho = math.sqrt(w / (eta * n))
    v = np.asarray(oracle(X_private, y_private, Z, eta), dtype=np.float64).ravel()
    if v.shape != (Z.shape[0],):
        raise ValueError(f"the oracle must return one prediction per public point ({Z.shape[0]}), got shape {v.shape}")
    rel = perturb(v, stability=rho, epsilon=epsilon, delta=delta, mechanism=mechanism, rng=rng)
    return project(Z, rel.noisy_values), rel, rho
