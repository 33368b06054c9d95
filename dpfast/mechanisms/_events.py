"""The event (``dpfast.accounting``) of each mechanism call, and :func:`event_of`.

Every public mechanism function takes ``budget=None`` (keyword-only).  After validating its
arguments and *before touching the random generator* it builds the event of the call -- one
event for the whole call, vectorised or not -- and charges it with
:func:`dpfast.budget.charge` (the explicit budget, else the ``with budget:`` default, else
nothing).  A :class:`~dpfast.budget.BudgetExceededError` therefore leaves the generator's state
exactly as it was and releases nothing.

Each mechanism is ``plan -> charge -> draw``: a pure plan step (the checks of
:func:`dpfast._validation.validate_params`, then the calibration and the event, and
whatever depends on the data but draws nothing) returns a :class:`Plan`; ``Plan.release``
charges its event and then draws.  :func:`event_of` returns the event a call *would* charge
by calling the same plan step and nothing else, so it is the same event by construction.

The events (each rule cites the guarantee in the mechanism's docstring):

* ``laplace`` -- scalar ``sensitivity`` S (the l1 sensitivity of the whole array) and scalar
  ``epsilon``: ``Laplace(scale=S/epsilon, sensitivity=S)``.  Array ``epsilon`` with scalar S:
  the privacy loss is at most sum_i |d_i| / b_i <= S / min_i b_i, so ``PureDP(max_i S/b_i)``.
  Array ``sensitivity``: entry i's sensitivity bounds that entry's change, so by basic
  composition ``PureDP(sum_i S_i / b_i)`` over the broadcast shape.
* ``gaussian`` (analytic or classical calibration: either way the noise is N(0, sigma^2), and
  the Gaussian event is exact for it) -- scalar S (the l2 sensitivity of the whole array):
  ``Gaussian(noise_multiplier=min_i sigma_i / S, sensitivity=S)``; array S (entry i changes by
  at most S_i): the release is the Gaussian mechanism with Mahalanobis sensitivity
  mu = sqrt(sum_i (S_i / sigma_i)^2), so ``Gaussian(noise_multiplier=1/mu)``.
* ``randomized_response`` -- ``RandomizedResponse(max epsilon, k, neighbours="replace_one")``:
  each respondent holds one entry and the guarantee is for one entry changing (its local-DP
  statement, parallel composition over respondents); a smaller epsilon is a post-processing
  of a larger one (mix with the uniform report), so the maximum covers array epsilons.
  Replace-one is the relation of that statement: removing a respondent removes an output
  entry, which no add/remove guarantee covers.
* ``discrete_laplace_mechanism`` -- ``PureDP`` at the epsilon of the noise actually used
  (its scale is rounded up, so at most the requested epsilon).
* ``discrete_gaussian_mechanism`` -- ``ApproxDP(epsilon, delta)`` (the guarantee it states).
* ``snapping`` -- epsilon-DP per entry, and every entry may change: n entries are n
  compositions of ``PureDP(epsilon)`` (``SelfComposed``).
* ``exponential_mechanism`` / ``report_noisy_max`` -- one ``ExponentialMechanism(epsilon)`` /
  ``ReportNoisyMax(epsilon)`` per selection; a batch of R selections (the other axes) is R
  compositions.
* ``top_k`` -- k rounds of the peeling ``ExponentialMechanism(epsilon / k)`` per row (Durfee
  & Rogers 2019: same law), composed k * R times.
* ``private_quantile`` / ``private_median`` -- m levels: m draws of
  ``ExponentialMechanism(epsilon / m)``.
* ``exponential_mechanism_stream`` / ``ExponentialMechanismStream`` --
  ``ExponentialMechanism(epsilon)``, charged before the first chunk is read.

Neighbouring relation: the events are labelled with the library's default, add/remove (the
sensitivity you pass must be the one under that relation), except randomized response
(replace-one, see above).  The samplers ``laplace_noise``, ``gaussian_noise``,
``discrete_laplace``, ``discrete_gaussian`` and ``bernoulli_exp`` and the post-processing
``randomized_response_debias`` make no privacy claim and take no budget.
"""
from __future__ import annotations

import inspect
import math
from fractions import Fraction
from typing import Any, Callable, Optional

import numpy as np

from dpfast import accounting as A, budget as _budget
from dpfast.accounting.events import self_composed

__all__ = ["event_of"]


def _up(x) -> float:
    """float(x) rounded up (x a Fraction or float): an event never understates epsilon."""
    f = float(x)
    if isinstance(x, Fraction) and Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def laplace_event(sensitivity, scale, shape) -> Any:
    """Event of ``laplace`` (see the module docstring); ``scale`` the validated noise scale(s)."""
    if np.ndim(sensitivity) == 0 and np.ndim(scale) == 0:
        return A.Laplace(scale=float(scale), sensitivity=float(sensitivity))
    if np.ndim(sensitivity) == 0:
        eps = float(sensitivity) / float(np.min(scale))
    else:
        eps = float(np.sum(np.broadcast_to(np.asarray(sensitivity) / np.asarray(scale), shape)))
    return A.PureDP(epsilon=math.nextafter(eps, math.inf))


def gaussian_event(sensitivity, sigma, shape) -> Any:
    """Event of ``gaussian`` (see the module docstring); ``sigma`` the validated noise scale(s)."""
    if np.ndim(sensitivity) == 0:
        s = float(sensitivity)
        z = float(np.min(sigma)) / s
    else:
        mu = math.sqrt(float(np.sum(np.broadcast_to((np.asarray(sensitivity) / np.asarray(sigma)) ** 2, shape))))
        z, s = 1.0 / mu, 1.0
    # rounded down: a smaller noise multiplier overstates the privacy loss, never understates it
    return A.Gaussian(noise_multiplier=math.nextafter(z, 0.0), sensitivity=s)


