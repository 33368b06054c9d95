"""Private linear models: output perturbation, objective perturbation and approximate minima
perturbation (Algorithm 1 of Redberg, Koskela & Wang 2024) on dpfast's native GLM solvers.

See :doc:`/theory/erm` and :doc:`/theory/erm` ("ERM mechanisms").
"""
from dpfast._solver import GLMResult, glm_loss_and_grad, loss_constants, minimize_glm
from dpfast.accounting.erm_calibration import (
    PrivacyCalibration,
    amp_privacy,
    calibrate_amp,
    calibrate_objective,
    calibrate_output,
    objective_output_multiplier,
    objective_privacy,
)
from dpfast.linear_model._estimators import LinearRegression, LogisticRegression
from dpfast.linear_model._losses import GLMConstants, glm_constants, margin_constants
from dpfast.linear_model._mechanisms import (
    PrivacyConvergenceError,
    PrivateGLMResult,
    approximate_minima_perturbation,
    objective_perturbation,
    output_perturbation,
    private_glm,
)

__all__ = [
    "LogisticRegression",
    "LinearRegression",
    "private_glm",
    "approximate_minima_perturbation",
    "objective_perturbation",
    "output_perturbation",
    "PrivateGLMResult",
    "PrivacyConvergenceError",
    "PrivacyCalibration",
    "calibrate_amp",
    "calibrate_objective",
    "calibrate_output",
    "amp_privacy",
    "objective_privacy",
    "objective_output_multiplier",
    "GLMConstants",
    "glm_constants",
    "margin_constants",
    "minimize_glm",
    "glm_loss_and_grad",
    "loss_constants",
    "GLMResult",
]
