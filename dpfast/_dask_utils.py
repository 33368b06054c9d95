"""Input checks shared by dpfast's Dask paths (linear models, DP-GD; issue 9).

dask is imported only when a Dask collection is actually given: :func:`is_dask_collection`
looks at ``sys.modules`` first, so NumPy users never pay for it.
"""
from __future__ import annotations

import math
import sys

import numpy as np

__all__ = ["is_dask_collection", "active_client", "scatter_chunks"]


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


def is_frame(X) -> bool:
    mod = type(X).__module__ or ""
    return mod.startswith("dask.dataframe") or mod.startswith("dask_expr")


def as_dask_rows(X, name: str = "X"):
    """A 2-d dask Array of reals chunked along rows only, with known chunk sizes."""
    import dask.array as da

    if is_frame(X):
        if getattr(X, "ndim", 2) != 2:
            raise ValueError(f"{name} must be 2-d (a DataFrame, not a Series)")
        kinds = [np.dtype(t).kind for t in X.dtypes]
        bad = [str(c) for c, k in zip(X.columns, kinds) if k not in "biuf"]
        if bad:
            raise TypeError(f"{name} must hold real numbers; columns {bad[:5]} are not numeric")
        X = X.to_dask_array(lengths=True)
    if not isinstance(X, da.Array):
        raise TypeError(f"{name} must be a dask Array or DataFrame, got {type(X).__name__}")
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-d (n_samples, n_features), got {X.ndim}-d")
    if any(math.isnan(c) for c in X.chunks[0]):
        raise ValueError(f"{name} has unknown chunk sizes; call {name}.compute_chunk_sizes() "
                         "(or DataFrame.to_dask_array(lengths=True)) first")
    if len(X.chunks[1]) != 1:
        raise ValueError(f"{name} is chunked across columns (column chunks {X.chunks[1]}); every chunk must hold "
                         f"whole rows: use {name}.rechunk({{1: -1}})")
    if X.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {X.dtype}")
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} must have at least one row and one column, got shape {X.shape}")
    return X


def row_vector(v, row_chunks, name: str):
    """A per-row Dask vector (Array or Series) checked against X's row chunks: a 1-d dask Array
    chunked like X (ValueError naming what is wrong otherwise)."""
    import dask.array as da

    if is_frame(v):
        if getattr(v, "ndim", 1) != 1:
            raise ValueError(f"{name} must be 1-d (a Series or a 1-d array)")
        v = v.to_dask_array(lengths=True)
    if not isinstance(v, da.Array) or v.ndim != 1:
        raise ValueError(f"{name} must be a 1-d dask Array or Series")
    if any(math.isnan(c) for c in v.chunks[0]):
        raise ValueError(f"{name} has unknown chunk sizes; call {name}.compute_chunk_sizes() first")
    if tuple(v.chunks[0]) != tuple(row_chunks):
        raise ValueError(f"{name} has row chunks {tuple(v.chunks[0])[:6]}... but X has {tuple(row_chunks)[:6]}...: "
                         f"chunk {name} like X's rows (e.g. {name}.rechunk(X.chunks[0]))")
    return v


def local_vector(v, row_chunks, name: str):
    """A per-row vector given as NumPy or Dask, gathered to the client (None stays None)."""
    if v is None or not is_dask_collection(v):
        return v
    return np.asarray(row_vector(v, row_chunks, name).compute())


def active_client():
    """The distributed Client of the current context, or None (no distributed scheduler).

    Per-row vectors (labels, weights) go to the workers with ``Client.scatter`` when there is
    one: a NumPy array wrapped in ``dask.delayed`` travels inside the graph, through the
    scheduler, which dask advises against for data of more than a few MB.
    """
    if "distributed" not in sys.modules:
        return None
    try:
        from distributed import get_client
        return get_client()
    except (ImportError, ValueError):  # ValueError: no client in this context
        return None


def scatter_chunks(v, starts, dtype=None) -> list:
    """``v[starts[k]:starts[k+1]]`` for every row chunk k, held by the cluster (None: Nones).

    With a distributed Client the pieces are scattered to every worker (``broadcast=True``: a
    lost worker leaves a copy, so a fit survives it; the pieces are one number per row, small
    next to X).  Without one (threaded or synchronous scheduler) they are persisted delayed
    values.  Either way each later pass refers to them by key and sends no data.
    """
    k = len(starts) - 1
    if v is None:
        return [None] * k
    import dask

    pieces = [np.ascontiguousarray(v[a:b], dtype=dtype) for a, b in zip(starts[:-1], starts[1:])]
    client = active_client()
    if client is not None:
        return list(client.scatter(pieces, broadcast=True, hash=True))
    return list(dask.persist(*[dask.delayed(p, pure=True) for p in pieces]))

