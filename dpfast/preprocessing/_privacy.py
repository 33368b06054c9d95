"""The accountant of the preprocessing / model-selection estimators.

The event classes live in :mod:`dpfast.accounting` and the budget in :mod:`dpfast.budget`; an
approximate-DP release here records its guarantee with
:meth:`dpfast._base.PrivateEstimator._record_accounted` (the accountant's epsilon of its event,
cached per event) under this accountant.
"""
from __future__ import annotations

__all__ = ["ACCOUNTANT"]

#: The accountant that states the guarantee of an approximate-DP release here (the default of
#: :func:`dpfast.accounting.make_accountant` and of :class:`dpfast.PrivacyBudget`).
ACCOUNTANT = "pld"
