// Per-example gradient clipping without per-example gradients (spec mechanisms.md, DP-SGD).
//
// * GLMs (linear scores z_i = W^T x_i + b, K outputs): the per-example gradient is the outer
//   product x_i g_i^T with g_i = dloss/dz_i, so its Frobenius norm is ||g_i|| ||x_i|| (with a bias
//   row: ||g_i|| sqrt(||x_i||^2 + 1)).  Clip factors and the clipped sum X^T diag(c) G come from
//   one pass over the batch plus two matrix products.
// * The two-layer MLP dense -> activation -> dense -> softmax cross-entropy: the same identity per
//   dense layer ("ghost norms", Goodfellow 2015; Li et al. 2022), flat or per-layer clipping, and
//   each layer's clipped sum as one weighted matrix product A^T diag(c) G.
// * Poisson subsampling by geometric skips and fixed-size sampling (Floyd), both O(batch).
//
// Nothing here allocates a B x P array.  Matrix products go through a Fortran BLAS ?gemm whose
// pointer the caller provides (the bindings take SciPy's, scipy.linalg.cython_blas).
// No Python headers here; callers validate shapes and ranges.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "random/bitstream.hpp"
#include "random/uniform.hpp"

namespace dpf {
namespace clip {

template <class T>
using gemm_t = void (*)(char*, char*, int*, int*, int*, T*, T*, int*, T*, int*, T*, T*, int*);

// Row-major C (M x N) = alpha op(A) op(B) + beta C, through a column-major BLAS.
template <class T>
inline void gemm_rm(gemm_t<T> f, bool ta, bool tb, int M, int N, int K, T alpha, const T* A,
                    int lda, const T* B, int ldb, T beta, T* C, int ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) C[(int64_t)i * ldc + j] = beta == T(0) ? T(0) : beta * C[(int64_t)i * ldc + j];
        return;
    }
    char cta = ta ? 'T' : 'N', ctb = tb ? 'T' : 'N';
    f(&ctb, &cta, &N, &M, &K, &alpha, const_cast<T*>(B), &ldb, const_cast<T*>(A), &lda, &beta, C,
      &ldc);
}

// ---------------------------------------------------------------------------------- sampling

// Poisson subsampling of {0..n-1} at rate q: the gaps between selected indices are geometric,
// G = floor(log U / log(1-q)) with U uniform on (0,1), P(G >= k) = (1-q)^k.  O(expected batch).
// U has full relative precision (uniform_all_doubles), so P(G >= k) = (1-q)^k holds to a relative
// error ~ (k |log(1-q)| + 1) 2^-51 at every k (rounding of log and of the division) and each
// example is included with probability q up to that relative error.  With the 53-bit grid
// U = j 2^-53 used before, the tails were off by up to 2^-53 in absolute terms, i.e. a
// relative error ~1e-16 / (1-q)^k that reaches 100% near (1-q)^k = 2^-53 (per-gap total
// variation ~6e-16 / q, e.g. 1.5e-13 at q = 256/60000, measured exactly).
inline void poisson_sample(int64_t n, double q, BitStream& rs, std::vector<int64_t>& out) {
    out.clear();
    if (n <= 0 || !(q > 0)) return;
    if (q >= 1) {
        out.resize(n);
        for (int64_t i = 0; i < n; ++i) out[i] = i;
        return;
    }
    const double log1mq = std::log1p(-q);
    int64_t pos = -1;
    for (;;) {
        // >= 0; +inf when U == 0 (log(0) = -inf), which ends the sample
        const double g = std::floor(std::log(uniform_all_doubles(rs)) / log1mq);
        if (!(g < static_cast<double>(n - 1 - pos))) break;                // next index >= n
        pos += 1 + static_cast<int64_t>(g);
        out.push_back(pos);
    }
}

