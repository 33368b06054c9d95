"""
k-means: dpfast vs diffprivlib, privacy-utility
===============================================

Inertia of the released centres relative to non-private k-means (``n_init=10``) on 3000 points
in four Gaussian blobs, over epsilon, for :class:`dpfast.cluster.KMeans` (DP-Lloyd with a
fixed, public number of steps, five by default, and the budget split of Su et al. 2016) and
diffprivlib's ``KMeans`` (which chooses its iteration count from epsilon and n), with the same
public box.  1 is the non-private optimum; lower is better.

Each point is the median over seeds, the band the 25-75 % range.  dpfast's curve is computed
when the documentation is built; diffprivlib's too when ``import diffprivlib`` works, otherwise
it is read from ``benchmarks/results/toolbox_curves.csv`` (made by
``benchmarks/bench_toolbox_curves.py`` with diffprivlib 0.6.6): the small title says which.
"""
from _common import size
from _toolbox import one_panel, print_medians

ours, theirs = one_panel("kmeans", "KMeans on four blobs (k = 4)", range(size(5, 10)), log_y=True, baseline=1.0,
                         baseline_label="non-private k-means")

# %%
# Median inertia ratio per epsilon (dpfast, diffprivlib):
print_medians(ours, theirs)
