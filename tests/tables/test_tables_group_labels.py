"""Red-team regressions of dpfast.tables.aggregate: neighbours whose added unit changes only the
representation of other units' keys (the column's dtype), which must change nothing else."""
import numpy as np
import pandas as pd
import pytest

from dpfast.tables import aggregate


def _count(df, groups, **kw):
    return aggregate(df, "u", "g", {"n": "count"}, epsilon=1.0, delta=0.0, groups=groups, noise="laplace",
                     rng=1, **kw)


@pytest.mark.parametrize("groups", [[np.nan, 1], [None, 1], [pd.NA, 1]])
@pytest.mark.parametrize("new_group", ["x", None])
def test_public_missing_group_counts_every_missing_representation(groups, new_group):
    # D: 40 units with an NA group in an Int64 column.  D': one more unit in group 'x' (outside the
    # public groups) or NA, which turns the column to object holding pd.NA.  On 1181d15..c17557f
    # the NA rows of the 40 other units stopped matching a NaN / None public group: count 40 -> 0.
    n = 40
    D = pd.DataFrame({"u": np.arange(n), "g": pd.array([None] * n, dtype="Int64")})
    D2 = pd.concat([D, pd.DataFrame({"u": [n], "g": [new_group]})], ignore_index=True)
    assert D2["g"].dtype == object
    a, b = _count(D, groups), _count(D2, groups)
    # same rng: the noise is the same draw, so the difference is the true counts' (0 or 1, the new unit)
    assert b["n"].iloc[0] - a["n"].iloc[0] == pytest.approx(0.0 if new_group == "x" else 1.0)
    assert b["n"].iloc[1] == a["n"].iloc[1]
    # and the NA group holds the 40 units (Laplace b = 1: |noise| < 20 with prob 1 - e^-20)
    assert abs(a["n"].iloc[0] - n) < 20


def test_dask_partitions_with_two_missing_representations_are_one_group():
    dd = pytest.importorskip("dask.dataframe")
    import dask
    from dask import delayed
    n = 40
    A = pd.DataFrame({"u": np.arange(n), "g": np.full(n, np.nan)})
    B = pd.DataFrame({"u": np.arange(n, 2 * n), "g": pd.Series([None] * n, dtype=object)})
    with dask.config.set(scheduler="sync"):
        ddf = dd.from_delayed([delayed(A), delayed(B)], meta=A.iloc[:0], verify_meta=False)
        pub = _count(ddf, [np.nan])
        ref = _count(pd.concat([A, B], ignore_index=True), [np.nan])
    # the 80 units in one NA group, as for the pandas frame (was 40: the None partition missed it)
    assert pub["n"].iloc[0] == ref["n"].iloc[0]
    assert abs(pub["n"].iloc[0] - 2 * n) < 20


def _released(df):
    return aggregate(df, "u", "g", {"n": "count"}, epsilon=8.0, delta=1e-3, rng=0)


def _first(base, value):
    """``base`` plus one unit whose single row (first in the frame) holds group ``value``."""
    new = pd.DataFrame({"u": [10 ** 6], "g": pd.Series([value], dtype=object)})
    return pd.concat([new, base], ignore_index=True)


_T = pd.Timestamp("2020-01-01", tz="UTC")


@pytest.mark.parametrize("common, other", [
    (1, __import__("decimal").Decimal(1)),      # equal and hash-equal: one group
    (1, 1 + 0j),
    (2 ** 60, 2.0 ** 60),
    (_T, _T.tz_convert("Europe/Paris")),       # one instant, another tz
    (_T, _T.as_unit("s")),                      # one instant, another resolution
])
def test_label_of_a_group_is_not_its_first_rows_representation(common, other):
    # 100 units in one group; the neighbour adds one unit whose row, first in the frame, holds an
    # equal value of another type (the group-by counts it in the same group).  On c17557f the
    # label was the first row's value: Decimal('1'), (1+0j), 1.15e18, Europe/Paris or a [s] index
    # instead of 1 / 2**60 / UTC [us] -- the new unit's presence read off the index.
    base = pd.DataFrame({"u": np.arange(100), "g": pd.Series([common] * 100, dtype=object)})
    a, b = _released(base), _released(_first(base, other))
    assert len(a) == len(b) == 1
    assert a.index.equals(b.index) and a.index.dtype == b.index.dtype
    assert type(a.index[0]) is type(b.index[0])  # noqa: E721


