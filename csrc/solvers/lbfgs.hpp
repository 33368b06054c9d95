// L-BFGS (Nocedal & Wright 2006, Alg. 7.4/7.5) with the line search of line_search.hpp and the
// preconditioner of precond.hpp.  Stops on ||grad F||_2 <= tol.
// NO include guard: part of csrc/solvers/impl.hpp, which csrc/solvers/glm_solvers.hpp includes
// twice (namespaces `generic` and `avx2`); see impl.hpp.

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
