"""Noise scales from (epsilon, delta, sensitivity), and back: the user-facing path of the Laplace
and Gaussian calibrations.

Their home is :mod:`dpfast.accounting.calibration` (with the accountant-driven searches
:func:`~dpfast.accounting.calibration.calibrate_parameter` and
:func:`~dpfast.accounting.calibration.calibrate_noise_multiplier`); this module re-exports the
closed forms.  See :doc:`/theory/mechanisms` (Samplers).
"""
from dpfast.accounting.calibration import (
    gaussian_delta,
    gaussian_epsilon,
    gaussian_log_delta,
    gaussian_sigma,
    laplace_epsilon,
    laplace_scale,
)

__all__ = [
    "laplace_scale",
    "laplace_epsilon",
    "gaussian_sigma",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_log_delta",
]
