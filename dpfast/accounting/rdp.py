"""Renyi DP: RDP curves of the basic mechanisms, conversions to (epsilon, delta), RDPAccountant.

See: :doc:`/theory/accounting` ("RDP").  All curves are functions of an array of
orders alpha > 1 (``inf`` allowed) and return float64 arrays of the same shape.
"""
from __future__ import annotations

import functools
import math
from typing import Optional, Tuple

import numpy as np
from scipy import special

from dpfast._validation import as_array, check_delta, check_positive, check_real
from dpfast.accounting import basic, events as ev
from dpfast.accounting._cache import ByteBoundedCache
from dpfast.accounting.base import PrivacyAccountant
from dpfast.accounting.events import UnsupportedEventError
from dpfast.accounting.pairs import rr_pair

__all__ = [
    "DEFAULT_ORDERS",
    "ERM_ORDERS",
    "check_orders",
    "gaussian_rdp",
    "laplace_rdp",
    "discrete_pair_rdp",
    "pure_dp_rdp_bound",
    "poisson_subsampled_gaussian_rdp",
    "sampled_without_replacement_gaussian_rdp",
    "rdp_to_epsilon",
    "rdp_to_epsilon_classic",
    "rdp_to_delta",
    "rdp_curve",
    "RDPAccountant",
]

#: Default orders: a dense grid on (1, 11) (step 0.1), the integers 11..64 and 128..1024
#: (see docs/theory/accounting.rst; the same grid as dp-accounting plus 64, so that both agree).
DEFAULT_ORDERS = np.array(
    [1.0 + x / 10.0 for x in range(1, 100)] + list(range(11, 65)) + [128, 256, 512, 1024],
    dtype=np.float64,
)


#: Orders of the private-ERM calibrations (``dpfast.linear_model``: objective perturbation, AMP):
#: dense just above 1 (60 log-spaced points in (1, 2]), where the small epsilons those fits target
#: are decided, then 2..20 step 0.25 and 40 geometric points up to 1024.  A second grid beside
#: :data:`DEFAULT_ORDERS` on purpose: merging the two (their union) would lower released epsilons
#: of one side or the other; both are valid for every RDP-to-(epsilon, delta) conversion, and
#: each side's figures are pinned against closed forms and peers on its own grid.
ERM_ORDERS = np.unique(np.concatenate([1.0 + np.logspace(-3, 0, 60), np.linspace(2.0, 20.0, 73),
                                       np.geomspace(20.0, 1024.0, 40)]))
ERM_ORDERS.setflags(write=False)


#: Largest order whose subsampled-Gaussian RDP is expanded exactly (time and memory linear in the
#: order); larger finite orders get the unsampled Gaussian bound alpha / (2 z^2).
MAX_EXPANDED_ORDER = 100_000


def check_orders(orders) -> np.ndarray:
    """A 1-d float64 array of RDP orders, each > 1 (``inf`` allowed)."""
    if orders is None:
        return DEFAULT_ORDERS.copy()
    if isinstance(orders, (str, bytes)):
        raise TypeError("orders must be a sequence of numbers > 1")
    a = np.atleast_1d(as_array(orders, "orders", np.float64)).ravel()
    if a.size == 0 or np.isnan(a).any() or (a <= 1.0).any():
        raise ValueError(f"RDP orders must be a non-empty sequence of numbers > 1, got {orders!r}")
    return a


def _param(x, name: str, *, rate: bool = False) -> float:
    """A finite real > 0 (``rate``: in (0, 1]); these curves are public, so no garbage in."""
    v = check_real(x, name)  # refuses bools (True is not a noise multiplier) and strings
    if rate:
        if not 0.0 < v <= 1.0:
            raise ValueError(f"{name} must be in (0, 1], got {x!r}")
        return v
    return check_positive(v, name, allow_array=False)


def gaussian_rdp(orders, noise_multiplier: float) -> np.ndarray:
    """RDP of the Gaussian mechanism: alpha / (2 z^2), z = sigma/sensitivity (Mironov 2017, Proposition 7)."""
    a = check_orders(orders)
    noise_multiplier = _param(noise_multiplier, "noise_multiplier")
    with np.errstate(over="ignore"):  # z^2 may under/overflow: divide twice (inf is exact enough)
        return (a / (2.0 * noise_multiplier)) / noise_multiplier


