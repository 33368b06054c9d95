"""Dask path of the private linear models (issue 9): fit and predict on Dask collections.

``LogisticRegression`` / ``LinearRegression`` send a ``dask.array.Array`` (chunked along rows,
every chunk holding all the columns) or a ``dask.dataframe.DataFrame`` here.  The plan:

* One validation pass over the chunks (on the workers) reads the rows, the labels and the
  weights together: the estimator's own row map (``_transform_rows`` on the native kernel's row
  norms: the norm check, or the scale factors of ``row_norm="normalize"``/``"clip"``),
  NaN/inf detection, the squared norms of the mapped rows (the native kernel derives the
  clipping bounds C/||x_i|| from them in each pass), the column sums of the L-BFGS
  preconditioner, and a few values standing in for each chunk's labels and weights
  (:func:`_label_summary`; the weights' extremes).  The scale factors and squared norms (two
  float64 per row) stay on the workers (``persist``), and so do the labels and weights: the
  client checks the summaries with the estimator's own ``validate_y``, label-set and
  ``check_sample_weight`` code, in the order of the in-memory ``fit`` (labels, parameters,
  weights, rows), and raises the in-memory fit's error word for word (a bad chunk of rows: the same ``ValueError``,
  naming no chunk, row or value: where the bad rows are is private), before anything is calibrated, charged or
  drawn.  NumPy labels and weights are checked on the client and scattered once
  (``Client.scatter`` to every worker under distributed).
* The calibration, the budget charge and every noise draw are the estimator's in-memory code
  (``_fit_problems`` and :func:`~dpfast.linear_model._mechanisms._fit_calibrated`), run on the
  client from ``random_state``.  Only the minimisation differs: the native L-BFGS of the
  in-memory path runs on the client (``dpfast._glm.minimize_callable``, the same iterations and
  the same fixed diagonal preconditioner, built from the same column sums), and each evaluation
  of F and grad F is one call per worker (the chunks that worker holds; an actor holding them
  when the cluster holds X, :class:`_ChunkGroup`, else one Dask task per worker or chunk): the
  native loss-and-gradient kernel on every chunk (targets formed from the labels in the task, row
  map and intercept inside the kernel, partial sums in float64), the d + 1 numbers per chunk
  combined on the client in chunk order.  Per iteration the client sends theta (d floats) to
  each task and receives d + 1 floats per chunk.
* Certification ``||grad F||_2 <= tau`` is on that exact full gradient; when L-BFGS has not
  reached tau within ``max_iter``, the certified Nesterov continuation of the in-memory path
  runs on the same Dask gradient (:mod:`dpfast._certify`).

Determinism: a chunk's partial sums depend only on the chunk (the kernel's row partition
depends on the chunk's shape, never on threads), and the client adds them in chunk order, so
the released model is bit-identical for any number of workers and threads (the grouping of
chunks into one task per worker changes no number).  Against the in-memory fit of the same data
the differences are the grouping of the float64 sums (the gradient's partial sums and the
preconditioner's column sums: chunks of the Dask array instead of the kernel's own row blocks)
and the row norms behind the scale factors of ``"normalize"``/``"clip"`` (the native kernel's
here, NumPy's in memory), relative changes of order 1e-16; the solver's points then agree to
about 1e-12 relative
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
a fit to the default tau = 0.01 takes 10-30), per one-vs-rest model.  Fits of n >= 2^17 rows
first minimise the same objective on the first ceil(n/16) rows, as the in-memory fit does
(``_mechanisms.warm_start_rows``, whose docstring says why this costs no privacy): one task on
the worker holding the leading chunks (:meth:`DaskDesign.sample_start`; d' floats come back),
then the full-data L-BFGS starts there: on 4e6 x 100 unit rows 12 full evaluations instead of 21,
plus the sample fit (22 evaluations on 1/16 of the rows, about 1.4 full passes).  SAG/SAGA need random
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

from dpfast import _glm, _loss_table
from dpfast._base import validate_y
from dpfast._certify import certified_descent, check_certifiable
from dpfast._dask_utils import (
    active_client,
    as_dask_rows,
    is_dask_collection,
    row_vector,
    scatter_chunks,
    set_feature_names,
)
from dpfast._solver import MappedRows, check_huber_delta, check_loss, loss_constants
from dpfast._validation import check_int, check_label_set
from dpfast.linear_model._mechanisms import check_sample_weight, sample_start, warm_start_rows

__all__ = ["is_dask_collection", "fit", "chunk_rngs", "DaskRows"]


def chunk_rngs(count: int, seed=None):
    """``count`` independent NumPy Generators, one per chunk (``SeedSequence(seed).spawn``).

    For mechanisms called inside ``map_blocks``: one seed or Generator shared by every task
    repeats the same noise in every chunk (module docstring).  ``seed`` None draws fresh
    entropy from the OS.
    """
    count = check_int(count, "count")
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(count)]


# ----------------------------------------------------------------------------- chunk tasks

#: labels of a chunk summarised on the workers (numbers, booleans, strings); other dtypes
#: (object) are gathered and validated on the client as NumPy input
_SUMMARY_KINDS = "biufUS"


def _uniques(v: np.ndarray) -> np.ndarray:
    """Sorted distinct values of a chunk (one NaN at most; bincount for small integer ranges)."""
    if v.dtype.kind in "iu" and v.size:
        lo, hi = int(v.min()), int(v.max())
        if hi - lo < 4096:
            return (np.flatnonzero(np.bincount((v - lo).astype(np.intp), minlength=hi - lo + 1)) + lo).astype(v.dtype)
    return np.unique(v)


def _label_summary(yk, classifier: bool, classes, cap: int) -> np.ndarray:
    """A few labels of chunk k standing in for all of them in the estimator's own checks.

    The checks of ``validate_y`` and ``check_label_set`` depend only on the set of values: NaN or
    infinity present, a non-integral float present (a "continuous" target), every value in the
    public label set, every value in {-1, +1}.  Classifiers: the chunk's distinct values, or
    (more than ``cap`` of them, so some lie outside the label set) the smallest four, the
    non-finite ones, one non-integral one and one outside the label set.  Regressors: the
    non-finite values present, else one finite value.
    """
    v = np.asarray(yk)
    if not classifier:
        v = np.asarray(v, dtype=np.float64)
        bad = v[~np.isfinite(v)]
        return np.unique(bad) if bad.size else v[:1]
    u = _uniques(v)
    if u.size <= cap:
        return u
    keep = [u[:4]]
    try:
        keep.append(u[~np.isin(u, np.array([0, 1]) if classes is None else np.asarray(classes))][:1])
    except TypeError:  # values not comparable with the label set: keep all of them
        return u
    if u.dtype.kind == "f":
        fin = np.isfinite(u)
        keep.append(u[~fin])
        keep.append(u[fin & (u != np.trunc(u))][:1])
    return np.concatenate(keep)


def _block_validate(block, yk, wk, est, R, icpt, k, starts, rows, classifier, classes, cap, weighted, center):
    """The validation pass of chunk k, its labels and weights read on the worker.

    Returns ``(aux, summary)``: ``aux`` (kept on the worker) a (2, n_k) float64 array, row 0
    the row scales (1 for no map), row 1 the squared norms of the mapped rows (the kernel turns it
    into the clipping bound C/||x_i||); ``summary`` (sent to the client) the labels standing in
    for the chunk's (:func:`_label_summary`), the weights' non-finite values or [min, max], and
    the preconditioner's column sums (S1 or None, S2, W) of the mapped, weighted rows, or the
    message of the row check that failed.  Nothing here raises for bad data: the client raises
    in the order of the in-memory ``fit`` (labels, parameters, weights, rows).
    """
    summary = {"y": None if yk is None else _label_summary(yk, classifier, classes, cap)}
    w = None
    if weighted:
        w = np.ascontiguousarray(wk, dtype=np.float64)
        fin = np.isfinite(w)
        summary["w"] = np.unique(w[~fin]) if not fin.all() else np.array([w.min(), w.max()]) if w.size else w
    if not rows:
        return None, summary
    block = np.ascontiguousarray(block)
    nk, dk = block.shape
    # the in-memory fit's message, naming no chunk or row: which rows are bad is private
    bad = "X contains NaN or infinite entries (or a row whose norm overflows)"
    ok, sq = _glm.row_bounds(block, nk, dk, None, 0.0, 0.0, 1)  # squared norms of the stored rows
    if not ok:
        summary["x_error"] = bad
        return None, summary
    try:  # the estimator's row map (norm check, or scale factors) on the kernel's norms
        scale = est._transform_rows(block, R, fitting=True, norms=np.sqrt(sq))
    except ValueError as exc:
        summary["x_error"] = str(exc)
        return None, summary
    rs = None if scale is None else np.ascontiguousarray(scale, dtype=np.float64)
    ones = np.ones(nk)
    # squared norms of the mapped rows [r_i x_i, c], as the kernel maps them (solvers' prepare)
    r = ones if rs is None else rs
    v = (r * r) * sq + icpt * icpt
    if not np.isfinite(v).all():
        summary["x_error"] = bad
        return None, summary
    if w is None or ("w" in summary and np.all(np.isfinite(summary["w"]))):
        summary["sums"] = _glm.precond_sums(block, nk, dk, w, rs, icpt, center, 1)
    return np.stack([ones if rs is None else rs, v]), summary  # rows contiguous: no copy per pass


def _block_fg(block, aux, yk, wk, theta, code, delta, clip, icpt, positive):
    """Data part of F and grad F on one chunk: [f, g_0 .. g_{d'-1}] (float64).

    The chunk's targets are formed here from its labels, as the in-memory ``fit`` forms them:
    +1 where the label is ``positive`` and -1 elsewhere (classifiers), the labels as float64
    (``positive`` is ``_REAL``: regressors)."""
    block = np.ascontiguousarray(block)
    scale, sq = aux[0], aux[1]
    t = _targets(yk, code, positive)
    w = None if wk is None else np.ascontiguousarray(wk, dtype=np.float64)
    f, g = _glm.chunk_loss_grad(block, block.shape[0], block.shape[1], t, w, code, delta, sq, clip, scale, icpt,
                                theta, 1)
    return np.concatenate([[f], g])


def _targets(yk, code, positive) -> np.ndarray:
    """A chunk's targets as the in-memory ``fit`` forms them (:func:`_block_fg`)."""
    yv = np.asarray(yk)
    return (np.asarray(yv, dtype=np.float64) if positive is _REAL
            else _loss_table.binary_labels(_loss_table.name_of(code), yv == positive))


def _sample_fit(blocks, auxs, ys, ws, m, n, loss, delta, clip, icpt, positive, alpha, linear, tol):
    """The warm start on the worker holding the first rows: the in-memory
    :func:`~dpfast.linear_model._mechanisms.sample_start` on rows [0, m) of X (the leading
    chunks), their row scales, targets and weights; d' float64 go back to the client."""
    def rows(parts):
        return np.ascontiguousarray(parts[0][:m] if len(parts) == 1 else np.concatenate(parts)[:m])

    code = _loss_table.code(loss)
    block = rows([np.asarray(b) for b in blocks])
    scale = rows([a[0] for a in auxs])
    t = rows([_targets(yk, code, positive) for yk in ys])
    w = None if ws[0] is None else rows([np.asarray(wk, dtype=np.float64) for wk in ws])
    return sample_start(MappedRows(block, scale, icpt), t, w, n, loss, alpha=alpha, linear=linear, clip=clip,
                        huber_delta=delta, tol=tol)


def _group_fg(blocks, auxs, ys, ws, theta, code, delta, clip, icpt, positive):
    """:func:`_block_fg` of several chunks (those one worker holds): one row per chunk."""
    return np.stack([_block_fg(b, x, yk, wk, theta, code, delta, clip, icpt, positive)
                     for b, x, yk, wk in zip(blocks, auxs, ys, ws)])


class _ChunkGroup:
    """The chunks one worker holds (rows, row scales and norms, labels, weights), kept for the
    passes of a fit as a distributed *actor*: a pass is then one call from the client straight to
    each worker and back, where a task goes client -> scheduler -> worker -> scheduler -> client
    and then gathers its result (on the 2-worker benchmark cluster about 3 ms against 26 ms per
    pass, and 20-30 ms against 100 ms under load 10).  The actor holds references to the chunks
    the worker already stores (no copy); the numbers are :func:`_group_fg`'s, as in a task."""

    def __init__(self, blocks, auxs, ys, ws):
        self._chunks = (blocks, auxs, ys, ws)

    def fg(self, theta, code, delta, clip, icpt, positive):
        return _group_fg(*self._chunks, theta, code, delta, clip, icpt, positive)


def _chunk_groups(blocks):
    """``(groups, held, workers)``: chunk indices grouped by the worker holding the chunk (one
    task or actor call per worker and pass: the scheduler's cost per pass is per task), ``held``
    True, and each group's worker; or one group per chunk, ``held`` False, when X is not held by
    a distributed cluster (a graph computed in each pass).  The grouping changes no number: each
    chunk's partial sums are its own, added on the client in chunk order."""
    client = active_client()
    singles = ([[k] for k in range(len(blocks))], False, None)
    if client is None:
        return singles
    try:
        from distributed import Future

        who = client.who_has([Future(b.key, client) for b in blocks])
    except Exception:  # pragma: no cover - a scheduler that cannot answer: no grouping
        return singles
    by_worker: dict = {}
    for k, b in enumerate(blocks):
        holders = sorted(who.get(b.key, ()))
        if not holders:  # not persisted (or lost): computed wherever the scheduler decides
            return singles
        by_worker.setdefault(holders[0], []).append(k)
    return list(by_worker.values()), True, list(by_worker)


def _group_actors(client, args, workers):
    """One :class:`_ChunkGroup` actor per worker, on the chunks it holds (None where the cluster
    cannot make them: the passes are then tasks)."""
    try:
        futs = [client.submit(_ChunkGroup, *a, actor=True, workers=[w], allow_other_workers=False, pure=False)
                for a, w in zip(args, workers)]
        return [f.result() for f in futs]
    except Exception:  # pragma: no cover - e.g. a worker lost meanwhile: tasks instead
        return None


def _futures(handles) -> list:
    """The distributed Futures behind persisted or scattered per-chunk handles (None stays None)."""
    from distributed import Future, futures_of

    out = []
    for h in handles:
        if h is None or isinstance(h, Future):
            out.append(h)
            continue
        fs = [f for f in futures_of(h) if f.key == h.key]
        if len(fs) != 1:
            raise RuntimeError("a per-chunk handle is not held by the cluster")
        out.append(fs[0])
    return out


def _block_sq(aux, wk):
    return float(np.sum(aux[1])) if wk is None else float(np.dot(np.asarray(wk, dtype=np.float64), aux[1]))


class _Real:
    """Marker of a real-valued (regression) target."""

    def __repr__(self):
        return "_REAL"

    def __reduce__(self):
        return "_REAL"


_REAL = _Real()


class DaskTarget:
    """One model's target on Dask: the labels stay on the workers (``DaskDesign``), each task
    forms +1/-1 (``positive`` the class of this one-vs-rest model) or the real labels (``_REAL``)."""

    def __init__(self, positive, n: int):
        self.positive = positive
        self.shape = (n,)


# ----------------------------------------------------------------------------- design objects

class DaskRows:
    """Rows of a Dask array as the estimator's ``_fit_problems`` sees them (``_dpfast_chunked``).

    ``shape``/``dtype`` are X's; :func:`fit` runs the validation pass (:meth:`validate`), after
    which ``design(est, R, s)`` returns its :class:`DaskDesign`.
    """

    _dpfast_chunked = True
    ndim = 2

    def __init__(self, X):
        self.X = X
        self.shape = tuple(int(v) for v in X.shape)
        self.dtype = X.dtype
        self.row_chunks = tuple(int(c) for c in X.chunks[0])
        self.starts = np.concatenate([[0], np.cumsum(self.row_chunks)]).astype(np.int64).tolist()
        self._design = None

    def design(self, est, R, s, **_):
        des = self._design
        if des is None or des.est is not est or des.R != float(R) or des.intercept != float(s):
            raise RuntimeError("DaskRows.design before the validation pass (linear_model._dask.fit runs it)")
        return des


def _vector_chunks(v, rows: DaskRows, name: str, kinds: str = _SUMMARY_KINDS):
    """A per-row vector as chunk handles held by the cluster, or a NumPy array (returned as is)."""
    if v is None or not is_dask_collection(v):
        return v
    v = row_vector(v, rows.row_chunks, name)
    if v.dtype.kind not in kinds:  # e.g. object labels: validated on the client, as NumPy input
        return np.asarray(v.compute())
    return v


class DaskDesign:
    """The design ``[scale_i x_i, s]`` of a Dask array with its labels and weights: its minimiser
    runs on the client, its gradient passes on the workers (module docstring)."""

    def __init__(self, rows: DaskRows, est, R: float, s: float, aux, ys, ws, sums):
        import dask

        self.rows = rows
        self.est = est
        self.R = float(R)
        self.intercept = float(s)
        n, d = rows.shape
        self.shape = (n, d + (s != 0.0))
        self.dtype = rows.dtype
        self._dask = dask
        self._aux, self._ys, self._ws = aux, ys, ws
        self._sums = sums  # (S1 or None, S2, W) over all rows, added in chunk order

    def _inputs(self):
        """``(groups, client, ins, workers)``: the chunk groups of :func:`_chunk_groups`, the
        client when the cluster holds everything (else None), per chunk (X, aux, labels, weights)
        as futures (held) or graph handles, and each group's worker (held) or None."""
        blocks = self.rows.X.to_delayed().ravel()
        groups, held, workers = _chunk_groups(blocks)
        client = active_client() if held else None
        if client is not None:  # everything held by the cluster: tasks on its futures, no graph to build
            from distributed import Future

            ins = [[Future(b.key, client) for b in blocks], _futures(self._aux), _futures(self._ys),
                   _futures(self._ws)]
        else:
            ins = [blocks, self._aux, self._ys, self._ws]
        return groups, client, ins, workers

    def sample_start(self, y, loss, m: int, *, alpha, linear, clip, huber_delta, tol) -> np.ndarray:
        """The warm start of the in-memory fit (``_mechanisms.sample_start`` on rows [0, m)), as
        one task on the leading chunks (run where they are held): the same rows, scales, targets
        and weights, so the same point up to the rounding of the row scales."""
        dask = self._dask
        _groups, client, ins, _workers = self._inputs()
        ks = [k for k in range(len(self.rows.row_chunks)) if self.rows.starts[k] < m]
        args = [[v[k] for k in ks] for v in ins]
        rest = (int(m), int(self.shape[0]), loss, check_huber_delta(huber_delta), None if clip is None else float(clip),
                self.intercept, y.positive, float(alpha), None if linear is None else np.asarray(linear, dtype=np.float64),
                float(tol))
        if client is not None:
            return np.asarray(client.submit(_sample_fit, *args, *rest, pure=False).result(), dtype=np.float64)
        return np.asarray(dask.delayed(_sample_fit, pure=True)(*args, *rest).compute(), dtype=np.float64)

    def oracle(self, y, loss, *, alpha, linear, clip, sample_weight, huber_delta):
        """``fg(theta) -> (F, grad F)``: one Dask graph per call, partial sums added in chunk order.

        ``y`` is a :class:`DaskTarget` (the labels and weights are the design's, on the workers;
        ``sample_weight`` is ignored)."""
        dask = self._dask
        code, delta = check_loss(loss), check_huber_delta(huber_delta)
        c = 0.0 if clip is None else float(clip)
        positive = y.positive
        d = self.shape[1]
        a = float(alpha)
        lin = None if linear is None else np.asarray(linear, dtype=np.float64)
        groups, client, ins, workers = self._inputs()
        order = np.argsort(np.concatenate(groups), kind="stable")
        args = [tuple([v[k] for k in grp] for v in ins) for grp in groups]
        actors = None if client is None else _group_actors(client, args, workers)

        def fg(theta):
            nonlocal actors
            th = np.ascontiguousarray(theta, dtype=np.float64)
            rest = (th, code, delta, c, self.intercept, positive)
            out = None
            if actors is not None:
                try:
                    out = [call.result() for call in [act.fg(*rest) for act in actors]]
                except Exception:  # e.g. a lost worker, and its actor with it: from now on tasks,
                    actors = None  # for which Dask recomputes lost chunks (the same numbers)
            if out is None and client is not None:
                out = client.gather([client.submit(_group_fg, *a, *rest, pure=False) for a in args])
            elif out is None:
                out = dask.compute(*[dask.delayed(_group_fg, pure=True)(*a, *rest) for a in args])
            parts = np.concatenate(out)[order]  # one row per chunk, in chunk order
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

    def weighted_sq_norms(self) -> float:
        """sum_i w_i ||x_i'||^2 of the mapped rows (from the persisted norms; for the certified fallback)."""
        dask = self._dask
        parts = dask.compute(*[dask.delayed(_block_sq)(x, w) for x, w in zip(self._aux, self._ws)])
        return float(math.fsum(parts))

    def precond(self, alpha: float, loss: str, huber_delta: float):
        """The L-BFGS preconditioner's inputs for ``_glm.minimize_callable`` (the in-memory solver
        builds the same P from the same column sums, formed over its own row blocks)."""
        S1, S2, W = self._sums
        return (S1, S2, float(W), float(alpha), float(loss_constants(loss, huber_delta)[1]), self.intercept)

    def minimize_certified(self, y, loss, *, alpha, linear, clip, sample_weight, huber_delta, solver, tol, max_iter,
                           gen, lipschitz):
        """The Dask counterpart of ``_mechanisms._minimize_certified`` (same solver, same rule)."""
        if solver != "lbfgs":
            raise ValueError(f"solver={solver!r} needs random access to rows; Dask fits use solver='lbfgs'")
        n = self.shape[0]
        b_norm = 0.0 if linear is None else float(np.linalg.norm(linear))
        check_certifiable(tol, 2.0 * (n * lipschitz + b_norm))
        m = warm_start_rows(n, solver)  # the in-memory fit's warm start (privacy: its docstring)
        theta = np.zeros(self.shape[1]) if not m else np.array(self.sample_start(
            y, loss, m, alpha=alpha, linear=linear, clip=clip, huber_delta=huber_delta, tol=tol), dtype=np.float64)
        fg = self.oracle(y, loss, alpha=alpha, linear=linear, clip=clip, sample_weight=None, huber_delta=huber_delta)
        n_iter, _n_eval, _conv, _fun, gnorm, _status = _glm.minimize_callable(
            fg, theta, float(tol), int(max_iter), 10, precond=self.precond(alpha, loss, huber_delta))
        if gnorm <= tol:
            return theta, float(gnorm), int(n_iter), "lbfgs"
        curvature = loss_constants(loss, huber_delta)[1]
        weighted = self.weighted_sq_norms()
        coef, gn, passes = certified_descent(lambda th: fg(th)[1], theta, tol=tol, strong_convexity=alpha,
                                             smoothness=alpha + curvature * weighted)
        return coef, gn, int(n_iter) + passes, "nesterov"


# ----------------------------------------------------------------------------- validation pass

def _validate(est, rows: DaskRows, y, sample_weight, *, classifier: bool):
    """The one validation pass: rows, labels and weights read on the workers, checked on the
    client in the order (and with the messages) of the in-memory ``fit``: labels
    (``validate_y``, the public label set), the estimator's parameters, the weights
    (``check_sample_weight``), the rows.  NumPy labels and weights are checked on the client
    (the in-memory code itself) and scattered to the workers once.  Returns the public label set
    (classifiers; None for regressors) and leaves the :class:`DaskDesign` on ``rows``.  Raises
    before anything is calibrated, charged or drawn."""
    import dask

    n = rows.shape[0]
    starts = rows.starts
    blocks = rows.X.to_delayed().ravel()
    k_count = len(blocks)
    classes = getattr(est, "classes", None) if classifier else None
    y_dask = is_dask_collection(y)
    label_set = None
    if not y_dask:  # NumPy labels: the in-memory checks, on the client, first
        if y is not None and np.shape(y)[:1] != (n,):
            raise ValueError(f"y has {np.shape(y)[:1]} entries but X has {n} rows")
        y = validate_y(est, y, n, classifier=classifier)
        label_set = check_label_set(y, classes)[0] if classifier else None
    try:
        R, s = est._validate_common()
        common_error = None
    except ValueError as exc:  # raised after the labels' errors, as in the in-memory fit
        R, s, common_error = 1.0, 0.0, exc
    if common_error is not None and not y_dask:
        raise common_error
    w_dask = is_dask_collection(sample_weight)
    w_error = None
    if sample_weight is not None and not w_dask:
        try:
            sample_weight = check_sample_weight(np.asarray(sample_weight), n)
        except (TypeError, ValueError) as exc:  # raised after the labels' and parameters' errors
            w_error, sample_weight = exc, None
    weighted = sample_weight is not None and (not w_dask or np.dtype(sample_weight.dtype).kind in "biuf")
    if y_dask:
        ys = list(dask.persist(*y.to_delayed().ravel()))
    else:
        ys = scatter_chunks(y if classifier else np.asarray(y, dtype=np.float64), starts)
    if w_dask:
        ws = list(dask.persist(*sample_weight.to_delayed().ravel()))
    else:
        ws = scatter_chunks(sample_weight, starts, np.float64)
    cap = max(64, 2 * (2 if classes is None else len(np.atleast_1d(classes))))
    est_d = dask.delayed(est, pure=True)
    tasks = [dask.delayed(_block_validate, pure=True, nout=2)(
        b, yk if y_dask else None, wk if weighted else None, est_d, R, s, k, starts, common_error is None,
        classifier, classes, cap, weighted, s != 0.0)
        for k, (b, yk, wk) in enumerate(zip(blocks, ys, ws))]
    persisted = dask.persist(*[t[0] for t in tasks], *[t[1] for t in tasks])
    aux = list(persisted[:k_count])
    summaries = dask.compute(*persisted[k_count:])

    # 1. labels: validate_y and the label set on the values standing in for each chunk's
    if y_dask:
        rep = np.concatenate([sm["y"] for sm in summaries])
        rep = validate_y(est, rep, rep.shape[0], classifier=classifier)
        label_set = check_label_set(rep, classes)[0] if classifier else None
    # 2. the estimator's parameters
    if common_error is not None:
        raise common_error
    # 3. weights: check_sample_weight (dtype, finiteness, range) on the chunks' extremes
    if w_error is not None:
        raise w_error
    if w_dask:  # (numeric: other dtypes were gathered and checked on the client)
        wrep = np.concatenate([sm["w"] for sm in summaries])
        check_sample_weight(wrep, wrep.shape[0])
    # 4. rows: the first bad chunk in chunk order
    for sm in summaries:
        if "x_error" in sm:
            raise ValueError(sm["x_error"])
    sums = _add_sums([sm["sums"] for sm in summaries])
    rows._design = DaskDesign(rows, est, R, s, aux, ys, ws, sums)
    return label_set


def _add_sums(parts):
    """(S1 or None, S2, W) over all chunks, added in chunk order."""
    S1 = None if parts[0][0] is None else np.zeros_like(parts[0][0])
    S2 = np.zeros_like(parts[0][1])
    W = 0.0
    for p1, p2, pw in parts:
        if S1 is not None:
            S1 += p1
        S2 += p2
        W += pw
    return S1, S2, W


def validated_design(est, X, y, sample_weight=None) -> DaskDesign:
    """The validation pass of :func:`fit` alone: the :class:`DaskDesign` of Dask ``X`` with its
    labels and weights on the workers (benchmarks and tests time its passes with ``oracle``)."""
    rows = DaskRows(as_dask_rows(X))
    classifier = hasattr(est, "_label_set")
    est._validate_params()
    _validate(est, rows, _vector_chunks(y, rows, "y", _SUMMARY_KINDS if classifier else "biuf"),
              _vector_chunks(sample_weight, rows, "sample_weight", "biuf"), classifier=classifier)
    return rows._design


# ----------------------------------------------------------------------------- estimator API

def fit(est, X, y, sample_weight=None, *, budget=None):
    """``est.fit`` for a Dask X (module docstring): validation on the workers, calibration,
    budget charge and noise on the client, each gradient pass a Dask graph."""
    if getattr(est, "method", None) == "ssp":  # one pass of sufficient statistics (issue 24)
        return est._fit_ssp_dask(X, y, sample_weight, budget=budget)
    if getattr(est, "multi_class", "ovr") == "multinomial":
        raise ValueError("multi_class='multinomial' is not available for Dask input (the Dask path fits "
                         "one-vs-rest models); use multi_class='ovr' or in-memory rows")
    if getattr(est, "solver", "lbfgs") != "lbfgs":
        raise ValueError(f"solver={est.solver!r} needs random access to rows; Dask fits use solver='lbfgs'")
    Xd = as_dask_rows(X)
    rows = DaskRows(Xd)
    classifier = hasattr(est, "_label_set")
    y = _vector_chunks(y, rows, "y", _SUMMARY_KINDS if classifier else "biuf")
    sample_weight = _vector_chunks(sample_weight, rows, "sample_weight", "biuf")
    est._validate_params()
    est._reset_fit()
    classes = _validate(est, rows, y, sample_weight, classifier=classifier)
    n = rows.shape[0]
    if classifier:
        targets = [DaskTarget(classes[1], n)] if classes.size == 2 else [DaskTarget(c, n) for c in classes]
        est._fit_ovr(rows, classes, targets, None, budget=budget)
    else:
        est._fit_target(rows, DaskTarget(_REAL, n), None, budget=budget)
    set_feature_names(est, X)
    return est
