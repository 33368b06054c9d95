"""RRSPM (Algorithm 4): exact coupling (Lemma 18), empirical audit, accuracy (spec public_data.md 2.4, 3.3, 6.2)."""
import math

import numpy as np
import pytest
from scipy import stats

from dpfast.public import Stump, rrspm, rrspm_weight_scale, stump_oracle, threshold_oracle


def cp_lower(k, n, a):
    return 0.0 if k == 0 else float(stats.beta.ppf(a, k, n - k + 1))


def cp_upper(k, n, a):
    return 1.0 if k == n else float(stats.beta.ppf(1 - a, k + 1, n - k))


def pattern(oracle, X, y, Z, xi, ytil):
    """h = f_tilde(Z) for signed public weights xi (negative weights folded into label flips)."""
    lab = np.where(xi >= 0, ytil, 1 - ytil)
    Xa = np.concatenate([X, Z])
    ya = np.concatenate([y, lab])
    wa = np.concatenate([np.ones(len(y)), np.abs(xi)])
    return oracle(Xa, ya, wa).predict(Z)


@pytest.mark.parametrize("neighbours,c", [("replace_one", 2.0), ("add_remove", 1.0)])
def test_lemma18_coupling_holds_exactly(neighbours, c):
    """For every draw, shifting the weights by c towards the output keeps the output on D'."""
    rng = np.random.default_rng(7)
    failures_without_shift = 0
    for trial in range(400):
        n, m, p = int(rng.integers(1, 8)), int(rng.integers(1, 6)), int(rng.integers(1, 3))
        X = rng.integers(0, 4, size=(n, p)).astype(float)
        y = rng.integers(0, 2, size=n)
        Z = rng.integers(0, 4, size=(m, p)).astype(float)
        ytil = rng.integers(0, 2, size=m)
        xi = rng.laplace(0.0, 1.5, size=m)
        x_new = rng.integers(0, 4, size=(1, p)).astype(float)
        y_new = rng.integers(0, 2, size=1)
        if neighbours == "replace_one":
            X2 = X.copy()
            y2 = y.copy()
            X2[0], y2[0] = x_new[0], y_new[0]
        else:
            X2, y2 = np.concatenate([X, x_new]), np.concatenate([y, y_new])
        for D, D2 in (((X, y), (X2, y2)), ((X2, y2), (X, y))):  # both directions (add and remove)
            h = pattern(stump_oracle, *D, Z, xi, ytil)
            shifted = xi + c * (1 - 2 * (h != ytil))
            assert np.array_equal(pattern(stump_oracle, *D2, Z, shifted, ytil), h)
            failures_without_shift += not np.array_equal(pattern(stump_oracle, *D2, Z, xi, ytil), h)
    assert failures_without_shift > 0  # the private change does move the output: the test has power


def _event_rate(X, y, z, eps, neighbours, runs, seed):
    rng = np.random.default_rng(seed)
    return sum(
        rrspm(X, y, z, epsilon=eps, oracle="threshold", neighbours=neighbours, rng=rng).public_labels[0]
        for _ in range(runs)
    )


@pytest.mark.slow
def test_audit_replace_one():
    """One public point z and one private point at z: P(h=1) = 1/2 + (1 - e^{-1/b})/2 vs e^{-1/b}/2.

    True privacy loss log(2 e^{eps/2} - 1) = 0.83 at eps = 1; the Clopper-Pearson lower bound must
    stay below eps."""
    eps, runs, a = 1.0, 3000, 1e-4
    z = np.array([0.5])
    k1 = _event_rate(np.array([0.5]), np.array([1]), z, eps, "replace_one", runs, 1)
    k2 = _event_rate(np.array([0.5]), np.array([0]), z, eps, "replace_one", runs, 2)
    lb = math.log(cp_lower(k1, runs, a) / cp_upper(k2, runs, a))
    assert lb <= eps
    assert math.log(k1 / k2) == pytest.approx(math.log(2 * math.exp(eps / 2) - 1), abs=0.15)


@pytest.mark.slow
def test_audit_add_remove_is_tight():
    """D = {(z,0)}, D' = D + {(z,1)}: P(h=1) = e^{-eps}/2 vs 1/2 -- the pure-DP bound is attained."""
    eps, runs, a = 1.0, 3000, 1e-4
    z = np.array([0.5])
    k1 = _event_rate(np.array([0.5]), np.array([0]), z, eps, "add_remove", runs, 3)
    k2 = _event_rate(np.array([0.5, 0.5]), np.array([0, 1]), z, eps, "add_remove", runs, 4)
    lb = math.log(cp_lower(k2, runs, a) / cp_upper(k1, runs, a))
    assert lb <= eps
    assert math.log(k2 / k1) == pytest.approx(eps, abs=0.15)


def test_weight_scale():
    assert rrspm_weight_scale(10, 0.5) == pytest.approx(40.0)
    assert rrspm_weight_scale(10, 0.5, "add_remove") == pytest.approx(20.0)
    with pytest.raises(ValueError, match="neighbours"):
        rrspm_weight_scale(10, 0.5, "swap")


def test_thresholds_learned_with_public_points():
    """Thresholds on [0,1] (not eps-DP learnable without public data): 60 public points, n = 20,000."""
    rng = np.random.default_rng(0)
    errs = []
    for _ in range(5):
        x = rng.random(20_000)
        y = (x > 0.37).astype(int)
        y[rng.random(x.size) < 0.1] ^= 1
        res = rrspm(x, y, rng.random(60), epsilon=1.0, oracle="threshold", rng=rng)
        errs.append(abs(res.hypothesis.threshold - 0.37))
        assert res.oracle_calls == 2
    assert np.median(errs) < 0.05
    assert res.description().epsilon == 1.0


def test_user_oracle_and_inexact_oracle():
    rng = np.random.default_rng(1)
    x = rng.random(500)
    y = (x > 0.5).astype(int)
    z = rng.random(10)
    calls = []

    def oracle(X, y, w):
        calls.append(len(y))
        return threshold_oracle(X, y, w)

    res = rrspm(x, y, z, epsilon=1.0, oracle=oracle, rng=0)
    assert calls == [510, 10]
    assert isinstance(res.hypothesis, Stump)

    def not_consistent(Z, h):  # not an exact ERM: the constant-1 hypothesis, whatever h is
        return lambda X: np.ones(len(np.atleast_1d(X)), dtype=int)

    y_mixed = (x > 0.5).astype(int)
    with pytest.raises(RuntimeError, match="not an exact"):
        for seed in range(20):  # some draw releases a non-constant pattern h
            rrspm(x, y_mixed, z, epsilon=1.0, oracle="threshold", consistency=not_consistent, rng=seed)


def test_bad_input():
    with pytest.raises(ValueError, match="0/1"):
        rrspm(np.zeros(3), np.array([0, 1, 2]), np.zeros(2), epsilon=1.0)
    with pytest.raises(ValueError, match="oracle"):
        rrspm(np.zeros(3), np.array([0, 1, 1]), np.zeros(2), epsilon=1.0, oracle="svm")
    with pytest.raises(ValueError, match="1 feature"):
        rrspm(np.zeros((3, 2)), np.array([0, 1, 1]), np.zeros((2, 2)), epsilon=1.0, oracle="threshold")
