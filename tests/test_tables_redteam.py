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
