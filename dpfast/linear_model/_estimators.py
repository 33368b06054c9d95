"""scikit-learn estimators for private linear models: LogisticRegression and LinearRegression.

See :doc:`/theory/erm` (Algorithm 1, calibration of Section 5) and issue 4
("Estimators").  They derive from :class:`dpfast._base.PrivateEstimator` (scikit-learn's
``BaseEstimator``), so ``clone``, pipelines, ``cross_val_score`` and ``GridSearchCV`` work.
A Dask collection passed to ``fit`` / ``predict`` / ... is handed to
:mod:`dpfast.linear_model._dask` (:class:`dpfast._base.DaskDispatchMixin`).
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils.validation import _num_samples

from dpfast import _base, _loss_table
from dpfast._base import (
    RANDOM_STATE,
    DaskDispatchMixin,
    DPClassifierMixin,
    DPRegressorMixin,
    Interval,
    PrivateEstimator,
    StrOptions,
    check_fitted,
    validate_X,
    validate_y,
)
from dpfast._dask_utils import PartitionError, fit_rows, is_dask_collection, sum_by_partitions, vector_parts
from dpfast._solver import MAX_ITER, MappedRows, check_max_iter
from dpfast._validation import check_label_set, check_positive, check_real
from dpfast.linear_model import _dask, _multinomial as mn, _ssp
from dpfast.linear_model._losses import glm_constants, margin_constants, multinomial_constants
from dpfast.linear_model._mechanisms import (
    METHODS,
    _fit_calibrated,
    check_calibration_certifiable,
    check_sample_weight,
    make_calibration,
    row_norms,
)
from dpfast.random import check_random_state

__all__ = ["LogisticRegression", "LinearRegression"]

_ROW_NORM = ("check", "normalize", "clip")
_NORM_CHECK_MSG = (
    "X has rows with l2 norm above norm_bound={R:.6g} (row_norm='check'); the privacy guarantee needs every row "
    "within the declared bound. Use row_norm='clip' (the default: shrink longer rows to the bound, a per-row map "
    "that costs no privacy) or row_norm='normalize' (scale every row to the bound), or declare a larger "
    "norm_bound")

_COMMON_DOC = """
    epsilon, delta : float
        Target privacy, (epsilon, delta)-DP under add/remove neighbours for the whole fit
        (all one-vs-rest models together).  ``epsilon_`` / ``delta_`` hold what was reached.
    method : {"amp", "objective", "output"}
        ``"amp"`` (default): Algorithm 1 of Redberg, Koskela & Wang (2024) -- gradient-clipped objective
        perturbation solved to ||grad|| <= tol, then Gaussian output noise ``sigma_out``;
        (epsilon, delta) from Theorem 4.1's RDP curve or from PLD composition in
        ``dpfast.accounting.PLDAccountant``, the tighter (``accountant_`` says which).
        ``"objective"``: objective perturbation, certified.  Its theorems (3.1/3.2) cover only
        the exact minimiser, so it is run as Algorithm 1 with a tiny tol (default 1e-8) and a
        tiny output noise sigma_out = z * 2 tol / lambda, z a data-independent noise multiplier
        for which the output step's RDP term is <= 0.1 % of epsilon
        (``dpfast.linear_model.calibrate_objective``, see docs/theory/erm.rst,
        "Algorithm 1"); ``epsilon_`` is the total of the composition, accounted as for "amp".
        ``calibration="kifer"``: Kifer et al.'s condition (for comparison), certified by basic
        composition with 0.1 % of the budget for the output step.
        ``"output"``: Gaussian output perturbation, sensitivity (L + 2 tol)/lambda, noise
        calibrated by the accountant.
    solver : {"lbfgs", "sag", "saga"}
        Native solver (any optimiser costs no privacy).  If it has not certified
        ||grad F||_2 <= tol within ``max_iter``, Nesterov's accelerated gradient method
        continues from its point for an iteration count proved sufficient for every data set
        (``solver_`` then reads "nesterov"), so a fit never refuses for lack of iterations: a
        refusal would depend on the data and is not covered by the privacy proof.  A ``tol``
        float64 cannot certify for the number of rows, the gradient bound (``clip_norm``) and the
        objective's ``noise_std`` raises ``ValueError`` before the rows are read, the budget is
        charged or the noise is drawn; ``PrivacyConvergenceError`` remains only for a rounding failure that exact
        arithmetic excludes.
    tol : float or None
        The gradient-norm threshold tau (None: 0.01 for "amp" and "output", 1e-8 for "objective").
    clip_norm : float or None
        Gradient clipping threshold C of Algorithm 1 (None: the loss's own bound on rows within
        the norm bound, sqrt(2) for logistic regression on unit rows plus a bias feature).
    alpha : float or None
        The ridge lambda of sum_i l + (lambda/2)||theta||^2 (sum, not mean, over examples).
        None: the smallest lambda for which the mechanism reaches (epsilon, delta) ("amp",
        "objective"; bisection), or, for "output", the lambda that makes the output noise equal
        to ``sigma_out`` (0.15 when None).  A given lambda that is too small raises
        ``ValueError`` stating the smallest feasible one.
    noise_std : float or None
        sigma of the objective's noise b ~ N(0, sigma^2 I) (None: ``noise_factor`` x the
        Gaussian mechanism's sigma for sensitivity C at (epsilon, delta)).
    noise_factor : float
        f of the paper's rule sigma <= f sigma_G (1.3).
    sigma_out : float or None
        Output noise of Algorithm 1 (None: 0.15 for "amp"; for "objective" the negligible-cost
        rule above; for "output" it only sets the default lambda, see ``alpha``).
    accountant : {"best", "pld", "rdp"}
        The accountant that calibrates the release and states its epsilon: ``epsilon_`` is
        ``make_accountant(accountant_).compose(event_).get_epsilon(delta_)`` ("best": the smaller
        of the PLD and RDP accountants' values, ``accountant_`` names it).
    calibration : {"accountant", "kifer"}
        How (sigma, lambda) are certified: by the accountant (default), or by Kifer et al.'s
        sufficient condition (method="objective" only, for comparison with the literature; its
        event is the ``ApproxDP`` it certifies, accounted by PLD).
    norm_bound : float
        Declared bound R on the rows' l2 norm before the bias feature.
    row_norm : {"clip", "normalize", "check"}
        ``"clip"`` (default): rows longer than R are scaled down to R (x min(1, R/||x||)), also
        in ``predict``.  ``"normalize"``: every non-zero row is scaled to norm R (x R/||x||, the
        paper's preprocessing), also in ``predict``.  Both are per-row maps fixed by the public R,
        so they cost no privacy and the sensitivity holds for any data.  ``"check"``: a row with
        norm > R raises ``ValueError`` before anything is charged or drawn.  Why clipping is the
        default: the check's outcome is a function of the private rows (whether one of them
        exceeds R), so the exception itself discloses a bit the guarantee does not cover, and it
        made every first fit on unscaled data fail; clipping never fails on data and releases
        only the DP model.  Rows far beyond R lose their scale under clipping: choose R (or
        scale the features, e.g. with :class:`dpfast.preprocessing.StandardScaler`) so that
        typical rows lie within it.  The check's message names neither the row nor its norm.
    fit_intercept : bool
        Append a constant feature ``intercept_scaling`` (its coefficient, times the scaling, is
        ``intercept_``); rows then have norm <= sqrt(R^2 + intercept_scaling^2).
    max_iter : int
        Iterations (L-BFGS) or epochs (SAG) of the first solver; it bounds speed, not the
        outcome (see ``solver``).
    random_state : None, int, numpy Generator or dpfast.random.SecureRandom
        The randomness of the mechanism (scikit-learn's name for ``rng``).
"""

_ATTR_DOC = """
    Attributes
    ----------
    coef_, intercept_ : the released (private) parameters.
    event_ : the release's :mod:`dpfast.accounting` event, charged to ``budget`` by ``fit``:
        per model ``Composed((ObjectivePerturbation, Gaussian))`` (Algorithm 1, Theorem 4.1;
        "objective" too), for K one-vs-rest models ``SelfComposed(<that>, K)``;
        ``ApproxDP(epsilon, delta)`` with ``calibration="kifer"``; "output": one ``Gaussian``.
    epsilon_, delta_ : the privacy reached (add/remove neighbours), epsilon_ <= epsilon:
        ``epsilon_ == make_accountant(accountant_).compose(event_).get_epsilon(delta_)``.
    accountant_ : "pld" or "rdp" -- the accountant that gave epsilon_.
    sigma_ : noise std of the objective perturbation (0 for "output").
    sigma_out_ : output noise std (tiny for "objective": it certifies the solver's error).
    lambda_ : the ridge coefficient used.
    n_iter_, grad_norm_ : solver iterations and certified gradient norm (<= tol), per model.
        These (and ``solver_``) are diagnostics computed from the private data *without* noise:
        they are not covered by the privacy guarantee (only ``coef_``/``intercept_`` and the
        calibration are); do not publish them with the model.
    calibration_ : the full :class:`~dpfast.linear_model.PrivacyCalibration` (its ``rule`` is the
        ``calibration`` parameter's value).
"""


def _slack(R: float, dtype) -> float:
    """The norm bound widened by the rounding of a row norm computed in ``dtype``.

    Rows scaled to norm R in float32 can come out at R (1 + 1e-7); the privacy constants are
    computed for this widened (data-independent) bound, and the check accepts rows within it.
    """
    eps = np.finfo(dtype).eps if np.dtype(dtype).kind == "f" else np.finfo(np.float64).eps
    return float(R) * (1.0 + 8.0 * float(eps))




_CONSTRAINTS = {
    "epsilon": [Interval(Real, 0, None, closed="neither")],
    "delta": [Interval(Real, 0, 1, closed="neither")],
    "method": [StrOptions(set(METHODS))],
    "solver": [StrOptions({"lbfgs", "sag", "saga"})],
    "tol": [Interval(Real, 0, None, closed="neither"), None],
    "clip_norm": [Interval(Real, 0, None, closed="neither"), None],
    "alpha": [Interval(Real, 0, None, closed="neither"), None],
    "noise_std": [Interval(Real, 0, None, closed="neither"), None],
    "noise_factor": [Interval(Real, 0, None, closed="neither")],
    "sigma_out": [Interval(Real, 0, None, closed="neither"), None],
    "accountant": [StrOptions({"best", "pld", "rdp"})],
    "calibration": [StrOptions({"accountant", "kifer"})],
    "norm_bound": [Interval(Real, 0, None, closed="neither")],
    "row_norm": [StrOptions(set(_ROW_NORM))],
    "fit_intercept": ["boolean"],
    "intercept_scaling": [Interval(Real, 0, None, closed="neither")],
    # 0: the certified fallback only; at most the native solvers' int64 counter (bools: check_max_iter)
    "max_iter": [Interval(Integral, 0, MAX_ITER, closed="both")],
    "random_state": RANDOM_STATE,
}


_WEIGHT_FAILURES = {
    "check_sample_weights_list": _base.SAMPLE_WEIGHT_RANGE,
    "check_sample_weights_not_overwritten": _base.SAMPLE_WEIGHT_RANGE,
    "check_sample_weight_equivalence_on_dense_data": _base.SAMPLE_WEIGHT_RANGE,
    "check_sample_weight_equivalence_on_sparse_data": _base.SAMPLE_WEIGHT_RANGE,
    "check_all_zero_sample_weights_error": _base.ZERO_WEIGHTS,
}


class _PrivateLinearModel(PrivateEstimator):
    _loss = "logistic"
    _dask_fit = staticmethod(_dask.fit)  # DaskDispatchMixin: fit on Dask collections
    _accept_sparse = True

    # ------------------------------------------------------------------ preprocessing
    def _validate_common(self):
        R = check_positive(check_real(self.norm_bound, "norm_bound"), "norm_bound", allow_array=False)
        if not self.fit_intercept:
            return R, 0.0
        return R, check_positive(check_real(self.intercept_scaling, "intercept_scaling"), "intercept_scaling",
                                 allow_array=False)

    def _transform_rows(self, X, R, *, fitting, norms=None):
        """Row map of ``row_norm`` (returns the scale factors, or None for the identity).

        ``norms``: X's row norms when the caller has them (the Dask validation pass takes them
        from the native kernel's squared norms; overwritten)."""
        norms = row_norms(X) if norms is None else norms
        if not np.isfinite(norms).all():  # a NaN/inf entry (or an overflowing row) shows in its norm
            raise ValueError("X contains NaN or infinite entries (or a row whose norm overflows); "
                             "private ERM needs finite, bounded rows")
        if self.row_norm == "check":
            if fitting and norms.size and float(norms.max()) > _slack(R, X.dtype):
                # names no row and no norm: both are private (issue 21, item 10)
                raise ValueError(_NORM_CHECK_MSG.format(R=R))
            return None
        # in place (one n-vector, not three): scale_i = R / ||x_i|| where the map changes the row
        change = norms > 0 if self.row_norm == "normalize" else norms > R
        scale = norms
        np.divide(R, norms, out=scale, where=change)
        scale[~change] = 1.0
        return scale

    def _design(self, X, R, s, *, fitting):
        """Rows after the row map, with the bias column appended: for dense X a
        :class:`~dpfast._solver.MappedRows` view (the kernels apply the map; no copy
        of C-ordered X, one C-ordered copy of any other layout), for CSR the same view with
        solver="lbfgs" and a mapped copy with "sag"/"saga"."""
        import scipy.sparse as sp

        if getattr(X, "_dpfast_chunked", False):  # Dask rows (linear_model/_dask.py): validated chunk by chunk
            return X.design(self, R, s)
        scale = self._transform_rows(X, R, fitting=fitting)
        if sp.issparse(X):
            if self.solver == "lbfgs" and X.dtype in (np.float32, np.float64):
                # row map + bias column inside the L-BFGS kernels: no scaled copy, no hstack of
                # the CSR arrays (SAG/SAGA read stored rows and take the mapped copy below)
                return MappedRows(X if X.format == "csr" else X.tocsr(), scale, s)
            if scale is not None:
                X = sp.csr_matrix(sp.diags(scale.astype(X.dtype)) @ X)
            if s > 0:
                X = sp.hstack([X, sp.csr_matrix(np.full((X.shape[0], 1), s, dtype=X.dtype))], format="csr")
            return X
        # every dense layout takes the same kernel path (a release must not depend on the
        # layout): C-ordered X as is, any other layout through one C-ordered copy
        return MappedRows(np.ascontiguousarray(X), scale, s)  # row map + bias column inside the kernel

    def _constants(self, R, s):
        total = math.sqrt(R * R + s * s)
        clip_norm = self.clip_norm
        if clip_norm is None:
            lip_m, _ = margin_constants(self._loss_name(), getattr(self, "huber_delta", 1.0))
            clip_norm = total * (lip_m if math.isfinite(lip_m) else 1.0)
        return glm_constants(self._loss_name(), total, clip_norm, getattr(self, "huber_delta", 1.0))

    def _loss_name(self):
        return self._loss

    def _fit_problems(self, X, targets, sample_weight, *, budget=None):
        """Fit one private model per target vector, calibrated for their composition.

        The release's event is charged to ``budget`` after the (data-independent) calibration
        and the checks of public quantities (max_iter, a tol float64 can certify), and before
        any noise is drawn."""
        R, s = self._validate_common()
        max_iter = check_max_iter(self.max_iter)  # a bool passes the Interval constraint
        if getattr(X, "_dpfast_chunked", False):  # Dask rows: validated chunk by chunk in _design
            self.n_features_in_ = X.shape[1]
        else:
            X = validate_X(self, X, reset=True, accept_sparse=True)
        n = X.shape[0]
        for t in targets:
            if t.shape != (n,):
                raise ValueError(f"y must have shape ({n},) to match X, got {t.shape}")
        w = check_sample_weight(None if sample_weight is None else np.asarray(sample_weight), n)
        Xd = self._design(X, R, s, fitting=True)
        # constants for the bound with the rounding slack of the data type (data-independent);
        # the bias column is stored in X's dtype too, so s gets the same slack (float32(s) may
        # exceed s: with intercept_scaling=10.1 and float32 rows the bound was otherwise broken)
        consts = self._constants(_slack(R, X.dtype), _slack(s, X.dtype) if s > 0 else 0.0)
        cal = make_calibration(self.method, self.epsilon, self.delta, consts, tol=self.tol,
                               regularization=self.alpha, noise_std=self.noise_std,
                               noise_factor=self.noise_factor, sigma_out=self.sigma_out,
                               accountant=self.accountant, count=len(targets), calibration=self.calibration)
        check_calibration_certifiable(cal, n, Xd.shape[1])  # public quantities: before the charge and the draw
        event = cal.event
        self._charge(event, budget)
        gen = check_random_state(self.random_state)
        results = [
            _fit_calibrated(Xd, t, self._loss_name(), cal, solver_clip=consts.solver_clip, sample_weight=w,
                            huber_delta=getattr(self, "huber_delta", 1.0), solver=self.solver,
                            max_iter=max_iter, gen=gen)
            for t in targets
        ]
        coefs = np.vstack([r.coef for r in results])
        d = X.shape[1]
        self.n_features_in_ = d
        if s > 0:
            self._coef, self._intercept = coefs[:, :d].copy(), coefs[:, d] * s
        else:
            self._coef, self._intercept = coefs, np.zeros(len(targets))
        self._record_fit(event, cal, consts, [r.n_iter for r in results], [r.grad_norm for r in results],
                         tuple(r.solver for r in results))
        return results

    def _record_fit(self, event, cal, consts, n_iter, grad_norm, solver) -> None:
        """The fitted attributes every release sets: calibration, privacy reached, constants, solver."""
        self.calibration_ = cal
        self._record_accounted(event, cal.delta, cal.accountant)
        self.sigma_ = cal.noise_std
        self.sigma_out_ = cal.sigma_out
        self.lambda_ = cal.regularization
        self.clip_norm_ = consts.lipschitz
        self.smoothness_ = consts.smoothness
        self.n_iter_ = np.array(n_iter)
        self.grad_norm_ = np.array(grad_norm)
        self.solver_ = tuple(solver)

    def _decision(self, X):
        check_fitted(self)
        R, s = self._validate_common()
        X = validate_X(self, X, reset=False, accept_sparse=True)
        scale = self._transform_rows(X, R, fitting=False)
        if scale is not None:
            import scipy.sparse as sp

            X = sp.csr_matrix(sp.diags(scale) @ X) if sp.issparse(X) else X * scale[:, None]
        return np.asarray(X @ self._coef.T) + self._intercept


class LogisticRegression(DaskDispatchMixin, DPClassifierMixin, _PrivateLinearModel):
    __doc__ = (
        """Differentially private logistic regression (binary, or one-vs-rest multiclass).

    Default: Algorithm 1 of Redberg, Koskela & Wang 2024 (see docs/theory/erm.rst) with
    the paper's calibration (sigma = 1.3 sigma_G, smallest feasible lambda, tau = 0.01,
    sigma_out = 0.15, C = the gradient bound).  Labels: {0, 1} (the positive class is 1), or the
    labels listed in ``classes`` (e.g. ``classes=[-1, 1]``).  The label set is public schema,
    never inferred from the private labels.  With more than two ``classes``, one binary model
    per class is fitted on all the data (one-vs-rest); a person's record enters every one of
    them, so the K fits are calibrated *together* to (epsilon, delta): the noise is set for the
    K-fold composition (sigma_G for sensitivity sqrt(K) C) and lambda so that K-fold composition
    meets epsilon.  ``classes`` must be given (public) for multiclass: reading the label set off
    the data would leak it.

    ``multi_class="multinomial"`` fits one softmax model W in R^{d x K} (one release, charged
    once) by Gaussian output perturbation (``method="output"``): Chaudhuri, Monteleoni & Sarwate
    (2011), Corollary 8 and its proof, hold for any convex L-Lipschitz loss of a vector parameter,
    here the softmax cross-entropy with L = sqrt(2) * (row-norm bound) in the Frobenius norm,
    so the certified minimiser has sensitivity (L + 2 tol)/lambda; the noise is the analytic
    Gaussian mechanism's (Balle & Wang 2018; Wu et al. 2017 for Gaussian output perturbation).
    ``method="amp"`` and ``"objective"`` are refused with ``ValueError``: the tight analysis of
    Redberg, Koskela & Wang (2024) (Theorems 3.1, 3.2, 4.1) needs a GLM (rank-one per-example
    Hessian), the softmax Hessian has rank K - 1, and their non-GLM Theorem E.1 covers only the
    exact minimiser of an unclipped loss (:mod:`dpfast.linear_model._multinomial`).  So is a
    ``clip_norm`` below sqrt(2) R (a clipped softmax gradient is not the gradient of a convex loss).

    Parameters
    ----------"""
        + _COMMON_DOC
        + """    classes : sequence or None
        The public label set (None: binary with labels in {0, 1}; give ``[-1, 1]`` for +-1 labels).
    multi_class : {"ovr", "multinomial"}
        ``"ovr"`` (default): one binary model per class (one model for two classes).
        ``"multinomial"``: one softmax model, ``coef_`` of shape (K, d) and ``intercept_`` (K,)
        also for K = 2; ``method="output"`` only (see above).
"""
        + _ATTR_DOC
        + """    classes_ : the label set, in the order of predict_proba's columns.
    multi_class_ : "ovr" or "multinomial", the model that was fitted.
"""
    )

    _loss = "logistic"
    _parameter_constraints = {**_CONSTRAINTS, "classes": ["array-like", None],
                              "multi_class": [StrOptions({"ovr", "multinomial"})]}
    _expected_failures = {
        **_WEIGHT_FAILURES,
        "check_classifiers_classes": _base.PUBLIC_LABELS,
        "check_classifiers_train": _base.PUBLIC_LABELS,
        "check_decision_proba_consistency": _base.PUBLIC_LABELS,
    }

    def __init__(
        self,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        *,
        method: str = "amp",
        solver: str = "lbfgs",
        tol: float | None = None,
        clip_norm: float | None = None,
        alpha: float | None = None,
        noise_std: float | None = None,
        noise_factor: float = 1.3,
        sigma_out: float | None = None,
        accountant: str = "best",
        calibration: str = "accountant",
        norm_bound: float = 1.0,
        row_norm: str = "clip",
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        classes=None,
        multi_class: str = "ovr",
        max_iter: int = 1000,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.method = method
        self.solver = solver
        self.tol = tol
        self.clip_norm = clip_norm
        self.alpha = alpha
        self.noise_std = noise_std
        self.noise_factor = noise_factor
        self.sigma_out = sigma_out
        self.accountant = accountant
        self.calibration = calibration
        self.norm_bound = norm_bound
        self.row_norm = row_norm
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.classes = classes
        self.multi_class = multi_class
        self.max_iter = max_iter
        self.random_state = random_state

    def _label_set(self, y):
        return check_label_set(y, self.classes)[0]  # public schema, never read off y

    def _fit_multinomial(self, X, labels, n_classes, sample_weight, *, budget=None):
        """One multinomial model (W in R^{d x K}), Gaussian output perturbation, one release.

        Everything that can refuse (method, solver, clip_norm, noise_std, tol, lambda) is decided
        from public quantities before the budget is charged and before any noise is drawn."""
        if self.method != "output":
            raise ValueError(
                f"multi_class='multinomial' supports method='output' only, got method={self.method!r}: the "
                "objective-perturbation and Algorithm 1 ('amp') bounds of Redberg, Koskela & Wang (2024) "
                "(Theorems 3.1, 3.2, 4.1) assume a GLM (rank-one per-example Hessian); the softmax loss's "
                "Hessian has rank K - 1, and their non-GLM Theorem E.1 covers only the exact minimiser of an "
                "unclipped loss. Use method='output' or multi_class='ovr'")
        if self.solver != "lbfgs":
            raise ValueError(f"multi_class='multinomial' uses solver='lbfgs' (the certified L-BFGS), got {self.solver!r}")
        if self.noise_std is not None:
            raise ValueError("noise_std applies to methods 'amp' and 'objective'; output perturbation sets its "
                             "noise from (epsilon, delta, alpha)")
        R, s = self._validate_common()
        max_iter = check_max_iter(self.max_iter)  # a bool passes the Interval constraint
        X = validate_X(self, X, reset=True, accept_sparse=True)
        n = X.shape[0]
        w = check_sample_weight(None if sample_weight is None else np.asarray(sample_weight), n)
        # constants for the bound with the rounding slack of the data type (as _fit_problems)
        Rs, ss = _slack(R, X.dtype), (_slack(s, X.dtype) if s > 0 else 0.0)
        consts = multinomial_constants(math.sqrt(Rs * Rs + ss * ss))
        mn.check_multinomial_clip(self.clip_norm, consts.lipschitz)
        cal = make_calibration("output", self.epsilon, self.delta, consts, tol=self.tol,
                               regularization=self.alpha, noise_std=None, noise_factor=self.noise_factor,
                               sigma_out=self.sigma_out, accountant=self.accountant, count=1,
                               calibration=self.calibration)
        Xd = self._design(X, R, s, fitting=True)  # validates the rows (norm bound, finiteness)
        check_calibration_certifiable(cal, n, Xd.shape[1])  # public quantities: before the charge and the draw
        event = cal.event
        self._charge(event, budget)
        gen = check_random_state(self.random_state)
        W, gnorm, n_iter, used = mn.fit_multinomial_output(
            Xd, labels, n_classes, cal, smoothness_factor=consts.smoothness / consts.row_norm ** 2,
            sample_weight=w, max_iter=max_iter, gen=gen)
        d = X.shape[1]
        self.n_features_in_ = d
        if s > 0:
            self._coef, self._intercept = W[:d].T.copy(), W[d] * s
        else:
            self._coef, self._intercept = W.T.copy(), np.zeros(n_classes)
        self.multi_class_ = "multinomial"
        self._record_fit(event, cal, consts, [n_iter], [gnorm], (used,))

    def fit(self, X, y, sample_weight=None, *, budget=None) -> "LogisticRegression":
        """Fit privately; see the class docstring for the guarantee.  Returns self.

        ``budget``: a :class:`dpfast.PrivacyBudget` (None: the one of an enclosing
        ``with budget:`` block, if any) charged with ``event_`` before any noise is drawn;
        ``BudgetExceededError`` leaves the estimator unfitted."""
        self._validate_params()
        self._reset_fit()
        y = validate_y(self, y, _num_samples(X), classifier=True)
        if self.multi_class == "multinomial":
            classes, idx = check_label_set(y, self.classes)
            self._fit_multinomial(X, idx, classes.size, sample_weight, budget=budget)
            self.classes_ = classes
            self.coef_ = self._coef
            self.intercept_ = self._intercept
            return self
        classes = self._label_set(y)
        if classes.size == 2:
            targets = [_loss_table.binary_labels(self._loss, y == classes[1])]
        else:
            targets = [_loss_table.binary_labels(self._loss, y == c) for c in classes]
        return self._fit_ovr(X, classes, targets, sample_weight, budget=budget)

    def _fit_ovr(self, X, classes, targets, sample_weight, *, budget=None) -> "LogisticRegression":
        """One-vs-rest fit of validated targets (+-1 per model; the Dask path's stand in for them)."""
        self._fit_problems(X, targets, sample_weight, budget=budget)
        self.multi_class_ = "ovr"
        self.classes_ = classes
        self.coef_ = self._coef
        self.intercept_ = self._intercept
        return self

    def decision_function(self, X) -> np.ndarray:
        """x.coef + intercept: shape (n,) for binary, (n, K) for one-vs-rest and multinomial."""
        d = self._decision(X)
        return d[:, 0] if d.shape[1] == 1 else d

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities: softmax of the scores (multinomial); sigmoid, one-vs-rest scores
        normalised to sum to 1 (one-vs-rest)."""
        d = self._decision(X)
        if getattr(self, "multi_class_", "ovr") == "multinomial":
            from scipy.special import softmax

            return softmax(d, axis=1)
        p = 0.5 * (1.0 + np.tanh(0.5 * d))  # stable sigmoid
        if p.shape[1] == 1:
            return np.hstack([1.0 - p, p])
        tot = p.sum(axis=1, keepdims=True)
        return np.where(tot > 0, p / np.where(tot > 0, tot, 1.0), 1.0 / p.shape[1])

    def predict(self, X) -> np.ndarray:
        """The class of the largest score (post-processing of the released model)."""
        d = self._decision(X)
        idx = (d[:, 0] > 0).astype(int) if d.shape[1] == 1 else np.argmax(d, axis=1)
        return self.classes_[idx]


class LinearRegression(DaskDispatchMixin, DPRegressorMixin, _PrivateLinearModel):
    __doc__ = (
        """Differentially private ridge (squared loss) or Huber regression.

    Default: Algorithm 1 of Redberg, Koskela & Wang (2024) on the gradient-clipped squared loss (the clipped loss is a
    Huber loss with threshold C/||x||: convex, GLM, 1-smooth in the margin), calibrated as the
    paper does for logistic regression.  Labels are any finite reals; clipping bounds each
    example's gradient whatever the label, but the default C assumes labels roughly in [-1, 1]
    (residuals up to 1 are not clipped) -- scale y accordingly or set ``clip_norm``.

    Parameters
    ----------"""
        + _COMMON_DOC
        + """    loss : {"squared", "huber"}
    huber_delta : float
        Threshold of the Huber loss.
    label_bound : float
        ``method="ssp"`` only: the public bound B on |y|; labels are clipped to [-B, B] (a
        per-record map fixed by the public B, so it costs no privacy).

    Notes
    -----
    ``method="ssp"``: sufficient-statistic perturbation (Awan's notes section 3.8; the Gaussian
    mechanism on the second-moment matrix as in Dwork, Talwar, Thakurta & Zhang 2014, "Analyze
    Gauss"; Wang 2018, "Revisiting differentially private linear regression", SSP).  Rows go
    through ``row_norm`` (||x|| <= ``norm_bound`` = R), labels are clipped to B = ``label_bound``,
    z = (x, s) with s = ``intercept_scaling`` when ``fit_intercept``.  Released: the upper
    triangle of Z^T Z and Z^T y plus i.i.d. N(0, sigma^2) noise, sigma = z Delta with
    Delta^2 = ((R^2 + s^2)^2 + R^4 + s^4)/2 + B^2 (R^2 + s^2) the exact add/remove l2
    sensitivity (:func:`dpfast.linear_model._ssp.ssp_sensitivity`) and z the smallest noise
    multiplier the accountant certifies at (epsilon, delta): the release is (epsilon, delta)-DP
    (Gaussian mechanism), ``event_ = Gaussian(z, Delta)`` and ``epsilon_`` is the accountant's
    value for it.  The coefficients theta = (P_+(A~) + lambda I)^{-1} b~ (P_+ clips the noisy
    matrix's eigenvalues at 0; the spec digest's E3) are post-processing.  ``alpha`` is lambda
    (None: 2 sigma sqrt(d + 1), the order of the noise matrix's spectral norm -- a
    data-independent rule).  One pass over the data, no solver: the method of choice when n is
    large relative to d^2 / epsilon.  ``sample_weight`` in [0, 1] weights each row's contribution
    (w z z^T, w y z: the sensitivity is unchanged).  The sums are exact on fixed-point grids of
    the public column bounds (:func:`~dpfast.linear_model._ssp.ssp_exact`).  Dask input: one pass
    of per-partition exact statistics, equal to the in-memory fit bit for bit for every
    partitioning (:meth:`_fit_ssp_dask`).
"""
        + _ATTR_DOC
    )

    _parameter_constraints = {
        **_CONSTRAINTS,
        "loss": [StrOptions({"squared", "huber"})],
        "huber_delta": [Interval(Real, 0, None, closed="neither")],
        "method": [StrOptions(set(METHODS) | {"ssp"})],
        "label_bound": [Interval(Real, 0, None, closed="neither")],
    }
    _expected_failures = {**_WEIGHT_FAILURES, "check_regressors_train": _base.SMALL_RIDGE}

    @classmethod
    def _dp_expected_failed_checks(cls, estimator):
        # method="ssp" solves in closed form with a ridge of the order of its noise, which the
        # checks' data sets do not defeat: it passes check_regressors_train
        if getattr(estimator, "method", None) == "ssp":
            return dict(_WEIGHT_FAILURES)
        return cls._expected_failures

    def __init__(
        self,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        *,
        method: str = "amp",
        loss: str = "squared",
        huber_delta: float = 1.0,
        solver: str = "lbfgs",
        tol: float | None = None,
        clip_norm: float | None = None,
        alpha: float | None = None,
        noise_std: float | None = None,
        noise_factor: float = 1.3,
        sigma_out: float | None = None,
        accountant: str = "best",
        calibration: str = "accountant",
        norm_bound: float = 1.0,
        row_norm: str = "clip",
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        max_iter: int = 1000,
        label_bound: float = 1.0,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.method = method
        self.loss = loss
        self.huber_delta = huber_delta
        self.label_bound = label_bound
        self.solver = solver
        self.tol = tol
        self.clip_norm = clip_norm
        self.alpha = alpha
        self.noise_std = noise_std
        self.noise_factor = noise_factor
        self.sigma_out = sigma_out
        self.accountant = accountant
        self.calibration = calibration
        self.norm_bound = norm_bound
        self.row_norm = row_norm
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.max_iter = max_iter
        self.random_state = random_state

    def _loss_name(self):
        return self.loss

    def fit(self, X, y, sample_weight=None, *, budget=None) -> "LinearRegression":
        """Fit privately; see the class docstring for the guarantee.  Returns self.

        ``budget``: as for :meth:`LogisticRegression.fit`."""
        self._validate_params()
        self._reset_fit()
        y = validate_y(self, y, _num_samples(X), classifier=False)
        if self.method == "ssp":
            return self._fit_ssp(X, y, sample_weight, budget=budget)
        return self._fit_target(X, y, sample_weight, budget=budget)

    def _fit_ssp(self, X, y, sample_weight, *, budget=None) -> "LinearRegression":
        """method="ssp" (class docstring, Notes): validate, calibrate, charge, draw, solve."""
        import scipy.sparse as sp

        R, s, B = self._ssp_public()
        X = validate_X(self, X, reset=True, accept_sparse=True)
        n, d = X.shape
        if y.shape != (n,):
            raise ValueError(f"y must have shape ({n},) to match X, got {y.shape}")
        w = check_sample_weight(None if sample_weight is None else np.asarray(sample_weight), n)
        scale = self._transform_rows(X, R, fitting=True)  # row_norm="check" refuses here, before the charge
        if not np.isfinite(y).all():
            raise ValueError("y contains NaN or infinite values")
        delta_ = _ssp.ssp_sensitivity(_slack(R, X.dtype), _slack(s, X.dtype) if s > 0 else 0.0, B)
        event, sigma, which = _ssp.ssp_calibrate(self.epsilon, self.delta, delta_, self.accountant)
        dim = d + (1 if s > 0 else 0)
        lam = 2.0 * sigma * math.sqrt(dim) if self.alpha is None else float(self.alpha)
        self._charge(event, budget)
        gen = check_random_state(self.random_state)
        Z = X.toarray() if sp.issparse(X) else X
        Z = np.asarray(Z, dtype=np.float64)
        if scale is not None:
            Z = Z * scale[:, None]
        if s > 0:
            Z = np.hstack([Z, np.full((n, 1), s)])
        Z = np.ascontiguousarray(Z)  # one layout for every input layout: the same sums, bit for bit
        A, b = _ssp.ssp_statistics(Z, np.clip(y, -B, B), w, _ssp_col_bounds(R, s, B, d))
        E, e = _ssp.ssp_noise(gen, dim, sigma)
        theta = _ssp.ssp_solve(A + E, b + e, lam)
        self._ssp_record(theta, d, s, event, which, sigma, lam, delta_)
        return self

    def _ssp_public(self):
        """(R, s, B) of ``method="ssp"`` from the public parameters (errors before the charge)."""
        R, s = self._validate_common()
        B = check_positive(check_real(self.label_bound, "label_bound"), "label_bound", allow_array=False)
        if self.loss != "squared":
            raise ValueError("method='ssp' fits the squared loss (least squares); use loss='squared'")
        if self.alpha is not None and not math.isfinite(float(self.alpha)):
            raise ValueError(f"alpha must be finite, got {self.alpha!r}")
        _ssp.check_ssp_exponents(_ssp_col_bounds(R, s, B, 1))
        return R, s, B

    def _ssp_record(self, theta, d, s, event, which, sigma, lam, delta_) -> None:
        self.n_features_in_ = d
        self.coef_ = theta[:d].copy()
        self.intercept_ = float(theta[d] * s) if s > 0 else 0.0
        self._coef, self._intercept = self.coef_[None, :], np.array([self.intercept_])
        self._record_accounted(event, float(self.delta), which)
        self.sigma_ = sigma
        self.sigma_out_ = 0.0
        self.lambda_ = lam
        self.sensitivity_ = delta_
        self.n_iter_ = 1  # one closed-form solve (max_iter does not apply)

    def _fit_ssp_dask(self, X, y, sample_weight, *, budget=None) -> "LinearRegression":
        """``method="ssp"`` on a Dask ``X`` (``y``/``sample_weight`` Dask chunked like X's rows, or
        NumPy): the public checks on metadata, the charge, one pass in which every partition
        returns :func:`~dpfast.linear_model._ssp.ssp_statistics` of its mapped rows (:func:`_ssp_partition`),
        the exact integer partials added on the client and rounded once, one draw, the solve.  Equal
        to the in-memory fit bit for bit for the same data and ``random_state``, for every
        partitioning;
        bad data found in the pass (NaN, a row above ``norm_bound`` with ``row_norm="check"``, a
        weight outside [0, 1]) raises ``ValueError`` after the charge, naming no row or value."""
        self._validate_params()
        self._reset_fit()
        if y is None:
            raise ValueError("LinearRegression requires y to be passed, but the target y is None")
        R, s, B = self._ssp_public()
        vectors_dask = is_dask_collection(y) and (sample_weight is None or is_dask_collection(sample_weight))
        Xd, d = fit_rows(self, X, known_chunks=not vectors_dask)
        yp = vector_parts(y, Xd, "y")
        wp = None if sample_weight is None else vector_parts(sample_weight, Xd, "sample_weight")
        dtype = Xd.dtype if Xd.dtype in (np.float32, np.float64) else np.float64
        delta_ = _ssp.ssp_sensitivity(_slack(R, dtype), _slack(s, dtype) if s > 0 else 0.0, B)
        event, sigma, which = _ssp.ssp_calibrate(self.epsilon, self.delta, delta_, self.accountant)
        dim = d + (1 if s > 0 else 0)
        lam = 2.0 * sigma * math.sqrt(dim) if self.alpha is None else float(self.alpha)
        self._charge(event, budget)
        gen = check_random_state(self.random_state)
        cb = _ssp_col_bounds(R, s, B, d)
        A, b = _ssp.ssp_floats(sum_by_partitions(_ssp_partition, Xd, [yp, wp], (self, R, s, B, cb), dtype="float",
                                                 out_dtype=object), cb)
        E, e = _ssp.ssp_noise(gen, dim, sigma)
        theta = _ssp.ssp_solve(A + E, b + e, lam)
        self._ssp_record(theta, d, s, event, which, sigma, lam, delta_)
        return self

    def _fit_target(self, X, y, sample_weight, *, budget=None) -> "LinearRegression":
        """The fit of a validated target (the Dask path's stand in for it)."""
        self._fit_problems(X, [y], sample_weight, budget=budget)
        self.coef_ = self._coef[0]
        self.intercept_ = float(self._intercept[0])
        self.n_iter_ = int(self.n_iter_[0])
        self.grad_norm_ = float(self.grad_norm_[0])
        return self

    def predict(self, X) -> np.ndarray:
        """x.coef + intercept (post-processing of the released model)."""
        return self._decision(X)[:, 0]


def _ssp_col_bounds(R: float, s: float, B: float, d: int) -> list:
    """The public bounds of SSP's Gram columns (the fixed-point grids of the exact sums): every
    coordinate of a mapped row within its norm bound (widened as for float32, so that the grid is
    the same for any dtype), the intercept column ``s``, the labels ``B``."""
    return [_slack(R, np.float32)] * d + ([s] if s > 0 else []) + [B]


def _ssp_partition(Xk, yk, wk, est, R, s, B, cb):
    """One partition's exact (Z^T W Z, Z^T W y) of ``method="ssp"`` (integers): its rows mapped by
    ``row_norm`` as the in-memory fit maps them, the bias column appended, labels clipped to
    [-B, B], then :func:`~dpfast.linear_model._ssp.ssp_exact` on the grids of the public column
    bounds ``cb``; or the fixed message of bad data (the rows' finiteness and the vectors' lengths
    are checked by :func:`~dpfast._dask_utils.sum_by_partitions`)."""
    n = Xk.shape[0]
    yv = np.asarray(yk, dtype=np.float64)
    if not np.isfinite(yv).all():
        return PartitionError("y contains NaN or infinite values")
    w = None
    if wk is not None:
        w = np.asarray(wk, dtype=np.float64)
        if not (np.isfinite(w).all() and (w >= 0).all() and (w <= 1).all()):
            return PartitionError("sample_weight must be finite and lie in [0, 1]")
    try:
        scale = est._transform_rows(Xk, R, fitting=True)  # row_norm="check": the fixed message (R is public)
    except ValueError as exc:
        return PartitionError(str(exc))
    Z = np.asarray(Xk, dtype=np.float64)
    if scale is not None:
        Z = Z * scale[:, None]
    if s > 0:
        Z = np.hstack([Z, np.full((n, 1), s)])
    return _ssp.ssp_exact(np.ascontiguousarray(Z), np.clip(yv, -B, B), w, cb)
