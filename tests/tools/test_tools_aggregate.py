"""dpfast.tools.subsample_and_aggregate (Smith 2011; AW §8 Alg. 1-2): the block coupling (one
row changes one block), Algorithm 2's range, the conditional law of the aggregate, the event,
and (slow) the asymptotics of AW Thm 8.2 with the digest's B12 rate."""
import math

import numpy as np
import pytest
from scipy import stats

import dpfast
from dpfast import tools
from dpfast.tools import _aggregate as SA


def test_adding_a_row_changes_one_block():
    # the add/remove coupling: same stream, the first n labels of n+1 rows are the n labels
    X = np.random.default_rng(0).normal(size=(500, 2))
    Xp = np.vstack([X, [[50.0, -50.0]]])
    k = 7
    la = SA.block_labels(500, k, np.random.default_rng(11))
    lb = SA.block_labels(501, k, np.random.default_rng(11))
    assert np.array_equal(la, lb[:500])
    lo, hi = np.array([-100.0, -100.0]), np.array([100.0, 100.0])
    za = SA.block_values(lambda b: b.mean(axis=0), X, la, k, lo, hi, True)
    zb = SA.block_values(lambda b: b.mean(axis=0), Xp, lb, k, lo, hi, True)
    assert np.sum(np.any(za != zb, axis=1)) == 1
    # replacing a row: one block too
    Xr = X.copy()
    Xr[123] = [9.0, 9.0]
    zr = SA.block_values(lambda b: b.mean(axis=0), Xr, la, k, lo, hi, True)
    assert np.sum(np.any(za != zr, axis=1)) == 1


def test_empty_blocks_take_the_midpoint_and_values_are_clamped():
    labels = np.array([0, 0, 2], dtype=np.int16)
    z = SA.block_values(np.max, np.array([1.0, 7.0, -9.0]), labels, 3, np.array([-5.0]), np.array([5.0]), False)
    assert z.ravel().tolist() == [5.0, 0.0, -5.0]
    z = SA.block_values(lambda b: np.nan, np.array([1.0, 7.0, -9.0]), labels, 3, np.array([-5.0]),
                        np.array([3.0]), False)
    assert z.ravel().tolist() == [-1.0, -1.0, -1.0]


def test_widened_range_is_algorithm_2():
    # AW Alg. 2 lines 1, 5-7: rad = k^(1/3 + 1/10); m +- 4 rad |b - a|; then within [lo, hi]
    a, b, k = 0.2, 0.3, 64
    rad = 64 ** (1 / 3 + 1 / 10)
    assert SA.widened_range(a, b, k, -100.0, 100.0) == pytest.approx((0.25 - 0.4 * rad, 0.25 + 0.4 * rad))
    assert SA.widened_range(b, a, k, 0.0, 1.0) == pytest.approx((0.0, 1.0))
    assert SA.blocks_from_count(10**6) == math.floor((10**6) ** 0.4) == 251
    assert SA.blocks_from_count(-3.0) == 2


def test_aggregate_given_the_quartiles_is_laplace():
    # All z equal to c: both quartile draws fall in the intervals next to c; whatever they are,
    # u - l = 8 rad |b - a| around (a+b)/2, and the output minus the clamped mean is
    # Laplace(2 (u - l) / (k eps_w)).  With a statistic returning a constant c, every block's z
    # is c, the clamped mean is c when c in [l, u]: (out - c) / scale must be Laplace(1).
    # The scale depends on the drawn quartiles, which we reconstruct from the same stream.
    c, k, eps = 0.3, 40, 4.0
    X = np.zeros(4000)
    resid = []
    for s in range(300):
        out = tools.subsample_and_aggregate(lambda b: c, X, eps, bounds=(-1.0, 1.0), n_blocks=k, rng=s)
        gen = np.random.default_rng(s)
        SA.block_labels(X.size, k, gen)
        a, b = dpfast.mechanisms.private_quantile(np.full(k, c), [0.25, 0.75], eps / 2, (-1.0, 1.0), gen)
        lo, hi = SA.widened_range(float(a), float(b), k, -1.0, 1.0)
        scale = 2 * (hi - lo) / (k * eps)
        resid.append((out - np.clip(c, lo, hi)) / scale)
    assert stats.kstest(resid, stats.laplace.cdf).pvalue > 1e-3


def test_event_and_budget():
    X = np.random.default_rng(0).normal(size=(2000, 3))
    b = dpfast.PrivacyBudget(epsilon=2.1, delta=1e-6)
    out = tools.subsample_and_aggregate(lambda r: r.mean(axis=0), X, 2.0, bounds=([-3] * 3, [3] * 3), rng=1,
                                        budget=b)
    assert out.shape == (3,)
    (ch,) = b.ledger
    A = dpfast.accounting
    ew = 2.0 * (1 - SA.COUNT_SHARE)
    assert ch.event == A.Composed((A.Laplace(scale=1 / (2.0 * SA.COUNT_SHARE), sensitivity=1.0),
                                   A.SelfComposed(A.ExponentialMechanism(ew / 12), 6),
                                   A.Laplace(scale=6 / ew, sensitivity=3.0)))
    assert ch.epsilon == pytest.approx(2.0, rel=1e-3)
    b2 = dpfast.PrivacyBudget(epsilon=1.1, delta=1e-6)
    assert isinstance(tools.subsample_and_aggregate(np.median, X[:, 0], 1.0, bounds=(-3, 3), n_blocks=10, rng=1,
                                                    budget=b2), float)
    assert b2.ledger[0].event.events[0] == A.SelfComposed(A.ExponentialMechanism(0.25), 2)


