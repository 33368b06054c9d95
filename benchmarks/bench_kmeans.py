"""k-means: dpfast.cluster.KMeans vs diffprivlib.models.KMeans (0.6.6), inertia relative to
non-private scikit-learn KMeans at epsilon 0.1 / 1 / 10 over 10 seeds, and fit time at 10^6 rows.

Run (diffprivlib outside the venv, see the brief):
    PYTHONPATH=.:/tmp/dpl_only DPFAST_NUM_THREADS=1 python benchmarks/bench_kmeans.py
The inertia of each private model is computed on the same (private) data as scikit-learn's, with
the same public bounds for both libraries; the ratio is private / non-private (1 is perfect).
"""
from __future__ import annotations

import sys
import time
import warnings

import numpy as np
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import load_digits, make_blobs

from dpfast.cluster import KMeans

from _peers import import_diffprivlib

diffprivlib = import_diffprivlib()  # diffprivlib 0.6.6 and the sklearn shim (see _peers.py)


def inertia(X, C):
    d2 = (X * X).sum(1)[:, None] - 2 * X @ C.T + (C * C).sum(1)[None]
    return float(np.maximum(d2.min(1), 0).sum())


def datasets():
    centers = np.array([[-6, -6], [6, 6], [6, -6], [-6, 6]], dtype=float)
    Xb, _ = make_blobs(5000, centers=centers, cluster_std=1.0, random_state=0)
    Xb = np.clip(Xb, -10, 10)
    Xd = load_digits().data.astype(float)
    return {"blobs (n=5000, d=2, k=4)": (Xb, 4, (-10.0, 10.0)), "digits (n=1797, d=64, k=10)": (Xd, 10, (0.0, 16.0))}


def accuracy():
    print("| data | epsilon | dpfast inertia / sklearn (median [q10, q90]) | diffprivlib | ")
    print("|---|---|---|---|")
    for name, (X, k, b) in datasets().items():
        base = SkKMeans(k, n_init=10, random_state=0).fit(X).inertia_
        d = X.shape[1]
        for eps in (0.1, 1.0, 10.0):
            ours, theirs = [], []
            for s in range(10):
                ours.append(inertia(X, KMeans(k, eps, bounds=b, random_state=s).fit(X).cluster_centers_) / base)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = diffprivlib.models.KMeans(k, epsilon=eps, bounds=(np.full(d, b[0]), np.full(d, b[1])),
                                                  random_state=s).fit(X)
                theirs.append(inertia(X, m.cluster_centers_) / base)
            f = lambda v: f"{np.median(v):.3f} [{np.quantile(v, .1):.3f}, {np.quantile(v, .9):.3f}]"  # noqa: E731
            print(f"| {name} | {eps} | {f(ours)} | {f(theirs)} |", flush=True)


def speed(n=10**6, d=10, k=5, reps=3):
    rng = np.random.default_rng(0)
    X = np.clip(rng.normal(size=(n, d)) + rng.integers(0, k, n)[:, None] * 3.0, -5, 20)
    b = (-5.0, 20.0)
    def best(f):
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        return min(ts)
    t_ours = best(lambda: KMeans(k, 1.0, bounds=b, max_iter=5, random_state=0).fit(X))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_dpl = best(lambda: diffprivlib.models.KMeans(k, epsilon=1.0, bounds=(np.full(d, b[0]), np.full(d, b[1])),
                                                        random_state=0).fit(X))
    init = np.random.default_rng(1).uniform(-5, 20, (k, d))
    t_sk = best(lambda: SkKMeans(k, init=init, n_init=1, max_iter=5, tol=0.0, algorithm="lloyd").fit(X))
    print(f"\nfit, n={n}, d={d}, k={k}, best of {reps}: dpfast (5 noisy steps) {t_ours:.3f} s; "
          f"diffprivlib {t_dpl:.3f} s (ratio {t_dpl / t_ours:.1f}x); scikit-learn Lloyd, 5 steps, non-private "
          f"{t_sk:.3f} s (dpfast / sklearn {t_ours / t_sk:.2f}x)")


if __name__ == "__main__":
    print(f"diffprivlib {diffprivlib.__version__}, python {sys.version.split()[0]}")
    if "--speed-only" not in sys.argv:
        accuracy()
    speed()
