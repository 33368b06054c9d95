"""dpfast: fast, correct differential privacy.

The mechanisms are re-exported here (``dpfast.laplace``, ``dpfast.exponential_mechanism``,
...).  Subpackages and re-exported names are imported on first use (a module ``__getattr__``,
PEP 562), so that ``import dpfast`` stays light:

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
* :mod:`dpfast.naive_bayes` -- Gaussian naive Bayes from noisy sufficient statistics;
* :mod:`dpfast.model_selection` -- private hyperparameter tuning (:class:`PrivateRandomSearch`);
* :mod:`dpfast.tools` -- NumPy-like private statistics (``mean``, ``var``, ``quantile``, ``histogram``, ...).
* :mod:`dpfast.decomposition` -- private PCA (Analyze Gauss / Laplace covariance perturbation).
* :mod:`dpfast.torch` -- DP-SGD for your own PyTorch model, Opacus's names (needs ``dpfast[torch]``;
  ``import dpfast`` never imports torch).
* :mod:`dpfast.tree`, :mod:`dpfast.ensemble` -- private random decision trees and forests.
"""
import importlib as _importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("calibrate", "mechanisms", "random", "accounting", "budget", "linear_model", "sgd",
                    "public", "datasets", "tables", "preprocessing", "model_selection", "audit", "cluster", "tools",
                    "naive_bayes", "decomposition", "torch", "tree", "ensemble")

# dpfast.mechanisms.__all__, re-exported at the top level (tests/test_package.py checks that the
# two lists agree; they are spelled out so that ``import dpfast`` imports no mechanism).
_MECHANISM_NAMES = (
    "event_of", "laplace", "gaussian", "laplace_noise", "gaussian_noise", "randomized_response",
    "randomized_response_debias", "randomized_response_probabilities", "bernoulli_exp",
    "discrete_laplace", "discrete_gaussian", "discrete_laplace_mechanism",
    "discrete_gaussian_mechanism", "discrete_gaussian_sigma2", "discrete_gaussian_delta", "zcdp_delta",
    "snapping", "snapping_epsilon", "snapping_scale", "exponential_mechanism",
    "exponential_mechanism_stream", "ExponentialMechanismStream", "report_noisy_max", "top_k",
    "private_quantile", "private_median", "staircase", "staircase_gamma", "discrete_staircase",
    "discrete_staircase_r", "truncated_laplace",
    "folded_laplace", "bounded_laplace", "bounded_laplace_scale", "truncated_geometric", "folded_geometric",
    "bingham", "bingham_sample",
)

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
        calibrate as calibrate,
        datasets as datasets,
        decomposition as decomposition,
        linear_model as linear_model,
        mechanisms as mechanisms,
        model_selection as model_selection,
        preprocessing as preprocessing,
        public as public,
        random as random,
        sgd as sgd,
        tables as tables,
    )
    from dpfast.accounting import PLDAccountant as PLDAccountant, RDPAccountant as RDPAccountant
    from dpfast.budget import BudgetExceededError as BudgetExceededError, PrivacyBudget as PrivacyBudget
    from dpfast.linear_model import LinearRegression as LinearRegression, LogisticRegression as LogisticRegression
    from dpfast.mechanisms import *  # noqa: F403  (_MECHANISM_NAMES, which is mechanisms.__all__)
    from dpfast.model_selection import PrivateRandomSearch as PrivateRandomSearch
    from dpfast.preprocessing import pipeline_event as pipeline_event
    from dpfast.public import PublicDataClassifier as PublicDataClassifier, PublicDataRegressor as PublicDataRegressor
    from dpfast.sgd import (
        DPMLPClassifier as DPMLPClassifier,
        DPSGDClassifier as DPSGDClassifier,
        DPSGDRegressor as DPSGDRegressor,
    )

__all__ = ["__version__", *_LAZY_SUBMODULES, *_MECHANISM_NAMES, *_LAZY_NAMES]


def __getattr__(name: str):  # (untyped: type checkers then treat the compiled extensions as Any)
    if name in _LAZY_SUBMODULES:
        return _importlib.import_module(f"dpfast.{name}")
    if name in _LAZY_NAMES or name in _MECHANISM_NAMES:
        module = _importlib.import_module(f"dpfast.{_LAZY_NAMES.get(name, 'mechanisms')}")
        return getattr(module, name)
    raise AttributeError(f"module 'dpfast' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
