"""Private linear models (dpfast.linear_model): calibration, mechanisms, estimators, bad input.

Expected values are derived independently: noise laws from the closed-form ridge solution
(the perturbed squared-loss objective is linear in the noise), calibrations from the formulas
of dpfast.accounting.objective_perturbation and dpfast.calibrate, and solutions from a
scipy L-BFGS-B reference (tests/linear_model/_reference_solver.py).
"""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer

from dpfast.accounting import ApproxDP, PLDAccountant
from dpfast.accounting.objective_perturbation import (
    amp_delta,
    amp_epsilon,
    objective_perturbation_min_regularization,
)
from dpfast.calibrate import gaussian_sigma
from dpfast.linear_model import (
    LinearRegression,
    LogisticRegression,
    amp_privacy,
    approximate_minima_perturbation,
    calibrate_amp,
    calibrate_objective,
    calibrate_output,
    glm_constants,
    loss_constants,
    margin_constants,
    output_perturbation,
)

from _fit_data import blobs as _blobs
from _reference_solver import reference_minimize

SQ2 = math.sqrt(2.0)


# ----------------------------------------------------------------------------- constants
def test_loss_constants_agree_with_solver():
    for loss in ("logistic", "squared", "huber", "smoothed_hinge"):
        assert margin_constants(loss, 0.7) == loss_constants(loss, 0.7)


def test_glm_constants():
    c = glm_constants("logistic", SQ2)
    assert (c.lipschitz, c.smoothness, c.solver_clip) == (pytest.approx(SQ2), pytest.approx(0.5), None)
    c = glm_constants("logistic", SQ2, clip_norm=0.5)
    assert (c.lipschitz, c.solver_clip) == (0.5, 0.5)
    assert glm_constants("logistic", SQ2, clip_norm=10.0).solver_clip is None
    with pytest.raises(ValueError, match="clip"):
        glm_constants("squared", 1.0)
    assert glm_constants("squared", 2.0, clip_norm=3.0).smoothness == 4.0


# ----------------------------------------------------------------------------- calibration
def test_calibrate_amp_paper_rule_eps1():
    cal = calibrate_amp(1.0, 1e-5, clip_norm=SQ2, smoothness=0.5)
    assert cal.noise_std == pytest.approx(1.3 * gaussian_sigma(1.0, 1e-5, SQ2), rel=1e-12)
    assert (cal.tau, cal.sigma_out) == (0.01, 0.15)
    assert cal.epsilon <= 1.0 and cal.accountant in ("pld", "rdp")
    assert cal.epsilon == min(cal.epsilon_pld, cal.epsilon_rdp)
    # the exact composition (1-D integral) certifies the reported lambda ...
    assert amp_delta(1.0, cal.noise_std, SQ2, 0.5, cal.regularization, 0.01, 0.15) <= 1e-5
    # ... and lambda is (nearly) the smallest the reported accountants accept
    smaller = cal.regularization / 1.01
    eps_small, *_ = amp_privacy(1e-5, noise_std=cal.noise_std, clip_norm=SQ2, smoothness=0.5, regularization=smaller,
                                tau=0.01, sigma_out=0.15)
    assert eps_small > 1.0
    # the PLD accountant is pessimistic but close to the exact composition; RDP is looser
    exact = amp_epsilon(1e-5, cal.noise_std, SQ2, 0.5, cal.regularization, 0.01, 0.15)
    assert exact <= cal.epsilon_pld <= exact + 0.01
    assert cal.epsilon_rdp >= exact


