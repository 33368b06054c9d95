"""Dask path of the private linear models (issue 9): fit and predict on Dask collections.

``LogisticRegression`` / ``LinearRegression`` send a ``dask.array.Array`` (chunked along rows,
every chunk holding all the columns) or a ``dask.dataframe.DataFrame`` here.  The plan:

* One validation pass over the chunks (on the workers): the estimator's own row map
  (``_transform_rows``: the norm check, or the scale factors of ``row_norm="normalize"``/
  ``"clip"``), NaN/inf detection, and the squared norms of the mapped rows (the native kernel derives the
  clipping bounds C/||x_i|| from them in each pass).
  The scale factors and bounds (two float64 per row) stay on the workers (``persist``); a bad
  chunk raises ``ValueError`` naming the chunk and its rows, before anything is calibrated,
  charged or drawn.
* Labels and sample weights (one number per row) are gathered to the client, validated there
  by the estimator's ``fit`` exactly as for NumPy input, and scattered back once per model
  (``Client.scatter`` to every worker under distributed, not inside a graph).
* The calibration, the budget charge and every noise draw are the estimator's in-memory code
  (``_fit_problems`` and :func:`~dpfast.linear_model._mechanisms._fit_calibrated`), run on the
  client from ``random_state``.  Only the minimisation differs: the native L-BFGS of the
  in-memory path runs on the client (``dpfast._glm.minimize_callable``, the same iterations),
  and each evaluation of F and grad F is one Dask graph: the native loss-and-gradient kernel
  on every chunk (row map and intercept inside the kernel, partial sums in float64), the d + 1
  numbers per chunk combined on the client in chunk order.  Per iteration the client sends
  theta (d floats) to every chunk's task and receives d + 1 floats per chunk.
* Certification ``||grad F||_2 <= tau`` is on that exact full gradient; when L-BFGS has not
  reached tau within ``max_iter``, the certified Nesterov continuation of the in-memory path
  runs on the same Dask gradient (:mod:`dpfast.linear_model._certify`).

Determinism: a chunk's partial sums depend only on the chunk (the kernel's row partition
depends on the chunk's shape, never on threads), and the client adds them in chunk order, so
the released model is bit-identical for any number of workers and threads.  Against the
in-memory fit of the same data the only difference is the grouping of the float64 partial sums
(chunks of the Dask array instead of the kernel's own row blocks), a relative change of the
gradient of order 1e-16 per evaluation; the solver's points then agree to about 1e-12 relative
(the tests assert 1e-6, the issue's bound).  A different chunking of the same data can change
the released model at that level too.

Faults: a task that fails (a killed worker whose data Dask cannot recompute, a bad chunk) makes
the evaluation raise inside the solver, and the exception leaves ``fit`` before the output noise
is drawn or any attribute is set: no partial or uncertified model is returned.  When Dask
recomputes the lost chunks (the usual case: the graph holds their lineage) the evaluation
returns the same numbers and the fit the same model.

Out of core: a ``.npy`` larger than memory is read chunk by chunk through
:func:`dpfast.io.read_npy_rows` (memory-mapped views; ``dask.array.from_array`` would
copy a memmap whole), or from zarr/HDF5 through dask's own readers; memory then holds the chunks
in flight, two float64 per row (row scale, squared norm) and the labels.

Passes over X: one validation pass, then one per L-BFGS evaluation (about 1.1 per iteration;
a fit to the default tau = 0.01 takes 10-40), per one-vs-rest model.  SAG/SAGA need random
access to rows and are not offered on Dask (``solver`` must be ``"lbfgs"``).

Randomness inside ``map_blocks``: the estimators draw all their noise on the client.  Users
who call dpfast's mechanisms per chunk must give every chunk its own stream: passing
``rng=0`` (or one Generator, which is pickled into every task) repeats the *same* noise in every
chunk.  :func:`chunk_rngs` returns independent per-chunk streams::

    rngs = chunk_rngs(x.numblocks[0], seed=entropy)        # SeedSequence.spawn
    noisy = x.map_blocks(lambda b, block_info=None: dpfast.laplace(
        b, sensitivity=1.0, epsilon=1.0, rng=rngs[block_info[0]["chunk-location"][0]]), dtype=x.dtype)

(reproducible from ``seed``).  For the floating-point-safe samplers, use
``dpfast.random.SecureRandom``: it refuses to be pickled (a copy would replay the secret stream),
so it cannot be shipped into a task; create ``SecureRandom()`` inside the task instead (each one
keys itself from ``os.urandom``, independent of every other), or, with a threaded scheduler,
hand chunk k the k-th of ``SecureRandom().spawn(x.numblocks[0])``.
"""
from __future__ import annotations

