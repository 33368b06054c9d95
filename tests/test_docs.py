"""The documentation cannot drift from the code.

* every ``>>>`` example in ``docs/**/*.rst`` runs (doctest) and prints what the page says;
* no page hides Python in a block that does not run (``.. code-block:: python``);
* every ```python`` block of the README runs;
* the API reference covers every public subpackage and every name in its ``__all__``;
* the rendered HTML opens in headless Chromium and shows the accounting page with its plot
  (skipped, saying why, where Chromium or Sphinx is absent).

The HTML is built here without running the gallery (``plot_gallery=0``), or taken from
``DPFAST_DOCS_HTML`` (what ``.ci/docs`` built, gallery included).
"""
import doctest
import glob
import importlib
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
GENERATED = ("api" + os.sep, "auto_examples" + os.sep, "_build" + os.sep, "_templates" + os.sep)

pytestmark = pytest.mark.skipif(not os.path.isdir(DOCS), reason="docs/ is not shipped with this copy of the tests")


def _pages():
    out = []
    for path in sorted(glob.glob(os.path.join(DOCS, "**", "*.rst"), recursive=True)):
        rel = os.path.relpath(path, DOCS)
        if not rel.startswith(GENERATED):
            out.append(rel)
    return out


PAGES = _pages() if os.path.isdir(DOCS) else []


def test_the_docs_have_pages_with_examples():
    with_examples = [p for p in PAGES if ">>>" in open(os.path.join(DOCS, p), encoding="utf-8").read()]
    assert len(PAGES) >= 15 and len(with_examples) >= 6, (PAGES, with_examples)


#: pages whose examples take seconds (auditing.rst runs audits, public_data.rst fits, torch.rst trains): the full
#: tier only
SLOW_PAGES = {"user_guide/auditing.rst", "user_guide/public_data.rst", "user_guide/torch.rst"}
#: pages that need an optional dependency: page -> the module that must import
NEEDS = {"user_guide/torch.rst": "torch.nn"}


@pytest.mark.parametrize("page", [pytest.param(p, marks=pytest.mark.slow) if p in SLOW_PAGES else p for p in PAGES])
def test_doc_page_examples_run(page):
    if page in NEEDS:
        pytest.importorskip(NEEDS[page])
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    res = doctest.testfile(os.path.join(DOCS, page), module_relative=False, optionflags=flags,
                           report=True, verbose=False, encoding="utf-8")
    assert res.failed == 0, f"{res.failed} of {res.attempted} examples of docs/{page} failed (see the output above)"


@pytest.mark.parametrize("page", PAGES)
def test_no_untested_python_blocks(page):
    text = open(os.path.join(DOCS, page), encoding="utf-8").read()
    hidden = re.findall(r"^\s*\.\. (?:code-block|code|sourcecode):: *(?:python|py|pycon)\s*$", text, re.M)
    assert not hidden, f"docs/{page}: write Python as >>> examples so that they run in CI"


def _readme_blocks():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    return re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)


@pytest.mark.slow
def test_readme_python_blocks_run():
    blocks = _readme_blocks()
    assert blocks, "the README has no ```python block"
    for i, code in enumerate(blocks):
        if "import torch" in code:
            try:
                import torch.nn  # noqa: F401  (the dpfast.torch block needs PyTorch)
            except ImportError:
                __import__("sys").modules.pop("torch", None)  # tests/torch/ as a namespace package would shadow it
                continue
        ns = {"__name__": f"readme_block_{i}"}
        exec(compile(code, f"README.md python block {i}", "exec"), ns)


def _api_modules():
    import runpy

    cwd = os.getcwd()
    try:  # conf.py writes the API pages into docs/api/modules (git-ignored) when it is run
        ns = runpy.run_path(os.path.join(DOCS, "conf.py"))
    finally:
        os.chdir(cwd)
    return ns["api_modules"]()


