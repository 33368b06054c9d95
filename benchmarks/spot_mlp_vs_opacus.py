"""Issue 12 item 6: DPMLPClassifier's DP-SGD step against Opacus ghost clipping, fresh processes.

Every configuration runs in its own fresh interpreter (so nothing that ran before in the same
process can speed it up or slow it down), dpfast and Opacus interleaved, best of ``--reps``:

* dpfast: ``DPMLPClassifier`` 784-256-10, ReLU, flat clipping, noise multiplier 1, clip_norm 1,
  Poisson sampling with expected batch 256, one epoch over ``bench_sgd.mnist_like`` (60,000 x
  784), float32 and float64, ``n_threads`` 1 and 2.  ms/step = ``train_seconds_ / steps_`` (the
  whole training loop: sampling, forward, ghost norms, backward, noise, update; not validation
  or accounting).  ``DPFAST_NUM_THREADS`` is set to the same count, so the noise fill uses it too.
* Opacus ghost clipping (``benchmarks/peer_opacus_sgd.py --only mlp:ghost``) on the same data
  (cast to the dtype; float64 model for float64) with ``torch.set_num_threads`` 1 and 2, in the
  interpreter given by ``--torch-python`` (torch and opacus live in their own venv; see the
  peer's docstring).  ms/step excludes the first step and includes Opacus's Poisson DataLoader.
* History: the dpfast float32 and float64 steps after a tiny float64 fit in the same process
  (the issue saw float32 go from 21 to 10 ms/step after any float64 fit).

Prints one table (ratio = Opacus / dpfast, > 1: dpfast is faster; wall time and process CPU
time, the best of the reps for each separately -- on a loaded machine CPU time is the steadier
figure) with ``/proc/loadavg`` before and after.  ``python benchmarks/spot_mlp_vs_opacus.py [--reps 3] [--torch-python PATH]``;
without the torch interpreter only the dpfast rows are printed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TORCH = os.environ.get("DPFAST_TORCH_PYTHON", "/tmp/torchvenv/bin/python")


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


# ------------------------------------------------------------------------- dpfast worker


def dpfast_worker(dtype: str, threads: int, before: str, n: int) -> None:
    """One fit in this (fresh) process; prints one JSON line."""

    sys.path.insert(0, HERE)
    from dpfast.sgd import DPMLPClassifier

    from bench_sgd import mnist_like

    X, y = mnist_like(n)  # float32, then cast: the same values for both dtypes
    X = X.astype(dtype)
    if before != "none":
        # a tiny fit of another configuration first (the history dependence of issue 12)
        DPMLPClassifier(8, noise_multiplier=1.0, epochs=1, batch_size=32, classes=list(range(10)),
                        random_state=0, accountant="rdp").fit(X[:200].astype(before), y[:200])
    m = DPMLPClassifier(256, noise_multiplier=1.0, clip_norm=1.0, epochs=1, batch_size=256,
                        learning_rate=0.1, classes=list(range(10)), random_state=0, accountant="rdp",
                        n_threads=threads)
    m.fit(X, y)
    print(json.dumps({"ms": 1e3 * m.train_seconds_ / m.steps_,
                      "cpu_ms": 1e3 * m._train_cpu_seconds / m.steps_, "steps": m.steps_}), flush=True)


# ------------------------------------------------------------------------------- driver


def _run(cmd, threads: int, omp_wait=None) -> dict:
    # DPFAST_NUM_THREADS: dpfast's other thread pools (the noise fill) use the same thread count
    # as the estimator's n_threads, so that "1 thread" means one thread on both sides.
    env = dict(os.environ, DPFAST_NUM_THREADS=str(threads))
    if omp_wait:
        env["OMP_WAIT_POLICY"] = omp_wait
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=os.path.dirname(HERE), env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--torch-python", default=DEFAULT_TORCH)
    ap.add_argument("--opacus-steps", type=int, default=120, help="Opacus steps timed per run")
    ap.add_argument("--n", type=int, default=60_000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--worker", nargs=3, metavar=("DTYPE", "THREADS", "BEFORE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        dtype, threads, before = args.worker
        dpfast_worker(dtype, int(threads), before, args.n)
        return

    have_torch = os.path.exists(args.torch_python)
    threads = [int(t) for t in args.threads.split(",")]
    configs = []  # (key, command, OMP_WAIT_POLICY or None)
    for t in threads:
        for dt in ("float32", "float64"):
            configs.append((("dpfast", dt, t, "none"),
                            [sys.executable, __file__, "--n", str(args.n), "--worker", dt, str(t), "none"], None))
            # Opacus with 2+ threads also runs with OMP_WAIT_POLICY=PASSIVE (torch's OpenMP
            # workers spin while waiting, which costs it up to 10x on a loaded machine); the
            # best of both is reported, the peer's best configuration.
            for wait in ([None] if t == 1 else [None, "PASSIVE"]) if have_torch else []:
                configs.append((("opacus", dt, t, "none"),
                                [args.torch_python, os.path.join(HERE, "peer_opacus_sgd.py"), "--threads", str(t),
                                 "--dtype", dt, "--n", str(args.n), "--only", "mlp:ghost", "--json",
                                 "--max-steps", str(args.opacus_steps)], wait))
    for dt in ("float32", "float64") if 1 in threads else ():
        configs.append((("dpfast", dt, 1, "float64"),
                        [sys.executable, __file__, "--n", str(args.n), "--worker", dt, "1", "float64"], None))

    load0 = loadavg()
    best: dict = {}
    meta: dict = {}
    for rep in range(args.reps):
        for key, cmd, wait in configs:  # interleaved: each rep runs every configuration once
            r = _run(cmd, key[2], wait)
            prev = best.setdefault(key, r)
            prev["ms"], prev["cpu_ms"] = min(prev["ms"], r["ms"]), min(prev["cpu_ms"], r["cpu_ms"])
            meta.update({k: r[k] for k in ("torch", "opacus") if k in r})
    load1 = loadavg()

    import dpfast

    print(f"dpfast {dpfast.__version__}; torch {meta.get('torch', 'not run')}, opacus {meta.get('opacus', 'not run')}; "
          f"best of {args.reps} fresh processes each; loadavg before {load0}, after {load1}")
    print("| dtype | threads | dpfast wall ms/step (CPU) | Opacus ghost wall ms/step (CPU) | ratio wall | ratio CPU |")
    print("|---|---|---|---|---|---|")
    for t in threads:
        for dt in ("float32", "float64"):
            d = best[("dpfast", dt, t, "none")]
            o = best.get(("opacus", dt, t, "none"))
            os_ = f"{o['ms']:.2f} ({o['cpu_ms']:.2f})" if o else "not run"
            ratio = f"{o['ms'] / d['ms']:.2f}x | {o['cpu_ms'] / d['cpu_ms']:.2f}x" if o else "- | -"
            print(f"| {dt} | {t} | {d['ms']:.2f} ({d['cpu_ms']:.2f}) | {os_} | {ratio} |")
    if 1 not in threads:
        return
    print()
    print("| dtype (1 thread) | dpfast fresh wall ms/step (CPU) | after a float64 fit in the same process |")
    print("|---|---|---|")
    for dt in ("float32", "float64"):
        a, b = best[("dpfast", dt, 1, "none")], best[("dpfast", dt, 1, "float64")]
        print(f"| {dt} | {a['ms']:.2f} ({a['cpu_ms']:.2f}) | {b['ms']:.2f} ({b['cpu_ms']:.2f}) |")

if __name__ == "__main__":
    main()
