"""The Gram kernels (PCA covariance, SSP) and their fits, one build per process: run it once with
the build under test on PYTHONPATH and once with the other (before/after of the 26-bit factor grid).

    PYTHONPATH=<tree> DPFAST_NUM_THREADS=1 python benchmarks/bench_gram26.py [--reps 7]

Kernel alone: ``dpfast._stats.pca_gram`` 2x10^5 x 50 and ``ssp_gram`` 10^6 x 10, one thread,
median of reps.  Fits (best of 3): PCA(5) 10^6 x 50 uniform [0, 1] (bench_pca.py's speed setting)
next to scikit-learn's PCA(5) in the same process, LinearRegression(method="ssp") 10^6 x 10."""
from __future__ import annotations

import argparse
import math
import time

import numpy as np
from sklearn.decomposition import PCA as SkPCA

import dpfast
from dpfast import _stats
from dpfast.decomposition import PCA
from dpfast.linear_model import LinearRegression


def timed(fn, reps, agg):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return agg(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    med = lambda ts: float(np.median(ts))  # noqa: E731
    Xp = rng.uniform(0, 1, (200_000, 50))
    d = 50
    lo, hi, c = np.zeros(d), np.ones(d), np.full(d, 0.5)
    t_pk = timed(lambda: _stats.pca_gram(Xp, lo, hi, c, math.sqrt(d) / 2, 1), a.reps, med)
    Xs = rng.normal(size=(1_000_000, 10)) / 5
    ys = np.clip(Xs @ rng.normal(size=10), -1, 1)
    e = np.ones(11, dtype=np.int64)
    t_sk_k = timed(lambda: _stats.ssp_gram(Xs, ys, None, e, 1), a.reps, med)
    X = np.random.default_rng(0).uniform(0, 1, (1_000_000, 50))
    R = math.sqrt(50) / 2
    t_pf = timed(lambda: PCA(5, epsilon=1.0, bounds=(0.0, 1.0), norm_bound=R, random_state=0).fit(X), 3, min)
    t_sk = timed(lambda: SkPCA(5).fit(X), 3, min)
    t_sf = timed(lambda: LinearRegression(1.0, 1e-5, method="ssp", random_state=0).fit(Xs, ys), 3, min)
    print(f"{dpfast.__file__}: pca_gram 2e5x50 {1e3 * t_pk:.1f} ms | ssp_gram 1e6x10 {1e3 * t_sk_k:.1f} ms | "
          f"PCA fit 1e6x50 {t_pf:.3f} s, sklearn PCA {t_sk:.3f} s, ratio {t_pf / t_sk:.2f}x | "
          f"ssp fit 1e6x10 {t_sf:.3f} s")


if __name__ == "__main__":
    main()
