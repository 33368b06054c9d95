"""ERM oracles for the public-data learners (see :doc:`/theory/public_data` sections 1.4, 4.1, 4.4).

An *oracle* is the non-private solver the learners call.  Two kinds are used:

* **weighted 0-1 oracle** (Algorithm 4, RRSPM): ``oracle(X, y, sample_weight) -> h`` where
  ``y`` is in {0,1}, ``sample_weight >= 0`` and ``h`` is a hypothesis: a callable
  ``h(X) -> {0,1}^n`` or an object with ``predict(X)``.  **Assumption (the privacy proof
  needs it, :doc:`/theory/public_data` and Theorem 8):** ``h`` is an *exact* minimiser of
  ``sum_i w_i 1[h(x_i) != y_i]`` over a fixed class F that does not depend on the data.
  dpfast cannot check this for a user oracle; the native oracles below are exact.
* **least-squares / GLM oracles** (Algorithms 1 and 3): see :mod:`dpfast.public._perturb` and
  :mod:`dpfast.public._regularization`.

Native exact oracles (``dpfast._public``, kernels in ``csrc/public/erm01.hpp``): 1-D
thresholds ``1[x > t]`` and decision stumps ``1[x_j > t]`` / ``1[x_j <= t]``, by sort + one
scan per feature, O(p N log N).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

import numpy as np

from dpfast import _public
from dpfast._validation import as_array

__all__ = [
    "Stump",
    "threshold_oracle",
    "stump_oracle",
    "count_oracle_calls",
    "as_hypothesis",
]


@dataclass(frozen=True)
class Stump:
    """A decision stump: ``1[x_j > t]`` (sign=+1) or ``1[x_j <= t]`` (sign=-1).

    A 1-D threshold is the stump with ``feature=0, sign=+1``.  ``threshold`` may be
    ``-inf`` or ``+inf`` (constant hypotheses).
    """

    feature: int
    threshold: float
    sign: int = 1

    def predict(self, X) -> np.ndarray:
        X = _as_2d(X, "X")
        if self.feature >= X.shape[1]:
            raise ValueError(f"X has {X.shape[1]} features; this stump uses feature {self.feature}")
        return _public.stump_predict(X, int(self.feature), float(self.threshold), int(self.sign)).astype(np.int64)

    __call__ = predict


def _as_2d(X, name: str) -> np.ndarray:
    X = as_array(X, name, np.float64)  # (as sample_weight below)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"{name} must be 1-D or 2-D, got shape {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError(f"{name} contains NaN or infinite entries")
    return np.ascontiguousarray(X)


def _check_01(X, y, sample_weight):
    X = _as_2d(X, "X")
    n = X.shape[0]
    y = np.asarray(y)
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},), got {y.shape}")
    if not ((y == 0) | (y == 1)).all():
        raise ValueError("y must contain only 0 and 1")
    if sample_weight is None:
        w = np.ones(n)
    else:
        w = as_array(sample_weight, "sample_weight", np.float64)  # a Fraction beyond a double: ValueError
        if w.shape != (n,):
            raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
        if not np.isfinite(w).all() or (w < 0).any():
            raise ValueError("sample_weight must be finite and >= 0 (fold negative weights into label flips)")
    return X, y.astype(np.uint8), np.ascontiguousarray(w)


def threshold_oracle(X, y, sample_weight=None) -> Stump:
    """Exact weighted 0-1 ERM over 1-D thresholds ``x -> 1[x > t]`` (native, O(N log N)).

    ``X`` is (N,) or (N, 1).  Returns the minimiser with the smallest threshold among ties;
    the threshold is the midpoint of the gap it falls in (``-inf``: all 1, ``+inf``: all 0).
    """
    X, y, w = _check_01(X, y, sample_weight)
    if X.shape[1] != 1:
        raise ValueError(f"threshold_oracle needs 1 feature, got {X.shape[1]}; use stump_oracle")
    f, t, s, _ = _public.stump_erm(X, y, w, False)
    return Stump(int(f), float(t), int(s))


def stump_oracle(X, y, sample_weight=None) -> Stump:
    """Exact weighted 0-1 ERM over decision stumps on every feature, both orientations.

    Native, O(p N log N).  Ties: smallest feature, then sign +1, then smallest threshold.
    """
    X, y, w = _check_01(X, y, sample_weight)
    f, t, s, _ = _public.stump_erm(X, y, w, True)
    return Stump(int(f), float(t), int(s))


HypothesisLike = Union[Callable, object]


def as_hypothesis(h) -> Callable[[np.ndarray], np.ndarray]:
    """Turn an oracle's output (callable or object with ``predict``) into ``X -> {0,1}^n``."""
    if hasattr(h, "predict"):
        return h.predict
    if callable(h):
        return h
    raise TypeError(
        "an oracle must return a hypothesis: a callable X -> {0,1}^n or an object with predict(X); "
        f"got {type(h).__name__}"
    )


class count_oracle_calls:
    """Wrap an oracle and count its calls (``.calls``) and total time (``.seconds``)."""

    def __init__(self, oracle: Callable) -> None:
        self.oracle = oracle
        self.calls = 0
        self.seconds = 0.0

    def __call__(self, *args, **kwargs):
        import time

        t0 = time.perf_counter()
        try:
            return self.oracle(*args, **kwargs)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - t0
