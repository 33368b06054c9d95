"""Differentially private decision trees (issue 24): :class:`DecisionTreeClassifier`, one random
tree whose shape and splits are drawn from public randomness inside public feature bounds and
whose leaves' class counts (or majority labels) are released under epsilon-DP.

``fit`` accepts ``budget=`` (a :class:`dpfast.PrivacyBudget`) and charges its ``event_`` before
drawing anything random; ``predict`` / ``predict_proba`` / ``apply`` are post-processing.  The
data pass is native (``dpfast._trees``).  The ensemble is :class:`dpfast.ensemble.RandomForestClassifier`.
"""
from dpfast.tree._classes import DecisionTreeClassifier

__all__ = ["DecisionTreeClassifier"]
