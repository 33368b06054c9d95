// Solver kernels.  NO include guard on purpose: csrc/solvers/glm_solvers.hpp includes this
// file twice, once in namespace `generic` and once in namespace `avx2` under
// `#pragma GCC target("avx2")`, and picks one at run time (no -march=native needed).
// Everything here is deterministic for a given machine: rows are cut into chunks that
// depend only on n (never on the thread count) and partial sums are reduced in chunk order.
//
// Included from glm_solvers.hpp after <algorithm>, <cmath>, <cstring>, <thread>, <vector>,
// "glm/data.hpp" and "random/bitstream.hpp".

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

// Loss values of rows i0 .. i0+m-1 from their margins zb[0 .. m); zb is overwritten with the
// weighted, clipped derivatives; returns the sum of the weighted values.  m <= 256.
inline double block_losses(const glm::Objective& ob, int64_t i0, int64_t m, double* zb) {
    double loss = 0.0;
    if (ob.lp.loss != dpf::loss::Loss::logistic) {
        for (int64_t r = 0; r < m; ++r) {
            double v, dl;
            ob.row(i0 + r, zb[r], v, dl);
            loss += v;
            zb[r] = dl;
        }
        return loss;
    }
    alignas(32) double val[256], der[256];
    logistic_block(zb, ob.y + i0, val, der, m);
    for (int64_t r = 0; r < m; ++r) {
        double v = val[r], dl = der[r];
        if (ob.cbound && std::fabs(dl) > ob.cbound[i0 + r]) {
            bool cl;
            dpf::loss::clipped_value_deriv(ob.lp, zb[r], ob.y[i0 + r], ob.cbound[i0 + r], v, dl, cl);
        }
        if (ob.w) {
            v *= ob.w[i0 + r];
            dl *= ob.w[i0 + r];
        }
        loss += v;
        zb[r] = dl;
    }
    return loss;
}

// ---------------------------------------------------------------------------------------
// Row access used by SAG/SAGA.

template <class T>
inline double row_dot(const glm::DenseC<T>& X, int64_t i, const double* th) {
    return dot(X.X + i * X.d, th, X.d);
}
template <class T>
inline double row_dot(const glm::DenseF<T>& X, int64_t i, const double* th) {
    double s = 0.0;
    for (int64_t j = 0; j < X.d; ++j) s += (double)X.X[i + j * X.n] * th[j];
    return s;
}
template <class T>
inline void row_axpy(const glm::DenseC<T>& X, int64_t i, double a, double* g) {
    axpy(a, X.X + i * X.d, g, X.d);
}
template <class T>
inline void row_axpy(const glm::DenseF<T>& X, int64_t i, double a, double* g) {
    for (int64_t j = 0; j < X.d; ++j) g[j] += a * (double)X.X[i + j * X.n];
}
// The same on the mapped row [rscale_i x_i, icpt] (data.hpp); theta/g have X.d (+1) entries.
template <class V>
inline double mrow_dot(const V& X, const glm::Objective& ob, int64_t i, const double* th) {
    double z = row_dot(X, i, th);
    if (ob.rscale) z *= ob.rscale[i];
    if (ob.icpt != 0.0) z += ob.icpt * th[X.d];
    return z;
}
template <class V>
inline void mrow_axpy(const V& X, const glm::Objective& ob, int64_t i, double a, double* g) {
    row_axpy(X, i, ob.rscale ? a * ob.rscale[i] : a, g);
    if (ob.icpt != 0.0) g[X.d] += a * ob.icpt;
}

// ---------------------------------------------------------------------------------------
// Chunk kernels: loss sum over rows [a, b) and the data part of the gradient added to g.
// dstore (optional) receives each row's weighted, clipped derivative.

template <class T>
double eval_chunk(const glm::DenseC<T>& X, const glm::Objective& ob, int64_t a, int64_t b,
                  const double* th, double* g, double* dstore) {
    const int64_t d = X.d;
    // blocks of rows that stay in L1/L2 between the margin pass and the gradient pass
    const int64_t B = std::max<int64_t>(1, std::min<int64_t>(64, (int64_t)(24576 / (sizeof(T) * std::max<int64_t>(1, d)))));
    alignas(64) double zb[64];
    double loss = 0.0;
    for (int64_t i0 = a; i0 < b; i0 += B) {
        const int64_t m = std::min(B, b - i0);
        for (int64_t r = 0; r < m; ++r) zb[r] = dot(X.X + (i0 + r) * d, th, d);
        if (ob.rscale)
            for (int64_t r = 0; r < m; ++r) zb[r] *= ob.rscale[i0 + r];
        if (ob.icpt != 0.0)
            for (int64_t r = 0; r < m; ++r) zb[r] += ob.icpt * th[d];
        loss += block_losses(ob, i0, m, zb);
        for (int64_t r = 0; r < m; ++r) {
            const double dl = zb[r];
            if (dstore) dstore[i0 + r] = dl;
            if (ob.icpt != 0.0) g[d] += dl * ob.icpt;
            const double a = ob.rscale ? dl * ob.rscale[i0 + r] : dl;
            if (a != 0.0) axpy(a, X.X + (i0 + r) * d, g, d);
        }
    }
    return loss;
}

template <class T>
double eval_chunk(const glm::DenseF<T>& X, const glm::Objective& ob, int64_t a, int64_t b,
                  const double* th, double* g, double* dstore) {
    constexpr int64_t B = 256;  // block of rows: B * d elements stay in L2 between the passes
    alignas(64) double zb[B];
    const int64_t n = X.n, d = X.d;
    double loss = 0.0;
    for (int64_t i0 = a; i0 < b; i0 += B) {
        const int64_t m = std::min(B, b - i0);
        for (int64_t r = 0; r < m; ++r) zb[r] = 0.0;
        for (int64_t j = 0; j < d; ++j) {
            const T* col = X.X + j * n + i0;
            const double tj = th[j];
            for (int64_t r = 0; r < m; ++r) zb[r] += tj * (double)col[r];
        }
        if (ob.rscale)
            for (int64_t r = 0; r < m; ++r) zb[r] *= ob.rscale[i0 + r];
        if (ob.icpt != 0.0)
            for (int64_t r = 0; r < m; ++r) zb[r] += ob.icpt * th[d];
        loss += block_losses(ob, i0, m, zb);
        if (dstore)
            for (int64_t r = 0; r < m; ++r) dstore[i0 + r] = zb[r];
        if (ob.icpt != 0.0)
            for (int64_t r = 0; r < m; ++r) g[d] += zb[r] * ob.icpt;
        if (ob.rscale)
            for (int64_t r = 0; r < m; ++r) zb[r] *= ob.rscale[i0 + r];
        for (int64_t j = 0; j < d; ++j) g[j] += dot(X.X + j * n + i0, zb, m);
    }
    return loss;
}

