"""dpfast.model_selection.PrivateRandomSearch (issue 11 item 6, Papernot & Steinke 2022).

The guarantee is checked with the accountants (an independent path from the search's own
arrays), the run-count laws against scipy's negative binomial / logarithmic distributions, and
the budget behaviour against the contract (charge first, nothing drawn on refusal).
"""
import math

import numpy as np
import pytest
from _search_models import GRID, NoisyCentroid, _data  # noqa: E402
from scipy import stats
from sklearn.base import clone

from dpfast import accounting
from dpfast._base import PrivateEstimator
from dpfast.accounting.rdp import rdp_curve
from dpfast.accounting.tuning import tnb_expected_count
from dpfast.budget import BudgetExceededError, PrivacyBudget
from dpfast.calibrate import gaussian_sigma
from dpfast.model_selection import OneOf, PrivateRandomSearch, sample_run_count


@pytest.mark.parametrize("kw", [dict(), dict(distribution="truncated_negative_binomial", eta=1.0),
                                dict(distribution="truncated_negative_binomial", eta=0.0),
                                dict(distribution="truncated_negative_binomial", eta=-0.5)])
def test_guarantee_by_the_rdp_accountant_and_near_optimal_per_run_epsilon(kw):
    X, y = _data()
    s = PrivateRandomSearch(NoisyCentroid(), GRID, epsilon=1.0, delta=1e-5, random_state=0, **kw).fit(X, y)
    assert isinstance(s.event_, accounting.Tuned)
    e = s.run_epsilon_
    eps_acc = accounting.RDPAccountant().compose(s.event_).get_epsilon(1e-5)
    assert eps_acc <= 1.0 and s.epsilon_ <= 1.0
    assert eps_acc == pytest.approx(s.epsilon_, rel=1e-6)
    # the per-run event: the fit at 0.9 e, the Laplace count at 0.1 e
    fit_ev, score_ev = s.event_.event.events
    assert score_ev == accounting.Laplace(scale=1 / (0.1 * e), sensitivity=1.0)
    sig = float(gaussian_sigma(0.9 * e, 1e-5, 2.0))
    assert fit_ev.noise_multiplier == pytest.approx(sig / 2.0, rel=1e-12)
    # a slightly larger per-run epsilon would break the budget (the answer is the largest)
    e2 = e * 1.001
    sig2 = float(gaussian_sigma(0.9 * e2, 1e-5, 2.0))
    base2 = accounting.Composed((accounting.Gaussian(noise_multiplier=sig2 / 2.0, sensitivity=2.0),
                                 accounting.Laplace(scale=1 / (0.1 * e2), sensitivity=1.0)))
    t = s.event_
    tuned2 = accounting.Tuned(base2, distribution=t.distribution, mean=t.mean, eta=t.eta, gamma=t.gamma)
    assert accounting.RDPAccountant().compose(tuned2).get_epsilon(1e-5) > 1.0
    if kw:
        assert tnb_expected_count(t.eta, t.gamma) == pytest.approx(10.0, rel=1e-9)


