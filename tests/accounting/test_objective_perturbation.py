"""Privacy formulas of objective perturbation and AMP (spec objective_perturbation.md).

Expected values are computed independently here: the privacy profile by numerical
integration of E[(1 - e^(eps - Y))_+] for the shifted half-normal Y, the RDP curve by
integrating the moment generating function, the AMP composition by 2-D quadrature.
"""
import math
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from dpfast.accounting.objective_perturbation import (
    amp_delta,
    amp_epsilon,
    amp_event,
    amp_output_sensitivity,
    jacobian_cost,
    kifer_is_private,
    kifer_objective_perturbation,
    objective_perturbation_delta,
    objective_perturbation_epsilon,
    objective_perturbation_min_regularization,
    objective_perturbation_rdp,
)
from dpfast.calibrate import gaussian_delta

# (sigma, L, beta, lambda): small and large s = L/sigma, small and large Jacobian cost
CASES = [(3.0, 1.0, 0.25, 1.0), (1.0, math.sqrt(2), 0.5, 0.6), (20.0, math.sqrt(2), 0.5, 50.0), (0.5, 1.0, 0.0, 1.0)]


def _profile_by_integration(eps, sigma, L, beta, lam):
    """E[(1 - e^(eps - Y))_+], Y = c_J + s^2/2 + |G|, G ~ N(0, s^2), by quadrature."""
    s = L / sigma
    a = -math.log(1 - beta / lam) + s * s / 2
    f = lambda g: 2 * stats.norm.pdf(g, scale=s) * max(0.0, -math.expm1(eps - a - g))
    lo = max(0.0, eps - a)  # the integrand vanishes below
    val, _ = integrate.quad(f, lo, lo + 40 * s, epsabs=1e-14, epsrel=1e-11, limit=400)
    return val


@pytest.mark.parametrize("sigma,L,beta,lam", CASES)
@pytest.mark.parametrize("eps", [0.0, 0.05, 0.3, 1.0, 2.5, 6.0])
def test_profile_matches_numerical_integration(eps, sigma, L, beta, lam):
    expected = _profile_by_integration(eps, sigma, L, beta, lam)
    got = objective_perturbation_delta(eps, sigma, L, beta, lam)
    assert got == pytest.approx(expected, rel=1e-7, abs=1e-14)


def test_profile_both_cases_and_continuity():
    sigma, L, beta, lam = 2.0, 1.0, 0.25, 1.0
    c_j = jacobian_cost(beta, lam)
    assert c_j == pytest.approx(-math.log(0.75))
    knot = c_j + (L / sigma) ** 2 / 2  # t = 0
    below = objective_perturbation_delta(knot - 1e-9, sigma, L, beta, lam)
    above = objective_perturbation_delta(knot + 1e-9, sigma, L, beta, lam)
    assert below == pytest.approx(above, rel=1e-7)
    # t >= 0 case equals twice the Gaussian hockey stick at eps - c_J (spec, Theorem 3.1)
    eps = 1.5
    assert objective_perturbation_delta(eps, sigma, L, beta, lam) == pytest.approx(
        2 * gaussian_delta(sigma, eps - c_j, L), rel=1e-10)
    # vectorised evaluation equals the scalar one
    grid = np.array([0.1, 0.5, 1.5])
    np.testing.assert_allclose(objective_perturbation_delta(grid, sigma, L, beta, lam),
                               [objective_perturbation_delta(e, sigma, L, beta, lam) for e in grid], rtol=0)


def test_profile_sign_of_jacobian_cost_reduces_budget():
    # appendix reading: eps~ = eps - |log(1 - beta/lambda)|, so more curvature -> larger delta
    d_small = objective_perturbation_delta(1.0, 3.0, 1.0, 0.1, 1.0)
    d_large = objective_perturbation_delta(1.0, 3.0, 1.0, 0.5, 1.0)
    assert d_large > d_small > objective_perturbation_delta(1.0, 3.0, 1.0, 0.0, 1.0)


@pytest.mark.parametrize("sigma,L,beta,lam", CASES)
def test_never_better_than_gaussian_lemma_3_4(sigma, L, beta, lam):
    for eps in [0.0, 0.2, 1.0, 3.0]:
        assert objective_perturbation_delta(eps, sigma, L, beta, lam) >= gaussian_delta(sigma, eps, L) * (1 - 1e-12)


