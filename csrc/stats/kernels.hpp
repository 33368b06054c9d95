// One-pass kernels of the toolbox (dpfast.tools, GaussianNB, PCA, SSP, KMeans).  NO include
// guard on purpose: csrc/stats/stats.hpp includes this file twice, once in namespace `generic`
// and once in namespace `avx2` under `#pragma GCC target("avx2")`, and picks one at run time.
// Both builds perform the same IEEE operations on every element in the same order (vector
// lanes are independent accumulators, no FMA: -ffp-contract=off), so they give the same bits.
//
// Determinism (every statistic here is now an exact integer sum, see stats.hpp "fixed-point
// grid", so the chunking below only spreads the work; what follows was the float design): rows are cut into chunks whose size depends only on the shape (n, d) -- never
// on the thread count -- each chunk accumulates its rows in row order into its own partial,
// and the partials are merged in a fixed pairwise tree (merge_tree in stats.hpp).  The result
// is the same bits for any number of threads and, since a row is read by its element strides,
// for any memory layout of the same values (C, Fortran, strided); float32 input is widened to
// double exactly, so float32 and float64 input holding the same values give the same bits.
//
// Included from stats.hpp after <algorithm>, <cfloat>, <cmath>, <cstdint>, <cstring>, <vector>
// and "parallel.hpp"; uses dpf::stats::Chunks, Partials, for_chunks (the one chunked reduction)
// and the parameter structs from there.

typedef double v4d __attribute__((vector_size(32)));

