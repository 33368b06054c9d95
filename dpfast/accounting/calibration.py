"""Calibration: the one home of noise calibration, both closed forms and accountant searches.

* Closed forms (Laplace and Gaussian; their home is ``dpfast.accounting._closed_forms``, which the
  accountants import without a circle; re-exported here and by :mod:`dpfast.calibrate`, the
  user-facing path): :func:`laplace_scale`, :func:`laplace_epsilon`, :func:`gaussian_sigma`,
  :func:`gaussian_delta`, :func:`gaussian_epsilon`, :func:`gaussian_log_delta`.  See
  :doc:`/theory/mechanisms` (Samplers).
* One accountant-driven search for every caller (:func:`calibrate_parameter`): given
  ``make_event(x)`` (an event whose privacy loss decreases as the noise parameter x grows), the
  smallest x, to a relative tolerance, whose composed epsilon at ``delta`` -- computed by the
  chosen accountant -- is at most the target.  The answer is always on the safe side: its
  epsilon was computed and verified.  :func:`calibrate_noise_multiplier` (DP-SGD) stages that
  search to reuse work.

The other privacy formulas each have one home: composition and conversions in
:mod:`dpfast.accounting` (objective perturbation and AMP in ``accounting.objective_perturbation``,
mu-GDP in ``accounting.gdp``), the discrete Gaussian in ``mechanisms.discrete``, randomized
response in ``accounting.pairs.rr_log_probabilities``, the neighbour factor in
``accounting.Neighbours.sum_factor``.  Every inversion of a privacy figure (the smallest safe
noise, the largest safe mu) is :func:`dpfast._safe_root.safe_root`.
"""
from __future__ import annotations

import functools
import math
import warnings
from typing import Callable, Optional, Union

import numpy.typing as npt

from dpfast._safe_root import NoSafeValue, safe_root
from dpfast._validation import (
    check_delta,
    check_epsilon,
    check_real,
)
from dpfast.accounting._closed_forms import (  # the closed forms' home (re-exported here)
    gaussian_delta,
    gaussian_epsilon,
    gaussian_log_delta,
    gaussian_sigma,
    laplace_epsilon,
    laplace_scale,
)
from dpfast.accounting.base import PrivacyAccountant, check_count, make_accountant
from dpfast.accounting.events import DpEvent, Gaussian, PoissonSampled, SelfComposed
from dpfast.accounting.pld import GridCoarsenedWarning, PLDAccountant

__all__ = [
    "laplace_scale",
    "laplace_epsilon",
    "gaussian_sigma",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_log_delta",
    "calibrate_parameter",
    "calibrate_noise_multiplier",
    "accountant_gaussian_multiplier",
    "certified_gaussian_multiplier",
]

# ----------------------------------------------------------------------------------------------
# searches with an accountant
# ----------------------------------------------------------------------------------------------
def _dpsgd_event(sigma: float, q: float) -> DpEvent:
    return Gaussian(sigma) if q == 1.0 else PoissonSampled(q, Gaussian(sigma))


#: Noise multipliers searched: [SIGMA_MIN, SIGMA_MAX] (outside, the answer is refused or clamped).
SIGMA_MIN, SIGMA_MAX = 1e-6, 1e8
#: Smallest accepted ``rtol``: the epsilons compared are themselves accurate to about 1e-12.
RTOL_MIN = 1e-12
def _solve(eps_of: Callable[[float], float], target: float, start: float, rtol: float, lo_factor: float = 0.5,
           lo_bound: float = SIGMA_MIN, hi_bound: float = SIGMA_MAX) -> float:
    """Smallest sigma in [lo_bound, hi_bound] (to relative rtol) with eps_of(sigma) <= target,
    for eps_of decreasing: :func:`dpfast._safe_root.safe_root` on log eps - log target, bracketing
    from ``start`` in steps of ``lo_factor``.  The answer's epsilon was computed and is <= target;
    a sigma whose epsilon cannot be computed (e.g. a privacy-loss range too wide for the grid)
    counts as not verified."""
    log_target = math.log(target)

    def excess(sigma: float) -> float:
        e = eps_of(sigma)
        return (math.log(e) if e > 0 else -745.0) - log_target

    try:
        return safe_root(excess, start, rtol=rtol, lo=lo_bound, hi=hi_bound, step=-math.log(lo_factor))
    except NoSafeValue as exc:
        cause = f" ({exc.__cause__})" if exc.__cause__ is not None else ""
        raise ValueError(f"no noise multiplier up to {hi_bound:g} reaches the target epsilon{cause}") from exc


