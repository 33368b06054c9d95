"""The Perturb template (Algorithm 1 of Block, Bun, Desai, Shetty & Wu 2024).

See: :doc:`/theory/public_data` sections 2.1 (Algorithm 1), 3.2 (Lemmas 3/9) and 4.2 (calibration).

Perturb releases ``t = f_bar(Z) + gamma * zeta`` for the m public points Z, with zeta i.i.d.
N(0, 1) or Lap(1), and then projects ``t`` back onto the class (a least-squares oracle call
on the public points).  The released vector is exactly the Gaussian (Laplace) mechanism
applied to the m-vector ``v = (f_bar(Z_1), ..., f_bar(Z_m))``; the projection is
post-processing.  If the first-stage learner is ``rho``-stable in the empirical norm
``||g||_m = sqrt((1/m) sum_k g(Z_k)^2)``, i.e. ``||f_bar(D) - f_bar(D')||_m <= rho`` for every
pair of neighbouring private datasets, then

* l2 sensitivity of v:  ``Delta_2 = sqrt(m) * rho``  (since ||v - v'||_2 = sqrt(m) ||.||_m);
* l1 sensitivity of v:  ``Delta_1 <= sqrt(m) * Delta_2 = m * rho`` (Cauchy-Schwarz).

dpfast calibrates these exactly (:doc:`/theory/public_data`, "tight mode"): Gaussian ``gamma`` is the smallest
standard deviation that makes N(0, gamma^2 I_m) (eps, delta)-DP at l2 sensitivity Delta_2
(analytic Gaussian mechanism, Balle & Wang 2018, via :func:`dpfast.calibrate.gaussian_sigma`);
Laplace ``gamma = Delta_1 / eps`` (pure eps-DP).  This is the only calibration offered.  The
paper's Gaussian condition (eq. 14, Lemma 3/9) is *not* offered: it drops a factor and its tail
event has probability about sqrt(delta) for small m, so it under-reports epsilon (m = 1, rho = 1,
eps = 1, delta = 1e-5 gives gamma ~ 1.95, whose true delta(1) is ~ 7.9e-3).

**Privacy requirement on the projection (:doc:`/theory/public_data`):** its output must be a function of the
public points and the noisy vector only -- no warm start from f_bar, no f_bar tie-breaks.
:func:`project_linear` returns the minimum-norm least-squares solution, a deterministic
function of ``(Z, t)``.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from dpfast._validation import as_array, check_delta, check_epsilon, check_positive
from dpfast.accounting import Gaussian, Laplace
from dpfast.budget import refuse_unbudgeted
from dpfast.calibrate import gaussian_sigma, laplace_scale
from dpfast.random import RandomLike, check_random_state, standard_laplace, standard_normal

#: The calibrations :func:`perturb_noise_scale` offers; each is a proven (eps, delta) guarantee.
CALIBRATIONS = ("exact",)

__all__ = [
    "CALIBRATIONS",
    "PerturbResult",
    "perturb_noise_scale",
    "perturb",
    "project_linear",
]


@dataclass(frozen=True)
class PerturbResult:
    """Output of :func:`perturb`.

    ``noisy_values`` is the (eps, delta)-DP release ``f_bar(Z) + gamma * zeta``;
    ``noise_scale`` is gamma (Gaussian standard deviation or Laplace scale);
    ``sensitivity`` is the l2 (Gaussian) or l1 (Laplace) sensitivity gamma was calibrated to.
    """

    noisy_values: np.ndarray
    noise_scale: float
    sensitivity: float
    mechanism: str
    epsilon: float
    delta: float

    def description(self, neighbours: str = "replace_one"):
        """This release as a :mod:`dpfast.accounting` mechanism description, for composition.

        ``neighbours`` is the relation under which the stability bound (hence ``sensitivity``)
        holds.  Gaussian: ``Gaussian(noise_multiplier=gamma / sensitivity)``; Laplace:
        ``Laplace(scale=gamma, sensitivity)``.
        """
        if self.mechanism == "gaussian":
            return Gaussian(self.noise_scale / self.sensitivity, self.sensitivity, neighbours=neighbours)
        return Laplace(self.noise_scale, self.sensitivity, neighbours=neighbours)


def _mechanism(mechanism: Optional[str], delta: float) -> str:
    if mechanism is None:
        return "gaussian" if delta > 0 else "laplace"
    if mechanism not in ("gaussian", "laplace"):
        raise ValueError(f"mechanism must be 'gaussian', 'laplace' or None, got {mechanism!r}")
    if mechanism == "gaussian" and delta <= 0:
        raise ValueError("the Gaussian mechanism needs delta > 0; use mechanism='laplace' for pure DP")
    return mechanism


@functools.lru_cache(maxsize=256)
def _gaussian_sigma_cached(epsilon: float, delta: float, sensitivity: float) -> float:
    return float(gaussian_sigma(epsilon, delta, sensitivity))


def perturb_noise_scale(
    m: int,
    stability: float,
    epsilon: float,
    delta: float = 0.0,
    mechanism: Optional[str] = None,
    *,
    l1_sensitivity: Optional[float] = None,
    calibration: str = "exact",
) -> tuple[float, float]:
    """Noise scale gamma of Perturb for an m-point public sample; returns ``(gamma, sensitivity)``.

    Parameters
    ----------
    m : int
        Number of public points.
    stability : float
        rho: a bound on ``||f_bar(D) - f_bar(D')||_m`` over all neighbouring private datasets.
    epsilon, delta :
        Target guarantee.  ``mechanism=None`` picks Gaussian when ``delta > 0``, Laplace when
        ``delta == 0``.
    l1_sensitivity : float, optional
        Laplace only: a (smaller) proven bound on ``||f_bar(D)(Z) - f_bar(D')(Z)||_1``; the
        default is ``m * rho``.  The minimum of the two is used.
    calibration : {"exact"}
        The only value: Gaussian mechanism on R^m with l2 sensitivity sqrt(m)*rho and the
        analytic calibration of Balle & Wang (2018), i.e. the smallest gamma with
        ``Phi(D/(2 gamma) - eps gamma/D) - e^eps Phi(-D/(2 gamma) - eps gamma/D) <= delta``,
        D = sqrt(m) rho; Laplace with l1 sensitivity m*rho (Dwork, McSherry, Nissim & Smith
        2006).  The paper's eq. (14) calibration (Block et al. 2024, Lemma 3/9) was removed:
        it is not a valid (eps, delta) guarantee (see the module docstring).

    Guarantee: releasing ``f_bar(Z) + gamma * zeta`` is (epsilon, delta)-DP (Gaussian) or
    epsilon-DP (Laplace) whenever ``stability`` bounds ``||f_bar(D) - f_bar(D')||_m``.
    """
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
        raise TypeError(f"m (the number of public points) must be an integer, got {type(m).__name__}")
    m = int(m)
    if m < 1:
        raise ValueError(f"m (the number of public points) must be >= 1, got m={m}")
    rho = check_positive(stability, "stability", allow_array=False)
    epsilon = check_epsilon(epsilon, allow_array=False)
    delta = check_delta(delta)
    mech = _mechanism(mechanism, delta)
    if calibration not in CALIBRATIONS:
        hint = (" (the paper's eq. (14) Gaussian calibration was removed: it under-reports epsilon)"
                if calibration == "paper" else "")
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}{hint}")
    if mech == "gaussian":
        sens = math.sqrt(m) * rho
        return _gaussian_sigma_cached(epsilon, delta, sens), sens
    sens = m * rho
    if l1_sensitivity is not None:
        sens = min(sens, check_positive(l1_sensitivity, "l1_sensitivity", allow_array=False))
    # Dwork, McSherry, Nissim & Smith (2006): b = Delta_1 / epsilon (dpfast.calibrate.laplace_scale,
    # its one home); a sensitivity that is 0 or overflowed is refused just below
    gamma = float(laplace_scale(epsilon, sens)) if 0.0 < sens < math.inf else (0.0 if sens == 0.0 else math.inf)
    # A scale that overflows (noise +-inf) or underflows to 0 (no noise at all) is no Laplace
    # mechanism: refused here, from the public parameters, before perturb draws anything.
    if not 0.0 < gamma < math.inf:
        raise ValueError(f"the Laplace noise scale m * stability / epsilon = {sens:g} / {epsilon:g} is not a "
                         "positive finite double; rescale the stability bound or change epsilon")
    return gamma, sens


def perturb(
    public_values,
    *,
    stability: float,
    epsilon: float,
    delta: float = 0.0,
    mechanism: Optional[str] = None,
    l1_sensitivity: Optional[float] = None,
    calibration: str = "exact",
    rng: RandomLike = None,
) -> PerturbResult:
    """Algorithm 1 (Perturb), noise step: release ``f_bar(Z) + gamma * zeta``.

    Guarantee: if ``public_values = f_bar(D)(Z)`` for a learner with
    ``||f_bar(D) - f_bar(D')||_m <= stability`` for all neighbouring D, D' (under whichever
    neighbouring relation that bound was proved for), the returned ``noisy_values`` are
    (epsilon, delta)-DP (Gaussian) or epsilon-DP (Laplace), and so is anything computed from
    them and the public points alone (e.g. :func:`project_linear`).  See :doc:`/theory/public_data`, 4.2.  The noise is drawn from ``rng`` (see :mod:`dpfast.random`); like every
    continuous-noise release it is subject to floating-point caveats (Mironov 2012).
    """
    refuse_unbudgeted("perturb")  # before any data is read: it cannot charge an open budget
    v = np.asarray(public_values, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"public_values must be a non-empty 1-D array (f_bar at the public points), got shape {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError("public_values contains NaN or infinite entries")
    delta = check_delta(delta)
    mech = _mechanism(mechanism, delta)
    gamma, sens = perturb_noise_scale(
        v.size, stability, epsilon, delta, mech, l1_sensitivity=l1_sensitivity, calibration=calibration
    )
    gen = check_random_state(rng)
    if mech == "gaussian":
        noise = standard_normal(gen, v.size)
    else:
        noise = standard_laplace(gen, v.size)
    return PerturbResult(v + gamma * noise, float(gamma), float(sens), mech, float(epsilon), float(delta))


def project_linear(Z, targets, *, rcond: Optional[float] = None) -> np.ndarray:
    """Perturb's projection for linear predictors: ``argmin_w ||Z w - t||_2^2`` (minimum norm).

    Deterministic in ``(Z, t)`` (SVD-based ``numpy.linalg.lstsq``); never warm-started, so it
    is post-processing of the noisy public vector (:doc:`/theory/public_data`).
    """
    Z = as_array(Z, "Z", np.float64)  # (as_array: a number beyond a double is a ValueError, not OverflowError)
    t = as_array(targets, "targets", np.float64)
    if Z.ndim != 2 or t.shape != (Z.shape[0],):
        raise ValueError(f"Z must be (m, p) and targets (m,), got {Z.shape} and {t.shape}")
    coef, *_ = np.linalg.lstsq(Z, t, rcond=rcond)
    return coef