def laplace_rdp(orders, scale: float, sensitivity: float = 1.0) -> np.ndarray:
    """RDP of the Laplace mechanism (Mironov 2017, Prop. 6; see :doc:`/theory/accounting`).

    With t = sensitivity/scale: eps(alpha) = log( alpha/(2alpha-1) e^((alpha-1)t)
    + (alpha-1)/(2alpha-1) e^(-alpha t) ) / (alpha-1), evaluated in log space; t at alpha = inf.
    """
    a = check_orders(orders)
    t = _param(sensitivity, "sensitivity") / _param(scale, "scale")
    out = np.full(a.shape, t)
    f = np.isfinite(a)
    af = a[f]
    lse = np.logaddexp(np.log(af / (2 * af - 1)) + (af - 1) * t, np.log((af - 1) / (2 * af - 1)) - af * t)
    out[f] = lse / (af - 1)
    return np.minimum(out, t)


def discrete_pair_rdp(orders, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Exact Renyi divergence D_alpha(P || Q) of two finite distributions (Mironov 2017, Definition 3).

    (1/(alpha-1)) log sum p^alpha q^(1-alpha); inf when P is not absolutely continuous w.r.t.
    Q; max log(p/q) at alpha = inf.
    """
    a = check_orders(orders)
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    keep = p > 0
    p, q = p[keep], q[keep]
    if (q <= 0).any():
        return np.full(a.shape, np.inf)
    lp, lq = np.log(p), np.log(q)
    out = np.empty(a.shape)
    for k, al in enumerate(a):
        if math.isinf(al):
            out[k] = float(np.max(lp - lq))
        else:
            out[k] = special.logsumexp(al * lp + (1 - al) * lq) / (al - 1)
    return np.maximum(out, 0.0)


def pure_dp_rdp_bound(orders, epsilon: float) -> np.ndarray:
    """min(eps, alpha eps^2/2): the RDP bound of any pure eps-DP mechanism (Bun & Steinke 2016, Proposition 3.3)."""
    a = check_orders(orders)
    epsilon = _param(epsilon, "epsilon")
    return np.minimum(epsilon, a * epsilon ** 2 / 2.0)


# ----------------------------------------------------------------------------------------------
# Poisson-subsampled Gaussian (Mironov, Talwar & Zhang 2019)
# ----------------------------------------------------------------------------------------------
def _lse_rows(t: np.ndarray) -> np.ndarray:
    m = np.max(t, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(t - m), axis=-1)) + m[..., 0]


def _log_a_int(alphas: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """log A_alpha = log sum_k C(alpha,k) (1-q)^(alpha-k) q^k exp((k^2-k)/(2 sigma^2)), integer alpha.

    Orders up to 64 in one masked matrix, larger ones one by one (no 1000-wide matrix)."""
    out = np.empty(alphas.shape)
    lq, l1q, c2 = math.log(q), math.log1p(-q), 1.0 / (2 * sigma ** 2)
    small = alphas <= 64
    if small.any():
        al = alphas[small][:, None]
        k = np.arange(int(al.max()) + 1, dtype=np.float64)[None, :]
        mask = k <= al
        kk = np.where(mask, k, 0.0)
        logc = special.gammaln(al + 1) - special.gammaln(kk + 1) - special.gammaln(al - kk + 1)
        terms = logc + kk * lq + (al - kk) * l1q + (kk * kk - kk) * c2
        out[small] = _lse_rows(np.where(mask, terms, -np.inf))
    for idx in np.flatnonzero(~small):
        a = alphas[idx]
        k = np.arange(int(a) + 1, dtype=np.float64)
        logc = special.gammaln(a + 1) - special.gammaln(k + 1) - special.gammaln(a - k + 1)
        out[idx] = _lse_rows(logc + k * lq + (a - k) * l1q + (k * k - k) * c2)
    return out


def _log_a_frac(alphas: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """Fractional-order series of MTZ19 (Section 3.3), vectorized over orders.

    A_alpha = sum_i C(alpha,i) [ q^i (1-q)^(alpha-i) e^((i^2-i)/(2s^2)) (1/2) erfc((i-z0)/(sqrt2 s))
    + q^(alpha-i) (1-q)^i e^((j^2-j)/(2s^2)) (1/2) erfc((z0-j)/(sqrt2 s)) ],  j = alpha - i,
    z0 = s^2 log(1/q - 1) + 1/2; generalized binomials carry signs, summed in log space;
    truncated once every term is below e^-30 (as in the reference implementation).
    """
    z0 = sigma ** 2 * (math.log1p(-q) - math.log(q)) + 0.5  # log(1/q - 1); 1/q overflows at q < 5.6e-309
    n = 64
    al = alphas[:, None]
    lq, l1q = math.log(q), math.log1p(-q)
    while True:
        i = np.arange(n, dtype=np.float64)[None, :]
        coef = special.binom(al, i)
        with np.errstate(divide="ignore"):
            logc = np.log(np.abs(coef))
        j = al - i
        log_t0 = logc + i * lq + j * l1q
        log_t1 = logc + j * lq + i * l1q
        log_e0 = special.log_ndtr((z0 - i) / sigma)
        log_e1 = special.log_ndtr((j - z0) / sigma)
        s0 = log_t0 + (i * i - i) / (2 * sigma ** 2) + log_e0
        s1 = log_t1 + (j * j - j) / (2 * sigma ** 2) + log_e1
        if np.max(np.maximum(s0[:, -8:], s1[:, -8:])) < -30 or n >= 4096:
            break
        n *= 2
    pos = coef > 0
    neg = coef < 0
    s = np.concatenate([s0, s1], axis=1)
    pm = np.concatenate([pos, pos], axis=1)
    nm = np.concatenate([neg, neg], axis=1)
    lpos = _lse_rows(np.where(pm, s, -np.inf))
    lneg = _lse_rows(np.where(nm, s, -np.inf))
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = lpos + np.log1p(-np.exp(np.minimum(lneg - lpos, 0.0)))
    return diff


def poisson_subsampled_gaussian_rdp(orders, noise_multiplier: float, sample_rate: float) -> np.ndarray:
    """RDP of the Poisson-subsampled Gaussian mechanism (Mironov, Talwar & Zhang 2019).

    Add/remove neighbours, sensitivity 1, noise std ``noise_multiplier``, rate q.  Exact at
    integer orders (binomial expansion), the MTZ19 fractional series elsewhere (see
    :doc:`/theory/accounting`, "Poisson-subsampled Gaussian").  q = 1 gives alpha/(2 z^2); alpha = inf
    gives inf for q > 0.  Fractional orders above 1024 use the linear interpolation of
    (alpha-1) eps(alpha) between the neighbouring integers (an upper bound: it is convex in
    alpha, van Erven & Harremoes 2014); orders above :data:`MAX_EXPANDED_ORDER` (whose exact
    expansion costs time and memory linear in alpha) get the unsampled bound alpha/(2 z^2).
    """
    a = check_orders(orders)
    sigma = _param(noise_multiplier, "noise_multiplier")
    q = _param(sample_rate, "sample_rate", rate=True)
    if q == 1.0 or not 1e-100 <= sigma <= 1e100:  # there, the unsampled bound (see the WOR curve)
        return gaussian_rdp(a, sigma)
    out = np.empty(a.shape)
    inf = np.isinf(a)
    out[inf] = np.inf
    big = ~inf & (a > MAX_EXPANDED_ORDER)
    out[big] = np.inf  # capped below by the unsampled Gaussian (no allocation linear in alpha)
    fin = ~inf & ~big
    isint = fin & (a == np.round(a))
    if isint.any():
        out[isint] = _log_a_int(a[isint], q, sigma) / (a[isint] - 1)
    fr = fin & ~isint
    mid = fr & (a > 1024)  # beyond the series' truncation (4096 terms): interpolate, an upper bound
    if mid.any():
        al = a[mid]
        lo, hi = np.floor(al), np.ceil(al)
        ylo = np.where(lo >= 2, _log_a_int(np.maximum(lo, 2.0), q, sigma), 0.0)  # (alpha-1) eps(alpha)
        yhi = _log_a_int(hi, q, sigma)
        out[mid] = (ylo + (al - lo) * (yhi - ylo)) / (al - 1)
    fr &= ~mid
    if fr.any():
        out[fr] = _log_a_frac(a[fr], q, sigma) / (a[fr] - 1)
    out = np.where(np.isnan(out), np.inf, out)
    # Subsampling never hurts: cap by the unsampled Gaussian (joint convexity).
    return np.minimum(np.maximum(out, 0.0), a / (2 * sigma ** 2))


# ----------------------------------------------------------------------------------------------
# Sampling without replacement (Wang, Balle & Kasiviswanathan 2019)
# ----------------------------------------------------------------------------------------------
#: Largest j whose ternary-|chi|^j bound uses the forward differences (WBK19, Theorem 27); the
#: j > WOR_MAX_DIFF terms use Theorem 9's (the other argument of the same min, never smaller).
WOR_MAX_DIFF = 256


def _log_gauss_forward_diffs(sigma: float, jmax: int) -> np.ndarray:
    """Upper bounds on log D_j, D_j = Delta^j f(0), f(k) = e^{k(k-1)/(2 sigma^2)}, j = 0..jmax.

    D_j = E_Q[(P/Q - 1)^j] for the Gaussian pair (P, Q) = (N(1, s^2), N(0, s^2)), since
    E_Q[(P/Q)^k] = f(k).  Two evaluations, each rounded up, the smaller kept (``inf`` where
    neither certifies a value, so that the caller's min falls back to Theorem 9's term):

    * the alternating sum sum_k (-1)^(j-k) C(j,k) f(k), with a bound on its rounding error
      (useful where the largest term dominates, i.e. j/sigma^2 not small);
    * a series with nonnegative terms (no cancellation): writing k(k-1) = k_(2) (falling
      factorial), f(k) = sum_m c^m k_(2)^m / m!, c = 1/(2 sigma^2), and Delta^j k_(2)^m at 0 is
      T(m, j), the number of m-tuples of ordered pairs of distinct elements of {1..j} that
      cover {1..j}; T(m, j) = j(j-1) [T(m-1, j) + 2 T(m-1, j-1) + T(m-1, j-2)] (the last pair
      adds 0, 1 or 2 new elements).  So D_j = sum_m t(m, j), t(m, j) = c^m T(m, j)/m!, summed
      in log space; the tail beyond m is bounded by sum (c j(j-1))^m/m! (T(m,j) <= (j(j-1))^m).
    """
    u = np.finfo(np.float64).eps
    c = 1.0 / (2.0 * sigma ** 2)
    j = np.arange(jmax + 1, dtype=np.float64)
    # --- alternating sum, per j (log-space positive and negative parts)
    alt = np.full(jmax + 1, np.inf)
    sharp = np.zeros(jmax + 1, dtype=bool)  # alternating sum certified to 1e-10 relative
    for jj in range(2, jmax + 1):
        k = np.arange(jj + 1, dtype=np.float64)
        lt = (special.gammaln(jj + 1) - special.gammaln(k + 1) - special.gammaln(jj - k + 1)
              + c * k * (k - 1))
        even = (jj - k) % 2 == 0
        lp, ln_ = special.logsumexp(lt[even]), special.logsumexp(lt[~even])
        # each term carries a relative error <= ~4u(|log term| + 1); the sums ~(j + 2)u
        rel = (jj + 8.0 + 4.0 * float(np.max(np.abs(lt)))) * u
        lsum = np.logaddexp(lp, ln_)
        diff = -np.expm1(ln_ - lp) if ln_ < lp else 0.0  # (P - N)/P
        err = math.exp(lsum - lp) * rel  # error / P
        if diff > 2 * err:
            alt[jj] = lp + math.log(diff + err)
            sharp[jj] = err <= 1e-10 * diff
    # --- nonnegative series (log space), all j at once
    ser = np.full(jmax + 1, np.inf)
    lam = c * j * (j - 1)  # Poisson-type tail parameter per j
    ok = (j >= 2) & ~sharp & (lam <= 5000.0)  # lam large: the alternating sum is sharp
    if ok.any():
        jm = int(j[ok].max())
        lj = np.full(jm + 1, -np.inf)
        lj[2:] = np.log(j[2:jm + 1] * (j[2:jm + 1] - 1))
        prev = np.full(jm + 1, -np.inf)
        prev[0] = 0.0  # T(0, 0) = 1
        acc = np.full(jm + 1, -np.inf)
        lam_j = lam[:jm + 1]
        lc = -math.log(2.0) - 2.0 * math.log(sigma)  # log c without underflow of c
        done = ~ok[:jm + 1]
        steps = 0
        tail = np.full(jm + 1, -np.inf)
        for m in range(1, 40_001):
            sh1 = np.concatenate(([-np.inf], prev[:-1]))
            sh2 = np.concatenate(([-np.inf, -np.inf], prev[:-2]))
            cur = lc - math.log(m) + lj + np.logaddexp(np.logaddexp(prev, math.log(2.0) + sh1), sh2)
            acc = np.where(done, acc, np.logaddexp(acc, cur))
            prev = cur
            steps = m
            # tail bound sum_{m' > m} lam^m'/m' ! <= 2 lam^(m+1)/(m+1)! once m + 1 >= 2 lam
            with np.errstate(divide="ignore"):
                lb = (m + 1) * np.log(np.maximum(lam_j, 1e-300)) - special.gammaln(m + 2) + math.log(2.0)
            fin = ~done & (m + 1 >= 2 * lam_j) & (m >= j[:jm + 1]) & (lb < acc - 40.0)
            tail = np.where(fin, lb, tail)
            done |= fin
            if done.all():
                break
        good = ok[:jm + 1] & done & np.isfinite(acc)
        # rounding: ~6 roundings of a log value per step, each <= u(|value| + 1) absolute
        with np.errstate(invalid="ignore"):
            slack = 6.0 * steps * u * (np.abs(acc) + 1.0) + 1e-12
            ser[:jm + 1] = np.where(good, np.logaddexp(acc, tail) + slack, np.inf)
    return np.minimum(alt, ser)


def _wor_int(alpha: int, q: float, sigma: float, logd: Optional[np.ndarray] = None) -> float:
    """(alpha - 1) eps(alpha) bound of WBK19 (Theorem 27) for the Gaussian, integer alpha >= 2.

    log of 1 + q^2 C(alpha,2) min(4 (e^{eps(2)} - 1), 2 e^{eps(2)})
             + sum_{j=3}^alpha q^j C(alpha,j) min(4 sqrt(D_{2 floor(j/2)} D_{2 ceil(j/2)}), 2 e^{(j-1) eps(j)}),
    eps(j) = j/(2 sigma^2) and D_i the i-th forward difference of e^{(x-1) eps(x)} at 0 (an
    upper bound on the ternary-|chi|^j divergence of the Gaussian pair; Cauchy-Schwarz for
    odd j).  The second argument of each min is Theorem 9's general term; ``logd`` holds log D_i
    (from :func:`_log_gauss_forward_diffs`) for i <= len(logd) - 1, beyond which Theorem 9's
    term is used.
    """
    if alpha == 1:
        return 0.0
    e2 = 2.0 / (2 * sigma ** 2)
    log_f2m1 = e2 + math.log(-math.expm1(-e2))  # log(e^{eps(2)} - 1) = log D_2
    terms = [0.0]
    logc2 = special.gammaln(alpha + 1) - special.gammaln(3) - special.gammaln(alpha - 1)
    terms.append(2 * math.log(q) + logc2 + min(math.log(4) + log_f2m1, e2 + math.log(2)))
    if alpha >= 3:
        j = np.arange(3, alpha + 1, dtype=np.float64)
        logc = special.gammaln(alpha + 1) - special.gammaln(j + 1) - special.gammaln(alpha - j + 1)
        general = (j - 1) * j / (2 * sigma ** 2) + math.log(2)
        if logd is not None:
            ji = np.arange(3, alpha + 1)
            lo, hi = 2 * (ji // 2), 2 * ((ji + 1) // 2)
            inside = hi < logd.size
            fd = np.full(ji.shape, np.inf)
            fd[inside] = math.log(4) + 0.5 * (logd[lo[inside]] + logd[hi[inside]])
            general = np.minimum(general, fd)
        terms.extend((j * math.log(q) + logc + general).tolist())
    # rounded up: the log-gamma/log/exp roundings of the terms are far below 1e-10 relative
    return float(special.logsumexp(terms)) / (alpha - 1) * (1.0 + 1e-10)


def sampled_without_replacement_gaussian_rdp(orders, noise_multiplier: float, sample_rate: float) -> np.ndarray:
    """RDP of the Gaussian mechanism on a fixed-size uniform subsample (replace-one).

    Wang, Balle & Kasiviswanathan 2019 ("Subsampled Renyi differential privacy and analytical
    moments accountant", AISTATS; Theorem 27 of arXiv:1808.00087, the bound for mechanisms such
    as the Gaussian whose ternary-|chi|^j divergences are bounded by the forward differences of
    e^{(x-1) eps(x)}) at integer orders, eps(j) = j/(2 z^2) (z relative to the replace-one
    sensitivity); each term is the min of that bound and Theorem 9's general one, so the curve
    is never above Theorem 9.  At fractional orders the linear interpolation of
    (alpha-1) eps(alpha) between neighbouring integers (an upper bound, as (alpha-1) eps(alpha)
    is convex; WBK19 Corollary 10).  Capped by the unsampled Gaussian alpha/(2 z^2), which is all
    that orders above :data:`MAX_EXPANDED_ORDER` get; q = 1 gives alpha/(2 z^2).
    """
    a = check_orders(orders)
    sigma = _param(noise_multiplier, "noise_multiplier")
    q = _param(sample_rate, "sample_rate", rate=True)
    if q == 1.0 or not 1e-100 <= sigma <= 1e100:
        # Outside that range the expansion's exponentials under/overflow; the unsampled
        # Gaussian bound is valid and, there, within rounding of the subsampled one in every
        # sense that matters (RDP ~ 1e-200 or ~ 1e200 alpha).
        return gaussian_rdp(a, sigma)
    fin = a[np.isfinite(a) & (a <= MAX_EXPANDED_ORDER)]
    top = int(min(math.ceil(fin.max()), WOR_MAX_DIFF)) + 1 if fin.size else 2
    logd = _log_gauss_forward_diffs(sigma, top)
    cache = {}

    def at(k: int) -> float:
        if k not in cache:
            cache[k] = _wor_int(k, q, sigma, logd)
        return cache[k]

    out = np.empty(a.shape)
    for idx, al in enumerate(a):
        if math.isinf(al) or al > MAX_EXPANDED_ORDER:  # capped below (no work linear in alpha)
            out[idx] = np.inf
            continue
        lo, hi = math.floor(al), math.ceil(al)
        if lo == hi:
            out[idx] = at(int(lo))
        else:
            ylo = (lo - 1) * at(int(lo)) if lo >= 2 else 0.0
            yhi = (hi - 1) * at(int(hi))
            out[idx] = (ylo + (al - lo) * (yhi - ylo)) / (al - 1)
    return np.minimum(out, a / (2 * sigma ** 2))


# ----------------------------------------------------------------------------------------------
# Conversions
# ----------------------------------------------------------------------------------------------
def _prep(orders, rdp):
    a = check_orders(orders)
    r = np.atleast_1d(as_array(rdp, "rdp", np.float64)).ravel()
    if r.shape != a.shape:
        raise ValueError(f"orders and rdp must have the same length, got {a.size} and {r.size}")
    if np.isnan(r).any() or (r < 0).any():
        raise ValueError("rdp values must be >= 0 (inf allowed)")
    return a, r


def rdp_to_epsilon(orders, rdp, delta: float) -> Tuple[float, float]:
    """Improved RDP -> (epsilon, delta) conversion; returns (epsilon, best order).

    eps = min_alpha [ r(alpha) + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha-1) ]
    (Canonne, Kamath & Steinke 2020, Prop. 12; Balle et al. 2020; see :doc:`/theory/accounting`),
    clipped at 0; also eps = 0 wherever delta^2 >= 1 - e^-r(alpha).  ``inf`` (with the smallest
    order, every order giving the same) when every order's RDP is infinite.
    """
    a, r = _prep(orders, rdp)
    delta = check_delta(delta, allow_zero=False)
    with np.errstate(invalid="ignore", over="ignore"):
        eps = r + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1)
        eps = np.where(np.isinf(a), r, eps)
        eps = np.where(delta ** 2 + np.expm1(-r) >= 0, 0.0, eps)
        eps = np.where(np.isinf(r), np.inf, eps)
    eps = np.maximum(eps, 0.0)
    k = int(np.argmin(eps))  # all infinite: argmin is the first (smallest) order, never NaN
    return float(eps[k]), float(a[k])


def rdp_to_epsilon_classic(orders, rdp, delta: float) -> Tuple[float, float]:
    """Classic conversion eps = min_alpha r(alpha) + log(1/delta)/(alpha-1) (Mironov 2017, Proposition 3).

    For comparison only: :func:`rdp_to_epsilon` is never worse."""
    a, r = _prep(orders, rdp)
    delta = check_delta(delta, allow_zero=False)
    with np.errstate(invalid="ignore"):
        eps = np.where(np.isinf(a), r, r + math.log(1.0 / delta) / (a - 1))
    k = int(np.argmin(eps))  # all infinite: argmin is the first (smallest) order, never NaN
    return float(eps[k]), float(a[k])


def rdp_to_delta(orders, rdp, epsilon: float) -> Tuple[float, float]:
    """Improved RDP -> delta at a given epsilon; returns (delta, best order).

    delta = min_alpha exp((alpha-1)(r - eps + log(1 - 1/alpha)) - log alpha), clipped to 1
    (the inverse of :func:`rdp_to_epsilon` order by order; see :doc:`/theory/accounting`), and also
    delta <= sqrt(1 - e^-r).
    """
    a, r = _prep(orders, rdp)
    e = check_real(epsilon, "epsilon")
    if not e >= 0 or math.isnan(e):
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        logd = np.where(np.isinf(a), np.where(r <= e, -np.inf, 0.0),
                        (a - 1) * (r - e + np.log1p(-1.0 / a)) - np.log(a))
        logd = np.minimum(logd, 0.5 * np.log1p(-np.exp(-r)))
        logd = np.where(np.isinf(r), 0.0, logd)
    k = int(np.argmin(logd))
    return float(min(1.0, math.exp(logd[k]))), float(a[k])


# ----------------------------------------------------------------------------------------------
# Per-event RDP curves (one registration per event class)
# ----------------------------------------------------------------------------------------------
@functools.singledispatch
def rdp_curve(event, orders: np.ndarray) -> np.ndarray:
    """RDP curve of ``event`` at ``orders`` (a checked 1-d float64 array): epsilons, ``inf``
    where an order is not bounded.  Register a new event class with ``@rdp_curve.register``;
    an unregistered one raises :class:`UnsupportedEventError`."""
    raise UnsupportedEventError(f"the RDP accountant cannot account {type(event).__name__} events "
                                f"({event!r}): no RDP curve is registered for them")


@rdp_curve.register
def _(event: ev.Gaussian, orders):
    return gaussian_rdp(orders, event.noise_multiplier)


@rdp_curve.register
def _(event: ev.Laplace, orders):
    return laplace_rdp(orders, event.scale, event.sensitivity)


@rdp_curve.register
def _(event: ev.RandomizedResponse, orders):
    # exact (Mironov 2017 for k = 2), through the merged worst-case pair
    return discrete_pair_rdp(orders, *rr_pair(event.epsilon, event.num_categories))


@rdp_curve.register
def _(event: ev.PureDP, orders):
    # the tight dominating pair of pure eps-DP: binary RR (<= min(eps, alpha eps^2/2))
    return discrete_pair_rdp(orders, *rr_pair(event.epsilon, 2))


@rdp_curve.register
def _(event: ev.ApproxDP, orders):
    if event.delta > 0:
        raise UnsupportedEventError(
            f"the RDP accountant cannot account {event!r}: an (epsilon, delta > 0)-DP release has "
            "infinite Renyi divergence at every order; use the PLD accountant")
    if event.epsilon == 0:
        return np.zeros(orders.shape)
    return discrete_pair_rdp(orders, *rr_pair(event.epsilon, 2))


@rdp_curve.register
def _(event: ev.FromPrivacyProfile, orders):
    if event.rdp_curve is None:
        raise UnsupportedEventError(
            f"the RDP accountant cannot account {event!r}: it was given a privacy profile but no RDP "
            "curve (pass rdp=... or use the PLD accountant)")
    out = np.asarray(event.rdp_curve(orders), dtype=np.float64)
    if out.shape != orders.shape:
        out = np.array([float(event.rdp_curve(float(a))) for a in orders])
    return out


@rdp_curve.register
def _(event: ev.FromDominatingPair, orders):
    out = discrete_pair_rdp(orders, np.array(event.p), np.array(event.q))
    if event.p_add is not None:
        out = np.maximum(out, discrete_pair_rdp(orders, np.array(event.p_add), np.array(event.q_add)))
    return out


@rdp_curve.register
def _(event: ev.PoissonSampled, orders):
    if event.sample_rate == 1.0:
        return rdp_curve(event.event, orders)
    g = ev.sampled_gaussian(event, "RDP")
    return poisson_subsampled_gaussian_rdp(orders, g.noise_multiplier, event.sample_rate)


@rdp_curve.register
def _(event: ev.SampledWithoutReplacement, orders):
    if event.sample_rate == 1.0:
        return rdp_curve(event.event, orders)
    g = ev.sampled_gaussian(event, "RDP")
    return sampled_without_replacement_gaussian_rdp(orders, g.noise_multiplier, event.sample_rate)


@rdp_curve.register
def _(event: ev.SelfComposed, orders):
    inner = rdp_curve(event.event, orders)  # refuses an unsupported inner event even at count 0
    return np.zeros(orders.shape) if event.count == 0 else event.count * inner


@rdp_curve.register
def _(event: ev.Composed, orders):
    out = np.zeros(orders.shape)
    for e in event.events:
        out = out + rdp_curve(e, orders)
    return out


@rdp_curve.register
def _(event: ev.OneOf, orders):
    # joint quasi-convexity of Renyi divergence: a data-independent mixture is bounded by the
    # members' pointwise maximum (see OneOf)
    return np.max([np.asarray(rdp_curve(e, orders), dtype=np.float64) for e in event.events], axis=0)


# ----------------------------------------------------------------------------------------------
# Accountant
# ----------------------------------------------------------------------------------------------
#: RDP curves of events at order grids (process-wide; thread-safe, LRU, <= 8 MiB counting
#: each curve and its order key; :func:`dpfast.accounting.clear_cache` empties it).
CURVE_CACHE_BYTES = 8 * 2 ** 20
_CURVE_CACHE = ByteBoundedCache("rdp curves", CURVE_CACHE_BYTES, lambda key, v: v.nbytes + len(key[-1]) + 200)


def _curve(event, orders: np.ndarray, key: bytes) -> np.ndarray:
    try:
        ck = (type(event), event, key)  # the type too: equal fields of two event classes differ
        hit = _CURVE_CACHE.get(ck)
    except TypeError:  # unhashable event
        return np.asarray(rdp_curve(event, orders), dtype=np.float64)
    if hit is None:
        hit = np.asarray(rdp_curve(event, orders), dtype=np.float64)
        hit.setflags(write=False)  # shared between accountants and threads
        _CURVE_CACHE.put(ck, hit)
    return hit


class RDPAccountant(PrivacyAccountant):
    """Renyi-DP accountant (Mironov 2017; conversion of Canonne, Kamath & Steinke 2020).

    ``compose(event, count)`` adds ``count`` times the event's RDP curve (:func:`rdp_curve`) at
    ``orders`` (default :data:`DEFAULT_ORDERS`); ``get_epsilon(delta)`` / ``get_delta(epsilon)``
    use the improved conversion (``conversion="classic"`` for the classic one).  Events without
    an RDP curve (a privacy profile alone, (eps, delta > 0)-DP) raise
    :class:`UnsupportedEventError`.  One neighbouring relation per accountant.

    Thread-safe: one accountant may be shared between threads; every ``compose`` is applied
    exactly once (the update is made under a lock), so the result equals the sequential one.
    """

    name = "rdp"

    def __init__(self, orders=None, conversion: str = "improved"):
        self.orders = check_orders(orders)
        self.orders.setflags(write=False)
        if conversion not in ("improved", "classic"):
            raise ValueError(f"conversion must be 'improved' or 'classic', got {conversion!r}")
        self.conversion = conversion
        self._rdp = np.zeros_like(self.orders)
        self._key = self.orders.tobytes()
        self._init_base()

    def _config(self):
        return {"orders": self.orders.tolist(), "conversion": self.conversion}

    def __repr__(self) -> str:
        n = sum(c for _, c in self._ledger)
        return f"RDPAccountant(orders=<{self.orders.size} orders>, conversion={self.conversion!r}, compositions={n})"

    def _prepare(self, event):
        return _curve(event, self.orders, self._key)

    def _apply(self, event, curve, count):
        self._rdp = self._rdp + (curve if count == 1 else count * curve)  # replaced, never mutated

    @property
    def rdp(self) -> np.ndarray:
        """The composed RDP curve at ``orders``."""
        return self._rdp.copy()

    def get_epsilon_and_order(self, delta: float) -> Tuple[float, float]:
        f = rdp_to_epsilon if self.conversion == "improved" else rdp_to_epsilon_classic
        return f(self.orders, self._rdp, delta)  # self._rdp is replaced, never mutated in place

    def get_epsilon(self, delta: float) -> float:
        """Smallest epsilon certified at ``delta`` (inf only when every order's RDP is inf), and
        never above basic composition's (:mod:`dpfast.accounting.basic`)."""
        return min(self.get_epsilon_and_order(delta)[0], basic.ledger_epsilon(self.ledger, delta))

    def get_delta(self, epsilon: float) -> float:
        """Smallest delta certified at ``epsilon`` by the improved conversion (or basic composition)."""
        return min(rdp_to_delta(self.orders, self._rdp, epsilon)[0], basic.ledger_delta(self.ledger, epsilon))

