"""Red team 32 (dpfast.torch): the native per-sample convolution kernel
(``dpfast._clip.conv_weight_grads``, csrc/clip/conv.hpp, csrc/bindings/clip.cpp) called directly
with hostile arguments, its certified bound on cancelling 2-D inputs against exact rational
arithmetic, its bits across thread counts and builds on those inputs, and the per-layer clipping
norms of 79f3a68 across optimizer changes.

Hole found (fixed in the binding): a kernel size and dilation whose product wraps around int64
(kh = 2^61 with dh = 8 gives d (k - 1) = -8; kh kw = 2^64 = 0 entries) passed the geometry check,
and the kernel wrote its multiplicity table at index k d: a segfault (``test_geometry_overflow``)."""
from __future__ import annotations

import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import torch  # noqa: E402
from torch import nn  # noqa: E402

from dpfast import _clip  # noqa: E402
from dpfast.torch import _fast_layers as fl  # noqa: E402


def _outs(b, p):
    return np.empty((b, p), np.float32), np.empty(b), np.empty(b), np.empty(b)


def _good():
    """A valid small call: x (2, 3, 6, 7), kernel (2, 3), stride (2, 1), dilation (1, 2), C_out 5."""
    gen = np.random.default_rng(0)
    x = gen.standard_normal((2, 3, 6, 7)).astype(np.float32)
    k, s, d = (2, 3), (2, 1), (1, 2)
    oh = (6 - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (7 - d[1] * (k[1] - 1) - 1) // s[1] + 1
    g = gen.standard_normal((2, 5, oh, ow)).astype(np.float32)
    return x, g, k, s, d


def _call(x, g, k, s, d, outs=None, nt=1):
    if outs is None:
        outs = _outs(x.shape[0], g.shape[1] * k[0] * k[1] * x.shape[1])
    _clip.conv_weight_grads(x, g, k[0], k[1], s[0], s[1], d[0], d[1], *outs, nt)
    return outs


def _reference(x, g, k, s, d):
    """float64 per-sample weight gradients (B, KH, KW, C, Co) by the definition."""
    b, c, _, _ = x.shape
    co, oh, ow = g.shape[1:]
    w = np.zeros((b, k[0], k[1], c, co))
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    for kh in range(k[0]):
        for kw in range(k[1]):
            rows = kh * d[0] + s[0] * np.arange(oh)
            cols = kw * d[1] + s[1] * np.arange(ow)
            patch = x64[:, :, rows][:, :, :, cols]  # (B, C, OH, OW)
            w[:, kh, kw] = np.einsum("bchw,bohw->bco", patch, g64)
    return w


def test_geometry_overflow():
    # kh kw = 2^61 x 8 = 2^64 wraps to 0 (a w of 0 entries accepted), dh (kh - 1) = 8 (2^61 - 1)
    # wraps to -8 and dw (kw - 1) = 7 dw to 5 < Wp: before the fix, a write at m[dw] (~2.6e18): SIGSEGV
    x = np.ones((1, 1, 4, 8), np.float32)
    g = np.ones((1, 1, 1, 1), np.float32)
    dw = (2 ** 64 + 5) // 7
    out = (np.zeros(0, np.float32), np.zeros(1), np.zeros(1), np.zeros(1))
    with pytest.raises(ValueError, match="geometry"):
        _clip.conv_weight_grads(x, g, 2 ** 61, 8, 2 ** 40, 2 ** 40, 8, dw, *out, 1)
    # each overflow alone
    with pytest.raises(ValueError, match="geometry"):
        _clip.conv_weight_grads(x, g, 2 ** 61, 1, 2 ** 40, 2 ** 40, 8, 1, *out, 1)
    with pytest.raises(ValueError, match="geometry"):
        _clip.conv_weight_grads(x, g, 1, 8, 2 ** 40, 2 ** 40, 1, dw, *out, 1)
    # the largest kernel that fits: k = Hp (dilation 1) and k = 1 with any dilation
    _clip.conv_weight_grads(x, g, 4, 8, 2 ** 62, 2 ** 62, 1, 1, np.empty(32, np.float32), *out[1:], 1)
    _clip.conv_weight_grads(x, g, 1, 1, 2 ** 62, 2 ** 62, 2 ** 62, 2 ** 62, np.empty(1, np.float32), *out[1:], 1)
    assert out[1][0] == 1.0
    # int64 overflow of the arguments themselves: pybind11 refuses
    with pytest.raises(TypeError):
        _clip.conv_weight_grads(x, g, 2 ** 64, 1, 1, 1, 1, 1, *out, 1)


def test_hostile_arrays_refused():
    x, g, k, s, d = _good()
    b, p = 2, 5 * 2 * 3 * 3
    for bad in (x.astype(np.float64), x.astype(np.int32), x.astype(object), x.astype(np.float16),
                x.astype(np.bool_)):
        with pytest.raises(TypeError, match="float32"):
            _call(bad, g, k, s, d)
    with pytest.raises(TypeError, match="float32"):
        _call(x, g.astype(np.float64), k, s, d)
    with pytest.raises(TypeError, match="NumPy"):
        _call(x.tolist(), g, k, s, d, outs=_outs(b, p))
    # negative strides, a transposed view, a strided view, a zero-stride (overlapping) broadcast
    for bad in (x[::-1], x[:, ::-1], x[..., ::-1], np.asfortranarray(x), np.broadcast_to(x[:1], x.shape), np.lib.stride_tricks.as_strided(x, x.shape, (0,) + x.strides[1:])):
        with pytest.raises(ValueError, match="C-contiguous"):
            _call(bad, g, k, s, d)
    with pytest.raises(ValueError, match="C-contiguous"):
        _call(x, g[..., ::-1], k, s, d)
    # outputs: wrong dtype, too short or long, read-only, non-contiguous, misaligned
    w, sq, fa, fg = _outs(b, p)
    for bad_w in (w.astype(np.float64), w[:, :-1].copy(), np.empty((b, p + 1), np.float32)):
        with pytest.raises((TypeError, ValueError)):
            _call(x, g, k, s, d, outs=(bad_w, sq, fa, fg))
    ro = w.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        _call(x, g, k, s, d, outs=(ro, sq, fa, fg))
    with pytest.raises(ValueError, match="C-contiguous"):
        _call(x, g, k, s, d, outs=(np.empty((p, b), np.float32).T, sq, fa, fg))
    raw = np.empty(b * p * 4 + 1, np.uint8)
    mis = raw[1:].view(np.float32).reshape(b, p)
    with pytest.raises(ValueError, match="aligned"):
        _call(x, g, k, s, d, outs=(mis, sq, fa, fg))
    for bad in (np.empty(b + 1), np.empty(b, np.float32), np.empty(2 * b)[::2]):
        with pytest.raises((TypeError, ValueError)):
            _call(x, g, k, s, d, outs=(w, bad, fa, fg))
        with pytest.raises((TypeError, ValueError)):
            _call(x, g, k, s, d, outs=(w, sq, fa, bad))


def test_outputs_sharing_memory_refused():
    # an output overlapping an input (or another output) was read while written, by other threads
    # too: a bound from values that are neither x's nor g's.  Refused (red team 32)
    x, g, k, s, d = _good()
    b, p = 2, 5 * 2 * 3 * 3
    buf = np.zeros(x.size + b * p, np.float32)
    xb = buf[:x.size].reshape(x.shape)
    xb[...] = x
    w, sq, fa, fg = _outs(b, p)
    cases = [(buf[x.size - 1:x.size - 1 + b * p], sq, fa, fg),  # w over x's last entry
             (w, sq, sq, fg), (w, sq, fa, fa),
             (w, w[0, :4].view(np.float64), fa, fg)]  # sq inside w
    for outs in cases:
        with pytest.raises(ValueError, match="share memory"):
            _clip.conv_weight_grads(xb, g, k[0], k[1], s[0], s[1], d[0], d[1], *outs, 1)
    gb = np.zeros(g.size + b * p, np.float32)
    gb[:g.size] = g.ravel()
    with pytest.raises(ValueError, match="share memory"):
        _clip.conv_weight_grads(x, gb[:g.size].reshape(g.shape), k[0], k[1], s[0], s[1], d[0], d[1],
                                gb[g.size - 2:g.size - 2 + b * p], sq, fa, fg, 1)
    # adjacent, not overlapping: accepted, the same bits as separate buffers
    want = _call(x, g, k, s, d)
    got = (buf[x.size:], sq, fa, fg)
    _clip.conv_weight_grads(xb, g, k[0], k[1], s[0], s[1], d[0], d[1], *got, 1)
    assert got[0].tobytes() == want[0].tobytes() and sq.tobytes() == want[1].tobytes()


def test_misaligned_and_readonly_inputs_read_correctly():
    x, g, k, s, d = _good()
    want = _call(x, g, k, s, d)
    raw = np.empty(x.nbytes + 1, np.uint8)
    xm = raw[1:].view(np.float32).reshape(x.shape)
    xm[...] = x
    xr = x.copy()
    xr.flags.writeable = False
    for xx in (xm, xr):
        got = _call(xx, g, k, s, d)
        for a, b in zip(want, got):
            assert a.tobytes() == b.tobytes()


def test_shapes_and_geometry_refused():
    x, g, k, s, d = _good()
    with pytest.raises(ValueError, match="4-D"):
        _call(x[0], g, k, s, d, outs=_outs(1, 1))
    with pytest.raises(ValueError, match="4-D"):
        _call(x, g[..., None], k, s, d, outs=_outs(2, 1))
    # zero-size dims other than the batch: refused (C, C_out, H, W, output positions)
    for xx, gg in ((x[:, :0], g), (x, g[:, :0]), (x[:, :, :0], g), (x[:, :, :, :0], g),
                   (x, g[:, :, :0]), (x, g[:, :, :, :0])):
        with pytest.raises(ValueError, match="geometry"):
            _call(np.ascontiguousarray(xx), np.ascontiguousarray(gg), k, s, d, outs=_outs(2, 1))
    # kernel larger than the padded input, stride/dilation that give another output size
    for kk, ss, dd in (((7, 3), s, d), ((2, 8), s, d), (k, (1, 1), d), (k, s, (1, 1)), (k, (3, 1), d),
                       (k, s, (3, 2))):
        with pytest.raises(ValueError, match="geometry"):
            _call(x, g, kk, ss, dd, outs=_outs(2, g.shape[1] * kk[0] * kk[1] * 3))
    for kk, ss, dd in (((0, 3), s, d), (k, (0, 1), d), (k, s, (1, -2)), ((-1, 3), s, d)):
        with pytest.raises(ValueError, match=">= 1"):
            _call(x, g, kk, ss, dd, outs=_outs(2, 1))
    with pytest.raises(ValueError, match="batch"):
        _call(x, g[:1].copy(), k, s, d)
    with pytest.raises(ValueError, match="n_threads"):
        _call(x, g, k, s, d, nt=-5)
    # an empty batch: nothing read or written (outputs of 0 entries)
    _call(x[:0], g[:0], k, s, d, outs=_outs(0, 90))


@pytest.mark.parametrize("co", [1, 7, 9, 15, 33])
def test_cout_not_a_multiple_of_8(co):
    gen = np.random.default_rng(co)
    x = gen.standard_normal((3, 2, 5, 6)).astype(np.float32)
    k, s, d = (2, 2), (1, 2), (2, 1)
    oh, ow = (5 - 2 - 1) // 1 + 1, (6 - 1 - 1) // 2 + 1
    g = gen.standard_normal((3, co, oh, ow)).astype(np.float32)
    w, sq, fa, fg = _call(x, g, k, s, d)
    ref = _reference(x, g, k, s, d).reshape(3, -1)
    t = oh * ow
    tol = 1.01 * t * 2.0 ** -24 * np.abs(_reference(np.abs(x), np.abs(g), k, s, d)).reshape(3, -1) + 1e-30
    assert np.all(np.abs(w.astype(np.float64) - ref) <= tol)
    np.testing.assert_allclose(sq, (w.astype(np.float64) ** 2).sum(1), rtol=1e-12)
    np.testing.assert_allclose(fg, (g.astype(np.float64) ** 2).reshape(3, -1).sum(1), rtol=1e-12)


def test_nonfinite_and_subnormal_values_stay_in_their_sample():
    x, g, k, s, d = _good()
    want = _call(x, g, k, s, d)
    for val in (np.nan, np.inf, -np.inf, 3e38, np.float32(1e-45)):
        xx = x.copy()
        xx[1, 0, 0, 0] = val
        w, sq, fa, fg = _call(xx, g, k, s, d)
        # sample 0 untouched, bit for bit
        assert w[0].tobytes() == want[0][0].tobytes() and sq[0] == want[1][0] and fa[0] == want[2][0]
        if val != val or abs(val) == np.inf:
            assert not np.isfinite(sq[1])
        elif val == 3e38:
            assert np.isfinite(fa[1])  # (3e38)^2 times the multiplicity, in float64
    # all subnormal: products underflow in float32; fa, fg exact in float64 (squares ~1e-90)
    xs = np.full(x.shape, 1e-45, np.float32)
    gs = np.full(g.shape, 1e-40, np.float32)
    w, sq, fa, fg = _call(xs, gs, k, s, d)
    assert np.all(w == 0) and np.all(sq == 0) and np.all(fa > 0) and np.all(fg > 0)


def _cancelling_2d(seed, b=3, c=2, h=7, w_=8, co=9, k=(3, 2), s=(2, 1), d=(1, 3), pad=(1, 0)):
    """float32 padded x and g of a Conv2d whose per-sample gradient entries are small differences
    of large sums: x = 1 + 2^-12 + small bits, g alternating +-(1 + 2^-11 t) scaled by 2^e, plus
    one huge and one subnormal sample."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.full((b, c, h, w_), 1.0 + 2.0 ** -12) + torch.randint(0, 2, (b, c, h, w_), generator=gen) * 2.0 ** -20
    x = torch.nn.functional.pad(x, (pad[1], pad[1], pad[0], pad[0]))
    hp, wp = x.shape[2:]
    oh = (hp - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (wp - d[1] * (k[1] - 1) - 1) // s[1] + 1
    t = torch.arange(oh * ow, dtype=torch.float64)
    sign = (-1.0) ** t
    g = (sign * (1.0 + 2.0 ** -11 * t)).reshape(1, 1, oh, ow) * torch.randint(1, 4, (b, co, 1, 1), generator=gen)
    x, g = x.float(), g.float()
    x[1] *= 2.0 ** 60
    g[1] *= 2.0 ** 50
    x[2] *= 2.0 ** -70
    g[2] *= 2.0 ** -70
    return x.contiguous(), g.contiguous(), k, s, d


def _exact_norm_sq(x, g, k, s, d, i):
    xs = x[i].double().numpy()
    gs = g[i].double().numpy()
    c, co = xs.shape[0], gs.shape[0]
    oh, ow = gs.shape[1:]
    tot = Fraction(0)
    xf = [[[Fraction(float(v)) for v in row] for row in ch] for ch in xs]
    gf = [[[Fraction(float(v)) for v in row] for row in ch] for ch in gs]
    for o in range(co):
        for ci in range(c):
            for kh in range(k[0]):
                for kw in range(k[1]):
                    e = sum(gf[o][a][bb] * xf[ci][a * s[0] + kh * d[0]][bb * s[1] + kw * d[1]]
                            for a in range(oh) for bb in range(ow))
                    tot += e * e
    return tot


def test_bound_covers_exact_2d_cancelling():
    """(||w_hat_i|| + Delta_i)^2, as ``_conv_native`` forms it, >= the exact rational squared norm
    and the computed one, on cancelling 2-D inputs with stride, dilation, padding, C_out = 9."""
    x, g, k, s, d = _cancelling_2d(5)
    m = nn.Conv2d(2, 9, k, stride=s, dilation=d, bias=False)
    bound, w, _, _ = fl._conv_native(m, x, k, s, d, g.reshape(g.shape[0], g.shape[1], -1), False)
    for i in range(x.shape[0]):
        exact = _exact_norm_sq(x, g, k, s, d, i)
        computed = sum(Fraction(float(v)) ** 2 for v in w[i])
        bf = Fraction(float(bound[i]))
        assert bf >= exact and bf >= computed, i
        # not vacuous: within 1e-3 relative of the exact value where it is not 0
        if exact > 0:
            assert bf <= exact * Fraction(1001, 1000) or float(bound[i]) < 1e-70, (i, float(bf), float(exact))


_BITS = """
import hashlib, numpy as np
from dpfast import _clip
rng = np.random.default_rng(3)
x = (1.0 + 2.0 ** -12 + rng.integers(0, 2, (7, 3, 9, 10)) * 2.0 ** -20).astype(np.float32)
x[1] *= np.float32(2.0 ** 60); x[2] = 1e-45; x[3, 0, 0, 0] = np.nan; x[4, 1, 2, 3] = np.inf
g = (np.where(np.arange(4 * 8) % 2 == 0, 1.0, -1.0) * (1 + 2.0 ** -11 * np.arange(4 * 8))).reshape(1, 1, 4, 8)
g = (g * rng.integers(1, 4, (7, 13, 1, 1))).astype(np.float32)
g[5] = 3e38
out = []
for nt in (1, 2, 3):
    w = np.empty((7, 13 * 3 * 3 * 3), np.float32); sq, fa, fg = np.empty(7), np.empty(7), np.empty(7)
    _clip.conv_weight_grads(x, g, 3, 3, 2, 1, 1, 1, w, sq, fa, fg, nt)
    out.append(hashlib.sha256(b"".join(a.tobytes() for a in (w, sq, fa, fg))).hexdigest())
print(_clip.conv_vectorised(), len(set(out)), out[0])
"""


@pytest.mark.slow  # (two subprocesses: ~2 s under load)
def test_adversarial_bits_for_thread_counts_and_builds():
    res = {}
    for flag in ("0", "1"):
        env = dict(os.environ, DPFAST_CONV_NO_AVX2=flag)
        r = subprocess.run([sys.executable, "-c", _BITS], env=env, capture_output=True, text=True, check=True)
        res[flag] = r.stdout.split()
    assert res["1"][0] == "False"
    assert res["0"][1] == res["1"][1] == "1"  # one digest for 1, 2, 3 threads
    assert res["0"][2] == res["1"][2]  # generic == AVX2+FMA


# ----------------------------------------------------------------------------- per-layer clipping (79f3a68)
CE = nn.functional.cross_entropy


def _private(clipping="flat", norms=1.0, params=None, nm=0.0, reduction="sum"):
    from torch.utils.data import DataLoader, TensorDataset

    from dpfast.torch import PrivacyEngine

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).double()
    x = torch.randn(4, 6, dtype=torch.float64) * 50
    y = torch.tensor([0, 1, 2, 0])
    opt = torch.optim.SGD(model.parameters() if params is None else params(model), lr=1.0)
    m, o, _ = PrivacyEngine(rng=0).make_private(
        module=model, optimizer=opt, data_loader=DataLoader(TensorDataset(x, y), batch_size=4), noise_multiplier=nm,
        max_grad_norm=norms, clipping=clipping, loss_reduction=reduction, steps=5)
    return model, m, o, opt, x, y


@pytest.mark.parametrize("clipping, norms", [("flat", 1.0), ("per_layer", [0.1] * 4), ("per_group", [0.1])])
def test_a_parameter_appended_twice_after_make_private_is_refused_at_step(clipping, norms):
    """make_private refuses a parameter listed twice (79f3a68); appended to param_groups[0]["params"]
    afterwards (torch's add_param_group refuses it, a direct append does not), it had its clipped sum
    applied twice and the noise added twice to the same tensor: per-layer C = 0.1 moved it by 0.2
    (sensitivity 2 C against noise sqrt(2) z C; with mean reduction divided twice)."""
    model, m, o, _, x, y = _private(clipping, norms, nm=1.0)
    o.param_groups[0]["params"].append(model[2].bias)
    before = [p.detach().clone() for p in model.parameters()]
    state = o.generator.bit_generator.state
    o.zero_grad()
    CE(m(x[:1]), y[:1], reduction="sum").backward()
    with pytest.raises(RuntimeError, match="twice"):
        o.step()
    assert o.steps == 0 and o.generator.bit_generator.state == state
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))


def test_foreign_parameters_after_make_private():
    # a parameter that is not the module's, added to the wrapped optimizer (add_param_group or a
    # direct append) and fed by the data: refused (its gradient is not a hooked per-sample one);
    # one the loss does not use only gets the noise (flat), and per-layer refuses it (no norm)
    for how in ("add", "append"):
        model, m, o, opt, x, y = _private()
        extra = nn.Parameter(torch.zeros(6, dtype=torch.float64))
        if how == "add":
            opt.add_param_group({"params": [extra]})
        else:
            o.param_groups[0]["params"].append(extra)
        o.zero_grad()
        (CE(m(x), y, reduction="sum") + (extra * x).sum()).backward()
        with pytest.raises(RuntimeError, match="outside the hooked module calls"):
            o.step()
    model, m, o, opt, x, y = _private(nm=0.0)
    extra = nn.Parameter(torch.zeros(6, dtype=torch.float64))
    opt.add_param_group({"params": [extra]})
    o.zero_grad()
    CE(m(x), y, reduction="sum").backward()
    o.step()
    assert torch.equal(extra.detach(), torch.zeros(6, dtype=torch.float64))


def test_per_group_norms_stay_with_the_parameters_moved_between_groups():
    # a parameter moved from group 1 (C = 10) to group 0 (C = 0.1) by editing param_groups after
    # make_private keeps its unit: group 0's update (lr 1, no noise) stays <= 0.1
    model, m, o, _, x, y = _private("per_group", [0.1, 10.0], nm=0.0, params=lambda mod: [
        {"params": list(mod[0].parameters())}, {"params": list(mod[2].parameters())}])
    p = o.param_groups[1]["params"].pop()
    o.param_groups[0]["params"].append(p)
    before = [q.detach().clone() for q in model.parameters()]
    o.zero_grad()
    CE(m(x[:1]), y[:1], reduction="sum").backward()
    o.step()
    d = [float(((a.detach() - b) ** 2).sum()) for a, b in zip(model.parameters(), before)]
    assert (d[0] + d[1]) ** 0.5 <= 0.1 * (1 + 1e-12)
    assert (d[2] + d[3]) ** 0.5 > 0.1  # group 1 (C = 10): not clipped to group 0's norm


def test_make_private_again_on_a_hooked_module():
    """Resuming with another optimizer and engine on the same model: the first run's hooks were
    still on it, and the two engines' hooks together captured nothing, so every step of the new run
    was silently noise only (no update at all with noise 0).  Now refused before the charge; after
    the first wrapped module's remove_hooks() the new run trains."""
    from torch.utils.data import DataLoader, TensorDataset

    from dpfast import PrivacyBudget
    from dpfast.torch import PrivacyEngine

    model, m, o, opt, x, y = _private()
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    b = PrivacyBudget(10.0, 1e-5)
    kw = dict(data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0, loss_reduction="sum", steps=5, budget=b)
    with pytest.raises(ValueError, match="remove_hooks"):
        PrivacyEngine(rng=1).make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0), **kw)
    assert b.ledger == ()
    m.remove_hooks()
    kw.update(noise_multiplier=0.0, budget=None)
    m2, o2, _ = PrivacyEngine(rng=1).make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
                                                  **kw)
    before = [p.detach().clone() for p in model.parameters()]
    o2.zero_grad()
    CE(m2(x[:1]), y[:1], reduction="sum").backward()
    o2.step()
    moved = sum(float(((p.detach() - q) ** 2).sum()) for p, q in zip(model.parameters(), before)) ** 0.5
    assert 0.0 < moved <= 1.0 + 1e-12


