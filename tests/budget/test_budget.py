"""dpfast.PrivacyBudget and the mechanisms' budget= / event_of (issue 11, items 2 and 3).

Expected values come from independent compositions (a fresh accountant composing events built
here from the mechanisms' documented parameters), from closed forms (the exact k-fold
composition of pure epsilon-DP, Kairouz, Oh & Viswanath 2015; basic composition, Dwork & Roth
2014 Thm 3.16), never from the budget's own output.
"""
import json
import math
import pickle
import threading

import numpy as np
import pytest

import dpfast
from dpfast import accounting as A
from dpfast.budget import BudgetExceededError, Charge, PrivacyBudget, charge, check_scope, resolve
from dpfast.calibrate import gaussian_sigma
from dpfast.mechanisms import event_of


# ----------------------------------------------------------------------------- helpers
def kov_epsilon(eps: float, k: int, delta: float) -> float:
    """Exact epsilon at ``delta`` of k-fold composition of pure eps-DP (KOV 2015, Thm 3.3):
    the k-fold binary randomized-response pair, privacy loss (k - 2m) eps with m ~ Bin(k, q)
    under P, q = 1/(1 + e^eps), Q-mass = P-mass * e^-(k - 2m) eps; delta(e') = sum_m
    max(0, P_m - e^e' Q_m), decreasing in e', inverted by bisection."""
    q = 1.0 / (1.0 + math.exp(eps))
    pm = [math.comb(k, m) * (1 - q) ** (k - m) * q ** m for m in range(k + 1)]
    qm = [p * math.exp(-(k - 2 * m) * eps) for m, p in enumerate(pm)]

    def d(e):
        return sum(max(0.0, p - math.exp(e) * qq) for p, qq in zip(pm, qm))

    lo, hi = 0.0, k * eps
    if d(lo) <= delta:
        return 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if d(mid) <= delta else (mid, hi)
    return hi


def fresh(kind, events):
    acc = A.PLDAccountant() if kind == "pld" else A.RDPAccountant()
    for e, c in events:
        acc.compose(e, c)
    return acc


X = np.array([3.0, -1.0, 2.5])


# ----------------------------------------------------------------------------- composition
@pytest.mark.parametrize("kind", ["pld", "rdp"])
def test_ledger_total_equals_an_independent_composition(kind):
    b = PrivacyBudget(10.0, 1e-6, accountant=kind)
    rng = np.random.default_rng(1)
    dpfast.laplace(X, 1.0, 0.5, rng=rng, budget=b)
    dpfast.laplace(X, 2.0, 0.3, rng=rng, budget=b)
    dpfast.gaussian(X, 1.0, 0.8, 1e-7, rng=rng, budget=b)
    dpfast.exponential_mechanism(np.zeros((3, 5)), 1.0, 0.2, rng=rng, budget=b)
    dpfast.private_quantile(np.arange(10.0), [0.25, 0.75], 0.4, (0, 10), rng=rng, budget=b)
    dpfast.laplace(X, 1.0, 0.5, rng=rng, budget=b)
    # the same releases, described here from their documented parameters
    sigma = gaussian_sigma(0.8, 1e-7, 1.0)
    events = [(A.Laplace(scale=2.0, sensitivity=1.0), 2),
              (A.Laplace(scale=2.0 / 0.3, sensitivity=2.0), 1),
              (A.Gaussian(noise_multiplier=sigma), 1),
              (A.ExponentialMechanism(0.2), 3),
              (A.ExponentialMechanism(0.2), 2)]
    acc = fresh(kind, events)
    assert len(b.ledger) == 6
    assert b.spent() == pytest.approx(acc.get_epsilon(1e-6), rel=1e-9)
    assert b.spent(delta=1e-3) == pytest.approx(acc.get_epsilon(1e-3), rel=1e-9)
    # cumulative epsilons in the ledger are non-decreasing and end at spent()
    cum = [c.epsilon for c in b.ledger]
    assert cum == sorted(cum) and cum[-1] == b.spent()
    assert b.remaining() == pytest.approx(10.0 - b.spent(), abs=1e-15)


