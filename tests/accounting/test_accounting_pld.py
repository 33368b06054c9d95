"""PLD accountant (spec accounting.md, "Privacy-loss distributions"; lectures D17-D20, H3.37)."""
import math

import numpy as np
import pytest

from dpfast import _pld
from dpfast.accounting import (
    FromDominatingPair,
    FromPrivacyProfile,
    Gaussian,
    Laplace,
    ObjectivePerturbation,
    PLDAccountant,
    PoissonSampled,
    PureDP,
    RandomizedResponse,
    RDPAccountant,
    SampledWithoutReplacement,
    calibrate_noise_multiplier,
)
from dpfast.calibrate import gaussian_delta, gaussian_epsilon


def test_k_fold_gaussian_equals_one_gaussian():
    k, sigma = 50, 5.0
    acc = PLDAccountant(1e-3).compose(Gaussian(sigma), count=k)
    for d in (1e-3, 1e-6, 1e-10):
        exact = gaussian_epsilon(sigma / math.sqrt(k), d)
        lo, hi = acc.get_epsilon_bounds(d)
        assert lo - 1e-9 <= exact <= hi + 1e-9
        assert hi - exact < 2e-3
    for e in (0.5, 1.0, 2.0):
        exact = gaussian_delta(sigma / math.sqrt(k), e)
        lo, hi = acc.get_delta_bounds(e)
        assert lo <= exact * (1 + 1e-9) and exact <= hi * (1 + 1e-9)
        assert hi == pytest.approx(exact, rel=1e-3)


def test_heterogeneous_gaussians_compose_like_gdp():
    acc = PLDAccountant(1e-3).compose(Gaussian(1.0 / 0.3)).compose(Gaussian(1.0 / 0.4), count=1)
    exact = gaussian_epsilon(1.0 / 0.5, 1e-6)
    lo, hi = acc.get_epsilon_bounds(1e-6)
    assert lo - 1e-9 <= exact <= hi + 1e-9 and hi - exact < 1e-3


def test_pure_dp_composes_to_at_most_k_eps():
    acc = PLDAccountant(1e-3).compose(PureDP(0.5), count=10)
    assert acc.get_delta(5.0) <= 1e-12
    assert acc.get_epsilon(1e-9) <= 5.0 + 1e-9
    lap = PLDAccountant(1e-3).compose(Laplace(2.0, 1.0), count=10)
    assert lap.get_delta(5.0) <= 1e-12


def test_randomized_response_pld_is_exact():
    eps0, k = 1.0, 6
    acc = PLDAccountant(1e-4).compose(RandomizedResponse(eps0), count=k)
    p = math.exp(eps0) / (1 + math.exp(eps0))
    for e in (0.0, 0.3, 1.0, 2.5, 4.0):
        exact = sum(math.comb(k, j) * p ** j * (1 - p) ** (k - j) * max(0.0, 1 - math.exp(e - (2 * j - k) * eps0))
                    for j in range(k + 1))
        assert acc.get_delta(e) == pytest.approx(exact, rel=1e-9, abs=1e-15)
    # the same mechanism as an explicit dominating pair
    pair = FromDominatingPair([p, 1 - p], [1 - p, p])
    acc2 = PLDAccountant(1e-4).compose(pair, count=k)
    assert acc2.get_delta(1.0) == pytest.approx(acc.get_delta(1.0), rel=1e-9)


def test_laplace_single_closed_form():
    # Laplace, sensitivity/scale t: delta(eps) = 1 - exp((eps - t)/2) for 0 <= eps <= t
    t = 1.0
    acc = PLDAccountant(1e-4).compose(Laplace(1.0, 1.0))
    for e in (0.0, 0.25, 0.5, 0.9):
        exact = -math.expm1((e - t) / 2)
        lo, hi = acc.get_delta_bounds(e)
        assert lo <= exact + 1e-12 and exact <= hi + 1e-12 and hi == pytest.approx(exact, rel=1e-6)
    assert acc.get_delta(1.0) <= 1e-12


