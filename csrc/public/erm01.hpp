// Exact weighted 0-1-loss ERM oracles for learning with public data (Block, Bun,
// Desai, Shetty & Wu 2024, Algorithm 4 and its oracle; docs/theory/public_data.rst): 1-D thresholds and decision stumps.
//
// Classes (labels in {0,1}):
//   threshold  f_t(x) = 1[x > t],                t in [-inf, +inf]
//   stump      f_{j,t,s}(x) = 1[x_j > t] (s=+1) or 1[x_j <= t] (s=-1)
// Loss: L(f) = sum_i w_i * 1[f(x_i) != y_i], w_i >= 0.
//
// Exactness: every partition of the sorted points that the class can realise is scanned
// (radix sort + one pass per feature).  Ties in x are grouped, so a threshold never splits equal
// values.  Weights are accumulated in long double; among equal losses the first candidate in
// scan order wins (smallest feature, then s=+1 before s=-1, then smallest threshold), so the
// result is a deterministic function of the input.  The returned threshold is the midpoint of
// the gap between the last point predicted 0 and the next distinct value (-inf when every
// point is predicted 1, +inf when every point is predicted 0), so the partition of the input
// points is exactly the one that attains the minimum.
//
// No Python headers here; inputs are validated by the caller (finite x, finite w >= 0,
// y in {0,1}).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

namespace dpf {
namespace public_erm {

struct StumpResult {
    std::int64_t feature = 0;
    double threshold = -std::numeric_limits<double>::infinity();
    int sign = 1;           // +1: predict 1[x_j > t]; -1: predict 1[x_j <= t]
    long double loss = 0;   // weighted 0-1 loss of the returned hypothesis
};

// One feature: values x[i*stride], labels y, weights w, n points.  Scans thresholds for the
// orientation s=+1; the s=-1 loss at the same threshold is W - loss(+1) (each point is
// misclassified by exactly one of the two orientations).
// If both_signs is false only s=+1 is considered.
// Order-preserving map double -> uint64 (no NaN; -0.0 is folded into +0.0 by the caller).
inline std::uint64_t double_key(double v) {
    std::uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return (b >> 63) ? ~b : (b | (std::uint64_t(1) << 63));
}

inline double key_double(std::uint64_t k) {
    const std::uint64_t b = (k >> 63) ? (k & ~(std::uint64_t(1) << 63)) : ~k;
    double v;
    std::memcpy(&v, &b, sizeof v);
    return v;
}

// Scratch buffers for one feature scan (reused across features).
struct SortScratch {
    std::vector<std::uint64_t> keys, keys2;
    std::vector<std::uint32_t> idx, idx2;
};

// Stable LSD radix sort of (key, index) by key: 6 passes of 11 bits, skipping passes in which
// every key has the same digit.  O(n); ties keep index order, so the result is deterministic.
inline void radix_sort(SortScratch& s, std::size_t n) {
    constexpr int kBits = 11;
    constexpr std::size_t kBuckets = std::size_t(1) << kBits;
    std::vector<std::size_t> count(kBuckets);
    for (int shift = 0; shift < 64; shift += kBits) {
        std::fill(count.begin(), count.end(), 0);
        for (std::size_t i = 0; i < n; ++i) ++count[(s.keys[i] >> shift) & (kBuckets - 1)];
        if (count[(s.keys[0] >> shift) & (kBuckets - 1)] == n) continue;  // one digit: no-op pass
        std::size_t sum = 0;
        for (auto& c : count) { const std::size_t t = c; c = sum; sum += t; }
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t pos = count[(s.keys[i] >> shift) & (kBuckets - 1)]++;
            s.keys2[pos] = s.keys[i];
            s.idx2[pos] = s.idx[i];
        }
        s.keys.swap(s.keys2);
        s.idx.swap(s.idx2);
    }
}

inline StumpResult scan_feature(const double* x, std::ptrdiff_t stride, const std::uint8_t* y,
                                const double* w, std::size_t n, bool both_signs, SortScratch& s) {
    // Points sorted by value (radix sort; n < 2^32 is checked by the caller); equal values are
    // processed as one group, so the order within a group does not matter.
    s.keys.resize(n); s.keys2.resize(n); s.idx.resize(n); s.idx2.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        s.keys[i] = double_key(x[i * stride] + 0.0);  // + 0.0 folds -0.0 into +0.0
        s.idx[i] = (std::uint32_t)i;
    }
    if (n > 0) radix_sort(s, n);
    const double inf = std::numeric_limits<double>::infinity();
    long double total = 0, loss_pos = 0;
    for (std::size_t i = 0; i < n; ++i) {
        total += w[i];
        if (y[i] == 0) loss_pos += w[i];  // t = -inf: every point predicted 1
    }
    // Best over s=+1 (minimum of loss_pos) and s=-1 (minimum of total - loss_pos).
    long double best_pos = loss_pos, best_neg = total - loss_pos;
    std::size_t best_pos_k = 0, best_neg_k = 0;  // k = number of leading points predicted 0 (+1)
    std::size_t k = 0;
    while (k < n) {
        const std::uint64_t v = s.keys[k];
        std::size_t j = k;
        while (j < n && s.keys[j] == v) {
            const std::size_t i = s.idx[j];
            loss_pos += (y[i] == 1) ? (long double)w[i] : -(long double)w[i];
            ++j;
        }
        k = j;
        if (loss_pos < best_pos) { best_pos = loss_pos; best_pos_k = k; }
        const long double neg = total - loss_pos;
        if (neg < best_neg) { best_neg = neg; best_neg_k = k; }
    }
    auto thr = [&](std::size_t kk) -> double {
        if (kk == 0) return -inf;
        if (kk >= n) return inf;
        const double lo = key_double(s.keys[kk - 1]), hi = key_double(s.keys[kk]);
        double mid = lo + (hi - lo) / 2.0;
        if (!(mid >= lo && mid < hi)) mid = lo;  // degenerate rounding: lo itself separates
        return mid;
    };
    StumpResult r;
    if (!both_signs || best_pos <= best_neg) {
        r.sign = 1; r.loss = best_pos; r.threshold = thr(best_pos_k);
    } else {
        r.sign = -1; r.loss = best_neg; r.threshold = thr(best_neg_k);
    }
    return r;
}

// Decision stump over p features of a row-major (n x p) matrix.  p == 1 with
// both_signs == false is the threshold class.
inline StumpResult stump_erm(const double* X, std::size_t n, std::size_t p, const std::uint8_t* y,
                             const double* w, bool both_signs) {
    SortScratch scratch;
    StumpResult best;
    bool have = false;
    for (std::size_t j = 0; j < p; ++j) {
        StumpResult r = scan_feature(X + j, (std::ptrdiff_t)p, y, w, n, both_signs, scratch);
        r.feature = (std::int64_t)j;
        if (!have || r.loss < best.loss) { best = r; have = true; }
    }
    return best;
}

// Predictions of a stump on rows of a row-major matrix.
inline void stump_predict(const double* X, std::size_t n, std::size_t p, std::int64_t feature,
                          double threshold, int sign, std::uint8_t* out) {
    for (std::size_t i = 0; i < n; ++i) {
        const bool above = X[i * p + (std::size_t)feature] > threshold;
        out[i] = (sign > 0) ? (above ? 1 : 0) : (above ? 0 : 1);
    }
}

}  // namespace public_erm
}  // namespace dpf
