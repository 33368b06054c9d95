// Random decision trees of a fixed shape (dpfast.tree, dpfast.ensemble): complete binary trees of
// depth D stored in heap order (node i has children 2i+1, 2i+2; the M = 2^D - 1 split nodes
// come first, leaf l is node M + l).  A split node holds a feature and a threshold; a row goes
// right when x[feature] > threshold (NaN goes left).  The shape, features and thresholds are drawn
// by the caller from public randomness, so the only pass over the private rows is:
//
//   leaf_counts: route each row to its leaf in its tree (one tree per row, or every tree) and
//                count the rows of each class in each leaf;
//   route:       the leaf of every row in every tree (prediction, no privacy involved);
//   proba_sum:   per row, the sum over the trees (in tree order) of its leaf's class distribution.
//
// Two ways to count the leaves of every row in every tree, the same integers:
//   descent: each row walks down each tree (D dependent loads a row and tree);
//   sliced:  (AVX2 + POPCNT, chosen at run time; shallow trees) 64 rows at a time.  A row's value
//            of feature j becomes its rank among the distinct thresholds on j (exact: x > t_p
//            iff rank(x) > p, where t_p is the p-th smallest); each split node then gives a 64-bit
//            mask of the rows that go right (vector compares of 16-bit ranks), the rows reaching
//            each node are ANDs of these masks down the tree, and a leaf's class count is a
//            popcount.  2^D - 1 cheap node masks replace 64 D dependent descents, so it pays for
//            depth <= kSlicedMaxDepth and enough trees to amortise the ranks (kSlicedMinWork).
//
// Determinism: the rows are cut into W contiguous blocks (W = the thread count); block k counts
// into its own table, and the tables are added in block order.  Counts are integers, so the sum
// is exact and the result is bit-identical for any thread count.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "parallel.hpp"
#include "portable.hpp"

#if defined(DPF_HAVE_AVX2_DISPATCH)
#include <immintrin.h>
#endif

namespace dpf {
namespace tree {

struct Forest {
    int64_t n_trees = 0;   // T
    int64_t depth = 0;     // D (0: one leaf, no split)
    int64_t n_features = 0;
    const int64_t* feature = nullptr;   // (T, M), entries in [0, n_features)
    const double* threshold = nullptr;  // (T, M)
    int64_t n_split() const { return (int64_t(1) << depth) - 1; }
    int64_t n_leaves() const { return int64_t(1) << depth; }
};

// A split node packed for the descent: one load brings both the threshold and the feature.
struct Node {
    double threshold;
    int64_t feature;
};

inline std::vector<Node> pack(const Forest& F) {
    const int64_t total = F.n_trees * F.n_split();
    std::vector<Node> nodes(static_cast<size_t>(total));
    for (int64_t a = 0; a < total; ++a) nodes[static_cast<size_t>(a)] = Node{F.threshold[a], F.feature[a]};
    return nodes;
}

// The leaves of R consecutive rows (row r at x + r * ld) in one tree (its packed nodes), in
// leaf[0 .. R): the R descents are interleaved level by level, so their dependent loads overlap
// (one row's descent is a chain of loads: node, then the feature value it names).
template <int R>
inline void rows_leaves(const Node* nodes, int64_t depth, const double* x, int64_t ld, int64_t* leaf) {
    int64_t a[R];
    for (int r = 0; r < R; ++r) a[r] = 0;
    for (int64_t level = 0; level < depth; ++level) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const Node q = nodes[a[r]];
            a[r] = 2 * a[r] + 1 + (x[r * ld + q.feature] > q.threshold ? 1 : 0);
        }
    }
    const int64_t M = (int64_t(1) << depth) - 1;
    for (int r = 0; r < R; ++r) leaf[r] = a[r] - M;
}

// The leaves of rows [i0, i0 + m) in one tree, in leaf[0 .. m): groups of kGroup rows, then one by one.
constexpr int kGroup = 8;
constexpr int64_t kBlock = 64;
inline void block_leaves(const Node* nodes, int64_t depth, const double* X, int64_t ld, int64_t i0, int64_t m,
                         int64_t* leaf) {
    int64_t r = 0;
    for (; r + kGroup <= m; r += kGroup) rows_leaves<kGroup>(nodes, depth, X + (i0 + r) * ld, ld, leaf + r);
    for (; r < m; ++r) rows_leaves<1>(nodes, depth, X + (i0 + r) * ld, ld, leaf + r);
}

