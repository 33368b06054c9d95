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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_dask_bad_values_raise_before_the_charge(client):
    df = _table(1000)
    df.loc[17, "x"] = np.nan
    budget = dpfast.PrivacyBudget(2.0, 1e-5)
    with pytest.raises(ValueError, match="'x'.*NaN"):
        aggregate(dd.from_pandas(df, npartitions=2), "u", "g", {"s": ("sum", "x")}, {"x": (0, 1)},
                  epsilon=1.0, delta=1e-6, budget=budget)
    assert len(budget.ledger) == 0
    df = _table(1000)
    df["u"] = df["u"].astype(float)
    df.loc[900, "u"] = np.nan  # in the second partition
    with pytest.raises(ValueError, match="privacy_unit.*'u'.*NaN"):
        aggregate(dd.from_pandas(df, npartitions=2), "u", "g", {"s": ("sum", "x")}, {"x": (0, 1)},
                  epsilon=1.0, delta=1e-6, budget=budget)
    with pytest.raises(ValueError, match="privacy_unit: unknown column 'user'"):
        aggregate(dd.from_pandas(df, npartitions=2).set_index("u"), "user", "g", {"s": ("sum", "x")},
                  {"x": (0, 1)}, epsilon=1.0, delta=1e-6, budget=budget)
    assert len(budget.ledger) == 0


# ---- no shuffle when no unit spans two partitions (proved from the data) ---------------------

from dpfast.tables import _dask as tdask  # noqa: E402
from dpfast.tables._aggregate import _plan, merge_stats  # noqa: E402

KW = dict(metrics=METRICS, bounds={"x": (0.0, 200.0)}, max_groups_per_unit=2, max_rows_per_group=3, epsilon=1.0,
          delta=1e-6)


@pytest.fixture
def shuffles(monkeypatch):
    """Records the shuffles by unit that ran (called on the client)."""
    calls = []
    real = tdask.shuffle_stats

    def spy(*a, **k):
        calls.append("bucket")
        return real(*a, **k)
    monkeypatch.setattr(tdask, "shuffle_stats", spy)
    return calls


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["set_index", "hash_partitioned", "string_units_hash_partitioned"])
def test_unit_partitioned_frames_skip_the_shuffle_and_equal_pandas(client, shuffles, layout):
    df = _table(60_000, seed=4)
    if layout == "string_units_hash_partitioned":
        df["u"] = "user-" + df["u"].astype(str)
    a = aggregate(df, "u", "g", rng=11, **KW)
    ddf = dd.from_pandas(df.sample(frac=1.0, random_state=2), npartitions=4)
    ddf = ddf.set_index("u") if layout == "set_index" else ddf.shuffle(on="u")
    b = aggregate(ddf, "u", "g", rng=11, **KW)
    assert shuffles == []  # the fast path ran
    assert len(a) > 0
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    if layout == "set_index":  # a pandas frame indexed by the unit is accepted the same way
        pd.testing.assert_frame_equal(a, aggregate(df.set_index("u"), "u", "g", rng=11, **KW), check_exact=True)


def _spanning_frame():
    """Two partitions with disjoint units except unit 50, which has 3 rows of group 0 in each."""
    r = np.random.default_rng(5)
    n = 4000
    part_a = pd.DataFrame({"u": r.integers(0, 100, n), "g": r.integers(0, 4, n), "x": r.uniform(0, 200, n)})
    part_b = pd.DataFrame({"u": r.integers(100, 200, n), "g": r.integers(0, 4, n), "x": r.uniform(0, 200, n)})
    part_a = part_a[part_a.u != 50]
    extra = pd.DataFrame({"u": [50] * 3, "g": [0] * 3, "x": [10.0, 20.0, 30.0]})
    part_a = pd.concat([part_a, extra], ignore_index=True)
    part_b = pd.concat([part_b, extra.assign(x=[40.0, 50.0, 60.0])], ignore_index=True)
    return part_a, part_b


