"""Grouped DP aggregates over a table: bounding, partition selection, noisy metrics.

Primary sources: Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo & Gipson 2020,
"Differentially private SQL with bounded user contribution" (PoPETs) -- contribution bounding
(L0 groups per unit, Linf rows per (unit, group)), the sensitivities of counts and sums and
Laplace thresholding for private partition selection; Desfontaines, Voss, Gipson & Mandayam
2022, "Differentially private partition selection" (PoPETs) -- the optimal (epsilon, delta)
partition-selection rule (its Theorem 1) and the analysis of thresholding a noisy count.

Layout (each module imports only those below it):

* ``_plan``: :class:`~dpfast.tables._plan.AggregatePlan`, the typed plan built from the public
  parameters (no data read) with the budget split, and the call's event;
* ``_stats``: reading the rows (unit / group codes and keys, value columns), the native kernel
  (``dpfast._tables``: group-by, per-unit bounding, clamping, per-group sums; GIL released)
  and its typed result :class:`~dpfast.tables._stats.GroupStats`;
* ``_dask``: the same statistics from a Dask DataFrame;
* ``_labels``: the released groups as the output's index; ``_release``: partition selection
  and one release function per metric kind;
* here: :func:`aggregate`, the spine -- plan and dry run, read the data, charge, draw.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpfast._dask_utils import is_dask_collection
from dpfast._threads import check_threads, default_threads
from dpfast.budget import charge as charge_budget, detached
from dpfast.random import RandomLike, check_random_state
from dpfast.tables import _dask  # imports dask itself only when given a Dask frame
from dpfast.tables._plan import AggregatePlan, build_plan, plan_event
from dpfast.tables._release import release
from dpfast.tables._selection import selection_probabilities, selection_threshold
from dpfast.tables._stats import (  # noqa: F401
    bounded_stats,
    empty_stats,
    group_keys,
    merge_stats,
    prepare_pandas,
    unit_codes,
    unit_keys,
)

__all__ = ["aggregate", "selection_probabilities", "selection_threshold"]


def _dry_run(plan: AggregatePlan) -> None:
    """Every parameter-only failure before the charge and before any draw: the release runs
    on zero groups, with a throwaway generator and no budget, so each mechanism, calibration
    and CI half-width validates the exact arguments the real release will give it."""
    by_cols = list(plan.by_cols)
    idx = pd.MultiIndex.from_arrays([[]] * len(by_cols), names=by_cols) \
        if len(by_cols) > 1 else pd.Index([], dtype=object, name=by_cols[0])
    with detached():
        release(plan, idx, empty_stats(plan), np.random.default_rng(0))


def _plan(columns, privacy_unit, by, metrics, bounds, max_groups_per_unit, max_rows_per_group, epsilon,
          delta, groups, noise, weights, ci_level, selection, granularity) -> AggregatePlan:
    """The validation step: :func:`~dpfast.tables._plan.build_plan`, then the dry run (no data
    read, nothing charged or drawn)."""
    plan = build_plan(columns, privacy_unit, by, metrics, bounds, max_groups_per_unit, max_rows_per_group,
                      epsilon, delta, groups, noise, weights, ci_level, selection, granularity)
    _dry_run(plan)
    return plan


def _is_dask(df) -> bool:
    return is_dask_collection(df) and hasattr(df, "columns")


def aggregate(
    df,
    privacy_unit: str,
    by,
    metrics: Mapping[str, Any],
    bounds: Mapping[str, tuple] | None = None,
    max_groups_per_unit: int = 1,
    max_rows_per_group: int = 1,
    epsilon: float = 1.0,
    delta: float = 0.0,
    groups: Sequence | None = None,
    noise: str = "laplace",
    rng: RandomLike = None,
    weights: Mapping[str, float] | None = None,
    ci_level: float | None = None,
    *,
    selection: str = "truncated_geometric",
    granularity: Mapping[str, float] | None = None,
    budget=None,
    n_threads: int | None = None,
) -> pd.DataFrame:
    """Differentially private grouped statistics of ``df``; ``(epsilon, delta)``-DP in total.

    Neighbouring relation: add or remove one privacy unit (all rows whose ``privacy_unit``
    equals one value).  Guarantee (Wilson et al. 2020; Desfontaines et al. 2022):

    1. **Contribution bounding.**  Per unit, ``max_groups_per_unit`` (L0) of its groups are kept
       and, per kept (unit, group), ``max_rows_per_group`` (Linf) of its rows; values are
       clamped to ``bounds[column] = (lo, hi)``.  The choice is uniform (not the first rows):
       the smallest priorities, where a priority is a keyed hash (MurmurHash3 finaliser) of a
       64-bit secret drawn from ``rng`` and the unit's value, the group's value and the row's
       values (with an occurrence number among identical rows).  It depends on the unit's own
       rows only -- never on the other units, the row order or the partitioning, which is
       what the add/remove analysis needs and why pandas and Dask inputs give the same output
       for the same ``rng``.  Bounding caps what one unit can change, whatever its raw data.
       Native code (``dpfast._tables``): group-by, bounding, clamping and sums in one pass.
    2. **Sensitivities** (per group a unit changes a count by <= Linf, over <= L0 groups):
       count: l1 ``L0 Linf``, l2 ``sqrt(L0) Linf``.  ``sum`` of clamped values: per group
       <= ``Linf M`` with ``M = max(|lo|, |hi|)``, l1 ``L0 Linf M``, l2 ``sqrt(L0) Linf M``.
       Inside mean and variance the sum is of values centred at ``m = (lo + hi)/2`` (each
       term in ``[-r, r]``, ``r = (hi - lo)/2``): l1 ``L0 Linf r``, l2 ``sqrt(L0) Linf r``;
       the sum of squares of centred values (in ``[0, r^2]``, centred again at ``r^2/2``):
       l1 ``L0 Linf r^2/2``, l2 ``sqrt(L0) Linf r^2/2``.
    3. **Metrics.**  ``count``; ``sum``; ``mean = m + S/max(C, 1)`` from a noisy count C and a
       noisy centred sum S, each with half of the metric's budget, clamped to ``[lo, hi]``;
       ``variance = Q/C - (S/C)^2`` (population variance) from noisy count, centred sum and
       centred sum of squares, a third of the budget each, clamped to ``[0, r^2]``;
       ``quantile`` by :func:`dpfast.mechanisms.private_quantile` (exponential mechanism,
       Smith 2011) on the group's clamped kept values with epsilon ``eps_q / (L0 Linf)``: that
       mechanism is eps'-DP for adding/removing one value; a unit adds <= Linf values to a
       group (group privacy: Linf eps') in <= L0 groups (basic composition: L0 Linf eps' = eps_q).
    4. **Noise.**  ``"laplace"``: Laplace on the l1 sensitivity (pure).  ``"gaussian"``: the
       analytic Gaussian mechanism (Balle & Wang 2018) on the l2 sensitivity.  ``"discrete"``
       / ``"discrete_gaussian"``: floating-point safe (Canonne, Kamath & Steinke 2020): each
       clamped value is rounded to the lattice ``granularity[column] * Z`` (a power of two;
       default ~2^-20 of ``max(|lo|, |hi|)``, bounds rounded likewise), sums are exact integers
       and get exact discrete Laplace / discrete Gaussian noise
       (:func:`dpfast.discrete_laplace_mechanism`, :func:`dpfast.discrete_gaussian_mechanism`,
       zCDP calibration) on the integer sensitivities (lattice ``sum``: ``Linf max(|klo|,
       |khi|)``; centred ``2k - klo - khi``: ``Linf (khi - klo)``; squares summed exactly and
       divided by ``c = 2^s`` with floor: ``floor(Linf max(h, d^2/c - h)) + 1``); pair them
       with ``rng=dpfast.random.SecureRandom()``.  Exact sums beyond ``2^53`` lattice units
       are clamped there (1-Lipschitz, so sensitivities hold).  Quantiles are refused with
       the discrete noises (the exponential mechanism draws doubles).
    5. **Partition selection** (``groups=None``), on the number n of distinct units of a group
       after bounding: ``selection="truncated_geometric"`` (default) releases a group with
       the probability ``pi(n)`` of Desfontaines et al. 2022, Theorem 1 (the optimal
       (eps, delta)-DP rule, run at ``(eps_sel/L0, delta_sel/L0)`` per group, basic
       composition over the <= L0 groups a unit touches; :func:`selection_probabilities`);
       ``selection="laplace"`` releases iff ``n + Lap(L0/eps_sel)`` exceeds
       ``1 + (L0/eps_sel) ln(L0/(2 delta_sel))`` (:func:`selection_threshold`).  The candidates
       are the groups with ``n >= 1`` after bounding (a unit is in at most L0 of them, whatever
       its raw rows; a group bounding emptied is never released).  Both are
       (eps_sel, delta_sel)-DP and need ``delta > 0``; neither depends on ``noise``.  Metrics
       are released for selected groups only.  With public ``groups`` every listed group is
       reported (empty ones too; rows of other groups are dropped before bounding) and
       selection costs nothing.
    6. **Budget** (basic composition): ``epsilon`` is split over the metrics and selection in
       proportion to ``weights`` (dict of metric name / ``"selection"`` -> positive weight;
       default 1 each); within a metric equally over its noisy primitives.  ``delta`` is
       split, in proportion to the same weights, over the parts that need it: selection and,
       with a Gaussian noise, the metrics other than quantiles.  Laplace metrics and
       quantiles are pure.  The parts are in ``out.attrs["budget"]``; their sums
       (``epsilon_spent``, ``delta_spent``) are <= ``(epsilon, delta)``.  The call's event
       (``out.attrs["event"]``: the composition of one ``PureDP(eps_i)`` or
       ``ApproxDP(eps_i, delta_i)`` per part) is
       charged to ``budget`` (or the default budget of a ``with budget:`` block) through
       ``dpfast.budget.charge`` after the input is validated and before any random draw.

    Value columns with NaN raise ``ValueError`` naming the column (policy: error, never a
    silent drop, since which rows are dropped would be data-dependent and undocumented).  A
    NaN in a ``by`` column forms its own group; a NaN ``privacy_unit`` raises ``ValueError``.

    Parameters
    ----------
    df : pandas.DataFrame or dask.dataframe.DataFrame
        A Dask frame is bounded and summed per partition on the workers, with each unit's rows
        in one partition; partial sums are merged exactly (double-double / 128-bit), so the
        output equals the pandas one for the same ``rng``.  The rows are shuffled by
        ``privacy_unit`` first unless the first pass proves from the data that no unit has
        rows in two partitions: the partitions' unit ranges ``[min, max]`` are disjoint (a
        frame indexed or sorted by the unit, e.g. ``ddf.set_index(privacy_unit)``), or their
        exact sets of unit keys are (a frame already partitioned by unit).  Such frames skip
        the shuffle; any other frame, even with one unit in two partitions, is shuffled (a
        unit bounded separately in two partitions could contribute twice), each row routed by a
        key of its unit's value that agrees across dtypes (int64 7 and float64 7.0 are one
        person, as for pandas input).
    privacy_unit : str
        Column identifying the privacy unit, or the name of the index (``df.set_index(unit)``;
        the index is then used as that column).
    by : str or list of str
        Group key column(s).
    metrics : dict
        ``{name: "count" | ("sum"|"mean"|"variance", column) | ("quantile", column, q)}``.
    bounds : dict
        ``{column: (lo, hi)}`` for every value column, finite, lo <= hi, |lo|, |hi| <= 2^450
        (public).
    max_groups_per_unit, max_rows_per_group : int in [1, 2**63 - 1]
    epsilon : float > 0
    delta : float in [0, 1); > 0 when ``groups is None`` or the noise is Gaussian.
    groups : None or sequence
        Public groups (tuples for several ``by`` columns), reported in this order.
    noise : {"laplace", "gaussian", "discrete", "discrete_gaussian"}
    rng : None, int, numpy.random.Generator or dpfast.random.SecureRandom
    weights : dict, optional
    ci_level : float in (0, 1), optional
        Adds ``<name>_lo`` / ``<name>_hi`` columns for count, sum and mean metrics.  They cover
        the **noise only**, at the stated level, around the value of the bounded, clamped
        (and, for the discrete noises, lattice-rounded) data -- not the bias from clamping or
        contribution bounding.  Count and sum: the exact central interval of the noise
        (discrete noises: the smallest integer half-width with coverage >= the level).  Mean:
        a Bonferroni box (count and centred sum each at level ``1 - (1 - ci_level)/2``), its
        ratio range, intersected with ``[lo, hi]`` (conservative).
    selection : {"truncated_geometric", "laplace"}, keyword-only
    granularity : dict, keyword-only
        ``{column: power of two}`` lattice steps for the discrete noises.
    budget : dpfast.PrivacyBudget, keyword-only
    n_threads : int, keyword-only
        Threads of the native kernel (pandas input); default ``DPFAST_NUM_THREADS`` or the CPUs.

    Returns
    -------
    pandas.DataFrame indexed by the released groups (named after ``by``), one column per metric
    (plus the CI columns).  With public ``groups``: those groups, in their order and dtype.
    Otherwise the index is rebuilt from the released values alone (``tables._labels.released_index``):
    one representation per value (integral numbers -> int; datetimes in UTC at ns; missing -> NaN, or NA in
    an ``Int64`` / ``boolean`` index among ints / bools), the dtype inferred from them, sorted by value (by type name first where types do not compare); a
    categorical ``by`` gives a plain index.  Its dtype, order and categories never depend on
    unreleased groups (docs/privacy.rst, "Tables").  ``out.attrs``: ``noise_scale`` (per
    metric, per primitive: Laplace scale b, Gaussian sigma, or the discrete noises' scale in
    output units), ``budget`` (per part: (epsilon, delta)), ``epsilon_spent``,
    ``delta_spent``, ``event``, ``selection``, ``selection_threshold`` (Laplace selection) or
    None, ``noise``, ``granularity``, ``neighbours``.

    Raises
    ------
    ValueError, TypeError
        Unknown columns, missing or bad bounds, NaN values, bad bounds on contributions,
        epsilon/delta out of range, bad weights, ci_level or granularity, quantiles with a
        discrete noise, output column names used twice, an epsilon/delta or weight whose
        share rounds to 0, noise parameters beyond a sampler's range -- all before any noise is
        drawn and before the budget is charged (the parameter checks of every mechanism run in
        a dry run on zero groups first).
    dpfast.BudgetExceededError
        When the call's event does not fit the remaining budget (nothing drawn or charged).
    """
    if not (isinstance(df, pd.DataFrame) or _is_dask(df)):
        raise TypeError(f"df must be a pandas.DataFrame or a dask.dataframe.DataFrame, got {type(df).__name__}")
    indexed = isinstance(privacy_unit, str) and privacy_unit not in df.columns and df.index.name == privacy_unit
    # a Dask frame sorted by the unit (known divisions of a unit index) skips the shuffle: the
    # first pass need not cut its rows for it
    cut = _is_dask(df) and not (indexed and df.known_divisions)
    if indexed:
        # a frame indexed by the unit (df.set_index(privacy_unit)): the index as a column; for Dask
        # this keeps the partitions, whose unit ranges then prove the shuffle unnecessary
        df = df.reset_index()
    # the spine: validate public parameters (plan + dry run) -> read and check the rows ->
    # event -> charge -> draw (the bounding's secret key first, then the release)
    plan = _plan(df.columns, privacy_unit, by, metrics, bounds, max_groups_per_unit, max_rows_per_group,
                 epsilon, delta, groups, noise, weights, ci_level, selection, granularity)
    threads = default_threads() if n_threads is None else check_threads(n_threads)
    gen = check_random_state(rng)
    event = plan_event(plan)
    if _is_dask(df):
        index, state = _dask.prepare_dask(df, plan, cut)  # one pass: bad values raise here, before the charge
        charge_budget(budget, event, label="tables.aggregate")
        seed = int(gen.integers(0, 2 ** 64, dtype=np.uint64))
        st = _dask.stats_dask(df, plan, index, seed, state)
    else:
        ucodes, ukeys, gcodes, index, values = prepare_pandas(df, plan)
        charge_budget(budget, event, label="tables.aggregate")
        # The key of every pseudo-random choice of the bounding (a secret draw of the rng).
        seed = int(gen.integers(0, 2 ** 64, dtype=np.uint64))
        st = bounded_stats(plan, ucodes, ukeys, gcodes, index, values, seed, threads)
    with detached():  # the inner mechanism calls must not charge a default budget again
        out = release(plan, index, st, gen)
    out.attrs["event"] = event
    return out