import math

import numpy as np

from dpfast._dask_utils import _as_dask_rows, _chunk_name, _is_frame, _local_vector, is_dask_collection, scatter_chunks

__all__ = ["is_dask_collection", "fit", "decision_function", "predict", "predict_proba", "score", "chunk_rngs",
           "DaskRows"]


def chunk_rngs(count: int, seed=None):
    """``count`` independent NumPy Generators, one per chunk (``SeedSequence(seed).spawn``).

    For mechanisms called inside ``map_blocks``: one seed or Generator shared by every task
    repeats the same noise in every chunk (module docstring).  ``seed`` None draws fresh
    entropy from the OS.
    """
    from dpfast._validation import check_int

    count = check_int(count, "count")
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(count)]


# ----------------------------------------------------------------------------- chunk tasks

def _block_prepare(block, est, R, icpt, k, starts):
    """Validation pass of chunk k: the estimator's row map, then the kernel's row norms.

    Returns an (n_k, 2) float64 array: column 0 the row scale (1 for no map), column 1 the
    squared norm of the mapped row (the kernel turns it into the clipping bound C/||x_i||).
    """
    from dpfast import _glm

    block = np.ascontiguousarray(block)
    try:
        scale = est._transform_rows(block, R, fitting=True)
    except ValueError as exc:
        raise ValueError(f"{_chunk_name(k, starts)}: {exc}") from None
    scale = np.ones(block.shape[0]) if scale is None else np.ascontiguousarray(scale, dtype=np.float64)
    ok, v = _glm.row_bounds(block, block.shape[0], block.shape[1], scale, icpt, 0.0, 1)
    if not ok:
        raise ValueError(f"{_chunk_name(k, starts)}: X contains NaN or infinite entries (or a row whose norm overflows)")
    return np.column_stack([scale, v])


def _block_fg(block, aux, y, w, theta, code, delta, clip, icpt):
    """Data part of F and grad F on one chunk: [f, g_0 .. g_{d'-1}] (float64)."""
    from dpfast import _glm

    block = np.ascontiguousarray(block)
    scale, sq = np.ascontiguousarray(aux[:, 0]), np.ascontiguousarray(aux[:, 1])
    f, g = _glm.chunk_loss_grad(block, block.shape[0], block.shape[1], y, w, code, delta, sq, clip, scale, icpt,
                                theta, 1)
    return np.concatenate([[f], g])


def _block_sq(aux):
    return float(np.sum(aux[:, 1]))


# ----------------------------------------------------------------------------- design objects

class DaskRows:
    """Rows of a Dask array as the estimator's ``_fit_problems`` sees them (``_dpfast_chunked``).

    ``shape``/``dtype`` are X's; ``design(est, R, s)`` runs the validation pass with the
    estimator's row map and returns a :class:`DaskDesign`.
    """

    _dpfast_chunked = True
    ndim = 2

    def __init__(self, X):
        self.X = X
        self.shape = tuple(int(v) for v in X.shape)
        self.dtype = X.dtype
        self.row_chunks = tuple(int(c) for c in X.chunks[0])

    def design(self, est, R, s, **_):
        return DaskDesign(self, est, float(R), float(s))


