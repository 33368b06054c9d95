"""RDP accountant, conversions, GDP/f-DP and tuning (spec accounting.md; lectures D, H2-H3)."""
import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpfast.accounting import (
    DEFAULT_ORDERS,
    Gaussian,
    Laplace,
    PoissonSampled,
    PureDP,
    RandomizedResponse,
    RDPAccountant,
    SampledWithoutReplacement,
    Tuned,
    gdp,
    rdp_to_delta,
    rdp_to_epsilon,
    rdp_to_epsilon_classic,
)
from dpfast.accounting.rdp import (
    check_orders,
    gaussian_rdp,
    laplace_rdp,
    poisson_subsampled_gaussian_rdp,
    rdp_curve,
    sampled_without_replacement_gaussian_rdp,
)
from dpfast.accounting.tuning import tnb_expected_count, tuning_rdp_truncated_negative_binomial


def test_default_orders_grid():
    assert 7.1 in DEFAULT_ORDERS and 64 in DEFAULT_ORDERS and 1024 in DEFAULT_ORDERS
    assert (DEFAULT_ORDERS > 1).all()


def test_gaussian_rdp_and_classic_conversion_h3():
    # H3.30: mu = 1 (sigma = 1), delta = 1e-5, integer orders 2..256: 5.302585092994046 at alpha 6
    orders = np.arange(2, 257)
    acc = RDPAccountant(orders, conversion="classic").compose(Gaussian(1.0))
    eps, a = acc.get_epsilon_and_order(1e-5)
    assert eps == pytest.approx(5.302585092994046, rel=1e-12) and a == 6
    # H3.31: sigma = 2, lambda in 1..199 (alpha = lambda + 1)
    acc = RDPAccountant(np.arange(2, 201), conversion="classic").compose(Gaussian(2.0))
    assert acc.get_epsilon(1e-5) == pytest.approx(2.526292546497023, rel=1e-12)
    # composition is additive: k copies of sigma = one copy of sigma / sqrt(k), exactly
    a1 = RDPAccountant().compose(Gaussian(3.0), count=9)
    a2 = RDPAccountant().compose(Gaussian(1.0))
    np.testing.assert_allclose(a1.rdp, a2.rdp, rtol=1e-14)


def test_rdp_to_epsilon_classic_is_mironovs_proposition_3():
    # Gaussian RDP alpha / (2 sigma^2) (Mironov 2017, Prop. 7), converted by hand:
    # eps = min over alpha of r(alpha) + log(1/delta) / (alpha - 1), and the order attaining it
    sigma, delta, orders = 2.0, 1e-5, np.array([2.0, 4.0, 8.0, 16.0, 32.0])
    rdp = orders / (2 * sigma**2)
    want = min((a / (2 * sigma**2) + math.log(1 / delta) / (a - 1), a) for a in orders)
    eps, order = rdp_to_epsilon_classic(orders, rdp, delta)
    assert eps == pytest.approx(want[0], rel=1e-14) and order == want[1]
    assert rdp_to_epsilon_classic([math.inf], [0.7], delta) == (0.7, math.inf)  # pure DP: r(inf) itself
    assert rdp_to_epsilon(orders, rdp, delta)[0] <= eps  # the improved conversion is never worse
    with pytest.raises(ValueError):
        rdp_to_epsilon_classic(orders, rdp, 0.0)


def test_improved_conversion_never_worse_than_classic():
    for d in (Gaussian(1.0), PoissonSampled(0.01, Gaussian(1.1))):
        imp = RDPAccountant().compose(d, 100).get_epsilon(1e-6)
        cla = RDPAccountant(conversion="classic").compose(d, 100).get_epsilon(1e-6)
        assert imp <= cla


def _quad_renyi(logp, logq, alpha, lo=-60, hi=60):
    f = lambda x: math.exp(alpha * logp(x) + (1 - alpha) * logq(x))
    v = integrate.quad(f, lo, hi, epsabs=0, epsrel=1e-13, limit=800, points=[0.0, 1.0])[0]
    return math.log(v) / (alpha - 1)


def test_laplace_rdp_matches_quadrature():
    b = 0.7
    for al in (2.0, 3.5, 20.0):
        num = _quad_renyi(lambda x: stats.laplace.logpdf(x, 0, b), lambda x: stats.laplace.logpdf(x, 1, b), al)
        assert laplace_rdp([al], b)[0] == pytest.approx(num, rel=1e-8)


