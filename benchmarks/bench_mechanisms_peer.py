"""Staircase, bounded-domain Laplace / geometric and Bingham: dpfast vs diffprivlib 0.6.6 (issue 24).

Run as a script: ``python benchmarks/bench_mechanisms_peer.py [--quick]``; figures in RESULTS.md.

* speed: 10^6 noisy values (dpfast, one vectorised call) against diffprivlib's per-value
  ``randomise`` (timed on 10^4 calls and scaled to 10^6: it is a Python loop, linear in n), and
  NumPy's non-private ``Generator.laplace`` for the floor;
* accuracy: mean absolute error of the staircase against Laplace (both dpfast) and diffprivlib's
  ``Staircase``, and of the bounded Laplace against diffprivlib's ``LaplaceBoundedDomain`` (the same
  law: equal MAE expected), at epsilon 0.1, 1, 10;
* Bingham: seconds per draw of the exact sampler vs diffprivlib's ``Bingham`` (Gibbs), and
  ``PCA(method="bingham")`` vs diffprivlib's ``PCA`` (both pure epsilon-DP), explained variance
  captured by 2 components on scikit-learn's wine and breast-cancer data, 10 seeds.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import dpfast  # noqa: E402
from dpfast.decomposition import PCA  # noqa: E402

from _peers import import_diffprivlib  # noqa: E402

# diffprivlib 0.6.6 from /tmp/dpl_site (see _peers.py); None: the dpfast side runs alone
_dpl = import_diffprivlib(required=False)
dm, dpl = (_dpl.mechanisms, _dpl.models) if _dpl else (None, None)

QUICK = "--quick" in sys.argv
N = 10**5 if QUICK else 10**6
N_PEER = 2000 if QUICK else 10**4
SEEDS = range(3 if QUICK else 10)


def best(fn, repeat=3):
    t = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def peer_time(mech, x):
    t0 = time.perf_counter()
    for _ in range(N_PEER):
        mech.randomise(x)
    return (time.perf_counter() - t0) * N / N_PEER


def speed():
    print(f"### Speed, {N:,} values (diffprivlib: {N_PEER:,} randomise() calls scaled to {N:,})\n")
    print("| mechanism | dpfast (s) | diffprivlib (s) | diffprivlib / dpfast |")
    print("|---|---|---|---|")
    xf = np.full(N, 3.0)
    xi = np.full(N, 3, dtype=np.int64)
    rows = [
        ("staircase", lambda: dpfast.staircase(xf, 1.0, 1.0, rng=1),
         dm and dm.Staircase(epsilon=1.0, sensitivity=1.0, random_state=1), 3.0),
        ("truncated Laplace", lambda: dpfast.truncated_laplace(xf, 1.0, 1.0, (0.0, 10.0), rng=1),
         dm and dm.LaplaceTruncated(epsilon=1.0, sensitivity=1.0, lower=0.0, upper=10.0, random_state=1), 3.0),
        ("folded Laplace", lambda: dpfast.folded_laplace(xf, 1.0, 1.0, (0.0, 10.0), rng=1),
         dm and dm.LaplaceFolded(epsilon=1.0, sensitivity=1.0, lower=0.0, upper=10.0, random_state=1), 3.0),
        ("bounded Laplace", lambda: dpfast.bounded_laplace(xf, 1.0, 1.0, (0.0, 10.0), rng=1),
         dm and dm.LaplaceBoundedDomain(epsilon=1.0, sensitivity=1.0, lower=0.0, upper=10.0, random_state=1), 3.0),
        ("truncated geometric", lambda: dpfast.truncated_geometric(xi, 1, 1.0, (0, 10), rng=1),
         dm and dm.GeometricTruncated(epsilon=1.0, sensitivity=1, lower=0, upper=10, random_state=1), 3),
        ("folded geometric", lambda: dpfast.folded_geometric(xi, 1, 1.0, (0, 10), rng=1),
         dm and dm.GeometricFolded(epsilon=1.0, sensitivity=1, lower=0, upper=10, random_state=1), 3),
    ]
    for name, ours, mech, x in rows:
        t_ours = best(ours)
        t_peer = peer_time(mech, x) if mech else float("nan")
        print(f"| {name} | {t_ours:.4f} | {t_peer:.2f} | {t_peer / t_ours:.0f}x |")
    g = np.random.default_rng(1)
    print(f"\nNon-private floor: NumPy Generator.laplace({N:,}) {best(lambda: g.laplace(0, 1.0, N)):.4f} s; "
          f"dpfast.laplace {best(lambda: dpfast.laplace(xf, 1.0, 1.0, rng=1)):.4f} s\n")


def accuracy():
    n_peer = min(N_PEER, 10**4)
    print(f"### Mean absolute error (dpfast: {N:,} draws; diffprivlib: {n_peer:,})\n")
    print("| epsilon | staircase (dpfast) | Laplace (dpfast) | Staircase (diffprivlib) | "
          "bounded Laplace [0,10] at 3 (dpfast) | LaplaceBoundedDomain (diffprivlib) |")
    print("|---|---|---|---|---|---|")
    for eps in (0.1, 1.0, 10.0):
        st = np.abs(dpfast.staircase(np.zeros(N), 1.0, eps, rng=2)).mean()
        lap = np.abs(dpfast.laplace(np.zeros(N), 1.0, eps, rng=2)).mean()
        bl = np.abs(dpfast.bounded_laplace(np.full(N, 3.0), 1.0, eps, (0.0, 10.0), rng=2) - 3.0).mean()
        if dm:
            m1 = dm.Staircase(epsilon=eps, sensitivity=1.0, random_state=3)
            m2 = dm.LaplaceBoundedDomain(epsilon=eps, sensitivity=1.0, lower=0.0, upper=10.0, random_state=3)
            pst = np.mean([abs(m1.randomise(0.0)) for _ in range(n_peer)])
            pbl = np.mean([abs(m2.randomise(3.0) - 3.0) for _ in range(n_peer)])
        else:
            pst = pbl = float("nan")
        print(f"| {eps:g} | {st:.4f} | {lap:.4f} | {pst:.4f} | {bl:.4f} | {pbl:.4f} |")
    print()


def bingham_bench():
    from sklearn.datasets import load_breast_cancer, load_wine

    X = load_wine().data
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    X /= np.linalg.norm(X, axis=1).max()
    A = X.T @ X
    print("### Bingham draws (standardised wine, d = 13, A = X^T X of rows scaled into the unit ball, epsilon = 1)\n")
    t_ours = best(lambda: dpfast.bingham(A, 1.0, 1.0, rng=1), repeat=5)
    if dm:
        mech = dm.Bingham(epsilon=1.0, sensitivity=1.0, random_state=1)
        t0 = time.perf_counter()
        mech.randomise(A)
        t_peer = time.perf_counter() - t0
    else:
        t_peer = float("nan")
    print(f"dpfast.bingham (exact, Kent et al. 2018): {t_ours * 1e3:.2f} ms per draw; diffprivlib Bingham "
          f"(Gibbs): {t_peer * 1e3:.0f} ms per draw ({t_peer / t_ours:.0f}x)\n")
    print("### PCA, pure epsilon-DP, 2 components: explained variance captured / non-private "
          f"(mean of {len(SEEDS)} seeds)\n")
    print("| data | epsilon | dpfast PCA(method='bingham') | dpfast PCA(delta=0) | diffprivlib PCA | fit time dpfast / diffprivlib (s) |")
    print("|---|---|---|---|---|---|")
    for name, loader in (("wine", load_wine), ("breast cancer", load_breast_cancer)):
        Z = loader().data
        Z = (Z - Z.mean(axis=0)) / Z.std(axis=0)
        C = np.cov(Z.T)
        top = np.sort(np.linalg.eigvalsh(C))[::-1][:2].sum()
        R = float(np.quantile(np.linalg.norm(Z, axis=1), 0.95))
        for eps in (0.1, 1.0, 10.0):
            res = {"b": [], "l": [], "p": []}
            tb = tp = 0.0
            for s in SEEDS:
                t0 = time.perf_counter()
                V = PCA(2, epsilon=eps, delta=0.0, method="bingham", norm_bound=R, random_state=s).fit(Z).components_
                tb += time.perf_counter() - t0
                res["b"].append(np.trace(V @ C @ V.T) / top)
                V = PCA(2, epsilon=eps, delta=0.0, norm_bound=R, random_state=s).fit(Z).components_
                res["l"].append(np.trace(V @ C @ V.T) / top)
                if dpl and eps < 10:  # diffprivlib's Gibbs sampler ran > 6 min on one wine fit at eps 10
                    t0 = time.perf_counter()
                    m = dpl.PCA(2, epsilon=eps, data_norm=R, bounds=(Z.min(axis=0), Z.max(axis=0)), random_state=s).fit(Z)
                    tp += time.perf_counter() - t0
                    V = m.components_
                    res["p"].append(np.trace(V @ C @ V.T) / top)
            p = np.mean(res["p"]) if res["p"] else float("nan")
            print(f"| {name} | {eps:g} | {np.mean(res['b']):.3f} | {np.mean(res['l']):.3f} | {p:.3f} | "
                  f"{tb / len(SEEDS):.4f} / {tp / len(SEEDS):.4f} |")
    print()


if __name__ == "__main__":
    print(os.popen("uptime").read().strip(), "\n", flush=True)
    parts = [a for a in sys.argv[1:] if not a.startswith("--")] or ["speed", "accuracy", "bingham"]
    for part in parts:
        {"speed": speed, "accuracy": accuracy, "bingham": bingham_bench}[part]()
        sys.stdout.flush()
