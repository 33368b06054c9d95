"""The test suite's own imports survive every extra (issue 21, item 15).

diffprivlib (the ``bench`` extra) installs a top-level ``tests`` package; any other wheel may
ship one, or a top-level ``conftest``.  An import ``from tests.audit._audit_stats import ...``
then resolves to that package and the module fails to collect.  The rule checked here,
statically (fast, and without installing the extra): test and benchmark modules import their
shared helpers by *module name*, from their own directory (which pytest's default ``prepend``
import mode puts first on ``sys.path``) or from a directory they insert themselves -- never as
``tests.*``/``benchmarks.*``; and no helper's module name is also that of an installed
top-level module.  (The same rule, checked dynamically: put a directory holding a fake
``tests/__init__.py`` first on ``PYTHONPATH`` and run ``pytest --collect-only -q tests
benchmarks``.)
"""
from __future__ import annotations

import ast
import importlib.machinery
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: the suite's directories: tests/, every directory below it (tests/accounting/, ..., tests/fuzz/), benchmarks/
SUITE_DIRS = [ROOT / "tests", *sorted(p for p in (ROOT / "tests").rglob("*")
                                      if p.is_dir() and not p.name.startswith((".", "_"))), ROOT / "benchmarks"]
#: top-level names the repository's test directories must never be imported as
SHADOWABLE = {"tests", "benchmarks"}

pytestmark = pytest.mark.source_tree


def _modules():
    return sorted(p for d in SUITE_DIRS if d.is_dir() for p in d.glob("*.py"))


def _imported_names(path: pathlib.Path):
    """(line, top-level module name) of every absolute import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


def _helpers():
    """Local helper modules: the non-test modules of the suite directories, by module name."""
    out = {}
    for p in _modules():
        # conftest.py files are pytest's, each imported under the name ``conftest`` in turn
        if not p.name.startswith(("test_", "bench_")) and p.name != "conftest.py":
            out.setdefault(p.stem, []).append(p)
    return out


def test_suite_directories_exist():
    assert {"audit", "fuzz", "accounting", "linear_model"} <= {d.name for d in SUITE_DIRS}, SUITE_DIRS


def test_test_module_basenames_are_unique():
    # pytest's default ``prepend`` import mode imports a test module by its basename
    names = {}
    for p in _modules():
        if p.name.startswith(("test_", "bench_")):
            names.setdefault(p.name, []).append(str(p.relative_to(ROOT)))
    dup = {k: v for k, v in names.items() if len(v) > 1}
    assert not dup, f"test modules with the same basename in two directories: {dup}"


@pytest.mark.parametrize("path", [p for p in _modules() if ROOT / "tests" in p.parents],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_one_import_convention(path):
    # helpers by module name from tests/conftest.py's directory or the module's own; never a test
    # module imported from another, never an edit of sys.path (tests/conftest.py explains)
    text = path.read_text(encoding="utf-8")
    edits = ("sys.path." + "insert", "sys.path." + "append")
    assert not any(e in text for e in edits), f"{path.relative_to(ROOT)} edits sys.path"
    bad = [(line, name) for line, name in _imported_names(path) if name.startswith(("test_", "bench_"))]
    assert not bad, f"{path.relative_to(ROOT)} imports the test modules {bad}: move the helper into a helper module"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_through_a_shadowable_package(path):
    bad = [(line, name) for line, name in _imported_names(path) if name in SHADOWABLE]
    assert not bad, (f"{path.relative_to(ROOT)} imports {bad}: an installed top-level 'tests' package "
                     "(diffprivlib's) shadows it; import the helper by module name from its directory")


def test_helper_module_names_are_unique_and_not_installed():
    helpers = _helpers()
    dup = {k: [str(p.relative_to(ROOT)) for p in v] for k, v in helpers.items() if len(v) > 1}
    assert not dup, f"helper modules with the same name in two suite directories: {dup}"
    # sys.path without the repository's own directories (and the working directory): what an
    # installed distribution provides.
    repo = {str(d) for d in SUITE_DIRS} | {str(ROOT), "", "."}
    outside = [p for p in sys.path if p not in repo and not p.startswith(str(ROOT) + "/")]
    installed = {k for k in helpers if importlib.machinery.PathFinder.find_spec(k, outside) is not None}
    assert not installed, f"helper module names that an installed module shadows or is shadowed by: {installed}"


@pytest.mark.parametrize("path", sorted((ROOT / "tests" / "torch").glob("test_*.py")),
                         ids=lambda p: p.name)
def test_torch_modules_skip_on_torch_nn_not_torch(path):
    """tests/torch/ is itself a namespace package named ``torch``: without the torch extra,
    ``pytest.importorskip("torch")`` imports that directory and succeeds, then ``from torch import
    nn`` fails at collection and the README's test command errors (found in a fresh venv with
    only ``.[test]``).  tests/conftest.py now refuses that namespace import; every module there
    still skips on ``torch.nn`` before importing torch, so neither alone is load-bearing."""
    tree = ast.parse(path.read_text())
    skips, first_torch = [], None
    for node in tree.body:
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Call) and getattr(sub.func, "attr", "") == "importorskip"
                    and sub.args and isinstance(sub.args[0], ast.Constant)):
                skips.append((node.lineno, sub.args[0].value))
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        if first_torch is None and any(n == "torch" or n.startswith("torch.") or n.startswith("_engine")
                                       or n.startswith("dpfast.torch") for n in names):
            first_torch = node.lineno
    assert first_torch is not None, f"{path.name} imports no torch"
    guards = [line for line, mod in skips if mod == "torch.nn" and line < first_torch]
    assert guards, f"{path.name}: add pytest.importorskip(\"torch.nn\") before its first torch import"
    assert not [m for _, m in skips if m == "torch"], f"{path.name}: importorskip(\"torch\") passes without torch"