// Uniform subset of size m of {0..n-1} (Floyd's algorithm), sorted.  `mark` has n zero bytes on
// entry and on exit.  O(m log m).
inline void fixed_sample(int64_t n, int64_t m, BitStream& rs, uint8_t* mark,
                         std::vector<int64_t>& out) {
    out.clear();
    for (int64_t j = n - m; j < n; ++j) {
        int64_t t = static_cast<int64_t>(rs.bounded(static_cast<uint64_t>(j + 1)));
        if (mark[t]) t = j;
        mark[t] = 1;
        out.push_back(t);
    }
    for (int64_t i : out) mark[i] = 0;
    std::sort(out.begin(), out.end());
}

// ---------------------------------------------------------------------------- shared pieces

// Sum of squares in double with 8 independent accumulators (no dependency chain; the
// compiler may vectorize without -ffast-math since the order is fixed by the source).
template <class T>
inline double row_sq(const T* a, int64_t len) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 8 <= len; j += 8)
        for (int u = 0; u < 8; ++u) s[u] += static_cast<double>(a[j + u]) * a[j + u];
    for (; j < len; ++j) s[0] += static_cast<double>(a[j]) * a[j];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// Dot product in double with 4 independent accumulators.
template <class T>
inline double dot(const T* a, const T* b, int64_t len) {
    double s[4] = {0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 4 <= len; j += 4)
        for (int u = 0; u < 4; ++u) s[u] += static_cast<double>(a[j + u]) * b[j + u];
    for (; j < len; ++j) s[0] += static_cast<double>(a[j]) * b[j];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

template <class T>
struct Workspace {
    std::vector<T> xb, h, z, g1;
    std::vector<double> xn2, c1, c2;
};

// Gather rows idx of X (row stride ldx) into xb (B x d), squared norms into xn2.
template <class T>
inline void gather_rows(const T* X, int64_t ldx, int64_t d, const int64_t* idx, int64_t B,
                        std::vector<T>& xb, std::vector<double>& xn2) {
    xb.resize(static_cast<size_t>(B * d));
    xn2.resize(static_cast<size_t>(B));
    for (int64_t i = 0; i < B; ++i) {
        const T* src = X + idx[i] * ldx;
        T* dst = xb.data() + i * d;
        std::memcpy(dst, src, sizeof(T) * static_cast<size_t>(d));
        xn2[i] = row_sq(dst, d);
    }
}

inline double clip_factor(double norm, double C) {
    // C <= 0 or infinite: no clipping.  norm == 0: factor 1 (nothing to clip).
    if (!(C > 0) || std::isinf(C) || !(norm > C)) return 1.0;
    return C / norm;
}

// Softmax cross-entropy on one row z (length K), label y: z <- p - e_y; returns the loss.
template <class T>
inline double softmax_grad_row(T* z, int K, int64_t y) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int k = 0; k < K; ++k) mx = std::max(mx, static_cast<double>(z[k]));
    double s = 0;
    for (int k = 0; k < K; ++k) s += std::exp(static_cast<double>(z[k]) - mx);
    const double lse = mx + std::log(s);
    const double loss = lse - static_cast<double>(z[y]);
    for (int k = 0; k < K; ++k) z[k] = static_cast<T>(std::exp(static_cast<double>(z[k]) - lse));
    z[y] -= T(1);
    return loss;
}


template <class T>
inline void colsum(const T* G, int64_t B, int64_t K, T* out) {
    for (int64_t k = 0; k < K; ++k) out[k] = T(0);
    for (int64_t i = 0; i < B; ++i)
        for (int64_t k = 0; k < K; ++k) out[k] += G[i * K + k];
}

struct StepStats {
    double loss_sum = 0;
    int64_t n_clipped = 0;
};

// -------------------------------------------------------------------------------------- GLM

enum GlmLoss : int { LOGISTIC = 0, SQUARED = 1, SOFTMAX = 2 };

