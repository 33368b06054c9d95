"""Shared benchmark settings.

CI runs every benchmark once at smoke size (``--benchmark-disable``); set
``DPFAST_BENCH_FULL=1`` for the sizes quoted in RESULTS.md.  Peers are optional
(``pip install -e ".[bench]"``): a missing peer skips only its side of a comparison.
The helpers (``size``, ``best_time``) live in ``_bench.py``.
"""
import pytest

from _bench import size


@pytest.fixture
def bench_size():
    return size
