"""The Opacus migration table of docs/user_guide/torch.rst, row by row, against the code.

Each test is one row of the table (same order); where Opacus is installed its signatures are read
from its source, so that "same names" is checked against Opacus (1.6 here) itself, not against a
list copied into this file.
"""
import ast
import importlib.util
import inspect
import math
import pathlib

import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import dpfast.torch as dt  # noqa: E402
from dpfast.random import SecureRandom  # noqa: E402
from dpfast.torch import BatchMemoryManager, GradSampleModule, PrivacyEngine, validate_module  # noqa: E402

torch.set_num_threads(1)


def _opacus_params(module: str, cls: str, method: str) -> list:
    """The parameter names of Opacus's ``cls.method`` read from its source with ``ast`` (importing
    opacus costs seconds), without self and **kwargs; skips where Opacus is not installed."""
    spec = importlib.util.find_spec("opacus")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("opacus is not installed: the names are compared against its own signatures")
    path = pathlib.Path(list(spec.submodule_search_locations)[0], *module.split(".")).with_suffix(".py")
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.name == method:
                    a = f.args
                    return [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg != "self"]
    raise AssertionError(f"opacus {module}.{cls}.{method} not found")


def _ours(obj) -> list:
    return [k for k, p in inspect.signature(obj).parameters.items() if k != "self" and p.kind != p.VAR_KEYWORD]


def _setup(n=50, bs=8, **kw):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    loader = DataLoader(TensorDataset(torch.randn(n, 4), torch.randint(0, 3, (n,))), batch_size=bs)
    return dict(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), data_loader=loader, **kw)


def _step_all(m, o, dl):
    for x, y in dl:
        o.zero_grad()
        nn.functional.cross_entropy(m(x), y).backward()
        o.step()


# "make_private" / "make_private_with_epsilon": Opacus's keywords that dpfast does not take
NOT_TAKEN = {"make_private": {"wrap_model", "rand_on_empty"}, "make_private_with_epsilon": {"wrap_model"},
             "save_checkpoint": {"noise_scheduler", "grad_clip_scheduler", "module_state_dict_kwargs",
                                 "torch_save_kwargs"},
             "load_checkpoint": {"noise_scheduler", "grad_clip_scheduler", "module_load_dict_kwargs",
                                 "torch_load_kwargs"}}


def test_row_import():
    from dpfast.torch import PrivacyEngine as PE
    assert PE is PrivacyEngine


def test_row_accountant():
    for a in ("pld", "rdp"):
        assert PrivacyEngine(accountant=a).accountant_name == a
    with pytest.raises(ValueError, match="'pld' is the certified counterpart"):
        PrivacyEngine(accountant="prv")
    with pytest.raises(ValueError, match="accountant must be one of"):
        PrivacyEngine(accountant="gdp")


def test_row_secure_mode():
    eng = PrivacyEngine(secure_mode=True)
    m, o, dl = eng.make_private(**_setup(), noise_multiplier=1.0, max_grad_norm=1.0, epochs=1)
    _step_all(m, o, dl)
    assert isinstance(o.generator, SecureRandom) and eng.state_dict()["noise_rng"] is None


@pytest.mark.parametrize("name", ["make_private", "make_private_with_epsilon"])
def test_row_make_private_takes_opacus_names(name):
    theirs = set(_opacus_params("privacy_engine", "PrivacyEngine", name))
    ours = set(_ours(getattr(PrivacyEngine, name)))
    assert theirs - ours == NOT_TAKEN[name]
    assert ours - theirs == {"budget", "distributed"} | ({"epochs", "steps"} if name == "make_private" else set())
    with pytest.raises(TypeError, match="wrap_model"):  # refused by name, not silently ignored
        getattr(PrivacyEngine(rng=0), name)(**_setup(), max_grad_norm=1.0, wrap_model=False,
                                            **({"noise_multiplier": 1.0} if name == "make_private" else
                                               {"target_epsilon": 1.0, "target_delta": 1e-5, "epochs": 1}))


def test_row_make_private_returns_three_and_refuses_noise_generator():
    out = PrivacyEngine(rng=0).make_private(**_setup(), noise_multiplier=1.0, max_grad_norm=1.0)
    assert len(out) == 3 and isinstance(out[0], GradSampleModule)
    with pytest.raises(ValueError, match="rng="):
        PrivacyEngine(rng=0).make_private(**_setup(), noise_multiplier=1.0, max_grad_norm=1.0,
                                          noise_generator=torch.Generator())


def test_row_make_private_with_epsilon():
    eng = PrivacyEngine(rng=0)
    m, o, dl = eng.make_private_with_epsilon(**_setup(), target_epsilon=2.0, target_delta=1e-5, epochs=2,
                                             max_grad_norm=1.0)
    _step_all(m, o, dl)
    _step_all(m, o, dl)
    assert eng.steps == eng.planned_steps == 2 * 7 and eng.get_epsilon(1e-5) <= 2.0