def test_poisson_bound_matches_theorem_6_by_hand():
    """Theorem 6: eps'(lambda) = eps(lambda) + mu delta_hat + log(mu)/(lambda - 1), delta_hat the
    base's delta at eps_hat = log(1 + 1/(lambda - 1)); computed here from closed forms."""
    X, y = _data()
    s = PrivateRandomSearch(NoisyCentroid(), {"sign": [1.0]}, epsilon=2.0, delta=1e-6, n_runs_mean=5.0,
                            random_state=0).fit(X, y)
    fit_ev, score_ev = s.event_.event.events
    z, b = fit_ev.noise_multiplier, score_ev.scale
    lam = 8.0
    a = 1 / b  # Laplace epsilon (sensitivity 1)

    def base_rdp(l):  # Gaussian alpha/(2 z^2) + Laplace (Mironov 2017, Prop. 6)
        lap = (1 / (l - 1)) * math.log(l / (2 * l - 1) * math.exp((l - 1) * a)
                                       + (l - 1) / (2 * l - 1) * math.exp(-l * a))
        return l / (2 * z * z) + lap

    orders = s.rdp_orders_
    r = np.array([base_rdp(l) for l in orders])
    eps_hat = math.log1p(1 / (lam - 1))
    # the improved RDP -> delta conversion over the grid (Canonne, Kamath & Steinke 2020, Prop. 12),
    # and delta <= sqrt(1 - e^-r) (Pinsker / Bretagnolle-Huber via KL <= RDP)
    with np.errstate(over="ignore"):
        logd = ((orders - 1) * (r - eps_hat) + (orders - 1) * np.log1p(-1 / orders) - np.log(orders))
        logd = np.minimum(logd, 0.5 * np.log1p(-np.exp(-r)))
    d_hat = float(np.exp(np.min(logd)))
    expected = base_rdp(lam) + 5.0 * min(d_hat, 1.0) + math.log(5.0) / (lam - 1)
    k = int(np.nonzero(orders == lam)[0][0])
    assert s.rdp_curve_[k] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("eta", [2.0, 0.5, 0.0, -0.5])
def test_truncated_negative_binomial_run_count_law(eta):
    gamma = 0.2
    g = np.random.default_rng(1)
    N = 20000
    ks = np.array([sample_run_count("truncated_negative_binomial", 0.0, eta, gamma, g) for _ in range(N)])
    assert ks.min() >= 1
    kmax = 30
    k = np.arange(1, kmax)
    if eta > 0:
        pmf = stats.nbinom(eta, gamma).pmf(k) / (1 - stats.nbinom(eta, gamma).pmf(0))
    elif eta == 0:
        pmf = stats.logser(1 - gamma).pmf(k)
    else:  # Papernot & Steinke's definition, by its product formula
        pmf = np.array([(1 - gamma) ** j / (gamma ** -eta - 1) * np.prod([(l + eta) / (l + 1) for l in range(j)])
                        for j in k])
    obs = np.array([np.sum(ks == j) for j in k] + [np.sum(ks >= kmax)])
    exp = np.r_[pmf, max(1 - pmf.sum(), 0.0)] * N
    keep = exp >= 5
    o, e = np.r_[obs[keep], obs[~keep].sum()], np.r_[exp[keep], exp[~keep].sum()]
    if e[-1] < 5:
        o, e = np.r_[o[:-2], o[-2:].sum()], np.r_[e[:-2], e[-2:].sum()]
    assert stats.chisquare(o, e * o.sum() / e.sum()).pvalue > 1e-3
    assert ks.mean() == pytest.approx(tnb_expected_count(eta, gamma), rel=6 * ks.std() / math.sqrt(N) / ks.mean())


def test_selects_the_useful_candidate_and_releases_it():
    X, y = _data(8000)
    s = PrivateRandomSearch(NoisyCentroid(), GRID, epsilon=5.0, delta=1e-5, random_state=3).fit(X, y)
    assert s.best_params_ == {"sign": 1.0}
    assert s.score(X, y) > 0.8
    np.testing.assert_array_equal(s.predict(X), s.best_estimator_.predict(X))
    assert s.best_estimator_.epsilon == pytest.approx(0.9 * s.run_epsilon_)


