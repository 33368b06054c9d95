"""DP-SGD estimators: noise, accounting, determinism, convergence (spec mechanisms.md, DP-SGD)."""
import numpy as np
import pytest
from scipy import optimize

from dpfast.accounting import (
    Gaussian,
    PLDAccountant,
    PoissonSampled,
    RDPAccountant,
    SampledWithoutReplacement,
)
from dpfast.sgd import DPMLPClassifier, DPSGDClassifier, DPSGDRegressor

from _lattices import _fraction_on_lattices, _ziggurat_lattices_2_31


def _blobs(n, d, K, seed, sep=3.0):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((K, d)) * sep
    y = rng.integers(0, K, n)
    X = centers[y] + rng.standard_normal((n, d))
    return X, y


@pytest.mark.parametrize("sampling", ["poisson", "shuffle"])
def test_added_noise_has_calibrated_variance(sampling):
    # X = 0 and no intercept: every per-example gradient is 0, so plain SGD with lr = 1 moves
    # theta by -(noise)/(batch) each step; after T steps each coordinate is N(0, T s^2) with
    # s = z * S / b, S the sensitivity (C Poisson, 2C fixed-size) and b the expected batch size.
    n, d, bs, T = 400, 3000, 50, 8
    z, C = 0.9, 0.5
    m = DPSGDClassifier(noise_multiplier=z, clip_norm=C, batch_size=bs, epochs=1, learning_rate=1.0,
                        fit_intercept=False, sampling=sampling, random_state=3)
    m.fit(np.zeros((n, d)), np.arange(n) % 2)
    assert m.steps_ == T
    S = C if sampling == "poisson" else 2 * C
    expected = T * (z * S / bs) ** 2
    w = m.coef_.ravel()
    assert abs(w.var() / expected - 1) < 6 * np.sqrt(2 / d)
    assert abs(w.mean()) < 6 * np.sqrt(expected / d)


def test_epsilon_matches_direct_accountant_call():
    X, y = _blobs(1000, 4, 2, 0)
    m = DPSGDClassifier(noise_multiplier=1.1, batch_size=64, epochs=3, random_state=0, delta=1e-5).fit(X, y)
    q, T = 64 / 1000, 3 * int(np.ceil(1000 / 64))
    assert m.steps_ == T and m.sample_rate_ == q
    direct = PLDAccountant().compose(PoissonSampled(q, Gaussian(1.1)), count=T).get_epsilon(1e-5)
    assert m.epsilon_ == pytest.approx(direct, rel=1e-12)
    m2 = DPSGDClassifier(noise_multiplier=1.1, batch_size=64, epochs=3, random_state=0, accountant="rdp",
                         sampling="shuffle").fit(X, y)
    direct2 = RDPAccountant().compose(SampledWithoutReplacement(q, Gaussian(1.1, neighbours="replace_one")), count=T).get_epsilon(1e-5)
    assert m2.epsilon_ == pytest.approx(direct2, rel=1e-12)
    assert m2.neighbours_ == "replace_one" and m.neighbours_ == "add_remove"


def test_calibrated_epsilon_is_met():
    X, y = _blobs(2000, 5, 3, 1)
    m = DPSGDClassifier(epsilon=1.0, delta=1e-5, batch_size=100, epochs=2, classes=[0, 1, 2],
                        random_state=0).fit(X, y)
    assert 0.97 <= m.epsilon_ <= 1.0
    direct = PLDAccountant().compose(PoissonSampled(0.05, Gaussian(m.noise_multiplier_)), count=40).get_epsilon(1e-5)
    assert m.epsilon_ == pytest.approx(direct, rel=1e-12)


