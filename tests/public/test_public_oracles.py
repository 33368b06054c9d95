"""Exact weighted 0-1 oracles (dpfast._public; spec public_data.md 2.4, 4.4)."""

import numpy as np
import pytest

from dpfast import _public
from dpfast.public import Stump, count_oracle_calls, stump_oracle, threshold_oracle


def brute_force(X, y, w, both_signs):
    """Minimum weighted 0-1 loss over every realisable partition (thresholds at -inf and at each value)."""
    best = np.inf
    for j in range(X.shape[1]):
        for t in [-np.inf] + list(np.unique(X[:, j])):
            for s in ((1, -1) if both_signs else (1,)):
                pred = (X[:, j] > t) if s == 1 else (X[:, j] <= t)
                best = min(best, float(np.sum(w * (pred != y))))
    return best


@pytest.mark.parametrize("both_signs", [False, True])
def test_matches_brute_force_with_ties(both_signs):
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 15))
        p = 1 if not both_signs else int(rng.integers(1, 4))
        X = rng.integers(-2, 2, size=(n, p)).astype(float)  # many ties, negative values
        X[(X == 0) & (rng.random(X.shape) < 0.5)] = -0.0  # -0.0 and +0.0 are one value
        y = rng.integers(0, 2, size=n)
        w = rng.exponential(1.0, size=n)
        h = (stump_oracle if both_signs else threshold_oracle)(X, y, w)
        loss = float(np.sum(w * (h.predict(X) != y)))
        assert loss == pytest.approx(brute_force(X, y, w, both_signs), abs=1e-9)
        # the native loss agrees with the hypothesis' loss
        _, _, _, native_loss = _public.stump_erm(np.ascontiguousarray(X), y.astype(np.uint8), w, both_signs)
        assert native_loss == pytest.approx(loss, abs=1e-9)


def numpy_reference(x, y, w):
    """min over thresholds of the weighted 0-1 loss of 1[x > t] (vectorised, groups equal values)."""
    order = np.argsort(x, kind="stable")
    xs, ys, ws = x[order], y[order], w[order]
    delta = np.where(ys == 1, ws, -ws)
    last_of_group = np.append(xs[1:] != xs[:-1], True)
    losses = np.concatenate([[np.sum(w * (y == 0))], np.sum(w * (y == 0)) + np.cumsum(delta)[last_of_group]])
    return losses.min()


def test_large_random_inputs_match_reference():
    """Continuous values exercise every radix pass; rounding to 1e-3 adds ties; both signs."""
    rng = np.random.default_rng(3)
    for trial in range(20):
        n = int(rng.integers(1000, 5000))
        scale = 10.0 ** rng.integers(-300, 300)
        x = rng.normal(size=n) * scale
        if trial % 2:
            x = np.round(x / scale, 3) * scale
        y = rng.integers(0, 2, size=n)
        w = rng.exponential(1.0, size=n)
        h = threshold_oracle(x, y, w)
        loss = float(np.sum(w * (h.predict(x) != y)))
        ref = numpy_reference(x, y, w)
        assert loss == pytest.approx(ref, rel=1e-12, abs=1e-9)


def test_threshold_semantics_and_extremes():
    x = np.array([0.1, 0.2, 0.3, 0.4])
    assert threshold_oracle(x, [0, 0, 1, 1]).threshold == pytest.approx(0.25)  # midpoint of the gap
    assert threshold_oracle(x, [1, 1, 1, 1]).threshold == -np.inf  # all predicted 1
    assert threshold_oracle(x, [0, 0, 0, 0]).threshold == np.inf  # all predicted 0
    # the threshold class has one orientation: decreasing labels cannot be fit exactly
    h = threshold_oracle(x, [1, 1, 0, 0])
    assert np.sum(h.predict(x) != np.array([1, 1, 0, 0])) == 2
    # stumps have both orientations
    s = stump_oracle(x, [1, 1, 0, 0])
    assert s.sign == -1 and np.array_equal(s.predict(x), [1, 1, 0, 0])


def test_tie_break_deterministic_smallest_feature():
    X = np.array([[0.0, 0.0], [1.0, 1.0]])
    s = stump_oracle(X, [0, 1])
    assert s == Stump(0, 0.5, 1)


def test_weights_respected():
    x = np.array([0.0, 1.0, 2.0])
    # a heavy point labelled 0 at x=2 forces everything to 0 beyond 1's weight
    h = threshold_oracle(x, [0, 1, 0], [1.0, 1.0, 5.0])
    assert np.array_equal(h.predict(x), [0, 0, 0])


def test_bad_input():
    with pytest.raises(ValueError, match="0 and 1"):
        stump_oracle([[0.0], [1.0]], [0, 2])
    with pytest.raises(ValueError, match=">= 0"):
        stump_oracle([[0.0], [1.0]], [0, 1], [1.0, -1.0])
    with pytest.raises(ValueError, match="NaN"):
        stump_oracle([[np.nan], [1.0]], [0, 1])
    with pytest.raises(ValueError, match="1 feature"):
        threshold_oracle(np.zeros((3, 2)), [0, 1, 0])
    with pytest.raises(ValueError, match="shape"):
        stump_oracle(np.zeros((3, 2)), [0, 1])
    # the native layer never crashes on bad input either
    with pytest.raises(ValueError):
        _public.stump_erm(np.zeros((2, 1)), np.array([0, 3], np.uint8), np.ones(2), True)
    with pytest.raises(ValueError):
        _public.stump_predict(np.zeros((2, 1)), 5, 0.0, 1)


def test_count_oracle_calls():
    c = count_oracle_calls(stump_oracle)
    c(np.zeros((3, 1)), [0, 1, 0])
    c(np.zeros((3, 1)), [0, 1, 0])
    assert c.calls == 2 and c.seconds >= 0


def test_large_input_fast_enough():
    rng = np.random.default_rng(1)
    x = rng.random(200_000)
    y = (x > 0.3).astype(int)
    h = threshold_oracle(x, y)
    assert 0.29 < h.threshold < 0.31
