"""The accountant interface (dpfast.accounting.base): pinned results, refusals before any change,
ledger, copy, state_dict, pickles, make_accountant, calibrate_parameter, and a new event / accountant added
in this one file."""
import dataclasses
import json
import math
import pickle
import threading

import numpy as np
import pytest
from scipy import optimize, special, stats

import dpfast.accounting as A
from dpfast.accounting import _discretize, events as ev
from dpfast.accounting.base import PrivacyAccountant
from dpfast.accounting.pld import dominating_pairs
from dpfast.accounting.rdp import discrete_pair_rdp, rdp_curve

DELTA = 1e-5
PSG = A.PoissonSampled(0.01, A.Gaussian(1.1))


# ------------------------------------------------------------------------------------------------
# Released epsilons pinned before the refactor to events/registrations, against peers and closed forms
# ------------------------------------------------------------------------------------------------
# dp-accounting 0.6.0 (Google; an independent implementation), at delta = 1e-5: PLDAccountant with
# value_discretization_interval=1e-4 (pessimistic connect-the-dots, like dpfast), and RdpAccountant on
# dpfast's DEFAULT_ORDERS (dp-accounting's grid plus 64).
PEERS = {
    "poisson_gaussian": (A.SelfComposed(PSG, 1000), 1.5153702481094293, 1.7117701662429012),
    "laplace": (A.SelfComposed(A.Laplace(10.0), 20), 1.5922295114112879, 1.689689911146196),
    "gaussian": (A.SelfComposed(A.Gaussian(5.0), 10), 2.594383385595596, 2.8136532471298397),
    # 4-ary RR at eps = 0.3 is dp-accounting's RandomizedResponseDpEvent(p = 4/(e^0.3 + 3), 4) (RDP only
    # there; its PLD is pinned to the exact multinomial form below)
    "randomized_response": (A.SelfComposed(A.RandomizedResponse(0.3, 4), 30), None, 5.575978515378836),
}


@pytest.mark.parametrize("name", sorted(PEERS))
def test_released_epsilons_agree_with_dp_accounting(name):
    event, pld_peer, rdp_peer = PEERS[name]
    if pld_peer is not None:
        # both pessimistic on a 1e-4 grid: agreement to far below the grid's own error
        assert A.PLDAccountant().compose(event).get_epsilon(DELTA) == pytest.approx(pld_peer, rel=1e-6)
    assert A.RDPAccountant().compose(event).get_epsilon(DELTA) == pytest.approx(rdp_peer, rel=1e-6)


def _invert(delta_of_eps, delta, hi=50.0):
    return optimize.brentq(lambda e: delta_of_eps(e) - delta, 0.0, hi, xtol=1e-13, rtol=1e-14)


def test_gaussian_pld_is_above_and_close_to_the_exact_gdp_curve():
    """k-fold Gaussian with noise multiplier z is mu-GDP, mu = sqrt(k)/z; its exact profile is
    Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Dong, Roth & Su 2022, Cor. 2.13)."""
    mu = math.sqrt(10) / 5.0
    exact = _invert(lambda e: stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2),
                    DELTA)
    got = A.PLDAccountant().compose(A.Gaussian(5.0), 10).get_epsilon(DELTA)
    assert exact <= got <= exact + 1e-4


def test_randomized_response_pld_equals_the_exact_multinomial_composition():
    """30-fold 4-ary RR at eps0: the loss is eps0 (a - b), (a, b, rest) multinomial with P-masses
    (e^eps0, 1, 2)/(e^eps0 + 3); delta(eps) = E[(1 - e^(eps - L))_+] exactly.  eps0 = 0.3 lies on
    the 1e-4 grid, so the pessimistic PLD is exact up to round-off."""
    e0, k, n = 0.3, 4, 30
    z = math.exp(e0) + k - 1
    ph, pl, pr = math.exp(e0) / z, 1 / z, (k - 2) / z
    terms = []
    for a in range(n + 1):
        for b in range(n + 1 - a):
            c = n - a - b
            logp = (special.gammaln(n + 1) - special.gammaln(a + 1) - special.gammaln(b + 1) - special.gammaln(c + 1)
                    + a * math.log(ph) + b * math.log(pl) + c * math.log(pr))
            terms.append((e0 * (a - b), math.exp(logp)))
    loss = np.array([t[0] for t in terms])
    prob = np.array([t[1] for t in terms])

    def delta(eps):
        return float(np.sum(prob * np.maximum(0.0, 1 - np.exp(eps - loss))))

    exact = _invert(delta, DELTA, hi=n * e0)
    got = A.PLDAccountant().compose(A.RandomizedResponse(e0, k), n).get_epsilon(DELTA)
    assert got == pytest.approx(exact, abs=1e-9)


