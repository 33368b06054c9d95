// Helpers shared by the binding files: the only code in csrc/ that knows Python.
#pragma once
#include "portable.hpp"  // first: stops cl.exe with a clear message

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

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

}  // namespace dpf_bind

