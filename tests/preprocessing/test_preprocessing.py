"""dpfast.preprocessing: DP scalers, one-hot encoder, pipeline_event (issue 11 item 5).

Expected values come from NumPy / scikit-learn / scipy computations on the same data and from
the mechanisms' formulas, never from the code's own output; statistical checks use fixed seeds
with tolerances derived from the sample sizes.
"""
import math

import numpy as np
import pytest
from scipy import stats
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder as SkOneHot, StandardScaler as SkStandardScaler

import dpfast
from dpfast import accounting
from dpfast.budget import BudgetExceededError, PrivacyBudget
from dpfast.calibrate import gaussian_sigma
from dpfast.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler, pipeline_event


def _data(n=20000, d=3, seed=0):
    g = np.random.default_rng(seed)
    return g.normal(2.0, 3.0, size=(n, d))


# ------------------------------------------------------------------------------ StandardScaler
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_standard_scaler_matches_numpy_on_clamped_data_at_large_epsilon(delta):
    X = _data()
    lo, hi = np.array([-4.0, -1.0, 0.0]), np.array([8.0, 5.0, 6.0])
    s = StandardScaler(1e5, delta, bounds=dict(enumerate(zip(lo, hi))), random_state=1).fit(X)
    Xc = np.clip(X, lo, hi)
    # noise per coordinate <= ~ 30 l1/eps in units of r; divided by n: far below 1e-5 r
    r = (hi - lo) / 2
    np.testing.assert_allclose(s.mean_, Xc.mean(axis=0), atol=1e-5 * r.max())
    np.testing.assert_allclose(s.var_, Xc.var(axis=0), atol=1e-5 * r.max() ** 2)
    np.testing.assert_allclose(s.scale_, np.sqrt(Xc.var(axis=0)), rtol=1e-4)
    Z = s.transform(X)
    np.testing.assert_allclose(Z, (X - Xc.mean(0)) / Xc.std(0), atol=1e-3)
    np.testing.assert_allclose(s.inverse_transform(Z), X, atol=1e-9)


