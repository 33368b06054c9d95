"""dpfast.tools through the native pass (dpfast._stats): released values bit-identical for
DPFAST_NUM_THREADS = 1, 2, 3, for C / Fortran / strided input and for float32 vs float64 input
holding the same values; non-finite input refused before the charge."""
from __future__ import annotations

import numpy as np
import pytest

import dpfast
import dpfast.tools as T

from _native_checks import assert_bit_identical

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
    assert_bit_identical(monkeypatch, lambda a: _release(name, a, axis), data, strided=True,
                         float32=None if name.startswith("nan") else X32)


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


@pytest.mark.parametrize("name", ["sum", "nansum", "mean", "nanmean", "var", "nanvar", "std", "nanstd",
                                  "histogram", "histogram2d", "histogramdd"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("axis", [None, 0])
def test_one_finiteness_check_the_native_pass_before_the_charge(name, bad, axis):
    """The data are checked once, by the native pass (not by a NumPy scan first): NaN (outside the
    nan forms) and +-inf are refused with the fixed message, before the charge and any draw, for
    a bad element anywhere (first, last, in the vector body or the remainder of a chunk), float32
    too; a NaN in the nan forms is not an error."""
    n = 70_001  # two chunks and a remainder
    for where in (0, 5, n // 2, n - 1):
        for dt in (np.float64, np.float32):
            a = np.full((n, 2), 0.5, dtype=dt)
            a[where, 1] = bad
            budget = dpfast.PrivacyBudget(epsilon=10.0, delta=1e-9)
            gen = np.random.default_rng(3)
            state = gen.bit_generator.state
            if name.startswith("hist"):
                def call():
                    if name == "histogram":
                        return T.histogram(a[:, 1], 1.0, bins=4, range=B, rng=gen, budget=budget)
                    if name == "histogram2d":
                        return T.histogram2d(a[:, 0], a[:, 1], 1.0, bins=4, range=[B, B], rng=gen, budget=budget)
                    return T.histogramdd(a, 1.0, bins=4, range=[B, B], rng=gen, budget=budget)
            else:
                def call():
                    return getattr(T, name)(a, 1.0, B, axis=axis, rng=gen, budget=budget)
            if name.startswith("nan") and bad != bad:
                call()  # NaN is skipped by the nan forms
                continue
            with pytest.raises(ValueError, match="inf" if name.startswith("nan") else "finite|inf") as exc:
                call()
            assert str(exc.value) in ("a must not contain inf",
                                      "a must be finite (no NaN or inf; the nan* functions ignore NaN)")
            assert budget.ledger == ()
            assert gen.bit_generator.state == state  # nothing drawn


def test_huge_finite_values_are_not_refused():
    """The native pass flags a chunk whose unclamped sum is not finite and rescans it: finite values
    whose sum overflows (a false flag) are accepted, and released as clamped values."""
    big = np.full(70_001, 1.7e308)
    big[::2] = -1.7e308
    for name in ("sum", "mean", "var", "nanmean", "nanstd"):
        out = getattr(T, name)(big, 1.0, B, rng=1)
        assert np.isfinite(out)
    assert np.isfinite(T.mean(np.full(1000, 1.7e308), 1.0, B, rng=1))


def test_one_draw_equals_the_per_part_draws():
    """The release's noise is one native draw of the concatenated parts: the same doubles, in
    order, as one ``laplace_noise`` call per part, and the generator ends in the same state."""
    from dpfast.mechanisms import laplace_noise
    from dpfast.tools._statistics import _Noise

    parts = ((0.5, ()), (2.0, (3,)), (7.0, (2, 2)), (1e-3, ()))
    g1, g2 = np.random.default_rng(11), np.random.default_rng(11)
    got = _Noise(*parts).draw(g1)
    want = [laplace_noise(b, size=s if s else None, rng=g2) for b, s in parts]
    for a, b in zip(got, want):
        assert np.asarray(a).shape == np.shape(b)
        assert np.asarray(a, dtype=np.float64).tobytes() == np.asarray(b, dtype=np.float64).tobytes()
    assert g1.bit_generator.state == g2.bit_generator.state
    assert isinstance(got[0], float) and isinstance(got[3], float)


def test_scalar_release_equals_the_array_arithmetic():
    """One output entry (axis=None) is computed on Python floats: the same doubles as the array
    arithmetic of the per-entry path (keepdims=True gives a (1,) entry through NumPy)."""
    rng = np.random.default_rng(5)
    for data in (rng.uniform(-0.5, 1.5, 1001), rng.uniform(0.0, 1.0, 7)):
        for name, kw in (("mean", {}), ("var", {}), ("var", {"ddof": 1}), ("std", {"ddof": 1.5}),
                         ("nanmean", {}), ("nanvar", {"ddof": 1}), ("sum", {})):
            for eps in (0.01, 1.0, 100.0):
                a = getattr(T, name)(data, eps, B, rng=9, **kw)
                b = getattr(T, name)(data, eps, B, keepdims=True, rng=9, **kw)
                assert np.asarray(a).tobytes() == np.asarray(b).reshape(()).tobytes()
