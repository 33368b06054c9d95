"""dpfast.mechanisms.discrete_staircase vs the geometric mechanism (discrete_laplace_mechanism) on
an integer query of sensitivity Delta: mean |noise| (empirical over 10^6 draws, and the closed form
at the chosen r) and the time per 10^6 draws.

    PYTHONPATH=. DPFAST_NUM_THREADS=1 python benchmarks/bench_discrete_staircase.py
"""
import time

import numpy as np

from dpfast.mechanisms import discrete_laplace_mechanism, discrete_staircase, discrete_staircase_r
from dpfast.mechanisms.staircase import _ds_moments

N = 1_000_000
z = np.zeros(N, dtype=np.int64)
print("Delta epsilon r* | E|X| staircase (closed form, empirical) | geometric (empirical) | ratio | "
      "time per 10^6: staircase, geometric")
for delta in (1, 10, 100):
    for eps in (0.5, 1.0, 3.0, 10.0):
        r = discrete_staircase_r(delta, eps)
        t0 = time.perf_counter()
        x = discrete_staircase(z, delta, eps, rng=1)
        t1 = time.perf_counter()
        y = discrete_laplace_mechanism(z, delta, eps, rng=2)
        t2 = time.perf_counter()
        cf = float(_ds_moments(np.array([r]), delta, eps, "l1")[0])
        a, b = np.abs(x).mean(), np.abs(y).mean()
        print(f"{delta:5d} {eps:5.1f} {r:4d} | {cf:10.4f} {a:10.4f} | {b:10.4f} | {a / b:6.3f} | "
              f"{t1 - t0:.3f} s, {t2 - t1:.3f} s", flush=True)
