"""Privacy events: frozen, data-only descriptions of what a release did.

An event says *which* mechanism ran with *which* parameters; it holds no privacy mathematics.
The accountants (:mod:`dpfast.accounting.rdp`, :mod:`dpfast.accounting.pld`) register, per event
class, how to account it (``functools.singledispatch``), so a new mechanism is one event class
plus its registrations, and a new accountant is one module.  The shape follows the
``DpEvent`` tree of Google's dp-accounting library: leaf mechanisms plus composition nodes
(:class:`PoissonSampled`, :class:`SampledWithoutReplacement`, :class:`SelfComposed`,
:class:`Composed`, :class:`Tuned`).

Every event is immutable and hashable (equal parameters give equal events, so the accountants
cache per event).  :func:`to_dict` / :func:`from_dict` give a compact JSON-able form; events that
hold callables (:class:`FromPrivacyProfile`) cannot be serialised and say so.

Neighbouring relation (:class:`Neighbours`): every leaf carries ``neighbours``,
``Neighbours.ADD_REMOVE`` by default; the strings ``"add_remove"`` / ``"replace_one"`` are
accepted wherever an enum member is.  The sensitivity or epsilon you pass is the one under that
relation.  Accountants refuse to compose events of different relations.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, Literal, Optional, Tuple, Union

import numpy as np

from dpfast._validation import (
    as_array,
    check_delta,
    check_int,
    check_neighbours,
    check_nonnegative,
    check_positive,
    check_real,
)

__all__ = [
    "Neighbours",
    "DpEvent",
    "Gaussian",
    "Laplace",
    "RandomizedResponse",
    "PureDP",
    "ApproxDP",
    "ExponentialMechanism",
    "ReportNoisyMax",
    "FromPrivacyProfile",
    "FromDominatingPair",
    "ObjectivePerturbation",
    "PoissonSampled",
    "SampledWithoutReplacement",
    "SelfComposed",
    "Composed",
    "OneOf",
    "Tuned",
    "UnsupportedEventError",
    "to_dict",
    "from_dict",
    "event_neighbours",
]


class UnsupportedEventError(ValueError):
    """An accountant cannot account this event (raised before the accountant changes).

    A ``ValueError`` subclass, so code that caught the old ``ValueError`` keeps working."""


class Neighbours(str, enum.Enum):
    """Neighbouring relation of a guarantee.

    ``ADD_REMOVE``: datasets differ by adding or removing one record (the default, the DP-SGD
    convention); ``REPLACE_ONE``: datasets of equal size differ in one record.  A ``str`` enum,
    so ``Neighbours.ADD_REMOVE == "add_remove"``.
    """

    ADD_REMOVE = "add_remove"
    REPLACE_ONE = "replace_one"

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        # Events print as e.g. Gaussian(noise_multiplier=1.0, ..., neighbours='add_remove'): a
        # repr that constructs the same event (the string form is accepted everywhere).
        return repr(self.value)

    @classmethod
    def coerce(cls, value) -> "Neighbours":
        """The member for ``value`` (a member or its string); ValueError naming the allowed values."""
        if isinstance(value, cls):
            return value
        if not isinstance(value, str):
            raise TypeError(f"neighbours must be 'add_remove' or 'replace_one', got {type(value).__name__}")
        return cls(check_neighbours(value))

    @property
    def sum_factor(self) -> float:
        """The one home of the neighbour factor: the l1/l2 sensitivity of a sum of records each
        of norm <= C is ``sum_factor * C``: 1 under add/remove (the sum gains or loses one term)
        and 2 under replace-one (one term replaced: by the triangle inequality ||x - x'|| <= 2C,
        attained by x' = -x).  Dwork & Roth (2014), *The Algorithmic Foundations of Differential
        Privacy*, Definition 2.4 and Section 3.3; Vadhan (2017), Section 1.6."""
        return 1.0 if self is Neighbours.ADD_REMOVE else 2.0


#: what an event's ``neighbours`` accepts (for type checkers): a member or its string; the
#: event stores the member
NeighboursLike = Union[Neighbours, Literal["add_remove", "replace_one"]]


# ----------------------------------------------------------------------------------------------
# field validators (public parameters: refused early, naming the argument and the range)
# ----------------------------------------------------------------------------------------------
def _pos(x, name: str) -> float:
    return check_positive(check_real(x, name), name, allow_array=False)


def _nonneg(x, name: str) -> float:
    return check_nonnegative(check_real(x, name), name)


def _rate(x, name: str = "sample_rate") -> float:
    v = check_real(x, name)
    if not 0.0 < v <= 1.0:
        raise ValueError(f"{name} must be in (0, 1], got {x!r}")
    return v


def check_smoothness(smoothness) -> float:
    """The Hessian bound beta of a GLM loss, checked: finite and >= 0."""
    return check_nonnegative(check_real(smoothness, "smoothness"), "smoothness", hint="the Hessian bound beta")


def check_objective_perturbation_constants(noise_std, lipschitz, smoothness, regularization):
    """(sigma, L, beta, lambda) of objective perturbation, checked: sigma, L, lambda finite and
    > 0, beta finite and >= 0, and lambda > beta (the Jacobian term -log(1 - beta/lambda) is
    finite only then).  Shared with :mod:`dpfast.accounting.objective_perturbation`."""
    sigma = check_positive(noise_std, "noise_std", allow_array=False)
    L = check_positive(lipschitz, "lipschitz", allow_array=False)
    beta = check_smoothness(smoothness)
    lam = check_positive(regularization, "regularization", allow_array=False)
    if not lam > beta:
        raise ValueError(
            f"objective perturbation needs regularization lambda > smoothness beta "
            f"(the Jacobian term -log(1 - beta/lambda) is finite only then); got lambda={lam!r}, "
            f"beta={beta!r}"
        )
    return sigma, L, beta, lam


def check_tnb_params(eta, gamma):
    """(eta, gamma) of the truncated negative binomial D_{eta,gamma} (Papernot & Steinke 2022),
    checked: eta finite and > -1, gamma in (0, 1).  Shared with :mod:`dpfast.accounting.tuning`."""
    eta, gamma = check_real(eta, "eta"), check_real(gamma, "gamma")  # NaN: refused below
    if not -1 < eta < math.inf:
        raise ValueError(f"eta must be finite and > -1, got {eta!r}")
    if not 0 < gamma < 1:
        raise ValueError(f"gamma must be in (0, 1), got {gamma!r}")
    return eta, gamma


def _set(obj, name: str, value) -> None:
    object.__setattr__(obj, name, value)


#: event class name -> class (for :func:`from_dict`); filled by ``DpEvent.__init_subclass__``.
_REGISTRY: Dict[str, type] = {}


@dataclass(frozen=True)
class DpEvent:
    """Base class of privacy events (frozen, hashable, data only).

    Subclasses are dataclasses whose fields are the mechanism's public parameters.  The
    accountants account an event through their per-class registrations
    (``dpfast.accounting.rdp.rdp_curve``, ``dpfast.accounting.pld.dominating_pairs``).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _REGISTRY.setdefault(cls.__name__, cls)

    @property
    def neighbours(self) -> NeighboursLike:  # leaves override it with a field (a Neighbours at run time)
        return event_neighbours(self)


def _leaf_neighbours(obj) -> None:
    _set(obj, "neighbours", Neighbours.coerce(obj.neighbours))


@dataclass(frozen=True)
class Gaussian(DpEvent):
    """Gaussian mechanism: noise N(0, sigma^2), sigma = noise_multiplier * sensitivity.

    Privacy depends only on ``noise_multiplier`` z: mu-GDP with mu = 1/z (Dong, Roth & Su 2022);
    ``sensitivity`` is the l2 sensitivity under ``neighbours``, kept for the record.
    """

    noise_multiplier: float
    sensitivity: float = 1.0
    neighbours: NeighboursLike = Neighbours.ADD_REMOVE

    def __post_init__(self):
        _set(self, "noise_multiplier", _pos(self.noise_multiplier, "noise_multiplier"))
        _set(self, "sensitivity", _pos(self.sensitivity, "sensitivity"))
        _leaf_neighbours(self)

    @property
    def mu(self) -> float:
        return 1.0 / self.noise_multiplier


@dataclass(frozen=True)
class Laplace(DpEvent):
    """Laplace mechanism Lap(scale) on a query of l1 ``sensitivity`` under ``neighbours``:
    pure (sensitivity/scale)-DP (Dwork, McSherry, Nissim & Smith 2006)."""

    scale: float
    sensitivity: float = 1.0
    neighbours: NeighboursLike = Neighbours.ADD_REMOVE

    def __post_init__(self):
        _set(self, "scale", _pos(self.scale, "scale"))
        _set(self, "sensitivity", _pos(self.sensitivity, "sensitivity"))
        _leaf_neighbours(self)

    @property
    def epsilon(self) -> float:
        return self.sensitivity / self.scale


@dataclass(frozen=True)
class RandomizedResponse(DpEvent):
    """k-ary randomized response (k = ``num_categories`` >= 2) at parameter ``epsilon``: the true
    category w.p. e^eps/(e^eps + k - 1), each other w.p. 1/(e^eps + k - 1); pure epsilon-DP
    (Warner 1965; Kairouz, Oh & Viswanath 2016 for k-ary)."""

    epsilon: float
    num_categories: int = 2
    neighbours: NeighboursLike = Neighbours.ADD_REMOVE

    def __post_init__(self):
        _set(self, "epsilon", _pos(self.epsilon, "epsilon"))
        k = self.num_categories
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 2:
            raise ValueError(f"num_categories must be an integer >= 2, got {k!r}")
        _set(self, "num_categories", int(k))
        _leaf_neighbours(self)


@dataclass(frozen=True)
class PureDP(DpEvent):
    """Any pure ``epsilon``-DP release under ``neighbours`` (Dwork et al. 2006).

    Accounted through its tight dominating pair, binary randomized response at epsilon (every
    epsilon-DP mechanism is a post-processing of it: Kairouz, Oh & Viswanath 2015)."""

    epsilon: float
    neighbours: NeighboursLike = Neighbours.ADD_REMOVE

    def __post_init__(self):
        _set(self, "epsilon", _pos(self.epsilon, "epsilon"))
        _leaf_neighbours(self)


@dataclass(frozen=True)
class ExponentialMechanism(PureDP):
    """Exponential mechanism at privacy parameter ``epsilon`` (McSherry & Talwar 2007): pure
    epsilon-DP, accounted as :class:`PureDP` (valid, not always tight)."""


@dataclass(frozen=True)
class ReportNoisyMax(PureDP):
    """Report-noisy-max at privacy parameter ``epsilon`` (Dwork & Roth 2014, Claim 3.9): pure
    epsilon-DP, accounted as :class:`PureDP`."""


@dataclass(frozen=True)
class ApproxDP(DpEvent):
    """Any (``epsilon``, ``delta``)-DP release under ``neighbours``.

    Accounted through the exact dominating pair of (eps, delta)-DP (Kairouz, Oh & Viswanath
    2015, Thm 2.1; Zhu, Dong & Wang 2022): outcomes with P-masses (delta, (1-delta) e^eps/(1+e^eps),
    (1-delta)/(1+e^eps), 0) and Q-masses (0, (1-delta)/(1+e^eps), (1-delta) e^eps/(1+e^eps), delta).
    With delta > 0 its Renyi divergences are infinite, so RDP accountants refuse it.
    """

    epsilon: float
    delta: float = 0.0
    neighbours: NeighboursLike = Neighbours.ADD_REMOVE

    def __post_init__(self):
        _set(self, "epsilon", _nonneg(self.epsilon, "epsilon"))
        _set(self, "delta", float(check_delta(self.delta, allow_zero=True)))
        _leaf_neighbours(self)


@dataclass(frozen=True, eq=False)
class FromPrivacyProfile(DpEvent):
    """A mechanism given by its privacy profile delta(eps) (and optionally its RDP curve).

    ``delta_of_epsilon(eps)`` must be, for every eps >= ``epsilon_min``, an upper bound on the
    hockey-stick divergence H_{e^eps} over neighbouring pairs, and the hockey-stick curve of
    some pair of distributions (convex, non-increasing in e^eps; Zhu, Dong & Wang 2022,
    Lemma 16).  Accepts scalars; an array is tried first.  The PLD accountant builds a
    dominating pair from it by "connect the dots" (Doroshenko, Ghazi, Kamath, Kumar &
    Manurangsi 2022); ``symmetric=True``: the profile holds for both orders of every pair.
    ``rdp``: an optional RDP curve orders -> epsilons; without it the RDP accountant refuses
    the event.  Holds callables: compared by identity, not serialisable.
    """

    delta_of_epsilon: Callable
    rdp_curve: Optional[Callable] = None
    name: str = "FromPrivacyProfile"
    symmetric_profile: bool = False
    epsilon_min: float = 0.0
    profile_step: float = 1e-3
    neighbours: NeighboursLike = Neighbours.ADD_REMOVE

    def __init__(self, delta_of_epsilon: Callable, *, rdp: Optional[Callable] = None,
                 name: str = "FromPrivacyProfile", symmetric: bool = False,
                 epsilon_min: float = 0.0, profile_step: float = 1e-3,
                 neighbours="add_remove"):
        if not callable(delta_of_epsilon):
            raise TypeError("delta_of_epsilon must be callable: eps -> delta(eps)")
        if rdp is not None and not callable(rdp):
            raise TypeError("rdp must be a callable orders -> RDP epsilons, or None")
        em = check_real(epsilon_min, "epsilon_min")
        if math.isnan(em) or math.isinf(em):
            raise ValueError(f"epsilon_min must be finite, got {epsilon_min!r}")
        _set(self, "delta_of_epsilon", delta_of_epsilon)
        _set(self, "rdp_curve", rdp)
        _set(self, "name", str(name))
        _set(self, "symmetric_profile", bool(symmetric))
        _set(self, "epsilon_min", em)
        _set(self, "profile_step", _pos(profile_step, "profile_step"))
        _set(self, "neighbours", Neighbours.coerce(neighbours))

    # by identity (eq=False alone inherited DpEvent's generated __eq__/__hash__, which compare
    # no fields: every two profiles were equal, and the accountants' caches of discretized
    # leaves handed one profile's privacy loss distribution to another)
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return self.name


def _prob_vector(v, name: str) -> Tuple[float, ...]:
    a = as_array(v, name, np.float64).ravel()
    if a.size == 0 or not np.isfinite(a).all() or (a < 0).any() or abs(a.sum() - 1.0) > 1e-9:
        raise ValueError(f"{name} must be a non-empty probability vector (entries >= 0 summing to 1)")
    return tuple(a.tolist())


@dataclass(frozen=True)
class FromDominatingPair(DpEvent):
    """A mechanism dominated by a pair (P, Q) of distributions on a finite outcome space.

    ``p``, ``q``: probability vectors over the same outcomes; the mechanism's hockey-stick
    divergences are assumed <= H_{e^eps}(P || Q) for every eps and ordered neighbouring pair
    (Zhu, Dong & Wang 2022, Def. 7).  q = 0 < p gives the +inf loss atom.  ``p_add``/``q_add``
    optionally give a different pair for the add direction.
    """

    p: tuple
    q: tuple
    p_add: Optional[tuple] = None
    q_add: Optional[tuple] = None
    name: str = "FromDominatingPair"
    neighbours: NeighboursLike = Neighbours.ADD_REMOVE

    def __init__(self, p, q, *, p_add=None, q_add=None, name: str = "FromDominatingPair",
                 neighbours="add_remove"):
        pp, qq = _prob_vector(p, "p"), _prob_vector(q, "q")
        if len(pp) != len(qq):
            raise ValueError("p and q must be probability vectors of the same length")
        if (p_add is None) != (q_add is None):
            raise ValueError("give both p_add and q_add, or neither")
        pa = qa = None
        if p_add is not None:
            pa, qa = _prob_vector(p_add, "p_add"), _prob_vector(q_add, "q_add")
            if len(pa) != len(qa):
                raise ValueError("p_add and q_add must be probability vectors of the same length")
        _set(self, "p", pp)
        _set(self, "q", qq)
        _set(self, "p_add", pa)
        _set(self, "q_add", qa)
        _set(self, "name", str(name))
        _set(self, "neighbours", Neighbours.coerce(neighbours))

    @property
    def symmetric(self) -> bool:
        return self.p_add is None

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ObjectivePerturbation(DpEvent):
    """Gaussian objective perturbation of a GLM loss (Redberg, Koskela & Wang 2024): noise
    N(0, noise_std^2 I) in the objective, Lipschitz bound ``lipschitz``, smoothness
    ``smoothness`` < ``regularization``.  Add/remove neighbours.  Accounted by the tight
    privacy profile of their Theorem 3.1 (PLD) and the RDP curve of their Theorem 3.2."""

    noise_std: float
    lipschitz: float
    smoothness: float
    regularization: float

    def __post_init__(self):
        sigma, L, beta, lam = check_objective_perturbation_constants(
            self.noise_std, self.lipschitz, self.smoothness, self.regularization)
        _set(self, "noise_std", sigma)
        _set(self, "lipschitz", L)
        _set(self, "smoothness", beta)
        _set(self, "regularization", lam)

    @property
    def neighbours(self) -> Neighbours:
        return Neighbours.ADD_REMOVE


# ----------------------------------------------------------------------------------------------
# composition nodes
# ----------------------------------------------------------------------------------------------
def _check_event(ev, name: str = "event") -> DpEvent:
    if not isinstance(ev, DpEvent):
        raise TypeError(f"{name} must be a DpEvent, got {type(ev).__name__}")
    return ev


@dataclass(frozen=True)
class PoissonSampled(DpEvent):
    """``event`` run on a Poisson subsample: each record kept independently w.p. ``sample_rate``.

    Add/remove neighbours (the relation of the amplification analyses; the inner event must be
    stated for it).  The DP-SGD step is ``PoissonSampled(q, Gaussian(z))`` (Mironov, Talwar &
    Zhang 2019 for RDP; Zhu, Dong & Wang 2022, Thm 11 for the PLD's two dominating pairs)."""

    sample_rate: float
    event: DpEvent

    def __post_init__(self):
        _set(self, "sample_rate", _rate(self.sample_rate))
        _check_event(self.event)
        if event_neighbours(self.event) != Neighbours.ADD_REMOVE:
            raise ValueError("PoissonSampled is analysed under add/remove neighbours only: the inner event "
                             "must use neighbours='add_remove' (for replace-one use SampledWithoutReplacement)")

    @property
    def neighbours(self) -> Neighbours:
        return Neighbours.ADD_REMOVE


@dataclass(frozen=True)
class SampledWithoutReplacement(DpEvent):
    """``event`` run on a uniformly random subset of fixed size m = ``sample_rate`` * n.

    Replace-one neighbours (the relation of Wang, Balle & Kasiviswanathan 2019 and Balle, Barthe
    & Gaboardi 2018): the inner event must be stated for replace-one (for a Gaussian, the noise
    multiplier relative to the replace-one l2 sensitivity, 2C for per-example clipping at C)."""

    sample_rate: float
    event: DpEvent

    def __post_init__(self):
        _set(self, "sample_rate", _rate(self.sample_rate))
        _check_event(self.event)
        if event_neighbours(self.event) != Neighbours.REPLACE_ONE:
            raise ValueError("SampledWithoutReplacement is analysed under replace-one neighbours only: the "
                             "inner event must use neighbours='replace_one' (for add/remove use PoissonSampled)")

    @property
    def neighbours(self) -> Neighbours:
        return Neighbours.REPLACE_ONE


@dataclass(frozen=True)
class SelfComposed(DpEvent):
    """``event`` run ``count`` times (``count`` >= 0) on the same data (adaptive composition)."""

    event: DpEvent
    count: int

    def __post_init__(self):
        _check_event(self.event)
        _set(self, "count", check_int(self.count, "count", 0))


@dataclass(frozen=True)
class Composed(DpEvent):
    """The adaptive composition of ``events`` (a tuple; lists are converted), all of one
    neighbouring relation."""

    events: Tuple[DpEvent, ...] = field(default=())

    def __post_init__(self):
        evs = self.events
        if isinstance(evs, DpEvent) or not isinstance(evs, (tuple, list)):
            raise TypeError(f"events must be a tuple of DpEvent, got {type(evs).__name__}")
        evs = tuple(evs)
        for k, e in enumerate(evs):
            _check_event(e, f"events[{k}]")
        _set(self, "events", evs)
        event_neighbours(self)  # mixed relations refused here


@dataclass(frozen=True)
class OneOf(DpEvent):
    """One of ``events`` (a non-empty tuple), picked at random independently of the data: a
    tuning run whose candidate is drawn at random.  All of one neighbouring relation.

    RDP accounting only: Renyi divergence is jointly quasi-convex (van Erven & Harremoes 2014,
    "Renyi divergence and Kullback-Leibler divergence", IEEE Trans. Inf. Theory, Theorem 13),
    so for data-independent mixture weights D_alpha(sum_i w_i P_i || sum_i w_i Q_i) <=
    max_i D_alpha(P_i || Q_i): the mixture's RDP curve is at most the members' pointwise maximum."""

    events: Tuple[DpEvent, ...] = field(default=())

    def __post_init__(self):
        evs = self.events
        if isinstance(evs, DpEvent) or not isinstance(evs, (tuple, list)) or not evs:
            raise TypeError("events must be a non-empty tuple of DpEvent")
        evs = tuple(evs)
        for k, e in enumerate(evs):
            _check_event(e, f"events[{k}]")
        _set(self, "events", evs)
        event_neighbours(self)  # mixed relations refused here


@dataclass(frozen=True)
class Tuned(DpEvent):
    """Private hyperparameter tuning (Papernot & Steinke 2022): ``event`` (one training run) is
    repeated a random number K of times and the best output released.

    ``distribution="poisson"`` with ``mean`` (mu >= 1, their Theorem 6), or
    ``"truncated_negative_binomial"`` with ``eta`` > -1 and ``gamma`` in (0, 1) (Theorem 2).
    RDP accounting only."""

    event: DpEvent
    distribution: str = "poisson"
    mean: Optional[float] = None
    eta: Optional[float] = None
    gamma: Optional[float] = None

    def __post_init__(self):
        _check_event(self.event)
        if self.distribution == "poisson":
            if self.mean is None:
                raise ValueError("distribution='poisson' needs a finite mean >= 1")
            m = check_real(self.mean, "mean")
            if not 1.0 <= m < math.inf:
                raise ValueError(f"mean must be finite and >= 1 for distribution='poisson', got {self.mean!r}")
            _set(self, "mean", m)
        elif self.distribution == "truncated_negative_binomial":
            eta, gamma = check_tnb_params(self.eta, self.gamma)
            _set(self, "eta", eta)
            _set(self, "gamma", gamma)
        else:
            raise ValueError(f"distribution must be 'poisson' or 'truncated_negative_binomial', "
                             f"got {self.distribution!r}")


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------
def sampled_gaussian(event: Union["PoissonSampled", "SampledWithoutReplacement"],
                     accountant: str) -> "Gaussian":
    """The Gaussian inside a sampling node (PoissonSampled / SampledWithoutReplacement): the
    only inner mechanism whose amplification the accountants analyse.  UnsupportedEventError
    naming ``accountant`` and the sampling scheme otherwise."""
    if not isinstance(event.event, Gaussian):
        what = "Poisson sampling" if isinstance(event, PoissonSampled) else "sampling without replacement"
        raise UnsupportedEventError(
            f"the {accountant} accountant accounts {what} of a Gaussian only, got {type(event.event).__name__}")
    return event.event


def self_composed(event: DpEvent, count: int) -> DpEvent:
    """``count``-fold composition of ``event`` as one event (the event itself for count 1)."""
    return event if count == 1 else SelfComposed(event, count)


def composed(events) -> Optional[DpEvent]:
    """The composition of ``events`` (None entries are zero-cost and dropped): None if none is
    left, the event itself if one is, else :class:`Composed`."""
    evs = tuple(e for e in events if e is not None)
    if not evs:
        return None
    return evs[0] if len(evs) == 1 else Composed(evs)


def event_neighbours(event: DpEvent) -> Neighbours:
    """The neighbouring relation of ``event``; ValueError when a composition mixes relations."""
    if isinstance(event, (Composed, OneOf)):
        rels = {event_neighbours(e) for e in event.events}
        if len(rels) > 1:
            raise ValueError("cannot compose events with different neighbouring relations "
                             "(add_remove and replace_one)")
        return rels.pop() if rels else Neighbours.ADD_REMOVE
    if isinstance(event, (SelfComposed, Tuned)):
        return event_neighbours(event.event)
    nb = event.__dict__.get("neighbours")  # a leaf's field
    if nb is not None:
        return Neighbours.coerce(nb)
    for klass in type(event).__mro__:  # a node's own fixed relation (a property), if any
        if klass is DpEvent:
            break
        prop = klass.__dict__.get("neighbours")
        if isinstance(prop, property) and prop.fget is not None:
            return Neighbours.coerce(prop.fget(event))
    return Neighbours.ADD_REMOVE


def to_dict(event: DpEvent) -> Dict[str, Any]:
    """A compact JSON-able form ``{"type": class name, field: value, ...}`` (nested events as
    dicts, tuples as lists, the neighbouring relation as its string).  TypeError for events
    holding callables (:class:`FromPrivacyProfile`)."""
    _check_event(event)
    if isinstance(event, FromPrivacyProfile):
        raise TypeError(f"{event!r} holds a callable (its privacy profile) and cannot be serialised; "
                        "record the parameters of the mechanism instead")
    out: Dict[str, Any] = {"type": type(event).__name__}
    for f in fields(event):
        out[f.name] = _encode(getattr(event, f.name))
    return out


def _encode(v):
    if isinstance(v, DpEvent):
        return to_dict(v)
    if isinstance(v, Neighbours):
        return v.value
    if isinstance(v, tuple):
        return [_encode(x) for x in v]
    if callable(v):
        raise TypeError("events holding callables cannot be serialised")
    return v


def from_dict(d: Dict[str, Any]) -> DpEvent:
    """The event of :func:`to_dict`'s output (validated again by the event's constructor)."""
    if not isinstance(d, dict) or "type" not in d:
        raise TypeError("expected a dict made by dpfast.accounting.to_dict")
    cls = _REGISTRY.get(d["type"])
    if cls is None:
        raise ValueError(f"unknown event type {d['type']!r}")
    kw = {}
    for k, v in d.items():
        if k == "type":
            continue
        kw[k] = _decode(v)
    if cls is FromDominatingPair:
        p, q = kw.pop("p"), kw.pop("q")
        return cls(p, q, **kw)
    return cls(**kw)


def _decode(v):
    if isinstance(v, dict) and "type" in v:
        return from_dict(v)
    if isinstance(v, list):
        return tuple(_decode(x) for x in v)
    return v
