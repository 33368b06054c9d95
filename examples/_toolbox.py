"""The privacy-utility experiments of the toolbox gallery (``plot_toolbox_*.py``) and of
``benchmarks/bench_toolbox_curves.py``, which runs them for diffprivlib and writes
``benchmarks/results/toolbox_curves.csv`` (one row per family, epsilon and seed).

Each experiment is ``run(family, lib, epsilon, seed) -> float`` with ``lib`` the ``dpfast`` or
the ``diffprivlib`` module: the same data, split, public bounds and metric for both libraries.
The bounds are the data's known ranges (scikit-learn's bundled data sets, scaled as stated) or,
for breast cancer and digits, the training split's per-feature min / max treated as public (as in
diffprivlib's examples and ``benchmarks/bench_trees.py``), chosen before looking at the outcome; in
a real release they must come from public knowledge.

The gallery plots dpfast's curve computed on the fly and diffprivlib's computed on the fly when
``import diffprivlib`` works, else read from the committed CSV (the caption says which).
"""
from __future__ import annotations

import csv
import functools
import math
import os
import warnings

import numpy as np

EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
DELTA = 1e-5
FAMILIES = ("naive_bayes", "kmeans", "pca", "ssp", "tools_mean", "tools_var", "forest", "tree")
METRIC = {"naive_bayes": "test accuracy (breast cancer)",
          "kmeans": "inertia / non-private inertia (blobs)",
          "pca": "fraction of the top-2 variance captured (wine)",
          "ssp": "test MSE (diabetes, scaled)",
          "tools_mean": "|private mean - mean| (n = 2000, uniform)",
          "tools_var": "|private var - var| (n = 2000, uniform)",
          "forest": "test accuracy (digits, 10 classes)",
          "tree": "test accuracy (digits, 10 classes)"}
CSV = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "benchmarks", "results",
                   "toolbox_curves.csv")


# ----------------------------------------------------------------------------- data
def _breast_cancer(seed):
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    return Xtr, Xte, ytr, yte, Xtr.min(0), Xtr.max(0)


