// dpfast._selection: exponential mechanism / report-noisy-max / top-k / quantile kernels.
// Inputs are validated in dpfast/mechanisms/selection.py and quantile.py; the checks here
// only keep native code from ever reading out of bounds.
#include <cstdint>
#include <string>
#include <tuple>

#include "bindings/array_view.hpp"
#include "samplers/selection.hpp"

using namespace dpf_bind;
namespace sel = dpf::sel;

namespace {

// Utilities: float32 or float64, C-contiguous, `ndim`-D, and scanned by the kernel (one pass,
// before any random word is drawn; the Python wrappers need no extra NumPy reductions).
template <class T>
View<const T> utilities(const py::array& u_, int ndim, double c, const std::string& name) {
    auto u = in<T>(u_, name.c_str(), ndim == 1 ? Shape::vec() : Shape::mat());
    int code;
    {
        py::gil_scoped_release nogil;
        code = sel::scan_utilities(u.ptr, u.size, c);
    }
    if (code == 1) throw py::value_error(name + " contain NaN; every candidate needs a finite utility");
    if (code == 2)
        throw py::value_error(name + " contain infinite values; give excluded candidates base_measure 0 instead");
    if (code == 3)
        throw py::value_error(name + " are too large: epsilon * |u| / sensitivity overflows a double; "
                              "rescale the utilities");
    return u;
}

// The optional log base measure, the utilities' shape (converted to float64 when needed).
template <class T>
View<const double> log_base(const py::object& logw, const View<const T>& u) {
    const Shape s = u.ndim == 1 ? Shape::vec(u.rows()) : Shape::mat(u.rows(), u.cols());
    return opt_in<double>(logw, "log base measure", s, Take::convert);
}

// One selection per row of a C-contiguous (m, n) array: argmax_i(c u_i + logw_i + N_i).
py::array_t<std::int64_t> argmax_rows(py::capsule cap, py::array u_, py::object logw, double c, int noise,
                                      const std::string& name) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    return with_float(u_, name.c_str(), [&](auto tag) {
        using T = decltype(tag);
        auto u = utilities<T>(u_, 2, c, name);
        auto lw = log_base(logw, u);
        py::array_t<std::int64_t> out(u.rows());
        std::int64_t* po = out.mutable_data();
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        sel::argmax_rows(noise, rs, u.ptr, lw.ptr, u.rows(), u.cols(), c, po);
        return out;
    });
}

// One chunk of a streamed selection (sel::argmax_chunk_update); the state (best key, index,
// seen, shift) goes in and out.
std::tuple<double, std::int64_t, std::int64_t, double> argmax_chunk(py::capsule cap, py::array u_, py::object logw,
                                                                     double c, int noise, double best,
                                                                     std::int64_t index, std::int64_t seen,
                                                                     double shift, const std::string& name) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    sel::ArgmaxState st;
    st.best = best;
    st.index = index;
    st.seen = seen;
    st.shift = shift;
    with_float(u_, name.c_str(), [&](auto tag) {
        using T = decltype(tag);
        auto u = utilities<T>(u_, 1, c, name);
        auto lw = log_base(logw, u);
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        sel::argmax_chunk_update(noise, rs, u.size, u.ptr, lw.ptr, c, st);
    });
    return {st.best, st.index, st.seen, st.shift};
}

// One-shot top-k with Gumbel noise per row: (m, k) indices in decreasing noisy-score order.
py::array_t<std::int64_t> topk_rows(py::capsule cap, py::array u_, py::object logw, double c, std::int64_t k,
                                    const std::string& name) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    return with_float(u_, name.c_str(), [&](auto tag) {
        using T = decltype(tag);
        auto u = utilities<T>(u_, 2, c, name);
        require(k >= 1 && k <= u.cols(), "k must be in [1, number of candidates]");
        auto lw = log_base(logw, u);
        py::array_t<std::int64_t> out({u.rows(), static_cast<py::ssize_t>(k)});
        std::int64_t* po = out.mutable_data();
        bool full;
        {
            py::gil_scoped_release nogil;
            dpf::BitStream rs(bg);
            full = sel::topk_rows(rs, u.ptr, lw.ptr, u.rows(), u.cols(), c, k, po);
        }
        require(full, "fewer than k candidates have positive base measure");
        return out;
    });
}