def test_regularization_too_small_names_smallest_feasible():
    cal = calibrate_amp(1.0, 1e-5, clip_norm=SQ2, smoothness=0.5)
    with pytest.raises(ValueError, match=r"smallest feasible regularization is ([0-9.]+)") as info:
        calibrate_amp(1.0, 1e-5, clip_norm=SQ2, smoothness=0.5, regularization=0.9 * cal.regularization)
    stated = float(info.value.args[0].rsplit(" ", 1)[1])
    assert stated == pytest.approx(cal.regularization, rel=1e-4)
    ok = calibrate_amp(1.0, 1e-5, clip_norm=SQ2, smoothness=0.5, regularization=2 * cal.regularization)
    assert ok.regularization == 2 * cal.regularization and ok.epsilon < 1.0
    with pytest.raises(ValueError, match="noise_factor"):
        calibrate_amp(1.0, 1e-5, clip_norm=SQ2, smoothness=0.5, noise_factor=0.8)


def test_calibrate_objective_accountants():
    L, beta, sigma = SQ2, 0.5, 1.3 * gaussian_sigma(1.0, 1e-5, SQ2)
    tight = calibrate_objective(1.0, 1e-5, lipschitz=L, smoothness=beta)
    # the output step costs privacy: lambda is at least the exact-minimiser one, and barely more
    lam_exact = objective_perturbation_min_regularization(1.0, 1e-5, sigma, L, beta)
    assert lam_exact <= tight.regularization <= 1.005 * lam_exact
    assert amp_delta(1.0, sigma, L, beta, tight.regularization, tight.tau, tight.sigma_out) <= 1e-5
    rdp = calibrate_objective(1.0, 1e-5, lipschitz=L, smoothness=beta, accountant="rdp")
    assert rdp.regularization > tight.regularization and rdp.epsilon <= 1.0 and rdp.accountant == "rdp"
    # Kifer et al. (comparison), certified by basic composition: (1 - r) of the budget for the
    # objective perturbation, r for the Gaussian output step of sensitivity 2 tau / lambda
    r = 1e-3
    kifer = calibrate_objective(1.0, 1e-5, lipschitz=L, smoothness=beta, rule="kifer")
    e1, d1 = 1.0 - r, (1.0 - r) * 1e-5
    assert kifer.noise_std == pytest.approx(L * math.sqrt(8 * math.log(2 / d1) + 4 * e1) / e1, rel=1e-12)
    assert kifer.regularization == pytest.approx(2 * beta / e1, rel=1e-12) and kifer.rule == "kifer"
    assert kifer.sigma_out == pytest.approx(gaussian_sigma(r, r * 1e-5, 2e-8 / kifer.regularization), rel=1e-12)
    # its event is the (epsilon, delta)-DP certificate, accounted by PLD (exactly epsilon at delta)
    assert kifer.event == ApproxDP(1.0, 1e-5) and kifer.accountant == "pld"
    assert kifer.tau == 1e-8 and kifer.epsilon == 1.0


def test_objective_method_is_certified_as_amp_with_tiny_tau():
    """method="objective" releases an approximate minimiser, so it is charged as Algorithm 1:
    tau = 1e-8, sigma_out = z * 2 tau / lambda with z = sqrt(1024 / (2e-3 eps)) (the output
    step's RDP term <= 0.1 % of eps at every order <= 1024), and the reported epsilon is that of
    the composition, recomputed here with the accountants directly."""
    from dpfast.accounting import Gaussian, PLDAccountant, rdp_to_epsilon
    from dpfast.accounting.erm_calibration import RDP_ORDERS
    from dpfast.accounting.objective_perturbation import ObjectivePerturbation, objective_perturbation_rdp
    from dpfast.linear_model import objective_output_multiplier, objective_privacy

    delta = 1e-5
    for eps in (0.1, 1.0, 8.0):
        cal = calibrate_objective(eps, delta, lipschitz=SQ2, smoothness=0.5)
        sigma, lam, tau, so = cal.noise_std, cal.regularization, cal.tau, cal.sigma_out
        z = math.sqrt(1024 / (2e-3 * eps))
        assert objective_output_multiplier(eps) == pytest.approx(z, rel=1e-12)
        sens = 2 * tau / lam
        assert tau == 1e-8 and so == pytest.approx(z * sens, rel=1e-12)
        assert 1024 * (sens / so) ** 2 / 2 == pytest.approx(1e-3 * eps, rel=1e-9)  # the RDP tau-term at alpha = 1024
        pld = PLDAccountant().compose(ObjectivePerturbation(sigma, SQ2, 0.5, lam))
        pld.compose(Gaussian(noise_multiplier=so / sens, sensitivity=sens))
        e_pld = pld.get_epsilon(delta)
        rdp = objective_perturbation_rdp(RDP_ORDERS, sigma, SQ2, 0.5, lam) + RDP_ORDERS * (sens / so) ** 2 / 2
        e_rdp, _ = rdp_to_epsilon(RDP_ORDERS, rdp, delta)
        assert cal.epsilon == pytest.approx(min(e_pld, e_rdp), rel=1e-12) and cal.epsilon <= eps
        assert amp_delta(cal.epsilon, sigma, SQ2, 0.5, lam, tau, so) <= delta  # exact 1-D composition
        # the tau term is charged (the exact-minimiser profile alone is smaller), and it is cheap
        exact_only = objective_privacy(delta, noise_std=sigma, lipschitz=SQ2, smoothness=0.5, regularization=lam)[0]
        assert exact_only < amp_epsilon(delta, sigma, SQ2, 0.5, lam, tau, so) <= exact_only * (1 + 1e-3)
    with pytest.raises(ValueError, match="sigma_out"):
        calibrate_objective(1.0, delta, lipschitz=SQ2, smoothness=0.5, sigma_out=0.0)


