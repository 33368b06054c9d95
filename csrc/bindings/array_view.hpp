// The one way the bindings take a NumPy array argument: checked (dtype, shape, C-contiguity,
// writability) and viewed as a typed pointer with its sizes, with one wording of the errors:
//   TypeError   "<name> must be a NumPy array" / "<name> must be <dtype>, not <dtype>"
//   ValueError  "<name> must be k-D" / "<name> must have shape (...), not (...)" /
//               "<name> must have m entries, not k" / "<name> must be C-contiguous" /
//               "<name> must be writeable"
// Python validates values; these checks keep a kernel from reading or writing out of bounds.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bindings/common.hpp"

namespace dpf_bind {

// The shape an argument must have: any; a total element count (size); or 1-D / 2-D with the
// extent of each axis (-1: any).
struct Shape {
    int ndim = -1;           // -1: any
    py::ssize_t count = -1;  // total elements, -1: any
    py::ssize_t dim[2] = {-1, -1};
    static Shape any() { return {}; }
    static Shape size(py::ssize_t n) { return {-1, n, {-1, -1}}; }
    static Shape vec(py::ssize_t n = -1) { return {1, -1, {n, -1}}; }
    static Shape mat(py::ssize_t rows = -1, py::ssize_t cols = -1) { return {2, -1, {rows, cols}}; }
};

// How an input is taken: exactly as given (dtype T and C-contiguous, else an error), or
// converted to a C-contiguous array of T when needed (a copy, as pybind11's forcecast makes: for
// small parameter arrays).
enum class Take { exact, convert };

// A checked, typed view; `arr` keeps the array (or its converted copy) alive.
template <class T>
struct View {
    T* ptr = nullptr;  // nullptr: an optional argument given as None
    py::ssize_t size = 0;
    int ndim = 0;
    py::ssize_t shape[2] = {0, 0};
    py::array arr;

