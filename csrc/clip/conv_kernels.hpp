// Per-sample weight gradients of a 2-D convolution (groups = 1), float32.  NO include guard on
// purpose: csrc/clip/conv.hpp includes this file three times, once in namespace `generic`, once in
// namespace `avx2` under `#pragma GCC target("avx2,fma")` and once in namespace `avx512` under
// `#pragma GCC target("avx512f,avx2,fma")`, and picks one at run time.  All builds perform the same
// IEEE operations on every element in the same order: the vector lanes are independent output
// channels (8 per vector in the generic and avx2 builds, 16 in the avx512 one: DPF_CONV_LANES), and
// every multiply-add is ONE correctly rounded fused multiply-add (`madd`: _mm256_fmadd_ps /
// _mm512_fmadd_ps, std::fma per lane in the generic one), so they give the same bits.  (The rest of
// csrc/ avoids FMA because compilers contract a*b+c only sometimes; here every product-sum is an
// explicit fma in every build.)
//
// Included from conv.hpp after <algorithm>, <cmath>, <cstdint>, <cstring>, <vector>, <immintrin.h>.

#if defined(DPF_CONV_AVX512_BUILD)
constexpr int kLanes = 16;
#else
constexpr int kLanes = 8;
#endif
typedef float vf __attribute__((vector_size(4 * kLanes)));

static inline vf loadv(const float* p) {
    vf v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
#if defined(DPF_CONV_AVX512_BUILD)
static inline vf splatv(float x) { return (vf)_mm512_set1_ps(x); }
#else
static inline vf splatv(float x) { return vf{x, x, x, x, x, x, x, x}; }
#endif

#if defined(DPF_CONV_AVX512_BUILD)
static inline vf madd(vf a, vf b, vf c) { return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c); }
#elif defined(DPF_CONV_AVX2_BUILD)
static inline vf madd(vf a, vf b, vf c) { return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c); }
#else
static inline vf madd(vf a, vf b, vf c) {
    vf r;
    for (int l = 0; l < kLanes; ++l) r[l] = std::fma(a[l], b[l], c[l]);
    return r;
}
#endif

// One block of outputs of one sample: VB vectors of kLanes output channels (from v0) times NJ
// consecutive (kw, ci) indices (from j0) of kernel row kh.  acc[v][jj] = sum over the T output
// positions, in position order, of gt[t][co] * x[ci][row(t, kh)][col(t) + kw dw] (x channels-first,
// j = kw C + ci read at offset joff[j] = ci Hp Wp + kw dw from the window's corner), one fma each
// (Contig: joff[j] = j, which holds when C = 1 and dw = 1).  The result goes to w[kh][j][co] (rows of
// Co entries; co < Co only: the padded channels are dropped).
template <int VB, int NJ, bool Contig>
static void conv_block(const ConvGeom& g, const float* x, const float* gt, const int64_t* joff, int64_t kh,
                       int64_t j0, int64_t v0, float* w) {
    vf acc[VB][NJ];
    for (int v = 0; v < VB; ++v)
        for (int jj = 0; jj < NJ; ++jj) acc[v][jj] = splatv(0.0f);
    int64_t off[NJ];
    for (int jj = 0; jj < NJ; ++jj) off[jj] = Contig ? j0 + jj : joff[j0 + jj];
    const int64_t cop = g.cop;
    const float* gb = gt + v0 * kLanes;
    for (int64_t oh = 0; oh < g.oh; ++oh) {
        const float* xb = x + (oh * g.sh + kh * g.dh) * g.wp;
        const int64_t step = g.sw;
        for (int64_t ow = 0; ow < g.ow; ++ow, xb += step, gb += cop) {
            vf gv[VB];
            for (int v = 0; v < VB; ++v) gv[v] = loadv(gb + kLanes * v);
            for (int jj = 0; jj < NJ; ++jj) {
                const vf xs = splatv(xb[off[jj]]);
                for (int v = 0; v < VB; ++v) acc[v][jj] = madd(gv[v], xs, acc[v][jj]);
            }
        }
    }
    const int64_t jn = g.kw * g.c;
    for (int jj = 0; jj < NJ; ++jj) {
        float* wr = w + (kh * jn + j0 + jj) * g.co + v0 * kLanes;
        for (int v = 0; v < VB; ++v) {
            const int64_t left = g.co - (v0 + v) * kLanes;
            float lanes[kLanes];  // (a copy: the accumulators' addresses are never taken, so they stay in registers)
            const vf a = acc[v][jj];
            std::memcpy(lanes, &a, sizeof lanes);
            if (left >= kLanes) {
                std::memcpy(wr + kLanes * v, lanes, sizeof lanes);  // (a constant size: no call)
            } else {
                for (int64_t l = 0; l < left; ++l) wr[kLanes * v + l] = lanes[l];
            }
        }
    }
}

template <int VB, int NJ, bool Contig>
static inline void conv_block_n(const ConvGeom& g, const float* x, const float* gt, const int64_t* joff, int64_t kh,
                                int64_t j0, int64_t v0, float* w) {
    if constexpr (VB * NJ <= 12 || NJ == 1) conv_block<VB, NJ, Contig>(g, x, gt, joff, kh, j0, v0, w);
}

