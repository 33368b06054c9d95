"""Estimators for learning with public unlabelled data (see :doc:`/theory/public_data` section 6.1).

``PublicDataClassifier`` and ``PublicDataRegressor`` are scikit-learn estimators (they derive
from :class:`dpfast._base.PrivateEstimator`).  ``fit(X_private, y_private, X_public)``: the
private rows are protected, the public rows are not (they may be used arbitrarily), and public
labels are never used.  The public rows may instead be given once as the constructor parameter
``public_data`` (public data may be stored with the model), so that ``fit(X, y)`` works where
scikit-learn calls it (``Pipeline``, ``cross_val_score``, ``GridSearchCV``); steps before the
learner in a pipeline transform ``X`` but not ``public_data``.

Everything the estimators derive from data other than the private rows -- feature
standardisation, the regulariser, the clipping radius, the number of public rows used -- comes
from the public rows, n (public under replace-one neighbours) and the parameters, so the
guarantee of the underlying learner applies unchanged:

* ``method="regularization"`` (default): :func:`dpfast.public.regularization_learner`
  (Algorithm 3 + Perturb): (epsilon, delta)-DP with Gaussian noise when ``delta > 0``, epsilon-DP
  with Laplace noise when ``delta == 0``.
* ``method="rrspm"`` (classifier only): :func:`dpfast.public.rrspm` (Algorithm 4), epsilon-DP
  (delta is not used) with the exact native stump / threshold oracle or a user oracle.
* ``method="perturbation"`` (Algorithm 2) is **not shipped**: its privacy rests on the
  anti-concentration stability of Lemma 1, whose printed proof bounds the squared norm while the
  statement uses the norm, uses a Hoeffding constant that is too small (:doc:`/theory/public_data` item 2), and
  needs a bounded class with exact ERM under random linear perturbations and an anchored norm
  (inf ||f||_mu >= 2/3).  For the unbounded linear class the native solver handles,
  E sup omega_m = infinity and the bound is vacuous; for bounded classes the theorem's J and n
  are astronomically large (:doc:`/theory/public_data`).  We could not state a guarantee we can stand behind, so
  ``fit`` raises ``NotImplementedError`` with this explanation.

Neighbouring relation: ``neighbours="replace_one"`` (the paper's Definition 1; default here,
because n is then public and sets the regulariser's scale).  ``"add_remove"`` is supported: RRSPM
uses Lap(m/eps) weights; the regularization learner needs a data-independent ``n_scale``.
"""
from __future__ import annotations

import math
import warnings
from numbers import Integral, Real
from typing import Callable, Optional, Union

import numpy as np
from sklearn.utils.validation import check_array

from dpfast import _base, _loss_table, accounting as acc
from dpfast._base import (
    RANDOM_STATE,
    DPClassifierMixin,
    DPRegressorMixin,
    Interval,
    PrivateEstimator,
    StrOptions,
    check_fitted,
    validate_X,
    validate_y,
)
from dpfast._validation import check_label_set
from dpfast.budget import detached
from dpfast.public._oracles import as_hypothesis
from dpfast.public._regularization import _plan, regularization_learner
from dpfast.public._rrspm import (
    _warn_public_size,
    rrspm,
    rrspm_public_size,
    rrspm_weight_scale,
)
from dpfast.random import check_random_state

__all__ = ["PublicDataClassifier", "PublicDataRegressor"]

_PERTURBATION_MSG = (
    "method='perturbation' (Algorithm 2) is not shipped: its privacy proof (Lemma 1) bounds the squared "
    "norm while the statement uses the norm and uses a too-small Hoeffding constant (see docs/theory/public_data.rst), "
    "it needs a bounded class with an anchored norm, and for linear predictors E sup omega_m is infinite, so no "
    "honest guarantee can be computed.  Use method='regularization' (Algorithm 3, the paper's recommended "
    "learner for convex classes, which also gives pure DP) or method='rrspm'."
)


_CONSTRAINTS = {
    "epsilon": [Interval(Real, 0, None, closed="neither")],
    "delta": [Interval(Real, 0, 1, closed="left")],
    "method": [StrOptions({"regularization", "rrspm", "perturbation"})],
    "random_state": RANDOM_STATE,
    "eta": [Interval(Real, 0, None, closed="neither"), None],
    "clip_norm": [Interval(Real, 0, None, closed="neither"), None],
    "max_public": [Interval(Integral, 1, None, closed="left"), None],
    "neighbours": [StrOptions({"replace_one", "add_remove"})],
    "n_scale": [Interval(Real, 0, None, closed="neither"), None],
    "standardize": ["boolean"],
    "fit_intercept": ["boolean"],
    "public_data": ["array-like", None],
}

