// The one random-stream abstraction that crosses the Python/C++ boundary: NumPy's
// `bitgen_t` (numpy/random/bitgen.h).  Every NumPy BitGenerator and dpfast's ChaCha20
// provide it, so kernels draw from a user's Generator or from the secure stream alike.
// Kernels never seed themselves; the caller holds the bit generator's lock.
#pragma once
#include <cmath>
#include <cstdint>

#include "numpy/random/bitgen.h"

namespace dpf {

struct BitStream {
    bitgen_t* bg;
    explicit BitStream(bitgen_t* b) : bg(b) {}
    uint64_t u64() { return bg->next_uint64(bg->state); }
    // Uniform on the grid {0, 1, ..., 2^53-1} * 2^-53, i.e. [0, 1).
    double uniform() { return (u64() >> 11) * 0x1.0p-53; }
    // Uniform integer in [0, n) without modulo bias (Lemire 2019, multiply-and-reject).
    uint64_t bounded(uint64_t n) {
        unsigned __int128 m = (unsigned __int128)u64() * n;
        uint64_t l = (uint64_t)m;
        if (l < n) {
            const uint64_t t = (0 - n) % n;
            while (l < t) {
                m = (unsigned __int128)u64() * n;
                l = (uint64_t)m;
            }
        }
        return (uint64_t)(m >> 64);
    }
};

}  // namespace dpf
