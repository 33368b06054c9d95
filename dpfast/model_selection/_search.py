"""Private hyperparameter tuning that runs: random search with a random number of runs
(Papernot & Steinke, "Hyperparameter tuning with Renyi differential privacy", ICLR 2022)."""
from __future__ import annotations

import copy
import itertools
import math
import warnings
from numbers import Real
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.base import MetaEstimatorMixin, clone
from sklearn.utils import _safe_indexing, get_tags
from sklearn.utils._param_validation import HasMethods

from dpfast import accounting
from dpfast._base import (
    RANDOM_STATE,
    DPClassifierMixin,
    Interval,
    PrivateEstimator,
    StrOptions,
    check_fitted,
    expected_failed_checks,
    validate_X,
    validate_y,
)
from dpfast._safe_root import safe_root, smallest_safe_root
from dpfast._validation import check_delta, check_epsilon, check_label_set, check_real, public_classes
from dpfast.accounting import ApproxDP, Tuned, UnsupportedEventError, make_accountant
from dpfast.accounting.events import OneOf, composed
from dpfast.accounting.rdp import DEFAULT_ORDERS, rdp_curve, rdp_to_epsilon
from dpfast.accounting.tuning import (
    tnb_expected_count,
    tuning_rdp_poisson,
    tuning_rdp_truncated_negative_binomial,
)
from dpfast.budget import charge, detached
from dpfast.mechanisms import laplace_noise
from dpfast.preprocessing import pipeline_event
from dpfast.random import SecureRandom, check_random_state, is_secure

__all__ = ["PrivateRandomSearch", "sample_run_count"]

_DISTRIBUTIONS = ("poisson", "truncated_negative_binomial")
#: largest n_runs_mean served: the search fits about n_runs_mean models one after the other, so a
#: larger mean (2**31: billions of fits) is a hang, not a search; refused before the charge
MAX_RUNS_MEAN = 1e6
# one message for the two ways nothing is released (told apart, they would say whether K = 0)
_NO_MODEL = ("the search released no model (no run was drawn -- Poisson, probability exp(-n_runs_mean) -- "
             "or every run diverged)")


# ---------------------------------------------------------------------------- the run count K
def _tnb_gamma(mean: float, eta: float) -> float:
    """The smallest gamma in (0, 1) with E[K] <= mean under D_{eta, gamma} (E[K] decreases in
    gamma from infinity at 0 to 1 at 1), by the one safe-side search; the privacy bound is then
    computed at that gamma, so the search's tolerance never touches the guarantee."""
    def excess(g: float) -> float:
        return math.log(tnb_expected_count(eta, g)) - math.log(mean)

    hi = 1.0 - 1e-12
    if excess(hi) > 0:
        raise ValueError(f"n_runs_mean={mean!r} is too small for eta={eta!r}")
    g = safe_root(excess, 0.5, rtol=1e-13, lo=1e-300, hi=hi)
    if excess(g) > 0 or g <= 1e-300:
        raise ValueError(f"n_runs_mean={mean!r} is too large for eta={eta!r}")
    return g


def sample_run_count(distribution: str, mean: float, eta: float, gamma: Optional[float], gen) -> int:
    """Draw K: Poisson(mean), or the truncated negative binomial D_{eta,gamma} by inversion of
    its CDF, P[K = 1] = (1-gamma) eta / (gamma^-eta - 1) (eta = 0: (1-gamma)/log(1/gamma)),
    P[K = k+1] = P[K = k] (1-gamma)(k + eta)/(k + 1) (Papernot & Steinke 2022, Sec. 2).
    ``mean`` is read for Poisson only, ``eta`` > -1 and 0 < ``gamma`` < 1 for the other; checked
    before the draw (check_real: a number beyond a double is a ValueError, not an OverflowError)."""
    if distribution == "poisson":
        return int(gen.poisson(check_real(mean, "mean")))
    if distribution != "truncated_negative_binomial":
        raise ValueError(f"distribution must be one of {_DISTRIBUTIONS}, got {distribution!r}")
    eta, gamma = check_real(eta, "eta"), check_real(gamma, "gamma")
    if not (-1.0 < eta < math.inf):
        raise ValueError(f"eta must be finite and > -1, got {eta!r}")
    if not 0.0 < gamma < 1.0:
        raise ValueError(f"gamma must be in (0, 1), got {gamma!r}")
    L = math.log(gamma)
    if eta == 0.0:
        p = (1.0 - gamma) / -L
    else:
        p = (1.0 - gamma) * eta / math.expm1(-eta * L)
    u = float(gen.random())
    k, cdf = 1, p
    while cdf < u:
        p *= (1.0 - gamma) * (k + eta) / (k + 1)
        k += 1
        cdf += p
        if p == 0.0 or k > 10 ** 8:  # the remaining mass is below double resolution
            break
    return k


