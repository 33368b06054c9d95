"""dpfast.tables.aggregate on Dask DataFrames: the same frame as for pandas input with the same
seed (issue 10, test (5)), on a 2-worker LocalCluster with a few MB of rows; bad values raise
before the budget is charged."""
import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import dpfast  # noqa: E402
from dpfast.tables import aggregate  # noqa: E402

METRICS = {"n": "count", "total": ("sum", "x"), "avg": ("mean", "x"), "var": ("variance", "x"),
           "p50": ("quantile", "x", 0.5)}


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster) as c:
        yield c


def _table(n=150_000, seed=0):
    # ~4.8 MB: units own several rows across groups, so L0 and Linf bounding are both active
    r = np.random.default_rng(seed)
    return pd.DataFrame({"u": r.integers(0, 15_000, n), "g": r.integers(0, 40, n),
                         "h": r.integers(0, 2, n), "x": r.uniform(-5.0, 205.0, n)})


@pytest.mark.parametrize("noise, by, groups", [
    ("laplace", "g", None),
    ("gaussian", ["g", "h"], None),
    ("discrete", "g", list(range(-2, 45))),
])
def test_dask_equals_pandas_for_the_same_seed(client, noise, by, groups):
    df = _table()
    metrics = METRICS if not noise.startswith("discrete") else {k: v for k, v in METRICS.items() if k != "p50"}
    kw = dict(metrics=metrics, bounds={"x": (0.0, 200.0)}, max_groups_per_unit=2, max_rows_per_group=3,
              epsilon=1.0, delta=1e-6, groups=groups, noise=noise, ci_level=0.9)
    a = aggregate(df, "u", by, rng=7, **kw)
    ddf = dd.from_pandas(df.sample(frac=1.0, random_state=1), npartitions=5)  # other order and partitioning
    b = aggregate(ddf, "u", by, rng=7, **kw)
    assert len(a) > 0
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert a.attrs["event"] == b.attrs["event"]
    # and the seed matters
    c = aggregate(ddf, "u", by, rng=8, **kw)
    assert not a.equals(c)


def test_dask_string_units_and_budget(client):
    df = _table(20_000, seed=3)
    df["u"] = "user-" + df["u"].astype(str)
    budget = dpfast.PrivacyBudget(2.0, 1e-5)
    kw = dict(metrics={"n": "count", "s": ("sum", "x")}, bounds={"x": (0.0, 200.0)}, max_groups_per_unit=1,
              max_rows_per_group=2, epsilon=1.0, delta=1e-6)
    a = aggregate(df, "u", "g", rng=3, **kw)
    b = aggregate(dd.from_pandas(df, npartitions=3), "u", "g", rng=3, budget=budget, **kw)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len(budget.ledger) == 1


def test_dask_bad_values_raise_before_the_charge(client):
    df = _table(1000)
    df.loc[17, "x"] = np.nan
    budget = dpfast.PrivacyBudget(2.0, 1e-5)
    with pytest.raises(ValueError, match="'x'.*NaN"):
        aggregate(dd.from_pandas(df, npartitions=2), "u", "g", {"s": ("sum", "x")}, {"x": (0, 1)},
                  epsilon=1.0, delta=1e-6, budget=budget)
    assert len(budget.ledger) == 0
