"""``OneOf``: the event of a run that performs one of several releases, chosen at random
independently of the data (a tuning run whose candidate is drawn at random).

Accounted by RDP only: Renyi divergence is jointly quasi-convex (van Erven & Harremoes 2014,
"Renyi divergence and Kullback-Leibler divergence", IEEE Trans. Inf. Theory, Thm. 13), so for
any data-independent mixture weights, D_lambda(sum_i w_i P_i || sum_i w_i Q_i) <=
max_i D_lambda(P_i || Q_i): the mixture's RDP curve is at most the pointwise maximum of the
members' curves.  (A new event is one class plus its registration, issue 11.)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Tuple

import numpy as np

from dpfast.accounting.events import Composed, DpEvent, Neighbours, event_neighbours
from dpfast.accounting.rdp import rdp_curve

__all__ = ["OneOf"]


@dataclass(frozen=True)
class OneOf(DpEvent):
    """One of ``events``, picked independently of the data; RDP <= the members' maximum."""

    events: Tuple[DpEvent, ...] = field(default=())

    def __post_init__(self):
        evs = self.events
        if isinstance(evs, DpEvent) or not isinstance(evs, (tuple, list)) or not evs:
            raise TypeError("events must be a non-empty tuple of DpEvent")
        for k, e in enumerate(evs):
            if not isinstance(e, DpEvent):
                raise TypeError(f"events[{k}] must be a DpEvent, got {type(e).__name__}")
        object.__setattr__(self, "events", tuple(evs))
        event_neighbours(Composed(self.events))  # one neighbouring relation for all

    @property
    def neighbours(self) -> Neighbours:
        return event_neighbours(Composed(self.events))


@rdp_curve.register
def _(event: OneOf, orders):
    return np.max([np.asarray(rdp_curve(e, orders), dtype=np.float64) for e in event.events], axis=0)
