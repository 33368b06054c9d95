"""Basic composition: the one home of the pure / approximate DP guarantee of an event.

Dwork & Roth (2014), "The Algorithmic Foundations of Differential Privacy", Theorem 3.16: the
adaptive composition of (eps_i, delta_i)-DP releases is (sum eps_i, sum delta_i)-DP.  The
accountants take the minimum of their own bound and this one (both are valid upper bounds), so
that a ledger of pure and approximate DP events never reports more than the plain sums -- the PLD
accountant's pessimistic discretisation otherwise adds ~1e-4 (e.g. Composed(PureDP(1/3),
PureDP(1/3), ApproxDP(1/3, 1e-6)) at delta = 1e-6: PLD 1.0002, basic composition exactly 1).

Sums are exact (``fractions.Fraction`` of the stored doubles); the epsilon returned is rounded up.
Events without a closed-form (eps, delta) guarantee (Gaussian, sampled, tuned, ...) have none:
:func:`approx_dp` returns None for them and for any composition containing one.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Iterable, Optional, Tuple

from dpfast.accounting import events as ev

__all__ = ["approx_dp", "basic_composition", "ledger_epsilon", "ledger_delta", "round_up", "at_least"]

Guarantee = Tuple[Fraction, Fraction]


@functools.singledispatch
def approx_dp(event) -> Optional[Guarantee]:
    """The exact (epsilon, delta) guarantee of ``event`` by basic composition, or None."""
    return None


@approx_dp.register
def _(event: ev.PureDP) -> Optional[Guarantee]:  # ExponentialMechanism, ReportNoisyMax: subclasses
    return Fraction(event.epsilon), Fraction(0)


@approx_dp.register
def _(event: ev.RandomizedResponse) -> Optional[Guarantee]:
    return Fraction(event.epsilon), Fraction(0)


@approx_dp.register
def _(event: ev.Laplace) -> Optional[Guarantee]:
    return Fraction(event.sensitivity) / Fraction(event.scale), Fraction(0)


@approx_dp.register
def _(event: ev.ApproxDP) -> Optional[Guarantee]:
    return Fraction(event.epsilon), Fraction(event.delta)


@approx_dp.register
def _(event: ev.Composed) -> Optional[Guarantee]:
    return basic_composition((e, 1) for e in event.events)


@approx_dp.register
def _(event: ev.SelfComposed) -> Optional[Guarantee]:
    return basic_composition([(event.event, event.count)])


def basic_composition(ledger: Iterable[Tuple[object, int]]) -> Optional[Guarantee]:
    """(sum count * eps, sum count * delta) over ``(event, count)`` pairs, or None if any event
    has no closed-form guarantee."""
    eps, delta = Fraction(0), Fraction(0)
    for event, count in ledger:
        g = approx_dp(event)
        if g is None:
            return None
        eps += count * g[0]
        delta += count * g[1]
    return eps, delta


def round_up(x: Fraction) -> float:
    """The smallest double >= ``x``."""
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def at_least(x: float, bound: Fraction) -> bool:
    """``x >= bound`` exactly, for a double ``x`` (inf included; NaN is False)."""
    return x == math.inf or (math.isfinite(x) and Fraction(x) >= bound)


def ledger_epsilon(ledger: Iterable[Tuple[object, int]], delta: float) -> float:
    """Basic composition's epsilon at ``delta`` (rounded up): inf when it does not apply
    (an event without a closed form, or ``delta`` below the summed deltas)."""
    g = basic_composition(ledger)
    if g is None or not at_least(delta, g[1]):
        return math.inf
    return round_up(g[0])


def ledger_delta(ledger: Iterable[Tuple[object, int]], epsilon: float) -> float:
    """Basic composition's delta at ``epsilon`` (rounded up): 1 when it does not apply."""
    g = basic_composition(ledger)
    if g is None or not at_least(epsilon, g[0]):
        return 1.0
    return min(1.0, round_up(g[1]))