def test_charges_once_first_and_draws_nothing_when_refused():
    X, y = _data()
    g = np.random.default_rng(0)
    state = g.bit_generator.state
    small = PrivacyBudget(0.5, 1e-5, accountant="rdp")
    s = PrivateRandomSearch(NoisyCentroid(), GRID, epsilon=1.0, delta=1e-5, random_state=g)
    with pytest.raises(BudgetExceededError):
        s.fit(X, y, budget=small)
    assert g.bit_generator.state == state and not hasattr(s, "best_estimator_") and not small.ledger
    rdp_b = PrivacyBudget(3.0, 1e-5, accountant="rdp")
    with rdp_b:  # inner fits must not charge the block's default budget
        s.fit(X, y)
    assert len(rdp_b.ledger) == 1 and rdp_b.ledger[0].event == s.event_
    assert rdp_b.spent() == pytest.approx(s.epsilon_, rel=1e-6)
    pld_b = PrivacyBudget(3.0, 1e-5)  # PLD has no curve for Tuned: its (epsilon, delta) is charged
    s.fit(X, y, budget=pld_b)
    assert pld_b.ledger[0].event == accounting.ApproxDP(s.epsilon_, 1e-5)
    assert pld_b.spent() <= 1.0 + 1e-9


def test_same_seed_same_release():
    X, y = _data()
    a = PrivateRandomSearch(NoisyCentroid(), GRID, epsilon=1.0, delta=1e-5, random_state=7).fit(X, y)
    b = PrivateRandomSearch(NoisyCentroid(), GRID, epsilon=1.0, delta=1e-5, random_state=7).fit(X, y)
    assert a.best_params_ == b.best_params_ and a.best_score_ == b.best_score_
    np.testing.assert_array_equal(a.best_estimator_.c_, b.best_estimator_.c_)
    assert clone(a).get_params()["epsilon"] == 1.0


def test_candidates_with_different_events_are_accounted_by_their_maximum():
    X, y = _data()
    s = PrivateRandomSearch(NoisyCentroid(), {"boost": [1.0, 3.0]}, epsilon=1.0, delta=1e-5,
                            random_state=0).fit(X, y)
    one = s.event_.event
    assert isinstance(one, OneOf) and len(one.events) == 2
    e = s.run_epsilon_
    sig = float(gaussian_sigma(0.9 * e, 1e-5, 2.0))
    zs = sorted(ev.events[0].noise_multiplier for ev in one.events)
    assert zs == pytest.approx([sig / 2.0, 3 * sig / 2.0], rel=1e-12)
    orders = np.array([1.5, 2.0, 8.0, 64.0])
    lap = rdp_curve(accounting.Laplace(scale=1 / (0.1 * e)), orders)
    # Gaussian RDP alpha/(2 z^2): the less noisy candidate is the maximum
    np.testing.assert_allclose(rdp_curve(one, orders), orders / (2 * zs[0] ** 2) + lap, rtol=1e-12)
    eps_acc = accounting.RDPAccountant().compose(s.event_).get_epsilon(1e-5)
    assert eps_acc <= 1.0 and eps_acc == pytest.approx(s.epsilon_, rel=1e-6)
    d = accounting.to_dict(s.event_)
    assert accounting.from_dict(d) == s.event_


@pytest.mark.slow
def test_logistic_regression_pipeline_is_tuned():
    from sklearn.pipeline import make_pipeline

    from dpfast.linear_model import LogisticRegression
    from dpfast.preprocessing import StandardScaler

    g = np.random.default_rng(0)
    X = g.uniform(0, 1, size=(3000, 3))
    y = (X[:, 0] + 0.2 * g.normal(size=3000) > 0.5).astype(int)
    pipe = make_pipeline(StandardScaler(0.25, bounds=(0, 1)),
                         LogisticRegression(0.75, row_norm="clip", random_state=0))
    b = PrivacyBudget(2.0, 1e-5, accountant="rdp")
    s = PrivateRandomSearch(pipe, {"logisticregression__sigma_out": [0.1, 0.3]}, epsilon=2.0, delta=1e-5,
                            n_runs_mean=3.0, random_state=0).fit(X, y, budget=b)
    assert len(b.ledger) == 1 and s.epsilon_ <= 2.0
    best = s.best_estimator_
    # the epsilon shares keep the pipeline's proportions 1 : 3
    assert best[0].epsilon == pytest.approx(0.9 * s.run_epsilon_ * 0.25)
    assert best[1].epsilon == pytest.approx(0.9 * s.run_epsilon_ * 0.75)
    assert s.score(X, y) > 0.6


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(param_distributions={"epsilon": [1.0]}), ValueError, "search sets"),
    (dict(param_distributions={"sign": stats.uniform()}), ValueError, "list"),
    (dict(param_distributions=[]), ValueError, "non-empty"),
    (dict(n_runs_mean=0.5), ValueError, "n_runs_mean"),
    (dict(distribution="geometric"), ValueError, "distribution"),
    (dict(distribution="truncated_negative_binomial", eta=-1.0), ValueError, "eta"),
    (dict(validation_fraction=0.0), ValueError, "validation_fraction"),
    (dict(score_fraction=1.0), ValueError, "score_fraction"),
    (dict(epsilon=0.0), ValueError, "epsilon"),
    (dict(delta=0.0), ValueError, "delta"),
])
def test_bad_input(kwargs, exc, match):
    X, y = _data(100)
    kw = dict(estimator=NoisyCentroid(), param_distributions=GRID, epsilon=1.0, delta=1e-5)
    kw.update(kwargs)
    with pytest.raises(exc, match=match):
        PrivateRandomSearch(**kw).fit(X, y)


