"""The diffprivlib peer of the benchmark scripts: one import for all of them.

diffprivlib 0.6.6 is installed outside the venv (``pip install --target /tmp/dpl_site
diffprivlib==0.6.6``) and appended to ``sys.path``, after site-packages, so that NumPy and
scikit-learn are the venv's, the same for every library compared.  Its forest module imports
dtype constants of ``sklearn.tree._tree`` (``DOUBLE``, ``DTYPE``; ``NODE_DTYPE`` on some
versions) that newer scikit-learn no longer exports; they are supplied here for the import only
(none of the models the scripts run reads them).

Imported by module name (``from _peers import import_diffprivlib``), like ``_bench``: running a
script from benchmarks/ puts that folder first on ``sys.path``.
"""
from __future__ import annotations

import sys

import numpy as np

DPL_SITE = "/tmp/dpl_site"

# the names diffprivlib 0.6.6's forest module imports from sklearn.tree._tree, as it uses them
_SKLEARN_TREE_NAMES = {"DOUBLE": np.float64, "DTYPE": np.float32,
                       "NODE_DTYPE": np.dtype([("x", np.float64)])}


def import_diffprivlib(path: str | None = DPL_SITE, *, required: bool = True):
    """diffprivlib (with its ``mechanisms``, ``models`` and ``tools`` loaded), or None.

    ``path`` (default /tmp/dpl_site) is appended to ``sys.path`` unless it is there already or
    None (diffprivlib then comes from PYTHONPATH).  ``required=False``: a failed import prints
    ``diffprivlib unavailable: <reason>`` and returns None, so that a script runs its dpfast side
    alone; ``required=True`` lets the ImportError through.
    """
    if path is not None and path not in sys.path:
        sys.path.append(path)
    import sklearn.tree._tree as sk_tree

    for name, value in _SKLEARN_TREE_NAMES.items():
        if not hasattr(sk_tree, name):
            setattr(sk_tree, name, value)
    try:
        import diffprivlib
        import diffprivlib.mechanisms  # noqa: F401
        import diffprivlib.models  # noqa: F401
        import diffprivlib.tools  # noqa: F401
    except ImportError as exc:
        if required:
            raise
        print("diffprivlib unavailable:", exc)
        return None
    return diffprivlib
