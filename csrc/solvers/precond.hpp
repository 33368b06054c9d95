// The fixed diagonal (optionally centered) preconditioner of L-BFGS and the column sums it is
// built from.
// NO include guard: part of csrc/solvers/impl.hpp, which csrc/solvers/glm_solvers.hpp includes
// twice (namespaces `generic` and `avx2`); see impl.hpp.

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
