"""Native solvers for (perturbed, gradient-clipped) GLM objectives.

Minimizes

    F(theta) = sum_i w_i l_C(y_i, x_i.theta) + (alpha/2)||theta||^2 + linear.theta
               + (1/2) theta^T quadratic theta

for the GLM losses ``logistic``, ``squared``, ``huber`` and ``smoothed_hinge``
(see :doc:`/theory/erm`, "Setting" and "The mechanism").  With ``clip_norm=C`` each
per-example gradient l'(y_i, x_i.theta) x_i is clipped to l2 norm <= C, i.e. the scalar
derivative is clamped to [-C/||x_i||, C/||x_i||] and the loss is continued linearly beyond
(the gradient-clipped loss l_C of Algorithm 1, step 1; it stays convex, GLM and as smooth as l).

Guarantee used by the privacy proofs (Redberg, Koskela & Wang 2024, Algorithm 1 step 4 and
Section 4.1; :doc:`/theory/erm`): both solvers stop only when ``||grad F(theta)||_2 <= tol`` (or when they run
out of iterations), and :class:`GLMResult` reports the exact gradient norm of a full pass at
the returned ``coef``; ``converged`` is ``grad_norm <= tol``.  Callers that need the
guarantee must check ``converged`` (a solver that did not reach tol returns
``converged=False``; it never pretends).

Solvers: ``"lbfgs"`` (L-BFGS, memory 10, strong-Wolfe line search with safeguarded cubic
interpolation, Nocedal & Wright Alg. 3.5/3.6, accepting Hager-Zhang approximate-Wolfe points
when F is flat to rounding; preconditioned (initial inverse Hessian gamma P^-1,
Nocedal & Wright eq. 7.20) by the diagonal of the Hessian bound alpha I + Q + beta X^T W X,
taken in coordinates where the columns are centered when the design has an in-kernel bias
feature (:class:`MappedRows`), because sparse column scales follow feature frequencies,
non-negative and one-hot columns all correlate with the bias, and the bias column of unit-norm
dense rows has d times a feature's mean square -- the stopping rule stays
||grad F||_2 <= tol in the original coordinates), ``"sag"`` (Schmidt, Le Roux & Bach 2017) and ``"saga"`` (Defazio et al.
2014) on the finite sum F = sum_i f_i with f_i = w_i l_C(x_i.theta) + (alpha/(2n))||theta||^2 +
linear.theta/n.  SAG/SAGA check the exact full gradient after every n steps (one epoch),
the stopping rule of Redberg, Koskela & Wang (2024), Theorem G.1; ``max_iter`` counts epochs for them.  Their
step size on the mean objective is, with L_max = max_i w_i beta ||x_i||^2 + alpha/n (beta the
loss's smoothness in the margin): ``step_size="auto"``: 1/L_max for SAG (Schmidt et al.'s
practical choice), 1/(3 L_max) for SAGA (Defazio et al.'s theorem); ``"theory"``: 1/(16 L_max),
the step of the SAG convergence theorem quoted in Redberg, Koskela & Wang (2024), Appendix G; or a positive float.
When alpha > 0 the step is further capped at n/(2 alpha), so that the regularizer's shrink
factor 1 - step*alpha/n per step stays >= 1/2 (it only binds when alpha/n dominates L_max).
The step size costs no privacy (any optimizer may be used in step 4 of Algorithm 1).

X is never copied when it is a float32/float64 ndarray in C or Fortran order (the two layouts
have their own kernels, whose results agree to rounding, not bit for bit; the private releases
built on these solvers copy to C order so that they do not depend on the layout), or a scipy
CSR matrix/array with float32/float64 data, int32/int64 indices and no duplicate entries;
anything else is converted once (documented copy).  The GIL is released and the passes over
the rows run on ``n_threads`` threads over a fixed partition of the rows (it depends on n and
d only) with a fixed reduction order, so results do not depend on the thread count; SAG/SAGA
steps are sequential (only their epoch-end gradient check is parallel), so for a given seed
they are reproducible too.  Each pass computes x_i.theta, the loss derivative and the
gradient update while a block of rows is in cache (one read of X per evaluation); the
logistic loss of a block is evaluated 16 rows at a time with a vectorised exp/log1p (a few
ulp from libm).  The kernels are compiled twice (baseline x86-64 and AVX2) and chosen at run
time (``dpfast._glm.has_avx2``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from dpfast import _glm, _loss_table, _threads
from dpfast._validation import check_nonnegative, check_positive, check_real
from dpfast.random import RandomLike, check_random_state, native_stream

__all__ = ["GLMResult", "MappedRows", "MAX_ITER", "check_max_iter", "minimize_glm", "glm_loss_and_grad", "glm_gradient_oracle", "loss_constants", "LOSSES", "SOLVERS"]

LOSSES = _loss_table.MARGIN_LOSSES  # ("logistic", "squared", "huber", "smoothed_hinge"), from the native table
SOLVERS = ("lbfgs", "sag", "saga")
_LOSS_CODE = {name: _loss_table.code(name) for name in LOSSES}
_SOLVER_CODE = {"lbfgs": 0, "sag": 1, "saga": 2}
_STATUS = {
    0: "converged",
    1: "maximum number of iterations reached",
    2: "line search could not decrease F further",
    3: "F or its gradient became non-finite",
    4: "X contains NaN or infinite entries (or a row whose squared norm overflows)",
}


@dataclass(frozen=True)
class GLMResult:
    """Outcome of :func:`minimize_glm`.

    coef: the returned point (d,).  grad_norm: exact ||grad F(coef)||_2 from a full pass at
    coef.  n_iter: L-BFGS iterations or SAG/SAGA epochs.  converged: grad_norm <= tol.
    fun: F(coef).  solver: the solver used.  n_eval: full passes over X (gradient
    evaluations).  message: why it stopped.  step_size: SAG/SAGA step (None for L-BFGS).
    """

    coef: np.ndarray
    grad_norm: float
    n_iter: int
    converged: bool
    fun: float
    solver: str
    n_eval: int = 0
    message: str = ""
    step_size: Optional[float] = None


def loss_constants(loss: str, huber_delta: float = 1.0) -> Tuple[float, float]:
    """(Lipschitz, smoothness) bounds of the loss in the margin: sup|l'| and sup l''.

    For labels with |y| <= 1 (logistic and smoothed hinge use y in {-1, +1}):
    logistic (1, 1/4); squared (inf, 1); huber (huber_delta, 1); smoothed_hinge (1, 1).
    See :doc:`/theory/erm`, "Setting": with ||x|| <= R the per-example gradient
    is L-Lipschitz with L = lipschitz * R and the Hessian is bounded by beta = smooth * R^2.
    The gradient-clipped loss with bound C has Lipschitz constant min(L, C) and the same beta.
    """
    code = check_loss(loss)
    delta = check_huber_delta(huber_delta)
    lip, smooth = _glm.constants(code, delta)
    return float(lip), float(smooth)


class MappedRows:
    """The design ``[scale_i x_i, intercept]`` of dense or CSR X, applied inside the kernels (no copy).

    Row i of the design the solvers see is ``scale[i] * X[i]`` (``scale`` None: ``X[i]``),
    followed by the constant feature ``intercept`` when it is non-zero, which becomes the last
    coordinate of theta.  The products are formed in float64 inside the native passes, so a
    float32 X is read as stored (the design a copy would hold is the same up to float32
    rounding of the scaled entries).  ``X`` must be a float32/float64 ndarray (C order for the
    private releases, which must not depend on the layout) or a scipy CSR matrix/array with
    float32/float64 data (L-BFGS only: SAG/SAGA read CSR rows as stored); it is not copied.
    """

    __slots__ = ("X", "scale", "intercept")

    def __init__(self, X, scale: Optional[np.ndarray] = None, intercept: float = 0.0):
        if _is_csr(X):
            if X.dtype not in (np.float32, np.float64):
                raise TypeError("MappedRows needs float32/float64 data in a CSR X")
        elif not isinstance(X, np.ndarray) or X.ndim != 2 or X.dtype not in (np.float32, np.float64):
            raise TypeError("MappedRows needs a 2-d float32/float64 ndarray or a scipy CSR matrix X")
        n = X.shape[0]
        self.X = X
        self.scale = None if scale is None else check_vector(scale, n, "scale", shape_note=" (one per row)")
        self.intercept = _scalar(intercept, "intercept")
        if self.intercept < 0:
            raise ValueError(f"intercept must be >= 0, got {intercept!r}")

    @property
    def shape(self) -> Tuple[int, int]:
        n, d = self.X.shape
        return n, d + (self.intercept != 0.0)

    @property
    def dtype(self):
        return self.X.dtype

    def sq_norms(self) -> np.ndarray:
        """Squared l2 norms of the mapped rows (float64)."""
        if _is_csr(self.X):
            sq = np.asarray(self.X.multiply(self.X).sum(axis=1, dtype=np.float64)).ravel()
        else:
            sq = np.einsum("ij,ij->i", self.X, self.X, dtype=np.float64)
        if self.scale is not None:
            sq *= self.scale * self.scale
        return sq + self.intercept * self.intercept

    def toarray(self) -> np.ndarray:
        """The design as one array (a copy; for tests and references)."""
        X = self.X.toarray() if _is_csr(self.X) else self.X
        Xs = X.astype(np.float64) if self.scale is None else X * self.scale[:, None]
        if self.intercept == 0.0:
            return Xs
        return np.hstack([Xs, np.full((Xs.shape[0], 1), self.intercept)])


# ----------------------------------------------------------------------------- validation

def _is_csr(X) -> bool:
    """A 2-d scipy CSR matrix or array."""
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a dependency
        return False
    return sp.issparse(X) and X.format == "csr" and X.ndim == 2


def check_loss(loss) -> int:
    if not isinstance(loss, str) or loss not in _LOSS_CODE:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    return _LOSS_CODE[loss]


def check_huber_delta(huber_delta) -> float:
    # check_real: TypeError if not a number; ValueError beyond a double
    return check_positive(check_real(huber_delta, "huber_delta"), "huber_delta", allow_array=False)


def _scalar(value, name: str, *, positive: bool = False, allow_zero: bool = True) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = check_real(value, name)  # not float(): an int beyond a double is a ValueError
    if positive:
        return check_nonnegative(v, name) if allow_zero else check_positive(v, name, allow_array=False)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def check_vector(value, n: int, name: str, *, shape_note: str = "") -> Optional[np.ndarray]:
    """A finite float64 C-contiguous vector of shape (n,) (None stays None)."""
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},){shape_note}, got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite entries")
    return arr


def _prepare_X(X):
    """(layout, data, indices, indptr, n, d) without copying supported inputs (d: stored columns)."""
    if isinstance(X, MappedRows):
        layout, data, indices, indptr, n, d = _prepare_X(X.X)
        return layout, data, indices, indptr, n, d
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a dependency
        sp = None
    if sp is not None and sp.issparse(X):
        if X.ndim != 2:
            raise ValueError(f"X must be 2-d, got a sparse array of dimension {X.ndim}")
        if X.format != "csr":
            X = X.tocsr()  # documented conversion (copy) for COO/CSC/... input
        data, indices, indptr = X.data, X.indices, X.indptr
        copied = False
        if data.dtype not in (np.float32, np.float64):
            if data.dtype.kind not in "biuf":
                raise TypeError(f"X must hold real numbers, got dtype {data.dtype}")
            data = data.astype(np.float64)
            copied = True
        if indices.dtype != indptr.dtype or indices.dtype not in (np.int32, np.int64):
            indices = indices.astype(np.int64)
            indptr = indptr.astype(np.int64)
        # duplicates would make the row norms (clipping, SAG step) wrong: sum them on a copy
        if not X.has_canonical_format:
            Xc = sp.csr_matrix((data, indices, indptr), shape=X.shape, copy=not copied)
            Xc.sum_duplicates()
            data, indices, indptr = Xc.data, Xc.indices, Xc.indptr
            if indices.dtype != indptr.dtype:
                indices = indices.astype(np.int64)
                indptr = indptr.astype(np.int64)
        n, d = X.shape
        return 2, np.ascontiguousarray(data), np.ascontiguousarray(indices), np.ascontiguousarray(indptr), n, d
    if not isinstance(X, np.ndarray):
        try:
            X = np.asarray(X)
        except Exception as exc:  # pragma: no cover
            raise TypeError("X must be a NumPy array or a scipy.sparse CSR matrix") from exc
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-d array (n_samples, n_features), got shape {X.shape}")
    if X.dtype not in (np.float32, np.float64):
        if X.dtype.kind not in "biuf":
            raise TypeError(f"X must hold real numbers, got dtype {X.dtype}")
        X = np.ascontiguousarray(X, dtype=np.float64)
    if X.flags.c_contiguous:
        layout = 0
    elif X.flags.f_contiguous:
        layout = 1
    else:
        X = np.ascontiguousarray(X)  # documented copy for strided views
        layout = 0
    n, d = X.shape
    return layout, X, None, None, n, d


def _prepare(X, y, loss, alpha, linear, quadratic, sample_weight, clip_norm, huber_delta):
    code = check_loss(loss)
    delta = check_huber_delta(huber_delta)
    layout, data, indices, indptr, n, d = _prepare_X(X)
    if n == 0 or d == 0:
        raise ValueError(f"X must have at least one row and one column, got shape ({n}, {d})")
    rs, icpt = (X.scale, X.intercept) if isinstance(X, MappedRows) else (None, 0.0)
    dx, d = d, d + (icpt != 0.0)  # stored columns, problem dimension
    if y is None:  # (check_vector passes None through: it is how the optional vectors are omitted)
        raise TypeError("y must be an array of shape (n,), got None")
    yv = check_vector(y, n, "y", shape_note=" to match X")
    if _loss_table.TABLE[loss].labels == "pm1":
        bad = (yv != 1.0) & (yv != -1.0)
        if bad.any():  # the offending labels are not quoted: y may be private (issue 21, item 10)
            raise ValueError(f"{loss} loss needs labels in {{-1, +1}}; y has other values "
                             "(map {0, 1} labels with 2*y - 1)")
    a = _scalar(alpha, "alpha", positive=True)
    lin = check_vector(linear, d, "linear")
    Q = None
    if quadratic is not None:
        Q = np.asarray(quadratic)
        if Q.dtype.kind not in "biuf":
            raise TypeError(f"quadratic must be a real matrix, got dtype {Q.dtype}")
        Q = np.ascontiguousarray(Q, dtype=np.float64)
        if Q.shape != (d, d):
            raise ValueError(f"quadratic must have shape ({d}, {d}), got {Q.shape}")
        if not np.isfinite(Q).all():
            raise ValueError("quadratic contains NaN or infinite entries")
        if not np.allclose(Q, Q.T, rtol=1e-12, atol=1e-12 * max(1.0, float(np.abs(Q).max()))):
            raise ValueError("quadratic must be symmetric")
    w = None
    if sample_weight is not None:
        w = check_vector(sample_weight, n, "sample_weight")
        if (w < 0).any():
            raise ValueError("sample_weight must be >= 0")
    c = 0.0
    if clip_norm is not None:
        c = _scalar(clip_norm, "clip_norm", positive=True, allow_zero=False)
    return code, delta, layout, data, indices, indptr, n, d, yv, a, lin, Q, w, c, dx, rs, icpt


#: Largest ``max_iter`` the native solvers take: their iteration / epoch counter is an int64.
MAX_ITER = 2**63 - 1


def check_max_iter(max_iter) -> int:
    """``max_iter`` as an int in [0, :data:`MAX_ITER`]: ``ValueError`` for a bool, a non-integer or
    a value out of range (the one check of the solvers' iteration cap, run before any draw)."""
    if (isinstance(max_iter, (bool, np.bool_)) or not isinstance(max_iter, (int, np.integer))
            or not 0 <= max_iter <= MAX_ITER):
        raise ValueError(f"max_iter must be an integer in [0, 2**63 - 1], got {max_iter!r}")
    return int(max_iter)


def default_solver_threads() -> int:
    """``DPFAST_NUM_THREADS`` when set, else every CPU this process may use (results never depend on it)."""
    return _threads.env_threads() or _threads.cpu_count()


def _raise_bad_X(status: int) -> None:
    if status == 4:
        raise ValueError("X contains NaN or infinite entries (or a row whose squared norm overflows float64)")


# ----------------------------------------------------------------------------- public API

def glm_loss_and_grad(
    X,
    y,
    loss: str,
    coef,
    *,
    alpha: float = 0.0,
    linear=None,
    quadratic=None,
    sample_weight=None,
    clip_norm: Optional[float] = None,
    huber_delta: float = 1.0,
    n_threads: Optional[int] = None,
) -> Tuple[float, np.ndarray]:
    """F(coef) and grad F(coef) for the objective of :func:`minimize_glm` (one pass over X).

    See :doc:`/theory/erm` ("The mechanism"; l_C of Algorithm 1 when ``clip_norm`` is
    given).
    """
    evaluate = glm_gradient_oracle(X, y, loss, alpha=alpha, linear=linear, quadratic=quadratic,
                                   sample_weight=sample_weight, clip_norm=clip_norm, huber_delta=huber_delta,
                                   n_threads=n_threads)
    return evaluate(coef)


def glm_gradient_oracle(
    X,
    y,
    loss: str,
    *,
    alpha: float = 0.0,
    linear=None,
    quadratic=None,
    sample_weight=None,
    clip_norm: Optional[float] = None,
    huber_delta: float = 1.0,
    n_threads: Optional[int] = None,
):
    """``evaluate(coef) -> (F(coef), grad F(coef))`` for the objective of :func:`minimize_glm`,
    with the inputs validated and prepared once (for loops that evaluate many points)."""
    code, delta, layout, data, indices, indptr, n, d, yv, a, lin, Q, w, c, dx, rs, icpt = _prepare(
        X, y, loss, alpha, linear, quadratic, sample_weight, clip_norm, huber_delta
    )
    nt = default_solver_threads() if n_threads is None else _threads.check_threads(n_threads)

    def evaluate(coef) -> Tuple[float, np.ndarray]:
        th = check_vector(coef, d, "coef")
        f, g, ok = _glm.loss_and_grad(data, indices, indptr, layout, n, dx, yv, w, code, delta, c, a, lin, Q, th, nt,
                                      rs, icpt)
        if not ok:
            _raise_bad_X(4)
        return float(f), g

    return evaluate


def minimize_glm(
    X,
    y,
    loss: str,
    *,
    alpha: float,
    linear=None,
    quadratic=None,
    sample_weight=None,
    clip_norm: Optional[float] = None,
    huber_delta: float = 1.0,
    solver: str = "lbfgs",
    tol: float = 1e-6,
    max_iter: int = 1000,
    coef0=None,
    rng: RandomLike = None,
    step_size="auto",
    memory: int = 10,
    n_threads: Optional[int] = None,
) -> GLMResult:
    """Minimize F(theta) = sum_i w_i l_C(y_i, x_i.theta) + (alpha/2)||theta||^2 + linear.theta
    + (1/2) theta^T quadratic theta until ||grad F||_2 <= tol.

    Parameters
    ----------
    X : (n, d) float32/float64 ndarray (C or F order, not copied), scipy CSR (not densified), or
        :class:`MappedRows` (dense rows scaled and extended by a constant feature inside the
        kernels, no copy).  No intercept is added otherwise: append a bias column yourself.
    y : (n,) labels; in {-1, +1} for ``logistic`` and ``smoothed_hinge``.
    loss : "logistic" | "squared" | "huber" | "smoothed_hinge" (Rennie-Srebro smoothed hinge:
        1/2 - m for m <= 0, (1 - m)^2/2 for 0 < m < 1, 0 for m >= 1, m = y x.theta).
    alpha : ridge coefficient (>= 0).  linear : (d,) vector b.  quadratic : (d, d) symmetric
        matrix (L-BFGS only).
    sample_weight : (n,) non-negative weights w_i (default 1).
    clip_norm : C > 0 for the gradient-clipped loss l_C of Algorithm 1 (see
        :doc:`/theory/erm`, step 1): each unweighted per-example gradient
        l'(y_i, x_i.theta) x_i is clipped to norm <= C, then weighted.
    huber_delta : Huber threshold.
    solver : "lbfgs" | "sag" | "saga".
    tol : stop when ||grad F||_2 <= tol (exact full gradient).
    max_iter : L-BFGS iterations, or SAG/SAGA epochs (exact gradient check after each).
    coef0 : starting point (default zeros).
    rng : randomness of SAG/SAGA's row sampling (None, seed, Generator or SecureRandom;
        :func:`dpfast.random.check_random_state`).  Unused by L-BFGS.
    step_size : SAG/SAGA step on the mean objective: "auto", "theory" or a float (module
        docstring).  memory : L-BFGS history length.  n_threads : threads for the passes
        over X (default: ``DPFAST_NUM_THREADS`` when set, else the CPUs this process may use);
        the result does not depend on it.

    Returns
    -------
    GLMResult; ``converged`` is True exactly when ``grad_norm <= tol``, with grad_norm the
    exact gradient norm at ``coef``.  Raises ValueError for NaN/inf in X (found natively in
    the pass that computes the row norms), y, weights or vectors, for wrong shapes or labels.
    """
    code, delta, layout, data, indices, indptr, n, d, yv, a, lin, Q, w, c, dx, rs, icpt = _prepare(
        X, y, loss, alpha, linear, quadratic, sample_weight, clip_norm, huber_delta
    )
    if not isinstance(solver, str) or solver not in _SOLVER_CODE:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    t = _scalar(tol, "tol", positive=True, allow_zero=False)
    max_iter = check_max_iter(max_iter)
    if isinstance(memory, (bool, np.bool_)) or not isinstance(memory, (int, np.integer)) or memory < 1:
        raise ValueError(f"memory must be a positive integer, got {memory!r}")
    step, rule = 0.0, 0
    if isinstance(step_size, str):
        if step_size not in ("auto", "theory"):
            raise ValueError(f"step_size must be 'auto', 'theory' or a positive float, got {step_size!r}")
        rule = 1 if step_size == "theory" else 0
    else:
        step = _scalar(step_size, "step_size", positive=True, allow_zero=False)
    if Q is not None and solver != "lbfgs":
        raise ValueError("quadratic is supported by solver='lbfgs' only")
    if layout == 2 and (rs is not None or icpt != 0.0) and solver != "lbfgs":
        raise ValueError("MappedRows over CSR X is supported by solver='lbfgs' only (SAG/SAGA read stored rows)")
    if coef0 is None:
        theta = np.zeros(d, dtype=np.float64)
    else:
        theta = check_vector(coef0, d, "coef0").copy()
    nt = default_solver_threads() if n_threads is None else _threads.check_threads(n_threads)
    args = (data, indices, indptr, layout, n, dx, yv, w, code, delta, c, a, lin, Q,
            _SOLVER_CODE[solver], t, int(max_iter), int(memory), step, rule, nt, theta)
    if solver == "lbfgs":
        out = _glm.minimize(*args, None, rs, icpt)
    else:
        gen = check_random_state(rng)
        with native_stream(gen) as cap:
            out = _glm.minimize(*args, cap, rs, icpt)
    n_iter, n_eval, converged, fun, gnorm, status, step_used = out
    _raise_bad_X(status)
    gnorm = float(gnorm)
    return GLMResult(
        coef=theta,
        grad_norm=gnorm,
        n_iter=int(n_iter),
        converged=bool(gnorm <= t),
        fun=float(fun),
        solver=solver,
        n_eval=int(n_eval),
        message=_STATUS.get(int(status), f"status {status}"),
        step_size=None if solver == "lbfgs" else float(step_used),
    )