@functools.lru_cache(maxsize=None)
def _digits():
    """Digits (8 x 8 images, 64 features, 10 classes), the stratified 70/30 split of
    ``benchmarks/bench_trees.py``; bounds: the training set's per-feature min / max, a constant
    feature widened to (lo, lo + 1) -- bench_trees.py's public bounds, the same for both libraries."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    lo, hi = Xtr.min(0), Xtr.max(0)
    return Xtr, Xte, ytr, yte, lo, np.where(hi > lo, hi, lo + 1.0)


def _blobs():
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(n_samples=3000, centers=4, n_features=2, cluster_std=0.8, center_box=(-8, 8), random_state=0)
    return X, (-12.0, 12.0)


def _wine():
    from sklearn.datasets import load_wine

    X, _ = load_wine(return_X_y=True)
    return (X - X.min(0)) / (X.max(0) - X.min(0))  # min-max scaled: bounds (0, 1)


def _diabetes(seed):
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    X /= np.linalg.norm(X, axis=1).max()  # ||x|| <= 1
    y = (y - y.mean()) / np.abs(y - y.mean()).max()  # |y| <= 1
    perm = np.random.default_rng(seed).permutation(len(X))
    cut = int(0.8 * len(X))
    return X[perm[:cut]], X[perm[cut:]], y[perm[:cut]], y[perm[cut:]]


def _uniform():
    return np.random.default_rng(12345).uniform(size=2000)


@functools.lru_cache(maxsize=None)
def _kmeans_base() -> float:
    from sklearn.cluster import KMeans as SkKMeans

    return float(SkKMeans(4, n_init=10, random_state=0).fit(_blobs()[0]).inertia_)


def _inertia(X, C):
    d2 = ((X[:, None, :] - C[None, :, :]) ** 2).sum(-1)
    return float(d2.min(1).sum())


def _captured(components, X):
    C = np.cov(X, rowvar=False)
    w = np.linalg.eigvalsh(C)[::-1]
    P = np.asarray(components).T
    P, _ = np.linalg.qr(P)  # an orthonormal basis of the released subspace
    return float(np.trace(P.T @ C @ P) / w[: P.shape[1]].sum())


# ----------------------------------------------------------------------------- experiments
def run(family: str, lib, eps: float, seed: int) -> float:
    """One point of one curve (see the module docstring)."""
    dpl = lib.__name__ == "diffprivlib"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if family == "naive_bayes":
            Xtr, Xte, ytr, yte, lo, hi = _breast_cancer(seed)
            if dpl:
                m = lib.models.GaussianNB(epsilon=eps, bounds=(lo, hi), random_state=seed)
            else:
                m = lib.naive_bayes.GaussianNB(eps, bounds=dict(enumerate(zip(lo, hi))), classes=[0, 1],
                                               random_state=seed)
            return float(m.fit(Xtr, ytr).score(Xte, yte))
        if family == "kmeans":
            X, (lo, hi) = _blobs()
            base = _kmeans_base()
            if dpl:
                m = lib.models.KMeans(4, epsilon=eps, bounds=(np.full(2, lo), np.full(2, hi)), random_state=seed)
            else:
                m = lib.cluster.KMeans(4, eps, bounds=(lo, hi), random_state=seed)
            return _inertia(X, m.fit(X).cluster_centers_) / base
        if family == "pca":
            X = _wine()
            R = math.sqrt(X.shape[1]) / 2
            if dpl:
                m = lib.models.PCA(2, epsilon=eps, bounds=(0.0, 1.0), data_norm=R, random_state=seed)
            else:
                m = lib.decomposition.PCA(2, epsilon=eps, delta=DELTA, bounds=(0.0, 1.0), norm_bound=R,
                                          random_state=seed)
            return _captured(m.fit(X).components_, X)
        if family == "ssp":
            Xtr, Xte, ytr, yte = _diabetes(seed)
            if dpl:
                m = lib.models.LinearRegression(epsilon=eps, bounds_X=(Xtr.min(0), Xtr.max(0)), bounds_y=(-1, 1),
                                                random_state=seed)
            else:
                m = lib.linear_model.LinearRegression(method="ssp", epsilon=eps, delta=DELTA, norm_bound=1.0,
                                                      label_bound=1.0, random_state=seed)
            return float(np.mean((m.fit(Xtr, ytr).predict(Xte) - yte) ** 2))
        if family in ("tools_mean", "tools_var"):
            x = _uniform()
            f = family.split("_")[1]
            if dpl:
                got = getattr(lib.tools, f)(x, epsilon=eps, bounds=(0.0, 1.0), random_state=seed)
            else:
                got = getattr(lib.tools, f)(x, eps, (0.0, 1.0), rng=seed)
            return abs(float(got) - float(getattr(np, f)(x)))
        if family in ("forest", "tree"):
            # both libraries at their defaults (dpfast: n_estimators="auto", leaf_mechanism="auto",
            # max_depth=5; diffprivlib: n_estimators=10, max_depth=5), the same public bounds and classes
            Xtr, Xte, ytr, yte, lo, hi = _digits()
            classes = list(range(10))
            if dpl:
                est = lib.models.RandomForestClassifier if family == "forest" else lib.models.DecisionTreeClassifier
                m = est(epsilon=eps, bounds=(lo, hi), classes=classes, random_state=seed)
            else:
                est = lib.ensemble.RandomForestClassifier if family == "forest" else lib.tree.DecisionTreeClassifier
                m = est(eps, dict(enumerate(zip(lo, hi))), classes=classes, random_state=seed)
            return float(m.fit(Xtr, ytr).score(Xte, yte))
    raise ValueError(f"unknown family {family!r}")


def forest_sizes(seeds) -> list:
    """The forest size dpfast's default ``n_estimators="auto"`` picked on the forest experiment:
    per epsilon, the median of ``n_estimators_`` over ``seeds`` and the leaf mechanisms chosen."""
    import dpfast

    Xtr, _, ytr, _, lo, hi = _digits()
    out = []
    for eps in EPSILONS:
        fits = [dpfast.ensemble.RandomForestClassifier(eps, dict(enumerate(zip(lo, hi))), classes=list(range(10)),
                                                       random_state=s).fit(Xtr, ytr) for s in seeds]
        out.append((float(np.median([m.n_estimators_ for m in fits])), sorted({m.leaf_mechanism_ for m in fits})))
    return out


def nonprivate_forest_score() -> float:
    """scikit-learn's forest at dpfast's default size cap and depth (100 trees of depth 5), no privacy."""
    from sklearn.ensemble import RandomForestClassifier

    Xtr, Xte, ytr, yte, _, _ = _digits()
    return float(RandomForestClassifier(100, max_depth=5, random_state=0).fit(Xtr, ytr).score(Xte, yte))


def curve(family: str, lib, seeds) -> np.ndarray:
    """(len(EPSILONS), len(seeds)) values."""
    return np.array([[run(family, lib, e, s) for s in seeds] for e in EPSILONS])


def diffprivlib_curve(family: str, seeds):
    """(values, source): diffprivlib's curve computed now when ``import diffprivlib`` works,
    else the committed CSV's (``source`` says which, for the caption)."""
    try:
        import diffprivlib  # noqa: F401
        import diffprivlib.models  # noqa: F401
        import diffprivlib.tools  # noqa: F401
    except Exception:  # not installed, or not importable on this scikit-learn
        return read_csv(family), "the committed benchmarks/results/toolbox_curves.csv (diffprivlib 0.6.6, 10 seeds)"
    return curve(family, diffprivlib, seeds), f"diffprivlib {diffprivlib.__version__}, computed now"


