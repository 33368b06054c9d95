"""Multinomial private logistic regression (issue 12, item 3).

Expected values are independent of the code under test: the loss and gradient from a NumPy
formula (scipy.special.logsumexp / softmax), the Hessian from its Kronecker form, the minimiser
from scikit-learn's lbfgs, the calibration from dpfast.calibrate.gaussian_sigma and the
sensitivity formula (L + 2 tau)/lambda with L = sqrt(2) R derived in csrc/losses/losses.hpp.
"""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from scipy.special import logsumexp, softmax
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

import dpfast
from dpfast import _multinomial
from dpfast._solver import MappedRows
from dpfast.calibrate import gaussian_sigma
from dpfast.linear_model import LogisticRegression
from dpfast.linear_model._multinomial import minimize_multinomial_certified, multinomial_oracle

from _fit_data import blobs as _lm_blobs

SQ2 = math.sqrt(2.0)


def _blobs(n=600, d=6, K=4, seed=0):
    return _lm_blobs(n=n, d=d, seed=seed, classes=K)  # the linear-model tests' generator, K classes


def _reference(Xd, y, W, K, alpha, w=None):
    """F and grad F from the formula (Xd: the design with any bias column)."""
    Z = Xd @ W
    w = np.ones(len(y)) if w is None else w
    f = float(np.sum(w * (logsumexp(Z, axis=1) - Z[np.arange(len(y)), y]))) + 0.5 * alpha * float(np.sum(W * W))
    R = softmax(Z, axis=1)
    R[np.arange(len(y)), y] -= 1.0
    G = Xd.T @ (w[:, None] * R) + alpha * W
    return f, G


# ----------------------------------------------------------------------------- loss and constants
@pytest.mark.parametrize("form", ["dense", "mapped", "csr", "mapped_csr", "float32"])
def test_loss_and_gradient_match_the_numpy_formula(form):
    g = np.random.default_rng(1)
    n, d, K, alpha = 257, 7, 5, 0.3
    X = g.normal(size=(n, d))
    y = g.integers(0, K, size=n)
    w = g.uniform(0, 1, size=n)
    if form == "mapped":
        scale, icpt = g.uniform(0.5, 2.0, size=n), 0.7
        Xin = MappedRows(X, scale, icpt)
        Xd = np.hstack([X * scale[:, None], np.full((n, 1), icpt)])
    elif form == "csr":
        X[g.uniform(size=X.shape) < 0.6] = 0.0
        Xin, Xd = sp.csr_matrix(X), X
    elif form == "mapped_csr":
        X[g.uniform(size=X.shape) < 0.6] = 0.0
        scale, icpt = g.uniform(0.5, 2.0, size=n), 1.3
        Xin = MappedRows(sp.csr_matrix(X.astype(np.float32)), scale, icpt)
        Xd = np.hstack([X.astype(np.float32).astype(np.float64) * scale[:, None], np.full((n, 1), icpt)])
    elif form == "float32":
        Xin = X.astype(np.float32)
        Xd = Xin.astype(np.float64)
    else:
        Xin, Xd = X, X
    W = g.normal(size=(Xd.shape[1], K)) * 2.0
    f, G = multinomial_oracle(Xin, y, K, alpha=alpha, sample_weight=w)(W.ravel())
    f_ref, G_ref = _reference(Xd, y, W, K, alpha, w)
    assert f == pytest.approx(f_ref, rel=1e-12)
    np.testing.assert_allclose(G.reshape(W.shape), G_ref, rtol=1e-11, atol=1e-11 * np.abs(G_ref).max())


def test_loss_is_stable_for_huge_scores():
    # scores of 1e3: exp overflows without the max shift; the value is the margin exactly
    X = np.array([[1.0, 0.0]])
    W = np.array([[1000.0, 0.0, -1000.0], [0.0, 0.0, 0.0]])
    f, G = multinomial_oracle(X, np.array([1]), 3)(W.ravel())
    assert f == pytest.approx(1000.0, rel=1e-15)
    np.testing.assert_allclose(G.reshape(2, 3), [[1.0, -1.0, 0.0], [0.0, 0.0, 0.0]], atol=1e-300)


def test_gradient_matches_central_differences():
    g = np.random.default_rng(2)
    n, d, K, alpha = 40, 3, 4, 0.5
    X = g.normal(size=(n, d))
    y = g.integers(0, K, size=n)
    ev = multinomial_oracle(X, y, K, alpha=alpha)
    w0 = g.normal(size=d * K)
    _, G = ev(w0)
    h = 1e-5
    fd = np.array([(ev(w0 + h * e)[0] - ev(w0 - h * e)[0]) / (2 * h) for e in np.eye(d * K)])
    # error: h^2/6 * third derivative (<= n * ||x||^3 * O(1)) + rounding ~ eps * |F| / h
    f0 = abs(ev(w0)[0])
    third = n * float(np.max(np.linalg.norm(X, axis=1))) ** 3
    np.testing.assert_allclose(G, fd, rtol=0, atol=h * h * third + 10 * np.finfo(float).eps * f0 / h)


