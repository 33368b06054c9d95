// The line search of L-BFGS (csrc/solvers/lbfgs.hpp): strong Wolfe (Nocedal & Wright 2006,
// Alg. 3.5/3.6, cubic interpolation), also accepting Hager & Zhang's approximate Wolfe point
// when F's decrease is below its rounding error.
// NO include guard: part of csrc/solvers/impl.hpp, which csrc/solvers/glm_solvers.hpp includes
// twice (namespaces `generic` and `avx2`); see impl.hpp.

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
