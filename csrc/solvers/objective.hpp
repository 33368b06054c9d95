// The GLM objective F(theta) = sum_i w_i l_C(x_i.theta) + regularizer of csrc/glm/data.hpp and
// its gradient, in fixed row chunks (deterministic for any thread count): block losses, row
// access, chunk kernels, the Evaluator the solvers call, and the solvers' shared stopping rule.
// NO include guard: part of csrc/solvers/impl.hpp, which csrc/solvers/glm_solvers.hpp includes
// twice (namespaces `generic` and `avx2`); see impl.hpp.

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