# scikit-learn estimator checks fit data of their own shapes and labels; public_data has one shape
_SHAPE_CHECKS = (
    "check_dict_unchanged", "check_dont_overwrite_parameters", "check_dtype_object", "check_estimators_dtypes",
    "check_estimators_nan_inf", "check_estimators_pickle", "check_f_contiguous_array_estimator",
    "check_fit2d_1feature", "check_fit2d_1sample", "check_fit2d_predict1d", "check_fit_score_takes_y",
    "check_methods_sample_order_invariance", "check_methods_subset_invariance", "check_n_features_in_after_fitting",
    "check_pipeline_consistency", "check_positive_only_tag_during_fit", "check_supervised_y_2d",
)


class _Base(PrivateEstimator):
    _methods: tuple = ()

    # -- validation ---------------------------------------------------------------------
    def _check_common(self):
        self._validate_params()
        if self.method not in self._methods + ("perturbation",):
            raise ValueError(f"method must be one of {self._methods}, got {self.method!r}")
        if self.method == "perturbation":
            raise NotImplementedError(_PERTURBATION_MSG)

    def _event(self):
        """The release's event, known before any data is read: the learners' stated guarantee
        (Block et al. 2024, Theorems 3 and 4): (epsilon, delta)-DP for the regularization
        learner with Gaussian Perturb (delta > 0), pure epsilon-DP with Laplace Perturb
        (delta = 0) and for RRSPM, under ``neighbours``."""
        if self.method == "regularization" and self.delta > 0:
            return acc.ApproxDP(float(self.epsilon), float(self.delta), neighbours=self.neighbours)
        return acc.PureDP(float(self.epsilon), neighbours=self.neighbours)

    def _check_regularization(self, Z: np.ndarray, n: int, loss: str) -> None:
        """What the regularization learner refuses for public reasons, checked before the charge
        (so that a refused fit charges nothing): a data-independent ``n_scale`` under add/remove,
        at least one public row per coefficient, ``max_public`` between the two, and everything
        the learner derives from the standardised public rows, n and the parameters (its
        ``_plan``: the geometry, the stability bound, a tolerance float64 can certify)."""
        if self.neighbours == "add_remove" and self.n_scale is None:
            raise ValueError(
                "neighbours='add_remove' needs a data-independent n_scale (the regulariser's scale in records): "
                "under add/remove the private count n is not public"
            )
        m, p = Z.shape[0], Z.shape[1] + int(bool(self.fit_intercept))
        if m < p:
            raise ValueError(f"the regularization learner needs at least {p} public rows (one per coefficient), "
                             f"got {m}")
        if self.max_public is not None and not p <= self.max_public <= m:
            raise ValueError(f"max_public must be in [{p}, {m}] (p coefficients, m public rows), got {self.max_public}")
        mean, scale = self._public_scaling(Z)
        _plan(n, (Z - mean) / scale, **self._learner_params(loss))

    def _learner_params(self, loss: str) -> dict:
        """The regularization learner's parameters (those of the plan and of the fit alike)."""
        return dict(epsilon=self.epsilon, delta=self.delta, loss=loss, eta=self.eta, clip_norm=self.clip_norm,
                    fit_intercept=self.fit_intercept, huber_delta=getattr(self, "huber_delta", 1.0),
                    neighbours=self.neighbours, n_scale=self.n_scale, release_size=self.max_public)

    def _release(self, budget):
        """Charge the event (before any randomness) and record it; (epsilon, delta) of the guarantee."""
        event = self._event()
        self._charge(event, budget)
        if self.method == "regularization" and self.delta > 0:
            # (epsilon, delta)-DP: the PLD accountant's epsilon of that event at delta
            self._record_accounted(event, float(self.delta), "pld")
        else:
            # pure epsilon-DP (Laplace Perturb, RRSPM): the event states its epsilon at delta = 0, where
            # no accountant converts (both need delta > 0); accountant_ is None: no accountant was used
            self._record_release(event, event.epsilon, 0.0, None)

    def _check_public(self, X_public, y_public, n_features: int) -> np.ndarray:
        if isinstance(X_public, tuple) and len(X_public) == 2 and y_public is None:
            X_public, y_public = X_public
        if y_public is not None:
            warnings.warn(
                "labels were passed for the public data; they are ignored (the public data is used "
                "unlabelled, see docs/theory/public_data.rst)",
                UserWarning,
                stacklevel=3,
            )
        if X_public is None:
            X_public = self.public_data
        if X_public is None or (hasattr(X_public, "__len__") and len(X_public) == 0):
            raise ValueError(
                "no public data: pass X_public (or the parameter public_data), an unlabelled sample from "
                "(roughly) the private population; "
                "without it use a private-only learner such as dpfast.linear_model"
            )
        Z = check_array(X_public, dtype=np.float64, ensure_all_finite=True, input_name="X_public")
        if Z.shape[1] != n_features:
            raise ValueError(f"X_public has {Z.shape[1]} features, but the private data has {n_features}")
        return Z

    def _public_scaling(self, Z: np.ndarray):
        """(mean, scale) of the feature standardisation, from the public rows only."""
        if self.standardize:
            sd = Z.std(axis=0)
            return Z.mean(axis=0), np.where(sd > 0, sd, 1.0)
        return np.zeros(Z.shape[1]), np.ones(Z.shape[1])

    def _standardize_fit(self, Z: np.ndarray) -> None:
        self.mean_, self.scale_ = self._public_scaling(Z)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean_) / self.scale_

    def _fit_regularization(self, Xp, y, Z, loss: str, gen) -> None:
        with detached():  # the estimator charged the whole release's event already
            res = regularization_learner(self._transform(Xp), y, self._transform(Z), rng=gen,
                                         **self._learner_params(loss))
        self.result_ = res
        self.coef_ = res.coef[:-1] / self.scale_ if self.fit_intercept else res.coef / self.scale_
        self.intercept_ = (res.coef[-1] if self.fit_intercept else 0.0) - float(self.mean_ @ self.coef_)
        self.oracle_calls_ = res.oracle_calls
        self.noise_scale_ = res.noise_scale
        self.stability_ = res.stability