def test_objective_estimator_releases_noisy_certified_point():
    X, y = _blobs(n=300, d=4, seed=3)
    m = LogisticRegression(epsilon=1.0, method="objective", random_state=7).fit(X, y)
    cal = m.calibration_
    assert 0 < m.sigma_out_ < 1e-4 and math.isfinite(m.sigma_out_)
    assert m.calibration_.tau == 1e-8 and np.all(m.grad_norm_ <= 1e-8) and m.epsilon_ <= 1.0
    assert cal == calibrate_objective(1.0, 1e-5, lipschitz=m.clip_norm_, smoothness=m.smoothness_)
    # released = reference minimiser of the perturbed objective + N(0, sigma_out^2 I)
    Xb = np.hstack([X, np.ones((len(X), 1))])
    gen = np.random.default_rng(7)
    b = cal.noise_std * gen.standard_normal(5)
    out_noise = cal.sigma_out * gen.standard_normal(5)
    ref, gnorm = reference_minimize(Xb, 2.0 * y - 1, "logistic", alpha=cal.regularization, linear=b)
    assert gnorm < 1e-6  # so |ref - argmin| <= gnorm / lambda < 4e-7 (strong convexity)
    coef = np.append(m.coef_[0], m.intercept_[0])
    np.testing.assert_allclose(coef - out_noise, ref, atol=1e-6)
    # a given sigma_out is used as given and charged: less output noise, more regularization
    small = LogisticRegression(epsilon=1.0, method="objective", sigma_out=1e-7, random_state=7).fit(X, y)
    assert small.sigma_out_ == 1e-7 and small.lambda_ > 1.01 * m.lambda_ and small.epsilon_ <= 1.0


