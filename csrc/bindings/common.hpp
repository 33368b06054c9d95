// Helpers shared by the binding files: the only code in csrc/ that knows Python.
#pragma once
#include "portable.hpp"  // first: stops cl.exe with a clear message

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "random/bitstream.hpp"

namespace py = pybind11;

namespace dpf_bind {

// The bitgen_t behind a BitGenerator's `capsule` attribute (name "BitGenerator").
inline bitgen_t* bitgen_from_capsule(const py::capsule& cap) {
    if (std::string(cap.name() ? cap.name() : "") != "BitGenerator")
        throw py::type_error("expected a numpy BitGenerator capsule");
    return cap.get_pointer<bitgen_t>();
}

template <class T>
using carray = py::array_t<T, py::array::c_style | py::array::forcecast>;

// Argument checks: ValueError with the message (the bindings validate before any kernel runs).
inline void require(bool ok, const char* msg) {
    if (!ok) throw py::value_error(msg);
}
inline void require(bool ok, const std::string& msg) {
    if (!ok) throw py::value_error(msg);
}

// An optional float64 C-contiguous vector of `len` entries (None: nullptr).
inline const double* opt_ptr(const py::object& o, int64_t len, const char* name) {
    if (o.is_none()) return nullptr;
    auto a = py::cast<py::array>(o);
    require(a.dtype().kind() == 'f' && a.dtype().itemsize() == 8, std::string(name) + " must be float64");
    require((a.flags() & py::array::c_style) != 0, std::string(name) + " must be C-contiguous");
    require(a.size() == len, std::string(name) + " has the wrong size");
    return static_cast<const double*>(a.data());
}

}  // namespace dpf_bind