def test_refuses_an_estimator_without_privacy():
    from sklearn.linear_model import LogisticRegression as SkLR

    X, y = _data(100)
    with pytest.raises(TypeError, match="epsilon"):
        PrivateRandomSearch(SkLR(), {"C": [1.0]}, epsilon=1.0, delta=1e-5).fit(X, y)


def test_nested_steps_charge_nothing_but_the_search():
    """A DP scaler inside a ColumnTransformer (no budget routing reaches it) is accounted through
    its event_ and never charges the enclosing ``with budget:`` itself (probes and runs)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline

    from dpfast.preprocessing import OneHotEncoder, StandardScaler

    g = np.random.default_rng(1)
    X = np.c_[g.uniform(-1, 1, size=(2000, 2)), g.integers(0, 2, 2000)]
    y = (X[:, 0] > 0).astype(int)
    ct = ColumnTransformer([("num", StandardScaler(0.2, bounds=(-1, 1)), [0, 1]),
                            ("cat", OneHotEncoder([[0.0, 1.0]]), [2])])
    pipe = make_pipeline(ct, NoisyCentroid(0.8))
    b = PrivacyBudget(5.0, 1e-5, accountant="rdp")
    with b:
        s = PrivateRandomSearch(pipe, {"noisycentroid__sign": [1.0, -1.0]}, epsilon=1.0, delta=1e-5,
                                random_state=0).fit(X, y)
    assert len(b.ledger) == 1 and b.ledger[0].label == "PrivateRandomSearch"
    fit_ev = s.event_.event.events[0]
    scaler_ev, centroid_ev = fit_ev.events
    assert isinstance(scaler_ev, accounting.Laplace) and scaler_ev.sensitivity == 1 + 2 + 1
    assert scaler_ev.scale == pytest.approx(4 / (0.9 * s.run_epsilon_ * 0.2))
    assert isinstance(centroid_ev, accounting.Gaussian)


def test_refuses_a_non_private_step_inside_the_search():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler as SkStandardScaler

    X, y = _data(200)
    with pytest.raises(ValueError, match="no privacy event"):
        PrivateRandomSearch(make_pipeline(SkStandardScaler(), NoisyCentroid()), {"noisycentroid__sign": [1.0]},
                            epsilon=1.0,
                            delta=1e-5).fit(X, y)


# ----------------------------------------------------------------- the estimator base (issue 11, 4)
def test_refused_refit_forgets_the_previous_search():
    from sklearn.exceptions import NotFittedError

    X, y = _data(400)
    s = PrivateRandomSearch(NoisyCentroid(), GRID, epsilon=1.0, delta=1e-5, n_runs_mean=2.0, random_state=0)
    with pytest.raises(NotFittedError):
        s.predict(X)
    b = PrivacyBudget(1.5, 1e-5, accountant="rdp")
    s.fit(X, y, budget=b)
    assert s.n_features_in_ == 4 and s.accountant_ == "rdp" and len(b.ledger) == 1
    with pytest.raises(BudgetExceededError):  # a second epsilon = 1 search composes beyond 1.5
        s.fit(X, y, budget=b)
    with pytest.raises(NotFittedError):
        s.predict(X)
    assert not hasattr(s, "n_features_in_") and len(b.ledger) == 1


def test_input_forms_reach_the_runs():
    import pandas as pd
    import scipy.sparse as sp

    from dpfast.linear_model import LogisticRegression

    X, y = _data(300)
    kw = dict(epsilon=2.0, delta=1e-5, n_runs_mean=2.0, distribution="truncated_negative_binomial")
    lr = LogisticRegression(row_norm="clip", random_state=0)
    dense = PrivateRandomSearch(lr, {"method": ["output"]}, random_state=1, **kw).fit(X, y)
    # any sparse format is validated as CSR; the same seed draws the same split, K and noise
    coo = PrivateRandomSearch(lr, {"method": ["output"]}, random_state=1, **kw).fit(sp.coo_matrix(X), y)
    b, c = dense.best_estimator_, coo.best_estimator_
    assert (c.epsilon_, c.lambda_) == (b.epsilon_, b.lambda_)
    # CSR and dense rows run separate kernels (their sums round differently): two certified ||grad F|| <= tau points of one
    # lambda-strongly convex objective, plus the same noise, are within 2 tau / lambda
    diff = np.r_[c.coef_.ravel() - b.coef_.ravel(), np.ravel(c.intercept_) - np.ravel(b.intercept_)]
    assert np.linalg.norm(diff) <= 2 * b.calibration_.tau / b.lambda_
    # a DataFrame reaches the runs with its column names (the DP scaler records them)
    from sklearn.pipeline import make_pipeline

    from dpfast.preprocessing import StandardScaler

    df = pd.DataFrame(X, columns=list("abcd"))
    pipe = make_pipeline(StandardScaler(1.0, bounds=(-1, 1)), lr)
    s = PrivateRandomSearch(pipe, {"logisticregression__method": ["output"]}, random_state=0, **kw).fit(df, y)
    np.testing.assert_array_equal(s.feature_names_in_, list("abcd"))
    np.testing.assert_array_equal(s.best_estimator_[0].feature_names_in_, list("abcd"))
    # one row: the training part or the validation part is empty; an empty training part is not
    # refused (a refusal with probability validation_fraction^n would reveal n): every fit gets
    # one public placeholder row (tests/model_selection/test_search_empty.py)
    s = PrivateRandomSearch(NoisyCentroid(), GRID, validation_fraction=0.999, random_state=0, **kw).fit(X[:1], y[:1])
    assert s.best_estimator_ is not None


# ----------------------------------------------------------------- issue 21: K is internal (item 5)
def _structure(obj):
    """Every public attribute of a fitted object: name -> (type, shape/len, dtype), recursing
    into a released estimator (its parameters by value: they are public)."""
    out = {}
    for name, v in sorted(vars(obj).items()):
        if name.startswith("_"):
            continue
        if hasattr(v, "get_params") and name.endswith("_"):
            out[name] = (type(v).__name__, _structure(v), repr(sorted(v.get_params(deep=False).items())))
        elif isinstance(v, np.ndarray):
            out[name] = ("ndarray", v.shape, str(v.dtype))
        elif isinstance(v, (list, tuple, dict)):
            out[name] = (type(v).__name__, len(v))
        else:
            out[name] = (type(v).__name__,)
    return out


def test_no_released_attribute_depends_on_the_run_count(monkeypatch):
    """Papernot & Steinke's theorems bound the law of the best run alone; K is internal. Two
    fits whose K differs (forced through the run-count draw) release the same attributes, of the
    same types and shapes, the same data-independent values, one identical ledger entry and no
    warning: nothing from which K could be read."""
    import warnings

    from dpfast.model_selection import _search

    X, y = _data(600)
    fits = {}
    for k in (1, 5):
        monkeypatch.setattr(_search, "sample_run_count", lambda *a, k=k: k)
        b = PrivacyBudget(5.0, 1e-5, accountant="rdp")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            # one candidate: the released parameters are then public, compared by value
            s = PrivateRandomSearch(NoisyCentroid(random_state=5), {"sign": [1.0]}, epsilon=1.0, delta=1e-5,
                                    random_state=0).fit(X, y, budget=b)
        fits[k] = (s, b, [str(x.message) for x in w])
    (s1, b1, w1), (s5, b5, w5) = fits[1], fits[5]
    assert _structure(s1) == _structure(s5)
    assert not any(hasattr(s, "n_runs_") for s in (s1, s5))
    for name in ("event_", "epsilon_", "delta_", "accountant_", "run_epsilon_", "n_features_in_"):
        assert getattr(s1, name) == getattr(s5, name)
    np.testing.assert_array_equal(s1.rdp_curve_, s5.rdp_curve_)
    assert [(c.event, c.label) for c in b1.ledger] == [(c.event, c.label) for c in b5.ledger]
    assert len(b1.ledger) == 1 and w1 == w5 == []


def test_released_estimator_carries_no_run_seed():
    """The seed that drew a run's noise would let anyone holding the released model subtract
    the noise: the released estimator carries the random_state it was given, not the run's."""
    X, y = _data(600)
    for template_state in (None, 5):
        s = PrivateRandomSearch(NoisyCentroid(random_state=template_state), GRID, epsilon=1.0, delta=1e-5,
                                n_runs_mean=3.0, random_state=None).fit(X, y)
        if s.best_estimator_ is not None:
            assert s.best_estimator_.random_state == template_state