// ----------------------------------------------------------------------------- sliced counts
// When "auto" picks sliced (measured at 3e5 x 10, 1 thread, 2026-11-28: descent / sliced = 3.6 at
// D = 5, T = 50; 1.4 at D = 5, T = 10; 2.0 at D = 6, T = 50; 1.2 at D = 7; 0.7-0.8 at D = 8; 0.86
// at D = 3, T = 10): depth <= kSlicedMaxDepth (2^D - 1 node masks against D descents a row) and
// T * D >= kSlicedMinWork (the ranks, d lookups a row, are shared by the trees).
constexpr int64_t kSlicedMaxDepth = 6;
constexpr int64_t kSlicedMinWork = 50;
constexpr int64_t kSlicedMaxClasses = 16;
constexpr int64_t kRankMax = 32767;      // ranks and labels are compared as int16
constexpr int64_t kGrid = 4096;          // buckets of the rank lookup (per feature)
constexpr int64_t kSlicedMaxFeatures = 4096;  // features a forest splits on (ranks and grids kept for each)

// The thresholds of a forest as ranks: per feature the sorted distinct thresholds (`cut`, at
// cut_at[j] .. cut_at[j + 1]) and a bucket table that starts each rank search near its answer;
// per split node its feature and the index p of its threshold among its feature's cuts.  Only the
// features the forest splits on are ranked: feature u of the view is column `column[u]` of X.
struct Ranked {
    int64_t d = 0;
    std::vector<int64_t> column;
    std::vector<double> cut;
    std::vector<int64_t> cut_at;
    std::vector<double> grid_lo, grid_scale;  // per feature: bucket = (x - lo) * scale
    std::vector<int32_t> grid;                // (d, kGrid): a rank near the bucket's lower edge
    std::vector<int32_t> node_feature;
    std::vector<int16_t> node_rank;
};

// cut holds each feature's cuts followed by one +inf (a sentinel for rank_of's first step).
// Ranked view of F, or false when a feature has more than kRankMax distinct thresholds, a
// threshold is NaN or the forest splits on more than kSlicedMaxFeatures features (then the caller
// uses the descent).  All three are functions of the (public) forest.
inline bool rank_forest(const Forest& F, Ranked& R) {
    const int64_t total = F.n_trees * F.n_split();
    // the features split on, in column order: u = slot[column]
    std::vector<int32_t> slot(static_cast<size_t>(F.n_features), -1);
    for (int64_t a = 0; a < total; ++a) {
        if (F.threshold[a] != F.threshold[a]) return false;
        slot[static_cast<size_t>(F.feature[a])] = 0;
    }
    R.column.clear();
    for (int64_t j = 0; j < F.n_features; ++j)
        if (slot[static_cast<size_t>(j)] == 0) {
            if ((int64_t)R.column.size() >= kSlicedMaxFeatures) return false;
            slot[static_cast<size_t>(j)] = (int32_t)R.column.size();
            R.column.push_back(j);
        }
    const int64_t d = (int64_t)R.column.size();
    std::vector<std::vector<double>> by(static_cast<size_t>(d));
    for (int64_t a = 0; a < total; ++a)
        by[static_cast<size_t>(slot[static_cast<size_t>(F.feature[a])])].push_back(F.threshold[a]);
    R.d = d;
    R.cut_at.assign(static_cast<size_t>(d + 1), 0);
    R.grid_lo.assign(static_cast<size_t>(d), 0.0);
    R.grid_scale.assign(static_cast<size_t>(d), 0.0);
    R.grid.assign(static_cast<size_t>(d * kGrid), 0);
    for (int64_t j = 0; j < d; ++j) {
        auto& c = by[static_cast<size_t>(j)];
        std::sort(c.begin(), c.end());
        c.erase(std::unique(c.begin(), c.end()), c.end());  // -0.0 and 0.0 are one cut
        if ((int64_t)c.size() > kRankMax) return false;
        R.cut_at[static_cast<size_t>(j + 1)] = R.cut_at[static_cast<size_t>(j)] + (int64_t)c.size() + 1;
        R.cut.insert(R.cut.end(), c.begin(), c.end());
        R.cut.push_back(std::numeric_limits<double>::infinity());
        if (c.size() >= 2 && c.back() > c.front()) {
            const double lo = c.front(), w = c.back() - c.front();
            const double scale = (double)kGrid / w;
            if (scale > 0.0 && scale < 1e300) {  // a finite bucket width; else every search starts at 0
                R.grid_lo[static_cast<size_t>(j)] = lo;
                R.grid_scale[static_cast<size_t>(j)] = scale;
                for (int64_t b = 0; b < kGrid; ++b)
                    R.grid[static_cast<size_t>(j * kGrid + b)] =
                        (int32_t)(std::lower_bound(c.begin(), c.end(), lo + (double)b / scale) - c.begin());
            }
        }
    }
    R.node_feature.resize(static_cast<size_t>(total));
    R.node_rank.resize(static_cast<size_t>(total));
    for (int64_t a = 0; a < total; ++a) {
        const int64_t j = slot[static_cast<size_t>(F.feature[a])];
        const double* c0 = R.cut.data() + R.cut_at[static_cast<size_t>(j)];
        const double* c1 = R.cut.data() + R.cut_at[static_cast<size_t>(j + 1)] - 1;
        R.node_feature[static_cast<size_t>(a)] = (int32_t)j;
        R.node_rank[static_cast<size_t>(a)] = (int16_t)(std::lower_bound(c0, c1, F.threshold[a]) - c0);
    }
    return true;
}