def test_objective_perturbation_pld_and_rdp():
    """Single release: the PLD epsilon brackets Theorem 3.1's exact inversion (Redberg, Koskela & Wang
    2024) from above within the 1e-3 profile dots; 3 releases: the RDP epsilon is 3x Theorem 3.2's
    curve converted by dp-accounting's compute_epsilon (value from dp-accounting 0.6.0)."""
    from dpfast.accounting.objective_perturbation import objective_perturbation_epsilon

    op = A.ObjectivePerturbation(6.0, math.sqrt(2), 0.5, 3.0)
    exact = objective_perturbation_epsilon(DELTA, 6.0, math.sqrt(2), 0.5, 3.0)
    got = A.PLDAccountant().compose(op).get_epsilon(DELTA)
    assert exact <= got <= exact + 1e-3
    assert A.RDPAccountant().compose(op, 3).get_epsilon(DELTA) == pytest.approx(2.468420876290439, rel=1e-12)
    three = A.PLDAccountant().compose(op, 3).get_epsilon(DELTA)
    assert exact < three < 3 * got  # composition costs less than basic composition


def test_calibration_results_are_verified_and_minimal():
    z = A.calibrate_noise_multiplier(2.0, DELTA, 0.01, 1000)
    eps = lambda s: A.PLDAccountant().compose(A.PoissonSampled(0.01, A.Gaussian(s)), 1000).get_epsilon(DELTA)
    assert eps(z) <= 2.0 < eps(z * (1 - 2e-3))
    zr = A.calibrate_noise_multiplier(2.0, DELTA, 0.01, 1000, accountant="rdp")
    assert zr > z  # RDP is looser than the PLD


def test_calibrate_single_gaussian_against_the_analytic_gaussian():
    """One Gaussian release: the smallest noise multiplier for (eps, delta) is the analytic Gaussian
    mechanism's (Balle & Wang 2018); the PLD's pessimism can only raise it, by little."""
    from dpfast.calibrate import gaussian_sigma

    analytic = gaussian_sigma(1.0, DELTA, 1.0)
    z = A.calibrate_parameter(lambda s: A.Gaussian(s), 1.0, DELTA, "pld", rtol=1e-4)
    assert analytic * (1 - 1e-4) <= z <= analytic * (1 + 1e-3)
    zr = A.calibrate_parameter(lambda s: A.Gaussian(s), 1.0, DELTA, "rdp")
    assert A.RDPAccountant().compose(A.Gaussian(zr)).get_epsilon(DELTA) <= 1.0 and zr > z


def test_calibrate_refuses_bad_arguments():
    with pytest.raises(ValueError, match="accountant"):
        A.calibrate_parameter(lambda s: A.Gaussian(s), 1.0, DELTA, "moments")
    with pytest.raises(ValueError, match="epsilon"):
        A.calibrate_parameter(lambda s: A.Gaussian(s), 0.0, DELTA)
    with pytest.raises(TypeError, match="make_event"):
        A.calibrate_parameter(A.Gaussian(1.0), 1.0, DELTA)
    with pytest.raises(ValueError, match="lo"):
        A.calibrate_parameter(lambda s: A.Gaussian(s), 1.0, DELTA, lo=2.0, hi=1.0)
    with pytest.raises(ValueError, match="no noise multiplier"):
        A.calibrate_parameter(lambda s: A.Gaussian(s), 1e-3, DELTA, "rdp", lo=0.1, hi=1.0)


# ------------------------------------------------------------------------------------------------
# refusals, ledger, copy, state
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [A.RDPAccountant, A.PLDAccountant])
def test_unsupported_event_raises_before_any_change(make):
    acc = make().compose(A.Gaussian(3.0), 2)
    before = (acc.ledger, acc.get_epsilon(DELTA))
    bad = A.PoissonSampled(0.1, A.Laplace(1.0))  # amplification registered for the Gaussian only
    assert not acc.supports(bad) and acc.supports(A.Laplace(1.0))
    with pytest.raises(A.UnsupportedEventError, match="Laplace"):
        acc.compose(bad)
    with pytest.raises(A.UnsupportedEventError):
        acc.compose(A.Composed((A.Laplace(1.0), bad)))  # nothing of the composition is applied
    assert (acc.ledger, acc.get_epsilon(DELTA)) == before
    assert issubclass(A.UnsupportedEventError, ValueError)


