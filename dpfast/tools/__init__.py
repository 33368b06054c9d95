"""NumPy-like private array statistics: :mod:`dpfast.tools`.

Functions with NumPy's signatures (``axis``, ``dtype``, ``keepdims`` where NumPy has them)
plus ``epsilon``, ``bounds``, ``rng`` and the keyword-only ``budget``.  See
:mod:`dpfast.tools._statistics` for the neighbouring relation and the calibration,
:mod:`dpfast.tools._bounds` for the private estimation of bounds and
:mod:`dpfast.tools._aggregate` for subsample-and-aggregate.
"""
from dpfast.tools._aggregate import subsample_and_aggregate
from dpfast.tools._bounds import bounds
from dpfast.tools._statistics import (
                                      count_nonzero,
                                      histogram,
                                      histogram2d,
                                      histogramdd,
                                      mean,
                                      median,
                                      nanmean,
                                      nanstd,
                                      nansum,
                                      nanvar,
                                      percentile,
                                      quantile,
                                      std,
                                      sum,
                                      var,
)

__all__ = ["mean", "var", "std", "sum", "nanmean", "nanvar", "nanstd", "nansum", "count_nonzero",
           "quantile", "median", "percentile", "histogram", "histogram2d", "histogramdd", "bounds",
           "subsample_and_aggregate"]