def test_calibrate_output_and_multiclass_noise():
    cal = calibrate_output(0.5, 1e-5, lipschitz=SQ2, tau=0.01, regularization=20.0)
    # the PLD accountant's noise for the Gaussian of sensitivity (L + 2 tau) / lambda: at least the
    # analytic Gaussian's (Balle & Wang 2018, exact), above it by PLD's pessimistic grid only
    analytic = gaussian_sigma(0.5, 1e-5, (SQ2 + 0.02) / 20.0)
    assert analytic <= cal.sigma_out <= analytic * (1 + 1e-6)
    assert cal.event.sensitivity == pytest.approx((SQ2 + 0.02) / 20.0, rel=1e-15)
    assert cal.event.noise_multiplier * cal.event.sensitivity == pytest.approx(cal.sigma_out, rel=1e-15)
    assert cal.accountant == "pld" and cal.epsilon == PLDAccountant().compose(cal.event).get_epsilon(1e-5) <= 0.5
    rdp = calibrate_output(0.5, 1e-5, lipschitz=SQ2, tau=0.01, regularization=20.0, accountant="rdp")
    assert rdp.sigma_out > cal.sigma_out and rdp.accountant == "rdp" and rdp.epsilon <= 0.5
    default = calibrate_output(0.5, 1e-5, lipschitz=SQ2, tau=0.01)
    assert default.sigma_out == pytest.approx(0.15)
    three = calibrate_output(0.5, 1e-5, lipschitz=SQ2, tau=0.01, regularization=20.0, count=3)
    assert three.sigma_out == pytest.approx(math.sqrt(3) * cal.sigma_out, rel=1e-9)
    amp3 = calibrate_amp(1.0, 1e-5, clip_norm=SQ2, smoothness=0.5, count=3)
    assert amp3.noise_std == pytest.approx(1.3 * gaussian_sigma(1.0, 1e-5, SQ2 * math.sqrt(3)), rel=1e-12)
    assert amp3.epsilon <= 1.0 and amp3.count == 3


