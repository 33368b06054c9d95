"""Audit: dpfast's accountants against independent implementations (issue 15, "Keep it so").

Peers (the ``[audit]`` extra; the module is skipped when one is absent):

* dp-accounting (Google): ``RdpAccountant`` (Mironov, Talwar & Zhang 2019 for the Poisson-
  subsampled Gaussian; Wang, Balle & Kasiviswanathan 2019, Thm 27, for sampling without
  replacement) and its PLD (Doroshenko et al. 2022, connect-the-dots; ``pessimistic_estimate=
  False`` gives its optimistic PLD, a certified LOWER bound on the pair's epsilon);
* prv-accountant (Gopi, Lee & Wutschitz 2021, "Numerical composition of differential
  privacy"): ``compute_epsilon`` returns (eps_lower, eps_estimate, eps_upper), the true epsilon
  of the composed pair being certified to lie in [eps_lower, eps_upper].
* closed forms where they exist: the k-fold Gaussian mechanism is the Gaussian mechanism with
  mu = sqrt(k)/z (Balle & Wang 2018, Thm 8 gives its exact privacy profile); k-fold randomized
  response has a loss on the lattice eps * Z whose law is a 3-point convolution power.

Assertions at every grid point (delta = 1e-5):

* safety: dpfast's reported epsilon >= every certified lower bound (prv's eps_lower, dp-
  accounting's optimistic PLD, the exact value);
* tightness: within 1 % of the peer's estimate (prv's eps_estimate; the exact value);
* RDP: dpfast's RDP curve equals dp-accounting's on the same orders, so the epsilon from the
  same conversion agrees (dp-accounting drops orders whose fractional series does not converge:
  dpfast's epsilon may then only be lower, and must still be above the certified lower bounds).

Neighbouring relations: dpfast ``neighbours="add_remove"`` = dp-accounting
``NeighboringRelation.ADD_OR_REMOVE_ONE``; dpfast ``"replace_one"`` = dp-accounting
``REPLACE_ONE`` (prv-accountant has no relation argument: its Poisson-subsampled Gaussian PRV is
the remove pair ((1-q)N(0,z^2) + qN(1,z^2), N(0,z^2)), which is also a realisable pair, hence a
lower bound, for replace-one sampling without replacement with replace-one sensitivity 1).

Grid: a Latin hypercube (scipy.stats.qmc, fixed seed) over log noise multiplier in [0.5, 20],
log sample rate in [1e-4, 0.5] and log steps in [1, 1e5]; points whose epsilon (dp-accounting
PLD on a coarse grid, not dpfast) lies outside [0.2, 100] are dropped (below 0.2 the 1 %
tolerance is finer than the peers' grids can resolve in CI time; above 100 nothing is private).
The grid is computed once with the peers (tests/audit/make_peer_grids.py, _peer_grids.py) and
read from tests/data/peer_grids.json; one test recomputes a few of its points.
"""
from __future__ import annotations

import functools
import logging
import math

import numpy as np
import pytest
from scipy import integrate, optimize, special

dpa = pytest.importorskip("dp_accounting")
prv = pytest.importorskip("prv_accountant")
from dp_accounting.pld import privacy_loss_distribution as dpa_pld  # noqa: E402
from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp  # noqa: E402

from dpfast.accounting import (  # noqa: E402
    DEFAULT_ORDERS,
    Gaussian,
    Laplace,
    PLDAccountant,
    PoissonSampled,
    PureDP,
    RandomizedResponse,
    RDPAccountant,
    SampledWithoutReplacement,
    calibrate_noise_multiplier,
    gdp_epsilon,
)
from dpfast.accounting.rdp import check_orders, rdp_curve  # noqa: E402

import _peer_grids as G  # noqa: E402

# quad reports "roundoff error" on the flattest curves (RDP ~1e-11); the tolerance below allows for it
pytestmark = pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")

# dp-accounting logs a warning for every fractional order whose series it gives up on.
logging.getLogger("absl").setLevel(logging.ERROR)