// The (kw, ci) indices of kernel row kh in blocks of equal size (at most 12 / VB, so VB x NJ <= 12
// accumulators; blocks of equal size keep each block's accumulators many enough to hide the
// fma latency: 8 indices as 4 + 4, not 6 + 2).
template <int VB, bool Contig>
static void conv_blocks_j(const ConvGeom& g, const float* x, const float* gt, const int64_t* joff, int64_t kh,
                          int64_t v0, float* w) {
    constexpr int NJ = VB == 1 ? 8 : VB == 2 ? 6 : 3;
    const int64_t jn = g.kw * g.c;
    const int64_t nb = (jn + NJ - 1) / NJ;
    const int64_t q = (jn + nb - 1) / nb;  // <= NJ
    for (int64_t j0 = 0; j0 < jn; j0 += q) {
        switch (std::min<int64_t>(q, jn - j0)) {
            case 1: conv_block_n<VB, 1, Contig>(g, x, gt, joff, kh, j0, v0, w); break;
            case 2: conv_block_n<VB, 2, Contig>(g, x, gt, joff, kh, j0, v0, w); break;
            case 3: conv_block_n<VB, 3, Contig>(g, x, gt, joff, kh, j0, v0, w); break;
            case 4: conv_block_n<VB, 4, Contig>(g, x, gt, joff, kh, j0, v0, w); break;
            case 5: conv_block_n<VB, 5, Contig>(g, x, gt, joff, kh, j0, v0, w); break;
            case 6: conv_block_n<VB, 6, Contig>(g, x, gt, joff, kh, j0, v0, w); break;
            case 7: conv_block_n<VB, 7, Contig>(g, x, gt, joff, kh, j0, v0, w); break;
            default: conv_block_n<VB, 8, Contig>(g, x, gt, joff, kh, j0, v0, w); break;
        }
    }
}

template <bool Contig>
static void conv_sample_t(const ConvGeom& g, const float* x, const float* gt, const int64_t* joff, float* w) {
    const int64_t nv = g.cop / kLanes;
    for (int64_t kh = 0; kh < g.kh; ++kh) {
        int64_t v0 = 0;
        for (; v0 + 4 <= nv; v0 += 4) conv_blocks_j<4, Contig>(g, x, gt, joff, kh, v0, w);
        if (nv - v0 >= 2) {
            conv_blocks_j<2, Contig>(g, x, gt, joff, kh, v0, w);
            v0 += 2;
        }
        if (v0 < nv) conv_blocks_j<1, Contig>(g, x, gt, joff, kh, v0, w);
    }
}

// One sample: w (KH, KW, C, Co) from x (C, Hp, Wp) and gt (T, cop), the transposed output
// gradient with the channels padded by zeros to cop (a multiple of kLanes).
static void conv_sample(const ConvGeom& g, const float* x, const float* gt, const int64_t* joff, float* w) {
    if (g.dw == 1 && g.c == 1)
        conv_sample_t<true>(g, x, gt, joff, w);
    else
        conv_sample_t<false>(g, x, gt, joff, w);
}

typedef double v4d __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

// Sum of squares in float64 of n float32 values: element k to lane k mod 8 (two 4-vectors),
// the remainder (k >= n - n mod 8) to lanes 0.., lanes folded ((0+1)+(2+3))+((4+5)+(6+7)).  The
// squares are exact in float64, so only the additions round (no fma needed: fma(v, v, s) would
// give the same bits).
static double sum_sq(const float* p, int64_t n) {
    v4d s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0};
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        v4f a, b;
        std::memcpy(&a, p + k, sizeof a);
        std::memcpy(&b, p + k + 4, sizeof b);
        const v4d da = __builtin_convertvector(a, v4d), db = __builtin_convertvector(b, v4d);
        s0 += da * da;
        s1 += db * db;
    }
    double s[8] = {s0[0], s0[1], s0[2], s0[3], s1[0], s1[1], s1[2], s1[3]};
    for (int l = 0; k < n; ++k, ++l) {
        const double v = (double)p[k];
        s[l] += v * v;
    }
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// sum_sq of the float32 products fl(p[k] * scale) (the output gradient times the loss reduction's
// batch size, dpfast.torch's hooks): the same lanes and fold as sum_sq, so scale = 1 gives sum_sq's
// bits, and the products are those of torch's float32 `g * B` (one IEEE multiply each).
static double sum_sq_scaled(const float* p, int64_t n, float scale) {
    v4d s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0};
    const v4f sc = {scale, scale, scale, scale};
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        v4f a, b;
        std::memcpy(&a, p + k, sizeof a);
        std::memcpy(&b, p + k + 4, sizeof b);
        a = a * sc;
        b = b * sc;
        const v4d da = __builtin_convertvector(a, v4d), db = __builtin_convertvector(b, v4d);
        s0 += da * da;
        s1 += db * db;
    }
    double s[8] = {s0[0], s0[1], s0[2], s0[3], s1[0], s1[1], s1[2], s1[3]};
    for (int l = 0; k < n; ++k, ++l) {
        const double v = (double)(p[k] * scale);
        s[l] += v * v;
    }
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}