# ----------------------------------------------------------------------------- noise laws
def _ridge_design(n=60, d=3, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= 1.5 * np.linalg.norm(X, axis=1, keepdims=True)  # norms 2/3
    y = 0.1 * np.tanh(X @ np.array([1.0, -0.5, 0.25]))
    Xb = np.hstack([X, np.ones((n, 1))])
    return X, y, Xb


def test_objective_perturbation_noise_law_is_exact_gaussian():
    """Squared loss, clipping never active: theta = A^{-1}(X^T y - b) + e, b ~ N(0, sigma^2 I),
    e ~ N(0, sigma_out^2 I) (up to the solver error <= tol/lambda, 1e-8 scale)."""
    X, y, Xb = _ridge_design()
    reps = 300
    coefs = np.empty((reps, Xb.shape[1]))
    for r in range(reps):
        m = LinearRegression(1.0, 1e-5, method="objective", clip_norm=100.0, random_state=r).fit(X, y)
        coefs[r, :3], coefs[r, 3] = m.coef_, m.intercept_
    lam, sigma, so = m.lambda_, m.sigma_, m.sigma_out_
    A = Xb.T @ Xb + lam * np.eye(4)
    Ainv = np.linalg.inv(A)
    mean = Ainv @ Xb.T @ y
    cov = sigma**2 * Ainv @ Ainv + so**2 * np.eye(4)  # + the tiny output noise certifying tol
    # standardised: z = cov^{-1/2} (theta - mean) ~ N(0, I); test mean and variance per coordinate
    w, V = np.linalg.eigh(cov)
    z = (coefs - mean) @ V / np.sqrt(w)
    se = 1 / math.sqrt(reps)
    assert np.all(np.abs(z.mean(axis=0)) < 4.5 * se)
    assert np.all(np.abs(z.var(axis=0) - 1) < 4.5 * math.sqrt(2) * se)


def test_output_perturbation_noise_law():
    X, y, Xb = _ridge_design()
    reps = 300
    coefs = np.array([
        LinearRegression(1.0, 1e-5, method="output", alpha=5.0, clip_norm=100.0, random_state=r).fit(X, y).coef_
        for r in range(reps)
    ])
    m = LinearRegression(1.0, 1e-5, method="output", alpha=5.0, clip_norm=100.0, random_state=0).fit(X, y)
    assert m.sigma_out_ == pytest.approx(gaussian_sigma(1.0, 1e-5, (100.0 + 0.02) / 5.0))
    exact = np.linalg.solve(Xb.T @ Xb + 5.0 * np.eye(4), Xb.T @ y)[:3]
    z = (coefs - exact) / m.sigma_out_
    se = 1 / math.sqrt(reps)
    assert np.all(np.abs(z.mean(axis=0)) < 4.5 * se)
    assert np.all(np.abs(z.var(axis=0) - 1) < 4.5 * math.sqrt(2) * se)


def test_amp_matches_reference_solver_before_output_noise():
    """Algorithm 1 = reference minimiser of the clipped perturbed objective + N(0, sigma_out^2)."""
    X, y = _blobs(n=300, d=4, seed=3)
    res = approximate_minima_perturbation(X, 2.0 * y - 1, "logistic", epsilon=1.0, delta=1e-5, clip_norm=0.6,
                                          random_state=7, tol=1e-6)
    cal = res.calibration
    assert res.grad_norm <= 1e-6
    gen = np.random.default_rng(7)
    b = cal.noise_std * gen.standard_normal(4)
    out_noise = cal.sigma_out * gen.standard_normal(4)
    ref, gnorm = reference_minimize(X, 2.0 * y - 1, "logistic", alpha=cal.regularization, linear=b, clip=0.6)
    assert gnorm < 1e-7
    np.testing.assert_allclose(res.coef - out_noise, ref, atol=1e-5)


# ----------------------------------------------------------------------------- estimators
def test_logistic_binary_fit_attributes_and_accuracy():
    X, y = _blobs(n=2000, d=5, seed=0)
    m = LogisticRegression(epsilon=8.0, random_state=0).fit(X, y)
    assert m.coef_.shape == (1, 5) and m.intercept_.shape == (1,)
    assert m.epsilon_ <= 8.0 and m.delta_ == 1e-5 and m.accountant_ in ("pld", "rdp")
    assert np.all(m.grad_norm_ <= 0.01) and m.n_iter_[0] > 0
    assert m.sigma_ == pytest.approx(1.3 * gaussian_sigma(8.0, 1e-5, SQ2))
    assert m.lambda_ > 0.5  # beta = 1/4 * ||x||^2 = 1/2 with the bias feature
    Xb = np.hstack([X, np.ones((len(X), 1))])
    ref, _ = reference_minimize(Xb, 2.0 * y - 1, "logistic", alpha=1e-3)
    assert m.score(X, y) >= np.mean((Xb @ ref > 0) == y) - 0.02  # non-private accuracy 0.8865
    p = m.predict_proba(X)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    np.testing.assert_array_equal(m.predict(X), (m.decision_function(X) > 0).astype(int))
    # same seed, same model; another seed, another one
    m2 = LogisticRegression(epsilon=8.0, random_state=0).fit(X, y)
    np.testing.assert_array_equal(m.coef_, m2.coef_)
    assert not np.array_equal(m.coef_, LogisticRegression(epsilon=8.0, random_state=1).fit(X, y).coef_)
    # labels {-1, +1} are the same problem, once the label set is declared (public schema)
    m3 = LogisticRegression(epsilon=8.0, random_state=0, classes=[-1, 1]).fit(X, 2 * y - 1)
    np.testing.assert_allclose(m3.coef_, m.coef_)
    assert set(m3.predict(X)) <= {-1, 1}
    with pytest.raises(ValueError, match=r"classes=\[-1, 1\]"):
        LogisticRegression(epsilon=8.0, random_state=0).fit(X, 2 * y - 1)


def test_label_set_is_not_read_off_the_private_labels():
    # Neighbours: all labels 1, and the same with one label -1.  If classes_ followed the
    # data ({0, 1} for the first, {-1, +1} for the second), the output would tell them apart
    # with certainty.  Without classes=, the label set is {0, 1} whatever the data.
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.ones(200, dtype=int)
    assert list(LogisticRegression(epsilon=1.0, random_state=0).fit(X, y).classes_) == [0, 1]
    y_neighbour = y.copy()
    y_neighbour[0] = -1
    with pytest.raises(ValueError, match="label set is"):
        LogisticRegression(epsilon=1.0, random_state=0).fit(X, y_neighbour)


def test_accountant_choice_and_secure_random():
    from dpfast.random import SecureRandom

    X, y = _blobs(n=400, d=3, seed=9)
    m = LogisticRegression(epsilon=1.0, accountant="rdp", random_state=SecureRandom()).fit(X, y)
    assert m.accountant_ == "rdp" and m.epsilon_ <= 1.0
    assert m.calibration_.epsilon_rdp == m.epsilon_ and math.isnan(m.calibration_.epsilon_pld)
    best = LogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
    assert best.lambda_ < m.lambda_  # the tighter accountant allows less regularization
    k = LogisticRegression(epsilon=1.0, method="objective", calibration="kifer", random_state=0).fit(X, y)
    assert k.calibration_.rule == "kifer" and k.accountant_ == "pld"
    assert k.lambda_ == pytest.approx(2 * 0.5 / (1.0 - 1e-3), rel=1e-9)
    assert 0 < k.sigma_out_ < 1e-3
    with pytest.raises(ValueError, match="kifer"):
        LogisticRegression(epsilon=1.0, calibration="kifer").fit(X, y)
    with pytest.raises(ValueError, match="accountant"):
        LogisticRegression(epsilon=1.0, accountant="kifer").fit(X, y)


def test_multiclass_one_vs_rest_budget():
    X, y = _blobs(n=1500, d=5, seed=2, classes=3)
    with pytest.raises(ValueError, match="classes"):
        LogisticRegression(epsilon=4.0).fit(X, y)
    m = LogisticRegression(epsilon=4.0, classes=[0, 1, 2], random_state=0).fit(X, y)
    assert m.coef_.shape == (3, 5) and m.epsilon_ <= 4.0 and m.calibration_.count == 3
    assert m.sigma_ == pytest.approx(1.3 * gaussian_sigma(4.0, 1e-5, SQ2 * math.sqrt(3)))
    assert m.score(X, y) > 0.8
    np.testing.assert_allclose(m.predict_proba(X).sum(axis=1), 1.0)


def test_row_norm_options_and_sparse_input():
    X, y = _blobs(n=500, d=4, seed=4)
    Xs = 3.0 * X  # norms 3
    with pytest.raises(ValueError, match="normalize"):
        LogisticRegression(row_norm="check", random_state=0).fit(Xs, y)
    a = LogisticRegression(row_norm="normalize", random_state=0).fit(Xs, y)
    b = LogisticRegression(random_state=0).fit(X, y)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-9)
    np.testing.assert_allclose(a.decision_function(Xs), b.decision_function(X), atol=1e-9)
    c = LogisticRegression(row_norm="clip", norm_bound=1.0, random_state=0).fit(Xs, y)
    np.testing.assert_allclose(c.coef_, b.coef_, atol=1e-9)
    d = LogisticRegression(random_state=0).fit(sp.csr_matrix(X), y)
    # CSR and dense rows run separate kernels (their sums round differently): both stop at a certified ||grad F|| <= tau of the
    # same lambda-strongly convex objective (same noise), so the points are within 2 tau / lambda
    diff = np.r_[d.coef_.ravel() - b.coef_.ravel(), d.intercept_ - b.intercept_]
    assert np.linalg.norm(diff) <= 2 * b.calibration_.tau / b.lambda_
    e = LogisticRegression(random_state=0).fit(X.astype(np.float32), y)
    assert np.all(e.grad_norm_ <= 0.01)


