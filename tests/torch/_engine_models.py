"""Tiny models and the naive per-example reference of the dpfast.torch engine tests."""
from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

# tiny models: torch's intra-op threads only contend (CI has 2 cores shared with other jobs)
torch.set_num_threads(1)


class RawParam(nn.Module):
    """A custom leaf layer with raw nn.Parameters (no registered grad sampler anywhere)."""

    def __init__(self, d: int, k: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, k) * 0.3)
        self.s = nn.Parameter(torch.ones(k))

    def forward(self, x):
        return torch.tanh(x @ self.w) * self.s


class Holder(nn.Module):
    """A non-leaf module holding a parameter of its own next to a child layer."""

    def __init__(self, d: int, k: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d, k)
        self.scale = nn.Parameter(torch.full((k,), 0.7))

    def forward(self, x):
        return self.lin(x) * self.scale


class Tied(nn.Module):
    """Parameter sharing: one Linear applied twice, and an embedding tied to the output layer."""

    def __init__(self, v: int = 7, d: int = 4) -> None:
        super().__init__()
        self.emb = nn.Embedding(v, d)
        self.mid = nn.Linear(d, d)
        self.out = nn.Linear(d, v, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, idx):
        h = self.emb(idx).mean(1)
        h = torch.tanh(self.mid(torch.tanh(self.mid(h))))
        return self.out(h)


def mlp(d=6, h=8, k=3):
    return nn.Sequential(nn.Linear(d, h), nn.ReLU(inplace=True), nn.Linear(h, k))


def cnn(k=3):
    return nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Conv2d(3, 4, 3, stride=2), nn.GroupNorm(2, 4), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 3 * 3, 8), nn.ReLU(), nn.Linear(8, k))


def text(v=11, d=5, k=3):
    return nn.Sequential(nn.Embedding(v, d), nn.LayerNorm(d), nn.Flatten(), nn.Linear(4 * d, k))


def custom(d=6, k=3):
    return nn.Sequential(RawParam(d, 5), Holder(5, 4), nn.Linear(4, k))


def data(kind: str, B: int, seed: int = 0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    if kind in ("text", "tied"):
        v = 11 if kind == "text" else 7
        return torch.randint(0, v, (B, 4), generator=g), torch.randint(0, 3 if kind == "text" else 7, (B,), generator=g)
    if kind == "cnn":
        return torch.randn(B, 1, 9, 9, generator=g, dtype=dtype) * 2, torch.randint(0, 3, (B,), generator=g)
    return torch.randn(B, 6, generator=g, dtype=dtype) * 2, torch.randint(0, 3, (B,), generator=g)


MODELS = {"mlp": mlp, "cnn": cnn, "text": text, "custom": custom, "tied": Tied}


def make(kind: str, seed: int = 0, dtype=torch.float64):
    torch.manual_seed(seed)
    return MODELS[kind]().to(dtype)


def naive_clipped_sum(model, x, y, C, loss_fn=nn.functional.cross_entropy):
    """sum_i g_i min(1, C / ||g_i||) by one backward per example (float64 norms)."""
    params = [p for p in model.parameters() if p.requires_grad]
    total = [torch.zeros_like(p, dtype=torch.float64) for p in params]
    norms = []
    for i in range(x.shape[0]):
        model.zero_grad()
        loss_fn(model(x[i:i + 1]), y[i:i + 1], reduction="sum").backward()
        gs = [p.grad.detach().to(torch.float64).clone() if p.grad is not None else torch.zeros_like(p, dtype=torch.float64)
              for p in params]
        n = float(torch.sqrt(sum((g ** 2).sum() for g in gs)))
        norms.append(n)
        f = min(1.0, C / n) if n > 0 else 1.0
        for t, g in zip(total, gs):
            t += f * g
    model.zero_grad()
    return {p: t for p, t in zip(params, total)}, np.array(norms)


def adversarial_conv1d_inputs(case, gen, b, c_in, c_out, k, t_out):
    """float32 (x, g) of a Conv1d (stride 1, no padding) built against the certified norm bounds.
    cancel: x constant 1 + 2^-12 along positions and g alternating +-(1 + 2^-11 j), so a per-sample
    gradient is a small difference of large float32 sums; underflow: entries ~1e-25 and ~1e-22, whose
    products (~1e-47) are below float32's smallest subnormal (1.4e-45) and so vanish in float32;
    mixed_scale: some positions 2^20 (inputs) and 2^15 (gradients) times larger than the others."""
    length = t_out + k - 1
    if case == "cancel":
        x = torch.full((b, c_in, length), 1.0 + 2.0 ** -12)
        x += torch.randint(0, 2, x.shape, generator=gen) * 2.0 ** -20
        sign = torch.tensor([(-1.0) ** t for t in range(t_out)])
        g = sign * (1.0 + 2.0 ** -11 * torch.arange(t_out)) * torch.randint(1, 3, (b, c_out, 1), generator=gen)
    elif case == "underflow":
        x = torch.randn(b, c_in, length, generator=gen) * 1e-25
        g = torch.randn(b, c_out, t_out, generator=gen) * 1e-22
    elif case == "mixed_scale":
        x = torch.randn(b, c_in, length, generator=gen)
        x[:, :, ::3] *= 2.0 ** 20
        g = torch.randn(b, c_out, t_out, generator=gen)
        g[:, :, ::5] *= 2.0 ** 15
    else:
        raise ValueError(case)
    return x.float(), g.float()


# the per-sample convolution references (test_torch_conv_kept, test_torch_conv_native)
RTOL32 = 2e-3


def naive_conv_grads(m, x, r):
    """float64 per-sample gradients {name: (B, *shape)} of sum_i <m(x_i), r_i>."""
    m64 = copy.deepcopy(m).double()
    names = [n for n, p in m64.named_parameters(recurse=False) if p.requires_grad]
    out = {n: [] for n in names}
    for i in range(x.shape[0]):
        m64.zero_grad()
        (m64(x[i:i + 1].double()) * r[i:i + 1].double()).sum().backward()
        for n in names:
            out[n].append(getattr(m64, n).grad.detach().clone())
    return {n: torch.stack(v) for n, v in out.items()}


def grad_like(m, x, seed=0):
    with torch.no_grad():
        y = m(x)
    return torch.randn(y.shape, generator=torch.Generator().manual_seed(seed))


def check_against_naive(m, x, g, f, ns, cs, rtol=RTOL32):
    ref = naive_conv_grads(m, x, g)
    b = x.shape[0]
    ref_sq = sum((v.reshape(b, -1) ** 2).sum(1) for v in ref.values())
    assert torch.all(ns >= ref_sq * (1 - 1e-12)) and torch.all(ns <= ref_sq * (1 + rtol))
    assert set(cs) == set(ref)
    for n, v in cs.items():
        p = getattr(m, n)
        assert v.dtype == p.dtype and v.shape == p.shape
        want = torch.einsum("b,b...->...", f.double(), ref[n])
        scale = float(ref[n].abs().sum(0).max())
        torch.testing.assert_close(v.double(), want, rtol=1e-5, atol=1e-5 * scale + 1e-30)
