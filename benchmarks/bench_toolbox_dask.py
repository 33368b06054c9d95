"""The one-pass releases of the toolbox on Dask (issue 24): fit time on a 2-worker
``LocalCluster`` with the rows persisted on the workers, against the same release in memory
(NumPy) on the client, and the largest difference between the two releases.

Run:  PYTHONPATH=. DPFAST_NUM_THREADS=1 python benchmarks/bench_toolbox_dask.py [--rows 2000000] [--only NAME]

Data: ``rows`` x 10 uniform [0, 1) float64 (labels: x_0 > 0.5; regression target 0.3 x_0 -
0.2 x_1), 8 row chunks, persisted on 2 worker processes of 1 thread; best of 3 per release.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def best(fn, reps=3):
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def main():
    import dask.array as da
    import distributed

    from dpfast import tools
    from dpfast.cluster import KMeans
    from dpfast.decomposition import PCA
    from dpfast.ensemble import RandomForestClassifier
    from dpfast.linear_model import LinearRegression
    from dpfast.naive_bayes import GaussianNB

    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--only", default="", help="run the releases whose name contains this")
    a = p.parse_args()
    n = a.rows
    d = 10
    X = np.random.default_rng(0).uniform(size=(n, d))
    y = (X[:, 0] > 0.5).astype(np.int64)
    yr = 0.3 * X[:, 0] - 0.2 * X[:, 1]
    R = np.sqrt(d)
    releases = {
        "GaussianNB": (lambda A, b, br: GaussianNB(bounds=(0, 1), random_state=0).fit(A, b).theta_),
        "PCA (Analyze Gauss)": (lambda A, b, br: PCA(3, norm_bound=R, random_state=0).fit(A).components_),
        "KMeans (5 steps)": (lambda A, b, br: KMeans(4, bounds=(0, 1), random_state=0).fit(A).cluster_centers_),
        "LinearRegression ssp": (lambda A, b, br: LinearRegression(method="ssp", norm_bound=R, random_state=0)
                                 .fit(A, br).coef_),
        "tools.var(axis=0)": (lambda A, b, br: tools.var(A, 1.0, (0, 1), axis=0, rng=0)),
        "tools.histogramdd (3 x 10 bins)": (lambda A, b, br: tools.histogramdd(A[:, :3], 1.0, bins=10,
                                                                               range=[(0, 1)] * 3, rng=0)[0]),
    }
    if hasattr(RandomForestClassifier, "_dask_fit"):  # trees on Dask (issue 24, refactor)
        for lm in ("counts", "label"):
            releases[f"RandomForestClassifier {lm} (10 trees, depth 6)"] = (
                lambda A, b, br, lm=lm: RandomForestClassifier(bounds=(0, 1), n_estimators=10, max_depth=6,
                                                               leaf_mechanism=lm, random_state=0).fit(A, b).leaf_proba_)
    releases = {k: f for k, f in releases.items() if a.only in k}
    mem = {k: best(lambda f=f: f(X, y, yr)) for k, f in releases.items()}
    ref = {k: f(X, y, yr) for k, f in releases.items()}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cl, distributed.Client(cl) as client:
        c = n // 8
        Xd = client.persist(da.from_array(X, chunks=(c, d)))
        yd = client.persist(da.from_array(y, chunks=c))
        yrd = client.persist(da.from_array(yr, chunks=c))
        distributed.wait([Xd, yd, yrd])
        print(f"{n} x {d} rows, 8 chunks on 2 workers (1 thread each); best of 3")
        print("| release | in memory (NumPy) s | Dask LocalCluster s | max |Dask - NumPy| of the release |")
        print("|---|---|---|---|")
        for k, f in releases.items():
            t = best(lambda f=f: f(Xd, yd, yrd))
            diff = float(np.max(np.abs(np.asarray(f(Xd, yd, yrd)) - np.asarray(ref[k]))))
            print(f"| {k} | {mem[k]:.3f} | {t:.3f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
