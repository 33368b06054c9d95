// Philox4x32-10 (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as easy as 1, 2, 3",
// SC'11) as a counter-based word stream, and the keyed Gaussian noise fill built on it.
//
// The stream.  A key K = (k0, k1, s0, s1) of 128 bits: the 64-bit Philox key (k0, k1) and a
// 64-bit stream id (s0, s1) in the upper half of the 128-bit counter.  Word i (i = 0, 1, ...) is
// half i % 2 of the Philox4x32-10 block of counter (lo32(i/2), hi32(i/2), s0, s1) under key
// (k0, k1): word 2b = x0 | x1 << 32, word 2b + 1 = x2 | x3 << 32 for the block (x0, x1, x2, x3).
// So word i is a function of (K, i) alone: any range of words can be computed by any thread, and
// the AVX2 kernel (4 blocks per vector, 16 per iteration) gives the same words as the scalar one
// (tests/test_random_philox.py: Random123's known-answer vectors and the two kernels compared).
//
// The keyed normal fill (add_normal_philox): out = (x + scale * N(0, 1)) * fl(1 / divisor) (in
// double, rounded once to the output type) over a list of arrays taken as ONE sequence of N outputs
// (array 0 first).  Output j is the ziggurat of
// random/distributions.hpp on word j (the same branch-free fast path as the NumPy-stream fill,
// noise_fill.hpp); the outputs whose word the fast path rejects (about 1.2%) are then finished in
// increasing j, each continuing the ziggurat from its own word with words N, N + 1, ... of the
// same stream.  So the output is a function of (K, the sizes, the inputs) alone -- never of the
// number of threads, which split [0, N) into contiguous ranges, each generating its own words.
// The law is exactly that of dpfast's normal sampler (the ziggurat is exact for any stream of
// independent uniform words); what changes is only where the words come from.
#pragma once
#include <algorithm>
#include <atomic>
#include <memory>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "portable.hpp"
#include "random/bitstream.hpp"
#include "random/distributions.hpp"

#if defined(DPF_HAVE_AVX2_DISPATCH)
#include <immintrin.h>
#endif

