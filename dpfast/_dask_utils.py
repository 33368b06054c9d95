"""What dpfast's Dask paths share (linear models, DP-GD, tables; issue 9): input checks, the
per-chunk vectors on the cluster, and the predictions and ``score`` of a fitted estimator on a
Dask collection (lazy, chunk by chunk; :class:`dpfast._base.DaskDispatchMixin` routes to them).

dask is imported only when a Dask collection is actually given: :func:`is_dask_collection`
looks at ``sys.modules`` first, so NumPy users never pay for it.
"""
from __future__ import annotations

import math
import sys

import numpy as np

__all__ = ["is_dask_collection", "frame_values", "series_values", "declared_blocks", "active_client", "scatter_chunks", "hold_pieces", "set_feature_names", "decision_function",
           "frame_or_array_rows", "vector_parts", "row_parts", "partials", "check_partials", "add_in_order",
           "fit_rows", "sum_by_partitions", "persist_by_partitions", "finite_rows",
           "PartitionError", "BAD_ROWS", "BAD_DTYPE", "BAD_LENGTH", "BAD_LABELS",
           "predict", "predict_proba", "score"]


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


#: a Dask DataFrame's partition whose dtypes are not real numbers (:func:`_declared_values`)
BAD_DTYPE = "{name} has a partition whose entries are not real numbers (not the dtype its collection declares)"


def _declared_kind(t) -> str:
    """A frame column's declared dtype as a kind: NumPy's (``"f"``, ``"i"``, ...), ``"N"`` for a
    pandas nullable numeric or boolean dtype (``Float64``, ``Int64``, ``boolean``: read as float64,
    a missing value as NaN, as scikit-learn's ``check_array`` and :mod:`dpfast.tools` read them in
    memory), ``"O"`` for anything else (category, string, object, datetime with a zone, ...).
    ``np.dtype`` of an extension dtype raises a message holding the dtype's repr, which for a
    category lists the column's values: never shown."""
    if isinstance(t, np.dtype):
        return t.kind
    import pandas as pd

    if isinstance(t, pd.CategoricalDtype):
        return "O"
    if pd.api.types.is_numeric_dtype(t) or pd.api.types.is_bool_dtype(t):
        return "N"
    return "O"


def _float_values(part):
    """A partition (pandas DataFrame or Series) of numeric/nullable columns as float64, a missing
    value as NaN (:func:`frame_values`)."""
    import pandas as pd

    v = part.to_numpy(dtype=np.float64, na_value=np.nan)
    if v.ndim == 1:
        return pd.Series(v, index=part.index, name=part.name)
    return pd.DataFrame(v, index=part.index, columns=part.columns)


def frame_values(X, name: str = "X", *, lengths: bool = False, message: str | None = None):
    """A Dask DataFrame or Series as a dask Array of its values, by its declared dtypes alone (one
    home for every Dask path): NumPy bool/int/float columns as they are; if any column has a
    pandas nullable numeric or boolean dtype, every column read as float64 on the workers, a
    missing value as NaN (what the same pandas frame gives in memory); any other dtype a
    ``TypeError`` naming the columns (public) and never the dtype (a category's lists the
    values), before anything is read.  ``lengths``: count the partitions' rows
    (``to_dask_array(lengths=True)``).  ``message``: the ``TypeError``'s text (default: names
    the columns)."""
    frame = getattr(X, "ndim", 2) == 2
    dtypes = list(X.dtypes) if frame else [X.dtype]
    cols = [str(c) for c in X.columns] if frame else [str(X.name)]
    kinds = [_declared_kind(t) for t in dtypes]
    bad = [c for c, k in zip(cols, kinds) if k not in "biufN"]
    if bad:
        raise TypeError(message or f"{name} must hold real numbers; columns {bad[:5]} are not numeric")
    nullable = "N" in kinds
    meta = _float_values(X._meta) if nullable else X._meta
    X = X.map_partitions(_declared_values, nullable, BAD_DTYPE.format(name=name), meta=meta)
    return X.to_dask_array(lengths=True) if lengths else X.to_dask_array()