def test_linear_regression_amp():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 4))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.clip(X @ np.array([0.8, -0.6, 0.3, 0.0]) + 0.05 * rng.normal(size=3000), -1, 1)
    m = LinearRegression(epsilon=4.0, random_state=0).fit(X, y)
    assert m.coef_.shape == (4,) and isinstance(m.intercept_, float)
    assert m.epsilon_ <= 4.0 and m.grad_norm_ <= 0.01
    assert m.score(X, y) > 0.6


# ----------------------------------------------------------------------------- bad input
def test_bad_input():
    X, y = _blobs(n=200, d=3, seed=6)
    with pytest.raises(ValueError, match=r"\{0, 1\}"):
        LogisticRegression().fit(X, y + 1)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        LogisticRegression().fit(Xn, y)
    with pytest.raises(ValueError, match="y contains infinity"):
        LinearRegression().fit(X, np.where(y == 1, np.inf, 0.0))
    with pytest.raises(ValueError, match="sample_weight"):
        LogisticRegression().fit(X, y, sample_weight=np.full(200, 2.0))
    with pytest.raises(ValueError, match="smallest feasible regularization"):
        LogisticRegression(alpha=0.6).fit(X, y)
    with pytest.raises(ValueError, match="method"):
        LogisticRegression(method="magic").fit(X, y)
    with pytest.raises(ValueError, match="norm_bound"):
        approximate_minima_perturbation(2 * X, 2.0 * y - 1, epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="labels"):
        output_perturbation(X, y, epsilon=1.0, delta=1e-5)  # {0, 1} labels given to the raw solver API
    with pytest.raises(NotFittedError, match="not fitted"):  # scikit-learn's (an AttributeError too)
        LogisticRegression().predict(X)


