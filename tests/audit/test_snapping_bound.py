"""Audit: the snapping mechanism's claimed epsilon against an exact computation of its output law.

Mironov 2012 ("On significance of the least significant bits for differential privacy", CCS,
section 5) releases  clamp_B(round_Lambda(clamp_B(x) (+) S (*) lambda (*) LN(U*)))  with U*
uniform over the doubles of (0, 1) (each double u has probability ulp(u)), S a fair sign,
(+)/(*) IEEE double operations and Lambda the smallest power of two >= lambda.  For a fixed sign
the released grid index is monotone in u, so each output's probability is the U*-mass of an
interval of doubles, found exactly here by bisection over the bit patterns and summed as exact
rationals.  The model is validated against ``dpfast.mechanisms.snapping`` itself by a chi-square
test on its samples; then, for small adversarial neighbouring pairs (x, x + 1) in units of the
sensitivity (non-representable sums, the clamp edges), the exact worst-case log-ratio of output
probabilities must not exceed ``snapping_epsilon(lambda, B)``; and it must come close to 1/lambda
(so the comparison is not vacuous).
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest

from dpfast.mechanisms import snapping, snapping_epsilon, snapping_scale

from _audit_stats import chi_square_ok

ONE_BITS = 0x3FF0000000000000  # bit pattern of 1.0; doubles in (0, 1) are patterns 1 .. ONE_BITS-1


def _f(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def _index(x: float, u: float, lam: float, big: float, sign: int) -> float:
    # the kernel's arithmetic, operation by operation (no FMA: built with -ffp-contract=off)
    noise = (-lam if sign < 0 else lam) * math.log(u)
    y = x + noise
    return round(y * (1.0 / big))  # Python's round on floats is round-half-even = nearbyint


def _law(x: float, lam: float, big: float, bound: float) -> dict:
    """Exact P(output = v) for every output v (grid points strictly inside the bound, and +-bound)."""
    xc = min(max(x, -bound), bound)
    kmax = math.ceil(bound / big) + 1
    out: dict = {}
    for sign in (1, -1):
        # mass of {u : idx(u) <= k}; idx is nondecreasing in u for sign +1 (noise lam log u
        # grows with u) and nonincreasing for sign -1 (noise -lam log u shrinks)
        def cdf(k):
            if sign > 0:  # noise = lam log u <= 0, increasing in u: idx nondecreasing
                lo, hi = 0, ONE_BITS - 1  # largest pattern with idx <= k
                if _index(xc, _f(1), lam, big, sign) > k:
                    return Fraction(0)
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if _index(xc, _f(mid), lam, big, sign) <= k:
                        lo = mid
                    else:
                        hi = mid - 1
                return Fraction(_f(lo + 1))  # mass of (0, u] = next(u) (sum of ulps)
            lo, hi = 1, ONE_BITS  # smallest pattern with idx <= k (idx nonincreasing)
            while lo < hi:
                mid = (lo + hi) // 2
                if _index(xc, _f(mid), lam, big, sign) <= k:
                    hi = mid
                else:
                    lo = mid + 1
            return 1 - Fraction(_f(lo)) if lo < ONE_BITS else Fraction(0)

        prev = cdf(-kmax - 1)
        for k in range(-kmax, kmax + 1):
            cur = cdf(k)
            m = (cur - prev) / 2
            prev = cur
            v = min(max(k * big, -bound), bound)
            out[v] = out.get(v, Fraction(0)) + m
        out[-bound] = out.get(-bound, Fraction(0)) + cdf(-kmax - 1) / 2
        out[bound] = out.get(bound, Fraction(0)) + (1 - prev) / 2
    assert sum(out.values()) == 1
    return out


def _params(epsilon: float, bound: float):
    lam = snapping_scale(epsilon, bound, 1.0)
    big = 2.0 ** math.ceil(math.log2(lam))
    while big / 2 >= lam:
        big /= 2
    while big < lam:
        big *= 2
    assert bound > lam  # the mechanism then clamps at the requested bound (no internal widening)
    return lam, big


CASES = [(1.0, 8.0), (0.5, 20.0), (2.0, 3.3)]


@pytest.mark.parametrize("epsilon,bound", CASES)
def test_exact_model_matches_the_sampler(epsilon, bound):
    lam, big = _params(epsilon, bound)
    x = 0.1
    law = _law(x, lam, big, bound)
    vals = sorted(law)
    n = 200_000
    out = snapping(np.full(n, x), 1.0, epsilon, bound, rng=np.random.default_rng(5))
    assert set(np.unique(out).tolist()) <= set(vals)
    counts = np.array([np.sum(out == v) for v in vals])
    probs = np.array([float(law[v]) for v in vals])
    ok, msg = chi_square_ok(counts, probs / probs.sum(), 1e-5)
    assert ok, msg


@pytest.mark.parametrize("epsilon,bound", CASES)
def test_worst_case_log_ratio_below_the_claim(epsilon, bound):
    lam, big = _params(epsilon, bound)
    claim = snapping_epsilon(lam, bound)
    assert claim <= epsilon
    pairs = [(0.0, 1.0), (0.1, 1.1), (1 / 3, 4 / 3), (2.0**-30, 1 + 2.0**-30), (bound - 1, bound),
             (-bound, -bound + 1), (bound - 0.7, bound + 0.3), (-0.5, 0.5)]
    worst = 0.0
    for x, x2 in pairs:
        p, q = _law(x, lam, big, bound), _law(x2, lam, big, bound)
        for v in set(p) | set(q):
            a, b = p.get(v, Fraction(0)), q.get(v, Fraction(0))
            if a == 0 and b == 0:
                continue
            assert a > 0 and b > 0, f"output {v} reachable from only one of {x}, {x2}: infinite privacy loss"
            r = abs(math.log(a / b))  # Fraction ratio: exact up to the final log
            worst = max(worst, r)
    assert worst <= claim, f"exact worst-case log-ratio {worst!r} exceeds the claimed epsilon {claim!r}"
    assert worst >= 0.9 / lam  # the audit sees (almost) the whole privacy loss of 1/lambda
