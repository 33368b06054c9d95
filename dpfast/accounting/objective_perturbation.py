"""Privacy of Gaussian objective perturbation and of approximate minima perturbation.

See: :doc:`/theory/erm` (Redberg, Koskela & Wang 2024, arXiv 2401.00583),
sections "Privacy" and "Algorithm 1".  Every privacy formula of objective perturbation in
dpfast lives in this module; the estimators of :mod:`dpfast.linear_model` call it.

Setting (Redberg, Koskela & Wang 2024, Section 2.2): add/remove neighbours; a GLM loss l(theta; z) = f(x^T theta; y)
convex in theta, with ||grad l|| <= L (``lipschitz``) and 0 <= f'' ||x||^2 <= beta
(``smoothness``); the objective is

    sum_z l(theta; z) + (lambda/2) ||theta||^2 + b^T theta,   b ~ N(0, sigma^2 I_d),

and lambda (``regularization``) must exceed beta.  The tight bounds hold for GLM losses only
(their Theorems 3.1 and 3.2 assume a GLM loss), so dpfast offers them for no other loss.

Notation: c_J = -log(1 - beta/lambda) (the Jacobian cost) and s = L/sigma.  Both theorems bound
the privacy loss random variable by the shifted half-normal

    Y = c_J + s^2/2 + |G|,   G ~ N(0, s^2).

Readings of the paper's text (both follow its appendix; Theorem 3.1, :doc:`/theory/erm` "Privacy"):

* eps~ = eps - |log(1 - beta/lambda)| (the main text prints eps - log(1 - beta/lambda), with the
  wrong sign);
* in the case eps < c_J + s^2/2 the profile is 1 - 2 e^(t + s^2/2) Phi(-s), derived from Y (the
  main text prints H_{e^(L^2/sigma^2)}).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import integrate, special

from dpfast._safe_root import NoSafeValue, safe_root, smallest_safe_root
from dpfast._validation import check_delta, check_nonnegative, check_positive, check_real
from dpfast.accounting import _discretize
from dpfast.accounting.calibration import gaussian_log_delta
from dpfast.accounting.events import (
    Composed,
    Gaussian,
    ObjectivePerturbation,
    check_objective_perturbation_constants,
    check_smoothness,
)
from dpfast.accounting.pld import dominating_pairs
from dpfast.accounting.rdp import check_orders, rdp_curve

__all__ = [
    "jacobian_cost",
    "objective_perturbation_delta",
    "objective_perturbation_epsilon",
    "objective_perturbation_rdp",
    "objective_perturbation_min_regularization",
    "kifer_objective_perturbation",
    "kifer_is_private",
    "amp_output_sensitivity",
    "amp_event",
    "amp_delta",
    "amp_epsilon",
    "output_perturbation_sensitivity",
    "ObjectivePerturbation",
]


def jacobian_cost(smoothness: float, regularization: float) -> float:
    """c_J = |log(1 - beta/lambda)| = -log(1 - beta/lambda), the Jacobian (determinant) cost.

    See :doc:`/theory/erm`, "Privacy".  Requires lambda > beta >= 0.
    """
    beta = float(smoothness)
    lam = float(regularization)
    if not (beta >= 0 and lam > beta and math.isfinite(lam)):
        raise ValueError(f"need 0 <= smoothness < regularization, got beta={smoothness!r}, lambda={regularization!r}")
    return -math.log1p(-beta / lam)


# --------------------------------------------------------------------------------------------
# privacy profile (Theorem 3.1)
# --------------------------------------------------------------------------------------------
def _log_delta_op(epsilon: float, s: float, c_j: float) -> float:
    """log delta(eps) of the shifted half-normal bound (closed form of Theorem 3.1)."""
    eps_t = epsilon - c_j  # eps~ (appendix reading)
    t = eps_t - 0.5 * s * s
    if t >= 0:
        # 2 [Phi(-t/s) - e^(t + s^2/2) Phi(-t/s - s)] = 2 H_{e^eps~}(N(L, sigma^2) || N(0, sigma^2))
        return math.log(2.0) + gaussian_log_delta(s, eps_t)
    # 1 - 2 e^(t + s^2/2) Phi(-s), computed as log1p(-exp(...)) for accuracy.
    log_term = math.log(2.0) + eps_t + float(special.log_ndtr(-s))
    return math.log(-math.expm1(log_term)) if log_term < 0 else -math.inf


def _exp_up(log_value: float) -> float:
    """exp rounded up by one double (exp's error is below one ulp, also among subnormals): a
    positive delta never underflows to 0, so it stays an upper bound (and >= the Gaussian
    mechanism's delta, Lemma 3.4 of Redberg, Koskela & Wang 2024)."""
    if log_value == -math.inf:
        return 0.0
    return math.nextafter(math.exp(log_value), math.inf)


def _profile(eps: np.ndarray, s: float, c_j: float):
    """delta(eps) of Theorem 3.1 elementwise (0 at eps = inf, at most 1); a float for a 0-d eps."""
    out = np.array([_exp_up(_log_delta_op(float(e), s, c_j)) if e < math.inf else 0.0 for e in eps.ravel()])
    out = np.minimum(out, 1.0)
    return float(out[0]) if eps.ndim == 0 else out.reshape(eps.shape)


def objective_perturbation_delta(
    epsilon,
    noise_std: float,
    lipschitz: float,
    smoothness: float,
    regularization: float,
):
    """Tight privacy profile delta(epsilon) of Gaussian objective perturbation (Theorem 3.1).

    Objective perturbation of a GLM loss with ||grad l|| <= ``lipschitz`` (L), Hessian bound
    ``smoothness`` (beta), ridge ``regularization`` (lambda > beta) and linear noise
    b ~ N(0, ``noise_std``^2 I) is (epsilon, delta(epsilon))-DP under add/remove neighbours, for
    every epsilon >= 0, with (t = eps - c_J - s^2/2, s = L/sigma, c_J = -log(1 - beta/lambda))

        t >= 0:  delta = 2 [Phi(-t/s) - e^(t + s^2/2) Phi(-t/s - s)]
        t <  0:  delta = 1 - 2 e^(t + s^2/2) Phi(-s),

    i.e. E[(1 - e^(eps - Y))_+] for Y = c_J + s^2/2 + |N(0, s^2)| (see
    :doc:`/theory/erm`, "Privacy (Theorem 3.1)"; the appendix's reading of eps~).
    The exact minimiser of the perturbed objective is assumed (use approximate minima
    perturbation, :func:`amp_delta`, for a solver's output).

    ``epsilon`` may be a scalar or an array; the result has its shape.
    """
    sigma, L, beta, lam = check_objective_perturbation_constants(noise_std, lipschitz, smoothness, regularization)
    eps = np.asarray(epsilon, dtype=np.float64)
    if np.isnan(eps).any():
        raise ValueError("epsilon must not be NaN")
    return _profile(eps, L / sigma, jacobian_cost(beta, lam))


def objective_perturbation_epsilon(
    delta: float,
    noise_std: float,
    lipschitz: float,
    smoothness: float,
    regularization: float,
) -> float:
    """Smallest epsilon >= 0 with :func:`objective_perturbation_delta` (epsilon) <= delta.

    Inverse of the tight privacy profile of Theorem 3.1 (see :doc:`/theory/erm`),
    solved by :func:`dpfast._safe_root.safe_root` (relative tolerance 1e-13): delta(result) <= delta
    holds exactly as evaluated.
    """
    sigma, L, beta, lam = check_objective_perturbation_constants(noise_std, lipschitz, smoothness, regularization)
    delta = check_delta(delta, allow_zero=False)
    s = L / sigma
    if not s <= 1e150:  # epsilon >= s^2/2 > 1e299 (or s overflowed): no useful finite answer
        raise ValueError(f"lipschitz / noise_std = {L!r} / {sigma!r} is too large (epsilon would exceed "
                         "1e299); noise_std must be > lipschitz * 1e-150")
    c_j = jacobian_cost(beta, lam)
    target = math.log(delta)
    return smallest_safe_root(lambda e: _log_delta_op(e, s, c_j) - target,  # non-increasing in e
                              max(1.0, 2.0 * (c_j + s * s)), xtol=1e-14, rtol=1e-13)


# --------------------------------------------------------------------------------------------
# RDP (Theorem 3.2)
# --------------------------------------------------------------------------------------------
def _check_orders(orders) -> np.ndarray:
    """:func:`dpfast.accounting.rdp.check_orders` (the one validator of RDP orders), keeping a
    scalar order 0-d so that the curves below return a float for it."""
    a = check_orders(orders)
    return a.reshape(()) if orders is not None and np.ndim(orders) == 0 else a


def _log_mgf_abs_normal_over(orders: np.ndarray, s: float) -> np.ndarray:
    """(1/(a-1)) log E[e^((a-1)|X|)], X ~ N(0, s^2) = (1/(a-1)) [log 2 + k^2 s^2/2 + log Phi(k s)], k = a-1."""
    k = orders - 1.0
    return (math.log(2.0) + 0.5 * k * k * s * s + special.log_ndtr(k * s)) / k


def objective_perturbation_rdp(
    orders,
    noise_std: float,
    lipschitz: float,
    smoothness: float,
    regularization: float,
):
    """RDP curve of Gaussian objective perturbation (Theorem 3.2), for orders alpha > 1:

        eps(alpha) = c_J + s^2/2 + (1/(alpha-1)) [log 2 + (alpha-1)^2 s^2/2 + log Phi((alpha-1) s)],

    with s = L/sigma and c_J = -log(1 - beta/lambda) (see :doc:`/theory/erm`,
    "RDP (Theorem 3.2)"; add/remove neighbours, GLM losses, exact minimiser).
    Returns a float for a scalar order and an array otherwise.
    """
    sigma, L, beta, lam = check_objective_perturbation_constants(noise_std, lipschitz, smoothness, regularization)
    a = _check_orders(orders)
    s = L / sigma
    out = jacobian_cost(beta, lam) + 0.5 * s * s + _log_mgf_abs_normal_over(a, s)
    return float(out) if a.ndim == 0 else out


def objective_perturbation_min_regularization(
    epsilon: float,
    delta: float,
    noise_std: float,
    lipschitz: float,
    smoothness: float,
) -> float:
    """Smallest lambda for which objective perturbation with ``noise_std`` is (epsilon, delta)-DP.

    By the tight profile of Theorem 3.1 (see :doc:`/theory/erm`): delta(eps) is
    increasing in c_J = -log(1 - beta/lambda), so the answer is the smallest double lambda > beta
    at which the profile, as evaluated, meets delta (:func:`dpfast._safe_root.safe_root`).  Raises ``ValueError`` when even
    lambda -> infinity (c_J = 0) is not enough, i.e. when ``noise_std`` is too small.
    """
    sigma = check_positive(noise_std, "noise_std", allow_array=False)
    L = check_positive(lipschitz, "lipschitz", allow_array=False)
    beta = check_smoothness(smoothness)
    epsilon = check_positive(epsilon, "epsilon", allow_array=False)
    delta = check_delta(delta, allow_zero=False)
    s = L / sigma
    target = math.log(delta)
    # delta depends on (eps, c_J) only through eps - c_J
    g = lambda c: _log_delta_op(epsilon - c, s, 0.0) - target  # increasing in c
    if g(0.0) > 0:
        raise ValueError(
            f"objective perturbation with noise_std={sigma!r} and lipschitz={L!r} cannot be "
            f"({epsilon}, {delta})-DP for any regularization (even lambda -> inf has delta = "
            f"{math.exp(_log_delta_op(epsilon, s, 0.0)):.3g}); increase noise_std"
        )
    if beta == 0:
        return 0.0
    # lambda > beta strictly (c_J finite); delta decreases as lambda grows (c_J = -log(1 - beta/lambda))
    try:
        return safe_root(lambda lam: _log_delta_op(epsilon - jacobian_cost(beta, lam), s, 0.0) - target,
                         min(2.0 * beta, 1e308), rtol=0.0, lo=math.nextafter(beta, math.inf))
    except NoSafeValue:
        raise ValueError(
            f"objective perturbation with noise_std={sigma!r} and lipschitz={L!r} meets ({epsilon}, {delta})-DP "
            f"only in the limit regularization -> inf (or beyond the largest double for smoothness={beta!r}); "
            "increase noise_std or rescale the loss"
        ) from None


# --------------------------------------------------------------------------------------------
# Kifer et al. 2012 (for comparison)
# --------------------------------------------------------------------------------------------
def kifer_objective_perturbation(epsilon: float, delta: float, lipschitz: float, smoothness: float):
    """Kifer, Smith & Thakurta 2012, Theorem 2.8: the parameters it needs.

    Objective perturbation is (epsilon, delta)-DP when lambda >= 2 beta / epsilon and
    sigma^2 >= L^2 (8 log(2/delta) + 4 epsilon) / epsilon^2 (see :doc:`/theory/erm`,
    "Kifer et al. 2012"; for comparison with the tight bounds only).
    Returns ``(noise_std, regularization)``, the smallest values the theorem allows.
    """
    epsilon = check_positive(epsilon, "epsilon", allow_array=False)
    delta = check_delta(delta, allow_zero=False)
    L = check_positive(lipschitz, "lipschitz", allow_array=False)
    beta = check_smoothness(smoothness)
    sigma = L * math.sqrt(8.0 * math.log(2.0 / delta) + 4.0 * epsilon) / epsilon
    return sigma, 2.0 * beta / epsilon


def kifer_is_private(
    epsilon: float, delta: float, noise_std: float, lipschitz: float, smoothness: float, regularization: float
) -> bool:
    """Whether Kifer et al.'s sufficient condition certifies (epsilon, delta)-DP (Kifer, Smith &
    Thakurta 2012, as restated in Theorem 2.8 of Redberg, Koskela & Wang 2024)."""
    sigma_min, lam_min = kifer_objective_perturbation(epsilon, delta, lipschitz, smoothness)
    return bool(noise_std >= sigma_min and regularization >= lam_min)


# --------------------------------------------------------------------------------------------
# Approximate minima perturbation with gradient clipping (Algorithm 1, Theorem 4.1)
# --------------------------------------------------------------------------------------------
def _check_amp(noise_std, clip_norm, smoothness, regularization, tau, sigma_out):
    sigma, C, beta, lam = check_objective_perturbation_constants(noise_std, clip_norm, smoothness, regularization)
    tau = check_nonnegative(check_real(tau, "tau"), "tau", hint="the gradient-norm threshold")
    so = check_positive(check_real(sigma_out, "sigma_out"), "sigma_out", allow_array=False, allow_inf=True,
                        hint="use inf for no output noise with tau=0")
    if tau > 0 and math.isinf(so):
        raise ValueError("tau > 0 needs finite output noise sigma_out (Algorithm 1)")
    return sigma, C, beta, lam, tau, so


def amp_output_sensitivity(tau: float, regularization: float) -> float:
    """l2 sensitivity 2 tau / lambda of the approximate minimiser (Redberg, Koskela & Wang 2024,
    Theorem 4.1).

    Strong convexity turns ||grad|| <= tau into ||theta~ - theta^P|| <= tau / lambda on each of
    the two neighbouring datasets.
    """
    return 2.0 * float(tau) / float(regularization)


def gaussian_output_event(sigma_out: float, sensitivity: float):
    """The Gaussian output step as an event: noise ``sigma_out`` on a vector of l2 ``sensitivity``.

    A noise multiplier beyond 1e100 (or overflowing, for a subnormal sensitivity) is accounted as
    1e100: a smaller multiplier only over-states the (already negligible) privacy loss."""
    z = float(sigma_out) / float(sensitivity)
    return Gaussian(noise_multiplier=z if z <= 1e100 else 1e100, sensitivity=float(sensitivity))


def amp_event(noise_std: float, clip_norm: float, smoothness: float, regularization: float, tau: float,
              sigma_out: float):
    """The event of one run of Algorithm 1 (approximate minima perturbation with gradient clipping).

    Theorem 4.1 of Redberg, Koskela & Wang (2024) (see :doc:`/theory/erm`): objective
    perturbation with L = C (the ``ObjectivePerturbation`` event, Theorems 3.1/3.2) composed with
    the Gaussian output step of sensitivity 2 tau / lambda (:func:`amp_output_sensitivity`) and
    noise ``sigma_out``: ``Composed((ObjectivePerturbation, Gaussian))``.  Its RDP curve and PLD
    are the accountants' (registered per event); ``tau = 0`` (or a 2 tau / lambda that underflows
    to 0: that step then leaks nothing) is plain objective perturbation.
    """
    sigma, C, beta, lam, tau, so = _check_amp(noise_std, clip_norm, smoothness, regularization, tau, sigma_out)
    op = ObjectivePerturbation(sigma, C, beta, lam)
    sens = amp_output_sensitivity(tau, lam) if tau > 0 else 0.0
    return op if sens == 0 else Composed((op, gaussian_output_event(so, sens)))


def output_perturbation_sensitivity(lipschitz: float, tau: float, regularization: float) -> float:
    """l2 sensitivity (L + 2 tau) / lambda of a certified approximate minimiser (add/remove).

    Chaudhuri, Monteleoni & Sarwate (2011), Corollary 8 and its proof: the exact minimisers of
    the lambda-strongly convex objectives sum l + (lambda/2)||theta||^2 of neighbouring data sets
    are within L / lambda (L the per-example gradient bound); each approximate minimiser with
    ||grad F|| <= tau is within tau / lambda of its exact one (strong convexity), hence
    (L + 2 tau) / lambda (see :doc:`/theory/erm`).  ``ValueError`` when L + 2 tau overflows.
    """
    L = check_positive(lipschitz, "lipschitz", allow_array=False)
    tau = check_nonnegative(check_real(tau, "tau"), "tau")
    num = L + 2.0 * tau
    if not math.isfinite(num):
        raise ValueError("lipschitz + 2 * tau overflows a double; rescale the loss")
    return num / float(regularization)


def _gaussian_hockey(x: float, mu: float) -> float:
    """E[(1 - e^(x - Z))_+], Z ~ N(mu^2/2, mu^2) (Gaussian PLD): valid for every real x.

    mu = 0 (Z = 0: a step that releases nothing about the data): max(0, 1 - e^x).  A mu that
    underflowed to 0 is < 1e-307; since dH_mu/dmu = phi(mu/2 - x/mu) <= phi(0) < 1/2, adding
    1e-307 keeps the value an upper bound for it."""
    if mu == 0.0:
        return (-math.expm1(x) if x < 0 else 0.0) + 1e-307
    if x >= 0:
        return math.exp(gaussian_log_delta(mu, x))
    # x < 0: the value is >= 1 - e^x > 0, no cancellation to fear
    return max(float(special.ndtr(mu / 2.0 - x / mu) - math.exp(x) * special.ndtr(-mu / 2.0 - x / mu)), 0.0)


def amp_delta(
    epsilon: float,
    noise_std: float,
    clip_norm: float,
    smoothness: float,
    regularization: float,
    tau: float,
    sigma_out: float,
) -> float:
    """delta(epsilon) of Algorithm 1 by composing the two privacy-loss distributions exactly.

    The privacy loss of objective perturbation is dominated by Y1 = c_J + s^2/2 + s|g|
    (s = C/sigma, g ~ N(0, 1); Redberg, Koskela & Wang 2024, Theorem 3.1) and that of the output step by the Gaussian
    loss Y2 ~ N(mu^2/2, mu^2), mu = (2 tau/lambda)/sigma_out (Theorem 4.1); so

        delta(eps) = E[(1 - e^(eps - Y1 - Y2))_+] = integral_0^inf 2 phi(u) H_mu(eps - c_J - s^2/2 - s u) du,

    H_mu(x) = Phi(mu/2 - x/mu) - e^x Phi(-mu/2 - x/mu) the Gaussian profile extended to all real x.
    The integral is evaluated with ``scipy.integrate.quad`` (breakpoints at the knot
    eps - c_J - s^2/2 - s u = 0 and around H_mu's transition of width ~mu there) and rounded
    up by the integration error (quad's estimate, at least 1e-10 relative),
    so the result is an upper bound on delta; a 1-D exact composition that is tighter than
    any discretised PLD.  ``tau = 0`` gives
    :func:`objective_perturbation_delta`.
    """
    sigma, C, beta, lam, tau, so = _check_amp(noise_std, clip_norm, smoothness, regularization, tau, sigma_out)
    eps = float(epsilon)
    if math.isnan(eps):
        raise ValueError("epsilon must not be NaN")
    if tau == 0:
        return objective_perturbation_delta(eps, sigma, C, beta, lam)
    s = C / sigma
    mu = amp_output_sensitivity(tau, lam) / so
    a = jacobian_cost(beta, lam) + 0.5 * s * s
    phi = lambda u: math.exp(-0.5 * u * u) * 0.7978845608028654  # 2 * standard normal density
    f = lambda u: phi(u) * _gaussian_hockey(eps - a - s * u, mu)
    # The integrand changes behaviour where eps - a - s u crosses 0: for small mu, H_mu has a
    # transition of width ~mu there (a kink as mu -> 0), which quad must see as a breakpoint
    # region, not just a point (missing it under-reported delta by ~mu^2 relative).
    knot = max((eps - a) / s, 0.0)
    upper = knot + 40.0
    w = 12.0 * mu / s  # H_mu's transition: |x| < 12 mu covers all but e^-72 of it
    if knot > 0.0 and 12.0 * mu < 1e-6 * abs(eps - a):
        # A transition far narrower than eps - a: near the knot eps - a - s u cancels to ~ulp(eps - a),
        # noise comparable with mu (quad: "extremely bad integrand behavior", e.g. lambda = 1e12 at
        # eps = 64).  Integrate in v = u - knot instead, with x = r - s v and r = eps - a - s knot
        # computed once: x is then exact to ~ulp(s v) near v = 0.
        r = (eps - a) - s * knot
        g = lambda v: phi(knot + v) * _gaussian_hockey(r - s * v, mu)
        val, err = 0.0, 0.0
        # the wide pieces first; the two transition pieces (width w, integrand <= 0.8) then only
        # to 1e-12 of the total in absolute terms (asking them for 1e-300 made quad give up)
        for lo, hi in ((w, 40.0), (-knot, -w), (-w, 0.0), (0.0, w)):
            if hi > lo:
                tiny = hi - lo <= w
                v, e = integrate.quad(g, lo, hi, epsabs=max(1e-12 * val, 1e-300) if tiny else 1e-300,
                                      epsrel=1e-10, limit=400)
                val, err = val + v, err + e
    else:
        pts = sorted({p for p in (knot - w, knot, knot + w) if 0.0 < p < upper})
        val, err = integrate.quad(f, 0.0, upper, points=pts or None, epsabs=1e-300, epsrel=1e-10, limit=400)
    # Round up by the integration error: quad's own estimate, and at least its requested
    # tolerance (the mass beyond ``upper`` is < 2 Phi(-40) < 1e-300: the truncation is nil).
    val = val + max(err, 1e-10 * abs(val), 1e-300)
    return float(min(max(val, 0.0), 1.0))


def amp_epsilon(
    delta: float,
    noise_std: float,
    clip_norm: float,
    smoothness: float,
    regularization: float,
    tau: float,
    sigma_out: float,
) -> float:
    """Smallest epsilon with :func:`amp_delta` (epsilon) <= delta (exact 1-D composition).

    See :doc:`/theory/erm`, Algorithm 1 and Theorem 4.1.  Solved by
    :func:`dpfast._safe_root.safe_root`: ``amp_delta(result) <= delta`` as evaluated.
    """
    sigma, C, beta, lam, tau, so = _check_amp(noise_std, clip_norm, smoothness, regularization, tau, sigma_out)
    delta = check_delta(delta, allow_zero=False)
    if tau == 0:
        return objective_perturbation_epsilon(delta, sigma, C, beta, lam)
    # amp_delta is a quadrature (noise ~1e-14): the answer is a point where it was evaluated <= delta
    return smallest_safe_root(lambda e: amp_delta(e, sigma, C, beta, lam, tau, so) - delta, 1.0,
                              xtol=1e-12, rtol=1e-10)


# --------------------------------------------------------------------------------------------
# the event for the accountants
# --------------------------------------------------------------------------------------------
# ``ObjectivePerturbation(noise_std, lipschitz, smoothness, regularization)`` is the data-only
# event of :mod:`dpfast.accounting.events`; its PLD (the tight profile of Theorem 3.1 above, by
# connect-the-dots) and its RDP curve (Theorem 3.2) are registered in ``pld.py`` / ``rdp.py``.


# --------------------------------------------------------------------------------------------
# the accountants' registrations of ObjectivePerturbation (next to the formulas they use)
# --------------------------------------------------------------------------------------------
@rdp_curve.register
def _(event: ObjectivePerturbation, orders):
    # Theorem 3.2 of Redberg, Koskela & Wang 2024 (orders are > 1 here)
    return objective_perturbation_rdp(orders, event.noise_std, event.lipschitz, event.smoothness,
                                      event.regularization)


@dominating_pairs.register
def _(event: ObjectivePerturbation, h, tail, direction):
    # the tight profile of Theorem 3.1 (Redberg, Koskela & Wang 2024), connect-the-dots on
    # dots 1e-3 apart.  Not reflected for eps < 0 (symmetric=False): the law of their Y has
    # E[e^-Y] < 1, so the reflection would not be a hockey-stick curve; the chord to delta = 1
    # at e^eps = 0 is used there instead (an upper bound).
    s = event.lipschitz / event.noise_std
    c_j = jacobian_cost(event.smoothness, event.regularization)
    return _discretize.profile_pmf(lambda e: _profile(np.asarray(e, dtype=np.float64), s, c_j), h, tail,
                                   1e-3, 0.0, False)
