"""Laplace / Gaussian mechanisms (fast path) and randomized response vs peers.

Peers: NumPy ``Generator`` (``x + rng.laplace(0, b, n)``, ``x + rng.normal(0, s, n)``: the
issue-2 goal is at least this throughput on 10^7 values), diffprivlib (scalar
``mechanisms.Laplace`` / ``GaussianAnalytic`` / ``Binary``: one Python call per value, so it is
timed on N_SCALAR values) and NumPy-vectorised randomized response.  Figures:
``benchmarks/results/mech.md``.  Smoke sizes in CI; ``DPFAST_BENCH_FULL=1`` for the quoted ones.
"""
import numpy as np
import pytest

from dpfast.mechanisms.continuous import gaussian, gaussian_noise, laplace, laplace_noise
from dpfast.mechanisms.randomized_response import randomized_response
from dpfast.random import SecureRandom

from _bench import size  # by module name (tests/test_tooling.py)

N = size(10_000, 10_000_000)     # values per call (issue-2 goal: >= NumPy on 10^7)
N_SCALAR = size(100, 10_000)     # values for the scalar-call peers
EPS, DELTA, SENS = 1.0, 1e-5, 1.0


@pytest.fixture(scope="module")
def values():
    return np.random.default_rng(0).normal(size=N)


@pytest.fixture(scope="module")
def values32(values):
    return values.astype(np.float32)


# ---- Laplace ----------------------------------------------------------------------------------
@pytest.mark.benchmark(group="laplace")
def test_laplace_dpfast(benchmark, values):
    g = np.random.default_rng(1)
    benchmark(laplace, values, SENS, EPS, rng=g)


@pytest.mark.benchmark(group="laplace")
def test_laplace_dpfast_float32(benchmark, values32):
    g = np.random.default_rng(1)
    benchmark(laplace, values32, SENS, EPS, rng=g)


@pytest.mark.benchmark(group="laplace")
def test_laplace_dpfast_noise_only(benchmark):
    g = np.random.default_rng(1)
    benchmark(laplace_noise, SENS / EPS, N, rng=g)


@pytest.mark.benchmark(group="laplace")
def test_laplace_dpfast_secure(benchmark, values):
    g = SecureRandom()
    benchmark(laplace, values, SENS, EPS, rng=g)


@pytest.mark.benchmark(group="laplace")
def test_laplace_numpy(benchmark, values):
    g = np.random.default_rng(1)
    benchmark(lambda: values + g.laplace(0.0, SENS / EPS, size=values.shape))


@pytest.mark.benchmark(group="laplace-scalar")
def test_laplace_diffprivlib_scalar(benchmark, values):
    dpl = pytest.importorskip("diffprivlib")
    mech = dpl.mechanisms.Laplace(epsilon=EPS, sensitivity=SENS)
    xs = values[:N_SCALAR].tolist()
    benchmark(lambda: [mech.randomise(x) for x in xs])


@pytest.mark.benchmark(group="laplace-scalar")
def test_laplace_dpfast_scalar_calls(benchmark, values):
    g = np.random.default_rng(1)
    xs = values[:N_SCALAR].tolist()
    benchmark(lambda: [laplace(x, SENS, EPS, rng=g) for x in xs])


# ---- Gaussian ---------------------------------------------------------------------------------
@pytest.mark.benchmark(group="gaussian")
def test_gaussian_dpfast(benchmark, values):
    g = np.random.default_rng(1)
    benchmark(gaussian, values, SENS, EPS, DELTA, rng=g)


@pytest.mark.benchmark(group="gaussian")
def test_gaussian_dpfast_float32(benchmark, values32):
    g = np.random.default_rng(1)
    benchmark(gaussian, values32, SENS, EPS, DELTA, rng=g)


@pytest.mark.benchmark(group="gaussian")
def test_gaussian_dpfast_noise_only(benchmark):
    g = np.random.default_rng(1)
    benchmark(gaussian_noise, 3.73, N, rng=g)


@pytest.mark.benchmark(group="gaussian")
def test_gaussian_numpy(benchmark, values):
    from dpfast.calibrate import gaussian_sigma

    g = np.random.default_rng(1)
    benchmark(lambda: values + g.normal(0.0, gaussian_sigma(EPS, DELTA, SENS), size=values.shape))


@pytest.mark.benchmark(group="gaussian-scalar")
def test_gaussian_diffprivlib_scalar(benchmark, values):
    dpl = pytest.importorskip("diffprivlib")
    mech = dpl.mechanisms.GaussianAnalytic(epsilon=EPS, delta=DELTA, sensitivity=SENS)
    xs = values[:N_SCALAR].tolist()
    benchmark(lambda: [mech.randomise(x) for x in xs])


@pytest.mark.benchmark(group="gaussian-scalar")
def test_gaussian_dpfast_scalar_calls(benchmark, values):
    g = np.random.default_rng(1)
    xs = values[:N_SCALAR].tolist()
    benchmark(lambda: [gaussian(x, SENS, EPS, DELTA, rng=g) for x in xs])


# ---- randomized response ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def bits():
    return np.random.default_rng(2).random(N) < 0.3