def series_values(v, name: str, *, lengths: bool = False):
    """A Dask Series (a per-row vector: labels, targets, weights) as a 1-d dask Array; one whose
    declared dtype is a NumPy bool/int/float has every partition checked to be one too
    (:func:`_declared_values`: a fixed message, never NumPy's conversion error quoting the
    entry).  Other dtypes (string or object labels) are passed on as they are, for the label
    checks."""
    t = v.dtype
    if isinstance(t, np.dtype) and t.kind in "biuf":
        v = v.map_partitions(_declared_values, False, BAD_DTYPE.format(name=name), meta=v._meta)
    return v.to_dask_array(lengths=True) if lengths else v.to_dask_array()


def _declared_values(part, nullable: bool, message: str):
    """A partition as its frame declares it (:func:`frame_values`): a frame's dtypes are its
    meta's, but a partition can hold others (a reader that infers them per file or block,
    ``from_map(..., enforce_metadata=False)``), and NumPy's conversion of an object partition
    in a later task raised "could not convert string to float: '<the value>'" -- or read
    ``"0.75"`` as 0.75.  A partition whose dtypes are not real numbers (NumPy bool/int/float;
    nullable ones where the frame declares one) raises the fixed :data:`BAD_DTYPE` instead,
    naming no row or value (after the charge where the release reads the data then, like a NaN;
    the Dask contract for bad partitions)."""
    kinds = [_declared_kind(t) for t in (part.dtypes if part.ndim == 2 else [part.dtype])]
    if any(k not in ("biufN" if nullable else "biuf") for k in kinds):
        raise ValueError(message)
    return _float_values(part) if nullable else part


def declared_blocks(X, name: str = "X"):
    """A dask Array of real numbers whose every block is checked to hold real numbers too: a
    block's dtype is its task's (``da.from_delayed(..., dtype=float)`` of an object array), and
    NumPy's conversion of an object block quoted the entry ("could not convert string to float:
    '<the value>'"); such a block raises the fixed :data:`BAD_DTYPE` instead (in the task: after
    the charge where the release reads the data then)."""
    return X.map_blocks(_declared_block, BAD_DTYPE.format(name=name), dtype=X.dtype)


def _declared_block(block, message: str):
    if np.asarray(block).dtype.kind not in "biuf":
        raise ValueError(message)
    return block


def as_dask_rows(X, name: str = "X"):
    """A 2-d dask Array of reals chunked along rows only, with known chunk sizes."""
    import dask.array as da

    if is_frame(X):
        if getattr(X, "ndim", 2) != 2:
            raise ValueError(f"{name} must be 2-d (a DataFrame, not a Series)")
        X = frame_values(X, name, lengths=True)
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
    # (no declared_blocks here: the multi-pass fits find the chunks a cluster holds by their keys,
    # and their validation pass refuses a block that is not float32/float64 before the charge)
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
        v = series_values(v, name, lengths=True)
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
    return hold_pieces([np.ascontiguousarray(v[a:b], dtype=dtype) for a, b in zip(starts[:-1], starts[1:])])


def hold_pieces(pieces) -> list:
    """NumPy pieces (one per row chunk) held by the cluster, as :func:`scatter_chunks` holds them."""
    import dask

    client = active_client()
    if client is not None:
        return list(client.scatter(pieces, broadcast=True, hash=True))
    return list(dask.persist(*[dask.delayed(p, pure=True) for p in pieces]))


# ----------------------------------------------------------------------------- predictions
# (one home for every estimator family: a fitted model's predictions chunk by chunk)

def _names_view(X):
    """What scikit-learn's feature-name checks read of X: for a Dask DataFrame an empty pandas
    frame with its columns (scikit-learn does not recognise Dask frames and would see no names);
    anything else as is."""
    if is_frame(X):
        import pandas as pd

        return pd.DataFrame(columns=X.columns)
    return X