// out[r] = rank(x_r) = #{cuts of feature j < x_r} for the m values x_r = x[r * ld], exactly: the
// bucket table gives a start, one step and two loops walk to the answer whatever the rounding of
// the bucket (NaN: rank 0, so a NaN goes left, as x > t is false).
inline void ranks_of(const Ranked& R, int64_t j, const double* x, int64_t ld, int64_t m, int16_t* out) {
    const double* c = R.cut.data() + R.cut_at[static_cast<size_t>(j)];
    const int64_t mc = R.cut_at[static_cast<size_t>(j + 1)] - R.cut_at[static_cast<size_t>(j)] - 1;
    const double lo = R.grid_lo[static_cast<size_t>(j)], scale = R.grid_scale[static_cast<size_t>(j)];
    const int32_t* g = R.grid.data() + j * kGrid;
    for (int64_t i = 0; i < m; ++i) {
        const double v = x[i * ld], t = (v - lo) * scale;
        int64_t b = 0;
        if (t >= (double)(kGrid - 1)) b = kGrid - 1;
        else if (t >= 0.0) b = (int64_t)t;
        int64_t r = g[b];
        r += c[r] < v ? 1 : 0;  // c[mc] = +inf: no read past the cuts; +inf and NaN do not step
        while (r < mc && c[r] < v) ++r;
        while (r > 0 && !(c[r - 1] < v)) --r;
        out[i] = (int16_t)r;
    }
}

#if defined(DPF_HAVE_AVX2_DISPATCH)
#pragma GCC push_options
#pragma GCC target("avx2,popcnt")
namespace sliced {
// The 64-bit mask of v[r] > p over the 64 int16 values v[0 .. 64) (a fixed permutation of the 64
// bits: every mask of a block uses the same one, and counts are popcounts).
inline uint64_t gt_mask(const int16_t* v, int16_t p) {
    const __m256i pv = _mm256_set1_epi16(p);
    const __m256i a = _mm256_cmpgt_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v)), pv);
    const __m256i b = _mm256_cmpgt_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 16)), pv);
    const __m256i c = _mm256_cmpgt_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 32)), pv);
    const __m256i e = _mm256_cmpgt_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 48)), pv);
    return (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_packs_epi16(a, b)) |
           ((uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_packs_epi16(c, e)) << 32);
}

