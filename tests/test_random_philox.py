"""The keyed Philox stream behind DP-SGD's noise (csrc/random/philox.hpp, dpfast.random.add_normal_noise):
Philox4x32-10 against Random123's known answers and an independent Python transcription, the AVX2
and scalar kernels alike, the fast path of the normal fill exactly the ziggurat formula on the
stream's words, outputs independent of the thread count and of how the sequence is cut into arrays,
the N(0, 1) law (Kolmogorov-Smirnov and the ziggurat's tail/wedge region, tolerances from the sample
size) and independent-looking streams for different keys."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from _ziggurat import fast_path
from scipy import special, stats

from dpfast import _core
from dpfast.random import SecureRandom, add_normal_noise

M32 = 0xFFFFFFFF


def philox4x32_10(ctr, key):
    """Random123's Philox4x32 with 10 rounds, transcribed from Salmon et al. (2011), in Python."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c0, c1, c2, c3


def ref_words(k0, k1, first, n):
    """Words [first, first + n) of the keyed stream (the layout of csrc/random/philox.hpp)."""
    key = (k0 & M32, k0 >> 32)
    s = (k1 & M32, k1 >> 32)
    out = []
    for i in range(first, first + n):
        b = i // 2
        x = philox4x32_10((b & M32, b >> 32, s[0], s[1]), key)
        out.append(x[0] | x[1] << 32 if i % 2 == 0 else x[2] | x[3] << 32)
    return np.array(out, dtype=np.uint64)


def test_known_answers():
    # Random123 kat_vectors, philox4x32 R = 10
    assert philox4x32_10((0, 0, 0, 0), (0, 0)) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)
    assert philox4x32_10((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0)) == \
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)
    # the native stream: block 0 of key 0 is the first known answer
    assert _core.philox_words(0, 0, 0, 2).tolist() == [0xE169C58D6627E8D5, 0x9B00DBD8BC57AC4C]
    # block (0x85a308d3243f6a88 is too large a word index): the third answer through the stream id
    k0 = 0xA4093822 | 0x299F31D0 << 32
    k1 = 0x13198A2E | 0x03707344 << 32
    b = 0x243F6A88  # counter words (b, 0): the Python reference checks the layout
    assert _core.philox_words(k0, k1, 2 * b, 2).tolist() == ref_words(k0, k1, 2 * b, 2).tolist()


@pytest.mark.parametrize("first", [0, 1, 2, 7, 2 ** 33 + 1])
def test_words_match_the_reference_at_any_offset(first):
    k0, k1 = 0x0123456789ABCDEF, 0xFEDCBA9876543210
    n = 75  # AVX2 blocks (32 words) plus a scalar head and tail
    np.testing.assert_array_equal(_core.philox_words(k0, k1, first, n), ref_words(k0, k1, first, n))


_SCRIPT = """
import numpy as np
from dpfast import _core
w = _core.philox_words(11, 22, 3, 5001)
x = (np.arange(70001) % 7 - 3).astype(np.float32)
_core.add_normal_philox(5, 6, [x[:9], x[9:]], True, 0.75, 1)
print(int(_core.philox_avx2()), w.sum(dtype=np.uint64), x.view(np.uint32).astype(np.uint64).sum())
"""


def test_scalar_and_avx2_kernels_give_the_same_stream_and_noise():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    outs = []
    for off in ("0", "1"):
        r = subprocess.run([sys.executable, "-c", _SCRIPT], env=dict(env, DPFAST_NOISE_NO_AVX2=off),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout.split())
    assert outs[1][0] == "0"  # the scalar kernel ran
    assert outs[0][1:] == outs[1][1:]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("divisor", [1.0, 3.0])
def test_accepted_outputs_are_the_ziggurat_on_the_stream_words(dtype, threads, divisor):
    n = 70_001  # above the parallel threshold for 2 and 3 threads
    assert n >= _core.PHILOX_PARALLEL_MIN
    k0, k1 = 987654321, 123456789
    words = _core.philox_words(k0, k1, 0, n)
    x0 = (np.arange(n) % 13 - 6).astype(dtype) / dtype(3)
    out = x0.copy()
    _core.add_normal_philox(k0, k1, [out], True, 0.7, threads, divisor)
    accept, d = fast_path(words)
    expected = ((x0.astype(np.float64) + 0.7 * d) * (1.0 / divisor)).astype(dtype)  # in double, rounded once
    assert 0.97 < accept.mean() < 0.995
    np.testing.assert_array_equal(out[accept], expected[accept])
    assert np.isfinite(out).all() and not np.array_equal(out[~accept], x0[~accept])


def test_output_is_independent_of_threads_and_of_the_cut_into_arrays():
    n = 100_003
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    ref = x.copy()
    _core.add_normal_philox(1, 2, [ref], True, 1.5, 1)
    for threads in (2, 4):
        y = x.copy()
        _core.add_normal_philox(1, 2, [y], True, 1.5, threads)
        np.testing.assert_array_equal(y.view(np.uint32), ref.view(np.uint32))
    y = x.copy()
    parts = [y[:1], y[1:4096], y[4096:4096], y[4096:50_001], y[50_001:]]
    _core.add_normal_philox(1, 2, parts, True, 1.5, 2)
    np.testing.assert_array_equal(y.view(np.uint32), ref.view(np.uint32))
    # not in place (x == 0) equals scale * noise; float32 is the float64 variate rounded once
    z64 = np.empty(n)
    z32 = np.empty(n, dtype=np.float32)
    _core.add_normal_philox(1, 2, [z64], False, 1.0, 1)
    _core.add_normal_philox(1, 2, [z32], False, 1.0, 2)
    np.testing.assert_array_equal(z32, z64.astype(np.float32))


