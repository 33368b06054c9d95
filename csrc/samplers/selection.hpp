// Private selection kernels: report-noisy-max with Gumbel / exponential / Laplace noise
// (Gumbel = the exponential mechanism by the Gumbel-max trick), one-shot top-k, and the
// interval sampler of the private quantile.  Spec: mechanisms.md "Report-noisy-max",
// "Exponential mechanism", "Private quantiles"; lectures.md B6-B9.
//
// Everything works on log-weights ("scores") z_i = c * u_i + log mu_i; nothing is ever
// exponentiated.  The selected index is argmax_i (z_i + N_i) with N_i i.i.d. noise.
//
// Random words: exactly ONE 64-bit word per candidate, consumed in candidate order, and
// candidate i's noise is a fixed monotone function of its word's top 52 bits m_i:
//     U_i = (2 m_i + 1) 2^-53  in (0, 1), exactly representable, and so is 1 - U_i.
// So the result depends only on the word sequence: the same seed gives the same index
// whether the candidates arrive in one array, in rows, or in chunks of any size.
//
// Speed (exact, not an approximation): candidates are taken in blocks of kBlock.  With
// best = the current record key and zmax an upper bound of z over the block, candidate i
// can only beat the record if N_i > best - zmax, i.e. if its word m_i is above an integer
// threshold computed from the noise's survival function.  Words below the threshold are
// discarded after one integer compare; only the others pay for logarithms.  The threshold
// is made conservative (a margin in key space, a relative margin in probability and two
// integer steps), so the decisions equal those of the plain computation of every key.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "random/bitstream.hpp"
#include "random/distributions.hpp"

