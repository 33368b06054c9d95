"""The typed plan of :func:`dpfast.tables.aggregate`: its public parameters, checked, and the
budget split -- everything decided before a row is read or the budget is charged.

:func:`build_plan` is the validation step of the release spine (validate public parameters ->
calibrate -> event -> charge -> draw): it reads only the frame's column names and the call's
arguments.  :func:`plan_event` is the call's event, the composition of one ``PureDP`` /
``ApproxDP`` per budget part (basic composition, Dwork & Roth 2014, Thm. 3.16).  The lower
modules of :mod:`dpfast.tables` (``_stats``, ``_release``, ``_dask``) take an
:class:`AggregatePlan` and never import :mod:`dpfast.tables._aggregate`.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpfast._validation import check_delta, check_epsilon, check_int, check_positive, check_real
from dpfast.accounting import ApproxDP, Composed, PureDP

__all__ = [
    "KINDS",
    "NOISES",
    "PRIMITIVES",
    "SELECTIONS",
    "AggregatePlan",
    "MetricSpec",
    "build_plan",
    "plan_event",
    "public_groups",
]

KINDS = {"count": 0, "sum": 1, "mean": 1, "variance": 1, "quantile": 2}  # kind -> number of extra args
NOISES = ("laplace", "gaussian", "discrete", "discrete_gaussian")
SELECTIONS = ("truncated_geometric", "laplace")
# Noisy primitives each metric is built from (each gets an equal share of the metric's budget).
PRIMITIVES = {"count": ("count",), "sum": ("sum",), "mean": ("count", "sum"),
              "variance": ("count", "sum", "sumsq"), "quantile": ()}
_LATTICE_BITS = 20       # default granularity: max(|lo|, |hi|) / granularity <= 2^20
_MAX_ABS_BOUND = 2.0 ** 450  # |bound|^2 times any row count stays finite: no overflow in the sums
_MAX_CONTRIB = 2 ** 63 - 1  # max_groups_per_unit, max_rows_per_group: int64 in the native kernel


@dataclass(frozen=True)
class MetricSpec:
    """One requested metric: ``name``, ``kind`` (a key of :data:`KINDS`), the value ``column``
    (None for a count) and the quantile level ``q`` (quantiles only)."""
    name: str
    kind: str
    column: str | None
    q: float | None


@dataclass(frozen=True)
class AggregatePlan:
    """The checked public parameters of one ``aggregate`` call (immutable once built).

    ``bounds``: {value column: (lo, hi)}; ``granularity``: {value column: lattice step} for the
    discrete noises, else None; ``budget``: {part (metric name or ``"selection"``):
    (epsilon_i, delta_i)}, the basic-composition split; ``groups``: the public groups or None
    (private partition selection); ``columns``: the output's columns.  The dicts are owned by
    the plan: read them, never change them (a copy goes to ``out.attrs``).
    """
    privacy_unit: str
    by_cols: tuple[str, ...]
    metrics: tuple[MetricSpec, ...]
    value_cols: tuple[str, ...]
    bounds: dict[str, tuple[float, float]]
    l0: int
    linf: int
    epsilon: float
    delta: float
    noise: str
    selection: str
    granularity: dict[str, float] | None
    ci_level: float | None
    budget: dict[str, tuple[float, float]]
    groups: tuple | None
    columns: tuple[str, ...]

    @property
    def discrete(self) -> bool:
        """Lattice noise (exact integer sums): ``"discrete"`` or ``"discrete_gaussian"``."""
        return self.noise in ("discrete", "discrete_gaussian")

    @property
    def want_mask(self) -> bool:
        """Whether the kernel must return the kept rows (the quantiles need their values)."""
        return any(m.kind == "quantile" for m in self.metrics)

    @property
    def public(self) -> bool:
        """Public groups (no partition selection)."""
        return self.groups is not None


def plan_event(plan: AggregatePlan):
    """The call's event: the composition of its parts, each a ``PureDP(eps_i)`` or an
    ``ApproxDP(eps_i, delta_i)`` release under add/remove neighbours (the basic-composition
    guarantee stated in :func:`aggregate`; an accountant may compose them more tightly)."""
    return Composed(tuple(PureDP(float(e)) if d == 0 else ApproxDP(float(e), float(d))
                          for e, d in plan.budget.values()))


def public_groups(groups, by_cols) -> pd.Index:
    """The index of public ``groups`` (a MultiIndex for several ``by`` columns); duplicates raise."""
    glist = list(groups)
    by_cols = list(by_cols)
    idx = (pd.MultiIndex.from_tuples(glist, names=by_cols) if len(by_cols) > 1
           else pd.Index(glist, name=by_cols[0]))
    if idx.has_duplicates:
        raise ValueError("groups must not contain duplicates")
    return idx


def parse_metrics(metrics, columns) -> tuple:
    if not isinstance(metrics, Mapping) or not metrics:
        raise TypeError("metrics must be a non-empty dict {name: 'count' | (kind, column[, q])}")
    parsed = []
    for name, spec in metrics.items():
        if not isinstance(name, str):
            raise TypeError(f"metric names must be strings, got {name!r}")
        if isinstance(spec, str):
            spec = (spec,)
        if not isinstance(spec, tuple) or not spec or spec[0] not in KINDS:
            raise ValueError(f"metric {name!r}: spec must be 'count' or (kind, column[, q]) with kind in "
                             f"{sorted(KINDS)}, got {spec!r}")
        kind = spec[0]
        want = 1 + (0 if kind == "count" else 1 + (kind == "quantile"))
        if len(spec) != want:
            raise ValueError(f"metric {name!r}: {kind!r} takes {want - 1} argument(s) after the kind, got {spec!r}")
        col = spec[1] if kind != "count" else None
        if col is not None and col not in columns:
            raise ValueError(f"metric {name!r}: unknown column {col!r}")
        q = None
        if kind == "quantile":
            q = spec[2]
            if isinstance(q, (bool, np.bool_)) or not isinstance(q, numbers.Real) or not 0.0 <= float(q) <= 1.0:
                raise ValueError(f"metric {name!r}: quantile level must be a number in [0, 1], got {q!r}")
            q = float(q)
        parsed.append(MetricSpec(name, kind, col, q))
    return tuple(parsed)


def check_bounds_map(bounds, cols) -> dict:
    if bounds is None:
        bounds = {}
    if not isinstance(bounds, Mapping):
        raise TypeError("bounds must be a dict {column: (lo, hi)}")
    out = {}
    for col in cols:
        if col not in bounds:
            raise ValueError(f"bounds: missing (lo, hi) for value column {col!r}")
        b = bounds[col]
        try:
            lo, hi = (float(b[0]), float(b[1]))
            if len(b) != 2:
                raise ValueError
        except (TypeError, ValueError, IndexError):
            raise TypeError(f"bounds[{col!r}] must be a pair (lo, hi) of finite numbers, got {b!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"bounds[{col!r}] must be finite, got {b!r}")
        if lo > hi:
            raise ValueError(f"bounds[{col!r}]: lo must be <= hi, got {b!r}")
        out[col] = (lo, hi)
    return out




def check_granularity(granularity, value_cols, bnds) -> dict:
    """Lattice step per value column for the discrete noises: a positive power of two.

    Default ``2^(ceil(log2 max(|lo|, |hi|)) - 20)`` (values rounded to ~20 bits over the range).
    Powers of two keep ``round(x / gamma)`` and ``k * gamma`` exact in binary floating point.
    """
    if granularity is None:
        granularity = {}
    if not isinstance(granularity, Mapping):
        raise TypeError("granularity must be a dict {column: power of two > 0}")
    for c in granularity:
        if c not in value_cols:
            raise ValueError(f"granularity: {c!r} is not a value column of the metrics; allowed {value_cols}")
    out = {}
    for col in value_cols:
        lo, hi = bnds[col]
        mx = max(abs(lo), abs(hi))
        if col in granularity:
            g = granularity[col]
            if isinstance(g, (bool, np.bool_)) or not isinstance(g, numbers.Real) or not 0 < float(g) < math.inf \
                    or math.frexp(float(g))[0] != 0.5:
                raise ValueError(f"granularity[{col!r}] must be a positive power of two (e.g. 2**-10), got {g!r}")
            g = float(g)
        else:
            g = 2.0 ** (math.frexp(mx)[1] - _LATTICE_BITS) if mx > 0 else 1.0
        if mx / g > 2.0 ** 30:
            raise ValueError(f"granularity[{col!r}] = {g} is too fine for bounds {bnds[col]}: "
                             f"max(|lo|, |hi|) / granularity must be <= 2^30")
        out[col] = g
    return out


def build_plan(columns, privacy_unit, by, metrics, bounds, max_groups_per_unit, max_rows_per_group, epsilon,
               delta, groups, noise, weights, ci_level, selection, granularity) -> AggregatePlan:
    """The typed plan of one :func:`dpfast.tables.aggregate` call, from its public parameters
    and the frame's column names only (no row is read): every check of a parameter, and the
    budget split (see :func:`aggregate`, item 6).  Raises ``ValueError`` / ``TypeError``."""
    if privacy_unit not in columns:
        raise ValueError(f"privacy_unit: unknown column {privacy_unit!r}")
    by_cols = [by] if isinstance(by, str) else list(by) if isinstance(by, (list, tuple)) else None
    if not by_cols:
        raise TypeError(f"by must be a column name or a non-empty list of column names, got {by!r}")
    for c in by_cols:
        if c not in columns:
            raise ValueError(f"by: unknown column {c!r}")
    parsed = parse_metrics(metrics, columns)
    value_cols = sorted({m.column for m in parsed if m.column is not None})
    bnds = check_bounds_map(bounds, value_cols)
    for col, (lo, hi) in bnds.items():
        if max(abs(lo), abs(hi)) > _MAX_ABS_BOUND:
            raise ValueError(f"bounds[{col!r}] must be at most 2^450 in magnitude (sums of squares must not "
                             f"overflow), got {(lo, hi)!r}")
    l0 = check_int(max_groups_per_unit, "max_groups_per_unit")
    linf = check_int(max_rows_per_group, "max_rows_per_group")
    for v, nm in ((l0, "max_groups_per_unit"), (linf, "max_rows_per_group")):
        if v > _MAX_CONTRIB:  # the native kernel counts in int64
            raise ValueError(f"{nm} must be <= 2**63 - 1, got {v!r}")
    epsilon = check_epsilon(epsilon, allow_array=False)
    delta = check_delta(delta)
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    discrete = noise in ("discrete", "discrete_gaussian")
    if discrete and any(m.kind == "quantile" for m in parsed):
        raise ValueError(f"noise={noise!r}: quantile metrics have no floating-point-safe sampler here "
                         "(the exponential mechanism draws doubles); use noise='laplace' or 'gaussian'")
    if groups is None and delta == 0:
        raise ValueError("delta must be > 0 with groups=None (private partition selection is "
                         "(epsilon, delta)-DP); pass public groups for delta = 0")
    gaussian_metrics = noise in ("gaussian", "discrete_gaussian") and any(m.kind != "quantile" for m in parsed)
    if gaussian_metrics and delta == 0:
        raise ValueError(f"delta must be in (0, 1) with noise={noise!r}")
    gran = check_granularity(granularity, value_cols, bnds) if discrete else None
    if ci_level is not None:
        if isinstance(ci_level, (bool, np.bool_)) or not isinstance(ci_level, numbers.Real) \
                or not 0.0 < check_real(ci_level, "ci_level") < 1.0:  # (check_real: a Fraction
            raise ValueError(f"ci_level must be in (0, 1), got {ci_level!r}")  # beyond a double -> ValueError)
        ci_level = float(ci_level)
    if "selection" in [m.name for m in parsed]:
        raise ValueError("metric name 'selection' is reserved (budget weight of partition selection)")
    columns_out = _output_columns(parsed, ci_level)
    parts = [m.name for m in parsed] + (["selection"] if groups is None else [])
    weights = {} if weights is None else weights
    if not isinstance(weights, Mapping):
        raise TypeError("weights must be a dict {metric name or 'selection': weight > 0}")
    for k in weights:
        if k not in parts:
            raise ValueError(f"weights: unknown part {k!r}; allowed {parts}")
    w = {}
    for p in parts:
        v = weights.get(p, 1.0)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            raise ValueError(f"weights[{p!r}] must be a real number > 0, got {v!r}")
        w[p] = check_positive(check_real(v, f"weights[{p!r}]"), f"weights[{p!r}]", allow_array=False)
    kinds = {m.name: m.kind for m in parsed}
    needs_delta = [p for p in parts if p == "selection" or
                   (noise in ("gaussian", "discrete_gaussian") and kinds[p] != "quantile")]
    eps_sh = _shares(epsilon, {p: w[p] for p in parts})
    dlt_sh = _shares(delta, {p: w[p] for p in needs_delta}) if needs_delta else {}
    budget = {p: (eps_sh[p], dlt_sh.get(p, 0.0)) for p in parts}
    for p, (e, d) in budget.items():
        if e == 0.0 or (p in needs_delta and d == 0.0):
            which = "epsilon" if e == 0.0 else "delta"
            raise ValueError(f"{which}={epsilon if e == 0.0 else delta!r} is too small to split over "
                             f"{len(parts)} parts: the share of {p!r} rounds to 0.0; raise {which} or "
                             f"the weight of {p!r}")
    if groups is not None:
        groups = list(groups)  # once: an iterator must not be used up by this check
        public_groups(groups, by_cols)  # duplicates: a public-parameter error, raised here
    return AggregatePlan(privacy_unit=privacy_unit, by_cols=tuple(by_cols), metrics=parsed,
                         value_cols=tuple(value_cols), bounds=bnds, l0=l0, linf=linf, epsilon=epsilon, delta=delta,
                         noise=noise, selection=selection, granularity=gran, ci_level=ci_level, budget=budget,
                         groups=None if groups is None else tuple(groups), columns=tuple(columns_out))


def _output_columns(parsed, ci_level) -> list:
    """The output's columns, a function of the metrics and ci_level only; a name used twice
    (a metric called ``<m>_lo`` next to the CI column of ``m``) is refused, never overwritten."""
    cols = []
    for m in parsed:
        cols.append(m.name)
        if ci_level is not None and m.kind in ("count", "sum", "mean"):
            cols += [m.name + "_lo", m.name + "_hi"]
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise ValueError(f"output column name(s) {dup} would be used twice: with ci_level set, count, sum "
                         "and mean metrics add '<name>_lo' and '<name>_hi' columns; rename the metric")
    return cols


def _shares(total: float, weights: dict) -> dict:
    """``total`` split in proportion to ``weights``, the float sum of the shares <= total.

    Each round lowers every share by at least one ulp (multiplying by ``1 - 2^-50`` alone makes
    no progress on subnormals), so the loop ends after a few rounds for any input."""
    top = max(weights.values())
    wsum = math.fsum(v / top for v in weights.values())  # normalised: no overflow for huge weights
    sh = {p: total * ((v / top) / wsum) for p, v in weights.items()}
    while sum(sh.values()) > total:
        sh = {p: min(v * (1 - 2.0 ** -50), math.nextafter(v, 0.0)) for p, v in sh.items()}
    return sh


