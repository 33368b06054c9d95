"""Privacy accounting: RDP, privacy-loss distributions composed by FFT, f-DP / Gaussian DP.

See: :doc:`/theory/accounting` (and :doc:`/theory/erm` for objective perturbation).

* Events (:mod:`dpfast.accounting.events`; frozen, data-only): :class:`Gaussian`,
  :class:`Laplace`, :class:`RandomizedResponse`, :class:`PureDP` (:class:`ExponentialMechanism`,
  :class:`ReportNoisyMax`), :class:`ApproxDP`, :class:`FromPrivacyProfile`,
  :class:`FromDominatingPair`, :class:`ObjectivePerturbation`, and the composition nodes
  :class:`PoissonSampled`, :class:`SampledWithoutReplacement`, :class:`SelfComposed`,
  :class:`Composed`, :class:`Tuned`; :class:`Neighbours`; :func:`to_dict` / :func:`from_dict`.
* Accountants (:class:`PrivacyAccountant`: ``supports(event)``, ``compose(event, count)``,
  ``get_epsilon(delta)``, ``get_delta(epsilon)``, ``ledger``, ``copy()``, ``state_dict()``;
  :class:`UnsupportedEventError`): :class:`RDPAccountant`, :class:`PLDAccountant`, chosen by
  name with :func:`make_accountant`.  Per-event math is registered with
  ``functools.singledispatch``: :func:`dpfast.accounting.rdp.rdp_curve`,
  :func:`dpfast.accounting.pld.dominating_pairs`.
  ``ObjectivePerturbation`` and ``Tuned`` are registered next to their formulas, in
  :mod:`dpfast.accounting.objective_perturbation` and :mod:`dpfast.accounting.tuning` (imported
  here, so that every accountant knows every event).
* Calibration, the one home (:mod:`dpfast.accounting.calibration`): target epsilon -> noise
  parameter by :func:`calibrate_parameter` (any event family, any accountant) and
  :func:`calibrate_noise_multiplier` (DP-SGD); the Laplace and Gaussian closed forms, whose
  user-facing path is :mod:`dpfast.calibrate`.
* Conversions: :func:`rdp_to_epsilon`, :func:`rdp_to_delta`; GDP / f-DP in
  :mod:`dpfast.accounting.gdp`; private hyperparameter tuning in :mod:`dpfast.accounting.tuning`;
  :func:`calibrate_noise_multiplier`.
* Accountants are safe to share between threads; their process-wide caches are bounded in bytes
  (RDP curves 8 MiB, discretized PLDs 32 MiB): :func:`cache_info`, :func:`clear_cache`.

Neighbouring relation: ``neighbours="add_remove"`` is the default everywhere (the DP-SGD
convention); descriptions stated for ``"replace_one"`` say so.
"""
# objective_perturbation and tuning also register their events with the accountants
from dpfast.accounting import events, gdp, objective_perturbation, tuning  # noqa: F401
from dpfast.accounting._cache import cache_info, clear_cache
from dpfast.accounting.base import PrivacyAccountant, make_accountant
from dpfast.accounting.calibration import calibrate_noise_multiplier, calibrate_parameter

# (the star imports re-export their __all__ lists to type checkers, which do not read `[*events.__all__]`)
from dpfast.accounting.events import *  # noqa: F403
from dpfast.accounting.events import (
    ApproxDP,
    Composed,
    DpEvent,
    ExponentialMechanism,
    FromDominatingPair,
    FromPrivacyProfile,
    Gaussian,
    Laplace,
    Neighbours,
    ObjectivePerturbation,
    OneOf,
    PoissonSampled,
    PureDP,
    RandomizedResponse,
    ReportNoisyMax,
    SampledWithoutReplacement,
    SelfComposed,
    Tuned,
    UnsupportedEventError,
    event_neighbours,
    from_dict,
    to_dict,
)
from dpfast.accounting.gdp import *  # noqa: F403
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
from dpfast.accounting.pld import PLDAccountant
from dpfast.accounting.rdp import (
    DEFAULT_ORDERS,
    RDPAccountant,
    rdp_to_delta,
    rdp_to_epsilon,
    rdp_to_epsilon_classic,
)
from dpfast.accounting.tuning import *  # noqa: F403
from dpfast.accounting.tuning import (
    tnb_expected_count,
    tuning_rdp_poisson,
    tuning_rdp_truncated_negative_binomial,
)

__all__ = [
    *events.__all__,
    "PrivacyAccountant",
    "make_accountant",
    "RDPAccountant",
    "PLDAccountant",
    "DEFAULT_ORDERS",
    "rdp_to_epsilon",
    "rdp_to_epsilon_classic",
    "rdp_to_delta",
    "calibrate_parameter",
    "calibrate_noise_multiplier",
    "clear_cache",
    "cache_info",
    *gdp.__all__,
    *tuning.__all__,
]