@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_pure_dp_ledger_matches_the_exact_composition_closed_form(k):
    b = PrivacyBudget(100.0, 1e-6)
    for _ in range(k):
        dpfast.exponential_mechanism(np.zeros(4), 1.0, 0.5, rng=0, budget=b)
    exact = kov_epsilon(0.5, k, 1e-6)
    # PLD epsilons are certified upper bounds; eps = 0.5 lies on the 1e-4 grid, so the
    # discretisation is exact up to the FFT's round-off
    assert exact - 1e-9 <= b.spent() <= exact + 1e-6
    assert b.spent() <= k * 0.5  # basic composition


def test_laplace_releases_fit_by_basic_composition_and_the_next_is_refused():
    """Budget 1.0: four eps = 0.25 Laplace releases fit (basic composition: 4 x 0.25 = 1.0);
    a fifth cannot, since five-fold Laplace(4) has the loss atom 5 x 0.25 with P-mass 2^-5, so
    delta(1.0) >= 2^-5 (1 - e^(1 - 1.25)) = 0.0069 > 1e-6."""
    b = PrivacyBudget(1.0, 1e-6)
    rng = np.random.default_rng(3)
    for _ in range(4):
        dpfast.laplace(X, 1.0, 0.25, rng=rng, budget=b)
    assert 2.0 ** -5 * (1 - math.exp(1.0 - 1.25)) > 1e-6
    assert b.spent() <= 4 * 0.25
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceededError):
        dpfast.laplace(X, 1.0, 0.25, rng=rng, budget=b)
    assert rng.bit_generator.state == state
    assert len(b.ledger) == 4


# ----------------------------------------------------------------------------- overspend
CALLS = {
    "laplace": lambda rng, b: dpfast.laplace(X, 1.0, 5.0, rng=rng, budget=b),
    "laplace_scalar": lambda rng, b: dpfast.laplace(1.0, 1.0, 5.0, rng=rng, budget=b),
    "gaussian": lambda rng, b: dpfast.gaussian(X, 1.0, 5.0, 1e-5, rng=rng, budget=b),
    "gaussian_scalar": lambda rng, b: dpfast.gaussian(1.0, 1.0, 5.0, 1e-5, rng=rng, budget=b),
    "gaussian_classical": lambda rng, b: dpfast.gaussian(X, 1.0, 0.9, 1e-5, rng=rng, calibration="classical", budget=b),
    "discrete_laplace_mechanism": lambda rng, b: dpfast.discrete_laplace_mechanism(np.arange(3), 1, 5, rng=rng, budget=b),
    "discrete_gaussian_mechanism": lambda rng, b: dpfast.discrete_gaussian_mechanism(np.arange(3), 1, 5.0, 1e-5, rng=rng, budget=b),
    "snapping": lambda rng, b: dpfast.snapping(X, 1.0, 5.0, 10.0, rng=rng, budget=b),
    "exponential_mechanism": lambda rng, b: dpfast.exponential_mechanism(np.zeros(4), 1.0, 5.0, rng=rng, budget=b),
    "report_noisy_max": lambda rng, b: dpfast.report_noisy_max(np.zeros(4), 1.0, 5.0, rng=rng, budget=b),
    "top_k": lambda rng, b: dpfast.top_k(np.zeros(4), 2, 1.0, 5.0, rng=rng, budget=b),
    "private_quantile": lambda rng, b: dpfast.private_quantile(np.arange(9.0), 0.5, 5.0, (0, 10), rng=rng, budget=b),
    "private_median": lambda rng, b: dpfast.private_median(np.arange(9.0), 5.0, (0, 10), rng=rng, budget=b),
    "exponential_mechanism_stream": lambda rng, b: dpfast.exponential_mechanism_stream(
        [np.zeros(3), np.ones(2)], 1.0, 5.0, rng=rng, budget=b),
    "ExponentialMechanismStream": lambda rng, b: dpfast.mechanisms.ExponentialMechanismStream(
        1.0, 5.0, rng=rng, budget=b).update(np.zeros(3)).result(),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_overspend_raises_before_any_randomness_is_drawn(name):
    b = PrivacyBudget(0.01, 1e-6)
    rng = np.random.default_rng(11)
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceededError) as info:
        CALLS[name](rng, b)
    assert rng.bit_generator.state == state
    assert b.ledger == () and b.spent() == 0.0
    assert info.value.requested > 0.01 and info.value.spent == 0.0


