"""The one base of dpfast's estimators: scikit-learn's estimator contract plus the release record.

Every estimator (``dpfast.linear_model``, ``dpfast.sgd``, ``dpfast.public``) derives from
:class:`PrivateEstimator` (a :class:`sklearn.base.BaseEstimator`) and scikit-learn's
``ClassifierMixin`` / ``RegressorMixin``, so ``get_params`` / ``set_params`` / ``repr`` /
``score(X, y, sample_weight=None)`` / ``clone`` / pipelines / grid search behave as in
scikit-learn.  This module is what makes scikit-learn a dependency of the estimator modules;
``dpfast.mechanisms`` and ``dpfast.accounting`` never import it.

The pieces, each in one place:

* constructor parameters are validated declaratively from ``_parameter_constraints`` (scikit-learn's
  ``Interval``, ``StrOptions``, ...) by ``BaseEstimator._validate_params`` at the start of ``fit``,
  before any private value is read; the error (``InvalidParameterError``, a ``ValueError`` and a
  ``TypeError``) names the parameter and the allowed range;
* :func:`validate_X` is the one data validator for dense and CSR input (float64 and float32 are
  kept, other real dtypes become float64; NaN / inf raise ``ValueError`` naming the argument);
* "not fitted" is scikit-learn's ``NotFittedError`` (:func:`check_fitted`);
* every subclass's ``fit`` first calls :func:`dpfast.budget.check_scope` with its ``budget=``
  argument, so a fit that could not be charged (in a joblib worker process while a budget is
  open, with an unpickled budget, ...) raises ``BudgetScopeError`` before it reads any data;
* :meth:`PrivateEstimator._charge` charges the release's event to the privacy budget *before*
  any noise is drawn (``dpfast.budget.charge``), and :meth:`PrivateEstimator._record_release`
  stores ``event_``, ``epsilon_``, ``delta_`` and ``accountant_`` after the fit;
* :func:`expected_failed_checks` lists the scikit-learn estimator checks that contradict
  differential privacy by design, with the reason, for
  ``sklearn.utils.estimator_checks.check_estimator(est, expected_failed_checks=...)``;
* :class:`DaskDispatchMixin` routes ``fit`` / ``predict`` / ``predict_proba`` /
  ``decision_function`` / ``score`` to the estimator family's Dask implementation when ``X`` is
  a Dask collection (dask itself is imported only then);
* ``clone`` (:func:`sklearn.base.clone`, hence ``cross_val_score``, pipelines and
  :class:`~dpfast.model_selection.PrivateRandomSearch`) gives a parameter that is a
  :class:`dpfast.random.SecureRandom` to the clone as a *fresh* secure stream (its own key from
  ``os.urandom``): a secret stream is never copied, so no two fits share its state
  (:func:`_clone_with_fresh_secure_streams`).
"""
from __future__ import annotations

import contextlib
import functools
from numbers import Integral
from typing import Callable, Mapping

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import Interval, StrOptions  # noqa: F401  (the estimators' constraints)
from sklearn.utils.validation import (
    _check_feature_names,
    _check_n_features,
    check_array,
    check_is_fitted,
    column_or_1d,
)

from dpfast import _dask_utils, budget as _budget
from dpfast._validation import is_ragged_error, ragged_message
from dpfast.accounting import make_accountant
from dpfast.random import SecureRandom

__all__ = [
    "PrivateEstimator",
    "DaskDispatchMixin",
    "DPClassifierMixin",
    "DPRegressorMixin",
    "NotFittedError",
    "validate_X",
    "validate_y",
    "check_fitted",
    "expected_failed_checks",
    "RANDOM_STATE",
]

#: Constraint of every ``random_state`` parameter: what :func:`dpfast.random.check_random_state`
#: accepts (None, a non-negative int seed, a numpy ``Generator`` or ``SecureRandom``).
RANDOM_STATE = [None, Interval(Integral, 0, None, closed="left"), np.random.Generator]

