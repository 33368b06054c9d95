"""Import time of the package (a user pays it once per process)."""
import importlib
import sys


def _fresh_import():
    for name in [m for m in sys.modules if m == "dpfast" or m.startswith("dpfast.")]:
        del sys.modules[name]
    return importlib.import_module("dpfast")


def test_import_dpfast(benchmark):
    mod = benchmark(_fresh_import)
    assert hasattr(mod, "__version__")
