"""Private ERM mechanisms for GLMs: output perturbation, objective perturbation and
approximate minima perturbation with gradient clipping (Algorithm 1).

See :doc:`/theory/erm` ("The mechanism", "Algorithm 1") and :doc:`/theory/erm`
("ERM mechanisms"; output perturbation from :doc:`/theory/erm`).  Add/remove neighbours.
Privacy numbers come from :mod:`dpfast.accounting.erm_calibration`, which calls the formulas in
:mod:`dpfast.accounting.objective_perturbation`; the optimisation is
:func:`dpfast._solver.minimize_glm`.

Rule kept here: the released point always has a certified ||grad F||_2 <= tol (the exact
gradient norm of a full pass), on every data set.  The chosen solver runs with ``max_iter``;
when it has not certified tol, Nesterov's accelerated gradient method continues from its point
for an iteration count proved sufficient for any data (:mod:`dpfast._certify`).
A refusal would be a data-dependent event observable by the user, which the privacy proofs do
not cover (an abort channel); the optimiser itself costs no privacy (Algorithm 1, step 4).
:class:`PrivacyConvergenceError` remains only for a floating-point failure (impossible in
exact arithmetic; a tol too small for float64 is refused before the data are read).  Every method ends with
Gaussian output noise: ``"objective"`` is run as Algorithm 1 with a tiny tau (1e-8) and a tiny
sigma_out, because the objective-perturbation theorems cover only the exact minimiser
(:func:`~dpfast.accounting.erm_calibration.calibrate_objective`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpfast._certify import (
    PrivacyConvergenceError,
    certified_descent,
    check_certifiable,
)
from dpfast._solver import (
    MappedRows,
    check_max_iter,
    check_vector,
    glm_gradient_oracle,
    loss_constants,
    minimize_glm,
)
from dpfast._validation import as_array, check_positive, check_real
from dpfast.accounting.erm_calibration import (
    PrivacyCalibration,
    calibrate_amp,
    calibrate_objective,
    calibrate_output,
)
from dpfast.budget import refuse_unbudgeted
from dpfast.linear_model._losses import glm_constants
from dpfast.random import check_random_state, standard_normal

__all__ = [
    "PrivacyConvergenceError",
    "PrivateGLMResult",
    "METHODS",
    "private_glm",
    "output_perturbation",
    "objective_perturbation",
    "approximate_minima_perturbation",
]

METHODS = ("amp", "objective", "output")
#: default gradient-norm threshold per method (amp: the paper's tau = 0.01)
DEFAULT_TOL = {"amp": 0.01, "output": 0.01, "objective": 1e-8}


@dataclass(frozen=True)
class PrivateGLMResult:
    """A private coefficient vector and how it was obtained.

    ``coef`` (d,): the released parameters.  ``calibration``: the
    :class:`~dpfast.accounting.erm_calibration.PrivacyCalibration` (epsilon, delta, sigma,
    lambda, sigma_out, tau, L, beta, accountant).  ``grad_norm``: the certified gradient norm
    of the (perturbed) objective at the solver's point, before output noise.  ``n_iter``:
    solver iterations (L-BFGS) or epochs (SAG), summed over a fallback.  ``solver``: the one
    that certified the point.
    """

    coef: np.ndarray
    calibration: PrivacyCalibration
    grad_norm: float
    n_iter: int
    solver: str


#: L-BFGS fits of at least this many rows start from the minimiser of the same objective on a
#: row sample (:func:`warm_start_rows`); smaller fits start from 0.  (2^20 until issue 23: at
#: 1.5e5-6e5 unit rows, d = 100, the warm start cut the iterations from 12-15 to 8-9, and the
#: Dask benchmark's 10^6-row fit from 17 passes to 10; smaller fits are unchanged bit for bit)
WARM_START_MIN_ROWS = 1 << 17
#: the sample is the first ceil(n / WARM_START_FRACTION) rows
WARM_START_FRACTION = 16
#: the sample fit's iteration cap (it only has to give a starting point)
WARM_START_MAX_ITER = 100


def warm_start_rows(n: int, solver: str) -> int:
    """Rows of the warm-start sample of an L-BFGS fit of n rows (0: no warm start).

    Why a warm start costs no privacy (the argument behind every method here): only the
    certified point is released, and each mechanism's analysis holds for *any* point theta_hat
    with ||grad F(theta_hat)||_2 <= tau, F the (perturbed) objective on all the rows.  F is
    lambda-strongly convex, so theta_hat lies within tau/lambda of the exact minimiser, and the
    calibration covers theta_hat - theta* as an arbitrary function of the data bounded by
    tau/lambda: approximate minima perturbation (Iyengar et al. 2019, Thm. 1 / Algorithm 1
    step 4: the approximate minimiser may come from any optimiser; ``"objective"`` is run as
    AMP with a tiny tau, since the objective-perturbation theorems need the exact minimiser,
    which no solver returns) through the Gaussian output step of sensitivity 2 tau/lambda, and
    output perturbation through its sensitivity (L + 2 tau)/lambda
    (:mod:`~dpfast.accounting.erm_calibration`).  How theta_hat was found -- from 0, or from the
    minimiser of the same objective on a sample of the same private rows -- is part of that
    arbitrary function (the whole solver path is a deterministic function of the data and of
    the noise b), so calibration, tau and noise are unchanged.  Nothing of the sample fit is
    released or kept.  The choice depends on n and the solver only (public).  SAG/SAGA
    keep their start at 0.
    """
    if solver != "lbfgs" or n < WARM_START_MIN_ROWS:
        return 0
    return -(-int(n) // WARM_START_FRACTION)


def sample_start(Xs, ys, ws, n: int, loss, *, alpha, linear, clip, huber_delta, tol, n_threads=None) -> np.ndarray:
    """The warm start: L-BFGS on the objective restricted to the m sample rows, scaled to the
    full problem (alpha and the linear term times m/n: the same minimiser as the sample's loss
    weighted n/m), to the same relative accuracy (tol m/n).  Any point it returns is only a
    starting point (a non-finite one gives 0)."""
    m = Xs.shape[0]
    r = m / n
    res = minimize_glm(Xs, ys, loss, alpha=alpha * r, linear=None if linear is None else linear * r, clip_norm=clip,
                       sample_weight=ws, huber_delta=huber_delta, solver="lbfgs", tol=tol * r,
                       max_iter=WARM_START_MAX_ITER, n_threads=n_threads)
    coef = res.coef
    return coef if np.isfinite(coef).all() else np.zeros_like(coef)


def _row_sample(X, m: int):
    """The first m rows of dense, CSR or :class:`MappedRows` X (views where possible)."""
    if isinstance(X, MappedRows):
        return MappedRows(X.X[:m], None if X.scale is None else X.scale[:m], X.intercept)
    return X[:m]


#: t of the bound ||b||_2 <= sigma (sqrt(d) + t) on the objective's noise b ~ N(0, sigma^2 I_d)
#: that :func:`check_calibration_certifiable` uses before b is drawn.  ||b|| is a sigma-Lipschitz
#: function of a standard normal vector with E||b|| <= sigma sqrt(d), so by Gaussian
#: concentration (Boucheron, Lugosi & Massart, "Concentration Inequalities", 2013, Theorem 5.6)
#: P(||b|| > sigma (sqrt(d) + t)) <= exp(-t^2 / 2) = 1.9e-22 at t = 10.
NOISE_NORM_MARGIN = 10.0


def check_calibration_certifiable(cal: PrivacyCalibration, n: int, d: int) -> None:
    """``ValueError`` when float64 cannot certify ``cal.tau`` on n rows in d dimensions, decided
    from public quantities only -- before the budget is charged and before the noise is drawn.

    The gradient of the (perturbed) objective sums n per-example gradients of norm <= L
    (``cal.lipschitz``), the noise b (norm <= sigma (sqrt(d) + :data:`NOISE_NORM_MARGIN`) but
    with probability 1.9e-22; sigma = ``cal.noise_std``, 0 for output perturbation) and the ridge
    term, at most the rest at the minimiser: :func:`~dpfast._certify.check_certifiable`
    with 2 (n L + that bound).  The check the solvers repeat with the drawn ||b|| then passes but
    with that probability.
    """
    b_bound = float(cal.noise_std) * (math.sqrt(d) + NOISE_NORM_MARGIN) if cal.noise_std else 0.0
    terms = f"the rows' clipped gradients, each of norm <= L={cal.lipschitz:.3g}"
    if b_bound:
        terms += f", and the objective's noise of std noise_std={cal.noise_std:.3g} in {d} dimensions"
    check_certifiable(cal.tau, 2.0 * (n * float(cal.lipschitz) + b_bound), terms)


def _minimize_certified(X, y, loss, *, alpha, linear, clip, sample_weight, huber_delta, solver, tol, max_iter, gen,
                        lipschitz):
    """A point with ||grad F||_2 <= tol, on every data set (no data-dependent refusal).

    L-BFGS fits of n >= ``WARM_START_MIN_ROWS`` rows start from the minimiser of the same
    objective on the first ceil(n/16) rows (:func:`warm_start_rows`: why this costs no
    privacy); the others from 0.  The chosen solver runs first with ``max_iter``; if it has not
    certified tol, Nesterov's
    accelerated gradient method continues from its point for as many iterations as provably
    suffice (:func:`dpfast._certify.certified_descent`: F is alpha-strongly convex
    and (alpha + beta sum_i w_i ||x_i||^2)-smooth, beta the loss's curvature bound).
    """
    n = X.shape[0]
    b_norm = 0.0 if linear is None else float(np.linalg.norm(linear))
    # public quantities only (n, L, the data-independent noise b): refuse a tol float64 cannot certify
    check_certifiable(tol, 2.0 * (n * lipschitz + b_norm))
    coef0 = None
    m = warm_start_rows(n, solver)
    if m:
        coef0 = sample_start(_row_sample(X, m), np.asarray(y)[:m],
                             None if sample_weight is None else np.asarray(sample_weight)[:m], n, loss, alpha=alpha,
                             linear=linear, clip=clip, huber_delta=huber_delta, tol=tol)
    res = minimize_glm(X, y, loss, alpha=alpha, linear=linear, clip_norm=clip, sample_weight=sample_weight,
                       huber_delta=huber_delta, solver=solver, tol=tol, max_iter=max_iter, coef0=coef0, rng=gen)
    if res.converged and res.grad_norm <= tol:
        return res.coef, res.grad_norm, res.n_iter, res.solver
    evaluate = glm_gradient_oracle(X, y, loss, alpha=alpha, linear=linear, clip_norm=clip, sample_weight=sample_weight,
                                   huber_delta=huber_delta)
    curvature = loss_constants(loss, huber_delta)[1]
    sq = row_norms(X) ** 2
    weighted = float(sq.sum() if sample_weight is None else np.dot(sample_weight, sq))
    coef, gnorm, passes = certified_descent(lambda th: evaluate(th)[1], res.coef, tol=tol, strong_convexity=alpha,
                                            smoothness=alpha + curvature * weighted)
    return coef, gnorm, res.n_iter + passes, "nesterov"


def _fit_calibrated(X, y, loss, cal: PrivacyCalibration, *, solver_clip, sample_weight, huber_delta, solver,
                    max_iter, gen) -> PrivateGLMResult:
    """Run the mechanism described by ``cal`` on prepared data (rows within the bound, labels
    in the solver's convention, bias column appended)."""
    d = X.shape[1]
    linear = None
    if cal.method in ("amp", "objective"):
        linear = cal.noise_std * standard_normal(gen, d)  # b ~ N(0, sigma^2 I_d)
    # a chunked design (linear_model/_dask.py) brings its own minimiser: the same L-BFGS and
    # certification rule, its gradient passes run on a Dask cluster
    minimize = getattr(X, "minimize_certified", None)
    minimize = (lambda X_, *a, **k: X_.minimize_certified(*a, **k)) if minimize else _minimize_certified
    coef, gnorm, n_iter, used = minimize(
        X, y, loss, alpha=cal.regularization, linear=linear, clip=solver_clip, sample_weight=sample_weight,
        huber_delta=huber_delta, solver=solver, tol=cal.tau, max_iter=max_iter, gen=gen, lipschitz=cal.lipschitz)
    coef = np.array(coef, dtype=np.float64, copy=True)
    # every method ends with Gaussian output noise ("objective": the tiny noise certifying tau)
    coef += cal.sigma_out * standard_normal(gen, d)
    return PrivateGLMResult(coef, cal, float(gnorm), int(n_iter), used)


def check_rows(X, norm_bound: float) -> np.ndarray:
    """Row l2 norms of dense or CSR ``X``; ``ValueError`` when one exceeds ``norm_bound``."""
    norms = row_norms(X)
    worst = float(norms.max()) if norms.size else 0.0
    if worst > norm_bound:  # names no row and no norm: both are private (issue 21, item 10)
        raise ValueError(
            f"X has rows with l2 norm above norm_bound={norm_bound:.6g}; the privacy guarantee needs every row "
            "within the declared bound. Normalise or clip the rows (row_norm='normalize' or 'clip' in the "
            "estimators), or declare a larger norm_bound"
        )
    return norms


def row_norms(X) -> np.ndarray:
    """Row l2 norms (float64) of dense, CSR or :class:`MappedRows` X."""
    import scipy.sparse as sp

    if isinstance(X, MappedRows):
        return np.sqrt(X.sq_norms())
    if sp.issparse(X):
        Xc = X.tocsr()
        if not Xc.has_canonical_format:  # duplicates are summed first (squaring them apart would shrink the norm)
            Xc = Xc.copy()
            Xc.sum_duplicates()
        # squares of the stored values and one CSR row sum: one nnz-vector, not an elementwise-product matrix
        sq = np.asarray(sp.csr_matrix((np.square(Xc.data, dtype=np.float64), Xc.indices, Xc.indptr),
                                      shape=Xc.shape).sum(axis=1, dtype=np.float64)).ravel()
        return np.sqrt(sq, out=sq)
    X = np.asarray(X)
    sq = np.einsum("ij,ij->i", X, X, dtype=np.float64)
    return np.sqrt(sq, out=sq)  # in place: one n-vector (a fit's memory beside X is a few of them)


def private_glm(
    X,
    y,
    loss: str = "logistic",
    *,
    epsilon: float,
    delta: float,
    method: str = "amp",
    norm_bound: float = 1.0,
    clip_norm: float | None = None,
    tol: float | None = None,
    regularization: float | None = None,
    noise_std: float | None = None,
    noise_factor: float = 1.3,
    sigma_out: float | None = None,
    accountant: str = "best",
    calibration: str = "accountant",
    huber_delta: float = 1.0,
    sample_weight=None,
    solver: str = "lbfgs",
    max_iter: int = 1000,
    count: int = 1,
    random_state=None,
) -> PrivateGLMResult:
    """Fit a GLM privately on rows with ||x_i|| <= ``norm_bound`` (no intercept is added).

    ``method``:

    * ``"amp"`` -- Algorithm 1 of Redberg, Koskela & Wang (2024) (approximate minima perturbation with gradient
      clipping): minimise sum l_C + (lambda/2)||theta||^2 + b.theta, b ~ N(0, sigma^2 I), to
      ||grad|| <= tol (tau, default 0.01), then add N(0, sigma_out^2 I) (``sigma_out`` None:
      0.15).  (epsilon, delta)-DP by Theorem 4.1 (RDP) or PLD composition, the tighter reported.
    * ``"objective"`` -- objective perturbation, certified: its theorems (3.1/3.2) cover only
      the exact minimiser, so dpfast runs it as Algorithm 1 with a tiny tau = ``tol`` (default
      1e-8) and a tiny output noise sigma_out = z * 2 tau / lambda (z from the data-independent
      rule :func:`~dpfast.accounting.erm_calibration.objective_output_multiplier`: the output
      step's RDP term is <= 0.1 % of epsilon), accounted by Theorem 4.1 / PLD composition like
      ``"amp"`` (see :doc:`/theory/erm`, "Algorithm 1"); the reported (epsilon,
      delta) is the total.  The rule is meant for a tiny ``tol``: sigma_out grows with it (use
      ``"amp"`` for a large one).  ``calibration="kifer"``: Kifer et al.'s condition (Theorem 2.8) for
      comparison, certified the same way by basic composition (0.1 % of the budget for the
      output step).
    * ``"output"`` -- Gaussian output perturbation of the regularised minimiser, sensitivity
      (L + 2 tol)/lambda (covers the solver error), noise calibrated by the accountant.

    ``accountant`` ("best", "pld", "rdp"): the accountant whose epsilon for the release's event
    (``result.calibration.event``) is calibrated and reported (``"best"``: the smaller of the two).

    ``clip_norm`` = C (default: the loss's own gradient bound, sqrt(2)-style; required for the
    squared loss) bounds every per-example gradient; L = min(C, sup|f'| * norm_bound),
    beta = sup f'' * norm_bound^2 (:func:`dpfast.linear_model._losses.glm_constants`).
    ``sample_weight`` must lie in [0, 1] (weights above 1 would raise the sensitivity).
    ``count`` > 1 calibrates for ``count`` such fits on the same data (one-vs-rest).
    Labels: {-1, +1} for logistic / smoothed hinge.  Raises ``ValueError`` for rows over the
    bound, NaN/inf, a too small ``regularization`` (stating the smallest feasible one) or a
    ``tol`` below what float64 can certify (decided before the rows are read).  The fit never
    refuses for lack of solver iterations (module docstring); :class:`PrivacyConvergenceError`
    is left only for a rounding failure that exact arithmetic excludes.
    """
    refuse_unbudgeted("private_glm")  # before any data is read: it cannot charge an open budget
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    gen = check_random_state(random_state)
    # (check_real, not float(): a Fraction beyond a double)
    norm_bound = check_positive(check_real(norm_bound, "norm_bound"), "norm_bound", allow_array=False)
    X = _as_matrix(X)
    check_finite_X(X)
    dtype = X.dtype if X.dtype.kind == "f" else np.float64
    norm_bound = norm_bound * (1.0 + 8.0 * float(np.finfo(dtype).eps))  # rounding slack of the norms
    check_rows(X, norm_bound)
    sample_weight = check_sample_weight(sample_weight, X.shape[0])
    consts = glm_constants(loss, norm_bound, clip_norm, huber_delta)
    cal = make_calibration(method, epsilon, delta, consts, tol=tol, regularization=regularization,
                           noise_std=noise_std, noise_factor=noise_factor, sigma_out=sigma_out,
                           accountant=accountant, count=count, calibration=calibration)
    # what refuses for public reasons, before the noise b is drawn
    max_iter = check_max_iter(max_iter)
    check_calibration_certifiable(cal, X.shape[0], X.shape[1])
    # (as_array: y = Fraction(10**400, 3) is a ValueError, not OverflowError; before the charge)
    return _fit_calibrated(X, as_array(y, "y", np.float64), loss, cal, solver_clip=consts.solver_clip,
                           sample_weight=sample_weight, huber_delta=huber_delta, solver=solver,
                           max_iter=max_iter, gen=gen)


def make_calibration(method, epsilon, delta, consts, *, tol, regularization, noise_std, noise_factor, sigma_out,
                     accountant, count, calibration="accountant") -> PrivacyCalibration:
    """The calibration of ``method`` for the loss constants ``consts`` (see private_glm): its
    ``event`` is the release's, its ``epsilon`` the accountant's value for that event."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if calibration not in ("accountant", "kifer"):
        raise ValueError(f"calibration must be 'accountant' or 'kifer', got {calibration!r}")
    if calibration == "kifer" and method != "objective":
        raise ValueError("calibration='kifer' applies to method='objective' only")
    tau = DEFAULT_TOL[method] if tol is None else check_positive(check_real(tol, "tol"), "tol", allow_array=False)
    if method == "amp":
        sigma_out = 0.15 if sigma_out is None else sigma_out
        return calibrate_amp(epsilon, delta, clip_norm=consts.lipschitz, smoothness=consts.smoothness, tau=tau,
                             sigma_out=sigma_out, noise_factor=noise_factor, noise_std=noise_std,
                             regularization=regularization, count=count, accountant=accountant)
    if method == "objective":
        # sigma_out None: the negligible-cost rule of calibrate_objective
        return calibrate_objective(epsilon, delta, lipschitz=consts.lipschitz, smoothness=consts.smoothness,
                                   tau=tau, sigma_out=sigma_out, noise_factor=noise_factor, noise_std=noise_std,
                                   regularization=regularization, count=count, accountant=accountant,
                                   rule=calibration)
    if noise_std is not None:
        raise ValueError("noise_std applies to methods 'amp' and 'objective'; output perturbation sets its noise from "
                         "(epsilon, delta, regularization)")
    return calibrate_output(epsilon, delta, lipschitz=consts.lipschitz, tau=tau, regularization=regularization,
                            sigma_out=0.15 if sigma_out is None else sigma_out, count=count, accountant=accountant)


def _as_matrix(X):
    """A 2-d dense array in C order (a copy for other layouts: the solvers' C and Fortran kernels
    round differently, and a release must not depend on the memory layout) or a sparse matrix."""
    import scipy.sparse as sp

    if sp.issparse(X):
        return X
    if isinstance(X, (str, bytes)) or np.isscalar(X) or X is None:
        raise TypeError(f"X must be a 2-d array of real numbers or a scipy.sparse matrix, got {type(X).__name__}")
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-d array (n_samples, n_features), got shape {X.shape}")
    return np.ascontiguousarray(X)


def check_finite_X(X) -> None:
    import scipy.sparse as sp

    data = X.data if sp.issparse(X) else np.asarray(X)
    if data.dtype.kind not in "biuf":
        raise TypeError(f"X must hold real numbers, got dtype {data.dtype}")
    if not np.isfinite(data).all():
        raise ValueError("X contains NaN or infinite entries; private ERM needs finite, bounded rows")


def check_sample_weight(sample_weight, n: int):
    w = check_vector(sample_weight, n, "sample_weight")
    if w is not None and ((w < 0).any() or (w > 1).any()):
        raise ValueError("sample_weight must lie in [0, 1]: a weight above 1 multiplies the example's "
                         "sensitivity, which the privacy calibration does not allow")
    return w


def approximate_minima_perturbation(X, y, loss: str = "logistic", **kwargs) -> PrivateGLMResult:
    """Algorithm 1 of Redberg, Koskela & Wang (2024); :func:`private_glm` with ``method="amp"``."""
    return private_glm(X, y, loss, method="amp", **kwargs)


def objective_perturbation(X, y, loss: str = "logistic", **kwargs) -> PrivateGLMResult:
    """Gaussian objective perturbation; :func:`private_glm` with ``method="objective"``."""
    return private_glm(X, y, loss, method="objective", **kwargs)


def output_perturbation(X, y, loss: str = "logistic", **kwargs) -> PrivateGLMResult:
    """Gaussian output perturbation; :func:`private_glm` with ``method="output"``."""
    return private_glm(X, y, loss, method="output", **kwargs)
