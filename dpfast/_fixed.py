"""Exact, partition-invariant sums on a fixed-point grid (issue 24 red team: the Dask releases).

A float64 sum depends in its last bits on the order of its additions, so a release computed from
per-chunk (or per-Dask-partition) float partials depends on where the chunks begin -- and a Dask
partitioning can be a function of the data (``set_index``/``shuffle`` divisions).  Every statistic
released through this module is a sum of per-record terms ``t`` clipped to a PUBLIC bound
``|t| <= B``; each term is mapped, record by record, to the integer

    ``q(t) = round_half_even(fl(t * S))``,  ``S = fl(2**FIXED_BITS / B)``

(the native kernels: csrc/stats/stats.hpp, "fixed-point grid"), whose grid value ``q B / 2**50``
stands for ``t``.  The map is monotone and ``|q| <= 2**50``, so a grid value never leaves
``[-B, B]`` (the sensitivity analysis holds as stated) and a term at the bound is exactly the
bound.  Integer sums are exact in any order: per-chunk, per-thread and per-partition partials add
exactly (Python ints on the client, :func:`dpfast._dask_utils.sum_by_partitions` with
``out_dtype=object``), and :func:`to_float` rounds the total ONCE, correctly (round half to even),
to a double.  The released value is therefore a function of the multiset of records alone: the
same bits for any thread count, chunking or partitioning.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["FIXED_BITS", "GRAM_BITS", "GRAM_SCALE", "centred_squares", "check_bound", "ints", "to_float"]

#: bits of the grid below the bound: a term's grid step is B / 2**FIXED_BITS
FIXED_BITS = 50
_ONE = 1 << FIXED_BITS
#: bits of the Gram kernels' FACTOR grid (PCA, SSP: csrc/stats/kernels.hpp "Gram matrix"): each
#: factor is truncated to ``q = trunc(t 2**26)`` of its column's bound, a product ``qa qb`` is
#: exact with grid step ``P_j P_k / 2**52``
GRAM_BITS = 26
#: the bound to hand :func:`to_float` for a Gram entry of column bounds P_j P_k: ``P_j P_k
#: GRAM_SCALE`` (the products' grid is 2**(2 GRAM_BITS) = 2**(FIXED_BITS + 2); a power of two: exact)
GRAM_SCALE = math.ldexp(1.0, FIXED_BITS - 2 * GRAM_BITS)
#: the smallest bound whose scale 2**50 / B is a finite double (2**-973), with margin
_MIN_BOUND = math.ldexp(1.0, -970)


def check_bound(B: float, what: str = "bounds") -> float:
    """``B`` as a float, refused (ValueError, a public-parameter error: call it before the charge)
    when the grid cannot represent it: not finite, or positive below 2**-970 (the scale
    2**50 / B would overflow).  0 is allowed (every term is then 0)."""
    B = float(B)
    if not (math.isfinite(B) and B >= 0.0) or 0.0 < B < _MIN_BOUND:
        raise ValueError(f"{what} are too narrow or too wide for the exact fixed-point sums "
                         "(the per-record bound must be 0 or within [2**-970, 1.8e308])")
    return B


def ints(pair) -> np.ndarray:
    """The native kernels' exact sums, a pair ``(hi int64, lo uint64)`` of arrays holding
    ``hi 2**64 + lo``, as an object array of Python ints (exact, and added exactly by NumPy's
    object arithmetic)."""
    hi, lo = pair
    out = np.empty(len(hi), dtype=object)
    if len(out) == 1:  # one entry (axis=None): the common case
        out[0] = (int(hi[0]) << 64) + int(lo[0])
        return out
    out[:] = [(h << 64) + v for h, v in zip(hi.tolist(), lo.tolist())]  # (tolist: Python ints, exact)
    return out


def centred_squares(total, count):
    """The grid sum of ``y^2 - B/2`` from the grid sum ``total`` of ``count`` squares ``y^2`` in
    ``[0, B]`` (grid bound ``B``): ``total - 2**(FIXED_BITS - 1) count``, exact (Python ints), each
    term then in ``[-B/2, B/2]`` (the sensitivity of a centred sum of squares)."""
    return total - (1 << (FIXED_BITS - 1)) * count


def _one(t: int, num: int, den: int) -> float:
    try:
        return (t * num) / den  # int / int: correctly rounded (round half to even) in CPython
    except OverflowError:  # beyond the largest double: the float sum's overflow, inf
        return math.inf if t > 0 else -math.inf


def to_float(total, B: float) -> np.ndarray:
    """``total * B / 2**FIXED_BITS`` correctly rounded to float64, elementwise (``total``: ints,
    or an object/integer array of them; the result has its shape).  ``B`` the grid's bound."""
    num, den = float(B).as_integer_ratio()
    den <<= FIXED_BITS
    if type(total) is np.ndarray and total.shape == (1,):  # one entry (axis=None): the common case
        return np.array([_one(int(total[0]), num, den)])
    t = np.asarray(total, dtype=object)
    out = np.array([_one(int(v), num, den) for v in t.ravel()], dtype=np.float64)
    return out.reshape(t.shape)
