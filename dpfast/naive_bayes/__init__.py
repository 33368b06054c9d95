"""Differentially private naive Bayes (issue 24): :class:`GaussianNB`, scikit-learn's Gaussian
naive Bayes with its per-class counts, means and variances released by one Laplace release of
noisy sufficient statistics inside public feature bounds.

``fit`` accepts ``budget=`` (a :class:`dpfast.PrivacyBudget`) and charges its ``event_`` before
drawing any noise; ``predict`` / ``predict_proba`` are post-processing.  Needs scikit-learn.
"""
from dpfast.naive_bayes._gaussian import GaussianNB

__all__ = ["GaussianNB"]
