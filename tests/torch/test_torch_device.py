"""dpfast.torch off the CPU (issue 25: "CPU and CUDA"), without a GPU.

No GPU is lent to the test machines, so the CUDA path is checked through its branches: the
noise of a parameter that is not a CPU tensor is drawn on the CPU by the same sampler, from the
same stream, and copied (checked on torch's data-less ``meta`` device: the generator advances
exactly as for the CPU tensor of the same shape, so the run's noise stream -- and a resumed run's
-- does not depend on the device); modules on a device other than the CPU or CUDA are refused
before anything is charged (MPS has no float64 for the per-sample norms; meta has no data).
"""
import numpy as np
import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from dpfast import PrivacyBudget  # noqa: E402
from dpfast.torch import DPOptimizer, PrivacyEngine  # noqa: E402


def _noisy_step(device, dtype, seed=0):
    """One DP-SGD step of an empty Poisson batch (the gradient is the noise alone)."""
    w = nn.Parameter(torch.zeros(3, 5, device=device, dtype=dtype))
    b = nn.Parameter(torch.zeros(7, device=device, dtype=dtype))
    gen = np.random.default_rng(seed)
    opt = DPOptimizer(torch.optim.SGD([w, b], lr=0.1), noise_multiplier=1.0, max_grad_norm=2.0,
                      expected_batch_size=4.0, generator=gen)
    opt.zero_grad()
    opt.step()
    return (w, b), gen.bit_generator.state


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_noise_of_a_non_cpu_tensor_is_drawn_on_the_cpu_from_the_same_stream(dtype):
    (w_cpu, b_cpu), st_cpu = _noisy_step("cpu", dtype)
    (w_dev, b_dev), st_dev = _noisy_step("meta", dtype)
    assert st_dev == st_cpu  # the same variates consumed: the device does not change the stream
    for p_dev, p_cpu in ((w_dev, w_cpu), (b_dev, b_cpu)):
        assert p_dev.grad.device.type == "meta"
        assert p_dev.grad.shape == p_cpu.shape and p_dev.grad.dtype == dtype
    assert not torch.equal(w_cpu.grad, torch.zeros_like(w_cpu))  # (the CPU step did add noise)


def test_modules_on_other_devices_are_refused_before_the_charge():
    model = nn.Linear(2, 2, device="meta")
    loader = DataLoader(TensorDataset(torch.zeros(8, 2), torch.zeros(8, dtype=torch.long)), batch_size=4)
    b = PrivacyBudget(10.0, 1e-5)
    with pytest.raises(ValueError, match="cpu and cuda.*meta"):
        PrivacyEngine(rng=0).make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                          data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0, epochs=1,
                                          budget=b)
    assert b.ledger == ()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (the CPU-only CI and test machines)")
def test_cuda_training_step_matches_the_cpu_noise():  # pragma: no cover - needs a GPU
    # the same seed on CUDA and on the CPU: the noise is the CPU sampler's, copied; the clipped sums
    # come from CUDA kernels (another reduction order), so equal to float64 rounding, not bit for bit
    out = {}
    for dev in ("cpu", "cuda"):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double().to(dev)
        x, y = torch.randn(32, 6, dtype=torch.float64), torch.randint(0, 3, (32,))
        eng = PrivacyEngine(rng=0)
        m, o, dl = eng.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                    data_loader=DataLoader(TensorDataset(x, y), batch_size=8), noise_multiplier=1.0,
                                    max_grad_norm=0.5, epochs=1)
        for xb, yb in dl:
            o.zero_grad()
            nn.functional.cross_entropy(m(xb.to(dev)), yb.to(dev)).backward()
            o.step()
        out[dev] = [p.detach().cpu() for p in model.parameters()]
    for a, b in zip(out["cpu"], out["cuda"]):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
