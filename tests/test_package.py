"""The package imports, reports a version, and its native modules load."""
import importlib

import dpfast


def test_version_is_pep440_like():
    parts = dpfast.__version__.split(".")
    assert len(parts) >= 2 and all(p.isdigit() for p in parts[:2])


def test_native_modules_load():
    for name in ("dpfast._core", "dpfast._chacha"):
        mod = importlib.import_module(name)
        assert mod.__file__.endswith((".so", ".pyd"))
