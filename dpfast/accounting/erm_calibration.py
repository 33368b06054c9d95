"""Choosing (sigma, lambda) from a target (epsilon, delta), and the privacy actually reached.

See :doc:`/theory/erm`, "Calibration used in the experiments (Section 5)": with
sigma_G the noise of the (epsilon, delta)-DP Gaussian mechanism of sensitivity C, set
sigma = f * sigma_G (f = 1.3) and take the smallest lambda for which the whole mechanism is
(epsilon, delta)-DP (the paper grows lambda by 5 % steps; dpfast searches with :func:`dpfast._safe_root.safe_root`,
which is equivalent and finds a smaller lambda).  Every choice (f, tau, sigma_out, C, sigma, lambda) can be
overridden; when lambda is given and too small the error states the smallest feasible one.

This module is part of the one calibration home, :mod:`dpfast.accounting` (with
:mod:`dpfast.accounting.calibration`): it holds only privacy figures and searches over them.

The release spine: every calibration ends in the release's event
(:func:`dpfast.accounting.objective_perturbation.amp_event`, or the Gaussian of output
perturbation), and the epsilon it reports is an accountant's value *for that event*:
``make_accountant(accountant).compose(event).get_epsilon(delta)`` with the accountant's default
configuration (``"rdp"``: :class:`~dpfast.accounting.RDPAccountant`, ``"pld"``:
:class:`~dpfast.accounting.PLDAccountant`; ``"best"`` computes both and keeps the smaller, naming
it).  The estimators record exactly that value, so ``epsilon_`` is what an accountant says of
``event_``.  All formulas are those of :mod:`dpfast.accounting.objective_perturbation`.

``method="objective"`` is calibrated by the same code (:func:`calibrate_objective` calls the
Algorithm 1 calibration with tau = 1e-8 and a tiny output noise from the data-independent rule
:func:`objective_output_multiplier`): Theorems 3.1-3.2 hold only for the exact minimiser, which
no solver returns, so the released point is certified as approximate minima perturbation.
:func:`objective_privacy` (exact minimiser) remains as the formula, not as a release path.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from dpfast._safe_root import NoSafeValue, safe_root
from dpfast._validation import check_delta, check_epsilon, check_int, check_nonnegative, check_positive, check_real
from dpfast.accounting import (
    ApproxDP,
    DpEvent,
    Gaussian,
    SelfComposed,
    make_accountant,
    objective_perturbation as op,
)
from dpfast.accounting.calibration import certified_gaussian_multiplier
from dpfast.accounting.rdp import DEFAULT_ORDERS
from dpfast.calibrate import gaussian_sigma

__all__ = [
    "PrivacyCalibration",
    "RDP_ORDERS",
    "amp_privacy",
    "objective_privacy",
    "calibrate_amp",
    "calibrate_objective",
    "objective_output_multiplier",
    "OBJECTIVE_CERTIFICATION_SHARE",
    "calibrate_output",
]

#: RDP orders of the RDP accountant the calibrations use: its default grid,
#: :data:`dpfast.accounting.rdp.DEFAULT_ORDERS` (the estimators report ``make_accountant("rdp")``'s
#: epsilon for their event, so the calibration must search with that very accountant).
RDP_ORDERS = DEFAULT_ORDERS

_ACCOUNTANTS = ("best", "pld", "rdp")
#: how (sigma, lambda) are certified: "accountant" (an accountant on the mechanism's event) or
#: "kifer" (Kifer et al. 2012's sufficient condition, method="objective" only, for comparison)
RULES = ("accountant", "kifer")


@dataclass(frozen=True, kw_only=True)
class PrivacyCalibration:
    """Parameters of a calibrated private ERM mechanism, its event and the privacy it reaches.

    ``event`` is the release's :mod:`dpfast.accounting` event (``count`` one-vs-rest models
    included); ``epsilon`` is ``make_accountant(accountant).compose(event).get_epsilon(delta)``
    (add/remove neighbours), ``accountant`` ("pld" or "rdp") names that accountant;
    ``epsilon_rdp`` / ``epsilon_pld`` are the two accountants' values (NaN when not computed).
    ``rule``: "accountant", or "kifer" (Kifer et al.'s sufficient condition, whose event is the
    ``ApproxDP`` it certifies).
    """

    method: str
    event: DpEvent
    epsilon: float
    delta: float
    accountant: str
    noise_std: float  # sigma of the objective's linear noise (0 for output perturbation)
    regularization: float  # lambda
    sigma_out: float  # output noise (inf when none)
    tau: float  # gradient-norm threshold the solver must reach
    lipschitz: float  # L (= C after clipping)
    smoothness: float  # beta
    count: int
    target_epsilon: float
    epsilon_rdp: float = math.nan
    epsilon_pld: float = math.nan
    noise_factor: float = math.nan  # f in sigma = f * sigma_G (NaN when sigma was given)
    rule: str = field(default="accountant")


def check_accountant(accountant: str, allowed=_ACCOUNTANTS) -> str:
    if accountant not in allowed:
        raise ValueError(f"accountant must be one of {allowed}, got {accountant!r}")
    return accountant


def _loss_constant(value, name: str, *, allow_zero: bool = False) -> float:
    """A loss constant (Lipschitz bound, smoothness): finite and > 0 (>= 0 with ``allow_zero``)."""
    if allow_zero and isinstance(value, (int, float, np.integer, np.floating)) and value == 0:
        return 0.0
    return check_positive(value, name, allow_array=False)


# --------------------------------------------------------------------------------------------
# privacy reached by given parameters
# --------------------------------------------------------------------------------------------
def event_epsilon(event, delta: float, accountant: str) -> float:
    """epsilon of ``event`` at ``delta`` by the accountant ``accountant`` ("pld" / "rdp") in its
    default configuration: the value the estimators record as ``epsilon_``."""
    return float(make_accountant(accountant).compose(event).get_epsilon(delta))


def _per_models(one, count: int):
    """The event of ``count`` runs on the same data (one-vs-rest)."""
    return one if count == 1 else SelfComposed(one, count)


def _report(accountant: str, e_rdp: float, e_pld: float) -> tuple[float, str, float, float]:
    """(epsilon, which, e_rdp, e_pld): the RDP bound if asked for (or smaller under "best"), else PLD."""
    if accountant == "rdp" or (accountant == "best" and e_rdp < e_pld):
        return e_rdp, "rdp", e_rdp, e_pld
    return e_pld, "pld", e_rdp, e_pld


def _event_privacy(event, delta: float, accountant: str) -> tuple[float, str, float, float]:
    e_rdp = event_epsilon(event, delta, "rdp") if accountant in ("best", "rdp") else math.nan
    e_pld = event_epsilon(event, delta, "pld") if accountant in ("best", "pld") else math.nan
    return _report(accountant, e_rdp, e_pld)


def amp_privacy(
    delta: float,
    *,
    noise_std: float,
    clip_norm: float,
    smoothness: float,
    regularization: float,
    tau: float,
    sigma_out: float,
    count: int = 1,
    accountant: str = "best",
) -> tuple[float, str, float, float]:
    """epsilon of ``count`` runs of Algorithm 1 at ``delta`` (Theorem 4.1 of Redberg, Koskela &
    Wang 2024): the accountants' values for the event
    :func:`dpfast.accounting.objective_perturbation.amp_event` (``count`` > 1: ``SelfComposed``).

    Returns ``(epsilon, which, epsilon_rdp, epsilon_pld)``: ``RDPAccountant`` and
    ``PLDAccountant`` (default configurations) on that event; ``accountant="best"`` computes
    both and reports the smaller.  ``tau = 0`` with ``sigma_out = inf`` is plain objective
    perturbation.
    """
    delta = check_delta(delta, allow_zero=False)
    count = check_int(count, "count", 1, integral_reals=True)
    check_accountant(accountant)
    event = _per_models(op.amp_event(noise_std, clip_norm, smoothness, regularization, tau, sigma_out), count)
    return _event_privacy(event, delta, accountant)


def objective_privacy(
    delta: float,
    *,
    noise_std: float,
    lipschitz: float,
    smoothness: float,
    regularization: float,
    count: int = 1,
    accountant: str = "best",
) -> tuple[float, str, float, float]:
    """epsilon of ``count`` runs of objective perturbation (exact minimiser) at ``delta``.

    The theorem's privacy of the *exact* minimiser (no release of dpfast uses it alone: see
    :func:`calibrate_objective`, which certifies the solver's error by Algorithm 1).

    ``count == 1``: the tight privacy profile of Theorem 3.1 is inverted exactly
    (:func:`dpfast.accounting.objective_perturbation.objective_perturbation_epsilon`, reported
    as ``"pld"``: it is the PLD bound without discretisation).  ``count > 1``: composed in
    ``PLDAccountant``.  RDP: Theorem 3.2 (``RDPAccountant``).  Same return convention as
    :func:`amp_privacy`.
    """
    delta = check_delta(delta, allow_zero=False)
    count = check_int(count, "count", 1, integral_reals=True)
    check_accountant(accountant)
    e_rdp = e_pld = math.nan
    event = _per_models(op.ObjectivePerturbation(noise_std, lipschitz, smoothness, regularization), count)
    if accountant in ("best", "rdp"):
        e_rdp = event_epsilon(event, delta, "rdp")
    if accountant in ("best", "pld"):
        if count == 1:
            e_pld = op.objective_perturbation_epsilon(delta, noise_std, lipschitz, smoothness, regularization)
        else:
            e_pld = event_epsilon(event, delta, "pld")
    return _report(accountant, e_rdp, e_pld)


# --------------------------------------------------------------------------------------------
# smallest lambda
# --------------------------------------------------------------------------------------------
def _smallest_feasible(ok, lo: float, start: float, rtol: float = 1e-4, max_value: float = 1e15, *,
                       step: float = math.log(2.0)) -> float:
    """Smallest x in (lo, max_value] (to relative ``rtol``, on the feasible side) with ok(x), for
    ok monotone in x: :func:`dpfast._safe_root.safe_root` on the predicate, bracketing from
    ``start``."""
    try:
        return safe_root(lambda x: not ok(x), start, rtol=rtol, lo=math.nextafter(lo, math.inf),
                         hi=max_value, smooth=False, step=step)
    except NoSafeValue as exc:
        raise ValueError(f"no regularization up to {max_value:g} gives the requested privacy") from exc


def _sigma_from_factor(epsilon, delta, lipschitz, count, noise_factor):
    # not float(): Fraction(10**400, 3) is a ValueError
    f = check_positive(check_real(noise_factor, "noise_factor"), "noise_factor", allow_array=False)
    try:
        root_count = math.sqrt(count)
    except OverflowError:  # an int beyond a double
        raise ValueError("count is too large (sqrt(count) must be a double)") from None
    # count-fold composition of a Gaussian of sensitivity C = one Gaussian of sensitivity sqrt(count) C
    return f * gaussian_sigma(epsilon, delta, lipschitz * root_count)


def _noise_std(epsilon, delta, lipschitz, count, noise_factor, noise_std) -> tuple[float, float]:
    """(sigma, f): ``noise_std`` when given (f = NaN), else f * sigma_G with f = ``noise_factor``."""
    if noise_std is None:
        return _sigma_from_factor(epsilon, delta, lipschitz, count, noise_factor), float(noise_factor)
    sigma = check_positive(check_real(noise_std, "noise_std"), "noise_std", allow_array=False)
    return sigma, math.nan


def _regularization(regularization, beta: float, privacy, smallest, epsilon, delta, sigma) -> float:
    """The smallest feasible lambda when ``regularization`` is None, else the given one, checked:
    it must exceed beta and reach ``epsilon`` (the error names the smallest feasible lambda)."""
    if regularization is None:
        return smallest()
    lam = check_real(regularization, "regularization")
    if not (lam > beta and math.isfinite(lam)):
        raise ValueError(f"regularization must exceed the smoothness beta={beta:.6g}, got {regularization!r}")
    if privacy(lam)[0] > epsilon:
        raise ValueError(
            f"regularization={lam:.6g} is too small for ({epsilon}, {delta})-DP with noise_std={sigma:.6g}; "
            f"the smallest feasible regularization is {smallest():.6g}"
        )
    return lam


@functools.lru_cache(maxsize=256)  # data-independent: cached per parameter set
def calibrate_amp(
    epsilon: float,
    delta: float,
    *,
    clip_norm: float,
    smoothness: float,
    tau: float = 0.01,
    sigma_out: float = 0.15,
    noise_factor: float = 1.3,
    noise_std: float | None = None,
    regularization: float | None = None,
    count: int = 1,
    accountant: str = "best",
) -> PrivacyCalibration:
    """Calibrate Algorithm 1 (approximate minima perturbation with gradient clipping).

    See :doc:`/theory/erm`, Section 5: sigma = ``noise_factor`` * sigma_G with
    sigma_G the (epsilon, delta)-DP Gaussian noise for sensitivity ``clip_norm`` (for ``count``
    one-vs-rest models: sensitivity sqrt(count) * clip_norm, the Gaussian composed count times), and
    lambda the smallest value (:func:`dpfast._safe_root.safe_root`, relative 1e-4, feasible side) for which the privacy of
    :func:`amp_privacy` is at most ``epsilon``.  ``noise_std`` / ``regularization`` override
    the two choices; a given ``regularization`` that is too small raises ``ValueError`` naming
    the smallest feasible one.
    """
    # not float(): a Fraction beyond a double
    sigma_out = check_positive(check_real(sigma_out, "sigma_out"), "sigma_out", allow_array=False)
    return _calibrate_amp(epsilon, delta, clip_norm=clip_norm, smoothness=smoothness, tau=tau, sigma_out=sigma_out,
                          out_multiplier=None, noise_factor=noise_factor, noise_std=noise_std,
                          regularization=regularization, count=count, accountant=accountant, method="amp")


def _calibrate_amp(epsilon, delta, *, clip_norm, smoothness, tau, sigma_out, out_multiplier, noise_factor, noise_std,
                   regularization, count, accountant, method) -> PrivacyCalibration:
    """Algorithm 1 calibration (see :func:`calibrate_amp`).  The output noise is ``sigma_out``
    when ``out_multiplier`` is None, else ``out_multiplier`` times the output step's
    sensitivity 2 tau / lambda at each candidate lambda (a fixed noise multiplier)."""
    epsilon = check_epsilon(epsilon, allow_array=False)
    delta = check_delta(delta, allow_zero=False)
    count = check_int(count, "count", 1, integral_reals=True)
    check_accountant(accountant)
    # not float(): Fraction(10**400, 3) must be a ValueError
    tau = check_positive(check_real(tau, "tau"), "tau", allow_array=False, hint="the gradient-norm threshold")
    beta = _loss_constant(smoothness, "smoothness", allow_zero=True)
    clip_norm = _loss_constant(clip_norm, "clip_norm")
    sigma, f = _noise_std(epsilon, delta, clip_norm, count, noise_factor, noise_std)

    def sigma_out_at(lam):
        return sigma_out if out_multiplier is None else out_multiplier * op.amp_output_sensitivity(tau, lam)

    memo = {}

    def event_at(lam):
        return _per_models(op.amp_event(sigma, clip_norm, beta, lam, tau, sigma_out_at(lam)), count)

    def privacy(lam):
        if lam not in memo:
            memo[lam] = _event_privacy(event_at(lam), delta, accountant)
        return memo[lam]

    def smallest():
        # feasibility: lambda -> inf removes the Jacobian cost (and, with a fixed sigma_out, the output step)
        big = 1e12 * max(beta, 1.0)
        quick = count == 1 and accountant in ("best", "pld")
        exact = lambda l: op.amp_delta(epsilon, sigma, clip_norm, beta, l, tau, sigma_out_at(l))
        if (exact(big) > delta) if quick else (privacy(big)[0] > epsilon):
            raise ValueError(
                f"Algorithm 1 with noise_std={sigma:.6g} cannot reach epsilon={epsilon} at delta={delta} "
                f"for any regularization; increase noise_factor (now {noise_factor}) or noise_std"
            )
        if quick:
            # exact 1-D composition (never larger than the PLD accountant's) as a fast guide,
            # then step up until the reported accountant accepts
            guide = _smallest_feasible(lambda l: exact(l) <= delta, beta, max(2.0 * beta, 1e-3))
            # the reported accountant's smallest lambda is >= the guide's: search from it, upwards
            # in steps of 0.2 % (relative 2e-3: the guide's own step); the guide itself when accepted
            try:
                return safe_root(lambda l: privacy(l)[0] > epsilon, guide, rtol=2e-3, lo=guide, hi=1e15,
                                 smooth=False, step=math.log1p(2e-3))
            except NoSafeValue as exc:
                raise ValueError("no regularization up to 1e15 gives the requested privacy") from exc
        if accountant == "rdp":
            return _smallest_feasible(lambda l: privacy(l)[0] <= epsilon, beta, max(2.0 * beta, 1e-3))
        # several models, "best" or "pld": bracket with the cheap RDP bound, refine coarsely
        rdp_only = lambda l: event_epsilon(event_at(l), delta, "rdp") <= epsilon
        try:
            upper = _smallest_feasible(rdp_only, beta, max(2.0 * beta, 1e-3))
        except ValueError:
            upper = big
        return _smallest_feasible(lambda l: privacy(l)[0] <= epsilon, beta, upper, 5e-3, max_value=upper)

    lam = _regularization(regularization, beta, privacy, smallest, epsilon, delta, sigma)
    eps, which, e_rdp, e_pld = privacy(lam)
    return PrivacyCalibration(method=method, event=event_at(lam), epsilon=eps, delta=delta, accountant=which,
                              noise_std=sigma, regularization=lam, sigma_out=sigma_out_at(lam), tau=tau,
                              lipschitz=float(clip_norm), smoothness=beta, count=count, target_epsilon=epsilon,
                              epsilon_rdp=e_rdp, epsilon_pld=e_pld, noise_factor=f)


#: share of the privacy budget that method="objective" spends on certifying the solver's error
OBJECTIVE_CERTIFICATION_SHARE = 1e-3


def objective_output_multiplier(epsilon: float, count: int = 1) -> float:
    """Noise multiplier z of the output step of method="objective" (data-independent rule).

    The output noise is sigma_out = z * 2 tau / lambda, z times the l2 sensitivity of the
    approximate minimiser (see :doc:`/theory/erm`, Algorithm 1 / Theorem 4.1).  The
    output step's term of the Theorem 4.1 RDP curve, composed ``count`` times, is then
    count * alpha / (2 z^2), whatever tau and lambda are; z is the smallest value for which it
    is at most :data:`OBJECTIVE_CERTIFICATION_SHARE` * epsilon at every RDP order used
    (alpha <= max(:data:`RDP_ORDERS`) = 1024): z = sqrt(count * 1024 / (2 * 1e-3 * epsilon)).
    So at fixed (sigma, lambda) the RDP bound grows by at most 0.1 % of the budget.
    """
    epsilon = check_epsilon(epsilon, allow_array=False)
    count = check_int(count, "count", 1, integral_reals=True)
    # (check_real: an int count beyond a double is a ValueError, not count * 1024.0's OverflowError;
    # for any other count the product is the same float)
    num, den = check_real(count, "count") * float(RDP_ORDERS.max()), 2.0 * OBJECTIVE_CERTIFICATION_SHARE * epsilon
    if not math.isfinite(num):
        raise ValueError("count is too large: count * max(RDP_ORDERS) must be a double")
    z = math.sqrt(num / den) if den > 0.0 else math.inf  # den underflows to 0 for epsilon < 2.5e-321
    if not math.isfinite(z):  # a tiny epsilon: the roots taken apart do not overflow
        z = math.sqrt(num / (2.0 * OBJECTIVE_CERTIFICATION_SHARE)) / math.sqrt(epsilon)
    if not math.isfinite(z):
        raise ValueError(f"epsilon={epsilon!r} is too small: the output step's noise multiplier overflows")
    return z


@functools.lru_cache(maxsize=256)  # data-independent: cached per parameter set
def calibrate_objective(
    epsilon: float,
    delta: float,
    *,
    lipschitz: float,
    smoothness: float,
    tau: float = 1e-8,
    sigma_out: float | None = None,
    noise_factor: float = 1.3,
    noise_std: float | None = None,
    regularization: float | None = None,
    count: int = 1,
    accountant: str = "best",
    rule: str = "accountant",
) -> PrivacyCalibration:
    """Calibrate objective perturbation as released by dpfast: solved to ||grad|| <= ``tau``
    (default 1e-8), plus a tiny Gaussian output noise that certifies the solver's error.

    The objective-perturbation theorems (see :doc:`/theory/erm`, "Privacy",
    Theorems 3.1-3.2) cover only the *exact* minimiser, which no solver returns.  dpfast
    therefore runs objective perturbation as Algorithm 1 (approximate minima perturbation,
    Theorem 4.1) with a tiny ``tau`` and accounts it exactly like :func:`calibrate_amp` (same
    code): the total (epsilon, delta) includes the output step.  Output noise (unless
    ``sigma_out`` is given): sigma_out = z * 2 tau / lambda with the data-independent noise
    multiplier z = :func:`objective_output_multiplier` (epsilon, count), chosen so that the
    output step's RDP term is at most 0.1 % of epsilon; lambda is then the smallest one for
    which the whole composition reaches (epsilon, delta).  ``accountant``: ``"best"``, ``"pld"``
    or ``"rdp"`` as in :func:`calibrate_amp`.  sigma_out is proportional to ``tau``: the rule is
    meant for a tiny one (for a large ``tau`` use :func:`calibrate_amp`).  A given ``sigma_out``
    is used as given (and charged).

    ``rule="kifer"``: Kifer et al.'s sufficient condition (Theorem 2.8; sigma and
    lambda = 2 beta / eps1 from their theorem, ignoring ``noise_factor``), for comparison with the
    literature, certified the same way by basic composition: each of the ``count`` models gets
    (eps1, delta1) = (1 - r)(epsilon, delta)/count for the objective perturbation and
    r (epsilon, delta)/count for the Gaussian output step of sensitivity 2 tau / lambda
    (analytic Gaussian sigma_out), r = :data:`OBJECTIVE_CERTIFICATION_SHARE` = 1e-3.  Its event
    is the ``ApproxDP(epsilon, delta)`` that condition and basic composition certify, accounted
    by ``PLDAccountant`` (the accountant of such events; ``accountant="rdp"`` is refused).
    """
    epsilon = check_epsilon(epsilon, allow_array=False)
    delta = check_delta(delta, allow_zero=False)
    count = check_int(count, "count", 1, integral_reals=True)
    check_accountant(accountant)
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if rule == "kifer" and accountant == "rdp":
        raise ValueError("rule='kifer' certifies an (epsilon, delta)-DP event, which the RDP accountant cannot "
                         "account (infinite Renyi divergence); use accountant='pld' or 'best'")
    tau = check_positive(check_real(tau, "tau"), "tau", allow_array=False, hint="the gradient-norm threshold")
    if sigma_out is not None:
        sigma_out = check_positive(check_real(sigma_out, "sigma_out"), "sigma_out", allow_array=False,
                                   hint="or None for the default rule")
    L, beta = _loss_constant(lipschitz, "lipschitz"), _loss_constant(smoothness, "smoothness", allow_zero=True)
    if rule == "kifer":
        r = OBJECTIVE_CERTIFICATION_SHARE
        e1, d1 = (1.0 - r) * epsilon / count, (1.0 - r) * delta / count
        sig_k, lam_k = op.kifer_objective_perturbation(e1, d1, L, beta)
        sigma = sig_k if noise_std is None else float(noise_std)
        lam = lam_k if regularization is None else float(regularization)
        if not op.kifer_is_private(e1, d1, sigma, L, beta, lam):
            raise ValueError(
                f"Kifer et al.'s condition needs noise_std >= {sig_k:.6g} and regularization >= {lam_k:.6g} "
                f"for ({e1:.6g}, {d1:.3g}) per model"
            )
        # the output step's own (r epsilon / count, r delta / count) share; a given sigma_out must cover it
        need = gaussian_sigma(r * epsilon / count, r * delta / count, op.amp_output_sensitivity(tau, lam))
        if sigma_out is not None and sigma_out < need:
            raise ValueError(f"with rule='kifer' sigma_out must be >= {need:.6g} (the Gaussian output step's "
                             f"share r={r} of the budget), got {sigma_out!r}")
        so = need if sigma_out is None else sigma_out
        # the whole release is (epsilon, delta)-DP by the condition and basic composition: that
        # certificate is its event (a per-model ApproxDP composed count times would be accounted
        # by PLD with a grid round-up above epsilon)
        event = ApproxDP(epsilon, delta)
        eps = event_epsilon(event, delta, "pld")
        return PrivacyCalibration(method="objective", event=event, epsilon=eps, delta=delta, accountant="pld",
                                  noise_std=sigma, regularization=lam, sigma_out=so, tau=tau, lipschitz=L,
                                  smoothness=beta, count=count, target_epsilon=epsilon, epsilon_pld=eps, rule="kifer")
    return _calibrate_amp(epsilon, delta, clip_norm=L, smoothness=beta, tau=tau, sigma_out=sigma_out,
                          out_multiplier=objective_output_multiplier(epsilon, count) if sigma_out is None else None,
                          noise_factor=noise_factor, noise_std=noise_std, regularization=regularization,
                          count=count, accountant=accountant, method="objective")


@functools.lru_cache(maxsize=256)  # data-independent: cached per (epsilon, delta, count, accountant)
def gaussian_multiplier(epsilon: float, delta: float, count: int, accountant: str) -> tuple[float, str]:
    """(z, which): the noise multiplier for which ``count`` Gaussian releases, one
    ``Gaussian(z, sqrt(count))`` event, are (epsilon, delta)-DP by the accountant (``"best"``: the
    smaller z of the two that certify one), verified by that accountant: z is
    :func:`dpfast.accounting.calibration.certified_gaussian_multiplier` (the smallest to relative
    1e-9 from the analytic Gaussian's multiplier of Balle & Wang 2018, up to 1e8)."""
    root = math.sqrt(count)
    names = ("pld", "rdp") if accountant == "best" else (accountant,)
    found = []
    for name in names:
        try:
            found.append((certified_gaussian_multiplier(epsilon, delta, root, name), name))
        except ValueError:
            continue
    if not found:
        raise ValueError(f"no Gaussian noise multiplier up to 1e8 reaches epsilon={epsilon} at delta={delta}")
    return min(found)


@functools.lru_cache(maxsize=256)  # data-independent: cached per parameter set
def calibrate_output(
    epsilon: float,
    delta: float,
    *,
    lipschitz: float,
    tau: float,
    regularization: float | None = None,
    sigma_out: float = 0.15,
    count: int = 1,
    accountant: str = "best",
) -> PrivacyCalibration:
    """Calibrate Gaussian output perturbation of an approximate minimiser.

    Sensitivity: :func:`dpfast.accounting.objective_perturbation.output_perturbation_sensitivity`,
    Delta_2 = (L + 2 tau)/lambda (Chaudhuri, Monteleoni & Sarwate 2011, Corollary 8, with the
    solver's error; add/remove).  The event is one ``Gaussian(z, sqrt(count) Delta_2)`` for the
    ``count`` one-vs-rest models, z the smallest noise multiplier (relative 1e-9) that the
    accountant (``"pld"``, ``"rdp"``; ``"best"``: the one giving the smaller z) certifies at
    (epsilon, delta); the noise is z * sqrt(count) Delta_2 on every coordinate.  Default lambda
    (data-independent heuristic): the one that makes that noise equal to ``sigma_out``.
    """
    epsilon = check_epsilon(epsilon, allow_array=False)
    delta = check_delta(delta, allow_zero=False)
    count = check_int(count, "count", 1, integral_reals=True)
    check_accountant(accountant)
    L = _loss_constant(lipschitz, "lipschitz")
    # not float(): Fraction(10**400, 3) must be a ValueError
    tau = check_nonnegative(check_real(tau, "tau"), "tau")
    try:
        root_count = math.sqrt(count)
    except OverflowError:  # an int beyond a double
        raise ValueError("count is too large (sqrt(count) must be a double)") from None
    sens = op.output_perturbation_sensitivity(L, tau, 1.0)  # lambda times the l2 sensitivity
    z, which = gaussian_multiplier(epsilon, delta, count, accountant)
    if regularization is None:
        so = check_positive(check_real(sigma_out, "sigma_out"), "sigma_out", allow_array=False)
        lam = sens * root_count * z / so
    else:
        lam = check_positive(check_real(regularization, "regularization"), "regularization", allow_array=False)
    total = root_count * op.output_perturbation_sensitivity(L, tau, lam) if 0.0 < lam < math.inf else math.nan
    sigma = z * total
    # A product beyond a double (lipschitz 1.797e308: lambda = inf, sigma = inf/inf = NaN) or a
    # noise that underflows to 0 is not a calibration: refuse it rather than release NaN or no noise.
    if not (0.0 < lam < math.inf and 0.0 < total < math.inf and 0.0 < sigma < math.inf):
        raise ValueError(f"the output-perturbation calibration is not representable in double precision "
                         f"(regularization {lam!r}, noise sigma {sigma!r}); rescale lipschitz, tau, "
                         "sigma_out or regularization")
    event = Gaussian(noise_multiplier=z, sensitivity=total)  # noise z * total on every coordinate
    eps = event_epsilon(event, delta, which)
    return PrivacyCalibration(method="output", event=event, epsilon=eps, delta=delta, accountant=which,
                              noise_std=0.0, regularization=lam, sigma_out=sigma, tau=tau, lipschitz=L,
                              smoothness=0.0, count=count, target_epsilon=epsilon,
                              **{f"epsilon_{which}": eps})
