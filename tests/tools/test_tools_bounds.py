"""dpfast.tools.bounds: the law of the two exponential-mechanism draws, the coverage guarantee,
the event and the checks before the charge."""
import math

import numpy as np
import pytest

import dpfast
from dpfast import tools

DBL_MAX = float(np.finfo(np.float64).max)


def _A(scale=1.0):
    # |asinh(x / scale)| <= log(2 DBL_MAX / scale) + 1 for every double (asinh(u) <= log 2u + 1/(4u^2))
    return math.log(2.0) + math.log(DBL_MAX) - math.log(scale) + 1.0


def _interval_probs(x, q, e, scale=1.0):
    """Exact probabilities of the N+1 intervals between the sorted asinh(x/scale) on [-A, A]
    under the density prop. to exp(-(e/2)|#{t_i <= t} - qN|) (Smith 2011, AW Alg. 3)."""
    t = np.sort(np.arcsinh(np.asarray(x, float) / scale))
    A = _A(scale)
    edges = np.concatenate([[-A], t, [A]])
    N = t.size
    logw = np.log(np.diff(edges)) - (e / 2) * np.abs(np.arange(N + 1) - q * N)
    w = np.exp(logw - logw.max())
    return w / w.sum()


def test_outer_intervals_have_the_exponential_mechanism_law():
    # P(lower < min x) and P(upper > max x) of the sorted pair, from the exact weights of both
    # draws (each at epsilon/2: e = 20 per draw for epsilon = 40, one column)
    x = np.array([-1.0, 0.5, 2.0, 3.0])
    eps, tail, R = 40.0, 0.25, 3000
    p_lo = _interval_probs(x, tail, eps / 2)
    p_hi = _interval_probs(x, 1 - tail, eps / 2)
    below = 1 - (1 - p_lo[0]) * (1 - p_hi[0])
    above = 1 - (1 - p_lo[-1]) * (1 - p_hi[-1])
    assert 0.005 < below < 0.2 and 0.005 < above < 0.2  # the test has power on both
    gen = np.random.default_rng(7)
    out = np.array([tools.bounds(x, eps, tail=tail, rng=gen) for _ in range(R)])
    for freq, p in ((np.mean(out[:, 0] < x.min()), below), (np.mean(out[:, 1] > x.max()), above)):
        assert abs(freq - p) < 4.5 * math.sqrt(p * (1 - p) / R), (freq, p)


def _rank_radius(x, q, e, beta):
    """The smallest r with (2A / w(r/2)) exp(-e r / 4) <= beta (the module's guarantee)."""
    t = np.sort(np.arcsinh(x))
    N = t.size
    A = _A()
    for r in range(1, N):
        lo = max(int(math.ceil(q * N - r / 2)), 1)
        hi = min(int(math.floor(q * N + r / 2)), N - 1)
        w = t[hi] - t[lo - 1] if hi >= lo else 0.0  # ranks lo..hi: t in [t_(lo), t_(hi+1))
        if w > 0 and math.log(2 * A / w) - e * r / 4 <= math.log(beta):
            return r
    return N


def test_coverage_guarantee_holds():
    rng = np.random.default_rng(3)
    x = rng.normal(100.0, 10.0, 4000)
    eps, tail, beta, runs = 2.0, 0.02, 1e-4, 40
    e = eps / 2
    r_lo, r_hi = _rank_radius(x, tail, e, beta), _rank_radius(x, 1 - tail, e, beta)
    assert r_lo < tail * x.size  # the guarantee is informative here
    for s in range(runs):
        lo, hi = tools.bounds(x, eps, tail=tail, rng=s)
        assert lo < hi
        assert np.sum(x <= lo) <= tail * x.size + r_lo
        assert np.sum(x < lo) >= tail * x.size - r_lo
        assert np.sum(x > hi) <= tail * x.size + r_hi


def test_axis0_columns_event_and_shapes():
    rng = np.random.default_rng(1)
    X = rng.normal(0.0, [1.0, 1000.0, 1e-3], size=(50000, 3))
    b = dpfast.PrivacyBudget(epsilon=1.1, delta=1e-6)
    lo, hi = tools.bounds(X, 1.0, axis=0, rng=2, budget=b)
    assert lo.shape == hi.shape == (3,)
    assert np.all(lo < hi)
    assert np.all(np.mean((X < lo) | (X > hi), axis=0) < 0.1)
    (c,) = b.ledger
    assert c.event == dpfast.accounting.SelfComposed(dpfast.accounting.ExponentialMechanism(1.0 / 6), 6)
    assert c.epsilon == pytest.approx(1.0, rel=1e-3)


def test_axis_none_counts_d_elements_per_row():
    b = dpfast.PrivacyBudget(epsilon=1.1, delta=1e-6)
    X = np.random.default_rng(0).normal(size=(3000, 2))
    lo, hi = tools.bounds(X, 1.0, rng=0, budget=b)
    assert isinstance(lo, float) and lo < hi
    assert b.ledger[0].event == dpfast.accounting.SelfComposed(dpfast.accounting.ExponentialMechanism(0.5), 2)


def test_degenerate_and_extreme_data():
    lo, hi = tools.bounds(np.full(1000, 3.0), 5.0, rng=0)
    assert lo < hi and np.isfinite([lo, hi]).all()
    lo, hi = tools.bounds(np.array([-DBL_MAX, DBL_MAX] * 500), 5.0, rng=0)
    assert np.isfinite([lo, hi]).all() and lo < hi


@pytest.mark.parametrize("kw, exc", [(dict(tail=0.5), ValueError), (dict(tail=0.0), ValueError),
                                     (dict(tail="x"), TypeError), (dict(scale=0.0), ValueError),
                                     (dict(scale=np.inf), ValueError), (dict(axis=1), ValueError),
                                     (dict(scale=True), TypeError)])
def test_bad_parameters_fail_before_the_charge(kw, exc):
    b = dpfast.PrivacyBudget(epsilon=1.1, delta=1e-6)
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    with pytest.raises(exc):
        tools.bounds(np.ones((10, 2)), 1.0, rng=gen, budget=b, **kw)
    assert not b.ledger and gen.bit_generator.state == state


def test_two_call_pattern_shares_one_budget():
    x = np.random.default_rng(5).lognormal(3.0, 1.0, 20000)
    b = dpfast.PrivacyBudget(epsilon=1.1, delta=1e-6)
    lo, hi = tools.bounds(x, 0.3, rng=1, budget=b)
    m = tools.mean(x, 0.7, (lo, hi), rng=1, budget=b)
    assert lo <= m <= hi
    assert b.spent() == pytest.approx(1.0, rel=1e-3)