# ---------------------------------------------------------------------------- events of a fit
def _privacy_params(est, suffix: str) -> dict:
    """The (deep) parameters named ``suffix`` or ``*__suffix`` that are set (not None)."""
    return {k: v for k, v in est.get_params(deep=True).items()
            if (k == suffix or k.endswith("__" + suffix)) and v is not None}


def _placeholder_column(dtype, n: int):
    """``n`` copies of one public value of ``dtype``: 0 (False) for numbers and booleans, the
    first category of a categorical dtype (all missing when it has none), "" for strings and
    objects, missing values otherwise.  Never a value read from the data."""
    import pandas as pd

    if isinstance(dtype, pd.CategoricalDtype):
        if len(dtype.categories):
            return pd.Categorical.from_codes(np.zeros(n, dtype=np.int64), dtype=dtype)
        return pd.Categorical([None] * n, dtype=dtype)
    for fill in ((0,) if pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype) else ("",)):
        try:
            return pd.Series([fill] * n, dtype=object).astype(dtype)
        except (TypeError, ValueError):
            pass
    return pd.Series([None] * n, dtype=object).astype(dtype)


def _dummy(X, Xv, n: int):
    """``n`` public placeholder rows shaped like the private ``X``: a DataFrame keeps its columns
    (names, order, dtypes; a pipeline may select columns by name), a sparse matrix stays a CSR
    matrix, an array keeps its dtype.  Every entry is a fixed public value (zero, see
    :func:`_placeholder_column`), so nothing computed from the dummy depends on a private row."""
    if hasattr(X, "iloc"):
        import pandas as pd

        cols = {i: _placeholder_column(dt, n) for i, dt in enumerate(X.dtypes)}
        out = pd.DataFrame(cols, index=pd.RangeIndex(n))
        out.columns = X.columns
        return out
    if sp.issparse(Xv):
        return sp.csr_matrix((n, Xv.shape[1]), dtype=Xv.dtype)
    return np.zeros((n, Xv.shape[1]), dtype=Xv.dtype)


def _public_labels(est) -> np.ndarray:
    """The public label set of ``est`` (its last ``classes``/``*__classes`` parameter set, else
    ``[0, 1]``, read by :func:`dpfast._validation.public_classes` as the fit reads it: ``[1, "a"]``
    stays numbers and strings, not NumPy's ``["1", "a"]``, whose "1" no fit accepts): never the
    data's labels."""
    classes = [v for k, v in est.get_params(deep=True).items()
               if (k == "classes" or k.endswith("__classes")) and v is not None]
    return public_classes(classes[-1] if classes else None)


def _padded(X_tr, y_tr: np.ndarray, pad, label):
    """The training part plus the one public placeholder row ``pad`` (:func:`_dummy`) labelled
    ``label``: a fixed row, so add/remove neighbours stay add/remove neighbours (the fit's
    guarantee holds), and the fit is defined when every row drew the validation part."""
    if hasattr(X_tr, "iloc"):
        import pandas as pd

        X_out = pd.concat([X_tr, pad], ignore_index=True)
    elif sp.issparse(X_tr):
        X_out = sp.vstack([X_tr, pad], format="csr")
    else:
        X_out = np.concatenate([X_tr, pad])
    tail = np.asarray([label])
    if (y_tr.dtype.kind in "US") != (tail.dtype.kind in "US"):
        # a number next to strings (classes=[1, "a"], string labels) or a string next to numbers:
        # NumPy's promotion would make the label a string ("1") outside the label set, refused by
        # every run after the charge; objects keep each label's type
        return X_out, np.concatenate([y_tr.astype(object), np.array([label], dtype=object)])
    return X_out, np.concatenate([y_tr, tail])  # (promoted: a longer label is kept whole)


def _rdp_curve(event, orders: np.ndarray) -> np.ndarray:
    return np.asarray(rdp_curve(event, orders), dtype=np.float64)


