"""The empty data set is a neighbour like any other (add/remove one row: n = 0 vs n = 1).

Every :mod:`dpfast.tools` release must behave on n = 0 as on n = 1 -- release, with the same type,
shape and dtype -- in memory and on Dask: a refusal on n = 0 alone would tell the two apart with
certainty.  Found (stop 34): ``quantile``/``median``/``percentile`` and ``bounds`` with ``axis=0``
on a 2-d array of 0 rows raised NumPy's "cannot reshape array of size 0" (``reshape(0, -1)`` is
ambiguous), and ``bounds`` on such a Dask array raised ZeroDivisionError (after the charge)."""
import numpy as np
import pytest
from scipy import stats

from dpfast import PrivacyBudget, tools as TL

CALLS = {
    "sum": lambda x: TL.sum(x, 1.0, (0, 1), axis=0, rng=0),
    "mean": lambda x: TL.mean(x, 1.0, (0, 1), axis=0, rng=0),
    "nanvar": lambda x: TL.nanvar(x, 1.0, (0, 1), axis=0, rng=0),
    "count_nonzero": lambda x: TL.count_nonzero(x, 1.0, axis=0, rng=0),
    "quantile": lambda x: TL.quantile(x, [0.1, 0.5], 1.0, (0, 1), axis=0, rng=0),
    "median": lambda x: TL.median(x, 1.0, (0, 1), axis=0, rng=0),
    "percentile": lambda x: TL.percentile(x, 90, 1.0, (0, 1), axis=0, keepdims=True, rng=0),
    "bounds": lambda x: np.stack(TL.bounds(x, 1.0, axis=0, rng=0)),
    "histogramdd": lambda x: TL.histogramdd(x.reshape(x.shape[0], -1) if x.size else x.reshape(0, 6),
                                             1.0, bins=2, range=[(0, 1)] * 6, rng=0)[0],
}
NO_DASK = {"quantile", "median", "percentile"}  # the exponential mechanism: in memory only (TypeError)


def _form(r):
    r = np.asarray(r)
    return r.dtype, r.shape


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("shape", [(3,), (3, 2)])
def test_zero_rows_release_like_one_row_in_memory(name, shape):
    f = CALLS[name]
    if name == "histogramdd" and shape != (3, 2):
        pytest.skip("histogramdd takes (N, D) samples")
    zero, one = np.empty((0,) + shape), np.full((1,) + shape, 0.5)
    assert _form(f(zero)) == _form(f(one))


@pytest.mark.parametrize("name", sorted(set(CALLS) - NO_DASK))
def test_zero_rows_release_like_one_row_on_dask(name):
    da = pytest.importorskip("dask.array")
    f = CALLS[name]
    zero, one = np.empty((0, 3, 2)), np.full((1, 3, 2), 0.5)
    if name == "histogramdd":
        zero, one = zero.reshape(0, 6), one.reshape(1, 6)
    forms = {_form(f(zero)), _form(f(one)), _form(f(da.from_array(zero, chunks=4))),
             _form(f(da.from_array(one, chunks=4)))}
    assert len(forms) == 1, forms


def test_bounds_on_zero_rows_charges_once_and_is_the_in_memory_release():
    da = pytest.importorskip("dask.array")
    zero = np.empty((0, 3))
    b = PrivacyBudget(10.0, 1e-6)
    lo_d, hi_d = TL.bounds(da.from_array(zero, chunks=2), 1.0, axis=0, rng=5, budget=b)
    lo_m, hi_m = TL.bounds(zero, 1.0, axis=0, rng=5)
    assert len(b.ledger) == 1
    np.testing.assert_array_equal(lo_d, lo_m)
    np.testing.assert_array_equal(hi_d, hi_m)


def test_count_on_zero_rows_is_laplace_noise_around_zero():
    # the law of the n = 0 release: count_nonzero = 0 + Lap(1/epsilon) per column (axis=0, 3 columns:
    # sensitivity 3 in l1 over the output, scale 3/epsilon).  KS at 3000 draws: the critical value
    # at level 1e-3 is 1.95 / sqrt(3000) = 0.036; a scale off by 10 % moves the statistic by ~0.04
    rng = np.random.default_rng(11)
    eps = 2.0
    draws = np.array([TL.count_nonzero(np.empty((0, 3)), eps, axis=0, rng=rng) for _ in range(1000)]).ravel()
    scale = 3.0 / eps
    assert stats.kstest(draws, stats.laplace(0.0, scale).cdf).pvalue > 1e-3
