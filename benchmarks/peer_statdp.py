"""StatDP (Ding et al. 2018, ``pip install pystatdp``) on bench_audit.py's workload.

StatDP's dependencies (numba, matplotlib, jsonpickle, tqdm) are not dpfast's, so it runs from a
separate virtual environment with this tree on PYTHONPATH:

    python -m venv /tmp/statdp && /tmp/statdp/bin/pip install pystatdp scipy threadpoolctl
    PYTHONPATH=. /tmp/statdp/bin/python benchmarks/peer_statdp.py

At n runs a side, StatDP gets n/2 runs to choose its event (``select_event`` over its own
event space) and n/2 to test it (``hypothesis_test``), as dpfast.audit splits its runs; a
p-value below 0.05 rejects the claimed epsilon (confidence 0.95).  One worker process
(``Pool(1)``), like dpfast.audit.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import numpy as np

import dpfast

D = np.zeros(5)
D_PRIME = np.append(D, 2.0)


def understated(x):
    return dpfast.laplace(float(np.sum(x)), sensitivity=1.0, epsilon=1.0)


def correct(x):
    return dpfast.laplace(float(np.sum(x)), sensitivity=2.0, epsilon=1.0)


def statdp_rejects(algorithm, n: int, pool) -> bool:
    from pystatdp.hypotest import hypothesis_test
    from pystatdp.selectors import select_event
    d1, d2, kwargs, event = select_event(algorithm, [(D, D_PRIME, {})], 1.0, n // 2, pool, quiet=True)
    p = hypothesis_test(algorithm, d1, d2, kwargs, event, 1.0, n - n // 2, pool, report_p2=False)
    return float(p) < 0.05


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--grid", default="100,200,400,800,1600,3200,6400")
    a = ap.parse_args()
    with mp.Pool(1) as pool:
        statdp_rejects(correct, 100, pool)  # numba compiles its test statistic once
        for n in (int(x) for x in a.grid.split(",")):
            secs, hits, alarms = [], 0, 0
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                hits += statdp_rejects(understated, n, pool)
                secs.append(time.perf_counter() - t0)
                alarms += statdp_rejects(correct, n, pool)
            print(f"| StatDP (pystatdp) | {n} | {hits}/{a.repeats} | {alarms}/{a.repeats} | {np.median(secs):.3f} |",
                  flush=True)
            if hits == a.repeats:
                break


if __name__ == "__main__":
    main()