// counts[t, leaf, k] += the rows of class k in [lo, hi) reaching that leaf (counts: (T, 2^D, K)).
inline void count_rows(const Ranked& R, const Forest& F, const double* X, int64_t ld, const int64_t* y, int64_t K,
                       int64_t lo, int64_t hi, int64_t* counts) {
    const int64_t d = R.d, M = F.n_split(), L = F.n_leaves(), T = F.n_trees;
    // nb 64-row blocks at a time (their ranks within 16 KiB): each tree then counts all of them into
    // a small local table before one add to its counts, which stay out of the inner loops
    const int64_t nb_max = std::max<int64_t>(1, std::min<int64_t>(8, 128 / std::max<int64_t>(d, 1)));
    std::vector<int16_t> rk(static_cast<size_t>(nb_max * d * 64));
    std::vector<uint64_t> reach(static_cast<size_t>(2 * L));
    std::vector<uint64_t> rows(static_cast<size_t>(nb_max)), cls(static_cast<size_t>(nb_max * kSlicedMaxClasses));
    std::vector<int64_t> local(static_cast<size_t>(L * K));
    alignas(32) int16_t lab[64];
    for (int64_t c0 = lo; c0 < hi; c0 += 64 * nb_max) {
        const int64_t nb = std::min<int64_t>(nb_max, (hi - c0 + 63) / 64);
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t i0 = c0 + 64 * b, m = std::min<int64_t>(64, hi - i0);
            int16_t* rb = rk.data() + b * d * 64;
            for (int64_t r = 0; r < 64; ++r) lab[r] = r < m ? (int16_t)y[i0 + r] : (int16_t)-1;  // -1: no row
            if (m < 64) std::fill(rb, rb + d * 64, int16_t(0));
            for (int64_t j = 0; j < d; ++j)
                ranks_of(R, j, X + i0 * ld + R.column[static_cast<size_t>(j)], ld, m, rb + j * 64);
            rows[static_cast<size_t>(b)] = gt_mask(lab, -1);
            for (int64_t k = 0; k < K; ++k)
                cls[static_cast<size_t>(b * kSlicedMaxClasses + k)] =
                    gt_mask(lab, (int16_t)(k - 1)) & ~gt_mask(lab, (int16_t)k);
        }
        for (int64_t t = 0; t < T; ++t) {
            const int32_t* nf = R.node_feature.data() + t * M;
            const int16_t* np = R.node_rank.data() + t * M;
            std::fill(local.begin(), local.end(), int64_t(0));
            int64_t* lc = local.data();
            for (int64_t b = 0; b < nb; ++b) {
                const int16_t* rb = rk.data() + b * d * 64;
                const uint64_t* cb = cls.data() + b * kSlicedMaxClasses;
                // leaf l's rows of class k: popcount(leaf & class_k), the last class the rest
                const auto count = [&](int64_t l, uint64_t at) {
                    int64_t rest = __builtin_popcountll(at);
                    if (K == 2) {
                        const int64_t v = __builtin_popcountll(at & cb[0]);
                        lc[2 * l] += v;
                        lc[2 * l + 1] += rest - v;
                        return;
                    }
                    for (int64_t k = 0; k + 1 < K; ++k) {
                        const int64_t v = __builtin_popcountll(at & cb[k]);
                        lc[l * K + k] += v;
                        rest -= v;
                    }
                    lc[l * K + K - 1] += rest;
                };
                const int64_t last = (M - 1) / 2;  // the first node of the last split level
                reach[0] = rows[static_cast<size_t>(b)];
                for (int64_t a = 0; a < last; ++a) {
                    const uint64_t at = reach[static_cast<size_t>(a)];
                    const uint64_t right = gt_mask(rb + 64 * (int64_t)nf[a], np[a]);
                    reach[static_cast<size_t>(2 * a + 1)] = at & ~right;
                    reach[static_cast<size_t>(2 * a + 2)] = at & right;
                }
                for (int64_t a = last; a < M; ++a) {  // its children are the leaves 2a + 1 - M, 2a + 2 - M
                    const uint64_t at = reach[static_cast<size_t>(a)];
                    const uint64_t right = gt_mask(rb + 64 * (int64_t)nf[a], np[a]);
                    count(2 * a + 1 - M, at & ~right);
                    count(2 * a + 2 - M, at & right);
                }
            }
            int64_t* ct = counts + t * L * K;
            for (int64_t e = 0; e < L * K; ++e) ct[e] += lc[e];
        }
    }
}