def test_rr_rdp_h2():
    # H2.24: binary RR at eps = 1: D_2 = 0.7353256640555194, D_5 = 0.9217154286678753
    r = rdp_curve(RandomizedResponse(1.0), check_orders([2.0, 5.0]))
    np.testing.assert_allclose(r, [0.7353256640555194, 0.9217154286678753], rtol=1e-12)
    # pure DP: <= min(eps, alpha eps^2 / 2)  (lectures D9)
    o = np.array([1.5, 2, 5, 50, np.inf])
    assert (rdp_curve(PureDP(1.0), check_orders(o)) <= np.minimum(1.0, o * 0.5) + 1e-12).all()


@pytest.mark.parametrize("q,sigma", [(0.01, 1.0), (0.1, 2.0), (0.3, 0.8)])
def test_subsampled_gaussian_rdp_matches_quadrature(q, sigma):
    # D_alpha((1-q)N(0,s^2) + qN(1,s^2) || N(0,s^2)) by quadrature (MTZ19's A_alpha)
    lq = lambda x: stats.norm.logpdf(x, 0, sigma)
    lp = lambda x: lq(x) + float(np.logaddexp(math.log1p(-q), math.log(q) + (2 * x - 1) / (2 * sigma ** 2)))
    for al in (2.0, 3.5, 7.1, 12.0):
        num = _quad_renyi(lp, lq, al)
        assert poisson_subsampled_gaussian_rdp([al], sigma, q)[0] == pytest.approx(num, rel=1e-8)


def test_abadi_moments_bound_h3_32():
    # q = 0.01, sigma = 4, lambda = 32: exact alpha_M(lambda) = 32 * RDP(33) <= 0.00667 + O(q^3 l^3 / s^3)
    v = 32 * poisson_subsampled_gaussian_rdp([33.0], 4.0, 0.01)[0]
    assert v <= 0.006666666666666667 * 1.1


def test_dpsgd_workload_rdp():
    # issue 3: sigma = 1, q = 256/60000, 14062 steps, delta = 1e-5 -> 3.07867 (Opacus, dp-accounting)
    acc = RDPAccountant().compose(PoissonSampled(256 / 60000, Gaussian(1.0)), count=14062)
    eps, order = acc.get_epsilon_and_order(1e-5)
    assert eps == pytest.approx(3.07867, abs=1e-5)
    assert order == pytest.approx(7.1)


def test_sampled_without_replacement_rdp():
    o = np.array([2.0, 2.5, 3.0, 8.0, 32.0])
    r1 = sampled_without_replacement_gaussian_rdp(o, 1.0, 0.01)
    r2 = sampled_without_replacement_gaussian_rdp(o, 1.0, 0.05)
    assert (r1 <= r2 + 1e-15).all() and (r2 <= o / 2 + 1e-15).all()
    np.testing.assert_allclose(sampled_without_replacement_gaussian_rdp(o, 1.0, 1.0), o / 2)
    # WBK19 Thm 9 at alpha = 2: log(1 + q^2 min(4(e^{eps2}-1), 2 e^{eps2})) with eps2 = 1/sigma^2
    e2 = 1.0
    want = math.log1p(0.01 ** 2 * min(4 * math.expm1(e2), 2 * math.exp(e2)))
    assert r1[0] == pytest.approx(want, rel=1e-12)
    assert SampledWithoutReplacement(0.01, Gaussian(1.0, neighbours="replace_one")).neighbours == "replace_one"


def test_conversions_monotone_and_inverse():
    acc = RDPAccountant().compose(PoissonSampled(0.01, Gaussian(1.0)), count=1000)
    o, r = acc.orders, acc.rdp
    deltas = np.logspace(-12, -2, 15)
    eps = [rdp_to_epsilon(o, r, d)[0] for d in deltas]
    assert all(a > b for a, b in zip(eps, eps[1:]))  # decreasing in delta
    for d, e in zip(deltas, eps):
        back = rdp_to_delta(o, r, e)[0]
        assert back == pytest.approx(d, rel=1e-9)
    assert acc.get_delta(acc.get_epsilon(1e-7)) == pytest.approx(1e-7, rel=1e-9)


