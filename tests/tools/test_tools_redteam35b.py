"""Red team 35b: what NumPy infers from a Python list, and a pandas category's categories.

1. ``count_nonzero`` on a list: ``np.asarray`` makes a list holding one string a string array,
   every number written as its text, and ``count_nonzero`` counts non-empty strings, so each
   ``0`` became ``"0"``, counted.  Neighbours ``[0] * n`` and ``[0] * n + ["a"]`` (add one row):
   true counts 0 and n + 1 against the sensitivity 1 of the release (Laplace(1/epsilon)): told
   apart with certainty for n >> 1/epsilon.  The same with ``b"a"`` (a bytes array).  A list
   is now converted element by element for ``count_nonzero`` too, as for every other function
   (a string, bytes, complex or datetime element is refused, as one in an object list already
   was: ``[0, "a", None]`` raised while ``[0, "a"]`` released).
2. A pandas ``category`` column: NumPy reads one of numbers as its categories' dtype, so
   ``[0, 1, 2]`` released while ``[0, 1, 2**70]`` (categories of dtype object) was refused, a
   refusal on one record's value.  A category column is the caller's dtype (public): refused
   whatever its values, as the module's docstring already said.
"""
from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pytest

from dpfast import PrivacyBudget, tools


def test_count_nonzero_of_a_list_with_a_string_is_not_a_string_count():
    n = 200
    with pytest.raises(TypeError, match="numbers or bools"):
        tools.count_nonzero([0] * n + ["a"], 1.0, rng=0)
    with pytest.raises(TypeError, match="numbers or bools"):
        tools.count_nonzero([0] * n + [b"a"], 1.0, rng=0)
    # (the neighbour without the string: a release of the count 0)
    assert abs(tools.count_nonzero([0] * n, 1.0, rng=0)) < 50


@pytest.mark.parametrize("odd", ["a", b"a", 1j, np.datetime64("2020-01-01"), datetime.date(2020, 1, 1)],
                         ids=["str", "bytes", "complex", "datetime64", "date"])
def test_a_list_element_that_is_not_real_is_refused_whatever_the_other_elements(odd):
    """The refusal of a list depends on the element alone, never on what NumPy infers from the
    rest of the list (with a None it was an object array, refused; without, a string, complex or
    datetime array, counted)."""
    for lst in ([0, 1, odd], [0, 1, odd, None], [odd, odd], [[0, odd], [1, 2]]):
        b = PrivacyBudget(10.0, 1e-6)
        with pytest.raises(TypeError, match="numbers or bools"):
            tools.count_nonzero(lst, 1.0, rng=0, budget=b)
        with pytest.raises(TypeError, match="real numbers"):
            tools.nansum(lst, 1.0, (-1, 1), rng=0, budget=b)
        assert not b.ledger


def test_count_nonzero_of_a_list_is_that_of_its_float_values():
    lst = [0, 1, True, False, 2 ** 70, None, 0.0, -0.0, np.int8(0), np.float32(3)]
    ref = np.array([0, 1, 1, 0, 2.0 ** 70, np.nan, 0, 0, 0, 3], dtype=np.float64)
    for lo in (lst, [lst[:5], lst[5:]]):
        got = tools.count_nonzero(lo, 1.0, rng=np.random.default_rng(3))
        want = tools.count_nonzero(ref if lo is lst else ref.reshape(2, 5), 1.0, rng=np.random.default_rng(3))
        assert type(got) is type(want) and np.asarray(got).tobytes() == np.asarray(want).tobytes()


@pytest.mark.parametrize("values", [[0, 1, 2], [0.5, 1.0, 2.0], [0.5, 1.0, None], [0, 1, 2 ** 70], [True, False]],
                         ids=["int", "float", "float-missing", "int-huge", "bool"])
def test_a_category_column_is_refused_whatever_its_values(values):
    for a in (pd.Series(values, dtype="category"), pd.Categorical(values),
              pd.DataFrame({"a": [1.0] * len(values), "b": pd.Series(values, dtype="category")})):
        b = PrivacyBudget(10.0, 1e-6)
        with pytest.raises(TypeError, match="real numbers"):
            tools.nanmean(a, 1.0, (-1, 1), rng=0, budget=b)
        with pytest.raises(TypeError, match="numbers or bools"):
            tools.count_nonzero(a, 1.0, rng=0, budget=b)
        with pytest.raises(TypeError, match="real numbers"):
            tools.histogram(a, 1.0, bins=2, range=(-1, 1), rng=0, budget=b)
        assert not b.ledger


def test_a_declared_dtype_is_kept_by_count_nonzero():
    """An array's or a pandas object's dtype is the caller's: count_nonzero counts a datetime
    Series and its one-column DataFrame alike, and a string ndarray as NumPy does (each element
    alone: no number is rewritten as text)."""
    s = pd.Series(pd.date_range("2020-01-01", periods=3))
    want = tools.count_nonzero(np.ones(3), 1.0, rng=np.random.default_rng(2))
    for a in (s, s.to_frame(), s.to_numpy(), np.array(["a", "b", "c"])):
        assert tools.count_nonzero(a, 1.0, rng=np.random.default_rng(2)) == want
