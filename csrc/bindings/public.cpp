// dpfast._public: exact weighted 0-1-loss ERM oracles (thresholds, decision stumps) for the
// public-data learners (Block, Bun, Desai, Shetty & Wu 2024, Algorithm 4; docs/theory/public_data.rst).  Inputs are validated in
// dpfast/public/_oracles.py; the checks here only keep native code from ever crashing.
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "bindings/common.hpp"
#include "public/erm01.hpp"

namespace {

using dpf_bind::carray;

void check_inputs(const carray<double>& X, const carray<std::uint8_t>& y, const carray<double>& w) {
    if (X.ndim() != 2) throw std::invalid_argument("X must be 2-D");
    const auto n = X.shape(0);
    if (y.ndim() != 1 || y.shape(0) != n) throw std::invalid_argument("y must have shape (n,)");
    if (w.ndim() != 1 || w.shape(0) != n) throw std::invalid_argument("sample_weight must have shape (n,)");
    if (X.shape(1) < 1) throw std::invalid_argument("X needs at least one column");
    if ((unsigned long long)n >= 4294967295ULL) throw std::invalid_argument("at most 2^32 - 1 rows");
    const std::uint8_t* yp = y.data();
    const double* wp = w.data();
    for (py::ssize_t i = 0; i < n; ++i) {
        if (yp[i] > 1) throw std::invalid_argument("labels must be 0 or 1");
        if (!(wp[i] >= 0.0) || wp[i] == std::numeric_limits<double>::infinity())
            throw std::invalid_argument("weights must be finite and >= 0");
    }
}

py::tuple stump_erm(carray<double> X, carray<std::uint8_t> y, carray<double> w, bool both_signs) {
    check_inputs(X, y, w);
    const std::size_t n = (std::size_t)X.shape(0), p = (std::size_t)X.shape(1);
    dpf::public_erm::StumpResult r;
    {
        py::gil_scoped_release release;
        r = dpf::public_erm::stump_erm(X.data(), n, p, y.data(), w.data(), both_signs);
    }
    return py::make_tuple(r.feature, r.threshold, r.sign, (double)r.loss);
}

py::array_t<std::uint8_t> stump_predict(carray<double> X, std::int64_t feature, double threshold, int sign) {
    if (X.ndim() != 2) throw std::invalid_argument("X must be 2-D");
    const std::size_t n = (std::size_t)X.shape(0), p = (std::size_t)X.shape(1);
    if (feature < 0 || (std::size_t)feature >= p) throw std::invalid_argument("feature index out of range");
    if (sign != 1 && sign != -1) throw std::invalid_argument("sign must be +1 or -1");
    py::array_t<std::uint8_t> out((py::ssize_t)n);
    std::uint8_t* o = out.mutable_data();
    {
        py::gil_scoped_release release;
        dpf::public_erm::stump_predict(X.data(), n, p, feature, threshold, sign, o);
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
