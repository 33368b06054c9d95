// Per-sample weight gradients of a convolution with their squared norms, for dpfast.torch's
// convolution fast path (dpfast/torch/_fast_layers.py, "Convolutions": the certified bound is
// formed there from what this returns).  No Python headers; the binding (csrc/bindings/clip.cpp,
// conv_weight_grads) validates shapes and geometry.
//
// A groups = 1 2-D convolution (Conv1d: height 1) with kernel (KH, KW), stride (sh, sw),
// dilation (dh, dw), on an input already padded and laid out channels-last, x_i of shape
// (Hp, Wp, C), with output gradient g_i of shape (Co, OH, OW), T = OH OW positions.  Per sample:
//
//   w_i[kh][kw][ci][co] = sum_t g_i[co][t] x_i[ci][oh sh + kh dh][ow sw + kw dw]   (float32)
//
// -- what the unfolded input U_i and one GEMM G_i U_i^T give, read from x_i directly (no unfold
// is materialised).  Each entry is a T-term float32 inner product accumulated in position order
// by fused multiply-adds, so it is within gamma32_T sum_t |g||x| + T 2^-149 of the exact value
// (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., Sec. 3.1, any FMA use).
// And, in float64:
//
//   sq_i = sum of the squares of the float32 entries of w_i (squares of float32 values are exact
//          in float64; eight lane sums, then a fixed pairwise fold): within gamma_P of ||w_i||^2;
//   fa_i = ||U_i||_F^2 = sum_{ci, r, c} mh[r] mw[c] x_i[ci][r][c]^2, mh[r] (mw[c]) the number of
//          (oh, kh) ((ow, kw)) pairs that read row r (column c): every rounding is of a sum or
//          product of non-negative terms, at most Wp + Hp C + 4 of them along any term's path, so
//          the caller's fa_i (1 + gamma_{Wp + Hp C + 4}) bounds the exact value;
//   fg_i = ||G_i||_F^2, within gamma_{T Co} (non-negative terms).
//
// Determinism: each sample is computed by one thread in a fixed order, so the results are the
// same bits for any thread count; the generic and avx2 builds give the same bits (conv_kernels.hpp).
#pragma once
#include "portable.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "parallel.hpp"

#if defined(DPF_HAVE_AVX2_DISPATCH)
#include <immintrin.h>
#endif

// v8f values passed between the kernels' inline functions: no ABI crosses a library boundary
DPF_PRAGMA(GCC diagnostic ignored "-Wpsabi")

namespace dpf {
namespace conv {

struct ConvGeom {
    int64_t b, c, hp, wp;  // input (B, C, Hp, Wp), padded
    int64_t co, oh, ow;    // output gradient (B, Co, OH, OW)
    int64_t kh, kw, sh, sw, dh, dw;
    int64_t co8;  // Co rounded up to a multiple of 8
};

namespace generic {
#include "clip/conv_kernels.hpp"
}  // namespace generic

#if defined(DPF_HAVE_AVX2_DISPATCH)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define DPF_CONV_AVX2_BUILD 1
namespace avx2 {
#include "clip/conv_kernels.hpp"
}  // namespace avx2
#undef DPF_CONV_AVX2_BUILD
#pragma GCC pop_options
inline bool use_avx2() {
    // DPFAST_CONV_NO_AVX2=1 forces the generic build (to test it on AVX2 machines); the CPU must
    // also have FMA (every AVX2 CPU so far has).
    static const bool ok = avx2_enabled("DPFAST_CONV_NO_AVX2") && __builtin_cpu_supports("fma");
    return ok;
}
#else
inline bool use_avx2() { return false; }
#endif

// How many (o, k) pairs, o < n_out, k < n_k, read position r = o s + k d (r < n_in).
inline std::vector<double> multiplicity(int64_t n_in, int64_t n_out, int64_t n_k, int64_t s, int64_t d) {
    std::vector<double> m((size_t)n_in, 0.0);
    for (int64_t o = 0; o < n_out; ++o)
        for (int64_t k = 0; k < n_k; ++k) m[(size_t)(o * s + k * d)] += 1.0;
    return m;
}

// w (B, KH KW C Co) float32 (laid out (KH, KW, C, Co) per sample), sq/fa/fg (B) float64, as in the header comment.  `vectorised`:
// whether the avx2 build runs (the result is the same bits either way).
inline void weight_grads(const ConvGeom& g, const float* x, const float* grad, float* w, double* sq, double* fa,
                         double* fg, int nthreads) {
    const int64_t jn = g.kw * g.c;
    std::vector<int64_t> joff((size_t)jn);
    for (int64_t kw = 0; kw < g.kw; ++kw)
        for (int64_t ci = 0; ci < g.c; ++ci) joff[(size_t)(kw * g.c + ci)] = ci * g.hp * g.wp + kw * g.dw;
    const std::vector<double> mh = multiplicity(g.hp, g.oh, g.kh, g.sh, g.dh);
    const std::vector<double> mw = multiplicity(g.wp, g.ow, g.kw, g.sw, g.dw);
    const int64_t t_n = g.oh * g.ow;
    const int64_t p = g.co * g.kh * jn;
    const int64_t x_n = g.hp * g.wp * g.c;
    const bool vec = use_avx2();
    constexpr int64_t kChunk = 4;  // samples per claimed chunk
    const int64_t chunks = (g.b + kChunk - 1) / kChunk;
    run_chunks(chunks, nthreads, [&](int64_t k) {
        std::vector<float> gt((size_t)(t_n * g.co8), 0.0f);
        for (int64_t i = k * kChunk; i < std::min(g.b, (k + 1) * kChunk); ++i) {
            const float* xi = x + i * x_n;
            const float* gi = grad + i * g.co * t_n;
            for (int64_t co = 0; co < g.co; ++co)  // transpose: gt[t][co]
                for (int64_t t = 0; t < t_n; ++t) gt[(size_t)(t * g.co8 + co)] = gi[co * t_n + t];
            float* wi = w + i * p;
            if (vec) {
#if defined(DPF_HAVE_AVX2_DISPATCH)
                avx2::conv_sample(g, xi, gt.data(), joff.data(), wi);
                sq[i] = avx2::sum_sq(wi, p);
                fg[i] = avx2::sum_sq(gi, g.co * t_n);
#endif
            } else {
                generic::conv_sample(g, xi, gt.data(), joff.data(), wi);
                sq[i] = generic::sum_sq(wi, p);
                fg[i] = generic::sum_sq(gi, g.co * t_n);
            }
            double a = 0.0;
            for (int64_t ci = 0; ci < g.c; ++ci)
                for (int64_t r = 0; r < g.hp; ++r) {
                    if (mh[(size_t)r] == 0.0) continue;
                    const float* xr = xi + (ci * g.hp + r) * g.wp;
                    double rs = 0.0;
                    for (int64_t cc = 0; cc < g.wp; ++cc) {
                        const double v = (double)xr[cc];
                        rs += mw[(size_t)cc] * (v * v);
                    }
                    a += mh[(size_t)r] * rs;
                }
            fa[i] = a;
        }
    });
}

}  // namespace conv
}  // namespace dpf

