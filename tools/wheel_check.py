"""Check an installed dpfast (a wheel, not the checkout): every native extension imports from
the installed package, then a fast subset of the test suite runs against it.

Used by cibuildwheel's test-command (pyproject.toml) on every platform and by ``.ci/wheel``.
Run it from a directory outside the source tree, so that ``import dpfast`` cannot pick up the
checkout::

    python tools/wheel_check.py TESTS_DIR [--all]

``--all`` runs the whole suite instead of the fast subset.
"""
import os
import sys

NATIVE = ["_core", "_chacha", "_exact", "_selection", "_pld", "_glm", "_clip", "_public"]

# A few seconds each: the package surface, every native kernel family, the accountants, one
# estimator fit, and the baseline-vs-AVX2 check of the GLM kernels.
FAST = [
    "test_package.py",
    "linear_model/test_solver_baseline_build.py",
    "test_random.py",
    "mechanisms/test_continuous.py",
    "mechanisms/test_discrete.py",
    "mechanisms/test_snapping.py",
    "mechanisms/test_selection.py",
    "mechanisms/test_randomized_response.py",
    "test_calibrate.py",
    "accounting/test_accounting_rdp.py",
    "accounting/test_accounting_pld.py",
    "sgd/test_sgd_clip.py",
    "public/test_public_oracles.py",
    "datasets/test_datasets.py",
]


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    tests = os.path.abspath(argv[0])
    import dpfast

    where = os.path.dirname(os.path.abspath(dpfast.__file__))
    print("dpfast", dpfast.__version__, "from", where)
    if os.path.exists(os.path.join(os.path.dirname(where), "setup.py")):
        print("wheel_check: dpfast was imported from a source tree, not from the installed wheel", file=sys.stderr)
        return 1
    # every extension module the wheel holds (at least the known ones), each imported
    import importlib.machinery

    found = sorted({f.split(".")[0] for f in os.listdir(where)
                    if f.startswith("_") and f.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))})
    missing = sorted(set(NATIVE) - set(found))
    if missing:
        print(f"wheel_check: the wheel lacks the extension modules {missing}", file=sys.stderr)
        return 1
    for name in found:
        mod = importlib.import_module("dpfast." + name)
        print(f"  dpfast.{name}: {os.path.basename(mod.__file__)}")
    import pytest

    paths = [tests] if "--all" in argv else [os.path.join(tests, f) for f in FAST]
    # rootdir and the cache go to a temporary place: the tests directory may be read-only
    # tests marked source_tree read the checkout (csrc/, tools/), which a wheel does not hold
    # (an explicit -m also runs the slow tests of these files, and --all every tier: tests/conftest.py)
    return pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", tests, "-m", "not source_tree", *paths])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
