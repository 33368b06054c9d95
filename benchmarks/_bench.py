"""Benchmark helpers shared by the bench_*.py modules and scripts (sizes, timing).

Imported by module name (``from _bench import size``): pytest puts benchmarks/ first on
``sys.path`` for these modules, and so does running one as a script.  Not ``conftest``: that
module name is taken by tests/conftest.py when one pytest run collects both directories.
"""
import os
import time

FULL = os.environ.get("DPFAST_BENCH_FULL") == "1"


def size(smoke: int, full: int) -> int:
    """Problem size: ``smoke`` in CI, ``full`` when DPFAST_BENCH_FULL=1."""
    return full if FULL else smoke


def best_time(fn, repeat: int = 3):
    """(best wall time over ``repeat`` calls, last result) -- for the scripts that print tables."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out
