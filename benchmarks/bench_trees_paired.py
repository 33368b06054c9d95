"""Paired accuracy: dpfast's RandomForestClassifier / DecisionTreeClassifier against diffprivlib's
(0.6.6), each at its default parameters, the same epsilon, the same public bounds and label set.

Seed s draws one stratified 70/30 split of the data set (``train_test_split(random_state=s)``;
UCI Adult, ``--datasets adult``: its official train/test split for every seed) that both
libraries fit and score, and seeds both models (``random_state=s``); the bounds are the
training split's per-feature min/max (treated as public, as in diffprivlib's examples).  Per data
set x epsilon cell: the mean test accuracy of each, and the mean of the paired difference (dpfast
minus diffprivlib) +- its standard error (the seeds' standard deviation of the difference over
sqrt(S)).  ``--variant`` adds dpfast forests at other parameters (``mech:T`` or ``mech:T:depth``,
e.g. ``label:10`` or ``auto:auto:7``), each paired against diffprivlib's forest the same way, to study the "auto"
rule (docs/theory/trees.rst).

    PYTHONPATH=. python benchmarks/bench_trees_paired.py --seeds 300 [--datasets breast-cancer,wine]
"""
import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.model_selection import train_test_split

from dpfast.datasets import load_adult
from dpfast.ensemble import RandomForestClassifier
from dpfast.tree import DecisionTreeClassifier

from _peers import import_diffprivlib

p = argparse.ArgumentParser()
p.add_argument("--dpl", default="/tmp/dpl_site")
p.add_argument("--seeds", type=int, default=300)
p.add_argument("--datasets", default="breast-cancer,digits,wine")
p.add_argument("--eps", default="0.1,1,10")
p.add_argument("--no-tree", action="store_true", help="forests only")
p.add_argument("--variant", action="append", default=[], help="mech:T[:depth] (T may be auto), paired against diffprivlib's forest")
args = p.parse_args()
diffprivlib = import_diffprivlib(args.dpl)
DplTree, DplRF = diffprivlib.models.DecisionTreeClassifier, diffprivlib.models.RandomForestClassifier
warnings.filterwarnings("ignore")
LOADERS = {"breast-cancer": load_breast_cancer, "digits": load_digits, "wine": load_wine}


def cell(diff):
    d = np.asarray(diff)
    return f"{d.mean():+.4f}+-{d.std(ddof=1) / np.sqrt(d.size):.4f}"


print(f"diffprivlib {diffprivlib.__version__}; {args.seeds} seeds; paired difference dpfast - diffprivlib "
      f"(mean +- standard error)")
t0 = time.time()
for name in args.datasets.split(","):
    if name == "adult":
        Xa, ya, Xb, yb = load_adult(normalize=False)
        y = np.concatenate([ya, yb])
    else:
        X, y = LOADERS[name](return_X_y=True)
    splits = []
    for s in range(args.seeds):
        if name == "adult":
            Xtr, Xte, ytr, yte = Xa, Xb, ya, yb
        else:
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=s, stratify=y)
        lo, hi = Xtr.min(0), Xtr.max(0)
        hi = np.where(hi > lo, hi, lo + 1.0)
        splits.append((Xtr, Xte, ytr, yte, lo, hi))
    classes = np.unique(y)  # the public label set of the schema
    for eps in map(float, args.eps.split(",")):
        acc = {k: [] for k in ("f_dp", "f_dpl", "t_dp", "t_dpl", "T", "mech", *args.variant)}
        for s, (Xtr, Xte, ytr, yte, lo, hi) in enumerate(splits):
            b = dict(enumerate(zip(lo, hi)))
            f = RandomForestClassifier(eps, b, classes=classes, random_state=s).fit(Xtr, ytr)
            acc["f_dp"].append(f.score(Xte, yte))
            acc["T"].append(f.n_estimators_)
            acc["mech"].append(f.leaf_mechanism_ == "label")
            acc["f_dpl"].append(DplRF(epsilon=eps, bounds=(lo, hi), classes=list(classes),
                                      random_state=s).fit(Xtr, ytr).score(Xte, yte))
            if not args.no_tree:
                acc["t_dp"].append(DecisionTreeClassifier(eps, b, classes=classes, random_state=s)
                                   .fit(Xtr, ytr).score(Xte, yte))
                acc["t_dpl"].append(DplTree(epsilon=eps, bounds=(lo, hi), classes=list(classes),
                                            random_state=s).fit(Xtr, ytr).score(Xte, yte))
            for v in args.variant:
                mech, T, *dep = v.split(":")
                m = RandomForestClassifier(eps, b, classes=classes, n_estimators=T if T == "auto" else int(T),
                                           leaf_mechanism=mech,
                                           max_depth=int(dep[0]) if dep else 5, random_state=s)
                acc[v].append(m.fit(Xtr, ytr).score(Xte, yte))
        a = {k: np.asarray(v, dtype=float) for k, v in acc.items()}
        line = (f"{name:13s} eps={eps:<4g} forest dpfast {a['f_dp'].mean():.3f} (T median {np.median(a['T']):g}, "
                f"label {a['mech'].mean():.2f}) dpl {a['f_dpl'].mean():.3f} diff {cell(a['f_dp'] - a['f_dpl'])}")
        if not args.no_tree:
            line += (f" | tree dpfast {a['t_dp'].mean():.3f} dpl {a['t_dpl'].mean():.3f} "
                     f"diff {cell(a['t_dp'] - a['t_dpl'])}")
        for v in args.variant:
            line += f" | {v} {a[v].mean():.3f} diff {cell(a[v] - a['f_dpl'])}"
        print(line, flush=True)
print(f"[{time.time() - t0:.0f} s]")