// The leaf index of each of the 64 rows of a block (leaf[r] for row r, rows in order, not the
// masks' permutation) from the D per-level masks bits[k] (bit q: the row at mask position q went
// right at its level-k node): leaf = sum_k right_k 2^(D-1-k), the heap order of the descent.
inline void leaves_of_masks(const uint64_t* bits, int64_t depth, uint8_t* leaf) {
    // byte j of a 32-row half takes bit j % 8 of byte s(j) of the half's 32 mask bits: gt_mask's
    // packs put rows 8-15 at bits 16-23 and rows 16-23 at bits 8-15 (per 32)
    const __m256i src = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2,  //
                                         1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    for (int h = 0; h < 2; ++h) {
        __m256i acc = _mm256_setzero_si256();
        for (int64_t k = 0; k < depth; ++k) {
            const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)(uint32_t)(bits[k] >> (32 * h))), src);
            const __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
            acc = _mm256_or_si256(acc, _mm256_and_si256(on, _mm256_set1_epi8((char)(1 << (depth - 1 - k)))));
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(leaf + 32 * h), acc);
    }
}

// out[r, :] for the rows r of [lo, hi) (out: the (n, K) row-major sums): the sum over t = 0 ..
// T-1, in this order from 0.0, of proba[t, leaf of row r in t] -- the descent's order, so the same
// bits.  The leaves come from the node masks of count_rows, ORed per level (depth <= 8).
inline void proba_rows(const Ranked& R, const Forest& F, const double* X, int64_t ld, const double* proba,
                       int64_t K, int64_t lo, int64_t hi, double* out) {
    const int64_t d = R.d, M = F.n_split(), L = F.n_leaves(), T = F.n_trees, D = F.depth;
    // the sums in acc (each still 0.0 + the trees in order: the same bits): K = 2 row-major, two
    // rows an add; 3 .. 64 classes class-major (acc[c][r] of a block), gathered 4 rows at a time;
    // more classes straight into out.  Like count_rows, nb blocks of 64 rows at a time (ranks and
    // sums within 16 KiB each), a tree's leaf table read once for all of them.
    const bool gather = K <= 64;
    const int64_t nb_max = std::max<int64_t>(
        1, std::min<int64_t>({8, 128 / std::max<int64_t>(d, 1), gather ? 32 / K : 8}));
    std::vector<int16_t> rk(static_cast<size_t>(nb_max * d * 64));
    std::vector<uint64_t> reach(static_cast<size_t>(2 * L));
    std::vector<double> acc(static_cast<size_t>(gather ? nb_max * 64 * K : 0));
    uint64_t bits[8];
    alignas(32) uint8_t leaf[64];
    const __m128i kv = _mm_set1_epi32((int)K);
    const __m256d all = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
    for (int64_t c0 = lo; c0 < hi; c0 += 64 * nb_max) {
        const int64_t nb = std::min<int64_t>(nb_max, (hi - c0 + 63) / 64);
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t i0 = c0 + 64 * b, m = std::min<int64_t>(64, hi - i0);
            int16_t* rb = rk.data() + b * d * 64;
            if (m < 64) std::fill(rb, rb + d * 64, int16_t(0));
            for (int64_t j = 0; j < d; ++j)
                ranks_of(R, j, X + i0 * ld + R.column[static_cast<size_t>(j)], ld, m, rb + j * 64);
            if (!gather) std::fill(out + i0 * K, out + (i0 + m) * K, 0.0);
        }
        if (gather) std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t t = 0; t < T; ++t) {
            const int32_t* nf = R.node_feature.data() + t * M;
            const int16_t* np = R.node_rank.data() + t * M;
            const double* pt = proba + t * L * K;
            for (int64_t b = 0; b < nb; ++b) {
                const int16_t* rb = rk.data() + b * d * 64;
                reach[0] = ~uint64_t(0);
                for (int64_t k = 0, a = 0; k < D; ++k) {
                    uint64_t went_right = 0;  // the level's nodes see disjoint rows
                    for (const int64_t end = 2 * a + 1; a < end; ++a) {
                        const uint64_t at = reach[static_cast<size_t>(a)];
                        const uint64_t right = gt_mask(rb + 64 * (int64_t)nf[a], np[a]);
                        went_right |= at & right;
                        reach[static_cast<size_t>(2 * a + 1)] = at & ~right;
                        reach[static_cast<size_t>(2 * a + 2)] = at & right;
                    }
                    bits[k] = went_right;
                }
                leaves_of_masks(bits, D, leaf);
                double* ab = acc.data() + b * 64 * K;
                if (K == 2) {  // two rows a 256-bit add: ab[2r .. 2r + 2) += pt[2 leaf[r] .. + 2)
                    for (int r = 0; r < 64; r += 2) {
                        const __m256d p =
                            _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(pt + 2 * (int64_t)leaf[r])),
                                                 _mm_loadu_pd(pt + 2 * (int64_t)leaf[r + 1]), 1);
                        _mm256_storeu_pd(ab + 2 * r, _mm256_add_pd(_mm256_loadu_pd(ab + 2 * r), p));
                    }
                } else if (gather) {  // ab[c][r] += pt[leaf[r] K + c] (all 64 rows: padding rows route too)
                    __m128i idx[16];
                    for (int q = 0; q < 16; ++q) {
                        int four;
                        std::memcpy(&four, leaf + 4 * q, sizeof four);
                        idx[q] = _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(four)), kv);
                    }
                    for (int64_t c = 0; c < K; ++c) {
                        double* ac = ab + 64 * c;
                        for (int q = 0; q < 16; ++q) {
                            // the masked form with a zero source: the plain one reads an undefined register
                            // (GCC 12 -Wmaybe-uninitialized)
                            const __m256d g = _mm256_mask_i32gather_pd(_mm256_setzero_pd(), pt + c, idx[q], all, 8);
                            _mm256_storeu_pd(ac + 4 * q, _mm256_add_pd(_mm256_loadu_pd(ac + 4 * q), g));
                        }
                    }
                } else {
                    const int64_t i0 = c0 + 64 * b, m = std::min<int64_t>(64, hi - i0);
                    double* o = out + i0 * K;
                    for (int64_t r = 0; r < m; ++r) {
                        const double* p = pt + K * (int64_t)leaf[r];
                        for (int64_t c = 0; c < K; ++c) o[r * K + c] += p[c];
                    }
                }
            }
        }
        if (gather)
            for (int64_t b = 0; b < nb; ++b) {
                const int64_t i0 = c0 + 64 * b, m = std::min<int64_t>(64, hi - i0);
                const double* ab = acc.data() + b * 64 * K;
                double* o = out + i0 * K;
                if (K == 2) std::copy(ab, ab + 2 * m, o);
                else
                    for (int64_t r = 0; r < m; ++r)
                        for (int64_t c = 0; c < K; ++c) o[r * K + c] = ab[64 * c + r];
            }
    }
}
}  // namespace sliced
#pragma GCC pop_options

