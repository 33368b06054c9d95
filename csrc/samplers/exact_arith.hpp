// Exact random primitives from uniform integers: integer-only arithmetic, no floating point.
//
// Canonne, Kamath & Steinke 2020 ("The Discrete Gaussian for Differential Privacy", CKS20),
// Algorithm 1: Bernoulli(exp(-gamma)) for a rational gamma = num/den, built from
// Bernoulli(p/q) = [uniform integer in [0, q) < p].  Every acceptance test in this file and
// in discrete.hpp is an integer comparison; the probabilities are exactly the stated ones
// given an ideal stream of uniform 64-bit words (docs/theory/mechanisms.rst,
// "Discrete Laplace and discrete Gaussian"; Canonne, Kamath & Steinke 2020).
//
// Integers: unsigned __int128 (GCC/Clang) for rationals up to 2^127 and a tiny 256-bit
// accumulator for gamma = a^2 / b in the discrete Gaussian's acceptance step.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "parallel.hpp"
#include "random/bitstream.hpp"
#include "random/chacha20.hpp"

namespace dpf {

using u128 = unsigned __int128;

// 256-bit unsigned, just enough for gamma's numerator a^2 (a < 2^128) compared with and
// reduced by a 128-bit denominator.
struct U256 {
    u128 hi, lo;
};

inline U256 square_u128(u128 a) {
    const uint64_t a0 = static_cast<uint64_t>(a), a1 = static_cast<uint64_t>(a >> 64);
    const u128 p00 = (u128)a0 * a0, p01 = (u128)a0 * a1, p11 = (u128)a1 * a1;
    U256 r{p11, p00};
    for (int rep = 0; rep < 2; ++rep) {  // + 2 * p01 * 2^64
        const u128 add_lo = p01 << 64, add_hi = p01 >> 64;
        const u128 lo = r.lo + add_lo;
        r.hi += add_hi + (lo < r.lo ? 1 : 0);
        r.lo = lo;
    }
    return r;
}
inline bool ge_u128(const U256& a, u128 b) { return a.hi != 0 || a.lo >= b; }
inline void sub_u128(U256& a, u128 b) {
    if (a.lo < b) --a.hi;
    a.lo -= b;
}

// Sources of uniform 64-bit words for ExactRngT: NumPy's bit generator (BitStream) or a
// private ChaCha20 keystream (inlined: no indirect call per word).
struct ChaChaWords {
    ChaCha20Stream s;
    uint64_t u64() { return s.next_u64(); }
};

// Uniform integers and Bernoulli trials from a word source.  Caches half-words and single
// bits so that small draws do not spend a whole 64-bit word (deterministic: the same words
// always give the same draws).
template <class Words>
struct ExactRngT {
    Words bs;
    uint64_t bitbuf = 0;
    int nbits = 0;
    uint32_t halfbuf = 0;
    bool has_half = false;

    explicit ExactRngT(const Words& w) : bs(w) {}

    uint64_t u64() { return bs.u64(); }
    uint32_t u32() {
        if (has_half) {
            has_half = false;
            return halfbuf;
        }
        const uint64_t w = bs.u64();
        halfbuf = static_cast<uint32_t>(w >> 32);
        has_half = true;
        return static_cast<uint32_t>(w);
    }
    bool bit() {
        if (nbits == 0) {
            bitbuf = bs.u64();
            nbits = 64;
        }
        const bool b = bitbuf & 1u;
        bitbuf >>= 1;
        --nbits;
        return b;
    }
    // Uniform in [0, n), n >= 1 (Lemire 2019 multiply-and-reject: exact, no modulo bias).
    uint32_t below32(uint32_t n) {
        uint64_t m = (uint64_t)u32() * n;
        uint32_t l = static_cast<uint32_t>(m);
        if (l < n) {
            const uint32_t t = (0u - n) % n;
            while (l < t) {
                m = (uint64_t)u32() * n;
                l = static_cast<uint32_t>(m);
            }
        }
        return static_cast<uint32_t>(m >> 32);
    }
    uint64_t below64(uint64_t n) {
        if (n <= 0xFFFFFFFFull) return below32(static_cast<uint32_t>(n));
        u128 m = (u128)u64() * n;
        uint64_t l = static_cast<uint64_t>(m);
        if (l < n) {
            const uint64_t t = (0 - n) % n;
            while (l < t) {
                m = (u128)u64() * n;
                l = static_cast<uint64_t>(m);
            }
        }
        return static_cast<uint64_t>(m >> 64);
    }
    // Uniform in [0, n), n >= 1, by masking to n's bit length and rejecting (< 2 tries on average).
    u128 below128(u128 n) {
        const uint64_t nhi = static_cast<uint64_t>(n >> 64);
        if (nhi == 0) return below64(static_cast<uint64_t>(n));
        const u128 top = n - 1;  // >= 2^64 - 1
        const uint64_t thi = static_cast<uint64_t>(top >> 64);
        // n = 2^64 exactly (e.g. den 2^63 times K = 2 in bernoulli_div) leaves thi = 0: the high
        // word is then 0 and every draw is accepted.  __builtin_clzll(0) is undefined (it hung
        // discrete_laplace at scale t/s with t = 2^63: the mask came out all ones).
        const uint64_t mask = thi == 0 ? 0 : ((~0ull) >> __builtin_clzll(thi));
        for (;;) {
            const uint64_t hi = u64() & mask, lo = u64();
            const u128 x = ((u128)hi << 64) | lo;
            if (x < n) return x;
        }
    }
    // Bernoulli(num / den), 0 <= num <= den, den >= 1.
    bool bernoulli(u128 num, u128 den) {
        if (num == 0) return false;
        if (num >= den) return true;
        return below128(den) < num;
    }
    // Bernoulli(num / (den * k)) without overflow: the product of Bernoulli(num/den) and
    // Bernoulli(1/k) when den * k would not fit (same probability, independent draws).
    bool bernoulli_div(u128 num, u128 den, uint64_t k) {
        u128 prod;
        if (!__builtin_mul_overflow(den, (u128)k, &prod)) return bernoulli(num, prod);
        return bernoulli(num, den) && below64(k) == 0;
    }