def randomized_response_event(epsilon, k: int) -> Any:
    return A.RandomizedResponse(epsilon=float(np.max(epsilon)), num_categories=k,
                                neighbours="replace_one")


def pure_event(epsilon) -> Any:
    return A.PureDP(epsilon=_up(epsilon))


def approx_dp_event(epsilon: float, delta: float) -> Any:
    return A.ApproxDP(epsilon=float(epsilon), delta=float(delta))


def exponential_event(epsilon, count: int = 1, kind: str = "ExponentialMechanism") -> Any:
    return self_composed(getattr(A, kind)(epsilon=_up(epsilon)), count)


def charge(budget, label: str, build: Callable, *args) -> None:
    """:func:`dpfast.budget.charge` (the one charging helper) of the event ``build(*args)``,
    built only when a budget applies (no cost on calls without one)."""
    _budget.charge(budget, lambda: build(*args), label)


class Plan:
    """A checked and calibrated release that has drawn nothing yet.

    ``label``: the ledger label; ``build(*args)``: its event (built only when wanted: a call
    without a budget never builds it); ``draw(gen)``: the release itself, the only step that
    reads the generator.  :meth:`release` is ``charge -> draw``.
    """

    __slots__ = ("label", "build", "args", "draw")

    def __init__(self, label: str, build: Callable, args: tuple, draw: Callable) -> None:
        self.label, self.build, self.args, self.draw = label, build, args, draw

    def event(self) -> Any:
        """The event this release charges."""
        return self.build(*self.args)

    def release(self, gen, budget):
        """Charge the event to ``budget`` (or the ``with budget:`` default), then draw from
        ``gen``: a ``BudgetExceededError`` leaves ``gen`` untouched and releases nothing."""
        charge(budget, self.label, self.build, *self.args)
        return self.draw(gen)


#: mechanism (public function or class) -> (validate, plan, names): ``validate(*args, **kwargs)``
#: the checked arguments of a call (``inspect.BoundArguments``), ``plan(**{n: ... for n in names})``
#: its Plan.
_PLANS: dict = {}


def planned_by(mechanism: Callable, validate: Optional[Callable] = None) -> Callable:
    """Decorator registering a plan step as ``mechanism``'s, for :func:`event_of`.

    ``validate`` defaults to ``mechanism.validate`` (what :func:`validate_params` attaches);
    the plan receives the checked arguments it names.
    """
    def register(plan: Callable) -> Callable:
        names = tuple(inspect.signature(plan).parameters)
        _PLANS[mechanism] = (validate or mechanism.validate, plan, names)
        return plan

    return register


class _Stop(Exception):
    def __init__(self, event):
        self.event = event


class _FirstCharge(_budget.PrivacyBudget):
    """For a composite callable only (a function that passes ``budget`` on to mechanisms):
    its first charge ends the call, before the draw that follows it."""

    def __init__(self):  # no epsilon/delta: it never composes
        pass

    def charge(self, event, *, label: str = "") -> None:
        raise _Stop(event)


def event_of(mechanism: Callable, *args, **kwargs) -> Any:
    """The event (``dpfast.accounting``) that ``mechanism(*args, **kwargs)`` charges.

    Calls the mechanism's plan step (its checks, calibration and event; see the module
    docstring) and not its draw: nothing is drawn, nothing is charged, a
    ``numpy.random.Generator`` passed as ``rng`` keeps its state.  The rules are listed in
    :mod:`dpfast.mechanisms._events`.

    Parameters
    ----------
    mechanism : callable
        A dpfast mechanism that takes ``budget=`` (e.g. :func:`dpfast.laplace`) or
        :class:`dpfast.mechanisms.ExponentialMechanismStream`.  Any other callable that takes
        ``budget=`` and passes it on to a mechanism (a composite) gives the event of its first
        charge: it is called with a budget whose charge ends the call.
    *args, **kwargs
        The arguments of the call (not ``budget``).

    Returns
    -------
    DpEvent

    Raises
    ------
    TypeError
        ``mechanism`` takes no ``budget=`` (a sampler without a privacy claim), or ``budget``
        was passed; the mechanism's own errors for bad arguments.

    Examples
    --------
    >>> import numpy as np, dpfast
    >>> dpfast.mechanisms.event_of(dpfast.laplace, np.zeros(3), 1.0, 0.5)
    Laplace(scale=2.0, sensitivity=1.0, neighbours='add_remove')
    """
    if "budget" in kwargs:
        raise TypeError("event_of: do not pass budget= (event_of charges nothing)")
    if not callable(mechanism):
        raise TypeError(f"mechanism must be a dpfast mechanism, got {type(mechanism).__name__}")
    entry = _PLANS.get(mechanism)
    if entry is not None:
        validate, plan, names = entry
        bound = validate(*args, **kwargs).arguments
        return plan(**{n: bound[n] for n in names}).event()
    try:
        mechanism(*args, budget=_FirstCharge(), **kwargs)
    except _Stop as stop:
        return stop.event
    except TypeError as exc:
        if "budget" in str(exc):
            raise TypeError(f"{getattr(mechanism, '__name__', mechanism)!r} takes no budget= "
                            "(not a mechanism with a privacy guarantee)") from None
        raise
    raise TypeError(f"{getattr(mechanism, '__name__', mechanism)!r} charged no event")  # pragma: no cover
