"""Privacy accounting: RDP, privacy-loss distributions composed by FFT, f-DP / Gaussian DP.

Spec: ``accounting.md`` (and ``objective_perturbation.md`` for objective perturbation).

* Mechanism descriptions (small immutable objects): :class:`Gaussian`, :class:`Laplace`,
  :class:`RandomizedResponse`, :class:`PureDP` (:class:`ExponentialMechanism`,
  :class:`ReportNoisyMax`), :class:`PoissonSubsampledGaussian`,
  :class:`SampledWithoutReplacementGaussian`, :class:`FromPrivacyProfile`,
  :class:`FromDominatingPair`, and ``ObjectivePerturbation`` (module
  :mod:`dpfast.accounting.objective_perturbation`).
* Accountants with one interface, ``compose(description, count) / get_epsilon(delta) /
  get_delta(epsilon)``: :class:`RDPAccountant`, :class:`PLDAccountant`.
* Conversions: :func:`rdp_to_epsilon`, :func:`rdp_to_delta`; GDP / f-DP in
  :mod:`dpfast.accounting.gdp`; private hyperparameter tuning in :mod:`dpfast.accounting.tuning`;
  :func:`calibrate_noise_multiplier`.
* Accountants are safe to share between threads; their process-wide caches are bounded in bytes
  (RDP curves 8 MiB, discretized PLDs 32 MiB): :func:`cache_info`, :func:`clear_cache`.

Neighbouring relation: ``neighbours="add_remove"`` is the default everywhere (the DP-SGD
convention); descriptions stated for ``"replace_one"`` say so.
"""
from dpfast.accounting import _descriptions, gdp, tuning  # for their __all__ lists
from dpfast.accounting._descriptions import (
    ExponentialMechanism,
    FromDominatingPair,
    FromPrivacyProfile,
    Gaussian,
    Laplace,
    MechanismDescription,
    PoissonSubsampledGaussian,
    PureDP,
    RandomizedResponse,
    ReportNoisyMax,
    SampledWithoutReplacementGaussian,
)
from dpfast.accounting._cache import cache_info, clear_cache
from dpfast.accounting.calibration import calibrate_noise_multiplier
from dpfast.accounting.gdp import (
    CLTResult,
    approx_dp_tradeoff,
    clt_mu_poisson_gaussian,
    gaussian_tradeoff,
    gdp_compose,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
)
from dpfast.accounting.objective_perturbation import ObjectivePerturbation
from dpfast.accounting.pld import PLDAccountant
from dpfast.accounting.rdp import (
    DEFAULT_ORDERS,
    RDPAccountant,
    rdp_to_delta,
    rdp_to_epsilon,
    rdp_to_epsilon_classic,
)
from dpfast.accounting.tuning import (
    PrivateHyperparameterTuning,
    tnb_expected_count,
    tuning_rdp_poisson,
    tuning_rdp_truncated_negative_binomial,
)

__all__ = [
    *_descriptions.__all__,
    "ObjectivePerturbation",
    "RDPAccountant",
    "PLDAccountant",
    "DEFAULT_ORDERS",
    "rdp_to_epsilon",
    "rdp_to_epsilon_classic",
    "rdp_to_delta",
    "calibrate_noise_multiplier",
    "clear_cache",
    "cache_info",
    *gdp.__all__,
    *tuning.__all__,
]