namespace dpf {

struct PhiloxKey {
    uint32_t k0, k1, s0, s1;
};

constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

// One Philox4x32-10 block (Random123's philox4x32 with R = 10).
inline void philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                          uint32_t out[4]) {
    for (int r = 0; r < 10; ++r) {
        const uint64_t p0 = uint64_t(kPhiloxM0) * c0, p1 = uint64_t(kPhiloxM1) * c2;
        const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
        c1 = uint32_t(p1);
        c3 = uint32_t(p0);
        c0 = n0;
        c2 = n2;
        k0 += kPhiloxW0;
        k1 += kPhiloxW1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

// The two words of block b.
inline void philox_block_words(const PhiloxKey& k, uint64_t b, uint64_t w[2]) {
    uint32_t x[4];
    philox4x32_10(uint32_t(b), uint32_t(b >> 32), k.s0, k.s1, k.k0, k.k1, x);
    w[0] = x[0] | (uint64_t(x[1]) << 32);
    w[1] = x[2] | (uint64_t(x[3]) << 32);
}

// Words [first, first + n) into out, one block at a time.
inline void philox_words_scalar(const PhiloxKey& k, uint64_t first, uint64_t* out, std::size_t n) {
    std::size_t j = 0;
    uint64_t w[2];
    if (n && (first & 1)) {
        philox_block_words(k, first >> 1, w);
        out[j++] = w[1];
    }
    for (; j + 2 <= n; j += 2) philox_block_words(k, (first + j) >> 1, out + j);
    if (j < n) {
        philox_block_words(k, (first + j) >> 1, w);
        out[j] = w[0];
    }
}

// The fast path of the normal ziggurat on words w[0..len) into outputs lo..lo+len-1:
// out[i] = T((x[i] + sc d_i) rm) (T((sc d_i) rm) without x), the operations in double, each
// rounded once (no FMA: -ffp-contract=off), then rounded once to T -- with rm = 1 exactly the
// outputs of transform_run<T, NormalDist, HasX, false> (noise_fill.hpp).  (rm = fl(1 / divisor):
// a product, as a division costs more than the rest of the transform.)  Rejected outputs keep x
// (or an arbitrary value without x); their positions go to rej, in order.
template <class T, bool HasX>
inline uint32_t normal_run_scalar(const NormalZiggurat& z, const uint64_t* w, const T* x, double sc, double rm,
                                  T* out, std::size_t lo, std::size_t len, uint32_t* rej) {
    uint32_t nr = 0;
    for (std::size_t j = 0; j < len; ++j) {
        const std::size_t i = lo + j;
        double d;
        const bool ok = normal_fast_branchless(z, w[j], d);
        if (HasX) {
            const T xi = x[i];
            const T v = static_cast<T>((static_cast<double>(xi) + sc * d) * rm);
            out[i] = ok ? v : xi;
        } else {
            out[i] = static_cast<T>((sc * d) * rm);
        }
        rej[nr] = static_cast<uint32_t>(j);
        nr += ok ? 0u : 1u;
    }
    return nr;
}

#if defined(DPF_HAVE_AVX2_DISPATCH)
DPF_PRAGMA(GCC push_options)
DPF_PRAGMA(GCC target("avx2"))
// Blocks [b, b + nb) (nb a multiple of 16) -> words 2b .. 2(b + nb) - 1: 16 blocks per iteration,
// 4 per vector (one 64-bit lane each, the 32-bit state words zero-extended), as the scalar block.
inline void philox_blocks_avx2(const PhiloxKey& k, uint64_t b, std::size_t nb, uint64_t* out) {
    constexpr int G = 4;
    const __m256i M0 = _mm256_set1_epi64x(kPhiloxM0), M1 = _mm256_set1_epi64x(kPhiloxM1);
    const __m256i LO = _mm256_set1_epi64x(0xffffffffLL);
    const __m256i S0 = _mm256_set1_epi64x(k.s0), S1 = _mm256_set1_epi64x(k.s1);
    const __m256i LANE = _mm256_set_epi64x(3, 2, 1, 0);
    for (std::size_t i = 0; i < nb; i += 4 * G) {
        __m256i c0[G], c1[G], c2[G], c3[G];
        for (int g = 0; g < G; ++g) {
            const __m256i ctr = _mm256_add_epi64(_mm256_set1_epi64x((long long)(b + i + 4 * g)), LANE);
            c0[g] = _mm256_and_si256(ctr, LO);
            c1[g] = _mm256_srli_epi64(ctr, 32);
            c2[g] = S0;
            c3[g] = S1;
        }
        uint32_t k0 = k.k0, k1 = k.k1;
        for (int r = 0; r < 10; ++r) {
            const __m256i K0 = _mm256_set1_epi64x(k0), K1 = _mm256_set1_epi64x(k1);
            for (int g = 0; g < G; ++g) {
                const __m256i p0 = _mm256_mul_epu32(c0[g], M0), p1 = _mm256_mul_epu32(c2[g], M1);
                const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1[g]), K0);
                const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3[g]), K1);
                c1[g] = _mm256_and_si256(p1, LO);
                c3[g] = _mm256_and_si256(p0, LO);
                c0[g] = n0;
                c2[g] = n2;
            }
            k0 += kPhiloxW0;
            k1 += kPhiloxW1;
        }
        for (int g = 0; g < G; ++g) {
            const __m256i w0 = _mm256_or_si256(c0[g], _mm256_slli_epi64(c1[g], 32));
            const __m256i w1 = _mm256_or_si256(c2[g], _mm256_slli_epi64(c3[g], 32));
            const __m256i lo = _mm256_unpacklo_epi64(w0, w1);  // blocks 0, 2 of the vector
            const __m256i hi = _mm256_unpackhi_epi64(w0, w1);  // blocks 1, 3
            uint64_t* o = out + 2 * (i + 4 * g);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm256_permute2x128_si256(lo, hi, 0x20));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 4), _mm256_permute2x128_si256(lo, hi, 0x31));
        }
    }
}

