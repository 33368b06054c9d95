// dpfast._trees: the one data pass of the random decision trees (csrc/tree/random_trees.hpp):
// per-leaf class counts, and the routing of rows to leaves for prediction.  dpfast/tree/
// validates the values (finite X, labels in the public label set, the public tree arrays); the
// checks here keep the kernel from reading or writing out of bounds: every index it follows
// (feature, label, tree of a row) is range-checked, and the table size is checked for
// overflow.  The kernels run with the GIL released.
#include <cstdint>
#include <limits>
#include <string>

#include "bindings/array_view.hpp"
#include "tree/random_trees.hpp"

using namespace dpf_bind;
namespace tr = dpf::tree;

namespace {

constexpr int64_t kMaxDepth = 30;
constexpr int64_t kMaxTable = int64_t(1) << 28;  // entries of the (T, 2^D, K) count table

// The forest view of (feature, threshold), both (T, 2^D - 1), with every feature index in
// [0, d): a wrong index would read outside a row.
tr::Forest forest_view(const View<const int64_t>& f, const View<const double>& th, int64_t depth, int64_t d) {
    require(depth >= 0 && depth <= kMaxDepth, "depth must be in [0, 30]");
    require(d >= 1, "X must have at least one column");
    tr::Forest F;
    F.depth = depth;
    F.n_trees = f.rows();
    F.n_features = d;
    require(F.n_trees >= 1, "there must be at least one tree");
    require(f.cols() == F.n_split() && th.rows() == F.n_trees && th.cols() == F.n_split(),
            "feature and threshold must have shape (n_trees, 2**depth - 1)");
    for (py::ssize_t a = 0; a < f.size; ++a) require(f[a] >= 0 && f[a] < d, "feature indices must lie in [0, d)");
    F.feature = f.ptr;
    F.threshold = th.ptr;
    return F;
}

py::array_t<int64_t> leaf_counts(py::handle X_, py::handle y_, int64_t K, py::handle tree_of_row_,
                                 py::handle feature_, py::handle threshold_, int64_t depth, int nthreads,
                                 int kernel) {
    auto xs = strided_rows<double>(X_, "X");
    const auto& X = xs.first;
    const int64_t n = X.rows(), d = X.cols();
    require(K >= 1, "K must be >= 1");
    require(kernel >= 0 && kernel <= 2, "kernel must be 0 (auto), 1 (descent) or 2 (sliced)");
    auto y = in<int64_t>(y_, "y", Shape::vec(n));
    auto f = in<int64_t>(feature_, "feature", Shape::mat());
    auto th = in<double>(threshold_, "threshold", Shape::mat());
    const tr::Forest F = forest_view(f, th, depth, d);
    auto tor = opt_in<int64_t>(tree_of_row_, "tree_of_row", Shape::vec(n));
    // table size T * 2^D * K without overflow
    require(F.n_trees <= kMaxTable && K <= kMaxTable && F.n_leaves() <= kMaxTable, "count table too large");
    require(F.n_trees * F.n_leaves() <= kMaxTable / K, "count table too large (n_trees * 2**depth * K > 2**28)");
    for (int64_t i = 0; i < n; ++i) require(y[i] >= 0 && y[i] < K, "labels must lie in [0, K)");
    if (tor.ptr)
        for (int64_t i = 0; i < n; ++i)
            require(tor[i] >= 0 && tor[i] < F.n_trees, "tree_of_row entries must lie in [0, n_trees)");
    py::array_t<int64_t> counts({(py::ssize_t)F.n_trees, (py::ssize_t)F.n_leaves(), (py::ssize_t)K});
    int64_t* out = counts.mutable_data();
    {
        py::gil_scoped_release nogil;
        tr::leaf_counts(X.ptr, n, xs.second, y.ptr, K, tor.ptr, F, std::max(1, nthreads), out, kernel);
    }
    return counts;
}

// The inputs of a prediction (route, proba_sum): X (rows possibly strided) and the checked forest.
struct Routed {
    std::pair<View<const double>, int64_t> xs;
    View<const int64_t> f;
    View<const double> th;
    tr::Forest F;
    Routed(py::handle X_, py::handle feature_, py::handle threshold_, int64_t depth)
        : xs(strided_rows<double>(X_, "X")),
          f(in<int64_t>(feature_, "feature", Shape::mat())),
          th(in<double>(threshold_, "threshold", Shape::mat())),
          F(forest_view(f, th, depth, xs.first.cols())) {}
    int64_t n() const { return xs.first.rows(); }
};

py::array_t<int64_t> route(py::handle X_, py::handle feature_, py::handle threshold_, int64_t depth, int nthreads) {
    const Routed a(X_, feature_, threshold_, depth);
    const int64_t n = a.n();
    require(n <= std::numeric_limits<int64_t>::max() / a.F.n_trees, "output too large");
    py::array_t<int64_t> leaves({(py::ssize_t)n, (py::ssize_t)a.F.n_trees});
    int64_t* out = leaves.mutable_data();
    {
        py::gil_scoped_release nogil;
        tr::route(a.xs.first.ptr, n, a.xs.second, a.F, std::max(1, nthreads), out);
    }
    return leaves;
}

py::array_t<double> proba_sum(py::handle X_, py::handle feature_, py::handle threshold_, int64_t depth,
                              py::handle proba_, int nthreads, int kernel) {
    const Routed a(X_, feature_, threshold_, depth);
    const int64_t n = a.n();
    require(kernel >= 0 && kernel <= 2, "kernel must be 0 (auto), 1 (descent) or 2 (sliced)");
    auto pr = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(proba_);
    require(pr && pr.ndim() == 3 && pr.shape(0) == a.F.n_trees && pr.shape(1) == a.F.n_leaves() && pr.shape(2) >= 1,
            "proba must have shape (n_trees, 2**depth, K)");
    const int64_t K = pr.shape(2);
    require(n <= std::numeric_limits<int64_t>::max() / K, "output too large");
    py::array_t<double> out({(py::ssize_t)n, (py::ssize_t)K});
    double* o = out.mutable_data();
    const double* p = pr.data();
    {
        py::gil_scoped_release nogil;
        tr::proba_sum(a.xs.first.ptr, n, a.xs.second, a.F, p, K, std::max(1, nthreads), o, kernel);
    }
    return out;
}

}  // namespace