class DaskDesign:
    """The design ``[scale_i x_i, s]`` of a Dask array: its minimiser runs on the client, its
    gradient passes on the workers (module docstring)."""

    def __init__(self, rows: DaskRows, est, R: float, s: float):
        import dask

        self.rows = rows
        self.est = est
        self.R = R
        self.intercept = s
        n, d = rows.shape
        self.shape = (n, d + (s != 0.0))
        self.dtype = rows.dtype
        self._dask = dask
        # the validation pass, now: before calibration, budget charge or any draw (all
        # one-vs-rest models share its scale factors and norms, kept on the workers)
        blocks = rows.X.to_delayed().ravel()
        starts = np.concatenate([[0], np.cumsum(rows.row_chunks)]).tolist()
        est_d = dask.delayed(est, pure=True)
        aux = [dask.delayed(_block_prepare, pure=True)(b, est_d, R, s, k, starts) for k, b in enumerate(blocks)]
        self._aux = list(dask.persist(*aux))
        dask.compute(*[dask.delayed(len)(a) for a in self._aux])  # a bad chunk raises here

    def _scatter(self, v):
        """A client vector cut into X's row chunks, held by the cluster (``scatter_chunks``)."""
        starts = np.concatenate([[0], np.cumsum(self.rows.row_chunks)])
        return scatter_chunks(v, starts, np.float64)

    def oracle(self, y, loss, *, alpha, linear, clip, sample_weight, huber_delta):
        """``fg(theta) -> (F, grad F)``: one Dask graph per call, partial sums added in chunk order."""
        from dpfast.linear_model._solver import _check_delta, _check_loss

        dask = self._dask
        code, delta = _check_loss(loss), _check_delta(huber_delta)
        c = 0.0 if clip is None else float(clip)
        aux = self._aux
        ys, ws = self._scatter(y), self._scatter(sample_weight)
        blocks = self.rows.X.to_delayed().ravel()
        d = self.shape[1]
        a = float(alpha)
        lin = None if linear is None else np.asarray(linear, dtype=np.float64)

        def fg(theta):
            th = np.ascontiguousarray(theta, dtype=np.float64)
            tasks = [dask.delayed(_block_fg, pure=True)(b, x, yk, wk, th, code, delta, c, self.intercept)
                     for b, x, yk, wk in zip(blocks, aux, ys, ws)]
            parts = dask.compute(*tasks)
            f = 0.0
            g = np.zeros(d)
            for p in parts:  # chunk order: the same sums for any number of workers
                f += p[0]
                g += p[1:]
            # regulariser and linear term as the native Evaluator adds them
            if a != 0.0:
                f += 0.5 * a * float(th @ th)
                g += a * th
            if lin is not None:
                f += float(lin @ th)
                g += lin
            return f, g

        return fg

    def weighted_sq_norms(self, sample_weight) -> float:
        """sum_i w_i ||x_i'||^2 of the mapped rows (from the persisted norms; for the certified fallback)."""
        dask = self._dask
        aux = self._aux
        if sample_weight is None:
            parts = dask.compute(*[dask.delayed(_block_sq)(x) for x in aux])
            return float(math.fsum(parts))
        ws = self._scatter(sample_weight)
        parts = dask.compute(*[dask.delayed(lambda x, w: float(np.dot(w, x[:, 1])))(x, w) for x, w in zip(aux, ws)])
        return float(math.fsum(parts))

    def minimize_certified(self, y, loss, *, alpha, linear, clip, sample_weight, huber_delta, solver, tol, max_iter,
                           gen, lipschitz):
        """The Dask counterpart of ``_mechanisms._minimize_certified`` (same solver, same rule)."""
        from dpfast import _glm
        from dpfast.linear_model._certify import certified_descent, check_certifiable
        from dpfast.linear_model._solver import loss_constants

        if solver != "lbfgs":
            raise ValueError(f"solver={solver!r} needs random access to rows; Dask fits use solver='lbfgs'")
        n = self.shape[0]
        b_norm = 0.0 if linear is None else float(np.linalg.norm(linear))
        check_certifiable(tol, 2.0 * (n * lipschitz + b_norm))
        fg = self.oracle(y, loss, alpha=alpha, linear=linear, clip=clip, sample_weight=sample_weight,
                         huber_delta=huber_delta)
        theta = np.zeros(self.shape[1])
        n_iter, _n_eval, _conv, _fun, gnorm, _status = _glm.minimize_callable(fg, theta, float(tol), int(max_iter), 10)
        if gnorm <= tol:
            return theta, float(gnorm), int(n_iter), "lbfgs"
        curvature = loss_constants(loss, huber_delta)[1]
        weighted = self.weighted_sq_norms(sample_weight)
        coef, gn, passes = certified_descent(lambda th: fg(th)[1], theta, tol=tol, strong_convexity=alpha,
                                             smoothness=alpha + curvature * weighted)
        return coef, gn, int(n_iter) + passes, "nesterov"