namespace dpf {
namespace sel {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int64_t kBlock = 64;
constexpr std::uint64_t kM = kMid52;  // number of distinct uniforms (2^52)

// The noise of candidate i: a monotone function of its word's top 52 bits m, from the package's
// one sampler family (random/distributions.hpp: the same maps as standard_gumbel /
// standard_exponential / the monotone Laplace, U = (2m+1) 2^-53), with its survival function for
// the skip threshold.
// Standard Gumbel: F(t) = exp(-exp(-t)); G = -log(-log U).
struct GumbelNoise {
    static double quantile(std::uint64_t m) { return gumbel_quantile52(m); }
    static double survival(double t) { return gumbel_survival(t); }
};

// Standard (one-sided) exponential: E = -log(1 - U).
struct ExponentialNoise {
    static double quantile(std::uint64_t m) { return exponential_quantile52(m); }
    static double survival(double t) { return exponential_survival(t); }
};

// Standard Laplace by inversion (monotone in U, symmetric: m and 2^52-1-m give +-L).
struct LaplaceNoise {
    static double quantile(std::uint64_t m) { return laplace_quantile52(m); }
    static double survival(double t) { return laplace_survival(t); }
};

// Pre-pass before any random word is drawn: 0 = fine, 1 = NaN, 2 = +-inf, 3 = c * u overflows.
template <class T>
inline int scan_utilities(const T* u, std::int64_t n, double c) {
    double amax = 0.0;
    bool bad = false;
    for (std::int64_t i = 0; i < n; ++i) {
        const double a = std::fabs(double(u[i]));
        bad |= !(a <= std::numeric_limits<double>::max());
        amax = a > amax ? a : amax;
    }
    if (bad) {
        for (std::int64_t i = 0; i < n; ++i)
            if (std::isnan(double(u[i]))) return 1;
        return 2;
    }
    return std::isfinite(c * amax) ? 0 : 3;
}

// c * (a - b) for finite a, b; a - b may overflow (|a|, |b| near DBL_MAX): then c * a - c * b,
// both finite because the pre-pass checked c * |u| (it is -inf only where the weight is 0
// to double precision anyway).
inline double scaled_diff(double c, double a, double b) {
    const double d = a - b;
    if (std::fabs(d) <= std::numeric_limits<double>::max()) return c * d;
    return c * a - c * b;
}

enum NoiseKind : int { kGumbel = 0, kExponential = 1, kLaplace = 2 };

// Smallest word value m (top 52 bits) that can still give key z + N(m) > best when z <= zmax.
// All m below it lose for sure.  Conservative by construction (see the header comment).
template <class Noise>
inline std::uint64_t skip_threshold(double best, double zmax) {
    if (!(best > -kInf)) return 0;  // no record yet: evaluate everything
    if (!(zmax > -kInf)) return kM; // every score is -inf: nobody can win
    double t = best - zmax;
    t -= 1e-9 * (1.0 + std::fabs(best) + std::fabs(zmax));
    const double pass = Noise::survival(t) * 0x1.0p52 * (1.0 + 1e-6) + 2.0;
    if (!(pass < 0x1.0p52)) return 0;
    return kM - std::uint64_t(std::ceil(pass));
}

// Draw the next `count` words of the stream (the indirect calls run back to back).
inline void fill_words(BitStream& rs, std::uint64_t* words, std::int64_t count) {
    bitgen_t* bg = rs.bg;
    for (std::int64_t j = 0; j < count; ++j) words[j] = bg->next_uint64(bg->state);
}

// Running argmax of z_i + N_i over a stream of candidates (state carried across chunks).
struct ArgmaxState {
    double best = -kInf;    // record key
    std::int64_t index = -1;  // its global index (-1 while no candidate with z > -inf seen)
    std::int64_t seen = 0;    // candidates consumed so far
    double shift = -kInf;     // streams: the utility the keys are relative to (-inf: none yet)
};

// Streams: move the record key to a new reference utility `to` (>= the current one), so that
// keys of later chunks, relative to `to`, compare with it.  key_old = c (u - from) + N becomes
// c (u - to) + N = key_old + c (from - to).
inline void rebase(ArgmaxState& st, double c, double to) {
    if (st.shift > -kInf && st.best > -kInf) st.best += scaled_diff(c, st.shift, to);
    st.shift = to;
}

// Scores: a functor with z(i) (may be -inf) and bound(i0, i1) >= max_{i0<=i<i1} z(i).
template <class Noise, class Scores>
void argmax_update(BitStream& rs, std::int64_t n, const Scores& sc, ArgmaxState& st) {
    double best = st.best;
    std::int64_t index = st.index;
    std::uint64_t words[kBlock];
    for (std::int64_t b0 = 0; b0 < n; b0 += kBlock) {
        const std::int64_t b1 = std::min(n, b0 + kBlock);
        fill_words(rs, words, b1 - b0);  // the block's words, in candidate order
        const double zmax = sc.bound(b0, b1);
        std::uint64_t thr = skip_threshold<Noise>(best, zmax);
        for (std::int64_t i = b0; i < b1; ++i) {
            const std::uint64_t m = words[i - b0] >> 12;
            if (m < thr) continue;
            const double z = sc.z(i);
            if (!(z > -kInf)) continue;
            const double key = z + Noise::quantile(m);
            if (key > best) {
                best = key;
                index = st.seen + i;
                thr = skip_threshold<Noise>(best, zmax);
            }
        }
    }
    st.best = best;
    st.index = index;
    st.seen += n;
}

// The k largest keys z_i + N_i (one-shot top-k), kept in a min-heap; ties: earlier index wins.
struct TopKState {
    std::int64_t k;
    std::vector<std::pair<double, std::int64_t>> heap;  // min-heap on (key, -index)
    std::int64_t seen = 0;
    explicit TopKState(std::int64_t k_) : k(k_) { heap.reserve(std::size_t(k_)); }
    double floor_key() const { return std::int64_t(heap.size()) < k ? -kInf : heap.front().first; }
    static bool greater(const std::pair<double, std::int64_t>& a, const std::pair<double, std::int64_t>& b) {
        // "a ranks below b" for std heap (max-heap on this order = min-heap on rank)
        if (a.first != b.first) return a.first > b.first;
        return a.second < b.second;  // larger index ranks lower
    }
    void push(double key, std::int64_t idx) {
        if (std::int64_t(heap.size()) < k) {
            heap.emplace_back(key, idx);
            std::push_heap(heap.begin(), heap.end(), greater);
        } else if (key > heap.front().first) {
            std::pop_heap(heap.begin(), heap.end(), greater);
            heap.back() = {key, idx};
            std::push_heap(heap.begin(), heap.end(), greater);
        }
    }
    // Indices in decreasing key order (ties: increasing index).
    std::vector<std::int64_t> sorted_indices() const {
        auto h = heap;
        std::sort(h.begin(), h.end(), greater);
        std::vector<std::int64_t> out(h.size());
        for (std::size_t j = 0; j < h.size(); ++j) out[j] = h[j].second;
        return out;
    }
};

template <class Noise, class Scores>
void topk_update(BitStream& rs, std::int64_t n, const Scores& sc, TopKState& st) {
    std::uint64_t words[kBlock];
    for (std::int64_t b0 = 0; b0 < n; b0 += kBlock) {
        const std::int64_t b1 = std::min(n, b0 + kBlock);
        fill_words(rs, words, b1 - b0);
        const double zmax = sc.bound(b0, b1);
        std::uint64_t thr = skip_threshold<Noise>(st.floor_key(), zmax);
        for (std::int64_t i = b0; i < b1; ++i) {
            const std::uint64_t m = words[i - b0] >> 12;
            if (m < thr) continue;
            const double z = sc.z(i);
            if (!(z > -kInf)) continue;
            const double key = z + Noise::quantile(m);
            if (key > st.floor_key()) {
                st.push(key, st.seen + i);
                thr = skip_threshold<Noise>(st.floor_key(), zmax);
            }
        }
    }
    st.seen += n;
}

// Reference utility of a row: the largest u_i among candidates that can be selected
// (logw_i > -inf); 0 when there is none (then every score is -inf anyway).
template <class T>
inline double row_shift(const T* u, const double* logw, std::int64_t n) {
    double mx = -kInf;
    for (std::int64_t i = 0; i < n; ++i) {
        if (logw && !(logw[i] > -kInf)) continue;
        const double v = double(u[i]);
        mx = v > mx ? v : mx;
    }
    return mx > -kInf ? mx : 0.0;
}

// z_i = c * (u_i - shift) (+ logw_i): utilities scaled to log-weights relative to the row's
// largest utility, optional log base measure.  Subtracting the shift BEFORE scaling and adding
// noise matters (issue: utilities [0, 16, 32] + 1e17): at 1e17 the spacing of doubles (16)
// exceeds the noise's resolution, so c * u_i + N_i rounds the noise away and biases the
// selection; u_i - shift is exact for nearby utilities (Sterbenz) and small, so the keys keep
// the noise's full precision.  The law is unchanged: it is invariant under a common shift.
template <class T>
struct LinearScores {
    const T* u;
    const double* logw;  // may be null
    double c;
    double shift = 0.0;
    double z(std::int64_t i) const {
        const double v = scaled_diff(c, double(u[i]), shift);
        return logw ? v + logw[i] : v;
    }
    double bound(std::int64_t i0, std::int64_t i1) const {
        double mx = -kInf;
        for (std::int64_t i = i0; i < i1; ++i) {
            const double v = z(i);
            mx = v > mx ? v : mx;
        }
        return mx;
    }
};

// Quantile intervals (Smith 2011; lectures.md B9): edges e_0 = lo <= e_1 <= ... <= e_{n+1} = hi
// (the sorted clamped data between the bounds); interval i = [e_i, e_{i+1}] has
// log-weight log(e_{i+1} - e_i) - c |i - target|, target = q n, c = eps/2 (Delta u = 1).
// Empty intervals have weight 0 (log = -inf) and are never chosen.
// Keys are relative to the largest log-weight's two parts (log of the widest interval, and the
// smallest distance dmin of an index to the target), for the same reason as LinearScores'
// shift: with eps/2 = 1e300, -c |i - target| is -5e299 for both intervals around target = 0.5,
// and the noise added to it would round away.
struct QuantileScores {
    const double* edges;  // n + 2 values
    double c;
    double target;
    double lwmax = 0.0;   // log of the widest interval
    double dmin = 0.0;    // min over i in [0, n] of |i - target|
    void set_shift(std::int64_t n_intervals) {
        double wmax = 0.0;
        for (std::int64_t i = 0; i < n_intervals; ++i) {
            const double w = edges[i + 1] - edges[i];
            wmax = w > wmax ? w : wmax;
        }
        lwmax = wmax > 0.0 ? std::log(wmax) : 0.0;
        const double inear = std::min(std::max(std::round(target), 0.0), double(n_intervals - 1));
        dmin = std::fabs(inear - target);
    }
    double z(std::int64_t i) const {
        const double w = edges[i + 1] - edges[i];
        if (!(w > 0.0)) return -kInf;
        return (std::log(w) - lwmax) - c * (std::fabs(double(i) - target) - dmin);
    }
    double bound(std::int64_t i0, std::int64_t i1) const {
        double wmax = 0.0;
        for (std::int64_t i = i0; i < i1; ++i) {
            const double w = edges[i + 1] - edges[i];
            wmax = w > wmax ? w : wmax;
        }
        if (!(wmax > 0.0)) return -kInf;
        // max over i in [i0, i1) of -c|i - target|: at the integer nearest target in range
        double inear = std::min(std::max(std::round(target), double(i0)), double(i1 - 1));
        double dmin_block = std::fabs(inear - target);
        // neighbours of the rounded point can be as close when target is a half-integer
        if (inear - 1 >= double(i0)) dmin_block = std::min(dmin_block, std::fabs(inear - 1 - target));
        if (inear + 1 <= double(i1 - 1)) dmin_block = std::min(dmin_block, std::fabs(inear + 1 - target));
        // small relative slack: log(wmax) is an upper bound only up to rounding of log
        const double lw = std::log(wmax) - lwmax;
        return lw + 1e-12 * (1.0 + std::fabs(lw) + std::fabs(lwmax)) - c * (dmin_block - this->dmin);
    }
};

template <class Scores>
void argmax_update_kind(int kind, BitStream& rs, std::int64_t n, const Scores& sc, ArgmaxState& st) {
    switch (kind) {
        case kExponential: argmax_update<ExponentialNoise>(rs, n, sc, st); break;
        case kLaplace: argmax_update<LaplaceNoise>(rs, n, sc, st); break;
        default: argmax_update<GumbelNoise>(rs, n, sc, st); break;
    }
}

// One private quantile (Smith 2011, "Privacy-preserving statistical estimation with optimal
// convergence rates", Algorithm 1; lectures.md B9): the interval i of `edges` (n_edges sorted
// values, lo and hi at the ends) chosen by the exponential mechanism with log-weights
// log(e_{i+1} - e_i) - c |i - target| (Gumbel-max), then a uniform point of [e_i, e_{i+1}]
// (clamped to e_{i+1}: a + (b - a) u may round up to b).  Returns false when every interval
// is empty (nothing is selectable); *out is then left unset.
inline bool quantile_draw(BitStream& rs, const double* edges, std::int64_t n_edges, double c,
                          double target, double* out) {
    QuantileScores sc{edges, c, target};
    sc.set_shift(n_edges - 1);
    ArgmaxState st;
    argmax_update<GumbelNoise>(rs, n_edges - 1, sc, st);
    if (st.index < 0) return false;
    const double a = edges[st.index], b = edges[st.index + 1];
    const double x = a + (b - a) * rs.uniform();
    *out = x < b ? x : b;
    return true;
}

// A streamed selection's chunk: rebase the running state to the chunk's largest selectable
// utility (when larger than the current shift: keys stay relative to the largest utility seen,
// see LinearScores), then fold the chunk's noisy keys into the state.
template <class T>
void argmax_chunk_update(int kind, BitStream& rs, std::int64_t n, const T* u, const double* logw, double c,
                         ArgmaxState& st) {
    bool any = false;  // a selectable candidate in this chunk
    for (std::int64_t i = 0; i < n && !any; ++i) any = !logw || logw[i] > -kInf;
    if (any) {
        const double cs = row_shift(u, logw, n);
        if (cs > st.shift) rebase(st, c, cs);
    }
    LinearScores<T> sc{u, logw, c, st.shift > -kInf ? st.shift : 0.0};
    argmax_update_kind(kind, rs, n, sc, st);
}

// One selection per row of a C-contiguous (m, n) array of utilities (logw: the same shape, or
// null): out[r] = argmax_i (c u_ri + logw_ri + N_ri), the rows in order on one word stream.
template <class T>
void argmax_rows(int kind, BitStream& rs, const T* u, const double* logw, std::int64_t m, std::int64_t n,
                 double c, std::int64_t* out) {
    for (std::int64_t r = 0; r < m; ++r) {
        const T* ur = u + r * n;
        const double* lr = logw ? logw + r * n : nullptr;
        LinearScores<T> sc{ur, lr, c, row_shift(ur, lr, n)};
        ArgmaxState st;
        argmax_update_kind(kind, rs, n, sc, st);
        out[r] = st.index;
    }
}

// One-shot top-k with Gumbel noise per row: out (m, k) holds each row's indices in decreasing
// noisy-score order.  Returns false when a row has fewer than k selectable candidates (its
// missing entries are -1).
template <class T>
bool topk_rows(BitStream& rs, const T* u, const double* logw, std::int64_t m, std::int64_t n, double c,
               std::int64_t k, std::int64_t* out) {
    bool full = true;
    for (std::int64_t r = 0; r < m; ++r) {
        const T* ur = u + r * n;
        const double* lr = logw ? logw + r * n : nullptr;
        LinearScores<T> sc{ur, lr, c, row_shift(ur, lr, n)};
        TopKState st(k);
        topk_update<GumbelNoise>(rs, n, sc, st);
        const auto idx = st.sorted_indices();
        if (std::int64_t(idx.size()) < k) full = false;
        for (std::int64_t j = 0; j < k; ++j) out[r * k + j] = j < std::int64_t(idx.size()) ? idx[j] : -1;
    }
    return full;
}

// Private quantiles of m groups (quantile_draw per target): group j draws on its edges
// edges[offsets[j] : offsets[j + 1]] (offsets null: every group uses all n_edges edges) with
// target targets[j].  Returns false at the first group whose intervals are all empty.
inline bool quantile_draws(BitStream& rs, const double* edges, std::int64_t n_edges, const std::int64_t* offsets,
                           const double* targets, std::int64_t m, double c, double* out) {
    for (std::int64_t j = 0; j < m; ++j) {
        const double* e = offsets ? edges + offsets[j] : edges;
        const std::int64_t ne = offsets ? offsets[j + 1] - offsets[j] : n_edges;
        if (!quantile_draw(rs, e, ne, c, targets[j], out + j)) return false;
    }
    return true;
}

}  // namespace sel
}  // namespace dpf
