"""Learning with public unlabelled data (dpfast.public, issue 6): speed and utility.

Timing tests (pytest-benchmark): the native exact oracles, RRSPM, and the regularization
learner against one non-private fit of the same data (the issue's "small multiple of one
non-private fit").  Utility tables (accuracy vs dpfast's private-only AMP and the non-private
fit, thresholds with and without public data) are printed by

    DPFAST_BENCH_FULL=1 python -m benchmarks.bench_public

and recorded in ``benchmarks/results/public.md``.  Smoke sizes in CI.
"""
from __future__ import annotations

import math
import sys
import time

import numpy as np
import pytest

from dpfast._solver import minimize_glm
from dpfast.public import (
    PublicDataClassifier,
    regularization_learner,
    rrspm,
    stump_oracle,
    threshold_oracle,
)

from _bench import size  # by module name (tests/test_tooling.py)

N_THR = size(10_000, 1_000_000)
N_LIN = size(5_000, 200_000)
D_LIN = 20


def halfspace(rng, n, d=D_LIN, shift=0.0, noise=0.1):
    """x ~ N(shift * e_1, I); y = sign(<w*, x>) flipped with probability ``noise``; w* fixed."""
    w = np.linspace(1.0, -1.0, d) / math.sqrt(d / 3)
    X = rng.normal(size=(n, d))
    X[:, 0] += shift
    y = (X @ w > 0).astype(np.int64)
    y[rng.random(n) < noise] ^= 1
    return X, y


@pytest.fixture(scope="module")
def thr_data():
    rng = np.random.default_rng(0)
    x = rng.random(N_THR)
    y = (x > 0.37).astype(np.int64)
    return x, y, rng.random(200)


@pytest.fixture(scope="module")
def lin_data():
    rng = np.random.default_rng(1)
    X, y = halfspace(rng, N_LIN)
    Z, _ = halfspace(rng, max(D_LIN + 1, N_LIN // 50))
    return X, 2.0 * y - 1.0, Z


@pytest.mark.benchmark(group="public-oracle")
def test_threshold_oracle(benchmark, thr_data):
    x, y, _ = thr_data
    h = benchmark(threshold_oracle, x, y)
    assert 0.36 < h.threshold < 0.38


@pytest.mark.benchmark(group="public-oracle")
def test_stump_oracle_10_features(benchmark, thr_data):
    x, y, _ = thr_data
    X = np.column_stack([x] + [np.random.default_rng(100 + k).random(x.size) for k in range(9)])
    h = benchmark(stump_oracle, X, y)
    assert h.feature == 0


@pytest.mark.benchmark(group="public-oracle")
def test_stump_peer_sklearn_depth1_tree(benchmark, thr_data):
    """Timing reference only: a depth-1 scikit-learn tree optimises Gini impurity, not the 0-1 loss."""
    tree = pytest.importorskip("sklearn.tree")
    x, y, _ = thr_data
    X = np.column_stack([x] + [np.random.default_rng(100 + k).random(x.size) for k in range(9)])
    clf = benchmark(tree.DecisionTreeClassifier(max_depth=1).fit, X, y)
    assert clf.tree_.feature[0] == 0


@pytest.mark.benchmark(group="public-rrspm")
def test_rrspm_thresholds(benchmark, thr_data):
    x, y, z = thr_data
    res = benchmark(rrspm, x, y, z[:50], epsilon=1.0, oracle="threshold", rng=0)
    assert res.oracle_calls == 2


@pytest.mark.benchmark(group="public-linear")
def test_nonprivate_fit(benchmark, lin_data):
    X, y, _ = lin_data
    benchmark(minimize_glm, X, y, "logistic", alpha=1e-4 * len(y), tol=1e-6)


@pytest.mark.benchmark(group="public-linear")
def test_regularization_learner(benchmark, lin_data):
    X, y, Z = lin_data
    res = benchmark(regularization_learner, X, y, Z, epsilon=1.0, delta=1e-5, rng=0)
    assert res.oracle_calls == 2


# ---------------------------------------------------------------------------- utility tables
def _nonprivate(X, y01):
    Xa = np.hstack([X, np.ones((len(X), 1))])
    res = minimize_glm(Xa, 2.0 * y01 - 1.0, "logistic", alpha=1e-4 * len(y01), tol=1e-8)
    return lambda T: (np.hstack([T, np.ones((len(T), 1))]) @ res.coef > 0).astype(np.int64)


def _amp(X, y01, eps, delta, seed):
    from dpfast.linear_model import LogisticRegression

    Xn = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)  # per-row map: ||x|| <= 1
    clf = LogisticRegression(epsilon=eps, delta=delta, random_state=seed).fit(Xn, y01)
    return lambda T: clf.predict(T / np.maximum(np.linalg.norm(T, axis=1, keepdims=True), 1e-12))


def _mean_sd(v):
    v = np.asarray(v, float)
    return f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0.0:.3f}"


