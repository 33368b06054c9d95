"""Constants of the GLM losses that the privacy mechanisms need.

See :doc:`/theory/erm`, "Setting": for l(theta; z) = f(x^T theta; y) the mechanisms
need L >= ||grad l|| = |f'| ||x|| and beta >= f'' ||x||^2.  With the gradient-clipped loss of
Algorithm 1 (|f'_C| <= C/||x||), L = C and beta is unchanged (Theorem F.3: l_C stays convex,
GLM and beta-smooth).  The losses are those of the solver, defined once in
``csrc/losses/losses.hpp``; the figures below are documentation, the code reads them from the
native loss table (:mod:`dpfast._loss_table`):

=================  ==========================  ===================  ===========
loss               f(u; y)                      sup |f'|             sup f''
=================  ==========================  ===================  ===========
logistic           log(1 + exp(-y u)), y=+-1    1                    1/4
squared            (u - y)^2 / 2                unbounded            1
huber              Huber(u - y; delta)          delta                1
smoothed_hinge     Rennie & Srebro 2005         1                    1
=================  ==========================  ===================  ===========
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from dpfast import _loss_table
from dpfast._validation import check_positive, check_real

__all__ = ["LOSSES", "margin_constants", "GLMConstants", "glm_constants", "multinomial_constants"]

LOSSES = _loss_table.MARGIN_LOSSES


def margin_constants(loss: str, huber_delta: float = 1.0) -> tuple[float, float]:
    """(sup |f'|, sup f'') of the loss in the margin u = x^T theta (labels |y| <= 1).

    Read from the native loss table (the table above); Huber's sup |f'| is its threshold.
    """
    if not isinstance(loss, str) or loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    e = _loss_table.TABLE[loss]
    lip = e.lipschitz
    if e.lipschitz_per_delta:
        # check_real, not float(): a Fraction beyond a double -> ValueError
        d = check_positive(check_real(huber_delta, "huber_delta"), "huber_delta", allow_array=False)
        lip = e.lipschitz * d
    return lip, e.smoothness


@dataclass(frozen=True)
class GLMConstants:
    """Privacy constants of a (clipped) GLM loss on rows with ||x|| <= ``row_norm``.

    ``lipschitz`` (L) bounds every per-example gradient norm; ``smoothness`` (beta) bounds
    f'' ||x||^2; ``solver_clip`` is the clipping threshold to pass to the solver (None when
    clipping at ``lipschitz`` would never act).
    """

    loss: str
    row_norm: float
    lipschitz: float
    smoothness: float
    solver_clip: float | None


def glm_constants(loss: str, row_norm: float, clip_norm: float | None = None, huber_delta: float = 1.0) -> GLMConstants:
    """L and beta for the mechanisms (see :doc:`/theory/erm`, "Setting", Algorithm 1).

    ``row_norm`` bounds ||x|| of every row the solver sees (bias feature included).
    ``clip_norm`` = C clips each per-example gradient to norm <= C (Algorithm 1, step 1); the loss
    is then C-Lipschitz.  Without clipping L = sup|f'| * row_norm, which is infinite for the
    squared loss (a ``ValueError`` then asks for ``clip_norm``).
    """
    # (check_real, not float(): Fraction(10**400, 3) is a ValueError)
    R = check_positive(check_real(row_norm, "row_norm"), "row_norm", allow_array=False)
    lip_m, smooth_m = margin_constants(loss, huber_delta)
    natural = lip_m * R
    if clip_norm is None:
        if math.isinf(natural):
            raise ValueError(f"the {loss} loss has an unbounded gradient; set clip_norm (the gradient clipping threshold C)")
        return GLMConstants(loss, R, natural, smooth_m * R * R, None)
    C = check_positive(check_real(clip_norm, "clip_norm"), "clip_norm", allow_array=False)
    if C >= natural:
        return GLMConstants(loss, R, natural, smooth_m * R * R, None)
    return GLMConstants(loss, R, C, smooth_m * R * R, C)


def multinomial_constants(row_norm: float) -> GLMConstants:
    """L and beta of the softmax cross-entropy with K outputs on rows with ||x|| <= ``row_norm``.

    For l(W; x, y) = -log softmax(W^T x)_y with W in R^{d x K} (flattened, Frobenius norm):
    ||grad_W l||_F = ||x|| ||p - e_y||_2 <= sqrt(2) ||x|| and the Hessian
    (diag p - p p^T) kron x x^T has largest eigenvalue <= ||x||^2 / 2 and rank <= K - 1 (the
    derivations are in ``csrc/losses/losses.hpp``; Boehning 1992, "Multinomial logistic
    regression algorithm", Ann. Inst. Statist. Math. 44, gives the same 1/2 bound).  The factors
    are read from the native loss table (the ``softmax`` row of :data:`dpfast._loss_table.TABLE`),
    their one home.
    No clipping is offered: a Frobenius-clipped softmax gradient is not the gradient of a convex
    loss, which output perturbation's sensitivity argument needs.
    """
    # (check_real, not float(): Fraction(10**400, 3) is a ValueError)
    R = check_positive(check_real(row_norm, "row_norm"), "row_norm", allow_array=False)
    c = _loss_table.TABLE["softmax"]
    return GLMConstants("multinomial", R, c.lipschitz * R, c.smoothness * R * R, None)