def test_subsampled_gaussian_single_step_h3_37():
    # sigma = 1, eps = 1: delta_remove(0.1) = 2.0712e-4, delta_remove(0.5) = 0.0288676; add = 0 for q <= 0.5
    assert _pld.subsampled_gaussian_delta(np.array([1.0]), 1.0, 0.1, True)[0] == pytest.approx(2.0712e-4, rel=1e-4)
    assert _pld.subsampled_gaussian_delta(np.array([1.0]), 1.0, 0.5, True)[0] == pytest.approx(0.0288676, rel=1e-5)
    assert _pld.subsampled_gaussian_delta(np.array([1.0]), 1.0, 0.5, False)[0] == 0.0
    for q in (0.1, 0.5):
        exact = _pld.subsampled_gaussian_delta(np.array([1.0]), 1.0, q, True)[0]
        lo, hi = PLDAccountant(1e-4).compose(PoissonSampled(q, Gaussian(1.0))).get_delta_bounds(1.0)
        assert lo <= exact * (1 + 1e-9) and exact <= hi * (1 + 1e-9)
        assert hi == pytest.approx(exact, rel=1e-6)  # connect-the-dots is exact on the grid
    # q = 1 reduces to the Gaussian
    g = PLDAccountant(1e-3).compose(PoissonSampled(1.0, Gaussian(1.0))).get_delta(1.0)
    assert g == pytest.approx(0.12693673750664392, rel=1e-6)


def test_pessimistic_above_optimistic_and_gap_shrinks():
    d = PoissonSampled(0.02, Gaussian(0.8))
    gaps = []
    for h in (2e-3, 1e-3, 5e-4):
        acc = PLDAccountant(h).compose(d, count=200)
        lo, hi = acc.get_epsilon_bounds(1e-6)
        assert acc.grid_step == h  # no automatic refinement at these steps
        assert lo <= hi
        gaps.append(hi - lo)
    assert gaps[0] > gaps[1] > gaps[2]
    his = [PLDAccountant(h).compose(d, count=200).get_epsilon(1e-6) for h in (2e-3, 5e-4)]
    rdp = RDPAccountant().compose(d, count=200).get_epsilon(1e-6)
    assert his[1] <= his[0] + 1e-9 and his[1] < rdp


def test_dpsgd_workload_tight():
    acc = PLDAccountant(1e-4).compose(PoissonSampled(256 / 60000, Gaussian(1.0)), count=14062)
    lo, hi = acc.get_epsilon_bounds(1e-5)
    assert abs(hi - 2.8226) < 0.01 and lo <= hi and hi - lo < 0.05


def test_grid_refines_for_narrow_losses():
    # 10^5 steps at q = 1e-3: the loss spreads over few grid points; the accountant refines h,
    # and the result stays below the RDP bound and near the refined-by-hand value
    d = PoissonSampled(1e-3, Gaussian(1.5))
    acc = PLDAccountant(1e-3).compose(d, count=20000)
    e = acc.get_epsilon(1e-6)
    assert acc.grid_step < 1e-3
    assert e < RDPAccountant().compose(d, count=20000).get_epsilon(1e-6)
    lo, hi = acc.get_epsilon_bounds(1e-6)
    assert lo <= hi and hi - lo < 0.05 * hi


def test_conversions_monotone_and_inverse():
    acc = PLDAccountant(1e-3).compose(PoissonSampled(0.01, Gaussian(1.0)), count=500)
    deltas = np.logspace(-15, -1, 15)
    eps = [acc.get_epsilon(d) for d in deltas]
    assert all(a > b for a, b in zip(eps, eps[1:]))
    for d, e in zip(deltas, eps):
        assert acc.get_delta(e) == pytest.approx(d, rel=1e-9)
    es = np.linspace(0, 4, 9)
    ds = [acc.get_delta(e) for e in es]
    assert all(a >= b for a, b in zip(ds, ds[1:]))
    for e, d in zip(es[1:], ds[1:]):
        assert acc.get_epsilon(d) == pytest.approx(e, rel=1e-9, abs=1e-12)


