// dpfast._multinomial: the K-output softmax cross-entropy loss (csrc/losses/losses.hpp) and
// its chunked loss-and-gradient pass (csrc/solvers/multinomial.hpp).  Values (finiteness,
// label range, shapes) are validated in dpfast/linear_model/_multinomial.py; this file checks
// the layout facts the kernel relies on so that a wrong call raises instead of reading out of
// bounds.
#include <cmath>
#include <cstdint>
#include <string>

#include "bindings/loss_table.hpp"
#include "bindings/matrix_view.hpp"
#include "solvers/multinomial.hpp"

using namespace dpf_bind;
namespace mn = dpf::solvers::multinomial;

namespace {

// (F, G, ok): F(W) = sum_i w_i l(W; x_i, y_i) + (alpha/2)||W||_F^2 and its gradient (d x K),
// d = dx + (icpt != 0); ok is false when a value is not finite.  X: dense C order (indices
// None) or CSR (bindings/matrix_view.hpp).
py::tuple loss_and_grad(py::array X, py::object indices, py::object indptr, int64_t n, int64_t dx,
                        py::object y_, py::object w, int64_t K, double alpha, py::object W_,
                        int nthreads, py::object rscale, double icpt) {
    require(K >= 2, "K must be >= 2");
    require(std::isfinite(icpt) && std::isfinite(alpha) && alpha >= 0.0, "icpt and alpha must be finite, alpha >= 0");
    auto y = in<int64_t>(y_, "y", Shape::vec(n), Take::convert);
    bool inrange = true;
    for (int64_t i = 0; i < n; ++i) inrange &= (y[i] >= 0) & (y[i] < K);
    require(inrange, "labels must lie in [0, K)");
    auto sw = opt_in<double>(w, "sample_weight", Shape::size(n));
    auto rs = opt_in<double>(rscale, "rscale", Shape::size(n));
    mn::Problem P;
    P.n = n;
    P.dx = dx;
    P.K = K;
    P.y = y.ptr;
    P.w = sw.ptr;
    P.rscale = rs.ptr;
    P.icpt = icpt;
    P.alpha = alpha;
    const int64_t d = P.d();
    auto W = in<double>(W_, "W", Shape::mat(d, K), Take::convert);
    py::array_t<double> G({d, K});
    double f = 0.0;
    bool ok = true;
    with_matrix<false>(X, indices, indptr, indices.is_none() ? kC : kCSR, n, dx, [&](const auto& view) {
        py::gil_scoped_release nogil;
        ok = mn::loss_grad(view, P, std::max(1, nthreads), W.ptr, G.mutable_data(), f);
    });
    return py::make_tuple(f, G, ok);
}

}  // namespace

PYBIND11_MODULE(_multinomial, m) {
    m.doc() = "Multinomial (softmax cross-entropy) loss and its chunked loss-and-gradient kernel";
    m.def("loss_and_grad", &loss_and_grad, py::arg("X"), py::arg("indices"), py::arg("indptr"), py::arg("n"),
          py::arg("dx"), py::arg("y"), py::arg("w"), py::arg("K"), py::arg("alpha"), py::arg("W"),
          py::arg("nthreads"), py::arg("rscale"), py::arg("icpt"));
    m.def("loss_table", &dpf_bind::loss_table, "Every loss once: name -> code, outputs, labels and constants (csrc/losses/losses.hpp).");
}
