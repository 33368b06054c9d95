"""Two (or more) builds of dpfast._stats in ONE process, alternated: PCA fit 10^6 x 50 and tools.mean /
tools.sum 10^6 (1-D) per build, with scikit-learn's PCA and NumPy in the same rounds (issue 24 speed).

Run: PYTHONPATH=. DPFAST_NUM_THREADS=1 python benchmarks/bench_stats_builds.py OLD.so NEW.so [--rounds R]
(each .so is loaded under its own module name and swapped into dpfast.decomposition._pca and
dpfast.tools._statistics; copy a build's dpfast/_stats*.so aside before rebuilding).  Prints per
build the median of the rounds: ``pca_gram`` alone (min of 2 per round), the PCA fit (k = 5, eps 1,
delta 1e-5, bounds (0, 1), norm bound sqrt(50)/2), tools.mean/sum (31 calls per round), and the
ratios to scikit-learn / NumPy.  Also checks that the builds give the same bits on these inputs.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import time

import numpy as np
from sklearn.decomposition import PCA as SkPCA

import dpfast.decomposition._pca as P
import dpfast.tools as T
import dpfast.tools._statistics as S
from dpfast.decomposition import PCA

ap = argparse.ArgumentParser()
ap.add_argument("builds", nargs="+")
ap.add_argument("--rounds", type=int, default=7)
args = ap.parse_args()
mods = []
for k, path in enumerate(args.builds):
    spec = importlib.util.spec_from_file_location(f"build{k}._stats", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    mods.append(m)


def use(m):
    S._stats = P._stats = m


def times(f, reps):
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return out


X = np.random.default_rng(0).uniform(0, 1, (10**6, 50))
x = np.random.default_rng(0).uniform(0, 1, 10**6)
R = math.sqrt(50) / 2
c, lo, hi = np.full(50, 0.5), np.zeros(50), np.ones(50)
fit = lambda: PCA(5, epsilon=1.0, bounds=(0.0, 1.0), norm_bound=R, random_state=0).fit(X)
ref = None
for m in mods:
    use(m)
    f = fit()
    got = [f.components_.tobytes(), f.explained_variance_.tobytes(), T.mean(x, 1.0, (0.0, 1.0), rng=1),
           T.sum(x, 1.0, (0.0, 1.0), rng=1)]
    ref = ref or got
    print(m.__name__, "same bits as the first build:", got == ref)
res: dict = {}
for _ in range(args.rounds):
    for k, m in enumerate(mods):
        use(m)
        res.setdefault(("pca_gram", k), []).append(min(times(lambda: m.pca_gram(X, lo, hi, c, R, 1), 2)))
        res.setdefault(("PCA fit", k), []).append(min(times(fit, 1)))
        for fn in ("mean", "sum"):
            res.setdefault((fn, k), []).extend(times(lambda: getattr(T, fn)(x, 1.0, (0.0, 1.0), rng=1), 31))
    res.setdefault(("PCA fit", "sklearn"), []).append(min(times(lambda: SkPCA(5).fit(X), 1)))
    res.setdefault(("mean", "numpy"), []).extend(times(lambda: np.mean(x), 31))
    res.setdefault(("sum", "numpy"), []).extend(times(lambda: np.sum(x), 31))
med = {key: float(np.median(v)) * 1e3 for key, v in res.items()}
for key, v in med.items():
    print(f"{key[0]:10s} {str(key[1]):8s} {v:9.3f} ms")
for what, peer in (("PCA fit", "sklearn"), ("mean", "numpy"), ("sum", "numpy")):
    print(what, " ".join(f"build{k}/{peer} = {med[(what, k)] / med[(what, peer)]:.2f}x" for k in range(len(mods))))
