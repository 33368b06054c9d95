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


# ---------------------------------------------------------------------------- Gaussian calibration
# One Gaussian's noise multiplier at (epsilon, 1e-5), the calibration of every output-perturbation
# fit (and of each of PrivateRandomSearch's probes): the PLD accountant answers a ledger of
# Gaussians in closed form (search36; before: one FFT-composed PLD per probe, 0.25-1 s at eps 64).
# dp-accounting's calibration of the same Gaussian with its PLD accountant, for comparison.
GAUSS_EPS = (1.0, 64.0)


def _clear_calibration():
    _clear()
    from dpfast.accounting import _closed_forms, erm_calibration
    _closed_forms._analytic_sigma.cache_clear()
    erm_calibration.gaussian_multiplier.cache_clear()
    erm_calibration.calibrate_output.cache_clear()


def dpfast_gaussian_multiplier(epsilon, delta=DELTA, accountant="pld"):
    _clear_calibration()
    from dpfast.accounting.calibration import certified_gaussian_multiplier
    return certified_gaussian_multiplier(epsilon, delta, 1.0, accountant)


def dpa_gaussian_multiplier(epsilon, delta=DELTA, h=1e-4):
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting import mechanism_calibration, pld

    from dpfast.calibrate import gaussian_sigma
    z0 = gaussian_sigma(epsilon, delta)  # the bracket around the analytic multiplier (dpfast's start too;
    # from [1e-3, 1] it asked for 76 GiB at z = 1e-3)
    return mechanism_calibration.calibrate_dp_mechanism(
        lambda: pld.PLDAccountant(value_discretization_interval=h), dpa.GaussianDpEvent, epsilon, delta,
        bracket_interval=mechanism_calibration.ExplicitBracketInterval(0.8 * z0, 1.25 * z0), tol=1e-6)


@pytest.mark.parametrize("epsilon", GAUSS_EPS)
def test_dpfast_gaussian_multiplier_pld(benchmark, epsilon):
    z = benchmark(dpfast_gaussian_multiplier, epsilon)
    assert acc.PLDAccountant().compose(acc.Gaussian(z)).get_epsilon(DELTA) <= epsilon


@pytest.mark.parametrize("epsilon", size(GAUSS_EPS[:1], GAUSS_EPS))  # (dp-accounting at 64: 32 s)
def test_dp_accounting_gaussian_multiplier_pld(benchmark, epsilon):
    z = benchmark.pedantic(dpa_gaussian_multiplier, (epsilon,), rounds=1, iterations=1)
    # dpfast's certified multiplier is at most dp-accounting's (both are PLD upper bounds; dpfast's
    # is the exact Gaussian's, dp-accounting's a discretization's, found to tol 1e-6)
    assert dpfast_gaussian_multiplier(epsilon) <= z * (1 + 1e-6)


@pytest.mark.parametrize("accountant", ["best", "pld", "rdp"])
def test_dpfast_output_perturbation_fit_eps64(benchmark, accountant):
    import numpy as np

    from dpfast.linear_model import LogisticRegression
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    y = (X[:, 0] > 0).astype(int)

    def fit():
        _clear_calibration()
        return LogisticRegression(64.0, method="output", row_norm="clip", accountant=accountant,
                                  random_state=0).fit(X, y)
    m = benchmark(fit)
    assert m.epsilon_ <= 64.0


@pytest.mark.parametrize("accountant", ["best", "rdp"])
def test_dpfast_random_search_output(benchmark, accountant):
    # the fuzz target's search (tests/fuzz/_targets.py::_random_search): 11 s with "best" before
    import numpy as np

    from dpfast.linear_model import LogisticRegression
    from dpfast.model_selection import PrivateRandomSearch
    rng = np.random.default_rng(0)
    X = rng.standard_normal((12, 3))
    X = np.round(X / (1.01 * np.linalg.norm(X, axis=1).max()), 3)
    y = np.array([0, 1] * 6)

    def search():
        _clear_calibration()
        est = LogisticRegression(1.0, method="output", row_norm="clip", accountant=accountant, random_state=0)
        return PrivateRandomSearch(est, {"sigma_out": [0.1, 0.3]}, 2.0, 1e-5, n_runs_mean=2.0, distribution="poisson",
                                   eta=0.0, score_fraction=0.1, validation_fraction=0.3, random_state=1).fit(X, y)
    s = benchmark.pedantic(search, rounds=3, iterations=1)
    assert s.epsilon_ <= 2.0


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