# ----------------------------------------------------------------- issue 21: the probe (item 15)
class BatchedCentroid(NoisyCentroid):
    """NoisyCentroid that, like DP-SGD, refuses a batch larger than the training data."""

    def __init__(self, epsilon=1.0, delta=1e-5, sign=1.0, boost=1.0, random_state=None, batch_size=32):
        super().__init__(epsilon, delta, sign, boost, random_state)
        self.batch_size = batch_size

    def fit(self, X, y, *, budget=None):
        if self.batch_size > X.shape[0]:
            raise ValueError(f"batch_size ({self.batch_size}) must be <= the number of training examples")
        return super().fit(X, y, budget=budget)


def test_probe_fits_an_estimator_that_needs_more_than_eight_rows():
    X, y = _data(400)
    b = PrivacyBudget(5.0, 1e-5, accountant="rdp")
    s = PrivateRandomSearch(BatchedCentroid(batch_size=32), GRID, epsilon=1.0, delta=1e-5, n_runs_mean=2.0,
                            random_state=0).fit(X, y, budget=b)
    assert len(b.ledger) == 1 and s.epsilon_ <= 1.0
    # a batch larger than the training part is a bad public parameter: refused before the
    # charge and before any draw
    g = np.random.default_rng(0)
    state = g.bit_generator.state
    with pytest.raises(ValueError, match="batch_size"):
        PrivateRandomSearch(BatchedCentroid(batch_size=1000), GRID, epsilon=1.0, delta=1e-5,
                            random_state=g).fit(X, y, budget=b)
    assert len(b.ledger) == 1 and g.bit_generator.state == state


