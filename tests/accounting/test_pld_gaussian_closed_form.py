"""PLDAccountant answers a ledger of Gaussians alone in closed form (search36).

k Gaussians of noise multipliers z_j, composed c_j times each, are exactly the Gaussian
mechanism with mu = sqrt(sum_j c_j / z_j^2) (Dong, Roth & Su 2022, Corollary 3.3), whose
privacy profile is delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Balle & Wang
2018, Theorem 8).  The accountant's get_epsilon / get_delta must be upper bounds on it (never
below, after rounding) and as tight as the closed form's evaluation (1e-9 relative here);
the references below are mpmath at 60 digits, independent of dpfast's SciPy evaluation, and
dp-accounting's PLD (its pessimistic and optimistic estimates bracket the true value).
"""
import math
from fractions import Fraction

import numpy as np
import pytest

from dpfast import PrivacyBudget
from dpfast.accounting import PLDAccountant, pld as pld_mod
from dpfast.accounting.calibration import certified_gaussian_multiplier
from dpfast.accounting.erm_calibration import calibrate_output
from dpfast.accounting.events import Composed, Gaussian, Laplace, SelfComposed
from dpfast.accounting.incremental import IncrementalPLD

from _mp_gaussian import CTX as _CTX, exact_delta, exact_eps, exact_mu

DELTAS = [1e-300, 1e-100, 1e-30, 1e-18, 1e-10, 1e-5, 0.1, 0.5, 1 - 1e-6, 1 - 1e-9, 1 - 1e-12]

# (z, count) ledgers: one Gaussian (epsilon ~64 at 1e-5 for z = 0.0745), self-composed, and
# Gaussians of different multipliers composed (one mu-GDP mechanism)
LEDGERS = {
    "one-eps64": [(0.07450580596923828, 1)],
    "one": [(1.0, 1)],
    "self-composed": [(5000.0, 1000)],
    "many": [(2.0, 1000)],
    "mixed-z": [(0.8, 3), (2.5, 10), (1.3, 1)],
}


def _accountant(ledger):
    acc = PLDAccountant()
    for z, c in ledger:
        acc.compose(Gaussian(z), c)
    return acc


@pytest.mark.parametrize("name", sorted(LEDGERS))
def test_epsilon_is_the_closed_form_rounded_up_at_every_delta(name):
    ledger = LEDGERS[name]
    mu = exact_mu(ledger)
    acc = _accountant(ledger)
    for delta in DELTAS:
        got = acc.get_epsilon(delta)
        exact = exact_eps(delta, mu)
        assert exact <= got, (delta, got, exact)  # never below the true epsilon
        # and tight (near delta = 1, 1 - delta carries the evaluation's absolute error, ~2e-14:
        # 0.5 % of epsilon at 1 - 1e-12 for mu = 15.8, where the discretization gave 2.3 %)
        assert got <= exact * (1 + (1e-9 if delta <= 0.5 else 1e-2)) + 1e-15, (delta, got, exact)
        # the delta reported at the epsilon reported is within the asked one
        assert exact_delta(got, mu) <= delta


@pytest.mark.parametrize("name", sorted(LEDGERS))
def test_delta_is_the_closed_form_rounded_up(name):
    ledger = LEDGERS[name]
    mu = exact_mu(ledger)
    acc = _accountant(ledger)
    m = float(mu)
    for eps in [0.0, 1e-3, 0.5 * m * m, m * m, 3 * m * m + 1, 8 * m + 5, 700.0]:
        got = acc.get_delta(eps)
        exact = exact_delta(eps, mu)
        assert exact <= got, (eps, got, exact)
        assert got <= exact * (1 + 1e-9) + 5e-324, (eps, got, exact)
    assert acc.get_delta(math.inf) == 0.0


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in ("one-eps64", "many") else n
                                  for n in sorted(LEDGERS)])  # (those two: 6-7 s of FFT each)