def test_deterministic_under_seed():
    X, y = _blobs(500, 6, 3, 2)
    kw = dict(noise_multiplier=1.0, batch_size=32, epochs=2, optimizer="adam", learning_rate=0.05,
              classes=[0, 1, 2])
    a = DPSGDClassifier(random_state=11, **kw).fit(X, y)
    b = DPSGDClassifier(random_state=11, **kw).fit(X, y)
    c = DPSGDClassifier(random_state=12, **kw).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.loss_history_, b.loss_history_)
    assert not np.array_equal(a.coef_, c.coef_)
    Xf = X.astype(np.float32)
    m1 = DPMLPClassifier(8, random_state=4, **kw).fit(Xf, y)
    m2 = DPMLPClassifier(8, random_state=4, **kw).fit(Xf, y)
    np.testing.assert_array_equal(m1.coefs_[0], m2.coefs_[0])
    assert m1.coefs_[0].dtype == np.float32


def _logistic_optimum(X, y01, alpha):
    n, d = X.shape

    def f(w):
        z = X @ w[:d] + w[d]
        loss = np.logaddexp(0, z) - y01 * z
        g = 1 / (1 + np.exp(-z)) - y01
        return loss.mean() + 0.5 * alpha * w[:d] @ w[:d], np.append(X.T @ g / n + alpha * w[:d], g.mean())

    r = optimize.minimize(f, np.zeros(d + 1), jac=True, method="L-BFGS-B", options=dict(gtol=1e-12, ftol=1e-15))
    return r.x


def test_huge_epsilon_matches_nonprivate_optimum_logistic():
    # Full batch (q = 1: DP-GD), rows of norm <= 1 so that C = sqrt(2) never clips, epsilon 1e4:
    # the noise on the mean gradient is ~z C / n, far below the tolerance.
    rng = np.random.default_rng(3)
    n, d, alpha = 4000, 5, 0.05
    X = rng.standard_normal((n, d))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = (X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n) > 0).astype(int)
    m = DPSGDClassifier(epsilon=1e4, delta=1e-5, clip_norm=np.sqrt(2), batch_size=n, epochs=300, learning_rate=1.5,
                        alpha=alpha, accountant="rdp", random_state=0).fit(X, y)
    assert m.epsilon_ <= 1e4 and m.clipped_fraction_ == 0.0
    w = _logistic_optimum(X, y, alpha)
    np.testing.assert_allclose(m.coef_[0], w[:d], atol=2e-3)
    assert m.intercept_[0] == pytest.approx(w[d], abs=2e-3)
    assert m.loss_history_[-1] < m.loss_history_[0]


def test_huge_epsilon_matches_ridge_regression():
    rng = np.random.default_rng(4)
    n, d, alpha = 4000, 4, 0.1
    X = rng.standard_normal((n, d))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = X @ np.array([1.0, -0.5, 0.25, 0.0]) + 0.3 + 0.1 * rng.standard_normal(n)
    # |residual| <= ~2 and ||(x, 1)|| <= sqrt(2): clip_norm 4 never clips.  Noise on the mean
    # gradient: z C / n ~ 0.15 * 4 / 4000 = 1.5e-4 per step; the stationary spread of the iterate,
    # ~ sqrt(lr/(1 - momentum) * s^2 / (2 lambda_min)) with lambda_min >= 0.3, is ~2.6e-4, so
    # 2e-3 is ~7 standard deviations.
    m = DPSGDRegressor(epsilon=1e4, clip_norm=4.0, batch_size=n, epochs=400, learning_rate=0.9, alpha=alpha,
                       optimizer="momentum", momentum=0.5, accountant="rdp", random_state=0).fit(X, y)
    # ridge with unpenalized intercept: minimize (1/2n)||Xw + b - y||^2 + (alpha/2)||w||^2
    Xc, yc = X - X.mean(0), y - y.mean()
    w = np.linalg.solve(Xc.T @ Xc / n + alpha * np.eye(d), Xc.T @ yc / n)
    b = y.mean() - X.mean(0) @ w
    assert m.clipped_fraction_ == 0.0
    np.testing.assert_allclose(m.coef_, w, atol=2e-3)
    assert m.intercept_ == pytest.approx(b, abs=2e-3)
    assert m.score(X, y) > 0.5


