"""Accuracy of dpfast.torch vs Opacus 1.6 at equal (epsilon, delta) on sklearn's digits (issue 25).

Run as a script (needs the engine, ``dpfast.torch.PrivacyEngine``, and opacus)::

    python benchmarks/accuracy_torch_digits.py                # 10 seeds, epsilon 1 and 3
    python benchmarks/accuracy_torch_digits.py --seeds 3 --epsilons 3

Setup, identical for both libraries except the engine: sklearn's 8x8 digits (1797 images, pixels
/ 16), a stratified 80/20 split per seed, MLP 64-64-10 (ReLU), SGD (lr 0.5, momentum 0.5),
expected batch 64 with Poisson sampling, max_grad_norm 1, ``epochs`` epochs;
``make_private_with_epsilon(target_epsilon, target_delta=1e-5, epochs)`` in each library
calibrates its own noise multiplier (dpfast: certified PLD; Opacus: its default PRV accountant).
The seed fixes the split, the initial weights (the same for both) and torch's RNG; the noise
streams differ between the libraries.  Prints, per epsilon, each library's noise multiplier and
the mean and standard deviation of the test accuracy over the seeds, and a Welch t statistic.
"""
from __future__ import annotations

import argparse
import math
import warnings

import numpy as np


def data(seed):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return train_test_split(X, y.astype(np.int64), test_size=0.2, random_state=seed, stratify=y)


def run(lib, eps, seed, epochs, delta=1e-5):
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    Xtr, Xte, ytr, yte = data(seed)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.5)
    loader = DataLoader(TensorDataset(torch.from_numpy(Xtr), torch.from_numpy(ytr)), batch_size=64)
    kw = dict(module=model, optimizer=opt, data_loader=loader, target_epsilon=eps, target_delta=delta,
              epochs=epochs, max_grad_norm=1.0)
    if lib == "opacus":
        from opacus import PrivacyEngine

        pe = PrivacyEngine()
        model, opt, loader = pe.make_private_with_epsilon(**kw, poisson_sampling=True)
        sigma = opt.noise_multiplier
    else:
        from dpfast.torch import PrivacyEngine

        pe = PrivacyEngine()
        model, opt, loader = pe.make_private_with_epsilon(**kw)
        sigma = opt.noise_multiplier
    crit = nn.CrossEntropyLoss()
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            if len(xb) == 0:
                opt.step()
                continue
            crit(model(xb), yb).backward()
            opt.step()
    with torch.no_grad():
        acc = (model(torch.from_numpy(Xte)).argmax(1).numpy() == yte).mean()
    return float(acc), float(sigma)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--epsilons", default="1,3")
    ap.add_argument("--epochs", type=int, default=20)
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(1)
    print("| epsilon | library | noise multiplier | test accuracy (mean +- sd, %d seeds) |" % args.seeds)
    print("|---|---|---|---|")
    for eps in [float(e) for e in args.epsilons.split(",")]:
        res = {}
        for lib in ("dpfast", "opacus"):
            out = [run(lib, eps, s, args.epochs) for s in range(args.seeds)]
            acc = np.array([a for a, _ in out])
            res[lib] = acc
            print(f"| {eps:g} | {lib} | {out[0][1]:.4f} | {acc.mean():.4f} +- {acc.std(ddof=1):.4f} |", flush=True)
        a, b = res["dpfast"], res["opacus"]
        t = (a.mean() - b.mean()) / math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b) + 1e-300)
        print(f"|  | Welch t (dpfast - opacus) | | {t:+.2f} |", flush=True)


if __name__ == "__main__":
    main()