def test_never_looser_than_the_discretization(name, monkeypatch):
    # the closed form replaced the FFT composition for these ledgers: at every delta it must
    # report at most what the discretization reported (which is inf below its +inf atom, ~1e-22)
    closed = _accountant(LEDGERS[name])
    monkeypatch.setattr(PLDAccountant, "_closed_form", False)
    fft = _accountant(LEDGERS[name])
    for delta in DELTAS:
        assert closed.get_epsilon(delta) <= fft.get_epsilon(delta), delta
    m = float(exact_mu(LEDGERS[name]))
    for eps in [0.0, 0.5 * m * m, m * m, 8 * m + 5]:
        assert closed.get_delta(eps) <= fft.get_delta(eps), eps


def test_every_composition_node_is_one_gaussian():
    # SelfComposed, Composed and repeated compose() calls of the same Gaussians: one mu
    mu = exact_mu([(0.8, 6), (2.5, 10)])
    a = PLDAccountant().compose(Composed([SelfComposed(Gaussian(0.8), 3), Gaussian(2.5)]), 2)
    a.compose(SelfComposed(Gaussian(2.5), 8))
    b = PLDAccountant().compose(Gaussian(2.5), 10).compose(Gaussian(0.8, sensitivity=7.0), 6)
    for delta in [1e-12, 1e-5, 0.3]:
        assert a.get_epsilon(delta) == b.get_epsilon(delta)
        assert exact_eps(delta, mu) <= a.get_epsilon(delta) <= exact_eps(delta, mu) * (1 + 1e-9)


def test_composed_mu_is_rounded_up():
    rng = np.random.default_rng(3)
    for _ in range(200):
        k = int(rng.integers(1, 6))
        ledger = [(float(rng.lognormal(0.0, 3.0)), int(rng.integers(1, 10 ** 6))) for _ in range(k)]
        m = pld_mod.gaussian_ledger_mu([(Gaussian(z), c) for z, c in ledger])
        mu2 = sum(Fraction(c) / Fraction(z) ** 2 for z, c in ledger)  # exact
        assert Fraction(m) ** 2 >= mu2
        assert m <= float(exact_mu(ledger)) * (1 + 8 * 2.0 ** -53)  # a few ulps at most
    # out of the closed form's range, or not Gaussians alone: None (the discretization answers)
    assert pld_mod.gaussian_ledger_mu([(Gaussian(1e-160), 1)]) is None
    assert pld_mod.gaussian_ledger_mu([(Gaussian(1.0), 1), (Laplace(1.0), 1)]) is None
    assert pld_mod.gaussian_ledger_mu([]) is None


def test_other_ledgers_are_still_discretized():
    acc = PLDAccountant().compose(Gaussian(1.0)).compose(Laplace(2.0))
    acc.get_epsilon(1e-5)
    assert acc.grid_step == 1e-4  # (set by the discretized composition only)
    acc = PLDAccountant().compose(Gaussian(1.0))
    acc.get_epsilon(1e-5)
    assert not hasattr(acc, "grid_step")


def test_bounds_bracket_the_closed_form():
    # get_epsilon_bounds: the optimistic side is still the discretization's, the pessimistic
    # the closed form; both are ordered and bracket the exact value
    acc = PLDAccountant().compose(Gaussian(1.0), 10)
    mu = exact_mu([(1.0, 10)])
    for delta in [1e-10, 1e-5, 0.5]:
        lo, hi = acc.get_epsilon_bounds(delta)
        assert lo <= exact_eps(delta, mu) <= hi == acc.get_epsilon(delta)
    for eps in [0.5, 3.0]:
        lo, hi = acc.get_delta_bounds(eps)
        assert lo <= exact_delta(eps, mu) <= hi == acc.get_delta(eps)


@pytest.mark.parametrize("z, n", [(1.0, 1), pytest.param(0.0745, 1, marks=pytest.mark.slow),  # (dp-accounting: 5-8 s)
                                  (5.0, 100), (50.0, 1000), (2.0, 1000)])