def test_add_normal_noise_follows_the_generator_state():
    a = [np.zeros(3000, np.float32), np.zeros(5, np.float32), np.zeros(7)]  # two dtype groups
    b = [u.copy() for u in a]
    g1, g2 = np.random.default_rng(42), np.random.default_rng(42)
    add_normal_noise(g1, a, 2.0)
    add_normal_noise(g2, b, 2.0, max_threads=1)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert g1.bit_generator.state == g2.bit_generator.state
    # two 64-bit words per dtype group were drawn: the float32 group's key, then the float64 group's
    keys = np.random.default_rng(42).bit_generator.random_raw(4).tolist()
    c = np.zeros(3005, np.float32)
    _core.add_normal_philox(keys[0], keys[1], [c], True, 2.0, 1)
    np.testing.assert_array_equal(np.concatenate(a[:2]), c)
    d = np.zeros(7)
    _core.add_normal_philox(keys[2], keys[3], [d], True, 2.0, 1)
    np.testing.assert_array_equal(a[2], d)
    # the next call draws a new key: new noise
    e = [np.zeros(3000, np.float32)]
    add_normal_noise(g1, e, 2.0)
    assert not np.array_equal(e[0], a[0])


def _ks_bound(n, alpha=1e-7):
    """Dvoretzky-Kiefer-Wolfowitz (Massart 1990): P(sup |F_n - F| > eps) <= 2 exp(-2 n eps^2)."""
    return math.sqrt(math.log(2 / alpha) / (2 * n))


def test_normal_law_kolmogorov_smirnov_and_tail_region():
    n = 1_000_000
    z = np.empty(n)
    _core.add_normal_philox(31337, 4242, [z], False, 1.0, 2)
    s = np.sort(z)
    F = special.ndtr(s)
    i = np.arange(1, n + 1)
    D = max(np.max(i / n - F), np.max(F - (i - 1) / n))
    assert D < _ks_bound(n)
    # the words the fast path rejects are finished by the wedge and tail tests: chi-square over
    # bins that isolate the tail beyond r = 3.654 (about 258 of 10^6 draws) and the outer layers
    edges = np.array([-np.inf, -3.654152885361009, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 3.654152885361009, np.inf])
    counts = np.histogram(z, bins=edges)[0]
    p = np.diff(special.ndtr(edges))
    chi2 = float(((counts - n * p) ** 2 / (n * p)).sum())
    assert chi2 < stats.chi2.isf(1e-7, len(p) - 1)


def test_different_keys_give_independent_looking_streams():
    n = 200_000
    bound = 5.3 / math.sqrt(n)  # |r| of independent N(0,1) samples: sd 1/sqrt(n); P(|r| > 5.3 sd) ~ 1e-7
    zs = []
    for k0, k1 in [(1, 0), (2, 0), (1, 1), (2 ** 63, 0)]:  # neighbouring keys and stream ids
        z = np.empty(n)
        _core.add_normal_philox(k0, k1, [z], False, 1.0, 1)
        zs.append(z)
    for a in range(len(zs)):
        for b in range(a + 1, len(zs)):
            assert abs(np.corrcoef(zs[a], zs[b])[0, 1]) < bound
            assert abs(np.corrcoef(zs[a][1:], zs[b][:-1])[0, 1]) < bound  # shifted by one
    # successive calls of one generator: fresh keys
    g = np.random.default_rng(5)
    u, v = np.zeros(n), np.zeros(n)
    add_normal_noise(g, [u], 1.0)
    add_normal_noise(g, [v], 1.0)
    assert abs(np.corrcoef(u, v)[0, 1]) < bound
    # within one stream, lag-1 correlation
    assert abs(np.corrcoef(zs[0][1:], zs[0][:-1])[0, 1]) < bound


def test_secure_random_keeps_its_chacha20_path():
    g = SecureRandom()
    a = [np.zeros(20_000), np.zeros(3, np.float32)]
    add_normal_noise(g, a, 1.0)  # ChaCha20 words, one fill per array (no Philox key)
    z = a[0]
    assert abs(z.mean()) < 5 / math.sqrt(z.size) and abs(z.var() - 1) < 5 * math.sqrt(2 / z.size)
    assert np.all(a[1] != 0)
    b = [np.zeros(20_000)]
    add_normal_noise(g, b, 1.0, divisor=2.0)  # the secure path divides after the draw
    assert abs(b[0].var() / 0.25 - 1) < 5 * math.sqrt(2 / b[0].size)


def test_binding_checks():
    with pytest.raises(ValueError):
        _core.add_normal_philox(1, 2, [np.zeros(3)], True, -1.0, 1)
    with pytest.raises(ValueError):
        _core.add_normal_philox(1, 2, [np.zeros(3)], True, 1.0, 0)
    with pytest.raises(ValueError):
        _core.add_normal_philox(1, 2, [np.zeros(3)], True, 1.0, 1, 0.0)
    with pytest.raises(TypeError):
        _core.add_normal_philox(1, 2, [np.zeros(3), np.zeros(3, np.float32)], True, 1.0, 1)
    with pytest.raises(ValueError):
        _core.add_normal_philox(1, 2, [np.zeros(6)[::2]], True, 1.0, 1)
    _core.add_normal_philox(1, 2, [], True, 1.0, 1)