def test_api_reference_lists_every_public_name():
    pytest.importorskip("sphinx", reason="Sphinx is not installed (pip install -e '.[docs]')")
    import pkgutil

    import dpfast

    modules = _api_modules()
    public = {"dpfast." + m.name for m in pkgutil.iter_modules(dpfast.__path__)
              if not m.name.startswith("_") and m.name != "demo"}

    def importable(m):
        try:
            importlib.import_module(m)
        except ImportError:  # an optional subpackage without its dependency (dpfast.torch without torch)
            return False
        return True

    public = {m for m in public if importable(m)}
    assert set(modules) == {m for m in public if getattr(importlib.import_module(m), "__all__", None)}
    for name in modules:
        page = open(os.path.join(DOCS, "api", "modules", name + ".rst"), encoding="utf-8").read()
        listed = set(re.findall(r"^   (\w+)$", page, re.M)) | set(re.findall(r"^\.\. py:data:: (\w+)$", page, re.M))
        missing = set(importlib.import_module(name).__all__) - listed
        assert not missing, f"{name}: {sorted(missing)} not in the API reference"
    # every top-level name is either a subpackage or re-exported from a documented one
    for name in dpfast.__all__:
        if name.startswith("__") or f"dpfast.{name}" in public or name == "torch":  # (torch: a subpackage)
            continue
        obj = getattr(dpfast, name)
        home = getattr(obj, "__module__", "") or ""
        assert any(home == m or home.startswith(m + ".") for m in modules), (name, home)


def _chromium():
    for exe in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(exe)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def html_dir(tmp_path_factory):
    given = os.environ.get("DPFAST_DOCS_HTML")
    if given:
        return given
    pytest.importorskip("sphinx", reason="Sphinx is not installed (pip install -e '.[docs]')")
    pytest.importorskip("sphinx_gallery", reason="sphinx-gallery is not installed (pip install -e '.[docs]')")
    out = str(tmp_path_factory.mktemp("html"))
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-D", "sphinx_gallery_conf.plot_gallery=0",
           "-d", os.path.join(out, ".doctrees"), DOCS, out]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return out


@pytest.mark.slow
def test_rendered_page_in_headless_chromium(html_dir):
    browser = _chromium()
    if browser is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium); the rendered page was not opened")
    page = os.path.join(html_dir, "user_guide", "accounting.html")
    assert os.path.exists(page)
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--allow-file-access-from-files", "--virtual-time-budget=3000", "--dump-dom", "file://" + page]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    dom = p.stdout
    # the DOM Chromium built: the title, the comparison table, the figure and the tested example
    assert "<h1>Accounting: RDP, PLD or GDP?" in dom
    assert re.search(r'<img[^>]+src="[^"]*accounting_steps\.png"', dom)
    assert "calibrate_noise_multiplier" in dom
    assert re.search(r"<table[^>]*>.*certified upper bound", dom, re.S)
    # the figure the page shows was really written next to it
    img = re.search(r'<img[^>]+src="([^"]*accounting_steps\.png)"', dom).group(1)
    assert os.path.getsize(os.path.normpath(os.path.join(os.path.dirname(page), img))) > 10_000


_SPEC_CITATION = re.compile(r"\(spec[,:]?\s+(?:Theorem|Algorithm|Section|\"|[a-z_]+\.md)|\(spec\):"
                            r"|\bspec\s+[a-z_]+\.md|shared/spec|\bspec/[a-z_]+\.md")


@pytest.mark.source_tree
def test_sources_cite_papers_and_docs_pages_not_the_spec_files():
    # Users cannot open ../shared/spec: docstrings and comments (Python, Cython and C++) cite the
    # primary sources and the docs pages (:doc:`/theory/erm`, docs/theory/erm.rst).
    files = [p for pattern in ("dpfast/**/*.py", "dpfast/**/*.pyx", "csrc/**/*.hpp", "csrc/**/*.cpp")
             for p in glob.glob(os.path.join(ROOT, pattern), recursive=True)]
    assert len(files) > 50
    bad = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            for k, line in enumerate(f, 1):
                if _SPEC_CITATION.search(line):
                    bad.append(f"{os.path.relpath(path, ROOT)}:{k}: {line.strip()}")
    assert not bad, "spec-file citations left:\n" + "\n".join(bad)