def calibrate_noise_multiplier(target_epsilon: float, delta: float, sample_rate: float, steps: int,
                               accountant: str = "pld", *, value_discretization: float = 1e-4,
                               rtol: float = 1e-3, orders: Optional[npt.ArrayLike] = None) -> float:
    """Smallest noise multiplier z (to relative ``rtol``) for which ``steps`` compositions of the
    Poisson-subsampled Gaussian (rate ``sample_rate``; q = 1: the Gaussian) are
    (target_epsilon, delta)-DP under add/remove neighbours.

    The returned z is always on the safe side: its epsilon (pessimistic PLD, or RDP with the
    improved conversion) was computed and is <= target_epsilon.  ``rtol`` is in [1e-12, 0.5);
    the search covers noise multipliers in [1e-6, 1e8] (a target met at 1e-6 returns the
    smallest verified value found; one not met at 1e8 raises ValueError), and every loop in it
    is bounded, so it always returns or raises.  When ``sample_rate * steps <= delta`` every
    noise multiplier meets the target ((0, q T)-DP by basic composition) and 1e-6 is returned
    at once.

    Full batches (``sample_rate`` 1) with ``"pld"``: the analytic Gaussian's multiplier for
    sensitivity sqrt(steps), times 1 + min(rtol, 1e-9), verified by the accountant (which answers
    Gaussians in closed form); the search below only when that fails.

    Work is reused across the search: the bracket comes from the cheap RDP calibration (RDP
    epsilons are upper bounds, so the PLD's z is below the RDP one); the PLD search first runs
    on a grid 16 times coarser (still a certified upper bound, so its z is valid), and the final
    refinement at ``value_discretization`` starts from that bracket; Brent's method on
    log epsilon vs log z; discretizations are cached per event.
    """
    e = check_epsilon(check_real(target_epsilon, "target_epsilon", allow_nan=False), allow_array=False,
                      name="target_epsilon")
    delta = check_delta(delta, allow_zero=False)
    q = check_real(sample_rate, "sample_rate", allow_nan=False)
    if not 0 < q <= 1:
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
    steps = check_count(steps)
    if steps == 0:
        raise ValueError("steps must be >= 1")
    if not isinstance(accountant, str) or accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    rtol = check_real(rtol, "rtol", allow_nan=False)
    if not RTOL_MIN <= rtol < 0.5:
        raise ValueError(f"rtol must be in [{RTOL_MIN:g}, 0.5), got {rtol!r}")
    h = check_real(value_discretization, "value_discretization", allow_nan=False)
    if not 0 < h <= 1:
        raise ValueError(f"value_discretization must be in (0, 1], got {value_discretization!r}")

    if q * steps <= delta:
        # Every step is (0, q)-DP whatever z (the hockey-stick divergence at epsilon 0 of either
        # pair is q TV(N(0, z^2), N(1, z^2)) <= q), so the steps are (0, q steps)-DP by basic
        # composition: every z meets the target, the search's floor is the answer.  (Searching
        # took 14-50 s at q = 1e-45: tiny z give privacy-loss ranges far too wide for a grid.)
        return SIGMA_MIN

    def event(z: float) -> DpEvent:
        return SelfComposed(_dpsgd_event(z, q), steps)

    if q == 1.0 and accountant == "pld":
        # steps Gaussians of multiplier z are exactly one Gaussian of l2 sensitivity sqrt(steps)
        # and noise z (Dong, Roth & Su 2022, Cor. 3.3), whose smallest noise is the analytic
        # Gaussian's, and the PLD accountant answers them in that closed form: verified just
        # above it (the search below ended anywhere within rtol of the root: up to 1e-3 above)
        try:
            z_try = float(gaussian_sigma(e, delta, math.sqrt(steps))) * (1.0 + min(rtol, 1e-9))
        except (ValueError, OverflowError):
            z_try = math.nan
        if SIGMA_MIN <= z_try <= SIGMA_MAX and PLDAccountant(h).compose(event(z_try)).get_epsilon(delta) <= e:
            return z_try

    # RDP: start from the GDP/CLT-style guess z ~ q sqrt(T) / mu (any start works)
    guess = max(1e-3, q * math.sqrt(steps) * math.sqrt(2 * math.log(1 / delta)) / e) if q < 1 else \
        math.sqrt(steps * 2 * math.log(1.25 / delta)) / e
    rdp = make_accountant("rdp", orders=orders)
    z_rdp = calibrate_parameter(event, e, delta, rdp, start=max(guess, 0.3),
                      rtol=rtol if accountant == "rdp" else 1e-2)
    if accountant == "rdp" or z_rdp == SIGMA_MIN:  # (the PLD's multiplier is below the RDP one)
        return z_rdp
    coarse = min(16 * h, 0.05)
    z_c = calibrate_parameter(event, e, delta, PLDAccountant(coarse, refine=False), start=z_rdp, rtol=1e-2,
                    lo_factor=0.8) if coarse > h else z_rdp
    return calibrate_parameter(event, e, delta, PLDAccountant(h), start=z_c, rtol=rtol, lo_factor=0.97)