def test_standard_scaler_events_and_guarantee():
    X = _data(100, 4)
    s = StandardScaler(0.7, bounds=(-1, 1), random_state=0).fit(X)
    l1 = 1 + 4 + 4 / 2  # count, sums, centred squares
    assert s.event_ == accounting.Laplace(scale=l1 / 0.7, sensitivity=l1)
    assert (s.epsilon_, s.delta_) == (0.7, 0.0)
    g = StandardScaler(0.7, 1e-6, bounds=(-1, 1), random_state=0).fit(X)
    l2 = math.sqrt(1 + 4 + 4 / 4)
    assert g.event_.sensitivity == pytest.approx(l2)
    # the analytic Gaussian at (0.7, 1e-6): Balle & Wang's delta at epsilon 0.7 equals 1e-6
    sigma = g.event_.noise_multiplier * l2
    d_bw = (stats.norm.cdf(l2 / (2 * sigma) - 0.7 * sigma / l2)
            - math.exp(0.7) * stats.norm.cdf(-l2 / (2 * sigma) - 0.7 * sigma / l2))
    assert d_bw == pytest.approx(1e-6, rel=1e-3) and d_bw <= 1e-6 * (1 + 1e-9)
    acc = accounting.PLDAccountant().compose(g.event_)
    assert acc.get_epsilon(1e-6) <= 0.7 * (1 + 1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_standard_scaler_noise_law(delta):
    # n_samples_seen_ = n + noise (never clipped here): its law is the mechanism's noise
    X = np.r_[np.full(500, 0.25), np.full(500, 0.75)][:, None]
    g = np.random.default_rng(7)
    eps = 1.0
    draws = np.array([StandardScaler(eps, delta, bounds=(0, 1), random_state=g).fit(X).n_samples_seen_ - 1000
                      for _ in range(3000)])
    if delta == 0:
        law = stats.laplace(scale=2.5 / eps)
    else:
        sens = math.sqrt(2.25)
        # sigma from the analytic Gaussian condition, solved independently of dpfast
        f = lambda s: (stats.norm.cdf(sens / (2 * s) - eps * s / sens)  # noqa: E731
                       - math.exp(eps) * stats.norm.cdf(-sens / (2 * s) - eps * s / sens) - delta)
        from scipy.optimize import brentq
        law = stats.norm(scale=brentq(f, 0.1, 100.0, xtol=1e-12))
    assert stats.kstest(draws, law.cdf).pvalue > 1e-3


@pytest.mark.slow
def test_standard_scaler_audit_lower_bound_below_claim():
    """Neighbours D (200 rows, u = +-1/2) and D' = D + one row at the upper bound (u = 1): the
    exact query vectors differ by (1, 1, 1/2), the full l1 sensitivity 2.5 (d = 1).

    Test event E: every recovered noisy coordinate lies on D''s side of the midpoint of a and a'
    beyond a' (y_i >= a'_i).  For independent Laplace(b) noise P'(E) = 1/8 and
    P(E) = e^{-2.5/b}/8 = e^{-eps}/8: the ratio is exactly e^eps, so the test is tight.
    Runs: with N = 10,000 per side the Clopper-Pearson 95 % bounds are within ~2.6 % (P' = 1/8)
    and ~4.6 % (P = e^-1/8) relative, so the bound log(P'_lo / P_hi) is ~eps - 0.14 for the
    claim eps = 1, and a scaler with half the noise (true epsilon 2) gives ~1.8 > 1 (checked).
    """
    eps, N = 1.0, 10_000
    D = np.r_[np.full(100, 0.25), np.full(100, 0.75)][:, None]
    Dp = np.r_[D, [[1.0]]]
    # a' (the docstring's a, on D, is (200, 0, 200 (0.25 - 0.5)); only a' enters the test event)
    ap = np.array([201.0, 1.0, 200 * (0.25 - 0.5) + 0.5])

    def hits(data, scaler_cls, seed):
        g = np.random.default_rng(seed)
        k = 0
        for _ in range(N):
            s = scaler_cls(eps, bounds=(0.0, 1.0), random_state=g).fit(data)
            C = s.n_samples_seen_
            mu = (s.mean_[0] - 0.5) / 0.5
            y = np.array([C, mu * C, (s.var_[0] / 0.25 + mu * mu) * C - C / 2])
            k += bool(np.all(y >= ap - 1e-9))
        return k

    def lower_bound(k1, k0):
        p1_lo = stats.beta.ppf(0.025, k1, N - k1 + 1)
        p0_hi = stats.beta.ppf(0.975, k0 + 1, N - k0)
        return math.log(p1_lo / p0_hi)

    lb = lower_bound(hits(Dp, StandardScaler, 1), hits(D, StandardScaler, 2))
    assert lb <= eps
    assert lb > 0.6 * eps  # the test has power: it sees most of the claim

    class HalfNoise(StandardScaler):  # the mutation: noise calibrated for 2 eps
        def _event(self, d):
            ev, (kind, s), *rest = super()._event(d)
            return (ev, (kind, s / 2), *rest)

    assert lower_bound(hits(Dp, HalfNoise, 1), hits(D, HalfNoise, 2)) > eps


def test_standard_scaler_charges_before_noise():
    X = _data(50, 2)
    b = PrivacyBudget(0.5, 1e-6)
    g = np.random.default_rng(3)
    state = g.bit_generator.state
    s = StandardScaler(1.0, bounds=(-10, 10), random_state=g)
    with pytest.raises(BudgetExceededError):
        s.fit(X, budget=b)
    assert g.bit_generator.state == state and not hasattr(s, "mean_") and not b.ledger
    StandardScaler(0.3, bounds=(-10, 10), random_state=g).fit(X, budget=b)
    assert len(b.ledger) == 1 and b.ledger[0].label == "StandardScaler"
    with b:  # the default budget of the block
        StandardScaler(0.1, bounds=(-10, 10), random_state=g).fit(X)
    assert len(b.ledger) == 2


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(bounds=None), ValueError, "bounds"),
    (dict(bounds=(1, 1)), ValueError, "lower < upper"),
    (dict(bounds=(0, np.inf)), ValueError, "finite"),
    (dict(bounds=((0, 0), (1, 1))), ValueError, "ambiguous"),
    (dict(bounds=((0, 1), (0, 1), (0, 1))), ValueError, "ambiguous"),
    (dict(bounds={0: (0, 1), 1: (0, 1)}), ValueError, r"missing .* \[2\]"),
    (dict(bounds={0: (0, 1), 1: (0, 1), 2: (0, 1), 3: (0, 1)}), ValueError, "not features"),
    (dict(bounds={0: (0, 1), 1: (0, 1), 2: (1, 0)}), ValueError, "lower < upper"),
    (dict(bounds=(0, 1), epsilon=0), ValueError, "epsilon"),
    (dict(bounds=(0, 1), delta=1.0), ValueError, "delta"),
    (dict(bounds="ab"), TypeError, "bounds"),
])
def test_standard_scaler_bad_input(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        StandardScaler(**kwargs).fit(_data(10))


def test_scalers_refuse_nan_and_wrong_width():
    X = _data(10)
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        StandardScaler(1.0, bounds=(0, 1)).fit(X)
    s = StandardScaler(1.0, bounds=(0, 1), random_state=0).fit(_data(10))
    with pytest.raises(ValueError, match="features"):
        s.transform(_data(10, 2))


# ------------------------------------------------------------------------------ MinMaxScaler
def test_minmax_scaler_private_quantile_range():
    n = 20000
    X = _data(n, 2, seed=4)
    eps = 2000.0
    m = MinMaxScaler(eps, bounds=(-20, 20), random_state=0).fit(X)
    # each of the 4 draws is the exponential mechanism at eps/4 = 500 with utility -|rank - q n|:
    # ranks further than 100 from q n are e^{-250}-unlikely, so the draws lie between the
    # empirical quantiles at q +- 100/n
    for j in range(2):
        for q, v in ((0.01, m.data_min_[j]), (0.99, m.data_max_[j])):
            assert np.quantile(X[:, j], q - 100 / n) <= v <= np.quantile(X[:, j], q + 100 / n)
    assert m.event_ == accounting.SelfComposed(accounting.ExponentialMechanism(eps / 4), 4)
    assert (m.epsilon_, m.delta_) == (eps, 0.0)
    Z = m.transform(X)
    assert Z.min() == 0.0 and Z.max() == 1.0  # clipped
    inside = (X > m.data_min_) & (X < m.data_max_)
    np.testing.assert_allclose(Z[inside], ((X - m.data_min_) / (m.data_max_ - m.data_min_))[inside], rtol=1e-12)
    # pure DP: the accountant certifies eps at delta -> 0 for the composition
    acc = accounting.PLDAccountant().compose(accounting.SelfComposed(accounting.ExponentialMechanism(0.25), 4))
    assert acc.get_epsilon(1e-12) <= 1.0 + 1e-6


@pytest.mark.parametrize("kwargs, match", [
    (dict(quantiles=(0.5, 0.5)), "quantiles"),
    (dict(quantiles=(-0.1, 0.5)), "quantiles"),
    (dict(feature_range=(1, 0)), "feature_range"),
    (dict(epsilon=-1), "epsilon"),
    (dict(bounds=None), "bounds"),
])
def test_minmax_bad_input(kwargs, match):
    kw = dict(epsilon=1.0, bounds=(0, 1))
    kw.update(kwargs)
    with pytest.raises(ValueError, match=match):
        MinMaxScaler(**kw).fit(_data(10))


# ------------------------------------------------------------------------------ OneHotEncoder
def _cats(n=3000, seed=0):
    g = np.random.default_rng(seed)
    return np.c_[g.choice(["a", "b", "c"], size=n), g.choice(["x", "y"], size=n)].astype(object)


def test_one_hot_public_categories_cost_nothing_and_match_sklearn():
    X = _cats()
    cats = [["a", "b", "zz"], ["y", "x"]]
    b = PrivacyBudget(1.0, 1e-6)
    enc = OneHotEncoder(cats).fit(X, budget=b)
    assert enc.event_ is None and (enc.epsilon_, enc.delta_) == (0.0, 0.0) and not b.ledger
    ref = SkOneHot(categories=cats, handle_unknown="ignore", sparse_output=False).fit(X[:1])
    Xt = np.r_[X[:50], [["c", "x"], ["q", "q"]]].astype(object)
    np.testing.assert_array_equal(enc.transform(Xt), ref.transform(Xt))
    with pytest.raises(ValueError, match="outside"):
        OneHotEncoder(cats, handle_unknown="error").fit(X).transform(Xt)


@pytest.mark.slow
def test_one_hot_private_selection_law():
    """A category of count c is kept iff c + Lap(d/eps) > tau, tau = 1 + (d/eps) ln(d/(2 delta))."""
    eps, delta, d = 1.0, 1e-6, 2
    tau = 1 + (d / eps) * math.log(d / (2 * delta))
    c = int(round(tau))  # kept about half the time
    X = np.array([["r"] * c + ["big"] * 500, ["s"] * (c + 500)], dtype=object).T
    g = np.random.default_rng(11)
    N = 4000
    kept = sum("r" in OneHotEncoder("private", epsilon=eps, delta=delta, random_state=g).fit(X).categories_[0]
               for _ in range(N))
    p = stats.laplace(scale=d / eps).sf(tau - c)
    assert abs(kept / N - p) <= 4.5 * math.sqrt(p * (1 - p) / N)
    enc = OneHotEncoder("private", epsilon=eps, delta=delta, random_state=0).fit(X)
    assert "big" in enc.categories_[0].tolist() and enc.categories_[1].tolist() == ["s"]
    assert enc.event_ == accounting.ApproxDP(eps, delta) and enc.delta_ == delta


@pytest.mark.slow
def test_one_hot_private_rare_category_rarely_released():
    # a category held by one row is released with probability exp(-(tau-1) eps/d)/2 = delta/d
    eps, delta, d = 1.0, 1e-2, 1  # a large delta so that the rate is measurable
    X = np.array([["solo"] + ["big"] * 300], dtype=object).T
    g = np.random.default_rng(5)
    N = 20000
    kept = sum("solo" in OneHotEncoder("private", epsilon=eps, delta=delta, random_state=g).fit(X).categories_[0]
               for _ in range(N))
    p = delta / d
    assert abs(kept / N - p) <= 4.5 * math.sqrt(p * (1 - p) / N)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(categories="private", epsilon=1.0, delta=0.0), ValueError, "delta"),
    (dict(categories="private", epsilon=1.0), ValueError, "delta"),
    (dict(categories="auto"), ValueError, "private"),
    (dict(categories=[["a"], ["x"]], epsilon=1.0), ValueError, "public categories"),
    (dict(categories=[["a", "a"], ["x"]]), ValueError, "duplicate"),
    (dict(categories=[["a"]]), ValueError, "features"),
    (dict(categories=[["a"], ["x"]], handle_unknown="infrequent_if_exist"), ValueError, "handle_unknown"),
])
def test_one_hot_bad_input(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        OneHotEncoder(**kwargs).fit(_cats(20))


# ------------------------------------------------------------------------------ pipelines
def test_pipeline_event_is_the_composition_of_the_steps():
    from sklearn.compose import ColumnTransformer

    g = np.random.default_rng(0)
    n = 400
    num = g.uniform(0, 1, size=(n, 2))
    cat = g.choice([0.0, 1.0, 2.0], size=(n, 1))
    X = np.c_[num, cat]
    y = (num[:, 0] > 0.5).astype(int)
    ct = ColumnTransformer([("num", StandardScaler(0.5, bounds=(0, 1), random_state=0), [0, 1]),
                            ("cat", OneHotEncoder([[0.0, 1.0, 2.0]]), [2])])
    pipe = make_pipeline(ct, FunctionTransformer(lambda Z: Z / 4.0),
                         dpfast.LogisticRegression(1.0, 1e-6, row_norm="clip", random_state=0))
    pipe.fit(X, y)
    ev = pipeline_event(pipe)
    sc, lr = ct.named_transformers_["num"], pipe[-1]
    assert ev == accounting.Composed((sc.event_, lr.event_))
    # total = an independent composition of the two releases
    a1 = accounting.PLDAccountant().compose(sc.event_).compose(lr.event_)
    assert accounting.PLDAccountant().compose(ev).get_epsilon(1e-5) == pytest.approx(a1.get_epsilon(1e-5), rel=1e-9)
    assert pipeline_event(make_pipeline(OneHotEncoder([[0.0]]).fit(cat[:1]))) is None


def test_pipeline_event_refuses_a_non_private_step():
    X = _data(50)
    pipe = make_pipeline(SkStandardScaler(), StandardScaler(1.0, bounds=(-5, 5), random_state=0)).fit(X)
    with pytest.raises(ValueError, match="standardscaler.*no privacy event"):
        pipeline_event(pipe)


def test_fits_charge_the_default_budget_once():
    X = _data(300, 2)
    b = PrivacyBudget(5.0, 1e-6)
    with b:  # private_quantile would charge the default itself: the fit's event covers it
        MinMaxScaler(1.0, bounds=(-5, 5), random_state=0).fit(X)
        StandardScaler(1.0, bounds=(-5, 5), random_state=0).fit(X)
        OneHotEncoder("private", epsilon=1.0, delta=1e-7, random_state=0).fit(_cats(300))
    assert [c.label for c in b.ledger] == ["MinMaxScaler", "StandardScaler", "OneHotEncoder"]


def test_pipeline_steps_charge_one_budget():
    X = _data(200, 2)
    b = PrivacyBudget(2.0, 1e-6)
    pipe = make_pipeline(StandardScaler(0.5, bounds=(-5, 5), random_state=0),
                         MinMaxScaler(0.5, bounds=(-5, 5), random_state=0))
    pipe.fit(X, standardscaler__budget=b, minmaxscaler__budget=b)
    assert [c.label for c in b.ledger] == ["StandardScaler", "MinMaxScaler"]
    ref = accounting.PLDAccountant().compose(pipe[0].event_).compose(pipe[1].event_).get_epsilon(1e-6)
    assert b.spent() == pytest.approx(ref, rel=1e-9)
    assert accounting.PLDAccountant().compose(pipeline_event(pipe)).get_epsilon(1e-6) == pytest.approx(ref, rel=1e-9)


# ----------------------------------------------------------------- the estimator base (issue 11, 4)
def _three(rng):
    return [StandardScaler(1.0, bounds=(-10, 10), random_state=rng),
            MinMaxScaler(1.0, bounds=(-10, 10), random_state=rng),
            OneHotEncoder("private", epsilon=1.0, delta=1e-6, random_state=rng)]


@pytest.mark.parametrize("k", range(3), ids=["StandardScaler", "MinMaxScaler", "OneHotEncoder"])
def test_refused_refit_forgets_the_previous_release(k):
    from sklearn.exceptions import NotFittedError

    X = np.round(_data(200, 2, seed=5))  # integer-valued: also categories for the encoder
    est = _three(0)[k]
    with pytest.raises(NotFittedError):
        est.transform(X)
    b = PrivacyBudget(1.5, 1e-5)
    est.fit(X, budget=b)
    assert est.n_features_in_ == 2 and est.accountant_ == {0: None, 1: None, 2: "pld"}[k]
    g = np.random.default_rng(9)
    state = g.bit_generator.state
    est.set_params(random_state=g)
    with pytest.raises(BudgetExceededError):  # a second epsilon = 1 release composes beyond 1.5
        est.fit(X, budget=b)
    assert g.bit_generator.state == state and len(b.ledger) == 1
    with pytest.raises(NotFittedError):  # no stale statistics from the first fit
        est.transform(X)
    assert not hasattr(est, "n_features_in_") and not hasattr(est, "event_")


@pytest.mark.parametrize("k, bad, word", [
    (0, {"epsilon": -1.0}, "epsilon"), (0, {"delta": 1.0}, "delta"), (0, {"bounds": "ab"}, "bounds"),
    (1, {"clip": "yes"}, "clip"), (1, {"epsilon": 0.0}, "epsilon"),
    (2, {"handle_unknown": "warn"}, "handle_unknown"), (2, {"delta": 0.0}, "delta"),
    (2, {"categories": "auto"}, "categories"),
], ids=lambda v: str(v))
def test_bad_parameters_raise_the_declarative_error_before_any_randomness(k, bad, word):
    from sklearn.utils._param_validation import InvalidParameterError

    g = np.random.default_rng(4)
    state = g.bit_generator.state
    est = _three(g)[k].set_params(**bad)
    with pytest.raises(InvalidParameterError, match=f"'{word}' parameter"):
        est.fit(np.round(_data(50, 2, seed=6)))
    assert g.bit_generator.state == state


def test_transform_checks_the_fitted_width_and_feature_names():
    import pandas as pd

    X = pd.DataFrame(_data(100, 2, seed=7), columns=["a", "b"])
    s = StandardScaler(1.0, bounds=(-10, 10), random_state=0).fit(X)
    np.testing.assert_array_equal(s.feature_names_in_, ["a", "b"])
    assert list(s.get_feature_names_out()) == ["a", "b"]
    with pytest.warns(UserWarning, match="feature names"), \
            pytest.raises(ValueError, match="X has 3 features, but StandardScaler is expecting 2"):
        s.transform(_data(5, 3))
    enc = OneHotEncoder([[0.0, 1.0], ["x", "y"]]).fit(np.array([[0.0, "x"], [1.0, "y"]], dtype=object))
    assert list(enc.get_feature_names_out(["u", "v"])) == ["u_0.0", "u_1.0", "v_x", "v_y"]
    with pytest.raises(ValueError, match="input_features"):
        enc.get_feature_names_out(["u"])


# ------------------------------------------------------------------------------ issue 21
_ULP_LO, _ULP_HI = 1060.3046685859608, 1060.304668585962  # bounds a few ulps wide (issue 21, item 7b)


def _released_vectors(monkeypatch, fits):
    """The exact (count, S1, S2) vector each StandardScaler fit adds noise to.

    The noise samplers are replaced by a spy that reads the vector from the caller's frame and
    returns zeros: the test sees what the mechanism releases before noise, as its sensitivity
    argument does."""
    import sys

    from dpfast.preprocessing import _scalers

    seen = []

    def spy(scale, size, rng=None):
        seen.append(np.array(sys._getframe(1).f_locals["exact"], dtype=np.float64))
        return np.zeros(size)

    monkeypatch.setattr(_scalers, "laplace_noise", spy)
    monkeypatch.setattr(_scalers, "gaussian_noise", spy)
    for f in fits:
        f()
    return seen


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_standard_scaler_terms_respect_the_sensitivity_for_bounds_a_few_ulps_wide(monkeypatch, delta):
    # neighbours: D = two rows (one at each bound), D' = D plus a row at the upper bound.  Each row
    # moves (n, S1, S2) by (1, u, u^2 - 1/2) with |u| <= 1: at most 1 + 1 + 1/2 in l1 and
    # sqrt(1 + 1 + 1/4) in l2 for one feature (the calibration's 1 + 1.5 d and sqrt(1 + 1.25 d)).
    # Unclamped, (hi - c) / r rounds to 1.2 here: l1 1 + 1.2 + 0.94 = 3.14, 26 % over.
    D = np.array([[_ULP_LO], [_ULP_HI]])
    Dp = np.vstack([D, [[_ULP_HI]]])
    kw = dict(epsilon=1.0, delta=delta, bounds=(_ULP_LO, _ULP_HI), random_state=0)
    a, b = _released_vectors(monkeypatch, [lambda: StandardScaler(**kw).fit(D), lambda: StandardScaler(**kw).fit(Dp)])
    diff = np.abs(b - a)
    assert diff[0] == 1.0 and diff[1] <= 1.0 and diff[2] <= 0.5
    assert diff.sum() <= 2.5 and math.hypot(*diff) <= math.sqrt(2.25)
    # every term lies in its bound: |S1| <= n and |S2| <= n / 2 for all-extreme data
    for v in (a, b):
        assert abs(v[1]) <= v[0] and abs(v[2]) <= v[0] / 2


def _ledger_and_rng_unchanged(fit, exc, match):
    """``fit(budget, gen)`` raises ``exc`` with nothing charged and no randomness drawn."""
    b = PrivacyBudget(10.0, 1e-3)
    g = np.random.default_rng(21)
    state = g.bit_generator.state
    with pytest.raises(exc, match=match):
        fit(b, g)
    assert not b.ledger and g.bit_generator.state == state


@pytest.mark.parametrize("make, match", [
    # var_ = r^2 var_u overflows (it was nan); r^2 underflows to 0; half-width 0
    (lambda g: StandardScaler(1.0, bounds=(-1e200, 1e200), random_state=g), "too wide"),
    (lambda g: StandardScaler(1.0, bounds=(0.0, 1e-170), random_state=g), "too narrow"),
    (lambda g: StandardScaler(1.0, bounds=(0.0, 5e-324), random_state=g), "too narrow"),
    # scale_ = (max - min) / range overflows (it was inf); min_ = min - data_min_ scale_ overflows
    (lambda g: MinMaxScaler(1.0, bounds=(0.0, 5e-324), random_state=g), "too narrow"),
    (lambda g: MinMaxScaler(1.0, bounds=(1e300, 1.5e300), feature_range=(0, 1e10), random_state=g), "too large"),
    (lambda g: MinMaxScaler(1.0, bounds=(0, 1), feature_range=(-1e308, 1e308), random_state=g), "feature_range"),
], ids=["std-wide", "std-r2-underflow", "std-r-zero", "minmax-narrow", "minmax-offset", "minmax-fr-width"])
def test_scalers_refuse_bounds_whose_statistics_are_not_doubles_before_the_charge(make, match):
    _ledger_and_rng_unchanged(lambda b, g: make(g).fit(np.zeros((20, 2)), budget=b), ValueError, match)


def test_scalers_answer_with_finite_statistics_at_the_edges_of_the_double_range():
    # the widest StandardScaler bounds accepted: r^2 <= max double; a mean near the upper end
    X = np.full((50, 1), 1e154)
    s = StandardScaler(1e6, bounds=(-1e154, 1e154), random_state=0).fit(X)
    assert np.isfinite(s.var_).all() and np.isfinite(s.mean_).all() and np.isfinite(s.scale_).all()
    assert s.mean_[0] == pytest.approx(1e154, rel=1e-3) and s.mean_[0] <= 1e154
    m = MinMaxScaler(1.0, bounds=(0.0, 1e-300), random_state=0).fit(np.zeros((20, 2)))
    assert np.isfinite(m.scale_).all() and np.isfinite(m.min_).all()


def test_minmax_scaler_treats_a_range_too_narrow_to_invert_as_constant(monkeypatch):
    # released quantiles one ulp apart with feature_range width 1e300: 1e300 / 1.1e-16 overflows;
    # documented answer: a constant feature, scale_ = max - min (a range of 1), as for range 0
    from dpfast.preprocessing import _scalers

    lo_q = 0.5
    hi_q = float(np.nextafter(0.5, 1.0))
    monkeypatch.setattr(_scalers, "private_quantile", lambda x, q, eps, bounds, rng=None: np.array([lo_q, hi_q]))
    m = MinMaxScaler(1.0, bounds=(0, 1), feature_range=(0, 1e300), random_state=0).fit(np.zeros((10, 1)))
    assert m.data_range_[0] == hi_q - lo_q > 0
    assert m.scale_[0] == 1e300 and m.min_[0] == -lo_q * 1e300
    assert np.isfinite(m.transform(np.array([[0.25], [0.75]]))).all()


def test_scaler_bounds_follow_the_aggregate_convention_one_pair_per_feature():
    import pandas as pd

    g = np.random.default_rng(8)
    df = pd.DataFrame({"a": g.normal(0, 20, 4000), "b": g.uniform(-3, 3, 4000)})
    # a dict {column: (lower, upper)}, as tables.aggregate takes; key order is irrelevant
    bounds = {"b": (0.0, 1.0), "a": (-10.0, 10.0)}
    s = StandardScaler(1e6, bounds=bounds, random_state=0).fit(df)
    exp = np.array([np.clip(df.a, -10, 10).mean(), np.clip(df.b, 0, 1).mean()])
    np.testing.assert_allclose(s.mean_, exp, atol=1e-3)
    m = MinMaxScaler(1e6, bounds=bounds, quantiles=(0.0, 1.0), random_state=0).fit(df)
    assert -10 <= m.data_min_[0] < m.data_max_[0] <= 10 and 0 <= m.data_min_[1] < m.data_max_[1] <= 1
    # NumPy input: keys are the feature indices; the same clamping
    s2 = StandardScaler(1e6, bounds={0: (-10.0, 10.0), 1: (0.0, 1.0)}, random_state=0).fit(df.to_numpy())
    np.testing.assert_allclose(s2.mean_, exp, atol=1e-3)
    # the ambiguous 2-d form is refused (both readings shown in the message), also at d = 2
    with pytest.raises(ValueError, match="ambiguous.*dict\\(enumerate"):
        StandardScaler(1.0, bounds=[(0, 10), (5, 20)]).fit(df)
    with pytest.raises(ValueError, match="not features.*column names"):
        StandardScaler(1.0, bounds={0: (0, 1), 1: (0, 1)}).fit(df)


def test_one_hot_private_selection_on_mixed_types_and_none_charges_once_and_works():
    # str, int and None in one object column: hash-based counts, released in an order that is a
    # function of the kept set only (numbers first, then by type name: NoneType, str)
    col = ["a"] * 300 + [7] * 300 + [None] * 300 + ["rare"]
    X = np.array(col, dtype=object)[:, None]
    b = PrivacyBudget(5.0, 1e-3)
    enc = OneHotEncoder("private", epsilon=2.0, delta=1e-6, random_state=0).fit(X, budget=b)
    assert len(b.ledger) == 1
    assert enc.categories_[0].tolist() == [7, None, "a"]  # counts 300 >> tau = 1 + ln(1/2e-6)/2 = 7.6
    np.testing.assert_array_equal(enc.transform(np.array([[7], [None], ["a"], ["zz"]], dtype=object)),
                                  [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0]])
    # 1, 1.0 and True are one category, represented by int 1 whatever the data holds: neither the
    # row order nor one record holding 1.0 among ints changes the released type (or feature name)
    base = [1] * 200 + ["x"] * 200 + [2.5] * 200
    outs = []
    for seed, extra in ((0, []), (1, [1.0]), (2, [True, 1.0] * 100)):
        rows = base + extra
        perm = np.random.default_rng(seed).permutation(len(rows))
        Xm = np.array([rows[i] for i in perm], dtype=object)[:, None]
        enc = OneHotEncoder("private", epsilon=2.0, delta=1e-6, random_state=0).fit(Xm)
        outs.append(([(type(v).__name__, v) for v in enc.categories_[0].tolist()], list(enc.get_feature_names_out())))
    assert outs[0] == outs[1] == outs[2]
    assert outs[0] == ([("int", 1), ("float", 2.5), ("str", "x")], ["x0_1", "x0_2.5", "x0_x"])