template <class T, class I>
double eval_chunk(const glm::CSR<T, I>& X, const glm::Objective& ob, int64_t a, int64_t b,
                  const double* th, double* g, double* dstore) {
    constexpr int64_t B = 64;
    alignas(64) double zb[B];
    double loss = 0.0;
    for (int64_t i0 = a; i0 < b; i0 += B) {
        const int64_t m = std::min(B, b - i0);
        for (int64_t r = 0; r < m; ++r) {
            const int64_t p0 = (int64_t)X.indptr[i0 + r], p1 = (int64_t)X.indptr[i0 + r + 1];
            double z0 = 0.0, z1 = 0.0, z2 = 0.0, z3 = 0.0;  // four chains hide the add latency of the gathers
            int64_t p = p0;
            for (; p + 4 <= p1; p += 4) {
                z0 += (double)X.data[p] * th[X.indices[p]];
                z1 += (double)X.data[p + 1] * th[X.indices[p + 1]];
                z2 += (double)X.data[p + 2] * th[X.indices[p + 2]];
                z3 += (double)X.data[p + 3] * th[X.indices[p + 3]];
            }
            for (; p < p1; ++p) z0 += (double)X.data[p] * th[X.indices[p]];
            zb[r] = (z0 + z1) + (z2 + z3);
        }
        // the mapped row [rscale_i x_i, icpt] (data.hpp): scale the margin, add the bias feature
        if (ob.rscale)
            for (int64_t r = 0; r < m; ++r) zb[r] *= ob.rscale[i0 + r];
        if (ob.icpt != 0.0)
            for (int64_t r = 0; r < m; ++r) zb[r] += ob.icpt * th[X.d];
        loss += block_losses(ob, i0, m, zb);
        for (int64_t r = 0; r < m; ++r) {
            const double dl = zb[r];
            if (dstore) dstore[i0 + r] = dl;
            if (ob.icpt != 0.0) g[X.d] += dl * ob.icpt;
            const double a = ob.rscale ? dl * ob.rscale[i0 + r] : dl;
            if (a != 0.0)
                for (int64_t p = (int64_t)X.indptr[i0 + r]; p < (int64_t)X.indptr[i0 + r + 1]; ++p)
                    g[X.indices[p]] += a * (double)X.data[p];
        }
    }
    return loss;
}

// Squared row norms of rows [a, b); a non-finite entry (or an overflowing norm) makes the
// row's value non-finite, which the caller reports.
template <class T>
void sqnorm_chunk(const glm::DenseC<T>& X, int64_t a, int64_t b, double* sq) {
    for (int64_t i = a; i < b; ++i) sq[i] = sqnorm(X.X + i * X.d, X.d);
}
template <class T>
void sqnorm_chunk(const glm::DenseF<T>& X, int64_t a, int64_t b, double* sq) {
    for (int64_t i = a; i < b; ++i) sq[i] = 0.0;
    for (int64_t j = 0; j < X.d; ++j) {
        const T* col = X.X + j * X.n;
        for (int64_t i = a; i < b; ++i) sq[i] += (double)col[i] * (double)col[i];
    }
}
template <class T, class I>
void sqnorm_chunk(const glm::CSR<T, I>& X, int64_t a, int64_t b, double* sq) {
    for (int64_t i = a; i < b; ++i) {
        double s = 0.0;
        for (int64_t p = (int64_t)X.indptr[i]; p < (int64_t)X.indptr[i + 1]; ++p)
            s += (double)X.data[p] * (double)X.data[p];
        sq[i] = s;
    }
}

// Number of squares summed for row i's norm (the rounding bound of prepare() grows with it).
template <class T>
inline int64_t row_terms(const glm::DenseC<T>& X, int64_t) { return X.d; }
template <class T>
inline int64_t row_terms(const glm::DenseF<T>& X, int64_t) { return X.d; }
template <class T, class I>
inline int64_t row_terms(const glm::CSR<T, I>& X, int64_t i) { return (int64_t)X.indptr[i + 1] - (int64_t)X.indptr[i]; }

template <class T>
inline int64_t work_of(const glm::DenseC<T>& X) { return X.n * X.d; }
template <class T>
inline int64_t work_of(const glm::DenseF<T>& X) { return X.n * X.d; }
template <class T, class I>
inline int64_t work_of(const glm::CSR<T, I>& X) { return X.n > 0 ? (int64_t)X.indptr[X.n] : 0; }

// ---------------------------------------------------------------------------------------
// Fixed partition of the rows (the fork-join over it is dpf::run_chunks, csrc/parallel.hpp).

// At most 32 chunks of >= 2048 rows, and at most 2^22 partial-gradient doubles in all
// (so that very wide sparse X does not pay 32 d-vectors per pass); depends on n and d only.
struct Chunks {
    int64_t n = 0, rows = 1, count = 0;
    Chunks(int64_t n_, int64_t d) : n(n_) {
        const int64_t cap = std::max<int64_t>(1, std::min<int64_t>(32, (int64_t(1) << 22) / std::max<int64_t>(1, d)));
        rows = std::max<int64_t>(2048, (n + cap - 1) / cap);
        count = n > 0 ? (n + rows - 1) / rows : 0;
    }
    int64_t begin(int64_t k) const { return k * rows; }
    int64_t end(int64_t k) const { return std::min(n, (k + 1) * rows); }
};

// run_chunks (csrc/parallel.hpp) runs them.

// Threads pay only above this much work per pass (multiply-adds).
constexpr int64_t kParallelWork = 1 << 17;