def set_feature_names(est, X) -> None:
    """``feature_names_in_`` after a Dask fit, by scikit-learn's rule for pandas (string column
    names only; mixed types raise ``TypeError``)."""
    from sklearn.utils.validation import _get_feature_names

    names = _get_feature_names(_names_view(X))
    if names is not None:
        est.feature_names_in_ = names


def _prediction_input(est, X):
    """X's rows as a Dask array, after scikit-learn's feature-name check, as for pandas input
    (issue 21, item 12): a DataFrame whose column names or order differ from fit's raises
    ``ValueError``; names on one side only warn, once (not once per chunk)."""
    from sklearn.utils.validation import _check_feature_names

    _check_feature_names(est, _names_view(X), reset=False)
    Xd = as_dask_rows(X)
    n_in = getattr(est, "n_features_in_", None)
    if n_in is not None and Xd.shape[1] != n_in:
        raise ValueError(f"X has {Xd.shape[1]} features, the model was fitted with {n_in}")
    return Xd


def _blockwise(method, tail=(), dtype=np.float64):
    """``method`` on one NumPy chunk, without scikit-learn's "X does not have valid feature
    names" warning: the names were checked once for the whole input (:func:`_prediction_input`).
    A chunk of no rows (a partition a filter emptied) gives an empty output of shape
    ``(0, *tail)`` (``method`` would refuse it: scikit-learn's minimum of one sample)."""
    def call(block):
        import warnings

        if block.shape[0] == 0:
            return np.empty((0, *tail), dtype=dtype)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="X does not have valid feature names", category=UserWarning)
            return method(block)

    return call


def decision_function(est, X):
    """Lazy ``est.decision_function`` chunk by chunk (a dask Array)."""
    Xd = _prediction_input(est, X)
    k = np.atleast_2d(est.coef_).shape[0]
    if k == 1:
        return Xd.map_blocks(_blockwise(est.decision_function), drop_axis=1, dtype=np.float64)
    return Xd.map_blocks(_blockwise(est.decision_function, (k,)), chunks=(Xd.chunks[0], (k,)), dtype=np.float64)


def predict(est, X):
    """Lazy ``est.predict`` chunk by chunk (a dask Array)."""
    return _predict_rows(est, _prediction_input(est, X))


def _predict_rows(est, Xd):
    dtype = est.classes_.dtype if hasattr(est, "classes_") else np.float64
    return Xd.map_blocks(_blockwise(est.predict, dtype=dtype), drop_axis=1, dtype=dtype)


def predict_proba(est, X):
    """Lazy ``est.predict_proba`` chunk by chunk (a dask Array)."""
    Xd = _prediction_input(est, X)
    k = len(est.classes_)
    return Xd.map_blocks(_blockwise(est.predict_proba, (k,)), chunks=(Xd.chunks[0], (k,)), dtype=np.float64)


def score(est, X, y, sample_weight=None) -> float:
    """Mean accuracy (classifiers) or R^2 (regressors), computed with one Dask pass."""
    import dask
    import dask.array as da

    Xd = _prediction_input(est, X)
    yv = _as_vector_like(y, Xd, "y")
    wv = _as_vector_like(sample_weight, Xd, "sample_weight")
    pred = _predict_rows(est, Xd)  # names checked once, above
    w = da.ones_like(yv, dtype=np.float64) if wv is None else wv.astype(np.float64)
    if hasattr(est, "classes_"):
        num, den = dask.compute(da.sum(w * (pred == yv)), da.sum(w))
        return float(num / den)
    yf = yv.astype(np.float64)
    sw, swy = dask.compute(da.sum(w), da.sum(w * yf))
    ybar = swy / sw
    ss_res, ss_tot = (float(v) for v in dask.compute(da.sum(w * (yf - pred) ** 2), da.sum(w * (yf - ybar) ** 2)))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)


