"""Glue between the preprocessing / model-selection estimators and the accounting spine.

The event classes live in :mod:`dpfast.accounting` and the budget in :mod:`dpfast.budget`;
this module makes every release here report the guarantee of its event the same way
(:func:`accounted_epsilon`; the events are composed with
:func:`dpfast.accounting.events.composed` / ``self_composed``).
"""
from __future__ import annotations

import functools
from typing import Any

from dpfast import accounting

__all__ = ["accounted_epsilon"]

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
