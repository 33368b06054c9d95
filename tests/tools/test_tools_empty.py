"""The empty data set is a data set: every dpfast.tools release is defined on n = 0 rows.

Neighbours are add/remove one row, so n = 0 and n = 1 are neighbours, and everything observable
is output -- whether a call raises, and which exception.  A refusal on n = 0 (or a crash that
only n = 0 reaches) tells the two apart with certainty.  These tests check, for every function,
in memory and on Dask, that n = 0 and n = 1 behave alike (both release: same type, shape and
dtype; the same event charged), that n = 0 releases the mechanism's own law on the empty data
set (counts and sums: Laplace noise around 0 at the documented scale; quantiles: the
exponential mechanism with a constant utility, i.e. uniform over the public range), and that a
refusal on a public shape fact (no elements per row, d = 0) is the same for n = 0 and n = 1.

KS tolerances: the Dvoretzky-Kiefer-Wolfowitz bound with Massart's constant,
``P(sup |F_m - F| > t) <= 2 exp(-2 m t^2)``, at a false-alarm rate of 1e-6 (fixed seeds).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpfast import PrivacyBudget, tools

da = pytest.importorskip("dask.array")

B = (-1.0, 2.0)
ALPHA = 1e-6


def _dkw(m: int) -> float:
    """The DKW-Massart tolerance on the KS distance of m i.i.d. draws at rate ALPHA."""
    return math.sqrt(math.log(2.0 / ALPHA) / (2.0 * m))


def _ks(sample, cdf) -> float:
    return float(stats.kstest(np.ravel(sample), cdf).statistic)


def _calls():
    """(label, function of (data, rng, budget)) for every release of dpfast.tools."""
    def stat(name, **kw):
        return name, lambda a, g, b: getattr(tools, name)(a, 1.0, B, rng=g, budget=b, **kw)

    out = []
    for name in ("mean", "var", "std", "sum", "nanmean", "nanvar", "nanstd", "nansum"):
        out.append(stat(name))
        out.append((name + "-axis0", stat(name, axis=0)[1]))
    out += [
        ("count_nonzero", lambda a, g, b: tools.count_nonzero(a, 1.0, rng=g, budget=b)),
        ("count_nonzero-axis0", lambda a, g, b: tools.count_nonzero(a, 1.0, axis=0, rng=g, budget=b)),
        ("quantile", lambda a, g, b: tools.quantile(a, [0.1, 0.5], 1.0, B, rng=g, budget=b)),
        ("quantile-axis0", lambda a, g, b: tools.quantile(a, [0.1, 0.5], 1.0, B, axis=0, rng=g, budget=b)),
        ("median-axis0", lambda a, g, b: tools.median(a, 1.0, B, axis=0, rng=g, budget=b)),
        ("percentile-axis0", lambda a, g, b: tools.percentile(a, 90, 1.0, B, axis=0, keepdims=True, rng=g,
                                                              budget=b)),
        ("histogram", lambda a, g, b: tools.histogram(a, 1.0, bins=4, range=B, rng=g, budget=b)),
        ("histogramdd", lambda a, g, b: tools.histogramdd(a.reshape(a.shape[0], math.prod(a.shape[1:])) if a.ndim > 1 else a, 1.0,
                                                          bins=2, range=[B] * (math.prod(a.shape[1:]) or 1),
                                                          rng=g, budget=b)),
        ("bounds", lambda a, g, b: tools.bounds(a, 1.0, rng=g, budget=b)),
        ("bounds-axis0", lambda a, g, b: tools.bounds(a, 1.0, axis=0, rng=g, budget=b)),
        ("subsample_and_aggregate", lambda a, g, b: tools.subsample_and_aggregate(
            lambda r: float(np.mean(r)), a, 1.0, bounds=B, rng=g, budget=b)),
        ("subsample_and_aggregate-k", lambda a, g, b: tools.subsample_and_aggregate(
            lambda r: float(np.mean(r)), a, 1.0, bounds=B, n_blocks=3, rng=g, budget=b)),
    ]
    return out


CALLS = _calls()
DASK_REFUSED = ("quantile", "median", "percentile")  # refused on Dask for every n (a public type)


def _signature(v):
    """What a release looks like, values aside: type, shape, dtype (recursively for tuples)."""
    if isinstance(v, tuple):
        return ("tuple",) + tuple(_signature(u) for u in v)
    if isinstance(v, list):
        return ("list",) + tuple(_signature(u) for u in v)
    return (type(v).__name__, np.shape(v), np.asarray(v).dtype.str)


def _outcome(call, a, seed=0):
    budget = PrivacyBudget(100.0, 1e-3)
    try:
        v = call(a, np.random.default_rng(seed), budget)
    except Exception as e:  # noqa: BLE001  (the exception IS the observable under test)
        return ("raised", type(e).__name__, str(e)), budget.ledger
    return _signature(v), budget.ledger


def _events(ledger):
    return [repr(getattr(r, "event", r)) for r in ledger]


@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 2, 2)])
@pytest.mark.parametrize("label,call", CALLS, ids=[c[0] for c in CALLS])
def test_n0_and_n1_behave_alike_in_memory(label, call, shape):
    x0 = np.zeros((0,) + shape[1:])
    x1 = np.full((1,) + shape[1:], 0.5)
    out0, led0 = _outcome(call, x0)
    out1, led1 = _outcome(call, x1)
    assert out0[0] != "raised", f"{label}: n = 0 refused in memory: {out0}"
    assert out0 == out1
    assert len(led0) == len(led1) == 1 and _events(led0) == _events(led1)


@pytest.mark.parametrize("shape", [(3,), (2, 3)])
@pytest.mark.parametrize("label,call", [c for c in CALLS if not c[0].startswith(DASK_REFUSED)],
                         ids=[c[0] for c in CALLS if not c[0].startswith(DASK_REFUSED)])
def test_n0_dask_like_memory(label, call, shape):
    """On Dask, n = 0 releases as n = 1 does, and as the in-memory n = 0 does (same signature,
    same event, bit-identical values for one seed where the module promises it)."""
    x0 = np.zeros((0,) + shape[1:])
    d0 = da.from_array(x0, chunks=(2,) + shape[1:])
    d1 = da.from_array(np.full((1,) + shape[1:], 0.5), chunks=(2,) + shape[1:])
    outm, ledm = _outcome(call, x0)
    out0, led0 = _outcome(call, d0)
    out1, led1 = _outcome(call, d1)
    assert out0[0] != "raised", f"{label}: n = 0 refused on Dask: {out0}"
    assert out0 == out1 == outm
    assert _events(led0) == _events(led1) == _events(ledm)
    if not label.startswith("subsample"):
        vm = call(x0, np.random.default_rng(7), None)
        vd = call(d0, np.random.default_rng(7), None)
        for a, b in zip(vm if isinstance(vm, tuple) else (vm,), vd if isinstance(vd, tuple) else (vd,)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("label,call", [c for c in CALLS if c[0].startswith(("quantile", "median", "percentile",
                                                                                 "bounds"))],
                         ids=[c[0] for c in CALLS if c[0].startswith(("quantile", "median", "percentile",
                                                                      "bounds"))])
def test_no_elements_per_row_is_a_public_refusal(label, call):
    """d = 0 elements per row is a public shape fact: the same ValueError for n = 0 and n = 1,
    before any charge or draw (it used to be a ZeroDivisionError for n = 1 and a reshape error
    for n = 0 with axis=0: two different exceptions for neighbours)."""
    outs = []
    for n in (0, 1):
        gen = np.random.default_rng(0)
        state = gen.bit_generator.state
        budget = PrivacyBudget(10.0, 1e-3)
        with pytest.raises(ValueError) as info:
            call(np.zeros((n, 0)), gen, budget)
        assert budget.ledger == () and gen.bit_generator.state == state
        outs.append(str(info.value))
    assert outs[0] == outs[1]


# ----------------------------------------------------------------------------- the law on n = 0
M = 4000  # output entries per release below (i.i.d. draws)


def test_count_nonzero_n0_is_laplace_around_0():
    """count_nonzero(axis=0) on (0, M): M counts 0 plus Laplace(d / epsilon), d = M."""
    eps = 2.0
    for a in (np.zeros((0, M)), da.zeros((0, M), chunks=(5, M))):
        v = tools.count_nonzero(a, eps, axis=0, rng=np.random.default_rng(1))
        assert v.shape == (M,)
        assert _ks(v, stats.laplace(0.0, M / eps).cdf) < _dkw(M)


def test_histogram_n0_is_laplace_around_0():
    eps = 0.5
    for a in (np.zeros(0), da.zeros(0, chunks=5)):
        h, edges = tools.histogram(a, eps, bins=M, range=B, rng=np.random.default_rng(2))
        assert h.shape == (M,) and edges.shape == (M + 1,)
        assert _ks(h, stats.laplace(0.0, 1.0 / eps).cdf) < _dkw(M)


def test_sum_n0_is_laplace_around_0():
    """sum(axis=0) on (0, M): sensitivity d max(|lower|, |upper|) = 2 M."""
    eps = 1.0
    for a in (np.zeros((0, M)), da.zeros((0, M), chunks=(5, M))):
        v = tools.sum(a, eps, B, axis=0, rng=np.random.default_rng(3))
        assert _ks(v, stats.laplace(0.0, 2.0 * M / eps).cdf) < _dkw(M)


def test_quantile_n0_is_uniform_on_the_public_range():
    """The exponential mechanism over an empty sample: the utility -|#{x <= t} - q 0| is 0 for
    every t, so the draw is uniform on [lower, upper] (Smith 2011's base measure)."""
    v = tools.quantile(np.zeros((0, M)), 0.3, 1.0, B, axis=0, rng=np.random.default_rng(4))
    assert v.shape == (M,)
    assert _ks(v, stats.uniform(B[0], B[1] - B[0]).cdf) < _dkw(M)


def test_bounds_n0_is_uniform_in_asinh():
    """bounds on an empty sample: two independent uniform draws of asinh(x / scale) on [-A, A],
    sorted (their min and max)."""
    from dpfast.tools._bounds import asinh_range

    A = asinh_range(1.0)
    lo, hi = tools.bounds(np.zeros((0, M)), 1.0, axis=0, rng=np.random.default_rng(5))
    assert lo.shape == hi.shape == (M,) and np.all(lo < hi)
    u = (np.arcsinh(lo) + A) / (2 * A)
    w = (np.arcsinh(hi) + A) / (2 * A)
    assert _ks(u, lambda t: 1.0 - (1.0 - np.clip(t, 0, 1)) ** 2) < _dkw(M)  # min of two uniforms
    assert _ks(w, lambda t: np.clip(t, 0, 1) ** 2) < _dkw(M)  # max of two uniforms
