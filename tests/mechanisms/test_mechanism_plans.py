"""The mechanisms as plan -> charge -> draw (dpfast.mechanisms._events): event_of calls the plan
step, and its event is the one the call charges (issue 23, item 2)."""
import inspect

import numpy as np
import pytest

import dpfast
from dpfast import mechanisms
from dpfast.budget import PrivacyBudget
from dpfast.mechanisms import _events, event_of

X = np.array([0.5, 1.0, 2.0])
CALLS = [
    (dpfast.laplace, (X, 1.0, 0.5), {}),
    (dpfast.laplace, (1.0, 1.0, 0.5), {}),
    (dpfast.gaussian, (X, 2.0, 0.5, 1e-5), {"calibration": "classical"}),
    (dpfast.gaussian, (1.0, 2.0, 0.5, 1e-5), {}),
    (dpfast.randomized_response, (np.array([0, 2]), [1.0, 2.0]), {"categories": 3}),
    (dpfast.discrete_laplace_mechanism, (np.arange(3), 1, 0.5), {}),
    (dpfast.discrete_gaussian_mechanism, (np.arange(3), 1, 0.5, 1e-6), {}),
    (dpfast.snapping, (X, 1.0, 0.5, 10.0), {}),
    (dpfast.exponential_mechanism, (np.zeros((2, 4)), 1.0, 0.5), {}),
    (dpfast.report_noisy_max, (np.zeros(4), 1.0, 0.5), {"noise": "laplace"}),
    (dpfast.top_k, (np.zeros(4), 2, 1.0, 0.5), {}),
    (dpfast.private_quantile, (X, [0.1, 0.5], 1.0, (0, 1)), {}),
    (dpfast.private_median, (X, 1.0, (0, 1)), {}),
    (dpfast.exponential_mechanism_stream, ([np.zeros(3)], 1.0, 0.5), {}),
    (mechanisms.ExponentialMechanismStream, (1.0, 0.7), {}),
]


@pytest.mark.parametrize("mech, args, kwargs", CALLS, ids=[c[0].__name__ for c in CALLS])
def test_event_of_is_the_plan_and_equals_the_charged_event(mech, args, kwargs, monkeypatch):
    assert mech in _events._PLANS
    # event_of reads the plan: no budget is made or charged, no call is stopped by an exception
    monkeypatch.setattr(_events, "_FirstCharge", None)
    monkeypatch.setattr(_events, "charge", None)
    rng = np.random.default_rng(3)
    state = rng.bit_generator.state
    ev = event_of(mech, *args, rng=rng, **kwargs)
    assert rng.bit_generator.state == state
    monkeypatch.undo()
    b = PrivacyBudget(1e3, 1e-3)
    mech(*args, rng=0, budget=b, **kwargs)
    assert len(b.ledger) == 1 and b.ledger[0].event == ev


def test_every_mechanism_with_a_budget_has_a_plan():
    for name in mechanisms.__all__:
        obj = getattr(mechanisms, name)
        sig = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj)
        assert ("budget" in sig.parameters) == (obj in _events._PLANS), name


@pytest.mark.parametrize("mech, calibration", [(dpfast.laplace, dpfast.calibrate.laplace_scale),
                                               (dpfast.gaussian, dpfast.calibrate.gaussian_sigma)])
def test_unchecked_calibration_gets_the_same_checks(mech, calibration):
    """laplace/gaussian call their calibration unchecked (no second check per call): that is
    only sound while their constraints cover every parameter of the calibration, identically."""
    cal = calibration.constraints
    assert set(cal) <= set(mech.constraints)
    assert {n: repr(mech.constraints[n]) for n in cal} == {n: repr(c) for n, c in cal.items()}
