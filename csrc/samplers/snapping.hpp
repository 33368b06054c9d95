// The snapping mechanism (Mironov 2012, "On significance of the least significant bits for
// differential privacy", section 5), for a query already scaled to sensitivity 1:
//
//   out = clamp_B( round_Lambda( clamp_B(x) (+) S (*) lambda (*) LN(U*) ) )
//
// with (+), (*) IEEE double operations, S a uniform sign, U* uniform over the doubles in
// (0, 1) -- exponent drawn geometrically (leading zeros of random words), 52-bit mantissa
// uniform, i.e. a uniform real in (0, 1) rounded down to a double -- LN the libm logarithm,
// Lambda the smallest power of two >= lambda and round_Lambda rounding to the nearest
// multiple of Lambda (ties to even).  The privacy accounting lives in Python
// (dpfast/mechanisms/snapping.py); this kernel only computes.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "random/uniform.hpp"
#include "samplers/exact_arith.hpp"

namespace dpf {

inline double clamp_sym(double x, double bound) { return x < -bound ? -bound : (x > bound ? bound : x); }

// out[i] = snapping of x[i]; lambda > 0, Lambda = 2^k >= lambda, bound > 0 (all checked in
// Python).  Block-parallel (see run_exact_blocks in exact_arith.hpp).
inline void fill_snapping(bitgen_t* bg, const double* x, double lambda, double big_lambda,
                          double bound, double* out, std::size_t n, int n_threads = 1) {
    const double inv = 1.0 / big_lambda;  // exact: big_lambda is a power of two
    run_exact_blocks(bg, n, n_threads, [&](FastExactRng& r, std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) {
            const double xc = clamp_sym(x[i], bound);
            const double u = uniform_all_doubles(r);
            const bool neg = r.bit();
            const double noise = (neg ? -lambda : lambda) * std::log(u);
            const double y = xc + noise;
            const double snapped = std::nearbyint(y * inv) * big_lambda;
            out[i] = clamp_sym(snapped, bound);
        }
    });
}

}  // namespace dpf
