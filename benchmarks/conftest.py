"""Shared benchmark settings.

CI runs every benchmark once at smoke size (``--benchmark-disable``); set
``DPFAST_BENCH_FULL=1`` for the sizes quoted in RESULTS.md.  Peers are optional
(``pip install -e ".[bench]"``): a missing peer skips only its side of a comparison.
The helpers (``size``, ``best_time``) live in ``_bench.py``.
"""
import pytest

from _bench import size

# Scripts (run with `python benchmarks/<name>.py`, figures in RESULTS.md) that compare with peers of
# the bench extra at import time and parse their own command line: not pytest modules.
collect_ignore = ["bench_bounds.py", "bench_kmeans.py", "bench_naive_bayes.py", "bench_pca.py", "bench_ssp.py",
                  "bench_tools.py", "bench_torch.py", "accuracy_torch_digits.py", "bench_trees.py",
                  "bench_mechanisms_peer.py", "bench_toolbox_curves.py", "bench_ssp_methods.py",
                  "bench_toolbox_dask.py", "bench_torch_conv.py", "bench_trees_sizing.py", "bench_trees_threads.py", "bench_gram26.py",
                  "bench_stats_builds.py", "bench_trees_paired.py"]


@pytest.fixture
def bench_size():
    return size
