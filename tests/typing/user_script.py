"""A user's script, type-checked with ``mypy --strict --disallow-any-expr``
(tests/typing/test_public_types.py) and run.

dpfast ships ``py.typed``: the public API used below must reach a user's type checker with real
types.  The intent is stated without ``reveal_type``: each helper returns the API's value
directly from a function with the return type the user relies on (``--strict``'s
``warn_return_any`` then refuses an ``Any``, the declared type a wrong one), and no value is
parked in an annotated variable (where mypy would accept ``Any`` silently).
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
import numpy.typing as npt

import dpfast
from dpfast.accounting import (
    ApproxDP,
    Composed,
    DpEvent,
    Gaussian,
    Laplace,
    Neighbours,
    PLDAccountant,
    PoissonSampled,
    RandomizedResponse,
    RDPAccountant,
    SelfComposed,
    event_neighbours,
)
from dpfast.calibrate import gaussian_epsilon, gaussian_sigma, laplace_scale


def noise_for(epsilon: float, delta: float) -> float:
    return gaussian_sigma(epsilon, delta, sensitivity=2.0)  # scalar in, float out


def noise_grid(epsilons: npt.NDArray[np.float64], delta: float) -> npt.NDArray[np.float64]:
    return gaussian_sigma(epsilons, delta)  # array in, array out (the broadcast shape)


def laplace_noise(epsilon: float) -> float:
    return laplace_scale(epsilon, sensitivity=1.0)


def epsilon_back(sigma: float, delta: float) -> float:
    return gaussian_epsilon(sigma, delta, sensitivity=2.0)


def dp_sgd_step(noise_multiplier: float, sample_rate: float) -> PoissonSampled:
    return PoissonSampled(sample_rate=sample_rate, event=Gaussian(noise_multiplier))


def pld_of(event: DpEvent, steps: int) -> PLDAccountant:
    return PLDAccountant(value_discretization=1e-3).compose(event, steps)  # compose returns self


def pld_epsilon(acc: PLDAccountant, delta: float) -> float:
    return acc.get_epsilon(delta)


def pld_epsilon_bounds(acc: PLDAccountant, delta: float) -> Tuple[float, float]:
    return acc.get_epsilon_bounds(delta)


def rdp_epsilon(event: DpEvent, delta: float) -> float:
    return RDPAccountant().compose(event).get_epsilon(delta)


def mixed_release() -> Composed:
    return Composed((Gaussian(noise_multiplier=3.0, sensitivity=1.0),
                     Laplace(scale=laplace_noise(1.0)),
                     RandomizedResponse(epsilon=1.0, num_categories=4),
                     SelfComposed(Gaussian(5.0), 3)))


def approx_dp(epsilon: float, delta: float) -> ApproxDP:
    return ApproxDP(epsilon=epsilon, delta=delta)


def replace_one_laplace(scale: float) -> Laplace:
    return Laplace(scale, 2.0, neighbours="replace_one")  # the string form, as documented


def relation(event: DpEvent) -> Neighbours:
    return event_neighbours(event)


def new_budget() -> dpfast.PrivacyBudget:
    return dpfast.PrivacyBudget(epsilon=2.0, delta=1e-6)


def enter(budget: dpfast.PrivacyBudget) -> dpfast.PrivacyBudget:
    with budget as entered:  # the context manager gives the budget back
        budget.charge(Gaussian(noise_multiplier=5.0), label="mean")  # charge returns None
        return entered


def spent(budget: dpfast.PrivacyBudget) -> float:
    return budget.spent()


def spent_at(budget: dpfast.PrivacyBudget, delta: float) -> float:
    return budget.spent(delta)


def remaining(budget: dpfast.PrivacyBudget) -> float:
    return budget.remaining()


def main() -> None:
    sigma = noise_for(1.0, 1e-5)
    assert sigma > 0.0
    assert noise_grid(np.linspace(0.5, 2.0, 3), 1e-5).shape == (3,)
    assert epsilon_back(sigma, 1e-5) <= 1.0
    acc = pld_of(dp_sgd_step(1.1, 0.01), 100)
    lo, hi = pld_epsilon_bounds(acc, 1e-5)
    assert lo <= pld_epsilon(acc, 1e-5) <= hi
    mixed = mixed_release()
    assert 0.0 < pld_epsilon(pld_of(mixed, 1), 1e-5) <= rdp_epsilon(mixed, 1e-5)
    # certified: at its own delta, never below its own epsilon; above it by the grid (1e-3) at most
    assert 0.5 <= pld_epsilon(pld_of(approx_dp(0.5, 1e-9), 1), 1e-9) <= 0.5 + 1e-3
    assert relation(replace_one_laplace(4.0)) is Neighbours.REPLACE_ONE
    assert abs(pld_epsilon(pld_of(replace_one_laplace(4.0), 1), 1e-9) - 0.5) <= 1e-3  # 2 / 4 (pure), up to the grid
    budget = new_budget()
    assert enter(budget) is budget
    assert 0.0 < spent(budget) <= 2.0 and remaining(budget) >= 0.0
    assert spent_at(budget, 1e-3) <= spent(budget)


if __name__ == "__main__":
    main()
