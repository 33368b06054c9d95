"""dpfast.tools through the native pass (dpfast._stats): released values bit-identical for
DPFAST_NUM_THREADS = 1, 2, 3, for C / Fortran / strided input and for float32 vs float64 input
holding the same values; non-finite input refused before the charge."""
from __future__ import annotations

import numpy as np
import pytest

import dpfast
import dpfast.tools as T

RNG = np.random.default_rng(24)
X32 = RNG.uniform(-1.0, 2.0, (70_001, 3)).astype(np.float32)
X = X32.astype(np.float64)
XN = X.copy()
XN[RNG.random(X.shape) < 0.05] = np.nan
B = (0.0, 1.0)


def _release(name, data, axis):
    if name.startswith("hist"):
        return T.histogramdd(data, 1.0, bins=[4, 3, 5], range=[B, B, B], rng=7)[0]
    return getattr(T, name)(data, 1.0, B, axis=axis, rng=7)


@pytest.mark.parametrize("axis", [None, 0])
@pytest.mark.parametrize("name", ["sum", "mean", "var", "std", "nansum", "nanmean", "nanvar", "nanstd", "histdd"])
def test_release_bit_identical_across_threads_and_layouts(monkeypatch, name, axis):
    data = XN if name.startswith("nan") else X
    out = []
    for t in ("1", "2", "3"):
        monkeypatch.setenv("DPFAST_NUM_THREADS", t)
        out.append(_release(name, data, axis))
    out.append(_release(name, np.asfortranarray(data), axis))
    wide = np.zeros((data.shape[0], 6))
    wide[:, ::2] = data
    out.append(_release(name, wide[:, ::2], axis))
    if not name.startswith("nan"):
        out.append(_release(name, X32, axis))
    for o in out[1:]:
        assert np.asarray(o).tobytes() == np.asarray(out[0]).tobytes()


@pytest.mark.parametrize("name", ["sum", "mean", "var", "nanmean", "histogram"])
def test_non_finite_refused_before_the_charge(name):
    a = np.array([0.5, np.inf, 0.25])
    budget = dpfast.PrivacyBudget(epsilon=10.0, delta=1e-9)
    with pytest.raises(ValueError, match="inf"):
        if name == "histogram":
            T.histogram(a, 1.0, bins=2, range=B, budget=budget)
        else:
            getattr(T, name)(a, 1.0, B, budget=budget)
    assert budget.ledger == ()
