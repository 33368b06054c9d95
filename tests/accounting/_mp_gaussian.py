"""The Gaussian mechanism's exact privacy profile in mpmath (60 digits): the tests' reference.

k Gaussians composed are exactly the Gaussian mechanism of mu = sqrt(sum c_j / z_j^2) (Dong, Roth
& Su 2022, Corollary 3.3), whose profile is delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu
- mu/2) (Balle & Wang 2018, Theorem 8); the far tails and 1 - delta near 1e-12 need the digits.
Independent of dpfast's SciPy evaluation (dpfast.accounting._closed_forms).
"""
import mpmath

CTX = mpmath.MPContext()
CTX.dps = 60


def exact_delta(eps, mu):
    """delta(eps) of the Gaussian mechanism of ``mu`` (an mpf)."""
    eps, mu = CTX.mpf(eps), CTX.mpf(mu)
    return CTX.ncdf(-eps / mu + mu / 2) - CTX.exp(eps) * CTX.ncdf(-eps / mu - mu / 2)


def exact_eps(delta, mu):
    """Smallest eps >= 0 with delta(eps) <= delta (delta decreases in eps), by bisection to
    2^-200 (an mpf)."""
    delta = CTX.mpf(delta)
    if exact_delta(0, mu) <= delta:
        return CTX.mpf(0)
    lo, hi = CTX.mpf(0), CTX.mpf(1)
    while exact_delta(hi, mu) > delta:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if exact_delta(mid, mu) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def exact_mu(ledger):
    """mu of ``(z, count)`` pairs, exactly (60 digits) from the doubles."""
    return CTX.sqrt(sum(CTX.mpf(c) / CTX.mpf(z) ** 2 for z, c in ledger))
