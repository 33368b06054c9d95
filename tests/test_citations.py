"""Docstrings cite the documentation pages and the papers, never the spec files (needs the
checkout's tools/, so it is not in the wheel's fast subset)."""
import pytest


@pytest.mark.source_tree
def test_docstrings_cite_docs_pages_not_spec_files():
    # Users cannot open ../shared/spec: docstrings cite the docs pages and the papers
    # (tools/rewrite_citations.py maps old citations; --check exits 1 if any is left).
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(root / "tools" / "rewrite_citations.py"), "--check"],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
