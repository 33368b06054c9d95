// Randomized response kernels (binary and k-ary), docs/theory/mechanisms.rst "Randomized response".
//
// One 64-bit word w per entry decides the flip: flip iff w < thr, so P(flip) = thr / 2^64
// exactly (the caller passes thr >= 1, the flip probability rounded up to a multiple of
// 2^-64 so that the realised keep/other ratio stays <= e^eps; dpfast/mechanisms/randomized_response.py).  k-ary
// flips draw one more uniform integer in [0, k-1) (Lemire's unbiased method) for the
// replacement category.  Sequential: entry i uses the words after those of entries < i,
// so n scalar calls equal one call of length n.
#pragma once
#include <cstddef>
#include <cstdint>

#include "random/bitstream.hpp"

namespace dpf {

// out[i] = in[i] ^ flip_i for in[i] in {0, 1}; thr has 1 or n entries.
inline void rr_binary(BitStream& rs, const uint8_t* in, const uint64_t* thr, bool thr_per_element,
                      uint8_t* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const uint64_t t = thr_per_element ? thr[i] : thr[0];
        out[i] = static_cast<uint8_t>(in[i] ^ (rs.u64() < t ? 1u : 0u));
    }
}

// k-ary (k >= 3): keep in[i] unless flipped; a flipped entry becomes a uniform category != in[i].
inline void rr_kary(BitStream& rs, const int64_t* in, int64_t k, const uint64_t* thr,
                    bool thr_per_element, int64_t* out, std::size_t n) {
    const uint64_t km1 = static_cast<uint64_t>(k - 1);
    for (std::size_t i = 0; i < n; ++i) {
        const uint64_t t = thr_per_element ? thr[i] : thr[0];
        if (rs.u64() < t) {
            const int64_t o = static_cast<int64_t>(rs.bounded(km1));
            out[i] = o + (o >= in[i] ? 1 : 0);
        } else {
            out[i] = in[i];
        }
    }
}

}  // namespace dpf