@pytest.mark.slow
def test_one_unit_spanning_two_partitions_takes_the_shuffle(client, shuffles):
    part_a, part_b = _spanning_frame()
    df = pd.concat([part_a, part_b], ignore_index=True)
    ddf = dd.concat([dd.from_pandas(part_a, npartitions=1), dd.from_pandas(part_b, npartitions=1)])
    assert ddf.npartitions == 2
    # the unit ranges overlap ([0, 99] and [50, 199]) and unit 50 is among the smallest keys of both
    assert not tdask.units_confined(ddf, "u")
    kw = dict(KW, groups=[0, 1, 2, 3], metrics={"n": "count"})
    a = aggregate(df, "u", "g", rng=3, **kw)
    b = aggregate(ddf, "u", "g", rng=3, **kw)
    assert shuffles == ["bucket"]
    pd.testing.assert_frame_equal(a, b, check_exact=True)

    # Why the check matters: bounding each partition on its own (the fast path, forced) keeps
    # unit 50's 3 rows of group 0 in BOTH partitions, 6 > max_rows_per_group = 3 contributions.
    plan = _plan(df.columns, "u", "g", {"n": "count"}, None, 2, 3, 1.0, 1e-6, [0, 1, 2, 3], "laplace", None,
                 None, "truncated_geometric", None)
    index = pd.Index([0, 1, 2, 3], name="g")

    def group0_count(parts):
        return int(merge_stats([tdask._partition_stats(p, plan, index, 99) for p in parts])["count"][0])

    without_a, without_b = part_a[part_a.u != 50], part_b[part_b.u != 50]
    forced = group0_count([part_a, part_b]) - group0_count([without_a, without_b])
    assert forced == 6
    # whereas with the unit's rows in one place its contribution is capped at 3
    together = group0_count([df]) - group0_count([pd.concat([without_a, without_b])])
    assert together == 3


def _two_parts(a, b):
    return dd.concat([dd.from_pandas(pd.DataFrame({"u": a}), npartitions=1),
                      dd.from_pandas(pd.DataFrame({"u": b}), npartitions=1)])


@pytest.mark.parametrize("a, b, confined", [
    ([1, 2, 3], [4, 5], True),                        # disjoint ranges (tier 1)
    ([1, 5, 9], [2, 6, 10], True),                    # interleaved ranges, disjoint sets (tier 2)
    ([1, 5, 9], [2, 5, 10], False),                   # 5 in both
    (list(range(0, 200, 2)), list(range(1, 200, 2)) + [198], False),  # shared key beyond the bottom 64
    ([0.0, 3.0], [-0.0, 2.0], False),                 # -0.0 == 0.0: one unit
    (["a", "c"], ["b", "d"], True),
    (["a", "c"], ["c", "d"], False),
    ([1, "a"], [2, "b"], False),                      # mixed object values: no exact key, shuffle
    ([1, 2], [], True),                               # an empty partition
])
def test_units_confined_is_exact(a, b, confined):
    # convert-string off: the mixed object column stays objects (1 and "a"), as in pandas
    with __import__("dask").config.set({"scheduler": "sync", "dataframe.convert-string": False}):
        assert tdask.units_confined(_two_parts(a, b), "u") is confined


@pytest.mark.slow
def test_shuffled_path_with_public_groups_and_the_unit_as_a_value(client, shuffles):
    # rows outside the public groups are dropped before the shuffle, integer units are narrowed
    # to int32 for it, and a unit column that is also a value column keeps its values
    df = _table(40_000, seed=6)
    kw = dict(metrics={"n": "count", "su": ("sum", "u"), "m": ("mean", "x")},
              bounds={"x": (0.0, 200.0), "u": (0.0, 20_000.0)}, max_groups_per_unit=2, max_rows_per_group=3,
              epsilon=1.0, delta=1e-6, groups=list(range(5, 15)))
    a = aggregate(df, "u", "g", rng=21, **kw)
    b = aggregate(dd.from_pandas(df, npartitions=3), "u", "g", rng=21, **kw)
    assert shuffles == ["bucket"]
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def _changing_source(part_a, b_first, b_later):
    """A two-partition frame whose second partition reads ``b_first`` the first time and
    ``b_later`` after (a source that changes between reads), and the count of its reads."""
    import dask
    reads = {"b": 0}

    def load(i):
        if i == 0:
            return part_a
        reads["b"] += 1
        return b_first if reads["b"] == 1 else b_later
    with dask.config.set({"dataframe.convert-string": False}):  # object units stay objects
        return dd.from_map(load, [0, 1], meta=part_a.iloc[:0], enforce_metadata=False), reads


