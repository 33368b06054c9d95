"""Red team, stop 31 (fresh eyes on the exact Gram sums of ``LinearRegression(method="ssp")``).

The SSP Gram kernel maps every column to the fixed-point grid of a power-of-two bound
``2^e >= bound`` and the native binding refuses exponents outside [-900, 900].  Public bounds whose
exponent leaves that range (``label_bound=1e-300``, ``norm_bound=1e-300`` with an intercept) were
refused only inside the exact pass, i.e. AFTER the charge: the budget recorded a release
(epsilon 0.643 of 10) that never happened.  Bounds whose sensitivity overflows
(``norm_bound=label_bound=1e154``: ``R ** 4`` in Python floats) raised a bare
``OverflowError: (34, 'Numerical result out of range')`` instead of the clear error that an
infinite noise scale gets.  Both are public-parameter errors: refused before the charge, with
a message naming the parameters.
"""
import numpy as np
import pytest

from dpfast.budget import PrivacyBudget
from dpfast.linear_model import LinearRegression


def _data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (40, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True) * 1.01
    return X, rng.uniform(-1, 1, 40)


@pytest.mark.parametrize("norm_bound, label_bound, fit_intercept", [
    (1.0, 1e-300, False), (1.0, 1e-300, True), (1e-300, 1.0, True), (3e-308, 1.0, True),
    (1.0, 2.0 ** 901, False), (2.0 ** -905, 1.0, True),
])
def test_ssp_grid_exponent_out_of_range_is_refused_before_the_charge(norm_bound, label_bound, fit_intercept):
    X, y = _data()
    budget = PrivacyBudget(10.0, 1e-3)
    est = LinearRegression(1.0, 1e-5, method="ssp", norm_bound=norm_bound, label_bound=label_bound,
                           fit_intercept=fit_intercept, random_state=0)
    with pytest.raises(ValueError, match="norm_bound|label_bound|intercept_scaling"):
        est.fit(X, y, budget=budget)
    assert budget.spent() == 0.0 and len(budget.ledger) == 0


@pytest.mark.parametrize("norm_bound, label_bound", [(1e154, 1e154), (1e78, 1.0), (1.0, 1e300)])
def test_ssp_sensitivity_overflow_is_a_clear_error_before_the_charge(norm_bound, label_bound):
    X, y = _data()
    budget = PrivacyBudget(10.0, 1e-3)
    est = LinearRegression(1.0, 1e-5, method="ssp", norm_bound=norm_bound, label_bound=label_bound,
                           fit_intercept=False, random_state=0)
    with pytest.raises(ValueError, match="not representable|norm_bound|label_bound"):
        est.fit(X, y, budget=budget)
    assert budget.spent() == 0.0 and len(budget.ledger) == 0


def test_ssp_dask_grid_exponent_out_of_range_is_refused_before_the_charge():
    da = pytest.importorskip("dask.array")
    X, y = _data()
    budget = PrivacyBudget(10.0, 1e-3)
    est = LinearRegression(1.0, 1e-5, method="ssp", label_bound=1e-300, random_state=0)
    with pytest.raises(ValueError, match="label_bound"):
        est.fit(da.from_array(X, chunks=(10, 3)), da.from_array(y, chunks=10), budget=budget)
    assert budget.spent() == 0.0 and len(budget.ledger) == 0