@pytest.mark.parametrize("sigma,L,beta,lam", CASES)
def test_rdp_matches_numerical_mgf(sigma, L, beta, lam):
    s = L / sigma
    orders = np.array([1.01, 1.5, 2.0, 8.0, 32.0])
    got = objective_perturbation_rdp(orders, sigma, L, beta, lam)
    for a, g in zip(orders, got):
        k = a - 1
        m = k * k * s * s / 2  # the integrand's log-maximum, factored out to avoid overflow
        dens = lambda x: 2 / (s * math.sqrt(2 * math.pi)) * math.exp(k * x - x * x / (2 * s * s) - m)
        centre = k * s * s
        mgf, _ = integrate.quad(dens, 0, centre + 40 * s, points=[centre] if centre < 40 * s else None,
                                epsabs=0, epsrel=1e-12, limit=400)
        expected = -math.log(1 - beta / lam) + s * s / 2 + (math.log(mgf) + m) / k
        assert g == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("sigma,L,beta,lam", CASES)
def test_rdp_conversion_is_looser_than_profile(sigma, L, beta, lam):
    # RDP at order a implies (rdp + log(1/delta)/(a-1), delta)-DP; the tight profile must agree
    delta = 1e-5
    for a in [1.5, 2.0, 4.0, 16.0]:
        eps = objective_perturbation_rdp(a, sigma, L, beta, lam) + math.log(1 / delta) / (a - 1)
        assert objective_perturbation_delta(eps, sigma, L, beta, lam) <= delta


def test_inverse_and_min_regularization():
    sigma, L, beta = 1.3 * 3.7306 * math.sqrt(2), math.sqrt(2), 0.5
    for delta in [1e-5, 1e-3]:
        eps = objective_perturbation_epsilon(delta, sigma, L, beta, 4.0)
        assert objective_perturbation_delta(eps, sigma, L, beta, 4.0) <= delta
        assert objective_perturbation_delta(eps * (1 - 1e-6), sigma, L, beta, 4.0) > delta
    lam = objective_perturbation_min_regularization(1.0, 1e-5, sigma, L, beta)
    assert objective_perturbation_delta(1.0, sigma, L, beta, lam) <= 1e-5
    assert objective_perturbation_delta(1.0, sigma, L, beta, lam * (1 - 1e-6)) > 1e-5
    with pytest.raises(ValueError, match="increase noise_std"):
        objective_perturbation_min_regularization(1.0, 1e-5, 1.0, L, beta)  # sigma below the Gaussian's


def test_kifer_parameters():
    L, beta, delta = math.sqrt(2), 0.5, 1e-5
    for eps in [0.1, 1.0, 4.0]:
        sigma, lam = kifer_objective_perturbation(eps, delta, L, beta)
        assert sigma == pytest.approx(L * math.sqrt(8 * math.log(2 / delta) + 4 * eps) / eps)
        assert lam == pytest.approx(2 * beta / eps)
        assert kifer_is_private(eps, delta, sigma, L, beta, lam)
        assert not kifer_is_private(eps, delta, 0.9 * sigma, L, beta, lam)


def _amp_delta_2d(eps, sigma, C, beta, lam, tau, sigma_out):
    """E[(1 - e^(eps - Y1 - Y2))_+] by a 2-D Simpson rule over (|G|, Z) on a fine grid."""
    s = C / sigma
    mu = 2 * tau / lam / sigma_out
    a = -math.log(1 - beta / lam) + s * s / 2
    u = np.linspace(0, 10, 2001)[:, None]
    z = np.linspace(-10, 10, 4001)[None, :]
    f = 2 * stats.norm.pdf(u) * stats.norm.pdf(z) * np.maximum(0.0, -np.expm1(eps - a - s * u - (mu * mu / 2 + mu * z)))
    return float(integrate.simpson(integrate.simpson(f, x=z[0], axis=1), x=u[:, 0]))


@pytest.mark.slow
def test_amp_delta_matches_2d_quadrature_and_reduces_to_op():
    sigma, C, beta, lam, tau, so = 6.0, math.sqrt(2), 0.5, 3.0, 0.05, 0.15
    for eps in [0.3, 1.0]:
        got = amp_delta(eps, sigma, C, beta, lam, tau, so)
        assert got == pytest.approx(_amp_delta_2d(eps, sigma, C, beta, lam, tau, so), rel=1e-4)
        assert got > objective_perturbation_delta(eps, sigma, C, beta, lam)
    assert amp_delta(1.0, sigma, C, beta, lam, 0.0, math.inf) == objective_perturbation_delta(1.0, sigma, C, beta, lam)
    assert amp_delta(1.0, sigma, C, beta, lam, 1e-9, so) == pytest.approx(
        objective_perturbation_delta(1.0, sigma, C, beta, lam), rel=1e-6)
    eps = amp_epsilon(1e-5, sigma, C, beta, lam, tau, so)
    assert amp_delta(eps, sigma, C, beta, lam, tau, so) <= 1e-5 < amp_delta(eps * 0.999, sigma, C, beta, lam, tau, so)


