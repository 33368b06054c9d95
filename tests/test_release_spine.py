"""The release spine (issue 23, item 1): every estimator's ``epsilon_`` is what an accountant says
of the event it charged, ``make_accountant(accountant_).compose(event_).get_epsilon(delta_)``,
and calibration never reports more than the requested epsilon.

The expected value is computed here by an accountant built afresh from the recorded name and
event (not read from the estimator's calibration), on tiny data so that each case is fast.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from dpfast.accounting import ApproxDP, Composed, Gaussian, ObjectivePerturbation, PureDP, SelfComposed, make_accountant
from dpfast.linear_model import LinearRegression, LogisticRegression
from dpfast.public import PublicDataClassifier, PublicDataRegressor
from dpfast.sgd import DPMLPClassifier, DPSGDClassifier, DPSGDRegressor

EPS, DELTA = 1.0, 1e-5


def _data(n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    return X, (X[:, 0] > 0).astype(int), X[:, 0] + 0.1 * rng.normal(size=n)


def _accountant_epsilon(est):
    """The accountant's value for the recorded event, from a fresh accountant of that name."""
    return make_accountant(est.accountant_).compose(est.event_).get_epsilon(est.delta_)


def _check_spine(est, target=EPS):
    assert est.accountant_ in ("pld", "rdp")
    assert est.epsilon_ == _accountant_epsilon(est)
    assert est.epsilon_ <= target  # calibration never less safe


@pytest.mark.parametrize("accountant", ["rdp", "pld", "best"])
def test_linear_regression_ssp_epsilon_is_the_accountants(accountant):
    """method="ssp": one Gaussian event on the statistics, noise z * Delta (the sigma_ drawn)."""
    X, _, yr = _data()
    est = LinearRegression(EPS, DELTA, method="ssp", accountant=accountant, random_state=0).fit(X, yr)
    _check_spine(est)
    if accountant != "best":
        assert est.accountant_ == accountant
    assert isinstance(est.event_, Gaussian)
    assert est.event_.noise_multiplier * est.event_.sensitivity == est.sigma_
    assert est.event_.sensitivity == est.sensitivity_


@pytest.mark.parametrize("accountant", ["rdp", "pld", "best"])
@pytest.mark.parametrize("method", ["amp", "objective", "output"])
@pytest.mark.parametrize("model", ["logistic", "linear"])
def test_linear_model_epsilon_is_the_accountants(model, method, accountant):
    X, yc, yr = _data()
    if model == "logistic":
        est = LogisticRegression(EPS, DELTA, method=method, accountant=accountant, random_state=0).fit(X, yc)
    else:
        est = LinearRegression(EPS, DELTA, method=method, accountant=accountant, random_state=0).fit(X, yr)
    _check_spine(est)
    if accountant != "best":
        assert est.accountant_ == accountant
    else:  # "best" reports the smaller of the two accountants' values for the event
        other = "rdp" if est.accountant_ == "pld" else "pld"
        assert est.epsilon_ <= make_accountant(other).compose(est.event_).get_epsilon(est.delta_)
    cal = est.calibration_
    if method == "output":  # one Gaussian whose noise is the one drawn
        assert isinstance(est.event_, Gaussian)
        assert est.event_.noise_multiplier * est.event_.sensitivity == pytest.approx(cal.sigma_out, rel=1e-15)
        # sensitivity (L + 2 tau) / lambda (Chaudhuri et al. 2011, Corollary 8, with the solver's error)
        assert est.event_.sensitivity == pytest.approx((cal.lipschitz + 2 * cal.tau) / cal.regularization, rel=1e-15)
    else:  # Algorithm 1: objective perturbation composed with the Gaussian output step 2 tau / lambda
        assert est.event_ == Composed((ObjectivePerturbation(cal.noise_std, cal.lipschitz, cal.smoothness,
                                                             cal.regularization),
                                       Gaussian(cal.sigma_out / (2 * cal.tau / cal.regularization),
                                                sensitivity=2 * cal.tau / cal.regularization)))


