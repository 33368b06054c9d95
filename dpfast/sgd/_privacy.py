"""Privacy of a DP-SGD run: which description, which noise multiplier, which epsilon.

Every formula lives in ``dpfast.accounting``; this module only picks the description that
matches the sampling scheme (spec ``mechanisms.md`` DP-SGD, ``accounting.md``):

* ``sampling="poisson"``: each step includes each example independently with probability
  q = batch_size / n; the clipped sum has add/remove sensitivity C and gets N(0, (z C)^2) noise;
  T steps = ``PoissonSubsampledGaussian(z, q)`` composed T times (add/remove neighbours).
  q = 1 (full batch, DP-GD) is the plain ``Gaussian(z)``.
* ``sampling="shuffle"``: each step uses a uniformly random subset of exactly m = batch_size
  examples (drawn afresh every step, without replacement within the step); this is the
  sampling-without-replacement scheme of Wang, Balle & Kasiviswanathan (2019), analysed under
  replace-one neighbours, where the clipped sum has sensitivity 2C; the noise is
  N(0, (2 z C)^2), i.e. noise multiplier z relative to that sensitivity, and T steps =
  ``SampledWithoutReplacementGaussian(z, m/n)`` composed T times.  (A per-epoch shuffle
  partitioned into disjoint batches is *not* covered by this analysis -- Chua et al. 2024,
  "How private are DP-SGD implementations?" -- and dpfast does not offer it.)
"""
from __future__ import annotations

import math

__all__ = ["description", "run_epsilon", "calibrate", "sensitivity_factor"]


def sensitivity_factor(sampling: str) -> float:
    """Sensitivity of the clipped sum in units of max_norm: 1 (add/remove) or 2 (replace-one)."""
    return 1.0 if sampling == "poisson" else 2.0


def _accounting():
    import dpfast.accounting as acc  # imported lazily: accounting is heavier than sgd

    return acc


def description(noise_multiplier: float, sample_rate: float, sampling: str):
    acc = _accounting()
    if sampling == "poisson":
        if sample_rate >= 1.0:
            return acc.Gaussian(noise_multiplier)
        return acc.PoissonSubsampledGaussian(noise_multiplier, sample_rate)
    if sample_rate >= 1.0:
        return acc.Gaussian(noise_multiplier)
    return acc.SampledWithoutReplacementGaussian(noise_multiplier, sample_rate)


def _make_accountant(accountant: str):
    acc = _accounting()
    if accountant == "pld":
        return acc.PLDAccountant()
    if accountant == "rdp":
        return acc.RDPAccountant()
    raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")


def run_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                sampling: str, accountant: str) -> float:
    """epsilon of ``steps`` steps at ``delta`` (inf when noise_multiplier == 0)."""
    if noise_multiplier == 0:
        return math.inf
    a = _make_accountant(accountant)
    a.compose(description(noise_multiplier, sample_rate, sampling), count=steps)
    return float(a.get_epsilon(delta))


def calibrate(epsilon: float, delta: float, sample_rate: float, steps: int, sampling: str,
              accountant: str) -> float:
    """Smallest noise multiplier (up to a relative 1e-3) whose run is (epsilon, delta)-DP.

    Poisson sampling: ``dpfast.accounting.calibrate_noise_multiplier``.  Fixed-size sampling: a
    bisection on ``run_epsilon`` (decreasing in z), returning the upper end so that the
    guarantee holds.
    """
    if sampling == "poisson":
        acc = _accounting()
        return float(acc.calibrate_noise_multiplier(epsilon, delta, sample_rate, steps, accountant=accountant))

    def eps_of(z):
        return run_epsilon(z, sample_rate, steps, delta, sampling, accountant)

    lo, hi = 1e-3, 1.0
    while eps_of(hi) > epsilon:
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            raise ValueError(f"no noise multiplier up to 1e6 reaches epsilon={epsilon} at delta={delta}")
    if eps_of(lo) <= epsilon:
        return lo
    while hi / lo > 1.0 + 1e-3:
        mid = math.sqrt(lo * hi)
        if eps_of(mid) > epsilon:
            lo = mid
        else:
            hi = mid
    return hi