static inline v4d load4(const double* p) {
    v4d v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
static inline void store4(double* p, v4d v) { std::memcpy(p, &v, sizeof v); }
static inline v4d splat4(double x) { return v4d{x, x, x, x}; }

// ----------------------------------------------------------------------------- moments (tools)
// Per column j of an (n, d) C-order array: s1 = sum q(y), s2 = sum q(y^2) (fixed-point grids of
// S1 and S2, stats.hpp: exact integers) and (nan mode) cnt = the number of non-NaN elements,
// where y = min(max(x - c, ylo), yhi), which is the clamped and centred min(max(x, lo), hi) - c
// further clamped to [ylo, yhi] (see y_range in stats.hpp: ylo >= fl(lo - c) and yhi <= fl(hi -
// c), so clamping x first would change nothing).  bad counts, per chunk, elements that are not
// finite (nan mode: infinite only; NaN elements are skipped and contribute nothing: their term
// is set to 0 AFTER the clamps, so a NaN adds 0 whatever the bounds).  The sums are integers, so
// the result is the same for any chunking and merge order; the chunks only spread the work.

// One column (d == 1): a chunk's elements go to 8 lanes (two 4-vectors), element r0 + 8 q + l
// to lane l; each lane adds kFixedBlock terms as uint64 bit patterns (stats.hpp: lane_sum), then
// the block goes into the chunk's __int128 sum; the remainder (< 8 elements) is added directly.
// Bad elements are found with one extra operation: the unclamped terms y0 = x - c are summed in
// double (a0); an infinite or NaN element makes a0 non-finite (as does a0 merely overflowing),
// and the chunk then rescans its elements exactly (any_bad).
template <class T>
int64_t any_bad(const T* x, int64_t r0, int64_t r1, bool nan) {
    for (int64_t i = r0; i < r1; ++i) {
        const double v = (double)x[i];
        if (nan ? std::isinf(v) : !std::isfinite(v)) return 1;
    }
    return 0;
}

typedef uint64_t v4u __attribute__((vector_size(32)));

// Centred = false (c == 0, e.g. sum's uncentred terms): the subtraction is skipped, which gives
// the same bits: fl(x - 0) is x for every double (-0 - +0 = -0, NaN and infinities stay; and for
// c = -0, x + 0 differs from x only at x = -0, whose term is q(+-0) = 0 either way).  The loop is
// bound by its vector operations: seven per four elements with the subtraction, six without (AVX2
// build: 0.177 -> 0.144 ms at 10^6 elements, one thread; the baseline build keeps the subtraction).
template <class T, bool NaN, bool Sq, bool Centred>
void column_chunk(const MomentsParams& p, const T* x, int64_t r0, int64_t r1, __int128* s1, __int128* s2,
                  int64_t* cnt, int64_t* bad) {
    v4d a0[2], an[2];
    for (int h = 0; h < 2; ++h) a0[h] = an[h] = splat4(0.0);
    const v4d vc = splat4(p.c), vylo = splat4(p.ylo), vyhi = splat4(p.yhi);
    const v4d vS1 = splat4(p.S1), vS2 = splat4(p.S2), vM = splat4(kMagic);
    const v4d zero = splat4(0.0), one = splat4(1.0);
    __int128 t1 = 0, t2 = 0;
    int64_t i = r0;
    double buf[8];
    while (i + 8 <= r1) {
        const int64_t stop = std::min(r1, i + 8 * kFixedBlock);
        v4u q1[2], q2[2];
        for (int h = 0; h < 2; ++h) q1[h] = q2[h] = v4u{0, 0, 0, 0};
        int64_t m = 0;
        for (; i + 8 <= stop; i += 8, ++m) {
            const double* src;
            if constexpr (std::is_same<T, double>::value) {
                src = x + i;
            } else {
                for (int l = 0; l < 8; ++l) buf[l] = (double)x[i + l];
                src = buf;
            }
            for (int h = 0; h < 2; ++h) {
                const v4d v = load4(src + 4 * h);
                v4d y0 = Centred ? v - vc : v;
                v4d y = vylo > y0 ? vylo : y0;  // a NaN y0 stays
                y = vyhi < y ? vyhi : y;
                if constexpr (NaN) {
                    const auto ok = v == v;  // not NaN
                    y0 = ok ? y0 : zero;
                    y = ok ? y : zero;
                    an[h] += ok ? one : zero;
                }
                a0[h] += y0;
                q1[h] += (v4u)(y * vS1 + vM);
                if constexpr (Sq) q2[h] += (v4u)((y * y) * vS2 + vM);
            }
        }
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 4; ++l) {
                t1 += lane_sum(q1[h][l], m);
                if constexpr (Sq) t2 += lane_sum(q2[h][l], m);
            }
    }
    double t0[8], tn[8];
    for (int h = 0; h < 2; ++h) {
        store4(t0 + 4 * h, a0[h]);
        store4(tn + 4 * h, an[h]);
    }
    const double c = p.c, ylo = p.ylo, yhi = p.yhi;
    for (int l = 0; i < r1; ++i, ++l) {  // the remainder: lanes 0, 1, ... of the flag and count
        const double v = (double)x[i];
        if constexpr (NaN) {
            if (v != v) continue;
            tn[l] += 1.0;
        }
        const double y0 = Centred ? v - c : v;
        double y = ylo > y0 ? ylo : y0;
        y = yhi < y ? yhi : y;
        t0[l] += y0;
        t1 += lane_sum(bits_of(y * p.S1 + kMagic), 1);
        if constexpr (Sq) t2 += lane_sum(bits_of((y * y) * p.S2 + kMagic), 1);
    }
    bool flagged = false;
    for (int l = 0; l < 8; ++l) flagged |= !(std::fabs(t0[l]) <= DBL_MAX);
    *bad = flagged ? any_bad<T>(x, r0, r1, NaN) : 0;
    s1[0] = t1;
    if constexpr (Sq) s2[0] = t2;
    if constexpr (NaN) {
        double tot = 0;
        for (int l = 0; l < 8; ++l) tot += tn[l];  // integers < 2^53 per chunk: exact
        cnt[0] = (int64_t)tot;
    }
}