template <class View>
void row_sqnorms(const View& X, int nthreads, double* sq) {
    Chunks ch(X.n, 1);
    const int T = work_of(X) >= kParallelWork ? nthreads : 1;
    run_chunks(ch.count, T, [&](int64_t k) { sqnorm_chunk(X, ch.begin(k), ch.end(k), sq); });
}

// Regularization part of F and its gradient.
inline double add_reg(const glm::Objective& ob, const double* th, double* g, std::vector<double>& qbuf) {
    const int64_t d = ob.d;
    double f = 0.0;
    if (ob.alpha != 0.0) {
        f += 0.5 * ob.alpha * dotd(th, th, d);
        for (int64_t j = 0; j < d; ++j) g[j] += ob.alpha * th[j];
    }
    if (ob.linear) {
        f += dotd(ob.linear, th, d);
        for (int64_t j = 0; j < d; ++j) g[j] += ob.linear[j];
    }
    if (ob.Q) {
        qbuf.resize(d);
        for (int64_t r = 0; r < d; ++r) qbuf[r] = dotd(ob.Q + r * d, th, d);
        f += 0.5 * dotd(th, qbuf.data(), d);
        for (int64_t j = 0; j < d; ++j) g[j] += qbuf[j];
    }
    return f;
}

// F(theta) and grad F(theta): one pass over X, parallel over the fixed chunks.
template <class View>
struct Evaluator {
    const View& X;
    const glm::Objective& ob;
    Chunks ch;
    int nthreads;
    std::vector<double> part, lossp, qbuf;
    int64_t n_eval = 0;

    Evaluator(const View& X_, const glm::Objective& ob_, int nthreads_)
        : X(X_), ob(ob_), ch(X_.n, ob_.d), nthreads(work_of(X_) >= kParallelWork ? nthreads_ : 1) {
        part.assign((size_t)(ch.count * ob.d), 0.0);
        lossp.assign((size_t)ch.count, 0.0);
    }

    double operator()(const double* th, double* g, double* dstore = nullptr) {
        ++n_eval;
        const int64_t d = ob.d;
        run_chunks(ch.count, nthreads, [&](int64_t k) {
            double* gk = part.data() + k * d;
            std::fill(gk, gk + d, 0.0);
            lossp[k] = eval_chunk(X, ob, ch.begin(k), ch.end(k), th, gk, dstore);
        });
        std::fill(g, g + d, 0.0);
        double f = 0.0;
        for (int64_t k = 0; k < ch.count; ++k) {
            f += lossp[k];
            const double* gk = part.data() + k * d;
            for (int64_t j = 0; j < d; ++j) g[j] += gk[j];
        }
        f += add_reg(ob, th, g, qbuf);
        return f;
    }
};

// ---------------------------------------------------------------------------------------
// Stopping rule and result of the three solvers (checked before every iteration / epoch).

// True when the solver must stop, with the Result status: 3 non-finite F or gradient,
// 0 converged (||grad F||_2 <= tol), 1 out of iterations (it >= max_it).
inline bool stop_status(double f, double gn, double tol, int64_t it, int64_t max_it, int& status) {
    if (!std::isfinite(f) || !std::isfinite(gn)) {
        status = 3;
        return true;
    }
    if (gn <= tol) {
        status = 0;
        return true;
    }
    if (it >= max_it) {
        status = 1;
        return true;
    }
    return false;
}

inline void finish(Result& res, int64_t it, double f, double gn) {
    res.n_iter = it;
    res.fun = f;
    res.grad_norm = gn;
    res.converged = res.status == 0;
}

// ---------------------------------------------------------------------------------------
// L-BFGS (Nocedal & Wright 2006, Alg. 7.4/7.5) with a strong-Wolfe line search
// (Alg. 3.5/3.6, cubic interpolation) that also accepts Hager & Zhang's approximate Wolfe
// point when F's decrease is below its rounding error.  Stops on ||grad F||_2 <= tol.

template <class Fun>
struct LineSearch {
    Fun& fg;
    int64_t d;
    const double *x0, *p;
    double f0, d0;
    std::vector<double>& xt;
    std::vector<double>& gt;
    double ft = 0.0, dt = 0.0;
    static constexpr double c1 = 1e-4, c2 = 0.9;
    double epsf;

    void eval(double t) {
        for (int64_t j = 0; j < d; ++j) xt[j] = x0[j] + t * p[j];
        ft = fg(xt.data(), gt.data());
        dt = dotd(gt.data(), p, d);
    }
    bool armijo(double t) const {
        if (!std::isfinite(ft) || !std::isfinite(dt)) return false;
        if (ft <= f0 + c1 * t * d0) return true;
        // approximate Wolfe (Hager & Zhang 2005): F flat to rounding, slope not too positive
        return ft <= f0 + epsf && dt <= (1.0 - 2.0 * c1) * (-d0);
    }
    bool curvature() const { return std::fabs(dt) <= -c2 * d0; }

    static double cubic_min(double a, double fa, double da, double b, double fb, double db) {
        const double d1 = da + db - 3.0 * (fa - fb) / (a - b);
        const double disc = d1 * d1 - da * db;
        if (!(disc >= 0.0)) return 0.5 * (a + b);
        const double d2 = (b > a ? 1.0 : -1.0) * std::sqrt(disc);
        const double den = db - da + 2.0 * d2;
        if (den == 0.0 || !std::isfinite(den)) return 0.5 * (a + b);
        const double t = b - (b - a) * (db + d2 - d1) / den;
        return std::isfinite(t) ? t : 0.5 * (a + b);
    }

