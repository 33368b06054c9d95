"""dpfast.torch vs Opacus 1.6 vs non-private PyTorch: DP-SGD steps per second and peak memory (issue 25).

Run as a script (each case in a fresh subprocess, so that ``ru_maxrss`` is that case's peak)::

    python benchmarks/bench_torch.py                       # all models, modes, 1 and 2 threads
    python benchmarks/bench_torch.py --models mlp --threads 1 --steps 30
    python benchmarks/bench_torch.py --only mlp:fast:1 --json   # one case, one JSON line

Models (float32, expected batch 256 of n = 10,000 synthetic examples, CrossEntropyLoss(mean)):

* ``mlp``: the README's MLP 784-256-10 (ReLU) on MNIST-shaped vectors;
* ``cnn``: Opacus's MNIST example ``SampleConvNet`` on 1 x 28 x 28 images: Conv2d(1, 16, 8, 2, 3),
  MaxPool(2, 1), Conv2d(16, 32, 4, 2), MaxPool(2, 1), Linear(512, 32), Linear(32, 10), tanh;
* ``text``: Embedding(10,000, 64) over 64 tokens, mean-pooled, Linear(64, 4).

Modes:

* ``nonprivate``: plain PyTorch (batches of exactly 256);
* ``opacus_hooks`` / ``opacus_ghost``: ``opacus.PrivacyEngine.make_private`` with
  ``grad_sample_mode="hooks"`` / ``"ghost"`` (ghost clipping: norms by Opacus's norm samplers for
  Linear/Embedding/..., per-sample gradients for the others, then a second backward pass), Poisson
  sampling, noise multiplier 1, max_grad_norm 1;
* ``fast``: dpfast's per-layer fast paths alone (``dpfast.torch._fast_layers.FAST_LAYERS``) in a
  minimal step written here -- forward hooks keep each layer's input and register a tensor hook
  on its output that keeps the output gradient (times the batch size: gradient of the sum),
  one backward, ``norm_sq`` per layer, clip factors min(1, C / norm), ``clipped_sum`` per layer,
  Gaussian noise N(0, (z C)^2) from ``dpfast.random.standard_normal``, division by the expected
  batch size, optimizer step.  This is what the engine's step costs without its bookkeeping;
* ``fast_tap``: as ``fast``, with each fast layer run on detached parameters and its output
  gradient kept by an identity autograd function, so that autograd does not also form the
  ordinary (unclipped, discarded) weight gradient: what an engine could save;
* ``engine``: ``dpfast.torch.PrivacyEngine.make_private`` (when the engine is installed);
* ``opacus_per_layer`` / ``engine_per_layer``: ``clipping="per_layer"`` with ``max_grad_norm`` a
  list of L norms C / sqrt(L) (L trainable parameters; so sqrt(sum C_l^2) = C): Opacus's
  ``DPPerLayerOptimizer`` (hooks) and dpfast's engine;
* ``engine_per_group``: dpfast's ``clipping="per_group"``, one optimizer parameter group per layer
  (weight and bias clipped jointly), G norms C / sqrt(G).

Each model and thread count runs ``--repeat`` interleaved rounds over the modes (a fresh process
per case); the table shows each mode's fastest round (the least disturbed by other load) and its
largest peak RSS.  Every mode draws its batches before the clock starts (the private modes from their Poisson
samplers: Opacus's DPDataLoader, or a Poisson mask for ``fast``), so the figure is the training
step alone: zero_grad, forward, loss, backward, step.  Three warm-up steps are not timed.  Memory:
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of the fresh process at the end (peak RSS, which
includes torch itself and the data) and its growth over the peak before the first step
("train MB").
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import warnings

import numpy as np

MODELS = ("mlp", "cnn", "text")
MODES = ("nonprivate", "opacus_hooks", "opacus_ghost", "fast", "fast_tap", "engine", "opacus_per_layer",
         "engine_per_layer", "engine_per_group")
N = 10_000
BATCH = 256
Z, C = 1.0, 1.0
VOCAB, SEQ, EMB = 10_000, 64, 64


def make_data(kind, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "text":
        y = rng.integers(0, 4, N)
        x = rng.integers(0, VOCAB, (N, SEQ))
        x[:, :8] = (y[:, None] * 2500 + rng.integers(0, 50, (N, 8)))  # class-dependent tokens
        return x.astype(np.int64), y.astype(np.int64)
    y = rng.integers(0, 10, N)
    centers = rng.standard_normal((10, 784)).astype(np.float32)
    x = centers[y] * 0.3 + rng.standard_normal((N, 784), dtype=np.float32) * 0.3
    if kind == "cnn":
        x = x.reshape(N, 1, 28, 28)
    return x, y.astype(np.int64)


def make_model(kind):
    import torch
    from torch import nn

    class SampleConvNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 8, 2, padding=3)
            self.conv2 = nn.Conv2d(16, 32, 4, 2)
            self.fc1 = nn.Linear(32 * 4 * 4, 32)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, x):
            x = torch.tanh(self.conv1(x))
            x = nn.functional.max_pool2d(x, 2, 1)
            x = torch.tanh(self.conv2(x))
            x = nn.functional.max_pool2d(x, 2, 1)
            x = x.view(-1, 32 * 4 * 4)
            return self.fc2(torch.tanh(self.fc1(x)))

    class TextClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, EMB)
            self.fc = nn.Linear(EMB, 4)

        def forward(self, x):
            return self.fc(self.emb(x).mean(dim=1))

    torch.manual_seed(0)
    if kind == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    if kind == "cnn":
        return SampleConvNet()
    return TextClassifier()


class FastStep:
    """The minimal DP-SGD step over dpfast's fast paths (see the module docstring)."""

    def __init__(self, model, optimizer, expected_batch, seed=0, tap=False):
        import torch

        from dpfast.torch._fast_layers import FAST_LAYERS

        self.torch = torch
        self.model, self.optimizer = model, optimizer
        self.expected_batch = expected_batch
        self.gen = np.random.default_rng(seed)
        self.layers = [m for m in model.modules()
                       if type(m) in FAST_LAYERS and any(p.requires_grad for p in m.parameters(recurse=False))]
        self.fast = FAST_LAYERS
        self.saved = {}
        self.batch = 0
        if tap:
            self._install_taps()
        else:
            for m in self.layers:
                m.register_forward_hook(self._forward_hook)

    def _install_taps(self):
        """``fast_tap``: each fast layer runs on detached parameters, so that autograd never forms
        the (discarded) ordinary weight gradient, and its output passes through an identity
        autograd function whose backward keeps the output gradient (the "book-keeping" of Bu et
        al. 2023 without the wasted weight-gradient matmul)."""
        torch = self.torch
        saved = self.saved
        anchor = torch.zeros((), requires_grad=True)  # makes every tapped output require grad

        class Tap(torch.autograd.Function):
            @staticmethod
            def forward(ctx, out, anchor, key):
                ctx.key = key
                return out.view_as(out)

            @staticmethod
            def backward(ctx, g):
                m, inputs, batch = ctx.key
                saved[m] = (inputs, g * batch)
                return g, None, None

        for m in self.layers:
            cls_forward = type(m).forward

            def fwd(*args, _m=m, _f=cls_forward):
                params = dict(_m._parameters)
                for n, p in params.items():
                    if p is not None:
                        _m._parameters[n] = p.detach()
                try:
                    out = _f(_m, *args)
                finally:
                    _m._parameters.update(params)
                return Tap.apply(out, anchor, (_m, tuple(a.detach() for a in args), args[0].shape[0]))

            m.forward = fwd

    def _forward_hook(self, m, inputs, output):
        saved = self.saved
        batch = inputs[0].shape[0]
        self.batch = batch

        def keep(grad):
            saved[m] = (inputs, grad * batch)  # loss is a mean: gradient of the sum

        if output.requires_grad:
            output.register_hook(keep)

    def step(self, x, y, criterion):
        torch = self.torch
        self.optimizer.zero_grad(set_to_none=True)
        loss = criterion(self.model(x), y)
        loss.backward()
        ns = None
        for m in self.layers:
            acts, g = self.saved[m]
            v = self.fast[type(m)].norm_sq(m, acts, g)
            ns = v if ns is None else ns + v
        factors = torch.clamp(C * (1 - 1e-6) / torch.sqrt(ns), max=1.0).float()
        params = []
        for m in self.layers:
            acts, g = self.saved[m]
            sums = self.fast[type(m)].clipped_sum(m, acts, g, factors)
            for name, s in sums.items():
                params.append((getattr(m, name), s))
        scale = np.array([Z * C])
        for p, s in params:
            # s + z C N(0, 1) in place, from dpfast's sampler (the engine's noise), on s's memory
            draw_into(self.gen, "normal", s.numpy(), s.numpy(), scale)
            p.grad = s.div_(self.expected_batch)
        self.saved.clear()
        self.optimizer.step()
        return loss


