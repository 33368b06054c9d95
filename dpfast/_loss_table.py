"""The losses of the native core, read from their one table.

Every loss -- its integer code, its number of outputs, its label convention and the constants
the privacy analyses use -- is listed once, in ``DPF_LOSS_TABLE`` of
``csrc/losses/losses.hpp``; the modules export it as ``loss_table()``.  Python reads codes and
constants from :data:`TABLE` and maps binary labels through :func:`binary_labels`, never by
repeating them.

Columns (for l(z; y) with scores z = W^T x in R^K; K = 1 for the margin losses):

* ``code``: the integer the kernels take;
* ``outputs``: ``"one"`` (a margin loss, K = 1) or ``"classes"`` (K = the number of classes);
* ``labels``: ``"pm1"`` (y in {-1, +1}), ``"real"`` or ``"classes"`` (an index in [0, K));
* ``lipschitz``: sup ||dl/dz|| (per unit of the Huber threshold when ``lipschitz_per_delta``), so
  that L = lipschitz * R for rows with ||x|| <= R;
* ``smoothness``: sup ||d^2 l / dz^2||_2, so that beta = smoothness * R^2;
* ``rank_deficit``: rank(d^2 l / dz^2) <= K - rank_deficit (margin losses: rank one);
* ``convex_clip``: whether the gradient-clipped loss l_C (Song et al. 2020) exists, a convex
  continuation of l with |l_C'| <= C / ||x||.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpfast import _glm

__all__ = ["LossInfo", "TABLE", "MARGIN_LOSSES", "code", "name_of", "binary_labels"]


@dataclass(frozen=True)
class LossInfo:
    """One row of the native loss table (see the module docstring for the columns)."""

    name: str
    code: int
    outputs: str
    labels: str
    lipschitz: float
    lipschitz_per_delta: bool
    smoothness: float
    rank_deficit: int
    convex_clip: bool


TABLE: dict[str, LossInfo] = {
    name: LossInfo(name=name, **row) for name, row in sorted(_glm.loss_table().items(), key=lambda kv: kv[1]["code"])
}

#: The losses with one output (the margin losses of the GLM solvers), in code order.
MARGIN_LOSSES: tuple[str, ...] = tuple(name for name, e in TABLE.items() if e.outputs == "one")


def code(name: str) -> int:
    """The kernels' integer code of the loss ``name``."""
    return TABLE[name].code


def name_of(code_: int) -> str:
    """The loss whose kernel code is ``code_``."""
    for name, e in TABLE.items():
        if e.code == code_:
            return name
    raise ValueError(f"no loss has code {code_!r}")


def binary_labels(name: str, y01: np.ndarray) -> np.ndarray:
    """The float64 labels that the margin loss ``name`` reads for binary classes ``y01`` in {0, 1}.

    The one place where a label convention is mapped: {-1, +1} losses (logistic,
    smoothed hinge) get 2 y - 1; the others get y itself.
    """
    y = np.asarray(y01, dtype=np.float64)
    return 2.0 * y - 1.0 if TABLE[name].labels == "pm1" else y