def test_fast_path_proof_is_redone_on_the_rows_the_kernel_read(shuffles):
    # A source that changes between reads: the first (validation) pass sees disjoint unit ranges,
    # the bounding pass sees unit 50 in both partitions.  The proof is redone on the rows the
    # kernel read, fails, and the rows are shuffled; the result is that of the data read then.
    import dask
    part_a, part_b = _spanning_frame()
    ddf, reads = _changing_source(part_a, part_b[part_b.u != 50], part_b)
    kw = dict(KW, groups=[0, 1, 2, 3], metrics={"n": "count"})
    with dask.config.set(scheduler="sync"):
        b = aggregate(ddf, "u", "g", rng=3, **kw)
    assert reads["b"] >= 3 and shuffles == ["bucket"]
    a = aggregate(pd.concat([part_a, part_b], ignore_index=True), "u", "g", rng=3, **kw)
    pd.testing.assert_frame_equal(a, b, check_exact=True)


# ---- the bucket shuffle (units routed by a hash of their exact key) and its fallback ----------

def _units_of(kind, n, r):
    ids = r.integers(0, n // 8, n)
    if kind == "int64":
        return ids
    if kind == "uint64":
        return ids.astype(np.uint64) + np.uint64(2 ** 63)  # keys beyond int64
    if kind == "float":
        return np.where(ids == 0, -0.0, ids / 4.0)  # -0.0 and 0.0 are one unit
    if kind == "datetime":
        return np.datetime64("2020-01-01", "s") + ids.astype("timedelta64[s]")
    return np.char.add("user-", ids.astype(str)).astype(object)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["int64", "uint64", "float", "datetime", "str"])
def test_bucket_shuffle_equals_pandas_for_each_key_family(client, shuffles, kind):
    r = np.random.default_rng(31)
    df = _table(30_000, seed=8)
    df["u"] = _units_of(kind, len(df), r)
    if kind == "float":
        df.loc[df.index[:50], "u"] = 0.0  # both zeros present
    a = aggregate(df, "u", "g", rng=5, **KW)
    b = aggregate(dd.from_pandas(df, npartitions=4, sort=False), "u", "g", rng=5, **KW)
    assert shuffles == ["bucket"]
    assert len(a) > 0
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def _int_and_float_parts(as_objects=False):
    """Units 1..60 own 3 rows of group 0 in each part; part a holds them as ints, part b as floats
    (one value, one person: pandas' factorize makes 7 and 7.0 one unit), typed int64/float64 or,
    with ``as_objects``, Python ints and floats in object columns."""
    r = np.random.default_rng(12)
    units = np.repeat(np.arange(1, 61), 3)
    part_a = pd.DataFrame({"u": units, "g": 0, "x": r.uniform(0, 200, units.size)})
    part_b = pd.DataFrame({"u": units.astype(np.float64), "g": 0, "x": r.uniform(0, 200, units.size)})
    if as_objects:
        part_a, part_b = part_a.astype({"u": object}), part_b.astype({"u": object})
    return part_a, part_b


def _from_map(load, part):
    import dask
    with dask.config.set({"dataframe.convert-string": False}):  # see _group0_count
        return dd.from_map(load, [0, 1], meta=part.iloc[:0], enforce_metadata=False)


