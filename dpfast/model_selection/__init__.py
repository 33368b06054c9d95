"""Private model selection (issue 11): :class:`PrivateRandomSearch`, hyperparameter tuning with a
random number of private runs and a private validation score, charged by Papernot & Steinke's
(ICLR 2022) Renyi-DP bound.  Needs scikit-learn."""
from dpfast.model_selection._events import OneOf
from dpfast.model_selection._search import PrivateRandomSearch, sample_run_count

__all__ = ["PrivateRandomSearch", "OneOf", "sample_run_count"]
