"""Red team, stop 31 (second pass): per-layer and per-group clipping in dpfast.torch.

Attacks that held (numbers in the red team's report): each parameter's (and each group's) clipped
per-sample gradient is <= its C_l after float32 rounding for the MLP, the CNN (convolutions with a
bias by torch.func, GroupNorm), Embedding + LayerNorm, custom raw parameters and tied weights, at
input scales 1e-20 .. 1e15 with C_l one ulp below the sample's own norm (largest ratio 0.9999996);
a tied parameter gets one norm and one sum; the noise is z sqrt(sum C_l^2).

Holes found here:

* the norms were matched to the parameters at every step by position (``zip`` of the parameters
  that are trainable *now* with the list given to ``make_private``): freezing a parameter after
  ``make_private`` shifted every later norm onto another parameter (an MLP's output bias, given
  100, was clipped to its neighbour's 1e-3), and a parameter made trainable later (or a group added
  to the wrapped optimizer) took another's norm.  The sensitivity stayed <= sqrt(sum C_l^2) (each
  norm used at most once), but the clipping was not the one asked for.  Now each parameter keeps
  the norm it had at ``make_private``; a trainable parameter without one is refused at ``step()``.
* a parameter listed twice in the optimizer (torch only warns) had its private gradient noised
  twice and divided twice by the expected batch size (0.25 of the gradient at q n = 4), in flat
  clipping too: now refused before the charge.
"""
import warnings

import numpy as np
import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from dpfast import PrivacyBudget  # noqa: E402
from dpfast.torch import PrivacyEngine  # noqa: E402

CE = nn.functional.cross_entropy


def _setup(norms, frozen_bias=False, clipping="per_layer", params=None):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).double()
    if frozen_bias:
        model[0].bias.requires_grad_(False)
    x = torch.randn(4, 6, dtype=torch.float64) * 50
    y = torch.tensor([0, 1, 2, 0])
    opt = torch.optim.SGD(model.parameters() if params is None else params(model), lr=0.0)
    eng = PrivacyEngine(rng=0)
    m, o, _ = eng.make_private(module=model, optimizer=opt, data_loader=DataLoader(TensorDataset(x, y), batch_size=4),
                               noise_multiplier=0.0, max_grad_norm=norms, clipping=clipping, loss_reduction="sum",
                               steps=5)
    return model, m, o, opt, x, y


def _step(m, o, x, y):
    o.zero_grad()
    CE(m(x[:1]), y[:1], reduction="sum").backward()
    o.step()


def _unclipped(model, x, y):
    ref = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).double()
    ref.load_state_dict(model.state_dict())
    CE(ref(x[:1]), y[:1], reduction="sum").backward()
    return [p.grad for p in ref.parameters()]


def test_a_parameter_frozen_after_make_private_leaves_the_other_norms_in_place():
    norms = [1e-3, 1e-3, 1e-3, 100.0]  # W1, b1, W2, b2: b2's gradient (norm ~1.4) is not clipped
    model, m, o, _, x, y = _setup(norms)
    model[0].weight.requires_grad_(False)
    _step(m, o, x, y)
    w1, b1, w2, b2 = model.parameters()
    ref = _unclipped(model, x, y)
    assert float(b1.grad.norm()) <= 1e-3 and float(w2.grad.norm()) <= 1e-3
    assert 1.0 < float(ref[3].norm()) < 100.0
    torch.testing.assert_close(b2.grad, ref[3], rtol=1e-12, atol=0)  # was clipped to 1e-3 (W2's norm)


@pytest.mark.parametrize("clipping", ["per_layer", "per_group"])
def test_a_parameter_made_trainable_after_make_private_is_refused(clipping):
    norms = [0.1, 0.2, 0.3] if clipping == "per_layer" else [0.5]
    model, m, o, _, x, y = _setup(norms, frozen_bias=True, clipping=clipping)
    model[0].bias.requires_grad_(True)
    state = o.generator.bit_generator.state
    with pytest.raises(RuntimeError, match="after make_private"):
        _step(m, o, x, y)
    assert o.steps == 0 and o.generator.bit_generator.state == state


def test_a_group_added_to_the_wrapped_optimizer_is_refused_per_layer():
    model, m, o, opt, x, y = _setup([0.1, 0.2, 0.3, 0.4],
                                    params=lambda mod: [mod[0].weight, mod[0].bias, mod[2].weight, mod[2].bias])
    extra = nn.Parameter(torch.zeros(2, dtype=torch.float64))
    opt.add_param_group({"params": [extra]})  # the user's handle on the wrapped optimizer
    with pytest.raises(RuntimeError, match="after make_private"):
        _step(m, o, x, y)


@pytest.mark.parametrize("clipping, norms", [("flat", 1.0), ("per_layer", [1.0, 1.0, 1.0])])
def test_a_parameter_listed_twice_is_refused_before_the_charge(clipping, norms):
    model = nn.Linear(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: "duplicate parameters ... will cause an error"
        opt = torch.optim.SGD([model.weight, model.weight, model.bias], lr=0.1)
    b = PrivacyBudget(10.0, 1e-5)
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    eng = PrivacyEngine(rng=gen)
    loader = DataLoader(TensorDataset(torch.zeros(8, 3), torch.zeros(8, dtype=torch.long)), batch_size=4)
    with pytest.raises(ValueError, match="twice"):
        eng.make_private(module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.0, max_grad_norm=norms,
                         clipping=clipping, epochs=1, budget=b)
    assert b.ledger == () and eng.optimizer is None and gen.bit_generator.state == state
    assert not model._forward_hooks