def test_rdp_accountant_refuses_profile_only_events():
    prof = A.FromPrivacyProfile(lambda e: np.exp(-np.asarray(e)) * 0.0, name="profile-only")
    acc = A.RDPAccountant()
    assert not acc.supports(prof)
    with pytest.raises(A.UnsupportedEventError, match="profile-only"):
        acc.compose(prof)
    assert acc.ledger == () and acc.get_epsilon(DELTA) == 0.0
    assert A.PLDAccountant().supports(prof)
    tuned = A.Tuned(A.Gaussian(3.0), "poisson", mean=3.0)
    assert A.RDPAccountant().supports(tuned) and not A.PLDAccountant().supports(tuned)


@pytest.mark.parametrize("make", [A.RDPAccountant, A.PLDAccountant])
def test_mixed_neighbouring_relations_are_refused(make):
    acc = make().compose(A.Gaussian(2.0))
    with pytest.raises(ValueError, match="neighbouring relation"):
        acc.compose(A.Gaussian(2.0, neighbours="replace_one"))
    assert acc.ledger == ((A.Gaussian(2.0), 1),)
    with pytest.raises(TypeError, match="DpEvent"):
        acc.compose("gaussian")
    with pytest.raises(ValueError, match="count"):
        acc.compose(A.Gaussian(2.0), -1)


@pytest.mark.parametrize("make", [A.RDPAccountant, A.PLDAccountant])
def test_ledger_copy_and_state_dict(make):
    acc = make().compose(PSG, 100).compose(PSG, 50).compose(A.Laplace(20.0))
    assert acc.ledger == ((PSG, 100), (PSG, 50), (A.Laplace(20.0), 1))
    eps = acc.get_epsilon(DELTA)
    cp = acc.copy()
    cp.compose(A.Gaussian(1.0))
    assert acc.get_epsilon(DELTA) == eps and acc.ledger == ((PSG, 100), (PSG, 50), (A.Laplace(20.0), 1))
    assert cp.get_epsilon(DELTA) > eps
    assert cp.get_epsilon(DELTA) == make().compose(PSG, 100).compose(PSG, 50).compose(A.Laplace(20.0)).compose(
        A.Gaussian(1.0)).get_epsilon(DELTA)
    state = json.loads(json.dumps(acc.state_dict()))
    back = PrivacyAccountant.from_state_dict(state)
    assert type(back) is make and back.ledger == acc.ledger and back.get_epsilon(DELTA) == eps
    assert make.from_state_dict(state).get_epsilon(DELTA) == eps
    other = A.PLDAccountant if make is A.RDPAccountant else A.RDPAccountant
    with pytest.raises(ValueError, match="not a"):
        other.from_state_dict(state)
    assert type(acc).__name__ in repr(acc) and "compositions=151" in repr(acc)


def test_pickled_pld_accountant_is_small_and_gives_the_same_answer():
    acc = A.PLDAccountant().compose(PSG, 1000)
    eps = acc.get_epsilon(DELTA)  # builds the discretizations and the composed lanes (megabytes)
    blob = pickle.dumps(acc)
    assert len(blob) < 10_000  # events, not PMFs (it was 7.5 MB)
    back = pickle.loads(blob)
    assert back.get_epsilon(DELTA) == eps and back.ledger == acc.ledger
    back.compose(PSG)  # the unpickled accountant has a working lock
    assert back.get_epsilon(DELTA) > eps


def test_copies_in_threads_are_independent():
    base = A.PLDAccountant().compose(PSG, 200)
    base.get_epsilon(DELTA)
    out = {}

    def work(i):
        out[i] = base.copy().compose(A.Gaussian(5.0 + i)).get_epsilon(DELTA)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i in range(4):
        assert out[i] == A.PLDAccountant().compose(PSG, 200).compose(A.Gaussian(5.0 + i)).get_epsilon(DELTA)
    assert base.ledger == ((PSG, 200),)