// d > 1: per row, per column, in row order, into per-column uint64 accumulators (kFixedBlock
// rows at a time, then folded into the chunk's __int128 sums).  The non-finite flag is a
// per-column double sum of x - x (NaN exactly for a bad element), so the column loop carries no
// reduction of its own and the compiler vectorises it across columns.
template <class T, bool NaN, bool Sq>
void moments_rows(const MomentsParams& p, const T* __restrict x, int64_t r0, int64_t r1, __int128* __restrict s1,
                  __int128* __restrict s2, int64_t* __restrict cnt, int64_t* bad) {
    const int64_t d = p.d;
    const double c = p.c, ylo = p.ylo, yhi = p.yhi, S1 = p.S1, S2 = p.S2;
    std::vector<uint64_t> q1v(d), q2v(Sq ? d : 0);
    std::vector<double> fv(d, 0.0);
    uint64_t* __restrict q1 = q1v.data();
    uint64_t* __restrict q2 = q2v.data();
    double* __restrict f = fv.data();
    for (int64_t b = r0; b < r1; b += kFixedBlock) {
        const int64_t e = std::min(r1, b + kFixedBlock);
        std::fill(q1v.begin(), q1v.end(), 0);
        std::fill(q2v.begin(), q2v.end(), 0);
        for (int64_t i = b; i < e; ++i) {
            const T* __restrict row = x + i * d;
            for (int64_t j = 0; j < d; ++j) {
                const double v = (double)row[j];
                double y = v - c;
                y = y > ylo ? y : ylo;
                y = y < yhi ? y : yhi;
                double fl = v - v;  // NaN for a bad element (nan mode: an infinite one; NaN is masked below)
                if constexpr (NaN) {
                    const bool ok = v == v;
                    y = ok ? y : 0.0;
                    fl = ok ? fl : 0.0;
                    cnt[j] += ok ? 1 : 0;
                }
                f[j] += fl;
                q1[j] += bits_of(y * S1 + kMagic);
                if constexpr (Sq) q2[j] += bits_of((y * y) * S2 + kMagic);
            }
        }
        for (int64_t j = 0; j < d; ++j) {
            s1[j] += lane_sum(q1[j], e - b);
            if constexpr (Sq) s2[j] += lane_sum(q2[j], e - b);
        }
    }
    bool flagged = false;
    for (int64_t j = 0; j < d; ++j) flagged |= f[j] != f[j];
    *bad = flagged ? 1 : 0;
}

template <class T>
void moments(const MomentsParams& p, const T* x, MomentsResult& r) {
    const int64_t d = p.d;
    const bool sq = p.order == 2;
    const Chunks ch = chunks(p.n, d, 5 * d + 1);
    Partials<__int128> s1(ch, d), s2(ch, sq ? d : 0);
    Partials<int64_t> cnt(ch, p.nan ? d : 0), bad(ch, 1);
    auto run = [&](auto kernel) {
        for_chunks(ch, p.n, p.threads, [&](int64_t k, int64_t r0, int64_t r1) {
            kernel(p, x, r0, r1, s1.at(k), s2.at(k), cnt.at(k), bad.at(k));
        });
    };
    if (d == 1) {
#if defined(DPF_STATS_AVX2_BUILD)
        const bool centred = p.c != 0.0;
#else
        const bool centred = true;  // (the baseline build's codegen is slower without it: 0.76 vs 0.69 ms)
#endif
        if (p.nan)
            sq ? run(column_chunk<T, true, true, true>) : run(column_chunk<T, true, false, true>);
        else if (sq)
            run(column_chunk<T, false, true, true>);
        else
            centred ? run(column_chunk<T, false, false, true>) : run(column_chunk<T, false, false, false>);
    } else {
        if (p.nan)
            sq ? run(moments_rows<T, true, true>) : run(moments_rows<T, true, false>);
        else
            sq ? run(moments_rows<T, false, true>) : run(moments_rows<T, false, false>);
    }
    r.s1 = s1.merged();
    r.s2 = s2.merged();
    r.cnt = cnt.merged();
    r.bad = 0;
    for (int64_t k = 0; k < ch.K; ++k) r.bad += bad.v[k];
}

