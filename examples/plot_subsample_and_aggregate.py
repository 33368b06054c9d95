"""
Subsample-and-aggregate: the private median at no asymptotic cost
=================================================================

:func:`dpfast.tools.subsample_and_aggregate` makes any statistic private (Smith 2011; Awan's
lecture notes §8, Algorithms 1-2): the rows are split into ``k = n^0.4`` random blocks, the
statistic is computed on each, and the ``k`` results are averaged by the *noisy widened
winsorized mean* (private quartiles, a range ``4 k^(1/3+0.1)`` interquartile ranges wide around
their midpoint, the clamped mean plus Laplace noise).  Awan's Theorem 8.2: the private estimate
``M(X)`` differs from the statistic ``T(X)`` by ``o(n^-1/2)``, less than ``T``'s own sampling
error.  The rate of the noise is ``n^-0.527`` (the spec digest's B12, which corrects the notes'
Remark 8.4): faster than ``1/sqrt(n)``, barely.

Here ``T`` is the median of ``N(0, 1)`` data (no useful sensitivity bound of its own), with the
public range ``[-5, 5]``.  The plot shows the mean of ``|M(X) - T(X)|`` over repetitions
against ``n``, with the theory's curve ``2 (u - l) / (k epsilon)``, ``u - l = 8 k^(1/3+0.1)
IQR``, IQR the interquartile range of a block median (``1.349 sqrt(pi/2) sqrt(k/n)``), and a
``1/sqrt(n)`` line for comparison.  At ``epsilon = 10`` and ``30`` the error follows the theory
from the smallest ``n``.  At ``epsilon = 1`` the private quartiles of ``k`` block values are not
found until ``k epsilon`` is large (a few hundred): the error first *grows* relative to the
sampling error, and the asymptotics set in only in the millions of rows -- the price of a
method that needs nothing but a range.
"""
import math

import matplotlib.pyplot as plt
import numpy as np

from dpfast import tools

from _common import save, size

ns = np.round(10 ** np.arange(3.0, size(5.51, 6.51), 0.5)).astype(int)
reps = size(15, 100)
epsilons = [1.0, 10.0, 30.0]
gen = np.random.default_rng(0)

err = {eps: [] for eps in epsilons}
for n in ns:
    for eps in epsilons:
        e = []
        for r in range(reps):
            x = gen.standard_normal(n)
            m = tools.subsample_and_aggregate(np.median, x, eps, bounds=(-5.0, 5.0), rng=gen)
            e.append(abs(m - np.median(x)))
        err[eps].append(np.mean(e))


def theory(n, eps):
    k = math.floor(n ** 0.4)
    iqr = 1.349 * math.sqrt(math.pi / 2) * math.sqrt(k / n)
    return 2 * 8 * k ** (1 / 3 + 0.1) * iqr / (k * eps * 0.95)  # W gets 95 % of epsilon (the count gets 5 %)


fig, ax = plt.subplots(figsize=(6.4, 4.4))
for eps, style in zip(epsilons, ["o", "s", "^"]):
    line, = ax.plot(ns, err[eps], style, label=fr"$\varepsilon = {eps:g}$: $E|M - T|$")
    ax.plot(ns, [theory(n, eps) for n in ns], "-", color=line.get_color(), alpha=0.6)
ax.plot(ns, 1.2533 / np.sqrt(ns), "k--", label=r"sampling s.d. of the median, $\propto n^{-1/2}$")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("rows n")
ax.set_ylabel("mean |private - non-private|")
ax.set_title("subsample-and-aggregate, T = median (lines: theory, slope -0.527)")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
save(fig, "subsample_and_aggregate")

# %%
# The fitted log-log slopes of the error (the theory: -0.527 once the quartiles are found):
for eps in epsilons:
    slope = np.polyfit(np.log(ns), np.log(err[eps]), 1)[0]
    print(f"epsilon = {eps:4g}: slope {slope:+.3f}")