def test_rdp_bad_input():
    with pytest.raises(ValueError):
        RDPAccountant(orders=[0.5, 2])
    with pytest.raises(ValueError):
        RDPAccountant().get_epsilon(0.0)
    with pytest.raises(ValueError):
        RDPAccountant().get_epsilon(1.0)
    with pytest.raises(ValueError):
        RDPAccountant().compose(Gaussian(1.0), count=-1)
    with pytest.raises(TypeError):
        RDPAccountant().compose(Gaussian(1.0), count=1.5)
    with pytest.raises(ValueError):
        Gaussian(0.0)
    with pytest.raises(ValueError):
        Gaussian(-1.0)
    with pytest.raises(ValueError):
        PoissonSampled(0.0, Gaussian(1.0))
    with pytest.raises(ValueError):
        PoissonSampled(1.5, Gaussian(1.0))
    with pytest.raises(ValueError):
        Laplace(0.0)
    with pytest.raises(ValueError):
        rdp_to_epsilon([2.0, 3.0], [0.1], 1e-5)
    with pytest.raises(ValueError):
        rdp_to_epsilon([2.0], [-0.1], 1e-5)
    with pytest.raises(ValueError):
        RDPAccountant().compose(Gaussian(1.0)).compose(SampledWithoutReplacement(0.1, Gaussian(1.0, neighbours="replace_one")))


def test_rdp_epsilon_at_least_tight_gdp():
    # H3.30: the RDP bound must be >= the tight GDP value (mu = 1: 4.377)
    e = RDPAccountant().compose(Gaussian(1.0)).get_epsilon(1e-5)
    assert e >= gdp.gdp_epsilon(1.0, 1e-5) and gdp.gdp_epsilon(1.0, 1e-5) == pytest.approx(4.377178095681195, rel=1e-9)


# ------------------------------------------------------------------------------------ GDP / f-DP
def test_gdp_closed_forms():
    assert gdp.gdp_compose([0.1] * 100) == pytest.approx(1.0, rel=1e-14)  # H2.18
    assert gdp.gdp_compose([0.3, 0.4]) == pytest.approx(0.5, rel=1e-14)
    assert gdp.gdp_delta(1.0, 1.0) == pytest.approx(0.12693673750664392, rel=1e-12)  # H1.12
    assert gdp.gdp_delta(0.5, 1.0) == pytest.approx(0.006829594983114591, rel=1e-12)
    assert gdp.gdp_epsilon(1.0, 1e-6) == pytest.approx(4.886554117461823, rel=1e-9)  # H1.15
    assert gdp.gaussian_tradeoff(0.05, 1.0) == pytest.approx(0.7404889771585558, rel=1e-12)  # H2.16
    assert gdp.gaussian_tradeoff(0.1, 0.5) == pytest.approx(0.7827609195726948, rel=1e-12)
    assert gdp.approx_dp_tradeoff(0.1, 1.0) == pytest.approx(0.7281718171540954, rel=1e-12)  # H2.17
    assert gdp.approx_dp_tradeoff(0.2, 1.0, 0.01) == pytest.approx(0.4463436343081909, rel=1e-12)


def test_gdp_conversions_inverse():
    for mu in (0.3, 1.0, 3.0):
        for d in (1e-3, 1e-8, 1e-15):
            e = gdp.gdp_epsilon(mu, d)
            assert gdp.gdp_delta(mu, e) == pytest.approx(d, rel=1e-9)
            assert gdp.gdp_mu(e, d) == pytest.approx(mu, rel=1e-9)


def test_clt_is_flagged_approximate():
    r = gdp.clt_mu_poisson_gaussian(1.0, 256 / 60000, 14062)
    assert r.approximate is True and r.mu > 0


# ------------------------------------------------------------------------------------ tuning
def test_tuning_truncated_negative_binomial():
    # eta = 1 (geometric), gamma: E[K] = 1/gamma; check the formula on the Gaussian directly
    gamma = 0.1
    assert tnb_expected_count(1.0, gamma) == pytest.approx(1 / gamma)
    assert tnb_expected_count(0.0, gamma) == pytest.approx((1 / gamma - 1) / math.log(1 / gamma))
    o = np.array([2.0, 4.0, 8.0])
    r = o / 2.0  # sigma = 1 Gaussian
    got = tuning_rdp_truncated_negative_binomial(o, r, 1.0, gamma)
    hat = min([2 * (1 - 1 / h) * (h / 2) + 2 * math.log(1 / gamma) / h for h in o] + [2 * math.log(1 / gamma)])
    np.testing.assert_allclose(got, r + hat + math.log(1 / gamma) / (o - 1), rtol=1e-12)


