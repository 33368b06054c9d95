// SIMD helpers of the GLM solvers: fixed-order dot products and norms on 4-lane vectors, and
// the vectorized logistic loss (exp/log1p by polynomials).
// NO include guard: part of csrc/solvers/impl.hpp, which csrc/solvers/glm_solvers.hpp includes
// twice (namespaces `generic` and `avx2`); see impl.hpp.

typedef double v4d __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

inline v4d dpf_load4(const double* p) {
    v4d v;
    std::memcpy(&v, p, 32);
    return v;
}
inline v4d dpf_load4(const float* p) {
    v4f v;
    std::memcpy(&v, p, 16);
    return __builtin_convertvector(v, v4d);
}

// sum_j x[j] * t[j] in a fixed order (two 4-lane accumulators).
template <class T>
inline double dot(const T* x, const double* t, int64_t d) {
    v4d a0 = {0.0, 0.0, 0.0, 0.0}, a1 = a0;
    int64_t j = 0;
    for (; j + 8 <= d; j += 8) {
        a0 += dpf_load4(x + j) * dpf_load4(t + j);
        a1 += dpf_load4(x + j + 4) * dpf_load4(t + j + 4);
    }
    if (j + 4 <= d) {
        a0 += dpf_load4(x + j) * dpf_load4(t + j);
        j += 4;
    }
    a0 += a1;
    double s = (a0[0] + a0[1]) + (a0[2] + a0[3]);
    for (; j < d; ++j) s += (double)x[j] * t[j];
    return s;
}

template <class T>
inline double sqnorm(const T* x, int64_t d) {
    v4d a0 = {0.0, 0.0, 0.0, 0.0}, a1 = a0;
    int64_t j = 0;
    for (; j + 8 <= d; j += 8) {
        v4d u = dpf_load4(x + j), v = dpf_load4(x + j + 4);
        a0 += u * u;
        a1 += v * v;
    }
    a0 += a1;
    double s = (a0[0] + a0[1]) + (a0[2] + a0[3]);
    for (; j < d; ++j) s += (double)x[j] * (double)x[j];
    return s;
}

template <class T>
inline void axpy(double a, const T* x, double* g, int64_t d) {
    for (int64_t j = 0; j < d; ++j) g[j] += a * (double)x[j];
}

inline double dotd(const double* a, const double* b, int64_t d) { return dot<double>(a, b, d); }

// ---------------------------------------------------------------------------------------
// Logistic loss for a block of rows, 4 lanes at a time (branch-free, vectorizable).
// exp(-a) by Cody-Waite reduction and a degree-13 Taylor polynomial (|r| <= ln2/2);
// log1p(e) for e in [0, 1] as 2 atanh(e / (2 + e)) by its series (ratio <= 1/9, 17 terms).
// Both are within a few ulp of glibc; csrc/losses/losses.hpp keeps the scalar reference.

typedef long long v4i __attribute__((vector_size(32)));

// K independent 4-lane vectors at once: the Horner chains interleave (instruction-level
// parallelism), which is what makes this cheaper than the scalar libm calls.
constexpr int kLanes = 4, kVec = 4, kGroup = kLanes * kVec;  // 16 rows per group

inline void vexp_neg(const v4d* a_in, v4d* out) {  // exp(-a) for a >= 0 (a > 708 -> 708)
    const v4d cap = {708.0, 708.0, 708.0, 708.0};
    const v4d shifter = {0x1.8p52, 0x1.8p52, 0x1.8p52, 0x1.8p52};
    v4d r[kVec], t[kVec], p[kVec];
    for (int k = 0; k < kVec; ++k) {
        const v4d a = a_in[k] < cap ? a_in[k] : cap;
        const v4d x = -a;
        t[k] = x * 1.4426950408889634 + shifter;
        const v4d kd = t[k] - shifter;
        r[k] = (x - kd * 0x1.62e42fefa3800p-1) - kd * 0x1.ef35793c76730p-45;
        p[k] = r[k] * (1.0 / 6227020800.0) + (1.0 / 479001600.0);
    }
    static const double c[] = {1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
                               1.0 / 5040.0,     1.0 / 720.0,     1.0 / 120.0,    1.0 / 24.0,
                               1.0 / 6.0,        0.5,             1.0,            1.0};
    for (int j = 0; j < 12; ++j)
        for (int k = 0; k < kVec; ++k) p[k] = p[k] * r[k] + c[j];
    for (int k = 0; k < kVec; ++k) {
        const v4i ki = (v4i)t[k] - (v4i)shifter;
        out[k] = p[k] * (v4d)((ki + 1023) << 52);
    }
}

inline void vlog1p01(const v4d* e, v4d* out) {  // log(1 + e) for e in [0, 1]
    v4d s[kVec], s2[kVec], q[kVec];
    for (int k = 0; k < kVec; ++k) {
        s[k] = e[k] / (e[k] + 2.0);
        s2[k] = s[k] * s[k];
        q[k] = s2[k] * (1.0 / 35.0) + (1.0 / 33.0);
    }
    for (int j = 31; j >= 3; j -= 2)
        for (int k = 0; k < kVec; ++k) q[k] = q[k] * s2[k] + (1.0 / (double)j);
    for (int k = 0; k < kVec; ++k) out[k] = 2.0 * (s[k] + s[k] * (s2[k] * q[k]));
}

// val = log(1 + exp(-y z)), der = -y sigma(-y z) for m rows.
inline void logistic_block(const double* z, const double* y, double* val, double* der, int64_t m) {
    for (int64_t r0 = 0; r0 < m; r0 += kGroup) {
        alignas(32) double zz[kGroup], yy[kGroup], vo[kGroup], dout[kGroup];
        const int64_t cnt = std::min<int64_t>(kGroup, m - r0);
        for (int64_t u = 0; u < kGroup; ++u) {
            zz[u] = u < cnt ? z[r0 + u] : 0.0;
            yy[u] = u < cnt ? y[r0 + u] : 1.0;
        }
        v4d M[kVec], A[kVec], E[kVec], L[kVec];
        const v4d zero = {0.0, 0.0, 0.0, 0.0};
        for (int k = 0; k < kVec; ++k) {
            v4d Z, Y;
            std::memcpy(&Z, zz + 4 * k, 32);
            std::memcpy(&Y, yy + 4 * k, 32);
            M[k] = Y * Z;
            A[k] = M[k] < zero ? -M[k] : M[k];
        }
        vexp_neg(A, E);
        vlog1p01(E, L);
        for (int k = 0; k < kVec; ++k) {
            const v4d V = L[k] + (M[k] < zero ? -M[k] : zero);
            const v4d inv = 1.0 / (E[k] + 1.0);
            v4d Y;
            std::memcpy(&Y, yy + 4 * k, 32);
            const v4d D = -Y * (M[k] > zero ? E[k] * inv : inv);  // -y sigma(-m)
            std::memcpy(vo + 4 * k, &V, 32);
            std::memcpy(dout + 4 * k, &D, 32);
        }
        for (int64_t u = 0; u < cnt; ++u) {
            if (std::isfinite(zz[u])) {
                val[r0 + u] = vo[u];
                der[r0 + u] = dout[u];
            } else {  // NaN/inf margins keep the scalar semantics (reported as non-finite F)
                dpf::loss::LossParams lp;
                dpf::loss::value_deriv(lp, zz[u], yy[u], val[r0 + u], der[r0 + u]);
            }
        }
    }
}
