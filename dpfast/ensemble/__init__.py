"""Differentially private ensembles (issue 24): :class:`RandomForestClassifier`, a forest of
random trees (shape and splits from public randomness inside public feature bounds) whose
leaves are released by one epsilon-DP mechanism.

``fit`` accepts ``budget=`` (a :class:`dpfast.PrivacyBudget`) and charges its ``event_`` before
drawing anything random; ``predict`` / ``predict_proba`` / ``apply`` are post-processing.  The
data pass is native (``dpfast._trees``).
"""
from dpfast.ensemble._forest import RandomForestClassifier

__all__ = ["RandomForestClassifier"]
