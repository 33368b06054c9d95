"""Dask path of the private linear models (issue 9): fit and predict on dask collections.

The estimator classes call into this module when X is a Dask collection; NumPy users never
import dask.  Only :func:`is_dask_collection` is needed without dask installed.
"""
from __future__ import annotations

import sys

__all__ = ["is_dask_collection"]


def is_dask_collection(X) -> bool:
    """True for a dask Array, DataFrame or Series (dask is imported only if already loaded).

    An object that is a dask collection can only exist once dask has been imported, so the
    check costs nothing (and imports nothing) for NumPy/SciPy input.
    """
    if "dask" not in sys.modules:
        return False
    try:
        from dask.base import is_dask_collection as _is
    except ImportError:  # pragma: no cover - a broken dask install
        return False
    if not _is(X):
        return False
    mod = type(X).__module__ or ""
    return mod.startswith("dask.array") or mod.startswith("dask.dataframe") or mod.startswith("dask_expr")