    // Returns true with (xt, gt, ft) at the accepted step.
    bool run(double t) {
        double tp = 0.0, fp = f0, dp = d0;
        for (int it = 0; it < 30; ++it) {
            eval(t);
            if (!armijo(t) || (it > 0 && ft >= fp && !(ft <= f0 + epsf && curvature())))
                return zoom(tp, fp, dp, t, ft, dt);
            if (curvature()) return true;
            if (dt >= 0.0) return zoom(t, ft, dt, tp, fp, dp);
            const double tn = std::min(4.0 * t, std::max(1.5 * t, cubic_min(tp, fp, dp, t, ft, dt)));
            tp = t;
            fp = ft;
            dp = dt;
            t = std::isfinite(tn) && tn > t ? tn : 2.0 * t;
        }
        return armijo(t);
    }
    bool zoom(double lo, double flo, double dlo, double hi, double fhi, double dhi) {
        for (int it = 0; it < 40; ++it) {
            const double w = hi - lo;
            if (std::fabs(w) <= 1e-16 * std::max(1.0, std::fabs(lo))) break;
            double t = cubic_min(lo, flo, dlo, hi, fhi, dhi);
            const double a = std::min(lo, hi), b = std::max(lo, hi), m = 0.1 * (b - a);
            // safeguard: a cubic step outside [a + m, b - m] is moved to the nearer end of it, not
            // to the midpoint (a minimiser close to lo, typical after an overshoot in one stiff
            // direction, is then reached in a few evaluations instead of one halving each)
            if (!std::isfinite(t)) t = 0.5 * (lo + hi);
            else t = std::min(std::max(t, a + m), b - m);
            eval(t);
            if (!armijo(t) || (ft >= flo && !(ft <= f0 + epsf && curvature()))) {
                hi = t;
                fhi = std::isfinite(ft) ? ft : flo + 1e300;
                dhi = std::isfinite(dt) ? dt : 0.0;
            } else {
                if (curvature()) return true;
                if (dt * (hi - lo) >= 0.0) {
                    hi = lo;
                    fhi = flo;
                    dhi = dlo;
                }
                lo = t;
                flo = ft;
                dlo = dt;
            }
        }
        // Interval collapsed: accept the best Armijo point found, if it moved.
        if (lo > 0.0) {
            eval(lo);
            return armijo(lo);
        }
        return false;
    }
};

// Fixed preconditioner P of L-BFGS: P = A^T D A with D diagonal (hinv = 1/D) and, when
// bias >= 0, A = I + e_bias mu^T (A theta = theta with mu.theta added to the bias coordinate).
// A centers the columns: in u = A theta the design rows [x_i, c] become [x_i - c mu, c], so
// with mu the column means / c the bias no longer couples to every feature (columns of
// non-negative sparse data all correlate with the bias).  Applying P^-1 and the two norms
// below costs O(d).
struct Precond {
    std::vector<double> hinv, mu;  // d entries; mu empty: P = D
    int64_t bias = -1;
    // out = P^-1 v = A^-1 D^-1 A^-T v (out may not alias v)
    void apply(const double* v, double* out, int64_t d) const {
        if (bias < 0) {
            for (int64_t j = 0; j < d; ++j) out[j] = hinv[j] * v[j];
            return;
        }
        const double vb = v[bias];
        double acc = 0.0;
        for (int64_t j = 0; j < d; ++j) {
            if (j == bias) continue;
            out[j] = hinv[j] * (v[j] - mu[j] * vb);
            acc += mu[j] * out[j];
        }
        out[bias] = hinv[bias] * vb - acc;
    }
    // v^T P^-1 v
    double inv_norm2(const double* v, int64_t d) const {
        double a = 0.0;
        if (bias < 0) {
            for (int64_t j = 0; j < d; ++j) a += v[j] * hinv[j] * v[j];
            return a;
        }
        const double vb = v[bias];  // (A^-T v)_j = v_j - mu_j v_b, (A^-T v)_b = v_b
        for (int64_t j = 0; j < d; ++j) {
            const double t = j == bias ? vb : v[j] - mu[j] * vb;
            a += t * hinv[j] * t;
        }
        return a;
    }
    // s^T P s
    double norm2(const double* s, int64_t d) const {
        double a = 0.0, ms = 0.0;
        for (int64_t j = 0; j < d; ++j) {
            if (j == bias) continue;
            a += s[j] * s[j] / hinv[j];
            if (bias >= 0) ms += mu[j] * s[j];
        }
        if (bias >= 0) {
            const double t = s[bias] + ms;
            a += t * t / hinv[bias];
        }
        return a;
    }
};