    // CKS20 Algorithm 1, gamma = num/den in [0, 1]: K = 1; while Bernoulli(gamma/K): K += 1;
    // return [K odd].  P(true) = exp(-gamma) exactly.
    bool bern_exp_le1(u128 num, u128 den) {
        if (num == 0) return true;
        uint64_t k = 1;
        while (bernoulli_div(num, den, k)) ++k;
        return (k & 1u) != 0;
    }
    // Bernoulli(exp(-1)): the gamma = 1 case, where Bernoulli(1/K) is [uniform in [0,K) == 0].
    bool bern_exp1() {
        uint64_t k = 2;  // the K = 1 trial is Bernoulli(1): always passes, costs nothing
        while (below64(k) == 0) ++k;
        return (k & 1u) != 0;
    }
    // CKS20 Algorithm 1, gamma = num/den >= 0 with a 256-bit numerator: floor(gamma) trials of
    // Bernoulli(exp(-1)) (stop at the first failure), then Bernoulli(exp(-frac(gamma))).
    // The integer part is peeled off by subtraction, so no division is needed and a huge
    // gamma costs only the (geometrically few) trials actually drawn.
    bool bern_exp(U256 num, u128 den) {
        while (ge_u128(num, den)) {
            if (!bern_exp1()) return false;
            sub_u128(num, den);
        }
        return bern_exp_le1(num.lo, den);
    }
    bool bern_exp(u128 num, u128 den) { return bern_exp(U256{0, num}, den); }
};

using ExactRng = ExactRngT<BitStream>;
using FastExactRng = ExactRngT<ChaChaWords>;

// Block-parallel driver shared by the exact kernels.  Output index i belongs to block
// i / kExactBlock; block b draws from its own ChaCha20 keystream whose 256-bit key is taken,
// in block order and in the calling thread, from the caller's bit generator (4 words per
// block).  So the result depends only on the generator's state -- not on n_threads -- and a
// SecureRandom caller gets ChaCha20 streams keyed by ChaCha20 output.  Workers never touch
// the caller's bitgen_t.  fn(FastExactRng&, begin, end) fills [begin, end).
constexpr std::size_t kExactBlock = std::size_t(1) << 14;

template <class Fn>
void run_exact_blocks(bitgen_t* bg, std::size_t n, int n_threads, Fn fn) {
    const std::size_t nb = (n + kExactBlock - 1) / kExactBlock;
    std::vector<uint32_t> keys(nb * 8);
    BitStream src(bg);
    for (std::size_t i = 0; i < nb * 4; ++i) {
        const uint64_t w = src.u64();
        keys[2 * i] = static_cast<uint32_t>(w);
        keys[2 * i + 1] = static_cast<uint32_t>(w >> 32);
    }
    // the fork-join of every kernel (csrc/parallel.hpp): block b writes only [b * kExactBlock, ...)
    run_chunks(static_cast<int64_t>(nb), n_threads < 1 ? 1 : n_threads, [&](int64_t b) {
        ChaChaWords w;
        w.s.seed(&keys[8 * b], 0, 0);
        FastExactRng r(w);
        const std::size_t lo = static_cast<std::size_t>(b) * kExactBlock;
        const std::size_t hi = lo + kExactBlock < n ? lo + kExactBlock : n;
        fn(r, lo, hi);
    });
}

}  // namespace dpf