def test_privacy_constants_of_the_native_table():
    c = _multinomial.loss_table()["softmax"]
    assert c["lipschitz"] == SQ2 and c["smoothness"] == 0.5 and c["rank_deficit"] == 1
    assert c["outputs"] == "classes" and c["labels"] == "classes" and not c["convex_clip"]
    consts = dpfast.linear_model._losses.multinomial_constants(3.0)
    assert consts.lipschitz == pytest.approx(3.0 * SQ2) and consts.smoothness == pytest.approx(4.5)


def test_gradient_and_hessian_bounds_hold_and_are_tight():
    g = np.random.default_rng(3)
    worst_grad = worst_eig = 0.0
    for _ in range(300):
        K, d = int(g.integers(2, 8)), int(g.integers(1, 6))
        p = g.dirichlet(np.full(K, float(g.choice([0.05, 0.5, 5.0]))))
        x = g.normal(size=d)
        y = int(g.integers(0, K))
        xn2 = float(x @ x)
        grad = np.outer(x, p - np.eye(K)[y])
        worst_grad = max(worst_grad, np.linalg.norm(grad) / math.sqrt(xn2))
        H = np.kron(np.diag(p) - np.outer(p, p), np.outer(x, x))
        ev = np.linalg.eigvalsh(H)
        assert ev.max() <= 0.5 * xn2 * (1 + 1e-12)
        assert np.sum(ev > 1e-12 * xn2) <= K - 1  # rank <= K - 1 (x x^T has rank one)
        worst_eig = max(worst_eig, ev.max() / xn2)
    assert worst_grad <= SQ2 and worst_eig <= 0.5
    # the suprema are approached: p -> e_j (j != y) gives sqrt(2); p = (1/2, 1/2, 0...) gives 1/2
    p = np.array([1 - 1e-9, 1e-9, 0.0])
    assert np.linalg.norm(p - np.eye(3)[1]) == pytest.approx(SQ2, rel=1e-8)
    A = np.diag([0.5, 0.5, 0.0]) - np.outer([0.5, 0.5, 0.0], [0.5, 0.5, 0.0])
    assert np.linalg.eigvalsh(A).max() == pytest.approx(0.5, rel=1e-14)


# ----------------------------------------------------------------------------- solver
def test_non_private_minimiser_matches_scikit_learn():
    from sklearn.linear_model import LogisticRegression as SkLR

    X, y = _blobs(n=500, d=5, K=4, seed=4)
    Xb = np.hstack([X, np.ones((len(y), 1))])  # the bias as a penalised feature, as in dpfast
    lam = 2.0
    W, gn, _, _ = minimize_multinomial_certified(Xb, y, 4, alpha=lam, tol=1e-9, max_iter=1000, lipschitz=2.0,
                                                 smoothness_factor=0.5)
    assert gn <= 1e-9
    # scikit-learn minimises C sum_i l + ||W||^2 / 2, i.e. lambda = 1/C on the sum objective
    sk = SkLR(C=1.0 / lam, fit_intercept=False, tol=1e-12, max_iter=10000).fit(Xb, y)
    np.testing.assert_allclose(W.reshape(-1, 4).T, sk.coef_, rtol=0, atol=1e-6)


def test_deterministic_across_thread_counts():
    X, y = _blobs(n=5000, d=8, K=5, seed=5)  # several 1024-row chunks
    W = np.random.default_rng(0).normal(size=8 * 5)
    outs = [multinomial_oracle(X, y, 5, alpha=0.1, n_threads=t)(W) for t in (1, 2, 3, 7)]
    for f, G in outs[1:]:
        assert f == outs[0][0] and np.array_equal(G, outs[0][1])
    Xs = sp.csr_matrix(np.where(np.abs(X) > 0.3, X, 0.0))
    outs = [multinomial_oracle(Xs, y, 5, n_threads=t)(W) for t in (1, 4)]
    assert outs[0][0] == outs[1][0] and np.array_equal(outs[0][1], outs[1][1])


def test_release_is_bit_identical_across_thread_counts(monkeypatch):
    X, y = _blobs(n=5000, d=8, K=5, seed=13)
    coefs = []
    for t in ("1", "3"):
        monkeypatch.setenv("DPFAST_NUM_THREADS", t)
        clf = LogisticRegression(2.0, method="output", multi_class="multinomial", classes=np.arange(5),
                                 random_state=0).fit(X, y)
        coefs.append(np.vstack([clf.coef_.T, clf.intercept_]))
    assert np.array_equal(coefs[0], coefs[1])