def test_within_dp_accounting_pld_interval(z, n):
    dpa_pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    ours = PLDAccountant().compose(Gaussian(z), n)
    for delta in [1e-10, 1e-5, 1e-2]:
        pess, opt = (dpa_pld.from_gaussian_mechanism(z, value_discretization_interval=1e-3,
                                                     pessimistic_estimate=p).self_compose(n)
                     .get_epsilon_for_delta(delta) for p in (True, False))
        # (dp-accounting's pessimistic reading of one Gaussian(0.0745) at 1e-5, 146.46538678584,
        # is itself 1e-11 relative below mpmath's exact 146.46538678725: hence the 1e-9)
        assert opt <= ours.get_epsilon(delta) <= pess * (1 + 1e-9), (delta, opt, ours.get_epsilon(delta), pess)


@pytest.mark.parametrize("epsilon", [0.0144075731, 0.0620804, 0.555264, 1.0, 2.39256, 64.0])
def test_calibrated_gaussian_is_private_and_tight(epsilon):
    # the calibration's multiplier is verified by the closed form: its exact epsilon is within
    # the target, and within 1e-8 of the analytic Gaussian's smallest multiplier
    for delta in [1e-3, 1e-5, 1e-8]:
        z = certified_gaussian_multiplier(epsilon, delta, 1.0, "pld")
        mu = 1 / _CTX.mpf(z)
        assert exact_delta(epsilon, mu) <= delta
        assert exact_delta(epsilon, mu * (1 + 1e-8)) > delta  # no needless noise


@pytest.mark.parametrize("epsilon", [0.0144075731, 0.0620804, 0.555264, 1.15261, 2.39256])
def test_a_release_calibrated_at_the_budget_fits_it(epsilon):
    # Before: output perturbation calibrated by PLDAccountant (closed form) at the budget's own
    # epsilon was refused by the PLD budget, whose discretized lanes read a hair above it
    # ("the composition would be (0.555264, 1e-05)-DP").  The budget's ledger of Gaussians is
    # answered by the same closed form.
    cal = calibrate_output(epsilon, 1e-5, lipschitz=1.0, tau=0.0, accountant="pld")
    budget = PrivacyBudget(epsilon, 1e-5, accountant="pld")
    budget.charge(cal.event)
    assert budget.spent() == cal.epsilon <= epsilon
    # and the incremental ledger equals a from-scratch accountant, Gaussian after Gaussian
    inc, acc = IncrementalPLD(), PLDAccountant()
    for z in [3.0, 0.9, 3.0, 12.0]:
        inc, acc = inc.extended(Gaussian(z)), acc.compose(Gaussian(z))
        assert inc.epsilon(1e-5) == acc.get_epsilon(1e-5)
        assert inc.delta(1.0) == acc.get_delta(1.0)
    inc = inc.extended(Laplace(5.0))  # no longer Gaussians alone: the lanes answer
    assert inc.epsilon(1e-5) >= acc.compose(Laplace(5.0)).get_epsilon(1e-5) * (1 - 1e-6)


@pytest.mark.parametrize("epsilon, delta, steps", [(1.0, 1e-5, 100), (3.0, 1e-5, 1000), (8.0, 1e-6, 10)])
def test_full_batch_noise_multiplier_is_the_exact_one(epsilon, delta, steps):
    # DP-SGD with sample rate 1: steps Gaussians are one of mu = sqrt(steps) / z.  Before, the
    # search stopped anywhere within rtol (1e-3) above the discretized root (37.30636 for the
    # first case); now z is within 1e-9 of the exact smallest multiplier and still private.
    from dpfast.accounting import calibrate_noise_multiplier
    z = calibrate_noise_multiplier(epsilon, delta, 1.0, steps, "pld")
    mu = _CTX.sqrt(steps) / _CTX.mpf(z)
    assert exact_delta(epsilon, mu) <= delta
    assert exact_delta(epsilon, mu * (1 + 1e-8)) > delta
