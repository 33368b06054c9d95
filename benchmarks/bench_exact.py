"""Floating-point-safe samplers under a secure generator vs peers (issue 2 goal: >= 5 million
samples/s with SecureRandom, >= 100x OpenDP).

dpfast: ``discrete_laplace`` / ``discrete_gaussian`` (exact, CKS20) and ``snapping``, all
with :class:`dpfast.random.SecureRandom` (ChaCha20).  Peers: OpenDP ``make_laplace`` /
``make_gaussian`` on integer vectors (exact CKS20 samplers on OpenSSL randomness),
diffprivlib ``Geometric`` (discrete Laplace) and ``Snapping`` (scalar ``randomise`` calls).
Reference (insecure, not floating-point safe): NumPy ``Generator.laplace``.
Each benchmark stores the number of samples in ``extra_info["n"]``; per-10^6 figures and ratios
are in ``benchmarks/results/exact.md``.  Smoke sizes in CI; ``DPFAST_BENCH_FULL=1`` for the
quoted sizes.
"""
import numpy as np
import pytest

from dpfast.mechanisms.discrete import discrete_gaussian, discrete_laplace, discrete_laplace_mechanism
from dpfast.mechanisms.snapping import snapping
from dpfast.random import SecureRandom

from _bench import size  # by module name (tests/test_tooling.py)

N = size(10_000, 1_000_000)       # dpfast samples per call
N_PEER = size(1_000, 100_000)     # OpenDP samples per call
N_SCALAR = size(100, 20_000)      # diffprivlib scalar calls
SCALE = 10                        # discrete Laplace scale / discrete Gaussian sigma
EPS = 1.0


def _n(benchmark, n):
    benchmark.extra_info["n"] = n


def _bench_opendp(benchmark, maker: str, distance):
    """OpenDP's exact integer sampler ``dp.m.<maker>`` (scale SCALE) on N_PEER zeros."""
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    m = getattr(dp.m, maker)(dp.vector_domain(dp.atom_domain(T=int)), distance(dp), scale=float(SCALE))
    x = [0] * N_PEER
    _n(benchmark, N_PEER)
    out = benchmark(m, x)
    assert len(out) == N_PEER


# ---- discrete Laplace ------------------------------------------------------------------------
@pytest.mark.benchmark(group="exact-discrete-laplace")
def test_dlap_dpfast_secure(benchmark):
    g = SecureRandom()
    _n(benchmark, N)
    out = benchmark(discrete_laplace, SCALE, size=N, rng=g)
    assert out.shape == (N,)


@pytest.mark.benchmark(group="exact-discrete-laplace")
def test_dlap_mechanism_dpfast_secure(benchmark):
    g = SecureRandom()
    values = np.arange(N, dtype=np.int64)
    _n(benchmark, N)
    out = benchmark(discrete_laplace_mechanism, values, 1, 1 / SCALE, rng=g)
    assert out.shape == (N,)


@pytest.mark.benchmark(group="exact-discrete-laplace")
def test_dlap_opendp(benchmark):
    _bench_opendp(benchmark, "make_laplace", lambda dp: dp.l1_distance(T=int))


@pytest.mark.benchmark(group="exact-discrete-laplace")
def test_dlap_diffprivlib_geometric(benchmark):
    mech = pytest.importorskip("diffprivlib.mechanisms")
    g = mech.Geometric(epsilon=1 / SCALE, sensitivity=1)
    _n(benchmark, N_SCALAR)
    benchmark(lambda: [g.randomise(0) for _ in range(N_SCALAR)])


# ---- discrete Gaussian -----------------------------------------------------------------------
@pytest.mark.benchmark(group="exact-discrete-gaussian")
def test_dgauss_dpfast_secure(benchmark):
    g = SecureRandom()
    _n(benchmark, N)
    out = benchmark(discrete_gaussian, SCALE * SCALE, size=N, rng=g)
    assert out.shape == (N,)


@pytest.mark.benchmark(group="exact-discrete-gaussian")
def test_dgauss_opendp(benchmark):
    _bench_opendp(benchmark, "make_gaussian", lambda dp: dp.l2_distance(T=float))


# ---- snapping (real-valued Laplace) ----------------------------------------------------------
@pytest.mark.benchmark(group="exact-snapping")
def test_snapping_dpfast_secure(benchmark):
    g = SecureRandom()
    x = np.zeros(N)
    _n(benchmark, N)
    out = benchmark(snapping, x, 1.0, EPS, 10.0, rng=g)
    assert out.shape == (N,)


@pytest.mark.benchmark(group="exact-snapping")
def test_snapping_diffprivlib(benchmark):
    mech = pytest.importorskip("diffprivlib.mechanisms")
    s = mech.Snapping(epsilon=EPS, sensitivity=1.0, lower=-10.0, upper=10.0)
    _n(benchmark, N_SCALAR)
    benchmark(lambda: [s.randomise(0.0) for _ in range(N_SCALAR)])


@pytest.mark.benchmark(group="exact-snapping")
def test_laplace_numpy_insecure_reference(benchmark):
    g = np.random.default_rng(0)
    _n(benchmark, N)
    benchmark(g.laplace, 0.0, 1.0, N)
