"""
Linear regression by sufficient-statistic perturbation vs diffprivlib, privacy-utility
======================================================================================

Test mean squared error on scikit-learn's diabetes data (features standardised and scaled to
``||x|| <= 1``, labels centred and scaled to ``|y| <= 1``; a random 80/20 split per seed) over
epsilon, for :class:`dpfast.linear_model.LinearRegression` with ``method="ssp"`` (Gaussian noise
on ``XᵀX`` and ``Xᵀy``, then a PSD projection and a ridge; Awan's notes §3.8, Wang 2018;
``delta = 1e-5``) and diffprivlib's ``LinearRegression`` (the functional mechanism, pure
epsilon-DP, given the data's per-feature ranges).  Predicting 0 scores about 0.16; ordinary
least squares about 0.085.  The y axis is logarithmic: diffprivlib's error at this n (353
training rows) is many orders of magnitude larger.

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
ours = curve("ssp", dpfast, seeds)
theirs, source = diffprivlib_curve("ssp", seeds)

fig, ax = plt.subplots(figsize=(6.4, 4.2))
plot(ax, "ssp", ours, theirs, source, log_y=True, baseline=0.085, baseline_label="OLS (non-private)")
fig.suptitle("Least squares on diabetes")
fig.tight_layout()
save(fig, "toolbox_ssp")

# %%
# Median test MSE per epsilon (dpfast, diffprivlib):
for e, a, b in zip(EPSILONS, np.median(ours, axis=1), np.median(theirs, axis=1)):
    print(f"epsilon {e:5.1f}: dpfast {a:.4f}  diffprivlib {b:.4g}")
