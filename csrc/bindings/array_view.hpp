// The one way the bindings take a NumPy array argument: checked (dtype, shape, C-contiguity,
// writability) and viewed as a typed pointer with its sizes, with one wording of the errors:
//   TypeError   "<name> must be a NumPy array" / "<name> must be <dtype>, not <dtype>"
//   ValueError  "<name> must be k-D" / "<name> must have shape (...), not (...)" /
//               "<name> must have m entries, not k" / "<name> must be C-contiguous" /
//               "<name> must be writeable"
// Python validates values; these checks keep a kernel from reading or writing out of bounds.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include "bindings/common.hpp"

namespace dpf_bind {

// The shape an argument must have: any; a total element count; or ndim and the extent of each
// axis (-1: any extent).
struct Shape {
    int ndim = -1;            // -1: any
    py::ssize_t count = -1;   // total elements, -1: any
    py::ssize_t dim[2] = {-1, -1};

    static Shape any() { return {}; }
    static Shape size(py::ssize_t n) {
        Shape s;
        s.count = n;
        return s;
    }
    static Shape vec(py::ssize_t n = -1) {
        Shape s;
        s.ndim = 1;
        s.dim[0] = n;
        return s;
    }
    static Shape mat(py::ssize_t rows = -1, py::ssize_t cols = -1) {
        Shape s;
        s.ndim = 2;
        s.dim[0] = rows;
        s.dim[1] = cols;
        return s;
    }
};

// How an input is taken: exactly as given (dtype T, C-contiguous, else an error), or converted
// to a C-contiguous array of T when needed (a copy, as pybind11's forcecast does: for the
// small parameter arrays of the samplers and scans).
enum class Take { exact, convert };

// A checked, typed view.  `arr` owns the array (or its converted copy) for the view's lifetime.
template <class T>
struct View {
    T* ptr = nullptr;  // nullptr for an optional argument given as None
    py::ssize_t size = 0;
    int ndim = 0;
    py::ssize_t shape[2] = {0, 0};
    py::array arr;

    T* data() const { return ptr; }
    T& operator[](py::ssize_t i) const { return ptr[i]; }
    py::ssize_t rows() const { return shape[0]; }
    py::ssize_t cols() const { return shape[1]; }
};

template <class T>
inline std::string dtype_name() {
    return py::str(py::dtype::of<T>());
}

inline std::string shape_str(const py::array& a) {
    std::string s = "(";
    for (py::ssize_t k = 0; k < a.ndim(); ++k) s += (k ? ", " : "") + std::to_string(a.shape(k));
    return s + (a.ndim() == 1 ? ",)" : ")");
}

inline py::array as_array(py::handle o, const char* name) {
    if (!py::isinstance<py::array>(o)) throw py::type_error(std::string(name) + " must be a NumPy array");
    return py::reinterpret_borrow<py::array>(o);
}

// The dtype / ndim / shape checks shared by every view (dtype compared by value, not identity:
// an unpickled array carries an equal but distinct dtype object).
template <class T>
inline void check_dtype(const py::array& a, const char* name) {
    if (!a.dtype().equal(py::dtype::of<T>()))
        throw py::type_error(std::string(name) + " must be " + dtype_name<T>() + ", not " +
                             std::string(py::str(a.dtype())));
}

inline void check_shape(const py::array& a, const char* name, const Shape& s) {
    if (s.ndim >= 0 && a.ndim() != s.ndim)
        throw py::value_error(std::string(name) + " must be " + std::to_string(s.ndim) + "-D");
    if (s.ndim >= 0)
        for (int k = 0; k < s.ndim && k < 2; ++k)
            if (s.dim[k] >= 0 && a.shape(k) != s.dim[k]) {
                std::string want = "(";
                for (int j = 0; j < s.ndim; ++j)
                    want += (j ? ", " : "") + (s.dim[j] >= 0 ? std::to_string(s.dim[j]) : std::string("*"));
                want += s.ndim == 1 ? ",)" : ")";
                throw py::value_error(std::string(name) + " must have shape " + want + ", not " + shape_str(a));
            }
    if (s.count >= 0 && a.size() != s.count)
        throw py::value_error(std::string(name) + " must have " + std::to_string(s.count) + " entries, not " +
                              std::to_string(a.size()));
}

template <class T>
inline View<T> make_view(py::array a, T* p) {
    View<T> v;
    v.ptr = p;
    v.size = a.size();
    v.ndim = static_cast<int>(a.ndim());
    for (int k = 0; k < v.ndim && k < 2; ++k) v.shape[k] = a.shape(k);
    v.arr = std::move(a);
    return v;
}

// A read-only input of dtype T (read-only arrays are accepted and never written).
template <class T>
View<const T> in(py::handle o, const char* name, const Shape& s = Shape::any(), Take take = Take::exact) {
    py::array a;
    if (take == Take::convert) {
        a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(o);
        if (!a) {
            PyErr_Clear();
            throw py::type_error(std::string(name) + " must be convertible to " + dtype_name<T>());
        }
    } else {
        a = as_array(o, name);
        check_dtype<T>(a, name);
        if (!(a.flags() & py::array::c_style)) throw py::value_error(std::string(name) + " must be C-contiguous");
    }
    check_shape(a, name, s);
    const T* p = static_cast<const T*>(a.data());
    return make_view<const T>(std::move(a), p);
}

// An output, written in place: dtype T, C-contiguous, writeable.
template <class T>
View<T> out(py::handle o, const char* name, const Shape& s = Shape::any()) {
    py::array a = as_array(o, name);
    check_dtype<T>(a, name);
    if (!(a.flags() & py::array::c_style)) throw py::value_error(std::string(name) + " must be C-contiguous");
    check_shape(a, name, s);
    if (!a.writeable()) throw py::value_error(std::string(name) + " must be writeable");
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

// A 2-D matrix with unit column stride whose rows may be strided: (pointer, row stride in
// elements).  The row stride is honoured as it is, including 0 (np.broadcast_to) and strides
// below the row length (overlapping rows, as in sliding_window_view): a kernel reads row i at
// X + i * ld, exactly the memory NumPy's view addresses.
template <class T>
std::pair<View<const T>, int64_t> strided_rows(py::handle o, const char* name) {
    py::array a = as_array(o, name);
    check_dtype<T>(a, name);
    check_shape(a, name, Shape::mat());
    const py::ssize_t es = static_cast<py::ssize_t>(sizeof(T));
    if (a.shape(1) > 1 && a.strides(1) != es) throw py::value_error(std::string(name) + " rows must be contiguous");
    if (a.strides(0) % es != 0 || a.strides(0) < 0)
        throw py::value_error(std::string(name) + " has an unsupported row stride");
    int64_t ld = a.strides(0) / es;
    if (a.shape(0) <= 1) ld = a.shape(1);  // one row: any stride is reported, none is used
    const T* p = static_cast<const T*>(a.data());
    return {make_view<const T>(std::move(a), p), ld};
}

// Calls fn(T{}) with T = float or double, the dtype of a floating-point array.
template <class Fn>
decltype(auto) with_float(const py::array& a, const char* name, Fn&& fn) {
    const auto dt = a.dtype();
    if (dt.equal(py::dtype::of<float>())) return fn(float{});
    if (dt.equal(py::dtype::of<double>())) return fn(double{});
    throw py::type_error(std::string(name) + " must be float32 or float64, not " + std::string(py::str(dt)));
}

}  // namespace dpf_bind
