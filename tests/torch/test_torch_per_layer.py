"""Opacus's other clipping modes in dpfast.torch: refused, clearly, before anything is charged.

``clipping="per_layer"`` (``max_grad_norm`` a list, one norm per parameter) and
``clipping="adaptive"`` (Andrew et al. 2021) are not implemented: ``make_private`` raises
``NotImplementedError`` naming flat clipping.  Per-layer clipping at norms C_l bounds a whole
per-sample gradient's norm by sqrt(sum C_l^2) (McMahan et al. 2018, "A general approach to adding
differential privacy to iterative training procedures"; Opacus's ``DPPerLayerOptimizer`` adds
noise of that scale), so flat clipping at that C has the same sensitivity and, at the same
noise multiplier, the same privacy: the message says so.
"""
import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from dpfast import PrivacyBudget  # noqa: E402
from dpfast.torch import PrivacyEngine  # noqa: E402


@pytest.mark.parametrize("kw", [
    {"clipping": "per_layer", "max_grad_norm": [1.0, 0.5]},
    {"clipping": "per_layer", "max_grad_norm": 1.0},
    {"clipping": "flat", "max_grad_norm": [1.0, 0.5]},
    {"clipping": "flat", "max_grad_norm": (1.0, 0.5)},
    {"clipping": "adaptive", "max_grad_norm": 1.0},
])
@pytest.mark.parametrize("with_epsilon", [False, True])
def test_per_layer_and_adaptive_clipping_are_not_implemented(kw, with_epsilon):
    model = nn.Linear(2, 2)
    loader = DataLoader(TensorDataset(torch.zeros(8, 2), torch.zeros(8, dtype=torch.long)), batch_size=4)
    b = PrivacyBudget(10.0, 1e-5)
    args = dict(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), data_loader=loader, epochs=1,
                budget=b, **kw)
    eng = PrivacyEngine(rng=0)
    with pytest.raises(NotImplementedError, match=r"clipping='flat'.*sqrt\(sum C_l\^2\)"):
        if with_epsilon:
            eng.make_private_with_epsilon(target_epsilon=1.0, target_delta=1e-5, **args)
        else:
            eng.make_private(noise_multiplier=1.0, **args)
    assert b.ledger == () and eng.optimizer is None