// pc (optional): the fixed preconditioner P above.  The iterations are then those of L-BFGS
// on u = P^(1/2) theta (initial inverse Hessian gamma P^-1, Nocedal & Wright 2006, eq. 7.20,
// with gamma from the latest pair in the u-norm); the stopping rule stays
// ||grad F(theta)||_2 <= tol in the original coordinates.  pc == nullptr: plain L-BFGS.
template <class Fun>
Result lbfgs(Fun& fg, int64_t d, double* x, double tol, int64_t max_iter, int m, const Precond* pc = nullptr) {
    Result res;
    std::vector<double> g(d), p(d), xt(d), gt(d), S((size_t)m * d), Y((size_t)m * d), rho(m), al(m);
    std::vector<double> tmp(pc ? d : 0);
    double f = fg(x, g.data());
    double gn = std::sqrt(dotd(g.data(), g.data(), d));
    int k = 0, head = 0;  // stored pairs, next slot
    int64_t it = 0;
    while (!stop_status(f, gn, tol, it, max_iter, res.status)) {
        // two-loop recursion: p = -H g
        for (int64_t j = 0; j < d; ++j) p[j] = -g[j];
        for (int c = 0; c < k; ++c) {
            const int s = (head - 1 - c + m) % m;
            al[s] = rho[s] * dotd(&S[(size_t)s * d], p.data(), d);
            for (int64_t j = 0; j < d; ++j) p[j] -= al[s] * Y[(size_t)s * d + j];
        }
        if (k > 0) {
            const int s = (head - 1 + m) % m;
            const double* ys = &Y[(size_t)s * d];
            if (pc) {
                const double gamma = 1.0 / (rho[s] * pc->inv_norm2(ys, d));
                pc->apply(p.data(), tmp.data(), d);
                for (int64_t j = 0; j < d; ++j) p[j] = gamma * tmp[j];
            } else {
                const double gamma = 1.0 / (rho[s] * dotd(ys, ys, d));
                for (int64_t j = 0; j < d; ++j) p[j] *= gamma;
            }
        } else if (pc) {
            pc->apply(p.data(), tmp.data(), d);
            std::copy(tmp.begin(), tmp.end(), p.begin());
        }
        for (int c = k - 1; c >= 0; --c) {
            const int s = (head - 1 - c + m) % m;
            const double b = rho[s] * dotd(&Y[(size_t)s * d], p.data(), d);
            for (int64_t j = 0; j < d; ++j) p[j] += (al[s] - b) * S[(size_t)s * d + j];
        }
        double d0 = dotd(g.data(), p.data(), d);
        if (!(d0 < 0.0)) {  // not a descent direction: restart from (preconditioned) steepest descent
            k = 0;
            if (pc) {
                pc->apply(g.data(), p.data(), d);
                for (int64_t j = 0; j < d; ++j) p[j] = -p[j];
                d0 = dotd(g.data(), p.data(), d);
            } else {
                for (int64_t j = 0; j < d; ++j) p[j] = -g[j];
                d0 = -gn * gn;
            }
        }
        // first step of a steepest-descent direction: length <= 1; preconditioned, the full step
        // -P^-1 g (P is the Hessian bound's where the loss is most curved, e.g. logistic at 0)
        const double t0 = k == 0 && !pc ? std::min(1.0, 1.0 / gn) : 1.0;
        LineSearch<Fun> ls{fg, d, x, p.data(), f, d0, xt, gt};
        ls.epsf = 1e-11 * (std::fabs(f) + 1.0);
        const bool ok = ls.run(t0);
        ++it;
        if (!ok) {
            if (k == 0) {
                res.status = 2;
                break;
            }
            k = 0;  // drop the memory and retry with steepest descent
            continue;
        }
        // update memory with s = xt - x, y = gt - g
        double* sv = &S[(size_t)head * d];
        double* yv = &Y[(size_t)head * d];
        for (int64_t j = 0; j < d; ++j) {
            sv[j] = xt[j] - x[j];
            yv[j] = gt[j] - g[j];
        }
        const double sy = dotd(sv, yv, d);
        const double ss = pc ? pc->norm2(sv, d) : dotd(sv, sv, d);
        const double yy = pc ? pc->inv_norm2(yv, d) : dotd(yv, yv, d);
        if (sy > 1e-12 * std::sqrt(ss * yy) && sy > 0.0) {
            rho[head] = 1.0 / sy;
            head = (head + 1) % m;
            k = std::min(k + 1, m);
        } else if (k == m) {
            k = m - 1;  // the slot just overwritten held the oldest pair
        }
        std::copy(xt.begin(), xt.end(), x);
        std::swap(g, gt);
        f = ls.ft;
        gn = std::sqrt(dotd(g.data(), g.data(), d));
    }
    finish(res, it, f, gn);
    return res;
}

// ---------------------------------------------------------------------------------------
// SAG (Schmidt, Le Roux & Bach 2017) and SAGA (Defazio, Bach & Lacoste-Julien 2014) on the
// finite sum F = sum_i f_i, f_i = w_i l_C(x_i.theta) + (alpha/2n)||theta||^2 + linear.theta/n
// (Redberg, Koskela & Wang 2024, Section 4.1 and Appendix G; docs/theory/erm.rst).  The memory holds
// one scalar per row (the GLM derivative); it is initialised by the exact full gradient at
// theta0.  Every n steps (one epoch) the exact gradient is evaluated and the solver stops
// when ||grad F||_2 <= tol (Theorem G.1's stopping rule).  CSR rows use lazy ("just in
// time") updates of the untouched coordinates.

template <class View>
Result sag_dense(const View& X, const glm::Objective& ob, Evaluator<View>& ev, double* th,
                 const SagOptions& o, dpf::BitStream& rs) {
    Result res;
    const int64_t n = X.n, d = ob.d;
    std::vector<double> mem(n), G(d, 0.0), g(d);
    // The memory starts at the exact derivatives at theta0; G = sum_i mem_i x_i.
    double f = ev(th, g.data(), mem.data());
    for (int64_t i = 0; i < n; ++i)
        if (mem[i] != 0.0) mrow_axpy(X, ob, i, mem[i], G.data());
    double gn = std::sqrt(dotd(g.data(), g.data(), d));
    const double eta = o.step, beta = eta / (double)n, a = 1.0 - eta * ob.alpha / (double)n;
    // theta <- a theta - beta (G + linear): the regularizer's shrink and the averaged gradient
    auto dense_step = [th, Gp = G.data(), lin = ob.linear, a, beta, d]() {
        if (lin)
            for (int64_t j = 0; j < d; ++j) th[j] = a * th[j] - beta * (Gp[j] + lin[j]);
        else
            for (int64_t j = 0; j < d; ++j) th[j] = a * th[j] - beta * Gp[j];
    };
    int64_t ep = 0;
    while (!stop_status(f, gn, o.tol, ep, o.max_epochs, res.status)) {
        for (int64_t k = 0; k < n; ++k) {
            const int64_t i = (int64_t)rs.bounded((uint64_t)n);
            double v, dl;
            ob.row(i, mrow_dot(X, ob, i, th), v, dl);
            const double delta = dl - mem[i];
            mem[i] = dl;
            if (o.saga) {
                // theta -= eta * (delta x_i + (G + linear + alpha theta) / n); then G += delta x_i
                dense_step();
                if (delta != 0.0) {
                    mrow_axpy(X, ob, i, -eta * delta, th);
                    mrow_axpy(X, ob, i, delta, G.data());
                }
            } else {
                if (delta != 0.0) mrow_axpy(X, ob, i, delta, G.data());
                dense_step();
            }
        }
        ++ep;
        f = ev(th, g.data());
        gn = std::sqrt(dotd(g.data(), g.data(), d));
    }
    finish(res, ep, f, gn);
    return res;
}

