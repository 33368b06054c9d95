"""The normal noise fill (csrc/random/noise_fill.hpp, branch-free transform) against an independent
NumPy transcription of the ziggurat's fast path on the same 64-bit words: every output whose word
the fast path accepts is exactly T(x_i + s_i * d_i), in place, for float32 and float64, with one
or per-element scales, and for 1 and 2 threads (the block-parallel path)."""
import math

import numpy as np
import pytest

from dpfast.random import draw_into


def _tables():
    """k (fast acceptance thresholds) and w (widths / 2^52) of the 256-layer ziggurat
    (Marsaglia & Tsang 2000, NumPy's constants), as csrc/random/distributions.hpp builds them."""
    r, v, m = 3.6541528853610087963519472518, 4.92867323399e-3, 2.0 ** 52
    k = np.zeros(256, dtype=np.uint64)
    w = np.zeros(256)
    dn = tn = r
    q = v / math.exp(-0.5 * dn * dn)
    k[0] = int((dn / q) * m)
    k[1] = 0
    w[0] = q / m
    w[255] = dn / m
    for i in range(254, 0, -1):
        dn = math.sqrt(-2.0 * math.log(v / dn + math.exp(-0.5 * dn * dn)))
        k[i + 1] = int((dn / tn) * m)
        tn = dn
        w[i] = dn / m
    return k, w


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
    k, w = _tables()
    idx = (words & np.uint64(0xFF)).astype(np.intp)
    rabs = (words >> np.uint64(9)) & np.uint64(0x000FFFFFFFFFFFFF)
    accept = rabs < k[idx]
    d = rabs.astype(np.float64) * w[idx]
    d = np.where((words >> np.uint64(8)) & np.uint64(1), -d, d)
    sc = scale if per_element else scale[0]
    expected = (x0.astype(np.float64) + sc * d).astype(dtype)
    assert 0.97 < accept.mean() < 0.995  # ~1.2% of the words go to the slow path
    np.testing.assert_array_equal(out[accept], expected[accept])
    # the rejected outputs were finished from later words (not left at x0 or at the fast value)
    assert np.isfinite(out).all()
    assert not np.array_equal(out[~accept], x0[~accept])