# ----------------------------------------------------------------------------- sklearn
def test_params_clone_pipeline_cross_val():
    m = LogisticRegression(epsilon=2.0, method="output", random_state=3)
    params = m.get_params()
    assert params["epsilon"] == 2.0 and params["method"] == "output"
    assert m.set_params(epsilon=4.0) is m and m.epsilon == 4.0
    with pytest.raises(ValueError, match="(?i)invalid parameter"):
        m.set_params(C=1.0)
    assert "epsilon=4.0" in repr(m)

    c = clone(m)
    assert c.get_params() == m.get_params() and c is not m
    assert is_classifier(m) and is_regressor(LinearRegression())
    X, y = _blobs(n=600, d=4, seed=8)
    pipe = make_pipeline(Normalizer(), LogisticRegression(epsilon=8.0, random_state=0))
    scores = cross_val_score(pipe, 5 * X, y, cv=3)
    assert scores.shape == (3,) and scores.mean() > 0.85


def test_subnormal_delta_calibrates_or_raises_value_error():
    """0.1 raised a bare RuntimeError('calibration did not converge') for delta=1e-320."""
    X, y = _blobs(n=50, d=3, seed=0)
    try:
        m = LogisticRegression(delta=1e-320, random_state=0).fit(X, y)
    except ValueError:
        return
    assert m.epsilon_ <= 1.0 and m.delta_ == 1e-320


def test_row_norms_of_csr_with_duplicate_entries():
    """The norm check sees the row a user means: duplicate CSR entries are summed before squaring
    (squaring them apart would report sqrt(2) instead of 2 for a row (1, 1 at the same column))."""
    from dpfast.linear_model._mechanisms import row_norms

    dup = sp.csr_matrix((np.array([1.0, 1.0, 2.0, -3.0]), np.array([0, 0, 1, 2]), np.array([0, 2, 4])), shape=(2, 3))
    assert not dup.has_canonical_format
    np.testing.assert_array_equal(row_norms(dup), [2.0, np.sqrt(13.0)])
    rng = np.random.default_rng(3)
    A = sp.random(300, 40, density=0.1, random_state=rng, format="csr")
    np.testing.assert_allclose(row_norms(A), np.linalg.norm(A.toarray(), axis=1), rtol=1e-15)
    with pytest.raises(ValueError, match="normalize"):  # the norm check rejects the doubled entry
        Xd = sp.csr_matrix((np.array([0.8, 0.8, 0.5]), np.array([0, 0, 1]), np.array([0, 2, 3])), shape=(2, 2))
        LogisticRegression(row_norm="check", random_state=0).fit(Xd, [0, 1])  # row 0 is (1.6, 0): norm 1.6 > 1


