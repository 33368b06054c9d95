"""The convolutions' kept per-sample gradients (dpfast.torch._fast_layers: ``conv_norm_sq``
materialises the per-sample weight and bias gradients when they fit ``_KEEP_ELEMENTS`` and
``conv_clipped_sum`` sums them with the clip factors): the clipped sums against a naive float64
per-sample loop, the bound against the exact gradient AND the computed vectors that are summed
(rational arithmetic), and the branches: over the budget, stale or modified tensors, non-finite
samples, batch sizes changing between calls (the reused workspaces)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import _engine_models as EM  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from dpfast.torch import _fast_layers as fl  # noqa: E402
from dpfast.torch._grad_sample import safe_factors  # noqa: E402

RTOL32 = EM.RTOL32
_naive, _grad_like, _check_against_naive = EM.naive_conv_grads, EM.grad_like, EM.check_against_naive


@pytest.mark.parametrize("precision", [None, "float64"])
@pytest.mark.parametrize("layer,shape", [
    (lambda: nn.Conv2d(3, 5, 3, stride=2, padding=1), (6, 3, 9, 8)),
    (lambda: nn.Conv2d(1, 4, 4, 2, padding=1, bias=False), (6, 1, 10, 10)),
    (lambda: nn.Conv2d(4, 6, (3, 2), dilation=(2, 1), groups=2), (5, 4, 9, 7)),
    (lambda: nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), (4, 2, 6, 6)),
    (lambda: nn.Conv1d(3, 4, 3, stride=2, padding=2, dilation=2), (5, 3, 13)),
])
def test_kept_path_is_used_and_exact(layer, shape, precision):
    torch.manual_seed(0)
    m = layer()
    x = torch.randn(shape)
    g = _grad_like(m, x)
    f = torch.rand(shape[0], generator=torch.Generator().manual_seed(1))
    ns = fl.conv_norm_sq(m, (x,), g, precision=precision)
    kept = fl._KEPT.get(m)
    assert kept is not None and kept.w is not None and kept.w.shape[0] == shape[0]
    assert (kept.bias is not None) == (m.bias is not None)
    assert kept.w.dtype == (torch.float64 if precision else torch.float32)
    cs = fl.conv_clipped_sum(m, (x,), g, f)
    assert m not in fl._KEPT  # used once
    _check_against_naive(m, x, g, f, ns, cs, rtol=1e-6 if precision else RTOL32)


def test_over_budget_takes_the_ghost_or_chunked_form(monkeypatch):
    torch.manual_seed(1)
    monkeypatch.setattr(fl, "_KEEP_ELEMENTS", 0)
    for m, shape in [(nn.Conv2d(8, 8, 3), (4, 8, 6, 6)), (nn.Conv2d(1, 2, 2), (4, 1, 9, 9))]:  # Gram, materialised
        x = torch.randn(shape)
        g = _grad_like(m, x)
        f = torch.rand(shape[0])
        ns = fl.conv_norm_sq(m, (x,), g)
        assert m not in fl._KEPT
        _check_against_naive(m, x, g, f, ns, fl.conv_clipped_sum(m, (x,), g, f))


def test_method_rule():
    # within the budget: materialised and kept; beyond it, ghost clipping's rule
    assert fl._conv_method(None, 256, 25, 256, 32, 1) == ("materialise", True)
    assert fl._conv_method("gram", 256, 25, 256, 32, 1) == ("gram", False)
    assert fl._conv_method(None, 256, 64, 4608, 512, 1) == ("gram", False)  # 64 * 5120 < 4608 * 512
    assert fl._conv_method(None, 256, 4096, 27, 64, 1) == ("materialise", True)
    assert fl._conv_method(None, 4096, 4096, 576, 64, 1) == ("materialise", False)
    with pytest.raises(ValueError, match="method"):
        fl._conv_method("other", 2, 2, 2, 2, 1)


def test_other_tensors_or_modified_gradient_are_not_read_from_the_kept_values():
    torch.manual_seed(2)
    m = nn.Conv2d(2, 3, 3)
    x = torch.randn(4, 2, 6, 6)
    g = _grad_like(m, x)
    f = torch.rand(4)
    fl.conv_norm_sq(m, (x,), g)
    g2 = _grad_like(m, x, seed=5)
    ns2 = fl.conv_norm_sq(m, (x,), g2, method="gram")  # not kept, and drops the earlier entry
    assert m not in fl._KEPT
    _check_against_naive(m, x, g2, f, ns2, fl.conv_clipped_sum(m, (x,), g2, f))
    # a different output gradient in the clipped sum: computed from it, not from the kept values
    ns = fl.conv_norm_sq(m, (x,), g)
    _check_against_naive(m, x, g2, f, ns2, fl.conv_clipped_sum(m, (x,), g2, f))
    # the same tensor modified in place after the norms: its version changed, recomputed
    ns = fl.conv_norm_sq(m, (x,), g)
    g.mul_(2.0)
    _check_against_naive(m, x, g, f, ns * 4, fl.conv_clipped_sum(m, (x,), g, f), rtol=1e-3)


def test_batch_size_changes_between_calls():
    # the unfold and per-sample buffers are reused across calls (Poisson batches vary)
    torch.manual_seed(3)
    m = nn.Conv2d(3, 4, 3, stride=2)
    for b in (7, 5, 9, 2, 9):
        x = torch.randn(b, 3, 8, 8)
        g = _grad_like(m, x, seed=b)
        f = torch.rand(b)
        ns = fl.conv_norm_sq(m, (x,), g)
        _check_against_naive(m, x, g, f, ns, fl.conv_clipped_sum(m, (x,), g, f))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_nonfinite_sample_adds_nothing(bad):
    torch.manual_seed(4)
    m = nn.Conv2d(2, 3, 3)
    x = torch.randn(5, 2, 6, 6)
    g = _grad_like(m, x)
    x[2, 1, 3, 3] = bad
    ns = fl.conv_norm_sq(m, (x,), g)
    assert not np.isfinite(float(ns[2])) and bool(torch.isfinite(ns[[0, 1, 3, 4]]).all())
    f = torch.from_numpy(safe_factors(ns.numpy(), 1.0, [torch.float32])).float()
    assert float(f[2]) == 0.0
    cs = fl.conv_clipped_sum(m, (x,), g, f)
    assert all(bool(torch.isfinite(v).all()) for v in cs.values())
    keep = [0, 1, 3, 4]
    ref = _naive(m, x[keep], g[keep])
    for n, v in cs.items():
        want = torch.einsum("b,b...->...", f[keep].double(), ref[n])
        torch.testing.assert_close(v.double(), want, rtol=1e-5, atol=1e-5 * float(ref[n].abs().sum(0).max()))


def _exact_conv1d(x, g, k):
    """Exact (rational) per-sample weight gradients w[o, c, j] = sum_t g[o, t] x[c, t + j] and bias
    gradients sum_t g[o, t] of a Conv1d (stride 1, no padding)."""
    out = []
    for i in range(x.shape[0]):
        xs = [[Fraction(float(v)) for v in row] for row in x[i]]
        gs = [[Fraction(float(v)) for v in row] for row in g[i]]
        w = [[[sum(gr[t] * xr[t + j] for t in range(len(gr))) for j in range(k)] for xr in xs] for gr in gs]
        bias = [sum(gr) for gr in gs]
        out.append((w, bias))
    return out


@pytest.mark.parametrize("case", ["cancel", "mixed_scale"])
def test_bound_covers_the_exact_and_the_computed_gradients(case):
    # float32 kept path, weight and bias: the bound is above the exact squared norm AND above the
    # squared norm of the float32 vectors that the clipped sum adds up (both in rational arithmetic)
    gen = torch.Generator().manual_seed(7)
    b, c_in, c_out, k, t_out = 3, 2, 3, 3, 40
    x, g = EM.adversarial_conv1d_inputs(case, gen, b, c_in, c_out, k, t_out)
    m = nn.Conv1d(c_in, c_out, k)
    ns = fl.conv_norm_sq(m, (x,), g)
    kept = fl._KEPT[m]
    assert kept.w.dtype == torch.float32 and kept.bias.dtype == torch.float32
    exact = _exact_conv1d(x, g, k)
    for i in range(b):
        w, bias = exact[i]
        e = sum(v * v for plane in w for row in plane for v in row) + sum(v * v for v in bias)
        computed = sum(Fraction(float(v)) ** 2 for v in kept.w[i]) + sum(Fraction(float(v)) ** 2 for v in kept.bias[i])
        bound = Fraction(float(ns[i]))
        assert bound >= e and bound >= computed, (case, i)
    # the kept vectors are laid out (C_out, k_h, k_w, C_in), or (k_h, k_w, C_in, C_out) from the native
    # kernel: the clipped sum puts them back
    cs = fl.conv_clipped_sum(m, (x,), g, torch.ones(b))
    want_w = [[[sum(exact[i][0][o][c][j] for i in range(b)) for j in range(k)] for c in range(c_in)] for o in range(c_out)]
    got = cs["weight"].double()
    for o in range(c_out):
        for c in range(c_in):
            for j in range(k):
                assert abs(float(got[o, c, j]) - float(want_w[o][c][j])) <= 1e-4 * (1 + abs(float(want_w[o][c][j])))