def test_dp_sgd_with_a_batch_larger_than_the_training_part_fails_before_the_charge():
    from dpfast.sgd import DPSGDClassifier

    X, y = _data(200)
    b = PrivacyBudget(5.0, 1e-5, accountant="rdp")
    g = np.random.default_rng(0)
    state = g.bit_generator.state
    with pytest.raises(ValueError, match="batch_size"):
        PrivateRandomSearch(DPSGDClassifier(epsilon=1.0, batch_size=190, accountant="rdp"), {"learning_rate": [0.1]},
                            epsilon=1.0, delta=1e-5, random_state=g).fit(X, y, budget=b)
    assert not b.ledger and g.bit_generator.state == state


def test_probe_keeps_the_dataframe_columns():
    """A ColumnTransformer that selects columns by name (and a string column with public
    categories) is probed on a dummy with the DataFrame's columns and dtypes."""
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline

    from dpfast.preprocessing import OneHotEncoder, StandardScaler

    X, y = _data(600)
    df = pd.DataFrame(X[:, :2], columns=["a", "b"])
    df["c"] = np.where(X[:, 2] > 0, "x", "y")
    df["d"] = pd.Categorical(np.where(X[:, 3] > 0, "u", "v"))
    ct = ColumnTransformer([("num", StandardScaler(0.2, bounds=(-1, 1)), ["b", "a"]),
                            ("cat", OneHotEncoder([["x", "y"], ["u", "v"]]), ["c", "d"])])
    pipe = make_pipeline(ct, NoisyCentroid(0.8))
    b = PrivacyBudget(5.0, 1e-5, accountant="rdp")
    s = PrivateRandomSearch(pipe, {"noisycentroid__sign": [1.0, -1.0]}, epsilon=1.0, delta=1e-5,
                            n_runs_mean=2.0, random_state=1).fit(df, y, budget=b)
    assert len(b.ledger) == 1
    scaler_ev, centroid_ev = s.event_.event.events[0].events
    # the scaler's l1 sensitivity counts its 2 columns; the centroid's sees 2 + 4 features
    assert scaler_ev.sensitivity == 1 + 2 + 1 and centroid_ev.sensitivity == pytest.approx(math.sqrt(6))
    np.testing.assert_array_equal(s.best_estimator_[0].feature_names_in_, ["a", "b", "c", "d"])
    assert s.predict(df).shape == (600,)