def test_preprocessing_errors_after_reading_data_name_no_value():
    # a value only the private data holds must not appear in any message (issue 21, item 10)
    secret = "secret-83171"
    X = np.array([[0.25], [secret]], dtype=object)
    for est in (StandardScaler(1.0, bounds=(0, 1)), MinMaxScaler(1.0, bounds=(0, 1))):
        with pytest.raises(ValueError) as info:
            est.fit(X)
        assert "83171" not in str(info.value) and "convert" in str(info.value)
    enc = OneHotEncoder([["a"]], handle_unknown="error").fit(np.array([["a"]], dtype=object))
    with pytest.raises(ValueError) as info:
        enc.transform(np.array([["a"], [secret]], dtype=object))
    assert "83171" not in str(info.value) and "outside categories_" in str(info.value)
    with pytest.raises(ValueError) as info:  # scikit-learn prints the whole array here
        StandardScaler(1.0, bounds=(0, 1)).fit(np.array([0.9137, 0.4402]))
    assert "9137" not in str(info.value) and "4402" not in str(info.value) and "Reshape your data" in str(info.value)
    with pytest.raises(ValueError) as info:
        StandardScaler(1.0, bounds=(0, 1)).fit(np.array([[0.25 + 0.9137j], [0.5]]))
    assert "9137" not in str(info.value) and "Complex data not supported" in str(info.value)


