"""The package's public surface: it imports, every exported name exists and is documented,
and the native modules load."""
import importlib
import inspect

import pytest

import dpfast

SUBPACKAGES = [
    "dpfast.random",
    "dpfast.calibrate",
    "dpfast.mechanisms",
    "dpfast.accounting",
    "dpfast.linear_model",
    "dpfast.sgd",
    "dpfast.public",
    "dpfast.datasets",
    "dpfast.audit",
    "dpfast.budget",
    "dpfast.preprocessing",
    "dpfast.model_selection",
    "dpfast.tools",
    "dpfast.tables",
    "dpfast.io",
    "dpfast.decomposition",
    "dpfast.cluster",
    "dpfast.naive_bayes",
    "dpfast.torch",
    "dpfast.tree",
    "dpfast.ensemble",
]
NATIVE = ["_core", "_chacha", "_exact", "_selection", "_pld", "_glm", "_clip", "_public", "_tables", "_multinomial",
          "_trees", "_stats"]


def test_version_is_pep440_like():
    parts = dpfast.__version__.split(".")
    assert len(parts) >= 2 and all(p.isdigit() for p in parts[:2])


@pytest.mark.parametrize("name", NATIVE)
def test_native_modules_load(name):
    mod = importlib.import_module(f"dpfast.{name}")
    assert mod.__file__.endswith((".so", ".pyd"))


@pytest.mark.source_tree
def test_native_list_names_every_binding():
    import os

    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc", "bindings")
    built = {"_" + f[:-4] for f in os.listdir(root) if f.endswith(".cpp")} | {"_chacha"}
    assert built == set(NATIVE)


def test_subpackage_list_names_every_public_module():
    import pkgutil

    public = {"dpfast." + m.name for m in pkgutil.iter_modules(dpfast.__path__)
              if not m.name.startswith("_") and m.name != "demo"}
    assert public == set(SUBPACKAGES)


def _has_torch() -> bool:
    try:  # torch.nn: tests/torch/ alone is a namespace package named torch
        import torch.nn  # noqa: F401
    except ImportError:
        __import__("sys").modules.pop("torch", None)  # tests/torch/ as a namespace package would shadow it
        return False
    return True


HAS_TORCH = _has_torch()
_NEEDS_TORCH = pytest.mark.skipif(not HAS_TORCH, reason="dpfast.torch needs PyTorch (pip install 'dpfast[torch]')")


@pytest.mark.parametrize("modname", [pytest.param(m, marks=_NEEDS_TORCH) if m == "dpfast.torch" else m
                                     for m in SUBPACKAGES])
def test_every_exported_name_exists_and_is_documented(modname):
    mod = importlib.import_module(modname)
    assert mod.__doc__ and mod.__doc__.strip(), f"{modname} has no module docstring"
    names = getattr(mod, "__all__", None)
    assert names, f"{modname} declares no __all__"
    for name in names:
        obj = getattr(mod, name)  # AttributeError: exported but missing
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert inspect.getdoc(obj), f"{modname}.{name} has no docstring"


def test_top_level_reexports_the_mechanisms_and_estimators():
    from dpfast import mechanisms

    assert list(dpfast._MECHANISM_NAMES) == list(mechanisms.__all__)
    for name in mechanisms.__all__:
        assert getattr(dpfast, name) is getattr(mechanisms, name)
    for name, sub in [("LogisticRegression", "linear_model"), ("DPSGDClassifier", "sgd"),
                      ("PublicDataClassifier", "public"), ("PLDAccountant", "accounting")]:
        assert getattr(dpfast, name) is getattr(importlib.import_module(f"dpfast.{sub}"), name)
    for name in dpfast.__all__:
        if name != "torch" or HAS_TORCH:
            getattr(dpfast, name)


def test_dpfast_torch_without_torch_names_the_extra(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "dpfast.torch", raising=False)
    for m in [m for m in sys.modules if m.startswith("dpfast.torch.")]:
        monkeypatch.delitem(sys.modules, m)
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "torch.nn", None)
    with pytest.raises(ImportError, match=r"dpfast\[torch\]"):
        importlib.import_module("dpfast.torch")


def test_import_dpfast_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, dpfast, dpfast.sgd, dpfast.accounting; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_top_level_name_raises_attribute_error():
    with pytest.raises(AttributeError, match="no attribute"):
        _ = dpfast.not_a_mechanism