@pytest.mark.parametrize("native", [True, False])
def test_a_convolution_called_twice_per_forward(monkeypatch, native):
    # one Conv2d applied twice in a forward: two captured calls per sample, the kept per-sample
    # gradients of the first replaced by the second's (one entry per module): still the naive loop's
    # clipped sum, and no sample's clipped contribution above C
    if native and not fl._NATIVE_CONV:
        pytest.skip("the native kernel's AVX2+FMA build does not run here")
    import _engine_models as EM

    from dpfast.torch._grad_sample import GradSampleModule

    monkeypatch.setattr(fl, "_NATIVE_CONV", native)

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(2, 2, 3, padding=1)
            self.fc = nn.Linear(72, 3)

        def forward(self, x):
            return self.fc(torch.relu(self.c(torch.relu(self.c(x)))).flatten(1))

    torch.manual_seed(0)
    model = Twice()
    x, y = torch.randn(5, 2, 6, 6), torch.tensor([0, 1, 2, 0, 1])
    ref, _ = EM.naive_clipped_sum(model, x, y, 0.5)
    gsm = GradSampleModule(model, loss_reduction="sum")
    try:
        CE(gsm(x), y, reduction="sum").backward()
        sums, b = gsm.clipped_sum(0.5)
        assert b == 5
        for p, r in ref.items():
            torch.testing.assert_close(sums[p].double(), r, rtol=0, atol=5e-6)
        for i in range(5):
            gsm.clear()
            CE(gsm(x[i:i + 1]), y[i:i + 1], reduction="sum").backward()
            s, _ = gsm.clipped_sum(0.5)
            assert float(torch.sqrt(sum((v.double() ** 2).sum() for v in s.values()))) <= 0.5
    finally:
        gsm.remove_hooks()


