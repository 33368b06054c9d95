"""Sphinx configuration of dpfast's documentation (built by ``.ci/docs`` with ``-W``).

Sizes of the gallery examples: small by default (CI); ``DPFAST_DOCS_FULL=1`` runs them at the
sizes of the published figures (``docs/_static/figures/README.md`` has the command).
"""
import os
import re
import sys

import dpfast

project = "dpfast"
author = "the dpfast developers"
copyright = "2026, the dpfast developers"
version = release = dpfast.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "sg_execution_times.rst", "auto_examples/*.ipynb",
                    "auto_examples/*.py", "auto_examples/*.zip"]
root_doc = "index"
html_theme = "alabaster"
html_static_path = ["_static"]
html_theme_options = {"description": "Fast, correct differential privacy", "fixed_sidebar": True,
                      "page_width": "1100px"}
html_sidebars = {"**": ["about.html", "navigation.html", "searchbox.html"]}

# API reference: one page per public name, generated from __all__ (autosummary honours it)
autosummary_generate = True
autosummary_imported_members = True
autosummary_ignore_module_all = False
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"  # numpydoc's Parameters sections already give the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# One page per public subpackage (every dpfast.<name> without a leading underscore that declares
# __all__), written from its __all__ before the build reads the sources: a name or a subpackage
# added to the package appears in the reference without editing the docs.
#: subpackages that need an optional dependency (documented where it is installed, as in CI)
OPTIONAL_SUBPACKAGES = ("torch",)


def api_modules():
    import importlib
    import pkgutil

    names = []
    for info in pkgutil.iter_modules(dpfast.__path__):
        if info.name.startswith("_") or info.name == "demo":
            continue
        try:
            mod = importlib.import_module("dpfast." + info.name)
        except ImportError:
            if info.name in OPTIONAL_SUBPACKAGES:  # its optional dependency is not installed here
                continue
            raise
        if getattr(mod, "__all__", None):
            names.append("dpfast." + info.name)
    return sorted(names)


def _write_api_pages(srcdir):
    import importlib
    import inspect

    out = os.path.join(srcdir, "api", "modules")
    os.makedirs(out, exist_ok=True)
    for name in api_modules():
        mod = importlib.import_module(name)
        documented, constants = [], []
        for member in mod.__all__:
            obj = getattr(mod, member)
            (documented if inspect.isclass(obj) or callable(obj) else constants).append(member)
        lines = [name, "=" * len(name), "", f".. automodule:: {name}", "   :no-members:", "",
                 f".. currentmodule:: {name}", "", ".. autosummary::", "   :toctree: ../generated",
                 "   :nosignatures:", ""]
        lines += [f"   {m}" for m in documented] + [""]
        if constants:
            lines += ["Constants", "---------", ""]
            for m in constants:  # plain values carry their type's docstring: describe them here
                obj = getattr(mod, m)
                size = f" of {len(obj)} entries" if hasattr(obj, "__len__") else ""
                lines += [f".. py:data:: {m}", "", f"   A ``{type(obj).__name__}``{size}; see the module text.", ""]
        text = "\n".join(lines)
        path = os.path.join(out, name + ".rst")
        if not os.path.exists(path) or open(path).read() != text:  # unchanged: no rebuild
            with open(path, "w") as f:
                f.write(text)


_write_api_pages(os.path.dirname(os.path.abspath(__file__)))


# Docstrings are plain text to their authors; two spellings in them are markup to reST:
# |x| (a substitution) and name_ (a hyperlink reference, e.g. the fitted attribute epsilon_).
# Escape both outside inline literals instead of failing the -W build on them.
_SUBST = re.compile(r"(?<![\\|\w])\|([^|\s][^|]*?)\|(?![\w|_])")
_REF = re.compile(r"\b([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*)_(?=[\s.,;:)\]]|$)")


def _escape_text(text):
    parts = re.split(r"(``.*?``|`[^`]*`_?|:math:`[^`]*`)", text)
    for i in range(0, len(parts), 2):
        parts[i] = _REF.sub(r"\1\\_", _SUBST.sub(r"\\|\1\\|", parts[i]))
    return "".join(parts)


def _escape_docstring(app, what, name, obj, options, lines):
    in_block = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(".. ") or stripped.endswith("::"):
            in_block = stripped.endswith("::") or stripped.startswith((".. math", ".. code"))
            continue
        if in_block and (line.startswith(" ") or not stripped):
            continue
        in_block = False
        if stripped.startswith(">>>") or stripped.startswith("..."):
            continue
        lines[i] = _escape_text(line)


def setup(app):
    app.connect("autodoc-process-docstring", _escape_docstring, priority=900)


sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py|_common\.py|_toolbox\.py",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "min_reported_time": 1,
    "show_memory": False,
    "write_computation_times": False,
}

# the examples import helpers that live beside them
sys.path.insert(0, os.path.abspath("../examples"))
