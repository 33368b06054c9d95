"""Shared pytest configuration of the test suite.

Layout: ``tests/<subpackage>/`` mirrors ``dpfast/<subpackage>/``; the tests of top-level modules
(``dpfast/calibrate.py``, ``dpfast/random.py``, ...) and of the package as a whole live in
``tests/`` itself.  The directories are not packages (no ``__init__.py``) and pytest's default
``prepend`` import mode is used, so test basenames are unique across directories
(``tests/test_tooling.py`` checks it).

Helpers: one import convention.  A helper module (a name starting with ``_``) is imported by its
module name, never as ``tests.<...>`` (an installed top-level ``tests`` package, e.g. diffprivlib's,
would shadow it): helpers used by one directory live in that directory (pytest puts a test
module's directory first on ``sys.path``), helpers shared across directories live here in
``tests/`` (this conftest's directory, which pytest puts on ``sys.path`` before collecting).
No test module imports another test module, and none edits ``sys.path``.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent


class _NoTorch(importlib.abc.MetaPathFinder):
    """``import torch`` fails as it would without this suite, when PyTorch is not installed.

    ``tests/torch/`` (mirroring ``dpfast/torch/``) is a directory named ``torch`` on ``sys.path``,
    so without the torch extra ``import torch`` found it as a namespace package: an empty module
    in ``sys.modules["torch"]`` that broke every later library probing for torch (scipy's
    array-API helpers: ``module 'torch' has no attribute 'Tensor'``, 101 failures in a fresh
    ``.[test]`` venv).  A finder's exception ends the import, so the namespace is never made."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torch":
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        return None


def _torch_installed() -> bool:
    """A regular ``torch`` package (with an ``__init__``) anywhere on sys.path but in this suite."""
    here = {str(HERE), str(HERE.parent)}
    spec = importlib.machinery.PathFinder.find_spec(
        "torch", [p for p in sys.path if p and str(pathlib.Path(p).resolve()) not in here])
    return spec is not None and spec.origin is not None


if "torch" not in sys.modules and not _torch_installed():
    sys.meta_path.insert(0, _NoTorch())

#: Whole modules and directories of the heavy tiers, relative to tests/: the fast tier does not
#: even collect them (nor import their peers).  Single heavy tests carry ``@pytest.mark.slow``.
SLOW_PATHS = (
    "fuzz",                                   # property-based fuzzing of every public callable
    "audit/test_accountants_vs_peers.py",     # accountants vs dp-accounting / prv-accountant
    "audit/test_empirical_epsilon.py",        # empirical epsilon lower bounds (many releases)
    "audit/test_sampler_laws.py",             # 10^6-draw laws of every sampler
    "audit/test_snapping_bound.py",
    "audit/test_clipping_sensitivity.py",
    "test_memory_growth.py",                  # soak: 10^5 calls without memory growth
)

_FULL_HELP = ("run the whole suite: the slow tests and the fuzz, audit and soak tiers too "
              "(what .ci/run runs); without it the fast tier runs")


def pytest_configure(config):
    if config.inipath is None:  # a copy of tests/ without pyproject.toml (tools/wheel_check.py)
        config.addinivalue_line("markers", "slow: heavy tests, run by --full (CI) only")
        config.addinivalue_line("markers", "source_tree: reads the checkout (csrc/, tools/)")


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False, help=_FULL_HELP)


def _full(config) -> bool:
    # an explicit -m replaces the fast tier's default selection (`pytest -m slow tests`)
    return config.getoption("--full") or bool(config.getoption("markexpr", ""))


def _named(config):
    """The paths and node ids named on the command line."""
    out = []
    for arg in config.args:
        path, _, rest = arg.partition("::")
        out.append((pathlib.Path(config.invocation_params.dir, path).resolve(), rest or None))
    return out


def _slow_path(path: pathlib.Path) -> bool:
    try:
        rel = path.resolve().relative_to(HERE)
    except ValueError:
        return False
    return any(rel == pathlib.Path(p) or pathlib.Path(p) in rel.parents for p in SLOW_PATHS)


def pytest_ignore_collect(collection_path, config):
    if _full(config) or not _slow_path(collection_path):
        return None
    # naming a slow module or directory (or anything inside it) runs it
    p = collection_path.resolve()
    if any(a == p or p in a.parents or (a in p.parents and _slow_path(a)) for a, _ in _named(config)):
        return None
    return True


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _slow_path(item.path):
            item.add_marker(pytest.mark.slow)
    if _full(config):
        return
    # a slow test named by its node id (path::test) runs
    # and so does everything under a slow path named on the command line (`pytest tests/fuzz`)
    named = _named(config)
    keep, drop = [], []
    for item in items:
        explicit = any(item.path == path and item.nodeid.partition("::")[2].startswith(rest) if rest else
                       (path == item.path or path in item.path.parents) and _slow_path(path) for path, rest in named)
        (drop if item.get_closest_marker("slow") and not explicit else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config):
    if not _full(config):
        return ["dpfast: the fast tier (slow tests and the fuzz, audit and soak tiers left out); "
                "--full runs everything"]
    return None