@pytest.mark.parametrize("seed", [1, 2, 4, 10])
def test_bound_covers_exact_and_computed_under_heavy_cancellation(seed):
    """Long rows (T ~ 150) whose float32 FMA accumulation is far from exact: x = 1 + 2^-e + 2^-23
    bits, g = two halves of +-2^20, or alternating 2^30 / 2^-30, or +-(1 + t 2^-12): the computed
    squared norm reached 5x the exact one (seed 4: 27768 vs 5477); the bound is above both."""
    if not fl._NATIVE_CONV:
        pytest.skip("the native kernel's AVX2+FMA build does not run here")
    rng = np.random.default_rng(seed)
    b, c, co, k, T = 2, 2, 9, 3, 150 + seed
    L = T + k - 1
    x = (1.0 + 2.0 ** -rng.integers(8, 23) + rng.integers(0, 2, (b, c, 1, L)) * 2.0 ** -23).astype(np.float32)
    t = np.arange(T)
    if seed % 3 == 0:
        g = ((-1.0) ** t * (1 + t * 2.0 ** -12))[None, None, None, :] * rng.integers(1, 5, (b, co, 1, 1))[..., None]
    elif seed % 3 == 1:
        g = np.where(t < T // 2, 1.0, -1.0)[None, None, None, :] * (2.0 ** 20 + rng.integers(0, 3, (b, co, 1, T)))
    else:
        g = ((-1.0) ** t * np.where(t % 4 < 2, 2.0 ** 30, 2.0 ** -30))[None, None, None, :] * np.ones((b, co, 1, 1))
    g = g.reshape(b, co, 1, T).astype(np.float32)
    m = nn.Conv2d(c, co, (1, k), bias=False)
    bound, w, _, _ = fl._conv_native(m, torch.from_numpy(x), (1, k), (1, 1), (1, 1),
                                     torch.from_numpy(g).reshape(b, co, -1), False)
    for i in range(b):
        xf = [[Fraction(float(v)) for v in x[i, ci, 0]] for ci in range(c)]
        gf = [[Fraction(float(v)) for v in g[i, o, 0]] for o in range(co)]
        exact = Fraction(0)
        for o in range(co):
            for ci in range(c):
                for j in range(k):
                    e = sum(gf[o][s] * xf[ci][s + j] for s in range(T))
                    exact += e * e
        computed = sum(Fraction(float(v)) ** 2 for v in w[i])
        bf = Fraction(float(bound[i]))
        assert bf >= exact and bf >= computed, i