DELTA = 1e-5
NR = dpa.NeighboringRelation
TIGHT = 0.01  # the tolerance: within 1 % of the peer's estimate


# ----------------------------------------------------------------------------- the grid
# Computed once by make_peer_grids.py (tests/data/peer_grids.json): choosing the points asks the
# peers, ~54 s that every collection of the suite used to pay.
_coarse_eps = G.coarse_eps
_prv_poisson = G.prv_poisson


def _grid_add_remove():
    return G.load_grid("add_remove")


def _grid_replace_one():
    return G.load_grid("replace_one")


def _ids(pts):
    return [f"z={z:.3g}-q={q:.3g}-n={n}" for z, q, n in pts]


def test_committed_peer_grids_match_the_installed_peers():
    """The committed grids are what the grid's definition and the installed peers give: the
    candidates are regenerated exactly, and a few of them (kept and dropped) are re-classified
    by the peers (if this fails after a peer upgrade, rerun tests/audit/make_peer_grids.py)."""
    for name, (n_candidates, _, seed) in G.GRIDS.items():
        rows = G.load_rows(name)
        assert [(r["z"], r["q"], r["n"]) for r in rows] == G.candidates(n_candidates, seed)[:len(rows)], name
    rows = G.load_rows("add_remove")
    sample = [r for r in rows if r["status"] == "kept"][:3] + [r for r in rows if r["status"] != "kept"][:2]
    for r in sample:
        status, eps = G.classify(r["z"], r["q"], r["n"])
        assert status == r["status"], (r, status, G.peer_versions())
        assert eps == pytest.approx(r["coarse_eps"], rel=1e-9), (r, eps, G.peer_versions())


# ----------------------------------------------------------------------------- peers
def _dpa_h(n: int, eps_scale: float) -> float:
    # connect-the-dots' pessimistic error grows like n h^2: keep it ~0.1 % (measured on this grid)
    return min(1e-3 * math.sqrt(1e3 / n), eps_scale / 500)


@functools.lru_cache(maxsize=None)
def _dpa_poisson_pld(z, q, n, relation, sensitivity, pessimistic):
    coarse = dpa_pld.from_gaussian_mechanism(
        z, sensitivity=sensitivity, value_discretization_interval=1e-3, sampling_prob=q,
        neighboring_relation=relation).self_compose(n).get_epsilon_for_delta(DELTA)
    h = _dpa_h(n, max(coarse, 1e-3))
    pld = dpa_pld.from_gaussian_mechanism(
        z, sensitivity=sensitivity, value_discretization_interval=h, sampling_prob=q,
        pessimistic_estimate=pessimistic, use_connect_dots=pessimistic, neighboring_relation=relation)
    return pld.self_compose(n).get_epsilon_for_delta(DELTA)


def _dpa_rdp_curve(event, orders, relation):
    acc = dpa_rdp.RdpAccountant(list(orders), neighboring_relation=relation)
    acc.compose(event)
    return np.asarray(acc._rdp, dtype=np.float64)  # dp-accounting keeps the curve here (no getter)


def _dpfast_pld(description, n):
    return PLDAccountant().compose(description, n).get_epsilon(DELTA)


def _dpfast_rdp(description, n, orders=None):
    acc = RDPAccountant(orders).compose(description, n)
    return acc.get_epsilon(DELTA), acc


# ----------------------------------------------------------------------------- exact references
def _gaussian_log_delta(eps: float, mu: float) -> float:
    """log delta(eps) of the Gaussian mechanism with mu = sensitivity/sigma (Balle & Wang 2018,
    Thm 8): delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), in log space."""
    a = special.log_ndtr(-eps / mu + mu / 2)
    b = eps + special.log_ndtr(-eps / mu - mu / 2)
    return a + math.log1p(-math.exp(b - a)) if b < a else -math.inf


def _gaussian_epsilon(mu: float, delta: float) -> float:
    if _gaussian_log_delta(0.0, mu) <= math.log(delta):
        return 0.0
    f = lambda e: _gaussian_log_delta(e, mu) - math.log(delta)  # noqa: E731  (decreasing in e)
    hi = 1.0
    while f(hi) > 0:
        hi *= 2
    return optimize.brentq(f, 0.0, hi, xtol=1e-14, rtol=1e-15)


