"""Glue between the preprocessing / model-selection estimators and the accounting spine.

The event classes and the budget live in :mod:`dpfast.accounting` and :mod:`dpfast.budget`
(issue 11); this module only picks them up, so that every release here names its event the
same way and charges it through the one helper, :func:`dpfast.budget.charge`, *before* any
noise is drawn.
"""
from __future__ import annotations

import importlib
import math
from typing import Any, Optional, Sequence

from dpfast import accounting


def charge(budget: Any, event: Any, label: str) -> None:
    """Charge ``event`` to ``budget`` (or to the default budget of an enclosing ``with budget:``)
    through :func:`dpfast.budget.charge`; nothing to do without a budget.

    Called before any noise is drawn: a refused charge raises ``BudgetExceededError`` and
    nothing is released.
    """
    try:
        budget_mod = importlib.import_module("dpfast.budget")
    except ImportError:
        if budget is not None:
            raise TypeError("budget= needs dpfast.budget (PrivacyBudget), which this installation lacks") from None
        return
    budget_mod.charge(budget, event, label=label)


def approx_dp(epsilon: float, delta: float):
    """The event of a generic (epsilon, delta)-DP release (its exact dominating pair)."""
    cls = getattr(accounting, "ApproxDP", None)
    if cls is not None:
        return cls(epsilon, delta)
    # The trade-off function f_{eps,delta} is that of this four-outcome pair (Kairouz, Oh &
    # Viswanath 2015): every (eps, delta)-DP mechanism is a post-processing of it.
    e = math.exp(-epsilon)  # e^-eps, no overflow for large epsilon
    hi, lo = (1.0 - delta) / (1.0 + e), (1.0 - delta) * e / (1.0 + e)
    return accounting.FromDominatingPair((delta, hi, lo, 0.0), (0.0, lo, hi, delta), name="ApproxDP")


def composed(events: Sequence[Any]):
    """The composition of ``events`` (None entries are zero-cost and dropped); None if empty,
    the event itself if there is one."""
    evs = tuple(e for e in events if e is not None)
    if not evs:
        return None
    if len(evs) == 1:
        return evs[0]
    cls = getattr(accounting, "Composed", None)
    if cls is None:
        raise NotImplementedError("composing events needs dpfast.accounting.Composed (issue 11)")
    return cls(evs)


def self_composed(event: Any, count: int):
    """``count``-fold composition of ``event``."""
    if count == 1:
        return event
    cls = getattr(accounting, "SelfComposed", None)
    if cls is None and isinstance(event, accounting.PureDP):
        return accounting.PureDP(count * event.epsilon)  # basic composition (looser, valid)
    if cls is None:
        raise NotImplementedError("composing events needs dpfast.accounting.SelfComposed (issue 11)")
    return cls(event, count)


def event_epsilon(event: Any, delta: float, accountant: str = "pld") -> float:
    """epsilon of ``event`` at ``delta`` by a fresh accountant (PLD by default)."""
    acc = accounting.PLDAccountant() if accountant == "pld" else accounting.RDPAccountant()
    acc.compose(event)
    return float(acc.get_epsilon(delta))