def test_one_hot_private_epsilon_too_small_for_the_noise_is_refused_before_the_charge():
    # d / epsilon overflows: laplace_noise refused the scale after the charge (issue 21, item 8)
    X = _cats(50)
    _ledger_and_rng_unchanged(
        lambda b, g: OneHotEncoder("private", epsilon=5e-324, delta=1e-5, random_state=g).fit(X, budget=b),
        ValueError, "too small")


# ------------------------------------------------------------ the release spine (issue 23 item 1)

def _accountant_epsilon(est):
    """What a fresh accountant of the recorded name says of the recorded event."""
    return accounting.make_accountant(est.accountant_).compose(est.event_).get_epsilon(est.delta_)


@pytest.mark.parametrize("eps, delta, d", [(1.0, 1e-5, 3), (0.3, 1e-6, 2)])
def test_standard_scaler_gaussian_epsilon_is_the_accountants_and_fits_its_budget(eps, delta, d):
    X = _data(300, d)
    est = StandardScaler(eps, delta, bounds=(-10, 10), random_state=0)
    budget = PrivacyBudget(eps, delta)  # before: the PLD put the analytic sigma at 1.0000000000014 > 1
    est.fit(X, budget=budget)
    assert est.accountant_ == "pld" and est.delta_ == delta
    assert est.epsilon_ == _accountant_epsilon(est) and est.epsilon_ <= eps
    # the noise multiplier: at least the analytic one (Balle & Wang 2018), at most 1e-8 above it
    l2 = math.sqrt(1.0 + 1.25 * d)
    z0 = float(gaussian_sigma(eps, delta, l2)) / l2
    assert est.event_ == accounting.Gaussian(est.event_.noise_multiplier, sensitivity=l2)
    assert z0 <= est.event_.noise_multiplier <= z0 * (1 + 1e-8)
    assert len(budget.ledger) == 1 and budget.ledger[0].event == est.event_