def run_case(kind, mode, threads, steps):
    built = build_case(kind, mode, threads, steps)
    if isinstance(built, dict):
        return built
    step_fn, batches, crit = built
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for xb, yb in batches[:3]:
        step_fn(xb, yb, crit)
    t0 = time.perf_counter()
    for xb, yb in batches[3:]:
        step_fn(xb, yb, crit)
    dt = (time.perf_counter() - t0) / steps
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"ms": dt * 1e3, "steps_per_s": 1.0 / dt, "maxrss_mb": rss, "train_mb": rss - rss_before}


def build_case(kind, mode, threads, steps):
    """(step_fn, batches, criterion) of one case (or a dict saying why it is skipped)."""
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    warnings.filterwarnings("ignore")
    torch.set_num_threads(threads)
    x_np, y_np = make_data(kind)
    X, Y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    model = make_model(kind)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    crit = nn.CrossEntropyLoss()
    n_batches = steps + 3
    q = BATCH / N
    step_fn = None
    if mode == "nonprivate":
        perm = np.random.default_rng(1).permutation(N)
        batches = [(X[perm[i * BATCH:(i + 1) * BATCH]], Y[perm[i * BATCH:(i + 1) * BATCH]])
                   for i in range(n_batches)]
    elif mode.startswith("opacus"):
        from opacus import PrivacyEngine

        pe = PrivacyEngine()
        loader = DataLoader(TensorDataset(X, Y), batch_size=BATCH)
        kw = dict(module=model, optimizer=opt, data_loader=loader, noise_multiplier=Z, max_grad_norm=C,
                  poisson_sampling=True)
        if mode == "opacus_per_layer":
            n_params = len([p for p in model.parameters() if p.requires_grad])
            kw.update(max_grad_norm=[C / n_params ** 0.5] * n_params, clipping="per_layer")
        if mode == "opacus_ghost":
            model, opt, crit, loader = pe.make_private(**kw, criterion=crit, grad_sample_mode="ghost")
        else:
            model, opt, loader = pe.make_private(**kw, grad_sample_mode="hooks")
        batches = []
        while len(batches) < n_batches:
            for b in loader:
                batches.append(b)
                if len(batches) == n_batches:
                    break
    elif mode in ("fast", "fast_tap"):
        rng = np.random.default_rng(1)
        batches = []
        for _ in range(n_batches):
            idx = torch.from_numpy(np.flatnonzero(rng.random(N) < q))
            batches.append((X[idx], Y[idx]))
        fs = FastStep(model, opt, q * N, tap=mode == "fast_tap")
        step_fn = fs.step
    elif mode in ("engine", "engine_per_layer", "engine_per_group"):
        import dpfast.torch as dpt

        if not hasattr(dpt, "PrivacyEngine"):
            return {"skipped": "dpfast.torch.PrivacyEngine is not installed yet"}
        pe = dpt.PrivacyEngine()
        loader = DataLoader(TensorDataset(X, Y), batch_size=BATCH)
        clip = {"max_grad_norm": C}
        if mode == "engine_per_layer":
            n_params = len([p for p in model.parameters() if p.requires_grad])
            clip = {"max_grad_norm": [C / n_params ** 0.5] * n_params, "clipping": "per_layer"}
        if mode == "engine_per_group":
            units = [list(m.parameters(recurse=False)) for m in model.modules() if list(m.parameters(recurse=False))]
            opt = torch.optim.SGD([{"params": u} for u in units], lr=0.05)
            clip = {"max_grad_norm": [C / len(units) ** 0.5] * len(units), "clipping": "per_group"}
        model, opt, loader = pe.make_private(module=model, optimizer=opt, data_loader=loader,
                                             noise_multiplier=Z, poisson_sampling=True, **clip)
        batches = []
        while len(batches) < n_batches:
            for b in loader:
                batches.append(b)
                if len(batches) == n_batches:
                    break
    else:
        raise ValueError(mode)

    if step_fn is None:
        def step_fn(xb, yb, crit):
            opt.zero_grad()
            loss = crit(model(xb), yb)
            loss.backward()
            opt.step()
            return loss

    if mode in ("engine", "engine_per_layer", "engine_per_group"):
        # the parts of the engine's step, for --inprocess: forward + backward, then opt.step()
        # (clipping, noise, the wrapped optimizer)
        def fwd_bwd(xb, yb, crit):
            opt.zero_grad()
            crit(model(xb), yb).backward()

        step_fn.parts = {"forward+backward": fwd_bwd, "opt.step": lambda xb, yb, crit: opt.step()}
    return step_fn, batches, crit


