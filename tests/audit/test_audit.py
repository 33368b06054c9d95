"""dpfast.audit: the certified bound's statistics, power, false-alarm rate and structural checks."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import dpfast
from dpfast.audit import audit, neighbours, observe
from dpfast.audit._stats import certified_epsilon, cp_lower, cp_upper

# ----------------------------------------------------------------------------- statistics

@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (5, 10), (10, 10), (37, 1000), (999, 1000)])
def test_clopper_pearson_bounds_are_the_exact_binomial_tails(k, n):
    # The one-sided lower bound p solves P(Bin(n, p) >= k) = alpha; the upper bound
    # P(Bin(n, p) <= k) = alpha (Clopper & Pearson 1934), checked with scipy's binomial law.
    alpha = 0.01
    lo, hi = float(cp_lower(k, n, alpha)), float(cp_upper(k, n, alpha))
    if k == 0:
        assert lo == 0.0
    else:
        assert stats.binom.sf(k - 1, n, lo) == pytest.approx(alpha, rel=1e-6)
    if k == n:
        assert hi == 1.0
    else:
        assert stats.binom.cdf(k, n, hi) == pytest.approx(alpha, rel=1e-6)


def test_certified_epsilon_formula():
    lo, hi = float(cp_lower(600, 1000, 0.025)), float(cp_upper(100, 1000, 0.025))
    assert float(certified_epsilon(600, 1000, 100, 1000, 0.0, 0.05)) == pytest.approx(math.log(lo / hi))
    assert float(certified_epsilon(600, 1000, 100, 1000, 0.1, 0.05)) == pytest.approx(math.log((lo - 0.1) / hi))
    assert certified_epsilon(0, 1000, 100, 1000, 0.0, 0.05) == -np.inf


# ----------------------------------------------------------------------------- power and level

def _laplace_sum(sensitivity):
    def release(x, rng):
        return dpfast.laplace(float(np.sum(x)), sensitivity=sensitivity, epsilon=1.0, rng=rng)
    return release


def test_power_on_an_understated_sensitivity():
    # The power target: the sensitivity of the sum over rows in [0, 2] is 2; calibrating
    # to 1 makes the release 2-DP.  The certified bound must exceed the claimed 1.
    D = np.zeros(5)
    rep = audit(_laplace_sum(1.0), neighbours.arrays(D, bound=2.0, huge=False)[:1], 1.0, rng=0)
    assert not rep.passed and rep.epsilon_lower_bound > 1.0, rep
    assert rep.epsilon_lower_bound <= 2.0 + 1e-9  # and it is a lower bound of the true 2


def test_correct_release_passes_and_gaussian_at_its_delta():
    D = np.zeros(5)
    pairs = neighbours.arrays(D, bound=2.0, huge=False)
    assert audit(_laplace_sum(2.0), pairs[:2], 1.0, rng=1).passed

    def g(x, rng):
        return dpfast.gaussian(float(np.clip(x, 0, 1).sum()), sensitivity=1.0, epsilon=1.0, delta=1e-5, rng=rng)
    rep = audit(g, neighbours.arrays(D, bound=1.0, huge=False)[:1], 1.0, 1e-5, rng=2)
    assert rep.passed, rep


def test_false_alarm_rate_is_at_most_one_minus_confidence():
    # Binary randomized response attains its epsilon exactly (P(1|1) / P(1|0) = e^eps), the worst
    # case for a false alarm.  At confidence 0.8 a failure has probability <= 0.2 per audit; over
    # 40 independent audits the count of failures must not exceed Bin(40, 0.2)'s 1e-4 upper quantile.
    eps = 1.0

    def rr(bit, rng):
        return dpfast.randomized_response(np.array([bit]), epsilon=eps, rng=rng)[0]
    trials = 40
    fails = sum(not audit(rr, (0, 1), eps, n_runs=100, rng=s, confidence=0.8).passed for s in range(trials))
    assert fails <= stats.binom.isf(1e-4, trials, 0.2), fails


def test_detects_randomized_response_at_twice_its_claimed_epsilon():
    def rr(bit, rng):
        return dpfast.randomized_response(np.array([bit]), epsilon=3.0, rng=rng)[0]
    rep = audit(rr, (0, 1), 1.5, n_runs=2000, rng=3)
    assert not rep.passed and rep.epsilon_lower_bound > 1.5


# ----------------------------------------------------------------------------- structure

def test_structural_difference_in_dtype_is_reported_with_both_values():
    def leaky(x, rng):  # the value is private, the dtype tells the neighbours apart
        v = dpfast.laplace(np.asarray(x, dtype=np.float64).sum(), 1.0, 1.0, rng=rng)
        return np.array([v], dtype=np.float32 if len(x) > 3 else np.float64)
    rep = audit(leaky, (np.zeros(3), np.zeros(4)), 1.0, n_runs=40, rng=0)
    assert not rep.passed
    assert any("dtype" in d and "float32" in d and "float64" in d for d in rep.structural_differences), rep


def test_exception_message_is_observed():
    def leaky(x, rng):
        if np.max(x) > 1:
            raise ValueError(f"row {int(np.argmax(x))} is out of bounds")
        return dpfast.laplace(0.0, 1.0, 1.0, rng=rng)
    rep = audit(leaky, (np.zeros(3), np.array([0.0, 0.0, 0.0, 5.0])), 1.0, n_runs=40, rng=0)
    assert any("raises" in d and "row 3" in d for d in rep.structural_differences), rep


def test_index_categories_and_fitted_attributes_are_facts():
    def frame(x, rng):
        cats = sorted(set(x))  # categories listing every key in the data: a leak
        idx = pd.CategoricalIndex(["a"], categories=cats, name="g")
        return pd.DataFrame({"n": [dpfast.laplace(1.0, 1.0, 1.0, rng=rng)]}, index=idx)
    rep = audit(frame, (["a"], ["a", "b"]), 1.0, n_runs=30, rng=0)
    assert any("categories" in d for d in rep.structural_differences), rep

    class Est:
        def get_params(self, deep=True):
            return {}

        def fit(self, X):
            self.coef_ = dpfast.laplace(np.zeros(2), 1.0, 1.0, rng=self.rng)
            if len(X) > 2:
                self.n_iter_ = 3  # an attribute present only on one side
            return self

    def fit(X, rng):
        e = Est()
        e.rng = rng
        return e.fit(X)
    rep = audit(fit, (np.zeros(2), np.zeros(3)), 1.0, n_runs=30, rng=0)
    assert any("fitted_attributes" in d for d in rep.structural_differences), rep


def test_randomized_structure_is_tested_by_its_law():
    # Which groups are released varies run to run: the presence events carry the test.  Releasing
    # a group with probability 0.9 vs 0.1 is log(9) ~ 2.2-DP: detected at a claimed 1; no structural noise.
    def sel(x, rng):
        g = np.random.default_rng(rng)
        keep = g.random() < (0.9 if len(x) > 1 else 0.1)
        return pd.Series([1.0] if keep else [], index=pd.Index(["a"] if keep else [], dtype=object),
                         dtype=np.float64)
    rep = audit(sel, ([0], [0, 1]), 1.0, n_runs=400, rng=0)
    assert not rep.structural_differences, rep.structural_differences
    assert not rep.passed and rep.epsilon_lower_bound > 1.0


def test_observe_walks_nested_outputs():
    facts, nums = observe((np.array([1.0, 2.0]), {"k": 3}, "label"))
    assert nums["out[0][0]"] == 1.0 and nums["out[1]['k']"] == 3.0
    assert facts["out[2]"] == "'label'" and facts["out[0].dtype"] == "float64"
    facts, nums = observe(error=KeyError("x"))
    assert facts["raises"].startswith("builtins.KeyError")


def test_bad_arguments():
    with pytest.raises(TypeError):
        audit(1, (0, 1), 1.0)
    with pytest.raises(ValueError):
        audit(lambda d, r: 0, (0, 1), -1.0)
    with pytest.raises(ValueError):
        audit(lambda d, r: 0, (0, 1), 1.0, n_runs=5)
    with pytest.raises(ValueError):
        audit(lambda d, r: 0, (0, 1), 1.0, confidence=1.0)
    with pytest.raises(ValueError):
        audit(lambda d, r: 0, [], 1.0)


# ----------------------------------------------------------------------------- neighbours

def test_array_neighbours_differ_by_one_row():
    X = np.arange(6.0).reshape(3, 2)
    for p in neighbours.arrays(X, bound=1.0, allow_nan=True):
        assert abs(len(p.D_prime) - len(p.D)) == 1 and p.description
    for p in neighbours.arrays(X, bound=1.0, relation="replace_one"):
        assert p.D_prime.shape == X.shape and (p.D_prime != p.D).any(axis=1).sum() <= 1


def test_labelled_neighbours():
    X, y = np.zeros((4, 2)), np.array([0, 1, 0, 1])
    ps = neighbours.labelled(X, y, bound=1.0, classes=[0, 1, 2])
    assert len(ps) == 6 and all(len(p.D_prime[1]) == 5 for p in ps)
    ps = neighbours.labelled(X, y, relation="replace_one")
    assert all(len(p.D_prime[1]) == 4 and p.D_prime[1][0] != 0 for p in ps)


def test_table_neighbours_add_exactly_one_unit():
    df = pd.DataFrame({"u": np.arange(20), "g": np.arange(20) % 4, "x": 1.0})
    ps = neighbours.tables(df, "u", "g", bounds={"x": (0.0, 2.0)})
    assert len(ps) >= 6
    for p in ps:
        base_units = set(p.D["u"].astype(float))
        new = p.D_prime.iloc[len(p.D):]
        assert len(p.D_prime) > len(p.D)
        assert len(set(new["u"].astype(float))) == 1 and not (set(new["u"].astype(float)) & base_units)


# ----------------------------------------------------------------------------- observation and event gaps
# (found by auditing old commits, benchmarks/audit_old_code.py)

class _BareModel:
    """A fitted model without scikit-learn's get_params (DPSGDClassifier in 0.1 was one)."""

    def fit(self, x, rng):
        self.coef_ = np.array([float(x) + np.random.default_rng(rng).laplace()])
        self.loss_history_ = np.array([1.0, np.nan if x > 0 else 0.5])
        return self


