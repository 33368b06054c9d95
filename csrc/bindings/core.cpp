#include "bindings/common.hpp"
#include "samplers/continuous.hpp"

using namespace dpf_bind;

namespace {

// out[i] = values[i] + scale[i] * Laplace(0, 1); scale broadcast by the caller.
template <class T>
void add_laplace(py::capsule cap, py::array_t<T, py::array::c_style> out,
                 carray<double> scale) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    auto o = out.template mutable_unchecked<1>();
    auto s = scale.template unchecked<1>();
    const py::ssize_t n = o.shape(0);
    const bool scalar = s.shape(0) == 1;
    if (!scalar && s.shape(0) != n) throw py::value_error("scale length mismatch");
    {
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        T* po = o.mutable_data(0);
        const double* ps = s.data(0);
        for (py::ssize_t i = 0; i < n; ++i)
            po[i] = static_cast<T>(po[i] + (scalar ? ps[0] : ps[i]) * dpf::std_laplace(rs));
    }
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "dpfast._core: continuous noise samplers (kernels in csrc/samplers/)";
    m.def("add_laplace", &add_laplace<double>, py::arg("bitgen"), py::arg("out").noconvert(),
          py::arg("scale"));
    m.def("add_laplace", &add_laplace<float>, py::arg("bitgen"), py::arg("out").noconvert(),
          py::arg("scale"));
}
