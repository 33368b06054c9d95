"""The privacy event of a fitted scikit-learn composite of dpfast steps."""
from __future__ import annotations

from typing import Any

from dpfast.accounting.events import composed

__all__ = ["pipeline_event"]


def _collect(obj: Any, name: str, out: list) -> None:
    if obj is None or (isinstance(obj, str) and obj in ("passthrough", "drop")):
        return
    if hasattr(obj, "event_"):  # a dpfast release: its event covers everything it fitted inside
        out.append(obj.event_)
        return
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import FeatureUnion, Pipeline
    from sklearn.preprocessing import FunctionTransformer

    if isinstance(obj, Pipeline):
        for step_name, step in obj.steps:
            _collect(step, f"{name}{step_name}", out)
    elif isinstance(obj, ColumnTransformer):
        if not hasattr(obj, "transformers_"):
            raise ValueError(f"{name or 'the pipeline'} is not fitted")
        for step_name, step, _cols in obj.transformers_:
            _collect(step, f"{name}{step_name}", out)
    elif isinstance(obj, FeatureUnion):
        for step_name, step in obj.transformer_list:
            _collect(step, f"{name}{step_name}", out)
    elif isinstance(obj, FunctionTransformer):
        return  # a fixed per-row map: learns nothing from the data
    else:
        raise ValueError(
            f"step {name!r} ({type(obj).__name__}) carries no privacy event (no event_): if it was fitted "
            "on private data it learned from it without privacy; use dpfast.preprocessing or a dpfast "
            "estimator, or a stateless FunctionTransformer"
        )


def pipeline_event(pipeline: Any):
    """The composed privacy event of a fitted ``Pipeline`` / ``ColumnTransformer`` /
    ``FeatureUnion`` of dpfast steps (or of one fitted dpfast estimator).

    Every step that read the private data released something, and all of them saw the same
    rows, so the total is the sequential composition of the steps' ``event_`` (Dwork & Roth
    2014, Thm. 3.16; tighter through the PLD or RDP accountant): column subsets of one row are
    still one row, so a ``ColumnTransformer`` composes too.  Steps with ``event_ = None``
    (e.g. a :class:`~dpfast.preprocessing.OneHotEncoder` with public categories),
    ``"passthrough"``, ``"drop"`` and ``FunctionTransformer`` cost nothing; a step without
    ``event_`` (e.g. scikit-learn's own ``StandardScaler``) raises ``ValueError``, because it
    learned from the data without privacy.  A step with its own ``event_`` is not opened
    (a :class:`~dpfast.model_selection.PrivateRandomSearch`'s event covers all its runs).

    Returns the event (``dpfast.accounting.Composed`` for several steps), or None when no step
    costs anything.  ``dpfast.PrivacyBudget().charge(pipeline_event(p))`` or an accountant's
    ``compose`` then gives the total epsilon.  (When the steps were fitted with ``budget=``,
    the budget has already charged each of them.)
    """
    events: list = []
    _collect(pipeline, "", events)
    return composed(events)
