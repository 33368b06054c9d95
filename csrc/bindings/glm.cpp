// dpfast._glm: GLM losses and the L-BFGS / SAG / SAGA solvers (kernels in csrc/losses/,
// csrc/glm/ and csrc/solvers/).  Validation of values (finiteness of y, labels, shapes, dtypes) is done in
// dpfast/linear_model/_solver.py; this file checks the layout facts a kernel relies on so
// that a wrong call raises instead of reading out of bounds.
#include <cmath>
#include <cstdint>
#include <string>

#include "bindings/loss_table.hpp"
#include "bindings/matrix_view.hpp"
#include "solvers/glm_solvers.hpp"

using namespace dpf_bind;

namespace {

// The arrays an Objective points into (kept alive for the call).
struct ObjectiveArgs {
    View<const double> y, w, linear, Q, rscale;
};

// d: X's stored columns; the problem has d + (icpt != 0) coordinates (data.hpp).
dpf::glm::Objective make_objective(ObjectiveArgs& a, int64_t n, int64_t d, const py::object& y, const py::object& w,
                                   int loss, double delta, double alpha, const py::object& linear,
                                   const py::object& Q, const py::object& rscale, double icpt) {
    checked_loss(loss, dpf::loss::Outputs::one, "margin");
    require(std::isfinite(icpt), "icpt must be finite");
    if (icpt != 0.0) d += 1;
    a.y = y.is_none() ? View<const double>{} : in<double>(y, "y", Shape::vec(n), Take::convert);
    a.w = opt_in<double>(w, "sample_weight", Shape::size(n));
    a.rscale = opt_in<double>(rscale, "rscale", Shape::size(n));
    a.linear = opt_in<double>(linear, "linear", Shape::size(d));
    a.Q = opt_in<double>(Q, "quadratic", Shape::size(d * d));
    dpf::glm::Objective ob;
    ob.rscale = a.rscale.ptr;
    ob.icpt = icpt;
    ob.lp.loss = static_cast<dpf::loss::Loss>(loss);
    ob.lp.delta = delta;
    ob.n = n;
    ob.d = d;
    ob.y = a.y.ptr;
    ob.w = a.w.ptr;
    ob.alpha = alpha;
    ob.linear = a.linear.ptr;
    ob.Q = a.Q.ptr;
    return ob;
}

py::tuple minimize(py::array X, py::object indices, py::object indptr, int layout, int64_t n, int64_t d,
                   py::object y, py::object w, int loss, double delta, double clip, double alpha,
                   py::object linear, py::object Q, int method, double tol, int64_t max_iter, int memory,
                   double step, int step_rule, int nthreads, py::object theta, py::object capsule,
                   py::object rscale, double icpt) {
    require(method >= 0 && method <= 2, "unknown method");
    // SAG/SAGA's lazy CSR updates read the stored rows: no in-kernel row map or intercept there
    require(layout != kCSR || method == 0 || (rscale.is_none() && icpt == 0.0),
            "the in-kernel row map and intercept of CSR X are for L-BFGS only");
    ObjectiveArgs args;
    dpf::glm::Objective ob = make_objective(args, n, d, y, w, loss, delta, alpha, linear, Q, rscale, icpt);
    auto th = out<double>(theta, "theta", Shape::vec(ob.d));
    bitgen_t* bg = nullptr;
    if (method != 0) {
        require(!capsule.is_none(), "SAG/SAGA need a bit generator capsule");
        bg = bitgen_from_capsule(py::cast<py::capsule>(capsule));
    }
    dpf::solvers::Options o;
    o.method = method;
    o.tol = tol;
    o.max_iter = max_iter;
    o.memory = memory;
    o.step = step;
    o.step_rule = step_rule;
    o.nthreads = std::max(1, nthreads);
    o.clip = clip;
    dpf::solvers::Result r;
    with_matrix(X, indices, indptr, layout, n, d, [&](const auto& view) {
        py::gil_scoped_release nogil;
        r = dpf::solvers::solve(view, ob, o, th.ptr, bg);
    });
    return py::make_tuple(r.n_iter, r.n_eval, r.converged, r.fun, r.grad_norm, r.status, r.step);
}

py::tuple loss_and_grad(py::array X, py::object indices, py::object indptr, int layout, int64_t n,
                        int64_t d, py::object y, py::object w, int loss, double delta, double clip,
                        double alpha, py::object linear, py::object Q, py::object theta, int nthreads,
                        py::object rscale, double icpt) {
    ObjectiveArgs args;
    dpf::glm::Objective ob = make_objective(args, n, d, y, w, loss, delta, alpha, linear, Q, rscale, icpt);
    auto th = in<double>(theta, "theta", Shape::vec(ob.d), Take::convert);
    py::array_t<double> g(ob.d);
    double* pg = g.mutable_data();
    double f = 0.0;
    bool ok = true;
    with_matrix(X, indices, indptr, layout, n, d, [&](const auto& view) {
        py::gil_scoped_release nogil;
        ok = dpf::solvers::loss_grad(view, ob, clip, std::max(1, nthreads), th.ptr, pg, f);
    });
    return py::make_tuple(f, g, ok);
}

// The all-ones labels of the kernels that read no label (row bounds, preconditioner sums).
py::array_t<double> ones(int64_t n) {
    py::array_t<double> y0(n);
    std::fill(y0.mutable_data(), y0.mutable_data() + n, 1.0);
    return y0;
}

// Chunk kernels of the Dask path (dense C-order chunks; linear_model/_dask.py).
// row_bounds: (ok, v) with v the clipping bounds C/||x_i|| of the mapped rows (clip > 0) or
// their squared norms (clip <= 0); ok is false when a row is non-finite.
py::tuple row_bounds(py::array X, int64_t n, int64_t d, py::object rscale, double icpt, double clip,
                     int nthreads) {
    ObjectiveArgs args;
    dpf::glm::Objective ob =
        make_objective(args, n, d, ones(n), py::none(), 0, 1.0, 0.0, py::none(), py::none(), rscale, icpt);
    std::vector<double> out;
    bool ok = true;
    with_matrix(X, py::none(), py::none(), kC, n, d, [&](const auto& view) {
        py::gil_scoped_release nogil;
        ok = dpf::solvers::row_bounds(view, ob, clip, std::max(1, nthreads), out);
    });
    return py::make_tuple(ok, to_numpy(out));
}

// The data part sum_i w_i l_C(y_i, x_i.theta) and its gradient (no regularizer), given the
// squared norms sq of the mapped rows from row_bounds(clip=0) (clip <= 0: no clipping): one
// pass over the chunk.
py::tuple chunk_loss_grad(py::array X, int64_t n, int64_t d, py::object y, py::object w, int loss,
                          double delta, py::object sq_, double clip, py::object rscale, double icpt,
                          py::object theta_, int nthreads) {
    ObjectiveArgs args;
    dpf::glm::Objective ob =
        make_objective(args, n, d, y, w, loss, delta, 0.0, py::none(), py::none(), rscale, icpt);
    auto sq = in<double>(sq_, "sq", Shape::vec(n), Take::convert);
    auto theta = in<double>(theta_, "theta", Shape::vec(ob.d), Take::convert);
    py::array_t<double> g(ob.d);
    double f = 0.0;
    with_matrix(X, py::none(), py::none(), kC, n, d, [&](const auto& view) {
        py::gil_scoped_release nogil;
        f = dpf::solvers::loss_grad_bounded(view, ob, sq.ptr, clip, std::max(1, nthreads), theta.ptr,
                                            g.mutable_data());
    });
    return py::make_tuple(f, g);
}

// The L-BFGS preconditioner's column sums of a dense C-order chunk of mapped rows
// (solvers::precond_sums): (S1 or None, S2, W), d + (icpt != 0) entries each.
py::tuple precond_sums(py::array X, int64_t n, int64_t d, py::object w, py::object rscale, double icpt, bool first,
                       int nthreads) {
    ObjectiveArgs args;
    dpf::glm::Objective ob = make_objective(args, n, d, ones(n), w, 0, 1.0, 0.0, py::none(), py::none(), rscale, icpt);
    std::vector<double> S1, S2;
    double W = 0.0;
    with_matrix(X, py::none(), py::none(), kC, n, d, [&](const auto& view) {
        py::gil_scoped_release nogil;
        dpf::solvers::precond_sums(view, ob, std::max(1, nthreads), first, S1, S2, W);
    });
    return py::make_tuple(first ? py::object(to_numpy(S1)) : py::none(), to_numpy(S2), W);
}

// L-BFGS (the native iterations of minimize) on fg(theta) -> (F, grad F) given in Python: the
// Dask path, whose evaluations are Dask graphs.  An exception in fg propagates (nothing is
// returned); theta is updated in place.
py::tuple minimize_callable(py::function fg, py::object theta_, double tol, int64_t max_iter, int memory,
                            py::object hinv, py::object precond) {
    auto theta = out<double>(theta_, "theta", Shape::vec());
    const int64_t d = theta.size;
    // optional diagonal preconditioner: d positive finite entries
    auto hv = opt_in<double>(hinv, "hinv", Shape::vec(d), Take::convert);
    for (int64_t j = 0; j < (hv.ptr ? d : 0); ++j) require(hv[j] > 0.0 && std::isfinite(hv[j]), "hinv must be positive and finite");
    // precond: (S1 or None, S2, W, alpha, beta, icpt), the sums of precond_sums over all rows: the
    // preconditioner minimize() builds from the same sums (solvers::lbfgs_fn)
    dpf::solvers::PrecondSums ps;
    const bool have_ps = !precond.is_none();
    if (have_ps) {
        require(hv.ptr == nullptr, "give hinv or precond, not both");
        auto t = py::cast<py::tuple>(precond);
        require(t.size() == 6, "precond must be (S1, S2, W, alpha, beta, icpt)");
        auto vec = [d](const py::object& o, const char* name) {
            auto a = in<double>(o, name, Shape::vec(d), Take::convert);
            return std::vector<double>(a.ptr, a.ptr + d);
        };
        if (!t[0].is_none()) ps.S1 = vec(t[0], "S1");
        ps.S2 = vec(t[1], "S2");
        ps.W = py::cast<double>(t[2]);
        ps.alpha = py::cast<double>(t[3]);
        ps.beta = py::cast<double>(t[4]);
        ps.icpt = py::cast<double>(t[5]);
        require(std::isfinite(ps.icpt), "icpt must be finite");
        ps.dx = ps.icpt != 0.0 ? d - 1 : d;
    }
    int64_t n_eval = 0;
    auto f = [&](const double* t, double* g) -> double {
        ++n_eval;
        py::array_t<double> tv(d);
        std::copy(t, t + d, tv.mutable_data());
        py::tuple out = fg(tv);
        require(out.size() == 2, "fg must return (F, grad)");
        const double fv = py::cast<double>(out[0]);
        auto gv = in<double>(out[1], "fg's gradient", Shape::vec(d), Take::convert);
        std::copy(gv.ptr, gv.ptr + d, g);
        return fv;
    };
    dpf::solvers::Result r = dpf::solvers::lbfgs_fn(f, d, theta.ptr, tol, max_iter, memory, hv.ptr, have_ps ? &ps : nullptr);
    return py::make_tuple(r.n_iter, n_eval, r.status == 0, r.fun, r.grad_norm, r.status);
}

// Elementwise loss value, first and second derivative in the margin (and clipped versions
// when c is given; c = inf means no clipping).  For tests and for callers that need l(z).
py::tuple loss_eval(int loss, double delta, py::object z_, py::object y_, py::object c_) {
    checked_loss(loss, dpf::loss::Outputs::one, "margin");
    auto z = in<double>(z_, "z", Shape::any(), Take::convert);
    auto y = in<double>(y_, "y", Shape::size(z.size), Take::convert);
    auto c = in<double>(c_, "c", Shape::any(), Take::convert);
    require(c.size == z.size || c.size == 1, "c must have 1 entry or as many as z");
    dpf::loss::LossParams p;
    p.loss = static_cast<dpf::loss::Loss>(loss);
    p.delta = delta;
    const int64_t n = z.size;
    py::array_t<double> v(n), d1(n), d2(n);
    double *pv = v.mutable_data(), *p1 = d1.mutable_data(), *p2 = d2.mutable_data();
    for (int64_t i = 0; i < n; ++i) dpf::loss::clipped_derivs(p, z[i], y[i], c[c.size == 1 ? 0 : i], pv[i], p1[i], p2[i]);
    return py::make_tuple(v, d1, d2);
}

py::tuple constants(int loss, double delta) {
    checked_loss(loss, dpf::loss::Outputs::one, "margin");
    dpf::loss::LossParams p;
    p.loss = static_cast<dpf::loss::Loss>(loss);
    p.delta = delta;
    double lip, sm;
    dpf::loss::loss_constants(p, lip, sm);
    return py::make_tuple(lip, sm);
}

}  // namespace