// DPFAST_TREES_NO_AVX2=1 forces the descent (to test it on AVX2 machines).
inline bool sliced_available() {
    static const bool ok = [] {
        if (!avx2_enabled("DPFAST_TREES_NO_AVX2")) return false;
        __builtin_cpu_init();
        return __builtin_cpu_supports("popcnt") != 0;
    }();
    return ok;
}
#else
inline bool sliced_available() { return false; }
#endif

// Which counting kernel: 0 = the faster for this shape (public: T, D, K), 1 = descent, 2 = sliced
// where available.
inline bool use_sliced(int kernel, const Forest& F, int64_t K) {
    if (kernel == 1 || !sliced_available()) return false;
    if (F.depth < 1 || K > kSlicedMaxClasses || K > kRankMax) return false;
    if (kernel == 2) return true;
    return F.depth <= kSlicedMaxDepth && F.n_trees * F.depth >= kSlicedMinWork;
}

// The row chunks of the sliced kernels on W threads: one with one thread; with more, up to 8 per
// thread of at least 16384 rows (and, for counts, at most 2^23 table entries in all), claimed by the
// threads as they come free, so a thread that gets no core for a while (a shared machine) leaves its
// share to the others.  Counts are added in chunk order and a row's sums are its own: the results do
// not depend on the chunks.
inline int64_t sliced_chunks(int64_t W, int64_t n, int64_t table) {
    if (W <= 1) return 1;
    int64_t C = std::min<int64_t>(8 * W, n / 16384);
    if (table > 0) C = std::min<int64_t>(C, (int64_t(1) << 23) / table);
    return std::max<int64_t>(W, C);
}