def test_large_epsilon_and_tiny_delta_do_not_fail():
    acc = PLDAccountant(1e-3).compose(PoissonSampled(0.1, Gaussian(0.5)), count=1000)
    e = acc.get_epsilon(1e-5)
    assert 10 < e < 200 and math.isfinite(e)
    big = PLDAccountant().compose(PureDP(25.0), count=2)
    lo, hi = big.get_epsilon_bounds(1e-5)
    assert lo <= hi <= 50.0 and hi > 49.9
    acc = PLDAccountant(1e-3).compose(PoissonSampled(0.01, Gaussian(1.0)), count=1000)
    e15 = acc.get_epsilon(1e-15)
    assert math.isfinite(e15) and e15 > acc.get_epsilon(1e-10)
    lo, hi = acc.get_epsilon_bounds(1e-15)
    assert lo <= hi <= RDPAccountant().compose(PoissonSampled(0.01, Gaussian(1.0)), count=1000).get_epsilon(1e-15)
    # tiny deltas stay accurate (tilted FFT): 400-fold Gaussian = one Gaussian with sigma 1
    g = PLDAccountant(1e-3).compose(Gaussian(20.0), count=400)
    for d in (1e-12, 1e-15):
        lo, hi = g.get_epsilon_bounds(d)
        exact = gaussian_epsilon(1.0, d)
        assert lo - 1e-9 <= exact <= hi + 1e-9 and hi - exact < 1e-3


def test_from_privacy_profile_gaussian():
    sigma = 2.0
    prof = np.vectorize(lambda e: gaussian_delta(sigma, e))
    exact = gaussian_epsilon(sigma / math.sqrt(3), 1e-6)
    sym = PLDAccountant(1e-4).compose(FromPrivacyProfile(prof, symmetric=True), count=3)
    lo, hi = sym.get_epsilon_bounds(1e-6)
    assert lo - 1e-9 <= exact <= hi + 1e-9 and hi - exact < 1e-2
    chord = PLDAccountant(1e-4).compose(FromPrivacyProfile(prof), count=3).get_epsilon(1e-6)
    assert chord >= hi - 1e-9  # the chord below eps = 0 is valid but looser
    with pytest.raises(ValueError):  # not convex in e^eps: not a privacy profile
        PLDAccountant(1e-3).compose(FromPrivacyProfile(lambda e: np.where(np.asarray(e) < 1, 0.5, 0.0)))


def test_objective_perturbation_profile():
    args = (2.0, 1.0, 0.25, 1.0)
    from dpfast.accounting.objective_perturbation import objective_perturbation_epsilon
    exact = objective_perturbation_epsilon(1e-5, *args)
    lo, hi = PLDAccountant(1e-4).compose(ObjectivePerturbation(*args)).get_epsilon_bounds(1e-5)
    assert lo - 1e-9 <= exact <= hi + 1e-9 and hi - exact < 1e-4


def test_sampled_without_replacement_pld():
    d = SampledWithoutReplacement(0.05, Gaussian(1.0, neighbours="replace_one"))
    acc = PLDAccountant(1e-3).compose(d, count=100)
    lo, hi = acc.get_epsilon_bounds(1e-6)
    assert lo <= hi < RDPAccountant().compose(d, count=100).get_epsilon(1e-6)
    # never better than the Poisson pairs composed separately (the profile is their max)
    p = PLDAccountant(1e-3).compose(PoissonSampled(0.05, Gaussian(1.0)), count=100).get_epsilon(1e-6)
    assert hi >= p - 1e-3


def test_pld_bad_input():
    with pytest.raises(ValueError):
        PLDAccountant(0.0)
    with pytest.raises(ValueError):
        PLDAccountant(5.0)
    acc = PLDAccountant(1e-3).compose(Gaussian(1.0))
    for bad in (0.0, 1.0, -1e-5, float("nan")):
        with pytest.raises(ValueError):
            acc.get_epsilon(bad)
    with pytest.raises(ValueError):
        acc.get_delta(-1.0)
    with pytest.raises(ValueError):
        acc.compose(Gaussian(1.0), count=-2)
    with pytest.raises(ValueError):
        acc.compose(SampledWithoutReplacement(0.1, Gaussian(1.0, neighbours="replace_one")))
    with pytest.raises(TypeError):
        acc.compose("gaussian")


