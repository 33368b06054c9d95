"""Thread-safe, byte-bounded caches of the accountants (private).

The accountants cache work that depends only on an (immutable, hashable) mechanism description:
the RDP curve of a description at an order grid, and a description's discretized privacy-loss
distribution at a grid step.  Both caches are process-wide, so they are

* **bounded in bytes**: the sum of the cached arrays' ``nbytes`` never exceeds ``max_bytes``
  (least recently used entries are evicted first; an entry larger than the bound is not
  cached at all);
* **thread-safe**: every read and write holds one lock, and the size bookkeeping is a running
  total, never an iteration over the dictionary (which another thread may be changing);
* **clearable**: :func:`dpfast.accounting.clear_cache`.

Values are computed *outside* the lock (two threads may compute the same entry; both results
are equal, one is kept), so a slow discretization never blocks other threads' lookups.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable, List

__all__ = ["ByteBoundedCache", "clear_cache", "cache_info"]

_REGISTRY: List["ByteBoundedCache"] = []


class ByteBoundedCache:
    """A least-recently-used mapping whose values' total size stays <= ``max_bytes``."""

    def __init__(self, name: str, max_bytes: int, sizeof: Callable[[Any, Any], int]):
        self.name = name
        self.max_bytes = int(max_bytes)
        self._sizeof = sizeof
        self._lock = threading.Lock()
        self._data: "OrderedDict[Hashable, tuple]" = OrderedDict()
        self._nbytes = 0
        _REGISTRY.append(self)

    @property
    def nbytes(self) -> int:
        """Bytes held now (sum of the cached values' sizes)."""
        return self._nbytes

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key):
        """The cached value or None; raises TypeError for an unhashable key."""
        hash(key)
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None
            self._data.move_to_end(key)
            return hit[0]

    def put(self, key, value) -> None:
        """Insert (or refresh) ``key``; evicts least recently used entries to stay in bounds."""
        hash(key)  # an unhashable key raises TypeError here, outside the lock
        size = int(self._sizeof(key, value))
        if size > self.max_bytes:
            return  # never cached: it alone would exceed the bound
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._nbytes -= old[1]
            self._data[key] = (value, size)
            self._nbytes += size
            while self._nbytes > self.max_bytes:
                _, (_, s) = self._data.popitem(last=False)
                self._nbytes -= s

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._nbytes = 0


def clear_cache() -> None:
    """Empty the accountants' process-wide caches (RDP curves, at most 8 MiB; discretized PLDs,
    at most 32 MiB).  Results do not change; the next queries recompute what they need."""
    for c in _REGISTRY:
        c.clear()


def cache_info() -> dict:
    """``{name: {"entries", "nbytes", "max_bytes"}}`` for each of the accountants' caches."""
    return {c.name: {"entries": len(c), "nbytes": c.nbytes, "max_bytes": c.max_bytes} for c in _REGISTRY}
