// ChaCha20 block function (RFC 8439, section 2.3) and a keystream of 64-bit words.
//
// The block function is exactly the RFC's: 20 rounds (10 column + 10 diagonal) over the
// 16-word state, then the input state is added word-wise.  The keystream uses the original
// (Bernstein) layout of the last four words: a 64-bit block counter in words 12-13 and a
// 64-bit nonce in words 14-15, so a stream never wraps after 2^32 blocks (256 GiB) as the
// RFC's 32-bit counter would.  Both layouts run the same block function, which is what the
// RFC's test vectors check.
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
#undef DPF_CHACHA_QR

// RFC 8439 state from a 256-bit key, 32-bit counter and 96-bit nonce (section 2.3).
inline void chacha20_rfc_state(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3],
                               uint32_t st[16]) {
    st[0] = 0x61707865u; st[1] = 0x3320646eu; st[2] = 0x79622d32u; st[3] = 0x6b206574u;
    for (int i = 0; i < 8; ++i) st[4 + i] = key[i];
    st[12] = counter;
    st[13] = nonce[0]; st[14] = nonce[1]; st[15] = nonce[2];
}

// Keystream of 64-bit little-endian words.  Plain data (no pointers) so that NumPy can
// pickle/copy it through the BitGenerator state dict.
struct ChaCha20Stream {
    uint32_t input[16];
    uint32_t block[16];
    int pos;  // next unused 64-bit word of `block` (0..8); 8 means exhausted

    void seed(const uint32_t key[8], uint64_t nonce, uint64_t counter) {
        input[0] = 0x61707865u; input[1] = 0x3320646eu; input[2] = 0x79622d32u; input[3] = 0x6b206574u;
        for (int i = 0; i < 8; ++i) input[4 + i] = key[i];
        input[12] = static_cast<uint32_t>(counter);
        input[13] = static_cast<uint32_t>(counter >> 32);
        input[14] = static_cast<uint32_t>(nonce);
        input[15] = static_cast<uint32_t>(nonce >> 32);
        pos = 8;
    }
    uint64_t counter() const { return (uint64_t(input[13]) << 32) | input[12]; }

    void refill() {
        chacha20_block(input, block);
        if (++input[12] == 0) ++input[13];
        pos = 0;
    }
    uint64_t next_u64() {
        if (pos >= 8) refill();
        const uint64_t lo = block[2 * pos], hi = block[2 * pos + 1];
        ++pos;
        return lo | (hi << 32);
    }
};

}  // namespace dpf
