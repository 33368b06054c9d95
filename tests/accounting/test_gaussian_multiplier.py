"""The two entry points of the Gaussian noise-multiplier search agree: ERM/SSP's
``erm_calibration.gaussian_multiplier`` (count Gaussian releases, ``"best"`` of two accountants,
an error where none certifies) and PCA/scalers' ``accountant_gaussian_multiplier`` (one Gaussian
of a given sensitivity, searched in [z0, 2 z0], the analytic multiplier z0 where the accountant
certifies none there), over a grid of (epsilon, delta) with its extremes."""
from __future__ import annotations

import math

import pytest

from dpfast.accounting import Gaussian
from dpfast.accounting.calibration import accountant_gaussian_multiplier
from dpfast.accounting.erm_calibration import event_epsilon, gaussian_multiplier
from dpfast.calibrate import gaussian_sigma

#: the search's relative tolerance (1e-9), plus the first trial's offset z0 (1 + 1e-9)
RTOL = 2e-9
GRID = [(e, d) for e in (1e-3, 0.1, 1.0) for d in (1e-12, 1e-5, 0.1)]
# the PLD accountant takes seconds per evaluation at large epsilon (wide privacy-loss ranges)
EXTREMES = [(10.0, 1e-12), (10.0, 1e-5), (10.0, 0.1), (1e-3, 0.9), (10.0, 0.9), (100.0, 1e-12), (100.0, 0.9)]


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
@pytest.mark.parametrize("epsilon,delta", GRID + [pytest.param(*p, marks=pytest.mark.slow) for p in EXTREMES])
def test_both_searches_give_the_same_multiplier(epsilon, delta, accountant):
    z0 = float(gaussian_sigma(epsilon, delta, 1.0))  # exact (Balle & Wang 2018): no valid z below it
    z_home, eps_home, which_home = accountant_gaussian_multiplier(epsilon, delta, 1.0, accountant)
    try:
        z_erm, which = gaussian_multiplier(epsilon, delta, 1, accountant)
    except ValueError:  # the accountant certifies no multiplier: the home falls back to z0
        assert (z_home, eps_home, which_home) == (z0, epsilon, None)
        return
    assert which == accountant
    assert z_erm >= z0 and event_epsilon(Gaussian(z_erm, sensitivity=1.0), delta, accountant) <= epsilon
    if which_home is None:  # certified only beyond the home's range [z0, 2 z0]
        assert z_home == z0 and z_erm > 2.0 * z0
        return
    assert which_home == accountant and z_home >= z0 and eps_home <= epsilon
    assert math.isclose(z_erm, z_home, rel_tol=RTOL, abs_tol=0.0)


@pytest.mark.parametrize("epsilon,delta", [(0.5, 1e-6), (3.0, 1e-3)])
def test_count_releases_and_best_accountant(epsilon, delta):
    """count Gaussians = one of sensitivity sqrt(count); "best" is the smaller of the two."""
    count = 9
    z_pld, eps_pld, _ = accountant_gaussian_multiplier(epsilon, delta, 3.0, "pld")
    z_rdp, _, _ = accountant_gaussian_multiplier(epsilon, delta, 3.0, "rdp")
    z, which = gaussian_multiplier(epsilon, delta, count, "best")
    assert which == ("pld" if z_pld <= z_rdp else "rdp")
    assert math.isclose(z, min(z_pld, z_rdp), rel_tol=RTOL, abs_tol=0.0)
