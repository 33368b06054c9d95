"""The import layering of the package (the table ``LAYERS`` below; README, "Layout"), from an
AST walk of every dpfast module (nothing is imported to find the edges):

* every module has a layer in ``LAYERS``, and imports only from its own layer or below;
* no import circles: every strongly connected component of the import graph is one module;
* no imports of dpfast modules inside functions (a module-level ``__getattr__``, PEP 562 lazy
  loading, is allowed: its imports are still edges of the graph, so they cannot close a circle);
* no private names imported across subpackages: ``_name`` (a module or an attribute) below
  ``dpfast.<sub>`` is for ``dpfast.<sub>`` only; ``dpfast._x`` (a top-level private module) is
  for the whole package, but its own private names are not.

``KNOWN`` lists the exceptions that colleagues are removing, each with its owner; an entry that
no longer occurs fails the test, so that it is deleted with the fix.
"""
from __future__ import annotations

import ast
import pathlib
from typing import Dict, List, Optional, Set, Tuple

import dpfast

ROOT = pathlib.Path(dpfast.__file__).resolve().parent

#: The layers, bottom up: (layer, module prefixes).  The longest matching prefix decides.
LAYERS: List[Tuple[str, Tuple[str, ...]]] = [
    ("ground", ("dpfast._validation", "dpfast._safe_root", "dpfast.random", "dpfast._threads",
                "dpfast._rational", "dpfast._loss_table", "dpfast._solver", "dpfast._certify", "dpfast._fixed",
                "dpfast._dask_utils", "dpfast.io", "dpfast.datasets",
                # native extensions
                "dpfast._core", "dpfast._chacha", "dpfast._exact", "dpfast._selection", "dpfast._pld",
                "dpfast._glm", "dpfast._clip", "dpfast._public", "dpfast._tables", "dpfast._multinomial",
                "dpfast._trees", "dpfast._stats")),
    ("accounting", ("dpfast.accounting", "dpfast.calibrate")),
    ("budget", ("dpfast.budget",)),
    ("mechanisms", ("dpfast.mechanisms",)),
    ("families", ("dpfast._base", "dpfast.linear_model", "dpfast.sgd", "dpfast.public", "dpfast.tables",
                  "dpfast.cluster", "dpfast.tools", "dpfast.naive_bayes",
                  "dpfast.decomposition", "dpfast.torch", "dpfast.tree", "dpfast.ensemble")),
    ("workflows", ("dpfast.preprocessing", "dpfast.model_selection")),
    ("top", ("dpfast.audit", "dpfast.demo", "dpfast")),
]
RANK = {name: k for k, (name, _) in enumerate(LAYERS)}

#: Exceptions being removed by colleagues (issue 23), by kind.  Each must still occur.
KNOWN: Dict[str, dict] = {
    "cycle": {},  # frozenset of modules -> owner
    "function_import": {},  # (importer, imported module) -> owner
    "private": {},  # (importer, imported module) -> owner
}


def _modules() -> Tuple[Dict[str, Tuple[pathlib.Path, bool]], Set[str]]:
    mods = {}
    for p in sorted(ROOT.rglob("*.py")):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        mods[".".join(parts)] = (p, is_pkg)
    native = {"dpfast." + p.name.split(".")[0] for p in ROOT.iterdir()
              if p.suffix in (".so", ".pyd", ".pyx")}
    return mods, native


MODULES, NATIVE = _modules()
KNOWN_MODULES = set(MODULES) | NATIVE


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> Optional[str]:
    if not node.level:
        return node.module
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports():
    """(importer, imported module, imported name or None, line, where) for every import of a
    dpfast module; ``where`` is "module", "getattr" (a module-level ``__getattr__``) or
    "function"."""
    out = []
    for mod, (path, is_pkg) in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lazy = {id(f) for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "__getattr__"}

        def walk(node, where):
            for child in ast.iter_child_nodes(node):
                w = where
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and where == "module":
                    w = "getattr" if id(child) in lazy else "function"
                if isinstance(child, ast.Import):
                    for a in child.names:
                        if a.name == "dpfast" or a.name.startswith("dpfast."):
                            out.append((mod, a.name, None, child.lineno, w))
                elif isinstance(child, ast.ImportFrom):
                    src = _resolve(mod, is_pkg, child)
                    if src and (src == "dpfast" or src.startswith("dpfast.")):
                        for a in child.names:
                            sub = f"{src}.{a.name}"
                            if sub in KNOWN_MODULES:
                                out.append((mod, sub, None, child.lineno, w))
                            else:
                                out.append((mod, src, a.name, child.lineno, w))
                walk(child, w)

        walk(tree, "module")
    return out


IMPORTS = _imports()


def _layer(mod: str) -> str:
    best = None
    for name, prefixes in LAYERS:
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and (best is None or len(p) > len(best[1])):
                best = (name, p)
    assert best is not None, f"{mod} has no layer: add it to LAYERS in {__file__}"
    return best[0]