PYBIND11_MODULE(_glm, m) {
    m.doc() = "dpfast._glm: GLM losses, L-BFGS and SAG/SAGA solvers (kernels in csrc/losses, csrc/glm, csrc/solvers)";
    m.def("minimize", &minimize, py::arg("X"), py::arg("indices"), py::arg("indptr"), py::arg("layout"),
          py::arg("n"), py::arg("d"), py::arg("y"), py::arg("w"), py::arg("loss"), py::arg("delta"),
          py::arg("clip"), py::arg("alpha"), py::arg("linear"), py::arg("Q"), py::arg("method"),
          py::arg("tol"), py::arg("max_iter"), py::arg("memory"), py::arg("step"), py::arg("step_rule"),
          py::arg("nthreads"), py::arg("theta").noconvert(), py::arg("capsule"), py::arg("rscale") = py::none(),
          py::arg("icpt") = 0.0);
    m.def("loss_and_grad", &loss_and_grad, py::arg("X"), py::arg("indices"), py::arg("indptr"),
          py::arg("layout"), py::arg("n"), py::arg("d"), py::arg("y"), py::arg("w"), py::arg("loss"),
          py::arg("delta"), py::arg("clip"), py::arg("alpha"), py::arg("linear"), py::arg("Q"),
          py::arg("theta"), py::arg("nthreads"), py::arg("rscale") = py::none(), py::arg("icpt") = 0.0);
    m.def("row_bounds", &row_bounds, py::arg("X"), py::arg("n"), py::arg("d"), py::arg("rscale"), py::arg("icpt"),
          py::arg("clip"), py::arg("nthreads"));
    m.def("chunk_loss_grad", &chunk_loss_grad, py::arg("X"), py::arg("n"), py::arg("d"), py::arg("y"), py::arg("w"),
          py::arg("loss"), py::arg("delta"), py::arg("sq"), py::arg("clip"), py::arg("rscale"), py::arg("icpt"), py::arg("theta"),
          py::arg("nthreads"));
    m.def("minimize_callable", &minimize_callable, py::arg("fg"), py::arg("theta").noconvert(), py::arg("tol"),
          py::arg("max_iter"), py::arg("memory"), py::arg("hinv") = py::none(), py::arg("precond") = py::none());
    m.def("precond_sums", &precond_sums, py::arg("X"), py::arg("n"), py::arg("d"), py::arg("w"), py::arg("rscale"),
          py::arg("icpt"), py::arg("first"), py::arg("nthreads"));
    m.def("loss_eval", &loss_eval, py::arg("loss"), py::arg("delta"), py::arg("z"), py::arg("y"), py::arg("c"));
    m.def("constants", &constants, py::arg("loss"), py::arg("delta"));
    m.def("loss_table", &dpf_bind::loss_table, "Every loss once: name -> code, outputs, labels and constants (csrc/losses/losses.hpp).");
    m.attr("has_avx2") = dpf::solvers::use_avx2();
}
