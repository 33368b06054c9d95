"""The per-layer fast paths of dpfast.torch (``FAST_LAYERS``) against a naive per-sample loop.

Reference: a float64 copy of the layer, autograd on one sample at a time, with the loss
sum_i <out_i, R_i> so that ``grad_output`` is exactly R (given to the fast path in float32, like
the activations).  ``norm_sq`` must be an upper bound of the exact squared norm and within 1e-6
relative of it; ``clipped_sum`` must equal sum_i f_i g_i to float32 accuracy.  A few tests compare
with the exact value in rational arithmetic (``fractions``) on inputs built to cancel, where a
float64 reference would be too coarse to check the certified bound.
"""
from __future__ import annotations

import copy
import math
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import torch  # noqa: E402
from torch import nn  # noqa: E402

from dpfast.torch import _fast_layers as fl  # noqa: E402
from dpfast.torch._fast_layers import FAST_LAYERS  # noqa: E402

RTOL = 1e-6
#: the float32 convolution path's bound is looser (its docstring: 1e-5 to 1e-3 relative)
RTOL32 = 2e-3


def _naive(m, x, r):
    """float64 per-sample gradients {name: (B, *shape)} of sum_i <m(x_i), r_i>."""
    m64 = copy.deepcopy(m).double()
    names = [n for n, p in m64.named_parameters(recurse=False) if p.requires_grad]
    out = {n: [] for n in names}
    if not names:
        return {}
    for i in range(x.shape[0]):
        xi = x[i:i + 1]
        xi = xi.double() if xi.is_floating_point() else xi
        m64.zero_grad()
        (m64(xi) * r[i:i + 1].double()).sum().backward()
        for n in names:
            out[n].append(getattr(m64, n).grad.detach().clone())
    return {n: torch.stack(v) for n, v in out.items()}


def _run(m, x, seed=0, **kw):
    """(fast norm_sq, reference norms^2, fast clipped sum, reference clipped sum, factors)."""
    with torch.no_grad():
        y = m(x)
    gen = torch.Generator().manual_seed(seed)
    r = torch.randn(y.shape, generator=gen, dtype=torch.float32)
    ref = _naive(m, x, r)
    b = x.shape[0]
    ref_sq = sum((g.reshape(b, -1) ** 2).sum(1) for g in ref.values()) if ref else torch.zeros(b, dtype=torch.float64)
    fast = FAST_LAYERS[type(m)]
    ns = fast.norm_sq(m, (x,), r, **kw)
    f = torch.rand(b, generator=gen, dtype=torch.float32)
    cs = fast.clipped_sum(m, (x,), r, f)
    ref_cs = {n: torch.einsum("b,b...->...", f.double(), g) for n, g in ref.items()}
    return ns, ref_sq, cs, ref_cs, ref


def _check(m, x, rtol=RTOL, **kw):
    ns, ref_sq, cs, ref_cs, ref = _run(m, x, **kw)
    assert ns.dtype == torch.float64 and ns.shape == (x.shape[0],)
    # an upper bound (the float64 reference is itself within ~1e-13 relative of exact)
    assert torch.all(ns >= ref_sq * (1 - 1e-12)), (ns - ref_sq) / ref_sq
    # and tight
    assert torch.all(ns <= ref_sq * (1 + rtol) + 1e-300), (ns - ref_sq) / ref_sq
    assert set(cs) == set(ref_cs)
    for n, v in cs.items():
        p = getattr(m, n)
        assert v.dtype == p.dtype and v.shape == p.shape
        scale = torch.einsum("b,b...->...", torch.ones(x.shape[0], dtype=torch.float64), ref[n].abs()).max()
        torch.testing.assert_close(v.double(), ref_cs[n], rtol=1e-5, atol=1e-5 * float(scale) + 1e-30)
    return ns, ref_sq


def test_registered_types_are_exact():
    assert set(FAST_LAYERS) == {nn.Linear, nn.Conv1d, nn.Conv2d, nn.Embedding, nn.LayerNorm}
    for layer in FAST_LAYERS.values():
        assert callable(layer.norm_sq) and callable(layer.clipped_sum)


