"""Red team, stop 31 (fresh eyes on the convolution "kept" path of dpfast.torch).

DP-SGD's analysis needs: adding one example to the batch moves the clipped sum by at most C.  With
per-example clipping factors ``min(1, C / bound_i)``, that holds only if every OTHER example's bound
``bound_i`` (and so its factor) does not depend on the new example.  The convolution's certified norm
bound is computed by one of several methods (materialised-and-kept float32, Gram float32, float64
fall-backs), each with its own error term, and the choice between them is made per BATCH from data:

* the Poisson batch size ``b`` (private: the number of sampled examples) picks "kept" when
  ``b groups d_in d_out <= 2^23`` and the Gram form beyond;
* one example whose float32 products are not finite (a NaN, entries ~1e30) sends the WHOLE batch to
  float64.

Both were holes, fixed in stop 31 (the norm method from public shapes, float64 retries per example).
"""
import math

import pytest

pytest.importorskip("torch.nn")  # (tests/torch is a namespace package named torch)
import torch  # noqa: E402
from torch import nn  # noqa: E402

from dpfast.torch import _fast_layers as FL  # noqa: E402


def test_conv_norm_bound_of_an_example_does_not_depend_on_the_batch_size():
    """Was a HOLE (fixed in stop 31).  ``_conv_method`` keeps (materialises) the per-sample weight gradients iff
    ``b * groups * d_in * d_out <= _KEEP_ELEMENTS`` (2^23), ``b`` the batch's size; beyond it the
    Gram bound is used, whose error term is looser.  So one more example in the batch loosens every
    other example's bound and shrinks its clipped contribution.  Reproduction: Conv2d(64, 64, 4,
    padding=1, bias=False), inputs 8x8 (P = 2^16, kept iff b <= 128): the bounds of the same 128
    examples are 0.31-0.32 % larger in a batch of 129; through ``GradSampleModule.clipped_sum``
    (C = 1e-3, 128 equal examples, all clipped) adding one example whose own gradient is exactly
    zero (input 0) moves the clipped sum by 0.177 C (and an aligned record with its full C:
    1.18 C, beyond the sensitivity C the accountant charges; up to 0.0032 b C in the worst case).
    Here: Conv2d(32, 64, 4) on 4x4 (kept iff b <= 256): 0.03 % (ratio 1.000294-1.000311).
    Fix: make the choice of the NORM method a function of public per-example shapes only (e.g.
    always the materialised bound, computed in chunks of a fixed public number of examples, and
    the keep decision only a cache: when the batch does not fit, recompute the rows for the clipped
    sum, or take the clipped sum by the weight-gradient convolution: the bounds are the same)."""
    torch.manual_seed(0)
    m = nn.Conv2d(32, 64, 4, padding=1, bias=False)  # groups d_in d_out = 2^15: kept iff b <= 256
    x, g = torch.randn(257, 32, 4, 4), torch.randn(257, 64, 3, 3)
    alone = FL.conv_norm_sq(m, (x[:256],), g[:256])
    FL._KEPT.pop(m, None)
    with_one_more = FL.conv_norm_sq(m, (x,), g)[:256]
    FL._KEPT.pop(m, None)
    assert torch.equal(alone, with_one_more), float((with_one_more / alone).max())


@pytest.mark.parametrize("bad", [float("nan"), 1e30])
def test_conv_norm_bound_of_an_example_does_not_depend_on_another_examples_values(bad):
    """Was a HOLE (fixed in stop 31).  ``conv_norm_sq`` computes the batch in float32 and, if ANY example's result is not
    finite (a NaN input, or float32 products beyond ~3e38), redoes the whole batch in float64,
    whose bound is tighter: the other examples' bounds and clipping factors change with one
    example's values.  Reproduction: Conv1d(3, 4, 3) on length 12, batch 8 + one example of NaN
    (or 1e30): the 8 bounds change by up to 4.4e-6 relative (5.4e-6 at b = 128; Conv2d(64, 64, 4)
    on 8x8: 4.2e-5, i.e. 0.5 % of C over 128 clipped examples).  Fix: decide per example (a
    non-finite example's factor is 0 already: compute its row, or redo only it, in float64; the
    others keep their float32 bound), so each bound is a function of its own example only."""
    torch.manual_seed(0)
    m = nn.Conv1d(3, 4, 3)
    x, g = torch.randn(9, 3, 12), torch.randn(9, 4, 10)
    ref = FL.conv_norm_sq(m, (x[:8],), g[:8])
    FL._KEPT.pop(m, None)
    x[8], g[8] = bad, bad if math.isfinite(bad) else 1.0
    got = FL.conv_norm_sq(m, (x,), g)[:8]
    FL._KEPT.pop(m, None)
    assert torch.equal(ref, got), float(((got - ref) / ref).abs().max())


@pytest.mark.parametrize("layer", ["linear_t1", "linear_seq", "layernorm", "embedding"])
def test_other_fast_layers_bounds_do_not_depend_on_the_batch(layer):
    """No hole: the Linear (T = 1 and sequences), LayerNorm and Embedding bounds of an example are the same bits
    with another example appended (normal, 1e30, NaN)."""
    torch.manual_seed(0)
    m, x, fn = {"linear_t1": (nn.Linear(20, 10), torch.randn(9, 20), FL.linear_norm_sq),
                "linear_seq": (nn.Linear(20, 10), torch.randn(9, 7, 20), FL.linear_norm_sq),
                "layernorm": (nn.LayerNorm(8), torch.randn(9, 5, 8), FL.layernorm_norm_sq),
                "embedding": (nn.Embedding(10, 6), torch.randint(0, 10, (9, 12)), FL.embedding_norm_sq)}[layer]
    with torch.no_grad():
        g = torch.randn_like(m(x))
    ref = fn(m, (x[:8],), g[:8])
    for bad in (None, 1e30, float("nan")):
        x2, g2 = x.clone(), g.clone()
        if bad is not None:
            if x2.is_floating_point():
                x2[8] = bad
            g2[8] = bad if math.isfinite(bad) else 1.0
        assert torch.equal(fn(m, (x2,), g2)[:8], ref)


