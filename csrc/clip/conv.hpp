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
// same bits for any thread count; the generic, avx2 and avx512 builds give the same bits (conv_kernels.hpp).
#pragma once
#include "portable.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "parallel.hpp"

#if defined(__linux__)
#include <dlfcn.h>
#endif
#include <atomic>

#if defined(DPF_HAVE_AVX2_DISPATCH)
#include <immintrin.h>
#endif

// v8f values passed between the kernels' inline functions: no ABI crosses a library boundary
DPF_PRAGMA(GCC diagnostic ignored "-Wpsabi")

namespace dpf {
namespace conv {

struct ConvGeom {
    int64_t b, c, hp, wp;  // input (B, C, Hp, Wp), padded
    int64_t pt = 0, pb = 0, pl = 0, pr = 0;  // zeros the kernel pads x with (x is then (B, C, Hp - pt - pb, Wp - pl - pr))
    int64_t co, oh, ow;    // output gradient (B, Co, OH, OW)
    int64_t kh, kw, sh, sw, dh, dw;
    int64_t co8;  // Co rounded up to a multiple of 8
    int64_t cop;  // Co rounded up to a multiple of the running build's lanes (weight_grads sets it)
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
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#define DPF_CONV_AVX512_BUILD 1
namespace avx512 {
#include "clip/conv_kernels.hpp"
}  // namespace avx512
#undef DPF_CONV_AVX512_BUILD
#pragma GCC pop_options
inline bool use_avx2() {
    // DPFAST_CONV_NO_AVX2=1 forces the generic build (to test it on AVX2 machines); the CPU must
    // also have FMA (every AVX2 CPU so far has).
    static const bool ok = avx2_enabled("DPFAST_CONV_NO_AVX2") && __builtin_cpu_supports("fma");
    return ok;
}
inline bool use_avx512() {
    // 16 output channels per fused multiply-add instead of 8 (the same bits: conv_kernels.hpp);
    // DPFAST_CONV_NO_AVX512=1 forces the avx2 build (to test it on AVX-512 machines)
    static const bool ok = [] {
        const char* env = std::getenv("DPFAST_CONV_NO_AVX512");
        return use_avx2() && !(env && env[0] == '1') && __builtin_cpu_supports("avx512f") != 0;
    }();
    return ok;
}
#else
inline bool use_avx2() { return false; }
inline bool use_avx512() { return false; }
#endif

// The build that runs: 2 (avx512), 1 (avx2) or 0 (generic).
inline int isa() { return use_avx512() ? 2 : use_avx2() ? 1 : 0; }

// The OpenMP runtime already in the process (torch's intra-op thread pool on Linux: libgomp, or a
// runtime with GNU's entry points), or nullptr.  After every parallel torch operation the pool's
// workers spin for milliseconds (libgomp's default wait policy: ~5 ms measured on the 2-core
// benchmark machine), so a kernel that starts threads of its own right after one competes with
// them for the cores: the native convolution on 2 threads ran no faster than on one inside a
// DP-SGD step.  Run on that pool instead, its spinning workers take the chunks at once.
// GOMP_parallel(fn, data, num_threads, flags) is the entry point GCC emits for `#pragma omp
// parallel` (libgomp's ABI, also exported by LLVM's and Intel's runtimes); the runtime is looked
// up, never loaded (RTLD_NOLOAD: a second runtime would be a second pool of spinning threads).
using gomp_parallel_t = void (*)(void (*)(void*), void*, unsigned, unsigned);
inline gomp_parallel_t loaded_gomp_parallel() {
#if defined(__linux__)
    static std::atomic<gomp_parallel_t> found{nullptr};
    gomp_parallel_t fn = found.load(std::memory_order_acquire);
    if (fn) return fn;
    for (const char* name : {"libgomp.so.1", "libiomp5.so", "libomp.so"}) {
        void* h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
        if (!h) continue;
        void* sym = dlsym(h, "GOMP_parallel");
        dlclose(h);  // (NOLOAD: drops the reference this call took; the runtime stays loaded)
        if (sym) {
            fn = reinterpret_cast<gomp_parallel_t>(sym);
            found.store(fn, std::memory_order_release);
            return fn;
        }
    }
#endif
    return nullptr;
}

// run_chunks (parallel.hpp) on the threads of the loaded OpenMP runtime's team when `use_omp` and
// one is loaded (the same dynamic claiming, so the same results for any team size), else on
// threads of its own.  fn must not throw (it runs on the runtime's threads).
template <class Fn>
void run_chunks_pool(int64_t count, int nthreads, bool use_omp, const Fn& fn) {
    const int T = (int)std::max<int64_t>(1, std::min<int64_t>(nthreads, count));
    gomp_parallel_t par = (use_omp && T > 1) ? loaded_gomp_parallel() : nullptr;
    if (!par) {
        run_chunks(count, nthreads, fn);
        return;
    }
    struct Ctx {
        const Fn* fn;
        std::atomic<int64_t> next;
        int64_t count;
    };
    Ctx ctx{&fn, {0}, count};
    par(
        [](void* data) {
            Ctx* c = static_cast<Ctx*>(data);
            for (int64_t k = c->next.fetch_add(1, std::memory_order_relaxed); k < c->count;
                 k = c->next.fetch_add(1, std::memory_order_relaxed))
                (*c->fn)(k);
        },
        &ctx, (unsigned)T, 0u);
}

// How many (o, k) pairs, o < n_out, k < n_k, read position r = o s + k d (r < n_in).
inline std::vector<double> multiplicity(int64_t n_in, int64_t n_out, int64_t n_k, int64_t s, int64_t d) {
    std::vector<double> m((size_t)n_in, 0.0);
    for (int64_t o = 0; o < n_out; ++o)
        for (int64_t k = 0; k < n_k; ++k) m[(size_t)(o * s + k * d)] += 1.0;
    return m;
}

// w (B, KH KW C Co) float32 (laid out (KH, KW, C, Co) per sample), sq/fa/fg (B) float64, as in the
// header comment.  With g.pt/pb/pl/pr > 0, x is the UNPADDED input (B, C, Hp - pt - pb, Wp - pl - pr):
// each sample is copied into a zero-bordered (C, Hp, Wp) tile (exact copies: the same values as a
// padded input).  `bias` (B, Co) float32, optional: each sample's sum over the T positions of its
// output gradient, b_i[co] = sum_t g_i[co][t], accumulated in position order in float32 (within
// gamma32_T sum_t |g_i[co][t]| of the exact sum), and `bias_sq` (B) its float64 sum of squares
// (as sq).  `scale`: the output gradient is taken as the float32 products fl(g * scale) (one IEEE
// multiply per entry: the values of torch's `g * B`, for a loss averaged over B samples), in w,
// fg and bias alike; 1 (exact) leaves it as it is.  Every build gives the same bits.
inline void weight_grads(const ConvGeom& geo, const float* x, const float* grad, float* w, double* sq, double* fa,
                         double* fg, int nthreads, float* bias = nullptr, double* bias_sq = nullptr,
                         bool use_omp = false, float scale = 1.0f) {
    const int level = isa();
    ConvGeom g = geo;
    const int64_t lanes = level == 2 ? 16 : 8;
    g.cop = (g.co + lanes - 1) / lanes * lanes;
    const int64_t jn = g.kw * g.c;
    std::vector<int64_t> joff((size_t)jn);
    for (int64_t kw = 0; kw < g.kw; ++kw)
        for (int64_t ci = 0; ci < g.c; ++ci) joff[(size_t)(kw * g.c + ci)] = ci * g.hp * g.wp + kw * g.dw;
    const std::vector<double> mh = multiplicity(g.hp, g.oh, g.kh, g.sh, g.dh);
    const std::vector<double> mw = multiplicity(g.wp, g.ow, g.kw, g.sw, g.dw);
    const int64_t t_n = g.oh * g.ow;
    const int64_t p = g.co * g.kh * jn;
    const bool padded = g.pt || g.pb || g.pl || g.pr;
    const int64_t h_in = g.hp - g.pt - g.pb, w_in = g.wp - g.pl - g.pr;
    const int64_t x_n = h_in * w_in * g.c;  // one sample of x as given
    constexpr int64_t kChunk = 4;  // samples per claimed chunk
    const int64_t chunks = (g.b + kChunk - 1) / kChunk;
    auto chunk = [&](int64_t k) {
        std::vector<float> gt((size_t)(t_n * g.cop), 0.0f);
        std::vector<float> bsum((size_t)g.cop);
        // the padded sample: the border is written once (zeros), the interior for every sample
        std::vector<float> tile(padded ? (size_t)(g.c * g.hp * g.wp) : 0, 0.0f);
        for (int64_t i = k * kChunk; i < std::min(g.b, (k + 1) * kChunk); ++i) {
            const float* xi = x + i * x_n;
            if (padded) {
                for (int64_t ci = 0; ci < g.c; ++ci)
                    for (int64_t r = 0; r < h_in; ++r)
                        std::memcpy(tile.data() + (ci * g.hp + r + g.pt) * g.wp + g.pl, xi + (ci * h_in + r) * w_in,
                                    (size_t)w_in * sizeof(float));
                xi = tile.data();
            }
            const float* gi = grad + i * g.co * t_n;
            for (int64_t co = 0; co < g.co; ++co)  // transpose: gt[t][co]
                for (int64_t t = 0; t < t_n; ++t) gt[(size_t)(t * g.cop + co)] = gi[co * t_n + t] * scale;
            if (bias) {
                // position order for every channel (the lanes of the inner loop: independent channels,
                // so any vectorisation gives the same bits); the padded channels sum zeros
                std::fill(bsum.begin(), bsum.end(), 0.0f);
                for (int64_t t = 0; t < t_n; ++t) {
                    const float* gr = gt.data() + t * g.cop;
                    for (int64_t co = 0; co < g.cop; ++co) bsum[(size_t)co] += gr[co];
                }
                std::memcpy(bias + i * g.co, bsum.data(), (size_t)g.co * sizeof(float));
            }
            float* wi = w + i * p;
            if (level == 2) {
#if defined(DPF_HAVE_AVX2_DISPATCH)
                avx512::conv_sample(g, xi, gt.data(), joff.data(), wi);
                sq[i] = avx512::sum_sq(wi, p);
                fg[i] = avx512::sum_sq_scaled(gi, g.co * t_n, scale);
                if (bias_sq) bias_sq[i] = avx512::sum_sq(bias + i * g.co, g.co);
#endif
            } else if (level == 1) {
#if defined(DPF_HAVE_AVX2_DISPATCH)
                avx2::conv_sample(g, xi, gt.data(), joff.data(), wi);
                sq[i] = avx2::sum_sq(wi, p);
                fg[i] = avx2::sum_sq_scaled(gi, g.co * t_n, scale);
                if (bias_sq) bias_sq[i] = avx2::sum_sq(bias + i * g.co, g.co);
#endif
            } else {
                generic::conv_sample(g, xi, gt.data(), joff.data(), wi);
                sq[i] = generic::sum_sq(wi, p);
                fg[i] = generic::sum_sq_scaled(gi, g.co * t_n, scale);
                if (bias_sq) bias_sq[i] = generic::sum_sq(bias + i * g.co, g.co);
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
    };
    // (the vectors in a chunk may throw std::bad_alloc, which must not leave an OpenMP thread: the
    // first failure is kept and rethrown here, after the join)
    std::atomic<bool> failed{false};
    run_chunks_pool(chunks, nthreads, use_omp, [&](int64_t k) {
        if (failed.load(std::memory_order_relaxed)) return;
        try {
            chunk(k);
        } catch (...) {
            failed.store(true);
        }
    });
    if (failed.load()) throw std::bad_alloc();
}


}  // namespace conv
}  // namespace dpf

