"""Soak: 10^5 calls of the main entry points without memory growth (issue 15, "Keep it so").

Each group runs a warm-up tenth of its calls, measures the resident set size (``/proc/self/statm``
after ``gc.collect()`` and ``malloc_trim(0)``, so that only live memory counts), runs the other
nine tenths and measures again.  Allowed growth: what the accountants' process-wide caches added
in between (``dpfast.accounting.cache_info()``; each cache must stay within its stated byte
bound) plus SLACK.

SLACK = 8 MiB: it covers allocator retention that ``malloc_trim`` cannot return (fragmented
arenas, one per thread the kernels start) while any leak of 96 bytes or more per call -- the
smallest NumPy array object is about that size -- over the 9 x 10^4 measured calls (>= 8.6 MB)
exceeds it.
"""
from __future__ import annotations

import ctypes
import gc
import os

import numpy as np

from dpfast import accounting as A, mechanisms as M, sgd
from dpfast.linear_model import LinearRegression, LogisticRegression

CALLS = int(os.environ.get("DPFAST_SOAK_CALLS", 10**5))
SLACK = 8 << 20

try:
    _libc = ctypes.CDLL("libc.so.6")
    _trim = _libc.malloc_trim
except (OSError, AttributeError):  # pragma: no cover - not glibc
    _trim = None


def rss_bytes() -> int:
    gc.collect()
    if _trim is not None:
        _trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cache_bytes() -> int:
    info = A.cache_info().values()
    for c in info:
        assert c["nbytes"] <= c["max_bytes"], c
    return sum(c["nbytes"] for c in info)


def soak(step, calls):
    """Warm up with calls // 10 calls of ``step(i)``, then return the RSS growth over the rest
    and the bytes the accountants' caches added meanwhile."""
    warm = calls // 10
    for i in range(warm):
        step(i)
    cached = cache_bytes()
    before = rss_bytes()
    for i in range(warm, calls):
        step(i)
    return rss_bytes() - before, cache_bytes() - cached


X4 = np.arange(4.0)
I4 = np.arange(4)
B4 = I4 % 2
G = np.linspace(-2, 2, 32).reshape(4, 8)


def _mechanism_step(i):
    k = i % 7
    if k == 0:
        M.laplace(X4, 1.0, 1.0, rng=i)
    elif k == 1:
        M.gaussian(X4, 1.0, 1.0, 1e-5, rng=i)
    elif k == 2:
        M.discrete_laplace_mechanism(I4, 1, 1.0, rng=i)
    elif k == 3:
        M.exponential_mechanism(X4, 1.0, 1.0, rng=i)
    elif k == 4:
        M.randomized_response(B4, 1.0, rng=i)
    elif k == 5:
        M.snapping(X4, 1.0, 1.0, 10.0, rng=i)
    else:
        M.laplace_noise(1.0, size=4, rng=i)


def test_soak_mechanisms():
    growth, cache_growth = soak(_mechanism_step, CALLS)
    assert growth <= max(cache_growth, 0) + SLACK, (growth, cache_growth)


def test_soak_rdp_accountant():
    A.clear_cache()
    acc = A.RDPAccountant()
    # a new description every 10th call (closed-form Gaussian curves: cheap), so that the
    # process-wide curve cache keeps filling and must evict within its bound
    fixed = A.PoissonSampled(0.01, A.Gaussian(1.0))

    def step(i):
        if i % 10 == 0:
            acc.compose(A.Gaussian(0.5 + 1e-6 * i))
        else:
            acc.compose(fixed)
        if i % 20 == 0:
            acc.get_epsilon(1e-5)

    growth, cache_growth = soak(step, CALLS)
    assert growth <= max(cache_growth, 0) + SLACK, (growth, cache_growth)
    assert np.isfinite(acc.get_epsilon(1e-5))


def test_soak_pld_accountant():
    # A PLD accountant's composed distribution legitimately grows with the number of
    # compositions, so the calls go to a fresh accountant every 1000 calls (10^5 composes in
    # all); a new description per accountant keeps the discretization cache filling (32 MiB).
    A.clear_cache()
    fixed = A.PoissonSampled(0.01, A.Gaussian(1.0))
    state = {}

    def step(i):
        if i % 1000 == 0:
            state["acc"] = A.PLDAccountant(1e-2).compose(A.Gaussian(1.0 + 1e-3 * i))
        state["acc"].compose(fixed)
        if i % 1000 == 999:
            assert np.isfinite(state["acc"].get_epsilon(1e-5))

    growth, cache_growth = soak(step, CALLS)
    assert growth <= max(cache_growth, 0) + SLACK, (growth, cache_growth)


def test_soak_clipping():
    def step(i):
        if i % 2:
            sgd.clip_gradients(G, 1.0)
        else:
            sgd.clipped_sum(G, 1.0, noise_multiplier=1.0, rng=i)

    growth, cache_growth = soak(step, CALLS)
    assert growth <= max(cache_growth, 0) + SLACK, (growth, cache_growth)


def test_soak_small_fits():
    # fits cost ~0.5 ms: 2000 of them (the per-call leak they could hide is still >= 4 KiB)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    X /= 1.01 * np.linalg.norm(X, axis=1, keepdims=True)
    y = np.arange(50) % 2

    def step(i):
        if i % 2:
            LogisticRegression(random_state=i).fit(X, y)
        else:
            LinearRegression(random_state=i).fit(X, X[:, 0] / 2)

    growth, cache_growth = soak(step, 2000)
    assert growth <= max(cache_growth, 0) + SLACK, (growth, cache_growth)