# ----------------------------------------------------------------- issue 21: SecureRandom (item 15)
class StreamRecorder(NoisyCentroid, PrivateEstimator):
    """NoisyCentroid as a dpfast estimator (cloned by dpfast's rule) recording whether its fit
    drew from a secure stream."""

    def fit(self, X, y, *, budget=None):
        from dpfast.random import check_random_state, is_secure

        self.secure_stream_ = is_secure(check_random_state(self.random_state))
        return super().fit(X, y, budget=budget)


def test_search_with_secure_streams():
    from dpfast.random import SecureRandom, is_secure

    X, y = _data(600)
    for est_state, search_state in ((SecureRandom(), 0), (None, SecureRandom()), (SecureRandom(), SecureRandom())):
        b = PrivacyBudget(5.0, 1e-5, accountant="rdp")
        # (truncated negative binomial: K >= 1, so a model is always released)
        s = PrivateRandomSearch(StreamRecorder(random_state=est_state), GRID, epsilon=1.0, delta=1e-5,
                                n_runs_mean=3.0, distribution="truncated_negative_binomial",
                                random_state=search_state).fit(X, y, budget=b)
        assert len(b.ledger) == 1
        # the run drew from a fresh secure stream; the released model holds none of the runs'
        best = s.best_estimator_
        assert best.secure_stream_
        assert best.random_state is None if est_state is None else (
            is_secure(best.random_state) and best.random_state is not est_state)
        clone(s)  # a search holding secure streams clones too
    # refused charges draw nothing from a secure search's generator either (nothing to compare:
    # its state cannot be read), and leave no model
    s = PrivateRandomSearch(NoisyCentroid(), GRID, epsilon=1.0, delta=1e-5, random_state=SecureRandom())
    with pytest.raises(BudgetExceededError):
        s.fit(X, y, budget=PrivacyBudget(0.5, 1e-5, accountant="rdp"))
    assert not hasattr(s, "best_estimator_")


