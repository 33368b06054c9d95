// Helpers shared by the binding files: the only code in csrc/ that knows Python.
#pragma once
#include "portable.hpp"  // first: stops cl.exe with a clear message

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

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

// Argument checks: ValueError with the message (the bindings validate before any kernel runs).
inline void require(bool ok, const char* msg) {
    if (!ok) throw py::value_error(msg);
}
inline void require(bool ok, const std::string& msg) {
    if (!ok) throw py::value_error(msg);
}

}  // namespace dpf_bind