// Clipped sum of per-example gradients of a GLM with K outputs over the rows idx of X.
// Parameters: W (d x K row-major), b (K, or nullptr without intercept).  Targets: yr (real,
// logistic labels in {0,1}) or yl (class labels in [0,K), softmax).  Outputs: gW (d x K), gb (K,
// when b), optional norms (B, unclipped per-example gradient norms) and factors (B).
template <class T>
StepStats glm_clipped_sum(gemm_t<T> gemm, Workspace<T>& ws, const T* X, int64_t ldx, int64_t d,
                          const T* yr, const int64_t* yl, const int64_t* idx, int64_t B,
                          const T* W, const T* b, int K, int loss, double C, T* gW, T* gb,
                          double* norms, double* factors) {
    StepStats st;
    if (B == 0) {
        std::fill(gW, gW + d * K, T(0));
        if (gb) std::fill(gb, gb + K, T(0));
        return st;
    }
    gather_rows(X, ldx, d, idx, B, ws.xb, ws.xn2);
    ws.z.resize(static_cast<size_t>(B * K));
    T* Z = ws.z.data();
    // K == 1 (binary logistic, squared loss): dot products by hand -- a BLAS call with one
    // output column costs more in overhead than the arithmetic.
    if (K == 1) {
        for (int64_t i = 0; i < B; ++i) Z[i] = static_cast<T>(dot(ws.xb.data() + i * d, W, d));
    } else {
        gemm_rm<T>(gemm, false, false, (int)B, K, (int)d, T(1), ws.xb.data(), (int)d, W, K, T(0), Z, K);
    }
    const double bias_term = b ? 1.0 : 0.0;
    for (int64_t i = 0; i < B; ++i) {
        T* zi = Z + i * K;
        if (b)
            for (int k = 0; k < K; ++k) zi[k] += b[k];
        double gn2, g1 = 0.0;  // g1: the K == 1 output gradient, in double
        if (loss == SOFTMAX) {
            st.loss_sum += softmax_grad_row(zi, K, yl[idx[i]]);
            gn2 = row_sq(zi, K);
        } else if (loss == LOGISTIC) {
            const double zz = zi[0], y = yr[idx[i]];
            // log(1 + e^z) - y z, and sigmoid(z) - y, both stable.
            const double sp = zz > 0 ? zz + std::log1p(std::exp(-zz)) : std::log1p(std::exp(zz));
            st.loss_sum += sp - y * zz;
            const double p = zz >= 0 ? 1.0 / (1.0 + std::exp(-zz)) : std::exp(zz) / (1.0 + std::exp(zz));
            g1 = p - y;
            zi[0] = static_cast<T>(g1);
            gn2 = g1 * g1;
        } else {  // SQUARED: 0.5 (z - y)^2
            g1 = static_cast<double>(zi[0]) - yr[idx[i]];
            st.loss_sum += 0.5 * g1 * g1;
            zi[0] = static_cast<T>(g1);
            gn2 = g1 * g1;
        }
        const double nrm = std::sqrt(gn2 * (ws.xn2[i] + bias_term));
        // A norm that overflowed (or is NaN from an overflowed score) cannot be clipped by
        // scaling (inf * 0 = NaN would poison the whole sum): the example contributes 0, which
        // keeps the sensitivity bound.  K == 1: scale the double g1, not its float rounding
        // (which may be inf in float32).
        const double c = std::isfinite(nrm) ? clip_factor(nrm, C) : 0.0;
        if (c < 1.0) {
            ++st.n_clipped;
            if (c == 0.0)
                for (int k = 0; k < K; ++k) zi[k] = T(0);
            else if (loss != SOFTMAX)
                zi[0] = static_cast<T>(g1 * c);
            else
                for (int k = 0; k < K; ++k) zi[k] = static_cast<T>(zi[k] * c);
        }
        if (norms) norms[i] = nrm;
        if (factors) factors[i] = c;
    }
    if (K == 1) {
        std::fill(gW, gW + d, T(0));
        for (int64_t i = 0; i < B; ++i) {
            const T gi = Z[i];
            if (gi == T(0)) continue;
            const T* xi = ws.xb.data() + i * d;
            for (int64_t j = 0; j < d; ++j) gW[j] += gi * xi[j];
        }
    } else {
        gemm_rm<T>(gemm, true, false, (int)d, K, (int)B, T(1), ws.xb.data(), (int)d, Z, K, T(0), gW, K);
    }
    if (gb) colsum(Z, B, K, gb);
    return st;
}