@pytest.mark.parametrize("name", sorted(CALLS))
def test_charging_draws_nothing_itself(name):
    """With a budget that fits, the output equals the one without a budget (same seed)."""
    out_plain = CALLS[name](np.random.default_rng(5), None)
    b = PrivacyBudget(1e6, 1e-3)
    out_charged = CALLS[name](np.random.default_rng(5), b)
    np.testing.assert_array_equal(out_plain, out_charged)
    assert len(b.ledger) == 1 and b.spent() > 0


def test_randomized_response_is_a_replace_one_event():
    b = PrivacyBudget(10.0, 1e-6)
    bits = np.array([0, 1, 1, 0])
    dpfast.randomized_response(bits, 1.0, rng=0, budget=b)
    dpfast.randomized_response(bits, 0.5, rng=0, budget=b)
    acc = fresh("pld", [(A.RandomizedResponse(1.0, neighbours="replace_one"), 1),
                        (A.RandomizedResponse(0.5, neighbours="replace_one"), 1)])
    assert b.spent() == pytest.approx(acc.get_epsilon(1e-6), rel=1e-9)
    # an add/remove release cannot join a replace-one ledger: refused, nothing changes
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    with pytest.raises(ValueError):
        dpfast.laplace(X, 1.0, 0.1, rng=rng, budget=b)
    assert rng.bit_generator.state == state and len(b.ledger) == 2


def test_error_message_names_the_release_and_what_remains():
    b = PrivacyBudget(1.0, 1e-6)
    b.charge(A.PureDP(0.5), label="first")
    with pytest.raises(BudgetExceededError, match=r"second.*budget is \(1, 1e-06\)-DP.*remaining") as info:
        b.charge(A.PureDP(0.9), label="second")
    err = info.value
    assert err.label == "second" and err.event == A.PureDP(0.9)
    assert err.spent == b.spent() and err.requested > 1.0
    assert (err.epsilon, err.delta) == (1.0, 1e-6)


def test_unsupported_event_leaves_the_budget_unchanged():
    b = PrivacyBudget(5.0, 1e-6, accountant="rdp")
    b.charge(A.Laplace(scale=2.0), label="ok")
    before = (b.ledger, b.spent())
    profile = A.FromPrivacyProfile(lambda e: np.exp(-np.asarray(e)) * 1e-3)  # no RDP curve
    with pytest.raises((TypeError, ValueError)):
        b.charge(profile)
    assert (b.ledger, b.spent()) == before


# ----------------------------------------------------------------------------- state
def test_state_round_trips_through_json():
    b = PrivacyBudget(3.0, 1e-6)
    rng = np.random.default_rng(2)
    dpfast.laplace(X, 1.0, 0.5, rng=rng, budget=b)
    dpfast.gaussian(X, 1.0, 0.5, 1e-7, rng=rng, budget=b)
    dpfast.discrete_gaussian_mechanism(np.arange(3), 1, 0.5, 1e-7, rng=rng, budget=b)
    dpfast.top_k(np.zeros(6), 3, 1.0, 0.3, rng=rng, budget=b)
    state = b.state_dict()
    text = json.dumps(state)
    assert len(text) < 2000  # events, not PMFs
    b2 = PrivacyBudget.from_state_dict(json.loads(text))
    assert b2.ledger == b.ledger
    assert b2.spent() == b.spent()
    assert b2.spent(delta=1e-3) == b.spent(delta=1e-3)
    assert (b2.epsilon, b2.delta, b2.accountant) == (b.epsilon, b.delta, b.accountant)
    assert str(b2) == str(b)
    # the restored budget goes on exactly as the original
    for bb in (b, b2):
        bb.charge(A.PureDP(0.7), label="next")
    assert b2.spent() == b.spent()


