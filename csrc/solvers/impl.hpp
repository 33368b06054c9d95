// Solver kernels.  NO include guard on purpose: csrc/solvers/glm_solvers.hpp includes this
// file twice, once in namespace `generic` and once in namespace `avx2` under
// `#pragma GCC target("avx2")`, and picks one at run time (no -march=native needed).
// Everything here is deterministic for a given machine: rows are cut into chunks that
// depend only on n (never on the thread count) and partial sums are reduced in chunk order.
//
// Included from glm_solvers.hpp after <algorithm>, <cmath>, <cstring>, <thread>, <vector>,
// "glm/data.hpp" and "random/bitstream.hpp".
//
// The kernels are split by concept into headers without include guards, included here in
// dependency order (each one inside the caller's namespace):
#include "solvers/simd_math.hpp"    // 4-lane dot/norm/axpy, vectorized logistic loss
#include "solvers/objective.hpp"    // F and grad F over fixed row chunks; stopping rule
#include "solvers/line_search.hpp"  // strong-Wolfe line search
#include "solvers/precond.hpp"      // L-BFGS preconditioner and its column sums
#include "solvers/lbfgs.hpp"        // L-BFGS
#include "solvers/sag.hpp"          // SAG / SAGA

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
