// One-pass statistics of the toolbox, multi-threaded and bit-identical for any thread count:
//   moments        clipped, centred column sums / sums of squares / non-NaN counts (dpfast.tools),
//                  EXACT: fixed-point terms summed in integers (see "fixed-point grid" below), so
//                  the same integers for any chunking, thread count or Dask partitioning
//   class_moments  per-class clipped, scaled sums and sums of squares (GaussianNB), EXACT as moments
//   gram           upper triangle of sum a_i b_i^T over mapped rows (PCA covariance, SSP's Z'WZ, Z'Wy), EXACT
//   kmeans_step    nearest-centre assignment, per-cluster counts and sums (KMeans), EXACT sums
//   histogram      integer counts on public edges, any dimension (dpfast.tools.histogram*)
// No Python here (csrc/bindings/stats.cpp is the binding).  The floating-point kernels live in
// csrc/stats/kernels.hpp, compiled twice (baseline and AVX2, the same bits; see there).
#pragma once
#include "portable.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "parallel.hpp"

#if defined(DPF_HAVE_AVX2_DISPATCH)
#include <immintrin.h>  // _mm256_mul_epi32 in the avx2 build of kernels.hpp (gram_tiles)
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace dpf {
namespace stats {

// Rows per chunk and the number of chunks: a function of the shape alone (never of the thread
// count).  A chunk reads at least 2^16 elements and at least 4 times its partial's size (so
// that the merge costs little next to the pass); at most 1024 chunks, and partials of at most
// 2^25 entries together (256 MiB).
struct Chunks {
    int64_t rows = 1, K = 1;
};

inline Chunks chunks(int64_t n, int64_t elems_per_row, int64_t partial) {
    const int64_t e = std::max<int64_t>(1, elems_per_row);
    Chunks c;
    c.rows = std::max<int64_t>({1, ((int64_t(1) << 16) + e - 1) / e, (4 * partial + e - 1) / e});
    const int64_t kmax = std::max<int64_t>(1, std::min<int64_t>(1024, (int64_t(1) << 25) / std::max<int64_t>(1, partial)));
    if (n > c.rows * kmax) c.rows = (n + kmax - 1) / kmax;
    c.K = std::max<int64_t>(1, (n + c.rows - 1) / c.rows);
    return c;
}

// In-place pairwise merge of K partials of width w (partial k at v[k w, (k+1) w)) into partial
// 0: at stride s = 1, 2, 4, ... partial k += partial k + s for k a multiple of 2 s.  The order is
// fixed by K alone.
template <class V>
void merge_tree(V& v, int64_t K, int64_t w) {
    for (int64_t s = 1; s < K; s *= 2)
        for (int64_t k = 0; k + s < K; k += 2 * s)
            for (int64_t t = 0; t < w; ++t) v[k * w + t] += v[(k + s) * w + t];
}

// The shared chunked reduction of every floating-point kernel below: one zeroed partial of
// width w per chunk (w = 0: a statistic the call does not compute; at() is then nullptr), and
// merged() = the partials added in merge_tree's fixed order.  Pattern:
//     const Chunks ch = chunks(n, elems_per_row, total partial width);
//     Partials<double> s(ch, w); ...
//     for_chunks(ch, n, threads, [&](int64_t k, int64_t r0, int64_t r1) { ...into s.at(k)... });
//     out = s.merged();
template <class V>
struct Partials {
    std::vector<V> v;
    int64_t K, w;
    Partials(const Chunks& ch, int64_t width) : v(width > 0 ? ch.K * width : 0, V(0)), K(ch.K), w(width) {}
    V* at(int64_t k) { return w > 0 ? v.data() + k * w : nullptr; }
    std::vector<V> merged() {
        merge_tree(v, K, w);
        return std::vector<V>(v.begin(), v.begin() + w);
    }
};

// fn(k, r0, r1) for every chunk k (rows [r0, r1)) on up to `threads` threads (run_chunks).
template <class Fn>
void for_chunks(const Chunks& ch, int64_t n, int threads, const Fn& fn) {
    run_chunks(ch.K, threads, [&](int64_t k) {
        const int64_t r0 = k * ch.rows;
        fn(k, r0, std::min(n, r0 + ch.rows));
    });
}

// The parameters every row kernel shares: n rows of d elements read at x + i rs + j cs.
struct RowsParams {
    int64_t n = 0, d = 0, rs = 0, cs = 1;
    int threads = 1;
};

// ----------------------------------------------------------------------------- fixed-point grid
// A term t known to satisfy |t| <= B (B public: from the bounds) is mapped to the integer
//     q(t) = round_half_even(fl(t * S)),   S = fl(2^kFixedBits / B)   (S = 0 for B = 0),
// the grid value q B / 2^kFixedBits standing for t.  The map is deterministic per term and
// monotone (a product by S > 0 and a rounding are both monotone), and |q| <= 2^kFixedBits: with
// |t| <= B, fl(t S) <= fl(B S) = 2^k (1 + d), |d| <= 2^-52, i.e. within 2^-2 of 2^k (k = 50),
// which rounds to 2^k.  So the grid value of a term never leaves [-B, B] (the sensitivity
// analysis of every release here holds for the grid values), and a term at the bound, t = +-B,
// is exactly +-B on the grid.  The rounding is the magic-number trick: for |z| <= 2^51,
// fl(z + 1.5 2^52) lies in [2^52, 2^53), where the doubles are the integers, and its bit pattern
// minus that of 1.5 2^52 is round_half_even(z) (vectorises as one add; no FMA: -ffp-contract=off,
// so fl(t S) is rounded before the add, in both builds).  Integer sums are exact: a uint64 lane
// adds at most kFixedBlock terms (|sum| <= 2^62, the magic offset removed once per block,
// modulo 2^64), then the block goes into an __int128 (room for 2^77 terms); the merge of the
// partials is exact in any order.  The one rounding to double happens in Python, correctly
// rounded (dpfast._fixed.to_float: sum q times B / 2^k as a ratio of integers).
constexpr int kFixedBits = 50;
constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
constexpr int64_t kFixedBlock = 4096;          // terms per uint64 lane: 2^12 * 2^50 = 2^62 < 2^63

inline uint64_t bits_of(double v) {
    uint64_t u;
    std::memcpy(&u, &v, sizeof u);
    return u;
}
// The scale S of a bound B (>= 0): 0 for B == 0, else 2^kFixedBits / B (finite: B >= 2^-973).
inline double fixed_scale(double B) { return B == 0.0 ? 0.0 : std::ldexp(1.0, kFixedBits) / B; }
// A lane that added m terms as bits_of(fl(t S) + kMagic), modulo 2^64: the exact integer sum.
inline int64_t lane_sum(uint64_t acc, int64_t m) { return (int64_t)(acc - (uint64_t)m * bits_of(kMagic)); }

struct MomentsParams : RowsParams {  // C order: rs = d, cs = 1
    double c = 0, ylo = 0, yhi = 0;  // from y_range
    double S1 = 0, S2 = 0;           // fixed_scale(B) of y and fixed_scale(fl(B B)) of y^2
    bool nan = false;
    int order = 1;
};
// The range [ylo, yhi] of the terms y = fl(clamp(x, lo, hi) - c): every y in it satisfies
// lo <= y + c <= hi exactly (the rounded hi - c may exceed the true one: one ulp back then;
// as csrc/tables/aggregate.hpp's centre()), further capped to [-cap, cap] (the half-width
// r of a centred release; +inf for none).
inline void y_range(double lo, double hi, double c, double cap, double& ylo, double& yhi) {
    auto diff = [](double a, double b, double& e) {  // TwoSum: a - b = d + e exactly
        const double d = a - b;
        const double bp = d - a;
        e = (a - (d - bp)) + (-b - bp);
        return d;
    };
    double e;
    double up = diff(hi, c, e);
    if (e < 0) up = std::nextafter(up, -INFINITY);
    double dn = diff(lo, c, e);
    if (e > 0) dn = std::nextafter(dn, INFINITY);
    yhi = std::min(cap, up);
    ylo = std::max(-cap, dn);
}

struct MomentsResult {
    std::vector<__int128> s1, s2;  // sum q(y), sum q(y^2) on the grids of S1, S2 (exact)
    std::vector<int64_t> cnt;
    int64_t bad = 0;  // > 0: some element was not finite (nan mode: infinite)
};

struct ClassParams : RowsParams {
    int64_t k = 0;
    const int64_t* label = nullptr;  // [n] in [0, k)
    const double *lo = nullptr, *hi = nullptr, *c = nullptr, *r = nullptr;  // [d]
};
struct ClassResult {
    std::vector<__int128> s1, s2;  // [k][d]: sum q(u), sum q(u^2), grid bound 1 (exact)
    std::vector<int64_t> cnt;    // [k]
};

struct PcaParams : RowsParams {
    const double *lo = nullptr, *hi = nullptr, *c = nullptr;  // lo, hi: nullptr for no box
    double R = 1;
};

struct SspParams : RowsParams {
    const double* y = nullptr;  // [n]
    const double* w = nullptr;  // [n] or nullptr
    const int* e = nullptr;     // [d + 1] column bound exponents: |Z_j| <= 2^e_j, |y| <= 2^e_d
};

struct KMeansParams : RowsParams {
    int64_t k = 0;
    const double* C = nullptr;  // [k][d]
    int64_t* labels = nullptr;  // [n] or nullptr
    bool want_sums = true;
};
struct KMeansResult {
    std::vector<__int128> sums;  // [k][d]: sum q(clamp(u, -1, 1)), grid bound 1 (exact)
    std::vector<int64_t> cnt;  // [k]
};

namespace generic {
#include "stats/kernels.hpp"
}  // namespace generic

#if defined(DPF_HAVE_AVX2_DISPATCH)
#define DPF_STATS_HAVE_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2")
#define DPF_STATS_AVX2_BUILD 1  // kernels.hpp: this inclusion is the avx2 one
namespace avx2 {
#include "stats/kernels.hpp"
}  // namespace avx2
#undef DPF_STATS_AVX2_BUILD
#pragma GCC pop_options
inline bool use_avx2() {
    // DPFAST_STATS_NO_AVX2=1 forces the baseline build (to test it on AVX2 machines).
    static const bool ok = avx2_enabled("DPFAST_STATS_NO_AVX2");
    return ok;
}
#define DPF_STATS_DISPATCH(call) (use_avx2() ? avx2::call : generic::call)
#else
inline bool use_avx2() { return false; }
#define DPF_STATS_DISPATCH(call) (generic::call)
#endif

template <class T>
void moments(const MomentsParams& p, const T* x, MomentsResult& r) {
    DPF_STATS_DISPATCH(moments<T>(p, x, r));
}

// Throws std::invalid_argument when a label is outside [0, k).
template <class T>
void class_moments(const ClassParams& p, const T* x, ClassResult& r) {
    for (int64_t i = 0; i < p.n; ++i)
        if (p.label[i] < 0 || p.label[i] >= p.k) throw std::invalid_argument("class index out of range");
    DPF_STATS_DISPATCH(class_moments<T>(p, x, r));
}

// G: (d+1) x (d+1), upper triangle (the rest zero): [sum u u^T, sum u; ., n] with u the mapped
// rows, as exact fixed-point sums (grid bound 1 for every entry: the value is G / 2^50).
template <class T>
std::vector<__int128> pca_gram(const PcaParams& p, const T* x) {
    return DPF_STATS_DISPATCH(pca_gram<T>(p, x));
}

// G: (d+1) x (d+1), upper triangle: [Z'WZ, Z'Wy; ., y'Wy] as exact fixed-point sums, entry (j, k)
// on the grid of the bound 2^(e_j + e_k) (its value G_jk 2^(e_j + e_k - 50)).
template <class T>
std::vector<__int128> ssp_gram(const SspParams& p, const T* x) {
    return DPF_STATS_DISPATCH(ssp_gram<T>(p, x));
}

template <class T>
void kmeans_step(const KMeansParams& p, const T* x, KMeansResult& r) {
    DPF_STATS_DISPATCH(kmeans_step<T>(p, x, r));
}

// ----------------------------------------------------------------------------- histogram
// Sample (n, D) read by strides; edges of dimension j at edges[off[j], off[j+1]) (strictly
// increasing, nb_j = off[j+1] - off[j] - 1 bins).  Bin b of dimension j holds e_b <= v < e_{b+1},
// the last bin also v == e_last (NumPy's rule); a row with a value outside [e_0, e_last] in any
// dimension, or a NaN, is dropped.  uniform[j] (equally spaced edges): a first guess by
// arithmetic, corrected against the edges themselves (so the bins are those of the edges);
// other edges: the number of inner edges <= v (branch-free) up to 16 bins, else a binary search.
// Integer counts (row-major over the bins): their sum is exact in any order, so chunks may
// follow the thread count.  Returns the number of non-finite values seen.
template <class T>
int64_t histogram(const T* x, int64_t n, int64_t D, int64_t rs, int64_t cs, const double* edges, const int64_t* off,
                  const uint8_t* uniform, int64_t* counts, int64_t total, int threads) {
    std::vector<int64_t> nb(D), stride(D);
    int64_t s = 1;
    for (int64_t j = D - 1; j >= 0; --j) {
        nb[j] = off[j + 1] - off[j] - 1;
        stride[j] = s;
        s *= nb[j];
    }
    const int64_t per = std::max<int64_t>(1, (int64_t(64) << 20) / std::max<int64_t>(1, total));  // <= 512 MiB of partials
    const int64_t K = std::max<int64_t>(1, std::min<int64_t>({(int64_t)threads, per, (n + 65535) / 65536}));
    const int64_t rows = (n + K - 1) / K;
    std::vector<std::vector<int64_t>> part(K);
    std::vector<int64_t> bad(K, 0);
    std::fill(counts, counts + total, 0);
    run_chunks(K, threads, [&](int64_t k) {
        if (K > 1) part[k].assign(total, 0);
        int64_t* h = K > 1 ? part[k].data() : counts;
        const int64_t r0 = k * rows, r1 = std::min(n, r0 + rows);
        int64_t nbad = 0;
        if (D == 1) {  // the common case, with everything in registers
            const double* e = edges;
            const int64_t m = nb[0];
            const double e0 = e[0], em = e[m], inv = (double)m / (em - e0);
            const bool uni = uniform[0] != 0;
            for (int64_t i = r0; i < r1; ++i) {
                const double v = (double)x[i * rs];
                nbad += (v - v != 0.0) ? 1 : 0;  // NaN for a NaN or an infinity
                if (!(v >= e0 && v <= em)) continue;
                int64_t b;
                if (uni) {
                    const double f = (v - e0) * inv;
                    b = f >= (double)m ? m - 1 : (f > 0 ? (int64_t)f : 0);
                    while (b > 0 && v < e[b]) --b;
                    while (b < m - 1 && v >= e[b + 1]) ++b;
                } else if (m <= 16) {  // branch-free: the number of inner edges <= v
                    b = 0;
                    for (int64_t t = 1; t < m; ++t) b += v >= e[t] ? 1 : 0;
                } else {
                    b = (int64_t)(std::upper_bound(e, e + m + 1, v) - e) - 1;
                    if (b >= m) b = m - 1;
                }
                h[b] += 1;
            }
            bad[k] = nbad;
            return;
        }
        for (int64_t i = r0; i < r1; ++i) {
            int64_t cell = 0;
            bool keep = true;
            for (int64_t j = 0; j < D; ++j) {
                const double v = (double)x[i * rs + j * cs];
                nbad += (v - v != 0.0) ? 1 : 0;
                const double* e = edges + off[j];
                const int64_t m = nb[j];
                if (!(v >= e[0] && v <= e[m])) {
                    keep = false;
                    continue;
                }
                int64_t b;
                if (!uniform[j] && m <= 16) {
                    b = 0;
                    for (int64_t t = 1; t < m; ++t) b += v >= e[t] ? 1 : 0;
                } else if (uniform[j]) {
                    const double f = (v - e[0]) * ((double)m / (e[m] - e[0]));
                    b = f >= (double)m ? m - 1 : (f > 0 ? (int64_t)f : 0);
                    while (b > 0 && v < e[b]) --b;
                    while (b < m - 1 && v >= e[b + 1]) ++b;
                } else {
                    b = (int64_t)(std::upper_bound(e, e + m + 1, v) - e) - 1;
                    if (b >= m) b = m - 1;  // v == e_last
                }
                cell += b * stride[j];
            }
            if (keep) h[cell] += 1;
        }
        bad[k] = nbad;
    });
    int64_t nbad = 0;
    for (int64_t k = 0; k < K; ++k) {
        if (K > 1)
            for (int64_t t = 0; t < total; ++t) counts[t] += part[k][t];
        nbad += bad[k];
    }
    return nbad;
}

}  // namespace stats
}  // namespace dpf

// (-Wpsabi stays off, as in csrc/solvers/glm_solvers.hpp: the 32-byte vectors only live inside
// inlined kernels, never in an ABI; the templates are instantiated after this header ends.)
