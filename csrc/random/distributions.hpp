// The one family of continuous noise samplers: standard normal, Laplace, exponential and
// Gumbel on the 64-bit word stream (dpf::BitStream).  Every continuous noise draw in dpfast
// goes through these functions: the Laplace/Gaussian mechanisms and the noise fills of DP-SGD,
// the private linear models and the public-data learners (csrc/random/noise_fill.hpp, called
// through dpfast.random), and the Gumbel/exponential/Laplace noise of report-noisy-max
// (csrc/samplers/selection.hpp).
//
// NOT floating-point safe: the outputs are IEEE doubles computed with log/exp, whose low-order
// bits can leak the input (Mironov 2012).  The floating-point-safe samplers are the discrete
// Laplace/Gaussian and snapping kernels.
//
// Resolution, and why it is enough.  Each sampler below is a fixed function of uniform bits:
//   * Laplace: the sign from bit 0, the magnitude -log U with U = (k + 1) 2^-53, k the top 53
//     bits (so U is uniform on the 2^53-point grid of (0, 1]): the CDF of |X| is within 2^-53
//     of the exact one everywhere, the largest value 53 ln 2 = 36.7.
//   * Exponential and Gumbel: monotone (increasing) functions of the top 52 bits m of a word,
//     through U = (2m + 1) 2^-53, the midpoints of 2^52 equal cells of (0, 1): U and 1 - U are
//     both exact doubles and both avoid 0 and 1, so -log(1 - U) and -log(-log U) are finite.  The
//     CDF of U (hence of the noise, a monotone function of U) is within half a cell, 2^-53, of
//     the exact CDF at every point: the same Kolmogorov distance as a 53-bit grid of (0, 1].  For
//     report-noisy-max this bounds the error of every selection probability by n 2^-53
//     (P(i selected) = E[prod_{j != i} F_j(z_i - z_j + N_i)] is a monotone function of each
//     CDF, each replaced by one within 2^-53).  Monotonicity in the word is what lets the
//     selection kernels discard most candidates after one integer compare.
//   * Normal: the 256-layer ziggurat of Marsaglia & Tsang (2000), "The ziggurat method for
//     generating random variables", J. Stat. Softw. 5(8), with NumPy's constants and word
//     layout: layer from bits 0-7, sign bit 8, a 52-bit abscissa from bits 9-60 (disjoint
//     fields: no layer/abscissa correlation, Leong et al. 2005).  The accepted value is
//     rabs * x_i / 2^52: a lattice of spacing x_i 2^-52 within each layer, i.e. within a few
//     ulps of the value's own resolution -- not the coarse 2^-31 lattice of 32-bit ziggurats,
//     which let a released DP-SGD iterate identify the clipped sum (regression test in
//     tests/sgd/test_sgd_clip.py).  The wedge and tail tests use U on the 53-bit grid.  With these
//     constants the top layer's area differs from v by 1e-9 relative, so the law is N(0, 1) up
//     to a total-variation error below 1e-11 (plus the 52-bit abscissa grid).
//
// float32 outputs are these doubles rounded once (noise_fill.hpp), never a 32-bit sampler.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "random/bitstream.hpp"

