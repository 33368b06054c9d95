"""The one continuous sampler family (issue 12, item 1): csrc/random/distributions.hpp through
the dispatch of dpfast.random (standard_normal / standard_laplace / standard_exponential /
standard_gumbel, fill_noise).

Expected values come from scipy's CDFs (Kolmogorov-Smirnov at alpha = 1e-4, critical value from
the exact KS distribution), binomial bounds, and Python re-evaluations of the documented word
maps with math.log (the same libm as the kernel); never from the kernel's own earlier output.
"""
from __future__ import annotations

import ast
import math
import pathlib

import numpy as np
import pytest
from scipy import stats

import dpfast
from dpfast import _core
from dpfast.mechanisms.continuous import laplace
from dpfast.random import (
    fill_noise,
    native_stream,
    noise_threads,
    standard_exponential,
    standard_gumbel,
    standard_laplace,
    standard_normal,
)

_PKG = pathlib.Path(dpfast.__file__).resolve().parent
SAMPLERS = {
    "normal": (standard_normal, stats.norm.cdf),
    "laplace": (standard_laplace, stats.laplace.cdf),
    "exponential": (standard_exponential, stats.expon.cdf),
    "gumbel": (standard_gumbel, stats.gumbel_r.cdf),
}
ALPHA = 1e-4


