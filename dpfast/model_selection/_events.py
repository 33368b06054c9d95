"""``OneOf`` lives in :mod:`dpfast.accounting.events` (with its RDP registration in
:mod:`dpfast.accounting.rdp`), so that ``from_dict`` and budgets restore it without importing
this package; re-exported here, where the search uses it."""
from dpfast.accounting.events import OneOf

__all__ = ["OneOf"]
