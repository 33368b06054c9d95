"""Audit: per-example clipping never exceeds clip_norm, checked in exact rational arithmetic.

DP-SGD's sensitivity (Abadi et al. 2016) is clip_norm only if every clipped row has Euclidean norm
<= clip_norm *as stored*, after floating-point rounding (issue 15 item 2: float32 scale factors in
the subnormal range rounded up by 0.7 %).  Here the squared norm of each returned row is summed
exactly as a Fraction and compared with clip_norm^2 (also exact), over adversarial rows: the
largest finite values, subnormals, one huge entry among tiny ones, and ordinary random rows, in
float32 and float64, through ``clip_gradients`` and ``clipped_sum``.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpfast.sgd import clip_gradients, clipped_sum


def _sq_norm(row) -> Fraction:
    return sum((Fraction(float(v)) ** 2 for v in np.asarray(row).ravel()), Fraction(0))


def _rows(dtype):
    fi = np.finfo(dtype)
    d = 2000
    rng = np.random.default_rng(0)
    mixed = np.full(d, fi.smallest_subnormal, dtype=dtype)
    mixed[7] = fi.max
    return np.stack([
        np.full(d, fi.max, dtype=dtype),
        np.full(d, fi.max * dtype(0.9), dtype=dtype),
        np.full(d, fi.smallest_subnormal, dtype=dtype),
        np.full(d, fi.tiny, dtype=dtype),
        mixed,
        rng.normal(size=d).astype(dtype),
        (rng.normal(size=d) * 1e3).astype(dtype),
        np.where(np.arange(d) % 2 == 0, fi.max, -fi.max).astype(dtype),
    ])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("clip_norm", [0.01, 1.0, 3.3e-5, 1e4])
def test_clipped_rows_within_max_norm_exactly(dtype, clip_norm):
    g = _rows(dtype)
    bound = Fraction(clip_norm) ** 2
    out = np.asarray(clip_gradients(g, clip_norm))
    assert out.dtype == dtype
    for i, row in enumerate(out):
        assert np.isfinite(row).all(), i
        assert _sq_norm(row) <= bound, (i, float(_sq_norm(row) / bound) ** 0.5)
    for i in range(g.shape[0]):  # the sum of one clipped row is that row: its norm too
        s = np.asarray(clipped_sum(g[i:i + 1], clip_norm))
        assert _sq_norm(s) <= bound, (i, float(_sq_norm(s) / bound) ** 0.5)


@pytest.mark.parametrize("v", [3.07e38, 3.2e38, 1e38])
def test_issue_reproducer_float32(v):
    """The issue's reproducer: one float32 row of 100000 equal huge entries, clip_norm 0.01."""
    s = np.asarray(clipped_sum(np.full((1, 100_000), v, np.float32), 0.01))
    assert _sq_norm(s) <= Fraction(0.01) ** 2
