"""Where the benchmark CNN's private step goes: the convolutions' fast paths, in process (issue 25).

Run as a script, on one thread by default::

    PYTHONPATH=. python benchmarks/bench_torch_conv.py                    # this checkout
    PYTHONPATH=. python benchmarks/bench_torch_conv.py --baseline ../main/dpfast/torch/_fast_layers.py

Three tables, all in CPU time of this process (``time.process_time``: on one thread it is the
work done, and it is far less disturbed than wall time by other jobs on a shared machine; the
timings interleave the variants in rounds, and report the minimum and the median):

1. per layer: ``norm_sq`` and ``clipped_sum`` of each convolution of ``bench_torch``'s CNN, inside
   the engine's step (``dpfast.torch.PrivacyEngine``), for this checkout's fast paths and, with
   ``--baseline``, another ``_fast_layers.py`` (loaded as a module and swapped in for the
   convolutions);
2. the whole step: non-private, the engine, and the engine with the convolutions' fast paths
   replaced by free stubs (zeros): what the rest of the private step costs;
3. ``--pieces``: the pieces of each convolution's ``norm_sq`` on one captured batch (padding, the
   unfold, the batched GEMM and the norms of the torch form; the native kernel of the float32 path),
   next to torch's ordinary weight-gradient convolution, which the tap skips;
4. ``--fresh``: each mode of ``bench_torch`` (non-private, Opacus hooks/ghost, the engine) in a fresh
   process, the mean CPU time per step after 3 warm-up steps, like ``bench_torch``'s wall-clock
   figure.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_torch as bt  # noqa: E402


def _stats(v):
    v = np.asarray(v) * 1e3
    return f"{v.min():.2f} / {np.median(v):.2f}"


def per_layer(threads, rounds, baseline):
    import torch
    from torch import nn

    from dpfast.torch import _fast_layers as fl

    variants = {"this": dict(fl.FAST_LAYERS)}
    if baseline:
        spec = importlib.util.spec_from_file_location("baseline_fast_layers", baseline)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        variants["baseline"] = dict(mod.FAST_LAYERS)
    step_fn, batches, crit = bt.build_case("cnn", "engine", threads, 40)
    acc = collections.defaultdict(list)

    def timed(key, fn):
        def f(m, *a, **k):
            t0 = time.process_time()
            r = fn(m, *a, **k)
            acc[key + (f"{type(m).__name__}({m.in_channels}, {m.out_channels})",)].append(time.process_time() - t0)
            return r
        return f

    def use(name, stub=False):
        for t in (nn.Conv1d, nn.Conv2d):
            fast = variants[name][t]
            fl.FAST_LAYERS[t] = fl.FastLayer(timed((name, "norm_sq"), fast.norm_sq),
                                             timed((name, "clipped_sum"), fast.clipped_sum))
            if stub:
                fl.FAST_LAYERS[t] = fl.FastLayer(
                    lambda m, a, g, **k: torch.zeros(a[0].shape[0], dtype=torch.float64),
                    lambda m, a, g, f: {n: torch.zeros_like(p) for n, p in m.named_parameters(recurse=False)})

    nonprivate = bt.build_case("cnn", "nonprivate", threads, 40)
    steps = collections.defaultdict(list)
    modes = [("nonprivate", None)] + [(f"engine ({n})", n) for n in variants] + [("engine, conv stubs", "stub")]
    for r in range(rounds + 1):
        for label, which in modes:
            fn, bs, cr = nonprivate if which is None else (step_fn, batches, crit)
            if which is not None:
                use("this" if which == "stub" else which, stub=which == "stub")
            for j in range(3):
                xb, yb = bs[(r * 3 + j) % len(bs)]
                t0 = time.process_time()
                fn(xb, yb, cr)
                if r:
                    steps[label].append(time.process_time() - t0)
    for t in (nn.Conv1d, nn.Conv2d):
        fl.FAST_LAYERS[t] = variants["this"][t]
    print(f"CNN, {threads} thread(s), {rounds} rounds of 3 steps per variant; CPU ms (min / median); "
          f"load {os.getloadavg()}")
    print("\n| fast path | call | layer | CPU ms |\n|---|---|---|---|")
    for key in sorted(acc):
        print(f"| {key[0]} | {key[1]} | {key[2]} | {_stats(acc[key][3:])} |")
    print("\n| step | CPU ms |\n|---|---|")
    for label, _ in modes:
        print(f"| {label} | {_stats(steps[label])} |")


def pieces(threads, reps=30):
    import torch
    from torch import nn

    from dpfast import _clip
    from dpfast.torch import _fast_layers as fl

    step_fn, batches, crit = bt.build_case("cnn", "engine", threads, 10)
    cap = {}
    orig = fl.FAST_LAYERS[nn.Conv2d]

    def grab(m, a, g, **k):
        cap.setdefault(id(m), (m, a, g))
        return orig.norm_sq(m, a, g, **k)

    fl.FAST_LAYERS[nn.Conv2d] = fl.FastLayer(grab, orig.clipped_sum)
    step_fn(*batches[0], crit)
    fl.FAST_LAYERS[nn.Conv2d] = orig

    def t(fn):
        v = []
        for _ in range(reps):
            t0 = time.process_time()
            fn()
            v.append(time.process_time() - t0)
        return _stats(v)

    print(f"\npieces of the convolutions' norm_sq, {threads} thread(s), CPU ms (min / median); load {os.getloadavg()}")
    print("| layer | piece | CPU ms |\n|---|---|---|")
    for m, a, g in cap.values():
        x = a[0]
        b = x.shape[0]
        name = f"Conv2d({m.in_channels}, {m.out_channels})"
        g32 = g.reshape(b, m.out_channels, -1)
        xp, k, s, d = fl._conv_padded(m, x)
        ut = fl._im2col_cl(m, xp, k, s, d)
        w = torch.empty(b, g32.shape[1], ut.shape[2])
        sq, fa, fg = np.empty(b), np.empty(b), np.empty(b)
        native = fl._NATIVE_CONV
        rows = [("norm_sq, as configured", lambda: fl.conv_norm_sq(m, a, g)),
                ("pad", lambda: fl._conv_padded(m, x)),
                ("torch form: unfold (channels-last)", lambda: fl._im2col_cl(m, xp, k, s, d)),
                ("torch form: batched GEMM G_i U_i^T", lambda: torch.bmm(g32, ut, out=w)),
                ("torch form: ||U_i||_F^2 (float32)", lambda: fl._frob_sq(ut)),
                ("torch form: ||G_i||_F^2", lambda: fl._frob_sq(g32)),
                ("torch form: row norms of w_hat", lambda: fl._row_norms_upper(w.reshape(b, -1))),
                ("bias sums", lambda: g32.sum(dim=2)),
                ("non-private weight gradient (conv2d_weight; skipped by the tap)",
                 lambda: torch.nn.grad.conv2d_weight(x, m.weight.shape, g, stride=m.stride, padding=m.padding))]
        if native:
            rows.insert(1, ("native kernel (w_hat, ||w_hat||^2, ||U||^2, ||G||^2)",
                            lambda: _clip.conv_weight_grads(xp.contiguous().numpy(), g.contiguous().numpy(), k[0], k[1],
                                                            s[0], s[1], d[0], d[1], w.reshape(b, -1).numpy(), sq, fa, fg,
                                                            fl._kernel_threads())))
        for label, fn in rows:
            print(f"| {name} | {label} | {t(fn)} |", flush=True)


def fresh(threads, steps):
    print(f"\nfresh processes, {threads} thread(s), {steps} timed steps, mean CPU ms per step; load {os.getloadavg()}")
    print("| mode | CPU ms/step |\n|---|---|")
    for mode in ("nonprivate", "opacus_hooks", "opacus_ghost", "engine"):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
                   DPFAST_NUM_THREADS=str(threads))
        out = subprocess.run([sys.executable, __file__, "--child", mode, "--threads", str(threads),
                              "--steps", str(steps)], capture_output=True, text=True, env=env, timeout=1800)
        res = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {"ms": float("nan")}
        print(f"| {mode} | {res['ms']:.2f} |", flush=True)


def child(mode, threads, steps):
    built = bt.build_case("cnn", mode, threads, steps)
    if isinstance(built, dict):
        print(json.dumps({"ms": float("nan")}))
        return
    step_fn, batches, crit = built
    for xb, yb in batches[:3]:
        step_fn(xb, yb, crit)
    t0 = time.process_time()
    for xb, yb in batches[3:]:
        step_fn(xb, yb, crit)
    print(json.dumps({"ms": (time.process_time() - t0) / steps * 1e3}))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--baseline", default=None, help="another _fast_layers.py to compare the convolutions with")
    ap.add_argument("--fresh", action="store_true", help="also each mode in a fresh process")
    ap.add_argument("--pieces", action="store_true", help="also the pieces of each convolution's norm_sq")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.threads, args.steps)
        return
    os.environ["DPFAST_NUM_THREADS"] = str(args.threads)
    per_layer(args.threads, args.rounds, args.baseline)
    if args.pieces:
        pieces(args.threads)
    if args.fresh:
        fresh(args.threads, args.steps)


if __name__ == "__main__":
    main()