def _graph():
    g: Dict[str, Set[str]] = {m: set() for m in KNOWN_MODULES}
    for a, b, _, _, _ in IMPORTS:
        if b in KNOWN_MODULES and b != a:
            g[a].add(b)
    return g


def _sccs(g: Dict[str, Set[str]]) -> List[Set[str]]:
    # Tarjan's algorithm, iterative (no recursion limit on deep graphs)
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[Set[str]] = []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                out.append(comp)
    return out


def _private_scope(path: str) -> Optional[str]:
    """The package that may import ``path`` (a dotted module or module.name), or None when it
    is public.  ``_x`` right below dpfast: the whole package; deeper: dpfast.<sub> only, and a
    private name inside a top-level module ``dpfast.m``: ``dpfast.m`` only."""
    parts = path.split(".")
    scope = None
    for j in range(1, len(parts)):
        p = parts[j]
        if p.startswith("_") and not p.startswith("__"):
            s = "dpfast" if j == 1 else ".".join(parts[:2])
            if scope is None or len(s) > len(scope):
                scope = s
    return scope


def _inside(mod: str, scope: str) -> bool:
    return mod == scope or mod.startswith(scope + ".")


def test_every_module_has_a_layer():
    for mod in KNOWN_MODULES:
        _layer(mod)


def test_imports_go_down_the_layers():
    bad = sorted({f"{a} ({_layer(a)}) imports {b} ({_layer(b)}), line {line}"
                  for a, b, _, line, _ in IMPORTS
                  if b in KNOWN_MODULES and RANK[_layer(b)] > RANK[_layer(a)]})
    assert not bad, "imports must only go down the layers:\n" + "\n".join(bad)


def test_no_import_circles():
    circles = [c for c in _sccs(_graph()) if len(c) > 1]
    known = KNOWN["cycle"]
    unknown = [sorted(c) for c in circles if frozenset(c) not in known]
    assert not unknown, f"import circles (strongly connected components): {unknown}"
    stale = [sorted(k) for k in known if k not in {frozenset(c) for c in circles}]
    assert not stale, f"KNOWN['cycle'] entries that no longer occur, delete them: {stale}"


def test_no_imports_of_dpfast_modules_inside_functions():
    found = {(a, b) for a, b, _, _, w in IMPORTS if w == "function"}
    for (a, b), _ in KNOWN["function_import"].items():
        assert any(x == a and (y == b or y.startswith(b + ".")) for x, y in found), \
            f"KNOWN['function_import'] entry {(a, b)} no longer occurs: delete it"
    bad = sorted(f"{a}:{line} imports {b}{'.' + n if n else ''} inside a function"
                 for a, b, n, line, w in IMPORTS
                 if w == "function" and (a, b) not in KNOWN["function_import"])
    assert not bad, "\n".join(bad)


def test_no_private_names_across_subpackages():
    bad, seen = [], set()
    for a, b, n, line, _ in IMPORTS:
        path = f"{b}.{n}" if n else b
        scope = _private_scope(path)
        if scope is None or _inside(a, scope):
            continue
        if (a, b) in KNOWN["private"]:
            seen.add((a, b))
            continue
        bad.append(f"{a}:{line} imports {path}, private to {scope}")
    stale = set(KNOWN["private"]) - seen
    assert not stale, f"KNOWN['private'] entries that no longer occur, delete them: {sorted(stale)}"
    assert not bad, "private names imported across subpackages:\n" + "\n".join(sorted(bad))


def test_the_walk_sees_the_package():
    # guards the test itself: a walk that found nothing would pass everything
    assert {"dpfast.accounting.events", "dpfast.budget", "dpfast.mechanisms.continuous",
            "dpfast.linear_model._estimators", "dpfast._core"} <= KNOWN_MODULES
    assert ("dpfast.budget", "dpfast.accounting", "make_accountant") in {(a, b, n) for a, b, n, _, _ in IMPORTS}
    assert _private_scope("dpfast.random._x") == "dpfast.random"
    assert _private_scope("dpfast.linear_model._solver.minimize_glm") == "dpfast.linear_model"
    assert _private_scope("dpfast._base.validate_X") == "dpfast"
    assert _private_scope("dpfast._base._x") == "dpfast._base"
    assert _private_scope("dpfast.accounting.events.Gaussian") is None


def test_events_are_data_and_accounting_does_not_reach_up():
    # events.py holds what a release is, no privacy math: it imports only the validators
    events = {b for a, b, _, _, _ in IMPORTS if a == "dpfast.accounting.events"}
    assert events <= {"dpfast._validation"}, events
    # the randomized-response math lives in accounting (the mechanism imports it from there)
    assert ("dpfast.mechanisms.randomized_response", "dpfast.accounting.pairs", "rr_log_probabilities") in \
        {(a, b, n) for a, b, n, _, _ in IMPORTS}
