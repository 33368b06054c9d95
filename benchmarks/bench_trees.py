"""dpfast.ensemble.RandomForestClassifier / dpfast.tree.DecisionTreeClassifier vs diffprivlib's
(0.6.6) and scikit-learn's.

Accuracy: test accuracy at epsilon 0.1, 1, 10 over 10 seeds on UCI Adult (dpfast.datasets,
official split), breast-cancer, digits and wine (scikit-learn's, a fixed stratified 70/30
split).  Every private model gets the same public parameters: the training set's per-feature
min/max as bounds (treated as public, as in diffprivlib's examples), the label set, diffprivlib's
defaults n_estimators=10 and max_depth=5.  dpfast is run at its defaults (n_estimators="auto":
the forest size derived from the noisy row count; leaf_mechanism="auto") and at diffprivlib's
n_estimators=10 with each leaf mechanism ("auto", "counts", "label").  Speed: fit at 10^6 rows x 10 features, 2 classes, median of 3 (diffprivlib:
1 run; it routes the rows in a Python loop): at equal trees (10 of depth 5), default against
default (dpfast n_estimators="auto" -> 100 trees at epsilon 1, diffprivlib 10), the leaf-count
kernel alone (sliced against descent, the same integers), and predict at 10^6 rows.

    PYTHONPATH=. DPFAST_NUM_THREADS=1 python benchmarks/bench_trees.py [--dpl /tmp/dpl_site] [--seeds 10]

diffprivlib is appended to sys.path (after the venv's site-packages) from --dpl.
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.ensemble import RandomForestClassifier as SkRF
from sklearn.model_selection import train_test_split

from dpfast.datasets import load_adult
from dpfast.ensemble import RandomForestClassifier
from dpfast.tree import DecisionTreeClassifier

from _peers import import_diffprivlib

p = argparse.ArgumentParser()
p.add_argument("--dpl", default="/tmp/dpl_site")
p.add_argument("--seeds", type=int, default=10)
p.add_argument("--rows", type=int, default=1_000_000)
p.add_argument("--skip-accuracy", action="store_true")
p.add_argument("--skip-speed", action="store_true")
p.add_argument("--reps", type=int, default=5, help="interleaved repetitions of the headline timings")
p.add_argument("--datasets", default="adult,breast-cancer,digits,wine")
args = p.parse_args()
diffprivlib = import_diffprivlib(args.dpl)
DplTree, DplRF = diffprivlib.models.DecisionTreeClassifier, diffprivlib.models.RandomForestClassifier

warnings.filterwarnings("ignore")


def datasets():
    wanted = args.datasets.split(",")
    if "adult" in wanted:
        Xtr, ytr, Xte, yte = load_adult(normalize=False)
        yield "adult", Xtr, Xte, ytr, yte
    for name, loader in (("breast-cancer", load_breast_cancer), ("digits", load_digits), ("wine", load_wine)):
        if name in wanted:
            X, y = loader(return_X_y=True)
            yield (name, *train_test_split(X, y, test_size=0.3, random_state=0, stratify=y))


def ms(a):
    return f"{np.mean(a):.3f}+-{np.std(a):.3f}"


print(f"diffprivlib {diffprivlib.__version__}")
if not args.skip_accuracy:
    print("accuracy (mean +- sd over seeds): data, epsilon, forest: dpfast default (n_estimators='auto', "
          "leaf_mechanism='auto', max_depth=5) [median n_estimators_], dpfast at diffprivlib's n_estimators=10 "
          "(auto, counts, label), diffprivlib (n_estimators=10, max_depth=5) | tree (max_depth=5): dpfast auto, "
          "diffprivlib | sklearn forest (10, 5)")
    for name, Xtr, Xte, ytr, yte in datasets():
        lo, hi = Xtr.min(0), Xtr.max(0)
        hi = np.where(hi > lo, hi, lo + 1.0)
        bounds = dict(enumerate(zip(lo, hi)))
        classes = np.unique(ytr)  # public schema of these benchmarks
        sk = SkRF(n_estimators=10, max_depth=5, random_state=0).fit(Xtr, ytr).score(Xte, yte)
        for eps in (0.1, 1.0, 10.0):
            r = {k: [] for k in ("f0", "fa", "fc", "fl", "fd", "ta", "td", "T")}
            for s in range(args.seeds):
                m0 = RandomForestClassifier(eps, bounds, classes=classes, random_state=s).fit(Xtr, ytr)
                r["f0"].append(m0.score(Xte, yte))
                r["T"].append(m0.n_estimators_)
                for lm, key in (("auto", "a"), ("counts", "c"), ("label", "l")):
                    r["f" + key].append(RandomForestClassifier(eps, bounds, classes=classes, n_estimators=10,
                                                               leaf_mechanism=lm, random_state=s)
                                        .fit(Xtr, ytr).score(Xte, yte))
                r["ta"].append(DecisionTreeClassifier(eps, bounds, classes=classes, random_state=s)
                               .fit(Xtr, ytr).score(Xte, yte))
                r["fd"].append(DplRF(epsilon=eps, bounds=(lo, hi), classes=list(classes), random_state=s)
                               .fit(Xtr, ytr).score(Xte, yte))
                r["td"].append(DplTree(epsilon=eps, bounds=(lo, hi), classes=list(classes), random_state=s)
                               .fit(Xtr, ytr).score(Xte, yte))
            print(f"{name:14s} eps={eps:<5} forest {ms(r['f0'])} [T {np.median(r['T']):.0f}] | T=10 {ms(r['fa'])} "
                  f"{ms(r['fc'])} {ms(r['fl'])} | dpl {ms(r['fd'])} || tree {ms(r['ta'])} dpl {ms(r['td'])} | "
                  f"sklearn {sk:.3f}", flush=True)

if args.skip_speed:
    sys.exit(0)
rng = np.random.default_rng(0)
n, d = args.rows, 10
X = rng.uniform(-4, 4, size=(n, d))
y = (X[:, 0] + X[:, 1] + rng.normal(size=n) > 0).astype(np.int64)
b = (-4.0, 4.0)


def t(f, reps=3):
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return float(np.median(out))


from dpfast import _trees  # noqa: E402

tc = t(lambda: RandomForestClassifier(1.0, b, n_estimators=10, leaf_mechanism="counts", random_state=0).fit(X, y))
tl = t(lambda: RandomForestClassifier(1.0, b, n_estimators=10, leaf_mechanism="label", random_state=0).fit(X, y))
tt = t(lambda: DecisionTreeClassifier(1.0, b, leaf_mechanism="counts", random_state=0).fit(X, y))
auto = RandomForestClassifier(1.0, b, random_state=0)
ta = t(lambda: auto.fit(X, y))
td = t(lambda: DplRF(epsilon=1.0, bounds=(np.full(d, -4.0), np.full(d, 4.0)), classes=[0, 1],
                     random_state=0).fit(X, y), reps=1)
tdt = t(lambda: DplTree(epsilon=1.0, bounds=(np.full(d, -4.0), np.full(d, 4.0)), classes=[0, 1],
                        random_state=0).fit(X, y), reps=1)
ts = t(lambda: SkRF(n_estimators=10, max_depth=5, random_state=0, n_jobs=1).fit(X, y), reps=1)
fa, tha = auto.feature_, auto.threshold_
k_desc = t(lambda: _trees.leaf_counts(X, y, 2, None, fa, tha, 5, 1, 1))
k_auto = t(lambda: _trees.leaf_counts(X, y, 2, None, fa, tha, 5, 1, 0))
dpl = DplRF(epsilon=1.0, bounds=(np.full(d, -4.0), np.full(d, 4.0)), classes=[0, 1], random_state=0).fit(X, y)
m10 = RandomForestClassifier(1.0, b, n_estimators=10, leaf_mechanism="counts", random_state=0).fit(X, y)
tp10, tpa = t(lambda: m10.predict(X)), t(lambda: auto.predict(X))
p_desc = t(lambda: _trees.proba_sum(X, fa, tha, 5, auto.leaf_proba_, 1, 1))
p_auto = t(lambda: _trees.proba_sum(X, fa, tha, 5, auto.leaf_proba_, 1, 0))
tpd = t(lambda: dpl.predict(X), reps=1)
print(f"leaf counts of the default's {fa.shape[0]} trees: descent {k_desc:.3f} s, auto kernel "
      f"({'sliced' if _trees.sliced else 'descent'}) {k_auto:.3f} s ({k_desc / k_auto:.1f}x)")
print(f"predict sums of the default's {fa.shape[0]} trees, 1 thread: descent {p_desc:.3f} s, auto kernel "
      f"({'sliced' if _trees.sliced else 'descent'}) {p_auto:.3f} s ({p_desc / p_auto:.1f}x)")
print(f"predict at {n} rows: dpfast 10 trees {tp10:.3f} s, default ({auto.n_estimators_} trees) {tpa:.3f} s; "
      f"diffprivlib 10 trees {tpd:.3f} s ({tpd / tp10:.1f}x at 10 trees, {tpd / tpa:.1f}x default vs default)")
# the load of a shared machine moves between measurements: the headline ratios from interleaved runs,
# dpfast at 1 thread and at its default thread count (DPFAST_NUM_THREADS unset: min(usable CPUs, 4));
# diffprivlib at its defaults (n_jobs=1)
from dpfast import _threads  # noqa: E402

env_threads = os.environ.get("DPFAST_NUM_THREADS")


def threads(k):
    def run(f):
        def g():
            if k is None:
                os.environ.pop("DPFAST_NUM_THREADS", None)
            else:
                os.environ["DPFAST_NUM_THREADS"] = str(k)
            try:
                f()
            finally:
                if env_threads is None:
                    os.environ.pop("DPFAST_NUM_THREADS", None)
                else:
                    os.environ["DPFAST_NUM_THREADS"] = env_threads
        return g
    return run


default_nt = min(_threads.CPUS, _threads.DEFAULT_CAP)
one, dflt = threads(1), threads(None)
fit_auto = lambda: RandomForestClassifier(1.0, b, random_state=0).fit(X, y)  # noqa: E731
fit_ten = lambda: RandomForestClassifier(1.0, b, n_estimators=10, random_state=0).fit(X, y)  # noqa: E731
inter = {}
for _ in range(args.reps):
    for key, f in (("dpl", lambda: DplRF(epsilon=1.0, bounds=(np.full(d, -4.0), np.full(d, 4.0)), classes=[0, 1],
                                         random_state=0).fit(X, y)),
                   ("auto1", one(fit_auto)), ("autoN", dflt(fit_auto)), ("ten1", one(fit_ten)), ("tenN", dflt(fit_ten)),
                   ("dplp", lambda: dpl.predict(X)), ("autop1", one(lambda: auto.predict(X))),
                   ("autopN", dflt(lambda: auto.predict(X))), ("tenp1", one(lambda: m10.predict(X))),
                   ("tenpN", dflt(lambda: m10.predict(X)))):
        inter.setdefault(key, []).append(t(f, reps=1))
med = {k: float(np.median(v)) for k, v in inter.items()}
r = {k: med["dpl"] / med[k] for k in ("auto1", "autoN", "ten1", "tenN")}
rp = {k: med["dplp"] / med[k] for k in ("autop1", "autopN", "tenp1", "tenpN")}
print(f"interleaved (median of {args.reps}), 10^6 x 10: fit diffprivlib default (10 trees, n_jobs=1) {med['dpl']:.3f} s; "
      f"dpfast default ({auto.n_estimators_} trees) 1 thread {med['auto1']:.3f} s ({r['auto1']:.1f}x), "
      f"{default_nt} threads {med['autoN']:.3f} s ({r['autoN']:.1f}x); dpfast 10 trees 1 thread {med['ten1']:.3f} s "
      f"({r['ten1']:.1f}x), {default_nt} threads {med['tenN']:.3f} s ({r['tenN']:.1f}x)")
print(f"interleaved predict at 10^6 rows: diffprivlib {med['dplp']:.3f} s; dpfast default 1 thread "
      f"{med['autop1']:.3f} s ({rp['autop1']:.1f}x), {default_nt} threads {med['autopN']:.3f} s ({rp['autopN']:.1f}x); "
      f"10 trees 1 thread {med['tenp1']:.3f} s ({rp['tenp1']:.1f}x), {default_nt} threads {med['tenpN']:.3f} s "
      f"({rp['tenpN']:.1f}x)")
print(f"fit at {n} rows x {d} features, n_estimators=10, max_depth=5: dpfast forest counts {tc:.3f} s, "
      f"label {tl:.3f} s, diffprivlib forest {td:.3f} s ({td / tc:.0f}x counts, {td / tl:.0f}x label); "
      f"dpfast tree {tt:.3f} s, diffprivlib tree {tdt:.3f} s ({tdt / tt:.0f}x); sklearn forest {ts:.3f} s; "
      f"dpfast default forest (n_estimators='auto' -> {auto.n_estimators_} trees, {auto.leaf_mechanism_}) {ta:.3f} s "
      f"({td / ta:.1f}x diffprivlib's 10 trees)")
