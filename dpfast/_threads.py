"""Thread counts for the native kernels (private).

One place for what the kernels share: the number of usable CPUs (the process's affinity
mask, not the machine's core count) and the ``DPFAST_NUM_THREADS`` override.  Each caller
keeps its own rule for when a call is too small to split (its block size).
"""
from __future__ import annotations

import os
from typing import Optional

__all__ = ["CPUS", "cpu_count", "env_threads", "default_threads"]

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