def _exact(X, y, K, lam):
    return minimize_multinomial_certified(X, y, K, alpha=lam, tol=1e-9, max_iter=3000, lipschitz=SQ2,
                                          smoothness_factor=0.5)[0]


def test_sensitivity_of_the_minimiser_is_within_sqrt2_R_over_lambda():
    """Add/remove neighbours: ||W(Z) - W(Z + z)||_F <= L / lambda with L = sqrt(2) R (R = 1 here).

    Random pairs, plus a constructed pair that moves the minimiser by more than R / lambda: it
    fails the bound that takes the loss as 1-Lipschitz (the GLM constant), so a mutant with
    L = R would be caught."""
    g = np.random.default_rng(6)
    K, lam = 3, 5.0
    worst = 0.0
    for _ in range(20):
        X, y = _blobs(n=int(g.integers(20, 200)), d=3, K=K, seed=int(g.integers(1 << 30)))
        x = g.normal(size=3)
        x /= np.linalg.norm(x)
        W = _exact(X, y, K, lam)
        W2 = _exact(np.vstack([X, x]), np.r_[y, int(g.integers(K))], K, lam)
        worst = max(worst, float(np.linalg.norm(W - W2)))
    # adversarial: many rows make class 0 confident along e1; the added row (mostly along the
    # unused e2) has label 1, so its gradient is close to sqrt(2) and meets only the ridge
    n, a = 2000, 0.5
    X = np.tile([1.0, 0.0], (n, 1))
    y = np.zeros(n, dtype=np.int64)
    W = _exact(X, y, K, lam)
    W2 = _exact(np.vstack([X, [a, math.sqrt(1 - a * a)]]), np.r_[y, 1], K, lam)
    adversarial = float(np.linalg.norm(W - W2))
    bound = (SQ2 + 2e-9) / lam  # + 2 tol / lambda for the two certified (not exact) minimisers
    assert max(worst, adversarial) <= bound
    assert adversarial > 1.0 / lam  # the 1-Lipschitz bound fails: sqrt(2) is needed


# ----------------------------------------------------------------------------- estimator
def _fit(seed=0, **kw):
    X, y = _blobs(seed=10)
    params = dict(method="output", multi_class="multinomial", classes=np.arange(4), random_state=seed)
    params.update(kw)
    return LogisticRegression(1.0, 1e-5, **params).fit(X, y), X, y


def test_estimator_shapes_probabilities_and_event():
    clf, X, y = _fit()
    assert clf.coef_.shape == (4, 6) and clf.intercept_.shape == (4,) and clf.multi_class_ == "multinomial"
    P = clf.predict_proba(X)
    np.testing.assert_allclose(P, softmax(X @ clf.coef_.T + clf.intercept_, axis=1), rtol=1e-12)
    np.testing.assert_allclose(clf.decision_function(X), X @ clf.coef_.T + clf.intercept_, rtol=1e-12)
    assert np.array_equal(clf.predict(X), np.argmax(P, axis=1))
    # one Gaussian release of sensitivity (L + 2 tau)/lambda, L = sqrt(2) * sqrt(R^2 + s^2) = 2
    L = SQ2 * math.sqrt(2.0) * (1 + 8 * np.finfo(float).eps)
    assert isinstance(clf.event_, dpfast.accounting.Gaussian)
    sens = (L + 2 * 0.01) / clf.lambda_
    assert clf.event_.noise_multiplier * sens == pytest.approx(clf.sigma_out_, rel=1e-12)
    # the PLD accountant's noise: the analytic Gaussian's (exact) raised by PLD's pessimistic grid only
    assert gaussian_sigma(1.0, 1e-5) * sens <= clf.sigma_out_ <= gaussian_sigma(1.0, 1e-5) * sens * (1 + 1e-6)
    assert clf.sigma_out_ == pytest.approx(0.15, rel=1e-12)  # default lambda: sigma_out = 0.15
    assert clf.accountant_ == "pld" and clf.delta_ == 1e-5
    assert clf.epsilon_ == dpfast.accounting.PLDAccountant().compose(clf.event_).get_epsilon(1e-5) <= 1.0
    assert clf.grad_norm_[0] <= 0.01