namespace dpf {

// ---------------------------------------------------------------------------------------
// Uniforms from one word
// ---------------------------------------------------------------------------------------

// (k + 1) 2^-53 with k the top 53 bits: uniform on the 2^53-point grid of (0, 1].
inline double uniform53_pos(uint64_t w) { return static_cast<double>((w >> 11) + 1) * 0x1.0p-53; }

// U = (2m + 1) 2^-53 and 1 - U for m < 2^52 (the top 52 bits of a word): both exact, in (0, 1).
constexpr uint64_t kMid52 = uint64_t(1) << 52;
inline double mid52(uint64_t m) { return static_cast<double>(2 * m + 1) * 0x1.0p-53; }
inline double mid52_complement(uint64_t m) {
    return static_cast<double>((uint64_t(1) << 53) - 2 * m - 1) * 0x1.0p-53;
}

// ---------------------------------------------------------------------------------------
// Laplace(0, 1): one word per variate
// ---------------------------------------------------------------------------------------

// A random sign (bit 0) times a standard exponential -log U, U = uniform53_pos(w).  The two bit
// fields are disjoint, so sign and magnitude are independent; |X| takes values on the
// 2^53-point grid -log(k 2^-53), k = 1..2^53.
inline double standard_laplace(uint64_t w) {
    const double e = -std::log(uniform53_pos(w));
    return (w & 1u) ? -e : e;
}

// The monotone form for report-noisy-max, which needs a variate increasing in its word: the
// inverse CDF at U = mid52(m), log 2U below 1/2, -log 2(1 - U) above (symmetric: m and
// 2^52 - 1 - m give -L and +L).  Same law as standard_laplace up to the grids (CDF within
// 2^-53 of the exact one).
inline double laplace_quantile52(uint64_t m) {
    return m < (kMid52 >> 1) ? std::log(2.0 * mid52(m)) : -std::log(2.0 * mid52_complement(m));
}
inline double laplace_survival(double t) { return t < 0.0 ? 1.0 - 0.5 * std::exp(t) : 0.5 * std::exp(-t); }

// ---------------------------------------------------------------------------------------
// Exponential(1) and Gumbel(0, 1): one word per variate, increasing in the top 52 bits
// ---------------------------------------------------------------------------------------

// E = -log(1 - U) (inverse CDF of 1 - e^-t), U = mid52(m).  Largest value 53 ln 2 = 36.7.
inline double exponential_quantile52(uint64_t m) { return -std::log(mid52_complement(m)); }
inline double exponential_survival(double t) { return t <= 0.0 ? 1.0 : std::exp(-t); }
inline double standard_exponential(uint64_t w) { return exponential_quantile52(w >> 12); }

// G = -log(-log U) (inverse CDF of exp(-e^-t)), U = mid52(m).  Range [-3.6, 36.7].
inline double gumbel_quantile52(uint64_t m) { return -std::log(-std::log(mid52(m))); }
inline double gumbel_survival(double t) { return -std::expm1(-std::exp(-t)); }
inline double standard_gumbel(uint64_t w) { return gumbel_quantile52(w >> 12); }

// ---------------------------------------------------------------------------------------
// N(0, 1): 256-layer ziggurat (Marsaglia & Tsang 2000), 52-bit abscissa as in NumPy
// ---------------------------------------------------------------------------------------
// Layers are built from r and v by the Marsaglia-Tsang recursion (NumPy's constants).

struct NormalZiggurat {
    static constexpr double r = 3.6541528853610087963519472518;   // start of the tail
    static constexpr double inv_r = 0.27366123732975827203338247596;
    static constexpr double v = 4.92867323399e-3;                   // area of every layer
    uint64_t k[256];  // fast acceptance thresholds on the 52-bit mantissa
    double w[256];    // layer widths / 2^52
    double f[256];    // exp(-x_i^2 / 2)