def test_pure_releases_state_their_events_epsilon():
    # delta = 0: no accountant converts; epsilon_ is the event's own (Laplace: sensitivity / scale;
    # 2d exponential mechanisms: basic composition), accountant_ None
    X = _data(300, 2)
    ss = StandardScaler(0.7, bounds=(-10, 10), random_state=0).fit(X)
    assert ss.event_ == accounting.Laplace(scale=(1 + 1.5 * 2) / 0.7, sensitivity=1 + 1.5 * 2)
    assert (ss.epsilon_, ss.delta_, ss.accountant_) == (ss.event_.sensitivity / ss.event_.scale, 0.0, None)
    assert ss.epsilon_ <= 0.7
    mm = MinMaxScaler(0.7, bounds=(-10, 10), random_state=0).fit(X)
    assert mm.event_ == accounting.SelfComposed(accounting.ExponentialMechanism(0.7 / 4), 4)
    assert (mm.epsilon_, mm.delta_, mm.accountant_) == (0.7, 0.0, None)
    assert math.fsum([0.7 / 4] * 4) == 0.7


@pytest.mark.parametrize("eps", [1.0, 0.3])
def test_one_hot_encoder_epsilon_is_the_accountants(eps):
    X = np.round(_data(300, 2, seed=1))
    est = OneHotEncoder("private", epsilon=eps, delta=1e-6, random_state=0).fit(X)
    assert est.event_ == accounting.ApproxDP(eps, 1e-6)
    assert est.accountant_ == "pld" and est.epsilon_ == _accountant_epsilon(est)
    # the PLD's grid (1e-4) may put ApproxDP(0.3, 1e-6) a grid step above 0.3: reported as such
    assert eps <= est.epsilon_ < eps + 2e-4
    pub = OneHotEncoder([[0.0, 1.0], [0.0, 1.0]], handle_unknown="ignore").fit(X)
    assert (pub.event_, pub.epsilon_, pub.delta_, pub.accountant_) == (None, 0.0, 0.0, None)
