// Privacy-loss distributions: discretization on a uniform grid and delta/epsilon scans.
// Spec: accounting.md ("Privacy-loss distributions (PLD) and FFT composition").
// Plain C++17, no Python: pointers and sizes in, pointers out.
//
// Grid: losses e_j = (i0 + j) h, j = 0..n-1.  Bins of the true loss L: bin 0 = (-inf, e_0],
// bin j = (e_{j-1}, e_j] (1 <= j <= n-1), bin n = (e_{n-1}, +inf).
//
// Pessimistic "connect the dots" (Doroshenko et al. 2022): the P-mass dP and Q-mass dQ of a bin
// (e_{j-1}, e_j] are split between its two end points so that both the P-mass and the Q-mass
// are preserved (b = (dP - e^{e_{j-1}} dQ) / (1 - e^{-h}) to e_j, the rest to e_{j-1}); the
// bin (e_{n-1}, inf) splits between e_{n-1} and +inf, bin 0 goes to e_0 (its Q excess to
// -inf).  The resulting pair's hockey-stick curve is the chord interpolation (in e^eps) of the
// true one, hence an upper bound that composes.
// Optimistic companion: every bin's P-mass goes to its lower end (bin 0 dropped, bin n to
// e_{n-1}): losses only decrease, so composed deltas are lower bounds.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>
#include <cstddef>
#include <limits>

