// dpfast._stats: the one-pass kernels of csrc/stats/stats.hpp (tools, GaussianNB, PCA, SSP,
// KMeans).  This file only marshals: checks dtypes, shapes and strides so that no kernel reads
// out of bounds, releases the GIL, and wraps the results.  The values are validated in Python.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "bindings/array_view.hpp"
#include "stats/stats.hpp"

namespace st = dpf::stats;
using namespace dpf_bind;

namespace {

// A 2-D float array read by element strides (any layout whose strides are multiples of the
// item size: C, Fortran, sliced views).
template <class T>
struct Strided {
    const T* ptr;
    int64_t n, d, rs, cs;
    py::array keep;
};

template <class T>
Strided<T> strided(const py::array& a, const char* name) {
    check_shape(a, name, Shape::mat());
    const py::ssize_t es = sizeof(T);
    if (a.strides(0) % es != 0 || a.strides(1) % es != 0)
        throw py::value_error(std::string(name) + " has strides that are not a multiple of its item size");
    return {static_cast<const T*>(a.data()), (int64_t)a.shape(0), (int64_t)a.shape(1), (int64_t)(a.strides(0) / es),
            (int64_t)(a.strides(1) / es), a};
}

// The rows (float32 or float64, dtype known only later): an array whose data pointer is not
// aligned to its item size (a buffer unpickled from a network frame, as dask.distributed hands
// partitions to its workers) is copied (NumPy's copy is aligned).  The typed inputs taken with
// in<T> / opt_in<T> are aligned by the array view itself (array_view.hpp: aligned_input).
py::object aligned(py::object o) {
    if (!py::isinstance<py::array>(o)) return o;
    auto a = py::reinterpret_borrow<py::array>(o);
    const auto isz = (uintptr_t)a.itemsize();
    if (isz > 1 && a.size() > 0 && reinterpret_cast<uintptr_t>(a.data()) % isz != 0) return a.attr("copy")();
    return o;
}

py::array as_array(py::object o, const char* name) {
    o = aligned(o);
    if (!py::isinstance<py::array>(o)) throw py::type_error(std::string(name) + " must be a NumPy array");
    return py::reinterpret_borrow<py::array>(o);
}

// Runs fn() without the GIL; a std::invalid_argument becomes ValueError.
template <class Fn>
void nogil(Fn&& fn) {
    std::string err;
    {
        py::gil_scoped_release release;
        try {
            fn();
        } catch (const std::invalid_argument& e) {
            err = e.what();
        }
    }
    if (!err.empty()) throw py::value_error(err);
}

// The one marshalling of the row kernels: X a 2-D float32/float64 NumPy array (read by its
// strides; `contiguous`: C order required, as moments' vector path reads rows as one run),
// then fn(ptr, rows) with ptr a const T* to the data and rows its st::RowsParams (n, d, strides,
// threads >= 1).  fn fills its kernel's own parameters and runs it under nogil.
template <class Fn>
decltype(auto) with_rows(py::object X, const char* name, int threads, bool contiguous, Fn&& fn) {
    py::array a = as_array(X, name);
    return with_float(a, name, [&](auto tag) {
        using T = decltype(tag);
        st::RowsParams rows;
        rows.threads = threads < 1 ? 1 : threads;
        if (contiguous) {
            auto v = in<T>(a, name, Shape::mat());
            rows.n = v.rows();
            rows.d = v.cols();
            rows.rs = rows.d;
            return fn(static_cast<const T*>(v.ptr), rows);
        }
        auto x = strided<T>(a, name);
        rows.n = x.n;
        rows.d = x.d;
        rows.rs = x.rs;
        rows.cs = x.cs;
        return fn(x.ptr, rows);
    });
}

template <class P>
P params(const st::RowsParams& rows) {
    P p;
    static_cast<st::RowsParams&>(p) = rows;
    return p;
}

template <class Ptr>
using elem_t = std::remove_const_t<std::remove_pointer_t<Ptr>>;

// A vector of exact sums as a pair of arrays (hi int64, lo uint64): v = hi 2^64 + lo
// (dpfast._fixed.ints joins them into Python ints).
py::tuple split128(const std::vector<__int128>& v) {
    py::array_t<int64_t> hi((py::ssize_t)v.size());
    py::array_t<uint64_t> lo((py::ssize_t)v.size());
    int64_t* h = hi.mutable_data();
    uint64_t* l = lo.mutable_data();
    for (size_t a = 0; a < v.size(); ++a) {
        h[a] = (int64_t)(v[a] >> 64);
        l[a] = (uint64_t)v[a];
    }
    return py::make_tuple(hi, lo);
}

// (s1, s2 or None, counts or None, bad): see dpf::stats::moments; s1, s2 exact sums of the
// fixed-point terms as (hi, lo) pairs (split128), s1 on the grid of the bound B (|y| <= B
// required), s2 on that of fl(B B).  x: (n, d) C-contiguous.  Terms y = clamp(x, lo, hi) - c,
// capped to [-cap, cap] (dpf::stats::y_range).
py::tuple moments(py::object x, double lo, double hi, double c, double cap, double B, bool nan, int order,
                  int threads) {
    require(order == 1 || order == 2, "order must be 1 or 2");
    require(lo <= hi && std::isfinite(lo) && std::isfinite(hi) && std::isfinite(c) && cap > 0, "lo <= hi, c must be finite and cap positive");
    const double B2 = B * B;
    const double S1 = st::fixed_scale(B), S2 = st::fixed_scale(B2);
    require(B >= 0 && std::isfinite(B) && std::isfinite(S1) && (order == 1 || (std::isfinite(B2) && std::isfinite(S2))),
            "the bound B of the fixed-point grid must be finite, and not so small that 2^50 / B (order 2: 2^50 / B^2) overflows");
    return with_rows(x, "x", threads, true, [&](auto ptr, const st::RowsParams& rows) {
        auto p = params<st::MomentsParams>(rows);
        p.c = c;
        st::y_range(lo, hi, c, cap, p.ylo, p.yhi);
        require(std::fabs(p.ylo) <= B && std::fabs(p.yhi) <= B, "the terms' range exceeds the grid bound B");
        p.S1 = S1;
        p.S2 = order == 2 ? S2 : 0.0;
        p.nan = nan;
        p.order = order;
        st::MomentsResult r;
        nogil([&] { st::moments<elem_t<decltype(ptr)>>(p, ptr, r); });
        py::object s2 = order == 2 ? py::object(split128(r.s2)) : py::object(py::none());
        py::object cnt = nan ? py::object(to_numpy(r.cnt)) : py::object(py::none());
        return py::make_tuple(split128(r.s1), s2, cnt, r.bad);
    });
}

// (counts (k,), sum q(u) (k d,), sum q(u^2) (k d,)): see dpf::stats::class_moments; the sums are
// exact fixed-point sums (grid bound 1) as (hi, lo) pairs (split128), row-major over (k, d).
py::tuple class_moments(py::object X, py::object labels, int64_t k, py::object lo, py::object hi, py::object c,
                        py::object r, int threads) {
    require(k >= 1, "k must be >= 1");
    return with_rows(X, "X", threads, false, [&](auto ptr, const st::RowsParams& rows) {
        auto lab = in<int64_t>(labels, "labels", Shape::vec(rows.n));
        auto lov = in<double>(lo, "lo", Shape::vec(rows.d));
        auto hiv = in<double>(hi, "hi", Shape::vec(rows.d));
        auto cv = in<double>(c, "c", Shape::vec(rows.d));
        auto rv = in<double>(r, "r", Shape::vec(rows.d));
        auto p = params<st::ClassParams>(rows);
        p.k = k;
        p.label = lab.ptr;
        p.lo = lov.ptr;
        p.hi = hiv.ptr;
        p.c = cv.ptr;
        p.r = rv.ptr;
        st::ClassResult res;
        nogil([&] { st::class_moments<elem_t<decltype(ptr)>>(p, ptr, res); });
        return py::make_tuple(to_numpy(res.cnt), split128(res.s1), split128(res.s2));
    });
}

// (d+1, d+1) upper triangle: [sum u u^T, sum u; 0, n] of PCA's mapped rows, exact fixed-point sums
// (grid bound 1) as a (hi, lo) pair of flat (d+1)^2 arrays (split128).
py::tuple pca_gram(py::object X, py::object lo, py::object hi, py::object c, double R, int threads) {
    require(R > 0 && std::isfinite(R), "R must be positive and finite");
    return with_rows(X, "X", threads, false, [&](auto ptr, const st::RowsParams& rows) -> py::tuple {
        auto lov = opt_in<double>(lo, "lo", Shape::vec(rows.d));
        auto hiv = opt_in<double>(hi, "hi", Shape::vec(rows.d));
        require((lov.ptr == nullptr) == (hiv.ptr == nullptr), "lo and hi must both be given or both be None");
        auto cv = in<double>(c, "c", Shape::vec(rows.d));
        auto p = params<st::PcaParams>(rows);
        p.lo = lov.ptr;
        p.hi = hiv.ptr;
        p.c = cv.ptr;
        p.R = R;
        std::vector<__int128> G;
        nogil([&] { G = st::pca_gram<elem_t<decltype(ptr)>>(p, ptr); });
        return split128(G);
    });
}

// (d+1, d+1) upper triangle: [Z'WZ, Z'Wy; 0, y'Wy], exact fixed-point sums as a (hi, lo) pair of
// flat (d+1)^2 arrays (split128), entry (j, k) on the grid of the bound 2^(e_j + e_k): e holds
// the d + 1 column bound exponents (|Z_j| <= 2^e_j, |y| <= 2^e_d; entries beyond are clamped).
py::tuple ssp_gram(py::object Z, py::object y, py::object w, py::object e, int threads) {
    return with_rows(Z, "Z", threads, false, [&](auto ptr, const st::RowsParams& rows) -> py::tuple {
        auto yv = in<double>(y, "y", Shape::vec(rows.n));
        auto wv = opt_in<double>(w, "w", Shape::vec(rows.n));
        auto ev = in<int64_t>(e, "e", Shape::vec(rows.d + 1));
        std::vector<int> ex(rows.d + 1);
        for (int64_t j = 0; j <= rows.d; ++j) {
            require(ev[j] >= -900 && ev[j] <= 900, "column bound exponents must lie in [-900, 900]");
            ex[j] = (int)ev[j];
        }
        auto p = params<st::SspParams>(rows);
        p.y = yv.ptr;
        p.w = wv.ptr;
        p.e = ex.data();
        std::vector<__int128> G;
        nogil([&] { G = st::ssp_gram<elem_t<decltype(ptr)>>(p, ptr); });
        return split128(G);
    });
}

// (labels or None, counts or None, sums or None): see dpf::stats::kmeans_step; the sums are exact
// fixed-point sums (grid bound 1) as a (hi, lo) pair (split128), row-major over (k, d).
py::tuple kmeans_step(py::object X, py::object C, bool want_labels, bool want_sums, int threads) {
    return with_rows(X, "X", threads, false, [&](auto ptr, const st::RowsParams& rows) {
        auto cv = in<double>(C, "C", Shape::mat(-1, rows.d));
        require(cv.rows() >= 1, "C must have at least one row");
        auto p = params<st::KMeansParams>(rows);
        p.k = cv.rows();
        p.C = cv.ptr;
        p.want_sums = want_sums;
        py::array_t<int64_t> labels(want_labels ? rows.n : 0);
        if (want_labels) p.labels = labels.mutable_data();
        st::KMeansResult r;
        nogil([&] { st::kmeans_step<elem_t<decltype(ptr)>>(p, ptr, r); });
        return py::make_tuple(want_labels ? py::object(labels) : py::object(py::none()),
                              want_sums ? py::object(to_numpy(r.cnt)) : py::object(py::none()),
                              want_sums ? py::object(split128(r.sums)) : py::object(py::none()));
    });
}

// (counts (int64, shape (nb_0, ..., nb_{D-1})), number of non-finite values seen).
py::tuple histogram(py::object sample, py::list edges, py::list uniform, int threads) {
    py::array a = as_array(sample, "sample");
    const int64_t D = (int64_t)py::len(edges);
    require(D >= 1 && (int64_t)py::len(uniform) == D, "edges and uniform must have one entry per dimension");
    std::vector<double> e;
    std::vector<int64_t> off = {0};
    std::vector<uint8_t> uni(D);
    std::vector<py::ssize_t> shape;
    int64_t total = 1;
    for (int64_t j = 0; j < D; ++j) {
        auto ev = in<double>(edges[j], "edges", Shape::vec(), Take::convert);
        require(ev.size >= 2, "edges need at least 2 entries");
        for (py::ssize_t t = 0; t + 1 < ev.size; ++t) require(ev[t] < ev[t + 1], "edges must be strictly increasing");
        e.insert(e.end(), ev.ptr, ev.ptr + ev.size);
        off.push_back((int64_t)e.size());
        uni[j] = py::cast<bool>(uniform[j]) ? 1 : 0;
        shape.push_back(ev.size - 1);
        require(total <= (int64_t(1) << 40) / (ev.size - 1), "too many bins");
        total *= ev.size - 1;
    }
    return with_rows(a, "sample", threads, false, [&](auto ptr, const st::RowsParams& rows) {
        require(rows.d == D, "sample must have one column per dimension of edges");
        py::array_t<int64_t> counts(shape);
        int64_t* pc = counts.mutable_data();
        int64_t bad = 0;
        nogil([&] {
            bad = st::histogram<elem_t<decltype(ptr)>>(ptr, rows.n, D, rows.rs, rows.cs, e.data(), off.data(),
                                                       uni.data(), pc, total, rows.threads);
        });
        return py::make_tuple(counts, bad);
    });
}

}  // namespace

