"""
PCA: dpfast (Analyze Gauss) vs diffprivlib (Bingham), privacy-utility
======================================================================

Fraction of the top-2 variance captured by the released components on scikit-learn's wine
data (min-max scaled to [0, 1], the public bounds of both libraries; row-norm bound
``sqrt(d) / 2``), over epsilon.  :class:`dpfast.decomposition.PCA` with ``delta = 1e-5`` is
Analyze Gauss (Dwork, Talwar, Thakurta & Zhang 2014: Gaussian noise on the second-moment matrix,
one pass); diffprivlib's ``PCA`` samples the components from the Bingham distribution by Gibbs
sampling (pure epsilon-DP; Chaudhuri, Sarwate & Sinha 2013).  1 is the non-private PCA.

Each point is the median over seeds, the band the 25-75 % range.  dpfast's curve is computed
when the documentation is built; diffprivlib's too when ``import diffprivlib`` works, otherwise
it is read from ``benchmarks/results/toolbox_curves.csv`` (made by
``benchmarks/bench_toolbox_curves.py`` with diffprivlib 0.6.6): the small title says which.
"""
import matplotlib.pyplot as plt
import numpy as np

import dpfast

from _common import save, size
from _toolbox import EPSILONS, curve, diffprivlib_curve, plot

seeds = range(size(5, 10))
ours = curve("pca", dpfast, seeds)
theirs, source = diffprivlib_curve("pca", seeds)

fig, ax = plt.subplots(figsize=(6.4, 4.2))
plot(ax, "pca", ours, theirs, source, baseline=1.0, baseline_label="non-private PCA")
fig.suptitle(r"PCA on wine (k = 2; dpfast at $\delta = 10^{-5}$)")
fig.tight_layout()
save(fig, "toolbox_pca")

# %%
# Median captured variance per epsilon (dpfast, diffprivlib):
for e, a, b in zip(EPSILONS, np.median(ours, axis=1), np.median(theirs, axis=1)):
    print(f"epsilon {e:5.1f}: dpfast {a:.3f}  diffprivlib {b:.3f}")
