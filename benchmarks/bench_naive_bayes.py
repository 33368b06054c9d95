"""dpfast.naive_bayes.GaussianNB vs diffprivlib's GaussianNB (0.6.6) and scikit-learn's.

Accuracy: test accuracy at epsilon 0.1, 1, 10 over 10 seeds on UCI Adult (dpfast.datasets,
official split), breast-cancer, digits and wine (scikit-learn's, a fixed stratified 70/30
split).  Both private models get the same public bounds: the training set's per-feature min/max
(treated as public, as in diffprivlib's examples).  On Adult dpfast is run twice: with its 102
one-hot columns declared ``binary_features`` (public schema: the columns named ``attr=value``),
and with every feature Gaussian ("gauss-only", the model diffprivlib fits).  Speed: fit at 10^6 rows x 10 features, 2 classes, median of 5.

    PYTHONPATH=. DPFAST_NUM_THREADS=1 python benchmarks/bench_naive_bayes.py [--dpl /tmp/dpl_site]

diffprivlib is appended to sys.path (after the venv's site-packages) from --dpl.
"""
import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB as SkNB

from dpfast.datasets import load_adult
from dpfast.naive_bayes import GaussianNB

from _peers import import_diffprivlib

p = argparse.ArgumentParser()
p.add_argument("--dpl", default="/tmp/dpl_site")
p.add_argument("--seeds", type=int, default=10)
p.add_argument("--rows", type=int, default=1_000_000)
args = p.parse_args()
diffprivlib = import_diffprivlib(args.dpl)
DplNB = diffprivlib.models.GaussianNB

warnings.filterwarnings("ignore")


def datasets():
    Xtr, ytr, Xte, yte, names = load_adult(normalize=False, return_feature_names=True)
    yield "adult", Xtr, Xte, ytr, yte, [j for j, nm in enumerate(names) if "=" in nm]
    for name, loader in (("breast-cancer", load_breast_cancer), ("digits", load_digits), ("wine", load_wine)):
        X, y = loader(return_X_y=True)
        yield (name, *train_test_split(X, y, test_size=0.3, random_state=0, stratify=y), None)


print(f"diffprivlib {diffprivlib.__version__}")
print("accuracy (mean +- sd over seeds): data, epsilon, dpfast, [dpfast gauss-only,] diffprivlib, sklearn")
for name, Xtr, Xte, ytr, yte, binary in datasets():
    lo, hi = Xtr.min(0), Xtr.max(0)
    hi = np.where(hi > lo, hi, lo + 1.0)
    classes = np.unique(ytr)  # public schema of these benchmarks
    sk = SkNB().fit(Xtr, ytr).score(Xte, yte)
    for eps in (0.1, 1.0, 10.0):
        a, g, b = [], [], []
        for s in range(args.seeds):
            a.append(GaussianNB(eps, dict(enumerate(zip(lo, hi))), classes=classes, binary_features=binary,
                                random_state=s).fit(Xtr, ytr).score(Xte, yte))
            if binary is not None:
                g.append(GaussianNB(eps, dict(enumerate(zip(lo, hi))), classes=classes, random_state=s)
                         .fit(Xtr, ytr).score(Xte, yte))
            b.append(DplNB(epsilon=eps, bounds=(lo, hi), random_state=s).fit(Xtr, ytr).score(Xte, yte))
        go = f"gauss-only {np.mean(g):.3f}+-{np.std(g):.3f}  " if g else ""
        print(f"{name:14s} eps={eps:<5} dpfast {np.mean(a):.3f}+-{np.std(a):.3f}  {go}"
              f"diffprivlib {np.mean(b):.3f}+-{np.std(b):.3f}  sklearn {sk:.3f}", flush=True)

rng = np.random.default_rng(0)
n, d = args.rows, 10
X = rng.normal(size=(n, d))
y = (X[:, 0] + rng.normal(size=n) > 0).astype(np.int64)
X = np.clip(X, -4, 4)


def t(f, reps=5):
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return float(np.median(out))


td = t(lambda: GaussianNB(1.0, (-4, 4), random_state=0).fit(X, y))
tb = t(lambda: DplNB(epsilon=1.0, bounds=(-4 * np.ones(d), 4 * np.ones(d)), random_state=0).fit(X, y))
ts = t(lambda: SkNB().fit(X, y))
print(f"fit at {n} rows x {d} features (median of 5): dpfast {td:.3f} s, diffprivlib {tb:.3f} s, "
      f"sklearn {ts:.3f} s; dpfast/sklearn = {td / ts:.2f}x, diffprivlib/dpfast = {tb / td:.2f}x")
