"""Differentially private statistics over tables (grouped aggregates with contribution bounding).

:func:`aggregate` releases counts, sums, means, variances and quantiles per group of a pandas
or Dask DataFrame in which one privacy unit (a person) may own many rows.  See its docstring
for the guarantee, the neighbouring relation and the budget split (Wilson et al. 2020,
"Differentially private SQL with bounded user contribution"; Desfontaines et al. 2022,
"Differentially private partition selection").  Grouping, bounding and sums run in native code
(``dpfast._tables``).  :func:`aggregate` needs pandas (``pip install dpfast[tables]``); Dask
input needs dask[dataframe].  The selection formulas (:func:`selection_threshold`,
:func:`selection_probabilities`) need NumPy only: importing them does not import pandas.
"""
from dpfast.tables._selection import selection_probabilities, selection_threshold

__all__ = ["aggregate", "selection_threshold", "selection_probabilities"]


def __getattr__(name):
    # aggregate is loaded on first use, so that the pandas-free selection formulas can be
    # imported without pandas (and without its import time)
    if name == "aggregate":
        try:
            import pandas  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("dpfast.tables.aggregate needs pandas >= 2.0: pip install 'dpfast[tables]'") from exc
        from dpfast.tables._aggregate import aggregate
        globals()["aggregate"] = aggregate
        return aggregate
    raise AttributeError(f"module 'dpfast.tables' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"aggregate"})