    T& operator[](py::ssize_t i) const { return ptr[i]; }
    py::ssize_t rows() const { return shape[0]; }
    py::ssize_t cols() const { return shape[1]; }
};

inline std::string shape_str(int ndim, const py::ssize_t* dim) {
    std::string s = "(";
    for (int k = 0; k < ndim; ++k) s += (k ? ", " : "") + (dim[k] >= 0 ? std::to_string(dim[k]) : std::string("*"));
    return s + (ndim == 1 ? ",)" : ")");
}

// dtype compared by value, not identity: an unpickled array carries an equal, distinct dtype.
template <class T>
void check_dtype(const py::array& a, const char* name) {
    if (!a.dtype().equal(py::dtype::of<T>()))
        throw py::type_error(std::string(name) + " must be " + std::string(py::str(py::dtype::of<T>())) + ", not " +
                             std::string(py::str(a.dtype())));
}

inline void check_shape(const py::array& a, const char* name, const Shape& s) {
    const std::string n(name);
    if (s.ndim >= 0 && a.ndim() != s.ndim) throw py::value_error(n + " must be " + std::to_string(s.ndim) + "-D");
    for (int k = 0; k < s.ndim; ++k)
        if (s.dim[k] >= 0 && a.shape(k) != s.dim[k])
            throw py::value_error(n + " must have shape " + shape_str(s.ndim, s.dim) + ", not " +
                                  shape_str((int)a.ndim(), a.shape()));
    if (s.count >= 0 && a.size() != s.count)
        throw py::value_error(n + " must have " + std::to_string(s.count) + " entries, not " + std::to_string(a.size()));
}

// An array of dtype T, C-contiguous and of shape s (Take::convert: converted when needed).
template <class T>
py::array checked(py::handle o, const char* name, const Shape& s, Take take = Take::exact) {
    py::array a;
    if (take == Take::convert) {
        a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(o);
        if (!a) {
            PyErr_Clear();
            throw py::type_error(std::string(name) + " must be convertible to " + std::string(py::str(py::dtype::of<T>())));
        }
    } else {
        if (!py::isinstance<py::array>(o)) throw py::type_error(std::string(name) + " must be a NumPy array");
        a = py::reinterpret_borrow<py::array>(o);
        check_dtype<T>(a, name);
        if (!(a.flags() & py::array::c_style)) throw py::value_error(std::string(name) + " must be C-contiguous");
    }
    check_shape(a, name, s);
    return a;
}

template <class T>
View<T> make_view(py::array a, T* p) {
    View<T> v;
    v.ptr = p;
    v.size = a.size();
    v.ndim = (int)a.ndim();
    for (int k = 0; k < v.ndim && k < 2; ++k) v.shape[k] = a.shape(k);
    v.arr = std::move(a);
    return v;
}

// Whether a's data pointer is misaligned for T.  NumPy allows such arrays (a buffer unpickled from
// a network frame, as dask.distributed hands partitions to its workers, or np.frombuffer at an odd
// offset); a kernel's typed read of one is undefined behaviour (UBSan: "load of misaligned address").
template <class T>
bool misaligned(const py::array& a) {
    return a.size() > 0 && reinterpret_cast<std::uintptr_t>(a.data()) % alignof(T) != 0;
}

// An input read through a typed pointer: a misaligned array is read from a copy (NumPy's copies
// are aligned and C-contiguous; same values, so the same result).
template <class T>
py::array aligned_input(py::array a) {
    return misaligned<T>(a) ? py::array(a.attr("copy")()) : a;
}

// A read-only input (read-only arrays are accepted and never written).
template <class T>
View<const T> in(py::handle o, const char* name, const Shape& s = Shape::any(), Take take = Take::exact) {
    py::array a = aligned_input<T>(checked<T>(o, name, s, take));
    const T* p = static_cast<const T*>(a.data());
    return make_view<const T>(std::move(a), p);
}

// An output, written in place: dtype T, C-contiguous, writeable, aligned (a copy would not be
// written back).
template <class T>
View<T> out(py::handle o, const char* name, const Shape& s = Shape::any()) {
    py::array a = checked<T>(o, name, s);
    if (!a.writeable()) throw py::value_error(std::string(name) + " must be writeable");
    if (misaligned<T>(a)) throw py::value_error(std::string(name) + " must be aligned to its item size");
    T* p = static_cast<T*>(a.mutable_data());
    return make_view<T>(std::move(a), p);
}

// Optional forms: None gives an empty view (ptr == nullptr).
template <class T>
View<const T> opt_in(py::handle o, const char* name, const Shape& s = Shape::any(), Take take = Take::exact) {
    return o.is_none() ? View<const T>{} : in<T>(o, name, s, take);
}
template <class T>
View<T> opt_out(py::handle o, const char* name, const Shape& s = Shape::any()) {
    return o.is_none() ? View<T>{} : out<T>(o, name, s);
}

// A 2-D matrix with unit column stride whose rows may be strided: (view, row stride in
// elements).  The row stride is honoured as it is, including 0 (np.broadcast_to) and strides
// below the row length (overlapping rows, as in sliding_window_view): a kernel reads row i at
// X + i * ld, exactly the memory NumPy's view addresses.
template <class T>
std::pair<View<const T>, int64_t> strided_rows(py::handle o, const char* name) {
    if (!py::isinstance<py::array>(o)) throw py::type_error(std::string(name) + " must be a NumPy array");
    auto a = py::reinterpret_borrow<py::array>(o);
    check_dtype<T>(a, name);
    check_shape(a, name, Shape::mat());
    a = aligned_input<T>(std::move(a));  // (a copy is C-contiguous: its row stride is the row length)
    const py::ssize_t es = sizeof(T);
    // a matrix of no rows reads nothing, and NumPy may give it any strides (np.zeros((0, d)) has
    // (0, 0)): refusing it refused an empty Dask partition, after the caller's charge
    if (a.shape(0) > 0) {
        if (a.shape(1) > 1 && a.strides(1) != es) throw py::value_error(std::string(name) + " rows must be contiguous");
        if (a.strides(0) % es != 0 || a.strides(0) < 0)
            throw py::value_error(std::string(name) + " has an unsupported row stride");
    }
    const int64_t ld = a.shape(0) <= 1 ? a.shape(1) : a.strides(0) / es;  // one row: no stride is used
    const T* p = static_cast<const T*>(a.data());
    return {make_view<const T>(std::move(a), p), ld};
}

// A new array (1-D, or of the given shape) holding a copy of v: the results of a kernel.
template <class T>
py::array_t<T> to_numpy(const std::vector<T>& v, std::vector<py::ssize_t> shape = {}) {
    py::array_t<T> a(shape.empty() ? std::vector<py::ssize_t>{(py::ssize_t)v.size()} : shape);
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
}

// fn(T{}) with T = float or double, the dtype of a floating-point array.
template <class Fn>
decltype(auto) with_float(const py::array& a, const char* name, Fn&& fn) {
    if (a.dtype().equal(py::dtype::of<float>())) return fn(float{});
    if (a.dtype().equal(py::dtype::of<double>())) return fn(double{});
    throw py::type_error(std::string(name) + " must be float32 or float64, not " + std::string(py::str(a.dtype())));
}

}  // namespace dpf_bind
