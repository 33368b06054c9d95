"""Spot check of the hot paths the hardening (issue 15) changed: run it once per tree, each in a
fresh process, e.g. ``python benchmarks/spot_hardening.py /path/to/old/tree`` then with this tree
(the argument is put first on sys.path so that its ``dpfast`` is imported)."""
import sys
import time

import numpy as np

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else ".")
import dpfast  # noqa: E402


def best_per_call(f, calls: int, repeats: int = 7) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            f()
        best = min(best, (time.perf_counter() - t) / calls)
    return best


g = np.random.default_rng(0)
u = np.random.default_rng(1).normal(size=1000)
big = np.random.default_rng(1).normal(size=10**7)
x = np.random.default_rng(2).uniform(0, 100, 10**6)
em_small = best_per_call(lambda: dpfast.exponential_mechanism(u, 1.0, 1.0, rng=g), 3000)
t = time.perf_counter()
for _ in range(5):
    dpfast.exponential_mechanism(big, 1.0, 1.0, rng=g)
em_big = (time.perf_counter() - t) / 5
median = best_per_call(lambda: dpfast.private_median(x, epsilon=1.0, bounds=(0, 100), rng=g), 1, repeats=15)
print(f"{dpfast.__file__}: exponential mechanism 1000: {em_small * 1e6:.2f} us; 10^7: {em_big * 1e3:.1f} ms; "
      f"private_median 10^6: {median * 1e3:.2f} ms")
