"""LinearRegression(method="ssp") (sufficient-statistic perturbation) against dpfast's objective
perturbation and diffprivlib's LinearRegression: test MSE at epsilon 0.1 / 1 / 10, 10 seeds,
on scikit-learn's diabetes data scaled to the bounds; then fit time at 10^6 rows.

Run:  PYTHONPATH=.:/tmp/dpl_ssp DPFAST_NUM_THREADS=1 python benchmarks/bench_ssp.py
(/tmp/dpl_ssp: diffprivlib 0.6.6 alone, ``pip install --target /tmp/dpl_site diffprivlib==0.6.6``
then only its ``diffprivlib`` folder copied; it runs on the venv's scikit-learn 1.9 after the shim
of _peers.py, which gives sklearn.tree._tree the dtype constants diffprivlib's forest module
imports -- unused by its LinearRegression.)

Data: features standardised, then divided by the largest row norm (||x|| <= 1 = norm_bound),
y centred and divided by max |y| (|y| <= 1 = label_bound); 80/20 split drawn per seed.  MSE on
the test split in these units (predicting 0 scores about 0.13).  diffprivlib gets bounds_X = the
per-feature min/max of the scaled data and bounds_y = (-1, 1) (generous to it: read off the data).
dpfast: delta = 1e-5 for both of its methods (diffprivlib's LinearRegression is pure epsilon-DP).
"""
from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LinearRegression as OLS

from dpfast.linear_model import LinearRegression

from _peers import import_diffprivlib

_dpl = import_diffprivlib(required=False)
DplLR = _dpl.models.LinearRegression if _dpl else None

EPSILONS = (0.1, 1.0, 10.0)
SEEDS = range(10)
DELTA = 1e-5


def data():
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    X /= np.linalg.norm(X, axis=1).max()
    y = y - y.mean()
    return X, y / np.abs(y).max()


def mse(m, X, y):
    return float(np.mean((m.predict(X) - y) ** 2))


def accuracy():
    X, y = data()
    n = len(X)
    res = {}
    for seed in SEEDS:
        perm = np.random.default_rng(seed).permutation(n)
        tr, te = perm[: int(0.8 * n)], perm[int(0.8 * n):]
        Xtr, ytr, Xte, yte = X[tr], y[tr], X[te], y[te]
        res.setdefault(("OLS (non-private)", None), []).append(mse(OLS().fit(Xtr, ytr), Xte, yte))
        res.setdefault(("predict 0", None), []).append(float(np.mean(yte ** 2)))
        for eps in EPSILONS:
            m = LinearRegression(eps, DELTA, method="ssp", random_state=seed).fit(Xtr, ytr)
            res.setdefault(("dpfast ssp", eps), []).append(mse(m, Xte, yte))
            m = LinearRegression(eps, DELTA, method="objective", random_state=seed).fit(Xtr, ytr)
            res.setdefault(("dpfast objective", eps), []).append(mse(m, Xte, yte))
            if DplLR is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = DplLR(epsilon=eps, bounds_X=(X.min(0), X.max(0)), bounds_y=(-1.0, 1.0),
                              random_state=seed).fit(Xtr, ytr)
                res.setdefault(("diffprivlib", eps), []).append(mse(m, Xte, yte))
    print("| method | " + " | ".join(f"eps = {e:g}" for e in EPSILONS) + " |")
    print("|---|" + "---|" * len(EPSILONS))
    for name in ("dpfast ssp", "dpfast objective", "diffprivlib"):
        if (name, EPSILONS[0]) not in res:
            continue
        cells = [f"{np.mean(res[name, e]):.4g} +- {np.std(res[name, e]):.2g}" for e in EPSILONS]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for name in ("OLS (non-private)", "predict 0"):
        print(f"| {name} | {np.mean(res[name, None]):.4g} (all eps) | | |")


def best(f, repeat=3):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def speed(n=10 ** 6, d=10):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1).max()
    y = np.clip(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n), -1, 1)
    rows = [("dpfast ssp (eps=1)", best(lambda: LinearRegression(1.0, DELTA, method="ssp", random_state=0).fit(X, y))),
            ("sklearn OLS (non-private)", best(lambda: OLS().fit(X, y)))]
    if DplLR is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lo, hi = X.min(0), X.max(0)
            rows.append(("diffprivlib LinearRegression (eps=1)",
                         best(lambda: DplLR(epsilon=1.0, bounds_X=(lo, hi), bounds_y=(-1.0, 1.0), random_state=0).fit(X, y))))
    print(f"\nfit time, {n} x {d} float64 (best of 3)\n| method | seconds |\n|---|---|")
    for name, t in rows:
        print(f"| {name} | {t:.3f} |")


if __name__ == "__main__":
    accuracy()
    speed()
