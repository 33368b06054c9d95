"""
Privacy-utility on UCI Adult: objective perturbation, AMP, output perturbation, DP-SGD
=======================================================================================

Test accuracy of private logistic regression on Adult (the official 32,561 / 16,281 split,
shipped with dpfast) over epsilon from 0.05 to 10 at ``delta = 1e-5``, for the four private
ERM methods of :mod:`dpfast.linear_model` and :mod:`dpfast.sgd`.  Each point is the mean over
seeds; the error bars are one standard deviation across seeds.

* ``"amp"``: Algorithm 1 of Redberg, Koskela & Wang (2024): gradient-clipped objective
  perturbation solved to a certified gradient norm, plus a small Gaussian output noise.
* ``"objective"``: objective perturbation (the same paper's tight analysis), run as Algorithm 1
  with a tiny tolerance because the theorem covers only the exact minimiser.
* ``"output"``: Gaussian output perturbation of the regularised minimiser (Chaudhuri,
  Monteleoni & Sarwate 2011, with Gaussian noise).
* DP-SGD (Abadi et al. 2016) with Poisson sampling, noise calibrated by the PLD accountant.
  Its learning rate 2.0 was picked once from {0.1, 0.5, 2.0} by test accuracy at epsilon = 1;
  that choice is not charged to the budget (the "dishonest" tuning of Redberg et al.), so
  DP-SGD is if anything favoured here.

All four are (epsilon, delta)-DP under add/remove neighbours; the non-private logistic
regression is the dashed line.
"""
import matplotlib.pyplot as plt
import numpy as np

from dpfast.datasets import load_adult
from dpfast.linear_model import LogisticRegression
from dpfast.sgd import DPSGDClassifier

from _common import save, size

X_tr, y_tr, X_te, y_te = load_adult()
epsilons = size([0.05, 1.0, 10.0], [0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0])
seeds = range(size(2, 10))
delta = 1e-5


def fit(method, eps, seed):
    if method == "DP-SGD":
        model = DPSGDClassifier(epsilon=eps, delta=delta, epochs=size(2, 10), batch_size=256,
                                clip_norm=1.0, learning_rate=2.0, random_state=seed)
    else:
        model = LogisticRegression(epsilon=eps, delta=delta, method=method, random_state=seed)
    return model.fit(X_tr, y_tr).score(X_te, y_te)


methods = ["amp", "objective", "output", "DP-SGD"]
acc = {m: np.array([[fit(m, e, s) for s in seeds] for e in epsilons]) for m in methods}

fig, ax = plt.subplots(figsize=(6.4, 4.2))
for m, marker in zip(methods, "osD^"):
    ax.errorbar(epsilons, 100 * acc[m].mean(axis=1), yerr=100 * acc[m].std(axis=1), marker=marker,
                capsize=3, markersize=4, label=m)
baseline = 100 * LogisticRegression(epsilon=1e9, delta=delta, random_state=0).fit(X_tr, y_tr).score(X_te, y_te)
ax.axhline(baseline, color="gray", linestyle="--", label="epsilon = 1e9 (nearly non-private)")
ax.set_xscale("log")
ax.set_xlabel(r"$\varepsilon$ ($\delta = 10^{-5}$)")
ax.set_ylabel("test accuracy (%)")
ax.set_title(f"UCI Adult, {len(seeds)} seeds per point")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
save(fig, "privacy_utility_adult")

# %%
# Mean test accuracy (%) per method and epsilon:
print("epsilon   " + "  ".join(f"{m:>9s}" for m in methods))
for i, e in enumerate(epsilons):
    print(f"{e:7.2f}   " + "  ".join(f"{100 * acc[m][i].mean():9.2f}" for m in methods))
