"""dpfast.decomposition.PCA vs diffprivlib's PCA (and scikit-learn's): accuracy and speed (issue 24).

Accuracy: the fraction of the data's variance captured by the k released components,
trace(P^T C P) / (sum of the top-k eigenvalues of C), C the exact covariance of the scaled data
(1 = the non-private optimum), mean and standard deviation over 10 seeds, at epsilon 0.1 / 1 / 10,
on scikit-learn's digits (k = 5) and breast-cancer (k = 3).  Features are scaled to [0, 1]
(digits: / 16; breast-cancer: by the data's min/max, treated as public domain knowledge for
every library alike); both libraries get the same public bounds (0, 1) and the same row-norm
bound R = sqrt(d) / 2 (half the box's diagonal).  dpfast: delta = 1e-5 (Analyze Gauss) and
delta = 0 (Laplace); diffprivlib 0.6.6: Bingham sampling, pure epsilon (half for its mean).

Speed: fit on 10^6 x 50 uniform [0, 1] float64 rows, k = 5, best of 3.

    PYTHONPATH=. DPFAST_NUM_THREADS=1 python benchmarks/bench_pca.py [--quick] [--only digits|breast-cancer|speed] [--dpl-seeds N]
"""
import math
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.decomposition import PCA as SkPCA

from dpfast.decomposition import PCA

from _peers import import_diffprivlib

# diffprivlib 0.6.6 from /tmp/dpl_site (see _peers.py); None: the dpfast side runs alone
_dpl = import_diffprivlib(required=False)
dpl = _dpl.models if _dpl else None

QUICK = "--quick" in sys.argv
SEEDS = range(3 if QUICK else 10)
# diffprivlib's Gibbs sampler for the Bingham distribution takes about a minute per fit on digits
# (d = 64) on the 2-core machine: --dpl-seeds N limits its seeds (dpfast always gets all of SEEDS)
DPL_SEEDS = range(int(sys.argv[sys.argv.index("--dpl-seeds") + 1]) if "--dpl-seeds" in sys.argv else len(SEEDS))
ONLY = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None


def datasets():
    X = load_digits().data / 16.0
    Xb = load_breast_cancer().data
    Xb = (Xb - Xb.min(axis=0)) / (Xb.max(axis=0) - Xb.min(axis=0))
    return {"digits": (X, 5), "breast-cancer": (Xb, 3)}


def captured(components, X):
    C = np.cov(X, rowvar=False)
    top = np.sort(np.linalg.eigvalsh(C))[::-1][:components.shape[0]].sum()
    P = components.T
    return float(np.trace(P.T @ C @ P) / top)


def fit_dpfast(X, k, eps, delta, seed):
    d = X.shape[1]
    return PCA(k, epsilon=eps, delta=delta, bounds=(0.0, 1.0), norm_bound=math.sqrt(d) / 2,
               random_state=seed).fit(X).components_


def fit_dpl(X, k, eps, seed):
    d = X.shape[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = dpl.PCA(k, epsilon=eps, bounds=(0.0, 1.0), data_norm=math.sqrt(d) / 2, random_state=seed)
        return m.fit(X.copy()).components_


def accuracy():
    print("| data set | epsilon | dpfast (eps, 1e-5) | dpfast (eps, 0) | diffprivlib |")
    print("|---|---|---|---|---|")
    for name, (X, k) in datasets().items():
        if ONLY and ONLY not in (name, "accuracy"):
            continue
        for eps in (0.1, 1.0, 10.0):
            a = [captured(fit_dpfast(X, k, eps, 1e-5, s), X) for s in SEEDS]
            b = [captured(fit_dpfast(X, k, eps, 0.0, s), X) for s in SEEDS]
            c = [captured(fit_dpl(X, k, eps, s), X) for s in DPL_SEEDS] if dpl else [float("nan")]
            f = lambda v: f"{np.mean(v):.3f} ± {np.std(v):.3f} ({len(v)})"
            print(f"| {name} (k={k}) | {eps} | {f(a)} | {f(b)} | {f(c)} |", flush=True)


def best(fn, reps=3):
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def speed():
    n = 100_000 if QUICK else 1_000_000
    X = np.random.default_rng(0).uniform(0, 1, (n, 50))
    R = math.sqrt(50) / 2
    t_dp = best(lambda: PCA(5, epsilon=1.0, bounds=(0.0, 1.0), norm_bound=R, random_state=0).fit(X))
    t_dp0 = best(lambda: PCA(5, epsilon=1.0, delta=0.0, bounds=(0.0, 1.0), norm_bound=R, random_state=0).fit(X))
    t_sk = best(lambda: SkPCA(5).fit(X))
    print(f"\nfit {n} x 50, k = 5, best of 3 (s)")
    print("| dpfast (eps 1, 1e-5) | dpfast (eps 1, 0) | sklearn PCA (non-private) | diffprivlib PCA |")
    print("|---|---|---|---|")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_dpl = best(reps=1, fn=lambda: dpl.PCA(5, epsilon=1.0, bounds=(0.0, 1.0), data_norm=R, random_state=0).fit(X.copy())) \
            if dpl else float("nan")
    print(f"| {t_dp:.3f} | {t_dp0:.3f} | {t_sk:.3f} | {t_dpl:.3f} |")
    print(f"ratios: diffprivlib / dpfast = {t_dpl / t_dp:.2f}x; dpfast / sklearn = {t_dp / t_sk:.2f}x")


if __name__ == "__main__":
    if ONLY != "speed":
        accuracy()
    if ONLY in (None, "speed"):
        speed()