class Diverging(NoisyCentroid):
    """NoisyCentroid whose candidate sign=-1 diverges (DP-SGD's FloatingPointError) on the real
    data (not on the search's all-zero probe)."""

    def fit(self, X, y, *, budget=None):
        super().fit(X, y, budget=budget)
        if self.sign < 0 and np.any(np.asarray(X)):
            raise FloatingPointError("training diverged (non-finite parameters); lower learning_rate")
        return self


def test_a_diverged_run_is_a_run_not_an_abort():
    """A run's divergence is a function of that run's private release: it scores -inf instead of
    aborting the search after the charge (an abort would reveal an unreleased run, more likely
    the larger K); when every run diverges, the output is "no model", as for a Poisson K = 0."""
    X, y = _data(400)
    b = PrivacyBudget(5.0, 1e-5, accountant="rdp")
    s = PrivateRandomSearch(Diverging(), GRID, epsilon=1.0, delta=1e-5, n_runs_mean=6.0,
                            distribution="truncated_negative_binomial", random_state=0).fit(X, y, budget=b)
    assert s.best_params_ == {"sign": 1.0} and len(b.ledger) == 1
    with pytest.warns(RuntimeWarning, match="released no model") as w_all:
        s = PrivateRandomSearch(Diverging(), {"sign": [-1.0]}, epsilon=1.0, delta=1e-5, n_runs_mean=3.0,
                                distribution="truncated_negative_binomial", random_state=0).fit(X, y, budget=b)
    assert s.best_estimator_ is None and s.best_score_ is None and len(b.ledger) == 2
    with pytest.raises(ValueError, match="released no model"):
        s.predict(X)
    # the same output as a Poisson K = 0
    from dpfast.model_selection import _search

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_search, "sample_run_count", lambda *a: 0)
        with pytest.warns(RuntimeWarning, match="released no model") as w_none:
            z = PrivateRandomSearch(NoisyCentroid(), {"sign": [-1.0]}, epsilon=1.0, delta=1e-5, n_runs_mean=3.0,
                                    random_state=0).fit(X, y)
    assert [str(x.message) for x in w_all] == [str(x.message) for x in w_none]
    assert _structure(z).keys() == _structure(s).keys()


def test_candidates_that_can_refuse_on_data_are_refused_before_the_charge():
    # row_norm="check" raises on a row beyond norm_bound after the charge; in the search, whether
    # such a candidate is drawn depends on K (found by a fresh-eyes audit: P(raise) 0.5 at K = 1,
    # 0.75 at K = 5, 1.0 from K = 6), an output outside the tuning theorem: refused up front.
    from dpfast.budget import PrivacyBudget
    from dpfast.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, (200, 3))
    y = (X[:, 0] > 0).astype(int)
    b = PrivacyBudget(10.0, 1e-3)
    g = np.random.default_rng(3)
    state = g.bit_generator.state
    for est, grid in ((LogisticRegression(method="output"), {"row_norm": ["check", "clip"]}),
                      (LogisticRegression(method="output", row_norm="check"), {"alpha": [0.1, 1.0]})):
        with pytest.raises(ValueError, match="row_norm"):
            PrivateRandomSearch(est, grid, epsilon=1.0, delta=1e-5, random_state=g).fit(X, y, budget=b)
    assert b.ledger == () and g.bit_generator.state == state


@pytest.mark.parametrize("kw", [dict(), dict(distribution="truncated_negative_binomial", eta=0.5)])
def test_epsilon_is_the_rdp_accountants_for_the_event(kw):
    # issue 23 item 1: the reported guarantee is the accountant's value for the charged event
    X, y = _data(400)
    s = PrivateRandomSearch(NoisyCentroid(), GRID, epsilon=1.0, delta=1e-5, random_state=0, **kw).fit(X, y)
    assert s.accountant_ == "rdp"
    assert s.epsilon_ == accounting.make_accountant(s.accountant_).compose(s.event_).get_epsilon(s.delta_)
    assert s.epsilon_ <= 1.0