class PublicDataClassifier(DPClassifierMixin, _Base):
    """Binary classifier trained privately with the help of public unlabelled data.

    Parameters
    ----------
    epsilon, delta : float
        Privacy target.  ``method="regularization"``: Gaussian Perturb, (epsilon, delta)-DP when
        delta > 0; Laplace Perturb, epsilon-DP when delta == 0.  ``method="rrspm"``: epsilon-DP
        (delta unused).
    method : "regularization" | "rrspm" | "perturbation"
        See the module docstring ("perturbation" raises ``NotImplementedError``, with reasons).
    random_state : None, int, Generator or SecureRandom
    eta : float, optional
        Regularisation weight of Algorithm 3 (average-loss units); default from
        :func:`dpfast.public.default_eta` (data-independent).
    clip_norm : float, optional
        Clipping radius C in ||.||_{M^-1} (default: the median public row norm).
    hypothesis : "stump" | "threshold" | callable
        RRSPM oracle: the native exact stump / 1-D threshold oracle, or a callable exact weighted
        0-1 ERM oracle ``oracle(X, y, sample_weight) -> hypothesis`` (the guarantee assumes it is
        exact).
    max_public : int, optional
        Number of public rows used: RRSPM public sample size (default
        :func:`dpfast.public.rrspm_public_size`), or the regularization learner's release size.
    neighbours : "replace_one" | "add_remove"
    n_scale : float, optional
        Regulariser scale in records; required under ``neighbours="add_remove"``.
    standardize : bool
        Standardise features with the public mean and standard deviation (free: public data).
    fit_intercept : bool
    classes : pair, optional
        The public label set ``[negative, positive]``; default ``[0, 1]`` (give ``[-1, 1]``
        for +-1 labels: the label set is never read off the private labels).
    public_data : array of shape (m, d), optional
        Public unlabelled rows used when ``fit`` is not given ``X_public`` (so that
        ``fit(X, y)`` works inside scikit-learn's pipelines and model selection).

    Attributes: ``classes_``, ``coef_``/``intercept_`` (regularization), ``hypothesis_`` (rrspm),
    ``oracle_calls_`` (2), ``noise_scale_``, ``n_public_used_``, ``result_``; ``event_`` (the
    release's :mod:`dpfast.accounting` event: ``ApproxDP(epsilon, delta)`` for Gaussian Perturb,
    ``PureDP(epsilon)`` for Laplace Perturb and RRSPM), ``epsilon_``, ``delta_``,
    ``accountant_`` ("pld" for Gaussian Perturb: ``epsilon_`` is the PLD accountant's value for
    ``event_`` at ``delta_``; None for the pure-DP releases, whose ``epsilon_`` is their
    ``PureDP`` event's own, at ``delta_ = 0``, where no accountant converts).
    """

    _methods = ("regularization", "rrspm")

    def __init__(
        self,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        method: str = "regularization",
        random_state=None,
        *,
        eta: Optional[float] = None,
        clip_norm: Optional[float] = None,
        hypothesis: Union[str, Callable] = "stump",
        max_public: Optional[int] = None,
        neighbours: str = "replace_one",
        n_scale: Optional[float] = None,
        standardize: bool = True,
        fit_intercept: bool = True,
        classes=None,
        public_data=None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.method = method
        self.random_state = random_state
        self.eta = eta
        self.clip_norm = clip_norm
        self.classes = classes
        self.hypothesis = hypothesis
        self.max_public = max_public
        self.neighbours = neighbours
        self.n_scale = n_scale
        self.standardize = standardize
        self.fit_intercept = fit_intercept
        self.public_data = public_data

    _parameter_constraints = {
        **_CONSTRAINTS,
        "hypothesis": [StrOptions({"stump", "threshold"}), callable],
        "classes": ["array-like", None],
    }
    _expected_failures = {
        name: _base.PUBLIC_ROWS
        for name in _SHAPE_CHECKS + (
            "check_classifier_data_not_an_array", "check_classifiers_classes", "check_classifiers_one_label",
            "check_classifiers_train", "check_estimators_fit_returns_self", "check_estimators_overwrite_params",
            "check_readonly_memmap_input",
        )
    }

    def fit(self, X_private, y_private, X_public=None, y_public=None, *, budget=None) -> "PublicDataClassifier":
        """Fit on private labelled rows and public unlabelled rows (``X_public``, else the
        parameter ``public_data``; ``y_public`` is ignored, with a warning).

        ``budget``: a :class:`dpfast.PrivacyBudget` (None: the one of an enclosing
        ``with budget:`` block, if any) charged with ``event_`` before any randomness is drawn;
        ``BudgetExceededError`` leaves the estimator unfitted.  Returns self."""
        self._check_common()
        self._reset_fit()
        Xp = validate_X(self, X_private, reset=True, name="X_private", dtype=np.float64)
        n, d = Xp.shape
        y = validate_y(self, y_private, n, classifier=True, name="y_private")
        classes = self._label_set(y)
        y01 = (y == classes[1]).astype(np.int64)
        Z = self._check_public(X_public, y_public, d)
        if self.method == "regularization":
            self._check_regularization(Z, n, "logistic")
            self._release(budget)
            gen = check_random_state(self.random_state)
            self._standardize_fit(Z)
            self._fit_regularization(Xp, _loss_table.binary_labels("logistic", y01), Z, "logistic", gen)
            self.n_public_used_ = len(self.result_.public_targets)
            self.classes_ = classes
            return self
        # RRSPM
        m_all = Z.shape[0]
        # n may only steer public choices when it is public (replace-one); under add/remove
        # the data-independent n_scale stands in for it.
        if self.neighbours == "replace_one":
            n_ref = n
        elif self.n_scale is not None:
            n_ref = float(self.n_scale)
        elif self.max_public is None:
            raise ValueError(
                "method='rrspm' with neighbours='add_remove' needs max_public or a data-independent n_scale "
                "to choose the number of public points (the private count n is not public)"
            )
        else:
            n_ref = None
        if self.max_public is None:
            vc = 1.0 if d == 1 else 2.0 * math.log2(2 * d)
            m = min(m_all, rrspm_public_size(n_ref, float(self.epsilon), vc))
        else:
            m = int(self.max_public)
            if not 1 <= m <= m_all:
                raise ValueError(f"max_public must be in [1, {m_all}], got {m}")
            if n_ref is not None:
                _warn_public_size(m, n_ref, float(self.epsilon))
        rrspm_weight_scale(m, float(self.epsilon), self.neighbours)  # refuses an overflowing scale before the charge
        self._release(budget)
        gen = check_random_state(self.random_state)
        self._standardize_fit(Z)
        idx = np.sort(gen.permutation(m_all)[:m])  # public randomness: which public rows are used
        oracle = self.hypothesis
        with detached():  # the estimator charged the release's event already
            res = rrspm(
                self._transform(Xp), y01, self._transform(Z[idx]), epsilon=self.epsilon, oracle=oracle,
                neighbours=self.neighbours, rng=gen,
            )
        self.result_ = res
        self.hypothesis_ = res.hypothesis
        self.oracle_calls_ = res.oracle_calls
        self.noise_scale_ = res.weight_scale
        self.n_public_used_ = m
        self.classes_ = classes
        return self

    def _label_set(self, y: np.ndarray) -> np.ndarray:
        """The public label set: ``classes`` if given, else {0, 1}.

        Never read off the private labels (that would release them)."""
        if self.classes is not None and np.asarray(self.classes).shape != (2,):
            raise ValueError(f"classes must list the two (public) labels, got {self.classes!r}")
        return check_label_set(y, self.classes, name="y_private")[0]

    def decision_function(self, X) -> np.ndarray:
        """Signed score: x.coef + intercept (regularization), hypothesis(x) - 1/2 (rrspm)."""
        check_fitted(self)
        X = validate_X(self, X, reset=False, dtype=np.float64)
        if self.method == "rrspm":
            return np.asarray(as_hypothesis(self.hypothesis_)(self._transform(X)), dtype=np.float64) - 0.5
        return X @ self.coef_ + self.intercept_

    def predict(self, X) -> np.ndarray:
        """The positive class where the score is > 0 (post-processing of the released model)."""
        s = self.decision_function(X)
        return self.classes_[(s > 0).astype(np.int64)]


class PublicDataRegressor(DPRegressorMixin, _Base):
    """Linear regression trained privately with the help of public unlabelled data.

    Algorithm 3 + Perturb (:func:`dpfast.public.regularization_learner`) with the Huber loss
    (Lipschitz constant ``huber_delta`` in the prediction, for any label), so labels need no
    bound.  (epsilon, delta)-DP (Gaussian) when delta > 0, epsilon-DP (Laplace) when delta == 0.
    Parameters and attributes as for :class:`PublicDataClassifier` (``method="regularization"``
    only), plus ``huber_delta``.  ``score`` is R^2.
    """

    _methods = ("regularization",)

    def __init__(
        self,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        method: str = "regularization",
        random_state=None,
        *,
        eta: Optional[float] = None,
        clip_norm: Optional[float] = None,
        huber_delta: float = 1.0,
        max_public: Optional[int] = None,
        neighbours: str = "replace_one",
        n_scale: Optional[float] = None,
        standardize: bool = True,
        fit_intercept: bool = True,
        public_data=None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.method = method
        self.random_state = random_state
        self.eta = eta
        self.clip_norm = clip_norm
        self.huber_delta = huber_delta
        self.max_public = max_public
        self.neighbours = neighbours
        self.n_scale = n_scale
        self.standardize = standardize
        self.fit_intercept = fit_intercept
        self.public_data = public_data

    _parameter_constraints = {**_CONSTRAINTS, "huber_delta": [Interval(Real, 0, None, closed="neither")]}
    _expected_failures = {
        name: _base.PUBLIC_ROWS
        for name in _SHAPE_CHECKS + (
            "check_regressor_data_not_an_array", "check_regressors_int", "check_regressors_no_decision_function",
            "check_regressors_train",
        )
    }

    def fit(self, X_private, y_private, X_public=None, y_public=None, *, budget=None) -> "PublicDataRegressor":
        """Fit on private labelled rows and public unlabelled rows; arguments as for
        :meth:`PublicDataClassifier.fit`.  Returns self."""
        self._check_common()
        self._reset_fit()
        Xp = validate_X(self, X_private, reset=True, name="X_private", dtype=np.float64)
        n, d = Xp.shape
        y = validate_y(self, y_private, n, classifier=False, name="y_private")
        Z = self._check_public(X_public, y_public, d)
        self._check_regularization(Z, n, "huber")
        self._release(budget)
        gen = check_random_state(self.random_state)
        self._standardize_fit(Z)
        self._fit_regularization(Xp, y, Z, "huber", gen)
        self.n_public_used_ = len(self.result_.public_targets)
        return self

    def predict(self, X) -> np.ndarray:
        """x.coef + intercept (post-processing of the released model)."""
        check_fitted(self)
        X = validate_X(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_ + self.intercept_