def _rr_composed_delta(eps: float, eps_rr: float, k: int, n: int) -> float:
    """Exact delta(eps) of n-fold k-ary randomized response, worst pair (true category a vs b).

    Under P = M(a) one step's loss is +eps_rr (prob hi), -eps_rr (prob lo), 0 (prob (k-2) lo):
    the n-fold loss is eps_rr * J with J the sum; delta = E_P[(1 - e^(eps - L))_+]."""
    hi = 1.0 / (1.0 + (k - 1) * math.exp(-eps_rr))
    lo = math.exp(-eps_rr) * hi
    step = np.array([lo, (k - 2) * lo, hi])  # J = -1, 0, +1
    pmf = np.array([1.0])
    base, m = step, n
    while m:  # exponentiation by squaring; all entries >= 0, so no cancellation
        if m & 1:
            pmf = np.convolve(pmf, base)
        base = np.convolve(base, base)
        m >>= 1
    j = np.arange(-n, n + 1)
    loss = eps_rr * j
    pos = loss > eps
    return float(np.sum(pmf[pos] * -np.expm1(eps - loss[pos])))


def _rr_composed_epsilon(eps_rr, k, n, delta):
    f = lambda e: _rr_composed_delta(e, eps_rr, k, n) - delta  # noqa: E731
    if f(0.0) <= 0:
        return 0.0
    return optimize.brentq(f, 0.0, n * eps_rr, xtol=1e-13, rtol=1e-14)


# ============================================================================ add / remove
@pytest.mark.parametrize("z,q,n", _grid_add_remove(), ids=_ids(_grid_add_remove()))
def test_poisson_subsampled_gaussian_pld_vs_peers(z, q, n):
    """PLDAccountant (add/remove) vs prv-accountant and dp-accounting's PLD."""
    ours = _dpfast_pld(PoissonSampled(q, Gaussian(z)), n)
    opt = _dpa_poisson_pld(z, q, n, NR.ADD_OR_REMOVE_ONE, 1.0, False)
    pess = _dpa_poisson_pld(z, q, n, NR.ADD_OR_REMOVE_ONE, 1.0, True)
    lo, est, up = _prv_poisson(z, q, n)
    assert ours >= lo, f"below prv-accountant's certified lower bound {lo}: {ours}"
    assert ours >= opt, f"below dp-accounting's optimistic (lower) PLD {opt}: {ours}"
    assert abs(ours / est - 1) <= TIGHT, f"not within 1% of prv-accountant's estimate {est}: {ours}"
    assert ours <= (1 + TIGHT) * pess, f"more than 1% above dp-accounting's pessimistic PLD {pess}: {ours}"


def _rdp_by_quadrature(alpha: float, q: float, z: float) -> float:
    """D_alpha(P || Q) for P = (1-q)N(0,z^2) + qN(1,z^2), Q = N(0,z^2), by quadrature of
    E_Q[(P/Q)^alpha] - 1 (Mironov, Talwar & Zhang 2019, Sec. 3: the add/remove worst case)."""
    s2 = 2 * z * z
    lc = -0.5 * math.log(2 * math.pi) - math.log(z)

    def g(x):  # Q-density times ((P/Q)^alpha - 1), in log space to survive z = 0.5
        u = (2 * x - 1) / s2
        lphi = lc - x * x / s2
        r = q * math.expm1(u) if u < 700 else math.inf
        t = alpha * math.log1p(r) if r < 1e300 else alpha * (math.log(q) + u)
        return math.exp(lphi) * math.expm1(t) if t < 1 else math.exp(t + lphi) - math.exp(lphi)

    # the tilted integrand peaks near x = alpha; 40 standard deviations either side
    v, _ = integrate.quad(g, -40 * z, 40 * z + alpha, points=[0.0, alpha], limit=500, epsabs=0, epsrel=1e-11)
    return math.log1p(v) / (alpha - 1)


