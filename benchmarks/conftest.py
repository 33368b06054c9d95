"""Shared benchmark settings.

CI runs every benchmark once at smoke size (``--benchmark-disable``); set
``DPFAST_BENCH_FULL=1`` for the sizes quoted in RESULTS.md.  Peers are optional
(``pip install -e ".[bench]"``): a missing peer skips only its side of a comparison.
"""
import os

import pytest

FULL = os.environ.get("DPFAST_BENCH_FULL") == "1"


def size(smoke: int, full: int) -> int:
    """Problem size: ``smoke`` in CI, ``full`` when DPFAST_BENCH_FULL=1."""
    return full if FULL else smoke


@pytest.fixture
def bench_size():
    return size
