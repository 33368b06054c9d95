// The design matrix X given to a GLM kernel, as the dpf::glm view of csrc/glm/data.hpp: dense
// C or F order, or CSR (data, indices, indptr); float32/float64 values, int32 or int64 indices.
// Shared by the binding files that take one (_glm, _multinomial): a wrong call raises instead
// of reading out of bounds.
#pragma once
#include <cstdint>

#include "bindings/array_view.hpp"
#include "glm/data.hpp"

namespace dpf_bind {

enum Layout : int { kC = 0, kF = 1, kCSR = 2 };

// Calls fn(view) with the dpf::glm::CSR view of (X, indices, indptr): indptr consistent and
// non-decreasing, every column index in [0, d).
template <class T, class I, class Fn>
void with_csr_typed(const py::array& X, const py::object& indices, const py::object& indptr, int64_t n,
                    int64_t d, Fn&& fn) {
    auto x = in<T>(X, "X", Shape::vec());
    auto ind = in<I>(indices, "indices", Shape::vec(x.size));
    auto ptr = in<I>(indptr, "indptr", Shape::vec(n + 1));
    // bounds of indptr and indices (cheap next to a solve, and a kernel relies on them)
    require(ptr[0] == 0 && (int64_t)ptr[n] == (int64_t)ind.size, "indptr is inconsistent");
    bool mono = true;
    for (int64_t i = 0; i < n; ++i) mono &= ptr[i] <= ptr[i + 1];
    require(mono, "indptr must be non-decreasing");
    bool inrange = true;
    for (int64_t p = 0; p < ind.size; ++p) inrange &= (ind[p] >= 0) & ((int64_t)ind[p] < d);
    require(inrange, "CSR column index out of range");
    fn(dpf::glm::CSR<T, I>{x.ptr, ind.ptr, ptr.ptr, n, d});
}

// Calls fn(view) with the view of X (n x d) stored as `layout` (kWithF = false: for kernels that
// take no F-order rows).
template <bool kWithF = true, class Fn>
void with_matrix(const py::array& X, const py::object& indices, const py::object& indptr, int layout, int64_t n,
                 int64_t d, Fn&& fn) {
    require(layout == kC || (kWithF && layout == kF) || layout == kCSR, "unknown layout");
    with_float(X, "X", [&](auto tag) {
        using T = decltype(tag);
        if (layout == kCSR) {
            const bool i32 = py::isinstance<py::array>(indices) &&
                             py::reinterpret_borrow<py::array>(indices).dtype().equal(py::dtype::of<int32_t>());
            if (i32) with_csr_typed<T, int32_t>(X, indices, indptr, n, d, fn);
            else with_csr_typed<T, int64_t>(X, indices, indptr, n, d, fn);
            return;
        }
        check_dtype<T>(X, "X");
        check_shape(X, "X", Shape::mat(n, d));
        // a misaligned X (an unpickled Dask partition) is read from a copy in the same order ("A")
        const py::array Xa = misaligned<T>(X) ? py::array(X.attr("copy")("A")) : X;
        const T* p = static_cast<const T*>(Xa.data());
        if (layout == kC) {
            require((Xa.flags() & py::array::c_style) != 0, "X must be C-contiguous");
            fn(dpf::glm::DenseC<T>{p, n, d});
        } else if constexpr (kWithF) {
            require((Xa.flags() & py::array::f_style) != 0, "X must be F-contiguous");
            fn(dpf::glm::DenseF<T>{p, n, d});
        }
    });
}

}  // namespace dpf_bind