// -------------------------------------------------------------------------------------- MLP

enum Activation : int { RELU = 0, TANH = 1 };

// Two-layer MLP: H = act(X W1 + b1), Z = H W2 + b2, softmax cross-entropy.  Parameters in one
// flat array [W1 (d x h), b1 (h), W2 (h x K), b2 (K)], gradient in the same layout.
// mode 0: flat clipping (||grad_i|| over all layers <= C); mode 1: per-layer, C/sqrt(2) each.
// norms (B x 2, optional): the unclipped per-example gradient norms of layer 1 and layer 2;
// factors (B x 2, optional): the clip factors applied to layer 1 and layer 2.
template <class T>
StepStats mlp_clipped_sum(gemm_t<T> gemm, Workspace<T>& ws, const T* X, int64_t ldx, int64_t d,
                          const int64_t* yl, const int64_t* idx, int64_t B, int h, int K, int act,
                          const T* params, double C, int mode, T* grad, double* norms,
                          double* factors) {
    StepStats st;
    const T* W1 = params;
    const T* b1 = W1 + d * h;
    const T* W2 = b1 + h;
    const T* b2 = W2 + (int64_t)h * K;
    T* gW1 = grad;
    T* gb1 = gW1 + d * h;
    T* gW2 = gb1 + h;
    T* gb2 = gW2 + (int64_t)h * K;
    const int64_t P = d * h + h + (int64_t)h * K + K;
    if (B == 0) {
        std::fill(grad, grad + P, T(0));
        return st;
    }
    gather_rows(X, ldx, d, idx, B, ws.xb, ws.xn2);
    ws.h.resize(static_cast<size_t>(B * h));
    ws.z.resize(static_cast<size_t>(B * K));
    ws.g1.resize(static_cast<size_t>(B * h));
    ws.c1.resize(static_cast<size_t>(B));
    ws.c2.resize(static_cast<size_t>(B));
    T* H = ws.h.data();
    T* Z = ws.z.data();
    T* G1 = ws.g1.data();
    // Forward.
    gemm_rm<T>(gemm, false, false, (int)B, h, (int)d, T(1), ws.xb.data(), (int)d, W1, h, T(0), H, h);
    for (int64_t i = 0; i < B; ++i) {
        T* hi = H + i * h;
        if (act == RELU) {
            for (int j = 0; j < h; ++j) {
                const T v = hi[j] + b1[j];
                hi[j] = v > T(0) ? v : T(0);
            }
        } else {
            for (int j = 0; j < h; ++j) hi[j] = static_cast<T>(std::tanh(hi[j] + b1[j]));
        }
    }
    gemm_rm<T>(gemm, false, false, (int)B, K, h, T(1), H, h, W2, K, T(0), Z, K);
    // Output-layer gradients and their ghost norms: ||g2_i||^2 (||h_i||^2 + 1).
    for (int64_t i = 0; i < B; ++i) {
        T* zi = Z + i * K;
        for (int k = 0; k < K; ++k) zi[k] += b2[k];
        st.loss_sum += softmax_grad_row(zi, K, yl[idx[i]]);
        ws.c2[i] = row_sq(zi, K) * (row_sq(H + i * h, h) + 1.0);  // squared norm, for now
    }
    // Back-propagate the unclipped output gradient: G1 = (G2 W2^T) * act'(pre).
    gemm_rm<T>(gemm, false, true, (int)B, h, K, T(1), Z, K, W2, K, T(0), G1, h);
    for (int64_t i = 0; i < B; ++i) {
        T* gi = G1 + i * h;
        const T* hi = H + i * h;
        if (act == RELU) {
            for (int j = 0; j < h; ++j)
                if (!(hi[j] > T(0))) gi[j] = T(0);
        } else {
            for (int j = 0; j < h; ++j) gi[j] *= T(1) - hi[j] * hi[j];
        }
        ws.c1[i] = row_sq(gi, h) * (ws.xn2[i] + 1.0);
    }
    // Clip factors.
    const double Cl = mode == 1 ? C / std::sqrt(2.0) : C;
    for (int64_t i = 0; i < B; ++i) {
        const double n1 = std::sqrt(ws.c1[i]), n2 = std::sqrt(ws.c2[i]);
        if (norms) {
            norms[2 * i] = n1;
            norms[2 * i + 1] = n2;
        }
        double f1, f2;
        if (!(std::isfinite(n1) && std::isfinite(n2))) {
            // Overflow (or NaN from an overflowed activation): the example contributes 0 to
            // both layers (scaling would give inf * 0 = NaN); its H row is zeroed too, since
            // the layer-2 product H^T Z would otherwise meet inf * 0.
            f1 = f2 = 0.0;
            std::fill(H + i * h, H + (i + 1) * h, T(0));
        } else if (mode == 1) {
            f1 = clip_factor(n1, Cl);
            f2 = clip_factor(n2, Cl);
        } else {
            f1 = f2 = clip_factor(std::sqrt(ws.c1[i] + ws.c2[i]), C);
        }
        if (f1 < 1.0 || f2 < 1.0) ++st.n_clipped;
        ws.c1[i] = f1;
        ws.c2[i] = f2;
        if (factors) {
            factors[2 * i] = f1;
            factors[2 * i + 1] = f2;
        }
        if (f1 < 1.0) {
            T* gi = G1 + i * h;
            for (int j = 0; j < h; ++j) gi[j] = f1 == 0.0 ? T(0) : static_cast<T>(gi[j] * f1);
        }
        if (f2 < 1.0) {
            T* zi = Z + i * K;
            for (int k = 0; k < K; ++k) zi[k] = f2 == 0.0 ? T(0) : static_cast<T>(zi[k] * f2);
        }
    }
    // Clipped sums: one weighted matrix product per layer.
    gemm_rm<T>(gemm, true, false, (int)d, h, (int)B, T(1), ws.xb.data(), (int)d, G1, h, T(0), gW1, h);
    colsum(G1, B, h, gb1);
    gemm_rm<T>(gemm, true, false, h, K, (int)B, T(1), H, h, Z, K, T(0), gW2, K);
    colsum(Z, B, K, gb2);
    return st;
}