// ----------------------------------------------------------------------------- per-class sums (GaussianNB)
// u = min(max((min(max(x, lo_j), hi_j) - c_j) / r_j, -1), 1); per class g: cnt, and the EXACT
// fixed-point sums (stats.hpp "fixed-point grid", bound 1 for u and for u^2: S = 2^50, so
// q(u) = round(u 2^50)) of u and u^2.  kFixedBlock rows at a time go into uint64 accumulators
// (a class meets at most kFixedBlock terms per entry in a block), folded into the chunk's
// __int128 sums with the class's number of rows in the block.
template <class T>
void class_chunk(const ClassParams& p, const T* x, int64_t r0, int64_t r1, __int128* s1, __int128* s2, int64_t* cnt) {
    const int64_t d = p.d, w = p.k * d;
    const double S = std::ldexp(1.0, kFixedBits);
    std::vector<uint64_t> q1(w), q2(w);
    std::vector<int64_t> m(p.k);
    for (int64_t b = r0; b < r1; b += kFixedBlock) {
        const int64_t e = std::min(r1, b + kFixedBlock);
        std::fill(q1.begin(), q1.end(), 0);
        std::fill(q2.begin(), q2.end(), 0);
        std::fill(m.begin(), m.end(), 0);
        for (int64_t i = b; i < e; ++i) {
            const int64_t g = p.label[i];
            m[g] += 1;
            uint64_t* a1 = q1.data() + g * d;
            uint64_t* a2 = q2.data() + g * d;
            const T* row = x + i * p.rs;
            for (int64_t j = 0; j < d; ++j) {
                const double v = (double)row[j * p.cs];
                double y = v < p.lo[j] ? p.lo[j] : v;
                y = y > p.hi[j] ? p.hi[j] : y;
                double u = (y - p.c[j]) / p.r[j];
                u = u < -1.0 ? -1.0 : u;
                u = u > 1.0 ? 1.0 : u;
                a1[j] += bits_of(u * S + kMagic);
                a2[j] += bits_of((u * u) * S + kMagic);
            }
        }
        for (int64_t g = 0; g < p.k; ++g) {
            cnt[g] += m[g];
            for (int64_t j = 0; j < d; ++j) {
                s1[g * d + j] += lane_sum(q1[g * d + j], m[g]);
                s2[g * d + j] += lane_sum(q2[g * d + j], m[g]);
            }
        }
    }
}

template <class T>
void class_moments(const ClassParams& p, const T* x, ClassResult& r) {
    const int64_t d = p.d, G = p.k, w = G * d;
    const Chunks ch = chunks(p.n, d, 6 * w + G);
    Partials<__int128> s1(ch, w), s2(ch, w);
    Partials<int64_t> cnt(ch, G);
    for_chunks(ch, p.n, p.threads, [&](int64_t k, int64_t r0, int64_t r1) {
        class_chunk<T>(p, x, r0, r1, s1.at(k), s2.at(k), cnt.at(k));
    });
    r.s1 = s1.merged();
    r.s2 = s2.merged();
    r.cnt = cnt.merged();
}

// ----------------------------------------------------------------------------- Gram matrix (PCA, SSP)
// G = sum_i a_i b_i^T over the mapped rows, upper triangle only, EXACT on a fixed-point grid of
// the FACTORS (26 bits each, exact int64 products): column j has a public power-of-two bound
// P_j = 2^e_j on its entries (|z_j| <= P_j: PCA's unit rows P = 1; SSP's from the norm,
// intercept and label bounds).  Each row is quantised once, per factor:
//   b'_j = clamp(z_j 2^-e_j, -1, 1),   qb_j = trunc(b'_j 2^26),
//   a'_j = clamp(fl(w b'_j), -1, 1),   qa_j = trunc(a'_j 2^26)
// (w the row's weight, 1 without; the clamps are no-ops for valid rows, keep the bound for any
// input and send NaN to -1; scaling by 2^26 is exact and the truncation rounds toward zero), so
// |qa_j|, |qb_j| <= 2^26 (int32), a factor at its bound is exactly +-2^26, |qb_j| 2^-26 <= |b'_j|
// (a row's quantised norm never exceeds its norm: the sensitivity is unchanged) and the map is
// monotone.  Entry (j, k) adds the EXACT product q = qa_j qb_k, |q| <= 2^52, whose grid value is
// q P_j P_k / 2^52 (the Python side rounds the total with the bound P_j P_k / 4, dpfast._fixed
// GRAM_BITS).  Products: AVX2 _mm256_mul_epi32 (4 signed 32x32->64 per instruction) into int64
// lanes, kGramBlock rows per block (|sum| <= 2^10 2^52 = 2^62: no overflow), then the chunk's
// __int128 partial.  The row map fills z (zero padded to dp, a multiple of 8); rows are taken in
// buffers of kBuf rows.
constexpr int64_t kBuf = 128;
constexpr int kGramBits = 26;
constexpr int64_t kGramBlock = 1024;  // a multiple of kBuf; 2^10 products of |q| <= 2^52 < 2^63

