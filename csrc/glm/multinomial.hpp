// Multinomial (softmax cross-entropy) loss with K outputs: the one home of its value,
// gradient and the constants the privacy analysis uses.  No Python here.
//
// Parameter W in R^{d x K} (row-major: W[j * K + k]), scores z = W^T x in R^K,
//   l(W; x, y) = -log softmax(z)_y = logsumexp(z) - z_y,            y in {0, ..., K-1}
//   grad_W l   = x (p - e_y)^T,  p = softmax(z)
//   hess l     = (diag p - p p^T) kron x x^T  (on vec W).
// Constants (derivations; used by dpfast/linear_model/_multinomial.py through the binding):
// * Lipschitz: ||grad_W l||_F = ||x|| ||p - e_y||_2 and
//   ||p - e_y||^2 = (1 - p_y)^2 + sum_{j != y} p_j^2 <= (1 - p_y)^2 + (sum_{j != y} p_j)^2
//   = 2 (1 - p_y)^2 <= 2, so L = sqrt(2) ||x||  (kLipschitzFactor).
// * Smoothness: the eigenvalues of A kron B are the products of those of A and B; x x^T has
//   the single non-zero eigenvalue ||x||^2, and A = diag p - p p^T is positive semidefinite
//   with, by Gershgorin's theorem, every eigenvalue <= max_i [A_ii + sum_{j != i} |A_ij|]
//   = max_i 2 p_i (1 - p_i) <= 1/2; so beta = ||x||^2 / 2  (kSmoothnessFactor).
// * Rank: A 1 = 0, so rank A <= K - 1 and the Hessian has rank <= K - 1 (kRankDeficit = 1):
//   not the rank-one Hessian of a GLM that the tight objective-perturbation analysis of
//   Redberg, Koskela & Wang (2024) needs (their Appendix E).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dpf {
namespace glm {
namespace multinomial {

constexpr double kLipschitzFactor = 1.4142135623730951;  // sqrt(2): L = factor * ||x||
constexpr double kSmoothnessFactor = 0.5;                // beta = factor * ||x||^2
constexpr int kRankDeficit = 1;                          // rank(hess) <= K - kRankDeficit

// Loss of one example from its scores z (K entries) and label y; writes r = p - e_y (K
// entries).  Stable for any finite z (shift by max z).
inline double value_residual(const double* z, int64_t K, int64_t y, double* r) {
    double m = z[0];
    for (int64_t k = 1; k < K; ++k) m = std::max(m, z[k]);
    double s = 0.0;
    for (int64_t k = 0; k < K; ++k) {
        r[k] = std::exp(z[k] - m);
        s += r[k];
    }
    const double inv = 1.0 / s;
    for (int64_t k = 0; k < K; ++k) r[k] *= inv;
    r[y] -= 1.0;
    return (m + std::log(s)) - z[y];
}

}  // namespace multinomial
}  // namespace glm
}  // namespace dpf
