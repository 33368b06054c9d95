// dpfast._multinomial: the K-output softmax cross-entropy loss (csrc/losses/losses.hpp) and
// its chunked loss-and-gradient pass (csrc/solvers/multinomial.hpp).  Values (finiteness,
// label range, shapes) are validated in dpfast/linear_model/_multinomial.py; this file checks
// the layout facts the kernel relies on so that a wrong call raises instead of reading out of
// bounds.
#include <cmath>
#include <cstdint>
#include <string>

#include "bindings/common.hpp"
#include "bindings/csr_view.hpp"
#include "bindings/loss_table.hpp"
#include "solvers/multinomial.hpp"

using namespace dpf_bind;
namespace mn = dpf::solvers::multinomial;

namespace {

// Calls fn(view) for dense C-order X (indices None) or CSR (data, indices, indptr; bindings/csr_view.hpp).
template <class Fn>
void with_view(const py::array& X, const py::object& indices, const py::object& indptr, int64_t n, int64_t d,
               Fn&& fn) {
    const auto dt = X.dtype();
    require(dt.kind() == 'f' && (dt.itemsize() == 4 || dt.itemsize() == 8), "X must be float32 or float64");
    const bool f64 = dt.itemsize() == 8;
    if (indices.is_none()) {
        require(X.ndim() == 2 && X.shape(0) == n && X.shape(1) == d, "X shape mismatch");
        require((X.flags() & py::array::c_style) != 0, "X must be C-contiguous");
        if (f64) fn(dpf::glm::DenseC<double>{static_cast<const double*>(X.data()), n, d});
        else fn(dpf::glm::DenseC<float>{static_cast<const float*>(X.data()), n, d});
        return;
    }
    with_csr(X, indices, indptr, n, d, fn);
}

// (F, G, ok): F(W) = sum_i w_i l(W; x_i, y_i) + (alpha/2)||W||_F^2 and its gradient (d x K),
// d = dx + (icpt != 0); ok is false when a value is not finite.
py::tuple loss_and_grad(py::array X, py::object indices, py::object indptr, int64_t n, int64_t dx,
                        carray<int64_t> y, py::object w, int64_t K, double alpha, carray<double> W,
                        int nthreads, py::object rscale, double icpt) {
    require(K >= 2, "K must be >= 2");
    require(std::isfinite(icpt) && std::isfinite(alpha) && alpha >= 0.0, "icpt and alpha must be finite, alpha >= 0");
    require(y.ndim() == 1 && y.shape(0) == n, "y must have n entries");
    const int64_t* py_ = y.data();
    bool inrange = true;
    for (int64_t i = 0; i < n; ++i) inrange &= (py_[i] >= 0) & (py_[i] < K);
    require(inrange, "labels must lie in [0, K)");
    mn::Problem P;
    P.n = n;
    P.dx = dx;
    P.K = K;
    P.y = py_;
    P.w = opt_ptr(w, n, "sample_weight");
    P.rscale = opt_ptr(rscale, n, "rscale");
    P.icpt = icpt;
    P.alpha = alpha;
    const int64_t d = P.d();
    require(W.ndim() == 2 && W.shape(0) == d && W.shape(1) == K, "W must have shape (d (+1 with icpt), K)");
    py::array_t<double> G({d, K});
    double f = 0.0;
    bool ok = true;
    with_view(X, indices, indptr, n, dx, [&](const auto& view) {
        py::gil_scoped_release nogil;
        ok = mn::loss_grad(view, P, std::max(1, nthreads), W.data(), G.mutable_data(), f);
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
