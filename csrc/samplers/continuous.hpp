// Continuous noise samplers (fast path; not floating-point safe, see dpfast.mechanisms).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "random/bitstream.hpp"

namespace dpf {

// Laplace(0, 1): a random sign times a standard exponential, from one 64-bit word
// (top 53 bits give U in (0, 1], the lowest bit the sign).
inline double std_laplace(BitStream& rs) {
    const uint64_t w = rs.u64();
    const double e = -std::log(((w >> 11) + 1) * 0x1.0p-53);
    return (w & 1u) ? -e : e;
}

}  // namespace dpf