def test_state_dict_refuses_callables_and_bad_states():
    b = PrivacyBudget(3.0, 1e-6)
    b.charge(A.FromPrivacyProfile(lambda e: np.exp(-np.asarray(e)) * 1e-7), label="profile")
    with pytest.raises(TypeError):
        b.state_dict()
    good = PrivacyBudget(1.0, 1e-6).state_dict()
    with pytest.raises(ValueError, match="version"):
        PrivacyBudget.from_state_dict({**good, "version": 99})
    with pytest.raises(ValueError, match="ledger"):
        PrivacyBudget.from_state_dict({k: v for k, v in good.items() if k != "ledger"})
    with pytest.raises(TypeError):
        PrivacyBudget.from_state_dict("not a dict")
    over = PrivacyBudget(10.0, 1e-6)
    over.charge(A.PureDP(2.0))
    tampered = {**over.state_dict(), "epsilon": 1.0}
    with pytest.raises(ValueError, match="above the saved budget"):
        PrivacyBudget.from_state_dict(tampered)


# ----------------------------------------------------------------------------- default budget
def test_with_budget_is_the_default_and_blocks_nest():
    outer, inner, explicit = PrivacyBudget(5.0, 1e-6), PrivacyBudget(5.0, 1e-6), PrivacyBudget(5.0, 1e-6)
    assert resolve(None) is None
    with outer as o:
        assert o is outer and resolve(None) is outer
        dpfast.laplace(X, 1.0, 0.1, rng=0)
        with inner:
            assert resolve(None) is inner
            dpfast.laplace(X, 1.0, 0.2, rng=0)
            dpfast.laplace(X, 1.0, 0.3, rng=0, budget=explicit)  # explicit wins
            with outer:  # the same budget re-entered
                dpfast.laplace(X, 1.0, 0.4, rng=0)
            assert resolve(None) is inner
        assert resolve(None) is outer
        dpfast.laplace(X, 1.0, 0.5, rng=0)
    assert resolve(None) is None
    dpfast.laplace(X, 1.0, 0.6, rng=0)  # no budget: nothing charged
    eps = lambda bud: [round(c.event.sensitivity / c.event.scale, 12) for c in bud.ledger]  # noqa: E731
    assert eps(outer) == [0.1, 0.4, 0.5] and eps(inner) == [0.2] and eps(explicit) == [0.3]


def test_a_thread_without_a_block_falls_back_to_the_one_open_in_the_process():
    # joblib's threads do not inherit context variables: the block open in the process applies
    # (tests/budget/test_budget_joblib.py covers joblib, scikit-learn and processes)
    b = PrivacyBudget(5.0, 1e-6)
    seen = []
    with b:
        t = threading.Thread(target=lambda: seen.append(resolve(None)))
        t.start()
        t.join()
    assert seen == [b]


def test_module_charge_and_resolve():
    b = PrivacyBudget(5.0, 1e-6)
    charge(None, A.PureDP(1.0), "nothing")  # no budget anywhere: a no-op
    charge(b, A.PureDP(1.0), "explicit")
    with b:
        charge(None, A.PureDP(1.0), "default")
    assert [c.label for c in b.ledger] == ["explicit", "default"]
    assert isinstance(b.ledger[0], Charge)
    with pytest.raises(TypeError, match="budget must be"):
        resolve(1.0)


