"""The Bingham distribution and the Bingham mechanism for the top principal direction (see
:doc:`/theory/mechanisms`, "Bingham mechanism").

Sampler: exact rejection sampling with an angular central Gaussian (ACG) envelope (Kent,
Ganeiber & Mardia 2018, "A new method to simulate the Bingham and related distributions in
directional data analysis with applications", Statistics and Computing 28, 2018; KGM below).
In the eigenbasis of A, with lambda_i = max(mu) - mu_i >= 0 (mu the eigenvalues of A; the shift
does not change a density on the sphere), the target is f*(x) = exp(-sum_i lambda_i x_i^2) and
the envelope the ACG density g*(x) = (x^T Omega x)^{-d/2}, Omega = I + 2 Lambda / b.  With
z = x^T Lambda x >= 0, f*/g* = e^{-z} (1 + 2 z / b)^{d/2} <= M*(b) = e^{-(d - b)/2} (d / b)^{d/2}
(the maximum over z, at z = (d - b)/2), for any b in (0, d].  Draw y ~ N(0, Omega^{-1}),
x = y / |y| (an ACG(Omega) draw), and accept with probability f*(x) / (M* g*(x)); an accepted x
has density proportional to f* exactly (for ideal Gaussian and uniform variates).  b only sets
the acceptance rate; KGM's choice solves sum_i 1 / (b + 2 lambda_i) = 1 (b in [1, d]).
diffprivlib's ``Bingham`` mechanism samples by Gibbs/MCMC, whose output law is only
approximately Bingham: this one is exact.

Mechanism: the exponential mechanism (McSherry & Talwar 2007) on the unit sphere with utility
u(v) = v^T A v.  For A = X^T X with rows of l2 norm at most 1 this is PPCA (Chaudhuri, Sarwate
& Sinha 2013, "A near-optimal algorithm for differentially-private principal components",
JMLR 14, Algorithm 1): v has density proportional to exp((epsilon / 2) v^T X^T X v).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional

import numpy as np

from dpfast._safe_root import safe_root
from dpfast._validation import Epsilon, Positive, as_array, check_size, validate_params
from dpfast.mechanisms import _events
from dpfast.random import RNG, RandomLike, allocate_output, standard_exponential, standard_normal

if TYPE_CHECKING:
    from dpfast.budget import PrivacyBudget

__all__ = ["bingham", "bingham_sample"]

_MAX_ROUNDS = 1000
_BATCH = 1 << 14
_GRID = 2.0 ** 40


def _check_matrix(A, name: str = "A") -> np.ndarray:
    a = as_array(A, name)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a real square matrix, got dtype {a.dtype}")
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 1:
        raise ValueError(f"{name} must be a square matrix (d, d) with d >= 1, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or infinite entries")
    return a


def _kgm_b(lam: np.ndarray) -> float:
    """KGM's envelope parameter: the root of sum_i 1 / (b + 2 lambda_i) = 1 in [1, d] (any
    b in (0, d] gives a valid envelope; this one maximises the acceptance rate's bound)."""
    d = lam.size
    if not np.any(lam > 0):
        return float(d)
    return safe_root(lambda b: float(np.sum(1.0 / (b + 2.0 * lam))) - 1.0, 1.0, rtol=1e-9, lo=1e-3,
                     hi=float(d))


