// The losses of dpfast, each defined once: the GLM solvers (csrc/solvers/), the multinomial
// kernel (csrc/solvers/multinomial.hpp) and DP-SGD's clipped sums (csrc/clip/clip.hpp) all call
// these definitions, and the bindings export DPF_LOSS_TABLE (bindings/loss_table.hpp), which
// Python reads instead of repeating codes or constants.  No Python here.
//
// A loss maps the K scores z = W^T x of one example and its label y to l(z; y) and the residual
// r = dl/dz (K entries).  K = 1 for the margin losses (logistic, squared, huber,
// smoothed_hinge: one score, the margin), K = the number of classes for softmax.  The
// per-example gradient in the parameters is x r^T, of Frobenius norm ||x|| ||r||; the Hessian
// is H(z) kron x x^T with H = d^2 l / dz^2.  The privacy constants, for rows with ||x|| <= R:
//   L    = lipschitz  * R      >= ||x|| sup ||r||        (lipschitz: sup ||r||)
//   beta = smoothness * R^2    >= ||x||^2 sup ||H||_2    (smoothness: sup ||H||_2)
//   rank(H) <= K - rank_deficit (1 for every margin loss; K - 1 for softmax, since H 1 = 0).
// Huber's lipschitz column is per unit of its threshold delta (sup |l'| = delta).
//
// Label conventions (the `labels` column): pm1 = y in {-1, +1} (binary classes map
// 0 -> -1, 1 -> +1, in Python's dpfast/_loss_table.py, the one place that maps); real = any
// real target (|y| <= 1 where the caller's analysis needs it); classes = an index in [0, K).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace dpf {
namespace loss {

enum class Outputs : int { one = 0, classes = 1 };  // K = 1, or K = the number of classes
enum class Labels : int { pm1 = 0, real = 1, classes = 2 };

// THE table: every loss once.  Columns: name, code (the integer the kernels take; codes are
// 0 .. count-1 in order), outputs, labels, lipschitz (sup ||dl/dz||; per unit delta when the
// next column is true), lipschitz_per_delta, smoothness (sup ||d^2 l/dz^2||_2), rank_deficit,
// convex_clip (the gradient-clipped loss l_C of Song et al. 2020 exists: it is a convex
// continuation of l, so the mechanisms' analyses hold for it with L = C; for K > 1 a clipped
// gradient is not the gradient of a convex loss).
// Derivations: logistic: |l'| = sigma(-yz) <= 1, l'' = sigma (1 - sigma) <= 1/4; squared:
// l' = z - y unbounded, l'' = 1; huber: |l'| = min(|z - y|, delta), l'' <= 1; smoothed hinge
// (Rennie & Srebro 2005): |l'| <= 1, l'' <= 1; softmax: see softmax_value_residual below.
#define DPF_LOSS_TABLE(X)                                                                          \
    X(logistic, 0, one, pm1, 1.0, false, 0.25, 0, true)                                            \
    X(squared, 1, one, real, std::numeric_limits<double>::infinity(), false, 1.0, 0, true)         \
    X(huber, 2, one, real, 1.0, true, 1.0, 0, true)                                                \
    X(smoothed_hinge, 3, one, pm1, 1.0, false, 1.0, 0, true)                                       \
    X(softmax, 4, classes, classes, 1.4142135623730951, false, 0.5, 1, false)

enum class Loss : int {
#define DPF_LOSS_ENUM(name, code, ...) name = code,
    DPF_LOSS_TABLE(DPF_LOSS_ENUM)
#undef DPF_LOSS_ENUM
};

struct Info {
    const char* name;
    int code;
    Outputs outputs;
    Labels labels;
    double lipschitz;
    bool lipschitz_per_delta;
    double smoothness;
    int rank_deficit;
    bool convex_clip;
};

constexpr Info kTable[] = {
#define DPF_LOSS_ROW(name, code, outputs, labels, lip, per_delta, smooth, deficit, cclip) \
    {#name, code, Outputs::outputs, Labels::labels, lip, per_delta, smooth, deficit, cclip},
    DPF_LOSS_TABLE(DPF_LOSS_ROW)
#undef DPF_LOSS_ROW
};
constexpr int kCount = static_cast<int>(sizeof(kTable) / sizeof(kTable[0]));

constexpr bool codes_in_order() {
    for (int i = 0; i < kCount; ++i)
        if (kTable[i].code != i) return false;
    return true;
}
static_assert(codes_in_order(), "loss codes must be 0 .. count-1 in table order");

// The table row of a code, or nullptr (the bindings validate codes with this).
inline const Info* find(int code) { return code >= 0 && code < kCount ? &kTable[code] : nullptr; }
inline const Info& info(Loss l) { return kTable[static_cast<int>(l)]; }

// ------------------------------------------------------------------ margin losses (K = 1)

struct LossParams {
    Loss loss = Loss::logistic;
    double delta = 1.0;  // Huber threshold
};

// log(1 + exp(-m)) and sigma(-m) = 1 / (1 + exp(m)) with one exp, stable for all m.
inline void logistic_m(double m, double& val, double& sneg) {
    if (m > 0) {
        const double e = std::exp(-m);
        val = std::log1p(e);
        sneg = e / (1.0 + e);
    } else {
        const double e = std::exp(m);
        val = -m + std::log1p(e);
        sneg = 1.0 / (1.0 + e);
    }
}

// Value and first derivative in the score z of the unclipped loss.
//  logistic:        log(1 + exp(-y z)),                      y in {-1, +1}
//  squared:         (z - y)^2 / 2
//  huber:           r^2/2 if |r| <= delta else delta (|r| - delta/2), r = z - y
//  smoothed_hinge:  (Rennie & Srebro 2005) with m = y z: 1/2 - m (m <= 0),
//                   (1 - m)^2 / 2 (0 < m < 1), 0 (m >= 1)
inline void value_deriv(const LossParams& p, double z, double y, double& val, double& der) {
    switch (p.loss) {
        case Loss::logistic: {
            double s;
            logistic_m(y * z, val, s);
            der = -y * s;
            return;
        }
        case Loss::squared: {
            const double r = z - y;
            val = 0.5 * r * r;
            der = r;
            return;
        }
        case Loss::huber: {
            const double r = z - y, a = std::fabs(r), dl = p.delta;
            if (a <= dl) {
                val = 0.5 * r * r;
                der = r;
            } else {
                val = dl * (a - 0.5 * dl);
                der = r > 0 ? dl : -dl;
            }
            return;
        }
        case Loss::smoothed_hinge: {
            const double m = y * z;
            if (m >= 1.0) {
                val = 0.0;
                der = 0.0;
            } else if (m <= 0.0) {
                val = 0.5 - m;
                der = -y;
            } else {
                const double u = 1.0 - m;
                val = 0.5 * u * u;
                der = -y * u;
            }
            return;
        }
        case Loss::softmax:  // K outputs: softmax_value_residual
            break;
    }
    val = der = std::numeric_limits<double>::quiet_NaN();
}

// Second derivative in z of the unclipped loss (0 at the kinks' outer side).
inline double second_deriv(const LossParams& p, double z, double y) {
    switch (p.loss) {
        case Loss::logistic: {
            double v, s;
            logistic_m(y * z, v, s);
            return s * (1.0 - s) * y * y;
        }
        case Loss::squared:
            return 1.0;
        case Loss::huber:
            return std::fabs(z - y) <= p.delta ? 1.0 : 0.0;
        case Loss::smoothed_hinge: {
            const double m = y * z;
            return (m > 0.0 && m < 1.0) ? y * y : 0.0;
        }
        case Loss::softmax:
            break;
    }
    return std::numeric_limits<double>::quiet_NaN();
}

// Gradient-clipped loss l_C (Song et al. 2020; Algorithm 1, step 1 of Redberg, Koskela & Wang
// 2024): value and derivative at z for derivative bound c > 0 (c = C / ||x||; c = +inf means
// no clipping).  Where |l'(z)| <= c, l_C = l.  Beyond the breakpoint z0 with |l'(z0)| = c,
// l_C(z) = l(z0) + l'(z0) (z - z0).  `clipped` is true when z lies in the linear part
// (l_C'' = 0 there).
inline void clipped_value_deriv(const LossParams& p, double z, double y, double c, double& val,
                                double& der, bool& clipped) {
    value_deriv(p, z, y, val, der);
    clipped = false;
    if (!(std::fabs(der) > c)) return;  // also false for c = inf
    clipped = true;
    switch (p.loss) {
        case Loss::logistic: {
            // In m = y z: dl/dm = -sigma(-m); |.| > c iff m < m0 = log((1 - c) / c) (c < 1).
            const double m = y * z, m0 = std::log1p(-c) - std::log(c);
            double v0, s0;
            logistic_m(m0, v0, s0);
            val = v0 + c * (m0 - m);
            der = -y * c;
            return;
        }
        case Loss::squared: {
            // Huber with threshold c.
            const double r = z - y, a = std::fabs(r);
            val = c * (a - 0.5 * c);
            der = r > 0 ? c : -c;
            return;
        }
        case Loss::huber: {
            // |l'| > c only where min(|r|, delta) > c: Huber with threshold c (< delta).
            const double r = z - y, a = std::fabs(r);
            val = c * (a - 0.5 * c);
            der = r > 0 ? c : -c;
            return;
        }
        case Loss::smoothed_hinge: {
            // In m: dl/dm = -min(1, max(0, 1 - m)); |.| > c (c < 1) iff m < 1 - c.
            const double m = y * z, m0 = 1.0 - c;
            val = 0.5 * c * c + c * (m0 - m);
            der = -y * c;
            return;
        }
        case Loss::softmax:
            break;
    }
}

// l_C, l_C' and l_C'' at z (l_C'' = 0 in the clipped linear part): the elementwise evaluation
// behind _glm.loss_eval.
inline void clipped_derivs(const LossParams& p, double z, double y, double c, double& val, double& d1,
                           double& d2) {
    bool clipped;
    clipped_value_deriv(p, z, y, c, val, d1, clipped);
    d2 = clipped ? 0.0 : second_deriv(p, z, y);
}

// lipschitz = sup |l'| (inf for the squared loss), smooth = sup l'', from the table.
inline void loss_constants(const LossParams& p, double& lipschitz, double& smooth) {
    const Info& e = info(p.loss);
    lipschitz = e.lipschitz_per_delta ? e.lipschitz * p.delta : e.lipschitz;
    smooth = e.smoothness;
}

// ---------------------------------------------------------------- softmax (K outputs)
//
// l(z; y) = -log softmax(z)_y = logsumexp(z) - z_y, y in {0, ..., K-1}; r = p - e_y with
// p = softmax(z); H = diag p - p p^T.
// * Lipschitz: ||r||^2 = (1 - p_y)^2 + sum_{j != y} p_j^2 <= (1 - p_y)^2 + (sum_{j != y} p_j)^2
//   = 2 (1 - p_y)^2 <= 2, so sup ||r|| <= sqrt(2).
// * Smoothness: by Gershgorin's theorem every eigenvalue of H is
//   <= max_i [H_ii + sum_{j != i} |H_ij|] = max_i 2 p_i (1 - p_i) <= 1/2 (Boehning 1992,
//   "Multinomial logistic regression algorithm", Ann. Inst. Statist. Math. 44, the same bound);
//   the eigenvalues of H kron x x^T are those of H times ||x||^2.
// * Rank: H 1 = 0, so rank H <= K - 1: not the rank-one Hessian of a GLM that the tight
//   objective-perturbation analysis of Redberg, Koskela & Wang (2024) needs (their Appendix E).
//
// Writes r (K entries; r may alias z) and returns the loss; stable for any finite z (shift by
// max z).  Arithmetic in double; for T = float the residual is rounded once, and exp is
// evaluated twice rather than stored in T (the same double values either way).
template <class T>
inline double softmax_value_residual(const T* z, int64_t K, int64_t y, T* r) {
    double m = static_cast<double>(z[0]);
    for (int64_t k = 1; k < K; ++k) m = std::max(m, static_cast<double>(z[k]));
    const double zy = static_cast<double>(z[y]);
    double s = 0.0;
    if constexpr (std::is_same_v<T, double>) {
        for (int64_t k = 0; k < K; ++k) {
            r[k] = std::exp(z[k] - m);
            s += r[k];
        }
        const double inv = 1.0 / s;
        for (int64_t k = 0; k < K; ++k) r[k] *= inv;
    } else {
        for (int64_t k = 0; k < K; ++k) s += std::exp(static_cast<double>(z[k]) - m);
        const double inv = 1.0 / s;
        for (int64_t k = 0; k < K; ++k) r[k] = static_cast<T>(std::exp(static_cast<double>(z[k]) - m) * inv);
    }
    r[y] -= T(1);
    return (m + std::log(s)) - zy;
}

}  // namespace loss
}  // namespace dpf