def utility_table(name, Xp, yp, Xt, yt, publics, eps_list, delta, seeds, out):
    """Accuracy (mean ± sd over seeds) of every learner; private rows Xp, public samples in ``publics``."""
    n = len(yp)
    t0 = time.perf_counter()
    npf = _nonprivate(Xp, yp)
    t_np = time.perf_counter() - t0
    acc_np = np.mean(npf(Xt) == yt)
    out.append(f"\n### {name}: n = {n} private rows, {Xp.shape[1]} features, test {len(yt)} rows; delta = {delta:g}\n")
    out.append(f"Non-private logistic regression (all private rows, labels): accuracy {acc_np:.3f}; fit {t_np:.2f} s.  "
               f"Majority class: {max(np.mean(yt), 1 - np.mean(yt)):.3f}.\n")
    out.append("| eps | AMP (private only) | " + " | ".join(f"public-reg {k}" for k in publics) + " | RRSPM stumps (" + list(publics)[0] + ") |")
    out.append("|---|---|" + "---|" * len(publics) + "---|")
    fit_times = []
    for eps in eps_list:
        row = [f"{eps:g}"]
        try:
            row.append(_mean_sd([np.mean(_amp(Xp, yp, eps, delta, s)(Xt) == yt) for s in seeds]))
        except Exception as exc:  # noqa: BLE001 -- report, do not hide
            row.append(f"error: {type(exc).__name__}")
        for label, Z in publics.items():
            accs = []
            for s in seeds:
                clf = PublicDataClassifier(eps, delta, random_state=s, neighbours="add_remove", n_scale=float(n))
                t0 = time.perf_counter()
                clf.fit(Xp, yp, Z)
                fit_times.append(time.perf_counter() - t0)
                accs.append(clf.score(Xt, yt))
            row.append(_mean_sd(accs))
        Z0 = list(publics.values())[0]
        row.append(_mean_sd([
            PublicDataClassifier(eps, method="rrspm", random_state=s, neighbours="add_remove", n_scale=float(n)).fit(Xp, yp, Z0).score(Xt, yt)
            for s in seeds
        ]))
        out.append("| " + " | ".join(row) + " |")
    out.append(f"\npublic-reg fit time: median {np.median(fit_times):.2f} s = {np.median(fit_times) / t_np:.1f}x one "
               "non-private fit; 2 oracle calls per fit (one GLM solve, one least squares).\n")


def threshold_table(out, seeds):
    from dpfast.mechanisms.selection import exponential_mechanism

    out.append("\n### Thresholds 1[x > t] on [0, 1], 10% label noise, eps = 1 (pure DP, replace-one)\n")
    out.append("Excess test error over the Bayes error 0.1 (mean over seeds).  RRSPM gets 200 public unlabelled "
               "points from the private distribution and uses its default subset "
               "(`rrspm_public_size`); the private-only baseline is the exponential mechanism over a "
               "data-independent grid of 1001 thresholds on [0, 1] (utility = -errors, sensitivity 1).\n")
    out.append("| private x distribution | n | m used | RRSPM | grid exponential mechanism | non-private ERM |")
    out.append("|---|---|---|---|---|---|")
    grid = np.linspace(0, 1, 1001)
    for dist in ("uniform [0,1]", "concentrated: 0.5 + 1e-6 U[0,1]"):
        for n in (1_000, 10_000, 100_000):
            r_err, e_err, np_err, used = [], [], [], 0
            for s in seeds:
                rng = np.random.default_rng(s)
                draw = (lambda k: rng.random(k)) if dist.startswith("uniform") else (lambda k: 0.5 + 1e-6 * rng.random(k))
                t_star = 0.37 if dist.startswith("uniform") else 0.5 + 0.37e-6
                x = draw(n)
                y = (x > t_star).astype(np.int64)
                y[rng.random(n) < 0.1] ^= 1
                z = draw(200)
                xt = draw(50_000)
                yt = (xt > t_star)
                def excess(pred):  # E[err] = 0.1 + 0.8 P(pred != f*) under 10% label noise
                    return 0.8 * np.mean(pred != yt)
                clf = PublicDataClassifier(1.0, method="rrspm", hypothesis="threshold", random_state=s).fit(x[:, None], y, z[:, None])
                used = clf.n_public_used_
                r_err.append(excess(clf.predict(xt[:, None]) == 1))
                xs, ys = np.sort(x), y[np.argsort(x)]
                ones_le = np.concatenate([[0], np.cumsum(ys)])[np.searchsorted(xs, grid, side="right")]
                zeros_gt = (n - ys.sum()) - (np.searchsorted(xs, grid, side="right") - ones_le)
                k = exponential_mechanism(-(ones_le + zeros_gt).astype(float), 1.0, 1.0, rng=rng)
                e_err.append(excess(xt > grid[int(k)]))
                np_err.append(excess(threshold_oracle(x, y).predict(xt) == 1))
            out.append(f"| {dist} | {n} | {used} | {np.mean(r_err):.4f} | {np.mean(e_err):.4f} | {np.mean(np_err):.4f} |")


