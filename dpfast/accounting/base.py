"""The accountant interface every dpfast accountant implements.

Shape after dp-accounting's ``PrivacyAccountant`` (``supports`` / ``compose`` /
``get_epsilon`` / ``get_delta`` and ``UnsupportedEventError``) and Opacus's accountant
``state_dict``.  A subclass implements four hooks:

* ``_prepare(event)``: the work that depends on the event alone (an RDP curve, the discretized
  PLDs), done outside the lock; raises :class:`UnsupportedEventError` for an event the
  accountant cannot account.  It runs *before* any state changes, so a refused event leaves
  the accountant exactly as it was.
* ``_apply(event, prepared, count)``: the state update (under the lock);
* ``get_epsilon(delta)`` / ``get_delta(epsilon)``;
* ``_config()``: the constructor's keyword arguments (for ``copy``, ``state_dict`` and
  :func:`make_accountant`).

The state of an accountant is its ledger of events, so ``state_dict`` holds events (via
:func:`dpfast.accounting.events.to_dict`), never PMFs, and restoring re-composes them.
"""
from __future__ import annotations

import copy as _copy
from typing import Any, Dict, List, Optional, Tuple, TypeVar, Union

from dpfast._validation import check_int
from dpfast.accounting._locking import LockedState
from dpfast.accounting.events import (
    DpEvent,
    Neighbours,
    UnsupportedEventError,
    event_neighbours,
    from_dict,
    to_dict,
)

__all__ = ["PrivacyAccountant", "UnsupportedEventError", "make_accountant", "check_count"]

#: ``compose`` returns ``self``: an accountant of the caller's own class (for chained calls)
_Acc = TypeVar("_Acc", bound="PrivacyAccountant")


def check_count(count: object) -> int:
    """A composition count: an integer >= 0 (bools refused); :func:`dpfast._validation.check_int`."""
    return check_int(count, "count", 0)


#: accountant name -> class; filled by ``PrivacyAccountant.__init_subclass__`` (``name`` attribute).
_ACCOUNTANTS: Dict[str, "type[PrivacyAccountant]"] = {}


class PrivacyAccountant(LockedState):
    """Base class of the accountants: a ledger of composed events and the guarantee it gives.

    Thread-safe: ``compose`` and the queries hold a per-accountant re-entrant lock, so every
    composition is counted once and results equal the sequential ones.
    """

    #: short name used by :func:`make_accountant` and in ``state_dict`` (subclasses set it)
    name: str = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name:
            _ACCOUNTANTS.setdefault(cls.name, cls)

    def _init_base(self) -> None:
        self._ledger: List[Tuple[DpEvent, int]] = []
        self.neighbours: Optional[Neighbours] = None
        self._init_lock()

    # -- hooks ---------------------------------------------------------------------------------
    def _prepare(self, event: DpEvent) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _apply(self, event: DpEvent, prepared: Any, count: int) -> None:  # pragma: no cover
        raise NotImplementedError

    def _config(self) -> Dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def get_epsilon(self, delta: float) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def get_delta(self, epsilon: float) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- interface -----------------------------------------------------------------------------
    def supports(self, event: DpEvent) -> bool:
        """Whether this accountant can compose ``event`` (and every event inside it)."""
        if not isinstance(event, DpEvent):
            return False
        try:
            self._prepare(event)
        except UnsupportedEventError:
            return False
        return True

    def compose(self: _Acc, event: DpEvent, count: int = 1) -> _Acc:
        """Add ``count`` adaptive runs of ``event`` to the ledger; returns ``self``.

        Raises (before changing anything): TypeError for a non-event, ValueError for a bad
        count or a neighbouring relation other than the ledger's,
        :class:`UnsupportedEventError` for an event this accountant cannot account.
        """
        count = check_count(count)
        if not isinstance(event, DpEvent):
            raise TypeError(f"expected a DpEvent (dpfast.accounting.events), got {type(event).__name__}")
        nb = event_neighbours(event)
        prepared = self._prepare(event)  # outside the lock (may be slow); raises before any change
        with self._lock:
            if self.neighbours is not None and nb != self.neighbours:
                raise ValueError(f"cannot compose a {nb.value!r} event with {self.neighbours.value!r} ones "
                                 "(one neighbouring relation per accountant)")
            if count:
                self._apply(event, prepared, count)
                # one entry per call (not merged), so that replaying the ledger restores the
                # floating-point state exactly (100 c + 50 c need not equal 150 c)
                self._ledger.append((event, count))
                self.neighbours = nb
        return self

    @property
    def ledger(self) -> Tuple[Tuple[DpEvent, int], ...]:
        """The composed ``(event, count)`` pairs, one per ``compose`` call with count > 0, in order."""
        with self._lock:
            return tuple(self._ledger)

    def copy(self: _Acc) -> _Acc:
        """An independent accountant with the same ledger (cheap: shares immutable caches)."""
        with self._lock:
            new = _copy.copy(self)
            new._ledger = list(self._ledger)
            new._init_lock()
            self._copy_into(new)
        return new

    def _copy_into(self, new: "PrivacyAccountant") -> None:
        """Make ``new`` (a shallow copy) independent of ``self``; subclasses extend it."""

    def state_dict(self) -> Dict[str, Any]:
        """``{"accountant": name, "config": {...}, "ledger": [[event dict, count], ...]}``:
        JSON-able, small (events, not PMFs).  TypeError when an event holds a callable."""
        with self._lock:
            return {"accountant": self.name, "config": dict(self._config()),
                    "ledger": [[to_dict(e), c] for e, c in self._ledger]}

    @classmethod
    def from_state_dict(cls, state: Dict[str, Any]) -> "PrivacyAccountant":
        """The accountant of :meth:`state_dict` (re-composes its ledger)."""
        if not isinstance(state, dict) or not {"accountant", "config", "ledger"} <= set(state):
            raise TypeError("state must be a dict made by PrivacyAccountant.state_dict()")
        klass = _ACCOUNTANTS.get(state["accountant"])
        if klass is None:
            raise ValueError(f"unknown accountant {state['accountant']!r}; known: {sorted(_ACCOUNTANTS)}")
        if cls is not PrivacyAccountant and not issubclass(klass, cls):
            raise ValueError(f"state is of a {klass.__name__}, not a {cls.__name__}")
        acc = klass(**state["config"])
        for d, c in state["ledger"]:
            acc.compose(from_dict(d), int(c))
        return acc

    def __repr__(self) -> str:
        cfg = ", ".join(f"{k}={v!r}" for k, v in self._config().items() if k != "orders")
        n = sum(c for _, c in self._ledger)
        return f"{type(self).__name__}({cfg}{', ' if cfg else ''}compositions={n})"


def make_accountant(accountant: Union[str, PrivacyAccountant] = "pld", **kwargs: Any) -> PrivacyAccountant:
    """A new, empty accountant: by name (``"pld"``, ``"rdp"``, with constructor ``kwargs``), or
    an empty one with the configuration of a given accountant instance.  The one place where an
    accountant is chosen by name."""
    if isinstance(accountant, PrivacyAccountant):
        cfg = dict(accountant._config())
        cfg.update(kwargs)
        return type(accountant)(**cfg)
    if isinstance(accountant, str):
        # the built-in accountants register themselves when their modules are imported, which
        # importing dpfast.accounting (the parent of this module) always does
        klass = _ACCOUNTANTS.get(accountant)
        if klass is not None:
            return klass(**kwargs)
    raise ValueError(f"accountant must be one of {sorted(_ACCOUNTANTS) or ['pld', 'rdp']} or a "
                     f"PrivacyAccountant, got {accountant!r}")
