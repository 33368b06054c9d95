"""
Random forests: dpfast vs diffprivlib, privacy-utility
======================================================

Test accuracy of :class:`dpfast.ensemble.RandomForestClassifier` and diffprivlib's
``RandomForestClassifier`` on scikit-learn's digits (8 x 8 images, 64 features, 10 classes; the
stratified 70/30 split of ``benchmarks/bench_trees.py``, 1257 training rows) over epsilon, both at
their defaults and with the same public parameters: the label set and per-feature bounds (the
training split's min / max, treated as public as in ``bench_trees.py``). Digits is where a forest
is the natural choice among the toolbox's classifiers -- ten classes and a non-linear boundary --
and where the figure separates the libraries; on wine (124 training rows) the seeds' spread at
epsilon 0.1-1 (standard deviation 0.08-0.15) is as large as the differences, and on UCI Adult every
private forest, diffprivlib's too, predicts the majority class (``benchmarks/RESULTS.md``).

**The algorithm.** Both libraries grow *random decision trees*: complete binary trees of depth 5
whose features and thresholds are drawn from public randomness inside the public bounds, never from
the data (the totally randomized trees of Geurts, Ernst & Wehenkel, Machine Learning 2006;
Jagannathan, Pillaipakkamnekandath & Wright, Trans. Data Privacy 2012; Fletcher & Islam, Expert
Syst. Appl. 2017). The data are read once, to fill the leaves, and only the leaves are private.
dpfast's default ``leaf_mechanism="auto"`` spends a small share of epsilon (0.079 at depth 5) on a
noisy row count ``n~`` and, with the rest ``epsilon'``, either counts every row in every tree, with
exact discrete Laplace noise of scale ``T / epsilon'`` on the whole table of class counts (l1
sensitivity ``T``, the number of trees; Canonne, Kamath & Steinke 2020), or, when that noise would
drown a leaf, releases each leaf's majority label by permute-and-flip (McKenna & Sheldon 2020),
every tree counting every row at ``epsilon' / T``. The default
``n_estimators="auto"`` sizes the forest from ``n~``: the number of trees at which a tree's
per-leaf signal-to-noise ``n~ epsilon' / (T 2^D)`` is 2, the minimiser of the margin variance
derived in :doc:`../theory/trees`, between 1 and 100 trees; a forest of labels is sized by its own
model instead (the integer maximiser of the bounded vote's signal-to-noise). The whole fit is pure epsilon-DP under
adding or removing one row. diffprivlib 0.6.6 grows 10 trees whatever the data (its default),
gives each tree one of 10 equal contiguous chunks of the rows and releases each leaf's majority
label by permute-and-flip at epsilon: at a fixed size the same per-tree signal-to-noise as
dpfast's ``"label"``, which instead counts every row in every tree at ``epsilon / T``.

**When to use it.** A private forest suits classification with several classes and non-linear
boundaries over a few tens of numeric features with public ranges, when one pass over the data and
pure DP are wanted; more rows (or a larger epsilon) buy more trees. With (nearly) linearly
separable classes, or many one-hot features, prefer
:class:`~dpfast.linear_model.LogisticRegression` (:doc:`../user_guide/toolbox`).

The left panel is the forest at the defaults (what a user gets); the right one a single
:class:`dpfast.tree.DecisionTreeClassifier` against diffprivlib's ``DecisionTreeClassifier``: one
tree of depth 5 has 32 leaves for 10 classes, so its accuracy stays near 0.3 at every epsilon (both
libraries) -- the reason to average many trees. Each point is the median over seeds, the band the
25-75 % range; the dashed line is scikit-learn's (non-private) forest of 100 trees of depth 5.
dpfast's curves are computed when the documentation is built; diffprivlib's too when ``import
diffprivlib`` works, otherwise they are read from ``benchmarks/results/toolbox_curves.csv`` (made
by ``benchmarks/bench_toolbox_curves.py`` with diffprivlib 0.6.6): the small titles say which.
"""
import matplotlib.pyplot as plt
import numpy as np

from _common import save, size
from _toolbox import EPSILONS, compare, forest_sizes, nonprivate_forest_score

seeds = range(size(5, 10))
base = nonprivate_forest_score()
fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), sharey=True)
medians = {}
for ax, family, title in zip(axes, ("forest", "tree"), ("RandomForestClassifier (defaults)",
                                                        "DecisionTreeClassifier (max_depth=5)")):
    ours, theirs, source = compare(ax, family, seeds, baseline=base,
                                   baseline_label="non-private forest (scikit-learn)")
    ax.set_title(f"{title}\ndiffprivlib: {source}", fontsize=7)
    medians[family] = np.median(ours, axis=1), np.median(theirs, axis=1)
fig.suptitle("Random trees on digits (10 classes)")
fig.tight_layout()
save(fig, "toolbox_forest")

# %%
# Median test accuracy per epsilon (dpfast, diffprivlib), and the forest size dpfast's
# ``n_estimators="auto"`` chose (median over the seeds; diffprivlib always grows 10 trees):
sizes = forest_sizes(seeds)
print(f"non-private forest (100 trees, depth 5): {base:.3f}")
for i, e in enumerate(EPSILONS):
    (fa, fb), (ta, tb) = medians["forest"], medians["tree"]
    T, mech = sizes[i]
    print(f"epsilon {e:5.1f}: forest dpfast {fa[i]:.3f} ({T:.0f} trees, {'/'.join(mech)})  diffprivlib {fb[i]:.3f}"
          f" | tree dpfast {ta[i]:.3f}  diffprivlib {tb[i]:.3f}")