def _group0_count(ddf):
    import dask
    kw = dict(KW, groups=[0], metrics={"n": "count"}, max_rows_per_group=3, epsilon=1e6)
    # convert-string off: object columns stay Python ints and floats (not the strings "7", "7.0")
    with dask.config.set({"scheduler": "sync", "dataframe.convert-string": False}):
        return round(aggregate(ddf, "u", "g", rng=4, **kw)["n"].iloc[0])  # noise at epsilon 1e6: << 0.5


@pytest.mark.parametrize("as_objects", [False, True])
def test_partitions_of_different_unit_types_bound_each_person_once(shuffles, monkeypatch, as_objects):
    # (before the bucket shuffle, Dask's DataFrame shuffle counted 267 here for object columns)
    part_a, part_b = _int_and_float_parts(as_objects)

    def load(i):
        return (part_a, part_b)[i]
    ddf = _from_map(load, part_a)
    # 60 people, 3 rows each kept at most
    assert _group0_count(ddf) == 180 and shuffles == ["bucket"]
    # Routing by pandas' hash of each partition's column (as Dask's DataFrame shuffle does)
    # differs between 7 and 7.0: people reach two buckets and are bounded twice
    assert (pd.util.hash_pandas_object(part_a.u, index=False).to_numpy()
            != pd.util.hash_pandas_object(part_b.u, index=False).to_numpy()).all()
    monkeypatch.setattr(tdask, "_bucket_keys", lambda raw: pd.util.hash_pandas_object(pd.Series(raw)).to_numpy())
    assert _group0_count(ddf) > 180


def test_a_source_that_retypes_units_between_reads_bounds_each_person_once(shuffles):
    # part a reads int64 units; part b reads float64 units first (the first pass, which cuts the
    # rows for the buckets), int64 after: routing keys are functions of the value, so each person
    # is bounded once, whichever read the buckets get
    part_a, part_b = _int_and_float_parts()
    ddf, reads = _changing_source(part_a, part_b, part_b.astype({"u": np.int64}))
    assert _group0_count(ddf) == 180
    assert reads["b"] >= 1 and shuffles == ["bucket"]


def test_routing_keys_agree_for_values_that_factorize_counts_as_one():
    # the independent oracle: pandas' factorize of all the values together, as Python objects
    import datetime
    from decimal import Decimal
    from fractions import Fraction
    typed = [
        np.array([7, -1, 0, 2 ** 62, 2 ** 53 + 1], dtype=np.int64),
        np.array([7, 0, 1], dtype=np.int8),
        np.array([True, False]),
        np.array([7.0, -1.0, -0.0, 2.0 ** 62, 2.0 ** 53, 0.5, 2.0 ** 63, 2.0 ** 70, np.inf], dtype=np.float64),
        np.array([7.0, 0.5, -0.0], dtype=np.float32),
        np.array([7, 2 ** 63, 2 ** 64 - 1], dtype=np.uint64),
        np.array([7, 7.0, True, np.int16(-1), Decimal(7), Fraction(1, 2), 7 + 0j, 2 ** 63, 2 ** 64 - 1, 2 ** 70,
                  Decimal(2 ** 70), "7", "a"], dtype=object),
        np.array(["a", "b", "7"], dtype=object),
        np.array(["2020-01-01T00:00:05", "1969-12-31T23:59:59"], dtype="datetime64[s]"),
        np.array(["2020-01-01T00:00:05", "1969-12-31T23:59:59"], dtype="datetime64[ns]"),
        np.array([pd.Timestamp("2020-01-01T00:00:05"), datetime.datetime(1969, 12, 31, 23, 59, 59)], dtype=object),
        np.array([1, 5], dtype="timedelta64[s]"),
        np.array([datetime.timedelta(seconds=5), pd.Timedelta(1, "s")], dtype=object),
    ]
    values = [v for arr in typed for v in arr]
    keys = np.concatenate([tdask._bucket_keys(arr) for arr in typed])
    codes, _ = pd.factorize(pd.Series(values, dtype=object))
    for c in np.unique(codes):
        assert len(set(keys[codes == c].tolist())) == 1, [values[i] for i in np.flatnonzero(codes == c)]
    assert len(np.unique(codes)) > 15  # the cases are not all one unit