@pytest.mark.parametrize("kind", sorted(SAMPLERS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kolmogorov_smirnov_against_scipy(kind, dtype):
    n = 200_000
    sample, cdf = SAMPLERS[kind]
    x = sample(20240517, n, dtype=dtype)
    assert x.shape == (n,) and x.dtype == dtype
    crit = stats.kstwo.ppf(1 - ALPHA, n)  # P(D_n > crit) = 1e-4 under the exact law
    d = stats.kstest(x.astype(np.float64), cdf).statistic
    assert d < crit, (kind, d, crit)


def test_normal_tails_against_binomial_bounds():
    # beyond 4 sigma (both tails) and beyond the ziggurat's base r = 3.654 (the separate tail
    # branch): counts within the two-sided 1e-4 binomial interval of the exact probabilities
    n = 2_000_000
    x = standard_normal(7, n)
    for t in (4.0, 3.6541528853610087963519472518):
        p = 2 * stats.norm.sf(t)
        lo, hi = stats.binom.ppf(ALPHA / 2, n, p), stats.binom.isf(ALPHA / 2, n, p)
        k = int((np.abs(x) > t).sum())
        assert lo <= k <= hi, (t, k, lo, hi)
    # and the sign is fair in the tail
    k_pos = int((x > 4.0).sum())
    k_all = int((np.abs(x) > 4.0).sum())
    assert stats.binom.ppf(ALPHA / 2, k_all, 0.5) <= k_pos <= stats.binom.isf(ALPHA / 2, k_all, 0.5)


def _words(seed, n):
    return [int(w) for w in np.random.default_rng(seed).bit_generator.random_raw(n)]


def test_one_word_maps_are_the_documented_formulas():
    # Python re-evaluation of each map on the same words (math.log: the same libm as the kernel)
    n = 20_000
    words = _words(99, n)
    u_pos = [((w >> 11) + 1) * 2.0**-53 for w in words]  # (k+1) 2^-53, k = top 53 bits
    lap = [(-1.0 if w & 1 else 1.0) * -math.log(u) for w, u in zip(words, u_pos)]
    m = [w >> 12 for w in words]  # top 52 bits
    expo = [-math.log(((1 << 53) - 2 * mi - 1) * 2.0**-53) for mi in m]  # -log(1 - U), U = (2m+1) 2^-53
    gum = [-math.log(-math.log((2 * mi + 1) * 2.0**-53)) for mi in m]  # -log(-log U)
    np.testing.assert_array_equal(standard_laplace(99, n), lap)
    np.testing.assert_array_equal(standard_exponential(99, n), expo)
    np.testing.assert_array_equal(standard_gumbel(99, n), gum)


def test_laplace_scalar_path_matches_the_kernel_on_1e5_words():
    # laplace() on Python floats evaluates standard_laplace's formula in Python on one word (the
    # mirror kept for speed): 10^5 scalar calls equal one kernel fill of 10^5 on the same stream
    n = 100_000
    g = np.random.default_rng(3)
    scalar = np.array([laplace(0.0, 1.0, 1.0, rng=g) for _ in range(n)])
    np.testing.assert_array_equal(scalar, standard_laplace(3, n))


def test_scalar_normal_binding_is_output_zero_of_a_fill():
    for seed in range(300):
        g = np.random.default_rng(seed)
        with native_stream(g) as cap:
            z = _core.normal1(cap)
        assert z == standard_normal(seed, 1)[0]
        # and it consumed the same words (the next draw agrees too)
        assert g.bit_generator.random_raw() == _after_fill(seed, 1)


def _after_fill(seed, n):
    g = np.random.default_rng(seed)
    standard_normal(g, n)
    return g.bit_generator.random_raw()


@pytest.mark.parametrize("kind", sorted(SAMPLERS))
def test_float32_is_the_float64_draw_rounded_once(kind):
    n = 3 * _core.NOISE_BLOCK + 11  # several blocks: the multi-threaded path
    sample = SAMPLERS[kind][0]
    np.testing.assert_array_equal(sample(5, n, dtype=np.float32), sample(5, n).astype(np.float32))
    out32, out64 = np.empty(n, np.float32), np.empty(n)
    for o in (out32, out64):
        with native_stream(np.random.default_rng(5)) as cap:
            fill_noise(cap, kind, o)
    np.testing.assert_array_equal(out32, out64.astype(np.float32))
    np.testing.assert_array_equal(out64, sample(5, n))


@pytest.mark.parametrize("kind", sorted(SAMPLERS))
def test_reproducible_under_a_seed_and_shape(kind):
    sample = SAMPLERS[kind][0]
    a = sample(11, (40, 25))
    assert a.shape == (40, 25)
    np.testing.assert_array_equal(a, sample(np.random.default_rng(11), (40, 25)))
    np.testing.assert_array_equal(a.ravel(), sample(11, 1000))
    assert not np.array_equal(a, sample(12, (40, 25)))
    s = sample(11)
    assert type(s) is np.float64 and s == sample(11, 1)[0]  # a scalar is a 1-element draw
    g = np.random.default_rng(4)
    first, second = sample(g, 10), sample(g, 10)
    assert not np.array_equal(first, second)  # the Generator advances


@pytest.mark.parametrize("kind", sorted(SAMPLERS))
def test_same_output_for_1_and_4_threads(kind, monkeypatch):
    n = 5 * _core.NOISE_BLOCK + 17
    sample = SAMPLERS[kind][0]
    out = {}
    for t in ("1", "4"):
        monkeypatch.setenv("DPFAST_NUM_THREADS", t)
        assert noise_threads(n) == int(t)
        out[t] = sample(2024, n)
    np.testing.assert_array_equal(out["1"], out["4"])
    assert noise_threads(_core.NOISE_BLOCK) == 1  # one block: nothing to share


def test_bad_arguments_raise_before_drawing():
    g = np.random.default_rng(0)
    before = g.bit_generator.state
    with pytest.raises(TypeError, match="dtype must be float32 or float64"):
        standard_normal(g, 3, dtype=np.int64)
    with pytest.raises(TypeError, match="size"):
        standard_laplace(g, 2.5)
    with pytest.raises(ValueError, match="size"):
        standard_gumbel(g, -1)
    with pytest.raises(ValueError, match="noise kind must be one of"):
        with native_stream(g) as cap:
            fill_noise(cap, "cauchy", np.empty(3))
    with pytest.raises(TypeError):
        with native_stream(g) as cap:
            fill_noise(cap, "normal", np.empty(3, np.int64))
    with pytest.raises(TypeError, match="rng"):
        standard_exponential("seed", 3)
    assert g.bit_generator.state == before


_NOISE_METHODS = {"standard_normal", "normal", "laplace", "gumbel", "exponential", "standard_exponential",
                  "standard_gamma", "gamma", "standard_t", "standard_cauchy", "logistic", "lognormal"}


def _generator_noise_calls(src: str):
    """(line, method) of the calls ``<expr>.<noise method>(...)`` in a module's source, except on
    the dpfast package itself (``dpfast.laplace(...)`` is the mechanism); docstrings and comments
    are not calls."""
    out = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _NOISE_METHODS:
            recv = node.func.value
            if isinstance(recv, ast.Name) and recv.id == "dpfast":
                continue
            out.append((node.lineno, node.func.attr))
    return sorted(out)


def test_every_noise_draw_uses_the_family():
    # No module draws continuous noise from a NumPy Generator (32-bit float32 normals, a second
    # ziggurat, streams the family's tests do not cover): dpfast.random is the one dispatch.
    hits = []
    for path in sorted(_PKG.rglob("*.py")):
        if path == _PKG / "random.py":
            continue
        hits += [f"{path.relative_to(_PKG.parent)}:{line}: .{attr}(" for line, attr in
                 _generator_noise_calls(path.read_text())]
    assert hits == [], "continuous noise drawn outside dpfast.random:\n" + "\n".join(hits)


def test_the_scan_finds_generator_draws():
    # the check above can fail: it flags the Generator forms it forbids, and only those
    src = ('"""gen.normal(0, 1) in a docstring is not a call"""\n'
           "def f(gen, rng, np):\n"
           "    a = gen.normal(0, 1, 3)\n"
           "    b = rng.standard_normal(4)\n"
           "    c = np.random.default_rng(0).laplace(size=2)\n"
           "    import dpfast\n"
           "    d = dpfast.laplace(1.0, 1, 1)  # the mechanism\n"
           "    e = gen.integers(0, 2)\n")
    assert _generator_noise_calls(src) == [(3, "normal"), (4, "standard_normal"), (5, "laplace")]


@pytest.mark.source_tree
def test_one_ziggurat_in_the_native_code():
    root = _PKG.parent / "csrc"
    homes = [p.relative_to(root).as_posix() for p in sorted(root.rglob("*.[ch]pp"))
             if "Ziggurat" in p.read_text() and "struct NormalZiggurat" in p.read_text()]
    assert homes == ["random/distributions.hpp"]
    for p in sorted(root.rglob("*.[ch]pp")):
        text = p.read_text()
        assert "struct Ziggurat" not in text and "fill_normal" not in text, p
        # the dead samplers named in issue 12 stay deleted
        for dead in ("std_laplace(", "std_normal(", "gauss_interval", "chacha20_rfc_state"):
            assert dead not in text, (p, dead)


def test_unallocatable_output_raises_value_error_before_drawing(monkeypatch):
    # check_size refuses shapes beyond physical memory; an allocation that fails anyway (less
    # memory free) is a ValueError naming size, and the stream is untouched
    import dpfast.random as R
    from dpfast.mechanisms.continuous import gaussian_noise

    real_empty = np.empty

    def no_memory(shape, dtype=float, *args, **kwargs):  # the float outputs cannot be allocated
        if np.dtype(dtype).kind == "f":
            raise MemoryError
        return real_empty(shape, dtype, *args, **kwargs)

    g = np.random.default_rng(0)
    before = g.bit_generator.state
    monkeypatch.setattr(R.np, "empty", no_memory)
    with pytest.raises(ValueError, match=r"size=\(1000,\) needs 7\.45e-06 GiB of float64"):
        R.standard_normal(g, 1000)
    with pytest.raises(ValueError, match=r"size=\(10, 3\) needs .* GiB of float32"):
        gaussian_noise(1.0, (10, 3), rng=g, dtype=np.float32)
    monkeypatch.undo()
    assert g.bit_generator.state == before
