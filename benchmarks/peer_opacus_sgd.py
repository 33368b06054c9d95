"""Opacus peer for benchmarks/bench_sgd.py (issue 5): DP-SGD steps with Poisson sampling.

Standalone (needs torch and opacus, not dpfast), e.g.::

    python3 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch==2.13.0 opacus numpy
    /tmp/torchvenv/bin/python benchmarks/peer_opacus_sgd.py --threads 1 --max-steps 60

Same synthetic data as ``bench_sgd.mnist_like`` (60,000 x 784 float32, 10 classes; with
``--dtype float64`` the same values cast to float64 and a float64 model), expected batch 256,
noise multiplier 1, clip_norm 1, plain SGD.  Modes: Opacus per-sample hooks, Opacus ghost
clipping, and non-private PyTorch (DataLoader shuffle, batch 256).  The time per step includes
Opacus's DataLoader (the user pays for it) and excludes the first warm-up step.
``--only mlp:ghost --json`` runs one configuration and prints one JSON line (used by
``benchmarks/spot_mlp_vs_opacus.py``, which starts each run in a fresh process).
"""
from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
import torch
from torch import nn

warnings.filterwarnings("ignore")


def mnist_like(n, d=784, K=10, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((K, d)).astype(np.float32)
    y = rng.integers(0, K, n)
    X = centers[y] * 0.3 + rng.standard_normal((n, d), dtype=np.float32) * 0.3
    return X, y


def make_model(kind):
    if kind == "softmax":
        return nn.Linear(784, 10)
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))


def run(kind, mode, X, y, max_steps):
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    ds = TensorDataset(torch.from_numpy(X), torch.from_numpy(y))
    model = make_model(kind)
    if X.dtype == np.float64:
        model = model.double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    crit = nn.CrossEntropyLoss()
    if mode == "nonprivate":
        loader = DataLoader(ds, batch_size=256, shuffle=True)
    else:
        from opacus import PrivacyEngine

        pe = PrivacyEngine()
        loader = DataLoader(ds, batch_size=256)
        kw = dict(module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0,
                  poisson_sampling=True)
        if mode == "ghost":
            model, opt, crit, loader = pe.make_private(**kw, criterion=crit, grad_sample_mode="ghost")
        else:
            model, opt, loader = pe.make_private(**kw, grad_sample_mode="hooks")
    steps = 0
    t0 = None
    for xb, yb in loader:
        if steps == 1:
            t0, c0 = time.perf_counter(), time.process_time()  # exclude the warm-up step
        opt.zero_grad()
        loss = crit(model(xb), yb)
        loss.backward()
        opt.step()
        steps += 1
        if steps > max_steps:
            break
    return (time.perf_counter() - t0) / (steps - 1), (time.process_time() - c0) / (steps - 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=10**9, help="steps timed per run (default: one epoch)")
    ap.add_argument("--n", type=int, default=60_000)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--only", default=None, help="one run, MODEL:MODE (e.g. mlp:ghost)")
    ap.add_argument("--json", action="store_true", help="print one JSON line per run")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    X, y = mnist_like(args.n)
    X = X.astype(args.dtype)
    runs = [tuple(args.only.split(":"))] if args.only else [
        (kind, mode) for kind in ("softmax", "mlp") for mode in ("hooks", "ghost", "nonprivate")]
    if not args.json:
        print(f"torch {torch.__version__}, threads {args.threads}, n {args.n}, {args.dtype}")
        print(f"{'model':8s} {'mode':11s} {'wall ms/step':>12s} {'CPU ms/step':>11s} {'examples/s':>11s}")
    for kind, mode in runs:
        s, c = run(kind, mode, X, y, args.max_steps)
        if args.json:
            import opacus

            print(json.dumps({"ms": s * 1e3, "cpu_ms": c * 1e3, "torch": torch.__version__,
                              "opacus": opacus.__version__}), flush=True)
        else:
            print(f"{kind:8s} {mode:11s} {s * 1e3:12.2f} {c * 1e3:11.2f} {256 / s:11.0f}", flush=True)


if __name__ == "__main__":
    main()