// normal_run_scalar, 4 words per vector, bit for bit: the same table look-ups, the exact
// integer-to-double conversion (rabs < 2^52: the bits of 2^52 + rabs, minus 2^52), the same IEEE
// product, sign flip, (x + sc d) as a product then a sum (no FMA: this function is compiled for
// AVX2 without FMA), the product by rm, and the same rounding to T.  Rejected outputs keep x (or an
// arbitrary value without x); their positions go to rej, in order.
template <class T, bool HasX>
inline uint32_t normal_run_avx2(const NormalZiggurat& z, const uint64_t* w, const T* x, double sc, double rm,
                                T* out, std::size_t lo, std::size_t len, uint32_t* rej) {
    const __m256i B8 = _mm256_set1_epi64x(0xff), M52 = _mm256_set1_epi64x(0x000fffffffffffffLL);
    const __m256i SIGN = _mm256_set1_epi64x(0x100), MAGIC = _mm256_set1_epi64x(0x4330000000000000LL);
    const __m256d TWO52 = _mm256_set1_pd(0x1.0p52), SC = _mm256_set1_pd(sc), RM = _mm256_set1_pd(rm);
    const __m256i PACK = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
    const long long* kt = reinterpret_cast<const long long*>(z.k);
    uint32_t nr = 0;
    std::size_t j = 0;
    for (; j + 4 <= len; j += 4) {
        const __m256i W = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + j));
        const __m256i idx = _mm256_and_si256(W, B8);
        const __m256i rabs = _mm256_and_si256(_mm256_srli_epi64(W, 9), M52);
        const __m256i K = _mm256_i64gather_epi64(kt, idx, 8);
        const __m256d Wd = _mm256_i64gather_pd(z.w, idx, 8);
        const __m256d xd = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(rabs, MAGIC)), TWO52);
        const __m256i sg = _mm256_slli_epi64(_mm256_and_si256(W, SIGN), 55);
        const __m256d d = _mm256_xor_pd(_mm256_mul_pd(xd, Wd), _mm256_castsi256_pd(sg));
        const __m256i ok = _mm256_cmpgt_epi64(K, rabs);  // both < 2^63: the unsigned rabs < k
        const std::size_t i = lo + j;
        if constexpr (std::is_same<T, float>::value) {
            __m128 r;
            if (HasX) {
                const __m128 xf = _mm_loadu_ps(x + i);
                const __m128 vf = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_add_pd(_mm256_cvtps_pd(xf), _mm256_mul_pd(SC, d)), RM));
                const __m128 m = _mm_castsi128_ps(_mm256_castsi256_si128(_mm256_permutevar8x32_epi32(ok, PACK)));
                r = _mm_blendv_ps(xf, vf, m);
            } else {
                r = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_mul_pd(SC, d), RM));
            }
            _mm_storeu_ps(out + i, r);
        } else {
            __m256d r;
            if (HasX) {
                const __m256d xv = _mm256_loadu_pd(x + i);
                r = _mm256_blendv_pd(xv, _mm256_mul_pd(_mm256_add_pd(xv, _mm256_mul_pd(SC, d)), RM), _mm256_castsi256_pd(ok));
            } else {
                r = _mm256_mul_pd(_mm256_mul_pd(SC, d), RM);
            }
            _mm256_storeu_pd(out + i, r);
        }
        unsigned bad = ~static_cast<unsigned>(_mm256_movemask_pd(_mm256_castsi256_pd(ok))) & 0xfu;
        while (bad) {
            rej[nr++] = static_cast<uint32_t>(j + __builtin_ctz(bad));
            bad &= bad - 1;
        }
    }
    if (j < len) {
        const uint32_t m = normal_run_scalar<T, HasX>(z, w + j, x, sc, rm, out, lo + j, len - j, rej + nr);
        for (uint32_t r = 0; r < m; ++r) rej[nr + r] += static_cast<uint32_t>(j);
        nr += m;
    }
    return nr;
}
DPF_PRAGMA(GCC pop_options)
#endif

// Whether the AVX2 kernel runs (DPFAST_NOISE_NO_AVX2=1: the scalar one, for the tests).
inline bool philox_avx2() {
    static const bool on = avx2_enabled("DPFAST_NOISE_NO_AVX2");
    return on;
}

// Words [first, first + n) into out (the same words whichever kernel runs).
inline void philox_words(const PhiloxKey& k, uint64_t first, uint64_t* out, std::size_t n) {
#if defined(DPF_HAVE_AVX2_DISPATCH)
    if (philox_avx2() && n >= 40) {
        std::size_t j = 0;
        if (first & 1) {
            philox_words_scalar(k, first, out, 1);
            j = 1;
        }
        const std::size_t nb = ((n - j) / 2) / 16 * 16;
        if (nb) philox_blocks_avx2(k, (first + j) >> 1, nb, out + j);
        j += 2 * nb;
        if (j < n) philox_words_scalar(k, first + j, out + j, n - j);
        return;
    }
#endif
    philox_words_scalar(k, first, out, n);
}

