// Random decision trees of a fixed shape (dpfast.tree, dpfast.ensemble): complete binary trees of
// depth D stored in heap order (node i has children 2i+1, 2i+2; the M = 2^D - 1 split nodes
// come first, leaf l is node M + l).  A split node holds a feature and a threshold; a row goes
// right when x[feature] > threshold (NaN goes left).  The shape, features and thresholds are drawn
// by the caller from public randomness, so the only pass over the private rows is:
//
//   leaf_counts: route each row to its leaf in its tree (one tree per row, or every tree) and
//                count the rows of each class in each leaf;
//   route:       the leaf of every row in every tree (prediction, no privacy involved).
//
// Determinism: the rows are cut into W contiguous blocks (W = the thread count); block k counts
// into its own table, and the tables are added in block order.  Counts are integers, so the sum
// is exact and the result is bit-identical for any thread count.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "parallel.hpp"

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

// counts (T, 2^D, K), zeroed here: counts[t, leaf, y_i] += 1 for every row i and every tree t
// it feeds (tree_of_row[i] when given, else all T).  X row i is X + i * ld.
inline void leaf_counts(const double* X, int64_t n, int64_t ld, const int64_t* y, int64_t K,
                        const int64_t* tree_of_row, const Forest& F, int nthreads, int64_t* counts) {
    const int64_t L = F.n_leaves(), T = F.n_trees, M = F.n_split();
    const int64_t table = T * L * K;
    const std::vector<Node> nodes = pack(F);
    const int64_t W = std::max<int64_t>(1, std::min<int64_t>(nthreads, n / 4096 + 1));
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

// leaves (n, T): the leaf of row i in tree t.
inline void route(const double* X, int64_t n, int64_t ld, const Forest& F, int nthreads, int64_t* leaves) {
    const int64_t T = F.n_trees, M = F.n_split();
    const std::vector<Node> nodes = pack(F);
    const int64_t W = std::max<int64_t>(1, std::min<int64_t>(nthreads, n / 4096 + 1));
    run_chunks(W, (int)W, [&](int64_t k) {
        const int64_t lo = n * k / W, hi = n * (k + 1) / W;
        int64_t leaf[kBlock];
        for (int64_t i0 = lo; i0 < hi; i0 += kBlock) {
            const int64_t m = std::min(kBlock, hi - i0);
            for (int64_t t = 0; t < T; ++t) {
                block_leaves(nodes.data() + t * M, F.depth, X, ld, i0, m, leaf);
                for (int64_t r = 0; r < m; ++r) leaves[(i0 + r) * T + t] = leaf[r];
            }
        }
    });
}

}  // namespace tree
}  // namespace dpf