namespace dpf {
namespace pld {

using ld = long double;

inline ld phibar(ld z) {  // P(N(0,1) > z)
    return 0.5L * std::erfc(z / std::sqrt(2.0L));
}

// x at which the remove-pair loss log(1 - q + q exp((2x-1)/(2 s^2))) equals e (-inf if never).
inline ld remove_inverse(ld e, ld s, ld q) {
    ld em1 = std::expm1(e);
    if (em1 <= -q) return -std::numeric_limits<ld>::infinity();
    if (q == 1.0L) return s * s * e + 0.5L;
    return s * s * std::log1p(em1 / q) + 0.5L;
}

inline double remove_inverse_d(double e, double s, double q) {
    double em1 = std::expm1(e);
    if (em1 <= -q) return -std::numeric_limits<double>::infinity();
    if (q == 1.0) return s * s * e + 0.5;
    return s * s * std::log1p(em1 / q) + 0.5;
}

// Split bins into pessimistic (connect-the-dots) and optimistic masses.
// dP, dQ: n+1 bins.  Outputs pess[n], opt[n] and *pinf_pess (mass at +inf added by the top bin).
template <class T>
inline void ctd_split(const T* dP, const T* dQ, std::size_t n, double i0, double h, double* pess,
                      double* opt, double* pinf_pess, double* opt_shift = nullptr,
                      double* excess_var = nullptr) {
    // excess_var: variance added by the split, sum over bins of dP h^2 beta (1 - beta) with
    // beta = b / dP (0 for atoms on grid points); used to decide on grid refinement.
    double excess = 0;
    // opt_shift: a lower bound on E_P[min(L - floor_grid(L), h)] (bins 1..n-1), from Jensen in
    // each bin: E[L | bin] >= log(dP/dQ) (the merged bin's loss).  Used by the optimistic bound.
    // Double precision: the split b = dP (1 - e^{-(l* - e_{j-1})}) / (1 - e^{-h}) loses about
    // log10(1/h) digits to cancellation (relative error ~1e-12 at h = 1e-4).
    double shift = 0;
    for (std::size_t j = 0; j < n; ++j) pess[j] = opt[j] = 0.0;
    const double den = -std::expm1(-h);  // 1 - e^{-h}
    pess[0] += (double)dP[0];
    for (std::size_t j = 1; j < n; ++j) {
        double p = (double)dP[j], q = (double)dQ[j];
        if (p > 0) {
            double elo = (i0 + (double)(j - 1)) * h;
            double eq = std::exp(elo) * q;
            double b = (p - eq) / den;
            if (b < 0) b = 0;
            if (b > p) b = p;
            pess[j] += b;
            pess[j - 1] += p - b;
            opt[j - 1] += p;
            double m = (q > 0) ? std::log(p / eq) : h;
            if (m < 0) m = 0;
            if (m > h) m = h;
            shift += p * m;
            double beta = b / p;
            excess += p * h * h * beta * (1.0 - beta);
        }
    }
    if (opt_shift) *opt_shift = shift;
    if (excess_var) *excess_var = excess;
    double p = (double)dP[n], q = (double)dQ[n];
    double etop = (i0 + (double)(n - 1)) * h;
    double inf = p - std::exp(etop) * q;
    if (inf < 0) inf = 0;
    if (inf > p) inf = p;
    *pinf_pess = inf;
    pess[n - 1] += p - inf;
    opt[n - 1] += p;
}

// Bins of the (Poisson-)subsampled Gaussian pairs, noise s, rate q (q = 1: plain Gaussian).
// remove: P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2), loss increasing in x.
// add:    P = N(0,s^2), Q = (1-q)N(0,s^2) + qN(1,s^2), loss decreasing in x.
// One erfc per edge and component: the smaller tail t = P(Z > |z|) is stored, and interval
// masses are differences of same-side tails (or 1 - both tails across the mean), so no
// difference of two numbers near 1 is ever formed.
struct Tail {
    double t;   // P(Z > |z|)
    int side;   // +1 if z >= 0, -1 otherwise; z = +-inf handled by t = 0
};
inline Tail tail_of(double z) {
    if (std::isinf(z)) return Tail{0.0, z > 0 ? 1 : -1};
    return Tail{0.5 * std::erfc(std::fabs(z) * 0.70710678118654752440), z >= 0 ? 1 : -1};
}
// P(a < Z <= b) from the tails at a and b (a <= b).
inline double interval_from_tails(const Tail& a, const Tail& b) {
    if (a.side > 0) return a.t - b.t;                 // both on the right: Pbar(a) - Pbar(b)
    if (b.side < 0) return b.t - a.t;                 // both on the left:  Phi(b) - Phi(a)
    return 1.0 - a.t - b.t;
}
template <class T>
inline void subsampled_gaussian_bins(double s, double q, bool remove, double i0, double h,
                                     std::size_t n, T* dP, T* dQ) {
    const double inf = std::numeric_limits<double>::infinity();
    Tail prev0{0.0, remove ? -1 : 1}, prev1{0.0, remove ? -1 : 1};  // at x = -inf (remove) / +inf (add)
    for (std::size_t j = 0; j <= n; ++j) {
        double x;
        if (j < n) {
            double e = (i0 + (double)j) * h;
            x = remove_inverse_d(remove ? e : -e, s, q);
        } else {
            x = remove ? inf : -inf;
        }
        Tail c0 = tail_of(x / s), c1 = tail_of((x - 1.0) / s);
        double m0, m1;  // masses of N(0,s^2), N(1,s^2) on the bin's x-interval
        if (remove) {   // (prev, x]
            m0 = interval_from_tails(prev0, c0);
            m1 = interval_from_tails(prev1, c1);
        } else {        // [x, prev)
            m0 = interval_from_tails(c0, prev0);
            m1 = interval_from_tails(c1, prev1);
        }
        if (m0 < 0) m0 = 0;
        if (m1 < 0) m1 = 0;
        double mix = q * m1 + (1.0 - q) * m0;
        if (remove) { dP[j] = mix; dQ[j] = m0; }
        else        { dP[j] = m0;  dQ[j] = mix; }
        prev0 = c0;
        prev1 = c1;
    }
}

// delta of the remove / add pair of the subsampled Gaussian at eps (long double).
inline ld subsampled_gaussian_delta(ld e, ld s, ld q, bool remove) {
    if (remove) {
        ld x = remove_inverse(e, s, q);
        if (std::isinf(x)) return -std::expm1(e);  // 1 - e^eps (all of L > eps)
        ld pp = q * phibar((x - 1.0L) / s) + (1.0L - q) * phibar(x / s);
        ld r = pp - std::exp(e) * phibar(x / s);
        return r > 0 ? r : 0;
    }
    ld x = remove_inverse(-e, s, q);
    if (std::isinf(x)) return 0.0L;  // eps >= -log(1-q): loss never exceeds eps
    ld pp = phibar(-x / s);
    ld qq = q * phibar(-(x - 1.0L) / s) + (1.0L - q) * phibar(-x / s);
    ld r = pp - std::exp(e) * qq;
    return r > 0 ? r : 0;
}

// Connect-the-dots masses from a privacy profile d_j = delta(e_j) on dots spaced s = m h.
// p_j = [e^s (d_{j-1} - d_j) - (d_j - d_{j+1})] / (e^s - 1) for 1 <= j <= n-1 (d_n := d_{n-1}),
// p_inf = d_{n-1}, p_0 = 1 - p_inf - sum_{j>=1} p_j.  Returns the most negative raw mass (a
// convexity diagnostic); negative masses are clipped to 0.
template <class T>
inline double profile_ctd(const T* d, std::size_t n, double step, double* out, double* pinf) {
    const ld es = std::exp((ld)step), den = std::expm1((ld)step);
    ld total = 0, worst = 0;
    for (std::size_t j = 1; j < n; ++j) {
        ld dn = (j + 1 < n) ? (ld)d[j + 1] : (ld)d[j];
        ld p = (es * ((ld)d[j - 1] - (ld)d[j]) - ((ld)d[j] - dn)) / den;
        if (p < worst) worst = p;
        if (p < 0) p = 0;
        out[j] = (double)p;
        total += p;
    }
    *pinf = (double)d[n - 1];
    ld p0 = 1.0L - (ld)d[n - 1] - total;
    if (p0 < worst) worst = p0;
    out[0] = (double)(p0 > 0 ? p0 : 0);
    return (double)worst;
}

// Replace-one profile of subset (fixed-size, without replacement) sampling of the Gaussian
// mechanism: delta(e) = max(delta_remove(e), delta_add(e)) on the grid e_j = (i0 + j) h,
// j < n, then connect-the-dots (profile_ctd).  The scheme is that of Wang, Balle &
// Kasiviswanathan (2019); a guarantee for a symmetric relation must hold in both directions,
// so the pointwise maximum of the two directions' profiles is taken (Zhu, Dong & Wang 2022,
// "Optimal accounting of differential privacy via characteristic function": do not assume
// which side dominates).  Returns the CTD's worst rounding term.
inline double symmetric_subsampled_gaussian_ctd(double sigma, double q, double i0, double h, std::size_t n,
                                                double* out, double* pinf) {
    std::vector<ld> d(n);
    for (std::size_t j = 0; j < n; ++j) {
        const ld e = ((ld)i0 + (ld)j) * (ld)h;
        const ld a = subsampled_gaussian_delta(e, sigma, q, true);
        const ld b = subsampled_gaussian_delta(e, sigma, q, false);
        d[j] = a > b ? a : b;
    }
    return profile_ctd(d.data(), n, h, out, pinf);
}

// Scans of a composed PMF p[0..N) on losses l_m = (A + m) h.
// T_m = sum_{j>m} p_j,  D_m = sum_{j>m} p_j (1 - e^{-(j-m)h}) = (1-e^{-h}) T_m + e^{-h} D_{m+1}
// (all terms >= 0: no cancellation).  Also the virtual index -1: T_{-1}, D_{-1}.
inline void scan_prepare(const double* p, std::size_t N, double h, double* T, double* D,
                         double* Tm1, double* Dm1) {
    const double eh = std::exp(-h), c = -std::expm1(-h);
    double t = 0, dd = 0;
    for (std::size_t k = N; k-- > 0;) {
        T[k] = t;
        D[k] = dd;
        t += (p[k] > 0 ? p[k] : 0.0);
        dd = c * t + eh * dd;
    }
    *Tm1 = (double)t;
    *Dm1 = (double)dd;
}

// delta(eps) = pinf + T_m - e^{t} (T_m - D_m), eps = l_m + t, 0 <= t < h (m = -1 below l_0).
inline double scan_delta(const double* T, const double* D, double Tm1, double Dm1, std::size_t N,
                         double A, double h, double pinf, double eps) {
    if (std::isnan(eps)) return std::numeric_limits<double>::quiet_NaN();
    ld pos = (ld)eps / (ld)h - (ld)A;  // fractional grid index (may be +-inf or huge)
    // Compare in floating point before converting: a float -> integer conversion out of range
    // (eps = inf, 1e300, -1e300) is undefined behaviour.  Above the last grid point only the
    // +inf atom is left; below the first one the virtual index -1 applies.
    if (!(pos < (ld)N - 1.0L)) return pinf;
    long long m = pos < 0 ? -1 : (long long)std::floor(pos);
    if (m >= (long long)N - 1) return pinf;
    ld Tm, Dm, lm;
    if (m < 0) {
        Tm = Tm1; Dm = Dm1; lm = ((ld)A - 1.0L) * (ld)h;
    } else {
        Tm = T[m]; Dm = D[m]; lm = ((ld)A + (ld)m) * (ld)h;
    }
    ld t = (ld)eps - lm;
    ld r = Tm - std::exp(t) * (Tm - Dm);
    if (r < 0) r = 0;
    return (double)(r + (ld)pinf);
}

// Smallest eps with delta(eps) <= delta (may be negative; -inf if the finite part never
// exceeds delta; +inf if pinf > delta).  D is non-increasing: binary search, then closed form.
inline double scan_epsilon(const double* T, const double* D, double Tm1, double Dm1, std::size_t N,
                           double A, double h, double pinf, double delta) {
    if (pinf > delta) return std::numeric_limits<double>::infinity();
    ld target = (ld)delta - (ld)pinf;
    // first index m with D_m <= target
    std::size_t lo = 0, hi = N;  // D[N-1] = 0 <= target
    while (lo < hi) {
        std::size_t mid = (lo + hi) / 2;
        if ((ld)D[mid] <= target) hi = mid; else lo = mid + 1;
    }
    std::size_t m = lo;
    ld Tp, Dp, lp;  // index m-1
    if (m == 0) {
        Tp = Tm1; Dp = Dm1; lp = ((ld)A - 1.0L) * (ld)h;
    } else {
        Tp = T[m - 1]; Dp = D[m - 1]; lp = ((ld)A + (ld)(m - 1)) * (ld)h;
    }
    if (Tp <= target) return -std::numeric_limits<double>::infinity();
    ld denom = Tp - Dp;
    if (denom <= 0) return (double)(((ld)A + (ld)m) * (ld)h);
    ld et = (Tp - target) / denom;
    return (double)(lp + std::log(et));
}

}  // namespace pld
}  // namespace dpf