def _expand(param_distributions) -> list[dict]:
    """All candidates of a dict (or list of dicts) of lists: the finite support of the draw."""
    grids = [param_distributions] if isinstance(param_distributions, Mapping) else list(param_distributions)
    if not grids:
        raise ValueError("param_distributions must be a dict of lists or a non-empty list of such dicts")
    out = []
    for g in grids:
        if not isinstance(g, Mapping):
            raise TypeError("param_distributions must be a dict of lists or a list of such dicts")
        keys = sorted(g)
        for k in keys:
            if isinstance(g[k], (str, bytes)) or not isinstance(g[k], Sequence) or len(g[k]) == 0:
                raise ValueError(f"param_distributions[{k!r}] must be a non-empty list of values "
                                 "(continuous distributions are not supported: the guarantee needs "
                                 "the privacy of every candidate)")
        out.extend(dict(zip(keys, vals)) for vals in itertools.product(*(g[k] for k in keys)))
    return out


class PrivateRandomSearch(MetaEstimatorMixin, DPClassifierMixin, PrivateEstimator):
    """Private random search over hyperparameters (Papernot & Steinke 2022).

    The algorithm (all randomness except the fits' and scores' noise is independent of the data):

    1. each row is put in the validation part with probability ``validation_fraction``
       (independent coins, one per row; the analysis, like every train/validation analysis,
       couples the coins with the records: a record keeps its coin in the neighbouring data
       set, so adding or removing it changes one of the two parts by that record only);
    2. K, the number of runs, is drawn from Poisson(``n_runs_mean``) or from the truncated
       negative binomial D_{eta,gamma} with mean ``n_runs_mean``;
    3. each run (the base algorithm Q) draws a candidate uniformly from ``param_distributions``
       (a dict of lists, or a list of such dicts, each dict equally likely, as in
       scikit-learn's ``ParameterSampler``), fits a clone of ``estimator`` with those parameters
       and ``epsilon = (1 - score_fraction) e``, ``delta = delta`` on the training part plus
       one public placeholder row (zeros, or X's dtypes' fixed values, labelled with the first
       label of the public label set: a fixed row keeps add/remove neighbours neighbours, and
       the fit is defined when every row drew the validation part -- probability
       ``validation_fraction^n``, so refusing then would reveal ``n``) (its own
       DP guarantee), and scores it on the validation part by the number of correct predictions
       plus Laplace(1 / (score_fraction e)) noise (sensitivity 1 under add/remove: an
       ``score_fraction e``-DP count);
    4. the run with the highest noisy score is released (estimator, parameters, noisy score).

    Guarantee: ``(epsilon, delta)``-DP under add/remove neighbours (the budget one charge
    covers).  Q's Renyi DP at order lambda is at most the largest, over the candidates, of the
    sum of the fit's RDP and the Laplace score's RDP (composition; Renyi divergence is jointly
    quasi-convex, van Erven & Harremoes 2014, Thm. 13, so drawing the candidate at random
    cannot exceed the worst candidate).  The tuned algorithm's RDP is then Theorem 2
    (truncated negative binomial) or Theorem 6 (Poisson) of Papernot & Steinke 2022
    (:mod:`dpfast.accounting.tuning`), converted to (epsilon, delta) by Canonne, Kamath &
    Steinke 2020, Prop. 12.  The per-run e is the largest for which that total is <= epsilon,
    found by :func:`dpfast._safe_root.smallest_safe_root` (never on the unsafe side).  The
    fits' RDP curves are read from the events the clones would charge, probed on public dummy
    data with the (padded) training part's number of rows and X's columns and dtypes (a DataFrame stays
    a DataFrame, so a pipeline may select columns by name; no private row is read to compute
    them).  A bad public parameter of the estimator raises there, before the charge.  So do
    the schema checks a run would make on the private data after the charge (with a
    probability that depends on K): labels outside a candidate's ``classes`` are refused
    before the charge, as a standalone fit refuses them, and ``row_norm="check"`` and
    ``handle_unknown="error"`` are refused outright.

    What the guarantee covers (Papernot & Steinke's theorems bound the law of the released run
    alone; the number of runs K is internal to the algorithm): ``best_params_``,
    ``best_score_``, and what ``best_estimator_``'s own docstring says its fit releases
    privately (e.g. ``coef_``, ``intercept_``, ``classes_``, its ``event_`` and calibration), plus
    everything computed from public parameters alone (``event_``, ``epsilon_``, ``delta_``,
    ``run_epsilon_``, ``rdp_curve_``, ...).  K itself is released nowhere: no attribute, ledger
    entry (one charge, made before K is drawn), warning or log depends on it, beyond the
    theorem's own output "no model" for a Poisson K = 0 (one output with "every run
    diverged").  The released estimator's ``random_state`` is the one it was given, never the
    stream that drew its noise (holding that stream would let anyone subtract the noise).

    Not covered, as for a standalone fit: the diagnostics that ``best_estimator_``'s docstring
    lists as computed from the private data without noise (``n_iter_``, ``grad_norm_`` and
    ``solver_`` of the linear models; ``loss_history_``, ``clipped_fraction_`` and
    ``train_seconds_`` of DP-SGD; ...).  They describe the released run only (not K), and are
    kept for the data's owner, as the estimator keeps them: do not publish them.  Nor is the
    search's running time, which grows with K.  ``random_state`` is secret: whoever holds the
    seed or generator can replay every draw (the split, K, the noise); a generator passed in
    advances by an amount that depends on K, so keep it private too.  Nor is the number of rows
    n: the fits' events are probed with the (padded) training part's size (DP-SGD's sample rate
    ``batch_size / n_fit``, as for a standalone fit, so the charged event depends on n), and a
    ``batch_size`` above that size is refused.  Under add/remove neighbours with a private n,
    search with an estimator whose event does not depend on n, or data sets whose size is
    public.  The split that puts every row in the validation part (probability
    ``validation_fraction ** n``) is not refused: the public placeholder row keeps the fit
    defined (step 3).

    Parameters
    ----------
    estimator : a dpfast estimator with ``epsilon`` and ``delta`` parameters whose ``fit``
        accepts ``budget=`` and charges an event with an RDP curve; a classifier (``predict``).
    param_distributions : dict of lists, or list of such dicts
        The candidates (finite: the guarantee needs each candidate's privacy).
    epsilon, delta : float
        The total budget of the search.
    n_runs_mean : float
        E[K] (>= 1 for Poisson, where Theorem 6 needs mu >= 1; at most :data:`MAX_RUNS_MEAN` = 1e6,
        as about that many models are fitted).
    distribution : {"poisson", "truncated_negative_binomial"}
    eta : float
        eta > -1 of the truncated negative binomial (0: the logarithmic distribution).
    score_fraction : float
        Share of the per-run epsilon spent on the noisy validation score, in (0, 1).
    validation_fraction : float
        Probability that a row goes to the validation part, in (0, 1).
    random_state : None, int, numpy Generator or dpfast.random.SecureRandom
        Randomness of the split, of K, of the candidates, of the scores and (through seeds
        drawn from it) of the fits.  With a ``SecureRandom`` (or for a step whose
        ``random_state`` is one) every run draws from a fresh ``SecureRandom`` instead of a
        seeded stream, and the split's coins come from a fresh one too (a secure generator
        cannot be copied to draw them before the charge).

    Attributes
    ----------
    best_estimator_, best_params_, best_score_ : the released run (``best_score_`` is the noisy
        count of correct validation predictions); None when no model is released (Poisson K
        = 0, probability ``exp(-n_runs_mean)``, or every run diverged: one output, with one
        warning).  There is no ``n_runs_``: K is not released.  A run whose fit raises
        ``FloatingPointError`` (DP-SGD's divergence, a function of that run's own private
        release) counts as a run with score -inf instead of aborting the search.
    run_epsilon_ : e, the per-run epsilon (fit + score).
    event_ : the tuned event, ``dpfast.accounting.Tuned`` of the per-run event (of
        :class:`~dpfast.model_selection.OneOf` the candidates' per-run events when they differ).
    epsilon_, delta_ : the guarantee reached (epsilon_ <= epsilon): the RDP accountant's epsilon
        for ``event_`` at ``delta_``.
    accountant_ : ``"rdp"`` (Papernot & Steinke's RDP bound, converted as above).
    n_features_in_, feature_names_in_ : as in scikit-learn.
    rdp_orders_, rdp_curve_ : the tuned RDP curve.
    """

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict", "get_params"])],
        "param_distributions": [dict, list],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "n_runs_mean": [Interval(Real, 0, None, closed="neither")],
        "distribution": [StrOptions(set(_DISTRIBUTIONS))],
        "eta": [Interval(Real, -1, None, closed="neither")],
        "score_fraction": [Interval(Real, 0, 1, closed="neither")],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "random_state": RANDOM_STATE,
    }

    @classmethod
    def _dp_expected_failed_checks(cls, search) -> dict:
        # the tuned estimator's declared failures apply to the search that releases one of its
        # fits (except the sample-weight checks: the search's fit takes no sample_weight)
        inner = search.estimator
        out = {k: v for k, v in (expected_failed_checks(inner) if isinstance(inner, PrivateEstimator) else {}).items()
               if "sample_weight" not in k}
        out["check_classifiers_one_label"] = (
            "the check requires predicting the only training label on every row; each run is a private fit on "
            "the training part (a fraction of the check's few rows) at a fraction of epsilon, whose noise can "
            "move the decision boundary across some of them")
        return out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # the runs get X as it is: sparse input is supported iff the tuned estimator supports it
        tags.input_tags.sparse = get_tags(self.estimator).input_tags.sparse
        return tags

    def __init__(self, estimator: Any, param_distributions: Any, epsilon: float = 1.0, delta: float = 1e-5, *,
                 n_runs_mean: float = 10.0, distribution: str = "poisson", eta: float = 0.0,
                 score_fraction: float = 0.1, validation_fraction: float = 0.2, random_state: Any = None):
        self.estimator = estimator
        self.param_distributions = param_distributions
        self.epsilon = epsilon
        self.delta = delta
        self.n_runs_mean = n_runs_mean
        self.distribution = distribution
        self.eta = eta
        self.score_fraction = score_fraction
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    # ------------------------------------------------------------------ validation
    def _check_params(self):
        eps = check_epsilon(self.epsilon, allow_array=False)
        # (called after _validate_params: types and open ranges are already checked)
        delta = check_delta(self.delta, allow_zero=False)
        mean = check_epsilon(self.n_runs_mean, allow_array=False, name="n_runs_mean")
        if mean > MAX_RUNS_MEAN:
            raise ValueError(f"n_runs_mean must be <= {MAX_RUNS_MEAN:g} (about that many models are fitted), "
                             f"got {mean!r}")
        if self.distribution == "poisson":
            if mean < 1:
                raise ValueError(f"n_runs_mean must be >= 1 for distribution='poisson' (Theorem 6), got {mean!r}")
            gamma = None
            eta = None
        else:
            eta = check_real(self.eta, "eta")  # (not float(): a Fraction beyond a double)
            if mean <= 1:
                raise ValueError(f"n_runs_mean must be > 1 for the truncated negative binomial (K >= 1), got {mean!r}")
            gamma = _tnb_gamma(mean, eta)
        eps_p = _privacy_params(self.estimator, "epsilon")
        if not eps_p or not all(isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool)
                                and 0 < float(v) < math.inf for v in eps_p.values()):
            raise TypeError("estimator must be a dpfast estimator (or a pipeline of them) with positive "
                            f"'epsilon' parameters, got {eps_p!r}")
        candidates = _expand(self.param_distributions)
        for p in candidates:
            bad = [k for k in p if k.split("__")[-1] in ("epsilon", "delta", "random_state")]
            if bad:
                raise ValueError(f"param_distributions may not set {bad}: the search sets them")
            # row_norm="check" refuses on private data (a row beyond norm_bound) after the charge;
            # inside the search whether such a candidate is drawn depends on the run count K, so
            # the refusal would be a K-dependent output outside the tuning theorem: refuse it here
            conf = clone(self.estimator).set_params(**p).get_params(deep=True)
            checking = sorted(k for k, v in conf.items() if k.split("__")[-1] == "row_norm" and v == "check")
            if checking:
                raise ValueError(f"{checking} = 'check' can refuse on the private data, with a probability that "
                                 "depends on the number of runs: use row_norm='clip' (the default) inside "
                                 "PrivateRandomSearch")
            # the same for an encoder that refuses a value outside its categories: a standalone
            # pipeline refuses before its classifier's charge, a run here after the search's
            # (in its fit or in scoring the validation part), so only when K >= 1
            erroring = sorted(k for k, v in conf.items() if k.split("__")[-1] == "handle_unknown" and v == "error")
            if erroring:
                raise ValueError(f"{erroring} = 'error' can refuse on the private data, with a probability that "
                                 "depends on the number of runs: use handle_unknown='ignore' (the default) "
                                 "inside PrivateRandomSearch")
        return eps, delta, mean, eta, gamma, candidates

    def _check_labels(self, candidates, y: np.ndarray) -> None:
        """Refuse, before the charge, labels outside a candidate's public label set (its
        ``classes``/``*__classes`` parameter, read as :func:`_public_labels` reads it; None is
        ``[0, 1]``), as a standalone fit does before its own charge.  Inside the runs the refusal
        would come after the charge, only when the offending row drew the training part and
        K >= 1: a K-dependent output outside the tuning theorem.  Estimators without a
        ``classes`` parameter declare no label set here and are not checked."""
        for p in candidates:
            conf = clone(self.estimator).set_params(**p).get_params(deep=True)
            keys = [k for k in conf if k == "classes" or k.endswith("__classes")]
            if keys:
                set_ = [conf[k] for k in keys if conf[k] is not None]
                check_label_set(y, set_[-1] if set_ else None)

    # ------------------------------------------------------------------ accounting
    def _configured(self, params: dict, e: float, delta: float):
        """A clone with ``params`` whose epsilon parameters share (1 - score_fraction) e in the
        proportions of the estimator's own values (all steps of a pipeline), and whose positive
        delta parameters are ``delta``."""
        est = clone(self.estimator).set_params(**params)
        eps_p = _privacy_params(self.estimator, "epsilon")
        total = sum(float(v) for v in eps_p.values())
        upd = {k: (1.0 - float(self.score_fraction)) * e * float(v) / total for k, v in eps_p.items()}
        upd.update({k: delta for k, v in _privacy_params(self.estimator, "delta").items() if float(v) > 0})
        return est.set_params(**upd)

    def _fit_event(self, est, Xd):
        """The event of ``est.fit`` on the training part: ``est`` is fitted on the public dummy
        ``Xd`` (:func:`_dummy`: the training part's number of rows, X's columns and dtypes, fixed
        values; labels cycling through the public label set) with no budget reachable
        (:func:`dpfast.budget.detached`), and the fitted steps' ``event_`` are composed by
        :func:`dpfast.pipeline_event`, which refuses a step that learns without privacy.
        No private row is read."""
        yd = np.resize(_public_labels(est), Xd.shape[0])
        with detached():
            est.fit(Xd, yd)
        event = pipeline_event(est)
        if event is None:
            raise TypeError(f"{type(est).__name__} released nothing private (no event_): it cannot be tuned privately")
        return event

    def _run_curve(self, candidates, e, delta, Xd, orders):
        """Q's RDP bound at per-run epsilon e: max over candidates of fit + score; the events."""
        eps_score = float(self.score_fraction) * e
        if not (eps_score > 0 and math.isfinite(1.0 / eps_score)):
            # a public-parameter failure (epsilon so small that the score's share underflows):
            # raised while calibrating, before the charge and before any draw
            raise ValueError(f"epsilon={self.epsilon!r} is too small: the score's share "
                             f"score_fraction * epsilon per run underflows to {eps_score!r}")
        score = accounting.Laplace(scale=1.0 / eps_score, sensitivity=1.0)
        s = _rdp_curve(score, orders)
        curve = np.full(orders.shape, -np.inf)
        events = []
        for p in candidates:
            ev = self._fit_event(self._configured(p, e, delta), Xd)
            if ev not in events:
                events.append(ev)
                curve = np.maximum(curve, _rdp_curve(ev, orders) + s)
        return curve, [composed([ev, score]) for ev in events]

    def _tuned(self, curve, orders, mean, eta, gamma):
        if self.distribution == "poisson":
            return tuning_rdp_poisson(orders, curve, mean)
        return tuning_rdp_truncated_negative_binomial(orders, curve, eta, gamma)

    def _calibrate(self, candidates, eps, delta, mean, eta, gamma, X, Xv, n_train):
        """The largest safe per-run epsilon e; the per-run events and tuned curve at e.

        The fits are probed on public dummy data (:func:`_dummy`) of the training part's size.
        To save time the search probes on 8 dummy rows instead when the events there equal those
        of the training part's size (checked at the start and again at the answer, where the
        charged events are always those of the real size); when they differ, or the small probe
        cannot be fitted at all (e.g. DP-SGD with ``batch_size`` > 8), on the real size.  The
        real-size probe runs first, so a bad public parameter raises here, before the charge."""
        orders = DEFAULT_ORDERS
        e0 = eps / 4.0
        dummies = {n_train: _dummy(X, Xv, n_train)}
        full_events = self._run_curve(candidates, e0, delta, dummies[n_train], orders)[1]
        probe = n_train
        n_small = min(n_train, 8)
        if n_small < n_train:
            dummies[n_small] = _dummy(X, Xv, n_small)
            try:
                if self._run_curve(candidates, e0, delta, dummies[n_small], orders)[1] == full_events:
                    probe = n_small
            except Exception:  # noqa: BLE001 - the small probe is an optimisation only; the
                pass  # real-size probe above has succeeded, so the search goes on at that size

        def total(e, at):
            curve, _ = self._run_curve(candidates, e, delta, dummies[at], orders)
            return rdp_to_epsilon(orders, self._tuned(curve, orders, mean, eta, gamma), delta)[0]

        # e = e_max / (1 + x): the excess total(e) - eps does not increase in x, and the smallest
        # safe x is the largest safe per-run epsilon.  (A run costs at least its own epsilon, so
        # e_max = 64 eps is never the answer in practice; it keeps every probe's calibration
        # in a sane range.  If it were, it would still be a safe one.)
        e_max = 64.0 * eps
        for at in dict.fromkeys((probe, n_train)):
            # the one safe-side search: x within rtol of the unsafe side, excess evaluated <= 0 there
            x = smallest_safe_root(lambda x: total(e_max / (1.0 + x), at) - eps, 1.0, xtol=1e-12, rtol=1e-6)
            e = e_max / (1.0 + x)
            curve, events = self._run_curve(candidates, e, delta, dummies[n_train], orders)
            if at == n_train or events == self._run_curve(candidates, e, delta, dummies[at], orders)[1]:
                break
        tuned = self._tuned(curve, orders, mean, eta, gamma)
        return e, events, orders, tuned, rdp_to_epsilon(orders, tuned, delta)[0]

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, *, budget: Any = None) -> "PrivateRandomSearch":
        """Run the search (see the class docstring); charges ``event_`` to ``budget`` first."""
        self._validate_params()  # declarative constraints, before any private value is read
        self._reset_fit()
        eps, delta, mean, eta, gamma, candidates = self._check_params()
        # validated (2-d, finite, n_features_in_ / feature_names_in_; any sparse format becomes
        # CSR, dtypes are kept); a DataFrame is passed on as it is (rows selected by
        # _safe_indexing): a pipeline of the candidates may need its columns' names or dtypes
        Xv = validate_X(self, X, reset=True, accept_sparse=True, dtype=None)
        X = X if hasattr(X, "iloc") else Xv
        n_rows, n_cols = Xv.shape
        ya = validate_y(self, y, n_rows, classifier=True)
        self._check_labels(candidates, ya)  # (schema: before the charge, as a standalone fit)
        gen = check_random_state(self.random_state)
        secure = is_secure(gen)
        # The split (data-independent coins) fixes the training part's size, which the fits'
        # events may depend on, so it is drawn before the charge: from a copy of the generator,
        # so that a refused charge leaves it untouched (the same coins are drawn again from the
        # generator itself after the charge); a secure generator cannot be copied, so its
        # search draws the coins from a fresh secure stream instead (gen is not touched).
        val = (SecureRandom() if secure else copy.deepcopy(gen)).random(n_rows) < float(self.validation_fraction)
        # Every fit gets the training part plus ONE public placeholder row (_padded): the part is
        # empty with probability validation_fraction^n, and refusing then (as the search did)
        # is a refusal whose probability depends on the private n.  No split law avoids an
        # empty part while keeping the add/remove coupling (the training part of one row must
        # be that row, and inductively nothing would ever be validated); a fixed extra row keeps
        # neighbours neighbours.  The events are probed on a part of that size.
        n_fit = n_rows - int(np.count_nonzero(val)) + 1
        e, events, orders, tuned, _ = self._calibrate(candidates, eps, delta, mean, eta, gamma, X, Xv,
                                                                n_fit)
        kw = {"mean": mean} if self.distribution == "poisson" else {"eta": eta, "gamma": gamma}
        event = Tuned(events[0] if len(events) == 1 else OneOf(tuple(events)), distribution=self.distribution, **kw)
        # the guarantee reported (and charged to a budget whose accountant cannot take the event)
        # is the RDP accountant's for the event itself: Papernot & Steinke's bound through the
        # accounting registry, the bound the search above calibrated with
        eps_reached = float(make_accountant("rdp").compose(event).get_epsilon(delta))
        if not eps_reached <= eps:  # (the same bound: never expected) refused before the charge
            raise ValueError(f"the tuned event's epsilon {eps_reached!r} exceeds epsilon={eps!r}")
        self._charge_tuned(budget, event, eps_reached, delta)
        self._record_release(event, eps_reached, delta, "rdp")
        self.run_epsilon_, self.rdp_orders_, self.rdp_curve_ = e, orders, tuned

        if not secure:
            gen.random(n_rows)  # the coins drawn above, now from the generator itself
        tr, va = np.flatnonzero(~val), np.flatnonzero(val)
        X_tr, X_va = _safe_indexing(X, tr), _safe_indexing(X, va)
        pad = _dummy(X, Xv, 1)  # the public placeholder row (fixed values, X's schema)
        # K is internal to the algorithm of Papernot & Steinke (their theorems bound the law of
        # the best run alone): it is kept in this local and released nowhere (no attribute,
        # ledger entry, warning or log depends on it; see the class docstring).
        k = sample_run_count(self.distribution, mean, eta, gamma, gen)
        b_score = 1.0 / (float(self.score_fraction) * e)
        best = (-math.inf, None, None)
        for _ in range(k):
            params = candidates[int(gen.integers(len(candidates)))]
            est = self._configured(params, e, delta)
            public = {k_: v for k_, v in est.get_params(deep=True).items()
                      if k_ == "random_state" or k_.endswith("__random_state")}
            seeds = {k_: int(gen.integers(2 ** 63)) for k_ in sorted(public)}
            # a secure search, or a step whose random_state is a SecureRandom (its clone holds a
            # fresh one), gets a fresh secure stream instead of a seeded one
            est.set_params(**{k_: SecureRandom() if secure or isinstance(public[k_], SecureRandom) else s_
                              for k_, s_ in seeds.items()})
            try:
                with detached():  # the runs are inside the tuned event charged above
                    est.fit(*_padded(X_tr, ya[tr], pad, _public_labels(est)[0]))
            except FloatingPointError:
                # A diverged run (DP-SGD's non-finite parameters) is a function of that run's own
                # private release, so "diverged" is the run's output, scored -inf (never preferred
                # to a model).  Raising would reveal a run that is not released, with a
                # probability that grows with K.
                continue
            # the stream that drew the run's noise is not released: whoever held its seed could
            # subtract the noise; the released model carries the public random_state it was given
            est.set_params(**public)
            # an empty validation part scores 0 correct (the count is still sensitivity 1)
            correct = float(np.count_nonzero(est.predict(X_va) == ya[va])) if va.size else 0.0
            noisy = correct + float(laplace_noise(b_score, 1, rng=gen)[0])
            if noisy > best[0]:
                best = (noisy, est, params)
        self.best_score_, self.best_estimator_, self.best_params_ = best if best[1] is not None else (None, None, None)
        if best[1] is None:  # no run (Poisson K = 0) and "every run diverged" are one output
            warnings.warn(_NO_MODEL, RuntimeWarning, stacklevel=2)
        return self

    def _charge_tuned(self, budget, event, eps_reached, delta):
        """Charge the tuned event; a budget whose accountant cannot account it (the PLD
        accountant: Papernot-Steinke is an RDP statement) is charged the (epsilon, delta) it
        certifies instead, as ``ApproxDP`` (refused charges change nothing, so the retry is safe)."""
        try:
            try:
                charge(budget, event, type(self).__name__)
            except UnsupportedEventError:
                charge(budget, ApproxDP(eps_reached, delta), type(self).__name__)
        except BaseException:
            self._reset_fit()  # refused: no stale model, no n_features_in_ of this call
            raise

    # ------------------------------------------------------------------ released model
    def _check_released(self) -> None:
        check_fitted(self)
        if self.best_estimator_ is None:
            raise ValueError(_NO_MODEL)

    def predict(self, X):
        self._check_released()
        return self.best_estimator_.predict(X)

    def predict_proba(self, X):
        self._check_released()
        return self.best_estimator_.predict_proba(X)

    def decision_function(self, X):
        self._check_released()
        return self.best_estimator_.decision_function(X)

    @property
    def classes_(self):
        self._check_released()
        return self.best_estimator_.classes_
