// NO include guard: part of csrc/solvers/impl.hpp, which csrc/solvers/glm_solvers.hpp includes
// twice (namespaces `generic` and `avx2`); see impl.hpp.

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

// The SAG/SAGA variant for the storage of X: dense rows, or lazy updates for CSR rows.
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