# Reasons for the scikit-learn estimator checks that contradict differential privacy (or the
# public-data learners' input contract) by design; each estimator class maps check names to them
# in ``_dp_expected_failed_checks``, for check_estimator's ``expected_failed_checks``.
PUBLIC_LABELS = (
    "the label set is public schema, fixed by the parameter classes (None means [0, 1]) and never read off "
    "the private labels, since one record could then change the output's shape; this check fits labels "
    "outside it, or a number of classes other than len(classes), or asserts classes_ == unique(y)"
)
SAMPLE_WEIGHT_RANGE = (
    "sample_weight must lie in [0, 1]: a weight above 1 multiplies a record's sensitivity beyond what the "
    "privacy calibration covers, and under DP a weight of k is not k copies of a record"
)
ZERO_WEIGHTS = (
    "an all-zero sample_weight is a valid input to a DP release (the output is then noise only); refusing it "
    "would be a refusal that depends on the private weights"
)
SMALL_RIDGE = (
    "the check sets alpha=0.01, below the smallest ridge lambda for which the privacy proof holds (lambda must "
    "exceed the loss's smoothness; Redberg, Koskela & Wang 2024); fit refuses it before reading the data"
)
PUBLIC_ROWS = (
    "the learner needs public rows with the private data's features (public_data, fixed when the instance is "
    "made) and a public binary label set; this check fits data with another number of features or other labels"
)


def expected_failed_checks(estimator) -> dict[str, str]:
    """The scikit-learn estimator checks ``estimator`` fails by design, with the reason.

    Pass it to :func:`sklearn.utils.estimator_checks.check_estimator` as
    ``expected_failed_checks``; ``tests/test_estimator_checks.py`` asserts that exactly these
    checks fail.
    """
    return dict(type(estimator)._dp_expected_failed_checks(estimator))


def check_fitted(estimator) -> None:
    """Raise scikit-learn's ``NotFittedError`` unless ``estimator`` has been fitted."""
    check_is_fitted(estimator)


@contextlib.contextmanager
def _no_values_in_errors(name: str):
    """Re-raise scikit-learn's / NumPy's conversion errors without the data they quote.

    ``check_array`` puts private values into some messages: ``could not convert string to float:
    'x'``, the whole array after "Complex data not supported" or "Expected 2D array, got 1D
    array instead:\narray=[...]".  After private data is read a message states what was
    violated, never which record or what value (issue 21, item 10); the original exception is
    not chained (its text would travel with the traceback)."""
    try:
        yield
    except OverflowError:
        # a Python number beyond a double (NumPy: "int too large to convert to float"): refused
        # as an infinite entry is, with scikit-learn's message for it (one contract violation)
        raise ValueError(f"Input {name} contains infinity or a value too large for dtype('float64').") from None
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        # (NumPy's "float() argument must be a string or a real number, not 'dict'" names a
        # type, not a value: kept, as scikit-learn's estimator checks expect it)
        if "could not convert" in msg or "invalid literal" in msg:
            cls = ValueError if isinstance(exc, ValueError) else TypeError
            raise cls(f"{name} must hold real numbers: it has an entry that cannot be converted to float "
                            "(e.g. a string)") from None
        if is_ragged_error(exc):  # NumPy quotes the detected shape: the (private) number of rows
            raise ValueError(ragged_message(name)) from None
        if msg.startswith("Complex data not supported"):
            raise ValueError(f"Complex data not supported ({name} must be real)") from None
        if "\narray=" in msg:
            head = msg.split("\narray=", 1)[0].rstrip(":")
            raise ValueError(f"{head}. Reshape your data either using {name}.reshape(-1, 1) if it has a single "
                             f"feature or {name}.reshape(1, -1) if it contains a single sample") from None
        raise