namespace dpf {
namespace pld {
// One Horner sweep acc_true = sum p_i r^{end - i} in a scaled frame acc_true = acc 2^L (L <= 0).
// Why the frame: over a run of zero or tiny masses (a pure-DP PLD is two atoms 10^7 grid points
// apart) acc decays by r per point into the subnormal range, where each multiply costs ~100
// cycles (a 15-point K(t) grid over 1.5e7 points took 12 s instead of 0.3 s).  Keeping acc in
// [2^-500, 2^610] removes the subnormals without losing anything: a rescale by 2^500 is exact,
// and the frame moves up only to add a mass 2^600 times larger than what it flushes.
template <class Next>
inline double log_horner(std::size_t n, double r, Next next) {
    double acc = 0;
    int L = 0;  // acc_true = acc * 2^L
    const double low = std::ldexp(1.0, -500);
    for (std::size_t k = 0; k < n; ++k) {
        double pi = next(k);
        acc *= r;
        if (pi > 0) {
            if (L == 0) {
                acc += pi;  // the usual frame (masses <= 1): no scaling
            } else {
                int e = std::ilogb(pi);
                if (e - L > 600) {  // pi dwarfs acc's frame: move the frame up to pi's exponent
                    acc = std::ldexp(acc, L - e);
                    L = e;
                }
                acc += std::ldexp(pi, -L);
            }
        }
        if (acc < low && acc > 0) {
            acc = std::ldexp(acc, 500);
            L -= 500;
        }
    }
    return acc > 0 ? std::log(acc) + (double)L * 0.69314718055994530942
                   : -std::numeric_limits<double>::infinity();
}

// K(t) = log sum_i p_i e^{t l_i}, l_i = (lo + i) h, for each t (exact, by Horner in r = e^{-|t| h}
// from the end where t l is smallest to where it is largest: no exp per point, no overflow, no
// subnormals: log_horner).  r < 2^-400 (|t| h > 277, no grid dpfast uses) would take acc from
// 2^-500 below the normal range in one step: a log-sum-exp pass instead.
inline void log_mgf(const double* p, std::size_t n, double lo, double h, const double* ts,
                    std::size_t nt, double* out) {
    for (std::size_t k = 0; k < nt; ++k) {
        const double t = ts[k];
        const double r = std::exp(-std::fabs(t) * h);
        double lref = t >= 0 ? (lo + (double)(n - 1)) * h : lo * h;
        double K;
        if (r >= std::ldexp(1.0, -400)) {
            if (t >= 0)  // largest t*l at the top: acc = sum p_i r^{top - i}
                K = log_horner(n, r, [p](std::size_t i) { return p[i] > 0 ? p[i] : 0.0; });
            else         // largest at the bottom
                K = log_horner(n, r, [p, n](std::size_t i) { return p[n - 1 - i] > 0 ? p[n - 1 - i] : 0.0; });
        } else {
            double m = -std::numeric_limits<double>::infinity();
            for (std::size_t i = 0; i < n; ++i)
                if (p[i] > 0) m = std::max(m, std::log(p[i]) + t * ((lo + (double)i) * h - lref));
            double s = 0;
            if (m > -std::numeric_limits<double>::infinity())
                for (std::size_t i = 0; i < n; ++i)
                    if (p[i] > 0) s += std::exp(std::log(p[i]) + t * ((lo + (double)i) * h - lref) - m);
            K = s > 0 ? m + std::log(s) : -std::numeric_limits<double>::infinity();
        }
        out[k] = K + t * lref;
    }
}
}  // namespace pld
}  // namespace dpf

namespace dpf {
namespace pld {
// Total mass, mean index and index variance of a PMF (two-pass, compensated by the mean).
inline void pmf_moments(const double* p, std::size_t n, double* total, double* mean, double* var) {
    double s = 0, s1 = 0;
    for (std::size_t i = 0; i < n; ++i) { s += p[i]; s1 += p[i] * (double)i; }
    double m = s > 0 ? s1 / s : 0.0, s2 = 0;
    for (std::size_t i = 0; i < n; ++i) { double d = (double)i - m; s2 += p[i] * d * d; }
    *total = s; *mean = m; *var = s > 0 ? s2 / s : 0.0;
}
}  // namespace pld
}  // namespace dpf