def test_noise_has_the_calibrated_scale():
    X, y = _blobs(seed=10)
    base = LogisticRegression(1.0, 1e-5, method="output", multi_class="multinomial", classes=np.arange(4))
    first = clone(base).set_params(random_state=0).fit(X, y)
    # the certified point before noise: the same deterministic solve the estimator ran
    Xd = np.hstack([X, np.ones((len(y), 1))])
    W = minimize_multinomial_certified(Xd, y, 4, alpha=first.lambda_, tol=0.01, max_iter=1000,
                                       lipschitz=first.clip_norm_, smoothness_factor=0.5)[0].reshape(-1, 4)
    z = []
    for seed in range(100):
        clf = clone(base).set_params(random_state=seed).fit(X, y)
        z.append((np.vstack([clf.coef_.T, clf.intercept_]) - W).ravel() / first.sigma_out_)
    z = np.concatenate(z)  # 100 * 7 * 4 = 2800 standardised draws
    assert stats.kstest(z, "norm").pvalue > 1e-3
    # the variance within 4 standard errors (sqrt(2/N) = 0.027) of 1: a noise scale 10 % off
    # (variance 1.21, 7.9 s.e.) fails
    assert abs(np.mean(z * z) - 1.0) <= 4 * math.sqrt(2.0 / z.size)


def test_budget_is_charged_once_and_refusals_draw_no_noise():
    X, y = _blobs(seed=10)
    budget = dpfast.PrivacyBudget(epsilon=2.0, delta=1e-5)
    clf = LogisticRegression(1.0, 1e-5, method="output", multi_class="multinomial", classes=np.arange(4),
                             random_state=0).fit(X, y, budget=budget)
    assert len(budget.ledger) == 1 and budget.spent() == pytest.approx(clf.epsilon_, rel=1e-6)
    for kw in (dict(method="amp"), dict(method="objective"), dict(method="output", clip_norm=1.0),
               dict(method="output", solver="saga"), dict(method="output", noise_std=1.0)):
        gen = np.random.default_rng(7)
        state = gen.bit_generator.state
        with pytest.raises(ValueError) as err:
            LogisticRegression(1.0, 1e-5, multi_class="multinomial", classes=np.arange(4), random_state=gen,
                               **kw).fit(X, y, budget=budget)
        assert gen.bit_generator.state == state and len(budget.ledger) == 1
        if kw.get("method") in ("amp", "objective"):
            assert "GLM" in str(err.value) and "Theorem E.1" in str(err.value)
    with pytest.raises(ValueError, match="multi_class"):
        LogisticRegression(multi_class="auto", method="output").fit(X, y)
    with pytest.raises(ValueError, match="at least two"):
        LogisticRegression(multi_class="multinomial", method="output", classes=[0]).fit(X, np.zeros(len(y)))


def test_row_bound_and_sparse_input():
    X, y = _blobs(seed=10)
    with pytest.raises(ValueError, match="norm_bound"):
        LogisticRegression(method="output", multi_class="multinomial", classes=np.arange(4),
                           row_norm="check").fit(2 * X, y)  # the default clips
    dense, _, _ = _fit(seed=3)
    sparse = LogisticRegression(1.0, 1e-5, method="output", multi_class="multinomial", classes=np.arange(4),
                                random_state=3).fit(sp.csr_matrix(X), y)
    # same noise draws, minimisers certified to tau = 0.01 by different kernels: within 2 tau/lambda
    diff = np.linalg.norm(np.vstack([dense.coef_.T, dense.intercept_]) - np.vstack([sparse.coef_.T, sparse.intercept_]))
    assert diff <= 2 * 0.01 / dense.lambda_


def test_binary_multinomial_and_ovr_default_unchanged():
    X, y = _blobs(K=2, seed=11)
    m = LogisticRegression(method="output", multi_class="multinomial", random_state=0).fit(X, y)
    assert m.coef_.shape == (2, 6) and m.predict_proba(X).shape == (len(y), 2)
    o = LogisticRegression(random_state=0).fit(X, y)
    assert o.multi_class_ == "ovr" and o.coef_.shape == (1, 6) and LogisticRegression().multi_class == "ovr"


def test_clone_and_grid_search():
    X, y = _blobs(seed=12)
    est = LogisticRegression(1.0, method="output", multi_class="multinomial", classes=np.arange(4), random_state=0)
    assert clone(est).get_params()["multi_class"] == "multinomial"
    gs = GridSearchCV(est, {"sigma_out": [0.05, 0.15]}, cv=3).fit(X, y)
    assert gs.best_estimator_.coef_.shape == (4, 6)


def test_dask_input_is_refused_for_multinomial():
    da = pytest.importorskip("dask.array")
    X, y = _blobs(seed=12)
    with pytest.raises(ValueError, match="Dask"):
        LogisticRegression(method="output", multi_class="multinomial", classes=np.arange(4)).fit(
            da.from_array(X, chunks=200), y)