PYBIND11_MODULE(_stats, m) {
    m.doc() = "One-pass statistics of the toolbox (dpfast.tools, GaussianNB, PCA, SSP, KMeans); "
              "bit-identical for any thread count (moments: exact fixed-point sums).";
    m.def("moments", &moments, py::arg("x"), py::arg("lo"), py::arg("hi"), py::arg("c"), py::arg("cap"),
          py::arg("B"), py::arg("nan"), py::arg("order"), py::arg("threads"));
    m.def("class_moments", &class_moments, py::arg("X"), py::arg("labels"), py::arg("k"), py::arg("lo"),
          py::arg("hi"), py::arg("c"), py::arg("r"), py::arg("threads"));
    m.def("pca_gram", &pca_gram, py::arg("X"), py::arg("lo"), py::arg("hi"), py::arg("c"), py::arg("R"),
          py::arg("threads"));
    m.def("ssp_gram", &ssp_gram, py::arg("Z"), py::arg("y"), py::arg("w"), py::arg("e"), py::arg("threads"));
    m.def("kmeans_step", &kmeans_step, py::arg("X"), py::arg("C"), py::arg("want_labels"), py::arg("want_sums"),
          py::arg("threads"));
    m.def("histogram", &histogram, py::arg("sample"), py::arg("edges"), py::arg("uniform"), py::arg("threads"));
    m.attr("avx2") = dpf::stats::use_avx2();
    m.attr("FIXED_BITS") = dpf::stats::kFixedBits;
}
