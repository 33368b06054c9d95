// dpfast._core: the continuous noise samplers (the family in csrc/random/distributions.hpp, the
// block-parallel fill in csrc/random/noise_fill.hpp; dispatched by dpfast.random).
// Python validates (dpfast.mechanisms.continuous); these bindings only re-check what would
// make the kernel read or write out of bounds.
#include "bindings/common.hpp"
#include "samplers/continuous.hpp"
#include "samplers/randomized_response.hpp"

using namespace dpf_bind;

namespace {

template <class T>
using out_array = py::array_t<T, py::array::c_style>;

// out[i] = values[i] + scale[i] * D_i  (values None: out[i] = scale[i] * D_i); scale has
// one element or out.size elements.  Draws from the bit generator behind `bitgen` (the
// caller holds its lock); releases the GIL.
template <class T, class Dist>
void add_noise_impl(py::capsule cap, out_array<T> out, py::object values, carray<double> scale,
                    int n_threads) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    if (!out.writeable()) throw py::value_error("out must be writeable");
    const std::size_t n = static_cast<std::size_t>(out.size());
    const std::size_t ns = static_cast<std::size_t>(scale.size());
    if (ns != 1 && ns != n)
        throw py::value_error("scale must have 1 element or as many as out");
    if (n_threads < 1) throw py::value_error("n_threads must be >= 1");
    const T* px = nullptr;
    out_array<T> vals;
    if (!values.is_none()) {
        if (!out_array<T>::check_(values))
            throw py::type_error("values must be a C-contiguous array of out's dtype");
        vals = py::reinterpret_borrow<out_array<T>>(values);
        if (static_cast<std::size_t>(vals.size()) != n)
            throw py::value_error("values must have as many elements as out");
        px = vals.data();
    }
    T* po = out.mutable_data();
    const double* ps = scale.data();
    {
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        Dist dist;
        dpf::add_noise<T, Dist>(rs, dist, px, ps, ns != 1, po, n, n_threads);
    }
}

// One N(0, 1) variate (the scalar Gaussian mechanism): the value a fill of length 1 gives, on the
// same words, without the array set-up (about 1 us a call instead of 3).
double normal1_impl(py::capsule cap) {
    dpf::BitStream rs(bitgen_from_capsule(cap));
    return dpf::standard_normal(rs);
}

// Randomized response; `thr` holds ceil(P(flip) 2^64) >= 1 (P(flip) = thr / 2^64), 1 or n entries.  Values must be
// in {0, 1} (binary) or [0, k) (k-ary); Python validates them.  A bad value cannot make the
// kernel read or write out of bounds (values are never used as indices), so it is not
// re-checked here.
void rr_binary_impl(py::capsule cap, py::array_t<uint8_t, py::array::c_style> out,
                    carray<uint8_t> in, carray<uint64_t> thr) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    const std::size_t n = static_cast<std::size_t>(out.size());
    if (static_cast<std::size_t>(in.size()) != n) throw py::value_error("in and out sizes differ");
    const std::size_t nt = static_cast<std::size_t>(thr.size());
    if (nt != 1 && nt != n) throw py::value_error("thr must have 1 element or as many as out");
    uint8_t* po = out.mutable_data();
    const uint8_t* pi = in.data();
    const uint64_t* pt = thr.data();
    py::gil_scoped_release nogil;
    dpf::BitStream rs(bg);
    dpf::rr_binary(rs, pi, pt, nt != 1, po, n);
}

void rr_kary_impl(py::capsule cap, py::array_t<int64_t, py::array::c_style> out,
                  carray<int64_t> in, int64_t k, carray<uint64_t> thr) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    if (k < 2) throw py::value_error("k must be >= 2");
    const std::size_t n = static_cast<std::size_t>(out.size());
    if (static_cast<std::size_t>(in.size()) != n) throw py::value_error("in and out sizes differ");
    const std::size_t nt = static_cast<std::size_t>(thr.size());
    if (nt != 1 && nt != n) throw py::value_error("thr must have 1 element or as many as out");
    int64_t* po = out.mutable_data();
    const int64_t* pi = in.data();
    const uint64_t* pt = thr.data();
    py::gil_scoped_release nogil;
    dpf::BitStream rs(bg);
    dpf::rr_kary(rs, pi, k, pt, nt != 1, po, n);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "dpfast._core: continuous noise samplers (csrc/random/distributions.hpp, noise_fill.hpp)";
    m.attr("NOISE_BLOCK") = dpf::kNoiseBlock;
    m.def("add_laplace", &add_noise_impl<double, dpf::LaplaceDist>, py::arg("bitgen"),
          py::arg("out").noconvert(), py::arg("values"), py::arg("scale"), py::arg("n_threads") = 1,
          "out = values + scale * Laplace(0, 1) noise (float64)");
    m.def("add_laplace", &add_noise_impl<float, dpf::LaplaceDist>, py::arg("bitgen"),
          py::arg("out").noconvert(), py::arg("values"), py::arg("scale"), py::arg("n_threads") = 1,
          "out = values + scale * Laplace(0, 1) noise (float32)");
    m.def("add_normal", &add_noise_impl<double, dpf::NormalDist>, py::arg("bitgen"),
          py::arg("out").noconvert(), py::arg("values"), py::arg("scale"), py::arg("n_threads") = 1,
          "out = values + scale * N(0, 1) noise (float64)");
    m.def("add_normal", &add_noise_impl<float, dpf::NormalDist>, py::arg("bitgen"),
          py::arg("out").noconvert(), py::arg("values"), py::arg("scale"), py::arg("n_threads") = 1,
          "out = values + scale * N(0, 1) noise (float32)");
    m.def("add_exponential", &add_noise_impl<double, dpf::ExponentialDist>, py::arg("bitgen"),
          py::arg("out").noconvert(), py::arg("values"), py::arg("scale"), py::arg("n_threads") = 1,
          "out = values + scale * Exponential(1) noise (float64)");
    m.def("add_exponential", &add_noise_impl<float, dpf::ExponentialDist>, py::arg("bitgen"),
          py::arg("out").noconvert(), py::arg("values"), py::arg("scale"), py::arg("n_threads") = 1,
          "out = values + scale * Exponential(1) noise (float32)");
    m.def("add_gumbel", &add_noise_impl<double, dpf::GumbelDist>, py::arg("bitgen"),
          py::arg("out").noconvert(), py::arg("values"), py::arg("scale"), py::arg("n_threads") = 1,
          "out = values + scale * Gumbel(0, 1) noise (float64)");
    m.def("add_gumbel", &add_noise_impl<float, dpf::GumbelDist>, py::arg("bitgen"),
          py::arg("out").noconvert(), py::arg("values"), py::arg("scale"), py::arg("n_threads") = 1,
          "out = values + scale * Gumbel(0, 1) noise (float32)");
    m.def("normal1", &normal1_impl, py::arg("bitgen"),
          "one N(0, 1) variate: output 0 of add_normal with one element, on the same words");
    m.def("rr_binary", &rr_binary_impl, py::arg("bitgen"), py::arg("out").noconvert(), py::arg("bits"),
          py::arg("thr"), "binary randomized response: out = bits ^ (word < thr)");
    m.def("rr_kary", &rr_kary_impl, py::arg("bitgen"), py::arg("out").noconvert(), py::arg("values"),
          py::arg("k"), py::arg("thr"), "k-ary randomized response");
}
