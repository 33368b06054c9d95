"""Differentially private statistics over tables (grouped aggregates with contribution bounding).

:func:`aggregate` releases counts, sums, means, variances and quantiles per group of a pandas
DataFrame in which one privacy unit (a person) may own many rows.  See its docstring for the
guarantee, the neighbouring relation and the budget split (Wilson et al. 2020, "Differentially
private SQL with bounded user contribution"; Desfontaines et al. 2022, "Differentially private
partition selection").

This slice covers pandas DataFrames in memory; Dask input and a native group-by kernel are
not implemented yet (issue 10).  Needs pandas (``pip install dpfast[tables]``).
"""
try:
    import pandas as _pandas  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("dpfast.tables needs pandas >= 2.0: pip install 'dpfast[tables]'") from exc

from dpfast.tables._aggregate import aggregate, selection_threshold

__all__ = ["aggregate", "selection_threshold"]
