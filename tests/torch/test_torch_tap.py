"""The tap of dpfast.torch (fast layers run on detached parameters): the clipped sums are
bit-identical to the plain hooks', and autograd forms no ordinary gradient for those layers."""
import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import _engine_models as EM  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from dpfast.torch import GradSampleModule, PrivacyEngine  # noqa: E402


class SampleConvNet(nn.Module):
    """The benchmark CNN (Opacus's MNIST example), on 28 x 28 inputs."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 8, 2, padding=3)
        self.conv2 = nn.Conv2d(16, 32, 4, 2)
        self.fc1 = nn.Linear(32 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.tanh(self.conv1(x)), 2, 1)
        x = nn.functional.max_pool2d(torch.tanh(self.conv2(x)), 2, 1)
        return self.fc2(torch.tanh(self.fc1(x.flatten(1))))


class Text(nn.Module):
    """The benchmark text classifier: Embedding(10,000, 64), mean-pooled, Linear(64, 4)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10_000, 64)
        self.fc = nn.Linear(64, 4)

    def forward(self, x):
        return self.fc(self.emb(x).mean(1))


def _bench(kind, B, g):
    if kind == "bench_mlp":
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
        x = torch.randn(B, 784, generator=g)
    elif kind == "bench_cnn":
        model = SampleConvNet()
        x = torch.randn(B, 1, 28, 28, generator=g)
    else:
        model = Text()
        x = torch.randint(0, 10_000, (B, 64), generator=g)
    return model, x, torch.randint(0, 4, (B,), generator=g)


def _frozen():
    model = EM.make("mlp", dtype=torch.float32)
    model[0].bias.requires_grad_(False)  # a fast layer with a frozen parameter
    return model


def _case(kind):
    g = torch.Generator().manual_seed(3)
    if kind.startswith("bench_"):
        torch.manual_seed(0)
        return _bench(kind, 6, g)
    if kind == "frozen":
        model = _frozen()
        x, y = EM.data("mlp", 6, dtype=torch.float32)
        return model, x, y
    model = EM.make(kind, dtype=torch.float32)
    x, y = EM.data(kind, 6, dtype=torch.float32)
    return model, x, y


def _sums(model, x, y, tap, reduction="mean"):
    gsm = GradSampleModule(model, loss_reduction=reduction, tap=tap)
    model.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(gsm(x), y, reduction=reduction).backward()
    grads = {p: (None if p.grad is None else p.grad.clone()) for p in model.parameters()}
    sums, B = gsm.clipped_sum(0.3)
    gsm.remove_hooks()
    model.zero_grad(set_to_none=True)
    return sums, grads


FAST = (nn.Linear, nn.Conv2d, nn.Embedding, nn.LayerNorm)


@pytest.mark.parametrize("kind", ["bench_mlp", "bench_cnn", "bench_text", "mlp", "cnn", "text", "custom", "tied",
                                  "frozen"])
def test_tap_gives_bit_identical_clipped_sums(kind):
    # mlp has ReLU(inplace=True) right after a first layer (the anchored tap); custom mixes fast and
    # generic layers (a Linear inside a module with a parameter of its own); tied shares the
    # embedding with the output layer and calls one Linear twice; frozen freezes a fast layer's bias
    model, x, y = _case(kind)
    ref, plain_grads = _sums(model, x, y, tap=False)
    got, tap_grads = _sums(model, x, y, tap=True)
    assert set(got) == set(ref) and ref
    for p in ref:
        assert torch.equal(got[p], ref[p]), kind
    owners = {}
    for m in model.modules():
        for p in m.parameters(recurse=False):
            owners[id(p)] = owners.get(id(p), 0) + 1
    shared = {k for k, v in owners.items() if v > 1}
    for m in model.modules():
        if type(m) not in FAST:
            continue
        for p in m.parameters(recurse=False):
            if not p.requires_grad:
                assert tap_grads[p] is None and plain_grads[p] is None
            elif id(p) in shared:
                assert tap_grads[p] is not None  # shared parameters keep the plain hooks
            else:
                # the ordinary (discarded) gradient of a tapped layer is never formed
                assert tap_grads[p] is None and plain_grads[p] is not None


def test_tap_restores_the_parameters_also_when_the_forward_raises():
    model = EM.make("mlp", dtype=torch.float32)
    params = [p for p in model.parameters()]
    gsm = GradSampleModule(model)
    with pytest.raises(RuntimeError):
        gsm(torch.randn(3, 5))  # wrong width: the first Linear raises inside its forward
    assert all(a is b for a, b in zip(model.parameters(), params))
    assert all(isinstance(p, nn.Parameter) for p in model.parameters())
    out = gsm(torch.randn(3, 6))  # and the next forward works
    assert out.requires_grad
    with torch.no_grad():  # evaluation: no swap, no capture
        assert not gsm(torch.randn(2, 6)).requires_grad
    assert all(a is b for a, b in zip(model.parameters(), params))


def test_engine_steps_with_the_tap_equal_the_plain_hooks():
    # two DP-SGD steps through the engine, tap on (default) and off: the same parameters, bit for bit
    def run(tap):
        torch.manual_seed(0)
        model = EM.mlp().float()
        x, y = EM.data("mlp", 64, dtype=torch.float32)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
        pe = PrivacyEngine(rng=7)
        model, opt, loader = pe.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                             data_loader=loader, noise_multiplier=1.0, max_grad_norm=0.5)
        if not tap:
            model.remove_hooks()
            model.__init__(model._module, loss_reduction="mean", tap=False)
        for i, (xb, yb) in enumerate(loader):
            if i == 2:
                break
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
        return [p.detach().clone() for p in model.parameters()]

    for a, b in zip(run(True), run(False)):
        assert torch.equal(a, b)