def test_one_vs_rest_event_and_epsilon():
    X, _, _ = _data(n=45)
    y = np.arange(45) % 3
    est = LogisticRegression(EPS, DELTA, classes=[0, 1, 2], accountant="pld", random_state=0).fit(X, y)
    assert isinstance(est.event_, SelfComposed) and est.event_.count == 3
    _check_spine(est)


def test_multinomial_output_epsilon_is_the_accountants():
    X, _, _ = _data(n=45)
    y = np.arange(45) % 3
    est = LogisticRegression(EPS, DELTA, method="output", multi_class="multinomial", classes=[0, 1, 2],
                             random_state=0).fit(X, y)
    _check_spine(est)


def test_kifer_is_a_calibration_rule_not_an_accountant():
    X, yc, _ = _data()
    est = LogisticRegression(EPS, DELTA, method="objective", calibration="kifer", random_state=0).fit(X, yc)
    assert est.event_ == ApproxDP(EPS, DELTA)  # the certificate of Kifer et al.'s condition
    assert est.calibration_.rule == "kifer"
    _check_spine(est)
    with pytest.raises(ValueError):
        LogisticRegression(accountant="kifer").fit(X, yc)
    with pytest.raises(ValueError, match="objective"):
        LogisticRegression(method="amp", calibration="kifer").fit(X, yc)
    with pytest.raises(ValueError, match="RDP"):
        LogisticRegression(method="objective", calibration="kifer", accountant="rdp").fit(X, yc)


def _sgd(Est, **kw):
    X, yc, yr = _data(n=32)
    kw = dict(dict(delta=DELTA, epochs=1, batch_size=8, random_state=0), **kw)
    if Est is DPMLPClassifier:
        kw["hidden"] = 4
    return Est(**kw).fit(X, yr if Est is DPSGDRegressor else yc)


@pytest.mark.parametrize("sampling", ["poisson", "shuffle"])
@pytest.mark.parametrize("accountant", ["rdp", "pld"])
@pytest.mark.parametrize("Est", [DPSGDClassifier, DPSGDRegressor, DPMLPClassifier])
def test_sgd_epsilon_is_the_accountants(Est, accountant, sampling):
    est = _sgd(Est, noise_multiplier=1.5, accountant=accountant, sampling=sampling)
    assert est.accountant_ == accountant
    assert est.epsilon_ == _accountant_epsilon(est)


@pytest.mark.parametrize("sampling", ["poisson", "shuffle"])
@pytest.mark.parametrize("accountant", ["rdp", pytest.param("pld", marks=pytest.mark.slow)])
def test_sgd_calibrated_epsilon_is_the_accountants(accountant, sampling):
    est = _sgd(DPSGDRegressor, epsilon=2.0, accountant=accountant, sampling=sampling)
    assert est.accountant_ == accountant
    _check_spine(est, target=2.0)


@pytest.mark.parametrize("Est", [PublicDataClassifier, PublicDataRegressor])
def test_public_epsilon_is_the_accountants(Est):
    X, yc, yr = _data(n=60)
    y = yc if Est is PublicDataClassifier else yr
    Z = _data(n=30, seed=1)[0]
    est = Est(EPS, DELTA, random_state=0).fit(X, y, Z)
    assert est.event_ == ApproxDP(EPS, DELTA, neighbours="replace_one")
    _check_spine(est)


@pytest.mark.parametrize("Est,method", [(PublicDataClassifier, "regularization"), (PublicDataClassifier, "rrspm"),
                                        (PublicDataRegressor, "regularization")])
def test_public_pure_dp_states_its_event(Est, method):
    """delta = 0 (Laplace Perturb, RRSPM): no accountant converts at delta = 0; the release states
    its PureDP event's epsilon and names no accountant."""
    X, yc, yr = _data(n=60)
    y = yc if Est is PublicDataClassifier else yr
    Z = _data(n=30, seed=1)[0]
    est = Est(EPS, 0.0, method=method, random_state=0).fit(X, y, Z)
    assert est.event_ == PureDP(EPS, neighbours="replace_one")
    assert (est.epsilon_, est.delta_, est.accountant_) == (EPS, 0.0, None)
