"""Red team 35: an empty row partition (Dask) made the tree fits refuse after the charge.

NumPy gives an empty matrix zero strides (``np.zeros((0, 2)).strides == (0, 0)``), and the
native bindings' row view (``csrc/bindings/array_view.hpp``, ``strided_rows``) checked the
column stride of a matrix with no rows: "X rows must be contiguous".  A Dask collection can
hold an empty partition in a non-empty data set, e.g. after a filter, and which partitions are
empty depends on the values.  Neighbours: ``ddf[ddf.a > 0]`` over partitions [a > 0 twice | one
row with a > 0 | twice] vs the same without that one row (its partition now empty): the first
releases, the second raised ``ValueError`` after the charge -- told apart with certainty, and
the Dask fit was no longer the in-memory fit "whatever the partitioning".  A matrix with no rows
is now read as such (nothing to check: no row is read).
"""
from __future__ import annotations

import numpy as np
import pytest

from dpfast import PrivacyBudget
from dpfast.ensemble import RandomForestClassifier
from dpfast.tree import DecisionTreeClassifier
from dpfast.tree.random_trees import draw_forest, forest_proba, leaf_counts, route

dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402
import pandas as pd  # noqa: E402

X6 = np.array([[0.5, 0.1], [0.6, -0.2], [0.3, 0.3], [-0.6, 0.4], [0.7, -0.5], [0.8, 0.6]])
Y6 = np.array([1, 0, 1, 0, 1, 0])


@pytest.fixture(autouse=True)
def _sync():
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.mark.parametrize("empty", [np.zeros((0, 2)), np.empty((0, 2)), X6[3:3], np.zeros((0, 2), order="F")])
def test_the_native_passes_take_a_matrix_of_no_rows(empty):
    feature, threshold = draw_forest(np.random.default_rng(0), np.full(2, -1.0), np.full(2, 1.0), 3, 2)
    counts = leaf_counts(empty, np.zeros(0, dtype=np.int64), 2, feature, threshold, 2)
    assert counts.shape == (3, 4, 2) and counts.dtype == np.int64 and not counts.any()
    assert route(empty, feature, threshold, 2).shape == (0, 3)
    assert forest_proba(empty, feature, threshold, 2, np.full((3, 4, 2), 0.5)).shape == (0, 2)


def _frame(parts):
    """A Dask DataFrame with one partition per list of row indices of X6 (partitions fixed by
    the caller, as a source's files or a previous shuffle fix them)."""
    return dd.concat([dd.from_pandas(pd.DataFrame(X6[r], columns=["a", "b"], index=r).assign(y=Y6[r]),
                                     npartitions=1) for r in parts])


ESTIMATORS = [
    lambda: DecisionTreeClassifier(bounds=(-1, 1), max_depth=2, random_state=0),
    lambda: RandomForestClassifier(bounds=(-1, 1), max_depth=2, n_estimators=3, leaf_mechanism="counts",
                                   random_state=0),
    lambda: RandomForestClassifier(bounds=(-1, 1), max_depth=2, random_state=0),  # "auto": counts the partitions
]


@pytest.mark.parametrize("make", ESTIMATORS)
def test_a_filter_that_empties_a_partition_fits_like_memory(make):
    # D: partitions {0, 1} {2, 3} {4, 5}; its neighbour without row 2, the middle partition's only
    # row with a > 0: after the filter, partition sizes [2, 1, 2] and [2, 0, 2]
    for parts in ([[0, 1], [2, 3], [4, 5]], [[0, 1], [3], [4, 5]]):
        ddf = _frame(parts)
        f = ddf[ddf.a > 0]
        rows = [i for r in parts for i in r if X6[i, 0] > 0]
        assert [len(p) for p in (X6[[i for i in r if X6[i, 0] > 0]] for r in parts)] in ([2, 1, 2], [2, 0, 2])
        budget = PrivacyBudget(10.0, 1e-3)
        est = make().fit(f[["a", "b"]], f.y, budget=budget)
        ref = make().fit(pd.DataFrame(X6[rows], columns=["a", "b"]), Y6[rows])
        assert len(budget.ledger) == 1 and budget.ledger[0].event == ref.event_
        for k in ("feature_", "threshold_", "leaf_proba_"):
            np.testing.assert_array_equal(getattr(est, k), getattr(ref, k))
        Xr = pd.DataFrame(X6[rows], columns=["a", "b"])
        np.testing.assert_array_equal(est.predict(Xr), ref.predict(Xr))
