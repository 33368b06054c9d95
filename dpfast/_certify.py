"""Certified minimisation: a point whose gradient is at most ``tol``, reached on every input.

Why this exists.  The privacy proofs of the ERM mechanisms hold for *any* point whose
gradient norm is at most tau (Algorithm 1 and Theorem 4.1 of Redberg, Koskela & Wang,
"Improving the privacy and practicality of objective perturbation for differentially private
linear learners", NeurIPS 2023; the stability argument of :mod:`dpfast.public._regularization`).
They say nothing about a mechanism that may *refuse*: whether a solver reaches tau within an
iteration budget depends on the data, so a refusal is an observable, data-dependent event (an
abort channel that by itself can break differential privacy).  dpfast therefore never refuses
for lack of iterations: the fast solvers run first, and when they have not certified tau,
Nesterov's accelerated gradient method continues from their point with an iteration count
that is *proved* sufficient for every data set.

The guarantee (Nesterov, "Lectures on Convex Optimization", 2nd ed. 2018, Theorem 2.2.3, the
constant-step scheme with gamma_0 = mu).  Let F be mu-strongly convex and M-smooth in the norm
||u||_P = sqrt(u^T P u) of a fixed positive definite P (dual norm ||g||_* = sqrt(g^T P^-1 g)),
kappa = M / mu, and run x_{k+1} = y_k - P^-1 grad F(y_k) / M,
y_{k+1} = x_{k+1} + beta (x_{k+1} - x_k), beta = (sqrt(kappa) - 1) / (sqrt(kappa) + 1),
y_0 = x_0.  Then

    F(x_k) - F* <= (1 - 1/sqrt(kappa))^k [F(x_0) - F* + (mu/2) ||x_0 - x*||_P^2].

With (mu/2)||x_0 - x*||^2 <= F(x_0) - F* <= ||grad F(x_0)||_*^2 / (2 mu) (strong convexity) and
||grad F(x)||_*^2 <= 2 M (F(x) - F*) (smoothness):

    ||grad F(x_k)||_*^2 <= 2 kappa (1 - 1/sqrt(kappa))^k ||grad F(x_0)||_*^2,

so ``k* = ceil(log(2 kappa g_0^2 / tol^2) / -log(1 - 1/sqrt(kappa)))`` iterations certify tol.
The loop stops earlier as soon as any evaluated point (a y_k) has gradient <= tol: that point
is as good for the proofs.  The remaining failure is floating point: a gradient evaluated in
float64 cannot be certified below its rounding error.  :func:`check_certifiable` refuses, before
any private data is read, a tol that is not at least ``ROUNDING_FACTOR`` times a bound on that
error computed from public quantities only; past that, a failure at ``x_{k*}`` raises
:class:`PrivacyConvergenceError`, an event of probability zero in exact arithmetic (the same
floating-point caveat as the continuous samplers').
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Tuple

import numpy as np

__all__ = ["PrivacyConvergenceError", "certified_descent", "check_certifiable", "dual_norm", "ROUNDING_FACTOR"]

#: tol must be at least this many times the float64 rounding bound of the gradient sum
ROUNDING_FACTOR = 8.0


class PrivacyConvergenceError(RuntimeError):
    """A floating-point failure to certify ||grad F|| <= tol (impossible in exact arithmetic).

    Raised only when the accelerated method, after the number of iterations that provably
    suffices, still evaluates a gradient above tol: rounding, not the data, stopped it.
    """


def check_certifiable(tol: float, magnitude: float, terms: str = "") -> None:
    """``ValueError`` when ``tol`` is below what float64 can certify for this problem.

    ``magnitude`` bounds the sum of the absolute sizes of the gradient's terms, from public
    quantities only (for a GLM: 2 (n L + ||b||), n rows with per-example gradients <= L, the
    noise vector b, and the ridge term at the minimiser, which is at most the rest).  No
    summation order computes such a sum with an error below about ``magnitude * 2^-53``
    (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed. 2002, section 4.2), so a
    tol within ``ROUNDING_FACTOR`` of it cannot be certified reliably.  The check runs before
    the solvers read the private rows; it is necessary, not sufficient.  ``terms``: what makes up
    ``magnitude``, in public parameters, for the message (which parameter to change).
    """
    floor = ROUNDING_FACTOR * float(magnitude) * np.finfo(np.float64).eps
    if not tol >= floor:
        what = f" ({terms})" if terms else ""
        fix = (f"use tol >= {floor:.3g}" if math.isfinite(floor) else
               "no tol can be certified: lower the parameters that scale the gradient")
        raise ValueError(
            f"tol={tol:.3g} is below what float64 arithmetic can certify for a gradient whose terms add up to "
            f"{magnitude:.3g} in absolute value{what}; {fix}"
        )


def dual_norm(g: np.ndarray, solve: Callable[[np.ndarray], np.ndarray]) -> float:
    """||g||_* = sqrt(g^T P^-1 g), with ``solve(g) = P^-1 g``."""
    return math.sqrt(max(float(g @ solve(g)), 0.0))


def iterations_needed(kappa: float, g0: float, tol: float) -> int:
    """k* of the module docstring (at least 1)."""
    if g0 <= tol:
        return 0
    if kappa <= 1.0:
        return 1  # one step of 1/M lands on the minimiser of a quadratic with kappa = 1
    rate = -math.log1p(-1.0 / math.sqrt(kappa))
    return max(1, math.ceil(math.log(2.0 * kappa * (g0 / tol) ** 2) / rate))


def certified_descent(
    grad: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    *,
    tol: float,
    strong_convexity: float,
    smoothness: float,
    solve: Optional[Callable[[np.ndarray], np.ndarray]] = None,
) -> Tuple[np.ndarray, float, int]:
    """A point x with ||grad F(x)||_* <= tol by Nesterov's method (module docstring).

    ``grad``: the exact gradient of F.  ``strong_convexity`` mu and ``smoothness`` M: bounds in
    the P-norm (``solve(g) = P^-1 g``; None: P = I).  Returns ``(x, ||grad F(x)||_*, passes)``
    where passes counts gradient evaluations.  Raises :class:`PrivacyConvergenceError` only when
    rounding prevents certification at ``x_{k*}``.
    """
    if not (strong_convexity > 0 and smoothness >= strong_convexity and math.isfinite(smoothness)):
        raise ValueError(f"need 0 < strong_convexity <= smoothness < inf, got {strong_convexity!r}, {smoothness!r}")
    solve = solve if solve is not None else (lambda g: g)

    x = np.array(x0, dtype=np.float64, copy=True)
    g = grad(x)
    gn = dual_norm(g, solve)
    passes = 1
    if gn <= tol:
        return x, gn, passes
    kappa = smoothness / strong_convexity
    k_star = iterations_needed(kappa, gn, tol)
    beta = (math.sqrt(kappa) - 1.0) / (math.sqrt(kappa) + 1.0)
    y = x  # y_0 = x_0, and g holds grad F(y_0)
    for _ in range(k_star):
        x_next = y - solve(g) / smoothness
        y = x_next + beta * (x_next - x)
        x = x_next
        g = grad(y)
        passes += 1
        gn = dual_norm(g, solve)
        if gn <= tol:
            return y, gn, passes
    g = grad(x)  # the theorem's point x_{k*}
    passes += 1
    gn = dual_norm(g, solve)
    if gn <= tol:
        return x, gn, passes
    raise PrivacyConvergenceError(
        # the message names public quantities only (k* depends on the data)
        f"floating-point failure: after the accelerated-gradient iterations that provably reach tol={tol:.3g} in "
        "exact arithmetic, rounding kept the gradient above it; no output is released. Use a larger tol"
    )
