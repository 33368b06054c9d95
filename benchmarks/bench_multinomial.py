"""Multinomial private logistic regression vs one-vs-rest, diffprivlib and scikit-learn on digits
(issue 12 item 3).

scikit-learn's ``load_digits`` (1797 x 64, 10 classes), rows scaled to unit l2 norm, a stratified
70/30 split (``random_state=0``).  Test accuracy over 10 seeds (mean +- sd) at epsilon in
{0.5, 1, 2, 4}, delta = 1e-5, every private model with its *default* (data-independent)
hyperparameters:

* dpfast ``LogisticRegression(multi_class="multinomial", method="output")``: one softmax model,
  Gaussian output perturbation (sensitivity (sqrt(2) R + 2 tau)/lambda), one release;
* dpfast one-vs-rest (``multi_class="ovr"``) with each method, the 10 models calibrated together;
* diffprivlib's ``LogisticRegression(epsilon, data_norm=1)`` (pure epsilon-DP, objective
  perturbation one-vs-rest), run in a separate interpreter because it needs scikit-learn < 1.6
  (``DPFAST_DIFFPRIVLIB_PYTHON``, default ``/tmp/dplvenv/bin/python``, a venv with
  ``scikit-learn==1.5.2 diffprivlib``); its default C = 1 and, for reference, the best C of
  {0.001, 0.01, 0.1, 1, 10} chosen on the *test* set (which flatters it);
* non-private scikit-learn ``LogisticRegression()`` (multinomial lbfgs, C = 1).

A setting whose default calibration is infeasible (Algorithm 1 cannot reach a small epsilon
with 10 one-vs-rest models) is reported as such.  Then one fit is timed side by side with
scikit-learn's lbfgs on the same (non-private) objective, on digits and on a synthetic
200,000 x 64, 10-class problem.  Writes ``benchmarks/results/multinomial.md``.

    python benchmarks/bench_multinomial.py      # ~2 min on 2 cores
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from dpfast.linear_model import LogisticRegression

EPSILONS = (0.5, 1.0, 2.0, 4.0)
SEEDS = range(10)
DELTA = 1e-5
CLASSES = np.arange(10)
MODELS = {
    "dpfast multinomial (output)": dict(method="output", multi_class="multinomial"),
    "dpfast OvR output": dict(method="output"),
    "dpfast OvR amp": dict(method="amp"),
    "dpfast OvR objective": dict(method="objective"),
}
DPL_C = (0.001, 0.01, 0.1, 1.0, 10.0)

_DPL_SCRIPT = r"""
import json, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
import diffprivlib
from diffprivlib.models import LogisticRegression
d = np.load(sys.argv[1])
eps_list, seeds, Cs = json.loads(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
out = {"version": diffprivlib.__version__, "acc": {}}
for C in Cs:
    for eps in eps_list:
        out["acc"][f"{C}|{eps}"] = [
            LogisticRegression(epsilon=eps, data_norm=1.0, C=C, random_state=s).fit(d["Xtr"], d["ytr"]).score(
                d["Xte"], d["yte"]) for s in seeds]
print(json.dumps(out))
"""


def digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = X / np.linalg.norm(X, axis=1, keepdims=True)  # unit rows (public per-row map)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def private_accuracy(kw, eps, Xtr, ytr, Xte, yte, seeds=SEEDS):
    """Accuracies over ``seeds``, or the ValueError message of an infeasible calibration."""
    try:
        return np.array([LogisticRegression(eps, DELTA, classes=CLASSES, random_state=s, **kw).fit(Xtr, ytr)
                         .score(Xte, yte) for s in seeds])
    except ValueError as err:
        return str(err).split(";")[0]


def diffprivlib_accuracy(Xtr, ytr, Xte, yte, epsilons=EPSILONS, seeds=SEEDS, Cs=DPL_C):
    """{(C, eps): accuracies} and the version, or (None, reason) when diffprivlib cannot run."""
    py = os.environ.get("DPFAST_DIFFPRIVLIB_PYTHON", "/tmp/dplvenv/bin/python")
    if not Path(py).exists():
        return None, f"no interpreter with diffprivlib at {py}"
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "d.npz"
        np.savez(f, Xtr=Xtr, ytr=ytr, Xte=Xte, yte=yte)
        r = subprocess.run([py, "-c", _DPL_SCRIPT, str(f), json.dumps(list(epsilons)), json.dumps(list(seeds)),
                            json.dumps(list(Cs))], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
    out = json.loads(r.stdout)
    acc = {(float(k.split("|")[0]), float(k.split("|")[1])): np.array(v) for k, v in out["acc"].items()}
    return acc, out["version"]


def time_fit(X, y, reps=3):
    """One private multinomial fit (epsilon 1; best of ``reps``) and scikit-learn's lbfgs on the same
    non-private objective (lambda of the private fit, bias as a penalised feature), with its default
    tol and with tol = tau / (n sqrt(d K)) (its stopping rule is on the max-norm of the mean
    gradient, so this one certifies ||grad F||_2 <= tau on the sum, as dpfast does).  Returns
    {label: (seconds, iterations, ||grad F||_2 at the point)}."""
    from sklearn.linear_model import LogisticRegression as SkLR

    from dpfast.linear_model._multinomial import multinomial_oracle

    from _bench import best_time

    K = int(np.unique(y).size)
    t_dp, clf = best_time(lambda: LogisticRegression(1.0, DELTA, method="output", multi_class="multinomial",
                                                     classes=np.arange(K), random_state=0).fit(X, y), reps)
    Xb = np.hstack([X, np.ones((X.shape[0], 1))])
    grad = multinomial_oracle(Xb, y, K, alpha=clf.lambda_)
    out = {"dpfast private fit": (t_dp, int(clf.n_iter_[0]), float(clf.grad_norm_[0]))}
    tau = clf.calibration_.tau
    for label, tol in (("sklearn lbfgs, tol 1e-4 (default)", 1e-4),
                       ("sklearn lbfgs, tol tau/(n sqrt(dK))", tau / (X.shape[0] * np.sqrt(Xb.shape[1] * K)))):
        t, sk = best_time(lambda: SkLR(C=1.0 / clf.lambda_, fit_intercept=False, tol=tol, max_iter=10000).fit(Xb, y),
                          reps)
        out[label] = (t, int(sk.n_iter_[0]), float(np.linalg.norm(grad(sk.coef_.T.ravel())[1])))
    return out


def synthetic(n=200_000, d=64, K=10, seed=0):
    g = np.random.default_rng(seed)
    centers = g.normal(size=(K, d))
    y = g.integers(0, K, size=n)
    X = centers[y] + 2.0 * g.normal(size=(n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True), y


def fmt(a):
    if isinstance(a, str):  # the calibration's ValueError (raised before any data is read)
        return "infeasible at the defaults" if "cannot reach" in a else a
    return f"{100 * a.mean():.1f} +- {100 * a.std(ddof=1):.1f}"


def main(out: Path) -> None:
    warnings.simplefilter("ignore")
    Xtr, Xte, ytr, yte = digits()
    t0 = time.perf_counter()
    rows = {name: {eps: private_accuracy(kw, eps, Xtr, ytr, Xte, yte) for eps in EPSILONS}
            for name, kw in MODELS.items()}
    dpl, dpl_info = diffprivlib_accuracy(Xtr, ytr, Xte, yte)
    from sklearn.linear_model import LogisticRegression as SkLR

    nonpriv = SkLR(max_iter=1000).fit(Xtr, ytr).score(Xte, yte)
    wall = time.perf_counter() - t0
    import sklearn

    lines = [
        "## Multinomial private logistic regression on digits (issue 12 item 3)",
        "",
        f"`python benchmarks/bench_multinomial.py` ({platform.machine()}, {os.cpu_count()} CPUs, "
        f"scikit-learn {sklearn.__version__}; accuracy part {wall:.0f} s).  load_digits, unit rows, stratified "
        f"70/30 split (1257 / 540), test accuracy in %, {len(SEEDS)} seeds, mean +- sd, delta = {DELTA:g} "
        "(diffprivlib: pure epsilon-DP).  Default hyperparameters everywhere.",
        "",
        "| model | " + " | ".join(f"eps = {e:g}" for e in EPSILONS) + " |",
        "|---|" + "---|" * len(EPSILONS),
    ]
    for name, r in rows.items():
        lines.append(f"| {name} | " + " | ".join(fmt(r[e]) for e in EPSILONS) + " |")
    if dpl is None:
        lines.append(f"| diffprivlib | not run: {dpl_info} |" + " |" * (len(EPSILONS) - 1))
    else:
        lines.append(f"| diffprivlib {dpl_info} (C = 1) | " + " | ".join(fmt(dpl[(1.0, e)]) for e in EPSILONS) + " |")
        best = [max(DPL_C, key=lambda C: dpl[(C, e)].mean()) for e in EPSILONS]
        lines.append(f"| diffprivlib {dpl_info} (best C on test) | " + " | ".join(
            f"{fmt(dpl[(C, e)])} (C={C:g})" for C, e in zip(best, EPSILONS)) + " |")
    lines.append(f"| scikit-learn, non-private | {100 * nonpriv:.1f} (all epsilon) |" + " |" * (len(EPSILONS) - 1))
    lines += ["", "One fit, best of 3: the private multinomial fit at epsilon 1 (certified ||grad F||_2 <= tau = 0.01 "
              "on the sum objective, then noise) and scikit-learn's lbfgs on the same objective and lambda "
              f"(load average before: {os.getloadavg()[0]:.1f}):", "",
              "| data | fit | time | L-BFGS iterations | 2-norm of grad F at its point |", "|---|---|---|---|---|"]
    for label, (X, y) in (("digits train 1257 x 64, K = 10", (Xtr, ytr)),
                          ("synthetic 200,000 x 64, K = 10", synthetic())):
        for fit, (t, it, gn) in time_fit(X, y).items():
            lines.append(f"| {label} | {fit} | {1e3 * t:.1f} ms | {it} | {gn:.3g} |")
    lines.append("")
    out.write_text("\n".join(lines))
    print("\n".join(lines))


def test_bench_multinomial_smoke(benchmark):
    # Smoke: one seed, one epsilon, 300 training rows (figures from `python benchmarks/bench_multinomial.py`).
    warnings.simplefilter("ignore")
    Xtr, Xte, ytr, yte = digits()
    Xtr, ytr = Xtr[:300], ytr[:300]

    def run():
        m = private_accuracy(MODELS["dpfast multinomial (output)"], 2.0, Xtr, ytr, Xte, yte, seeds=[0])
        o = private_accuracy(MODELS["dpfast OvR output"], 2.0, Xtr, ytr, Xte, yte, seeds=[0])
        return m, o

    m, o = benchmark.pedantic(run, rounds=1, iterations=1)
    assert m.shape == (1,) and 0.0 <= m[0] <= 1.0 and 0.0 <= o[0] <= 1.0
    clf = LogisticRegression(2.0, DELTA, method="output", multi_class="multinomial", classes=CLASSES,
                             random_state=0).fit(Xtr, ytr)
    assert type(clf.event_).__name__ == "Gaussian" and clf.coef_.shape == (10, 64)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "results" / "multinomial.md")