# ----------------------------------------------------------------------------- estimator API

def fit(est, X, y, sample_weight=None, **kwargs):
    """``est.fit`` for a Dask X (module docstring): validation on the workers, calibration,
    budget charge and noise on the client, each gradient pass a Dask graph."""
    if getattr(est, "solver", "lbfgs") != "lbfgs":
        raise ValueError(f"solver={est.solver!r} needs random access to rows; Dask fits use solver='lbfgs'")
    Xd = _as_dask_rows(X)
    rows = DaskRows(Xd)
    y_local = _local_vector(y, rows.row_chunks, "y")
    w_local = _local_vector(sample_weight, rows.row_chunks, "sample_weight")
    if not is_dask_collection(y) and y is not None and np.shape(y)[:1] != (rows.shape[0],):
        raise ValueError(f"y has {np.shape(y)[:1]} entries but X has {rows.shape[0]} rows")
    est.fit(rows, y_local, w_local, **kwargs)
    if _is_frame(X):
        est.feature_names_in_ = np.asarray([str(c) for c in X.columns], dtype=object)
    return est


def _prediction_input(est, X):
    Xd = _as_dask_rows(X)
    n_in = getattr(est, "n_features_in_", None)
    if n_in is not None and Xd.shape[1] != n_in:
        raise ValueError(f"X has {Xd.shape[1]} features, the model was fitted with {n_in}")
    return Xd


def decision_function(est, X):
    """Lazy ``est.decision_function`` chunk by chunk (a dask Array)."""
    Xd = _prediction_input(est, X)
    k = np.atleast_2d(est.coef_).shape[0]
    if k == 1:
        return Xd.map_blocks(lambda b: est.decision_function(b), drop_axis=1, dtype=np.float64)
    return Xd.map_blocks(lambda b: est.decision_function(b), chunks=(Xd.chunks[0], (k,)), dtype=np.float64)


def predict(est, X):
    """Lazy ``est.predict`` chunk by chunk (a dask Array)."""
    Xd = _prediction_input(est, X)
    dtype = est.classes_.dtype if hasattr(est, "classes_") else np.float64
    return Xd.map_blocks(lambda b: est.predict(b), drop_axis=1, dtype=dtype)


def predict_proba(est, X):
    """Lazy ``est.predict_proba`` chunk by chunk (a dask Array)."""
    Xd = _prediction_input(est, X)
    k = len(est.classes_)
    return Xd.map_blocks(lambda b: est.predict_proba(b), chunks=(Xd.chunks[0], (k,)), dtype=np.float64)


def score(est, X, y, sample_weight=None) -> float:
    """Mean accuracy (classifiers) or R^2 (regressors), computed with one Dask pass."""
    import dask
    import dask.array as da

    Xd = _prediction_input(est, X)
    yv = _as_vector_like(y, Xd, "y")
    wv = _as_vector_like(sample_weight, Xd, "sample_weight")
    pred = predict(est, Xd)
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
        if _is_frame(v):
            v = v.to_dask_array(lengths=True)
        if v.ndim != 1 or tuple(v.chunks[0]) != tuple(Xd.chunks[0]):
            raise ValueError(f"{name} must be 1-d with X's row chunks {tuple(Xd.chunks[0])[:6]}...")
        return v
    v = np.asarray(v)
    if v.shape != (Xd.shape[0],):
        raise ValueError(f"{name} must have shape ({Xd.shape[0]},), got {v.shape}")
    return da.from_array(v, chunks=(Xd.chunks[0],))

