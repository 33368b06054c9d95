// dpfast._selection: exponential mechanism / report-noisy-max / top-k / quantile kernels.
// Inputs are validated in dpfast/mechanisms/selection.py and quantile.py; the checks here
// only keep native code from ever reading out of bounds.
#include <cstdint>
#include <string>
#include <tuple>

#include "bindings/common.hpp"
#include "samplers/selection.hpp"

using namespace dpf_bind;
namespace sel = dpf::sel;

namespace {

// Validation the kernels do themselves (one pass, before any random word is drawn), so that
// the Python wrappers need no extra NumPy reductions.
template <class T>
void check_utilities(const T* u, std::int64_t n, double c, const std::string& name) {
    int code;
    {
        py::gil_scoped_release nogil;
        code = sel::scan_utilities(u, n, c);
    }
    if (code == 1) throw py::value_error(name + " contain NaN; every candidate needs a finite utility");
    if (code == 2)
        throw py::value_error(name + " contain infinite values; give excluded candidates base_measure 0 instead");
    if (code == 3)
        throw py::value_error(name + " are too large: epsilon * |u| / sensitivity overflows a double; "
                              "rescale the utilities");
}

const double* optional_logw(const py::object& logw, py::ssize_t m, py::ssize_t n,
                            carray<double>& holder) {
    if (logw.is_none()) return nullptr;
    holder = carray<double>::ensure(logw);
    if (!holder || holder.ndim() != 2 || holder.shape(0) != m || holder.shape(1) != n)
        throw py::value_error("log base measure must have the utilities' (rows, candidates) shape");
    return holder.data();
}

// One selection per row of a C-contiguous (m, n) array: argmax_i(c u_i + logw_i + N_i).
template <class T>
py::array_t<std::int64_t> argmax_rows(py::capsule cap, carray<T> u, py::object logw, double c,
                                      int noise, const std::string& name) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    if (u.ndim() != 2) throw py::value_error("utilities must be 2-D (rows, candidates)");
    const py::ssize_t m = u.shape(0), n = u.shape(1);
    check_utilities(u.data(), m * n, c, name);
    carray<double> lw_holder;
    const double* lw = optional_logw(logw, m, n, lw_holder);
    py::array_t<std::int64_t> out(m);
    std::int64_t* po = out.mutable_data();
    const T* pu = u.data();
    {
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        for (py::ssize_t r = 0; r < m; ++r) {
            const T* ur = pu + r * n;
            const double* lr = lw ? lw + r * n : nullptr;
            sel::LinearScores<T> sc{ur, lr, c, sel::row_shift(ur, lr, n)};
            sel::ArgmaxState st;
            sel::argmax_update_kind(noise, rs, n, sc, st);
            po[r] = st.index;
        }
    }
    return out;
}

// One chunk of a streamed selection (sel::argmax_chunk_update); the state (best key, index,
// seen, shift) goes in and out.
template <class T>
std::tuple<double, std::int64_t, std::int64_t, double> argmax_chunk(
        py::capsule cap, carray<T> u, py::object logw, double c, int noise, double best,
        std::int64_t index, std::int64_t seen, double shift, const std::string& name) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    if (u.ndim() != 1) throw py::value_error("a chunk of utilities must be 1-D");
    const py::ssize_t n = u.shape(0);
    check_utilities(u.data(), n, c, name);
    const double* lw = nullptr;
    carray<double> lw_holder;
    if (!logw.is_none()) {
        lw_holder = carray<double>::ensure(logw);
        if (!lw_holder || lw_holder.ndim() != 1 || lw_holder.shape(0) != n)
            throw py::value_error("log base measure chunk must match the utilities chunk");
        lw = lw_holder.data();
    }
    sel::ArgmaxState st;
    st.best = best;
    st.index = index;
    st.seen = seen;
    st.shift = shift;
    const T* pu = u.data();
    {
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        sel::argmax_chunk_update(noise, rs, n, pu, lw, c, st);
    }
    return {st.best, st.index, st.seen, st.shift};
}

// One-shot top-k with Gumbel noise per row: (m, k) indices in decreasing noisy-score order.
template <class T>
py::array_t<std::int64_t> topk_rows(py::capsule cap, carray<T> u, py::object logw, double c,
                                    std::int64_t k, const std::string& name) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    if (u.ndim() != 2) throw py::value_error("utilities must be 2-D (rows, candidates)");
    const py::ssize_t m = u.shape(0), n = u.shape(1);
    if (k < 1 || k > n) throw py::value_error("k must be in [1, number of candidates]");
    check_utilities(u.data(), m * n, c, name);
    carray<double> lw_holder;
    const double* lw = optional_logw(logw, m, n, lw_holder);
    py::array_t<std::int64_t> out({m, static_cast<py::ssize_t>(k)});
    std::int64_t* po = out.mutable_data();
    const T* pu = u.data();
    bool short_row = false;
    {
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        for (py::ssize_t r = 0; r < m; ++r) {
            const T* ur = pu + r * n;
            const double* lr = lw ? lw + r * n : nullptr;
            sel::LinearScores<T> sc{ur, lr, c, sel::row_shift(ur, lr, n)};
            sel::TopKState st(k);
            sel::topk_update<sel::GumbelNoise>(rs, n, sc, st);
            const auto idx = st.sorted_indices();
            if (std::int64_t(idx.size()) < k) short_row = true;
            for (std::int64_t j = 0; j < k; ++j) po[r * k + j] = j < std::int64_t(idx.size()) ? idx[j] : -1;
        }
    }
    if (short_row) throw py::value_error("fewer than k candidates have positive base measure");
    return out;
}

