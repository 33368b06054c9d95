"""Mechanism descriptions: small immutable objects that the accountants compose.

Spec: ``accounting.md`` ("One interface").  A description knows

* its RDP curve ``rdp(orders) -> ndarray`` (``inf`` where the order is not bounded), and
* its privacy-loss distribution, as one or two *dominating pairs* (P, Q): the "remove" pair
  and the "add" pair of the add/remove relation (equal for symmetric mechanisms).  The PLD
  accountant discretizes each pair with :meth:`_pld` (pessimistic connect-the-dots and an
  optimistic floor rounding, see :mod:`dpfast.accounting._discretize`).

Neighbouring relation (spec ``mechanisms.md``, Conventions): every description carries
``neighbours``, ``"add_remove"`` by default; ``"replace_one"`` is accepted where the guarantee
is stated for that relation (the sensitivity / epsilon you pass is then the replace-one one).
An accountant refuses to compose descriptions with different relations.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from dpfast._validation import check_neighbours
from dpfast.accounting import _discretize as _disc
from dpfast.accounting import rdp as _rdp

__all__ = [
    "MechanismDescription",
    "Gaussian",
    "Laplace",
    "RandomizedResponse",
    "PureDP",
    "ExponentialMechanism",
    "ReportNoisyMax",
    "PoissonSubsampledGaussian",
    "SampledWithoutReplacementGaussian",
    "FromPrivacyProfile",
    "FromDominatingPair",
]


def _pos(x, name: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}") from exc
    if not (v > 0) or math.isnan(v) or math.isinf(v):
        raise ValueError(f"{name} must be a finite number > 0, got {x!r}")
    return v


def _rate(x, name: str = "sample_rate") -> float:
    try:
        v = float(x)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}") from exc
    if not (0.0 < v <= 1.0):
        raise ValueError(f"{name} must be in (0, 1], got {x!r}")
    return v


class MechanismDescription:
    """Base class of the mechanism descriptions (immutable, hashable).

    Subclasses implement ``rdp(orders)`` and ``_pld(h, tail)``; ``symmetric`` says whether
    the add and remove pairs coincide (then the PLD accountant discretizes one of them).
    """

    symmetric: bool = True
    neighbours: str = "add_remove"

    def rdp(self, orders) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _pld(self, h: float, tail: float, direction: str) -> "_disc.StepPMF":  # pragma: no cover
        raise NotImplementedError


@dataclass(frozen=True)
class Gaussian(MechanismDescription):
    """Gaussian mechanism: noise N(0, sigma^2) with sigma = noise_multiplier * sensitivity.

    Privacy depends only on ``noise_multiplier`` (mu = 1/noise_multiplier in GDP terms);
    ``sensitivity`` is the l2 sensitivity under ``neighbours`` and is kept for the record.
    RDP alpha/(2 z^2) (spec ``accounting.md``, RDP); PLD: L ~ N(mu^2/2, mu^2) (spec, PLD).
    """

    noise_multiplier: float
    sensitivity: float = 1.0
    neighbours: str = "add_remove"

    def __post_init__(self):
        object.__setattr__(self, "noise_multiplier", _pos(self.noise_multiplier, "noise_multiplier"))
        object.__setattr__(self, "sensitivity", _pos(self.sensitivity, "sensitivity"))
        check_neighbours(self.neighbours)

    @property
    def mu(self) -> float:
        return 1.0 / self.noise_multiplier

    def rdp(self, orders) -> np.ndarray:
        return _rdp.gaussian_rdp(orders, self.noise_multiplier)

    def _pld(self, h, tail, direction):
        return _disc.subsampled_gaussian_pmf(self.noise_multiplier, 1.0, "remove", h, tail)


@dataclass(frozen=True)
class Laplace(MechanismDescription):
    """Laplace mechanism Lap(scale) for a query with l1 ``sensitivity`` under ``neighbours``.

    Pure (sensitivity/scale)-DP.  RDP: Mironov 2017, Prop. 6 (spec ``accounting.md``).
    PLD: exact law of L = (|x - D| - |x|)/b under Lap(0, b): atoms at +-D/b, density between.
    """

    scale: float
    sensitivity: float = 1.0
    neighbours: str = "add_remove"

    def __post_init__(self):
        object.__setattr__(self, "scale", _pos(self.scale, "scale"))
        object.__setattr__(self, "sensitivity", _pos(self.sensitivity, "sensitivity"))
        check_neighbours(self.neighbours)

    @property
    def epsilon(self) -> float:
        return self.sensitivity / self.scale

    def rdp(self, orders) -> np.ndarray:
        return _rdp.laplace_rdp(orders, self.scale, self.sensitivity)

    def _pld(self, h, tail, direction):
        return _disc.laplace_pmf(self.sensitivity / self.scale, h)


def _rr_pair(epsilon: float, k: int):
    """Worst-case pair of k-ary randomized response, P = M(x), Q = M(x'), with the k - 2
    categories that are neither x's nor x''s merged into one outcome.

    The privacy loss of k-RR takes the values +eps (the true category of x), -eps (that of
    x') and 0 (the others), so merging outcomes of equal likelihood ratio changes neither the
    Renyi divergences nor the PLD, and costs O(1) for any k (k = 2**64 is fine).  Masses in
    log space: hi = e^eps / (e^eps + k - 1), lo = 1 / (e^eps + k - 1), rest = (k - 2) lo, no
    overflow for large eps or k (lo underflows to 0 above eps ~ 745: then an infinite loss
    atom, a pessimistic answer).
    """
    lk1 = math.log(k - 1)  # exact for Python ints of any size
    L = float(np.logaddexp(0.0, lk1 - epsilon))  # log(1 + (k - 1) e^-eps)
    hi, lo = math.exp(-L), math.exp(-epsilon - L)
    if k == 2:
        return np.array([hi, lo]), np.array([lo, hi])
    rest = math.exp(math.log(k - 2) - epsilon - L)
    return np.array([hi, lo, rest]), np.array([lo, hi, rest])


@dataclass(frozen=True)
class RandomizedResponse(MechanismDescription):
    """k-ary randomized response (k = ``num_categories`` >= 2) with parameter ``epsilon``.

    Reports the true category with probability e^eps/(e^eps + k - 1), each other one with
    1/(e^eps + k - 1): pure epsilon-DP (lectures B1 for k = 2).  Its PLD has atoms at +-eps
    (and 0 for k > 2), discretized exactly when eps is a multiple of the grid step; its RDP is
    exact (Mironov 2017 for k = 2).
    """

    epsilon: float
    num_categories: int = 2
    neighbours: str = "add_remove"

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _pos(self.epsilon, "epsilon"))
        k = self.num_categories
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
            raise ValueError(f"num_categories must be an integer >= 2, got {k!r}")
        object.__setattr__(self, "num_categories", int(k))
        check_neighbours(self.neighbours)

    def rdp(self, orders) -> np.ndarray:
        p, q = _rr_pair(self.epsilon, self.num_categories)
        return _rdp.discrete_pair_rdp(orders, p, q)

    def _pld(self, h, tail, direction):
        p, q = _rr_pair(self.epsilon, self.num_categories)
        return _disc.discrete_pair_pmf(p, q, h)


@dataclass(frozen=True)
class PureDP(MechanismDescription):
    """Any pure ``epsilon``-DP mechanism (under ``neighbours``).

    Accounted through its tight dominating pair, binary randomized response with parameter
    epsilon (every epsilon-DP pair is a post-processing of it: its trade-off function is
    f_{eps,0}, lectures D12-D13), so its RDP is RR's (<= min(eps, alpha eps^2/2), lectures D9)
    and its PLD has atoms at +-eps.  k-fold composition therefore costs at most k*eps.
    """

    epsilon: float
    neighbours: str = "add_remove"

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _pos(self.epsilon, "epsilon"))
        check_neighbours(self.neighbours)

    def rdp(self, orders) -> np.ndarray:
        p, q = _rr_pair(self.epsilon, 2)
        return _rdp.discrete_pair_rdp(orders, p, q)

    def _pld(self, h, tail, direction):
        p, q = _rr_pair(self.epsilon, 2)
        return _disc.discrete_pair_pmf(p, q, h)


@dataclass(frozen=True)
class ExponentialMechanism(PureDP):
    """Exponential mechanism run at privacy parameter ``epsilon`` (pure epsilon-DP, lectures B8).

    Accounted as :class:`PureDP` (a valid, not always tight, bound)."""


@dataclass(frozen=True)
class ReportNoisyMax(PureDP):
    """Report-noisy-max at privacy parameter ``epsilon`` (pure epsilon-DP, lectures B6).

    Accounted as :class:`PureDP`."""


@dataclass(frozen=True)
class PoissonSubsampledGaussian(MechanismDescription):
    """Gaussian mechanism on a Poisson subsample (each record kept w.p. ``sample_rate``).

    The DP-SGD step: clipped sum (add/remove l2 sensitivity C) plus N(0, (z C)^2) noise,
    z = ``noise_multiplier``.  Add/remove neighbours only (the relation of the analyses below).

    * RDP: Mironov, Talwar & Zhang 2019, exact at integer orders, their fractional-order
      series elsewhere (spec ``accounting.md``).
    * PLD: the remove pair ((1-q)N(0,z^2) + qN(1,z^2), N(0,z^2)) and the add pair
      (N(0,z^2), (1-q)N(0,z^2) + qN(1,z^2)) (lectures D20 as corrected, Zhu, Dong & Wang
      2022, Thm 11), composed separately; the accountant reports the worse.
    """

    noise_multiplier: float
    sample_rate: float
    neighbours: str = "add_remove"
    symmetric = False

    def __post_init__(self):
        object.__setattr__(self, "noise_multiplier", _pos(self.noise_multiplier, "noise_multiplier"))
        object.__setattr__(self, "sample_rate", _rate(self.sample_rate))
        if check_neighbours(self.neighbours) != "add_remove":
            raise ValueError(
                "PoissonSubsampledGaussian is analysed under add/remove neighbours only; for "
                "replace-one use SampledWithoutReplacementGaussian (fixed-size batches)"
            )

    def rdp(self, orders) -> np.ndarray:
        return _rdp.poisson_subsampled_gaussian_rdp(orders, self.noise_multiplier, self.sample_rate)

    def _pld(self, h, tail, direction):
        return _disc.subsampled_gaussian_pmf(self.noise_multiplier, self.sample_rate, direction, h, tail)


@dataclass(frozen=True)
class SampledWithoutReplacementGaussian(MechanismDescription):
    """Gaussian mechanism on a uniformly random subset of fixed size m = sample_rate * n.

    Replace-one neighbours (the relation of both analyses; the only one accepted):
    ``noise_multiplier`` = sigma / Delta where Delta is the replace-one l2 sensitivity of the
    sum (2C for per-example clipping at C), the convention of Wang, Balle & Kasiviswanathan
    (2019) and of dp-accounting.

    * RDP: WBK19 Theorem 9 at integer orders, upper-bounded at fractional orders by linear
      interpolation of (alpha-1) eps(alpha) (convex in alpha).
    * PLD: the subset-sampled mechanism is C_p(G_mu)-DP with mu = 1/z (lectures D4, AW Thm
      13.7); the privacy profile of C_p(G_mu) for eps >= 0 is the larger of the two subsampled
      Gaussian pairs' profiles, extended to eps < 0 by symmetry, and its PLD is built from that
      profile by connect-the-dots (one symmetric pair; not the two pairs composed separately,
      which would not be valid under replace-one).
    """

    noise_multiplier: float
    sample_rate: float
    neighbours: str = "replace_one"

    def __post_init__(self):
        object.__setattr__(self, "noise_multiplier", _pos(self.noise_multiplier, "noise_multiplier"))
        object.__setattr__(self, "sample_rate", _rate(self.sample_rate))
        if check_neighbours(self.neighbours) != "replace_one":
            raise ValueError(
                "SampledWithoutReplacementGaussian is analysed under replace-one neighbours only; "
                "for add/remove use PoissonSubsampledGaussian"
            )

    def rdp(self, orders) -> np.ndarray:
        return _rdp.sampled_without_replacement_gaussian_rdp(orders, self.noise_multiplier, self.sample_rate)

    def _pld(self, h, tail, direction):
        if self.sample_rate == 1.0:
            return _disc.subsampled_gaussian_pmf(self.noise_multiplier, 1.0, "remove", h, tail)
        return _disc.symmetric_subsampled_gaussian_pmf(self.noise_multiplier, self.sample_rate, h, tail)


@dataclass(frozen=True, eq=False)
class FromPrivacyProfile(MechanismDescription):
    """A mechanism given by its privacy profile delta(eps) (and optionally its RDP curve).

    ``delta_of_epsilon(eps)`` must be, for every eps >= ``epsilon_min``, an upper bound on
    sup over neighbouring (ordered) pairs of the hockey-stick divergence H_{e^eps}, and must be
    the hockey-stick curve of *some* pair of distributions (convex and non-increasing in e^eps,
    spec lectures D13, D19 Lemma 16).  Accepts scalars; an array is tried first.

    PLD construction ("connect the dots", Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022):
    on the dots eps_j (a sub-grid of the accountant's grid with spacing ``profile_step``)
    the discrete pair whose hockey-stick curve is the chord interpolation, in e^eps, of the
    profile: P-masses p_j = [e^s (d_{j-1} - d_j) - (d_j - d_{j+1})] / (e^s - 1) (s the dot
    spacing), p_inf = delta(eps_max), and p_0 = 1 - the rest.  Chords of a convex function lie
    above it, so this pair dominates the mechanism (pessimistic).  Below eps_0 = ``epsilon_min``
    the profile is replaced by the chord to delta = 1 at e^eps = 0, also an upper bound; with
    ``symmetric=True`` (the profile holds for both orders of every neighbouring pair) the
    tighter reflection 1 - e^eps + e^eps delta(-eps) is used for eps < 0 instead.  The optimistic
    companion moves every mass down one dot: each true loss in (eps_{j-1}, eps_j] is then
    represented by values <= itself, so it is a lower bound for the pair whose profile this is
    (for the mechanism itself only when the given profile is tight).  Its gap is about
    (number of compositions) * ``profile_step``: no Hoeffding correction here.

    ``rdp(orders)``: the given RDP curve, or ``inf`` (no RDP accounting) when none is given.
    """

    delta_of_epsilon: Callable
    rdp_curve: Optional[Callable] = None
    name: str = "FromPrivacyProfile"
    symmetric_profile: bool = False
    epsilon_min: float = 0.0
    profile_step: float = 1e-3
    neighbours: str = "add_remove"

    def __init__(self, delta_of_epsilon: Callable, *, rdp: Optional[Callable] = None,
                 name: str = "FromPrivacyProfile", symmetric: bool = False,
                 epsilon_min: float = 0.0, profile_step: float = 1e-3,
                 neighbours: str = "add_remove"):
        if not callable(delta_of_epsilon):
            raise TypeError("delta_of_epsilon must be callable: eps -> delta(eps)")
        if rdp is not None and not callable(rdp):
            raise TypeError("rdp must be a callable orders -> RDP epsilons, or None")
        em = float(epsilon_min)
        if math.isnan(em) or math.isinf(em):
            raise ValueError(f"epsilon_min must be finite, got {epsilon_min!r}")
        object.__setattr__(self, "delta_of_epsilon", delta_of_epsilon)
        object.__setattr__(self, "rdp_curve", rdp)
        object.__setattr__(self, "name", str(name))
        object.__setattr__(self, "symmetric_profile", bool(symmetric))
        object.__setattr__(self, "epsilon_min", em)
        object.__setattr__(self, "profile_step", _pos(profile_step, "profile_step"))
        object.__setattr__(self, "neighbours", check_neighbours(neighbours))

    def __repr__(self) -> str:
        return self.name

    def rdp(self, orders) -> np.ndarray:
        orders = _rdp.check_orders(orders)
        if self.rdp_curve is None:
            return np.full(orders.shape, np.inf)
        out = np.asarray(self.rdp_curve(orders), dtype=np.float64)
        if out.shape != orders.shape:
            out = np.array([float(self.rdp_curve(float(a))) for a in orders])
        return out

    def _delta(self, eps: np.ndarray) -> np.ndarray:
        try:
            out = np.asarray(self.delta_of_epsilon(eps), dtype=np.float64)
            if out.shape != eps.shape:
                raise ValueError
        except Exception:
            out = np.array([float(self.delta_of_epsilon(float(e))) for e in eps])
        if np.isnan(out).any():
            raise ValueError(f"{self.name}: delta_of_epsilon returned NaN")
        return np.clip(out, 0.0, 1.0)

    def _pld(self, h, tail, direction):
        return _disc.profile_pmf(self._delta, h, tail, self.profile_step, self.epsilon_min,
                                 self.symmetric_profile)


@dataclass(frozen=True, eq=False)
class FromDominatingPair(MechanismDescription):
    """A mechanism dominated by a pair of distributions (P, Q) on a finite outcome space.

    ``p`` and ``q`` are probability vectors over the same outcomes (each sums to 1); the
    mechanism's hockey-stick divergences are assumed <= H_{e^eps}(P || Q) for every eps and
    every ordered neighbouring pair (lectures D19).  Outcomes with q = 0 < p give the +inf
    privacy-loss atom.  ``p_add``/``q_add`` optionally give a different pair for the add
    direction (default: the same pair).  RDP: exact D_alpha(P || Q) (the max over the two pairs).
    """

    p: tuple
    q: tuple
    p_add: Optional[tuple] = None
    q_add: Optional[tuple] = None
    name: str = "FromDominatingPair"
    neighbours: str = "add_remove"

    def __init__(self, p, q, *, p_add=None, q_add=None, name: str = "FromDominatingPair",
                 neighbours: str = "add_remove"):
        pp, qq = self._check(p, q)
        object.__setattr__(self, "p", pp)
        object.__setattr__(self, "q", qq)
        if (p_add is None) != (q_add is None):
            raise ValueError("give both p_add and q_add, or neither")
        if p_add is not None:
            pa, qa = self._check(p_add, q_add)
        else:
            pa = qa = None
        object.__setattr__(self, "p_add", pa)
        object.__setattr__(self, "q_add", qa)
        object.__setattr__(self, "name", str(name))
        object.__setattr__(self, "neighbours", check_neighbours(neighbours))

    @staticmethod
    def _check(p, q):
        p = np.asarray(p, dtype=np.float64).ravel()
        q = np.asarray(q, dtype=np.float64).ravel()
        if p.shape != q.shape or p.size == 0:
            raise ValueError("p and q must be non-empty probability vectors of the same length")
        for v, n in ((p, "p"), (q, "q")):
            if not np.isfinite(v).all() or (v < 0).any() or abs(v.sum() - 1.0) > 1e-9:
                raise ValueError(f"{n} must be a probability vector (entries >= 0 summing to 1)")
        return tuple(p.tolist()), tuple(q.tolist())

    @property
    def symmetric(self) -> bool:  # type: ignore[override]
        return self.p_add is None

    def __repr__(self) -> str:
        return self.name

    def rdp(self, orders) -> np.ndarray:
        out = _rdp.discrete_pair_rdp(orders, np.array(self.p), np.array(self.q))
        if self.p_add is not None:
            out = np.maximum(out, _rdp.discrete_pair_rdp(orders, np.array(self.p_add), np.array(self.q_add)))
        return out

    def _pld(self, h, tail, direction):
        if direction == "add" and self.p_add is not None:
            return _disc.discrete_pair_pmf(np.array(self.p_add), np.array(self.q_add), h)
        return _disc.discrete_pair_pmf(np.array(self.p), np.array(self.q), h)
