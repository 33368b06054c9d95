"""Why breast-cancer at epsilon 0.1 was below diffprivlib, and the label-forest sizing rule
(``dpfast.tree.random_trees.auto_n_trees_label``, docs/theory/trees.rst "Sizing a forest of labels").

Three parts, on scikit-learn's breast-cancer and wine (the stratified 70/30 split of
bench_trees.py, bounds = the training split's min/max, treated as public):

``--part partition``: per seed, the default forest under the previous rule (one tree of labels
  where "auto" picks labels): its test accuracy against its random partition
  (occupied leaves of the first tree, collision factor ``2^D sum_l p_l^2``, test rows in leaves
  with < 3 training rows), then accuracy over depth x forest size x leaf mechanism.
``--part sweep``: forest size x leaf mechanism at ``--eps`` against diffprivlib (10 trees), many seeds.
``--part rule``: the previous rule (a forest of labels sized by the counts rule: one tree where
  "auto" picks labels) against the label rule, on the test split and on held-out folds of the
  training split (seed s: fold s % 5 of a 5-fold split shuffled by s).

    PYTHONPATH=. DPFAST_NUM_THREADS=1 python benchmarks/bench_trees_sizing.py --part rule --seeds 150
"""
import argparse
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.model_selection import StratifiedKFold, train_test_split

from dpfast.ensemble import RandomForestClassifier
from dpfast.tree import random_trees as rt

from _peers import import_diffprivlib

p = argparse.ArgumentParser()
p.add_argument("--part", choices=("partition", "sweep", "rule"), default="rule")
p.add_argument("--data", default="breast-cancer,wine")
p.add_argument("--eps", type=float, default=0.1)
p.add_argument("--seeds", type=int, default=150)
p.add_argument("--dpl", default="/tmp/dpl_site")
args = p.parse_args()
warnings.filterwarnings("ignore")
LOADERS = {"breast-cancer": load_breast_cancer, "wine": load_wine}


def split(name):
    X, y = LOADERS[name](return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    lo, hi = Xtr.min(0), Xtr.max(0)
    hi = np.where(hi > lo, hi, lo + 1.0)
    return Xtr, Xte, ytr, yte, lo, hi, dict(enumerate(zip(lo, hi))), np.unique(ytr)


def rep(tag, a):
    a = np.asarray(a, dtype=float)
    print(f"{tag}: {a.mean():.3f} +- {a.std() / np.sqrt(a.size):.3f} (s.e.)", flush=True)


S, eps = args.seeds, args.eps
for name in args.data.split(","):
    Xtr, Xte, ytr, yte, lo, hi, b, cl = split(name)
    previous = lambda n, e, d, c, k=2: rt.auto_n_trees(n, e, d, c)  # noqa: E731
    if args.part == "partition":
        label_rule, rt.auto_n_trees_label = rt.auto_n_trees_label, previous
        acc, occ, coll, sparse = [], [], [], []
        for s in range(S):
            m = RandomForestClassifier(eps, b, classes=cl, random_state=s).fit(Xtr, ytr)
            acc.append(m.score(Xte, yte))
            c = np.bincount(m.apply(Xtr)[:, 0], minlength=1 << m.max_depth)
            occ.append((c > 0).sum())
            coll.append(c.size * ((c / c.sum()) ** 2).sum())
            sparse.append(np.mean(c[m.apply(Xte)[:, 0]] < 3))
        rt.auto_n_trees_label = label_rule
        rep(f"{name} eps={eps} default, previous rule (T {m.n_estimators_})", acc)
        print(f"  occupied leaves {np.mean(occ):.1f} (corr with accuracy {np.corrcoef(acc, occ)[0, 1]:.2f}); "
              f"collision factor {np.mean(coll):.1f}; test rows in < 3-row leaves {np.mean(sparse):.3f} "
              f"(corr {np.corrcoef(acc, sparse)[0, 1]:.2f})")
        for D in (2, 3, 4, 5):
            for T in (1, 3, 10, 30):
                for lm in ("label", "counts"):
                    rep(f"  depth {D} T={T} {lm}", [RandomForestClassifier(
                        eps, b, classes=cl, n_estimators=T, max_depth=D, leaf_mechanism=lm, random_state=s)
                        .fit(Xtr, ytr).score(Xte, yte) for s in range(S)])
    elif args.part == "sweep":
        DplRF = import_diffprivlib(args.dpl).models.RandomForestClassifier

        rep(f"{name} eps={eps} diffprivlib T=10", [DplRF(epsilon=eps, bounds=(lo, hi), classes=list(cl), random_state=s)
                                                   .fit(Xtr, ytr).score(Xte, yte) for s in range(S)])
        for T in (1, 2, 3, 5, 10):
            for lm in ("label", "counts"):
                rep(f"{name} eps={eps} dpfast T={T} {lm}", [RandomForestClassifier(
                    eps, b, classes=cl, n_estimators=T, leaf_mechanism=lm, random_state=s)
                    .fit(Xtr, ytr).score(Xte, yte) for s in range(S)])
        rep(f"{name} eps={eps} dpfast default", [RandomForestClassifier(eps, b, classes=cl, random_state=s)
                                                 .fit(Xtr, ytr).score(Xte, yte) for s in range(S)])
    else:
        label_rule = rt.auto_n_trees_label
        for tag, rule in (("previous (counts rule for labels)", previous), ("label rule", label_rule)):
            rt.auto_n_trees_label = rule
            te, cv = [], []
            for s in range(S):
                te.append(RandomForestClassifier(eps, b, classes=cl, random_state=s).fit(Xtr, ytr).score(Xte, yte))
                tr, va = list(StratifiedKFold(5, shuffle=True, random_state=s).split(Xtr, ytr))[s % 5]
                cv.append(RandomForestClassifier(eps, b, classes=cl, random_state=s + 1000)
                          .fit(Xtr[tr], ytr[tr]).score(Xtr[va], ytr[va]))
            rep(f"{name} eps={eps} {tag}, test split", te)
            rep(f"{name} eps={eps} {tag}, held-out folds", cv)
        rt.auto_n_trees_label = label_rule
