"""Glue between the preprocessing / model-selection estimators and the accounting spine.

The event classes live in :mod:`dpfast.accounting` and the budget in :mod:`dpfast.budget`;
this module only gathers the few constructions these estimators share, so that every release
here names its event the same way (each estimator charges it through the estimator base
before any noise is drawn) and reports the guarantee of that event the same way
(:func:`accounted_epsilon`).
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

from dpfast import accounting

__all__ = ["composed", "self_composed", "accounted_epsilon"]

#: The accountant that states the guarantee of an approximate-DP release here (the default of
#: :func:`dpfast.accounting.make_accountant` and of :class:`dpfast.PrivacyBudget`).
ACCOUNTANT = "pld"


@functools.lru_cache(maxsize=256)
def accounted_epsilon(event: Any, delta: float, accountant: str = ACCOUNTANT) -> float:
    """The accountant's epsilon of ``event`` at ``delta`` > 0: what ``epsilon_`` reports, so that
    ``epsilon_ == make_accountant(accountant_).compose(event_).get_epsilon(delta_)`` holds by
    construction (issue 23, the release spine).  Cached: events are immutable public data, and a
    fit loop (an audit, a pipeline search) asks for the same one many times."""
    return float(accounting.make_accountant(accountant).compose(event).get_epsilon(delta))


def composed(events: Sequence[Any]):
    """The composition of ``events`` (None entries are zero-cost and dropped); None if empty,
    the event itself if there is one."""
    evs = tuple(e for e in events if e is not None)
    if not evs:
        return None
    if len(evs) == 1:
        return evs[0]
    return accounting.Composed(evs)


def self_composed(event: Any, count: int):
    """``count``-fold composition of ``event`` (the event itself for count 1)."""
    return event if count == 1 else accounting.SelfComposed(event, count)
