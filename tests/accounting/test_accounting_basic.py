"""Basic composition (Dwork & Roth 2014, Theorem 3.16) as the accountants' floor.

Expected values are the theorem's sums, computed here with Fractions; the accountants must never
report more than them, and never less than their own certified lower bounds."""
import math
from fractions import Fraction

import pytest

from dpfast import accounting as acc
from dpfast.accounting import basic
from dpfast.budget import PrivacyBudget


def test_the_issue_example_fits_its_budget():
    # tables.aggregate(epsilon=1, delta=1e-6) with private selection: three thirds of the budget
    e = acc.Composed([acc.PureDP(1 / 3), acc.PureDP(1 / 3), acc.ApproxDP(1 / 3, 1e-6)])
    exact = 3 * Fraction(1 / 3)  # the sum of the stored doubles, < 1
    assert exact < 1 and float(exact) == 1.0
    a = acc.make_accountant("pld").compose(e)
    assert a.get_epsilon(1e-6) == 1.0
    lo, hi = a.get_epsilon_bounds(1e-6)
    assert lo <= hi == 1.0
    assert a.get_delta(1.0) == 1e-6
    assert a.get_epsilon(5e-7) == math.inf  # below the summed deltas the ApproxDP atom decides
    b = PrivacyBudget(1, 1e-6)
    b.charge(e)  # refused before (PLD 1.0002)
    assert b.spent() == 1.0


@pytest.mark.parametrize("name", ["pld", "rdp"])
def test_pure_ledgers_never_exceed_the_sum(name):
    events = [acc.PureDP(0.3), acc.Laplace(2.0, sensitivity=0.5), acc.RandomizedResponse(0.2, 4),
              acc.ExponentialMechanism(0.1)]
    total = Fraction(0.3) + Fraction(0.5) / Fraction(2.0) + Fraction(0.2) + Fraction(0.1)
    a = acc.make_accountant(name)
    for e in events:
        a.compose(e, 2)
    for delta in (1e-300, 1e-12, 1e-6, 0.5, 1 - 1e-12):
        eps = a.get_epsilon(delta)
        assert Fraction(eps) >= 0
        assert Fraction(eps) <= 2 * total + Fraction(2, 10**15)
    assert a.get_delta(float(2 * total) * (1 + 1e-15)) == 0.0


def test_events_without_closed_form_are_left_to_the_accountant():
    assert basic.approx_dp(acc.Gaussian(1.0)) is None
    assert basic.approx_dp(acc.Composed([acc.PureDP(1.0), acc.Gaussian(1.0)])) is None
    assert basic.approx_dp(acc.PoissonSampled(0.1, acc.PureDP(1.0))) is None
    assert basic.ledger_epsilon([(acc.PureDP(1.0), 1), (acc.Gaussian(2.0), 3)], 1e-6) == math.inf
    g = basic.approx_dp(acc.SelfComposed(acc.ApproxDP(0.1, 1e-7), 10))
    assert g == (10 * Fraction(0.1), 10 * Fraction(1e-7))


def test_sums_are_rounded_up():
    # 0.1 + 0.2 in floating point is 0.30000000000000004; the exact sum of the doubles is below it,
    # and round_up returns the smallest double >= the exact sum
    x = Fraction(0.1) + Fraction(0.2)
    r = basic.round_up(x)
    assert Fraction(r) >= x and Fraction(math.nextafter(r, 0.0)) < x
    assert basic.at_least(math.inf, x) and not basic.at_least(float("nan"), x)