# ----------------------------------------------------------------------------- issue 21, item 10
def test_default_row_norm_clips_so_a_first_fit_on_unscaled_data_succeeds():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)  # row norms up to ~4975 against norm_bound = 1
    a = LogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
    assert a.row_norm == "clip"
    b = LogisticRegression(epsilon=1.0, row_norm="clip", random_state=0).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    # clipping is the per-row map x min(1, R / ||x||): the fit on rows clipped here (checked,
    # not mapped, by the estimator) certifies the same objective with the same noise, so the
    # two points are within 2 tau / lambda (rounding of the two row maps aside)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    Xc = X * np.minimum(1.0, 1.0 / norms)
    c = LogisticRegression(epsilon=1.0, row_norm="check", random_state=0).fit(Xc, y)
    diff = np.r_[a.coef_.ravel() - c.coef_.ravel(), a.intercept_ - c.intercept_]
    assert np.linalg.norm(diff) <= 2 * a.calibration_.tau / a.lambda_ + 1e-9
    LinearRegression(epsilon=1.0, random_state=0).fit(X, y / 2.0)  # no error either


def _message_of(call) -> str:
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    return str(info.value)


def test_errors_after_reading_data_name_no_record_and_no_value():
    # every bad-data fit below has one bad record, at index 47, with a distinctive value; the
    # message must state what was violated and contain neither (issue 21, item 10)
    X, y = _blobs(n=60, d=3, seed=21)
    big = X.copy()
    big[47] *= 8168.3 / np.linalg.norm(big[47])  # norm 8168.3 > norm_bound = 1
    text = X.astype(object)
    text[47, 1] = "secret-83171"
    w = np.full(60, 0.5)
    w[47] = 3.7183
    yr = y.astype(float)
    yr[47] = np.nan
    ys = y.astype(object)
    ys[47] = "secret-83171"
    chk = dict(row_norm="check", random_state=0)
    cases = {
        "norm dense": (lambda: LogisticRegression(**chk).fit(big, y), ["47", "8168", "8.17"]),
        "norm float32": (lambda: LogisticRegression(**chk).fit(big.astype(np.float32), y), ["47", "8168", "8.17"]),
        "norm csr": (lambda: LogisticRegression(**chk).fit(sp.csr_matrix(big), y), ["47", "8168", "8.17"]),
        "norm multinomial": (lambda: LogisticRegression(method="output", multi_class="multinomial", classes=[0, 1, 2],
                                                        **chk).fit(big, y), ["47", "8168", "8.17"]),
        "norm regression": (lambda: LinearRegression(**chk).fit(big, y * 1.0), ["47", "8168", "8.17"]),
        "norm raw API": (lambda: approximate_minima_perturbation(big, 2.0 * y - 1, epsilon=1.0, delta=1e-5),
                         ["47", "8168", "8.17"]),
        "string entry": (lambda: LogisticRegression(random_state=0).fit(text, y), ["47", "83171"]),
        "1-d X": (lambda: LogisticRegression(random_state=0).fit(X[:, 0], y), ["%.4f" % X[0, 0], "%.4f" % X[1, 0]]),
        "complex X": (lambda: LinearRegression(random_state=0).fit(X + 0.9137j, y * 1.0), ["9137"]),
        "weight": (lambda: LogisticRegression(random_state=0).fit(X, y, sample_weight=w), ["47", "3.718"]),
        "nan target": (lambda: LinearRegression(random_state=0).fit(X, yr), ["47"]),
        "label": (lambda: LogisticRegression(random_state=0).fit(X, ys), ["47", "83171"]),
    }
    for name, (call, forbidden) in cases.items():
        msg = _message_of(call)
        assert msg, name
        for token in forbidden:
            assert token not in msg, (name, token, msg)


def test_solver_label_error_quotes_no_label():
    from dpfast.linear_model import minimize_glm

    X, y = _blobs(n=30, d=2, seed=3)
    t = 2.0 * y - 1
    t[17] = 0.73519
    with pytest.raises(ValueError, match=r"labels in \{-1, \+1\}") as info:
        minimize_glm(X, t, "logistic", alpha=1.0)
    assert "73519" not in str(info.value) and "0.735" not in str(info.value)