def test_amp_delta_with_a_vanishing_output_step_integrates_cleanly():
    # Regression: LogisticRegression(method="amp", epsilon=64) probed lambda = 1e12, where the
    # output step's mu ~ 1e-13 is far below ulp(eps - a): quad warned ("extremely bad integrand
    # behavior") on the noise of eps - a - s u.  The composition can only add to delta, and a
    # Gaussian step of mu adds at most mu/2 (dH/dmu <= 1/2: _gaussian_hockey's docstring).
    sigma, C, beta, lam, tau, so = 0.23296067482863791, 1.4142135623730976, 0.5, 1e12, 0.01, 0.15
    mu = amp_output_sensitivity(tau, lam) / so
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = amp_delta(64.0, sigma, C, beta, lam, tau, so)
    base = objective_perturbation_delta(64.0, sigma, C, beta, lam)
    assert base <= got <= base * (1 + 1e-9) + mu / 2


def test_amp_event_rdp_is_op_plus_gaussian():
    """The RDP of Algorithm 1's event (Theorem 4.1) is the registry's: objective perturbation's
    curve (Theorem 3.2) plus the Gaussian's alpha Delta^2 / (2 sigma_out^2), Delta = 2 tau / lambda."""
    from dpfast.accounting import Composed, Gaussian, ObjectivePerturbation, RDPAccountant

    sigma, C, beta, lam, tau, so = 6.0, math.sqrt(2), 0.5, 3.0, 0.01, 0.15
    orders = np.array([1.5, 2.0, 10.0])
    sens = amp_output_sensitivity(tau, lam)
    assert sens == pytest.approx(2 * tau / lam)
    event = amp_event(sigma, C, beta, lam, tau, so)
    assert event == Composed((ObjectivePerturbation(sigma, C, beta, lam), Gaussian(so / sens, sensitivity=sens)))
    expected = objective_perturbation_rdp(orders, sigma, C, beta, lam) + 2 * tau**2 * orders / (so**2 * lam**2)
    np.testing.assert_allclose(RDPAccountant(orders=orders).compose(event).rdp, expected, rtol=1e-12)
    assert amp_event(sigma, C, beta, lam, 0.0, math.inf) == ObjectivePerturbation(sigma, C, beta, lam)


def test_bad_parameters():
    with pytest.raises(ValueError, match="lambda > smoothness"):
        objective_perturbation_delta(1.0, 1.0, 1.0, 0.5, 0.5)
    with pytest.raises(ValueError, match="noise_std"):
        objective_perturbation_delta(1.0, -1.0, 1.0, 0.5, 1.0)
    with pytest.raises(ValueError, match="orders"):
        objective_perturbation_rdp([1.0, 2.0], 1.0, 1.0, 0.5, 1.0)
    with pytest.raises(ValueError):
        amp_delta(1.0, 1.0, 1.0, 0.5, 1.0, 0.01, math.inf)
    with pytest.raises(ValueError, match="delta"):
        objective_perturbation_epsilon(0.0, 1.0, 1.0, 0.5, 1.0)


def test_description_in_the_accountants():
    from dpfast.accounting import PLDAccountant, RDPAccountant
    from dpfast.accounting.objective_perturbation import ObjectivePerturbation

    sigma, L, beta, lam = 6.0, math.sqrt(2), 0.5, 3.0
    desc = ObjectivePerturbation(sigma, L, beta, lam)
    assert "ObjectivePerturbation" in repr(desc)
    exact = objective_perturbation_epsilon(1e-5, sigma, L, beta, lam)
    pld = PLDAccountant().compose(desc).get_epsilon(1e-5)
    assert exact <= pld <= exact + 1e-3  # pessimistic discretisation, close to the closed form
    rdp = RDPAccountant().compose(desc).get_epsilon(1e-5)
    assert rdp >= exact
    # two runs: the PLD composition is below twice the single epsilon (basic composition)
    two = PLDAccountant().compose(desc, count=2).get_epsilon(2e-5)
    assert exact < two < 2 * exact
    with pytest.raises(ValueError):
        ObjectivePerturbation(sigma, L, beta, 0.4)  # lambda <= beta
