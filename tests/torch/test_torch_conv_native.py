"""dpfast's native per-sample convolution weight gradients (``dpfast._clip.conv_weight_grads``,
csrc/clip/conv.hpp), used by the float32 groups = 1 kept path of ``dpfast.torch``'s convolutions:
every entry within its float32 error bound of a float64 reference for many geometries (stride,
padding, dilation, Conv1d, channel counts that are not multiples of 8); the float64 sums (||w_hat||^2,
||U||_F^2, ||G||_F^2) within gamma of exact; the same bits for any thread count and for the generic
(DPFAST_CONV_NO_AVX2=1) build; the binding's validation; and through ``conv_norm_sq`` /
``conv_clipped_sum``: the bound above the exact AND the computed squared norms in rational
arithmetic at adversarial scales (1e-15..1e15, cancellation, underflow), and the clipped sums equal
to a naive float64 per-sample loop with the native kernel on and off."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import _engine_models as EM  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from dpfast import _clip  # noqa: E402
from dpfast.torch import _fast_layers as fl  # noqa: E402
from dpfast.torch._grad_sample import safe_factors  # noqa: E402

U32 = 2.0 ** -24

#: (B, C, H, W, C_out, kernel, stride, dilation, padding)
GEOMETRIES = [
    (5, 1, 28, 28, 16, (8, 8), (2, 2), (1, 1), (3, 3)),  # the benchmark CNN's first convolution
    (4, 16, 13, 13, 32, (4, 4), (2, 2), (1, 1), (0, 0)),  # its second
    (3, 3, 11, 9, 5, (3, 2), (1, 2), (2, 1), (1, 0)),
    (3, 2, 1, 17, 13, (1, 3), (1, 1), (1, 3), (0, 2)),  # a Conv1d as height 1
    (2, 4, 7, 7, 37, (3, 3), (2, 1), (1, 2), (1, 1)),  # 37 = 4 x 8 + 5: every vector block and a tail
    (2, 1, 5, 6, 1, (5, 6), (1, 1), (1, 1), (0, 0)),  # one output position, one output channel
    (1, 2, 9, 9, 9, (2, 2), (3, 3), (3, 3), (0, 0)),  # rows and columns that no window reads
]


def _run(x, g, k, s, d, n_threads=1):
    b, c = x.shape[:2]
    p = g.shape[1] * k[0] * k[1] * c
    w = np.empty((b, p), np.float32)
    sq, fa, fg = np.empty(b), np.empty(b), np.empty(b)
    _clip.conv_weight_grads(x.numpy(), g.numpy(), k[0], k[1], s[0], s[1], d[0], d[1], w, sq, fa, fg, n_threads)
    return w, sq, fa, fg


def _case(geo, seed=0, scale_x=1.0, scale_g=1.0):
    b, c, h, w_, co, k, s, d, p = geo
    gen = torch.Generator().manual_seed(seed)
    x = F.pad(torch.randn(b, c, h, w_, generator=gen) * scale_x, (p[1], p[1], p[0], p[0]))
    oh = (x.shape[2] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (x.shape[3] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    g = (torch.randn(b, co, oh, ow, generator=gen) * scale_g).float()
    return x.float().contiguous(), g


def _reference(x, g, k, s, d):
    """float64 per-sample gradients laid out (k_h, k_w, C, C_out), the unfolded input, and sum |g||u|."""
    b, c = x.shape[:2]
    co = g.shape[1]
    u = F.unfold(x.double(), k, dilation=d, stride=s)  # (B, C k_h k_w, L)
    g2 = g.double().reshape(b, co, -1)
    w = torch.bmm(g2, u.transpose(1, 2)).reshape(b, co, c, k[0], k[1]).permute(0, 3, 4, 2, 1).reshape(b, -1)
    wabs = torch.bmm(g2.abs(), u.abs().transpose(1, 2)).reshape(b, co, c, k[0], k[1]).permute(0, 3, 4, 2, 1).reshape(b, -1)
    return w, u, wabs


@pytest.mark.parametrize("geo", GEOMETRIES)
def test_entries_and_sums_within_their_bounds(geo):
    k, s, d = geo[5], geo[6], geo[7]
    x, g = _case(geo)
    w, sq, fa, fg = _run(x, g, k, s, d)
    ref, u, wabs = _reference(x, g, k, s, d)
    t = g.shape[2] * g.shape[3]
    gamma_t = 1.01 * t * U32 / (1 - t * U32)
    err = (torch.from_numpy(w).double() - ref).abs()
    assert bool((err <= gamma_t * wabs + t * 2.0 ** -149).all())
    rel = 1e-12
    assert np.allclose(sq, (torch.from_numpy(w).double() ** 2).sum(1).numpy(), rtol=rel, atol=0)
    assert np.allclose(fa, (u ** 2).sum((1, 2)).numpy(), rtol=rel, atol=0)
    assert np.allclose(fg, (g.double() ** 2).sum((1, 2, 3)).numpy(), rtol=rel, atol=0)


def _digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def test_same_bits_for_any_thread_count():
    geo = (13, 3, 12, 12, 20, (3, 3), (2, 1), (1, 2), (1, 1))
    x, g = _case(geo, seed=3)
    digests = {_digest(*_run(x, g, geo[5], geo[6], geo[7], n_threads=n)) for n in (1, 2, 3, 7)}
    assert len(digests) == 1


_PARITY = """
import hashlib
import numpy as np
from dpfast import _clip
rng = np.random.default_rng(5)
h = hashlib.sha256()
for (b, c, hh, ww, co, k, s, d, p) in {geos!r}:
    x = np.pad(rng.standard_normal((b, c, hh, ww)).astype(np.float32), ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh = (x.shape[2] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (x.shape[3] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    g = rng.standard_normal((b, co, oh, ow)).astype(np.float32)
    w = np.empty((b, co * k[0] * k[1] * c), np.float32)
    out = [w, np.empty(b), np.empty(b), np.empty(b)]
    _clip.conv_weight_grads(x, g, k[0], k[1], s[0], s[1], d[0], d[1], *out, 2)
    for a in out:
        h.update(a.tobytes())
print(_clip.conv_vectorised(), h.hexdigest())
"""


def test_generic_build_gives_the_same_bits():
    # DPFAST_CONV_NO_AVX2=1: the generic build (std::fma per lane) against the AVX2+FMA one and
    # (DPFAST_CONV_NO_AVX512=0, on CPUs with AVX-512F) the AVX-512 one, 16 channels per vector
    # (NumPy only in the subprocesses: no torch import)
    code = _PARITY.format(geos=GEOMETRIES)
    res = {}
    for no2, no512 in (("0", "0"), ("0", "1"), ("1", "0")):
        env = dict(os.environ, DPFAST_CONV_NO_AVX2=no2, DPFAST_CONV_NO_AVX512=no512)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        res[no2, no512] = tuple(r.stdout.split())
    assert res["1", "0"][0] == "False"
    assert res["0", "0"][1] == res["0", "1"][1] == res["1", "0"][1]


_ISA = "from dpfast import _clip; print(_clip.conv_isa())"


def test_isa_switches():
    out = {}
    for no2, no512 in (("0", "0"), ("0", "1"), ("1", "0")):
        env = dict(os.environ, DPFAST_CONV_NO_AVX2=no2, DPFAST_CONV_NO_AVX512=no512)
        out[no2, no512] = subprocess.run([sys.executable, "-c", _ISA], env=env, capture_output=True, text=True,
                                         check=True).stdout.strip()
    assert out["1", "0"] == "generic"
    assert out["0", "1"] in ("avx2", "generic")
    assert out["0", "0"] in ("avx512", out["0", "1"])


@pytest.mark.parametrize("geo", GEOMETRIES)
def test_padding_bias_and_openmp_pool(geo):
    # pad=(top, bottom, left, right): the kernel pads each sample with zeros itself -- the same bits
    # as the padded input; bias: the float32 sums of g over the positions in position order (a
    # sequential float32 reference), bias_sq their float64 sum of squares; use_omp (torch's OpenMP
    # pool, loaded by the torch import): the same bits as the kernel's own threads, any count
    b, c, h, w_, co, k, s, d, p = geo
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(b, c, h, w_, generator=gen)
    xp = F.pad(x, (p[1], p[1], p[0], p[0])).contiguous()
    oh = (xp.shape[2] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (xp.shape[3] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    g = torch.randn(b, co, oh, ow, generator=gen)
    ref = _run(xp, g, k, s, d)
    bias_ref = np.zeros((b, co), np.float32)
    for t in range(oh * ow):
        bias_ref = bias_ref + g.numpy().reshape(b, co, -1)[:, :, t]
    for use_omp in (False, True):
        for nt in (1, 2, 3):
            out = [np.empty_like(ref[0]), np.empty(b), np.empty(b), np.empty(b)]
            bias, bias_sq = np.empty((b, co), np.float32), np.empty(b)
            _clip.conv_weight_grads(x.numpy(), g.numpy(), k[0], k[1], s[0], s[1], d[0], d[1], *out, nt,
                                    pad=(p[0], p[0], p[1], p[1]), bias=bias, bias_sq=bias_sq, use_omp=use_omp)
            assert _digest(*out) == _digest(*ref)
            assert np.array_equal(bias, bias_ref)
            exact = [sum(Fraction(float(v)) ** 2 for v in row) for row in bias]
            t_terms = co
            assert all(abs(Fraction(float(q)) - e) <= 1.01 * t_terms * 2.0 ** -53 * e for q, e in zip(bias_sq, exact))
    assert _clip.conv_omp_runtime()  # torch's libgomp (the CPU wheels)


def test_binding_validates_padding_and_bias():
    geo = GEOMETRIES[2]
    b, c, h, w_, co, k, s, d, p = geo
    x = torch.randn(b, c, h, w_)
    xp = F.pad(x, (p[1], p[1], p[0], p[0]))
    oh = (xp.shape[2] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (xp.shape[3] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    g = torch.randn(b, co, oh, ow).numpy()
    P = co * k[0] * k[1] * c

    def call(pad=(p[0], p[0], p[1], p[1]), bias="new", bias_sq="new", w=None):
        bias = np.empty((b, co), np.float32) if isinstance(bias, str) else bias
        bias_sq = np.empty(b) if isinstance(bias_sq, str) else bias_sq
        w = np.empty((b, P), np.float32) if w is None else w
        _clip.conv_weight_grads(x.numpy(), g, k[0], k[1], s[0], s[1], d[0], d[1], w, np.empty(b), np.empty(b),
                                np.empty(b), 1, pad=pad, bias=bias, bias_sq=bias_sq)

    call()
    with pytest.raises(ValueError, match="geometry"):
        call(pad=(0, 0, 0, 0))
    with pytest.raises(ValueError, match=r"pad must be in"):
        call(pad=(-1, p[0] + 1, p[1], p[1]))
    with pytest.raises(ValueError, match=r"pad must be in"):
        call(pad=(2 ** 40, 0, 0, 0))
    with pytest.raises(ValueError, match=r"top, bottom, left, right"):
        call(pad=(1, 1, 1))
    with pytest.raises(ValueError, match="together"):
        call(bias_sq=None)
    with pytest.raises(ValueError, match="entries"):
        call(bias=np.empty((b, co + 1), np.float32))
    with pytest.raises(TypeError, match="float32"):
        call(bias=np.empty((b, co)))
    w = np.empty((b, P), np.float32)
    with pytest.raises(ValueError, match="share memory"):
        call(w=w, bias=w.reshape(-1)[:b * co].reshape(b, co))


def test_binding_validates():
    x, g = _case(GEOMETRIES[2])
    k, s, d = GEOMETRIES[2][5:8]
    b = x.shape[0]
    p = g.shape[1] * k[0] * k[1] * x.shape[1]

    xn, gn = x.numpy(), g.numpy()

    def call(xx=xn, gg=gn, geom=(k[0], k[1], s[0], s[1], d[0], d[1]), w=None, sq=None, nt=1):
        w = np.empty((b, p), np.float32) if w is None else w
        sq = np.empty(b) if sq is None else sq
        _clip.conv_weight_grads(xx, gg, *geom, w, sq, np.empty(b), np.empty(b), nt)

    call()
    with pytest.raises(TypeError, match="float32"):
        call(xx=x.double().numpy())
    with pytest.raises(ValueError, match="4-D"):
        call(xx=x.numpy()[0])
    with pytest.raises(ValueError, match="C-contiguous"):
        call(xx=np.asfortranarray(x.numpy()))
    with pytest.raises(ValueError, match="geometry"):
        call(geom=(k[0] + 1, k[1], s[0], s[1], d[0], d[1]))
    with pytest.raises(ValueError, match="geometry"):
        call(gg=g.numpy()[:, :, :-1].copy())
    with pytest.raises(ValueError, match=">= 1"):
        call(geom=(k[0], k[1], 0, s[1], d[0], d[1]))
    with pytest.raises(ValueError, match="batch"):
        call(gg=g.numpy()[:-1].copy())
    with pytest.raises(ValueError, match="entries"):
        call(w=np.empty((b, p - 1), np.float32))
    with pytest.raises(ValueError, match="entries"):
        call(sq=np.empty(b + 1))
    with pytest.raises(ValueError, match="n_threads"):
        call(nt=0)
    # an empty batch writes nothing
    _clip.conv_weight_grads(x.numpy()[:0], g.numpy()[:0], k[0], k[1], s[0], s[1], d[0], d[1],
                            np.empty((0, p), np.float32), np.empty(0), np.empty(0), np.empty(0), 1)


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("layer,shape", [
    (lambda: nn.Conv2d(1, 16, 8, 2, padding=3), (6, 1, 28, 28)),
    (lambda: nn.Conv2d(3, 9, 3, stride=(2, 1), padding=1, dilation=(1, 2)), (5, 3, 9, 8)),
    (lambda: nn.Conv2d(2, 3, 3, padding="same", padding_mode="circular", bias=False), (4, 2, 6, 7)),
    (lambda: nn.Conv1d(3, 10, 3, stride=2, padding=2, dilation=2), (5, 3, 13)),
])
def test_native_and_torch_forms_equal_the_naive_loop(monkeypatch, layer, shape, native):
    if native and not fl._NATIVE_CONV:
        pytest.skip("the native kernel's AVX2+FMA build does not run here")
    monkeypatch.setattr(fl, "_NATIVE_CONV", native)
    torch.manual_seed(0)
    m = layer()
    x = torch.randn(shape)
    g = EM.grad_like(m, x)
    f = torch.rand(shape[0], generator=torch.Generator().manual_seed(1))
    ns = fl.conv_norm_sq(m, (x,), g)
    kept = fl._KEPT[m]
    assert kept.w.dtype == torch.float32
    assert kept.shape[1] == ((3, 2, 0, 1) if native else (0, 3, 1, 2))
    EM.check_against_naive(m, x, g, f, ns, fl.conv_clipped_sum(m, (x,), g, f))


def _exact_sq(x, g, k):
    """Exact squared norms (Fraction) of the per-sample weight + bias gradients of a Conv1d
    (stride 1, no padding)."""
    out = []
    for i in range(x.shape[0]):
        xs = [[Fraction(float(v)) for v in row] for row in x[i]]
        gs = [[Fraction(float(v)) for v in row] for row in g[i]]
        e = Fraction(0)
        for gr in gs:
            for xr in xs:
                for j in range(k):
                    v = sum(gr[t] * xr[t + j] for t in range(len(gr)))
                    e += v * v
            e += sum(gr) ** 2
        out.append(e)
    return out


@pytest.mark.parametrize("case", ["cancel", "underflow", "mixed_scale", "1e-15", "1e15"])
def test_bound_covers_exact_and_computed_at_adversarial_scales(monkeypatch, case):
    if not fl._NATIVE_CONV:
        pytest.skip("the native kernel's AVX2+FMA build does not run here")
    gen = torch.Generator().manual_seed(11)
    b, c_in, c_out, k, t_out = 3, 2, 9, 3, 30
    if case in ("1e-15", "1e15"):
        sc = float(case)
        x = (torch.randn(b, c_in, t_out + k - 1, generator=gen) * sc).float()
        g = (torch.randn(b, c_out, t_out, generator=gen) * sc).float()
    else:
        x, g = EM.adversarial_conv1d_inputs(case, gen, b, c_in, c_out, k, t_out)
    m = nn.Conv1d(c_in, c_out, k)
    ns = fl.conv_norm_sq(m, (x,), g)
    kept = fl._KEPT[m]
    assert kept.shape[1] == (3, 2, 0, 1)  # the native kernel's layout
    exact = _exact_sq(x, g, k)
    for i in range(b):
        computed = sum(Fraction(float(v)) ** 2 for v in kept.w[i]) + sum(Fraction(float(v)) ** 2 for v in kept.bias[i])
        bound = Fraction(float(ns[i]))
        assert bound >= exact[i] and bound >= computed, (case, i)
    # clipped to norm 1 with the engine's factors: the summed vectors' norms are <= 1 after rounding
    f = safe_factors(ns.numpy(), 1.0, [torch.float32])
    for i in range(b):
        fi = Fraction(float(np.float32(f[i])))
        computed = sum((fi * Fraction(float(v))) ** 2 for v in kept.w[i]) + \
            sum((fi * Fraction(float(v))) ** 2 for v in kept.bias[i])
        assert computed <= 1


# ----------------------------------------------- the loss reduction's scale, applied by the kernel
@pytest.mark.parametrize("precision", [None, "float64"])
@pytest.mark.parametrize("layer,shape", [
    (lambda: nn.Conv2d(1, 16, 8, 2, padding=3), (7, 1, 28, 28)),  # native, the kernel pads and scales
    (lambda: nn.Conv2d(3, 5, 3, padding=1, padding_mode="circular"), (5, 3, 8, 8)),  # F.pad, g * s first
    (lambda: nn.Conv1d(2, 9, 3, stride=2, padding=2), (6, 2, 11)),
])
def test_grad_scale_gives_the_bits_of_the_scaled_gradient(layer, shape, precision):
    # conv_norm_sq / conv_clipped_sum with (g, grad_scale=B) against the same calls on torch's g * B
    # (what the hooks passed before): the same bound, kept gradients and clipped sums, bit for bit
    torch.manual_seed(0)
    m = layer()
    x = torch.randn(shape)
    g = EM.grad_like(m, x) / 3.0
    f = torch.rand(shape[0], generator=torch.Generator().manual_seed(1))
    b = shape[0]
    ns_ref = fl.conv_norm_sq(m, (x,), g * b, precision=precision)
    kept_ref = fl._KEPT[m]
    cs_ref = fl.conv_clipped_sum(m, (x,), kept_ref.g, f)
    ns = fl.conv_norm_sq(m, (x,), g, precision=precision, grad_scale=b)
    kept = fl._KEPT[m]
    assert kept.g is g and kept.scale == b
    assert torch.equal(ns, ns_ref)
    assert torch.equal(kept.w, kept_ref.w)
    assert (kept.bias is None) == (kept_ref.bias is None) and (kept.bias is None or torch.equal(kept.bias, kept_ref.bias))
    cs = fl.conv_clipped_sum(m, (x,), g, f, grad_scale=b)
    assert cs.keys() == cs_ref.keys() and all(torch.equal(cs[n], cs_ref[n]) for n in cs)
    # not kept (another tensor): the weight-gradient convolution of fl(g * B), as before
    fl.conv_norm_sq(m, (x,), g, precision=precision, grad_scale=b)
    cs2 = fl.conv_clipped_sum(m, (x,), g.clone(), f, grad_scale=b)
    cs2_ref = fl.conv_clipped_sum(m, (x,), g * b, f)
    assert all(torch.equal(cs2[n], cs2_ref[n]) for n in cs2)
    with pytest.raises(ValueError, match="grad_scale"):
        fl.conv_norm_sq(m, (x,), g, grad_scale=2.5)


def test_engine_scaled_as_read_equals_scaled_copy(monkeypatch):
    # the hooks hand the convolutions the captured gradient and B (FastLayer.grad_scale): the clipped
    # sums of a GradSampleModule are the bits of the scaled copy's (grad_scale off)
    from dpfast.torch._grad_sample import GradSampleModule

    def sums(flag):
        for t in (nn.Conv1d, nn.Conv2d):
            monkeypatch.setitem(fl.FAST_LAYERS, t, fl.FAST_LAYERS[t]._replace(grad_scale=flag))
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 6, 5, 2, padding=2), nn.Tanh(), nn.Conv2d(6, 4, 3, padding=1),
                              nn.Flatten(), nn.Linear(4 * 7 * 7, 3))
        gsm = GradSampleModule(model)
        x = torch.randn(37, 1, 14, 14)
        y = torch.randint(0, 3, (37,))
        F.cross_entropy(gsm(x), y).backward()
        out, b = gsm.clipped_sum(0.1)
        assert b == 37
        return [out[p] for p in model.parameters()]

    for u, v in zip(sums(True), sums(False)):
        assert torch.equal(u, v)
