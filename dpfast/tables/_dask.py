"""Dask DataFrame input of :func:`dpfast.tables.aggregate`.

Two passes over the data.  The first validates the values (NaN units / values raise), collects
the distinct group keys and summarises each partition's privacy units, before the budget is
charged.  The second runs the native bounding and summing kernel on every partition on the
workers and returns per-group partial statistics, which are merged exactly (double-double sums,
128-bit lattice sums).  Bounding priorities depend only on a unit's own rows and public keys
(``csrc/tables/aggregate.hpp``), so when every unit's rows sit in one partition the merged
statistics -- and the released frame, whose noise is drawn on the client in the same order as
for pandas input -- equal those of the same table given as pandas.

Which partitions the kernel runs on (:func:`units_confined`):

* **No unit spans two partitions** (proved from the data, never assumed): the kernel runs on the
  partitions as they are, no shuffle.  Proof, tier 1: the partitions' ``[min, max]`` ranges of
  the unit column are pairwise disjoint (sorted by min, each max is strictly below the next
  min), so no value lies in two partitions -- the case of a frame indexed or sorted by the unit
  (``set_index(privacy_unit)``).  Tier 2, when the ranges overlap (e.g. a frame hash-partitioned
  by unit): each partition's distinct unit keys are gathered and the total count of keys must
  equal the number of distinct keys.  Keys are injective on unit values
  (:func:`_check_keys`: integers and datetimes as themselves, floats by their bits with -0.0 =
  0.0, strings by a 64-bit hash -- distinct hashes imply distinct strings), so disjoint key sets
  are disjoint unit sets.  Before tier 2 a cheap refutation: the 64 smallest distinct keys of
  each partition (from the first pass); if two of these sets meet, the frame is shuffled without
  tier 2 (a shared key may be a shared unit).  A hash collision can only send a frame to the
  shuffle, never let a unit through twice.  Partitions of different unit dtypes, and object
  columns of mixed types (where 1 and 1.0 are one unit), are always shuffled.  No sketch or
  sampling decides for the fast path: each tier that accepts is an exact proof.  The first
  pass only chooses the path: the proof is redone on the unit values that the bounding tasks
  themselves read (min and max, or all keys for tier 2, returned with their partial sums), and
  if it fails there -- a source that reads differently each time -- the partial sums are
  discarded and the rows shuffled.
* **Otherwise** the bucket shuffle (:func:`shuffle_stats`): every partition is cut into pieces by
  a routing key of each row's unit (only the unit, the group code as a compact integer and the
  value columns, as NumPy arrays; rows outside public ``groups`` dropped first), bucket j
  gathers piece j of every partition and the kernel runs on it.  The routing key is a function
  of the unit's *value*, equal for all the values pandas counts as one unit whatever dtype a
  partition reads them in (:func:`_bucket_keys`), so no premise about the partitions needs
  checking.  Dask's own DataFrame shuffle is not used: it routes by pandas' hash of the column
  as each partition types it, which differs for int64 7 and float64 7.0 (or for one instant at
  two datetime resolutions, or for ``1`` and ``1.0`` in object columns), so partitions that
  disagree on the unit dtype could send one person to two partitions and bound them twice.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from dpfast.tables._keys import bools_apart, value_keys
from dpfast.tables._plan import AggregatePlan, public_groups
from dpfast.tables._stats import (
    GroupStats,
    bounded_stats,
    canonical_groups,
    check_value_dtype,
    group_codes,
    key_index,
    merge_stats,
    unit_codes,
    value_matrix,
)

_BOTTOM_K = 64  # distinct unit keys per partition sent in the first pass (refutation of tier 2)
_BUCKETS = None  # bucket shuffle: as many buckets as input partitions (benchmarks/results/tables.md)


def _check_keys(col: pd.Series):
    """(type tag, distinct 64-bit keys) of a partition's unit values, or (None, None) when the
    values have no exact key here.  Keys are injective on the values as pandas' factorize tells
    them apart: integers (and booleans, datetimes) by their 64-bit value, floats by the bits of
    ``x + 0.0`` (-0.0 and 0.0 are one unit; NaN was refused), strings by a 64-bit hash of the
    string (distinct hashes, distinct strings; a collision only costs the shuffle).  Other object
    values (mixed types, where 1 and 1.0 are one unit but format differently) get no key."""
    raw = col.to_numpy()
    if raw.dtype.kind in "iu" and raw.size and not (raw.dtype.kind == "u" and raw.dtype.itemsize == 8):
        lo, hi = int(raw.min()), int(raw.max())
        if hi - lo < 4 * raw.size + (1 << 16):  # small range: distinct values by a bitmap (no hashing)
            seen = np.zeros(hi - lo + 1, dtype=bool)
            seen[raw.astype(np.int64) - lo] = True
            return str(raw.dtype), (np.flatnonzero(seen) + lo).view(np.uint64)
    v = pd.unique(raw)
    kind = v.dtype.kind
    if kind in "iub":
        return str(v.dtype), v.astype(np.int64).view(np.uint64)
    if kind in "mM":
        return str(v.dtype), v.view(np.int64).view(np.uint64)
    if kind == "f":
        return str(v.dtype), pd.unique((v.astype(np.float64) + 0.0).view(np.uint64))
    if kind in "OUT" and pd.api.types.infer_dtype(v, skipna=False) == "string":
        return "str", pd.util.hash_array(np.asarray(v, dtype=object), categorize=False)
    return None, None


def _unit_summary(col: pd.Series):
    """Per partition: (type tag, (min, max), its ``_BOTTOM_K`` smallest distinct keys); an empty
    partition gives ("empty", None, no keys)."""
    if len(col) == 0:
        return "empty", None, np.zeros(0, dtype=np.uint64)
    tag, keys = _check_keys(col)
    if tag is None:
        return None, None, None
    if keys.size > _BOTTOM_K:
        keys = np.partition(keys, _BOTTOM_K - 1)[:_BOTTOM_K]
    return tag, _span(col), keys


def _span(col: pd.Series):
    """(min, max) of a partition's unit values *as values* (the array ``_check_keys`` tags and
    keys): a categorical column's ``min``/``max`` would follow its category order (and raise
    when unordered), which ``<`` on the values does not, so disjoint category ranges would not
    prove disjoint value sets."""
    raw = col.to_numpy()
    return raw.min(), raw.max()


def _one(part, fn, *args):
    return pd.Series([fn(part, *args)], dtype=object)


def _per_partition(coll, fn, *args):
    """A Dask Series with one object per partition: ``fn(partition, *args)`` (module-level
    functions and plain arguments only: a closure over a collection would ship its graph)."""
    return coll.map_partitions(_one, fn, *args, meta=(None, object))


def _ranges_disjoint(spans) -> bool:
    """Tier 1: the (min, max) ranges of the non-empty partitions are pairwise disjoint."""
    try:
        order = sorted(range(len(spans)), key=lambda i: spans[i][0])
        return all(bool(spans[a][1] < spans[b][0]) for a, b in zip(order, order[1:]))
    except TypeError:  # no common order
        return False


def _keys_disjoint(key_sets) -> bool:
    """True iff no key occurs twice in the key arrays together (each array: distinct keys of one
    partition, so a repeat is a key in two partitions, or a hash collision inside one)."""
    allk = np.concatenate([np.asarray(k, dtype=np.uint64) for k in key_sets])
    return np.unique(allk).size == allk.size


def _decide(summaries):
    """From per-partition summaries: "ranges" (tier 1 holds), "keys" (tier 2 must decide) or
    None (shuffle: no proof possible, or a key shared by two partitions' bottom keys)."""
    summaries = [s for s in summaries if s[0] != "empty"]
    if len(summaries) <= 1:
        return "ranges"
    tags = {s[0] for s in summaries}
    if None in tags or len(tags) != 1:
        return None
    if _ranges_disjoint([s[1] for s in summaries]):
        return "ranges"
    if not _keys_disjoint([s[2] for s in summaries]):
        return None
    return "keys"


def _proved(summaries, tier: str) -> bool:
    """The exact check of one tier on (tag, (min, max), all distinct keys or None) per partition."""
    summaries = [s for s in summaries if s[0] != "empty"]
    if len(summaries) <= 1:
        return True
    tags = {s[0] for s in summaries}
    if None in tags or len(tags) != 1:
        return False
    if tier == "ranges":
        return _ranges_disjoint([s[1] for s in summaries])
    return _keys_disjoint([s[2] for s in summaries])


def _full_summary(col: pd.Series, want_keys: bool):
    """(tag, (min, max), all distinct keys if ``want_keys``) of a partition's unit column."""
    if len(col) == 0:
        return "empty", None, None
    if want_keys:
        tag, keys = _check_keys(col)
    else:  # the tag _check_keys would give, without computing the keys
        raw, keys = col.to_numpy(), None
        tag = (str(raw.dtype) if raw.dtype.kind in "iubmMf" else
               "str" if raw.dtype.kind in "OUT" and pd.api.types.infer_dtype(raw, skipna=False) == "string" else None)
    if tag is None:
        return None, None, None
    return tag, _span(col), keys


def units_confined(ddf, privacy_unit: str, summaries=None) -> bool:
    """True iff, proved from the data, no privacy unit has rows in two partitions of ``ddf``.

    ``summaries``: the per-partition ``_unit_summary`` results (computed here when None).  Tier 1
    (ranges), refutation (bottom keys), tier 2 (all keys): see the module docstring.  False
    (shuffle) whenever a proof is not available: partitions of different unit dtypes, unit
    values without an exact key, or keys shared between partitions.
    """
    if ddf.npartitions <= 1:
        return True
    if summaries is None:
        summaries = _per_partition(ddf[privacy_unit], _unit_summary).compute()
    tier = _decide(summaries)
    if tier != "keys":
        return tier == "ranges"
    return _proved(list(_per_partition(ddf[privacy_unit], _full_summary, True).compute()), "keys")


def _check_partition(pdf: pd.DataFrame, plan: AggregatePlan, n_parts: int, n_buckets: int = 0):
    """The first pass on one partition: ((NaN in the unit column, value columns with NaN, its
    distinct group keys or None for public groups, its unit summary or None for one partition),
    its rows cut into ``n_buckets`` pieces by unit or None).  The pieces stay on the worker:
    they are what the bucket shuffle would cut in a second read, cut here while the partition is
    read anyway, with the groups coded locally (the released index is known only once every
    partition's keys are in).  Only the first item goes to the client."""
    pu, by_cols = plan.privacy_unit, list(plan.by_cols)
    no_pieces = [None] * n_buckets if n_buckets else None  # an empty partition adds nothing to a bucket
    for c in plan.value_cols:  # a partition may read another dtype than the frame's meta
        try:
            check_value_dtype(c, pdf[c].dtype)
        except TypeError as e:
            return (False, [], None, None, str(e)), no_pieces
    unit_nan = bool(pdf[pu].isna().any())
    bad = [c for c in plan.value_cols if pdf[c].isna().any()]
    summary = _unit_summary(pdf[pu]) if n_parts > 1 and not unit_nan else None
    keys = codes = None
    if plan.groups is None:  # the partition's distinct group keys, in the order of its local codes
        codes, uniq = pd.factorize(key_index(pdf, by_cols, apart=True), use_na_sentinel=False)
        # with their dtype (Int64, boolean, categorical ...): the index is the pandas input's
        uniq = uniq if isinstance(uniq, pd.Index) else pd.Index(uniq)
        keys = uniq.to_frame(index=False, name=list(by_cols) if isinstance(uniq, pd.MultiIndex) else by_cols[0])
    if not n_buckets or unit_nan or bad or len(pdf) == 0:
        return (unit_nan, bad, keys, summary, None), no_pieces
    if codes is not None:
        g = np.asarray(codes, dtype=np.int32)
    else:  # public groups: the released index is known, code against it
        index = public_groups(plan.groups, by_cols)
        g = group_codes(pdf, by_cols, index).astype(_gcode_dtype(index))
    pieces = _split_rows(pdf[pu].to_numpy(), g, value_matrix(pdf, plan.value_cols), n_buckets,
                         plan.groups is not None)
    return (unit_nan, bad, keys, summary, None), pieces


def prepare_dask(ddf, plan: AggregatePlan, cut: bool = False):
    """Validation pass (one task per partition): (group index -- canonical, or the public groups
    --, the state :func:`stats_dask` continues from: per-partition unit summaries for
    :func:`units_confined` and, with ``cut``, the partitions' pieces for the bucket shuffle,
    persisted on the workers, with the maps of their local group codes)."""
    import dask
    # Tasks of this call get keys of their own (pure=False) here and in shuffle_stats: a key
    # repeated from an earlier call (same frame, plan and seed) could be answered from results
    # the cluster still holds -- from a read of the source that may no longer be current.
    pu, by_cols, vcols = plan.privacy_unit, list(plan.by_cols), plan.value_cols
    for col in vcols:  # the rule pandas input follows (the frame's meta first, each partition below)
        check_value_dtype(col, ddf.dtypes[col])
    cols = list(dict.fromkeys([pu, *by_cols, *vcols]))
    n_parts = ddf.npartitions
    n_buckets = _buckets(n_parts) if cut and n_parts > 1 else 0
    tasks = [dask.delayed(_check_partition, pure=False)(p, plan, n_parts, n_buckets) for p in ddf[cols].to_delayed()]
    if n_buckets:  # the pieces stay on the workers for stats_dask; only the checks come here
        first = dask.persist(*tasks)
        checks = dask.compute(*[f[0] for f in first])
    else:
        first, checks = None, [t[0] for t in dask.compute(*tasks)]
    for c in checks:
        if c[4] is not None:
            raise TypeError(c[4])
    if any(c[0] for c in checks):
        raise ValueError(f"privacy_unit column {pu!r} contains NaN/None")
    for col in vcols:
        if any(col in c[1] for c in checks):
            raise ValueError(f"value column {col!r} contains NaN (policy: error, drop such rows first)")
    summaries = [c[3] for c in checks] if n_parts > 1 else None
    if plan.groups is not None:
        index = public_groups(plan.groups, by_cols)
        code_maps = None
    else:
        frames = [c[2] for c in checks]
        # partitions may read a by column in different dtypes (int64 2**53 + 1 in one, float64 in
        # the one a new unit's 0.5 is in): numpy's common type would round the ints, changing
        # another group's label; as objects every value is kept as its partition read it
        if any(not f.dtypes.equals(frames[0].dtypes) for f in frames[1:]):
            frames = [_as_objects(f) for f in frames]
        keys = pd.concat(frames, ignore_index=True)
        uniq = pd.Index(keys[by_cols[0]]) if len(by_cols) == 1 else pd.MultiIndex.from_frame(keys[by_cols])
        index = canonical_groups(uniq.drop_duplicates(), by_cols)
        code_maps = [np.asarray(group_codes(c[2], by_cols, index, apart=True), dtype=np.int64) for c in checks] \
            if n_buckets else None
    return index, {"summaries": summaries, "prepared": (first, code_maps) if n_buckets else None}


def _as_objects(frame: pd.DataFrame) -> pd.DataFrame:
    """A partition's group keys as objects, the bools apart from the numbers they equal
    (:func:`~dpfast.tables._keys.bools_apart`: a bool partition's ``True`` is the bool group of
    an object partition, never its ``1``)."""
    out = frame.astype(object)
    for c in out.columns:
        out[c] = bools_apart(pd.Index(out[c])).to_numpy()
    return out


def _partition_stats(pdf: pd.DataFrame, plan: AggregatePlan, index: pd.Index, seed: int) -> GroupStats:
    ucodes, ukeys = unit_codes(pdf[plan.privacy_unit])
    gcodes = np.ascontiguousarray(group_codes(pdf, plan.by_cols, index, apart=not plan.public), dtype=np.int64)
    values = value_matrix(pdf, plan.value_cols)
    return bounded_stats(plan, ucodes, ukeys, gcodes, index, values, seed, 1)


def _gcode_dtype(index: pd.Index):
    return np.int16 if len(index) < 2 ** 15 else np.int32 if len(index) < 2 ** 31 else np.int64


# ---- the bucket shuffle: every row of a unit sent to one bucket ------------------------------

def _bucket_keys(raw: np.ndarray) -> np.ndarray:
    """One 64-bit routing key per unit value: :func:`dpfast.tables._keys.value_keys`, the key
    the bounding's priorities use too -- equal for values that ``pd.factorize`` counts as one
    unit *whatever the dtype they are read in* (int64 7, float64 7.0, True/1, uint64, nullable
    and categorical columns, numbers inside object columns, datetime64 of any resolution and
    Timestamps of one instant), so the rows of a person meet in one bucket even when
    partitions type the unit column differently.  Keys may collide (two units, one bucket):
    that costs balance, never privacy; the kernel tells the units apart after the buckets meet.
    Pandas' own object hash is not such a function: it hashes ``str`` of a partition's first
    representative (``1`` vs ``1.0``), and its hashes of int64 and float64 columns differ for
    one value."""
    return value_keys(raw)


def _split_rows(raw: np.ndarray, g: np.ndarray, vals: np.ndarray, n_buckets: int, drop_outside: bool):
    """Rows (unit values, group codes, (k, m) values) cut into ``n_buckets`` pieces by a hash of
    each row's routing key (:func:`_bucket_keys`).  A piece: (unit values -- int32 when integers
    fit --, group codes, values); with ``drop_outside``, rows of group code -1 (outside public
    ``groups``: they do not count) are dropped first."""
    keys = _bucket_keys(raw)
    if drop_outside:
        keep = g >= 0
        raw, keys, g, vals = raw[keep], keys[keep], g[keep], vals[:, keep]
    if raw.dtype.kind in "iu" and raw.size and raw.dtype.itemsize > 4 and \
            -2 ** 31 <= int(raw.min()) and int(raw.max()) < 2 ** 31:
        raw = raw.astype(np.int32)  # 4 bytes less a moved row; the values, hence the units, unchanged
    # Fibonacci hashing: the high bits of key * 2^64/phi, scaled to [0, n_buckets)
    h = ((keys * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) * np.uint64(n_buckets) >> np.uint64(32)
    b = h.astype(np.int16 if n_buckets < 2 ** 15 else np.int32)
    order = np.argsort(b, kind="stable")
    cuts = np.cumsum(np.bincount(b, minlength=n_buckets))[:-1]
    raw, g, vals = raw[order], g[order], vals[:, order]
    return [(u, gg, np.ascontiguousarray(v)) for u, gg, v in
            zip(np.split(raw, cuts), np.split(g, cuts), np.split(vals, cuts, axis=1))]


def _bucket_split(pdf: pd.DataFrame, plan: AggregatePlan, index: pd.Index, n_buckets: int, gdtype):
    """One input partition cut into ``n_buckets`` pieces (:func:`_split_rows`), its group codes
    those of ``index``."""
    if len(pdf) == 0:
        return [None] * n_buckets
    g = group_codes(pdf, plan.by_cols, index, apart=not plan.public).astype(gdtype)
    return _split_rows(pdf[plan.privacy_unit].to_numpy(), g, value_matrix(pdf, plan.value_cols), n_buckets,
                       plan.groups is not None)


def _bucket_stats(plan: AggregatePlan, index: pd.Index, seed: int, code_maps, *pieces):
    """The kernel on one bucket: its pieces of every input partition, concatenated (numpy's
    common type: int64 and float64 pieces give float64, whose 7.0 is the int's 7, as pandas'
    concatenation would).  ``code_maps``: None (the pieces carry codes of ``index``) or, per
    partition, the map from its local group codes to those of ``index``."""
    if code_maps is not None:
        pieces = [None if p is None or code_maps[i] is None else (p[0], code_maps[i][p[1]], p[2])
                  for i, p in enumerate(pieces)]
    pieces = [p for p in pieces if p is not None and p[0].size]
    if not pieces:
        return None
    units = np.concatenate([p[0] for p in pieces])
    gcodes = np.ascontiguousarray(np.concatenate([p[1] for p in pieces]), dtype=np.int64)
    values = np.concatenate([p[2] for p in pieces], axis=1)
    ucodes, ukeys = unit_codes(pd.Series(units, copy=False))
    return bounded_stats(plan, ucodes, ukeys, gcodes, index, values, seed, 1)


def shuffle_stats(ddf, plan: AggregatePlan, index: pd.Index, seed: int, prepared=None) -> GroupStats:
    """Per-group statistics of a frame whose units may span partitions: the bucket shuffle.

    Each input partition is cut by the routing key of its units into :func:`_buckets` pieces (one
    task); bucket j gathers piece j of every partition (one task) and runs the kernel.  The key
    is a function of the unit's value alone, equal for values pandas counts as one unit in any
    dtype (:func:`_bucket_keys`), so every row of a person, as the splitting tasks read it,
    lands in one bucket and the person is bounded once -- with no premise to check, whatever the
    partitions' dtypes.  Only numpy arrays move between workers (unit, group code, values: 14
    bytes a row for int32 units, int16 groups and one value column), with no DataFrame
    machinery on the moved path (measured against Dask's DataFrame shuffle in
    ``benchmarks/results/tables.md``).

    ``prepared``: (the first pass's persisted per-partition results, whose second item holds
    the partition's pieces, cut while it was read; per partition the map of its local group
    codes to ``index``'s, or None when they are already ``index``'s) -- then nothing is read or
    cut again.
    """
    import dask
    pu = plan.privacy_unit
    cols = list(dict.fromkeys([pu, *plan.by_cols, *plan.value_cols]))
    if prepared is not None:
        first, code_maps = prepared
        n_buckets = _buckets(len(first))
        pieces = [f[1] for f in first]
    else:
        parts = ddf[cols].to_delayed()
        n_buckets = _buckets(len(parts))
        split = dask.delayed(_bucket_split, nout=n_buckets, pure=False)
        pieces = [split(p, plan, index, n_buckets, _gcode_dtype(index)) for p in parts]
        code_maps = None
    stats = dask.compute(*[dask.delayed(_bucket_stats, pure=False)(plan, index, seed, code_maps,
                                                                    *[pc[j] for pc in pieces])
                           for j in range(n_buckets)])
    stats = [st for st in stats if st is not None]
    if not stats:  # no row in any partition (public groups only, all rows outside them)
        return _partition_stats(ddf._meta[cols], plan, index, seed)
    return merge_stats(stats)


def _buckets(n_parts: int) -> int:
    return _BUCKETS or n_parts


def _stats_and_units(pdf: pd.DataFrame, plan: AggregatePlan, index: pd.Index, seed: int, want_keys: bool):
    """The kernel on one partition, with the summary of the very unit values it bounded."""
    return _partition_stats(pdf, plan, index, seed), _full_summary(pdf[plan.privacy_unit], want_keys)


def stats_dask(ddf, plan: AggregatePlan, index: pd.Index, seed: int, state=None) -> GroupStats:
    """Bounding and per-group sums on the workers, merged on the client.

    ``state``: :func:`prepare_dask`'s (the first pass's unit summaries, and the pieces it cut).
    The summaries only choose the path.  On the fast path the proof that no unit spans two
    partitions is redone on the unit values the kernel tasks themselves read (so a frame whose
    partitions are recomputed differently -- a non-deterministic source -- cannot slip through);
    if it fails, the partial results are discarded and the rows are cut anew for the bucket
    shuffle (the first pass's pieces are of a read that disagreed).
    """
    state = state or {}
    summaries, prepared = state.get("summaries"), state.get("prepared")
    pu = plan.privacy_unit
    cols = list(dict.fromkeys([pu, *plan.by_cols, *plan.value_cols]))
    if ddf.npartitions <= 1:
        return merge_stats(list(_per_partition(ddf[cols], _partition_stats, plan, index, seed).compute()))
    if summaries is None:
        summaries = _per_partition(ddf[pu], _unit_summary).compute()
    tier = _decide(summaries)
    if tier is not None:
        res = list(_per_partition(ddf[cols], _stats_and_units, plan, index, seed, tier == "keys").compute())
        if _proved([r[1] for r in res], tier):
            return merge_stats([r[0] for r in res])
        prepared = None
    return shuffle_stats(ddf, plan, index, seed, prepared)