    NormalZiggurat() {
        const double m = 0x1.0p52;
        double dn = r, tn = r;
        const double q = v / std::exp(-0.5 * dn * dn);
        k[0] = static_cast<uint64_t>((dn / q) * m);
        k[1] = 0;
        w[0] = q / m;
        w[255] = dn / m;
        f[0] = 1.0;
        f[255] = std::exp(-0.5 * dn * dn);
        for (int i = 254; i >= 1; --i) {
            dn = std::sqrt(-2.0 * std::log(v / dn + std::exp(-0.5 * dn * dn)));
            k[i + 1] = static_cast<uint64_t>((dn / tn) * m);
            tn = dn;
            f[i] = std::exp(-0.5 * dn * dn);
            w[i] = dn / m;
        }
    }
};

inline const NormalZiggurat& normal_ziggurat() {
    static const NormalZiggurat z;  // thread-safe initialisation (C++11 magic statics)
    return z;
}

// Word layout: bits 0-7 the layer, bit 8 the sign, bits 9-60 the 52-bit abscissa.
// Fast path (about 98.8% of words): accept from the word alone.
inline bool normal_fast(const NormalZiggurat& z, uint64_t w, double& out) {
    const unsigned idx = static_cast<unsigned>(w & 0xff);
    const uint64_t rabs = (w >> 9) & 0x000fffffffffffffULL;
    if (rabs < z.k[idx]) {
        const double x = static_cast<double>(rabs) * z.w[idx];
        out = ((w >> 8) & 1u) ? -x : x;
        return true;
    }
    return false;
}

// The same map without a branch, for the noise fills: `out` is always written (the fast path's
// value when the word is accepted, a value to be discarded otherwise) and the return value says
// whether the word was accepted.  Bit for bit the fast path's value on acceptance: the sign is
// applied by flipping the sign bit (-x exactly), rabs < 2^52 converts exactly either way.
inline bool normal_fast_branchless(const NormalZiggurat& z, uint64_t w, double& out) {
    const unsigned idx = static_cast<unsigned>(w & 0xff);
    const uint64_t rabs = (w >> 9) & 0x000fffffffffffffULL;
    const double x = static_cast<double>(static_cast<int64_t>(rabs)) * z.w[idx];
    uint64_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    bits ^= ((w >> 8) & 1u) << 63;
    std::memcpy(&out, &bits, sizeof bits);
    return rabs < z.k[idx];
}

// The rest of the ziggurat for a word the fast path rejected: wedge or tail test with fresh
// uniforms, and a fresh word whenever the test fails.  normal_fast + normal_slow together are
// exactly one ziggurat draw.
inline double normal_slow(const NormalZiggurat& z, uint64_t w, BitStream& rs) {
    for (;;) {
        const unsigned idx = static_cast<unsigned>(w & 0xff);
        const bool neg = (w >> 8) & 1u;
        const uint64_t rabs = (w >> 9) & 0x000fffffffffffffULL;
        double x = static_cast<double>(rabs) * z.w[idx];
        if (rabs < z.k[idx]) return neg ? -x : x;
        if (idx == 0) {
            // Tail beyond r (Marsaglia 1964): x = r + E1/r, accept when 2 E2 > (E1/r)^2.
            for (;;) {
                const double xx = -NormalZiggurat::inv_r * std::log1p(-rs.uniform());
                const double yy = -std::log1p(-rs.uniform());
                if (yy + yy > xx * xx) return neg ? -(NormalZiggurat::r + xx) : NormalZiggurat::r + xx;
            }
        }
        if ((z.f[idx - 1] - z.f[idx]) * rs.uniform() + z.f[idx] < std::exp(-0.5 * x * x))
            return neg ? -x : x;
        w = rs.u64();
    }
}

// One N(0, 1) draw from the stream: the first word, then more only if the ziggurat rejects it
// (exactly output 0 of a noise fill of length 1).
inline double standard_normal(BitStream& rs) {
    const NormalZiggurat& z = normal_ziggurat();
    const uint64_t w = rs.u64();
    double x;
    return normal_fast(z, w, x) ? x : normal_slow(z, w, rs);
}

// ---------------------------------------------------------------------------------------
// Distribution policies for the noise fill (noise_fill.hpp): fast(w, out) maps one word,
// returning false when the variate needs more words; slow(w, rs) finishes it from the stream.
// ---------------------------------------------------------------------------------------

template <double (*F)(uint64_t)>
struct OneWordDist {
    static constexpr bool may_reject = false;
    bool fast(uint64_t w, double& out) const {
        out = F(w);
        return true;
    }
    // fast() with `out` always written (a discardable value when it returns false): for fills
    bool fast_branchless(uint64_t w, double& out) const { return fast(w, out); }
    double slow(uint64_t w, BitStream&) const { return F(w); }
};
using LaplaceDist = OneWordDist<standard_laplace>;
using ExponentialDist = OneWordDist<standard_exponential>;
using GumbelDist = OneWordDist<standard_gumbel>;

struct NormalDist {
    static constexpr bool may_reject = true;
    const NormalZiggurat* z = &normal_ziggurat();
    bool fast(uint64_t w, double& out) const { return normal_fast(*z, w, out); }
    bool fast_branchless(uint64_t w, double& out) const { return normal_fast_branchless(*z, w, out); }
    double slow(uint64_t w, BitStream& rs) const { return normal_slow(*z, w, rs); }
};

}  // namespace dpf
