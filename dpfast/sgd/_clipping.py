"""Per-example gradient clipping for users who bring their own gradients.

See: :doc:`/theory/mechanisms`, section "DP-SGD": each per-example gradient g_i is scaled to
g_i * min(1, C / ||g_i||_2); the sum of the clipped gradients has l2 sensitivity C under
add/remove neighbours (2C under replace-one), so N(0, (z C)^2 I) noise on it is the Gaussian
mechanism with noise multiplier z.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional, Sequence, Union

import numpy as np

from dpfast import _clip
from dpfast._validation import check_nonnegative, check_positive, check_real
from dpfast.random import RandomLike, check_random_state, standard_normal

__all__ = ["clip_gradients", "clipped_sum", "per_example_norms"]

ArrayOrList = Union[np.ndarray, Sequence[np.ndarray]]


def _check_clip_norm(clip_norm) -> float:
    if isinstance(clip_norm, (bool, np.bool_)) or not isinstance(clip_norm, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"clip_norm must be a positive real number, got {type(clip_norm).__name__}")
    # check_real, not float(): a Fraction beyond a double is a ValueError
    return check_positive(check_real(clip_norm, "clip_norm"), "clip_norm", allow_array=False)


def _as_grad_array(g, name: str) -> np.ndarray:
    if isinstance(g, (str, bytes)):
        raise TypeError(f"{name} must be a numeric array, got {type(g).__name__}")
    try:
        a = np.asarray(g)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise ValueError(f"{name} must be a rectangular numeric array: {exc}") from None
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a real numeric array, got dtype {a.dtype}")
    if a.dtype != np.float32:
        a = a.astype(np.float64, copy=False)
    if a.ndim < 1:
        raise ValueError(f"{name} must have a leading batch axis (shape (B, ...)), got a scalar")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or infinite entries")
    return a


def _parts(per_example_grads: ArrayOrList):
    """Return (list of 2-D C-contiguous (B, P_k) arrays, original shapes, is_list, dtype).

    The contract for sequences: a list or tuple whose elements are all NumPy arrays is a list of
    layers (each (B, ...), same B); a list or tuple without any array element (e.g. nested lists
    of numbers) is one array, converted by ``np.asarray``; a mix of both is refused.
    """
    is_list = isinstance(per_example_grads, (list, tuple))
    if is_list and per_example_grads:
        n_arr = sum(isinstance(g, np.ndarray) for g in per_example_grads)
        if n_arr == 0:
            is_list = False  # nested numbers: one (B, ...) array
        elif n_arr != len(per_example_grads):
            raise TypeError(
                "per_example_grads: a list means one (B, ...) NumPy array per layer; got a mix of "
                "arrays and other objects (pass np.asarray(...) for a single array of numbers)"
            )
    raw = list(per_example_grads) if is_list else [per_example_grads]
    if is_list and not raw:
        raise ValueError("per_example_grads is an empty sequence; give at least one (B, ...) array")
    arrs = [_as_grad_array(g, f"per_example_grads[{k}]" if is_list else "per_example_grads") for k, g in enumerate(raw)]
    B = arrs[0].shape[0]
    for k, a in enumerate(arrs):
        if a.shape[0] != B:
            raise ValueError(
                f"all per-example gradient arrays need the same batch size (axis 0); "
                f"part 0 has {B}, part {k} has {a.shape[0]}"
            )
    dtype = np.float32 if all(a.dtype == np.float32 for a in arrs) else np.float64
    # Copies only what the kernel cannot read in place (non-contiguous, byte-swapped, other
    # dtypes); read-only inputs are read, never written.
    # (not -1: ambiguous for an empty batch, which Poisson sampling draws with a data-dependent
    # probability; its clipped sum is zeros)
    flat = [np.ascontiguousarray(a.reshape(B, math.prod(a.shape[1:])), dtype=dtype) for a in arrs]
    return flat, [a.shape for a in arrs], is_list, dtype


def _norms(flat) -> np.ndarray:
    if len(flat) == 1:
        norms = np.empty(flat[0].shape[0])
        _clip.clip_rows(flat[0], np.inf, norms, None, None, None)
        return norms
    sq = np.zeros(flat[0].shape[0])
    for a in flat:
        nk = np.empty(a.shape[0])
        _clip.clip_rows(a, np.inf, nk, None, None, None)
        sq += nk * nk
    return np.sqrt(sq)


def _factors(norms: np.ndarray, C: float) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(norms > C, C / np.where(norms > 0, norms, 1.0), 1.0)


def per_example_norms(per_example_grads: ArrayOrList) -> np.ndarray:
    """The l2 norm of each per-example gradient (over all parts when a list is given), float64 (B,)."""
    flat, _, _, _ = _parts(per_example_grads)
    return _norms(flat)


def clip_gradients(per_example_grads: ArrayOrList, clip_norm: float) -> ArrayOrList:
    """Clip every per-example gradient to l2 norm at most ``clip_norm``.

    ``per_example_grads`` is an array of shape (B, ...) (row i is example i's gradient) or a
    list of such NumPy arrays (one per layer), in which case the norm is taken over all of them
    together ("flat" clipping); a list without NumPy arrays (nested numbers) is one array.
    Returns new array(s) of the same shape(s) with g_i * min(1, C / ||g_i||) (Abadi et al. 2016,
    "Deep Learning with Differential Privacy", Algorithm 1).

    Guarantee: every returned row has exact l2 norm <= C *after rounding* (the norm of the
    stored float32/float64 values, computed exactly), for every finite input, including huge,
    subnormal and mixed rows: the factor is computed in float64 from a rigorous upper bound on
    the row norm and a target shrunk by a few ulps (plus the worst-case subnormal rounding);
    see ``csrc/clip/clip.hpp``.  Rows whose norm is certified <= C are returned bit-for-bit
    unchanged; rows within O(P 2^-53) relative of C may be scaled by 1 - O(P 2^-53).  float32
    input stays float32; other real dtypes give float64.  The input is never written
    (read-only arrays are fine).
    """
    C = _check_clip_norm(clip_norm)
    flat, shapes, is_list, dtype = _parts(per_example_grads)
    if len(flat) == 1:
        out = np.empty_like(flat[0])
        _clip.clip_rows(flat[0], C, None, None, None, out)
        res = [out.reshape(shapes[0])]
    else:
        f = _factors(_norms(flat), C)
        res = []
        for a, shp in zip(flat, shapes):
            o = a.copy()
            rows = f < 1.0
            o[rows] = (a[rows] * f[rows, None]).astype(dtype, copy=False)
            res.append(o.reshape(shp))
    return res if is_list else res[0]


def clipped_sum(
    per_example_grads: ArrayOrList,
    clip_norm: float,
    *,
    noise_multiplier: Optional[float] = None,
    rng: RandomLike = None,
    return_norms: bool = False,
):
    """Sum over the batch of the clipped per-example gradients, optionally with Gaussian noise.

    Computes sum_i g_i min(1, C/||g_i||) in one pass without materializing the clipped
    gradients (see :doc:`/theory/erm`, DP-SGD).  With ``noise_multiplier`` z, adds
    N(0, (z C)^2 I): the Gaussian mechanism on a sum of l2 sensitivity C under add/remove
    neighbours (replace-one: 2C, i.e. the same noise gives noise multiplier z/2), drawn from
    ``rng`` (the continuous Gaussian: not floating-point safe, see ``dpfast.random``).

    Each summand has exact l2 norm <= C after rounding (see :func:`clip_gradients`), so one
    example changes the exact sum of the stored clipped gradients by at most C.

    Returns the sum (shape of one gradient; a list for list input), and the float64 per-example
    norms too when ``return_norms`` is true.  Divide by the *expected* batch size yourself.
    """
    C = _check_clip_norm(clip_norm)
    flat, shapes, is_list, dtype = _parts(per_example_grads)
    if noise_multiplier is not None:
        if isinstance(noise_multiplier, (bool, np.bool_)) or not isinstance(noise_multiplier, numbers.Real):
            raise TypeError("noise_multiplier must be a real number >= 0 or None")
        z = check_nonnegative(check_real(noise_multiplier, "noise_multiplier"), "noise_multiplier")  # (as clip_norm)
    if len(flat) == 1:
        norms = np.empty(flat[0].shape[0])
        total = np.empty(flat[0].shape[1], dtype=dtype)
        _clip.clip_rows(flat[0], C, norms, None, total, None)
        sums = [total]
    else:
        norms = _norms(flat)
        f = _factors(norms, C).astype(dtype)
        sums = [f @ a for a in flat]
    if noise_multiplier is not None and z > 0:
        gen = check_random_state(rng)
        for s in sums:
            # The package's normal (52-bit abscissa) in float64 for either dtype: a 32-bit
            # sampler's coarse lattice (the leak the DP-SGD kernels were fixed for) would survive
            # in the float32 sum; the float64 draw is rounded once, when it is added.
            s += (z * C) * standard_normal(gen, s.shape[0])
    out = [s.reshape(shp[1:]) for s, shp in zip(sums, shapes)]
    out = out if is_list else out[0]
    return (out, norms) if return_norms else out