// Private quantiles (sel::quantile_draw per target q_j * n): marshalling only.
py::array_t<double> quantile_draws(py::capsule cap, carray<double> edges, carray<double> targets,
                                   double c) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    if (edges.ndim() != 1 || edges.shape(0) < 2) throw py::value_error("edges must be 1-D with >= 2 values");
    if (targets.ndim() != 1) throw py::value_error("targets must be 1-D");
    const py::ssize_t ne = edges.shape(0), nq = targets.shape(0);
    const double* pe = edges.data();
    const double* pt = targets.data();
    py::array_t<double> out(nq);
    double* po = out.mutable_data();
    bool failed = false;
    {
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        for (py::ssize_t j = 0; j < nq && !failed; ++j) failed = !sel::quantile_draw(rs, pe, ne, c, pt[j], po + j);
    }
    if (failed) throw py::value_error("all intervals are empty (lower bound == upper bound)");
    return out;
}

// Private quantiles of many groups in one call: group j draws sel::quantile_draw on its own
// edges edges[offsets[j] : offsets[j + 1]] with target targets[j] (dpfast.tables' quantile
// metric: one private_quantile per group, without a Python call per group).
py::array_t<double> quantile_draws_grouped(py::capsule cap, carray<double> edges, carray<std::int64_t> offsets,
                                           carray<double> targets, double c) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    if (edges.ndim() != 1 || offsets.ndim() != 1 || targets.ndim() != 1)
        throw py::value_error("edges, offsets and targets must be 1-D");
    const py::ssize_t m = targets.shape(0);
    if (offsets.shape(0) != m + 1) throw py::value_error("offsets must have len(targets) + 1 entries");
    const std::int64_t* po_ = offsets.data();
    if (po_[0] != 0 || po_[m] != std::int64_t(edges.shape(0)))
        throw py::value_error("offsets must start at 0 and end at len(edges)");
    for (py::ssize_t j = 0; j < m; ++j)
        if (po_[j + 1] - po_[j] < 2) throw py::value_error("each group needs >= 2 edges");
    const double* pe = edges.data();
    const double* pt = targets.data();
    py::array_t<double> out(m);
    double* po = out.mutable_data();
    bool failed = false;
    {
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        for (py::ssize_t j = 0; j < m && !failed; ++j)
            failed = !sel::quantile_draw(rs, pe + po_[j], po_[j + 1] - po_[j], c, pt[j], po + j);
    }
    if (failed) throw py::value_error("all intervals are empty (lower bound == upper bound)");
    return out;
}

}  // namespace

PYBIND11_MODULE(_selection, m) {
    m.doc() = "dpfast._selection: Gumbel-max / report-noisy-max / top-k / quantile kernels "
              "(csrc/samplers/selection.hpp)";
    m.attr("GUMBEL") = int(sel::kGumbel);
    m.attr("EXPONENTIAL") = int(sel::kExponential);
    m.attr("LAPLACE") = int(sel::kLaplace);
    m.def("argmax_rows", &argmax_rows<double>, py::arg("bitgen"), py::arg("u").noconvert(),
          py::arg("logw"), py::arg("c"), py::arg("noise"), py::arg("name") = "utilities");
    m.def("argmax_rows", &argmax_rows<float>, py::arg("bitgen"), py::arg("u").noconvert(),
          py::arg("logw"), py::arg("c"), py::arg("noise"), py::arg("name") = "utilities");
    m.def("argmax_chunk", &argmax_chunk<double>, py::arg("bitgen"), py::arg("u").noconvert(),
          py::arg("logw"), py::arg("c"), py::arg("noise"), py::arg("best"), py::arg("index"),
          py::arg("seen"), py::arg("shift"), py::arg("name") = "utilities");
    m.def("argmax_chunk", &argmax_chunk<float>, py::arg("bitgen"), py::arg("u").noconvert(),
          py::arg("logw"), py::arg("c"), py::arg("noise"), py::arg("best"), py::arg("index"),
          py::arg("seen"), py::arg("shift"), py::arg("name") = "utilities");
    m.def("topk_rows", &topk_rows<double>, py::arg("bitgen"), py::arg("u").noconvert(),
          py::arg("logw"), py::arg("c"), py::arg("k"), py::arg("name") = "utilities");
    m.def("topk_rows", &topk_rows<float>, py::arg("bitgen"), py::arg("u").noconvert(),
          py::arg("logw"), py::arg("c"), py::arg("k"), py::arg("name") = "utilities");
    m.def("quantile_draws", &quantile_draws, py::arg("bitgen"), py::arg("edges"),
          py::arg("targets"), py::arg("c"));
    m.def("quantile_draws_grouped", &quantile_draws_grouped, py::arg("bitgen"), py::arg("edges"),
          py::arg("offsets"), py::arg("targets"), py::arg("c"));
}