# ----------------------------------------------------------------------------- display, input
def test_str_is_one_line_a_release():
    b = PrivacyBudget(5.0, 1e-6)
    dpfast.laplace(X, 1.0, 0.5, rng=0, budget=b)
    dpfast.exponential_mechanism(np.zeros(3), 1.0, 0.5, rng=0, budget=b)
    lines = str(b).splitlines()
    assert len(lines) == 3
    assert "laplace" in lines[1] and "Laplace" in lines[1]
    assert "exponential_mechanism" in lines[2] and f"{b.spent():.6g}" in lines[2]
    assert "releases=2" in repr(b)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(epsilon=0.0, delta=1e-6), ValueError, "epsilon"),
    (dict(epsilon=math.inf, delta=1e-6), ValueError, "epsilon"),
    (dict(epsilon=1.0, delta=0.0), ValueError, "delta"),
    (dict(epsilon=1.0, delta=1.0), ValueError, "delta"),
    (dict(epsilon=1.0, delta=1e-6, accountant="gdp"), ValueError, "accountant"),
])
def test_bad_budget_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        PrivacyBudget(**kwargs)


def test_bad_label_and_budget_types():
    b = PrivacyBudget(1.0, 1e-6)
    with pytest.raises(TypeError, match="label"):
        b.charge(A.PureDP(0.1), label=3)
    with pytest.raises(TypeError, match="budget must be"):
        dpfast.laplace(X, 1.0, 0.5, rng=0, budget=1.0)


# ----------------------------------------------------------------------------- event_of
def test_event_of_matches_the_documented_events():
    z = gaussian_sigma(0.5, 1e-5, 2.0) / 2.0
    g = event_of(dpfast.gaussian, X, 2.0, 0.5, 1e-5)
    assert isinstance(g, A.Gaussian) and g.sensitivity == 2.0
    assert z * (1 - 1e-15) <= g.noise_multiplier <= z  # rounded down, never up
    zc = 2.0 * math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5 / 2.0  # classical sigma / sensitivity
    gc = event_of(dpfast.gaussian, X, 2.0, 0.5, 1e-5, calibration="classical")
    assert gc.noise_multiplier == pytest.approx(zc, rel=1e-12) and gc.noise_multiplier <= zc
    # array sensitivities: Mahalanobis sensitivity sqrt(sum (S_i / sigma_i)^2)
    s = np.array([1.0, 2.0, 0.5])
    mu = math.sqrt(sum((si / gaussian_sigma(0.5, 1e-5, si)) ** 2 for si in s))
    assert event_of(dpfast.gaussian, X, s, 0.5, 1e-5).noise_multiplier == pytest.approx(1 / mu, rel=1e-12)
    assert event_of(dpfast.laplace, X, 1.0, 0.5) == A.Laplace(scale=2.0, sensitivity=1.0)
    assert event_of(dpfast.laplace, 1.0, 1.0, 0.5) == A.Laplace(scale=2.0, sensitivity=1.0)
    assert event_of(dpfast.laplace, X, 1.0, [0.5, 1.0, 2.0]).epsilon == pytest.approx(2.0, rel=1e-15)
    assert event_of(dpfast.laplace, X, [1.0, 2.0, 1.0], 0.5).epsilon == pytest.approx(1.5, rel=1e-15)
    assert event_of(dpfast.randomized_response, np.array([0, 2]), [1.0, 2.0], categories=3) == \
        A.RandomizedResponse(2.0, num_categories=3, neighbours="replace_one")
    assert event_of(dpfast.discrete_laplace_mechanism, np.arange(3), 1, 0.5) == A.PureDP(0.5)
    assert event_of(dpfast.discrete_gaussian_mechanism, np.arange(3), 1, 0.5, 1e-6) == A.ApproxDP(0.5, 1e-6)
    assert event_of(dpfast.snapping, X, 1.0, 0.5, 10.0) == A.SelfComposed(A.PureDP(0.5), 3)
    assert event_of(dpfast.exponential_mechanism, np.zeros((2, 4)), 1.0, 0.5) == \
        A.SelfComposed(A.ExponentialMechanism(0.5), 2)
    assert event_of(dpfast.report_noisy_max, np.zeros(4), 1.0, 0.5) == A.ReportNoisyMax(0.5)
    assert event_of(dpfast.top_k, np.zeros(4), 2, 1.0, 0.5) == A.SelfComposed(A.ExponentialMechanism(0.25), 2)
    assert event_of(dpfast.private_quantile, X, [0.1, 0.5], 1.0, (0, 1)) == \
        A.SelfComposed(A.ExponentialMechanism(0.5), 2)
    assert event_of(dpfast.private_median, X, 1.0, (0, 1)) == A.ExponentialMechanism(1.0)
    assert event_of(dpfast.mechanisms.ExponentialMechanismStream, 1.0, 0.7) == A.ExponentialMechanism(0.7)