// counts (T, 2^D, K), zeroed here: counts[t, leaf, y_i] += 1 for every row i and every tree t
// it feeds (tree_of_row[i] when given, else all T).  X row i is X + i * ld.
inline void leaf_counts(const double* X, int64_t n, int64_t ld, const int64_t* y, int64_t K,
                        const int64_t* tree_of_row, const Forest& F, int nthreads, int64_t* counts, int kernel = 0) {
    const int64_t L = F.n_leaves(), T = F.n_trees, M = F.n_split();
    const int64_t table = T * L * K;
    const int64_t W = std::max<int64_t>(1, std::min<int64_t>(nthreads, n / 4096 + 1));
#if defined(DPF_HAVE_AVX2_DISPATCH)
    if (!tree_of_row && use_sliced(kernel, F, K)) {
        Ranked R;
        if (rank_forest(F, R)) {
            const int64_t C = sliced_chunks(W, n, table);
            std::vector<std::vector<int64_t>> part(static_cast<size_t>(C));
            run_chunks(C, (int)W, [&](int64_t k) {
                std::vector<int64_t> c(static_cast<size_t>(table), 0);
                sliced::count_rows(R, F, X, ld, y, K, n * k / C, n * (k + 1) / C, c.data());
                part[static_cast<size_t>(k)] = std::move(c);
            });
            std::fill(counts, counts + table, int64_t(0));
            for (int64_t k = 0; k < C; ++k) {
                const int64_t* c = part[static_cast<size_t>(k)].data();
                for (int64_t a = 0; a < table; ++a) counts[a] += c[a];
            }
            return;
        }
    }
#else
    (void)kernel;
#endif
    const std::vector<Node> nodes = pack(F);
    // kWays interleaved copies of a small table (row r counts into copy r % kWays): consecutive
    // rows of one leaf and class then do not wait on each other's increment
    const int64_t kWays = table <= (int64_t(1) << 16) ? 4 : 1, wmask = kWays - 1;  // a power of 2
    std::vector<std::vector<int64_t>> part(static_cast<size_t>(W));
    run_chunks(W, (int)W, [&](int64_t k) {
        std::vector<int64_t> c(static_cast<size_t>(kWays * table), 0);
        const int64_t lo = n * k / W, hi = n * (k + 1) / W;
        int64_t leaf[kBlock];
        for (int64_t i0 = lo; i0 < hi; i0 += kBlock) {
            const int64_t m = std::min(kBlock, hi - i0);
            if (tree_of_row) {
                for (int64_t r = 0; r < m; ++r) {
                    const int64_t i = i0 + r, t = tree_of_row[i];
                    block_leaves(nodes.data() + t * M, F.depth, X, ld, i, 1, leaf);
                    ++c[static_cast<size_t>((r & wmask) * table + (t * L + leaf[0]) * K + y[i])];
                }
            } else {
                for (int64_t t = 0; t < T; ++t) {
                    block_leaves(nodes.data() + t * M, F.depth, X, ld, i0, m, leaf);
                    int64_t* ct = c.data() + t * L * K;
                    for (int64_t r = 0; r < m; ++r) ++ct[(r & wmask) * table + leaf[r] * K + y[i0 + r]];
                }
            }
        }
        for (int64_t w = 1; w < kWays; ++w)
            for (int64_t a = 0; a < table; ++a) c[static_cast<size_t>(a)] += c[static_cast<size_t>(w * table + a)];
        c.resize(static_cast<size_t>(table));
        part[static_cast<size_t>(k)] = std::move(c);
    });
    std::fill(counts, counts + table, int64_t(0));
    for (int64_t k = 0; k < W; ++k) {
        const int64_t* c = part[static_cast<size_t>(k)].data();
        for (int64_t a = 0; a < table; ++a) counts[a] += c[a];
    }
}