def validate_X(estimator, X, *, reset: bool, accept_sparse: bool = False, name: str = "X",
               dtype=(np.float64, np.float32)):
    """The one data validator of dpfast's estimators (dense and CSR).

    Returns ``X`` as a 2-d float array (float64 and float32 kept, other real dtypes converted to
    float64; ``dtype=np.float64`` forces float64) or, with ``accept_sparse``, as a CSR matrix.
    NaN or infinite entries, complex or non-numeric data, 1-d input, no rows or no columns raise
    ``ValueError`` (or ``TypeError`` for a sparse matrix where only dense input is supported)
    naming ``name``.  ``reset=True`` (in ``fit``) records ``n_features_in_`` /
    ``feature_names_in_``; ``reset=False`` checks ``X`` against them.
    """
    _check_feature_names(estimator, X, reset=reset)
    with _no_values_in_errors(name):
        X = check_array(X, accept_sparse="csr" if accept_sparse else False, dtype=dtype, ensure_all_finite=True,
                        input_name=name, estimator=estimator, ensure_non_negative=False)
    _check_n_features(estimator, X, reset=reset)
    return X


def validate_y(estimator, y, n: int, *, classifier: bool, name: str = "y") -> np.ndarray:
    """The one target validator: a 1-d array of ``n`` finite values (an (n, 1) column is
    raveled with scikit-learn's ``DataConversionWarning``); ``None`` raises ``ValueError``.

    ``classifier=True``: any 1-d labels; whether they lie in the public label set is checked by
    :func:`dpfast._validation.check_label_set`, whose refusal is the only one (a multi-output
    target is refused by its shape).  scikit-learn's ``check_classification_targets`` is not
    run: it refuses by the values' "type" (a float target with one non-integral value is
    "continuous", mixed objects "unknown"), so with ``classes=[0.5, 1.0]`` one record labelled
    0.5 -- a declared label -- refused a fit its neighbour passed.  ``classifier=False``: real
    numbers (float64).
    """
    if y is None:
        raise ValueError(f"{type(estimator).__name__} requires y to be passed, but the target y is None "
                         f"(argument {name})")
    with _no_values_in_errors(name):
        y = check_array(y, ensure_2d=False, dtype=None if classifier else np.float64, ensure_all_finite=True,
                        input_name=name, estimator=estimator, ensure_min_samples=0)
    if y.ndim == 2 and y.shape[1] == 1:
        y = column_or_1d(y, warn=True)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"{name} must be 1-d with one entry per row of X ({n}), got shape {y.shape}")
    return y


def _clone_with_fresh_secure_streams(estimator):
    """scikit-learn's clone of ``estimator``, except that a parameter holding a
    :class:`dpfast.random.SecureRandom` is given to the clone as a new ``SecureRandom()``.

    ``clone`` deep-copies every non-estimator parameter, and a secure generator refuses to be
    copied (a copy would replay its secret stream).  "Same parameters" for a secure stream means
    "a secure stream": the clone gets one keyed afresh from ``os.urandom``, independent of the
    original's, exactly as ``random_state=None`` gives every fit fresh entropy.  Nested estimators
    (a pipeline's steps, a search's ``estimator``) are cloned by their own ``__sklearn_clone__``.
    """
    secure = [k for k, v in estimator.get_params(deep=False).items() if isinstance(v, SecureRandom)]
    if not secure:
        return BaseEstimator.__sklearn_clone__(estimator)
    # clone a shallow stand-in whose secure parameters are None (the original is not touched, so
    # concurrent clones of one estimator are safe), then give each clone its own stream
    proxy = object.__new__(type(estimator))
    proxy.__dict__.update(vars(estimator))
    for k in secure:
        setattr(proxy, k, None)
    new = BaseEstimator.__sklearn_clone__(proxy)
    return new.set_params(**{k: SecureRandom() for k in secure})