def calibrate_parameter(make_event: Callable[[float], DpEvent], epsilon: float, delta: float,
              accountant: Union[str, PrivacyAccountant] = "pld", lo: float = SIGMA_MIN,
              hi: float = SIGMA_MAX, *, start: float = 1.0, rtol: float = 1e-3,
              lo_factor: float = 0.5) -> float:
    """Smallest noise parameter x in [``lo``, ``hi``] (to relative ``rtol``) for which the event
    ``make_event(x)`` is (``epsilon``, ``delta``)-DP according to ``accountant``.

    ``make_event`` must give events whose privacy loss decreases as x grows (a noise multiplier,
    a noise scale...); wrap a repeated release in :class:`~dpfast.accounting.SelfComposed`.
    ``accountant``: ``"pld"`` / ``"rdp"`` or an accountant instance whose configuration is used
    (each evaluation composes into a fresh, empty one: :func:`make_accountant`).

    The answer is on the safe side: make_event(answer)'s epsilon was computed and is <=
    ``epsilon`` (a value whose epsilon cannot be computed counts as not private).  Search:
    :func:`dpfast._safe_root.safe_root` (geometric bracketing from ``start`` in steps of
    ``lo_factor``, Brent's method on log epsilon against log x, then bisection of the verified
    bracket; every loop is bounded).  A target met at ``lo`` returns ``lo``; one not met at ``hi`` raises
    ValueError.
    """
    if not callable(make_event):
        raise TypeError("make_event must be a callable x -> DpEvent")
    e = check_epsilon(check_real(epsilon, "epsilon", allow_nan=False), allow_array=False)
    delta = check_delta(delta, allow_zero=False)
    rtol = check_real(rtol, "rtol", allow_nan=False)
    if not RTOL_MIN <= rtol < 0.5:
        raise ValueError(f"rtol must be in [{RTOL_MIN:g}, 0.5), got {rtol!r}")
    lo, hi = check_real(lo, "lo", allow_nan=False), check_real(hi, "hi", allow_nan=False)
    if not 0 < lo < hi < math.inf:
        raise ValueError(f"need 0 < lo < hi < inf, got lo={lo!r}, hi={hi!r}")
    template = make_accountant(accountant)  # validates the name once

    def eps_of(x: float) -> float:
        # a trial value composed on a coarser grid is still verified (an upper bound): the
        # search's internal accountants do not warn about it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GridCoarsenedWarning)
            return make_accountant(template).compose(make_event(x)).get_epsilon(delta)

    return _solve(eps_of, e, check_real(start, "start", allow_nan=False), rtol, lo_factor, lo, hi)


