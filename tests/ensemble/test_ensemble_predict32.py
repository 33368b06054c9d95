"""RandomForestClassifier.predict_proba / predict on the default forest (100 trees of depth 5: the
sliced predict kernel) and a small one (the descent): the NumPy mean of the leaves' distributions
in tree order, bit for bit, for any DPFAST_NUM_THREADS (forest32)."""
import numpy as np
import pytest

from dpfast.ensemble import RandomForestClassifier


def _reference_proba(m, X):
    leaves = m.apply(X)
    out = np.zeros((X.shape[0], m.n_classes_))
    for t in range(m.n_estimators_):
        out += m.leaf_proba_[t, leaves[:, t]]
    return out / m.n_estimators_


@pytest.mark.parametrize("n_estimators,classes", [("auto", [0, 1]), ("auto", [0, 1, 2]), (3, [0, 1])])
def test_predict_proba_is_the_reference_for_any_thread_count(n_estimators, classes, monkeypatch):
    rng = np.random.default_rng(len(classes))
    X = rng.uniform(-1, 1, size=(3000, 4))
    X[::17, 1] = 0.0
    X[::19, 2] = -0.0
    y = (X[:, 0] > 0).astype(int) + (len(classes) == 3) * (X[:, 1] > 0.5)
    m = RandomForestClassifier(1e3, (-1, 1), classes=classes, n_estimators=n_estimators,
                               random_state=0).fit(X, y)
    if n_estimators == "auto":
        assert m.n_estimators_ == 100  # the sliced kernel's shape
    Xt = np.concatenate([X[:257], rng.uniform(-2, 2, size=(130, 4))])
    ref = _reference_proba(m, Xt)
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("DPFAST_NUM_THREADS", threads)
        got = m.predict_proba(Xt)
        assert got.tobytes() == ref.tobytes(), threads
        np.testing.assert_array_equal(m.predict(Xt), m.classes_[np.argmax(ref, axis=1)])
    assert m.predict_proba(Xt[:1]).tobytes() == ref[:1].tobytes()
