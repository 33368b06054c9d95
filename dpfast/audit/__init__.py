"""Black-box privacy auditing of releases: :func:`audit` and adversarial :mod:`neighbours`.

``audit(release, neighbours, epsilon, delta)`` runs a release many times on each side of
neighbouring inputs, compares everything observable about the outputs that is not a released
number exactly (structure), and gives a certified lower bound on the epsilon the release
actually has (values).  See :func:`audit` for the method and its guarantee.
"""
from dpfast.audit import neighbours
from dpfast.audit._audit import AuditReport, PairResult, audit
from dpfast.audit._observe import observe

__all__ = ["audit", "AuditReport", "PairResult", "observe", "neighbours"]
