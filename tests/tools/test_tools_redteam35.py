"""Red team 35: the dtype NumPy infers from a Python list (or a pandas object column) depends on
the values, so refusing ``dtype=object`` was a refusal on one record's value.

Neighbours: ``[0.5, 1.0]`` and ``[0.5, 1.0, 2**70]`` (add one row).  ``np.asarray`` makes the
first int/float64 and the second ``object`` (no NumPy integer holds 2**70), and every
:mod:`dpfast.tools` function refused it ("a must be an array of real numbers"): told apart
with certainty.  A real number beyond float64's range is data like any other (the clamp to the
public bounds takes it, as for a longdouble): it now releases the value of the same call on the
clamped array.  Likewise a pandas nullable column with a missing value (``pd.NA`` in an object
array) is NaN, as a float column's missing value is: the nan* forms ignore it, the others refuse
it as they refuse NaN (a contract violation, ``ValueError``), never a ``TypeError`` that a
complete column does not raise.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpfast import PrivacyBudget, tools

B = (-1.0, 2.0)
BIG = float(np.finfo(np.float64).max)

CALLS = {
    "sum": lambda a, g: tools.sum(a, 1.0, B, rng=g),
    "nansum": lambda a, g: tools.nansum(a, 1.0, B, rng=g),
    "mean": lambda a, g: tools.mean(a, 1.0, B, rng=g),
    "nanmean": lambda a, g: tools.nanmean(a, 1.0, B, rng=g),
    "var": lambda a, g: tools.var(a, 1.0, B, rng=g),
    "std": lambda a, g: tools.std(a, 1.0, B, rng=g),
    "count_nonzero": lambda a, g: tools.count_nonzero(a, 1.0, rng=g),
    "quantile": lambda a, g: tools.quantile(a, [0.25, 0.5], 1.0, B, rng=g),
    "median": lambda a, g: tools.median(a, 1.0, B, rng=g),
    "histogram": lambda a, g: tools.histogram(a, 1.0, bins=3, range=B, rng=g),
    "histogramdd": lambda a, g: tools.histogramdd(a, 1.0, bins=3, range=[B], rng=g),
    "bounds": lambda a, g: tools.bounds(a, 1.0, rng=g),
}


def _same(u, v):
    if isinstance(u, tuple):
        assert isinstance(v, tuple) and len(u) == len(v)
        for a, b in zip(u, v):
            _same(a, b)
        return
    assert type(u) is type(v)
    np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
    assert np.asarray(u).dtype == np.asarray(v).dtype


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("big,as_float", [(2 ** 70, 2.0 ** 70), (-(2 ** 70), -(2.0 ** 70)), (10 ** 400, BIG),
                                          (-(10 ** 400), -BIG), (Fraction(10 ** 400, 3), BIG)])
def test_a_huge_python_number_is_data(name, big, as_float):
    """The list with one huge Python number releases exactly what the float64 array with that
    number saturated to the largest double (then clamped to the bounds by the release) does."""
    listed = [0.5, 1.0, big]
    assert np.asarray(listed).dtype == object  # the inferred dtype depends on the value
    expected = CALLS[name](np.array([0.5, 1.0, as_float]), np.random.default_rng(7))
    _same(CALLS[name](listed, np.random.default_rng(7)), expected)


@pytest.mark.parametrize("name", ["nansum", "nanmean"])
def test_a_missing_value_of_a_nullable_column_is_nan(name):
    s = pd.Series([True, None, False], dtype="boolean")
    assert np.asarray(s).dtype == object  # (complete, the same column is bool)
    expected = CALLS[name](np.array([1.0, np.nan, 0.0]), np.random.default_rng(3))
    _same(CALLS[name](s, np.random.default_rng(3)), expected)
    _same(CALLS[name]([1.0, None, 0.0], np.random.default_rng(3)), expected)


@pytest.mark.parametrize("name", ["sum", "mean", "quantile", "histogram", "bounds"])
def test_a_missing_value_is_refused_as_nan_is(name):
    with pytest.raises(ValueError) as nan:
        CALLS[name](np.array([1.0, np.nan, 0.0]), np.random.default_rng(3))
    with pytest.raises(ValueError) as missing:
        CALLS[name](pd.Series([True, None, False], dtype="boolean"), np.random.default_rng(3))
    assert str(missing.value) == str(nan.value)


@pytest.mark.parametrize("bad", [["a", 1.0], [1.0, 2 ** 70, "a"], [1.0, 1j], [1.0, object()]])
def test_what_is_not_a_real_number_is_still_refused(bad):
    with pytest.raises(TypeError, match="real numbers"):
        tools.sum(bad, 1.0, B, rng=0)
    if np.asarray(bad).dtype == object:  # (a string or complex array is count_nonzero's own case)
        with pytest.raises(TypeError, match="numbers or bools"):
            tools.count_nonzero(bad, 1.0, rng=0)


def test_an_object_ndarray_is_a_public_dtype_still_refused():
    """An object ndarray is a dtype the caller chose (public), not one inferred from values:
    refused for every value (tests/tools/test_tools_redteam32.py), big numbers or not."""
    for a in (np.array([0.5, 1.0], dtype=object), np.array([0.5, 2 ** 70], dtype=object)):
        with pytest.raises(TypeError, match="real numbers"):
            tools.sum(a, 1.0, B, rng=0)
        with pytest.raises(TypeError, match="numbers or bools"):
            tools.count_nonzero(a, 1.0, rng=0)


def test_ordinary_values_keep_their_bits():
    vals = [0.1, -0.7, 1.9, 3, math.pi, None]
    _same(tools.nanmean(vals, 1.0, B, rng=np.random.default_rng(1)),
          tools.nanmean(np.array([0.1, -0.7, 1.9, 3, math.pi, np.nan]), 1.0, B, rng=np.random.default_rng(1)))


@pytest.mark.parametrize("column", [
    pd.Series([1.0, 2 ** 70], dtype=object), pd.Series([1.0, 2.0], dtype=object),
    pd.Series([None, None], dtype="string"), pd.Series(["1", None], dtype="string"),
    pd.Series([None, None], dtype=object), pd.Series(pd.Categorical(["x", "y"])),
    pd.DataFrame({"a": [1.0, 2.0], "b": pd.Series([None, None], dtype=object)}),
], ids=["object-big", "object", "string-missing", "string", "object-missing", "category", "frame-object"])
def test_a_pandas_dtype_that_is_not_numeric_is_refused_whatever_its_values(column):
    """A pandas column's dtype is the caller's (public): object, string and (string) category
    columns are refused for every value -- an all-missing string column too, which NumPy turns into an object
    array of NA that would otherwise read as NaN, while the same column with a value is refused."""
    with pytest.raises(TypeError, match="real numbers"):
        tools.nansum(column, 1.0, B, rng=0)
    with pytest.raises(TypeError, match="numbers or bools"):
        tools.count_nonzero(column, 1.0, rng=0)


def test_a_frame_of_numeric_and_nullable_columns_is_read_as_floats():
    full = pd.DataFrame({"a": pd.array([1, 2, 0], dtype="Int64"), "b": [0.5, 1.5, -0.5]})
    missing = pd.DataFrame({"a": pd.array([1, None, 0], dtype="Int64"), "b": [0.5, 1.5, -0.5]})
    for df, ref in ((full, [[1.0, 0.5], [2.0, 1.5], [0.0, -0.5]]), (missing, [[1.0, 0.5], [np.nan, 1.5], [0.0, -0.5]])):
        assert np.asarray(df).dtype == object
        _same(tools.nansum(df, 1.0, B, axis=0, rng=np.random.default_rng(6)),
              tools.nansum(np.array(ref), 1.0, B, axis=0, rng=np.random.default_rng(6)))
        _same(tools.count_nonzero(df, 1.0, axis=0, rng=np.random.default_rng(6)),
              tools.count_nonzero(np.array(ref), 1.0, axis=0, rng=np.random.default_rng(6)))


# --------------------------------------------------------------------------- Dask: empty partitions
# Dask's reshape of a row-chunked array with an empty chunk next to a chunk of one row ((1, 0),
# (0, 1)) builds a graph with a missing key, and its ravel of an (n, d) array chunked (1, 0, 2)
# fails at compute ("cannot reshape"): histogram/histogramdd raised that ValueError after the
# charge.  Neighbours (partitions fixed, a filter keeping a > 0): {0.5, 0.5} {-1, -1} (sizes
# [2, 0]) released, {0.5} {-1, -1} ([1, 0]) raised -- with certainty.


def _dask_series(parts):
    dd = pytest.importorskip("dask.dataframe")
    s = dd.concat([dd.from_pandas(pd.Series(p, name="a", dtype=float), npartitions=1) for p in parts])
    return s[s > 0]


HISTS = {
    "histogram": lambda a, g, b: tools.histogram(a, 1.0, bins=3, range=(-1, 2), rng=g, budget=b),
    "histogram-density": lambda a, g, b: tools.histogram(a, 1.0, bins=[-1, 0, 0.7, 2], density=True, rng=g,
                                                         budget=b),
    "histogramdd": lambda a, g, b: tools.histogramdd(a, 1.0, bins=3, range=[(-1, 2)], rng=g, budget=b),
    "sum": lambda a, g, b: tools.sum(a, 1.0, (-1, 2), rng=g, budget=b),
    "nanmean": lambda a, g, b: tools.nanmean(a, 1.0, (-1, 2), rng=g, budget=b),
    "count_nonzero": lambda a, g, b: tools.count_nonzero(a, 1.0, rng=g, budget=b),
    "bounds": lambda a, g, b: tools.bounds(a, 1.0, rng=g, budget=b),
}


@pytest.mark.parametrize("name", list(HISTS))
@pytest.mark.parametrize("parts", [[[0.5], [-1.0, -1.0]], [[-1.0, -1.0], [0.5]], [[0.5, 0.6], [-1.0]],
                                   [[0.5], [-1.0], [0.7, 0.2]]])
def test_a_dask_series_with_an_empty_partition_releases_like_memory(name, parts):
    import dask

    with dask.config.set(scheduler="synchronous"):
        s = _dask_series(parts)
        kept = np.array([v for p in parts for v in p if v > 0])
        budget = PrivacyBudget(10.0, 1e-3)
        got = HISTS[name](s, np.random.default_rng(5), budget)
        assert len(budget.ledger) == 1
        _same(got, HISTS[name](kept, np.random.default_rng(5), PrivacyBudget(10.0, 1e-3)))


@pytest.mark.parametrize("chunks", [(1, 0, 2), (0, 1, 2), (1, 0), (3, 0)])
def test_histogram_of_a_2d_dask_array_with_an_empty_chunk(chunks):
    import dask
    da = pytest.importorskip("dask.array")

    x = np.linspace(-0.9, 1.9, sum(chunks) * 3).reshape(-1, 3)
    with dask.config.set(scheduler="synchronous"):
        budget = PrivacyBudget(10.0, 1e-3)
        got = tools.histogram(da.from_array(x, chunks=(chunks, 3)), 1.0, bins=4, range=(-1, 2),
                              rng=np.random.default_rng(2), budget=budget)
        assert len(budget.ledger) == 1
    _same(got, tools.histogram(x, 1.0, bins=4, range=(-1, 2), rng=np.random.default_rng(2)))


@pytest.mark.parametrize("form", ["frame", "series"])
def test_subsample_and_aggregate_takes_a_dask_frame_like_pandas(form):
    """A Dask DataFrame/Series raised NotImplementedError (iloc on rows) after the charge; it is
    now gathered like a Dask Array, and releases what the pandas input releases."""
    dd = pytest.importorskip("dask.dataframe")
    df = pd.DataFrame({"a": np.linspace(-1, 2, 40), "b": np.linspace(0, 1, 40)})
    pdx = df if form == "frame" else df["a"]
    ddx = dd.from_pandas(pdx, npartitions=3)

    def stat(r):
        return float(np.mean(np.asarray(r, dtype=float))) if len(r) else 0.0

    budget = PrivacyBudget(10.0, 1e-3)
    got = tools.subsample_and_aggregate(stat, ddx, 1.0, bounds=(-1, 2), rng=np.random.default_rng(4), budget=budget)
    assert len(budget.ledger) == 1
    assert got == tools.subsample_and_aggregate(stat, pdx, 1.0, bounds=(-1, 2), rng=np.random.default_rng(4))
