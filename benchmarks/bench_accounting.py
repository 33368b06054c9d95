"""Benchmarks of dpfast.accounting against dp-accounting (Google) and prv-accountant (Microsoft).

Workload of issue 3: DP-SGD with noise multiplier 1.0, sample rate 256/60000, 14,062 steps,
delta 1e-5.  Smoke size (CI): fewer steps; ``DPFAST_BENCH_FULL=1`` for the issue's sizes.
``python benchmarks/bench_accounting.py`` prints the agreement grid for
``benchmarks/results/acct.md``.
"""
import math
import os
import sys
import time
import warnings

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dpfast.accounting as acc  # noqa: E402

from _bench import size  # noqa: E402

Q = 256 / 60000
SIGMA = 1.0
DELTA = 1e-5
STEPS = size(1000, 14062)


def _clear():
    acc.rdp._CURVE_CACHE.clear()
    acc.pld._STEP_CACHE.clear()


# ---------------------------------------------------------------------------------------- dpfast
def dpfast_rdp(sigma=SIGMA, q=Q, steps=STEPS, delta=DELTA):
    _clear()
    return acc.RDPAccountant().compose(acc.PoissonSampled(q, acc.Gaussian(sigma)), steps).get_epsilon(delta)


def dpfast_pld(sigma=SIGMA, q=Q, steps=STEPS, delta=DELTA, h=1e-4):
    _clear()
    return acc.PLDAccountant(h).compose(acc.PoissonSampled(q, acc.Gaussian(sigma)), steps).get_epsilon_bounds(delta)


def test_dpfast_rdp(benchmark):
    eps = benchmark(dpfast_rdp)
    assert math.isfinite(eps)


def test_dpfast_pld(benchmark):
    lo, hi = benchmark(dpfast_pld)
    assert lo <= hi


def test_dpfast_calibrate_pld(benchmark):
    z = benchmark(lambda: (_clear(), acc.calibrate_noise_multiplier(3.0, DELTA, Q, STEPS, "pld"))[1])
    assert z > 0


def test_dpfast_calibrate_rdp(benchmark):
    z = benchmark(lambda: (_clear(), acc.calibrate_noise_multiplier(3.0, DELTA, Q, STEPS, "rdp"))[1])
    assert z > 0


# ---------------------------------------------------------------------------------------- peers
def dpa_rdp(sigma=SIGMA, q=Q, steps=STEPS, delta=DELTA):
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting import rdp

    ev = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)
    return rdp.RdpAccountant().compose(ev).get_epsilon(delta)


def dpa_pld(sigma=SIGMA, q=Q, steps=STEPS, delta=DELTA, h=1e-4):
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting import pld

    ev = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)
    return pld.PLDAccountant(value_discretization_interval=h).compose(ev).get_epsilon(delta)


def prv(sigma=SIGMA, q=Q, steps=STEPS, delta=DELTA, eps_error=0.01):
    prv_accountant = pytest.importorskip("prv_accountant")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = prv_accountant.Accountant(noise_multiplier=sigma, sampling_probability=q, delta=delta,
                                      max_compositions=steps, eps_error=eps_error)
        return a.compute_epsilon(num_compositions=steps)


def test_dp_accounting_rdp(benchmark):
    eps = benchmark.pedantic(dpa_rdp, rounds=1, iterations=1)
    assert abs(eps - dpfast_rdp()) < 1e-4


def test_dp_accounting_pld(benchmark):
    eps = benchmark.pedantic(dpa_pld, rounds=1, iterations=1)
    lo, hi = dpfast_pld()
    assert abs(hi - eps) < 0.01 * eps


def test_prv_accountant(benchmark):
    lo, est, up = benchmark.pedantic(prv, rounds=1, iterations=1)
    assert lo <= up


# ---------------------------------------------------------------------------------------- grid
GRID = [
    # (noise multiplier, sample rate, steps, delta)
    (0.5, 1e-3, 1000, 1e-5),
    (0.8, 0.01, 10000, 1e-6),
    (1.0, 256 / 60000, 14062, 1e-5),
    (1.0, 0.1, 100, 1e-8),
    (2.0, 0.01, 100000, 1e-5),
    (5.0, 0.1, 10000, 1e-7),
    (1.5, 1e-4, 1000000, 1e-8),
    (3.0, 0.05, 1000, 1e-6),
]


def _timed(f, *a, **k):
    t = time.perf_counter()
    c = time.process_time()
    v = f(*a, **k)
    return v, time.perf_counter() - t, time.process_time() - c


def test_grid_smoke():
    """One grid point (CI smoke): dpfast PLD within 1% of dp-accounting and inside prv's bounds."""
    s, q, T, d = GRID[3]
    lo, hi = dpfast_pld(s, q, T, d)
    ref = dpa_pld(s, q, T, d)
    assert abs(hi - ref) <= 0.01 * ref


def main():  # pragma: no cover - produces the tables of results/acct.md
    print("| z | q | T | delta | dpfast PLD [opt, pess] | t | dp-acc PLD | t | rel.err | prv [lo, est, up] | t | dpfast RDP | t | dp-acc RDP | t |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s, q, T, d in GRID:
        (lo, hi), tw, tc = _timed(dpfast_pld, s, q, T, d)
        ref, tw2, _ = _timed(dpa_pld, s, q, T, d)
        try:
            (pl, pe, pu), tw3, _ = _timed(prv, s, q, T, d)
            prv_s = f"[{pl:.4f}, {pe:.4f}, {pu:.4f}]"
        except Exception as exc:  # prv fails at some settings
            prv_s, tw3 = f"fails: {type(exc).__name__}", float("nan")
        r, tw4, _ = _timed(dpfast_rdp, s, q, T, d)
        r2, tw5, _ = _timed(dpa_rdp, s, q, T, d)
        print(f"| {s} | {q:.3g} | {T} | {d:g} | [{lo:.4f}, {hi:.5f}] | {tw:.3f} | {ref:.5f} | {tw2:.2f} | "
              f"{(hi - ref) / ref:+.2e} | {prv_s} | {tw3:.2f} | {r:.5f} | {tw4:.4f} | {r2:.5f} | {tw5:.3f} |")


if __name__ == "__main__":  # pragma: no cover
    main()