def test_tuning_poisson_description():
    base = Gaussian(2.0)
    t = Tuned(base, "poisson", mean=10.0)
    acc = RDPAccountant().compose(t)
    assert acc.get_epsilon(1e-5) > RDPAccountant().compose(base).get_epsilon(1e-5)
    with pytest.raises(ValueError):
        Tuned(base, "poisson")
    tnb = Tuned(base, "truncated_negative_binomial", eta=0.0, gamma=0.05)
    r = RDPAccountant().compose(tnb).rdp
    assert (r >= RDPAccountant().compose(base).rdp).all() and np.isfinite(r).all()


def test_tuning_poisson_formula_and_domain():
    """Papernot & Steinke 2022, Theorem 6, recomputed independently for a sigma = 2 Gaussian:
    delta_hat at eps_hat = log(1 + 1/(lambda-1)) from the improved conversion (min over
    orders, written out here), eps' = eps + mu delta_hat + log(mu)/(lambda-1)."""
    from dpfast.accounting.tuning import tuning_rdp_poisson

    o = np.array([2.0, 3.0, 5.0, 10.0])
    r = o / 8.0  # sigma = 2
    mu = 15.4
    got = tuning_rdp_poisson(o, r, mu)
    for lam, g, rl in zip(o, got, r):
        eh = math.log(1 + 1 / (lam - 1))
        dh = min(min(1.0, math.exp((a - 1) * (ra - eh) + (a - 1) * math.log(1 - 1 / a) - math.log(a)),
                     math.sqrt(1 - math.exp(-ra))) for a, ra in zip(o, r))
        assert g == pytest.approx(rl + mu * dh + math.log(mu) / (lam - 1), rel=1e-12)
    # Regression: mu < 1 gave a negative bound, clipped to 0, i.e. "0-RDP" for a leaking
    # mechanism (impossible); the theorem is only used for mu >= 1 now.
    with pytest.raises(ValueError, match="mu"):
        tuning_rdp_poisson(o, r, 0.1)
    with pytest.raises(ValueError, match="mean"):
        Tuned(Gaussian(2.0), "poisson", mean=0.5)


def test_tnb_expected_count_by_series():
    # E[K] of D_{eta,gamma} summed directly from the pmf (Papernot & Steinke 2022, Sec. 2)
    for eta, gamma in [(0.5, 0.2), (-0.5, 0.3), (2.5, 0.05), (0.0, 0.1)]:
        k = np.arange(1, 20000, dtype=np.float64)
        from scipy.special import gammaln
        if eta == 0:
            logp = k * math.log(1 - gamma) - np.log(k) - math.log(math.log(1 / gamma))
        else:
            # prod_{l<k} (l+eta)/(l+1) = Gamma(k+eta) / (Gamma(eta) Gamma(k+1)), sign of Gamma(eta)
            logp = (k * math.log(1 - gamma) + gammaln(k + eta) - gammaln(k + 1) - gammaln(eta + 1)
                    + math.log(abs(eta)) - math.log(abs(gamma ** -eta - 1)))
        p = np.exp(logp)
        assert p.sum() == pytest.approx(1.0, rel=1e-9)
        assert tnb_expected_count(eta, gamma) == pytest.approx(float((k * p).sum()), rel=1e-9)


@pytest.mark.parametrize("call", [
    lambda: poisson_subsampled_gaussian_rdp([2.0, 2.5], -1.0, 0.1),   # sigma^2 hid the sign
    lambda: poisson_subsampled_gaussian_rdp([2.0, 2.5], 1.0, float("nan")),
    lambda: poisson_subsampled_gaussian_rdp([2.0], 1.0, 0.0),
    lambda: sampled_without_replacement_gaussian_rdp([2.0, 3.0], 1.0, 1.5),
    lambda: laplace_rdp([2.0], -1.0),                                 # gave a negative RDP
])
def test_rdp_curves_validate_parameters(call):
    # Regression: these public curves computed garbage (negative RDP, silently a different
    # mechanism) instead of raising.
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize("bad", [True, np.bool_(False), "1.0", None])
def test_rdp_curves_refuse_non_numbers(bad):
    # Regression: float(True) == 1.0, so gaussian_rdp(orders, True) was the curve of z = 1
    with pytest.raises(TypeError, match="real number"):
        gaussian_rdp([2.0], bad)
    with pytest.raises(TypeError, match="real number"):
        poisson_subsampled_gaussian_rdp([2.0], 1.0, bad)