template <class T, class I>
Result sag_sparse(const glm::CSR<T, I>& X, const glm::Objective& ob, Evaluator<glm::CSR<T, I>>& ev,
                  double* th, const SagOptions& o, dpf::BitStream& rs) {
    Result res;
    const int64_t n = X.n, d = X.d;
    // Per coordinate, in one cache line: theta_j = s * u, current up to `last` of the running
    // sum cum = sum_t beta / s_t, and c = G_j + linear_j (G = sum_i mem_i x_i).
    struct Coord {
        double u, last, c;
    };
    std::vector<double> mem(n), g(d);
    std::vector<Coord> co(d);
    double f = ev(th, g.data(), mem.data());
    for (int64_t j = 0; j < d; ++j) co[j] = Coord{th[j], 0.0, ob.linear ? ob.linear[j] : 0.0};
    for (int64_t i = 0; i < n; ++i)
        if (mem[i] != 0.0)
            for (int64_t p = (int64_t)X.indptr[i]; p < (int64_t)X.indptr[i + 1]; ++p)
                co[X.indices[p]].c += mem[i] * (double)X.data[p];
    double gn = std::sqrt(dotd(g.data(), g.data(), d));
    const double eta = o.step, beta = eta / (double)n, a = 1.0 - eta * ob.alpha / (double)n;
    double s = 1.0, cum = 0.0;
    auto flush = [&]() {
        for (int64_t j = 0; j < d; ++j) {
            Coord& q = co[j];
            q.u -= q.c * (cum - q.last);
            th[j] = s * q.u;
            q.u = th[j];
            q.last = 0.0;
        }
        s = 1.0;
        cum = 0.0;
    };
    int64_t ep = 0;
    while (!stop_status(f, gn, o.tol, ep, o.max_epochs, res.status)) {
        for (int64_t k = 0; k < n; ++k) {
            const int64_t i = (int64_t)rs.bounded((uint64_t)n);
            const int64_t p0 = (int64_t)X.indptr[i], p1 = (int64_t)X.indptr[i + 1];
            double z = 0.0;
            for (int64_t p = p0; p < p1; ++p) {
                Coord& q = co[X.indices[p]];
                q.u -= q.c * (cum - q.last);
                q.last = cum;
                z += (double)X.data[p] * q.u;
            }
            double v, dl;
            ob.row(i, s * z, v, dl);
            const double delta = dl - mem[i];
            mem[i] = dl;
            if (o.saga) {
                s *= a;
                cum += beta / s;
                const double corr = eta * delta / s;
                for (int64_t p = p0; p < p1; ++p) {
                    Coord& q = co[X.indices[p]];
                    const double xv = (double)X.data[p];
                    q.u -= q.c * (cum - q.last) + corr * xv;  // this step's dense part (old G), then delta x_i
                    q.last = cum;
                    q.c += delta * xv;
                }
            } else {
                if (delta != 0.0)
                    for (int64_t p = p0; p < p1; ++p) co[X.indices[p]].c += delta * (double)X.data[p];
                s *= a;
                cum += beta / s;
            }
            if (s < 1e-9) flush();
        }
        flush();
        ++ep;
        f = ev(th, g.data());
        gn = std::sqrt(dotd(g.data(), g.data(), d));
    }
    finish(res, ep, f, gn);
    return res;
}

// ---------------------------------------------------------------------------------------
// Drivers.

// cb[i] = C (1 - 8u) / (a rigorous upper bound of ||x_i||) from the computed squared norms sq
// of the mapped rows (extra: the roundings the row map added to them); cb may alias sq.
template <class View>
void clip_bounds(const View& X, const double* sq, double extra, double clip, double* cb) {
    {
        // Algorithm 1 needs |l_C'| ||x_i|| <= C for the exact norm, so the bound divides by a
        // rigorous upper bound of ||x_i||: a float64 sum of m squares (m = the row's terms) has
        // relative error <= m u / (1 - m u) (u = 2^-53; Higham 2002, eq. 4.4) plus, for squares
        // below the normal range, an absolute error <= m 2^-1074; the square root halves the
        // relative part and adds one rounding.  (m + 8) u covers the relative part for any
        // m < 2^50, and the target C (1 - 8u) the rounding of the division.  sq == 0 means every
        // entry is 0 or below 2^-537 in magnitude: the bound then comes from the absolute term.
        const double u = 0x1p-53;
        const double target = clip * (1.0 - 8.0 * u);
        for (int64_t i = 0; i < X.n; ++i) {
            const double m = static_cast<double>(row_terms(X, i)) + extra;
            const double ub = std::sqrt(sq[i]) * (1.0 + (m + 8.0) * u) + std::sqrt(m) * 0x1p-537;
            cb[i] = ub > 0.0 ? target / ub : std::numeric_limits<double>::infinity();  // ub == 0: an all-zero row
        }
    }
}

// Squared norms of the mapped rows into sq, then (clip > 0) the per-row derivative bounds
// C/||x_i|| in place of them (one n-vector: a fit's memory beside X stays O(n) doubles few);
// lmax = max_i w_i ||x_i||^2 for SAG's step.  False when a row is non-finite.
template <class View>
bool prepare(const View& X, glm::Objective& ob, double clip, int nthreads, std::vector<double>& sq,
             double& lmax) {
    sq.assign((size_t)X.n, 0.0);
    row_sqnorms(X, nthreads, sq.data());
    for (int64_t i = 0; i < X.n; ++i)
        if (!std::isfinite(sq[i])) return false;
    // norms of the mapped rows [rscale_i x_i, icpt]: two more roundings and one more term
    // (counted in `extra` for the bound below)
    double extra = 0.0;
    if (ob.rscale || ob.icpt != 0.0) {
        extra = 4.0;
        const double s2 = ob.icpt * ob.icpt;
        for (int64_t i = 0; i < X.n; ++i) {
            const double r = ob.rscale ? ob.rscale[i] : 1.0;
            sq[i] = (r * r) * sq[i] + s2;
            if (!std::isfinite(sq[i])) return false;
        }
    }
    lmax = 0.0;
    for (int64_t i = 0; i < X.n; ++i) lmax = std::max(lmax, (ob.w ? ob.w[i] : 1.0) * sq[i]);
    if (clip > 0.0) {
        clip_bounds(X, sq.data(), extra, clip, sq.data());  // overwritten row by row: sq[i] is read first
        ob.cbound = sq.data();
    } else {
        ob.cbound = nullptr;
    }
    return true;
}