def calibration_table(out):
    from dpfast.public import perturb_noise_scale, public_geometry, regularization_stability

    out.append("\n### Calibration: dpfast's exact Perturb vs the paper's constants (one linear instance)\n")
    out.append("d = 20 standard normal features + intercept, m = 1000 public rows, eta = 0.05, replace-one, "
               "eps = 1, delta = 1e-5.  rho = bound on ||f_bar(D) - f_bar(D')||_m; gamma = Perturb noise.\n")
    out.append("| n | rho: paper Lemma 2 (2/sqrt(eta n)) | rho: dpfast (module docstring) | gamma: dpfast (analytic Gaussian, dpfast rho) |")
    out.append("|---|---|---|---|")
    rng = np.random.default_rng(0)
    Z = np.hstack([rng.normal(size=(1000, 20)), np.ones((1000, 1))])
    geo = public_geometry(Z, 0.05)
    for n in (10_000, 100_000, 1_000_000):
        rho_paper = 2 / math.sqrt(0.05 * n)
        rho = regularization_stability(geo, n, 1.0)["rho"]
        g = perturb_noise_scale(1000, rho, 1.0, 1e-5, "gaussian")[0]
        out.append(f"| {n} | {rho_paper:.3g} | {rho:.3g} | {g:.3g} |")


def main() -> None:
    full = "--quick" not in sys.argv
    seeds = list(range(3)) if full else [0]
    out = ["# dpfast.public results (generated by `python -m benchmarks.bench_public`)"]
    calibration_table(out)
    threshold_table(out, seeds)
    # synthetic halfspace
    rng = np.random.default_rng(10)
    n = 50_000 if full else 5_000
    Xp, yp = halfspace(rng, n)
    Xt, yt = halfspace(rng, 20_000)
    publics = {
        "1%": halfspace(rng, n // 100)[0],
        "5%": halfspace(rng, n // 20)[0],
        "5% shifted (+1 sd on x_1)": halfspace(rng, n // 20, shift=1.0)[0],
    }
    utility_table("Synthetic halfspace (d = 20, 10% label noise)", Xp, yp, Xt, yt, publics, [0.1, 0.5, 1.0], 1e-5, seeds, out)
    # Adult
    from dpfast.datasets import load_adult

    X, y, Xt, yt, names = load_adult(return_feature_names=True)
    X, y = np.array(X), np.array(y)
    perm = np.random.default_rng(20).permutation(len(y))
    male = np.array([nm == "sex=Male" for nm in names])
    is_male = X[:, male].ravel() > 0
    pub = {}
    for frac in (0.01, 0.05):
        k = int(frac * len(y))
        pub[f"{int(frac * 100)}%"] = perm[:k]
    # shifted public sample: 5% of rows drawn with men 4x as likely as women (sigma-smooth, sigma ~ 0.3)
    w = np.where(is_male, 4.0, 1.0)
    k5 = int(0.05 * len(y))
    shifted = np.random.default_rng(21).choice(len(y), size=k5, replace=False, p=w / w.sum())
    pub["5% shifted (men 4x)"] = shifted
    used = np.zeros(len(y), bool)
    for idx in pub.values():
        used[idx] = True
    priv = ~used  # public rows are never also private
    if not full:
        priv &= np.arange(len(y)) < 8000
    utility_table("Adult (public rows removed from the private set)", X[priv], y[priv], np.array(Xt), np.array(yt),
                  {k: X[v] for k, v in pub.items()}, [0.1, 0.5, 1.0], 1e-5, seeds, out)
    print("\n".join(out))


if __name__ == "__main__":
    main()
