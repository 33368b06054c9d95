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

// The leaf index (0 .. 2^D - 1) of row x in tree t.
inline int64_t leaf_of(const Forest& F, int64_t t, const double* x) {
    const int64_t M = F.n_split();
    const int64_t* feat = F.feature + t * M;
    const double* thr = F.threshold + t * M;
    int64_t node = 0;
    for (int64_t level = 0; level < F.depth; ++level) node = 2 * node + 1 + (x[feat[node]] > thr[node] ? 1 : 0);
    return node - M;
}

// counts (T, 2^D, K), zeroed here: counts[t, leaf, y_i] += 1 for every row i and every tree t
// it feeds (tree_of_row[i] when given, else all T).  X row i is X + i * ld.
inline void leaf_counts(const double* X, int64_t n, int64_t ld, const int64_t* y, int64_t K,
                        const int64_t* tree_of_row, const Forest& F, int nthreads, int64_t* counts) {
    const int64_t L = F.n_leaves(), T = F.n_trees;
    const int64_t table = T * L * K;
    const int64_t W = std::max<int64_t>(1, std::min<int64_t>(nthreads, n / 4096 + 1));
    std::vector<std::vector<int64_t>> part(static_cast<size_t>(W));
    run_chunks(W, (int)W, [&](int64_t k) {
        std::vector<int64_t> c(static_cast<size_t>(table), 0);
        const int64_t lo = n * k / W, hi = n * (k + 1) / W;
        for (int64_t i = lo; i < hi; ++i) {
            const double* x = X + i * ld;
            if (tree_of_row) {
                const int64_t t = tree_of_row[i];
                ++c[static_cast<size_t>((t * L + leaf_of(F, t, x)) * K + y[i])];
            } else {
                for (int64_t t = 0; t < T; ++t) ++c[static_cast<size_t>((t * L + leaf_of(F, t, x)) * K + y[i])];
            }
        }
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
    const int64_t T = F.n_trees;
    const int64_t W = std::max<int64_t>(1, std::min<int64_t>(nthreads, n / 4096 + 1));
    run_chunks(W, (int)W, [&](int64_t k) {
        const int64_t lo = n * k / W, hi = n * (k + 1) / W;
        for (int64_t i = lo; i < hi; ++i)
            for (int64_t t = 0; t < T; ++t) leaves[i * T + t] = leaf_of(F, t, X + i * ld);
    });
}

}  // namespace tree
}  // namespace dpf
