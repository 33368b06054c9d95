"""Glue between the preprocessing / model-selection estimators and the accounting spine.

The event classes live in :mod:`dpfast.accounting` and the budget in :mod:`dpfast.budget`;
this module only gathers the few constructions these estimators share, so that every release
here names its event the same way (each estimator charges it through the estimator base
before any noise is drawn).
"""
from __future__ import annotations

from typing import Any, Sequence

from dpfast import accounting

__all__ = ["composed", "self_composed"]


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
