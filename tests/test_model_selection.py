"""dpfast.model_selection.PrivateRandomSearch (issue 11 item 6, Papernot & Steinke 2022).

The guarantee is checked with the accountants (an independent path from the search's own
arrays), the run-count laws against scipy's negative binomial / logarithmic distributions, and
the budget behaviour against the contract (charge first, nothing drawn on refusal).
"""
import math

import numpy as np
import pytest
from scipy import stats
from sklearn.base import BaseEstimator, ClassifierMixin, clone

from dpfast import accounting
from dpfast.accounting.tuning import tnb_expected_count
from dpfast.budget import BudgetExceededError, PrivacyBudget, charge
from dpfast.calibrate import gaussian_sigma
from dpfast.accounting.rdp import rdp_curve
from dpfast.model_selection import OneOf, PrivateRandomSearch, sample_run_count


class NoisyCentroid(ClassifierMixin, BaseEstimator):
    """A toy private classifier following the estimator contract: rows clipped to [-1, 1]^d,
    class sums released with the analytic Gaussian mechanism (l2 sensitivity sqrt(d) under
    add/remove), charged before the noise.  ``sign=-1`` makes a useless candidate."""

    def __init__(self, epsilon=1.0, delta=1e-5, sign=1.0, boost=1.0, random_state=None):
        self.epsilon = epsilon
        self.delta = delta
        self.sign = sign
        self.boost = boost  # extra noise factor: candidates with different events
        self.random_state = random_state

    def fit(self, X, y, *, budget=None):
        X = np.clip(np.asarray(X, dtype=float), -1, 1)
        d = X.shape[1]
        sens = math.sqrt(d)
        sigma = float(gaussian_sigma(self.epsilon, self.delta, sens)) * self.boost
        self.event_ = accounting.Gaussian(noise_multiplier=sigma / sens, sensitivity=sens)
        charge(budget, self.event_, label="NoisyCentroid")
        g = np.random.default_rng(self.random_state)
        self.classes_ = np.array([0, 1])
        self.c_ = self.sign * np.stack([X[y == c].sum(0) + g.normal(0, sigma, d) for c in (0, 1)])
        return self

    def predict(self, X):
        return self.classes_[np.argmax(np.asarray(X) @ self.c_.T, axis=1)]


def _data(n=4000, seed=0):
    g = np.random.default_rng(seed)
    X = g.normal(size=(n, 4))
    y = (X[:, 0] + 0.5 * g.normal(size=n) > 0).astype(int)
    return np.clip(X / 3, -1, 1), y


GRID = {"sign": [1.0, -1.0]}


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
    assert s.n_runs_ >= 2
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
    assert a.n_runs_ == b.n_runs_ and a.best_score_ == b.best_score_
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
    # one row: the training part or the validation part is empty; an empty training part is refused
    with pytest.raises(ValueError, match="n_samples = 1"):
        PrivateRandomSearch(NoisyCentroid(), GRID, validation_fraction=0.999, random_state=0, **kw).fit(X[:1], y[:1])