def test_event_of_draws_and_charges_nothing():
    rng = np.random.default_rng(4)
    state = rng.bit_generator.state
    b = PrivacyBudget(1.0, 1e-6)
    with b:
        for name, call in CALLS.items():
            assert event_of(lambda *, budget: call(rng, budget)) is not None, name
    assert rng.bit_generator.state == state and b.ledger == ()


def test_event_of_refuses_samplers_and_checks_arguments():
    with pytest.raises(TypeError, match="takes no budget"):
        event_of(dpfast.laplace_noise, 1.0)
    with pytest.raises(TypeError, match="budget"):
        event_of(dpfast.laplace, X, 1.0, 0.5, budget=PrivacyBudget(1.0, 1e-6))
    with pytest.raises(ValueError, match="epsilon"):
        event_of(dpfast.laplace, X, 1.0, -1.0)


def test_detached_blocks_the_default_for_composite_releases():
    b, explicit = PrivacyBudget(5.0, 1e-6), PrivacyBudget(5.0, 1e-6)
    with b:
        b.charge(A.PureDP(0.5), label="composite total")
        with dpfast.budget.detached():
            assert resolve(None) is None
            dpfast.laplace(X, 1.0, 0.5, rng=0)  # inner draw of the composite: not charged again
            dpfast.laplace(X, 1.0, 0.5, rng=0, budget=explicit)  # explicit: charged
        assert resolve(None) is b
    assert [c.label for c in b.ledger] == ["composite total"] and len(explicit.ledger) == 1


def test_copies_are_refused_and_an_unpickled_budget_is_a_read_only_record():
    # A copy would be a second budget for the same data whose charges the original never sees
    # (copy.copy used to share the ledger list but not the spent epsilon or the lock).
    import copy
    import pickle

    b = PrivacyBudget(2.0, 1e-6)
    b.charge(A.Laplace(scale=2.0), label="a")
    for f in (copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="cannot be copied"):
            f(b)
    with pytest.raises(TypeError, match="cannot be copied"):
        copy.deepcopy({"budget": b})
    rec = pickle.loads(pickle.dumps(b))
    assert rec.ledger == b.ledger and rec.spent() == b.spent() and rec.state_dict() == b.state_dict()
    with pytest.raises(dpfast.budget.BudgetScopeError, match="unpickled"):
        rec.charge(A.PureDP(0.5), label="only in the copy")
    with pytest.raises(dpfast.budget.BudgetScopeError, match="unpickled"):
        dpfast.laplace(X, 1.0, 0.5, rng=0, budget=rec)
    with pytest.raises(dpfast.budget.BudgetScopeError, match="unpickled"):
        with rec:
            pass
    assert len(rec.ledger) == 1 and len(b.ledger) == 1
    # the deliberate, explicit way to an independent budget with the same ledger
    live = PrivacyBudget.from_state_dict(rec.state_dict())
    live.charge(A.PureDP(0.5), label="b")
    assert len(live.ledger) == 2 and len(b.ledger) == 1


def test_printed_ledger_lines_stay_short_and_name_the_events():
    # A tuned search's event nests a dozen events; the printed ledger summarises each release
    # on one line (the exact events stay in ``ledger`` and ``state_dict``).
    from dpfast import accounting as A
    nested = A.Composed(tuple(A.SelfComposed(A.Gaussian(3.0 + i), 10) for i in range(12)))
    b = dpfast.PrivacyBudget(50.0, 1e-5)
    b.charge(nested, label="big")
    b.charge(A.Laplace(2.5, 1.0), label="lap")
    lines = str(b).splitlines()
    assert len(lines) == 3
    assert all(len(line) <= 140 for line in lines[1:]), lines
    assert "Composed(" in lines[1] and lines[1].rstrip().split("epsilon=")[0].rstrip().endswith("...")
    assert "Laplace(scale=2.5, sensitivity=1)" in lines[2]
    assert b.ledger[0].event == nested