def test_model_without_get_params_is_read_through_its_fitted_attributes():
    facts, nums = observe(_BareModel().fit(0.0, 1))
    assert facts["out.fitted_attributes"] == ("coef_", "loss_history_")
    assert "out.coef_[0]" in nums
    # before: the model was one fact, its repr with a memory address -- different on every run
    assert not any("0x" in str(v) and "0x..." not in str(v) for v in facts.values())
    # a non-finite fitted value that only D' produces is found (as in 0.1's strided DP-SGD input)
    rep = audit(lambda x, rng: _BareModel().fit(x, rng), (0.0, 1.0), 1.0, n_runs=40, rng=0)
    assert not rep.passed and any("nonfinite" in d for d in rep.structural_differences), rep


def test_repr_facts_carry_no_memory_address():
    facts, _ = observe(object())
    assert facts["out"] == "<object object at 0x...>"


def test_thresholds_reach_into_both_tails():
    from dpfast.audit._audit import _thresholds
    x = np.random.default_rng(0).normal(size=100_000)
    t = _thresholds(x)
    # the evenly spaced quantiles stop at 1/47 of the runs; the tail ones go to ~5 runs
    assert np.sum(x > t.max() - 1e-12) <= 6 and np.sum(x < t.min() + 1e-12) <= 6
    assert np.sum(x < np.sort(t)[1]) < 0.001 * x.size



def test_an_audit_in_which_every_run_raises_fails():
    # a release call that is broken (wrong keyword, wrong labels) raises the same error on both
    # sides: nothing was released, and the audit must not pass it
    def broken(x, rng):
        return dpfast.laplace(x, sensitivity=1.0, epsilon=1.0, rgn=rng)
    rep = audit(broken, (np.zeros(2), np.ones(2)), 1.0, n_runs=20, rng=0)
    assert not rep.passed and any(d.startswith("pair 0: no release") or "no release" in d
                                  for d in rep.structural_differences), rep
