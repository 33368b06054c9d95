"""Differentially private preprocessing (issue 11): scalers whose statistics are released with
DP inside public bounds, a one-hot encoder with public or privately selected categories, and
:func:`pipeline_event`, the total privacy event of a fitted pipeline of dpfast steps.

Every ``fit`` accepts ``budget=`` (a :class:`dpfast.PrivacyBudget`) and charges its ``event_``
before drawing any noise; ``transform`` is post-processing.  Needs scikit-learn.
"""
from dpfast.preprocessing._encoders import OneHotEncoder
from dpfast.preprocessing._pipeline import pipeline_event
from dpfast.preprocessing._scalers import MinMaxScaler, StandardScaler

__all__ = ["StandardScaler", "MinMaxScaler", "OneHotEncoder", "pipeline_event"]
