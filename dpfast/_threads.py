"""Thread counts for the native kernels (private).

One place for what the kernels share: the number of usable CPUs (the process's affinity
mask, not the machine's core count) and the ``DPFAST_NUM_THREADS`` override.  Each caller
keeps its own rule for when a call is too small to split (its block size).
"""
from __future__ import annotations

import contextlib
import numbers
import os
import threading
from typing import Iterator, Optional

__all__ = ["CPUS", "cpu_count", "env_threads", "default_threads", "check_threads", "single_threaded_blas"]

DEFAULT_CAP = 4  # default thread count for the sampling kernels: at most this many cores


def cpu_count() -> int:
    """CPUs this process may run on (``os.sched_getaffinity``; ``os.cpu_count`` elsewhere)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


CPUS = cpu_count()


def env_threads(upper: Optional[int] = None) -> Optional[int]:
    """The ``DPFAST_NUM_THREADS`` setting, or None when it is unset (or empty).

    Raises ValueError unless it is an integer >= 1 (and <= ``upper`` when given).
    """
    env = os.environ.get("DPFAST_NUM_THREADS")
    if not env:
        return None
    try:
        t = int(env)
    except ValueError:
        t = 0
    if upper is None:
        if t < 1:
            raise ValueError(f"DPFAST_NUM_THREADS must be a positive integer, got {env!r}")
    elif not 1 <= t <= upper:
        raise ValueError(f"DPFAST_NUM_THREADS must be an integer in [1, {upper}], got {env!r}")
    return t


def default_threads(upper: Optional[int] = None, cap: int = DEFAULT_CAP) -> int:
    """``DPFAST_NUM_THREADS`` when set (validated against ``upper``), else min(CPUS, cap)."""
    t = env_threads(upper)
    return max(1, min(CPUS, cap)) if t is None else t


def check_threads(n_threads, upper: int = 4096) -> int:
    """A caller's ``n_threads`` argument: an integer in [1, ``upper``] (TypeError / ValueError)."""
    if isinstance(n_threads, bool) or not isinstance(n_threads, numbers.Integral):
        raise TypeError(f"n_threads must be a positive integer or None, got {n_threads!r}")
    if not 1 <= n_threads <= upper:
        raise ValueError(f"n_threads must be in [1, {upper}], got {n_threads!r}")
    return int(n_threads)


# --------------------------------------------------------------- scoped BLAS thread limit
#
# threadpoolctl knows the thread controls of OpenBLAS, MKL, BLIS, FlexiBLAS and Accelerate (it
# finds every loaded one), so nothing here depends on which BLAS SciPy links.  A bare
# ``threadpool_limits`` per call is not enough when calls overlap in threads: each records the
# count it finds on entry and puts it back on exit, so with two overlapping fits the second
# records the first's limit (1) and restores *that* after the first has restored the user's 2
# (observed: OpenBLAS 2 -> 1 after 4 concurrent DP-SGD fits).  Instead, one process-wide limit
# is held while any caller is inside: the first to enter records the original counts and sets
# the limit, the last to leave restores exactly the recorded counts.
_blas_lock = threading.Lock()
_blas_depth = 0
_blas_limiter = None


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Limit every loaded BLAS to one thread while inside; re-entrant and thread-safe.

    Nested and concurrent uses (from any number of threads) share one limit; when the last
    one leaves, each BLAS gets back exactly the thread count it had before the first entered.
    Changes that other code makes to the BLAS thread count while a dpfast caller is inside are
    overwritten on exit.
    """
    global _blas_depth, _blas_limiter
    with _blas_lock:
        if _blas_depth == 0:
            from threadpoolctl import threadpool_limits

            _blas_limiter = threadpool_limits(limits=1, user_api="blas")
        _blas_depth += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_depth -= 1
            if _blas_depth == 0:
                limiter, _blas_limiter = _blas_limiter, None
                limiter.restore_original_limits()