# ----------------------------------------------------------------------------- incremental PLD
LEDGERS = {
    # distinct Laplace releases, a Gaussian, pure and approximate DP (one lane)
    "mixed": [A.Laplace(scale=1.0 / (0.02 + 1e-4 * i)) for i in range(40)]
    + [A.Gaussian(8.0), A.PureDP(0.05), A.ApproxDP(0.05, 1e-8)],
    # subsampled Gaussians (asymmetric: two lanes) and a DP-SGD run composed by count
    "asymmetric": [A.Laplace(scale=20.0), A.PoissonSampled(0.02, A.Gaussian(2.0)),
                   A.SelfComposed(A.PoissonSampled(0.01, A.Gaussian(1.5)), 200), A.Laplace(scale=30.0)],
    # tiny epsilons: the accountant's refinement rule asks for a finer grid (recomposed once)
    "refined": [A.Laplace(scale=1000.0 + i) for i in range(30)],
    # Gaussians alone are answered in closed form and their lanes not built; the first event of
    # another kind builds them from scratch (once), then the ledger convolves as above
    "gaussians-then-others": [A.Gaussian(2.0), A.SelfComposed(A.Gaussian(5.0), 10), A.Gaussian(3.0, 2.0),
                              A.Laplace(scale=20.0), A.Gaussian(4.0), A.PoissonSampled(0.02, A.Gaussian(2.0)),
                              A.Gaussian(6.0)],
    # ... also where that first build needs the refined grid
    "gaussians-refined": [A.Gaussian(300.0 + i) for i in range(20)] + [A.Laplace(scale=1000.0)],
}
REFINED = {"refined", "gaussians-refined"}


@pytest.mark.parametrize("name", sorted(LEDGERS))
def test_incremental_pld_spent_matches_a_from_scratch_composition(name):
    # The budget convolves each event into the ledger's PLD; a fresh accountant recomposes the
    # whole ledger.  Both are certified upper bounds on the same grid rule, so the budget must
    # lie between the accountant's optimistic (lower) bound and its pessimistic value (1e-6
    # relative: FFT round-off; the budget's grid is at least as fine, so it may be tighter).
    events = LEDGERS[name]
    b = PrivacyBudget(50.0, 1e-6)
    for e in events:
        b.charge(e)
    acc = A.PLDAccountant()
    for e in events:
        acc.compose(e)
    lo, hi = acc.get_epsilon_bounds(1e-6)
    assert lo <= b.spent() <= hi * (1 + 1e-6), (lo, b.spent(), hi)
    if name not in REFINED:  # same grid: the same number up to round-off
        assert b.spent() == pytest.approx(hi, rel=1e-6)
    # a prefix's cumulative epsilon is a from-scratch composition of that prefix
    k = len(events) // 2
    acc_k = A.PLDAccountant()
    for e in events[:k]:
        acc_k.compose(e)
    assert acc_k.get_epsilon_bounds(1e-6)[0] <= b.ledger[k - 1].epsilon <= acc_k.get_epsilon(1e-6) * (1 + 1e-6)


def test_a_charge_composes_only_the_new_event(monkeypatch):
    # Recomposing the ledger made the n-th charge compose n events (n^3 time over a ledger of
    # distinct releases: 4 s for 100, 232 s for 400); now it composes the new one only.
    from dpfast.accounting import pld

    pieces = []
    real = pld._compose_lane

    def spy(steps, *args, **kwargs):
        pieces.append(len(steps))
        return real(steps, *args, **kwargs)

    monkeypatch.setattr(pld, "_compose_lane", spy)
    b = PrivacyBudget(50.0, 1e-6)
    for i in range(30):
        pieces.clear()
        b.charge(A.Laplace(scale=1.0 / (0.01 + 1e-4 * i)))
    assert pieces == [1]