def _scope_checked(fit):
    """``fit`` preceded by :func:`dpfast.budget.check_scope` on its ``budget=`` argument: a fit
    whose release could not be charged is refused before it reads data (signature kept)."""
    @functools.wraps(fit)
    def checked(self, *args, **kwargs):
        _budget.check_scope(kwargs.get("budget"))
        return fit(self, *args, **kwargs)

    checked._dp_scope_checked = True
    return checked


class PrivateEstimator(BaseEstimator):
    """Base of every dpfast estimator (see the module docstring for what it provides).

    Subclasses set ``_parameter_constraints`` and, for scikit-learn's estimator checks,
    ``_dp_expected_failed_checks``.  After a successful ``fit``: ``event_`` (the
    :class:`dpfast.accounting` event of the whole release, e.g. one ``SelfComposed`` for K
    one-vs-rest models), ``epsilon_`` / ``delta_`` (the guarantee the estimator states for it)
    and ``accountant_`` (which bound gave ``epsilon_``).
    """

    _parameter_constraints: dict = {}
    _accept_sparse: bool = False

    #: check name -> reason, for the checks that contradict DP by design (see the reasons above)
    _expected_failures: Mapping[str, str] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        fit = cls.__dict__.get("fit")
        if fit is not None and not getattr(fit, "_dp_scope_checked", False):
            cls.fit = _scope_checked(fit)

    @classmethod
    def _dp_expected_failed_checks(cls, estimator) -> Mapping[str, str]:
        return cls._expected_failures

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.sparse = self._accept_sparse
        return tags

    def __sklearn_clone__(self):
        return _clone_with_fresh_secure_streams(self)

    # ------------------------------------------------------------------ release record
    def _reset_fit(self) -> None:
        """Forget a previous fit (a refit that fails, e.g. on the budget, leaves no stale model)."""
        for key in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, key)

    def _charge(self, event, budget) -> None:
        """Charge the release's ``event`` before any noise is drawn; ``BudgetExceededError`` leaves
        the estimator unfitted and the randomness untouched."""
        try:
            _budget.charge(budget, event, type(self).__name__)
        except BaseException:
            self._reset_fit()  # n_features_in_ and the calibration were set while validating
            raise

    def _record_accounted(self, event, delta: float, accountant) -> None:
        """Record a release whose guarantee is an accountant's: ``epsilon_`` is
        ``make_accountant(accountant).compose(event).get_epsilon(delta)`` -- the accountant's value
        for the charged event, by construction -- and ``accountant_`` its name ("pld", "rdp").
        ``accountant``: a name (default configuration) or a configured accountant instance."""
        if isinstance(accountant, str):
            epsilon, name = _accounted_epsilon(event, float(delta), accountant)
        else:
            acc = make_accountant(accountant)
            epsilon, name = acc.compose(event).get_epsilon(delta), acc.name
        self._record_release(event, epsilon, delta, name)

    def _record_release(self, event, epsilon: float, delta: float, accountant: str | None) -> None:
        self.event_ = event
        self.epsilon_ = float(epsilon)
        self.delta_ = float(delta)
        self.accountant_ = accountant


@functools.lru_cache(maxsize=512)
def _accounted_epsilon(event, delta: float, accountant: str) -> tuple[float, str]:
    """``make_accountant(accountant).compose(event).get_epsilon(delta)`` and the accountant's name,
    remembered: events are immutable and hashable and a named accountant's default configuration is
    fixed, so the value is a function of the key.  (A PLD evaluation costs 15 ms - 0.5 s; refits with
    the same calibration -- cross-validation, the private search's calibration runs -- repeat it.)"""
    acc = make_accountant(accountant)
    return float(acc.compose(event).get_epsilon(delta)), acc.name


# The release is noisy by design: on the estimator checks' tiny data sets (tens to hundreds of
# rows) a private model need not reach a non-private score threshold, which scikit-learn's
# ``poor_score`` tag declares.  (Set here, after the mixin has made its tags.)
class DPClassifierMixin(ClassifierMixin):
    """scikit-learn's ``ClassifierMixin`` (``score`` = accuracy) with the ``poor_score`` tag."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True
        return tags


class DPRegressorMixin(RegressorMixin):
    """scikit-learn's ``RegressorMixin`` (``score`` = R^2) with the ``poor_score`` tag."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True
        return tags