@pytest.mark.parametrize("method", [None, "gram", "materialise"])
@pytest.mark.parametrize("bad", [None, float("nan"), 1e30])
def test_conv_bound_is_a_function_of_its_own_example(method, bad):
    """Each example's bound is the same bits alone (b = 1), among a few, and in a batch beyond the
    keep limit (Conv2d(32, 64, 4) on 4x4: 2^15 entries per sample, kept iff b <= 256), with a
    non-finite or overflowing example beside it, for the automatic, Gram and materialised forms."""
    torch.manual_seed(1)
    m = nn.Conv2d(32, 64, 4, padding=1)
    x, g = torch.randn(300, 32, 4, 4), torch.randn(300, 64, 3, 3)
    if bad is not None:
        x[150], g[150] = bad, (bad if math.isfinite(bad) else 1.0)
    alone = torch.cat([FL.conv_norm_sq(m, (x[i:i + 1],), g[i:i + 1], method=method) for i in (0, 1, 299)])
    FL._KEPT.pop(m, None)
    few = FL.conv_norm_sq(m, (x[:2],), g[:2], method=method)
    FL._KEPT.pop(m, None)
    many = FL.conv_norm_sq(m, (x,), g, method=method)
    FL._KEPT.pop(m, None)
    assert torch.equal(few, alone[:2])
    assert torch.equal(many[[0, 1, 299]], alone)
    if bad is not None:  # the non-finite or overflowing example: +inf (factor 0), alone or not
        assert float(many[150]) == math.inf


def test_conv_overflowing_example_is_left_out_and_the_rest_clipped_exactly():
    """A finite example whose float32 per-sample gradient overflows gets factor 0 (left out: a
    float64 bound would give it a subnormal float32 factor, and its contribution came out at
    1.00006 C); the clipped sum is the naive float64 per-sample loop's over the other examples."""
    torch.manual_seed(2)
    m = nn.Conv1d(3, 4, 3)
    x, g = torch.randn(5, 3, 12), torch.randn(5, 4, 10)
    x[2] *= 1e20
    g[2] *= 1e20
    bound = FL.conv_norm_sq(m, (x,), g)
    assert float(bound[2]) == math.inf and bool(torch.isfinite(bound[[0, 1, 3, 4]]).all())
    factors = torch.clamp(1.0 / torch.sqrt(bound), max=1.0)
    got = FL.conv_clipped_sum(m, (x,), g, factors)
    want_w = torch.zeros_like(m.weight, dtype=torch.float64)
    want_b = torch.zeros(4, dtype=torch.float64)
    for i in (0, 1, 3, 4):
        xi, gi = x[i:i + 1].double(), g[i:i + 1].double()
        want_w += float(factors[i]) * torch.nn.grad.conv1d_weight(xi, m.weight.shape, gi)
        want_b += float(factors[i]) * gi.sum(dim=(0, 2))
    assert torch.allclose(got["weight"].double(), want_w, rtol=1e-5, atol=1e-6)
    assert torch.allclose(got["bias"].double(), want_b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("geom", [dict(c=(1, 16, 8), kw=dict(stride=2, padding=3), hw=(28, 28)),
                                  dict(c=(6, 6, 3), kw=dict(groups=3), hw=(9, 9)),
                                  dict(c=(3, 8, 5), kw=dict(dilation=2), hw=(40,))])
@pytest.mark.parametrize("method", [None, "gram", "materialise"])
def test_conv_bounds_alone_equal_bounds_in_a_batch(geom, method):
    """Every example's bound the same bits alone and in a batch of 24 (the long per-item sums were
    split between threads, grouped products read transposed views: both example-dependent)."""
    torch.manual_seed(3)
    cls = nn.Conv2d if len(geom["hw"]) == 2 else nn.Conv1d
    m = cls(*geom["c"], **geom["kw"])
    x = torch.randn(24, geom["c"][0], *geom["hw"])
    with torch.no_grad():
        g = torch.randn_like(m(x))
    full = FL.conv_norm_sq(m, (x,), g, method=method)
    FL._KEPT.pop(m, None)
    alone = torch.cat([FL.conv_norm_sq(m, (x[i:i + 1],), g[i:i + 1], method=method) for i in range(24)])
    FL._KEPT.pop(m, None)
    assert torch.equal(full, alone)


@pytest.mark.parametrize("length", [10, 4096, 4097, 38416, 200_000])
def test_row_sum_is_batch_and_thread_invariant(length):
    torch.manual_seed(4)
    x = torch.randn(12, length, dtype=torch.float64)
    threads = torch.get_num_threads()
    try:
        ref = FL._row_sum(x)
        for t in (1, 2, 3):
            torch.set_num_threads(t)
            assert torch.equal(FL._row_sum(x), ref)
            assert torch.equal(torch.cat([FL._row_sum(x[i:i + 1]) for i in range(12)]), ref)
    finally:
        torch.set_num_threads(threads)
    assert torch.allclose(ref, x.sum(dim=1), rtol=1e-12, atol=1e-9)