def test_first_pass_cuts_the_buckets_and_nan_groups_match_pandas(shuffles):
    # the first pass cuts each partition for the bucket shuffle while it reads it (groups coded
    # locally, mapped to the released index after): NaN group keys and two key columns included
    import dask
    df = _table(20_000, seed=13)
    df["g"] = df["g"].astype(float)
    df.loc[df.index[::7], "g"] = np.nan  # a NaN key forms its own group, as for pandas
    kw = dict(KW, metrics={"n": "count", "s": ("sum", "x")})
    cuts = []
    real = tdask._split_rows

    def spy(*a, **k):
        cuts.append(1)
        return real(*a, **k)
    with dask.config.set(scheduler="sync"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(tdask, "_split_rows", spy)
            for by in ("g", ["g", "h"]):
                cuts.clear()
                a = aggregate(df, "u", by, rng=9, **kw)
                b = aggregate(dd.from_pandas(df, npartitions=3, sort=False), "u", by, rng=9, **kw)
                assert len(cuts) == 3  # once per partition, in the first pass only
                pd.testing.assert_frame_equal(a, b, check_exact=True)
                assert a.index.to_frame()["g"].isna().any()
            # a frame sorted by the unit (known divisions) is not cut: its partitions are used as they are
            cuts.clear()
            c = aggregate(dd.from_pandas(df.set_index("u").sort_index(), npartitions=3), "u", "g", rng=9, **kw)
            assert cuts == []
            pd.testing.assert_frame_equal(aggregate(df, "u", "g", rng=9, **kw), c, check_exact=True)
    assert shuffles == ["bucket", "bucket"]


# ---- issue 21: categorical units (item 2), nullable group keys (item 3), empty partitions
# (item 9), the one rule for value columns (item 12) --------------------------------------------

@pytest.fixture
def sync():
    """The synchronous scheduler: these frames are tiny, the cluster's round trips would dominate."""
    import dask
    with dask.config.set(scheduler="sync"):
        yield


def _parts_frame(parts, **kw):
    return dd.concat([dd.from_pandas(p, npartitions=1, **kw) for p in parts])


@pytest.mark.parametrize("units, dt", [
    (["m", "a", "a"], pd.CategoricalDtype(["m", "a"], ordered=True)),   # the example: category
    (["m", "a", "a"], pd.CategoricalDtype(["m", "a"], ordered=False)),  # order is not value order;
    ([9, 1, 1], pd.CategoricalDtype([9, 1], ordered=True)),             # unordered raised TypeError
    ([9, 1, 1], "Int64"),                                               # nullable
    (["m", "a", "a"], "str"),                                           # pandas' string dtype
    (["m", 1, 1], object),                                              # mixed objects: shuffled
])
def test_units_spread_over_partitions_are_bounded_once_for_every_dtype(sync, units, dt):
    # unit units[1] has rows in both partitions; the partitions' ranges in category order
    # ([m, a] and [a, a]) look disjoint when compared as values, which let it be bounded twice
    p1 = pd.DataFrame({"u": pd.Series(units[:2], dtype=dt), "g": [0, 1], "x": 1.0})
    p2 = pd.DataFrame({"u": pd.Series(units[2:], dtype=dt), "g": [2], "x": 1.0})
    with __import__("dask").config.set({"dataframe.convert-string": False}):
        ddf = _parts_frame([p1, p2])
    kw = dict(privacy_unit="u", by="g", metrics={"n": "count"}, groups=[0, 1, 2], epsilon=1e9, rng=0)
    a, b = aggregate(pd.concat([p1, p2], ignore_index=True), **kw), aggregate(ddf, **kw)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert b["n"].round().sum() == 2  # two units, one group each (L0 = 1), one row each
    assert not tdask.units_confined(ddf, "u")


def _nullable_groups(dtype, n=240):
    """Units 0..n-1 with a row in groups 0 and 1, the group column of ``dtype``; the last quarter
    of the rows (one Dask partition of four) also holds people whose group is missing."""
    g = np.tile([0, 1], n)
    df = pd.DataFrame({"u": np.repeat(np.arange(n), 2), "x": np.linspace(0.0, 1.0, 2 * n)})
    extra = pd.DataFrame({"u": np.arange(n, n + 30), "x": 0.5})
    if dtype == "category":
        col = pd.Categorical(g, categories=[1, 0, 5])
        na = pd.Categorical([None] * 30, categories=[1, 0, 5])
    else:
        col, na = pd.array(g.astype(bool) if dtype == "boolean" else g, dtype=dtype), pd.array([None] * 30, dtype=dtype)
    df["g"], extra["g"] = col, na
    return pd.concat([df, extra], ignore_index=True)


@pytest.mark.parametrize("dtype", ["Int64", "boolean", "UInt8", "category"])
def test_nullable_group_keys_equal_pandas(sync, dtype):
    # the NA group sits in one partition only: the Dask group index kept its dtype (on 1181d15 it
    # became float64 / object, and the group keys -- hence every unit's choice -- changed)
    df = _nullable_groups(dtype)
    kw = dict(metrics={"n": "count", "s": ("sum", "x")}, bounds={"x": (0.0, 1.0)}, max_groups_per_unit=1,
              epsilon=1e9, delta=1e-3, rng=2)
    a = aggregate(df, "u", "g", **kw)
    b = aggregate(dd.from_pandas(df, npartitions=4, sort=False), "u", "g", **kw)
    # the output index is rebuilt from the released values (issue 21 item 4): ints or bools with
    # a missing value give Int64 / boolean, whatever the input column's dtype
    assert len(a) == 3 and a.index.dtype == ("boolean" if dtype == "boolean" else "Int64")
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_a_person_with_an_na_group_moves_no_one_else(sync):
    # the example (smaller): adding one person whose group is NA changes no other row
    n = 600
    D = pd.DataFrame({"u": np.repeat(np.arange(n), 2), "g": pd.array(np.tile([0, 1], n), dtype="Int64"), "x": 0.0})
    D2 = pd.concat([D, pd.DataFrame({"u": [n], "g": pd.array([None], dtype="Int64"), "x": [0.0]})],
                   ignore_index=True)
    kw = dict(max_groups_per_unit=1, max_rows_per_group=1, epsilon=1e9, delta=1e-3, rng=0)
    a, b = [aggregate(dd.from_pandas(d, npartitions=4), "u", "g", {"n": "count"}, **kw)["n"].round()
            for d in (D, D2)]
    assert 0.25 * n < a.loc[0] < 0.75 * n
    # the values (on 1181d15 they moved: the index turned float64 and every group key changed)
    np.testing.assert_array_equal(a.to_numpy(), b.loc[[0, 1]].to_numpy())
    # the index from the released values only (issue 21 item 4): Int64 iff the NA group is released
    assert b.index.dtype == ("Int64" if b.index.hasnans else "int64") and list(b.index[:2]) == [0, 1]


@pytest.mark.parametrize("groups", [None, [0, 1, 2]])
def test_empty_partitions_give_what_pandas_gives(sync, groups):
    r = np.random.default_rng(0)
    df = pd.DataFrame({"u": r.integers(0, 8, 40), "g": r.integers(0, 3, 40), "x": np.arange(40.0)})
    ddf = dd.from_pandas(df, npartitions=4)
    kw = dict(metrics={"n": "count", "s": ("sum", "x")}, bounds={"x": (0.0, 10.0)}, epsilon=1.0, delta=1e-3,
              groups=groups)
    # partitions 1 and 3 empty, units spread over 0 and 2 (the shuffle); then every partition empty
    for sub in (ddf[(ddf.x < 5) | ((ddf.x >= 20) & (ddf.x < 25))], ddf[ddf.x < -1]):
        budget = dpfast.PrivacyBudget(10.0, 1e-2)
        b = aggregate(sub, "u", "g", rng=4, budget=budget, **kw)
        pd.testing.assert_frame_equal(aggregate(sub.compute(), "u", "g", rng=4, **kw), b, check_exact=True)
        assert len(budget.ledger) == 1


BAD_VALUE_COLUMNS = {
    "str": ["1", "2", "3", "4"],
    "datetime": pd.date_range("2020-01-01", periods=4, unit="us"),
    "complex": np.array([1, 2, 3, 4], dtype=complex),
    "category": pd.Categorical([1.0, 2.0, 3.0, 4.0]),
}


@pytest.mark.parametrize("kind", sorted(BAD_VALUE_COLUMNS))
def test_value_column_rule_is_the_pandas_one(kind):
    # refused with the same TypeError for both inputs, before the charge; bool accepted by both
    import dask
    df = pd.DataFrame({"u": [0, 1, 2, 3], "g": 0, "x": BAD_VALUE_COLUMNS[kind]})
    kw = dict(metrics={"s": ("sum", "x")}, bounds={"x": (0.0, 10.0)}, epsilon=1.0, groups=[0])
    budget = dpfast.PrivacyBudget(10.0, 1e-3)
    with dask.config.set(scheduler="sync"):
        for d in (df, dd.from_pandas(df, npartitions=2)):
            with pytest.raises(TypeError, match="value column 'x' must hold real numbers"):
                aggregate(d, "u", "g", rng=1, budget=budget, **kw)
        assert len(budget.ledger) == 0
        df["x"] = [True, False, True, True]
        pd.testing.assert_frame_equal(aggregate(df, "u", "g", rng=1, **kw),
                                      aggregate(dd.from_pandas(df, npartitions=2), "u", "g", rng=1, **kw),
                                      check_exact=True)


@pytest.mark.slow
def test_a_partition_that_reads_another_value_dtype_is_refused_before_the_charge():
    # the frame's meta says float64, a partition reads strings: refused in the first pass
    import dask
    part_a = pd.DataFrame({"u": [0, 1], "g": 0, "x": [1.0, 2.0]})
    part_b = pd.DataFrame({"u": [2, 3], "g": 0, "x": np.array(["1", "2"], dtype=object)})
    ddf = _from_map(lambda i: (part_a, part_b)[i], part_a)
    budget = dpfast.PrivacyBudget(10.0, 1e-3)
    with dask.config.set(scheduler="sync"), pytest.raises(TypeError, match="value column 'x' must hold real"):
        aggregate(ddf, "u", "g", {"s": ("sum", "x")}, {"x": (0.0, 10.0)}, epsilon=1.0, groups=[0], budget=budget)
    assert len(budget.ledger) == 0


@pytest.mark.parametrize("shuffle", [False, True])
def test_true_and_1_are_two_groups_as_for_pandas(sync, shuffle):
    # issue 23 item 3: a partition reads the group column as bool, another as object holding 1 and
    # 'x'; True and 1 stay two groups (bool True, int 1), labelled and counted as for pandas input
    # (Dask's default would turn the object partition into strings: '1' is not 1)
    import dask
    a = pd.DataFrame({"u": np.arange(30), "g": np.ones(30, dtype=bool)})
    b = pd.DataFrame({"u": np.arange(30, 90), "g": pd.Series([1] * 30 + ["x"] * 30, dtype=object)})
    if shuffle:  # units in both partitions: the bucket shuffle
        b["u"] = np.arange(60) % 40
    df = pd.concat([a, b], ignore_index=True)
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = dd.concat([dd.from_pandas(a, npartitions=1), dd.from_pandas(b, npartitions=1)])
    kw = dict(metrics={"n": "count"}, epsilon=50.0, delta=0.2, rng=4, max_groups_per_unit=3)
    p, d = aggregate(df, "u", "g", **kw), aggregate(ddf, "u", "g", **kw)
    assert [(type(v).__name__, v) for v in p.index] == [("bool", True), ("int", 1), ("str", "x")]
    pd.testing.assert_frame_equal(p, d, check_exact=True)