PYBIND11_MODULE(_trees, m) {
    m.doc() = "Random decision trees: per-leaf class counts (one pass, threads, bit-identical) and routing";
    m.def("leaf_counts", &leaf_counts, py::arg("X"), py::arg("y"), py::arg("K"), py::arg("tree_of_row"),
          py::arg("feature"), py::arg("threshold"), py::arg("depth"), py::arg("nthreads"), py::arg("kernel") = 0,
          "(T, 2**depth, K) int64 counts of the rows of each class in each leaf (tree_of_row: the one tree "
          "each row feeds, or None for every tree; kernel: 0 the faster for the shape, 1 descent, 2 sliced "
          "where available -- the same integers)");
    m.def("proba_sum", &proba_sum, py::arg("X"), py::arg("feature"), py::arg("threshold"), py::arg("depth"),
          py::arg("proba"), py::arg("nthreads"), py::arg("kernel") = 0,
          "(n, K) float64: per row, the sum over the trees in tree order of proba[t, leaf of the row in t] "
          "(kernel: 0 the faster for the shape, 1 descent, 2 sliced where available -- the same bits)");
    m.attr("sliced") = py::bool_(tr::sliced_available());
    m.def("route", &route, py::arg("X"), py::arg("feature"), py::arg("threshold"), py::arg("depth"),
          py::arg("nthreads"), "(n, T) int64: the leaf of every row in every tree");
}
