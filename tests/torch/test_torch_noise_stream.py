"""DPOptimizer's noise: one keyed Philox fill (dpfast.random.add_normal_noise) over all the parameters of
a step, in parameter order, from the engine's generator, with the division by the expected batch size
fused; independent of the thread count."""
import numpy as np
import pytest

pytest.importorskip("torch.nn")  # (tests/torch/ is a namespace package named torch)
import torch  # noqa: E402
from torch import nn  # noqa: E402

from dpfast.random import add_normal_noise  # noqa: E402
from dpfast.torch import DPOptimizer  # noqa: E402


def _noise_step(seed, threads, monkeypatch, dtype=torch.float32):
    monkeypatch.setenv("DPFAST_NUM_THREADS", str(threads))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(300, 200), nn.ReLU(), nn.Linear(200, 3)).to(dtype)
    opt = DPOptimizer(torch.optim.SGD(model.parameters(), lr=0.0), noise_multiplier=1.3, max_grad_norm=0.5,
                      expected_batch_size=3.0, generator=np.random.default_rng(seed))
    for p in model.parameters():
        p.grad_sample = torch.zeros((3,) + tuple(p.shape), dtype=dtype)  # clipped sums of zero
    opt.step()
    return [p.grad.detach().clone() for p in model.parameters()], opt


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_noise_is_one_keyed_fill_over_the_parameters_in_order(dtype, monkeypatch):
    grads, opt = _noise_step(3, 1, monkeypatch, dtype)
    npd = np.float32 if dtype == torch.float32 else np.float64
    gen = np.random.default_rng(3)
    expected = [np.zeros(g.numel(), dtype=npd) for g in grads]
    add_normal_noise(gen, expected, 1.3 * 0.5, divisor=3.0)  # (0 + z C N(0, 1)) / (q n), rounded once
    for g, e in zip(grads, expected):
        np.testing.assert_array_equal(g.reshape(-1).numpy(), e)
    assert opt.generator.bit_generator.state == gen.bit_generator.state  # one key (two words) per step
    # 60,000 parameters: above the parallel threshold; the same values with 2 threads
    grads2, _ = _noise_step(3, 2, monkeypatch, dtype)
    for g, h in zip(grads, grads2):
        assert torch.equal(g, h)