@pytest.mark.slow
def test_softmax_and_mlp_learn_blobs():
    X, y = _blobs(3000, 10, 4, 5)
    X /= np.linalg.norm(X, axis=1, keepdims=True).max()
    m = DPSGDClassifier(epsilon=4.0, batch_size=128, epochs=5, learning_rate=0.5, optimizer="momentum",
                        classes=[0, 1, 2, 3], random_state=0).fit(X, y)
    assert m.coef_.shape == (4, 10) and m.score(X, y) > 0.9
    assert m.predict_proba(X[:5]).sum(1) == pytest.approx(np.ones(5))
    mlp = DPMLPClassifier(32, epsilon=4.0, batch_size=128, epochs=5, learning_rate=0.01, optimizer="adam",
                          clipping="per_layer", classes=[0, 1, 2, 3], random_state=0).fit(X.astype(np.float32), y)
    assert mlp.score(X.astype(np.float32), y) > 0.9
    assert mlp.epsilon_ <= 4.0


@pytest.mark.parametrize(
    "kwargs,exc",
    [
        (dict(epsilon=1.0, noise_multiplier=1.0), ValueError),
        (dict(), ValueError),
        (dict(noise_multiplier=-1.0), ValueError),
        (dict(noise_multiplier=1.0, batch_size=10_000), ValueError),
        (dict(noise_multiplier=1.0, optimizer="rmsprop"), ValueError),
        (dict(noise_multiplier=1.0, sampling="shuffled"), ValueError),
        (dict(noise_multiplier=1.0, clip_norm=0.0), ValueError),
        (dict(noise_multiplier=1.0, epochs=0), ValueError),
        (dict(noise_multiplier=1.0, epochs=1.5), TypeError),
        (dict(noise_multiplier=1.0, delta=0.0), ValueError),
        (dict(epsilon=-1.0), ValueError),
    ],
)
def test_estimator_validation(kwargs, exc):
    X, y = _blobs(100, 3, 2, 0)
    with pytest.raises(exc):
        DPSGDClassifier(**kwargs).fit(X, y)


def test_data_validation():
    X, y = _blobs(100, 3, 2, 0)
    m = DPSGDClassifier(noise_multiplier=1.0, batch_size=10)
    with pytest.raises(ValueError):
        m.fit(np.where(X > 1, np.nan, X), y)
    with pytest.raises(ValueError):
        m.fit(X, y[:-1])
    with pytest.raises(ValueError):
        m.fit(X[:, 0], y)
    with pytest.raises(ValueError):
        DPSGDClassifier(noise_multiplier=1.0, batch_size=10, classes=[0, 1]).fit(X, y * 5)
    with pytest.raises(ValueError):
        DPMLPClassifier(4, noise_multiplier=1.0, batch_size=10, activation="gelu").fit(X, y)
    fitted = DPSGDClassifier(noise_multiplier=1.0, batch_size=10, epochs=1).fit(X, y)
    with pytest.raises(ValueError):
        fitted.predict(X[:, :2])


def test_one_step_release_resists_lattice_attack():
    # Floating-point side channel (Mironov 2012 style) on the Gaussian noise: one DP-GD step
    # (full batch, one epoch, no intercept) releases theta = -lr (s + z C x) / n with s the clipped
    # sum.  An attacker who knows the dataset up to one record recovers the noise
    # x = (-theta n / lr - s) / (z C) implied by each hypothesis.  A 32-bit ziggurat puts x (for the
    # true hypothesis only) on one of 128 lattices of spacing ~1e-9 -- a perfect distinguisher;
    # a 52-bit abscissa leaves x on such a lattice only by chance (~2.5% of coordinates).
    rng = np.random.default_rng(0)
    n, d, C, z = 200, 64, 1.0, 5.0
    X = rng.uniform(-1, 1, (n, d)) / np.sqrt(d)
    y = rng.uniform(-1, 1, n)
    G = -y[:, None] * X  # per-example gradients of (1/2)(x.w - y)^2 at w = 0
    s = (G * np.minimum(1, C / np.linalg.norm(G, axis=1))[:, None]).sum(0)
    m = DPSGDRegressor(noise_multiplier=z, clip_norm=C, batch_size=n, epochs=1, learning_rate=1.0,
                       fit_intercept=False, random_state=1).fit(X, y)
    assert m.steps_ == 1
    x = (-m.coef_ * n - s) / (z * C)
    assert abs(x.std() - 1) < 0.5  # the recovered noise is the noise
    assert _fraction_on_lattices(x, _ziggurat_lattices_2_31()) < 0.25


