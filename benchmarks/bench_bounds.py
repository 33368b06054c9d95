"""dpfast.tools.bounds and subsample_and_aggregate at 10^6 rows (issue 24).

Run: PYTHONPATH=. DPFAST_NUM_THREADS=1 python benchmarks/bench_bounds.py
(diffprivlib 0.6.6 from /tmp/dpl_site, appended to sys.path so that the venv's NumPy wins).

diffprivlib has no private bounds (its issue #20): with ``bounds=None`` its tools read the
min/max off the data and warn (``PrivacyLeakWarning``), a release that is not DP.  The honest
comparison is therefore dpfast's two-call pattern (bounds at 20 % of epsilon, the mean at 80 %)
against diffprivlib's leaky default and against a mean with the true bounds given for free.
Subsample-and-aggregate has no peer: its cost is compared with the non-private statistic.
Speed: min of 5 rounds.  Accuracy: mean absolute error vs NumPy over 10 seeds.
"""
from __future__ import annotations

import time
import warnings

import numpy as np

import dpfast.tools as T

from _peers import import_diffprivlib

_dpl = import_diffprivlib(required=False)  # diffprivlib 0.6.6 from /tmp/dpl_site (see _peers.py)
D = _dpl.tools if _dpl else None

warnings.simplefilter("ignore")
N = 10**6
x = np.random.default_rng(0).lognormal(3.0, 1.0, N)  # incomes-like: no natural bound


def best(f, rounds=5):
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def two_call(eps, s, tail=0.01):
    lo, hi = T.bounds(x, 0.2 * eps, tail=tail, rng=s)
    return T.mean(x, 0.8 * eps, (lo, hi), rng=s)


if __name__ == "__main__":
    truth = x.mean()
    print(f"n = {N}, lognormal(3, 1): mean {truth:.3f}, min {x.min():.3g}, max {x.max():.3g}")
    print("| release | s (eps=1) | MAE eps=0.1 | eps=1 | eps=10 | DP? |")
    print("|---|---|---|---|---|---|")
    rows = [("np.mean", lambda e, s: np.mean(x), "no (exact)"),
            ("dpfast bounds(0.2 eps) + mean(0.8 eps), tail 0.01", two_call, "yes"),
            ("dpfast bounds(0.2 eps) + mean(0.8 eps), tail 0.001", lambda e, s: two_call(e, s, 1e-3), "yes"),
            ("dpfast mean, true min/max given as public bounds", lambda e, s: T.mean(x, e, (x.min(), x.max()), rng=s),
             "only if min/max were public")]
    if D is not None:
        rows.append(("diffprivlib mean, bounds=None (reads min/max)",
                     lambda e, s: D.mean(x, epsilon=e, random_state=s), "no: leaks min/max"))
    for name, f, dp in rows:
        t = best(lambda: f(1.0, 1))
        acc = [np.mean([abs(f(e, s) - truth) for s in range(10)]) for e in (0.1, 1.0, 10.0)]
        print(f"| {name} | {t:.4f} | " + " | ".join(f"{a:.3g}" for a in acc) + f" | {dp} |")
    t_b = best(lambda: T.bounds(x, 1.0, rng=1))
    t_q = best(lambda: np.quantile(x, [0.01, 0.99]))
    print(f"\nbounds alone: {t_b:.4f} s; np.quantile(x, [0.01, 0.99]): {t_q:.4f} s ({t_b / t_q:.2f}x)")
    z = np.random.default_rng(1).standard_normal(N)
    t_sa = best(lambda: T.subsample_and_aggregate(np.median, z, 10.0, bounds=(-5.0, 5.0), rng=1))
    t_med = best(lambda: np.median(z))
    err = np.mean([abs(T.subsample_and_aggregate(np.median, z, 10.0, bounds=(-5.0, 5.0), rng=s) - np.median(z))
                   for s in range(10)])
    err_tm = np.mean([abs(T.median(z, 10.0, (-5.0, 5.0), rng=s) - np.median(z)) for s in range(10)])
    print(f"subsample_and_aggregate(np.median), eps=10: {t_sa:.4f} s vs np.median {t_med:.4f} s "
          f"({t_sa / t_med:.2f}x); MAE {err:.2e} (tools.median at eps=10: {err_tm:.2e})")