def test_dataframe_and_private_accuracy():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"a": rng.normal(2.0, 1.0, 50_000)})
    est = tools.subsample_and_aggregate(lambda blk: float(blk["a"].median()), df, 20.0, bounds=(-10, 10), rng=2)
    assert abs(est - df["a"].median()) < 0.1


@pytest.mark.parametrize("kw, exc", [(dict(bounds=None), ValueError), (dict(bounds=(1.0, -1.0)), ValueError),
                                     (dict(bounds=([0, 0], [1])), ValueError), (dict(n_blocks=1), ValueError),
                                     (dict(n_blocks=2.5), TypeError), (dict(n_blocks=10**7), ValueError),
                                     (dict(statistic=3), TypeError), (dict(bounds=(-1e308, 1e308)), ValueError)])
def test_bad_parameters_fail_before_the_charge(kw, exc):
    b = dpfast.PrivacyBudget(epsilon=1.0, delta=1e-6)
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    args = dict(statistic=np.mean, bounds=(-1.0, 1.0))
    args.update(kw)
    stat = args.pop("statistic")
    with pytest.raises(exc):
        tools.subsample_and_aggregate(stat, np.ones(100), 1.0, rng=gen, budget=b, **args)
    assert not b.ledger and gen.bit_generator.state == state


def test_statistic_shape_mismatch_is_refused():
    with pytest.raises(ValueError, match="shape"):
        tools.subsample_and_aggregate(lambda b: b.mean(axis=0), np.ones((100, 2)), 1.0, bounds=([0, 0, 0], [1, 1, 1]),
                                      n_blocks=3, rng=0)


@pytest.mark.slow
def test_error_shrinks_faster_than_root_n():
    # AW Thm 8.2: M(X) - T(X) = o_p(n^-1/2).  For T = the mean of N(0,1) data the block means
    # are N(0, k/n) and the mean of the clamped z equals (to O(sqrt(k)/n)) T(X), so M - T is the
    # Laplace noise: E|M - T| = 2 (u - l) / (k eps_w) with u - l = 8 rad IQR_z, IQR_z = 1.349
    # sqrt(k/n) -- the digest's B12 corrected Remark 8.4: Theta(n^-(1/2 + 0.4/15)) = n^-0.527.
    # epsilon = 30 puts the quartile draws in their asymptotic regime from n ~ 3000 on.
    eps, R = 30.0, 150
    ns = np.round(10 ** np.arange(3.5, 6.01, 0.5)).astype(int)
    gen = np.random.default_rng(2024)
    mean_err, se_log, pred = [], [], []
    for i, n in enumerate(ns):
        e = np.empty(R)
        for r in range(R):
            x = gen.standard_normal(n)
            e[r] = abs(tools.subsample_and_aggregate(np.mean, x, eps, bounds=(-5.0, 5.0), rng=1000 * i + r) - x.mean())
        k = SA.blocks_from_count(n)
        pred.append(2 * 8 * k ** (1 / 3 + SA.ETA) * 1.349 * math.sqrt(k / n) / (k * eps * (1 - SA.COUNT_SHARE)))
        mean_err.append(e.mean())
        se_log.append(e.std(ddof=1) / e.mean() / math.sqrt(R))
    mean_err, se_log, pred = map(np.asarray, (mean_err, se_log, pred))
    # the law of the noise at each n (tolerance: 4 standard errors plus 10% for the IQR model)
    assert np.all(np.abs(np.log(mean_err / pred)) < 4 * se_log + 0.1), mean_err / pred
    # fitted log-log slope vs the theory's (weighted least squares, its standard error)
    x, y, w = np.log(ns), np.log(mean_err), 1 / se_log ** 2
    xb = np.sum(w * x) / w.sum()
    slope = np.sum(w * (x - xb) * y) / np.sum(w * (x - xb) ** 2)
    se = 1 / math.sqrt(np.sum(w * (x - xb) ** 2))
    theory = np.polyfit(x, np.log(pred), 1)[0]
    assert theory < -0.52
    assert abs(slope - theory) < 4 * se, (slope, theory, se)
    assert slope < -0.5 + 2 * se  # faster than 1/sqrt(n), within the simulation's resolution


@pytest.mark.slow
def test_widened_winsorized_mean_audit():
    # AW Alg. 2 is epsilon-DP when one z_i changes (k public): black-box audit on adversarial
    # replacements (one value to either end of the range, one moved inside)
    from dpfast.audit import audit, neighbours

    z = np.round(np.random.default_rng(8).uniform(2.0, 4.0, 16), 3)
    pairs = []
    for v, label in ((0.0, "to lo"), (10.0, "to hi"), (3.0, "inside")):
        zp = z.copy()
        zp[0] = v
        pairs.append(neighbours.Neighbours(z, zp, label))

    def release(zz, r):
        return SA.widened_winsorized_mean(zz, 1.0, 0.0, 10.0, np.random.default_rng(r))

    rep = audit(release, pairs, 1.0, 0.0, n_runs=3000, rng=5, confidence=0.999)
    assert rep.passed, repr(rep)