@pytest.mark.parametrize("bias", [True, False])
def test_linear_2d(bias):
    torch.manual_seed(0)
    _check(nn.Linear(7, 5, bias=bias), torch.randn(9, 7))


@pytest.mark.parametrize("method", [None, "gram", "materialise"])
@pytest.mark.parametrize("shape", [(6, 4, 7), (5, 3, 2, 7)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_sequence(method, shape, bias):
    torch.manual_seed(1)
    _check(nn.Linear(7, 5, bias=bias), torch.randn(*shape), method=method)


def test_linear_picks_the_cheaper_form(monkeypatch):
    calls = []
    orig = torch.bmm

    def spy(a, b):
        if a.shape[1] > 1:  # not a batch of dot products (Frobenius norms)
            calls.append(tuple(a.shape[1:]) + tuple(b.shape[2:]))
        return orig(a, b)

    monkeypatch.setattr(fl.torch, "bmm", spy)
    a = torch.randn(2, 3, 40, dtype=torch.float64)
    g = torch.randn(2, 3, 50, dtype=torch.float64)
    fl._linear_weight_norm_sq(a, g)  # T (d_in + d_out) = 270 < d_in d_out = 2000: Gram (T x T)
    assert calls and all(c[0] == 3 and c[-1] == 3 for c in calls)
    calls.clear()
    a = torch.randn(2, 30, 4, dtype=torch.float64)
    g = torch.randn(2, 30, 3, dtype=torch.float64)
    fl._linear_weight_norm_sq(a, g)  # 210 >= 12: materialised (d_out x d_in)
    assert calls == [(3, 30, 4)]


CONV2D_CASES = [
    dict(),
    dict(stride=2, padding=1),
    dict(padding=2, dilation=2),
    dict(groups=2),
    dict(groups=4, stride=(2, 1), padding=(1, 0)),
    dict(padding="same", dilation=(1, 2)),
    dict(padding="valid"),
    dict(padding=1, padding_mode="reflect"),
    dict(padding=1, padding_mode="circular", bias=False),
    dict(padding=(2, 1), padding_mode="replicate", stride=2),
]


@pytest.mark.parametrize("precision", ["float64", None])
@pytest.mark.parametrize("kw", CONV2D_CASES)
@pytest.mark.parametrize("method", [None, "gram", "materialise"])
def test_conv2d(kw, method, precision):
    # precision None: the float32 path (float32 inputs on CPU)
    torch.manual_seed(2)
    m = nn.Conv2d(4, 8, kernel_size=kw.pop("kernel_size", 3), **kw)
    _check(m, torch.randn(5, 4, 7, 6), rtol=RTOL if precision else RTOL32, method=method, precision=precision)


CONV1D_CASES = [dict(), dict(stride=2, padding=2, dilation=2), dict(groups=2, bias=False),
                dict(padding="same", kernel_size=4), dict(padding=1, padding_mode="reflect")]


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
@pytest.mark.parametrize("precision", ["float64", None])
@pytest.mark.parametrize("kw", CONV1D_CASES)
@pytest.mark.parametrize("method", [None, "gram", "materialise"])
def test_conv1d(kw, method, precision):
    torch.manual_seed(3)
    m = nn.Conv1d(4, 6, kernel_size=kw.pop("kernel_size", 3), **kw)
    _check(m, torch.randn(5, 4, 11), rtol=RTOL if precision else RTOL32, method=method, precision=precision)


@pytest.mark.parametrize("padding_idx", [None, 1])
@pytest.mark.parametrize("method", [None, "gram", "rows"])
@pytest.mark.parametrize("t", [1, 6, 20])
def test_embedding(padding_idx, method, t):
    torch.manual_seed(4)
    m = nn.Embedding(7, 5, padding_idx=padding_idx)
    x = torch.randint(0, 7, (6, t))
    x[0, :] = 3  # one sample repeats one index everywhere
    _check(m, x, method=method)


def test_embedding_unbatched_positions_and_nd():
    torch.manual_seed(5)
    m = nn.Embedding(10, 4, padding_idx=0)
    _check(m, torch.randint(0, 10, (8,)))  # one index per sample
    _check(m, torch.randint(0, 10, (4, 3, 5)))  # extra axes


def test_embedding_scale_grad_by_freq_refused():
    m = nn.Embedding(5, 3, scale_grad_by_freq=True)
    x = torch.randint(0, 5, (4, 3))
    g = torch.randn(4, 3, 3)
    with pytest.raises(ValueError, match="mixes samples"):
        FAST_LAYERS[nn.Embedding].norm_sq(m, (x,), g)
    with pytest.raises(ValueError, match="mixes samples"):
        FAST_LAYERS[nn.Embedding].clipped_sum(m, (x,), g, torch.ones(4))


@pytest.mark.parametrize("kw", [dict(), dict(elementwise_affine=False), dict(bias=False), dict(eps=1e-2)])
@pytest.mark.parametrize("shape,nshape", [((6, 8), 8), ((5, 4, 8), 8), ((4, 3, 2, 5), (2, 5))])
def test_layernorm(kw, shape, nshape):
    torch.manual_seed(6)
    m = nn.LayerNorm(nshape, **kw)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    x = torch.randn(*shape) * 2 + 1
    if not kw.get("elementwise_affine", True):
        ns = FAST_LAYERS[nn.LayerNorm].norm_sq(m, (x,), torch.randn(*shape))
        assert torch.equal(ns, torch.zeros(shape[0], dtype=torch.float64))
        assert FAST_LAYERS[nn.LayerNorm].clipped_sum(m, (x,), torch.randn(*shape), torch.ones(shape[0])) == {}
        return
    _check(m, x)


def _mp_layernorm_weight_norm_sq(x, g, eps):
    """||sum_t g_t * xhat_t||^2 at 60 digits (mpmath), for one sample: x, g (T, N) float32."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 60
    t, n = x.shape
    w = [mpmath.mpf(0)] * n
    for ti in range(t):
        xs = [mpmath.mpf(float(v)) for v in x[ti]]
        mu = sum(xs) / n
        var = sum((v - mu) ** 2 for v in xs) / n
        d = mpmath.sqrt(var + mpmath.mpf(eps))
        for k in range(n):
            w[k] += mpmath.mpf(float(g[ti, k])) * (xs[k] - mu) / d
    return sum(v * v for v in w)


def test_layernorm_bound_on_an_almost_constant_group():
    # large offset, tiny spread, tiny eps: xhat is ill-conditioned; the bound must still hold
    torch.manual_seed(7)
    m = nn.LayerNorm(6, eps=1e-12)
    x = (1e4 + torch.randn(3, 4, 6) * 1e-3).float()
    g = torch.randn(3, 4, 6)
    ns = FAST_LAYERS[nn.LayerNorm].norm_sq(m, (x,), g)
    for i in range(3):
        exact_w = _mp_layernorm_weight_norm_sq(x[i], g[i], 1e-12)
        exact = exact_w + sum(float(v) ** 2 for v in g[i].double().sum(0))  # bias (float64: ~exact)
        assert float(ns[i]) >= float(exact) * (1 + 1e-12)
        assert float(ns[i]) < float(exact) * 1e6 + 1e6  # finite and not absurd


def _fraction_weight_norm_sq(a, g):
    """Exact ||G^T A||_F^2 of float32 (T, d_in), (T, d_out) in rational arithmetic."""
    fa = [[Fraction(float(v)) for v in row] for row in a]
    fg = [[Fraction(float(v)) for v in row] for row in g]
    t, d_in, d_out = len(fa), len(fa[0]), len(fg[0])
    total = Fraction(0)
    for o in range(d_out):
        for k in range(d_in):
            s = sum(fg[ti][o] * fa[ti][k] for ti in range(t))
            total += s * s
    return total


@pytest.mark.parametrize("method", ["gram", "materialise"])
def test_linear_bound_is_certified_under_cancellation(method):
    # rows that cancel: g_{t+1} = -g_t (1 + tiny), a_{t+1} = a_t, so G^T A is tiny while
    # sum_t ||a_t|| ||g_t|| is large; compare with the exact rational value
    rng = np.random.default_rng(8)
    b, t, d_in, d_out = 4, 6, 5, 3
    a = rng.standard_normal((b, t // 2, d_in)).astype(np.float32).repeat(2, axis=1)
    g = rng.standard_normal((b, t // 2, d_out)).astype(np.float32).repeat(2, axis=1)
    g[:, 1::2] *= np.float32(-(1 + 2.0 ** -20))
    a_t, g_t = torch.from_numpy(a), torch.from_numpy(g)
    m = nn.Linear(d_in, d_out, bias=False)
    ns = fl.linear_norm_sq(m, (a_t,), g_t, method=method)
    for i in range(b):
        exact = _fraction_weight_norm_sq(a[i], g[i])
        assert Fraction(float(ns[i])) >= exact
        r2 = sum(float(np.linalg.norm(a[i, k]) * np.linalg.norm(g[i, k])) for k in range(t)) ** 2
        assert float(ns[i]) - float(exact) <= 1e-12 * r2  # slack of order n u R^2


@pytest.mark.parametrize("method", ["gram", "rows"])
def test_embedding_bound_is_certified_under_cancellation(method):
    rng = np.random.default_rng(9)
    b, t, d = 3, 10, 4
    x = torch.from_numpy(rng.integers(0, 3, (b, t)))
    g = rng.standard_normal((b, t, d)).astype(np.float32)
    m = nn.Embedding(3, d)
    # make each index's gradients almost cancel
    for i in range(b):
        for v in range(3):
            pos = np.flatnonzero(x[i].numpy() == v)
            if len(pos) >= 2:
                g[i, pos[-1]] = -g[i, pos[:-1]].sum(0) * np.float32(1 + 2.0 ** -18)
    ns = fl.embedding_norm_sq(m, (x,), torch.from_numpy(g), method=method)
    for i in range(b):
        exact = Fraction(0)
        for v in range(3):
            row = [sum(Fraction(float(g[i, k, j])) for k in range(t) if int(x[i, k]) == v) for j in range(d)]
            exact += sum(c * c for c in row)
        assert Fraction(float(ns[i])) >= exact


@pytest.mark.parametrize("layer,x", [
    (lambda: nn.Linear(4, 3), lambda: torch.randn(5, 4)),
    (lambda: nn.Conv2d(2, 3, 3, padding=1), lambda: torch.randn(5, 2, 4, 4)),
    (lambda: nn.Conv1d(2, 3, 3), lambda: torch.randn(5, 2, 6)),
    (lambda: nn.LayerNorm(4), lambda: torch.randn(5, 3, 4)),
])
@pytest.mark.parametrize("frozen", ["weight", "bias", "both"])
def test_frozen_parameters_are_excluded(layer, x, frozen):
    torch.manual_seed(10)
    m, xv = layer(), x()
    for name in (["weight", "bias"] if frozen == "both" else [frozen]):
        getattr(m, name).requires_grad_(False)
    ns, ref_sq, cs, ref_cs, _ = _run(m, xv)
    assert set(cs) == set(ref_cs)
    if frozen == "both":
        assert torch.equal(ns, torch.zeros(5, dtype=torch.float64)) and cs == {}
    else:
        rtol = RTOL32 if isinstance(m, (nn.Conv1d, nn.Conv2d)) else RTOL  # float32 convolution path
        assert torch.all(ns >= ref_sq * (1 - 1e-12)) and torch.all(ns <= ref_sq * (1 + rtol))


def test_embedding_frozen():
    m = nn.Embedding(5, 3)
    m.weight.requires_grad_(False)
    x = torch.randint(0, 5, (4, 2))
    g = torch.randn(4, 2, 3)
    assert torch.equal(FAST_LAYERS[nn.Embedding].norm_sq(m, (x,), g), torch.zeros(4, dtype=torch.float64))
    assert FAST_LAYERS[nn.Embedding].clipped_sum(m, (x,), g, torch.ones(4)) == {}


@pytest.mark.parametrize("m,x", [
    (nn.Linear(4, 3), torch.randn(0, 4)),
    (nn.Linear(4, 3), torch.randn(0, 2, 4)),
    (nn.Conv2d(2, 3, 3), torch.randn(0, 2, 5, 5)),
    (nn.Embedding(5, 3), torch.randint(0, 5, (0, 4))),
    (nn.LayerNorm(4), torch.randn(0, 4)),
])
def test_empty_batch(m, x):
    with torch.no_grad():
        y = m(x)
    g = torch.zeros_like(y)
    fast = FAST_LAYERS[type(m)]
    ns = fast.norm_sq(m, (x,), g)
    assert ns.shape == (0,) and ns.dtype == torch.float64
    cs = fast.clipped_sum(m, (x,), g, torch.zeros(0))
    for n, v in cs.items():
        p = getattr(m, n)
        assert v.shape == p.shape and torch.count_nonzero(v) == 0


def test_float64_layer_and_half_inputs():
    torch.manual_seed(11)
    m = nn.Linear(6, 4).double()
    _check(m, torch.randn(5, 3, 6, dtype=torch.float64))
    # bfloat16 grad_output / activations convert exactly to float64
    m32 = nn.Linear(6, 4)
    x = torch.randn(5, 6).bfloat16()
    g = torch.randn(5, 4).bfloat16()
    ns = fl.linear_norm_sq(m32, (x,), g)
    exact = (x.double() ** 2).sum(1) * (g.double() ** 2).sum(1) + (g.double() ** 2).sum(1)
    assert torch.all(ns >= exact) and torch.all(ns <= exact * (1 + RTOL))


def test_nonfinite_input_gives_nonfinite_norm():
    m = nn.Linear(3, 2)
    x = torch.tensor([[1.0, float("inf"), 0.0], [1.0, 2.0, 3.0]])
    ns = fl.linear_norm_sq(m, (x,), torch.ones(2, 2))
    assert not math.isfinite(float(ns[0])) and math.isfinite(float(ns[1]))


@pytest.mark.parametrize("scale", [1e30, 1e-30])
@pytest.mark.parametrize("method", ["gram", "materialise"])
def test_extreme_float32_magnitudes(scale, method):
    # squares and fourth powers of float32 values stay normal float64 numbers: still tight
    torch.manual_seed(12)
    m = nn.Linear(5, 4)
    x = (torch.randn(4, 3, 5, dtype=torch.float64) * scale).float()
    g = (torch.randn(4, 3, 4, dtype=torch.float64) * scale).float()
    ns = fl.linear_norm_sq(m, (x,), g, method=method)
    x64, g64 = x.double(), g.double()
    ref = (torch.einsum("bto,bti->boi", g64, x64) ** 2).sum((1, 2)) + (g64.sum(1) ** 2).sum(1)
    assert torch.all(torch.isfinite(ns))
    assert torch.all(ns >= ref * (1 - 1e-12)) and torch.all(ns <= ref * (1 + RTOL))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_linear_2d_native_row_norms_bound_tiny_and_exact_values(dtype):
    # T = 1 uses dpfast's native row norms: an upper bound also where the float64 square of the
    # product underflows (float64: entries 1e-200), and exact in rational arithmetic otherwise
    m = nn.Linear(3, 2).to(dtype)
    scale = 1e-200 if dtype == torch.float64 else 1e-20
    x = torch.tensor([[1.0, -2.0, 3.0], [0.5, 0.25, -0.125]], dtype=dtype) * scale
    g = torch.tensor([[1.0, 1.0], [3.0, -4.0]], dtype=dtype) * scale
    ns = FAST_LAYERS[nn.Linear].norm_sq(m, (x,), g)
    for i in range(2):
        a2 = sum(Fraction(float(v)) ** 2 for v in x[i])
        g2 = sum(Fraction(float(v)) ** 2 for v in g[i])
        exact = a2 * g2 + g2
        assert Fraction(float(ns[i])) >= exact
        if dtype == torch.float32:
            assert float(ns[i]) <= float(exact) * (1 + 1e-12) + 2.0 ** -1021


def test_per_sample_norm_of_an_empty_batch():
    # an empty Poisson batch: no rows, no error (torch's reshape(0, -1) is ambiguous)
    from dpfast.torch._grad_sample import per_sample_norm_sq
    for shape in [(0, 3, 2), (0, 5)]:
        assert per_sample_norm_sq(torch.empty(shape)).shape == (0,)
    g = torch.tensor([[3.0, 4.0]])
    assert per_sample_norm_sq(g)[0] >= 25.0
