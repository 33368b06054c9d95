"""The normal noise fill (csrc/random/noise_fill.hpp, branch-free transform) against an independent
NumPy transcription of the ziggurat's fast path on the same 64-bit words: every output whose word
the fast path accepts is exactly T(x_i + s_i * d_i), in place, for float32 and float64, with one
or per-element scales, and for 1 and 2 threads (the block-parallel path)."""

import numpy as np
import pytest
from _ziggurat import fast_path

from dpfast.random import draw_into


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("per_element", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_accepted_outputs_are_the_fast_path_formula(dtype, per_element, threads, monkeypatch):
    monkeypatch.setenv("DPFAST_NUM_THREADS", str(threads))
    # the normal fill shares its work between threads from 2^20 outputs on (noise_fill.hpp)
    n = 20_000 if threads == 1 else (1 << 20) + 4097
    gen = np.random.default_rng(11)
    words = np.random.default_rng(11).bit_generator.random_raw(n)  # the first n words of the stream
    x0 = (np.arange(n) % 13 - 6).astype(dtype) / dtype(3)
    scale = np.linspace(0.5, 2.0, n) if per_element else np.array([0.7])
    out = x0.copy()
    draw_into(gen, "normal", out, out, scale)  # in place: out = x0 + scale * N(0, 1)
    accept, d = fast_path(words)
    sc = scale if per_element else scale[0]
    expected = (x0.astype(np.float64) + sc * d).astype(dtype)
    assert 0.97 < accept.mean() < 0.995  # ~1.2% of the words go to the slow path
    np.testing.assert_array_equal(out[accept], expected[accept])
    # the rejected outputs were finished from later words (not left at x0 or at the fast value)
    assert np.isfinite(out).all()
    assert not np.array_equal(out[~accept], x0[~accept])
