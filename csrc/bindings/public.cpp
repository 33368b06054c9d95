// dpfast._public: exact weighted 0-1-loss ERM oracles (thresholds, decision stumps) for the
// public-data learners (Block, Bun, Desai, Shetty & Wu 2024, Algorithm 4; docs/theory/public_data.rst).  Inputs are validated in
// dpfast/public/_oracles.py; the checks here only keep native code from ever crashing.
#include <cstdint>
#include <limits>

#include "bindings/array_view.hpp"
#include "public/erm01.hpp"

using namespace dpf_bind;

namespace {

// X (n, p) with p >= 1 and n < 2^32 rows, converted to C-contiguous float64 when needed.
View<const double> design(const py::object& X_) {
    auto X = in<double>(X_, "X", Shape::mat(), Take::convert);
    require(X.cols() >= 1, "X needs at least one column");
    require((unsigned long long)X.rows() < 4294967295ULL, "at most 2^32 - 1 rows");
    return X;
}

py::tuple stump_erm(py::object X_, py::object y_, py::object w_, bool both_signs) {
    auto X = design(X_);
    const py::ssize_t n = X.rows();
    auto y = in<std::uint8_t>(y_, "y", Shape::vec(n), Take::convert);
    auto w = in<double>(w_, "sample_weight", Shape::vec(n), Take::convert);
    for (py::ssize_t i = 0; i < n; ++i) {
        require(y[i] <= 1, "labels must be 0 or 1");
        require(w[i] >= 0.0 && w[i] != std::numeric_limits<double>::infinity(), "weights must be finite and >= 0");
    }
    dpf::public_erm::StumpResult r;
    {
        py::gil_scoped_release release;
        r = dpf::public_erm::stump_erm(X.ptr, (std::size_t)n, (std::size_t)X.cols(), y.ptr, w.ptr, both_signs);
    }
    return py::make_tuple(r.feature, r.threshold, r.sign, (double)r.loss);
}

py::array_t<std::uint8_t> stump_predict(py::object X_, std::int64_t feature, double threshold, int sign) {
    auto X = in<double>(X_, "X", Shape::mat(), Take::convert);
    const std::size_t n = (std::size_t)X.rows(), p = (std::size_t)X.cols();
    require(feature >= 0 && (std::size_t)feature < p, "feature index out of range");
    require(sign == 1 || sign == -1, "sign must be +1 or -1");
    py::array_t<std::uint8_t> out((py::ssize_t)n);
    std::uint8_t* o = out.mutable_data();
    {
        py::gil_scoped_release release;
        dpf::public_erm::stump_predict(X.ptr, n, p, feature, threshold, sign, o);
    }
    return out;
}

}  // namespace

PYBIND11_MODULE(_public, m) {
    m.doc() = "Exact weighted 0-1-loss ERM oracles (thresholds, decision stumps) for the public-data learners (Block et al. 2024, Algorithm 4)";
    m.def("stump_erm", &stump_erm, py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("both_signs"),
          "Exact argmin of sum_i w_i 1[f(x_i) != y_i] over decision stumps (both_signs=True) or "
          "thresholds 1[x_j > t] (both_signs=False).  Returns (feature, threshold, sign, loss).");
    m.def("stump_predict", &stump_predict, py::arg("X"), py::arg("feature"), py::arg("threshold"), py::arg("sign"),
          "Predictions in {0,1} of a stump: 1[x_j > t] (sign=+1) or 1[x_j <= t] (sign=-1).");
}