#: the prediction methods a Dask collection is routed to, chunk by chunk (``fit`` goes to the
#: family's ``_dask_fit``; ``score`` is :meth:`DaskDispatchMixin.score`)
_DASK_PREDICTIONS = {
    "predict": _dask_utils.predict,
    "predict_proba": _dask_utils.predict_proba,
    "decision_function": _dask_utils.decision_function,
}


def _dask_routed(name: str, method):
    """``method`` (defined on an estimator class) preceded by the Dask dispatch: a Dask
    collection as first argument goes to the family's ``_dask_fit`` (``fit``) or to
    :mod:`dpfast._dask_utils` (predictions); anything else to ``method`` itself."""
    prediction = _DASK_PREDICTIONS.get(name)

    @functools.wraps(method)
    def routed(self, X, *args, **kwargs):
        if _dask_utils.is_dask_collection(X):
            if prediction is not None:
                return prediction(self, X, *args, **kwargs)
            return type(self)._dask_fit(self, X, *args, **kwargs)
        return method(self, X, *args, **kwargs)

    routed._dp_dask_routed = True
    return routed


class DaskDispatchMixin:
    """Dask collections (``dask.array.Array``, ``dask.dataframe.DataFrame``) as input of an
    estimator: ``fit``, ``predict``, ``predict_proba``, ``decision_function`` and ``score`` with
    such an ``X`` go to the Dask implementation, anything else to the in-memory code.

    ``fit`` goes to the family's ``_dask_fit(est, X, *args, **kwargs)`` (a class attribute:
    :func:`dpfast.linear_model._dask.fit`, :func:`dpfast.sgd._dask.fit`), which validates,
    calibrates and charges as the in-memory ``fit`` does; predictions and ``score`` are one
    lazy pass chunk by chunk over the released model (:mod:`dpfast._dask_utils`, the same for
    every family).  Whether ``X`` is a Dask collection is decided without importing dask
    (:func:`dpfast._dask_utils.is_dask_collection`).

    The routing wraps the methods each class defines (as scikit-learn's ``_SetOutputMixin`` wraps
    ``transform``), so a subclass's own ``fit`` is routed too.  It is installed before
    :class:`PrivateEstimator`'s hook wraps ``fit`` in the budget-scope check, whatever the order of
    the bases, so a Dask fit is scope-checked like any other.  List the mixin first among the
    bases: its ``score`` must come before scikit-learn's ``ClassifierMixin`` / ``RegressorMixin``.
    """

    #: ``fit`` of the family for Dask input, set by each family's base class (annotated only here:
    #: a value on the mixin would shadow the family's, which comes later in the MRO)
    _dask_fit: Callable

    def __init_subclass__(cls, **kwargs):
        # wrap before calling up: PrivateEstimator.__init_subclass__ (reached through super(),
        # whether it comes before or after this mixin in the MRO) then wraps the routed fit in
        # the budget-scope check, so the check runs first for Dask input as well
        for name in ("fit", *_DASK_PREDICTIONS):
            method = cls.__dict__.get(name)
            if method is not None and not getattr(method, "_dp_dask_routed", False):
                setattr(cls, name, _dask_routed(name, method))
        super().__init_subclass__(**kwargs)

    def score(self, X, y, sample_weight=None) -> float:
        """scikit-learn's ``score`` (mean accuracy for classifiers, R^2 for regressors); for a
        Dask ``X`` the same figure, computed in one pass (:func:`dpfast._dask_utils.score`)."""
        if _dask_utils.is_dask_collection(X):
            return _dask_utils.score(self, X, y, sample_weight=sample_weight)
        return super().score(X, y, sample_weight=sample_weight)
