"""Exponential mechanism / report-noisy-max / top-k / quantiles vs peers.

Peers: NumPy Gumbel-max (``argmax(c u + rng.gumbel(size=n))``), diffprivlib
(``mechanisms.Exponential``, ``mechanisms.PermuteAndFlip``, ``tools.quantile``) and OpenDP
(``make_noisy_max``, permute-and-flip / RNM with exponential noise under pure DP).
Figures: ``benchmarks/results/select.md``.  Smoke sizes in CI; ``DPFAST_BENCH_FULL=1`` for
the quoted ones.
"""
import numpy as np
import pytest

from dpfast.mechanisms.quantile import private_quantile
from dpfast.mechanisms.selection import (
    exponential_mechanism,
    exponential_mechanism_stream,
    report_noisy_max,
    top_k,
)

from _bench import size  # by module name (tests/test_tooling.py)

N_SMALL = 1000                      # candidates per draw (issue 2 goal: <= 20 us per draw)
N_LARGE = size(10_000, 10_000_000)  # one draw over many candidates (goal: >= NumPy Gumbel-max)
CHUNK = size(1_000, 1_000_000)
N_DATA = size(10_000, 1_000_000)    # quantile data size
EPS = 1.0


@pytest.fixture(scope="module")
def u_small():
    return np.random.default_rng(0).normal(size=N_SMALL)


@pytest.fixture(scope="module")
def u_large():
    return np.random.default_rng(1).normal(size=N_LARGE)


def _numpy_gumbel_max(u, g, c=EPS / 2):
    """The NumPy peer: the exponential mechanism (sensitivity 1) by Gumbel-max in one pass."""
    return int(np.argmax(c * u + g.gumbel(size=u.size)))


def _bench_diffprivlib(benchmark, mechanism: str, u):
    """diffprivlib's ``mechanisms.<mechanism>`` over the utilities ``u`` (sensitivity 1)."""
    mech_mod = pytest.importorskip("diffprivlib.mechanisms")
    mech = getattr(mech_mod, mechanism)(epsilon=EPS, sensitivity=1.0, utility=list(u), random_state=0)
    benchmark(mech.randomise)


# ---- one draw over 1000 candidates ---------------------------------------------------------
@pytest.mark.benchmark(group="select-1000")
def test_em_1000_dpfast(benchmark, u_small):
    g = np.random.default_rng(0)
    benchmark(exponential_mechanism, u_small, 1.0, EPS, rng=g)


@pytest.mark.benchmark(group="select-1000")
def test_pf_1000_dpfast(benchmark, u_small):
    g = np.random.default_rng(0)
    benchmark(report_noisy_max, u_small, 1.0, EPS, noise="exponential", rng=g)


@pytest.mark.benchmark(group="select-1000")
def test_em_1000_numpy_gumbel_max(benchmark, u_small):
    benchmark(_numpy_gumbel_max, u_small, np.random.default_rng(0))


@pytest.mark.benchmark(group="select-1000")
def test_em_1000_diffprivlib(benchmark, u_small):
    _bench_diffprivlib(benchmark, "Exponential", u_small)


@pytest.mark.benchmark(group="select-1000")
def test_pf_1000_diffprivlib(benchmark, u_small):
    _bench_diffprivlib(benchmark, "PermuteAndFlip", u_small)


def _opendp_noisy_max(n):
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
    return dp.m.make_noisy_max(*space, dp.max_divergence(), scale=2.0 / EPS)


@pytest.mark.benchmark(group="select-1000")
def test_pf_1000_opendp(benchmark, u_small):
    meas = _opendp_noisy_max(N_SMALL)
    data = list(map(float, u_small))
    benchmark(meas, data)


# ---- one draw over 10^7 candidates ----------------------------------------------------------
@pytest.mark.benchmark(group="select-1e7")
def test_em_large_dpfast(benchmark, u_large):
    g = np.random.default_rng(0)
    benchmark.pedantic(exponential_mechanism, args=(u_large, 1.0, EPS), kwargs={"rng": g},
                       rounds=5, iterations=1)


@pytest.mark.benchmark(group="select-1e7")
def test_em_large_dpfast_stream(benchmark, u_large):
    g = np.random.default_rng(0)

    def run():
        chunks = (u_large[i:i + CHUNK] for i in range(0, u_large.size, CHUNK))
        return exponential_mechanism_stream(chunks, 1.0, EPS, rng=g)

    benchmark.pedantic(run, rounds=5, iterations=1)


@pytest.mark.benchmark(group="select-1e7")
def test_em_large_numpy_gumbel_max(benchmark, u_large):
    benchmark.pedantic(_numpy_gumbel_max, args=(u_large, np.random.default_rng(0)), rounds=5, iterations=1)


@pytest.mark.benchmark(group="select-1e7")
def test_em_large_numpy_gumbel_max_chunked(benchmark, u_large):
    g = np.random.default_rng(0)
    c = EPS / 2

    def run():
        best, arg = -np.inf, -1
        for i in range(0, u_large.size, CHUNK):
            keys = c * u_large[i:i + CHUNK] + g.gumbel(size=min(CHUNK, u_large.size - i))
            j = int(np.argmax(keys))
            if keys[j] > best:
                best, arg = keys[j], i + j
        return arg

    benchmark.pedantic(run, rounds=5, iterations=1)


@pytest.mark.benchmark(group="select-1e7")
def test_topk10_large_dpfast(benchmark, u_large):
    g = np.random.default_rng(0)
    benchmark.pedantic(top_k, args=(u_large, 10, 1.0, EPS), kwargs={"rng": g}, rounds=5, iterations=1)


@pytest.mark.benchmark(group="select-1e7")
def test_topk10_large_numpy(benchmark, u_large):
    g = np.random.default_rng(0)
    c = EPS / 20

    def run():
        keys = c * u_large + g.gumbel(size=u_large.size)
        top = np.argpartition(keys, -10)[-10:]
        return top[np.argsort(keys[top])[::-1]]

    benchmark.pedantic(run, rounds=5, iterations=1)


# ---- quantiles --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def x_data():
    return np.random.default_rng(2).normal(size=N_DATA)


@pytest.mark.benchmark(group="quantile")
def test_median_dpfast(benchmark, x_data):
    g = np.random.default_rng(0)
    benchmark(private_quantile, x_data, 0.5, EPS, (-10.0, 10.0), rng=g)


@pytest.mark.benchmark(group="quantile")
def test_median_diffprivlib(benchmark, x_data):
    tools = pytest.importorskip("diffprivlib.tools")
    benchmark(tools.quantile, x_data, 0.5, epsilon=EPS, bounds=(-10.0, 10.0), random_state=0)
