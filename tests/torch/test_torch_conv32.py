"""The float32 path of the convolution norms (dpfast.torch._fast_layers, "The float32 path"): a
certified upper bound of the exact squared per-sample norm, on random inputs (against a float64
reference) and on inputs built to cancel or to underflow in float32 (against exact rational
arithmetic), and chosen only where float32 products round as the analysis assumes."""
from __future__ import annotations

from fractions import Fraction

import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import _engine_models as EM  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from dpfast.torch import _fast_layers as fl  # noqa: E402


def _exact_weight_sq(x, g, k):
    """Exact squared norm of each sample's Conv1d weight gradient (stride 1, no padding, bias-free):
    w[o, c, j] = sum_t g[o, t] x[c, t + j], in rational arithmetic."""
    out = []
    for i in range(x.shape[0]):
        xs = [[Fraction(float(v)) for v in row] for row in x[i]]
        gs = [[Fraction(float(v)) for v in row] for row in g[i]]
        total = Fraction(0)
        for grow in gs:
            for xrow in xs:
                for j in range(k):
                    w = sum(grow[t] * xrow[t + j] for t in range(len(grow)))
                    total += w * w
        out.append(total)
    return out


def _conv1d(c_in, c_out, k):
    m = nn.Conv1d(c_in, c_out, k, bias=False)
    return m


@pytest.mark.parametrize("method", ["gram", "materialise"])
@pytest.mark.parametrize("case", ["cancel", "underflow", "mixed_scale"])
def test_float32_bound_is_above_the_exact_norm(method, case):
    # the adversarial inputs of _engine_models.adversarial_conv1d_inputs
    gen = torch.Generator().manual_seed(5)
    b, c_in, c_out, k, t_out = 3, 2, 3, 3, 12
    x, g = EM.adversarial_conv1d_inputs(case, gen, b, c_in, c_out, k, t_out)
    m = _conv1d(c_in, c_out, k)
    assert fl._float32_ok(x, g)
    ns = fl.conv_norm_sq(m, (x,), g, method=method)  # float32 path (automatic)
    exact = _exact_weight_sq(x, g, k)
    for i in range(b):
        assert Fraction(float(ns[i])) >= exact[i], (case, i)
    if case == "underflow":
        # the float32 products vanish, so the bound rests on the underflow terms; still tiny
        assert float(ns.max()) < 1e-80


def test_float32_bound_is_tight_on_the_benchmark_convolutions():
    # the benchmark CNN's convolutions (Opacus's MNIST example) on random data, batch 16: an upper
    # bound of the float64 reference (itself within ~1e-13 of exact), and within 2e-3 relative
    gen = torch.Generator().manual_seed(6)
    for m, shape in [(nn.Conv2d(1, 16, 8, 2, padding=3), (16, 1, 28, 28)),  # materialised (T = 196)
                     (nn.Conv2d(16, 32, 4, 2), (16, 16, 13, 13))]:  # Gram (T = 25)
        x = torch.randn(shape, generator=gen)
        with torch.no_grad():
            y = m(x)
        g = torch.randn(y.shape, generator=gen)
        n32 = fl.conv_norm_sq(m, (x,), g)
        n64 = fl.conv_norm_sq(m, (x,), g, precision="float64")
        assert not torch.equal(n32, n64)  # the float32 path ran
        rel = (n32 - n64) / n64
        assert bool((rel >= 0).all()) and bool((rel <= 2e-3).all()), rel


def test_float32_path_only_under_ieee_float32_products():
    m = nn.Conv2d(3, 4, 3)
    x = torch.randn(4, 3, 6, 6)
    g = torch.randn(4, 4, 4, 4)
    ref = fl.conv_norm_sq(m, (x,), g, precision="float64")
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")  # may run float32 products in bfloat16
        assert not fl._float32_ok(x, g)
        assert torch.equal(fl.conv_norm_sq(m, (x,), g), ref)
    finally:
        torch.set_float32_matmul_precision(old)
    assert fl._float32_ok(x, g)
    assert not fl._float32_ok(x.double(), g.double())
    # float64 inputs always take the float64 path
    m64 = nn.Conv2d(3, 4, 3).double()
    assert torch.equal(fl.conv_norm_sq(m64, (x.double(),), g.double()),
                       fl.conv_norm_sq(m64, (x.double(),), g.double(), precision="float64"))


def test_float32_overflow_leaves_that_example_out():
    # stop 31: an example whose float32 bound overflows gets +inf (factor 0), example by example;
    # the whole batch in float64 (before) changed every other example's bound, and a float64 bound
    # this large gives a subnormal float32 factor (a contribution above C)
    m = nn.Conv2d(2, 3, 3)
    x = torch.randn(3, 2, 6, 6)
    g = torch.randn(3, 3, 4, 4)
    x[1] *= 1e20  # squared sums overflow float32, not float64
    g[1] *= 1e20
    ns = fl.conv_norm_sq(m, (x,), g)
    assert float(ns[1]) == float("inf") and torch.isfinite(ns[[0, 2]]).all()
    assert torch.equal(ns[[0, 2]], fl.conv_norm_sq(m, (x[[0, 2]],), g[[0, 2]]))
    assert torch.isfinite(fl.conv_norm_sq(m, (x,), g, precision="float64")).all()  # float64 on request
    with pytest.raises(ValueError, match="precision"):
        fl.conv_norm_sq(m, (x,), g, precision="float16")


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=(3, 2), stride=(2, 1)),
                                dict(kernel_size=3, dilation=(2, 1), stride=2), dict(kernel_size=(1, 4), dilation=2)])
def test_im2col_equals_unfold(kw):
    x = torch.randn(2, 3, 11, 10)
    k = kw["kernel_size"]
    k = (k, k) if isinstance(k, int) else k
    s = kw.get("stride", 1)
    s = (s, s) if isinstance(s, int) else s
    d = kw.get("dilation", 1)
    d = (d, d) if isinstance(d, int) else d
    assert torch.equal(fl._im2col(x, k, s, d), F.unfold(x, kernel_size=k, stride=s, dilation=d))
