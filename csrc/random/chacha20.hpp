// ChaCha20 block function (RFC 8439, section 2.3) and a keystream of 64-bit words.
//
// The block function is exactly the RFC's: 20 rounds (10 column + 10 diagonal) over the
// 16-word state, then the input state is added word-wise.  The keystream uses the original
// (Bernstein) layout of the last four words: a 64-bit block counter in words 12-13 and a
// 64-bit nonce in words 14-15, so a stream never wraps after 2^32 blocks (256 GiB) as the
// RFC's 32-bit counter would.  Both layouts run the same block function, which is what the
// RFC's test vectors check.
//
// Speed: the keystream computes four consecutive blocks at once (`chacha20_blocks4`), one
// block per SIMD lane: with GCC/Clang vector extensions each 32-bit state word becomes a
// 4-lane vector, which compiles to SSE2 on any x86-64 (NEON on aarch64) without
// -march=native.  The stream output is identical to calling the one-block function on
// counters c, c+1, c+2, c+3 in turn (tested).
#pragma once
#include <cstdint>
#include <cstring>

namespace dpf {

inline uint32_t rotl32(uint32_t v, int c) { return (v << c) | (v >> (32 - c)); }

#define DPF_CHACHA_QR(a, b, c, d)            \
    a += b; d ^= a; d = rotl32(d, 16);       \
    c += d; b ^= c; b = rotl32(b, 12);       \
    a += b; d ^= a; d = rotl32(d, 8);        \
    c += d; b ^= c; b = rotl32(b, 7);

// out = ChaCha20 block of `in` (16 words, RFC 8439 section 2.3).
inline void chacha20_block(const uint32_t in[16], uint32_t out[16]) {
    uint32_t x[16];
    std::memcpy(x, in, sizeof(x));
    for (int i = 0; i < 10; ++i) {
        DPF_CHACHA_QR(x[0], x[4], x[8], x[12]);
        DPF_CHACHA_QR(x[1], x[5], x[9], x[13]);
        DPF_CHACHA_QR(x[2], x[6], x[10], x[14]);
        DPF_CHACHA_QR(x[3], x[7], x[11], x[15]);
        DPF_CHACHA_QR(x[0], x[5], x[10], x[15]);
        DPF_CHACHA_QR(x[1], x[6], x[11], x[12]);
        DPF_CHACHA_QR(x[2], x[7], x[8], x[13]);
        DPF_CHACHA_QR(x[3], x[4], x[9], x[14]);
    }
    for (int i = 0; i < 16; ++i) out[i] = x[i] + in[i];
}

// Four consecutive blocks in the Bernstein layout: block j (0..3) is the block function of
// `in` with its 64-bit counter (words 12-13) advanced by j.  out[16*j + i] = word i of block j.
#if defined(__GNUC__) || defined(__clang__)
typedef uint32_t dpf_v4u32 __attribute__((vector_size(16)));

static inline dpf_v4u32 dpf_rotl_v4(dpf_v4u32 v, int c) { return (v << c) | (v >> (32 - c)); }

#define DPF_CHACHA_QR4(a, b, c, d)                \
    a += b; d ^= a; d = dpf_rotl_v4(d, 16);       \
    c += d; b ^= c; b = dpf_rotl_v4(b, 12);       \
    a += b; d ^= a; d = dpf_rotl_v4(d, 8);        \
    c += d; b ^= c; b = dpf_rotl_v4(b, 7);

inline void chacha20_blocks4(const uint32_t in[16], uint32_t out[64]) {
    const uint64_t c0 = (uint64_t(in[13]) << 32) | in[12];
    dpf_v4u32 lo = {}, hi = {};  // the four 64-bit counters c0 .. c0 + 3, split in words
    for (int j = 0; j < 4; ++j) {
        const uint64_t c = c0 + uint64_t(j);
        lo[j] = static_cast<uint32_t>(c);
        hi[j] = static_cast<uint32_t>(c >> 32);
    }
    dpf_v4u32 x[16];
    for (int i = 0; i < 16; ++i) x[i] = dpf_v4u32{} + in[i];  // broadcast
    x[12] = lo;
    x[13] = hi;
    for (int r = 0; r < 10; ++r) {
        DPF_CHACHA_QR4(x[0], x[4], x[8], x[12]);
        DPF_CHACHA_QR4(x[1], x[5], x[9], x[13]);
        DPF_CHACHA_QR4(x[2], x[6], x[10], x[14]);
        DPF_CHACHA_QR4(x[3], x[7], x[11], x[15]);
        DPF_CHACHA_QR4(x[0], x[5], x[10], x[15]);
        DPF_CHACHA_QR4(x[1], x[6], x[11], x[12]);
        DPF_CHACHA_QR4(x[2], x[7], x[8], x[13]);
        DPF_CHACHA_QR4(x[3], x[4], x[9], x[14]);
    }
    for (int i = 0; i < 16; ++i)
        if (i != 12 && i != 13) x[i] += in[i];
    x[12] += lo;
    x[13] += hi;
    for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 16; ++i) out[16 * j + i] = x[i][j];
}
#undef DPF_CHACHA_QR4
#else
inline void chacha20_blocks4(const uint32_t in[16], uint32_t out[64]) {
    uint32_t st[16];
    std::memcpy(st, in, sizeof(st));
    uint64_t c = (uint64_t(in[13]) << 32) | in[12];
    for (int j = 0; j < 4; ++j, ++c) {
        st[12] = static_cast<uint32_t>(c);
        st[13] = static_cast<uint32_t>(c >> 32);
        chacha20_block(st, out + 16 * j);
    }
}
#endif
#undef DPF_CHACHA_QR

// Keystream of 64-bit little-endian words.  Plain data (no pointers) so that NumPy can
// pickle/copy it through the BitGenerator state dict.  `input` holds the counter of the
// next block to compute; `buf` holds four computed blocks (32 words of 64 bits).
struct ChaCha20Stream {
    static constexpr int kWords = 32;  // 64-bit words per refill (4 blocks)
    uint32_t input[16];
    uint32_t buf[64];
    int pos;  // next unused 64-bit word of `buf` (0..32); 32 means exhausted

    void seed(const uint32_t key[8], uint64_t nonce, uint64_t counter) {
        input[0] = 0x61707865u; input[1] = 0x3320646eu; input[2] = 0x79622d32u; input[3] = 0x6b206574u;
        for (int i = 0; i < 8; ++i) input[4 + i] = key[i];
        input[12] = static_cast<uint32_t>(counter);
        input[13] = static_cast<uint32_t>(counter >> 32);
        input[14] = static_cast<uint32_t>(nonce);
        input[15] = static_cast<uint32_t>(nonce >> 32);
        pos = kWords;
    }
    uint64_t counter() const { return (uint64_t(input[13]) << 32) | input[12]; }

#if defined(__GNUC__) || defined(__clang__)
    __attribute__((noinline))  // keeps next_u64 small enough to inline into samplers
#endif
    void refill() {
        chacha20_blocks4(input, buf);
        const uint64_t c = counter() + 4;
        input[12] = static_cast<uint32_t>(c);
        input[13] = static_cast<uint32_t>(c >> 32);
        pos = 0;
    }
    uint64_t next_u64() {
        if (pos >= kWords) refill();
        const uint64_t lo = buf[2 * pos], hi = buf[2 * pos + 1];
        ++pos;
        return lo | (hi << 32);
    }
};

}  // namespace dpf