def test_a_refused_charge_leaves_the_composed_state_intact():
    b = PrivacyBudget(1.0, 1e-6)
    for i in range(3):
        b.charge(A.Laplace(scale=1.0 / (0.2 + 0.01 * i)))
    state, spent, ledger = b._state, b.spent(), b.ledger
    lanes = {d: (p.copy(), a, inf) for d, (p, a, inf) in state.lanes.items()}
    # too big; too big and asking for a finer grid; unsupported-relation; not an event
    for bad, exc in ((A.Laplace(scale=1.0), BudgetExceededError),
                     (A.SelfComposed(A.Laplace(scale=2000.0), 10 ** 6), BudgetExceededError),
                     (A.RandomizedResponse(0.1, 3, neighbours="replace_one"), ValueError),
                     ("laplace", TypeError)):
        with pytest.raises(exc):
            b.charge(bad)
        assert b._state is state and b.spent() == spent and b.ledger == ledger and state.h == 1e-4
        assert all(np.array_equal(state.lanes[d][0], lanes[d][0]) and state.lanes[d][1:] == lanes[d][1:]
                   for d in lanes)
    # and the next charge that fits gives what a replay of the ledger gives
    b.charge(A.Laplace(scale=10.0))
    replay = PrivacyBudget.from_state_dict(b.state_dict())
    assert replay.spent() == b.spent()


@pytest.mark.slow
@pytest.mark.parametrize("sigma,count,delta", [(5.0, 10, 1e-15), (5.0, 10, 1e-12)])
def test_pld_budget_spent_is_never_below_the_exact_gaussian_composition_at_small_deltas(sigma, count, delta):
    # k Gaussians compose to one with mu = sqrt(sum sigma_i^-2) (Dong, Roth & Su 2022): its
    # delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), inverted with mpmath at 60
    # digits.  Below delta 1e-6 the incremental lanes alone read below it (5.01416 vs 5.01471
    # at 1e-15, 4.4244715 vs 4.4244743 at 1e-12): the budget must not.
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60
    sigmas = [sigma * (1 + 1e-9 * i) for i in range(count)]  # distinct events: no self-composition shortcut
    b = PrivacyBudget(1e4, delta)
    for s in sigmas:
        b.charge(A.Gaussian(noise_multiplier=s))
    mu = mp.sqrt(sum(1 / mp.mpf(s) ** 2 for s in sigmas))
    f = lambda e: mp.ncdf(-e / mu + mu / 2) - mp.e ** e * mp.ncdf(-e / mu - mu / 2) - mp.mpf(delta)  # noqa: E731
    exact = float(mp.findroot(f, (mp.mpf(0), mp.mpf(5000)), solver="bisect"))
    assert exact <= b.spent() <= exact * (1 + 1e-4)


def test_charge_is_the_one_helper_and_builds_the_event_only_under_a_budget():
    # dpfast.budget.charge takes an event or a zero-argument builder; the builder runs only when
    # a budget applies (mechanism calls without one build no event)
    built = []

    def build():
        built.append(1)
        return A.Laplace(2.0)

    charge(None, build, "no budget")
    assert built == []
    b = PrivacyBudget(1.0, 1e-6)
    charge(b, build, "builder")
    charge(b, A.Laplace(2.0), "event")
    assert built == [1] and [c.label for c in b.ledger] == ["builder", "event"]
    assert b.ledger[0].event == b.ledger[1].event == A.Laplace(2.0)
    from dpfast import _base

    assert not hasattr(_base, "_charge_budget")


def test_check_scope_accepts_none_or_a_usable_budget_and_refuses_the_rest():
    # estimators call it before reading data: nothing is charged either way
    b = PrivacyBudget(1.0, 1e-6)
    assert check_scope(None) is None and check_scope(b) is None and b.spent() == 0.0
    with pytest.raises(TypeError):
        check_scope("not a budget")
    with pytest.raises(dpfast.budget.BudgetScopeError, match="unpickled"):
        check_scope(pickle.loads(pickle.dumps(b)))