typedef long long v4i __attribute__((vector_size(32)));

// The 4 lanes' products of the low 32 bits (signed) of a and b: exact int64.
static inline v4i mul_lo32(v4i a, v4i b) {
#if defined(DPF_STATS_AVX2_BUILD)
    return (v4i)_mm256_mul_epi32((__m256i)a, (__m256i)b);
#else
    return a * b;  // the factors are sign-extended int32: the int64 product is the same
#endif
}

static inline v4i load4i(const int64_t* p) {
    v4i v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
static inline void store4i(int64_t* p, v4i v) { std::memcpy(p, &v, sizeof v); }

// A 4 x 8 tile of G (rows j0.., columns k0..) += sum over the m rows of qa_j qb_k; the eight
// accumulators are named locals (kept in registers).
static inline void gram_tile(const int64_t* A, const int64_t* B, int64_t m, int64_t dp, int64_t j0, int64_t k0,
                             int64_t* G) {
    int64_t* g0 = G + j0 * dp + k0;
    v4i c00 = load4i(g0), c01 = load4i(g0 + 4), c10 = load4i(g0 + dp), c11 = load4i(g0 + dp + 4);
    v4i c20 = load4i(g0 + 2 * dp), c21 = load4i(g0 + 2 * dp + 4), c30 = load4i(g0 + 3 * dp), c31 = load4i(g0 + 3 * dp + 4);
    const int64_t* ra = A + j0;
    const int64_t* rb = B + k0;
    for (int64_t i = 0; i < m; ++i, ra += dp, rb += dp) {
        const v4i b0 = load4i(rb), b1 = load4i(rb + 4);
        v4i s = v4i{(long long)ra[0], (long long)ra[0], (long long)ra[0], (long long)ra[0]};
        c00 += mul_lo32(s, b0);
        c01 += mul_lo32(s, b1);
        s = v4i{(long long)ra[1], (long long)ra[1], (long long)ra[1], (long long)ra[1]};
        c10 += mul_lo32(s, b0);
        c11 += mul_lo32(s, b1);
        s = v4i{(long long)ra[2], (long long)ra[2], (long long)ra[2], (long long)ra[2]};
        c20 += mul_lo32(s, b0);
        c21 += mul_lo32(s, b1);
        s = v4i{(long long)ra[3], (long long)ra[3], (long long)ra[3], (long long)ra[3]};
        c30 += mul_lo32(s, b0);
        c31 += mul_lo32(s, b1);
    }
    store4i(g0, c00), store4i(g0 + 4, c01), store4i(g0 + dp, c10), store4i(g0 + dp + 4, c11);
    store4i(g0 + 2 * dp, c20), store4i(g0 + 2 * dp + 4, c21), store4i(g0 + 3 * dp, c30), store4i(g0 + 3 * dp + 4, c31);
}

static inline void gram_tiles(const int64_t* A, const int64_t* B, int64_t m, int64_t dp, int64_t* G) {
    for (int64_t j0 = 0; j0 < dp; j0 += 4)
        for (int64_t k0 = j0 & ~int64_t(7); k0 < dp; k0 += 8) gram_tile(A, B, m, dp, j0, k0, G);
}

// One factor: clamp(v, -1, 1) (NaN to -1) times 2^26, truncated toward zero, as int64 lanes.
static inline v4i quant4(v4d v, v4d top) {
    const v4d one = splat4(1.0), mone = splat4(-1.0);
    v = v > mone ? v : mone;
    v = v < one ? v : one;
    v = v * top;
#if defined(DPF_STATS_AVX2_BUILD)
    return (v4i)_mm256_cvtepi32_epi64(_mm256_cvttpd_epi32((__m256d)v));
#else
    return v4i{(long long)(int32_t)v[0], (long long)(int32_t)v[1], (long long)(int32_t)v[2], (long long)(int32_t)v[3]};
#endif
}

// The rows' factors on the grid (see above), m rows of dp (a multiple of 4): qb = trunc(b' 2^26),
// qa = trunc(a' 2^26) as int64 lanes, one pass per buffer.
// Without weights (w == nullptr: every weight 1, so fl(w b') = b' and qa = qb) only qb is filled.
static inline void quantise_rows(const double* __restrict z, int64_t* __restrict qa, int64_t* __restrict qb,
                                 const double* __restrict w, const double* __restrict sb, int64_t m, int64_t dp) {
    const v4d top = splat4(std::ldexp(1.0, kGramBits)), one = splat4(1.0), mone = splat4(-1.0);
    for (int64_t i = 0; i < m; ++i) {
        const v4d wi = splat4(w ? w[i] : 1.0);
        for (int64_t t = 0; t < dp; t += 4) {
            v4d v = load4(z + i * dp + t) * load4(sb + t);
            v = v > mone ? v : mone;
            v = v < one ? v : one;
            store4i(qb + i * dp + t, quant4(v, top));
            if (w) store4i(qa + i * dp + t, quant4(wi * v, top));
        }
    }
}

// Map fills row i (of the input) into z[0, dp) (zero padded) and returns its weight (1 when none).
// e: the d + 1 column exponents.  Returns the (d+1) x (d+1) upper triangle (the rest zero) of
// the exact sums of q, row-major.
template <class Map>
std::vector<__int128> gram(int64_t n, int64_t d, int threads, const int* e, const Map& map) {
    const int64_t dp = (d + 8) & ~int64_t(7), d1 = d + 1;  // d + 1 columns, to a multiple of 8
    const Chunks ch = chunks(n, dp, 3 * dp * dp);
    Partials<__int128> G(ch, dp * dp);
    std::vector<double> sb(dp, 0.0);
    for (int64_t j = 0; j < d1; ++j) sb[j] = std::ldexp(1.0, -e[j]);
    for_chunks(ch, n, threads, [&](int64_t k, int64_t r0, int64_t r1) {
        std::vector<double> zb(kBuf * dp, 0.0), wb(kBuf, 1.0);
        std::vector<int64_t> qa(kBuf * dp, 0), qb(kBuf * dp, 0);
        std::vector<int64_t> Gi(dp * dp, 0);
        __int128* Gk = G.at(k);
        int64_t inblock = 0;
        auto flush = [&]() {
            for (int64_t t = 0; t < dp * dp; ++t) Gk[t] += Gi[t];
            std::fill(Gi.begin(), Gi.end(), 0);
            inblock = 0;
        };
        for (int64_t b = r0; b < r1; b += kBuf) {
            const int64_t m = std::min(kBuf, r1 - b);
            for (int64_t i = 0; i < m; ++i) wb[i] = map(b + i, zb.data() + i * dp);
            const bool wtd = map.weighted();  // else every weight is 1: qa = qb (one quantisation)
            quantise_rows(zb.data(), qa.data(), qb.data(), wtd ? wb.data() : nullptr, sb.data(), m, dp);
            gram_tiles(wtd ? qa.data() : qb.data(), qb.data(), m, dp, Gi.data());
            inblock += m;
            if (inblock >= kGramBlock) flush();
        }
        if (inblock > 0) flush();
    });
    const std::vector<__int128> g = G.merged();
    std::vector<__int128> out(d1 * d1, 0);
    for (int64_t j = 0; j < d1; ++j)
        for (int64_t k = j; k < d1; ++k) out[j * d1 + k] = g[j * dp + k];
    return out;
}

// PCA's row map: y = clip(x, lo, hi) - c (no box: x - c); rows longer than R (or whose norm
// overflows) scaled onto the sphere of radius R; u = y / R, rescaled once more when rounding
// left |u| > 1; a trailing 1 so that the Gram matrix's last column holds sum u.
// The released bits are those of the scalar definition, whose two squared norms sq = sum y_j^2
// and nu = sum u_j^2 are sequential (left to right) double sums, only ever compared (sq <= R R,
// nu > 1) unless the row is rescaled.  The elementwise steps (clip, centre, / R) are vectorised
// (the same IEEE operations, element by element); each norm is first summed in 4 lanes (another
// order), and the sequential sum is computed only when the lane sum does not decide the
// comparison: both sums add the same d >= 1 non-negative rounded squares, so each is within a
// factor (1 +- g), g = d u / (1 - d u) (u = 2^-53), of their exact sum, and a finite lane sum s
// <= B (1 - 4 (d + 2) u) implies the sequential sum <= B (the margin's own roundings are far
// below it).  A NaN or infinite lane sum, or one near the bound, takes the sequential path, so
// rows at or beyond the bound give the scalar definition's bits by running its very code.
template <class T>
struct PcaMap {
    const PcaParams& p;
    const T* x;
    double thr_sq, thr_nu;  // the lane sums' thresholds for R R and for 1
    PcaMap(const PcaParams& p_, const T* x_) : p(p_), x(x_) {
        const double m = 4.0 * (double)(p.d + 2) * std::ldexp(1.0, -53);
        const double R2 = p.R * p.R;
        thr_sq = R2 - R2 * m;
        thr_nu = 1.0 - m;
    }
    bool weighted() const { return false; }
    // Lanes: z[0, d4) in 4-vectors, the tail in lane 0 (an order; only bounds matter).
    static inline double lanes_sq(const double* z, int64_t d) {
        const int64_t d4 = d & ~int64_t(3);
        v4d a = splat4(0.0);
        for (int64_t j = 0; j < d4; j += 4) {
            const v4d v = load4(z + j);
            a += v * v;
        }
        double s = (a[0] + a[1]) + (a[2] + a[3]);
        for (int64_t j = d4; j < d; ++j) s += z[j] * z[j];
        return s;
    }
    double operator()(int64_t i, double* z) const {
        const int64_t d = p.d, d4 = d & ~int64_t(3);
        const T* row = x + i * p.rs;
        for (int64_t j = 0; j < d; ++j) z[j] = (double)row[j * p.cs];
        if (p.lo) {
            for (int64_t j = 0; j < d4; j += 4) {
                v4d v = load4(z + j);
                const v4d lo = load4(p.lo + j), hi = load4(p.hi + j);
                v = v < lo ? lo : v;
                v = v > hi ? hi : v;
                store4(z + j, v - load4(p.c + j));
            }
            for (int64_t j = d4; j < d; ++j) {
                double v = z[j];
                v = v < p.lo[j] ? p.lo[j] : v;
                v = v > p.hi[j] ? p.hi[j] : v;
                z[j] = v - p.c[j];
            }
        } else {
            for (int64_t j = 0; j < d4; j += 4) store4(z + j, load4(z + j) - load4(p.c + j));
            for (int64_t j = d4; j < d; ++j) z[j] = z[j] - p.c[j];
        }
        const double R = p.R;
        const double sv = lanes_sq(z, d);
        if (!(sv <= thr_sq)) {  // undecided (or NaN): the sequential sum, as the definition
            double sq = 0.0;
            for (int64_t j = 0; j < d; ++j) sq += z[j] * z[j];
            if (!(sq <= R * R)) {
                bool inf = false;
                for (int64_t j = 0; j < d; ++j) inf |= std::isinf(z[j]);
                if (inf)
                    for (int64_t j = 0; j < d; ++j) z[j] = std::isinf(z[j]) ? (z[j] > 0 ? 1.0 : -1.0) : 0.0;
                double mx = 0.0;
                for (int64_t j = 0; j < d; ++j) mx = std::max(mx, std::fabs(z[j]));
                for (int64_t j = 0; j < d; ++j) z[j] /= mx;
                double s2 = 0.0;
                for (int64_t j = 0; j < d; ++j) s2 += z[j] * z[j];
                const double nrm = std::sqrt(s2);
                for (int64_t j = 0; j < d; ++j) z[j] = (z[j] / nrm) * R;
            }
        }
        const v4d vR = splat4(R);
        for (int64_t j = 0; j < d4; j += 4) store4(z + j, load4(z + j) / vR);
        for (int64_t j = d4; j < d; ++j) z[j] /= R;
        const double nv = lanes_sq(z, d);
        if (!(nv <= thr_nu)) {
            double nu = 0.0;
            for (int64_t j = 0; j < d; ++j) nu += z[j] * z[j];
            if (nu > 1.0) {
                const double s = std::nextafter(std::sqrt(nu), INFINITY);
                for (int64_t j = 0; j < d; ++j) z[j] /= s;
            }
        }
        z[d] = 1.0;
        return 1.0;
    }
};

// SSP's row map: z = (row, y_i), weight w_i (or 1).
template <class T>
struct SspMap {
    const SspParams& p;
    const T* x;
    bool weighted() const { return p.w != nullptr; }
    double operator()(int64_t i, double* z) const {
        const T* row = x + i * p.rs;
        for (int64_t j = 0; j < p.d; ++j) z[j] = (double)row[j * p.cs];
        z[p.d] = p.y[i];
        return p.w ? p.w[i] : 1.0;
    }
};

template <class T>
std::vector<__int128> pca_gram(const PcaParams& p, const T* x) {
    const std::vector<int> e(p.d + 1, 0);  // unit rows and the trailing 1: P = 1
    return gram(p.n, p.d, p.threads, e.data(), PcaMap<T>(p, x));
}

template <class T>
std::vector<__int128> ssp_gram(const SspParams& p, const T* x) {
    return gram(p.n, p.d, p.threads, p.e, SspMap<T>{p, x});
}

// ----------------------------------------------------------------------------- k-means step
// label_i = argmin_g ||u_i - c_g||^2 (ties: the lowest g); per cluster: count and the EXACT
// fixed-point sum (stats.hpp "fixed-point grid", bound 1: q(t) = round(t 2^50)) of u_i clamped to
// [-1, 1] (the unit rows the releases pass are in [-1, 1] already: the clamp only keeps the grid's
// bound for any input).  kFixedBlock rows at a time into uint64 accumulators, folded into the
// chunk's __int128 sums with each cluster's number of rows in the block.
template <class T>
void kmeans_chunk(const KMeansParams& p, const T* x, int64_t r0, int64_t r1, __int128* sums, int64_t* cnt,
                  std::vector<double>& row) {
    const int64_t d = p.d, K = p.k;
    const double S = std::ldexp(1.0, kFixedBits);
    std::vector<uint64_t> q(sums ? K * d : 0);
    std::vector<int64_t> m(sums ? K : 0);
    for (int64_t b = r0; b < r1; b += kFixedBlock) {
        const int64_t e = std::min(r1, b + kFixedBlock);
        std::fill(q.begin(), q.end(), 0);
        std::fill(m.begin(), m.end(), 0);
        for (int64_t i = b; i < e; ++i) {
            const T* src = x + i * p.rs;
            for (int64_t j = 0; j < d; ++j) row[j] = (double)src[j * p.cs];
            int64_t best = 0;
            double bd = INFINITY;
            for (int64_t g = 0; g < K; ++g) {
                const double* cg = p.C + g * d;
                double s = 0.0;
                for (int64_t j = 0; j < d; ++j) {
                    const double t = row[j] - cg[j];
                    s += t * t;
                }
                if (s < bd) {
                    bd = s;
                    best = g;
                }
            }
            if (p.labels) p.labels[i] = best;
            if (sums) {
                m[best] += 1;
                uint64_t* a = q.data() + best * d;
                for (int64_t j = 0; j < d; ++j) {
                    double u = row[j] < -1.0 ? -1.0 : row[j];
                    u = u > 1.0 ? 1.0 : u;
                    a[j] += bits_of(u * S + kMagic);
                }
            }
        }
        if (sums)
            for (int64_t g = 0; g < K; ++g) {
                cnt[g] += m[g];
                for (int64_t j = 0; j < d; ++j) sums[g * d + j] += lane_sum(q[g * d + j], m[g]);
            }
    }
}

template <class T>
void kmeans_step(const KMeansParams& p, const T* x, KMeansResult& r) {
    const int64_t d = p.d, K = p.k, w = K * d;
    const Chunks ch = chunks(p.n, d * K, p.want_sums ? 3 * w + K : 0);
    Partials<__int128> sums(ch, p.want_sums ? w : 0);
    Partials<int64_t> cnt(ch, p.want_sums ? K : 0);
    for_chunks(ch, p.n, p.threads, [&](int64_t k, int64_t r0, int64_t r1) {
        std::vector<double> row(d);
        kmeans_chunk<T>(p, x, r0, r1, sums.at(k), cnt.at(k), row);
    });
    r.sums = sums.merged();
    r.cnt = cnt.merged();
}
