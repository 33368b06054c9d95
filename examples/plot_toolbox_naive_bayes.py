"""
Naive Bayes: dpfast vs diffprivlib, privacy-utility
===================================================

Test accuracy of :class:`dpfast.naive_bayes.GaussianNB` and diffprivlib's ``GaussianNB`` on
scikit-learn's breast-cancer data (stratified 70/30 split) over epsilon, both with the same
public per-feature bounds.  dpfast releases the per-class counts, sums and sums of squares with
one Laplace perturbation (noisy sufficient statistics, Foulds et al. 2016; l1 sensitivity
``1 + 1.5 d`` whatever the number of classes); diffprivlib perturbs each class's mean and
variance with sensitivities that need the private class sizes (Vaidya et al. 2013).

Each point is the median over seeds, the band the 25-75 % range.  dpfast's curve is computed
when the documentation is built; diffprivlib's too when ``import diffprivlib`` works, otherwise
it is read from ``benchmarks/results/toolbox_curves.csv`` (made by
``benchmarks/bench_toolbox_curves.py`` with diffprivlib 0.6.6): the small title above the plot
says which.
"""
from _common import size
from _toolbox import one_panel, print_medians

ours, theirs = one_panel("naive_bayes", "GaussianNB on breast cancer", range(size(5, 10)), baseline=0.924,
                         baseline_label="non-private GaussianNB")

# %%
# Median test accuracy per epsilon (dpfast, diffprivlib):
print_medians(ours, theirs)
