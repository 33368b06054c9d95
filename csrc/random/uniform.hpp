// Uniform reals with full relative precision at every scale (Mironov 2012's U*).
#pragma once
#include <cmath>
#include <cstdint>

namespace dpf {

// P[U* in [2^-e, 2^-e+1)] = 2^-e from the leading zeros of random words, then a 52-bit uniform
// mantissa within the binade: P(U* <= u) = u up to a relative 2^-52 for every double u.  Used
// where a uniform on the 53-bit grid is not enough: the snapping mechanism's Laplace and the
// geometric skips of Poisson subsampling (whose tails need every scale).  R: any stream with
// u64() (dpf::BitStream, the exact samplers' ChaCha20 stream).
template <class R>
inline double uniform_all_doubles(R& r) {
    int e = 1;
    for (;;) {
        const uint64_t w = r.u64();
        if (w != 0) {
            e += __builtin_clzll(w);
            break;
        }
        e += 64;
        if (e > 1100) break;  // probability 2^-1088: lands in the subnormal range below
    }
    const uint64_t mant = r.u64() >> 12;  // 52 uniform bits
    return std::ldexp(static_cast<double>((uint64_t(1) << 52) | mant), -52 - e);
}

}  // namespace dpf
