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
from _common import size
from _toolbox import one_panel, print_medians

ours, theirs = one_panel("pca", r"PCA on wine (k = 2; dpfast at $\delta = 10^{-5}$)", range(size(5, 10)),
                         baseline=1.0, baseline_label="non-private PCA")

# %%
# Median captured variance per epsilon (dpfast, diffprivlib):
print_medians(ours, theirs)
