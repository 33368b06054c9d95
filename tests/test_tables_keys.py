"""dpfast.tables: the keys of unit and group values (a function of the value alone), the one
rule for value columns, and the kernel's centred terms within their bounds (issue 21, items
3, 7b, 12; pandas input -- the Dask side is in test_tables_dask.py)."""
from fractions import Fraction

import numpy as np
import pandas as pd

from dpfast import _tables
from dpfast.tables import aggregate


# ---- item 7b: every centred term within the bound the release's sensitivity assumes ----------

NARROW = (1060.3046685859608, 1060.304668585962)  # a few ulps apart: the midpoint rounds to one side


def _terms(lo, hi, xs):
    """Per row (one group each): the kernel's centred term y and y^2 (continuous sums)."""
    n = len(xs)
    res = _tables.bound_and_sum(np.arange(n, dtype=np.int64), n, np.arange(n, dtype=np.uint64),
                                np.arange(n, dtype=np.int64), n, np.arange(n, dtype=np.uint64),
                                np.array([xs], dtype=np.float64), np.array([lo]), np.array([hi]), None, 1, 1, 1,
                                False, 1)
    y = [Fraction(float(a)) + Fraction(float(b)) for a, b in zip(res["s1"][0][0], res["s1"][1][0])]
    y2 = [Fraction(float(a)) + Fraction(float(b)) for a, b in zip(res["s2"][0][0], res["s2"][1][0])]
    return y, y2


def _check_terms(lo, hi, xs):
    # the release's figures, computed as dpfast/tables/_aggregate.py computes them
    m, r = (lo + hi) / 2.0, (hi - lo) / 2.0
    h2 = r * r / 2.0
    y, y2 = _terms(lo, hi, xs)
    for yi, y2i in zip(y, y2):
        assert abs(yi) <= Fraction(r)  # centred sums of mean and variance: sensitivity Linf r per group
        assert Fraction(lo) <= yi + Fraction(m) <= Fraction(hi)  # sum = sum(y) + m C: |term| <= max(|lo|, |hi|)
        assert abs(y2i - Fraction(h2)) <= Fraction(h2)  # centred squares: Linf r^2/2


def test_centred_terms_respect_their_bounds_for_bounds_a_few_ulps_apart():
    lo, hi = NARROW
    # on 1181d15 the row at hi gave y = 1.2 r: 20 % over the mean's sensitivity, 44 % over the variance's
    _check_terms(lo, hi, [lo, hi, 1e9, -1e9, (lo + hi) / 2])


def test_centred_terms_respect_their_bounds_on_random_narrow_and_wide_bounds():
    r = np.random.default_rng(0)
    for _ in range(200):
        lo = float(r.choice([-1, 1]) * 10.0 ** r.uniform(-130, 130))
        hi = lo
        for _ in range(int(r.integers(0, 8))):
            hi = np.nextafter(hi, np.inf)
        if r.random() < 0.3:
            hi = lo + abs(lo) * r.uniform(0, 3)
        xs = [lo, hi, np.nextafter(hi, -np.inf), np.nextafter(lo, np.inf), r.uniform(lo, hi)]
        _check_terms(lo, float(hi), [min(max(x, lo), hi) for x in xs])


def test_mean_and_variance_stay_in_range_with_narrow_bounds():
    lo, hi = NARROW
    df = pd.DataFrame({"u": np.arange(50), "g": 0, "x": hi})
    out = aggregate(df, "u", "g", {"m": ("mean", "x"), "v": ("variance", "x")}, {"x": NARROW}, epsilon=1.0,
                    groups=[0], rng=1)
    assert lo <= out["m"].iloc[0] <= hi and 0.0 <= out["v"].iloc[0] <= ((hi - lo) / 2) ** 2
