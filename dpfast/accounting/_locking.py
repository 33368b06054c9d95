"""One lock per accountant, left out of its pickled state (a lock is not state: a copy or an
unpickled accountant gets a fresh one)."""
from __future__ import annotations

import threading


class LockedState:
    """Mixin: ``self._lock`` (re-entrant), created in ``_init_lock`` and after unpickling."""

    def _init_lock(self) -> None:
        self._lock = threading.RLock()

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_lock()