// Forward pass only (scores), for predict: out (n x K).
template <class T>
void mlp_forward(gemm_t<T> gemm, const T* X, int64_t ldx, int64_t n, int64_t d, int h, int K,
                 int act, const T* params, T* out, std::vector<T>& Hbuf) {
    const T* W1 = params;
    const T* b1 = W1 + d * h;
    const T* W2 = b1 + h;
    const T* b2 = W2 + (int64_t)h * K;
    const int64_t chunk = 4096;
    Hbuf.resize(static_cast<size_t>(std::min(n, chunk) * h));
    for (int64_t s = 0; s < n; s += chunk) {
        const int64_t m = std::min(chunk, n - s);
        T* H = Hbuf.data();
        gemm_rm<T>(gemm, false, false, (int)m, h, (int)d, T(1), X + s * ldx, (int)ldx, W1, h, T(0), H, h);
        for (int64_t i = 0; i < m; ++i)
            for (int j = 0; j < h; ++j) {
                const T v = H[i * h + j] + b1[j];
                H[i * h + j] = act == RELU ? (v > T(0) ? v : T(0)) : static_cast<T>(std::tanh(v));
            }
        T* Zs = out + s * K;
        gemm_rm<T>(gemm, false, false, (int)m, K, h, T(1), H, h, W2, K, T(0), Zs, K);
        for (int64_t i = 0; i < m; ++i)
            for (int k = 0; k < K; ++k) Zs[i * K + k] += b2[k];
    }
}

// ------------------------------------------------------------- user-supplied gradients