_FRACTIONAL = np.array([1.1, 1.5, 2.5, 3.7, 5.5, 7.5])


@pytest.mark.parametrize("z,q,n", _grid_add_remove(), ids=_ids(_grid_add_remove()))
def test_poisson_subsampled_gaussian_rdp_vs_dp_accounting(z, q, n):
    """RDPAccountant (add/remove).  Integer orders: the same curve as dp-accounting (both exact
    binomial expansions), hence the same epsilon from the same conversion on those orders.
    Fractional orders: dp-accounting's series is not reliable below alpha ~ 1.5 (it returns
    values decreasing in alpha, impossible for a Renyi divergence), so they are checked
    against quadrature instead (relative accuracy ~1e-9 except for curves below 1e-10)."""
    orders = DEFAULT_ORDERS
    integer = orders[orders == np.round(orders)]
    ours_int, acc_int = _dpfast_rdp(PoissonSampled(q, Gaussian(z)), n, integer)
    theirs = _dpa_rdp_curve(dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z)), n),
                            integer, NR.ADD_OR_REMOVE_ONE)
    np.testing.assert_allclose(acc_int.rdp, theirs, rtol=1e-9, atol=0)
    eps_theirs, _ = dpa_rdp.compute_epsilon(integer, theirs, DELTA)
    assert abs(ours_int / eps_theirs - 1) <= 1e-9
    frac = rdp_curve(PoissonSampled(q, Gaussian(z)), check_orders(_FRACTIONAL))
    quad = np.array([_rdp_by_quadrature(a, q, z) for a in _FRACTIONAL])
    np.testing.assert_allclose(frac, quad, rtol=1e-6, atol=1e-15)
    ours, _ = _dpfast_rdp(PoissonSampled(q, Gaussian(z)), n)  # all default orders
    assert ours <= ours_int
    lo, _, _ = _prv_poisson(z, q, n)
    assert ours >= lo


@pytest.mark.parametrize("z,n", [(0.5, 1), (0.8, 30), (2.0, 1000), (5.0, 100), (20.0, 3000), (20.0, 100000), (1.3, 7)])
@pytest.mark.parametrize("neighbours", ["add_remove", "replace_one"])
def test_gaussian_composition_vs_exact_and_peers(z, n, neighbours):
    """n-fold Gaussian mechanism = Gaussian with mu = sqrt(n)/z (exact, Balle & Wang 2018)."""
    d = Gaussian(z, neighbours=neighbours)
    exact = _gaussian_epsilon(math.sqrt(n) / z, DELTA)
    ours = _dpfast_pld(d, n)
    # the true delta at the reported epsilon must not exceed DELTA (float slack 1e-9 relative)
    assert _gaussian_log_delta(ours, math.sqrt(n) / z) <= math.log(DELTA) + 1e-9
    assert ours <= (1 + TIGHT) * exact
    g = gdp_epsilon(math.sqrt(n) / z, DELTA)  # GDP accounting of the same composition
    assert _gaussian_log_delta(g, math.sqrt(n) / z) <= math.log(DELTA) + 1e-9
    assert g <= (1 + 1e-6) * exact
    rdp_eps, acc = _dpfast_rdp(d, n)
    assert rdp_eps >= exact
    relation = NR.ADD_OR_REMOVE_ONE if neighbours == "add_remove" else NR.REPLACE_ONE
    theirs = _dpa_rdp_curve(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(z), n), DEFAULT_ORDERS, relation)
    np.testing.assert_allclose(acc.rdp, theirs, rtol=1e-12)
    # dp-accounting's REPLACE_ONE Gaussian PLD shifts by +-sensitivity (distance 2 sensitivity);
    # n-fold composition of N(0, z^2) is one Gaussian with standard deviation z / sqrt(n).
    sens = 1.0 if neighbours == "add_remove" else 0.5
    lo = dpa_pld.from_gaussian_mechanism(z / math.sqrt(n), sensitivity=sens, value_discretization_interval=1e-3,
                                         pessimistic_estimate=False, use_connect_dots=False,
                                         neighboring_relation=relation).get_epsilon_for_delta(DELTA)
    assert ours >= lo
    if n <= 10**4:  # prv-accountant's discretiser refuses (mean check) 10^5 self-compositions here
        p = prv.PRVAccountant([prv.GaussianMechanism(z)], eps_error=max(0.002 * exact, 1e-3),
                              delta_error=1e-3 * DELTA, max_self_compositions=[n]).compute_epsilon(DELTA, [n])
        assert ours >= p[0]
        assert abs(ours / p[1] - 1) <= TIGHT