def test_row_poisson_sampling_false_refused():
    with pytest.raises(ValueError, match="Chua et al"):
        PrivacyEngine(rng=0).make_private(**_setup(), noise_multiplier=1.0, max_grad_norm=1.0,
                                          poisson_sampling=False)


def test_row_per_layer_clipping():
    kw = _setup()
    L = sum(p.requires_grad for p in kw["module"].parameters())
    eng = PrivacyEngine(rng=0)
    eng.make_private(**kw, noise_multiplier=1.0, max_grad_norm=[0.5] * L, clipping="per_layer")
    assert eng.clipping == "per_layer" and eng.max_grad_norms == [0.5] * L
    assert 0.5 * math.sqrt(L) <= eng.max_grad_norm <= 0.5 * math.sqrt(L) * (1 + 1e-15)
    with pytest.raises(TypeError, match=r"\[C\] \* "):  # one number: Opacus needs a list too
        PrivacyEngine(rng=0).make_private(**_setup(), noise_multiplier=1.0, max_grad_norm=1.0, clipping="per_layer")


def test_row_adaptive_clipping_not_implemented():
    with pytest.raises(NotImplementedError, match="flat"):
        PrivacyEngine(rng=0).make_private(**_setup(), noise_multiplier=1.0, max_grad_norm=1.0, clipping="adaptive")


def test_row_grad_sample_mode():
    for mode in ("hooks", "functional"):
        PrivacyEngine(rng=0).make_private(**_setup(), noise_multiplier=1.0, max_grad_norm=1.0, grad_sample_mode=mode)
    with pytest.raises(ValueError, match="'hooks' or 'functional'.*Opacus's 'ghost': pass 'hooks'"):
        PrivacyEngine(rng=0).make_private(**_setup(), noise_multiplier=1.0, max_grad_norm=1.0, grad_sample_mode="ghost")


def test_row_grad_sample_module_state_dict_has_no_prefix():
    kw = _setup()
    keys = list(kw["module"].state_dict())
    m, _, _ = PrivacyEngine(rng=0).make_private(**kw, noise_multiplier=1.0, max_grad_norm=1.0)
    assert list(m.state_dict()) == keys and not any(k.startswith("_module.") for k in keys)


def test_row_module_validator():
    with pytest.raises(ValueError, match="GroupNorm"):
        validate_module(nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)))
    assert not hasattr(dt, "ModuleValidator")  # no automatic fix


def test_row_batch_memory_manager_names():
    theirs = _opacus_params("utils.batch_memory_manager", "BatchMemoryManager", "__init__")
    assert _ours(BatchMemoryManager.__init__) == theirs == ["data_loader", "max_physical_batch_size", "optimizer"]


def test_row_get_epsilon_zero_before_the_first_step():
    eng = PrivacyEngine(rng=0)
    assert eng.get_epsilon(1e-5) == 0.0
    m, o, dl = eng.make_private(**_setup(), noise_multiplier=1.0, max_grad_norm=1.0)
    assert eng.get_epsilon(1e-5) == 0.0
    _step_all(m, o, dl)
    assert 0 < eng.get_epsilon(1e-5) < math.inf


def test_row_checkpoints(tmp_path):
    for name in ("save_checkpoint", "load_checkpoint"):
        theirs = set(_opacus_params("privacy_engine", "PrivacyEngine", name))
        ours = set(_ours(getattr(PrivacyEngine, name)))
        assert theirs - ours == NOT_TAKEN[name]
    eng = PrivacyEngine(rng=0)
    m, o, dl = eng.make_private(**_setup(), noise_multiplier=1.0, max_grad_norm=1.0, epochs=2)
    _step_all(m, o, dl)
    eng.save_checkpoint(path=tmp_path / "c.pt", module=m, optimizer=o)
    eng2 = PrivacyEngine(rng=7)
    m2, o2, _ = eng2.make_private(**_setup(), noise_multiplier=1.0, max_grad_norm=1.0, epochs=2)
    eng2.load_checkpoint(path=tmp_path / "c.pt", module=m2, optimizer=o2)
    assert eng2.steps == eng.steps and eng2.get_epsilon(1e-5) == eng.get_epsilon(1e-5)


def test_row_data_loader_rate_and_length():
    n, bs = 50, 8  # bs does not divide n: q = 8/50 (Opacus: 1/len(loader) = 1/7)
    eng = PrivacyEngine(rng=0)
    _, _, dl = eng.make_private(**_setup(n, bs), noise_multiplier=1.0, max_grad_norm=1.0)
    assert eng.sample_rate == bs / n and len(dl) == -(-n // bs) == 7
    assert dl.batch_sampler.sample_rate == bs / n


def test_row_distributed_needs_torch_distributed():
    # (training under gloo: tests/torch/test_torch_distributed.py)
    with pytest.raises(ValueError, match="init_process_group"):
        PrivacyEngine(rng=0).make_private(**_setup(), noise_multiplier=1.0, max_grad_norm=1.0, distributed=True)
