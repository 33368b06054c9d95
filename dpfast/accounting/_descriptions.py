"""The old mechanism-description names, kept for one release.

The descriptions are now the data-only events of :mod:`dpfast.accounting.events`; the accounting
math lives in the accountants' registrations (:func:`dpfast.accounting.rdp.rdp_curve`,
:func:`dpfast.accounting.pld.dominating_pairs`).  :class:`PoissonSubsampledGaussian` and
:class:`SampledWithoutReplacementGaussian` build the composition-node form with a
``DeprecationWarning``; ``MechanismDescription`` is :class:`~dpfast.accounting.events.DpEvent`.
"""
from __future__ import annotations

import warnings

from dpfast.accounting.events import (
    DpEvent,
    ExponentialMechanism,
    FromDominatingPair,
    FromPrivacyProfile,
    Gaussian,
    Laplace,
    Neighbours,
    PoissonSampled,
    PureDP,
    RandomizedResponse,
    ReportNoisyMax,
    SampledWithoutReplacement,
)

__all__ = [
    "MechanismDescription",
    "Gaussian",
    "Laplace",
    "RandomizedResponse",
    "PureDP",
    "ExponentialMechanism",
    "ReportNoisyMax",
    "PoissonSubsampledGaussian",
    "SampledWithoutReplacementGaussian",
    "FromPrivacyProfile",
    "FromDominatingPair",
]

#: the old name of the event base class
MechanismDescription = DpEvent


def PoissonSubsampledGaussian(noise_multiplier: float, sample_rate: float,
                              neighbours="add_remove") -> PoissonSampled:
    """Deprecated: ``PoissonSampled(sample_rate, Gaussian(noise_multiplier))``.

    The Gaussian mechanism (noise multiplier z relative to the add/remove l2 sensitivity) on a
    Poisson subsample of rate q: the DP-SGD step (Mironov, Talwar & Zhang 2019)."""
    warnings.warn("PoissonSubsampledGaussian(z, q) is deprecated; use PoissonSampled(q, Gaussian(z))",
                  DeprecationWarning, stacklevel=2)
    if Neighbours.coerce(neighbours) != Neighbours.ADD_REMOVE:
        raise ValueError("PoissonSubsampledGaussian is analysed under add/remove neighbours only; for "
                         "replace-one use SampledWithoutReplacement (fixed-size batches)")
    return PoissonSampled(sample_rate, Gaussian(noise_multiplier))


def SampledWithoutReplacementGaussian(noise_multiplier: float, sample_rate: float,
                                      neighbours="replace_one") -> SampledWithoutReplacement:
    """Deprecated: ``SampledWithoutReplacement(sample_rate, Gaussian(z, neighbours="replace_one"))``.

    The Gaussian mechanism on a fixed-size uniform subsample, replace-one neighbours, z relative to
    the replace-one l2 sensitivity (Wang, Balle & Kasiviswanathan 2019)."""
    warnings.warn("SampledWithoutReplacementGaussian(z, q) is deprecated; use "
                  "SampledWithoutReplacement(q, Gaussian(z, neighbours='replace_one'))",
                  DeprecationWarning, stacklevel=2)
    if Neighbours.coerce(neighbours) != Neighbours.REPLACE_ONE:
        raise ValueError("SampledWithoutReplacementGaussian is analysed under replace-one neighbours only; "
                         "for add/remove use PoissonSampled")
    return SampledWithoutReplacement(sample_rate, Gaussian(noise_multiplier, neighbours=Neighbours.REPLACE_ONE))
