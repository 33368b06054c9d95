"""dpfast: fast, correct differential privacy.

The mechanisms are re-exported here (``dpfast.laplace``, ``dpfast.exponential_mechanism``,
...).  Subpackages, imported on first use so that ``import dpfast`` stays light:

* :mod:`dpfast.random` -- the ``rng=`` convention and :class:`~dpfast.random.SecureRandom`;
* :mod:`dpfast.calibrate` -- noise scales from (epsilon, delta, sensitivity) and back;
* :mod:`dpfast.mechanisms` -- the mechanisms themselves;
* :mod:`dpfast.accounting` -- RDP, PLD and GDP accountants, mechanism descriptions;
* :mod:`dpfast.budget` -- :class:`~dpfast.budget.PrivacyBudget`, one (epsilon, delta) budget that
  every release charges (``budget=``), and ``BudgetExceededError``;
* :mod:`dpfast.linear_model` -- private GLMs (output / objective perturbation, AMP);
* :mod:`dpfast.sgd` -- DP-SGD with native per-example clipping;
* :mod:`dpfast.public` -- private learners that use public unlabeled data;
* :mod:`dpfast.datasets` -- UCI Adult, shipped inside the package;
* :mod:`dpfast.tables` -- grouped statistics of pandas DataFrames (needs ``dpfast[tables]``);
* :mod:`dpfast.preprocessing` -- DP scalers and one-hot encoding, :func:`pipeline_event`;
* :mod:`dpfast.model_selection` -- private hyperparameter tuning (:class:`PrivateRandomSearch`).
"""
import importlib as _importlib
from typing import TYPE_CHECKING


from dpfast import calibrate, mechanisms, random
from dpfast.mechanisms import *  # noqa: F401,F403  (the public mechanisms, see mechanisms.__all__)
from dpfast.mechanisms import __all__ as _mechanism_names

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("accounting", "budget", "linear_model", "sgd", "public", "datasets", "tables",
                    "preprocessing", "model_selection", "audit")

# Estimators reachable from the top level, imported with their subpackage on first use.
_LAZY_NAMES = {
    "LogisticRegression": "linear_model",
    "LinearRegression": "linear_model",
    "DPSGDClassifier": "sgd",
    "DPSGDRegressor": "sgd",
    "DPMLPClassifier": "sgd",
    "PublicDataClassifier": "public",
    "PublicDataRegressor": "public",
    "RDPAccountant": "accounting",
    "PLDAccountant": "accounting",
    "PrivacyBudget": "budget",
    "BudgetExceededError": "budget",
    "pipeline_event": "preprocessing",
    "PrivateRandomSearch": "model_selection",
}

if TYPE_CHECKING:  # the lazy names, for type checkers (``py.typed``): what __getattr__ returns
    from dpfast import (  # noqa: F401
        accounting as accounting,
        audit as audit,
        budget as budget,
        datasets as datasets,
        linear_model as linear_model,
        model_selection as model_selection,
        preprocessing as preprocessing,
        public as public,
        sgd as sgd,
        tables as tables,
    )
    from dpfast.accounting import PLDAccountant as PLDAccountant, RDPAccountant as RDPAccountant
    from dpfast.budget import BudgetExceededError as BudgetExceededError, PrivacyBudget as PrivacyBudget
    from dpfast.linear_model import LinearRegression as LinearRegression, LogisticRegression as LogisticRegression
    from dpfast.model_selection import PrivateRandomSearch as PrivateRandomSearch
    from dpfast.preprocessing import pipeline_event as pipeline_event
    from dpfast.public import PublicDataClassifier as PublicDataClassifier, PublicDataRegressor as PublicDataRegressor
    from dpfast.sgd import DPMLPClassifier as DPMLPClassifier, DPSGDClassifier as DPSGDClassifier
    from dpfast.sgd import DPSGDRegressor as DPSGDRegressor

__all__ = ["__version__", "calibrate", "mechanisms", "random", *_mechanism_names,
           *_LAZY_SUBMODULES, *_LAZY_NAMES]


def __getattr__(name: str):  # (untyped: type checkers then treat the compiled extensions as Any)
    if name in _LAZY_SUBMODULES:
        return _importlib.import_module(f"dpfast.{name}")
    if name in _LAZY_NAMES:
        module = _importlib.import_module(f"dpfast.{_LAZY_NAMES[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'dpfast' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