class _Bingham:
    """The eigen-decomposed target exp(x^T A x) on S^{d-1} and its ACG envelope."""

    def __init__(self, A: np.ndarray) -> None:
        sym = (A + A.T) / 2.0  # x^T A x = x^T sym(A) x
        mu, self.vecs = np.linalg.eigh(sym)
        self.lam = np.maximum(mu[-1] - mu, 0.0)
        self.d = mu.size
        self.b = _kgm_b(self.lam)
        self.omega = 1.0 + 2.0 * self.lam / self.b
        self.log_m = -(self.d - self.b) / 2.0 + (self.d / 2.0) * math.log(self.d / self.b)

    def draw(self, gen: np.random.Generator, n: int, out: Optional[np.ndarray] = None) -> np.ndarray:
        d = self.d
        out = np.empty((n, d)) if out is None else out
        if d == 1:
            out[:, 0] = np.where(gen.random(n) < 0.5, -1.0, 1.0)
            return out
        inv_sd = 1.0 / np.sqrt(self.omega)
        batch = min(max(16, n + n // 2), _BATCH)  # bounded memory for any n
        got, idle = 0, 0
        while got < n:
            y = np.asarray(standard_normal(gen, (batch, d)), dtype=np.float64) * inv_sd
            x = y / np.linalg.norm(y, axis=1, keepdims=True)
            z = (x * x) @ self.lam
            log_ratio = -z + (d / 2.0) * np.log1p(2.0 * z / self.b) - self.log_m  # <= 0
            e = np.asarray(standard_exponential(gen, batch), dtype=np.float64)
            acc = x[e >= -log_ratio]  # P[E >= t] = e^{-t}: accepted with probability f*/(M* g*)
            take = min(acc.shape[0], n - got)
            out[got:got + take] = acc[:take] @ self.vecs.T
            got += take
            idle = 0 if take else idle + 1
            if idle > _MAX_ROUNDS:  # pragma: no cover - KGM's acceptance rate is bounded below
                raise RuntimeError("bingham_sample: the rejection sampler accepted nothing in "
                                   f"{_MAX_ROUNDS} rounds")
        return out


@validate_params(rng=RNG)
def bingham_sample(A, size=None, rng: RandomLike = None):
    """Exact draws from the Bingham distribution on the unit sphere S^{d-1}: density
    proportional to exp(x^T A x) (A real square, symmetrised), by KGM 2018's rejection sampler
    with an angular central Gaussian envelope (see the module docstring).

    Returns an array of shape ``(d,)`` (``size=None``) or ``size + (d,)``: unit vectors.  The law
    is antipodally symmetric (x and -x are equally likely).  A sampler of a given law: no
    privacy claim (:func:`bingham` is the mechanism).
    """
    a = _check_matrix(A)
    d = a.shape[0]
    shape = check_size(size, itemsize=16 * d)  # the output and the working batches
    n = 1 if shape is None else math.prod(shape)
    out = allocate_output((n, d), np.dtype(np.float64))  # before any draw: a refused size draws nothing
    _Bingham(a).draw(rng, n, out)  # type: ignore[arg-type]  # validate_params(rng=RNG) made it a Generator
    return out[0] if shape is None else out.reshape(tuple(shape) + (d,))


@validate_params(sensitivity=Positive(allow_array=False), epsilon=Epsilon(allow_array=False), rng=RNG)
def bingham(A, sensitivity: float, epsilon: float, rng: RandomLike = None, *,
            budget: Optional["PrivacyBudget"] = None) -> np.ndarray:
    """The Bingham mechanism: a unit vector v with density proportional to
    exp(epsilon v^T A v / (2 sensitivity)) on the sphere -- a private estimate of the top
    eigenvector of the symmetric matrix ``A`` (up to sign).

    Guarantee: epsilon-DP (the exponential mechanism of McSherry & Talwar 2007 with utility
    u(v) = v^T A v) when ``sensitivity`` bounds sup_{|v|=1} |v^T (A - A') v| = ||A - A'||_2 over
    neighbouring data sets.  For ``A = X^T X`` with rows of l2 norm at most R, adding or
    removing (or replacing) one row changes u by at most R^2, so ``sensitivity = R**2``; with
    R = 1 this is PPCA (Chaudhuri, Sarwate & Sinha 2013, Algorithm 1 and Theorem 5: density
    proportional to exp((n epsilon / 2) v^T (X^T X / n) v)).  Event ``PureDP(epsilon)``.

    Sampler: :func:`bingham_sample` (exact rejection sampling, Kent, Ganeiber & Mardia 2018).
    The draw is rounded to multiples of 2^-40 (post-processing): the rotation from A's
    eigenbasis leaves low-order bits that depend on A rather than on the direction released
    (Mironov 2012; the release audit detected them through whether |v| rounds to <= 1).  Still
    not floating-point safe in the strict sense of :mod:`dpfast.mechanisms.snapping`.

    Parameters
    ----------
    A : array_like (d, d)
        Finite; only its symmetric part matters.
    sensitivity, epsilon : float
        > 0.
    rng : None, int, numpy.random.Generator or SecureRandom
    budget : PrivacyBudget, optional
        Charged before the draw.

    Returns
    -------
    ndarray (d,): a unit vector up to the 2^-40 rounding.
    """
    return _bingham_plan(A, sensitivity, epsilon).release(rng, budget)


@_events.planned_by(bingham)
def _bingham_plan(A, sensitivity, epsilon) -> _events.Plan:
    a = _check_matrix(A)
    scale = epsilon / (2.0 * sensitivity)
    with np.errstate(over="ignore"):
        scaled = a * scale
    if not np.isfinite(scaled).all():
        raise ValueError("epsilon / sensitivity times A overflows")

    def draw(gen):
        v = _Bingham(scaled).draw(gen, 1)[0]
        # Post-processing to a 2^-40 grid: the rotation into A's eigenbasis leaves low-order bits
        # (e.g. whether |v| rounds to <= 1) that depend on A, not only on the released direction
        # (Mironov 2012's point; the release audit found |v| <= 1 far more often for one input).
        return np.round(v * _GRID) / _GRID

    return _events.Plan("bingham", _events.pure_event, (epsilon,), draw)
