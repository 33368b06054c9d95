"""A reimplementation of DP-Auditorium's histogram tester, the peer of ``dpfast.audit`` in
``bench_audit.py`` (DP-Auditorium is not on PyPI).

DP-Auditorium (google/differential-privacy, ``python/dp_auditorium``; Kong et al. 2024) ships
``HistogramTester``: Algorithm 2 of Gilbert & McMillan, "Property Testing for Differential
Privacy" (2018).  Given n samples of the mechanism on each of two neighbours, it bins them
(``histogram_size`` equal bins on ``[min_value, max_value]``, samples clipped into the range; or
the outcomes ``0..histogram_size-1`` of a discrete mechanism), estimates the two probability
mass functions p and q and the hockey-stick divergence at the claimed epsilon,

    delta_hat = sum_i max(0, p_i - e^epsilon q_i),

and subtracts an error tolerance that holds with probability ``1 - failure_probability``:

    tol = 2/sqrt(n) * sum_i sqrt(p_i) + 2 e^epsilon/sqrt(n) * sum_i sqrt(q_i)
          + 6 (1 + e^epsilon) sqrt(log(4 / failure_probability) / (2 n))

(DP-Auditorium's default, an improvement of the paper's ``2 (1 + e^epsilon) sqrt(B / n)`` first
term, which ``original=True`` selects).  ``delta_hat - tol`` is a lower bound on the release's
delta at the claimed epsilon; the claim (epsilon, delta) is rejected when it is ``>= delta``.
Written from that description; no code was copied.
"""
from __future__ import annotations

import math

import numpy as np


class HistogramTester:
    """Gilbert & McMillan's histogram test of an (epsilon, delta)-DP claim, as in DP-Auditorium."""

    def __init__(self, epsilon: float, delta: float, *, histogram_size: int = 10,
                 min_value: float = 0.0, max_value: float = 1.0, discrete: bool = False,
                 original: bool = False):
        if not (epsilon >= 0 and 0 <= delta < 1 and histogram_size >= 1 and max_value > min_value):
            raise ValueError("need epsilon >= 0, 0 <= delta < 1, histogram_size >= 1, max_value > min_value")
        self.epsilon, self.delta = float(epsilon), float(delta)
        self.bins, self.lo, self.hi = int(histogram_size), float(min_value), float(max_value)
        self.discrete, self.original = bool(discrete), bool(original)

    def pmf(self, samples) -> np.ndarray:
        s = np.asarray(samples)
        if s.size == 0:
            raise ValueError("no samples")
        if self.discrete:
            s = s.astype(np.int64)
            if s.min() < 0 or s.max() >= self.bins:
                raise ValueError(f"discrete samples must lie in 0..{self.bins - 1}")
            return np.bincount(s, minlength=self.bins) / s.size
        counts, _ = np.histogram(np.clip(s.astype(np.float64), self.lo, self.hi), bins=self.bins,
                                 range=(self.lo, self.hi))
        return counts / s.size

    def tolerance(self, n: int, p: np.ndarray, q: np.ndarray, failure_probability: float) -> float:
        e = math.exp(self.epsilon)
        if self.original:
            first = 2.0 * (1.0 + e) * math.sqrt(self.bins / n)
        else:
            first = 2.0 / math.sqrt(n) * float(np.sqrt(p).sum()) + 2.0 * e / math.sqrt(n) * float(np.sqrt(q).sum())
        return first + 6.0 * (1.0 + e) * math.sqrt(math.log(4.0 / failure_probability) / (2.0 * n))

    def delta_lower_bound(self, samples1, samples2, failure_probability: float) -> float:
        """Lower bound (probability >= 1 - failure_probability) on delta at ``epsilon`` for the
        order (samples1 from D, samples2 from D')."""
        n = min(len(samples1), len(samples2))
        p, q = self.pmf(samples1), self.pmf(samples2)
        excess = p - math.exp(self.epsilon) * q
        return float(excess[excess > 0].sum()) - self.tolerance(n, p, q, failure_probability)

    def rejects(self, lower_bound: float) -> bool:
        return lower_bound >= self.delta


def histogram_audit(release, D, D_prime, epsilon: float, delta: float = 0.0, *, n_runs: int,
                    rng=None, confidence: float = 0.95, **tester_kw) -> dict:
    """Run ``release(data, seed)`` ``n_runs`` times on each side (black box, like
    ``dpfast.audit.audit``) and apply the histogram tester in both orders, each at failure
    probability ``(1 - confidence) / 2``.  Returns ``{"rejected", "delta_lower_bound"}``."""
    gen = np.random.default_rng(rng)
    seeds = gen.integers(0, 2 ** 63, size=2 * n_runs)
    a = np.array([float(release(D, int(s))) for s in seeds[:n_runs]])
    b = np.array([float(release(D_prime, int(s))) for s in seeds[n_runs:]])
    t = HistogramTester(epsilon, delta, **tester_kw)
    beta = (1.0 - confidence) / 2.0
    lb = max(t.delta_lower_bound(a, b, beta), t.delta_lower_bound(b, a, beta))
    return {"rejected": t.rejects(lb), "delta_lower_bound": lb}