def _as_vector_like(v, Xd, name):
    import dask.array as da

    if v is None:
        return None
    if is_dask_collection(v):
        if is_frame(v):
            if getattr(v, "ndim", 1) != 1:
                raise ValueError(f"{name} must be 1-d (a Series or a 1-d array)")
            v = series_values(v, name, lengths=True)
        if v.ndim != 1 or tuple(v.chunks[0]) != tuple(Xd.chunks[0]):
            raise ValueError(f"{name} must be 1-d with X's row chunks {tuple(Xd.chunks[0])[:6]}...")
        return v
    v = np.asarray(v)
    if v.shape != (Xd.shape[0],):
        raise ValueError(f"{name} must have shape ({Xd.shape[0]},), got {v.shape}")
    return da.from_array(v, chunks=(Xd.chunks[0],))



# ----------------------------------------------------------------------------- one-pass releases
# (issue 24: GaussianNB, KMeans, PCA, LinearRegression(method="ssp") and dpfast.tools on Dask)
#
# The plan of every one-pass release on a Dask collection: the public checks on metadata only
# (dtype, number of columns, chunk structure), then the charge, then ONE pass in which every
# partition returns the exact partial statistic of the in-memory code (the same function, called
# on the partition's rows), the partials added on the client in partition order (a fixed order:
# the release does not depend on the number of workers or on which finishes first; the float
# statistics are exact fixed-point integers, dpfast._fixed, added as Python ints: then the release
# does not depend on the partitioning either), then the one
# draw on the client from ``random_state``.  A partition whose data are bad (NaN, a label outside
# the public set, ...) returns one of the fixed messages below instead of numbers: the client
# raises the first one in partition order, after the charge, naming no partition, row or value.

#: the fixed messages of a bad partition (after the charge: they name no chunk, row or value)
BAD_ROWS = "X contains NaN or infinite entries"
BAD_LENGTH = "y (or sample_weight) does not have one entry per row of X"
BAD_LABELS = "y has labels outside the public label set (classes)"


class PartitionError(str):
    """A partition's fixed error message, returned (not raised) by a partition task."""