def test_label_set_is_public_schema_not_read_off_the_labels():
    # Neighbours: all labels 0/1 and the same with one label 2.  Inferring classes from the
    # data would train a 2-class model on one and a 3-class model on the other.
    X, y = _blobs(300, 4, 2, 7)
    m = DPSGDClassifier(noise_multiplier=1.0, batch_size=32, epochs=1, random_state=0).fit(X, y)
    assert list(m.classes_) == [0, 1]
    y2 = y.copy()
    y2[0] = 2
    with pytest.raises(ValueError, match="label set is"):
        DPSGDClassifier(noise_multiplier=1.0, batch_size=32, epochs=1, random_state=0).fit(X, y2)
    with pytest.raises(ValueError, match="label set is"):
        DPMLPClassifier(4, noise_multiplier=1.0, batch_size=32, epochs=1, random_state=0).fit(X, y2)
    m3 = DPSGDClassifier(noise_multiplier=1.0, batch_size=32, epochs=1, classes=[0, 1, 2],
                         random_state=0).fit(X, y2)
    assert m3.coef_.shape == (3, 4)


# ------------------------------------------------------------------------------ issue 21
@pytest.mark.parametrize("Est", [DPSGDClassifier, DPSGDRegressor, DPMLPClassifier])
def test_progress_without_tqdm_raises_before_the_charge_and_any_draw(monkeypatch, Est):
    import sys

    from dpfast.budget import PrivacyBudget

    # a missing optional package: the import raises ImportError (None in sys.modules)
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    b = PrivacyBudget(10.0, 1e-3)
    g = np.random.default_rng(7)
    state = g.bit_generator.state
    est = Est(epsilon=1.0, epochs=1, batch_size=8, progress=True, random_state=g)
    with pytest.raises(ImportError, match="tqdm"):
        est.fit(X, y, budget=b)
    assert not b.ledger and g.bit_generator.state == state
    assert not hasattr(est, "event_") and not hasattr(est, "coef_")
    est.set_params(progress=False).fit(X, y, budget=b)  # the same fit without the bar is charged once
    assert len(b.ledger) == 1


def test_sgd_errors_after_reading_data_name_no_record_and_no_value():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3)).astype(object)
    X[47, 1] = "secret-83171"
    y = (rng.normal(size=60) > 0).astype(int)
    for est in (DPSGDClassifier(epsilon=1.0, random_state=0), DPMLPClassifier(epsilon=1.0, random_state=0)):
        with pytest.raises(ValueError) as info:
            est.fit(X, y)
        assert "83171" not in str(info.value) and "47" not in str(info.value) and "convert" in str(info.value)


def test_mlp_too_large_for_memory_is_refused_before_the_charge():
    # hidden = 10**11: the parameter vectors alone (4 TB) exceed any machine's memory; a MemoryError came
    # after the charge (issue 21, item 8: parameter-only failures happen before it)
    from dpfast.budget import PrivacyBudget

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    b = PrivacyBudget(10.0, 1e-3)
    g = np.random.default_rng(7)
    state = g.bit_generator.state
    with pytest.raises(ValueError, match="GiB"):
        DPMLPClassifier(epsilon=1.0, epochs=1, batch_size=8, hidden=10**11, random_state=g).fit(X, y, budget=b)
    assert not b.ledger and g.bit_generator.state == state
