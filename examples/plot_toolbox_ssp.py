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
from _common import size
from _toolbox import one_panel, print_medians

ours, theirs = one_panel("ssp", "Least squares on diabetes", range(size(5, 10)), log_y=True, baseline=0.085,
                         baseline_label="OLS (non-private)")

# %%
# Median test MSE per epsilon (dpfast, diffprivlib):
print_medians(ours, theirs, ".4f", ".4g")