BLOCK = 5  # consecutive steps of one mode per in-process round


def run_inprocess(kinds, modes, threads_list, rounds):
    """All modes of a model in ONE process, timed in interleaved rounds (BLOCK steps of mode A,
    then of mode B, ...), each mode's fastest round (per step) reported: a machine shared with other
    jobs disturbs every mode alike, so the ratios are the robust figures.  Also the engine's parts
    (forward + backward; opt.step = clipping, noise and the SGD update), each timed alone."""
    print("| model | threads | " + " | ".join(modes) + " | best Opacus / engine | engine fwd+bwd | engine opt.step |")
    print("|---|---|" + "---|" * len(modes) + "---|---|---|")
    for kind in kinds:
        for threads in threads_list:
            os.environ["DPFAST_NUM_THREADS"] = str(threads)
            cases = {m: build_case(kind, m, threads, BLOCK * 4) for m in modes}
            best = {m: float("inf") for m in modes}
            parts = {"forward+backward": float("inf"), "opt.step": float("inf")}
            for r in range(rounds + 1):
                for m in modes:
                    step_fn, batches, crit = cases[m]
                    t0 = time.perf_counter()
                    for j in range(BLOCK):
                        xb, yb = batches[(r * BLOCK + j) % len(batches)]
                        step_fn(xb, yb, crit)
                    dt = (time.perf_counter() - t0) / BLOCK
                    if r >= 1:  # round 0 warms up
                        best[m] = min(best[m], dt)
                if "engine" in cases and r >= 3:
                    step_fn, batches, crit = cases["engine"]
                    xb, yb = batches[r % len(batches)]
                    t0 = time.perf_counter()
                    step_fn.parts["forward+backward"](xb, yb, crit)
                    t1 = time.perf_counter()
                    step_fn.parts["opt.step"](xb, yb, crit)
                    t2 = time.perf_counter()
                    parts["forward+backward"] = min(parts["forward+backward"], t1 - t0)
                    parts["opt.step"] = min(parts["opt.step"], t2 - t1)
            op = min([best[m] for m in modes if m.startswith("opacus")] or [float("nan")])
            ratio = op / best["engine"] if "engine" in best else float("nan")
            print(f"| {kind} | {threads} | " + " | ".join(f"{best[m] * 1e3:.2f} ms" for m in modes)
                  + f" | {ratio:.2f}x | {parts['forward+backward'] * 1e3:.2f} ms | {parts['opt.step'] * 1e3:.2f} ms |",
                  flush=True)