def certified_gaussian_multiplier(epsilon: float, delta: float, sensitivity: float = 1.0,
                                  accountant: str = "pld", hi: float = SIGMA_MAX) -> float:
    """Smallest noise multiplier z in [z0, ``hi``] (to relative 1e-9) for which one
    ``Gaussian(z, sensitivity)`` is (epsilon, delta)-DP by ``accountant`` (``"pld"``, ``"rdp"``),
    verified by it: the one Gaussian multiplier search of the package.

    z0 is the analytic Gaussian's multiplier (Balle & Wang 2018, Theorem 8), exact, so no valid z
    lies below it and the accountants' (upper-bound) epsilons only ask for more.  First trial:
    z0 (1 + 1e-9), one evaluation (the PLD accountant answers a Gaussian with the same closed
    form, rounded up, so it passes: microseconds, where the discretized PLD took up to 1 s and
    rejected it for 43 of 75 (epsilon, delta) in [0.01, 5] x {1e-3, 1e-5, 1e-8}); otherwise
    :func:`calibrate_parameter`
    (:func:`dpfast._safe_root.safe_root`) searches [z0, hi] from z0.  Raises ValueError where the
    accountant cannot evaluate the event at z0 (a privacy-loss range too wide for its grid) or
    certifies no z up to ``hi``."""
    z0 = float(gaussian_sigma(epsilon, delta, sensitivity)) / sensitivity

    def make(z: float) -> DpEvent:
        return Gaussian(noise_multiplier=z, sensitivity=sensitivity)

    z_try = z0 * (1.0 + 1e-9)
    with warnings.catch_warnings():  # a trial on a coarsened grid is still an upper bound
        warnings.simplefilter("ignore", GridCoarsenedWarning)
        if make_accountant(accountant).compose(make(z_try)).get_epsilon(delta) <= epsilon:
            return z_try
    return float(calibrate_parameter(make, epsilon, delta, accountant, lo=z0, hi=hi, start=z0, rtol=1e-9))


@functools.lru_cache(maxsize=128)
def accountant_gaussian_multiplier(epsilon: float, delta: float, sensitivity: float,
                                   accountant: str = "pld") -> tuple[float, float, Optional[str]]:
    """(noise multiplier, epsilon_, accountant_) of one Gaussian of l2 ``sensitivity`` at
    (epsilon, delta): the smallest multiplier (to 1e-9) that ``accountant`` finds (epsilon, delta)-DP
    in [z0, 2 z0], z0 the analytic one (Balle & Wang 2018, Thm. 8), which the accountant's
    bound puts a hair above epsilon (:func:`certified_gaussian_multiplier`), and the
    accountant's epsilon for it.  Where the accountant certifies none there (the PLD accountant
    answers a Gaussian in closed form up to mu = 1e150; it used to fail to discretise a
    multiplier ~1e-3, epsilon ~1e3): the analytic multiplier, ``epsilon`` and no accountant.
    Cached: public parameters only."""
    z0 = float(gaussian_sigma(epsilon, delta, sensitivity)) / sensitivity
    try:
        z = certified_gaussian_multiplier(epsilon, delta, sensitivity, accountant, hi=2.0 * z0)
    except ValueError:
        return z0, epsilon, None
    event = Gaussian(noise_multiplier=z, sensitivity=sensitivity)
    return z, float(make_accountant(accountant).compose(event).get_epsilon(delta)), accountant
