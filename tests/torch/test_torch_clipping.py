"""dpfast.torch's per-sample clipping against a naive per-example loop (issue 25)."""
import numpy as np
import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import _engine_models as EM  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from dpfast.torch import GradSampleModule, per_sample_grads, validate_module  # noqa: E402
from dpfast.torch._grad_sample import per_sample_norm_sq, safe_factors  # noqa: E402

KINDS = ["mlp", "cnn", "text", "custom", "tied"]


def _hook_sum(model, x, y, C, reduction="sum", fast=True):
    gsm = GradSampleModule(model, loss_reduction=reduction, use_fast_layers=fast)
    model.zero_grad()
    nn.functional.cross_entropy(gsm(x), y, reduction=reduction).backward()
    sums, B = gsm.clipped_sum(C)
    gsm.remove_hooks()
    return sums, B


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("C", [0.05, 1e6])
def test_clipped_sum_matches_naive_loop(kind, C):
    # C = 1e6: nothing is clipped (the plain per-sample sum); C = 0.05: every example is clipped
    model = EM.make(kind)
    x, y = EM.data(kind, 7)
    ref, norms = EM.naive_clipped_sum(model, x, y, C)
    sums, B = _hook_sum(model, x, y, C)
    assert B == 7
    assert set(sums) <= set(ref)
    for p, r in ref.items():
        got = sums.get(p, torch.zeros_like(p))
        # factors are C (1 - 8u) / ub with ub >= ||g|| (1 + ~1e-15): relative 1e-12 in float64
        torch.testing.assert_close(got.double(), r, rtol=1e-10, atol=1e-12)
    if C < 1:
        assert (norms > C).all()


@pytest.mark.parametrize("kind", ["mlp", "cnn", "text"])
def test_mean_reduction_is_rescaled_to_the_sum(kind):
    model = EM.make(kind)
    x, y = EM.data(kind, 5)
    s_sum, _ = _hook_sum(model, x, y, 0.1, "sum")
    s_mean, _ = _hook_sum(model, x, y, 0.1, "mean")
    for p in s_sum:
        torch.testing.assert_close(s_mean[p], s_sum[p], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["mlp", "cnn", "text", "custom"])
def test_fast_paths_agree_with_the_generic_path(kind):
    model = EM.make(kind)
    x, y = EM.data(kind, 6)
    a, _ = _hook_sum(model, x, y, 0.2, fast=True)
    b, _ = _hook_sum(model, x, y, 0.2, fast=False)
    assert set(a) == set(b)
    for p in a:
        torch.testing.assert_close(a[p].double(), b[p].double(), rtol=1e-9, atol=1e-12)


def test_float32_clipped_norms_stay_below_C():
    # each clipped per-sample gradient, rounded to float32, has norm <= C (computed exactly in float64)
    torch.manual_seed(3)
    model = EM.mlp().float()
    x, y = EM.data("mlp", 9, dtype=torch.float32)
    C = 1e-3
    for i in range(9):
        s, _ = _hook_sum(model, x[i:i + 1], y[i:i + 1], C)
        n = float(torch.sqrt(sum((t.double() ** 2).sum() for t in s.values())))
        assert n <= C
        assert n >= C * (1 - 1e-5)


def test_safe_factors_rule():
    f = safe_factors(np.array([0.0, 0.25, 4.0, np.inf, np.nan, 1.0]), 1.0)
    assert f[0] == 1.0 and f[1] == 1.0
    assert 0.5 * (1 - 1e-14) < f[2] < 0.5
    assert f[3] == 0.0 and f[4] == 0.0
    assert f[5] <= 1.0


def test_per_sample_norm_sq_is_a_tight_upper_bound():
    g = torch.randn(5, 3, 7, dtype=torch.float32)
    exact = (g.double() ** 2).reshape(5, -1).sum(1).numpy()
    ub = per_sample_norm_sq(g)
    assert (ub >= exact).all() and (ub <= exact * (1 + 1e-12)).all()


def test_functional_per_sample_grads_match_the_loop():
    model = EM.make("custom")
    x, y = EM.data("custom", 4)
    grads = per_sample_grads(model, lambda out, t: nn.functional.cross_entropy(out, t, reduction="sum"), x, y)
    for i in range(4):
        model.zero_grad()
        nn.functional.cross_entropy(model(x[i:i + 1]), y[i:i + 1], reduction="sum").backward()
        for n, p in model.named_parameters():
            torch.testing.assert_close(grads[n][i], p.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("bad, word", [(nn.BatchNorm1d(4), "GroupNorm"),
                                       (nn.InstanceNorm1d(4, track_running_stats=True), "track_running_stats"),
                                       (nn.LSTM(4, 4), "recurrent"),
                                       (nn.MultiheadAttention(4, 2), "batch_first")])
def test_modules_that_mix_samples_are_refused(bad, word):
    with pytest.raises(ValueError, match=word):
        validate_module(nn.Sequential(nn.Linear(4, 4), bad))


def test_two_backward_passes_without_a_step_are_refused():
    model = EM.mlp().double()
    gsm = GradSampleModule(model)
    x, y = EM.data("mlp", 4)
    nn.functional.cross_entropy(gsm(x), y).backward()
    with pytest.raises(RuntimeError, match="optimizer.step"):
        gsm(x)


@pytest.mark.slow
def test_torch_compile_module_gives_the_same_clipped_sum():
    model = EM.make("mlp")
    x, y = EM.data("mlp", 6)
    ref, _ = EM.naive_clipped_sum(model, x, y, 0.2)
    sums, B = _hook_sum(torch.compile(model), x, y, 0.2)
    assert B == 6
    for p, r in ref.items():
        torch.testing.assert_close(sums[p].double(), r, rtol=1e-10, atol=1e-12)