template <class T>
Result sag_run(const glm::DenseC<T>& X, const glm::Objective& ob, Evaluator<glm::DenseC<T>>& ev,
               double* th, const SagOptions& so, dpf::BitStream& rs) {
    return sag_dense(X, ob, ev, th, so, rs);
}
template <class T>
Result sag_run(const glm::DenseF<T>& X, const glm::Objective& ob, Evaluator<glm::DenseF<T>>& ev,
               double* th, const SagOptions& so, dpf::BitStream& rs) {
    return sag_dense(X, ob, ev, th, so, rs);
}
template <class T, class I>
Result sag_run(const glm::CSR<T, I>& X, const glm::Objective& ob, Evaluator<glm::CSR<T, I>>& ev,
               double* th, const SagOptions& so, dpf::BitStream& rs) {
    return sag_sparse(X, ob, ev, th, so, rs);
}

// F and grad F at th (glm_loss_and_grad); returns false when X has non-finite entries.
template <class View>
bool loss_grad(const View& X, glm::Objective ob, double clip, int nthreads, const double* th,
               double* g, double& f) {
    std::vector<double> sq;
    double lmax;
    if (!prepare(X, ob, clip, nthreads, sq, lmax)) return false;
    Evaluator<View> ev(X, ob, nthreads);
    f = ev(th, g);
    return true;
}

// Per-row bounds of a chunk of rows (the Dask path computes them once per fit): the clipping
// bounds C/||x_i|| when clip > 0, else the squared norms of the mapped rows.
template <class View>
bool row_bounds(const View& X, glm::Objective ob, double clip, int nthreads, std::vector<double>& out) {
    double lmax;
    return prepare(X, ob, clip, nthreads, out, lmax);
}

// F and grad F from the squared norms sq of the mapped rows given by row_bounds (clip <= 0):
// one pass over X, no norm pass.
template <class View>
double loss_grad_bounded(const View& X, glm::Objective ob, const double* sq, double clip, int nthreads,
                         const double* th, double* g) {
    std::vector<double> cb;
    ob.cbound = nullptr;
    if (clip > 0.0) {
        cb.resize((size_t)X.n);
        clip_bounds(X, sq, (ob.rscale || ob.icpt != 0.0) ? 4.0 : 0.0, clip, cb.data());
        ob.cbound = cb.data();
    }
    Evaluator<View> ev(X, ob, nthreads);
    return ev(th, g);
}

// Preconditioner of L-BFGS (Precond above), for dense and CSR rows alike.  D is the diagonal
// of the bound alpha I + Q + beta X^T W X on the Hessian of F (beta the loss's curvature bound in
// the margin), taken in the centered coordinates u = A theta when the design has an in-kernel
// bias feature c (ob.icpt) and no Q: with S1_j = sum_i w_i x_ij, S2_j = sum_i w_i x_ij^2 (mapped
// rows), W = sum_i w_i and mu_j = S1_j / (c W), the centered column has sum_i w_i (x_ij - c mu_j)^2
// = S2_j - S1_j^2 / W and the ridge alpha ||A^-1 u||^2 has diagonal alpha (1 + mu_j^2) (features),
// alpha (bias).  CSR column scales follow the feature frequencies and can differ by orders of
// magnitude (a bias column has n entries, a rare feature a handful); dense columns differ less,
// but the bias column of unit-norm rows has d times the features' mean square, and one-hot
// columns all correlate with the bias.  Column sums are formed per fixed chunk of rows and
// reduced in chunk order, so P does not depend on the thread count; the sums of one row are
// the same products for C, F and CSR storage (so the layouts give the same P).  Any fixed P
// leaves the stopping rule (and the privacy argument, which needs only ||grad F|| <= tau at
// the released point) unchanged.

// Column sums over rows [b, e) of the mapped rows into c2 (w_i (r_i x_ij)^2) and, when c1 is
// not null, c1 (w_i r_i x_ij), the bias column at index X.d when the design has one.
template <class T>
void colsum_rows(const glm::DenseC<T>& X, const glm::Objective& ob, int64_t b, int64_t e, double* c1, double* c2) {
    const int64_t dx = X.d;
    for (int64_t i = b; i < e; ++i) {
        const double wi = ob.w ? ob.w[i] : 1.0, r = ob.rscale ? ob.rscale[i] : 1.0;
        const double f2 = wi * (r * r), f1 = wi * r;
        const T* xi = X.X + i * dx;
        for (int64_t j = 0; j < dx; ++j) {
            const double v = (double)xi[j];
            c2[j] += f2 * (v * v);
        }
        if (c1)
            for (int64_t j = 0; j < dx; ++j) c1[j] += f1 * (double)xi[j];
    }
}
template <class T>
void colsum_rows(const glm::DenseF<T>& X, const glm::Objective& ob, int64_t b, int64_t e, double* c1, double* c2) {
    const int64_t dx = X.d, n = X.n;
    for (int64_t j = 0; j < dx; ++j) {  // per column the same additions in row order as DenseC
        const T* xj = X.X + j * n;
        double a2 = c2[j], a1 = c1 ? c1[j] : 0.0;
        for (int64_t i = b; i < e; ++i) {
            const double wi = ob.w ? ob.w[i] : 1.0, r = ob.rscale ? ob.rscale[i] : 1.0;
            const double v = (double)xj[i];
            a2 += (wi * (r * r)) * (v * v);
            a1 += (wi * r) * v;
        }
        c2[j] = a2;
        if (c1) c1[j] = a1;
    }
}
template <class T, class I>
void colsum_rows(const glm::CSR<T, I>& X, const glm::Objective& ob, int64_t b, int64_t e, double* c1, double* c2) {
    for (int64_t i = b; i < e; ++i) {
        const double wi = ob.w ? ob.w[i] : 1.0, r = ob.rscale ? ob.rscale[i] : 1.0;
        const double f2 = wi * (r * r), f1 = wi * r;
        for (int64_t p = (int64_t)X.indptr[i]; p < (int64_t)X.indptr[i + 1]; ++p) {
            const double v = (double)X.data[p];
            c2[X.indices[p]] += f2 * (v * v);
            if (c1) c1[X.indices[p]] += f1 * v;
        }
    }
}

