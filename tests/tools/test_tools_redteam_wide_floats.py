"""Red-team (issue 24, tools): a finite value of a wider float type is data like any other.

A ``longdouble`` entry of 1e4000 is finite; the bounds clamp it like every out-of-range value,
and the release is then the one of the clamped data.  Today ``_data`` casts to float64 first,
the entry becomes inf, and the call is refused ("a must be finite") -- a refusal, before the
charge, whose occurrence depends on one record's magnitude.  xfail(strict) until the cast
clamps (e.g. ``np.clip(x, lo, hi)`` in the input's own dtype before the float64 cast) or the
wide input is refused for its dtype (public) rather than for its values.
"""
import numpy as np
import pytest

from dpfast import tools
from dpfast.budget import PrivacyBudget

pytestmark = pytest.mark.skipif(np.finfo(np.longdouble).max <= np.finfo(np.float64).max,
                                reason="longdouble is float64 on this platform")


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.xfail(strict=True, raises=ValueError, reason="the float64 cast turns a finite longdouble into inf: refused")
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