def test_make_accountant():
    assert isinstance(A.make_accountant("pld"), A.PLDAccountant)
    assert isinstance(A.make_accountant("rdp"), A.RDPAccountant)
    tmpl = A.PLDAccountant(1e-3, refine=False).compose(PSG)
    fresh = A.make_accountant(tmpl)
    assert fresh.ledger == () and fresh.value_discretization == 1e-3 and fresh.refine is False
    with pytest.raises(ValueError, match="accountant must be one of"):
        A.make_accountant("moments")
    with pytest.raises(ValueError, match="accountant must be one of"):
        A.make_accountant(3)


# ------------------------------------------------------------------------------------------------
# a new event and a new accountant, each added here, in this file only
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CoinFlip(ev.DpEvent):
    """Toy event: report a bit truthfully w.p. e^eps/(1 + e^eps) (binary randomized response)."""

    epsilon: float


def _coin_pair(e):
    p = math.exp(e) / (1 + math.exp(e))
    return np.array([p, 1 - p]), np.array([1 - p, p])


@rdp_curve.register
def _(event: CoinFlip, orders):
    return discrete_pair_rdp(orders, *_coin_pair(event.epsilon))


@dominating_pairs.register
def _(event: CoinFlip, h, tail, direction):
    return _discretize.discrete_pair_pmf(*_coin_pair(event.epsilon), h)


def test_a_new_event_is_one_class_plus_its_registrations():
    for make in (A.PLDAccountant, A.RDPAccountant):
        acc = make()
        assert acc.supports(CoinFlip(0.5))
        got = acc.compose(CoinFlip(0.5), 10).compose(A.Gaussian(4.0)).get_epsilon(DELTA)
        ref = make().compose(A.RandomizedResponse(0.5, 2), 10).compose(A.Gaussian(4.0)).get_epsilon(DELTA)
        assert got == pytest.approx(ref, rel=1e-12)
    # and it serialises like any other event
    assert A.from_dict(A.to_dict(CoinFlip(0.5))) == CoinFlip(0.5)


class BasicCompositionAccountant(PrivacyAccountant):
    """Toy accountant: pure-DP events only, epsilons add (Dwork et al. 2006)."""

    name = "toy_basic"

    def __init__(self):
        self._eps = 0.0
        self._init_base()

    def _config(self):
        return {}

    def _prepare(self, event):
        if isinstance(event, A.SelfComposed):
            return event.count * self._prepare(event.event)
        if isinstance(event, A.PureDP):
            return event.epsilon
        raise A.UnsupportedEventError(f"toy_basic accounts pure DP only, not {type(event).__name__}")

    def _apply(self, event, eps, count):
        self._eps += count * eps

    def get_epsilon(self, delta):
        return self._eps

    def get_delta(self, epsilon):
        return 0.0 if epsilon >= self._eps else 1.0


def test_a_new_accountant_is_one_class():
    acc = A.make_accountant("toy_basic")
    acc.compose(A.PureDP(0.25), 2).compose(A.SelfComposed(A.ReportNoisyMax(0.1), 5))
    assert acc.get_epsilon(DELTA) == pytest.approx(1.0) and acc.get_delta(1.0) == 0.0
    assert not acc.supports(A.Gaussian(1.0))
    with pytest.raises(A.UnsupportedEventError):
        acc.compose(A.Gaussian(1.0))
    back = PrivacyAccountant.from_state_dict(json.loads(json.dumps(acc.state_dict())))
    assert isinstance(back, BasicCompositionAccountant) and back.get_epsilon(DELTA) == pytest.approx(1.0)
    # the PLD accountant is never looser than basic composition
    assert A.PLDAccountant().compose(A.PureDP(0.25), 2).compose(A.ReportNoisyMax(0.1), 5).get_epsilon(DELTA) <= 1.0


@pytest.mark.slow
def test_dpsgd_fixed_size_calibration_goes_through_calibrate_and_is_verified():
    from dpfast.sgd import _privacy as P

    z = P.calibrate_noise_multiplier(2.0, DELTA, 0.02, 300, "shuffle", "pld")
    eps = lambda s: A.PLDAccountant().compose(  # noqa: E731
        A.SampledWithoutReplacement(0.02, A.Gaussian(s, neighbours="replace_one")), 300).get_epsilon(DELTA)
    assert eps(z) <= 2.0 < eps(z * (1 - 2e-3))
    assert P.run_event(z, 0.02, 300, "shuffle") == A.SelfComposed(
        A.SampledWithoutReplacement(0.02, A.Gaussian(z, neighbours="replace_one")), 300)
    assert P.description(z, 0.02, "poisson") == A.PoissonSampled(0.02, A.Gaussian(z))
