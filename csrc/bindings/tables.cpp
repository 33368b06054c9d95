// dpfast._tables: group-by with contribution bounding and per-group sums (csrc/tables/).
// dpfast/tables/_aggregate.py validates everything; the checks here only keep native code
// from reading out of bounds.  The kernel runs with the GIL released.
#include <cstdint>
#include <string>

#include "bindings/array_view.hpp"
#include "tables/aggregate.hpp"

using namespace dpf_bind;
namespace tb = dpf::tables;

namespace {

// (hi, lo) words of 128-bit integers: value = hi * 2^64 + lo.
void split128(const std::vector<__int128>& v, py::array_t<int64_t>& hi, py::array_t<uint64_t>& lo) {
    int64_t* h = hi.mutable_data();
    uint64_t* l = lo.mutable_data();
    for (size_t a = 0; a < v.size(); ++a) {
        h[a] = (int64_t)(v[a] >> 64);
        l[a] = (uint64_t)v[a];
    }
}

py::dict bound_and_sum(py::object unit, int64_t n_units, py::object unit_key, py::object group, int64_t n_groups,
                       py::object group_key, py::object values, py::object lo, py::object hi, py::object gamma,
                       uint64_t seed, int64_t l0, int64_t linf, bool want_mask, int threads) {
    tb::Params p;
    auto u = in<int64_t>(unit, "unit", Shape::vec());
    p.n = u.size;
    if (n_units < 0 || n_groups < 0) throw py::value_error("n_units and n_groups must be >= 0");
    if (l0 < 1 || linf < 1) throw py::value_error("l0 and linf must be >= 1");
    auto v = in<double>(values, "values", Shape::mat(-1, p.n));
    p.U = n_units;
    p.G = n_groups;
    p.k = v.rows();
    auto uk = in<uint64_t>(unit_key, "unit_key", Shape::size(p.U));
    auto g = in<int64_t>(group, "group", Shape::size(p.n));
    auto gk = in<uint64_t>(group_key, "group_key", Shape::size(p.G));
    auto lov = in<double>(lo, "lo", Shape::size(p.k));
    auto hiv = in<double>(hi, "hi", Shape::size(p.k));
    auto gam = opt_in<double>(gamma, "gamma", Shape::size(p.k));
    p.unit = u.ptr;
    p.unit_key = uk.ptr;
    p.group = g.ptr;
    p.group_key = gk.ptr;
    p.values = v.ptr;
    p.lo = lov.ptr;
    p.hi = hiv.ptr;
    p.gamma = gam.ptr;
    p.seed = seed;
    p.l0 = l0;
    p.linf = linf;
    p.threads = std::max(1, threads);
    py::array_t<uint8_t> mask(want_mask ? p.n : 0);
    if (want_mask) p.keep = mask.mutable_data();
    tb::Result r;
    std::string err;
    {
        py::gil_scoped_release nogil;
        try {
            r = tb::bound_and_sum(p);
        } catch (const std::exception& e) {
            err = e.what();
        }
    }
    if (!err.empty()) throw py::value_error(err);
    py::dict out;
    out["count"] = to_numpy(r.count);
    out["units"] = to_numpy(r.units);
    const std::vector<py::ssize_t> shape = {(py::ssize_t)p.k, (py::ssize_t)p.G};
    if (p.gamma) {
        py::array_t<int64_t> t1h(shape), t3h(shape);
        py::array_t<uint64_t> t1l(shape), t3l(shape);
        split128(r.t1, t1h, t1l);
        split128(r.t3, t3h, t3l);
        out["t1"] = py::make_tuple(t1h, t1l);
        out["t3"] = py::make_tuple(t3h, t3l);
    } else {
        out["s1"] = py::make_tuple(to_numpy(r.s1h, shape), to_numpy(r.s1l, shape));
        out["s2"] = py::make_tuple(to_numpy(r.s2h, shape), to_numpy(r.s2l, shape));
    }
    if (want_mask) out["keep"] = mask;
    return out;
}

// (codes, sorted uniques) of an int64 array whose range is <= max_range, else None.
py::object dense_codes(py::object values, int64_t max_range) {
    auto v = in<int64_t>(values, "values", Shape::vec());
    const int64_t n = v.size;
    const int64_t* pv = v.ptr;
    py::array_t<int64_t> codes(n);
    int64_t* pc = codes.mutable_data();
    std::vector<int64_t> uniq;
    bool ok;
    {
        py::gil_scoped_release nogil;
        ok = tb::dense_codes(pv, n, max_range, pc, uniq);
    }
    if (!ok) return py::none();
    return py::make_tuple(codes, to_numpy(uniq));
}

}  // namespace

PYBIND11_MODULE(_tables, m) {
    m.doc() = "Group-by with per-unit contribution bounding and per-group sums (dpfast.tables).";
    m.def("bound_and_sum", &bound_and_sum, py::arg("unit"), py::arg("n_units"), py::arg("unit_key"),
          py::arg("group"), py::arg("n_groups"), py::arg("group_key"), py::arg("values"), py::arg("lo"),
          py::arg("hi"), py::arg("gamma"), py::arg("seed"), py::arg("l0"), py::arg("linf"),
          py::arg("want_mask"), py::arg("threads"));
    m.def("dense_codes", &dense_codes, py::arg("values"), py::arg("max_range"));
}