// The descent over rows [0, n) in W contiguous blocks of rows (W: the thread count, at least
// 4096 rows each), 64 rows at a time: start(i0, m) once per 64 rows, then leaves(t, i0, m, leaf)
// with the leaves of those rows in tree t, for t = 0 .. T-1 in order.
template <class Start, class Leaves>
inline void descend_rows(const double* X, int64_t n, int64_t ld, const Forest& F, int nthreads, const Start& start,
                         const Leaves& leaves) {
    const int64_t T = F.n_trees, M = F.n_split();
    const std::vector<Node> nodes = pack(F);
    const int64_t W = std::max<int64_t>(1, std::min<int64_t>(nthreads, n / 4096 + 1));
    run_chunks(W, (int)W, [&](int64_t k) {
        const int64_t lo = n * k / W, hi = n * (k + 1) / W;
        int64_t leaf[kBlock];
        for (int64_t i0 = lo; i0 < hi; i0 += kBlock) {
            const int64_t m = std::min(kBlock, hi - i0);
            start(i0, m);
            for (int64_t t = 0; t < T; ++t) {
                block_leaves(nodes.data() + t * M, F.depth, X, ld, i0, m, leaf);
                leaves(t, i0, m, (const int64_t*)leaf);
            }
        }
    });
}

// leaves (n, T): the leaf of row i in tree t.
inline void route(const double* X, int64_t n, int64_t ld, const Forest& F, int nthreads, int64_t* leaves) {
    const int64_t T = F.n_trees;
    descend_rows(
        X, n, ld, F, nthreads, [](int64_t, int64_t) {},
        [&](int64_t t, int64_t i0, int64_t m, const int64_t* leaf) {
            for (int64_t r = 0; r < m; ++r) leaves[(i0 + r) * T + t] = leaf[r];
        });
}

// Which prediction kernel: 0 = the faster for this shape (public: T, D), 1 = descent, 2 = sliced
// where available (depth 1 .. 8: a leaf index in a byte).  Auto: the counts' rule (the node masks
// and the ranks cost the same; measured, benchmarks/RESULTS.md "forest32").
inline bool use_sliced_predict(int kernel, const Forest& F) {
    if (kernel == 1 || !sliced_available()) return false;
    if (F.depth < 1 || F.depth > 8) return false;
    if (kernel == 2) return true;
    return F.depth <= kSlicedMaxDepth && F.n_trees * F.depth >= kSlicedMinWork;
}

// out (n, K): out[i] = sum over t = 0 .. T-1, in this order from 0.0, of proba[t, leaf of row i in
// t] (proba: (T, 2^D, K)).  Per-row sums in a fixed order: the same bits for any thread count and
// either kernel (descent, or sliced where use_sliced_predict and the forest ranks).
inline void proba_sum(const double* X, int64_t n, int64_t ld, const Forest& F, const double* proba, int64_t K,
                      int nthreads, double* out, int kernel = 0) {
    const int64_t LK = F.n_leaves() * K;
#if defined(DPF_HAVE_AVX2_DISPATCH)
    if (use_sliced_predict(kernel, F)) {
        Ranked R;
        if (rank_forest(F, R)) {
            const int64_t W = std::max<int64_t>(1, std::min<int64_t>(nthreads, n / 4096 + 1));
            const int64_t C = sliced_chunks(W, n, 0);
            run_chunks(C, (int)W, [&](int64_t k) {
                sliced::proba_rows(R, F, X, ld, proba, K, n * k / C, n * (k + 1) / C, out);
            });
            return;
        }
    }
#else
    (void)kernel;
#endif
    descend_rows(
        X, n, ld, F, nthreads, [&](int64_t i0, int64_t m) { std::fill(out + i0 * K, out + (i0 + m) * K, 0.0); },
        [&](int64_t t, int64_t i0, int64_t m, const int64_t* leaf) {
            const double* pt = proba + t * LK;
            double* o = out + i0 * K;
            for (int64_t r = 0; r < m; ++r)
                for (int64_t c = 0; c < K; ++c) o[r * K + c] += pt[leaf[r] * K + c];
        });
}

}  // namespace tree
}  // namespace dpf