def test_calibration_rdp_and_pld():
    q, T, target = 0.01, 1000, 2.0
    for kind in ("rdp", "pld"):
        z = calibrate_noise_multiplier(target, 1e-5, q, T, accountant=kind, value_discretization=1e-3)
        if kind == "rdp":
            f = lambda s: RDPAccountant().compose(PoissonSampled(q, Gaussian(s)), T).get_epsilon(1e-5)
        else:
            f = lambda s: PLDAccountant(1e-3).compose(PoissonSampled(q, Gaussian(s)), T).get_epsilon(1e-5)
        assert f(z) <= target
        assert f(z * (1 - 3e-3)) > target
    with pytest.raises(ValueError):
        calibrate_noise_multiplier(-1.0, 1e-5, q, T)
    with pytest.raises(ValueError):
        calibrate_noise_multiplier(1.0, 1e-5, 0.0, T)
    with pytest.raises(ValueError):
        calibrate_noise_multiplier(1.0, 1e-5, q, T, accountant="prv")


def test_asymmetric_dominating_pair_and_lanes():
    # a pair whose add direction is worse: the accountant must report the worse lane
    p, q = [0.6, 0.4], [0.4, 0.6]
    pa, qa = [0.8, 0.2], [0.2, 0.8]
    d = FromDominatingPair(p, q, p_add=pa, q_add=qa)
    both = PLDAccountant(1e-3).compose(d, count=3).get_delta(0.5)
    worse = PLDAccountant(1e-3).compose(FromDominatingPair(pa, qa), count=3).get_delta(0.5)
    assert both == pytest.approx(worse, rel=1e-6)
    with pytest.raises(ValueError):
        FromDominatingPair([0.5, 0.6], [0.5, 0.5])


def test_large_epsilon_rr_and_all_infinite_loss_do_not_crash():
    """Regression: RandomizedResponse(800) overflowed in math.exp (OverflowError), and a
    mechanism whose whole loss mass is +inf crashed the Chernoff window (ceil(-inf)).
    Correct answers: RR(50) composed 3 times is exactly 150-DP (delta = 0 above 150, and the
    +-50 atoms are grid points); an all-+inf pair has delta(eps) = 1 for every eps."""
    a = PLDAccountant(0.5).compose(RandomizedResponse(50.0), 3)  # +-50 on the grid
    assert a.get_epsilon(1e-5) <= 150.0 + 1e-9
    assert a.get_delta(150.0) <= 1e-12  # 0 exactly; FFT round-off allowed
    b = PLDAccountant().compose(RandomizedResponse(800.0))  # lo underflows: the PLD says inf,
    assert b.get_epsilon(1e-5) == 800.0  # basic composition: RR(800) is pure 800-DP
    c = PLDAccountant().compose(FromDominatingPair([1.0, 0.0], [0.0, 1.0]), 2).compose(Gaussian(1.0))
    assert c.get_delta(5.0) == 1.0 and c.get_epsilon(0.5) == math.inf


def test_calibrate_noise_multiplier_tiny_sample_rate_answers_at_once():
    # issue 21 item 14: sample_rate=np.float32(1e-45) searched for 14 s (1181d15) through
    # grids far too wide; with q * steps <= delta every multiplier meets the target
    # ((0, q T)-DP by basic composition: each step's total variation is <= q), so the search
    # floor is the answer
    import time

    from dpfast.accounting.calibration import SIGMA_MIN
    from dpfast.accounting.events import PoissonSampled

    t0 = time.process_time()
    z = calibrate_noise_multiplier(1.0, 1e-5, np.float32(1e-45), 1000)
    assert time.process_time() - t0 < 1.0
    assert z == SIGMA_MIN
    # the (0, q)-DP step the shortcut relies on: delta(0) of one step <= q, any noise
    for sigma in (0.3, 1.0):
        acc = PLDAccountant(1e-3).compose(PoissonSampled(1e-3, Gaussian(sigma)))
        assert acc.get_delta_bounds(0.0)[0] <= 1e-3


