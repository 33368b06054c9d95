"""Red team 36 (no hole found): the CNN's clipped sum through the native convolution kernel on
torch's OpenMP pool.  A batch of B copies of one sample, its input scaled from 1e-30 to 1e15:
the clipped sum's exact norm (the float32 entries' squares summed as Fractions) is at most B C,
and the sums are the same bits at one and two torch threads, for B = 1 and an odd B = 3."""
import math
from fractions import Fraction

import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import _engine_models as EM  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from dpfast.torch import PrivacyEngine  # noqa: E402

C = 0.7


def _clipped_sum(B, scale):
    model = EM.make("cnn", seed=0, dtype=torch.float32)
    x, y = EM.data("cnn", 16, seed=0, dtype=torch.float32)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    m, o, _ = PrivacyEngine(rng=0).make_private(module=model, optimizer=opt,
                                                data_loader=DataLoader(TensorDataset(x, y), batch_size=8),
                                                noise_multiplier=1.0, max_grad_norm=C, epochs=1)
    xb = x[:1].repeat(B, *([1] * (x.dim() - 1))) * scale
    o.zero_grad()
    nn.CrossEntropyLoss()(m(xb), y[:1].repeat(B)).backward()
    sums, n = m.clipped_sum(C)
    assert n == B
    return [s.detach().clone() for s in sums.values()]


@pytest.mark.parametrize("scale", [1e-30, 1.0, 1e15])
@pytest.mark.parametrize("B", [1, 3])
def test_clipped_sum_within_B_C_and_the_same_bits_for_any_thread_count(B, scale):
    before = torch.get_num_threads()
    try:
        runs = []
        for nt in (1, 2):
            torch.set_num_threads(nt)
            runs.append(_clipped_sum(B, scale))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(*runs):
        assert torch.equal(a, b)
    sq = sum(Fraction(v) ** 2 for s in runs[0] for v in s.double().flatten().tolist())
    assert sq <= (B * Fraction(C)) ** 2  # B copies of a vector of norm <= C, exactly
    assert math.sqrt(float(sq)) > 0.9 * B * C  # the clip is active: the bound is the one tested
