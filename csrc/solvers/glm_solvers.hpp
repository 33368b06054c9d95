// L-BFGS and SAG/SAGA for the GLM objective of csrc/glm/data.hpp over dense (C or F
// order, float32/float64) and CSR rows, with run-time choice between a generic x86-64 /
// portable build and an AVX2 build of the same code (csrc/solvers/impl.hpp).
// Spec: objective_perturbation.md ("Algorithm 1", "Computational guarantee").  No Python.
#pragma once
#include "portable.hpp"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "glm/data.hpp"
#include "parallel.hpp"
#include "random/bitstream.hpp"

namespace dpf {
namespace solvers {

struct Options {
    int method = 0;  // 0 L-BFGS, 1 SAG, 2 SAGA
    double tol = 1e-6;
    int64_t max_iter = 1000;  // L-BFGS iterations or SAG/SAGA epochs
    int memory = 10;          // L-BFGS pairs
    double step = 0.0;        // SAG/SAGA step on F/n; <= 0: from step_rule
    int step_rule = 0;        // 0: 1/L_max (SAG), 1/(3 L_max) (SAGA); 1: 1/(16 L_max) (theory)
    int nthreads = 1;
    double clip = 0.0;  // > 0: gradient-clipped loss with bound C
};

struct Result {
    int64_t n_iter = 0, n_eval = 0;
    bool converged = false;
    double fun = 0.0, grad_norm = 0.0, step = 0.0;
    int status = 0;  // 0 converged, 1 max_iter, 2 line search failed, 3 non-finite F, 4 non-finite X
};

struct SagOptions {
    bool saga = false;
    double step = 0.0;  // on the mean objective F/n
    double tol = 1e-6;
    int64_t max_epochs = 1000;
};

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace generic {
#include "solvers/impl.hpp"
}  // namespace generic

#if defined(DPF_HAVE_AVX2_DISPATCH)  // csrc/portable.hpp: GCC on x86-64, not a baseline-only build
#define DPF_GLM_HAVE_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
#include "solvers/impl.hpp"
}  // namespace avx2
#pragma GCC pop_options
inline bool use_avx2() {
    // DPFAST_GLM_NO_AVX2=1 forces the baseline build (to test it on AVX2 machines).
    static const bool ok = avx2_enabled("DPFAST_GLM_NO_AVX2");
    return ok;
}
#else
inline bool use_avx2() { return false; }
#endif

// (-Wpsabi stays off: the 32-byte vectors only live inside inlined kernels, never in an ABI.)

template <class View>
Result solve(const View& X, const glm::Objective& ob, const Options& o, double* th, bitgen_t* bg) {
#ifdef DPF_GLM_HAVE_AVX2
    if (use_avx2()) return avx2::solve(X, ob, o, th, bg);
#endif
    return generic::solve(X, ob, o, th, bg);
}

template <class View>
bool loss_grad(const View& X, const glm::Objective& ob, double clip, int nthreads, const double* th,
               double* g, double& f) {
#ifdef DPF_GLM_HAVE_AVX2
    if (use_avx2()) return avx2::loss_grad(X, ob, clip, nthreads, th, g, f);
#endif
    return generic::loss_grad(X, ob, clip, nthreads, th, g, f);
}

template <class View>
bool row_bounds(const View& X, const glm::Objective& ob, double clip, int nthreads, std::vector<double>& out) {
#ifdef DPF_GLM_HAVE_AVX2
    if (use_avx2()) return avx2::row_bounds(X, ob, clip, nthreads, out);
#endif
    return generic::row_bounds(X, ob, clip, nthreads, out);
}

template <class View>
double loss_grad_bounded(const View& X, const glm::Objective& ob, const double* sq, double clip, int nthreads,
                         const double* th, double* g) {
#ifdef DPF_GLM_HAVE_AVX2
    if (use_avx2()) return avx2::loss_grad_bounded(X, ob, sq, clip, nthreads, th, g);
#endif
    return generic::loss_grad_bounded(X, ob, sq, clip, nthreads, th, g);
}

// The column sums the L-BFGS preconditioner is built from (precond.hpp, precond_sums): the Dask
// path forms them chunk by chunk in its validation pass and adds them in chunk order.
template <class View>
void precond_sums(const View& X, const glm::Objective& ob, int nthreads, bool first, std::vector<double>& S1,
                  std::vector<double>& S2, double& W) {
#ifdef DPF_GLM_HAVE_AVX2
    if (use_avx2()) return avx2::precond_sums(X, ob, nthreads, first, S1, S2, W);
#endif
    return generic::precond_sums(X, ob, nthreads, first, S1, S2, W);
}

// Inputs of the preconditioner P of precond.hpp (precond_build): the sums of precond_sums over all
// rows (S1 empty: no centering), the ridge alpha, the loss's curvature bound beta, the bias
// feature c (0: none) and the stored columns dx.
struct PrecondSums {
    std::vector<double> S1, S2;
    double W = 0.0, alpha = 0.0, beta = 0.0, icpt = 0.0;
    int64_t dx = 0;
};

// L-BFGS of the native solvers on any objective fg(theta, grad) -> F (the Dask path evaluates
// F chunk by chunk from Python): the same iterations as solve(), so equal evaluations give
// equal points.  Preconditioner: ps (the P of solve() for the same sums), else hinv, an
// explicit diagonal P^-1 (d entries > 0), else none.
template <class Fun>
Result lbfgs_fn(Fun& fg, int64_t d, double* th, double tol, int64_t max_iter, int memory,
                const double* hinv = nullptr, const PrecondSums* ps = nullptr) {
    const int m = std::max(1, memory);
#ifdef DPF_GLM_HAVE_AVX2
    if (use_avx2()) {
        avx2::Precond pc;
        if (ps) avx2::precond_build(d, ps->dx, ps->alpha, nullptr, ps->beta, ps->icpt, ps->S1, ps->S2, ps->W, pc);
        else if (hinv) pc.hinv.assign(hinv, hinv + d);
        return avx2::lbfgs(fg, d, th, tol, max_iter, m, (ps || hinv) ? &pc : nullptr);
    }
#endif
    generic::Precond pc;
    if (ps) generic::precond_build(d, ps->dx, ps->alpha, nullptr, ps->beta, ps->icpt, ps->S1, ps->S2, ps->W, pc);
    else if (hinv) pc.hinv.assign(hinv, hinv + d);
    return generic::lbfgs(fg, d, th, tol, max_iter, m, (ps || hinv) ? &pc : nullptr);
}

}  // namespace solvers
}  // namespace dpf