@pytest.mark.benchmark(group="rr")
def test_rr_dpfast(benchmark, bits):
    g = np.random.default_rng(1)
    benchmark(randomized_response, bits, EPS, rng=g)


@pytest.mark.benchmark(group="rr")
def test_rr_numpy(benchmark, bits):
    g = np.random.default_rng(1)
    q = 1.0 / (1.0 + np.exp(EPS))
    benchmark(lambda: bits ^ (g.random(bits.shape) < q))


@pytest.mark.benchmark(group="rr")
def test_rr_kary_dpfast(benchmark, bits):
    g = np.random.default_rng(1)
    cats = bits.astype(np.int64) * 3
    benchmark(randomized_response, cats, EPS, rng=g, categories=10)


@pytest.mark.benchmark(group="rr-scalar")
def test_rr_diffprivlib_scalar(benchmark, bits):
    dpl = pytest.importorskip("diffprivlib")
    mech = dpl.mechanisms.Binary(epsilon=EPS, value0="0", value1="1")
    xs = ["1" if b else "0" for b in bits[:N_SCALAR]]
    benchmark(lambda: [mech.randomise(x) for x in xs])


# ---- interleaved ratios (python -m benchmarks.bench_mechanisms) ------------------------------
def _interleaved(pairs, n_values, rounds=7):
    """Time peer and dpfast alternately, so both see the same machine load; print min times,
    throughput, output GB/s and the median of the per-round ratios peer/dpfast."""
    import time

    def once(f):
        t = time.perf_counter()
        f()
        return time.perf_counter() - t

    for name, peer, ours, bytes_per in pairs:
        once(peer), once(ours)  # warm-up
        tp, to = [], []
        for _ in range(rounds):
            tp.append(once(peer))
            to.append(once(ours))
        ratio = float(np.median(np.array(tp) / np.array(to)))
        print(f"{name:34s} peer {min(tp) * 1e3:8.1f} ms | dpfast {min(to) * 1e3:8.1f} ms "
              f"({n_values / min(to) / 1e6:6.1f} M values/s, {n_values * bytes_per / min(to) / 1e9:4.2f} GB/s out) "
              f"| peer/dpfast median {ratio:5.2f}")


if __name__ == "__main__":
    import os

    from dpfast.calibrate import gaussian_sigma

    n = 10**7
    x = np.random.default_rng(0).normal(size=n)
    x32 = x.astype(np.float32)
    g = np.random.default_rng(1)
    sig = gaussian_sigma(EPS, DELTA, SENS)
    bits = x > 0.5
    q = 1.0 / (1.0 + np.exp(EPS))
    print(f"n = {n}, cpus = {len(os.sched_getaffinity(0))}, "
          f"DPFAST_NUM_THREADS = {os.environ.get('DPFAST_NUM_THREADS', 'default')}")
    _interleaved([
        ("laplace f64 vs x + rng.laplace", lambda: x + g.laplace(0.0, SENS / EPS, n),
         lambda: laplace(x, SENS, EPS, rng=g), 8),
        ("laplace f32 vs x + rng.laplace", lambda: x32 + g.laplace(0.0, SENS / EPS, n).astype(np.float32),
         lambda: laplace(x32, SENS, EPS, rng=g), 4),
        ("laplace noise vs rng.laplace", lambda: g.laplace(0.0, SENS / EPS, n),
         lambda: laplace_noise(SENS / EPS, n, rng=g), 8),
        ("gaussian f64 vs x + rng.normal", lambda: x + g.normal(0.0, sig, n),
         lambda: gaussian(x, SENS, EPS, DELTA, rng=g), 8),
        ("gaussian f32 vs x + rng.normal", lambda: x32 + g.normal(0.0, sig, n).astype(np.float32),
         lambda: gaussian(x32, SENS, EPS, DELTA, rng=g), 4),
        ("gaussian noise vs rng.normal", lambda: g.normal(0.0, sig, n),
         lambda: gaussian_noise(sig, n, rng=g), 8),
        ("laplace SecureRandom vs numpy", lambda: x + g.laplace(0.0, SENS / EPS, n),
         lambda: laplace(x, SENS, EPS, rng=SecureRandom()), 8),
        ("RR binary vs b ^ (U < q)", lambda: bits ^ (g.random(n) < q),
         lambda: randomized_response(bits, EPS, rng=g), 1),
    ], n)
    try:
        import diffprivlib as dpl
    except ImportError:
        dpl = None
    if dpl is not None:
        m = 10_000
        xs = x[:m].tolist()
        lap = dpl.mechanisms.Laplace(epsilon=EPS, sensitivity=SENS)
        gau = dpl.mechanisms.GaussianAnalytic(epsilon=EPS, delta=DELTA, sensitivity=SENS)
        print(f"scalar calls, {m} Python floats (per call):")
        _interleaved([
            ("laplace vs diffprivlib Laplace", lambda: [lap.randomise(v) for v in xs],
             lambda: [laplace(v, SENS, EPS, rng=g) for v in xs], 8),
            ("gaussian vs diffprivlib GaussianAnalytic", lambda: [gau.randomise(v) for v in xs],
             lambda: [gaussian(v, SENS, EPS, DELTA, rng=g) for v in xs], 8),
        ], m, rounds=3)
