"""
Array statistics (dpfast.tools) vs diffprivlib.tools, privacy-utility
=====================================================================

Absolute error of the private mean and variance of 2000 values drawn uniformly from [0, 1]
(public bounds (0, 1)) over epsilon, for :func:`dpfast.tools.mean` / :func:`dpfast.tools.var` and
diffprivlib's ``tools.mean`` / ``tools.var``.

The guarantees differ: dpfast protects against adding or removing a row, so the number of rows
is private and the mean is a noisy centred sum over a noisy count (epsilon split in two; the
variance adds a noisy centred sum of squares, epsilon split in three); diffprivlib treats n as
public (replace-one neighbours).  For the mean the noise scales are nevertheless the same,
``(b - a) / (n epsilon)`` (dpfast's centred sum has half the sensitivity at half the budget), so
the two curves differ by the luck of the seeds (each library draws the same standard noise for a
seed at every epsilon, hence parallel curves).  For the variance dpfast's centred sum of squares
(l1 sensitivity ``r^2 / 2``) is 2-4x more accurate.

Each point is the median over seeds, the band the 25-75 % range.  dpfast's curves are computed
when the documentation is built; diffprivlib's too when ``import diffprivlib`` works, otherwise
they are read from ``benchmarks/results/toolbox_curves.csv`` (made by
``benchmarks/bench_toolbox_curves.py`` with diffprivlib 0.6.6): the small titles say which.
"""
import matplotlib.pyplot as plt

from _common import save, size
from _toolbox import compare, print_medians

seeds = range(size(5, 10))
fig, axes = plt.subplots(1, 2, figsize=(9.6, 4.0))
table = {}
for ax, fam in zip(axes, ("tools_mean", "tools_var")):
    table[fam] = compare(ax, fam, seeds, log_y=True)[:2]
fig.suptitle("dpfast.tools.mean / var vs diffprivlib.tools (n = 2000)")
fig.tight_layout()
save(fig, "toolbox_tools")

# %%
# Median absolute error per epsilon (dpfast, diffprivlib):
for fam, (ours, theirs) in table.items():
    print_medians(ours, theirs, ".2e", label=f"{fam:10s} ")
