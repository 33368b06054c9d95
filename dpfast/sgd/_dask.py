"""Full-batch DP-GD on Dask for ``DPSGDClassifier`` / ``DPSGDRegressor`` (issue 9).

With ``sampling="full"`` every step uses all n examples: the per-example gradients of the GLM
are clipped to ``clip_norm`` C and summed (sensitivity C under add/remove neighbours), and
N(0, (z C)^2 I) noise is added -- one Gaussian mechanism per step, so T = ``epochs`` steps are
``SelfComposed(Gaussian(z), T)``, accounted by PLD (or RDP) and charged to the budget before any
noise is drawn (Abadi et al. 2016, "Deep Learning with Differential Privacy"; the full-batch
case of their analysis, without subsampling amplification).

On Dask each step is one graph: the native clipped-sum kernel (``dpfast._clip.glm_clipped_sum``,
per-example norms from the GLM structure, no per-example gradient formed) on every chunk, the
chunk sums converted to float64 and added on the client in chunk order (bit-identical for any
number of workers), then the noise (from ``random_state``, on the client) and the optimizer
step of the in-memory loop (``_DPSGDBase._train``).  The client sends the parameters (P =
d K + K numbers) to every chunk's task and receives P + 2 numbers per chunk.

Poisson-sampled (and shuffled fixed-size) DP-SGD stays in memory: each step reads a random
subset of about q n rows, which on Dask would mean either a full pass per step to pick them out
(the cost of full-batch GD for the privacy of a smaller batch) or random access into a
distributed array; and the privacy amplification by Poisson sampling needs every row's
inclusion to be an independent coin, which a per-chunk sampler keyed by chunk would have to
reproduce exactly.  Full-batch DP-GD needs neither.

Raises ``ValueError`` before anything is charged or drawn for bad chunking, NaN/inf in a chunk
(naming it), labels outside ``classes``, and a ``sampling`` other than ``"full"``.
"""
from __future__ import annotations

import numpy as np

from dpfast import _clip, _loss_table
from dpfast._base import validate_y
from dpfast._dask_utils import as_dask_rows, local_vector, scatter_chunks, set_feature_names
from dpfast._validation import check_label_set
from dpfast.random import check_random_state

__all__ = ["fit"]

# the native kernel's loss codes (prediction and scoring are dpfast._dask_utils', as for the linear
# models: the same coef_/classes_ contract, one pass chunk by chunk)
_LOGISTIC, _SQUARED, _SOFTMAX = (_loss_table.code(n) for n in ("logistic", "squared", "softmax"))


def _block_check(block, k, starts):
    if not np.isfinite(block).all():
        # no chunk or row named: which rows are bad is private (issue 21, item 10)
        raise ValueError("X contains NaN or infinite entries")
    return block.shape[0]


def _block_clipped_sum(block, yr, yl, theta, d, K, fi, loss, C):
    """[loss sum, clipped count, sum of clipped gradients (P,)] of one chunk, float64."""
    X = np.ascontiguousarray(block)
    dtype = X.dtype
    th = np.asarray(theta, dtype=dtype)
    W = np.ascontiguousarray(th[: d * K].reshape(d, K))
    b = np.ascontiguousarray(th[d * K:]) if fi else None
    gW = np.zeros((d, K), dtype)
    gb = np.zeros(K, dtype) if fi else None
    ws = _clip.Workspace()
    ws.n_threads = 1
    idx = np.arange(X.shape[0], dtype=np.int64)
    ls, nc = _clip.glm_clipped_sum(ws, X, yr, yl, idx, W, b, loss, C, gW, gb, None, None)
    parts = [np.array([ls, nc], dtype=np.float64), gW.ravel().astype(np.float64)]
    if fi:
        parts.append(gb.astype(np.float64))
    return np.concatenate(parts)


def fit(est, X, y, *, budget=None):
    """``est.fit`` for a Dask X: full-batch DP-GD, each step one pass over the chunks."""
    import dask

    est._validate_params()
    est._reset_fit()
    if est.sampling != "full":
        raise ValueError(f"sampling={est.sampling!r} on Dask input: Poisson/shuffled batches need random access to "
                         "rows and stay in memory; use sampling='full' (full-batch DP-GD) for Dask collections")
    Xd = as_dask_rows(X)
    n, d = (int(v) for v in Xd.shape)
    row_chunks = tuple(int(c) for c in Xd.chunks[0])
    starts = np.concatenate([[0], np.cumsum(row_chunks)]).tolist()
    y_local = local_vector(y, row_chunks, "y")
    classifier = hasattr(est, "classes")
    y_local = validate_y(est, y_local, n, classifier=classifier)
    dtype = Xd.dtype
    if classifier:
        classes, lab = check_label_set(y_local, est.classes)
        lab = np.ascontiguousarray(lab, dtype=np.int64)
        K = 1 if classes.size == 2 else int(classes.size)
        loss = _LOGISTIC if K == 1 else _SOFTMAX
        yr_all = _loss_table.binary_labels("logistic", lab).astype(dtype) if K == 1 else None
        yl_all = None if K == 1 else lab
    else:
        classes, K, loss = None, 1, _SQUARED
        yr_all, yl_all = np.ascontiguousarray(y_local, dtype=dtype), None
    blocks = Xd.to_delayed().ravel()
    # validation pass (finite rows), before the privacy is set up and charged
    dask.compute(*[dask.delayed(_block_check)(b, k, starts) for k, b in enumerate(blocks)])
    run = est._setup_privacy(n, budget)  # calibrates, charges event_; nothing drawn yet
    if classes is not None:
        est.classes_ = classes
    fi = bool(est.fit_intercept)
    P = d * K + (K if fi else 0)
    theta = np.zeros(P, dtype)

    yrs, yls = scatter_chunks(yr_all, starts), scatter_chunks(yl_all, starts)
    C = float(est.clip_norm)

    def step(ws, idx, gsum):
        th = theta.copy()
        tasks = [dask.delayed(_block_clipped_sum, pure=True)(b, yr, yl, th, d, K, fi, loss, C)
                 for b, yr, yl in zip(blocks, yrs, yls)]
        parts = dask.compute(*tasks)
        total = np.zeros(P + 2)
        for p in parts:  # chunk order: the same sum for any number of workers
            total += p
        gsum[:] = total[2:].astype(gsum.dtype)
        return float(total[0]), int(total[1])

    gen = check_random_state(est.random_state)  # as the in-memory _fit_glm: after the charge
    est._train(n, theta, d * K, step, gen, run)
    W = theta[: d * K].reshape(d, K)
    est.coef_ = np.ascontiguousarray(W.T)
    est.intercept_ = theta[d * K:].copy() if fi else np.zeros(K, dtype)
    if not classifier:
        est.coef_ = est.coef_[0]
        est.intercept_ = float(est.intercept_[0])
    est.n_features_in_ = d
    set_feature_names(est, X)  # the linear models' rule (one home)
    return est