// A NumPy bitgen_t over the stream from word `first` on (words computed 64 at a time): the
// ziggurat's slow path draws its extra words through the BitStream interface.
struct PhiloxBitgen {
    static constexpr std::size_t kBuf = 64;
    bitgen_t bg;
    PhiloxKey key;
    uint64_t next;  // stream index of buf[0]
    std::size_t pos;
    uint64_t buf[kBuf];

    PhiloxBitgen(const PhiloxKey& k, uint64_t first) : key(k), next(first), pos(kBuf) {
        bg.state = this;
        bg.next_uint64 = &u64;
        bg.next_uint32 = &u32;
        bg.next_double = &dbl;
        bg.next_raw = &u64;
        next -= kBuf;  // the first draw refills from `first`
    }
    PhiloxBitgen(const PhiloxBitgen&) = delete;
    PhiloxBitgen& operator=(const PhiloxBitgen&) = delete;

    uint64_t draw() {
        if (pos == kBuf) {
            next += kBuf;
            philox_words(key, next, buf, kBuf);
            pos = 0;
        }
        return buf[pos++];
    }
    static uint64_t u64(void* s) { return static_cast<PhiloxBitgen*>(s)->draw(); }
    static uint32_t u32(void* s) { return static_cast<uint32_t>(static_cast<PhiloxBitgen*>(s)->draw() >> 32); }
    static double dbl(void* s) { return (static_cast<PhiloxBitgen*>(s)->draw() >> 11) * 0x1.0p-53; }
};

// One array of the keyed fill: out = x + scale * noise (x == nullptr: scale * noise; x may be out).
template <class T>
struct NoiseSegment {
    T* out;
    const T* x;
    std::size_t n;
};

// The fill runs in one thread below this many outputs (thread start-up costs more than it saves).
constexpr std::size_t kPhiloxParallelMin = std::size_t(1) << 15;
// The work unit of the parallel fill (outputs; even).
constexpr std::size_t kPhiloxChunk = std::size_t(1) << 13;