def _child(case, steps):
    kind, mode, threads = case.split(":")
    env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads, DPFAST_NUM_THREADS=threads)
    out = subprocess.run([sys.executable, __file__, "--only", case, "--steps", str(steps), "--json"],
                         capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per case (after 3 warm-up steps)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds over the modes (interleaved, each case a fresh process); the table "
                         "shows each mode's fastest round and its largest peak RSS")
    ap.add_argument("--only", default=None, help="one case MODEL:MODE:THREADS, in this process")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--inprocess", type=int, default=0, metavar="ROUNDS",
                    help="instead: all modes of a model in one process, ROUNDS interleaved single steps "
                         "(fastest step per mode, and the engine's parts); no memory figures")
    args = ap.parse_args(argv)
    if args.inprocess:
        import torch

        print(f"in-process, torch {torch.__version__}, {args.inprocess} interleaved rounds; load: {os.getloadavg()}")
        modes = args.modes.split(",")
        run_inprocess(args.models.split(","), modes, [int(t) for t in args.threads.split(",")], args.inprocess)
        print(f"load after: {os.getloadavg()}")
        return
    if args.only:
        kind, mode, threads = args.only.split(":")
        res = run_case(kind, mode, int(threads), args.steps)
        print(json.dumps(res) if args.json else res, flush=True)
        return
    import opacus
    import torch

    print(f"torch {torch.__version__}, opacus {opacus.__version__}, n {N}, expected batch {BATCH}, "
          f"float32, {args.steps} timed steps; load: {os.getloadavg()}", flush=True)
    print("| model | threads | mode | ms/step | steps/s | peak RSS MB | train MB | fast/this |")
    print("|---|---|---|---|---|---|---|---|")
    for kind in args.models.split(","):
        for threads in args.threads.split(","):
            rows = {}
            for _ in range(args.repeat):  # interleaved rounds: the machine's load hits every mode alike
                for mode in args.modes.split(","):
                    r = _child(f"{kind}:{mode}:{threads}", args.steps)
                    old = rows.get(mode)
                    if old is None or "ms" not in old:
                        rows[mode] = r
                    elif "ms" in r:
                        best = dict(old if old["ms"] <= r["ms"] else r)
                        best["maxrss_mb"] = max(old["maxrss_mb"], r["maxrss_mb"])
                        best["train_mb"] = max(old["train_mb"], r["train_mb"])
                        rows[mode] = best
            ref = rows.get("fast", {}).get("steps_per_s")
            for mode, r in rows.items():
                if "ms" not in r:
                    print(f"| {kind} | {threads} | {mode} | {r.get('skipped') or r.get('error')} | | | | |")
                    continue
                ratio = f"{ref / r['steps_per_s']:.2f}x" if ref else ""
                print(f"| {kind} | {threads} | {mode} | {r['ms']:.2f} | {r['steps_per_s']:.1f} | "
                      f"{r['maxrss_mb']:.0f} | {r['train_mb']:.0f} | {ratio} |", flush=True)
    print(f"load after: {os.getloadavg()}")


def draw_into(gen, kind, out, values, scale):
    from dpfast.random import draw_into as di

    return di(gen, kind, out, values, scale)


if __name__ == "__main__":
    main()
