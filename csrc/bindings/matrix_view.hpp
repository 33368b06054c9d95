// The checks of a CSR matrix given to a kernel as (data, indices, indptr), shared by the binding
// files that take one (_glm, _multinomial): a wrong call raises ValueError instead of reading
// out of bounds.
#pragma once
#include <cstdint>
#include <type_traits>

#include "bindings/common.hpp"
#include "glm/data.hpp"

namespace dpf_bind {

// Calls fn(view) with the dpf::glm::CSR view of (X, indices, indptr): float32/float64 values,
// int32 or int64 indices (both the same), indptr consistent and non-decreasing, every column
// index in [0, d).
template <class Fn>
void with_csr(const py::array& X, const py::object& indices, const py::object& indptr, int64_t n, int64_t d,
              Fn&& fn) {
    const auto dt = X.dtype();
    require(dt.kind() == 'f' && (dt.itemsize() == 4 || dt.itemsize() == 8), "X must be float32 or float64");
    const bool f64 = dt.itemsize() == 8;
    auto ind = py::cast<py::array>(indices);
    auto ptr = py::cast<py::array>(indptr);
    require(X.ndim() == 1 && ind.ndim() == 1 && ptr.ndim() == 1, "CSR arrays must be 1-d");
    require((X.flags() & py::array::c_style) && (ind.flags() & py::array::c_style) &&
                (ptr.flags() & py::array::c_style),
            "CSR arrays must be contiguous");
    require(ptr.shape(0) == n + 1, "indptr must have n + 1 entries");
    require(ind.dtype().kind() == 'i' && ptr.dtype().kind() == 'i' &&
                ind.dtype().itemsize() == ptr.dtype().itemsize() &&
                (ind.dtype().itemsize() == 4 || ind.dtype().itemsize() == 8),
            "CSR indices and indptr must both be int32 or both int64");
    require(ind.shape(0) == X.shape(0), "CSR data and indices differ in length");
    auto go = [&](auto* pind, auto* pptr) {
        using I = std::remove_const_t<std::remove_pointer_t<decltype(pind)>>;
        // bounds of indptr and indices (cheap next to a solve, and a kernel relies on them)
        require(pptr[0] == 0 && (int64_t)pptr[n] == (int64_t)ind.shape(0), "indptr is inconsistent");
        bool mono = true;
        for (int64_t i = 0; i < n; ++i) mono &= pptr[i] <= pptr[i + 1];
        require(mono, "indptr must be non-decreasing");
        const int64_t nnz = ind.shape(0);
        bool inrange = true;
        for (int64_t p = 0; p < nnz; ++p) inrange &= (pind[p] >= 0) & ((int64_t)pind[p] < d);
        require(inrange, "CSR column index out of range");
        if (f64) fn(dpf::glm::CSR<double, I>{static_cast<const double*>(X.data()), pind, pptr, n, d});
        else fn(dpf::glm::CSR<float, I>{static_cast<const float*>(X.data()), pind, pptr, n, d});
    };
    if (ind.dtype().itemsize() == 4)
        go(static_cast<const int32_t*>(ind.data()), static_cast<const int32_t*>(ptr.data()));
    else
        go(static_cast<const int64_t*>(ind.data()), static_cast<const int64_t*>(ptr.data()));
}

}  // namespace dpf_bind
