"""PublicDataClassifier / PublicDataRegressor: API, bad input, utility sanity (issue 6)."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from dpfast.public import PublicDataClassifier, PublicDataRegressor


def halfspace(rng, n, d=4, shift=0.0):
    w = np.linspace(1.0, -1.0, d)
    X = 2.0 * rng.normal(size=(n, d)) + 1.0 + shift
    y = np.where(X @ w - 0.5 + 0.5 * rng.normal(size=n) > 0, "yes", "no")
    return X, y


C = ["no", "yes"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X, y = halfspace(rng, 10_000)
    Z, _ = halfspace(rng, 300)
    Xt, yt = halfspace(rng, 5_000)
    return X, y, Z, Xt, yt


def test_regularization_classifier(data):
    X, y, Z, Xt, yt = data
    clf = PublicDataClassifier(epsilon=1.0, delta=1e-5, random_state=0, classes=C).fit(X, y, Z)
    assert set(clf.classes_) == {"no", "yes"}
    assert clf.score(Xt, yt) > 0.9
    assert clf.oracle_calls_ == 2 and clf.n_public_used_ == 300
    assert clf.predict(Xt[:5]).dtype == clf.classes_.dtype
    # same seed, same model
    clf2 = PublicDataClassifier(epsilon=1.0, delta=1e-5, random_state=0, classes=C).fit(X, y, Z)
    np.testing.assert_array_equal(clf.coef_, clf2.coef_)
    # pure DP (Laplace Perturb) when delta == 0
    pure = PublicDataClassifier(epsilon=1.0, delta=0.0, random_state=0, classes=C).fit(X, y, Z)
    assert pure.result_.mechanism == "laplace" and pure.score(Xt, yt) > 0.8


def test_rrspm_classifier(data):
    X, y, Z, Xt, yt = data
    clf = PublicDataClassifier(epsilon=1.0, method="rrspm", random_state=0, classes=C).fit(X, y, Z)
    assert clf.oracle_calls_ == 2
    assert clf.score(Xt, yt) > 0.6  # a stump on a 4-d halfspace; the best stump is about 0.7
    one_d = PublicDataClassifier(epsilon=1.0, method="rrspm", hypothesis="threshold", random_state=0)
    rng = np.random.default_rng(1)
    x = rng.random(5000)
    yy = (x > 0.6).astype(int)
    one_d.fit(x[:, None], yy, rng.random((200, 1)))
    assert one_d.score(x[:, None], yy) > 0.9
    with pytest.warns(UserWarning, match="public weight"):
        PublicDataClassifier(epsilon=1.0, method="rrspm", max_public=200, random_state=0, classes=C).fit(X[:500], y[:500], Z)


def test_regressor():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(20_000, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 3.0 + 0.5 * rng.normal(size=20_000)
    Z = rng.normal(size=(200, 3))
    reg = PublicDataRegressor(epsilon=1.0, delta=1e-5, random_state=0, huber_delta=2.0).fit(X, y, Z)
    Xt = rng.normal(size=(5000, 3))
    assert reg.score(Xt, Xt @ np.array([1.0, -2.0, 0.5]) + 3.0) > 0.8


def test_get_set_params():
    clf = PublicDataClassifier(epsilon=0.5, method="rrspm")
    p = clf.get_params()
    assert p["epsilon"] == 0.5 and p["method"] == "rrspm" and "random_state" in p
    clf.set_params(epsilon=2.0, hypothesis="threshold")
    assert clf.epsilon == 2.0 and clf.hypothesis == "threshold"
    with pytest.raises(ValueError, match="(?i)invalid parameter"):
        clf.set_params(gamma=1.0)
    assert "PublicDataClassifier(" in repr(clf)
    assert PublicDataRegressor().get_params()["huber_delta"] == 1.0


def test_bad_input(data):
    X, y, Z, Xt, _ = data
    clf = PublicDataClassifier(random_state=0, classes=C)
    with pytest.raises(ValueError, match="no public data"):
        clf.fit(X, y, None)
    with pytest.raises(ValueError, match="no public data"):
        clf.fit(X, y, np.empty((0, 4)))
    with pytest.raises(ValueError, match="X_public has 3 features, but the private data has 4"):
        clf.fit(X, y, Z[:, :3])
    with pytest.raises(ValueError, match="at least 5 public rows"):
        clf.fit(X, y, Z[:4])
    for bad in (np.nan, np.inf):
        Xb = X.copy()
        Xb[0, 0] = bad
        with pytest.raises(ValueError, match="X_private contains (NaN|infinity)"):
            clf.fit(Xb, y, Z)
        Zb = Z.copy()
        Zb[0, 0] = bad
        with pytest.raises(ValueError, match="X_public contains (NaN|infinity)"):
            clf.fit(X, y, Zb)
    with pytest.raises(ValueError, match="y_private contains NaN"):
        PublicDataRegressor().fit(X, np.full(len(X), np.nan), Z)
    clf.fit(X, np.full(len(X), "no"), Z)  # one class present: fine, the label set is public
    with pytest.raises(ValueError, match="outside classes"):
        clf.fit(X, np.full(len(X), "maybe"), Z)
    with pytest.raises(ValueError, match="classes="):
        PublicDataClassifier().fit(X, y, Z)  # string labels need the public label set
    with pytest.raises(ValueError, match="label set is"):
        PublicDataClassifier().fit(X, np.arange(len(X)) % 3, Z)
    # +-1 labels: the label set is declared, never guessed from the private labels
    with pytest.raises(ValueError, match=r"classes=\[-1, 1\]"):
        PublicDataClassifier(random_state=0).fit(X, (y == "yes") * 2 - 1, Z)
    pm = PublicDataClassifier(random_state=0, classes=[-1, 1]).fit(X, (y == "yes") * 2 - 1, Z)
    assert list(pm.classes_) == [-1, 1]
    with pytest.raises(ValueError, match="method"):
        PublicDataClassifier(method="dpsgd").fit(X, y, Z)
    with pytest.raises(ValueError, match="method"):
        PublicDataRegressor(method="rrspm").fit(X, y, Z)
    with pytest.raises(ValueError, match="n_scale"):
        PublicDataClassifier(method="rrspm", neighbours="add_remove", classes=C).fit(X, y, Z)
    with pytest.raises(ValueError, match="n_scale"):
        PublicDataClassifier(neighbours="add_remove", classes=C).fit(X, y, Z)
    ok = PublicDataClassifier(method="rrspm", neighbours="add_remove", n_scale=1e4, classes=C, random_state=0).fit(X, y, Z)
    assert ok.result_.weight_scale == pytest.approx(ok.n_public_used_ / 1.0)  # Lap(m / eps) under add/remove
    with pytest.raises(NotImplementedError, match="Algorithm 2"):
        PublicDataClassifier(method="perturbation").fit(X, y, Z)
    with pytest.raises(ValueError, match="epsilon"):
        PublicDataClassifier(epsilon=-1).fit(X, y, Z)
    with pytest.raises(ValueError, match="delta"):
        PublicDataClassifier(delta=1.5).fit(X, y, Z)
    with pytest.raises(NotFittedError, match="not fitted"):
        PublicDataClassifier().predict(Xt)
    fitted = PublicDataClassifier(random_state=0, classes=C).fit(X, y, Z)
    with pytest.raises(ValueError, match="features"):
        fitted.predict(Xt[:, :2])


def test_public_labels_are_ignored_with_a_warning(data):
    X, y, Z, Xt, _ = data
    with pytest.warns(UserWarning, match="ignored"):
        a = PublicDataClassifier(random_state=0, classes=C).fit(X, y, Z, y_public=np.ones(len(Z)))
    with pytest.warns(UserWarning, match="ignored"):
        b = PublicDataClassifier(random_state=0, classes=C).fit(X, y, (Z, np.zeros(len(Z))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = PublicDataClassifier(random_state=0, classes=C).fit(X, y, Z)
    np.testing.assert_array_equal(a.coef_, c.coef_)
    np.testing.assert_array_equal(b.coef_, c.coef_)


def test_shifted_public_sample_keeps_working(data):
    X, y, _, Xt, yt = data
    rng = np.random.default_rng(3)
    Zs, _ = halfspace(rng, 300, shift=1.5)  # public sample from a shifted population
    clf = PublicDataClassifier(epsilon=1.0, delta=1e-5, random_state=0, classes=C).fit(X, y, Zs)
    assert clf.score(Xt, yt) > 0.8


def test_errors_after_reading_private_data_name_no_value(data):
    # issue 21, item 10: a value only the private data holds must not appear in a message
    from dpfast.public import rrspm

    X, y, Z, _, _ = data
    Xs = X[:200].astype(object)
    Xs[47, 2] = "secret-83171"
    for make in (lambda: PublicDataClassifier(random_state=0, classes=C).fit(Xs, y[:200], Z),
                 lambda: PublicDataRegressor(random_state=0).fit(Xs, np.ones(200), Z),
                 lambda: rrspm(Xs, (y[:200] == "yes").astype(int), Z, epsilon=1.0, rng=0)):
        with pytest.raises(ValueError) as info:
            make()
        assert "83171" not in str(info.value) and "47" not in str(info.value)
        assert "X_private" in str(info.value) and "convert" in str(info.value)


def test_rrspm_epsilon_too_small_for_the_weights_is_refused_before_the_charge(data):
    # 2m / epsilon overflows at epsilon = 5e-324: it charged, then failed inside rrspm (issue 21, item 8)
    from dpfast.budget import PrivacyBudget

    X, y, Z, _, _ = data
    b = PrivacyBudget(10.0, 1e-3)
    g = np.random.default_rng(7)
    state = g.bit_generator.state
    with pytest.raises(ValueError, match="too small"):
        PublicDataClassifier(epsilon=5e-324, method="rrspm", classes=C, random_state=g).fit(X[:200], y[:200], Z,
                                                                                            budget=b)
    assert not b.ledger and g.bit_generator.state == state
