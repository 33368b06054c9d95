"""Private model selection (issue 11): :class:`PrivateRandomSearch`, hyperparameter tuning with a
random number of private runs and a private validation score, charged by Papernot & Steinke's
(ICLR 2022) Renyi-DP bound.  Needs scikit-learn.

The event of a search over differing candidates, :class:`dpfast.accounting.OneOf`, lives in
:mod:`dpfast.accounting` (importable from here too)."""
from dpfast.accounting.events import OneOf  # noqa: F401  (documented under dpfast.accounting)
from dpfast.model_selection._search import PrivateRandomSearch, sample_run_count

__all__ = ["PrivateRandomSearch", "sample_run_count"]
