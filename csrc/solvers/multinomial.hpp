// Loss and gradient of the multinomial objective
//   F(W) = sum_i w_i l(W; x_i, y_i) + (alpha/2) ||W||_F^2,      W in R^{d x K} (row-major),
// with l the softmax cross-entropy of csrc/losses/losses.hpp, over dense row-major or CSR
// rows, with the row map x_i -> rscale_i x_i and the constant feature icpt appended as row
// dx of W (as in csrc/glm/data.hpp's Objective).  Deterministic: the rows are cut into chunks
// that depend on n only (never on the thread count), each chunk accumulates its own partial
// value and gradient, and the partials are reduced in chunk order -- the scheme of
// csrc/solvers/objective.hpp's Evaluator, with the same fork-join (csrc/parallel.hpp).  The kernel
// is kept apart from impl.hpp because that file is compiled per target inside glm_solvers.hpp
// and its Objective is scalar-margin.  No Python here.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "glm/data.hpp"
#include "parallel.hpp"

namespace dpf {
namespace solvers {
namespace multinomial {

struct Problem {
    int64_t n = 0, dx = 0, K = 0;     // rows, stored columns, classes
    const int64_t* y = nullptr;       // (n,) labels in [0, K)
    const double* w = nullptr;        // (n,) weights or null
    const double* rscale = nullptr;   // (n,) row scales or null
    double icpt = 0.0;                // constant feature (0: none)
    double alpha = 0.0;               // ridge
    int64_t d() const { return dx + (icpt != 0.0); }
};

// Chunks of >= 1024 rows, at most 32 of them: depends on n only.
struct Chunks {
    int64_t n = 0, rows = 1, count = 0;
    explicit Chunks(int64_t n_) : n(n_) {
        rows = std::max<int64_t>(1024, (n + 31) / 32);
        count = n > 0 ? (n + rows - 1) / rows : 0;
    }
    int64_t begin(int64_t k) const { return k * rows; }
    int64_t end(int64_t k) const { return std::min(n, (k + 1) * rows); }
};

// Scores of one row: z = s * (x^T W[0:dx]) + icpt * W[dx].
template <class T>
inline void scores(const glm::DenseC<T>& X, const Problem& P, int64_t i, const double* W, double* z) {
    const int64_t K = P.K, dx = P.dx;
    std::fill(z, z + K, 0.0);
    const T* x = X.X + i * dx;
    for (int64_t j = 0; j < dx; ++j) {
        const double xj = (double)x[j];
        if (xj == 0.0) continue;
        const double* wj = W + j * K;
        for (int64_t k = 0; k < K; ++k) z[k] += xj * wj[k];
    }
}
template <class T, class I>
inline void scores(const glm::CSR<T, I>& X, const Problem& P, int64_t i, const double* W, double* z) {
    const int64_t K = P.K;
    std::fill(z, z + K, 0.0);
    for (int64_t p = (int64_t)X.indptr[i]; p < (int64_t)X.indptr[i + 1]; ++p) {
        const double xj = (double)X.data[p];
        const double* wj = W + (int64_t)X.indices[p] * K;
        for (int64_t k = 0; k < K; ++k) z[k] += xj * wj[k];
    }
}

// G[0:dx] += s * x r^T.
template <class T>
inline void scatter(const glm::DenseC<T>& X, const Problem& P, int64_t i, double s, const double* r, double* G) {
    const int64_t K = P.K, dx = P.dx;
    const T* x = X.X + i * dx;
    for (int64_t j = 0; j < dx; ++j) {
        const double a = s * (double)x[j];
        if (a == 0.0) continue;
        double* gj = G + j * K;
        for (int64_t k = 0; k < K; ++k) gj[k] += a * r[k];
    }
}
template <class T, class I>
inline void scatter(const glm::CSR<T, I>& X, const Problem& P, int64_t i, double s, const double* r, double* G) {
    const int64_t K = P.K;
    for (int64_t p = (int64_t)X.indptr[i]; p < (int64_t)X.indptr[i + 1]; ++p) {
        const double a = s * (double)X.data[p];
        double* gj = G + (int64_t)X.indices[p] * K;
        for (int64_t k = 0; k < K; ++k) gj[k] += a * r[k];
    }
}

// Rows [a, b): returns the weighted loss sum and adds the data gradient to G (d x K).
template <class View>
double eval_chunk(const View& X, const Problem& P, int64_t a, int64_t b, const double* W, double* G) {
    const int64_t K = P.K, dx = P.dx;
    std::vector<double> z((size_t)K), r((size_t)K);
    double loss = 0.0;
    for (int64_t i = a; i < b; ++i) {
        scores(X, P, i, W, z.data());
        const double s = P.rscale ? P.rscale[i] : 1.0;
        if (s != 1.0)
            for (int64_t k = 0; k < K; ++k) z[k] *= s;
        if (P.icpt != 0.0)
            for (int64_t k = 0; k < K; ++k) z[k] += P.icpt * W[dx * K + k];
        double v = dpf::loss::softmax_value_residual<double>(z.data(), K, P.y[i], r.data());
        if (P.w) {
            const double wi = P.w[i];
            v *= wi;
            for (int64_t k = 0; k < K; ++k) r[k] *= wi;
        }
        loss += v;
        scatter(X, P, i, s, r.data(), G);
        if (P.icpt != 0.0)
            for (int64_t k = 0; k < K; ++k) G[dx * K + k] += P.icpt * r[k];
    }
    return loss;
}

// F(W) and grad F(W) (G, d x K).  Returns false when F or G is not finite (a non-finite row).
template <class View>
bool loss_grad(const View& X, const Problem& P, int nthreads, const double* W, double* G, double& f) {
    const int64_t dK = P.d() * P.K;
    Chunks ch(P.n);
    std::vector<double> part((size_t)(ch.count * dK), 0.0), lossp((size_t)ch.count, 0.0);
    auto run = [&](int64_t k) {
        double* gk = part.data() + k * dK;
        lossp[k] = eval_chunk(X, P, ch.begin(k), ch.end(k), W, gk);
    };
    run_chunks(ch.count, nthreads, run);
    std::fill(G, G + dK, 0.0);
    f = 0.0;
    for (int64_t k = 0; k < ch.count; ++k) {  // chunk order: independent of the thread count
        f += lossp[k];
        const double* gk = part.data() + k * dK;
        for (int64_t j = 0; j < dK; ++j) G[j] += gk[j];
    }
    if (P.alpha != 0.0) {
        double sq = 0.0;
        for (int64_t j = 0; j < dK; ++j) {
            sq += W[j] * W[j];
            G[j] += P.alpha * W[j];
        }
        f += 0.5 * P.alpha * sq;
    }
    bool ok = std::isfinite(f);
    for (int64_t j = 0; j < dK; ++j) ok &= std::isfinite(G[j]);
    return ok;
}

}  // namespace multinomial
}  // namespace solvers
}  // namespace dpf
