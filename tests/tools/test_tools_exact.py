"""The toolbox's exact fixed-point sums (dpfast._fixed; issue 24 red team, Dask partitioning):
the release statistic is a function of the multiset of values alone, a record at the bound is
the bound, NaN adds nothing whatever the bounds, and unrepresentable bounds are refused before
the charge.  (The kernel-level checks are in tests/test_stats_kernels.py, the Dask invariance for
every release in tests/test_redteam_dask_partitioning.py.)"""
from fractions import Fraction

import numpy as np
import pytest

from dpfast import _fixed, budget as _budget, tools
from dpfast.tools import _statistics as S


def _sum_stat(x, lo, hi, axis=None, nan=False):
    """The float statistic of sum/nansum (before noise), as the release computes it."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    return _fixed.to_float(S._clipped_sum(x, lo, hi, axis, nan), max(abs(lo), abs(hi)))


def test_the_statistic_is_a_function_of_the_multiset():
    """Any row order (hence any chunking) gives the same bits; the statistic is the exact sum of
    the grid values, correctly rounded (Fraction)."""
    rng = np.random.default_rng(0)
    x = np.concatenate([np.full(5000, 0.75), rng.uniform(-1, 1, 20_000) * 1e-9, np.full(5000, -0.75)])
    ref = _sum_stat(x, -1.0, 1.0)
    B = 1.0
    q = np.rint(np.clip(x, -1, 1) * (2.0**50 / B)).astype(np.int64)
    exact = Fraction(int(q.astype(object).sum())) * Fraction(B) / 2**50
    assert ref[0] == float(exact)
    for perm in (x[::-1], rng.permutation(x), np.sort(x)):
        assert _sum_stat(perm, -1.0, 1.0).tobytes() == ref.tobytes()
    m = [np.ascontiguousarray(p) for p in (x.reshape(-1, 1), rng.permutation(x).reshape(-1, 1))]
    outs = [S._moment_floats(S._moment_sums(a, -1.0, 1.0, 0, False, False, 2), 1.0, 1.0, (1,)) for a in m]
    for a, b in zip(outs[0], outs[1]):
        assert a is None and b is None or np.asarray(a).tobytes() == np.asarray(b).tobytes()


@pytest.mark.parametrize("bounds", [(-0.1, 0.3), (0.0, 7.77), (-123.456, 5.0)])
def test_a_record_at_the_bound_is_released_as_the_bound(bounds):
    lo, hi = bounds
    at = hi if abs(hi) >= abs(lo) else lo
    assert _sum_stat(np.array([at, at + 1e6 * np.sign(at)]), lo, hi)[0] == 2 * at
    # mean/var: the centred terms at +-r and the squares at r^2 are on their grids exactly
    c, r = 0.5 * (lo + hi), 0.5 * (hi - lo)
    if hi - c == r and c - lo == r:
        x = np.array([[lo], [hi], [hi + 5.0]])
        rows, counts, s, q = S._moment_floats(S._moment_sums(x, lo, hi, 0, False, False, 2), r, r * r, (1,))
        assert s[0] == r and q[0] == 3 * (r * r) / 2  # y^2 - r^2/2 = r^2/2 each


def test_nan_adds_nothing_whatever_the_bounds():
    """Regression: the one-column pass of nansum once masked NaN to 0 BEFORE the clamps, so with
    bounds excluding 0 every NaN added the lower bound."""
    x = np.array([np.nan] * 1000 + [3.0])
    got = tools.nansum(x, 1e12, bounds=(2.0, 5.0), rng=0)
    assert abs(got - 3.0) < 1e-9
    got2 = tools.nanmean(x, 1e12, bounds=(2.0, 5.0), rng=0)
    assert abs(got2 - 3.0) < 1e-9


@pytest.mark.parametrize("f, kw", [(tools.sum, {}), (tools.mean, {}), (tools.var, {}), (tools.nanstd, {})])
def test_bounds_too_narrow_for_the_grid_are_refused_before_the_charge(f, kw):
    b = _budget.PrivacyBudget(10.0, 1e-6)
    with pytest.raises(ValueError, match="fixed-point|noise scale"):
        f(np.zeros(4), 1.0, bounds=(0.0, 1e-300), rng=0, budget=b, **kw)
    assert b.ledger == () and b.spent() == 0.0


def test_thread_count_does_not_change_the_release(monkeypatch):
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, (300_000,))
    outs = []
    for t in (1, 2, 3):
        monkeypatch.setattr(S, "default_threads", lambda t=t: t)
        outs.append(np.asarray(tools.var(x, 1.0, bounds=(-1, 1), rng=3)).tobytes())
        outs.append(np.asarray(tools.sum(x.reshape(-1, 3), 1.0, bounds=(-1, 1), axis=0, rng=3)).tobytes())
    assert outs[0::2] == [outs[0]] * 3 and outs[1::2] == [outs[1]] * 3