def frame_or_array_rows(X, name: str = "X", *, known_chunks: bool = False):
    """X as a 2-d dask Array of reals whose chunks hold whole rows, from metadata alone.

    A DataFrame becomes its array of values (numeric dtypes required, checked on the dtypes);
    an array chunked across columns is rechunked lazily to whole rows.  ``known_chunks``: the row
    chunk sizes are needed (a per-row NumPy vector to split like X): a DataFrame's are then
    counted (``to_dask_array(lengths=True)``, a pass that reads the partitions' lengths only);
    otherwise nothing is computed.  Raises ``TypeError``/``ValueError`` naming only ``name``."""
    import dask.array as da

    if is_frame(X):
        if getattr(X, "ndim", 2) != 2:
            raise ValueError(f"{name} must be 2-d (a DataFrame, not a Series)")
        X = frame_values(X, name, lengths=known_chunks)
    if not isinstance(X, da.Array):
        raise TypeError(f"{name} must be a dask Array or DataFrame, got {type(X).__name__}")
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-d (n_samples, n_features), got {X.ndim}-d")
    if X.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {X.dtype}")
    if X.shape[1] == 0:
        raise ValueError(f"{name} must have at least one column")
    if len(X.chunks[1]) != 1:
        X = X.rechunk({1: -1})
    if known_chunks and any(math.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    return declared_blocks(X, name)


def vector_parts(v, X, name: str) -> list:
    """A per-row vector (NumPy, dask Array or Series) as one delayed piece per row chunk of X.

    Dask input must have as many chunks as X has row chunks (and the same sizes where both are
    known: checked here, on metadata); its lengths are checked again in each partition task
    (:data:`BAD_LENGTH`).  NumPy input is split like X (X's chunk sizes must then be known)."""
    import dask.array as da

    nb = X.numblocks[0]
    if is_dask_collection(v):
        if is_frame(v):
            if getattr(v, "ndim", 1) != 1:
                raise ValueError(f"{name} must be 1-d (a Series or a 1-d array)")
            v = series_values(v, name)
        if not isinstance(v, da.Array) or v.ndim != 1:
            raise ValueError(f"{name} must be a 1-d dask Array or Series")
        if v.numblocks[0] != nb:
            raise ValueError(f"{name} has {v.numblocks[0]} chunks but X has {nb} row chunks: chunk {name} like "
                             f"X's rows (e.g. {name}.rechunk(X.chunks[0]))")
        known = not any(math.isnan(c) for c in (*v.chunks[0], *X.chunks[0]))
        if known and tuple(v.chunks[0]) != tuple(X.chunks[0]):
            raise ValueError(f"{name} is not chunked like X's rows: use {name}.rechunk(X.chunks[0])")
        return list(v.to_delayed().ravel())
    a = np.asarray(v)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1 or a.shape[0] != X.shape[0]:
        raise ValueError(f"{name} must be 1-d with one entry per row of X ({X.shape[0]}), got shape {a.shape}")
    return list(da.from_array(a, chunks=(X.chunks[0],)).to_delayed().ravel())


def row_parts(X) -> list:
    """The row chunks of a 2-d dask Array (one column chunk) as delayed pieces, in row order."""
    return list(X.to_delayed().ravel())


def partials(func, parts, *args) -> list:
    """``func(part_0[k], part_1[k], ..., *args)`` for every partition k, computed in one Dask pass
    (one ``dask.compute``), returned in partition order.  ``parts`` is a list of per-partition
    lists of delayed pieces (or None); ``args`` are small public values sent to every task."""
    import dask

    # pure=False: fresh keys, so every release is its own pass (no result of an earlier identical
    # call still held by a scheduler is reused) and no argument is hashed
    f = dask.delayed(func, pure=False)
    tasks = [f(*[p[k] if p is not None else None for p in parts], *args) for k in range(len(parts[0]))]
    return list(dask.compute(*tasks))


def check_partials(parts) -> None:
    """Raise the first partition's fixed error message (:class:`PartitionError`), in partition
    order, as ``ValueError``."""
    for p in parts:
        if isinstance(p, PartitionError):
            raise ValueError(str(p))


def add_in_order(parts, dtype=np.float64):
    """The sum of the partitions' partial statistics (arrays, or tuples of arrays) added one
    after the other in partition order: a fixed order, so the result is a function of the data
    and the partitioning alone (any number of workers or threads gives the same bits).  The sum
    is held in ``dtype`` (float64; int64 for counts, which are then exact; ``object`` for the
    exact fixed-point statistics of :mod:`dpfast._fixed`, Python ints: exact, so the sum is the
    same for EVERY partitioning, not only for a given one)."""
    check_partials(parts)
    first = parts[0]
    if first is None:  # a statistic this release does not have (the same for every partition)
        return None
    if isinstance(first, tuple):
        return tuple(add_in_order([p[j] for p in parts], dtype) for j in range(len(first)))
    total = np.array(first, dtype=dtype, copy=True)
    for p in parts[1:]:
        total += p
    return total


# ----------------------------------------------------------------------------- the one pass
# (what every one-pass Dask release calls: GaussianNB, PCA, KMeans, SSP, the trees, dpfast.tools)

def fit_rows(est, X, *, known_chunks: bool = False):
    """The start of an estimator's Dask ``fit``: X's rows as a 2-d dask Array
    (:func:`frame_or_array_rows`), ``feature_names_in_`` (:func:`set_feature_names`) and
    ``n_features_in_`` set from metadata.  Returns (the rows, n_features)."""
    Xd = frame_or_array_rows(X, known_chunks=known_chunks)
    d = int(Xd.shape[1])
    set_feature_names(est, X)
    est.n_features_in_ = d
    return Xd, d


def finite_rows(x) -> str | None:
    """The default check of a partition's rows: :data:`BAD_ROWS` unless every entry is finite."""
    return None if np.isfinite(x).all() else BAD_ROWS


def _block(block, dtype):
    """A partition's values as a C-contiguous NumPy array: ``"float64"`` converts, ``"float"``
    keeps float32/float64 (anything else becomes float64), None keeps the dtype."""
    if dtype == "float":
        x = np.asarray(block)
        return np.ascontiguousarray(x if x.dtype in (np.float32, np.float64) else x.astype(np.float64))
    return np.ascontiguousarray(block) if dtype is None else np.ascontiguousarray(block, dtype=dtype)


def _by_partition(block, *rest):
    """One partition's task (:func:`sum_by_partitions`): the rows checked, the per-row vectors
    checked for length, then the statistic; or the partition's fixed error message."""
    *vectors, (statistic, dtype, check, fixed_errors, args) = rest
    if isinstance(block, PartitionError):  # a persisted partition that already failed: passed on
        return block
    x = _block(block, dtype)
    if check is not None:
        bad = check(x)
        if bad is not None:
            return PartitionError(bad)
    vs = []
    for v in vectors:
        if v is not None:
            v = np.asarray(v)
            if v.ndim == 2 and v.shape[1] == 1:
                v = v[:, 0]
            if v.shape != (x.shape[0],):
                return PartitionError(BAD_LENGTH)
        vs.append(v)
    if not fixed_errors:
        return statistic(x, *vs, *args)
    try:  # a statistic that checks values itself raises its fixed message: passed on as one
        return statistic(x, *vs, *args)
    except ValueError as exc:
        return PartitionError(str(exc))


def _parts(X) -> list:
    return X if isinstance(X, list) else row_parts(X)


def sum_by_partitions(statistic, X, vectors=(), args=(), *, dtype="float64", check=finite_rows,
                      fixed_errors: bool = False, out_dtype=np.float64):
    """The one pass of a one-pass release on Dask: ``statistic(x_k, *vectors_k, *args)`` on every
    row partition k, in one ``dask.compute``, the partials added in partition order
    (:func:`add_in_order`, in ``out_dtype``: ``object`` for integer statistics that must add
    exactly, e.g. the fixed-point sums of :mod:`dpfast._fixed`); call it after the charge.

    ``X``: a dask Array whose chunks hold whole rows (or a list of per-partition pieces, e.g.
    persisted by :func:`persist_by_partitions`); ``vectors``: per-row vectors as lists of
    per-partition pieces (:func:`vector_parts`) or None; ``args``: small public values sent to
    every task.  Each partition's values become a NumPy array (``dtype``: "float64", "float" or
    None, see :func:`_block`) checked by ``check`` (a function of them returning a fixed message
    or None; None: no check), each vector must have one entry per row (:data:`BAD_LENGTH`);
    with ``fixed_errors`` a ``ValueError`` of the statistic is passed on by its message (which
    must then name no row or value).  A bad partition's message is raised as ``ValueError`` on
    the client, the first in partition order."""
    parts = [_parts(X), *vectors]
    config = (statistic, dtype, check, fixed_errors, tuple(args))
    return add_in_order(partials(_by_partition, parts, config), out_dtype)


def persist_by_partitions(func, X, args=(), *, dtype="float64", check=finite_rows) -> list:
    """``func(x_k, *args)`` on every row partition, held on the workers (``dask.persist``) for the
    later passes of a multi-pass release (k-means): the per-partition pieces, in row order, a
    bad partition's piece being its fixed message (passed on by :func:`sum_by_partitions`)."""
    import dask

    f = dask.delayed(_by_partition, pure=False)
    config = (func, dtype, check, False, tuple(args))
    return list(dask.persist(*[f(b, config) for b in _parts(X)]))
