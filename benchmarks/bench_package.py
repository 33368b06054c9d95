"""Cost of ``import dpfast`` in a fresh interpreter (paid once per process).

Peer: a bare interpreter start (``python -c pass``); the difference is dpfast's import.
"""
import subprocess
import sys


def _run(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True)


def test_interpreter_start(benchmark):
    benchmark(_run, "pass")


def test_import_dpfast(benchmark):
    benchmark(_run, "import dpfast")
