// Exact discrete Laplace and discrete Gaussian samplers (Canonne, Kamath & Steinke 2020,
// Algorithms 2 and 3).  Integer arithmetic only; parameters are exact rationals.
//
// * Discrete Laplace Lap_Z(t/s), s, t positive integers: P[Y = y] proportional to
//   exp(-|y| s / t).
// * Discrete Gaussian N_Z(0, sigma^2), sigma^2 = n/d: P[Y = y] proportional to
//   exp(-y^2 / (2 sigma^2)); rejection from Lap_Z(tau), tau = floor(sigma) + 1, accepting
//   with probability exp(-(|Y| - sigma^2/tau)^2 / (2 sigma^2)).
//
// Preconditions (checked in Python, asserted here by the binding): see each function.
#pragma once
#include <cstdint>

#include "samplers/exact_arith.hpp"

namespace dpf {

// Outputs are int64; a draw with |Y| >= 2^62 is redrawn.  Under the parameter limits the
// Python layer enforces (scale t/s <= 2^40) that event has probability below exp(-2^21),
// so the law is the stated one conditioned on an event of probability 1 - exp(-2^21).
constexpr uint64_t kDiscreteMax = uint64_t(1) << 62;

// CKS20 Algorithm 2: Lap_Z(t/s).  Requires s, t >= 1.
template <class R>
inline int64_t discrete_laplace(R& r, uint64_t s, uint64_t t) {
    for (;;) {
        const uint64_t u = t == 1 ? 0 : r.below64(t);
        if (u != 0 && !r.bern_exp_le1(u, t)) continue;  // D ~ Bernoulli(exp(-U/t))
        uint64_t v = 0;
        while (r.bern_exp1()) ++v;  // V ~ Geometric: P[V = v] = (1 - e^-1) e^-v
        const u128 x = (u128)u + (u128)t * v;  // X = U + t V, P[X = x] ∝ exp(-x/t)
        u128 y = x;                            // Y = floor(X / s)
        if (s != 1) y = (x >> 64) == 0 ? (u128)(static_cast<uint64_t>(x) / s) : x / s;
        const bool neg = r.bit();
        if (neg && y == 0) continue;
        if (y >= kDiscreteMax) continue;
        return neg ? -static_cast<int64_t>(y) : static_cast<int64_t>(y);
    }
}

// CKS20 Algorithm 3: N_Z(0, n/d) with tau = floor(sqrt(n/d)) + 1.
// Requires n, d >= 1, tau <= 2^40, d * tau < 2^62 and b = 2 n d tau^2 < 2^127.
struct DiscreteGaussianParams {
    u128 n, d, tau, dtau, b;
    DiscreteGaussianParams(u128 n_, u128 d_, uint64_t tau_) : n(n_), d(d_), tau(tau_) {
        dtau = d * tau;
        b = 2 * n * d * tau * tau;
    }
    // Why (n, d, tau) break those requirements, or nullptr when they meet them.
    static const char* invalid(u128 n, u128 d, uint64_t tau) {
        if (n == 0 || d == 0) return "sigma^2 = n/d needs n, d >= 1";
        if (tau == 0 || tau > (uint64_t(1) << 40)) return "tau must be in [1, 2^40]";
        // tau = floor(sqrt(n/d)) + 1  <=>  (tau-1)^2 d <= n < tau^2 d
        const u128 tt = (u128)tau * tau, tm = (u128)(tau - 1) * (tau - 1);
        if (d >= ((u128)1 << 62) / tau) return "d * tau must be < 2^62";
        if (!(tm * d <= n && n < tt * d)) return "tau must be floor(sqrt(n/d)) + 1";
        if (n >= (((u128)1) << 126) / (d * tt)) return "2 n d tau^2 must be < 2^127";
        return nullptr;
    }
};

template <class R>
inline int64_t discrete_gaussian(R& r, const DiscreteGaussianParams& p) {
    for (;;) {
        const int64_t y = discrete_laplace(r, 1, static_cast<uint64_t>(p.tau));
        const u128 ay = y < 0 ? (u128)(-(y + 1)) + 1 : (u128)y;
        // gamma = (|Y| - sigma^2/tau)^2 / (2 sigma^2) = a^2 / b with a = |Y| d tau - n.
        const u128 m = ay * p.dtau;  // < 2^62 * 2^62
        const u128 a = m >= p.n ? m - p.n : p.n - m;
        if (r.bern_exp(square_u128(a), p.b)) return y;
    }
}

// Batched fills (the GIL is released by the caller); block-parallel, see run_exact_blocks.
inline void fill_discrete_laplace(bitgen_t* bg, uint64_t s, uint64_t t, int64_t* out, std::size_t n,
                                  int n_threads = 1) {
    run_exact_blocks(bg, n, n_threads, [&](FastExactRng& r, std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) out[i] = discrete_laplace(r, s, t);
    });
}
inline void fill_discrete_gaussian(bitgen_t* bg, const DiscreteGaussianParams& p, int64_t* out,
                                   std::size_t n, int n_threads = 1) {
    run_exact_blocks(bg, n, n_threads, [&](FastExactRng& r, std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) out[i] = discrete_gaussian(r, p);
    });
}
// Bernoulli(exp(-num/den)) draws, 0/1 bytes.
inline void fill_bernoulli_exp(bitgen_t* bg, u128 num, u128 den, uint8_t* out, std::size_t n,
                               int n_threads = 1) {
    run_exact_blocks(bg, n, n_threads, [&](FastExactRng& r, std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) out[i] = r.bern_exp(num, den) ? 1 : 0;
    });
}

}  // namespace dpf
