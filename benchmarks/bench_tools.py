"""dpfast.tools vs diffprivlib.tools and NumPy at 10^6 rows (issue 24).

Run: PYTHONPATH=. DPFAST_NUM_THREADS=1 python benchmarks/bench_tools.py
(diffprivlib from /tmp/dpl_site, appended to sys.path so that the venv's NumPy wins).
Speed: min of 5 rounds.  Accuracy: mean absolute error vs NumPy over 10 seeds, at eps 0.1, 1, 10.
"""
from __future__ import annotations

import sys
import time
import warnings

import numpy as np

import dpfast.tools as T

sys.path.append("/tmp/dpl_site")
try:
    # diffprivlib/__init__ imports its models, which fail against this scikit-learn
    # (sklearn.tree._tree.DOUBLE is gone); diffprivlib.tools needs none of them, so the package is
    # entered as a bare namespace and only its tools (mechanisms, accountant, validation) load
    import importlib.util
    import types
    _spec = importlib.util.find_spec("diffprivlib")
    _pkg = types.ModuleType("diffprivlib")
    _pkg.__path__ = list(_spec.submodule_search_locations)
    sys.modules["diffprivlib"] = _pkg
    import diffprivlib.tools as D
except ImportError:  # pragma: no cover
    D = None

warnings.simplefilter("ignore")
N = 10**6
x = np.random.default_rng(0).uniform(0.0, 1.0, N)
B = (0.0, 1.0)


def best(f, rounds=5):
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


CASES = {
    "mean": (lambda: np.mean(x), lambda e, s: T.mean(x, e, B, rng=s),
             lambda e, s: D.mean(x, epsilon=e, bounds=B, random_state=s)),
    "var": (lambda: np.var(x), lambda e, s: T.var(x, e, B, rng=s),
            lambda e, s: D.var(x, epsilon=e, bounds=B, random_state=s)),
    "std": (lambda: np.std(x), lambda e, s: T.std(x, e, B, rng=s),
            lambda e, s: D.std(x, epsilon=e, bounds=B, random_state=s)),
    "sum": (lambda: np.sum(x), lambda e, s: T.sum(x, e, B, rng=s),
            lambda e, s: D.sum(x, epsilon=e, bounds=B, random_state=s)),
    "median": (lambda: np.median(x), lambda e, s: T.median(x, e, B, rng=s),
               lambda e, s: D.median(x, epsilon=e, bounds=B, random_state=s)),
    "histogram(10 bins)": (lambda: np.histogram(x, 10, B)[0], lambda e, s: T.histogram(x, e, bins=10, range=B, rng=s)[0],
                           lambda e, s: D.histogram(x, epsilon=e, bins=10, range=B, random_state=s)[0]),
}

if __name__ == "__main__":
    print(f"n = {N}, uniform(0, 1), bounds (0, 1)")
    print("| statistic | NumPy s | dpfast s | diffprivlib s | dpfast/NumPy | diffprivlib/dpfast |"
          " MAE eps=0.1 dpfast / dpl | eps=1 | eps=10 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (ref, ours, theirs) in CASES.items():
        t_np = best(ref)
        t_us = best(lambda: ours(1.0, 1))
        t_dl = best(lambda: theirs(1.0, 1)) if D else float("nan")
        truth = np.asarray(ref(), dtype=float)
        acc = []
        for eps in (0.1, 1.0, 10.0):
            a = np.mean([np.mean(np.abs(np.asarray(ours(eps, s)) - truth)) for s in range(10)])
            b = np.mean([np.mean(np.abs(np.asarray(theirs(eps, s)) - truth)) for s in range(10)]) if D else np.nan
            acc.append(f"{a:.2e} / {b:.2e}")
        print(f"| {name} | {t_np:.4f} | {t_us:.4f} | {t_dl:.4f} | {t_us / t_np:.2f}x | {t_dl / t_us:.2f}x | "
              + " | ".join(acc) + " |")