// Rows of G (B x P): norms (B), factors (B); sum_i c_i G_i into out (P) when out != nullptr,
// the clipped rows written to clipped (B x P) when clipped != nullptr.
template <class T>
int64_t clip_rows(const T* G, int64_t B, int64_t P, double C, double* norms, double* factors,
                  T* out, T* clipped) {
    int64_t nclip = 0;
    if (out) std::fill(out, out + P, T(0));
    for (int64_t i = 0; i < B; ++i) {
        const T* gi = G + i * P;
        const double nrm = std::sqrt(row_sq(gi, P));
        const double c = clip_factor(nrm, C);
        nclip += c < 1.0;
        if (norms) norms[i] = nrm;
        if (factors) factors[i] = c;
        if (out) {
            const T cf = static_cast<T>(c);
            if (c < 1.0)
                for (int64_t j = 0; j < P; ++j) out[j] += cf * gi[j];
            else
                for (int64_t j = 0; j < P; ++j) out[j] += gi[j];
        }
        if (clipped) {
            T* ci = clipped + i * P;
            if (c < 1.0)
                for (int64_t j = 0; j < P; ++j) ci[j] = static_cast<T>(gi[j] * c);
            else
                std::memcpy(ci, gi, sizeof(T) * static_cast<size_t>(P));
        }
    }
    return nclip;
}

// ------------------------------------------------------------------------- Gaussian noise

// Standard normal variates by the ziggurat method (Marsaglia & Tsang 2000, "The ziggurat
// method for generating random variables", 128 layers), with the layer index, the sign and
// the abscissa taken from disjoint bits of one 64-bit word (avoiding the correlation noted by
// Leong, Zhang, Lee, Luk & Villasenor 2005): bits 0-6 the layer, bits 11-63 a signed 53-bit
// abscissa (sign and 52-bit magnitude, the resolution of NumPy's ziggurat).  Exact up to
// floating-point rounding; the tail beyond r is sampled by Marsaglia's exponential rejection.
// The continuous Gaussian: not floating-point safe (see dpfast.random).
//
// Why 52 bits: with the original 32-bit abscissa every accepted value lies on one of 128
// lattices of spacing x_i / 2^31 (about 1e-9), far coarser than a double's resolution, so a
// released iterate theta - lr (sum + sd x) / b determines which candidate clipped sum was used
// (the noise implied by the wrong one is off every lattice): a one-step DP-GD release was
// perfectly distinguishable between neighbouring datasets (regression test in
// tests/test_sgd_clip.py).  With 52 bits the lattice spacing is within a few ulps of |x|'s own
// resolution, the level of NumPy's Generator.standard_normal.
struct Ziggurat {
    uint64_t kn[128];  // fast acceptance thresholds on |abscissa| (52-bit scale)
    double wn[128], fn[128];
    static constexpr double R = 3.442619855899;
    Ziggurat() {
        const double m1 = 0x1.0p52, vn = 9.91256303526217e-3;
        double dn = R, tn = dn;
        const double q = vn / std::exp(-0.5 * dn * dn);
        kn[0] = static_cast<uint64_t>((dn / q) * m1);
        kn[1] = 0;
        wn[0] = q / m1;
        wn[127] = dn / m1;
        fn[0] = 1.0;
        fn[127] = std::exp(-0.5 * dn * dn);
        for (int i = 126; i >= 1; --i) {
            dn = std::sqrt(-2.0 * std::log(vn / dn + std::exp(-0.5 * dn * dn)));
            kn[i + 1] = static_cast<uint64_t>((dn / tn) * m1);
            tn = dn;
            fn[i] = std::exp(-0.5 * dn * dn);
            wn[i] = dn / m1;
        }
    }
    static const Ziggurat& get() {
        static const Ziggurat z;
        return z;
    }
    double sample(BitStream& rs) const {
        for (;;) {
            const uint64_t w = rs.u64();
            const int iz = static_cast<int>(w & 127u);
            // signed 53-bit abscissa from bits 11-63 (arithmetic shift), disjoint from bits 0-6
            const int64_t hz = static_cast<int64_t>(w) >> 11;
            const double x = static_cast<double>(hz) * wn[iz];
            if (static_cast<uint64_t>(hz < 0 ? -hz : hz) < kn[iz]) return x;
            if (iz == 0) {  // tail |x| > R
                double xt, y;
                do {
                    xt = -std::log(rs.uniform_pos()) / R;
                    y = -std::log(rs.uniform_pos());
                } while (y + y < xt * xt);
                return hz > 0 ? R + xt : -R - xt;
            }
            if (fn[iz] + rs.uniform() * (fn[iz - 1] - fn[iz]) < std::exp(-0.5 * x * x)) return x;
        }
    }
};