def read_csv(family: str) -> np.ndarray:
    rows = {}
    with open(CSV, newline="") as fh:
        for r in csv.DictReader(fh):
            if r["family"] == family:
                rows.setdefault(float(r["epsilon"]), []).append(float(r["value"]))
    return np.array([rows[e] for e in EPSILONS])


def plot(ax, family, ours, theirs, source, *, log_y=False, baseline=None, baseline_label=None):
    """dpfast's and diffprivlib's curves, median with the 25-75 % band over seeds."""
    for vals, label, marker in ((ours, "dpfast", "o"), (theirs, "diffprivlib", "s")):
        med = np.median(vals, axis=1)
        lo, hi = np.percentile(vals, 25, axis=1), np.percentile(vals, 75, axis=1)
        ax.plot(EPSILONS, med, marker=marker, label=label)
        ax.fill_between(EPSILONS, lo, hi, alpha=0.2)
    if baseline is not None:
        ax.axhline(baseline, color="gray", linestyle="--", label=baseline_label)
    ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(r"$\varepsilon$")
    ax.set_ylabel(METRIC[family])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"diffprivlib: {source}", fontsize=7)


def compare(ax, family: str, seeds, **plot_kw):
    """dpfast's curve (computed now) and diffprivlib's (:func:`diffprivlib_curve`) of ``family``,
    drawn on ``ax`` by :func:`plot`: (ours, theirs, source)."""
    import dpfast

    ours = curve(family, dpfast, seeds)
    theirs, source = diffprivlib_curve(family, seeds)
    plot(ax, family, ours, theirs, source, **plot_kw)
    return ours, theirs, source


def one_panel(family: str, title: str, seeds, **plot_kw):
    """The figure of a one-panel toolbox example (:func:`compare` on one axis, ``title`` above),
    written as ``toolbox_<family>`` by ``_common.save``: (ours, theirs)."""
    import matplotlib.pyplot as plt

    from _common import save

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ours, theirs, _ = compare(ax, family, seeds, **plot_kw)
    fig.suptitle(title)
    fig.tight_layout()
    save(fig, "toolbox_" + family)
    return ours, theirs


def print_medians(ours, theirs, fmt: str = ".3f", fmt_theirs: str | None = None, label: str = ""):
    """One line per epsilon: the median over seeds of dpfast's and diffprivlib's values."""
    for e, a, b in zip(EPSILONS, np.median(ours, axis=1), np.median(theirs, axis=1)):
        print(f"{label}epsilon {e:5.1f}: dpfast {a:{fmt}}  diffprivlib {b:{fmt_theirs or fmt}}")