template <class T>
void add_normal_philox(const PhiloxKey& key, const std::vector<NoiseSegment<T>>& segs, double scale, double divisor,
                       int n_threads) {
    std::vector<std::size_t> offs(segs.size() + 1, 0);  // global index of each segment's first output
    for (std::size_t s = 0; s < segs.size(); ++s) offs[s + 1] = offs[s] + segs[s].n;
    const std::size_t total = offs.back();
    if (total == 0) return;
    const NormalDist dist;
    const double rm = 1.0 / divisor;  // (exactly 1 for divisor 1)
    const bool avx2 = philox_avx2();
    (void)avx2;
    struct Rej {
        std::size_t seg, i;
        uint64_t w;
    };
    // Outputs [lo, hi) (global): words, fast path, and the rejected (segment, index, word) in order.
    auto run_range = [&](std::size_t lo, std::size_t hi, std::vector<Rej>& rej) {
        constexpr std::size_t kRun = 512;
        alignas(64) uint64_t buf[kRun];
        uint32_t rj[kRun];
        std::size_t s = std::upper_bound(offs.begin(), offs.end(), lo) - offs.begin() - 1;
        for (std::size_t g = lo; g < hi && s < segs.size();) {
            const NoiseSegment<T>& seg = segs[s];
            const std::size_t seg_hi = std::min(hi, offs[s + 1]);
            while (g < seg_hi) {
                const std::size_t len = std::min(kRun, seg_hi - g);
                const std::size_t i0 = g - offs[s];
                philox_words(key, g, buf, len);
                uint32_t nr;
#if defined(DPF_HAVE_AVX2_DISPATCH)
                if (avx2) {
                    nr = seg.x ? normal_run_avx2<T, true>(*dist.z, buf, seg.x, scale, rm, seg.out, i0, len, rj)
                               : normal_run_avx2<T, false>(*dist.z, buf, seg.x, scale, rm, seg.out, i0, len, rj);
                } else
#endif
                if (seg.x)
                    nr = normal_run_scalar<T, true>(*dist.z, buf, seg.x, scale, rm, seg.out, i0, len, rj);
                else
                    nr = normal_run_scalar<T, false>(*dist.z, buf, seg.x, scale, rm, seg.out, i0, len, rj);
                for (uint32_t r = 0; r < nr; ++r) rej.push_back({s, i0 + rj[r], buf[rj[r]]});
                g += len;
            }
            ++s;
        }
    };
    // fix-ups: increasing global index, with words total, total + 1, ... of the stream
    PhiloxBitgen pb(key, total);
    BitStream rs(&pb.bg);
    auto fixups = [&](const std::vector<Rej>& rv) {
        for (const Rej& r : rv) {
            const NoiseSegment<T>& seg = segs[r.seg];
            const double d = dist.slow(r.w, rs);
            seg.out[r.i] = seg.x ? static_cast<T>((static_cast<double>(seg.x[r.i]) + scale * d) * rm)
                                 : static_cast<T>((scale * d) * rm);
        }
    };
    int nt = std::max(1, std::min(n_threads, 64));
    if (total < kPhiloxParallelMin) nt = 1;
    if (nt == 1) {
        std::vector<Rej> rej;
        rej.reserve(total / 64 + 16);
        run_range(0, total, rej);
        fixups(rej);
        return;
    }
    // Chunks of kPhiloxChunk outputs (even: block boundaries), claimed from an atomic counter by
    // the calling thread and by nt - 1 detached helpers.  The caller never waits for a helper to
    // START: it takes every chunk left, then waits only for the chunks a helper has claimed and is
    // transforming (a few microseconds each).  A helper that the OS schedules late (2 busy cores,
    // torch's spinning OpenMP workers) finds no chunk left and exits without touching the
    // caller's memory; the claim state it reads lives in a shared_ptr it co-owns.  The rejected
    // words are kept per chunk and fixed up in chunk order, so the output is the same for any
    // thread count and any schedule.
    const std::size_t nchunks = (total + kPhiloxChunk - 1) / kPhiloxChunk;
    struct Claims {
        std::atomic<std::size_t> next{0};
        std::atomic<std::size_t> done{0};
        std::size_t n = 0;
    };
    auto claims = std::make_shared<Claims>();
    claims->n = nchunks;
    std::vector<std::vector<Rej>> rejs(nchunks);
    std::vector<char> failed(nchunks, 0);  // a helper's chunk that threw (bad_alloc): redone here
    // chunk k (claimed): only ever called while the caller waits in this function
    auto chunk = [&](std::size_t k) noexcept {
        try {
            rejs[k].reserve(kPhiloxChunk / 32);
            run_range(k * kPhiloxChunk, std::min(total, (k + 1) * kPhiloxChunk), rejs[k]);
        } catch (...) {
            rejs[k].clear();
            failed[k] = 1;
        }
    };
    for (int t = 1; t < nt; ++t) {
        try {
            // The helper reads only `claims` (co-owned) until it has claimed a chunk; `chunk`'s
            // captures are alive then, since the caller waits for every claimed chunk to be done.
            std::thread([claims, &chunk]() {
                for (;;) {
                    const std::size_t k = claims->next.fetch_add(1, std::memory_order_acq_rel);
                    if (k >= claims->n) return;
                    chunk(k);
                    claims->done.fetch_add(1, std::memory_order_acq_rel);
                }
            }).detach();
        } catch (...) {
            break;  // fewer threads: same output
        }
    }
    for (;;) {
        const std::size_t k = claims->next.fetch_add(1, std::memory_order_acq_rel);
        if (k >= nchunks) break;
        chunk(k);
        claims->done.fetch_add(1, std::memory_order_acq_rel);
    }
    while (claims->done.load(std::memory_order_acquire) < nchunks) std::this_thread::yield();
    for (std::size_t k = 0; k < nchunks; ++k) {
        if (failed[k]) {  // (here an exception propagates to the caller: nothing else runs now)
            rejs[k].clear();
            run_range(k * kPhiloxChunk, std::min(total, (k + 1) * kPhiloxChunk), rejs[k]);
        }
    }
    for (const auto& rv : rejs) fixups(rv);
}

}  // namespace dpf
