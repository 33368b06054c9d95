"""Honest comparison on Adult (issue 5; spec ``objective_perturbation.md``, Tables 1-2).

Algorithm 1 (approximate minima perturbation, ``dpfast.linear_model.LogisticRegression``,
the paper's calibration) vs DP-SGD "dishonest" (10 learning rates log-spaced in [1e-8, 1e-1],
the best one reported with no privacy charge) vs DP-SGD "honest" (K ~ Poisson(mu = 15.4)
candidate runs, each with a learning rate drawn uniformly from the same grid, the best released;
the noise multiplier is calibrated so that the *tuned* algorithm is (eps, delta)-DP by
Papernot & Steinke 2022, Theorem 6, ``dpfast.accounting.tuning_rdp_poisson``, then the improved
RDP conversion).

DP-SGD as in the paper: binary logistic loss, rows scaled to unit norm plus a bias feature,
clipping C = sqrt(2) (so no gradient is ever clipped), Adam, expected batch 256, 60 epochs,
Poisson sampling, RDP accounting.  The "best" run is chosen by test accuracy for both DP-SGD
variants (the test set is not the private training set, so this is post-processing of the
released candidates); mean test accuracy over seeds.

Run: ``python benchmarks/bench_honest_comparison.py [--seeds 10] [--epochs 60]``.
Under pytest only a smoke version runs (1 epoch, 1 seed, eps = 1).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from dpfast.accounting import DEFAULT_ORDERS, Gaussian, PoissonSampled, rdp_to_epsilon, tuning_rdp_poisson  # noqa: E402
from dpfast.accounting.rdp import rdp_curve  # noqa: E402
from dpfast.datasets import load_adult  # noqa: E402
from dpfast.linear_model import LogisticRegression  # noqa: E402
from dpfast.sgd import DPSGDClassifier  # noqa: E402

PAPER = {  # Adult rows of the spec's table: dishonest DP-SGD, Algorithm 1, honest DP-SGD
    0.1: (81.61, 81.37, 78.32),
    1.0: (83.54, 83.18, 82.40),
    8.0: (84.19, 83.99, 83.66),
}
LRS = np.logspace(-8, -1, 10)
MU = 15.4
DELTA = 1e-5
BATCH = 256
C = math.sqrt(2.0)


def honest_noise_multiplier(eps, delta, q, steps, mu=MU):
    """Smallest z (relative 1e-3) with the Poisson-tuned DP-SGD (eps, delta)-DP (RDP route)."""
    orders = DEFAULT_ORDERS

    def eps_of(z):
        base = steps * np.asarray(rdp_curve(PoissonSampled(q, Gaussian(z)), orders))
        return rdp_to_epsilon(orders, tuning_rdp_poisson(orders, base, mu), delta)[0]

    lo, hi = 0.3, 1.0
    while eps_of(hi) > eps:
        lo, hi = hi, 2 * hi
    while eps_of(lo) <= eps and lo > 1e-3:
        lo /= 2
    while hi / lo > 1 + 1e-3:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if eps_of(mid) > eps else (lo, mid)
    return hi, eps_of(hi)


def dpsgd_accuracy(Xtr, ytr, Xte, yte, *, z=None, eps=None, lr, seed, epochs):
    kw = dict(noise_multiplier=z) if z is not None else dict(epsilon=eps)
    m = DPSGDClassifier(**kw, delta=DELTA, clip_norm=C, batch_size=BATCH, epochs=epochs, learning_rate=lr,
                        optimizer="adam", accountant="rdp", classes=[0, 1], random_state=seed)
    m.fit(Xtr, ytr)
    return m.score(Xte, yte), m


def run(eps_list=(0.1, 1.0, 8.0), seeds=10, epochs=60, verbose=True):
    Xtr, ytr, Xte, yte = load_adult()
    n = Xtr.shape[0]
    q = BATCH / n
    steps = epochs * math.ceil(n / BATCH)
    rows = []
    for eps in eps_list:
        t0 = time.perf_counter()
        # dishonest: one noise multiplier for (eps, delta), every lr tried for free
        dis_z = None
        dis, alg1, hon = [], [], []
        z_h, eps_h = honest_noise_multiplier(eps, DELTA, q, steps)
        for seed in range(seeds):
            accs = []
            for j, lr in enumerate(LRS):
                if dis_z is None:
                    a, m = dpsgd_accuracy(Xtr, ytr, Xte, yte, eps=eps, lr=lr, seed=1000 * seed + j, epochs=epochs)
                    dis_z = m.noise_multiplier_
                else:
                    a, _ = dpsgd_accuracy(Xtr, ytr, Xte, yte, z=dis_z, lr=lr, seed=1000 * seed + j, epochs=epochs)
                accs.append(a)
            dis.append(max(accs))
            lr_rng = np.random.default_rng(10_000 + seed)
            K = int(lr_rng.poisson(MU))
            cand = [dpsgd_accuracy(Xtr, ytr, Xte, yte, z=z_h, lr=LRS[lr_rng.integers(10)], seed=2000 * seed + k,
                                   epochs=epochs)[0] for k in range(K)]
            hon.append(max(cand) if cand else float(np.mean(yte == 0)))  # K = 0: a constant (majority) guess
            lr_model = LogisticRegression(epsilon=eps, delta=DELTA, random_state=seed).fit(Xtr, ytr)
            alg1.append(lr_model.score(Xte, yte))
        row = (eps, 100 * np.mean(dis), 100 * np.mean(alg1), 100 * np.mean(hon), dis_z, z_h, eps_h,
               time.perf_counter() - t0)
        rows.append(row)
        if verbose:
            print(f"eps={eps}: dishonest {row[1]:.2f}  Alg.1 {row[2]:.2f}  honest {row[3]:.2f}  "
                  f"(z dishonest {dis_z:.3f}, z honest {z_h:.3f}; {row[7]:.0f} s)", flush=True)
    return rows


def print_table(rows, seeds, epochs):
    print(f"\nAdult, delta = {DELTA}, {seeds} seeds, {epochs} epochs; mean test accuracy (%), dpfast | paper")
    print(f"{'eps':>5s} | {'dishonest DP-SGD':>18s} | {'Algorithm 1':>15s} | {'honest DP-SGD':>15s}")
    for eps, d, a, h, *_ in rows:
        pd, pa, ph = PAPER.get(eps, (float("nan"),) * 3)
        print(f"{eps:5g} | {d:7.2f} | {pd:7.2f} | {a:6.2f} | {pa:6.2f} | {h:6.2f} | {ph:6.2f}")


def test_honest_comparison_smoke():
    rows = run(eps_list=(1.0,), seeds=1, epochs=1, verbose=False)
    (eps, d, a, h, z_d, z_h, eps_h, _), = rows
    assert z_h > z_d > 0 and eps_h <= 1.0
    assert 50 < a <= 100 and 50 < d <= 100


if __name__ == "__main__":  # pragma: no cover
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--eps", type=float, nargs="*", default=[0.1, 1.0, 8.0])
    args = ap.parse_args()
    print_table(run(tuple(args.eps), args.seeds, args.epochs), args.seeds, args.epochs)
