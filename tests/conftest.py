"""Shared pytest configuration of the test suite.

Layout: ``tests/<subpackage>/`` mirrors ``dpfast/<subpackage>/``; the tests of top-level modules
(``dpfast/calibrate.py``, ``dpfast/random.py``, ...) and of the package as a whole live in
``tests/`` itself.  The directories are not packages (no ``__init__.py``) and pytest's default
``prepend`` import mode is used, so test basenames are unique across directories
(``tests/test_tooling.py`` checks it).

Helpers: one import convention.  A helper module (a name starting with ``_``) is imported by its
module name, never as ``tests.<...>`` (an installed top-level ``tests`` package, e.g. diffprivlib's,
would shadow it): helpers used by one directory live in that directory (pytest puts a test
module's directory first on ``sys.path``), helpers shared across directories live here in
``tests/`` (this conftest's directory, which pytest puts on ``sys.path`` before collecting).
No test module imports another test module, and none edits ``sys.path``.
"""
