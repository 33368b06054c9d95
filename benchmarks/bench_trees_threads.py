"""Default vs default forest fit at 10^6 x 10 with dpfast's default thread count, interleaved with
diffprivlib 0.6.6 (its default n_jobs=1), recording wall and process CPU time: on a shared machine a
second thread may find no free core, which the CPU / wall ratio shows (2.0: both threads ran).

    PYTHONPATH=. python benchmarks/bench_trees_threads.py [--reps 9]
"""
import argparse
import os
import resource
import time
import warnings

import numpy as np

from dpfast import _threads
from dpfast.ensemble import RandomForestClassifier

from _peers import import_diffprivlib

p = argparse.ArgumentParser()
p.add_argument("--reps", type=int, default=9)
p.add_argument("--dpl", default="/tmp/dpl_site")
args = p.parse_args()
os.environ.pop("DPFAST_NUM_THREADS", None)  # dpfast's default: min(usable CPUs, 4)
warnings.filterwarnings("ignore")
DplRF = import_diffprivlib(args.dpl).models.RandomForestClassifier
rng = np.random.default_rng(0)
n, d = 1_000_000, 10
X = rng.uniform(-4, 4, size=(n, d))
y = (X[:, 0] + X[:, 1] + rng.normal(size=n) > 0).astype(np.int64)


def timed(f):
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    f()
    t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    return t1 - t0, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


dp = lambda: RandomForestClassifier(1.0, (-4.0, 4.0), random_state=0).fit(X, y)  # noqa: E731
dl = lambda: DplRF(epsilon=1.0, bounds=(np.full(d, -4.0), np.full(d, 4.0)), classes=[0, 1],  # noqa: E731
                   random_state=0).fit(X, y)
dp()
rows = []
for _ in range(args.reps):
    rows.append((*timed(dl), *timed(dp)))
a = np.array(rows)
print(f"dpfast threads {_threads.default_threads()}; per rep: diffprivlib wall, dpfast wall, dpfast cpu/wall, ratio")
for w_dl, _, w_dp, c_dp in rows:
    print(f"  {w_dl:.3f} s  {w_dp:.3f} s  {c_dp / w_dp:.2f}  {w_dl / w_dp:.1f}x")
both = a[:, 3] / a[:, 2] > 1.6
print(f"median: diffprivlib {np.median(a[:, 0]):.3f} s, dpfast {np.median(a[:, 2]):.3f} s "
      f"({np.median(a[:, 0] / a[:, 2]):.1f}x); reps where both threads ran (cpu/wall > 1.6): {both.sum()}"
      + (f", their median ratio {np.median(a[both, 0] / a[both, 2]):.1f}x" if both.any() else ""))
