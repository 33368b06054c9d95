"""Regularization learner (Algorithm 3 + Perturb): stability bound, end-to-end audit, bad input.

Spec public_data.md 1.6, 2.3, 4.2, 4.3, 6.2.  The stability test runs f_bar on many pairs of
neighbouring private datasets (adversarial replacements) and checks the bound the calibration uses.
"""
import math

import numpy as np
import pytest
from scipy import stats

from dpfast.public import (
    default_eta,
    public_geometry,
    regularization_learner,
    regularization_learner_generic,
    regularization_stability,
)
from dpfast.public._regularization import _augment, _stage1


def cp_lower(k, n, a):
    return 0.0 if k == 0 else float(stats.beta.ppf(a, k, n - k + 1))


def cp_upper(k, n, a):
    return 1.0 if k == n else float(stats.beta.ppf(1 - a, k + 1, n - k))


def make_data(rng, n, m, d=3, shift=0.0):
    w = np.array([1.5, -1.0, 0.5])[:d]
    X = rng.normal(size=(n, d)) + shift
    y = np.where(X @ w + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    Z = rng.normal(size=(m, d))
    return X, y, Z


def adversarial_neighbour(rng, X, y, geo, kind):
    """A neighbour with an extreme record (huge norm along a public eigen-direction or at random, flipped label)."""
    X2, y2 = X.copy(), y.copy()
    d = X.shape[1]
    if kind == 0:  # direction of largest ||.||_{M^-1} per unit norm (weakest regularisation)
        direction = geo.U[:, 0][:d] if geo.U.shape[0] > d else geo.U[:, 0]
    else:
        direction = rng.normal(size=d)
    x_new = 50.0 * direction / np.linalg.norm(direction) * rng.choice([-1, 1])
    i = int(rng.integers(len(y)))
    X2[i] = x_new
    y2[i] = -y[i]
    return X2, y2


@pytest.mark.parametrize("loss", ["logistic", "huber"])
def test_stability_bound_on_neighbouring_pairs(loss):
    rng = np.random.default_rng(0)
    n, m, eta = 300, 60, 0.05
    worst_ratio_m, worst_ratio_H = 0.0, 0.0
    for trial in range(25):
        X, y, Z = make_data(rng, n, m)
        if loss == "huber":
            y = X @ np.array([1.0, 2.0, -1.0]) + rng.normal(size=n)
        Xa, Za = _augment(X, True), _augment(Z, True)
        geo = public_geometry(Za, eta)
        lam = 1.0
        X2, y2 = adversarial_neighbour(rng, X, y, geo, trial % 2)
        if loss == "huber":
            y2[np.argmax(np.any(X2 != X, axis=1))] = 1e6  # an outlying label: Huber keeps it Lipschitz
        w1, stab, _ = _stage1(Xa, y, geo, n, loss, 1.0, lam, "replace_one", 0.01, 1000)
        w2, _, _ = _stage1(_augment(X2, True), y2, geo, n, loss, 1.0, lam, "replace_one", 0.01, 1000)
        dist_m = np.linalg.norm(Za @ (w1 - w2)) / math.sqrt(m)
        H = n * (2 * eta * geo.S + geo.ridge * np.eye(Za.shape[1]))
        dist_H = math.sqrt((w1 - w2) @ H @ (w1 - w2))
        assert dist_m <= stab["rho"]
        assert dist_H <= stab["rho_H"] + 2 * stab["tau"]
        worst_ratio_m = max(worst_ratio_m, dist_m / stab["rho"])
        worst_ratio_H = max(worst_ratio_H, dist_H / stab["rho_H"])
    # the bound is not vacuous: adversarial neighbours come within a small factor of it
    assert worst_ratio_H > 0.05


def test_stability_add_remove():
    rng = np.random.default_rng(1)
    n, m, eta, N = 200, 40, 0.1, 250.0
    for trial in range(10):
        X, y, Z = make_data(rng, n, m)
        Xa, Za = _augment(X, True), _augment(Z, True)
        geo = public_geometry(Za, eta)
        x_new = _augment(50.0 * rng.normal(size=(1, 3)), True)
        w1, stab, _ = _stage1(Xa, y, geo, N, "logistic", 1.0, 1.0, "add_remove", 0.01, 1000)
        w2, _, _ = _stage1(np.vstack([Xa, x_new]), np.append(y, 1.0), geo, N, "logistic", 1.0, 1.0, "add_remove", 0.01, 1000)
        assert np.linalg.norm(Za @ (w1 - w2)) / math.sqrt(m) <= stab["rho"]


def test_stability_constants():
    rng = np.random.default_rng(2)
    Za = _augment(rng.normal(size=(80, 3)), True)
    geo = public_geometry(Za, 0.2)
    s1 = regularization_stability(geo, 1000, 1.0, "replace_one", 0.01)
    s2 = regularization_stability(geo, 1000, 1.0, "add_remove", 0.01)
    assert s1["rho_H"] == pytest.approx(2 * geo.clip_norm / math.sqrt(1000))
    assert s2["rho"] == pytest.approx(s1["rho"] / 2)
    # kappa from S's eigenvalues equals the release-set formula with all public rows
    s3 = regularization_stability(geo, 1000, 1.0, "replace_one", 0.01, release_points=Za)
    assert s3["kappa"] == pytest.approx(s1["kappa"], rel=1e-9)
    assert s3["l1"] == pytest.approx(s1["l1"], rel=1e-9)
    # rho is about 2 C / (n sqrt(2 eta)) at most
    assert s1["rho"] <= 1.03 * 2 * geo.clip_norm / (1000 * math.sqrt(2 * 0.2))
    # the default clip radius is the median public norm
    assert geo.clip_norm == pytest.approx(np.median(geo.m_inv_norms(Za)))


@pytest.mark.slow
def test_end_to_end_audit_of_released_predictions():
    """Black-box: release on the worst neighbouring pair found; the CP lower bound stays below eps."""
    rng = np.random.default_rng(3)
    n, m, eps, delta, eta = 100, 30, 1.0, 1e-3, 0.05
    X, y, Z = make_data(rng, n, m)
    Za = _augment(Z, True)
    geo = public_geometry(Za, eta)
    X2, y2 = adversarial_neighbour(rng, X, y, geo, 0)
    w1, _, _ = _stage1(_augment(X, True), y, geo, n, "logistic", 1.0, 1.0, "replace_one", 0.01, 1000)
    w2, _, _ = _stage1(_augment(X2, True), y2, geo, n, "logistic", 1.0, 1.0, "replace_one", 0.01, 1000)
    u = Za @ (w2 - w1)
    u /= np.linalg.norm(u)
    runs = 600
    T = {}
    for name, (XX, yy) in {"D": (X, y), "D2": (X2, y2)}.items():
        T[name] = np.array([
            u @ (Za @ regularization_learner(XX, yy, Z, epsilon=eps, delta=delta, eta=eta, rng=seed).coef)
            for seed in range(runs)
        ])
    gamma = regularization_learner(X, y, Z, epsilon=eps, delta=delta, eta=eta, rng=0).noise_scale
    thresholds = np.median(T["D2"]) + gamma * np.array([0.0, 1.0, 2.0])
    a = 1e-4 / len(thresholds)
    for c in thresholds:
        k1, k2 = int(np.sum(T["D"] > c)), int(np.sum(T["D2"] > c))
        num = cp_lower(k2, runs, a) - delta
        if num > 0:
            assert math.log(num / cp_upper(k1, runs, a)) <= eps


def test_output_depends_on_private_data_only_through_the_release():
    rng = np.random.default_rng(4)
    X, y, Z = make_data(rng, 500, 50)
    r = regularization_learner(X, y, Z, epsilon=1.0, delta=1e-5, rng=0)
    np.testing.assert_allclose(r.coef, np.linalg.lstsq(_augment(Z, True), r.public_targets, rcond=None)[0], atol=1e-10)
    assert r.oracle_calls == 2
    from dpfast.accounting import PLDAccountant

    assert PLDAccountant().compose(r.description()).get_epsilon(1e-5) == pytest.approx(1.0, abs=0.01)


def test_utility_synthetic_halfspace():
    rng = np.random.default_rng(5)
    X, y, Z = make_data(rng, 20_000, 400)
    Xt, yt, _ = make_data(rng, 10_000, 1)
    accs = [np.mean(np.sign(regularization_learner(X, y, Z, epsilon=1.0, delta=1e-5, rng=s).decision_function(Xt)) == yt)
            for s in range(3)]
    assert np.mean(accs) > 0.9  # non-private accuracy is about 0.95 on this problem
    acc_pure = np.mean(np.sign(regularization_learner(X, y, Z, epsilon=1.0, delta=0.0, rng=0).decision_function(Xt)) == yt)
    assert acc_pure > 0.85


def test_generic_oracle_path():
    rng = np.random.default_rng(6)
    X, y, Z = make_data(rng, 2000, 50)
    calls = []

    def oracle(Xp, yp, Zp, eta):  # exact averaged objective over linear functions, by the native solver
        calls.append(eta)
        from dpfast._solver import minimize_glm

        Xa, Zpa = _augment(Xp, True), _augment(Zp, True)
        S = Zpa.T @ Zpa / len(Zpa)
        res = minimize_glm(Xa, yp, "logistic", alpha=1e-8, quadratic=2 * eta * S, sample_weight=np.full(len(yp), 1 / len(yp)), tol=1e-10)
        return Zpa @ res.coef

    model, rel, rho = regularization_learner_generic(
        X, y, Z, oracle=oracle, project=lambda Zp, t: np.linalg.lstsq(_augment(Zp, True), t, rcond=None)[0],
        epsilon=1.0, delta=1e-5, eta=0.1, loss_range=math.log(1 + math.e**3) - math.log(1 + math.e**-3), rng=0,
    )
    assert calls == [0.1] and model.shape == (4,)
    assert rho == pytest.approx(math.sqrt((math.log(1 + math.e**3) - math.log(1 + math.e**-3)) / (0.1 * 2000)))
    with pytest.raises(ValueError, match="one prediction per public point"):
        regularization_learner_generic(X, y, Z, oracle=lambda *a: np.zeros(3), project=None, epsilon=1.0, eta=0.1)


def test_bad_input():
    rng = np.random.default_rng(7)
    X, y, Z = make_data(rng, 100, 20)
    with pytest.raises(ValueError, match="at least 4 public rows"):
        regularization_learner(X, y, Z[:3], epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="features"):
        regularization_learner(X, y, Z[:, :2], epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="Lipschitz"):
        regularization_learner(X, y, Z, epsilon=1.0, delta=1e-5, loss="squared")
    with pytest.raises(ValueError, match="-1, \\+1"):
        regularization_learner(X, (y > 0).astype(float), Z, epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="n_scale"):
        regularization_learner(X, y, Z, epsilon=1.0, delta=1e-5, neighbours="add_remove")
    Xn = X.copy()
    Xn[3, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        regularization_learner(Xn, y, Z, epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="release_size"):
        regularization_learner(X, y, Z, epsilon=1.0, delta=1e-5, release_size=2)


def test_unconverged_first_solver_still_gives_a_certified_point(monkeypatch):
    """Stage 1 never refuses (a refusal would be a data-dependent abort): when the first solver
    stops early, the certified fallback reaches ||grad||_{H^-1} <= tau, checked here with an
    independent NumPy gradient of the logistic objective."""
    import dpfast.public._regularization as reg

    minimize_glm, glm_loss_and_grad, loss_constants = reg._solver()

    def lazy_solver(X, y, loss, **kw):  # stops at the starting point
        kw["max_iter"] = 0
        kw["tol"] = 1e300
        return minimize_glm(X, y, loss, **kw)

    monkeypatch.setattr(reg, "_solver", lambda: (lazy_solver, glm_loss_and_grad, loss_constants))
    rng = np.random.default_rng(8)
    X, y, Z = make_data(rng, 300, 30)
    Xa, Za = reg._augment(X, True), reg._augment(Z, True)
    geo = reg.public_geometry(Za, 0.5)
    N = float(len(X))
    w, stab, _ = reg._stage1(Xa, y, geo, N, "logistic", 1.0, 1.0, "replace_one", 0.01, 1000)
    Xc = geo.clip(Xa)
    margins = y * (Xc @ w)
    H = 2.0 * N * geo.eta * geo.S + N * geo.ridge * np.eye(Xa.shape[1])
    g = -(Xc.T @ (y / (1.0 + np.exp(margins)))) + H @ w
    assert float(g @ np.linalg.solve(H, g)) ** 0.5 <= stab["tau"]
    assert np.abs(w).max() > 0  # it moved from the starting point
    # and the learner releases a model (no exception) with the lazy first solver
    out = regularization_learner(X, y, Z, epsilon=1.0, delta=1e-5, rng=0)
    assert np.isfinite(out.coef).all()

def test_public_geometry_same_for_boolean_and_float_public_rows():
    """A boolean Z must give the numeric second moment (0.1 computed a logical Z^T Z)."""
    Zb = np.random.default_rng(4).random((50, 4)) < 0.5
    a = public_geometry(Zb, 0.5)
    b = public_geometry(Zb.astype(np.float64), 0.5)
    np.testing.assert_array_equal(a.S, b.S)
    assert a.clip_norm == b.clip_norm
    np.testing.assert_allclose(a.S, (Zb.T.astype(float) @ Zb.astype(float)) / 50, rtol=0, atol=0)


def test_public_geometry_refuses_empty_or_overflowing_public_rows():
    with pytest.raises(ValueError, match="at least one public row"):
        public_geometry(np.zeros((0, 3)), 0.5)
    with pytest.raises(ValueError, match="overflows"):
        public_geometry(np.full((4, 2), 1e200), 0.5)


@pytest.mark.parametrize("kw, match", [
    (dict(n_scale=5e-324), "not positive definite"),          # N M underflows: was a ZeroDivisionError
    (dict(n_scale=1e308, eta=10.0, neighbours="add_remove"), "not positive definite"),  # N M overflows
    (dict(eta=5e-324), "default ridge"),                      # the default ridge underflows to 0
])
def test_regularization_learner_refuses_unrepresentable_parameters_before_any_draw(kw, match):
    from dpfast import PrivacyBudget
    from dpfast.public import PublicDataRegressor

    rng = np.random.default_rng(4)
    X, Z = rng.normal(size=(30, 2)), rng.normal(size=(10, 2))
    y = np.sign(X[:, 0]) + (X[:, 0] == 0)
    g = np.random.default_rng(2)
    state = g.bit_generator.state
    with pytest.raises(ValueError, match=match):
        regularization_learner(X, y, Z, epsilon=1.0, delta=1e-5, rng=g, **kw)
    assert g.bit_generator.state == state
    budget = PrivacyBudget(10.0, 1e-3)
    with pytest.raises(ValueError, match=match):  # the estimator: before the charge
        PublicDataRegressor(random_state=g, **kw).fit(X, X[:, 1], Z, budget=budget)
    assert budget.ledger == () and g.bit_generator.state == state


def test_default_eta_balances_bias_and_laplace_noise():
    # delta = 0: Laplace noise multiplier c = sqrt(2 m) / eps; eta = sqrt(2 c L p / n) in [1e-3, 10]
    n, p, eps, L, m = 10_000, 5, 0.5, 2.0, 3
    c = math.sqrt(2 * m) / eps
    assert default_eta(n, p, eps, 0.0, lipschitz=L, m=m) == pytest.approx(math.sqrt(2 * c * L * p / n), rel=1e-14)
    assert default_eta(1, 10**6, eps, 0.0) == 10.0  # clipped above
    assert default_eta(10**400, 1, eps, 0.0) == 1e-3  # clipped below (n beyond a double)
    with pytest.raises(ValueError):
        default_eta(n, 0, eps, 0.0)
