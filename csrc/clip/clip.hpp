// Per-example gradient clipping without per-example gradients (docs/theory/erm.rst, "DP-SGD").
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
#include <type_traits>
#include <vector>

#include "losses/losses.hpp"
#include "parallel.hpp"
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

// The same product computed in fixed row blocks of C, the blocks spread over `nthreads`
// threads (the BLAS itself must run single-threaded: the caller limits it).  Why: a BLAS's
// result depends on its own thread count (OpenBLAS blocks the inner dimension differently in
// its threaded driver; a DPMLPClassifier fit differed by 1e-8 in float32 between 1 and 2
// threads), whereas here the block boundaries depend only on (M, N, K), each block is one
// single-threaded BLAS call, and so every entry of C is bit-identical for any nthreads.
constexpr int kGemmRowBlock = 128;
constexpr int64_t kGemmMinWork = int64_t(1) << 21;  // M N K below this: one call, one thread

template <class T>
inline void gemm_rm_fixed(gemm_t<T> f, int nthreads, bool ta, bool tb, int M, int N, int K, T alpha,
                          const T* A, int lda, const T* B, int ldb, T beta, T* C, int ldc) {
    const int64_t work = (int64_t)M * N * K;
    if (M <= kGemmRowBlock || work < kGemmMinWork) {
        gemm_rm<T>(f, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    const int nb = (M + kGemmRowBlock - 1) / kGemmRowBlock;
    // Rows r0..r0+m of C use rows r0.. of op(A): A itself (row r of A at A + r lda) when not
    // transposed, columns r0.. of A (A + r0) when transposed.
    auto run = [&](int blk) {
        const int r0 = blk * kGemmRowBlock, m = std::min(kGemmRowBlock, M - r0);
        const T* Ab = ta ? A + r0 : A + (int64_t)r0 * lda;
        gemm_rm<T>(f, ta, tb, m, N, K, alpha, Ab, lda, B, ldb, beta, C + (int64_t)r0 * ldc, ldc);
    };
    run_chunks(nb, nthreads, run);  // csrc/parallel.hpp: blocks claimed from a shared counter
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
    // room for the expected size plus 10 standard deviations: almost never a reallocation
    out.reserve(static_cast<size_t>(std::min<double>(n, n * q + 10 * std::sqrt(n * q + 1) + 16)));
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
    out.reserve(static_cast<size_t>(m));
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
    std::vector<double> xn2, c1, c2, hn2;
    int nthreads = 1;  // threads for the fixed-block matrix products (gemm_rm_fixed)
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

// ------------------------------------------------------- clipping that is safe after rounding
//
// The sensitivity of a clipped sum is max_i ||clipped g_i|| in exact arithmetic, over the
// values actually stored.  The naive factor C / ||g|| misses it in three ways: ||g|| is a
// rounded sum of squares; the factor and the products c g_j round (up, possibly); and a scaled
// entry that lands in T's subnormal range has an absolute error up to half the smallest
// subnormal eta_T, which is a large relative error (float32: 1.0067 x C was observed for a row
// of 1e5 entries 3.07e38 clipped to 0.01).  Below, every bound is an upper bound that holds
// for every input; constants are generous (about 2x) so that the rounding of the bounds
// themselves is covered.
//
// (a) Norm bound.  row_sq sums m = len terms into 8 accumulators of <= len/8 + 1 terms each,
//     then 3 pairwise levels, all in double (u = 2^-53); float squares are exact in double,
//     double squares round once.  For non-negative terms the computed S satisfies
//     |S - S_exact| <= gamma_k S_exact, k = len/8 + 5 (Higham, "Accuracy and Stability of
//     Numerical Algorithms", 2nd ed., Sec. 4.2), so sqrt(S_exact) <= sqrt(S) (1 + rho) with
//     rho = (len/8 + 16) 2^-52 (which also covers sqrt's rounding).  A double square can
//     underflow (absolute error <= 2^-1074 per term): + sqrt(len) 2^-537 on the norm, which
//     covers it; float32 squares never underflow in double.  An overflowed S is +inf and the
//     caller treats it as such.
// (b) Factor.  For an example whose gradient is u_i (x) a_i (stored u_i, exact a_i; one
//     factor c scales u_i, each entry rounded to T), the stored clipped gradient has
//       ||round_T(c u)|| ||a|| <= [c ||u|| (1 + u_d)(1 + u_T) + sqrt(len_u) eta_T / 2] ||a||
//     (round to nearest: relative u_T in the normal range, absolute eta_T / 2 below it).  With
//     ub >= ||u|| ||a|| from (a), the factor c = t / ub, rounded (1 + u_d), and the target
//       t = C (1 - 8 u_T) - 2 sqrt(len_u) eta_T A,   A >= ||a||,
//     give ||clipped|| <= t (1 + 4 u_T) + sqrt(len_u) eta_T A / 2 <= C.  If t <= 0 the
//     example contributes 0.  Rows with ub <= C are left untouched (their exact norm is
//     <= ub <= C); rows with ub > C are scaled by c < 1 (so a row within a few ulps of C may
//     be scaled by 1 - O(len 2^-53) although its computed norm is <= C).
template <class T>
struct Rounding {
    static constexpr double u = std::numeric_limits<T>::epsilon() / 2;      // unit roundoff
    static constexpr double eta = std::numeric_limits<T>::denorm_min();     // smallest subnormal
    static constexpr bool sq_underflows = std::is_same<T, double>::value;  // squares in double
};

// Upper bound on the exact l2 norm of a length-`len` vector of T whose row_sq gave sq.
template <class T>
inline double norm_upper(double sq, int64_t len) {
    const double rho = (static_cast<double>(len) / 8.0 + 16.0) * 0x1p-52;
    double ub = std::sqrt(sq) * (1.0 + rho);
    if (Rounding<T>::sq_underflows) ub += std::sqrt(static_cast<double>(len)) * 0x1p-537;
    return ub;
}

// The target t of (b): C (1 - 8 u_T) minus the subnormal slack, for len_u scaled entries
// multiplied by factors of norm at most A.  May be <= 0 (then the example is dropped).
template <class T>
inline double clip_target(double C, double sub_slack) {
    return C * (1.0 - 8.0 * Rounding<T>::u) - sub_slack;
}
template <class T>
inline double subnormal_slack(int64_t len_u, double A) {
    return 2.0 * std::sqrt(static_cast<double>(len_u)) * Rounding<T>::eta * A;
}

// Safe factor for an example with norm upper bound ub and target t: 1 when no clipping is
// needed (C <= 0 or infinite means no clipping), 0 when the bound is not finite or t <= 0.
inline double safe_factor(double ub, double C, double t) {
    if (!(C > 0) || std::isinf(C)) return 1.0;
    if (!std::isfinite(ub)) return 0.0;
    if (!(ub > C)) return 1.0;
    return t > 0 ? t / ub : 0.0;
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

// Clipped sum of per-example gradients of a GLM with K outputs over the rows idx of X, for any
// loss of csrc/losses/losses.hpp (`lp`; the caller checks that K == 1 for a margin loss).
// Parameters: W (d x K row-major), b (K, or nullptr without intercept).  Targets: yr (margin
// losses, in the loss's label convention: {-1, +1} for logistic) or yl (class labels in [0,K),
// softmax).  Outputs: gW (d x K), gb (K, when b), optional norms (B, unclipped per-example
// gradient norms) and factors (B).
template <class T>
StepStats glm_clipped_sum(gemm_t<T> gemm, Workspace<T>& ws, const T* X, int64_t ldx, int64_t d,
                          const T* yr, const int64_t* yl, const int64_t* idx, int64_t B,
                          const T* W, const T* b, int K, const dpf::loss::LossParams& lp, double C, T* gW, T* gb,
                          double* norms, double* factors) {
    StepStats st;
    const bool multi = dpf::loss::info(lp.loss).outputs == dpf::loss::Outputs::classes;
    if (B == 0) {
        std::fill(gW, gW + d * K, T(0));
        if (gb) std::fill(gb, gb + K, T(0));
        return st;
    }
    gather_rows(X, ldx, d, idx, B, ws.xb, ws.xn2);
    ws.z.resize(static_cast<size_t>(B * K));
    T* Z = ws.z.data();
    // K == 1 (margin losses): dot products by hand -- a BLAS call with one
    // output column costs more in overhead than the arithmetic.
    if (K == 1) {
        for (int64_t i = 0; i < B; ++i) Z[i] = static_cast<T>(dot(ws.xb.data() + i * d, W, d));
    } else {
        gemm_rm_fixed<T>(gemm, ws.nthreads, false, false, (int)B, K, (int)d, T(1), ws.xb.data(), (int)d, W, K, T(0), Z, K);
    }
    const double bias_term = b ? 1.0 : 0.0;
    for (int64_t i = 0; i < B; ++i) {
        T* zi = Z + i * K;
        if (b)
            for (int k = 0; k < K; ++k) zi[k] += b[k];
        double gn2, g1 = 0.0;  // g1: the K == 1 output gradient, in double
        if (multi) {
            st.loss_sum += dpf::loss::softmax_value_residual<T>(zi, K, yl[idx[i]], zi);
            gn2 = row_sq(zi, K);
        } else {
            double v;
            dpf::loss::value_deriv(lp, static_cast<double>(zi[0]), static_cast<double>(yr[idx[i]]), v, g1);
            st.loss_sum += v;
            zi[0] = static_cast<T>(g1);
            gn2 = g1 * g1;
        }
        const double nrm = std::sqrt(gn2 * (ws.xn2[i] + bias_term));
        // Safe factor (see "clipping that is safe after rounding"): the example's gradient is
        // u (x) (x_i, 1) with u = the output gradient (K == 1: the double g1, exact).  A norm
        // bound that overflowed (or is NaN from an overflowed score) cannot be clipped by
        // scaling (inf * 0 = NaN would poison the whole sum): the example contributes 0, which
        // keeps the sensitivity bound.  K == 1: scale the double g1, not its float rounding
        // (which may be inf in float32).
        const double A = norm_upper<T>(ws.xn2[i] + bias_term, d + 1);
        const double ub_u = !multi ? std::fabs(g1) : norm_upper<T>(gn2, K);
        const double ub = ub_u * A * (1.0 + 0x1p-51);
        const double c = safe_factor(ub, C, clip_target<T>(C, subnormal_slack<T>(K, A)));
        if (c < 1.0) {
            ++st.n_clipped;
            if (c == 0.0)
                for (int k = 0; k < K; ++k) zi[k] = T(0);
            else if (!multi)
                zi[0] = static_cast<T>(g1 * c);
            else
                for (int k = 0; k < K; ++k) zi[k] = static_cast<T>(static_cast<double>(zi[k]) * c);
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
        gemm_rm_fixed<T>(gemm, ws.nthreads, true, false, (int)d, K, (int)B, T(1), ws.xb.data(), (int)d, Z, K, T(0), gW, K);
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
    ws.hn2.resize(static_cast<size_t>(B));
    T* H = ws.h.data();
    T* Z = ws.z.data();
    T* G1 = ws.g1.data();
    // Forward.
    gemm_rm_fixed<T>(gemm, ws.nthreads, false, false, (int)B, h, (int)d, T(1), ws.xb.data(), (int)d, W1, h, T(0), H, h);
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
    gemm_rm_fixed<T>(gemm, ws.nthreads, false, false, (int)B, K, h, T(1), H, h, W2, K, T(0), Z, K);
    // Output-layer gradients and their ghost norms: ||g2_i||^2 (||h_i||^2 + 1).
    for (int64_t i = 0; i < B; ++i) {
        T* zi = Z + i * K;
        for (int k = 0; k < K; ++k) zi[k] += b2[k];
        st.loss_sum += dpf::loss::softmax_value_residual<T>(zi, K, yl[idx[i]], zi);
        ws.c2[i] = row_sq(zi, K);  // ||g2_i||^2
        ws.hn2[i] = row_sq(H + i * h, h);
    }
    // Back-propagate the unclipped output gradient: G1 = (G2 W2^T) * act'(pre).
    gemm_rm_fixed<T>(gemm, ws.nthreads, false, true, (int)B, h, K, T(1), Z, K, W2, K, T(0), G1, h);
    for (int64_t i = 0; i < B; ++i) {
        T* gi = G1 + i * h;
        const T* hi = H + i * h;
        if (act == RELU) {
            for (int j = 0; j < h; ++j)
                if (!(hi[j] > T(0))) gi[j] = T(0);
        } else {
            for (int j = 0; j < h; ++j) gi[j] *= T(1) - hi[j] * hi[j];
        }
        ws.c1[i] = row_sq(gi, h);  // ||g1_i||^2
    }
    // Clip factors.
    // Per-layer: C / sqrt(2) rounded down (0.70710678118654746 < 1/sqrt(2)); the target's
    // 8 u_T margin covers the rounding of the product.  Safe factors as in "clipping that is
    // safe after rounding": layer 1 is g1 (x) (x, 1), layer 2 is g2 (x) (h, 1).
    const double Cl = mode == 1 ? C * 0.70710678118654746 : C;
    for (int64_t i = 0; i < B; ++i) {
        const double n1 = std::sqrt(ws.c1[i] * (ws.xn2[i] + 1.0)), n2 = std::sqrt(ws.c2[i] * (ws.hn2[i] + 1.0));
        const double A1 = norm_upper<T>(ws.xn2[i] + 1.0, d + 1), A2 = norm_upper<T>(ws.hn2[i] + 1.0, h + 1);
        const double ub1 = norm_upper<T>(ws.c1[i], h) * A1 * (1.0 + 0x1p-51);
        const double ub2 = norm_upper<T>(ws.c2[i], K) * A2 * (1.0 + 0x1p-51);
        const double s1 = subnormal_slack<T>(h, A1), s2 = subnormal_slack<T>(K, A2);
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
            f1 = safe_factor(ub1, Cl, clip_target<T>(Cl, s1));
            f2 = safe_factor(ub2, Cl, clip_target<T>(Cl, s2));
        } else {
            // ||(c u1 (x) a1, c u2 (x) a2)|| <= c sqrt(ub1^2 + ub2^2) (+ the subnormal slacks)
            const double ub = std::sqrt(ub1 * ub1 + ub2 * ub2) * (1.0 + 0x1p-50);
            f1 = f2 = safe_factor(ub, C, clip_target<T>(C, s1 + s2));
            if (!std::isfinite(ub)) std::fill(H + i * h, H + (i + 1) * h, T(0));
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
            for (int j = 0; j < h; ++j) gi[j] = f1 == 0.0 ? T(0) : static_cast<T>(static_cast<double>(gi[j]) * f1);
        }
        if (f2 < 1.0) {
            T* zi = Z + i * K;
            for (int k = 0; k < K; ++k) zi[k] = f2 == 0.0 ? T(0) : static_cast<T>(static_cast<double>(zi[k]) * f2);
        }
    }
    // Clipped sums: one weighted matrix product per layer.
    gemm_rm_fixed<T>(gemm, ws.nthreads, true, false, (int)d, h, (int)B, T(1), ws.xb.data(), (int)d, G1, h, T(0), gW1, h);
    colsum(G1, B, h, gb1);
    gemm_rm_fixed<T>(gemm, ws.nthreads, true, false, h, K, (int)B, T(1), H, h, Z, K, T(0), gW2, K);
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

// dst[j] (+)= round_T((g_j scale) c).  The bound of "clipping that is safe after rounding" needs
// |stored| <= |c g_j| (1 + 3 u_T) + eta_T / 2 per entry.  Products in double, rounded once to
// T, give (1 + u_d)(1 + u_T).  For float32 with a normal float32 factor (c >= 2^-126) and no
// scaling, the float product of the rounded factor gives (1 + u_T)^2 (+ eta/2 when the result
// is subnormal): the same bound, at twice the SIMD width; a subnormal float32 factor (the
// case that overshot C by 0.7%) always goes through double.
template <bool Accumulate, class T>
inline void scale_row(const T* g, int64_t P, double scale, double c, T* dst) {
    if (std::is_same<T, float>::value && scale == 1.0 && c >= 0x1p-126) {
        const T cf = static_cast<T>(c);
        for (int64_t j = 0; j < P; ++j) {
            if (Accumulate) dst[j] += cf * g[j];
            else dst[j] = cf * g[j];
        }
        return;
    }
    for (int64_t j = 0; j < P; ++j) {
        const T v = static_cast<T>((static_cast<double>(g[j]) * scale) * c);
        if (Accumulate) dst[j] += v;
        else dst[j] = v;
    }
}

// Rows of G (B x P): norms (B), factors (B); sum_i c_i G_i into out (P) when out != nullptr,
// the clipped rows written to clipped (B x P) when clipped != nullptr.  Factors are the safe
// factors of "clipping that is safe after rounding" (the stored clipped row has exact norm
// <= C); products c g_ij in double, rounded once to T.  A float64 row whose sum of squares
// overflows is measured again scaled by a power of two (exact), so that it is clipped, not
// dropped; its reported norm is then +inf only if the norm itself exceeds DBL_MAX.
template <class T>
int64_t clip_rows(const T* G, int64_t B, int64_t P, double C, double* norms, double* factors,
                  T* out, T* clipped) {
    int64_t nclip = 0;
    if (out) std::fill(out, out + P, T(0));
    const double t = clip_target<T>(C, subnormal_slack<T>(P, 1.0));
    for (int64_t i = 0; i < B; ++i) {
        const T* gi = G + i * P;
        const double sq = row_sq(gi, P);
        double nrm = std::sqrt(sq), c;
        double scale = 1.0;  // rows measured scaled: products (g 2^-e) * c', both exact powers
        if (std::isinf(sq) && std::is_same<T, double>::value) {
            // sum of squares overflowed: measure g 2^-e with max |g 2^-e| in [0.5, 1).
            double mx = 0;
            for (int64_t j = 0; j < P; ++j) mx = std::max(mx, std::fabs(static_cast<double>(gi[j])));
            int e;
            std::frexp(mx, &e);
            scale = std::ldexp(1.0, -e);
            double s2[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int64_t j = 0;
            for (; j + 8 <= P; j += 8)
                for (int u = 0; u < 8; ++u) {
                    const double v = static_cast<double>(gi[j + u]) * scale;
                    s2[u] += v * v;
                }
            for (; j < P; ++j) {
                const double v = static_cast<double>(gi[j]) * scale;
                s2[0] += v * v;
            }
            const double ss = ((s2[0] + s2[1]) + (s2[2] + s2[3])) + ((s2[4] + s2[5]) + (s2[6] + s2[7]));
            nrm = std::ldexp(std::sqrt(ss), e);  // may be +inf: the true norm is > DBL_MAX
            // g min(1, C / ||g||) = g_s min(2^-e, C / ||g_s||) with g_s = g 2^-e: the factor on
            // the scaled row is t / ub_s (the target t as in the unscaled case), and the row is
            // left alone only if ub_s <= C 2^-e (exact: C 2^-e is normal whenever it can hold,
            // since ub_s >= 0.5).  Entries g 2^-e that are subnormal carry an absolute error
            // <= 2^-1075 each, i.e. relative <= sqrt(P) 2^-1074 of the scaled norm (>= 0.5):
            // inside rho's slack of at least 2^-48.
            const double ub = norm_upper<T>(ss, P);
            const double Cs = std::ldexp(C, -e);
            if (!(C > 0) || std::isinf(C)) c = 1.0;
            else if (!std::isfinite(ub)) c = 0.0;
            else if (ub <= Cs) c = 1.0;
            else c = t > 0 ? t / ub : 0.0;
        } else {
            scale = 1.0;
            c = safe_factor(norm_upper<T>(sq, P), C, t);
        }
        // Scaled rows: c multiplies g 2^-e and may exceed 1 (the applied factor is c scale);
        // c == 1 there means "not clipped" (the row is copied unchanged).
        if (scale != 1.0 && c == 1.0) scale = 1.0;
        const bool clip = scale != 1.0 || c < 1.0;
        nclip += clip;
        if (norms) norms[i] = nrm;
        // factors: the factor applied to g (c * scale; may underflow to 0 in double when the
        // row was measured scaled, the applied product below does not)
        if (factors) factors[i] = c * scale;
        if (out) {
            if (clip)
                scale_row<true>(gi, P, scale, c, out);
            else
                for (int64_t j = 0; j < P; ++j) out[j] += gi[j];
        }
        if (clipped) {
            T* ci = clipped + i * P;
            if (clip)
                scale_row<false>(gi, P, scale, c, ci);
            else
                std::memcpy(ci, gi, sizeof(T) * static_cast<size_t>(P));
        }
    }
    return nclip;
}

// ------------------------------------------------------------------------- Gaussian noise
// The DP-SGD noise is drawn by the package's one sampler family (csrc/random/distributions.hpp,
// the 52-bit-abscissa normal ziggurat, float32 = the float64 variate rounded once) through the
// noise fill of dpfast.random (fill_noise); optimizer_step below only adds it.

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
