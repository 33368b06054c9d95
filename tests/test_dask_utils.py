"""dpfast._dask_utils's one pass of the one-pass Dask releases (``sum_by_partitions``,
``persist_by_partitions``, ``fit_rows``): the partials in partition order, the partition checks
and their fixed messages, the per-row vectors' lengths, the sum's dtype."""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import dask  # noqa: E402

from dpfast._dask_utils import (  # noqa: E402
    BAD_LENGTH,
    BAD_ROWS,
    PartitionError,
    fit_rows,
    persist_by_partitions,
    sum_by_partitions,
    vector_parts,
)


@pytest.fixture(autouse=True)
def _sync():
    with dask.config.set(scheduler="synchronous"):
        yield


def _colsum(x, *rest):
    return x.sum(axis=0)


def test_partials_are_added_in_partition_order():
    # float64 addition is not associative: the order is observable (2.0 for 1 + 1 + 1e16 - 1e16),
    # and it is the partitions', whatever order the scheduler computes them in
    X = np.array([[1e16], [1.0], [-1e16], [1.0]])
    for scheduler in ("synchronous", "threads"):
        with dask.config.set(scheduler=scheduler):
            got = sum_by_partitions(_colsum, da.from_array(X, chunks=(1, 1)))
        assert got.tolist() == [((1e16 + 1.0) - 1e16) + 1.0] == [1.0]


def test_vectors_args_and_the_sum_dtype():
    X = np.arange(12.0).reshape(6, 2)
    y = np.array([0, 1, 1, 0, 1, 1])

    def stat(x, yk, wk, k):
        assert wk is None and x.flags.c_contiguous and x.dtype == np.float64
        return np.bincount(yk, minlength=k).astype(np.int64)

    Xd = da.from_array(X.astype(np.float32), chunks=(4, 1))  # column chunks: whole rows per partition
    Xd = Xd.rechunk({1: -1})
    got = sum_by_partitions(stat, Xd, [vector_parts(y, Xd, "y"), None], (3,), out_dtype=np.int64)
    assert got.dtype == np.int64 and got.tolist() == [2, 4, 0]
    # dtype="float" keeps float32, None keeps any dtype
    f32 = sum_by_partitions(lambda x: np.array([x.dtype == np.float32]), Xd, dtype="float")
    assert f32.tolist() == [2.0]


@pytest.mark.parametrize("bad", ["nan", "length", "statistic"])
def test_fixed_messages_of_bad_partitions(bad):
    X = np.ones((6, 2))
    y = np.ones(6)
    if bad == "nan":
        X[4, 1] = np.nan
    Xd = da.from_array(X, chunks=(3, 2))
    yp = vector_parts(y, Xd, "y")
    if bad == "length":  # a partition's labels of another length (as unknown-sized Dask pieces can be)
        yp = [yp[0], dask.delayed(np.ones(2))]

    def stat(x, yk):
        if bad == "statistic":
            raise ValueError("a fixed message")
        return x.sum(axis=0)

    with pytest.raises(ValueError) as info:
        sum_by_partitions(stat, Xd, [yp], fixed_errors=bad == "statistic")
    assert str(info.value) == {"nan": BAD_ROWS, "length": BAD_LENGTH, "statistic": "a fixed message"}[bad]


def test_statistic_errors_are_not_passed_on_unless_fixed():
    def stat(x):
        raise ValueError("a message that could name a value")

    with pytest.raises(ValueError, match="could name"):  # raised by the task itself: not a PartitionError
        sum_by_partitions(stat, da.ones((4, 2), chunks=(2, 2)))


def test_persisted_partitions_and_their_failures_pass_on():
    X = np.arange(8.0).reshape(4, 2)
    U = persist_by_partitions(lambda x, s: x * s, da.from_array(X, chunks=(2, 2)), (2.0,))
    assert len(U) == 2
    np.testing.assert_array_equal(sum_by_partitions(_colsum, U, dtype=None, check=None), 2.0 * X.sum(axis=0))
    X[3, 0] = np.inf
    U = persist_by_partitions(lambda x: x, da.from_array(X, chunks=(2, 2)))
    with pytest.raises(ValueError, match=BAD_ROWS):
        sum_by_partitions(_colsum, U, dtype=None, check=None)
    assert isinstance(dask.compute(U[1])[0], PartitionError)


def test_fit_rows_sets_the_input_attributes_from_metadata():
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")

    class Est:
        pass

    est = Est()
    ddf = dd.from_pandas(pd.DataFrame(np.ones((5, 3)), columns=["a", "b", "c"]), npartitions=2)
    Xd, d = fit_rows(est, ddf)
    assert d == 3 and est.n_features_in_ == 3 and list(est.feature_names_in_) == ["a", "b", "c"]
    assert Xd.ndim == 2 and len(Xd.chunks[1]) == 1
