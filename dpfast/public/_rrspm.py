"""RRSPM: pure-DP binary classification with public unlabelled data (Algorithm 4).

See: :doc:`/theory/public_data` sections 2.4, 3.1 (Theorem 4), 3.3 (Theorem 8, Lemmas 18-21), 4.4.
Block, Bun, Desai, Shetty & Wu 2024, "Oracle-Efficient Differentially Private Learning with
Public Data", Appendix C.

Algorithm (as implemented)::

    ytil_k ~ Bernoulli(1/2),  w_k ~ Exponential(mean b),  k = 1..m     # public points Z_k
    f_tilde = ERM_F( sum_i 1[f(X_i) != Y_i] + sum_k w_k 1[f(Z_k) != ytil_k] )   # oracle call 1
    h       = f_tilde(Z)                                                  # the private release
    f_hat   = any f in F with f(Z) = h, computed from (Z, h) only         # oracle call 2

``b = 2m/eps`` under ``neighbours="replace_one"`` (the paper's Definition 1 and Lap(2m/eps)
weights), ``b = m/eps`` under ``"add_remove"``.  Exponential(b) weights with uniform labels are
the paper's signed Lap(b) weights with the sign folded into a label flip
(``xi 1[f != y] = |xi| 1[f != 1-y] - |xi|`` for xi < 0; :doc:`/theory/public_data` (our derivation)): the same
distribution, so any non-negative weighted 0-1 oracle can be used.

**Guarantee (pure epsilon-DP; Theorem 8).**  Write P_D(g) = min{private loss of f : f in F,
f(Z) = g} for a pattern g on Z and Q_xi(g) = sum_k xi_k 1[g_k != ytil_k].  The pattern
h = f_tilde(Z) is the a.s. unique minimiser of P_D + Q_xi (continuous weights).  For
neighbours D', P_D' - P_D takes values in [-1, 1] (replace-one) or in [0, 1] / [-1, 0]
(add / remove one record), so shifting each xi_k by c = 2 (resp. 1) towards h
(``xi_k + c (1 - 2 * 1[h_k != ytil_k])``, the coupling Psi_h of Lemma 18) raises every other
pattern's objective by at least c times its Hamming distance to h, and h stays the minimiser
under D'.  The shift changes the Laplace(b) density by at most e^{c/b} per coordinate, e^{cm/b}
= e^eps in total; hence P(h | D) <= e^eps P(h | D') for every h.  f_hat is post-processing.
Assumptions: the oracle is an **exact** minimiser over a fixed class F (the native threshold and
stump oracles are; a user oracle must be -- dpfast cannot check it), the consistency step uses
only (Z, h), and exact ties (probability zero in exact arithmetic) are ignored, as in the paper's
Lemma 20.  Privacy does not depend on m, on the public distribution or on sigma-smoothness;
accuracy does (Theorem 10: m ~ (d + ln(1/beta)) / (alpha^2 sigma^2), and the total public weight
~ 2 m^2 / eps must stay small against n).

The Gaussian-weight variant (Theorem 4, second part) is stated without proof in the paper
(:doc:`/theory/public_data` item 3) and is not shipped.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import numpy as np

from dpfast._validation import check_epsilon, check_positive
from dpfast.accounting import PureDP
from dpfast.accounting.events import Neighbours
from dpfast.budget import refuse_unbudgeted
from dpfast.public._oracles import as_hypothesis, stump_oracle, threshold_oracle
from dpfast.random import RandomLike, check_random_state, standard_exponential

__all__ = ["RRSPMResult", "rrspm", "rrspm_weight_scale", "rrspm_public_size"]

OracleLike = Union[str, Callable[..., Any]]


@dataclass(frozen=True)
class RRSPMResult:
    """Output of :func:`rrspm`: ``hypothesis`` (the released f_hat), ``public_labels`` (h, the
    DP pattern on the public points), ``weight_scale`` b, ``oracle_calls`` (always 2)."""

    hypothesis: Any
    public_labels: np.ndarray
    weight_scale: float
    oracle_calls: int
    epsilon: float = math.nan
    neighbours: str = "replace_one"

    def description(self):
        """The release as a :mod:`dpfast.accounting` description: ``PureDP(epsilon)``."""
        return PureDP(self.epsilon, neighbours=self.neighbours)


def rrspm_weight_scale(m: int, epsilon: float, neighbours: str = "replace_one") -> float:
    """Laplace scale b of the public weights: 2m/eps (replace-one) or m/eps (add/remove)."""
    epsilon = check_epsilon(epsilon, allow_array=False)
    m = check_positive(m, "m", allow_array=False)  # (the public size: NaN or beyond a double refused)
    # one record moves the weight vector by at most sum_factor * m in l1 (the neighbour factor's
    # one home, Neighbours.sum_factor)
    b = Neighbours.coerce(neighbours).sum_factor * m / epsilon
    if not b < math.inf:  # epsilon ~1e-308 and below: rrspm would draw, then feed inf weights to the oracle
        raise ValueError(f"epsilon={epsilon!r} is too small: the public weights' Laplace scale sum_factor * m / "
                         f"epsilon overflows a double (m={m}); use a larger epsilon")
    return b


def rrspm_public_size(n: int, epsilon: float, vc_dim: float = 1.0) -> int:
    """Data-independent default number of public points for RRSPM (accuracy only).

    Balances the two terms of Theorem 10's error bound that depend on m, the public
    discretisation ``sqrt(d/m)`` and the weight noise ``m^2/(eps n)``, which gives
    ``m ~ (eps n)^{2/5} d^{1/5}``; the constant 0.5 was set on synthetic thresholds (see
    benchmarks/results/public.md).  Uses only n (public under replace-one), eps and d.
    """
    n = check_positive(n, "n", allow_array=False)
    epsilon = check_positive(epsilon, "epsilon", allow_array=False)
    vc_dim = check_positive(vc_dim, "vc_dim", allow_array=False)
    # in logs: (eps n) overflows float64 for eps, n near 1e308
    size = 0.5 * math.exp(0.4 * (math.log(epsilon) + math.log(n)) + 0.2 * math.log(vc_dim))
    if not size < 2.0 ** 62:
        raise ValueError(f"the default public size for n={n:g}, epsilon={epsilon:g} exceeds 2**62; pass a public size")
    return max(4, int(math.ceil(size)))


def _resolve_oracle(oracle: OracleLike, p: int) -> Callable:
    if callable(oracle):
        return oracle
    if oracle == "threshold":
        if p != 1:
            raise ValueError(f"oracle='threshold' needs 1 feature, got {p}; use oracle='stump'")
        return threshold_oracle
    if oracle == "stump":
        return stump_oracle
    raise ValueError(f"oracle must be 'threshold', 'stump' or a callable ERM oracle, got {oracle!r}")


def rrspm(
    X_private,
    y_private,
    X_public,
    *,
    epsilon: float,
    oracle: OracleLike = "stump",
    consistency: Optional[Callable] = None,
    neighbours: str = "replace_one",
    rng: RandomLike = None,
) -> RRSPMResult:
    """Algorithm 4 (RRSPM): an epsilon-DP binary classifier from an exact weighted 0-1 oracle.

    Parameters
    ----------
    X_private : (n, p) array, y_private : (n,) array in {0, 1}
        Private labelled data (the privacy unit is one row).
    X_public : (m, p) array
        Public unlabelled points.
    epsilon : float
        Pure-DP target (see the module docstring for the proof and its assumptions).
    oracle : "stump" | "threshold" | callable
        ``oracle(X, y, sample_weight) -> hypothesis`` (callable or object with ``predict``),
        an **exact** weighted 0-1 ERM over a fixed class.  Called twice: once on the private +
        weighted public points, once on the public points labelled h (weights 1) to find a
        consistent hypothesis, unless ``consistency`` is given.
    consistency : callable, optional
        ``consistency(Z, h) -> hypothesis`` consistent with h on Z; must use only its arguments.
    neighbours : "replace_one" | "add_remove"
        Neighbouring relation of the guarantee (weights Lap(2m/eps) or Lap(m/eps)).
    rng :
        Randomness (:func:`dpfast.random.check_random_state`).

    Raises ``RuntimeError`` if the consistency step does not reproduce h on Z (the oracle is
    not exact); this is decided from the DP release h only.
    """
    refuse_unbudgeted("rrspm")  # before any data is read: it cannot charge an open budget
    try:
        Xp = np.asarray(X_private, dtype=np.float64)
    except (TypeError, ValueError):  # NumPy's message quotes the entry: X_private is private (issue 21, item 10)
        raise ValueError("X_private must hold real numbers: it has an entry that cannot be converted "
                         "to float") from None
    Z = np.asarray(X_public, dtype=np.float64)
    if Xp.ndim == 1:
        Xp = Xp[:, None]
    if Z.ndim == 1:
        Z = Z[:, None]
    for name, A in (("X_private", Xp), ("X_public", Z)):
        if A.ndim != 2:
            raise ValueError(f"{name} must be a 1-d or 2-d array of features, got shape {A.shape}")
    if Xp.shape[1] != Z.shape[1]:
        raise ValueError(f"X_public has {Z.shape[1]} features but X_private has {Xp.shape[1]}")
    y = np.asarray(y_private)
    n, p = Xp.shape
    m = Z.shape[0]
    if y.shape != (n,) or not ((y == 0) | (y == 1)).all():
        raise ValueError("y_private must be a 1-D array of 0/1 labels with one entry per private row")
    if m == 0:
        raise ValueError("X_public has no rows; RRSPM labels the public points and needs at least one")
    b = rrspm_weight_scale(m, epsilon, neighbours)
    fn = _resolve_oracle(oracle, p)
    if consistency is not None and not callable(consistency):  # before any draw (issue 21 item 8)
        raise TypeError(f"consistency must be a callable consistency(Z, h) or None, got {type(consistency).__name__}")
    gen = check_random_state(rng)
    ytil = gen.integers(0, 2, size=m)
    w = b * standard_exponential(gen, m)  # Exp(scale b) from the package's one sampler family
    X_all = np.concatenate([Xp, Z], axis=0)
    y_all = np.concatenate([y.astype(np.int64), ytil])
    w_all = np.concatenate([np.ones(n), w])
    f_tilde = fn(X_all, y_all, w_all)
    h = np.asarray(as_hypothesis(f_tilde)(Z)).astype(np.int64).ravel()
    if h.shape != (m,) or not ((h == 0) | (h == 1)).all():
        raise RuntimeError("the oracle's hypothesis must return one 0/1 label per public point")
    del f_tilde  # never released: only its public pattern h is
    if consistency is None:
        f_hat = fn(Z, h, np.ones(m))
    else:
        f_hat = consistency(Z, h)
    if not np.array_equal(np.asarray(as_hypothesis(f_hat)(Z)).astype(np.int64).ravel(), h):
        raise RuntimeError(
            "the consistency step did not reproduce the released labels on the public points; "
            "the oracle is not an exact ERM oracle for its class, so the privacy guarantee does not apply"
        )
    return RRSPMResult(f_hat, h, float(b), 2, float(epsilon), neighbours)


def _warn_public_size(m: int, n: int, epsilon: float) -> None:
    if 2.0 * m * m / epsilon > n:
        warnings.warn(
            f"RRSPM: the total public weight ~2 m^2/eps = {2.0 * m * m / epsilon:.3g} exceeds n = {n}; "
            "the random public labels may dominate the private data (accuracy only; privacy is unaffected). "
            f"About m <= sqrt(eps n / 2) = {int(math.sqrt(epsilon * n / 2))} public points keep it below n.",
            UserWarning,
            stacklevel=3,
        )