@pytest.mark.parametrize("b,n", [(0.5, 1), (1.0, 10), (3.0, 200), (20.0, 5000)])
def test_laplace_composition_vs_peers(b, n):
    """Laplace (add/remove, sensitivity 1, scale b): PLD vs dp-accounting and prv-accountant,
    RDP curve vs dp-accounting."""
    d = Laplace(b)
    ours = _dpfast_pld(d, n)
    pess = dpa_pld.from_laplace_mechanism(b, value_discretization_interval=1e-4).self_compose(n).get_epsilon_for_delta(DELTA)
    opt = dpa_pld.from_laplace_mechanism(b, value_discretization_interval=1e-4, pessimistic_estimate=False
                                         ).self_compose(n).get_epsilon_for_delta(DELTA)
    p = prv.PRVAccountant([prv.LaplaceMechanism(1.0 / b)], eps_error=max(0.002 * pess, 1e-3), delta_error=1e-3 * DELTA,
                          max_self_compositions=[n]).compute_epsilon(DELTA, [n])
    assert ours >= opt and ours >= p[0]
    assert ours <= n / b + 1e-12  # basic composition of pure (1/b)-DP
    assert abs(ours / p[1] - 1) <= TIGHT and ours <= (1 + TIGHT) * pess
    rdp_eps, acc = _dpfast_rdp(d, n)
    theirs = _dpa_rdp_curve(dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(b), n), DEFAULT_ORDERS, NR.ADD_OR_REMOVE_ONE)
    np.testing.assert_allclose(acc.rdp, theirs, rtol=1e-9)
    assert rdp_eps >= p[0]


# ============================================================================ replace-one
@pytest.mark.parametrize("eps_rr,k,n", [(0.1, 2, 1000), (1.0, 2, 50), (1.0, 5, 200), (3.0, 10, 10), (0.5, 3, 1)])
def test_randomized_response_replace_one_vs_exact_and_dp_accounting(eps_rr, k, n):
    """k-RR (replace-one): PLD vs the exact composition; RDP curve and PLD vs dp-accounting
    (whose RandomizedResponseDpEvent reports a uniform bucket w.p. noise_parameter)."""
    d = RandomizedResponse(eps_rr, k, neighbours="replace_one")
    exact = _rr_composed_epsilon(eps_rr, k, n, DELTA)
    ours = _dpfast_pld(d, n)
    assert _rr_composed_delta(ours, eps_rr, k, n) <= DELTA * (1 + 1e-9)
    assert ours <= (1 + TIGHT) * exact + 1e-12
    noise = k / (math.exp(eps_rr) + k - 1)
    ev = dpa.SelfComposedDpEvent(dpa.RandomizedResponseDpEvent(noise, k), n)
    rdp_eps, acc = _dpfast_rdp(d, n)
    theirs = _dpa_rdp_curve(ev, DEFAULT_ORDERS, NR.REPLACE_ONE)
    np.testing.assert_allclose(acc.rdp, theirs, rtol=1e-6)
    assert rdp_eps >= exact
    # (dp-accounting's PLDAccountant ignores the count of a self-composed RandomizedResponseDpEvent,
    # so its PLD is composed here directly)
    pess = dpa_pld.from_randomized_response(noise, k, value_discretization_interval=1e-4,
                                            neighboring_relation=NR.REPLACE_ONE).self_compose(n)
    assert abs(ours / pess.get_epsilon_for_delta(DELTA) - 1) <= TIGHT