# ---------------------------------------------------------------- the native log-MGF
def _log_mgf_reference(p, lo, h, t):
    """K(t) = log sum_i p_i e^{t (lo + i) h} by SciPy's log-sum-exp on log p (independent code)."""
    from scipy.special import logsumexp
    i = np.flatnonzero(p > 0)
    if i.size == 0:
        return -np.inf
    return float(logsumexp(np.log(p[i]) + t * (lo + i) * h))


@pytest.mark.parametrize("case", ["two_atoms_far_apart", "tiny_masses", "dense", "one_atom", "empty"])
def test_log_mgf_equals_log_sum_exp(case):
    # the Horner sweep rescales its accumulator over long runs of zeros and tiny masses (where it
    # decayed into subnormals: a pure-DP PLD made a budget charge take 50 s); the value must stay
    # the exact K(t) to double-precision relative error
    import dpfast.accounting.pld as P
    rng = np.random.default_rng(3)
    h, lo = 1e-3, -200_000
    if case == "two_atoms_far_apart":  # PureDP-like: mass at both ends of 4e5 points
        p = np.zeros(400_001)
        p[0], p[-1] = 0.3, 0.7
    elif case == "tiny_masses":  # masses from 1e-300 down to subnormal, then an ordinary one
        p = np.zeros(300_001)
        p[:1000] = 1e-300
        p[1000:2000] = 5e-320
        p[150_000] = 1e-200
        p[-1] = 0.5
    elif case == "dense":
        p = rng.dirichlet(np.ones(5000))
        lo = -2500
    elif case == "one_atom":
        p = np.zeros(100_000)
        p[50_000] = 1.0
    else:
        p = np.zeros(1000)
    ts = np.concatenate([P._T_GRID, -P._T_GRID])
    got = P._log_mgf(p, lo, h, ts)
    want = np.array([_log_mgf_reference(p, lo, h, t) for t in ts])
    if case == "empty":
        assert np.all(got == -np.inf)
        return
    # relative error of the sum: a few ulps per term, over n terms of a Horner sweep
    err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    assert np.all(np.isfinite(got)) and err.max() < 1e-9, (err.max(), got, want)


def test_budget_refuses_a_huge_pure_dp_charge():
    # the fuzz case that hung CI (PureDP(729) against a (1, 1e-6) budget under PLD): refused, nothing spent
    import dpfast
    from dpfast.accounting import PureDP
    b = dpfast.PrivacyBudget(1.0, 1e-6, accountant="pld")
    with pytest.raises(dpfast.BudgetExceededError):
        b.charge(PureDP(729.0), label="huge")
    assert b.spent() == 0.0 and b.remaining() == 1.0


def test_two_privacy_profiles_are_two_events():
    """FromPrivacyProfile holds a callable and compares by identity: two profiles were equal and
    hashed alike (the dataclass inherited DpEvent's field-less __eq__), so the process-wide cache
    of discretized leaves handed one profile's PLD to the other -- a Gaussian profile composed
    after a zero profile read epsilon 0 -- and the accountant merged them as one event twice."""
    zero = FromPrivacyProfile(lambda e: 0.0 * np.asarray(e, dtype=float), symmetric=True)
    sigma = 2.0
    prof = FromPrivacyProfile(np.vectorize(lambda e: gaussian_delta(sigma, e)), symmetric=True)
    assert zero != prof and zero == zero and len({zero, prof}) == 2
    PLDAccountant(1e-4).compose(zero).get_epsilon(1e-6)  # its discretization now cached
    lo, hi = PLDAccountant(1e-4).compose(prof, count=3).get_epsilon_bounds(1e-6)
    exact = gaussian_epsilon(sigma / math.sqrt(3), 1e-6)
    assert lo - 1e-9 <= exact <= hi + 1e-9
    # the two in one ledger: each counted once (the zero profile adds nothing)
    both = PLDAccountant(1e-4).compose(zero).compose(prof).get_epsilon(1e-6)
    assert both == pytest.approx(PLDAccountant(1e-4).compose(prof).get_epsilon(1e-6), rel=1e-6)