// S2 (and S1 when `first`) of the mapped rows, d = ob.d entries, and W = sum_i w_i (row order):
// the sums P is built from (precond_build).  The Dask path adds them over its chunks.
template <class View>
void precond_sums(const View& X, const glm::Objective& ob, int nthreads, bool first, std::vector<double>& S1,
                  std::vector<double>& S2, double& W) {
    const int64_t d = ob.d, dx = X.d;
    const bool bias = ob.icpt != 0.0 && d > dx;
    const Chunks ch(X.n, d);
    const int T = work_of(X) >= kParallelWork ? nthreads : 1;
    std::vector<double> p2((size_t)(ch.count * d)), p1(first ? (size_t)(ch.count * d) : 0);
    run_chunks(ch.count, T, [&](int64_t k) {
        double* c2 = p2.data() + k * d;
        double* c1 = first ? p1.data() + k * d : nullptr;
        std::fill(c2, c2 + d, 0.0);
        if (c1) std::fill(c1, c1 + d, 0.0);
        colsum_rows(X, ob, ch.begin(k), ch.end(k), c1, c2);
        if (bias)
            for (int64_t i = ch.begin(k); i < ch.end(k); ++i) {
                const double wi = ob.w ? ob.w[i] : 1.0;
                c2[dx] += wi * (ob.icpt * ob.icpt);
                if (c1) c1[dx] += wi * ob.icpt;
            }
    });
    auto reduce = [&](const std::vector<double>& part, std::vector<double>& out) {
        out.assign((size_t)d, 0.0);
        for (int64_t k = 0; k < ch.count; ++k) {
            const double* ck = part.data() + k * d;
            for (int64_t j = 0; j < d; ++j) out[j] += ck[j];
        }
    };
    reduce(p2, S2);
    if (first) reduce(p1, S1);
    else S1.clear();
    W = 0.0;
    for (int64_t i = 0; i < X.n; ++i) W += ob.w ? ob.w[i] : 1.0;
}

// P from the sums of precond_sums (d coordinates, dx stored columns, the bias at dx when d > dx
// and icpt != 0; S1 empty: no centering); Q (d x d) or null.
inline void precond_build(int64_t d, int64_t dx, double alpha, const double* Q, double beta, double icpt,
                          const std::vector<double>& S1, std::vector<double> S2, double W, Precond& pc) {
    const bool center = icpt != 0.0 && d > dx && !Q && (int64_t)S1.size() == d;
    pc.bias = -1;
    pc.mu.clear();
    if (center && W > 0.0) {
        pc.bias = dx;
        pc.mu.assign((size_t)d, 0.0);
        for (int64_t j = 0; j < dx; ++j) {
            pc.mu[j] = S1[j] / (icpt * W);
            S2[j] = std::max(0.0, S2[j] - S1[j] * (S1[j] / W));  // centered column (Cauchy-Schwarz: >= 0)
        }
    }
    pc.hinv.assign((size_t)d, 0.0);
    for (int64_t j = 0; j < d; ++j) {
        const double ridge = pc.bias >= 0 && j != pc.bias ? alpha * (1.0 + pc.mu[j] * pc.mu[j]) : alpha;
        const double D = ridge + (Q ? Q[j * d + j] : 0.0) + beta * S2[j];
        pc.hinv[j] = (D > 0.0 && std::isfinite(D)) ? 1.0 / D : 1.0;  // an empty column without ridge: no scaling
    }
    bool finite = true;
    for (int64_t j = 0; j < (int64_t)pc.mu.size(); ++j) finite &= std::isfinite(pc.mu[j]);
    if (!finite) {  // overflowing column sums: keep the diagonal only
        pc.bias = -1;
        pc.mu.clear();
    }
}

template <class View>
void precond_setup(const View& X, const glm::Objective& ob, Evaluator<View>& ev, Precond& pc) {
    const bool center = ob.icpt != 0.0 && ob.d > X.d && !ob.Q;
    double lip, beta, W;
    dpf::loss::loss_constants(ob.lp, lip, beta);
    std::vector<double> S1, S2;
    precond_sums(X, ob, ev.nthreads, center, S1, S2, W);
    precond_build(ob.d, X.d, ob.alpha, ob.Q, beta, ob.icpt, S1, std::move(S2), W, pc);
}

template <class View>
Result solve(const View& X, glm::Objective ob, const Options& o, double* th, bitgen_t* bg) {
    Result res;
    std::vector<double> sq;
    double lmax = 0.0;
    if (!prepare(X, ob, o.clip, o.nthreads, sq, lmax)) {
        res.status = 4;
        return res;
    }
    Evaluator<View> ev(X, ob, o.nthreads);
    if (o.method == 0) {
        auto fg = [&ev](const double* t, double* g) { return ev(t, g); };
        Precond pc;
        precond_setup(X, ob, ev, pc);
        res = lbfgs(fg, ob.d, th, o.tol, o.max_iter, std::max(1, o.memory), pc.hinv.empty() ? nullptr : &pc);
    } else {
        double lip, smooth;
        dpf::loss::loss_constants(ob.lp, lip, smooth);
        lmax *= smooth;
        lmax += ob.alpha / (double)std::max<int64_t>(1, X.n);
        if (!(lmax > 0.0)) lmax = 1.0;
        SagOptions so;
        so.saga = o.method == 2;
        so.tol = o.tol;
        so.max_epochs = o.max_iter;
        if (o.step > 0.0)
            so.step = o.step;
        else if (o.step_rule == 1)
            so.step = 1.0 / (16.0 * lmax);
        else
            so.step = so.saga ? 1.0 / (3.0 * lmax) : 1.0 / lmax;
        // keep the shrink factor 1 - step*alpha/n of the regularizer >= 1/2 (SAG's 1/L_max
        // would make it ~0 when alpha/n dominates the smoothness; the lazy scale needs > 0)
        if (ob.alpha > 0.0) so.step = std::min(so.step, 0.5 * (double)X.n / ob.alpha);
        dpf::BitStream rs(bg);
        res = sag_run(X, ob, ev, th, so, rs);
        res.step = so.step;
    }
    res.n_eval = ev.n_eval;
    return res;
}

