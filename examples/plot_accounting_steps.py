"""
Epsilon of DP-SGD against the number of steps: RDP, PLD and GDP
================================================================

DP-SGD with Poisson sampling at rate ``q = 256 / 60000`` and noise multiplier ``z = 1`` is
composed over ``T`` steps, and each accountant reports the epsilon at ``delta = 1e-5``:

* **RDP** (:class:`dpfast.accounting.RDPAccountant`): the Rényi curve of the sampled Gaussian
  mechanism (Mironov, Talwar & Zhang 2019), composed by addition and converted to
  (epsilon, delta) by the conversion of Canonne, Kamath & Steinke (2020).  An upper bound, but
  not tight: the conversion loses, most for short runs.
* **PLD** (:class:`dpfast.accounting.PLDAccountant`): the privacy-loss distribution composed
  by FFT with pessimistic discretisation (Koskela, Jälkö & Honkela 2020; Doroshenko et al. 2022).
  A certified upper bound within the discretisation error of the true epsilon: the tightest.
* **GDP / CLT** (:func:`dpfast.accounting.clt_mu_poisson_gaussian`): the central limit
  approximation mu = q sqrt(T (e^{1/z^2} - 1)) of Bu, Dong, Long & Su (2020), then the mu-GDP
  epsilon.  An *approximation*, not a bound: here it lies below the PLD curve, i.e. it
  under-reports epsilon, so dpfast never uses it for a guarantee.
"""
import matplotlib.pyplot as plt
import numpy as np

from dpfast import accounting

from _common import save, size

q, z, delta = 256 / 60000, 1.0, 1e-5
steps = np.unique(np.geomspace(10, 15000, size(6, 24)).astype(int))

event = accounting.PoissonSampled(q, accounting.Gaussian(noise_multiplier=z))  # one DP-SGD step
eps = {"RDP": [], "PLD": [], "GDP (CLT)": []}
for T in steps:
    eps["RDP"].append(accounting.RDPAccountant().compose(event, count=int(T)).get_epsilon(delta))
    eps["PLD"].append(accounting.PLDAccountant().compose(event, count=int(T)).get_epsilon(delta))
    mu = accounting.clt_mu_poisson_gaussian(noise_multiplier=z, sample_rate=q, steps=int(T)).mu
    eps["GDP (CLT)"].append(accounting.gdp_epsilon(mu, delta))

fig, ax = plt.subplots(figsize=(6.4, 4.2))
for (name, values), style in zip(eps.items(), ["o-", "s-", "^--"]):
    ax.plot(steps, values, style, label=name, markersize=4)
ax.set_xscale("log")
ax.set_xlabel("steps T")
ax.set_ylabel(r"$\varepsilon$ at $\delta = 10^{-5}$")
ax.set_title(f"DP-SGD, q = {q:.4f}, z = {z}")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
fig.tight_layout()
save(fig, "accounting_steps")

# %%
# The numbers behind the last point (T = 15,000 steps): the PLD epsilon is the smallest
# certified one; RDP is about 9 % above it; the CLT number is below both.
for name, values in eps.items():
    print(f"{name:10s} epsilon = {values[-1]:.4f}")