template <class T>
void fill_normal(T* out, int64_t n, BitStream& rs) {
    const Ziggurat& z = Ziggurat::get();
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(z.sample(rs));
}

// ---------------------------------------------------------------------------- optimizers

enum Optimizer : int { SGD = 0, MOMENTUM = 1, ADAM = 2 };

// g = (sum + noise_std * noise) * inv_batch + weight_decay * theta (weight decay on the first
// decay_end entries only), then one optimizer update.  noise may be nullptr (noise_std
// ignored).  t is the 1-based step (Adam bias correction).  Arithmetic in T with one loop
// per optimizer and no branches inside, so that the compiler vectorizes it.
template <class T>
void optimizer_step(T* theta, const T* gsum, const T* noise, int64_t P, double noise_std,
                    double inv_batch, double weight_decay, int64_t decay_end, int opt, double lr,
                    double mom, double beta2, double adam_eps, int64_t t, T* m, T* v) {
    const T sd = static_cast<T>(noise ? noise_std : 0.0);
    const T ib = static_cast<T>(inv_batch);
    const T lrT = static_cast<T>(lr);
    const T b1 = static_cast<T>(mom), b2 = static_cast<T>(beta2), e = static_cast<T>(adam_eps);
    const double bc1 = 1.0 - std::pow(mom, (double)t), bc2 = 1.0 - std::pow(beta2, (double)t);
    const T step = static_cast<T>(opt == ADAM ? lr / bc1 : lr);
    const T isb = static_cast<T>(opt == ADAM ? 1.0 / std::sqrt(bc2) : 1.0);
    decay_end = std::max<int64_t>(0, std::min(decay_end, P));
    for (int pass = 0; pass < 2; ++pass) {
        // pass 0: entries with weight decay, pass 1: the rest.
        const int64_t lo = pass == 0 ? 0 : decay_end, hi = pass == 0 ? decay_end : P;
        const T wd = pass == 0 ? static_cast<T>(weight_decay) : T(0);
        T* th = theta;
        const T* gs = gsum;
        if (opt == SGD) {
            if (noise) {
                for (int64_t j = lo; j < hi; ++j) th[j] -= lrT * ((gs[j] + sd * noise[j]) * ib + wd * th[j]);
            } else {
                for (int64_t j = lo; j < hi; ++j) th[j] -= lrT * (gs[j] * ib + wd * th[j]);
            }
        } else if (opt == MOMENTUM) {
            for (int64_t j = lo; j < hi; ++j) {
                const T g = (gs[j] + (noise ? sd * noise[j] : T(0))) * ib + wd * th[j];
                m[j] = b1 * m[j] + g;
                th[j] -= lrT * m[j];
            }
        } else {
            const T a1 = T(1) - b1, a2 = T(1) - b2;
            for (int64_t j = lo; j < hi; ++j) {
                const T g = (gs[j] + (noise ? sd * noise[j] : T(0))) * ib + wd * th[j];
                m[j] = b1 * m[j] + a1 * g;
                v[j] = b2 * v[j] + a2 * g * g;
                th[j] -= step * m[j] / (std::sqrt(v[j]) * isb + e);
            }
        }
    }
}

}  // namespace clip
}  // namespace dpf
