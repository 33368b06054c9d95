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
import matplotlib.pyplot as plt
import numpy as np

import dpfast

from _common import save, size
from _toolbox import EPSILONS, curve, diffprivlib_curve, plot

seeds = range(size(5, 10))
ours = curve("kmeans", dpfast, seeds)
theirs, source = diffprivlib_curve("kmeans", seeds)

fig, ax = plt.subplots(figsize=(6.4, 4.2))
plot(ax, "kmeans", ours, theirs, source, log_y=True, baseline=1.0, baseline_label="non-private k-means")
fig.suptitle("KMeans on four blobs (k = 4)")
fig.tight_layout()
save(fig, "toolbox_kmeans")

# %%
# Median inertia ratio per epsilon (dpfast, diffprivlib):
for e, a, b in zip(EPSILONS, np.median(ours, axis=1), np.median(theirs, axis=1)):
    print(f"epsilon {e:5.1f}: dpfast {a:.3f}  diffprivlib {b:.3f}")
