"""The public API's types as a user's type checker sees them (dpfast ships ``py.typed``).

``mypy --strict`` on tests/typing/user_script.py (a user's script: calibration, accountants,
the budget, the re-exported events) must pass with ``--disallow-any-expr``: every value the script
gets from dpfast has a real type, so an annotation lost or widened to ``Any`` in the package
fails here.  ``--follow-imports=silent`` shows the package the way an installed one is shown:
its own errors are the ``mypy`` CI stage's business (``[tool.mypy]`` in pyproject.toml).
"""
import os
import subprocess
import sys

import pytest

pytest.importorskip("mypy")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(HERE, "user_script.py")


@pytest.mark.slow
@pytest.mark.source_tree
def test_user_script_type_checks_strictly():
    # (no cache: a stale one could hide a change)
    res = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--disallow-any-expr",
         "--no-incremental", "--cache-dir", os.devnull, os.path.relpath(SCRIPT, ROOT)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.slow
@pytest.mark.source_tree
def test_user_script_runs():
    # the typed calls are real ones: the script runs and its assertions hold
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
