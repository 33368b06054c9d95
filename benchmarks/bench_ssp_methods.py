"""The four private least-squares methods of dpfast on the protocol of ``bench_ssp.py``
(diabetes, features standardised and scaled to ||x|| <= 1, y centred and scaled to |y| <= 1, a
random 80/20 split per seed, test MSE mean +- sd over seeds 0-9, delta = 1e-5): SSP, objective
perturbation, AMP (Algorithm 1 of Redberg, Koskela & Wang 2024) and output perturbation.  For the
"which estimator when" table of docs/user_guide/toolbox.rst.

Run:  PYTHONPATH=. DPFAST_NUM_THREADS=1 python benchmarks/bench_ssp_methods.py
"""
from __future__ import annotations

import warnings

import numpy as np
from sklearn.datasets import load_diabetes

from dpfast.linear_model import LinearRegression


def main():
    warnings.filterwarnings("ignore")
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    X /= np.linalg.norm(X, axis=1).max()
    y = y - y.mean()
    y = y / np.abs(y).max()
    n = len(X)
    print("| method | eps = 0.1 | eps = 1 | eps = 10 |")
    print("|---|---|---|---|")
    for method in ("ssp", "objective", "amp", "output"):
        cells = []
        for eps in (0.1, 1.0, 10.0):
            r = []
            for seed in range(10):
                perm = np.random.default_rng(seed).permutation(n)
                tr, te = perm[: int(0.8 * n)], perm[int(0.8 * n):]
                m = LinearRegression(eps, 1e-5, method=method, random_state=seed).fit(X[tr], y[tr])
                r.append(float(np.mean((m.predict(X[te]) - y[te]) ** 2)))
            cells.append(f"{np.mean(r):.4f} +- {np.std(r):.3f}")
        print(f"| {method} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