@pytest.mark.parametrize("z,q,n", _grid_replace_one(), ids=_ids(_grid_replace_one()))
def test_sampled_without_replacement_gaussian_vs_peers(z, q, n):
    """SampledWithoutReplacementGaussian (replace-one, z relative to the replace-one sensitivity).

    RDP: dp-accounting's SampledWithoutReplacementDpEvent on the same orders (its bound, WBK19
    Thm 27, is for the same mechanism and relation): equal within 1 % in epsilon, never lower
    at an integer order than a certified lower bound.  PLD: no peer implements the same pair,
    so only the certified lower bounds: prv's remove pair, and dp-accounting's optimistic
    REPLACE_ONE pair (1-q)N(0)+qN(-1/2) vs (1-q)N(0)+qN(+1/2) (in units of z), both realisable
    neighbouring outputs for a sum with replace-one sensitivity 1."""
    d = SampledWithoutReplacement(q, Gaussian(z, neighbours="replace_one"))
    ours = _dpfast_pld(d, n)
    lo, _, _ = _prv_poisson(z, q, n)
    opt = _dpa_poisson_pld(z, q, n, NR.REPLACE_ONE, 0.5, False)
    assert ours >= lo and ours >= opt
    orders = np.array([1.5, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64], dtype=float)
    rdp_eps, acc = _dpfast_rdp(d, n, orders)
    assert rdp_eps >= lo
    N = 10**6
    theirs = _dpa_rdp_curve(dpa.SelfComposedDpEvent(dpa.SampledWithoutReplacementDpEvent(N, round(q * N),
                                                                                          dpa.GaussianDpEvent(z)), n),
                            orders, NR.REPLACE_ONE)
    eps_theirs, _ = dpa_rdp.compute_epsilon(orders, theirs, DELTA)
    assert rdp_eps >= (1 - TIGHT) * eps_theirs
    assert rdp_eps <= (1 + TIGHT) * eps_theirs, (
        f"RDP epsilon {rdp_eps} more than 1% above dp-accounting's {eps_theirs} "
        f"(per-order ratio up to {np.max(acc.rdp / theirs):.4g})")


@pytest.mark.parametrize("eps0,n", [(0.1, 1000), (1.0, 20), (2.0, 1)])
def test_pure_dp_composition_vs_exact_and_prv(eps0, n):
    """PureDP (its dominating pair is binary RR): PLD vs the exact RR composition and
    prv-accountant's PureDPMechanism; RDP above the exact value."""
    exact = _rr_composed_epsilon(eps0, 2, n, DELTA)
    ours = _dpfast_pld(PureDP(eps0), n)
    assert _rr_composed_delta(ours, eps0, 2, n) <= DELTA * (1 + 1e-9)
    assert ours <= (1 + TIGHT) * exact
    p = prv.PRVAccountant([prv.PureDPMechanism(eps0)], eps_error=max(0.002 * exact, 1e-3), delta_error=1e-3 * DELTA,
                          max_self_compositions=[n]).compute_epsilon(DELTA, [n])
    assert ours >= p[0] and abs(ours / p[1] - 1) <= TIGHT
    assert _dpfast_rdp(PureDP(eps0), n)[0] >= exact


@pytest.mark.parametrize("target,q,steps", [(1.0, 0.01, 1000), (8.0, 0.004, 30000), (0.5, 1.0, 1)])
def test_calibrate_noise_multiplier_vs_prv(target, q, steps):
    """The calibrated z meets the target by prv-accountant's certified lower bound (never above
    it) and misses it by < 1 % (the peer's estimate is within 1 % of the target)."""
    z = calibrate_noise_multiplier(target, DELTA, q, steps)
    if q == 1.0:
        exact = _gaussian_epsilon(math.sqrt(steps) / z, DELTA)
        assert exact <= target and exact >= (1 - TIGHT) * target
        return
    lo, est, _ = prv.PRVAccountant([prv.PoissonSubsampledGaussianMechanism(q, z)], eps_error=0.005 * target,
                                   delta_error=1e-3 * DELTA, max_self_compositions=[steps]).compute_epsilon(DELTA, [steps])
    assert lo <= target
    assert est >= (1 - TIGHT) * target
