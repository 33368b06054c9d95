"""Red-team (issue 24): discrete_staircase's charge against the law it actually samples, and its
int64 arithmetic at the extremes of the sampler."""
import importlib
from fractions import Fraction

import numpy as np
import pytest

from dpfast.mechanisms import discrete_staircase, event_of

S = importlib.import_module("dpfast.mechanisms.staircase")  # (the package's ``staircase`` is the function)

EPSILONS = [Fraction(1), Fraction(1, 3), 0.1, 1 / 3, Fraction(2**70 + 1, 2**70), Fraction(2**70 + 1, 7 * 2**70),
            Fraction(10**30 + 7, 10**30), Fraction(10**4), Fraction(3, 2**38)]


@pytest.mark.parametrize("eps", EPSILONS)
def test_the_event_covers_the_sampled_law(eps, monkeypatch):
    """The event's epsilon (a float, rounded up) is >= the epsilon of the law drawn: the centre
    probability and the geometric tail both use b = exp(-s/t) for the (s, t) handed to the sampler,
    and s/t <= the requested epsilon."""
    seen = {}
    real = S.discrete_staircase_draw

    def spy(gen, shape, delta, r, s, t):
        seen.update(delta=delta, r=r, s=s, t=t)
        return real(gen, shape, delta, r, s, t)

    monkeypatch.setattr(S, "discrete_staircase_draw", spy)
    v = np.array([4, -1], dtype=np.int64)
    ev = event_of(discrete_staircase, v, 3, eps)
    discrete_staircase(v, 3, eps, rng=0)
    law_eps = Fraction(seen["s"], seen["t"])
    assert law_eps <= Fraction(eps)  # never more than asked
    assert Fraction(ev.event.epsilon) >= law_eps  # the charge covers the law sampled
    assert ev.count == 2 and seen["delta"] == 3
    # the centre probability's integer bounds are those of b = exp(-law_eps)
    lo, hi = S._centre_thresholds(2 * seen["r"] - 1, 3, law_eps, 64)
    assert lo <= hi <= lo + 2


def test_no_int64_wrap_at_the_largest_noise(monkeypatch):
    """Values at +-(2**53 - 1), sensitivity 2**40, and the largest geometric index the exact
    sampler can return (|Y| < 2**62): the sum is exact (no wrap) and keeps the sign of the noise."""
    def fill(cap, s, t, out, threads):
        out[:] = 2**62 - 1  # the most the exact discrete Laplace sampler returns

    monkeypatch.setattr(S._exact, "discrete_laplace_fill", fill)
    v = np.array([2**53 - 1, -(2**53 - 1)] * 50, dtype=np.int64)
    out = discrete_staircase(v, 2**40, Fraction(1, 1), rng=5, r=1)
    noise = [int(a) - int(b) for a, b in zip(out, v)]
    # outside the centre run the noise is side * (r + g Delta + pos), g clamped so |noise| < 2**62
    assert all(abs(x) < 2**62 for x in noise)
    assert all(abs(int(a)) < 2**63 - 1 for a in out)
    big = [x for x in noise if abs(x) > 2**40]
    assert big and all(abs(x) >= 2**61 for x in big)