// Private quantiles (sel::quantile_draw per target q_j * n): marshalling only.
py::array_t<double> quantile_draws(py::capsule cap, py::object edges_, py::object targets_, double c) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    auto edges = in<double>(edges_, "edges", Shape::vec(), Take::convert);
    require(edges.size >= 2, "edges must have >= 2 values");
    auto targets = in<double>(targets_, "targets", Shape::vec(), Take::convert);
    py::array_t<double> out(targets.size);
    double* po = out.mutable_data();
    bool ok;
    {
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        ok = sel::quantile_draws(rs, edges.ptr, edges.size, nullptr, targets.ptr, targets.size, c, po);
    }
    require(ok, "all intervals are empty (lower bound == upper bound)");
    return out;
}

// Private quantiles of many groups in one call: group j draws sel::quantile_draw on its own
// edges edges[offsets[j] : offsets[j + 1]] with target targets[j] (dpfast.tables' quantile
// metric: one private_quantile per group, without a Python call per group).
py::array_t<double> quantile_draws_grouped(py::capsule cap, py::object edges_, py::object offsets_,
                                           py::object targets_, double c) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    auto edges = in<double>(edges_, "edges", Shape::vec(), Take::convert);
    auto targets = in<double>(targets_, "targets", Shape::vec(), Take::convert);
    const py::ssize_t m = targets.size;
    auto off = in<std::int64_t>(offsets_, "offsets", Shape::vec(m + 1), Take::convert);
    require(off[0] == 0 && off[m] == std::int64_t(edges.size), "offsets must start at 0 and end at len(edges)");
    for (py::ssize_t j = 0; j < m; ++j) require(off[j + 1] - off[j] >= 2, "each group needs >= 2 edges");
    py::array_t<double> out(m);
    double* po = out.mutable_data();
    bool ok;
    {
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        ok = sel::quantile_draws(rs, edges.ptr, edges.size, off.ptr, targets.ptr, m, c, po);
    }
    require(ok, "all intervals are empty (lower bound == upper bound)");
    return out;
}

}  // namespace

PYBIND11_MODULE(_selection, m) {
    m.doc() = "dpfast._selection: Gumbel-max / report-noisy-max / top-k / quantile kernels "
              "(csrc/samplers/selection.hpp)";
    m.attr("GUMBEL") = int(sel::kGumbel);
    m.attr("EXPONENTIAL") = int(sel::kExponential);
    m.attr("LAPLACE") = int(sel::kLaplace);
    m.def("argmax_rows", &argmax_rows, py::arg("bitgen"), py::arg("u").noconvert(), py::arg("logw"), py::arg("c"),
          py::arg("noise"), py::arg("name") = "utilities");
    m.def("argmax_chunk", &argmax_chunk, py::arg("bitgen"), py::arg("u").noconvert(), py::arg("logw"), py::arg("c"),
          py::arg("noise"), py::arg("best"), py::arg("index"), py::arg("seen"), py::arg("shift"),
          py::arg("name") = "utilities");
    m.def("topk_rows", &topk_rows, py::arg("bitgen"), py::arg("u").noconvert(), py::arg("logw"), py::arg("c"),
          py::arg("k"), py::arg("name") = "utilities");
    m.def("quantile_draws", &quantile_draws, py::arg("bitgen"), py::arg("edges"), py::arg("targets"), py::arg("c"));
    m.def("quantile_draws_grouped", &quantile_draws_grouped, py::arg("bitgen"), py::arg("edges"), py::arg("offsets"),
          py::arg("targets"), py::arg("c"));
}
