"""Red-team (issue 24, tools): a finite value of a wider float type is data like any other.

A ``longdouble`` entry of 1e4000 is finite; the bounds clamp it like every out-of-range value,
and the release is then the one of the clamped data.  ``_data`` once cast to float64 first,
the entry became inf, and the call was refused ("a must be finite") -- a refusal, before the
charge, whose occurrence depended on one record's magnitude.  Now finite wide values saturate
at the largest double in their own dtype before the cast; inf and NaN keep their meaning.
"""
import numpy as np
import pytest

from dpfast import tools
from dpfast.budget import PrivacyBudget

pytestmark = pytest.mark.skipif(np.finfo(np.longdouble).max <= np.finfo(np.float64).max,
                                reason="longdouble is float64 on this platform")


@pytest.mark.parametrize("fn", ["mean", "sum", "var"])
def test_finite_longdouble_beyond_float64_is_clamped_not_refused(fn):
    x = np.array([0.25, 0.5, 0.75], dtype=np.longdouble)
    big = x.copy()
    big[2] = np.longdouble("1e4000")  # finite; clamped to the upper bound 1
    clamped = np.array([0.25, 0.5, 1.0])
    f = getattr(tools, fn)
    b = PrivacyBudget(10.0, 1e-6)
    got = f(big, 1.0, bounds=(-1, 1), rng=0, budget=b)
    assert len(b.ledger) == 1
    assert got == f(clamped, 1.0, bounds=(-1, 1), rng=0)


@pytest.mark.parametrize("bad", ["inf", "nan"])
def test_non_finite_longdouble_is_still_refused_before_the_charge(bad):
    x = np.array([0.25, 0.5, np.longdouble(bad)], dtype=np.longdouble)
    b = PrivacyBudget(10.0, 1e-6)
    with pytest.raises(ValueError, match="finite"):
        tools.mean(x, 1.0, bounds=(-1, 1), rng=0, budget=b)
    assert len(b.ledger) == 0


@pytest.mark.parametrize("fn", ["mean", "nanmean", "sum", "var", "count_nonzero", "histogram", "median"])
def test_masked_arrays_are_refused_before_the_charge(fn):
    # np.asarray drops the mask: the masked values would be released (clamped) silently
    x = np.ma.masked_array([0.25, 0.5, 0.75], mask=[False, False, True])
    b = PrivacyBudget(10.0, 1e-6)
    kwargs = {} if fn == "count_nonzero" else {"bounds": (0, 1)}
    if fn == "histogram":
        kwargs = {"range": (0, 1)}
    with pytest.raises(TypeError, match="masked array"):
        getattr(tools, fn)(x, epsilon=1.0, rng=0, budget=b, **kwargs)
    assert len(b.ledger) == 0
