"""scikit-learn style parameter handling without depending on scikit-learn.

``get_params`` / ``set_params`` follow scikit-learn's estimator contract (constructor
arguments stored unchanged under their own names), so ``sklearn.base.clone``, pipelines,
grid search and ``cross_val_score`` work when scikit-learn is installed.
"""
from __future__ import annotations

import inspect
from typing import Any


class ParamsMixin:
    """get_params/set_params/__repr__ from the constructor's keyword arguments."""

    _estimator_type: str | None = None

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        names = []
        for p in sig.parameters.values():
            if p.name == "self":
                continue
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"{cls.__name__}.__init__ must not take *args/**kwargs")
            names.append(p.name)
        return sorted(names)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters (scikit-learn contract); ``deep`` is accepted for compatibility."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any):
        """Set constructor parameters; unknown names raise ``ValueError``."""
        valid = set(self._param_names())
        for key, value in params.items():
            if key not in valid:
                raise ValueError(
                    f"invalid parameter {key!r} for {type(self).__name__}; valid parameters: {sorted(valid)}"
                )
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        sig = inspect.signature(type(self).__init__)
        parts = []
        for name in self._param_names():
            default = sig.parameters[name].default
            value = getattr(self, name)
            try:
                same = value is default or bool(value == default)
            except Exception:  # arrays and the like
                same = False
            if not same:
                parts.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "coef_")

    def __sklearn_tags__(self):
        # Called by scikit-learn only, so scikit-learn is importable here.
        from sklearn.utils import ClassifierTags, InputTags, RegressorTags, Tags, TargetTags

        return Tags(
            estimator_type=self._estimator_type,
            target_tags=TargetTags(required=True),
            classifier_tags=ClassifierTags(multi_class=True) if self._estimator_type == "classifier" else None,
            regressor_tags=RegressorTags() if self._estimator_type == "regressor" else None,
            input_tags=InputTags(sparse=True),
            non_deterministic=True,
        )
