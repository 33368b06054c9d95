"""Privacy of a DP-SGD run: which event, which noise multiplier, which epsilon.

Every formula lives in ``dpfast.accounting``; this module only picks the event that
matches the sampling scheme (see :doc:`/theory/erm` DP-SGD, :doc:`/theory/accounting`):

* ``sampling="poisson"``: each step includes each example independently with probability
  q = batch_size / n; the clipped sum has add/remove sensitivity C and gets N(0, (z C)^2) noise;
  T steps = ``SelfComposed(PoissonSampled(q, Gaussian(z)), T)`` (add/remove neighbours;
  Mironov, Talwar & Zhang 2019).  q = 1 (full batch, DP-GD) is the plain ``Gaussian(z)``.
* ``sampling="shuffle"``: each step uses a uniformly random subset of exactly m = batch_size
  examples (drawn afresh every step, without replacement within the step); this is the
  sampling-without-replacement scheme of Wang, Balle & Kasiviswanathan (2019), analysed under
  replace-one neighbours, where the clipped sum has sensitivity 2C; the noise is
  N(0, (2 z C)^2), i.e. noise multiplier z relative to that sensitivity, and T steps =
  ``SampledWithoutReplacement(m/n, Gaussian(z, neighbours="replace_one"))`` composed T times.  (A per-epoch shuffle
  partitioned into disjoint batches is *not* covered by this analysis -- Chua et al. 2024,
  "How private are DP-SGD implementations?" -- and dpfast does not offer it.)
"""
from __future__ import annotations

import math

import dpfast.accounting as acc

__all__ = ["description", "run_event", "run_epsilon", "calibrate_noise_multiplier", "sensitivity_factor"]


def sensitivity_factor(sampling: str) -> float:
    """Sensitivity of the clipped sum in units of clip_norm: 1 (add/remove, ``"poisson"``) or 2
    (replace-one, ``"shuffle"``): ``Neighbours.sum_factor`` of the scheme's relation."""
    return neighbours_of(sampling).sum_factor


def neighbours_of(sampling: str):
    """The neighbouring relation the sampling scheme is analysed under (see the module docstring)."""
    return acc.Neighbours.ADD_REMOVE if sampling == "poisson" else acc.Neighbours.REPLACE_ONE


def description(noise_multiplier: float, sample_rate: float, sampling: str):
    """The event of one step (add/remove for ``"poisson"``, replace-one for ``"shuffle"``)."""
    if sampling == "poisson":
        g = acc.Gaussian(noise_multiplier)
        return g if sample_rate >= 1.0 else acc.PoissonSampled(sample_rate, g)
    g = acc.Gaussian(noise_multiplier, neighbours=neighbours_of(sampling))
    return g if sample_rate >= 1.0 else acc.SampledWithoutReplacement(sample_rate, g)


def run_event(noise_multiplier: float, sample_rate: float, steps: int, sampling: str):
    """The event of a whole run: ``steps`` adaptive steps."""
    return acc.SelfComposed(description(noise_multiplier, sample_rate, sampling), steps)


def run_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                sampling: str, accountant: str) -> float:
    """epsilon of ``steps`` steps at ``delta`` (inf when noise_multiplier == 0)."""
    if noise_multiplier == 0:
        return math.inf
    a = acc.make_accountant(accountant)
    a.compose(run_event(noise_multiplier, sample_rate, steps, sampling))  # the estimators' event_
    return float(a.get_epsilon(delta))


def calibrate_noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int, sampling: str,
                               accountant: str) -> float:
    """Smallest noise multiplier (up to a relative 1e-3) whose run is (epsilon, delta)-DP.

    Poisson sampling: ``dpfast.accounting.calibrate_noise_multiplier`` (a staged search).
    Fixed-size sampling: ``dpfast.accounting.calibrate_parameter`` on the run's event, multipliers in
    [1e-3, 1e6]; both return a multiplier whose epsilon was verified.
    """
    if sampling == "poisson":
        return float(acc.calibrate_noise_multiplier(epsilon, delta, sample_rate, steps, accountant=accountant))
    try:
        return float(acc.calibrate_parameter(lambda z: run_event(z, sample_rate, steps, sampling), epsilon, delta,
                                   accountant, lo=1e-3, hi=1e6, rtol=1e-3))
    except ValueError as exc:
        if "no noise multiplier" in str(exc):
            raise ValueError(f"no noise multiplier up to 1e6 reaches epsilon={epsilon} at delta={delta}") from exc
        raise
