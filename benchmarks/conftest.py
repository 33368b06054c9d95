"""Shared benchmark settings.

CI runs every benchmark once at smoke size (``--benchmark-disable``); set
``DPFAST_BENCH_FULL=1`` for the sizes quoted in RESULTS.md.  Peers are optional
(``pip install -e ".[bench]"``): a missing peer skips only its side of a comparison.
"""
import os
import time

import pytest

FULL = os.environ.get("DPFAST_BENCH_FULL") == "1"


def size(smoke: int, full: int) -> int:
    """Problem size: ``smoke`` in CI, ``full`` when DPFAST_BENCH_FULL=1."""
    return full if FULL else smoke


@pytest.fixture
def bench_size():
    return size


def best_time(fn, repeat: int = 3):
    """(best wall time over ``repeat`` calls, last result) -- for the scripts that print tables."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out
