"""Sizes shared by the gallery scripts: small when the docs are built in CI, the published sizes
with ``DPFAST_DOCS_FULL=1`` (the command that made the published figures is in
``docs/_static/figures/README.md``)."""
import os

FULL = os.environ.get("DPFAST_DOCS_FULL") == "1"


def size(small, full):
    """``full`` when DPFAST_DOCS_FULL=1, else ``small``."""
    return full if FULL else small


def save(fig, name):
    """Write ``fig`` to ``$DPFAST_FIGURES_DIR/<name>.png`` when that is set (the published figures
    in docs/_static/figures are made this way); the gallery captures figures by itself."""
    out = os.environ.get("DPFAST_FIGURES_DIR")
    if out:
        os.makedirs(out, exist_ok=True)
        fig.savefig(os.path.join(out, name + ".png"), dpi=110)