def test_datetime_label_does_not_depend_on_the_columns_resolution():
    # D: a datetime64[s] column.  D': one more unit at a ns instant: the column becomes [ns].  The
    # other group's label kept the column's resolution (index datetime64[s] vs [ns]) on c17557f.
    g = pd.Series(pd.to_datetime(["2020-01-01"] * 100)).astype("datetime64[s]")
    D = pd.DataFrame({"u": np.arange(100), "g": g})
    D2 = pd.concat([D, pd.DataFrame({"u": [100], "g": pd.to_datetime(["2021-01-01 00:00:00.000000001"])})],
                   ignore_index=True)
    assert D2["g"].dtype != D["g"].dtype
    a, b = _released(D), _released(D2)
    assert a.index[:1].equals(b.index[:1]) and a.index.dtype == b.index.dtype


def test_big_integral_label_does_not_depend_on_the_columns_dtype():
    # int64 2**60 for 100 units; the neighbour's group 0.5 turns the column to float64 (2**60 is
    # exact there).  The label was int64 2**60 vs float64 1.15e18 on c17557f.
    D = pd.DataFrame({"u": np.arange(100), "g": np.full(100, 2 ** 60, dtype=np.int64)})
    D2 = pd.concat([D, pd.DataFrame({"u": [100], "g": [0.5]})], ignore_index=True)
    a, b = _released(D), _released(D2)
    big = b.index[b.index != 0.5]
    assert list(a.index) == [2 ** 60] and a.index.dtype == np.int64
    assert list(big) == [2 ** 60] and big.dtype == np.int64


def test_dask_partition_dtypes_do_not_round_another_groups_label():
    # Partition 1: 100 units in group 2**53 + 1 (int64).  The neighbour adds a partition holding one
    # unit in group 0.5 (float64).  The first pass concatenated the partitions' keys in float64:
    # the label became 9007199254740992.0 (c17557f), the new unit read off the index.
    dd = pytest.importorskip("dask.dataframe")
    import dask
    from dask import delayed
    A = pd.DataFrame({"u": np.arange(100), "g": np.full(100, 2 ** 53 + 1, dtype=np.int64)})
    B = pd.DataFrame({"u": [10 ** 6], "g": [0.5]})
    with dask.config.set(scheduler="sync"):
        one = dd.from_delayed([delayed(A)], meta=A.iloc[:0], verify_meta=False)
        two = dd.from_delayed([delayed(A), delayed(B)], meta=A.iloc[:0], verify_meta=False)
        a, b = _released(one), _released(two)
    big = b.index[b.index != 0.5]
    assert list(a.index) == [2 ** 53 + 1] and list(big) == [2 ** 53 + 1] and big.dtype == a.index.dtype


@pytest.mark.parametrize("groups", [[1, 2], [True, False]])
def test_public_groups_match_true_and_1_whatever_the_columns_dtype(groups):
    # 50 units in group True (bool column) or 1 (int64 column); the neighbour adds a unit in 'x'
    # (outside the groups), turning the column to object.  get_indexer matched True with 1 in the
    # object column only: the public group's count went 0 -> 50 on c17557f.
    for col in (pd.Series([True] * 50), pd.Series([1] * 50)):
        D = pd.DataFrame({"u": np.arange(50), "g": col})
        D2 = pd.concat([D, pd.DataFrame({"u": [50], "g": ["x"]})], ignore_index=True)
        assert D2["g"].dtype == object
        a, b = _count(D, groups), _count(D2, groups)
        assert a["n"].iloc[0] == b["n"].iloc[0]          # same rng, same true count
        assert abs(a["n"].iloc[0] - 50) < 20             # the 50 units counted (Laplace b = 1)


def test_public_multi_column_groups_match_true_and_1_whatever_the_columns_dtype():
    # the same with two by columns: a bool level against public (1, 'a') counted 0, the object one 50
    D = pd.DataFrame({"u": np.arange(50), "g": [True] * 50, "h": ["a"] * 50})
    D2 = pd.concat([D, pd.DataFrame({"u": [50], "g": ["x"], "h": ["a"]})], ignore_index=True)
    kw = dict(epsilon=1.0, delta=0.0, groups=[(1, "a"), (2, "a")], rng=1)
    a = aggregate(D, "u", ["g", "h"], {"n": "count"}, **kw)
    b = aggregate(D2, "u", ["g", "h"], {"n": "count"}, **kw)
    assert a["n"].iloc[0] == b["n"].iloc[0] and abs(a["n"].iloc[0] - 50) < 20
