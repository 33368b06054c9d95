// dpfast._core: the continuous noise samplers (the family in csrc/random/distributions.hpp, the
// block-parallel fill in csrc/random/noise_fill.hpp; dispatched by dpfast.random).
// Python validates (dpfast.mechanisms.continuous); these bindings only re-check what would
// make the kernel read or write out of bounds.
#include <cmath>
#include <tuple>
#include <vector>

#include "bindings/array_view.hpp"
#include "random/philox.hpp"
#include "samplers/continuous.hpp"
#include "samplers/randomized_response.hpp"

using namespace dpf_bind;

namespace {

// out[i] = values[i] + scale[i] * D_i  (values None: out[i] = scale[i] * D_i) for out float32
// or float64; scale has one element or out.size elements.  Draws from the bit generator behind
// `bitgen` (the caller holds its lock); releases the GIL.
template <class Dist>
void add_noise_impl(py::capsule cap, py::array out_, py::object values, py::object scale_, int n_threads) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    with_float(out_, "out", [&](auto tag) {
        using T = decltype(tag);
        auto o = out<T>(out_, "out");
        const std::size_t n = static_cast<std::size_t>(o.size);
        auto scale = in<double>(scale_, "scale", Shape::any(), Take::convert);
        const std::size_t ns = static_cast<std::size_t>(scale.size);
        require(ns == 1 || ns == n, "scale must have 1 element or as many as out");
        require(n_threads >= 1, "n_threads must be >= 1");
        auto vals = opt_in<T>(values, "values", Shape::size(o.size));
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        Dist dist;
        dpf::add_noise<T, Dist>(rs, dist, vals.ptr, scale.ptr, ns != 1, o.ptr, n, n_threads);
    });
}

// The keyed fill (csrc/random/philox.hpp): outs[j] = ((inplace ? outs[j] : 0) + scale * N(0, 1)) * fl(1 / divisor) over
// the arrays of `outs` (one dtype, float32 or float64, C-contiguous, writeable) taken as one sequence,
// from the Philox4x32-10 stream of key (k0, k1) = (Philox key, stream id), 64 bits each.
void add_normal_philox_impl(uint64_t k0, uint64_t k1, py::list outs, bool inplace, double scale, int n_threads,
                            double divisor) {
    require(n_threads >= 1, "n_threads must be >= 1");
    require(std::isfinite(divisor) && divisor > 0.0, "divisor must be finite and > 0");
    require(std::isfinite(scale) && scale >= 0.0, "scale must be finite and >= 0");
    const dpf::PhiloxKey key{static_cast<uint32_t>(k0), static_cast<uint32_t>(k0 >> 32), static_cast<uint32_t>(k1),
                             static_cast<uint32_t>(k1 >> 32)};
    if (outs.size() == 0) return;
    py::array first = py::reinterpret_borrow<py::array>(outs[0]);
    if (!py::isinstance<py::array>(outs[0])) throw py::type_error("outs must hold NumPy arrays");
    with_float(first, "outs", [&](auto tag) {
        using T = decltype(tag);
        std::vector<View<T>> views;
        std::vector<dpf::NoiseSegment<T>> segs;
        views.reserve(outs.size());
        for (py::handle h : outs) {
            views.push_back(out<T>(h, "outs"));
            const View<T>& v = views.back();
            segs.push_back({v.ptr, inplace ? v.ptr : nullptr, static_cast<std::size_t>(v.size)});
        }
        py::gil_scoped_release nogil;
        dpf::add_normal_philox<T>(key, segs, scale, divisor, n_threads);
    });
}

// The words [first, first + n) of the Philox4x32-10 stream of key (k0, k1), for the tests.
py::array_t<uint64_t> philox_words_impl(uint64_t k0, uint64_t k1, uint64_t first, py::ssize_t n) {
    require(n >= 0, "n must be >= 0");
    const dpf::PhiloxKey key{static_cast<uint32_t>(k0), static_cast<uint32_t>(k0 >> 32), static_cast<uint32_t>(k1),
                             static_cast<uint32_t>(k1 >> 32)};
    py::array_t<uint64_t> a(n);
    uint64_t* p = a.mutable_data();
    dpf::philox_words(key, first, p, static_cast<std::size_t>(n));
    return a;
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
// Shared checks of the randomized-response fills: in and out of one size, thr 1 or n entries.
template <class T>
std::tuple<View<T>, View<const T>, View<const uint64_t>> rr_args(py::handle out_, py::handle in_, py::handle thr_) {
    auto o = out<T>(out_, "out");
    auto i = in<T>(in_, "in", Shape::size(o.size), Take::convert);
    auto t = in<uint64_t>(thr_, "thr", Shape::any(), Take::convert);
    require(t.size == 1 || t.size == o.size, "thr must have 1 element or as many as out");
    return {o, i, t};
}

void rr_binary_impl(py::capsule cap, py::object out_, py::object in_, py::object thr_) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    auto [o, i, t] = rr_args<uint8_t>(out_, in_, thr_);
    py::gil_scoped_release nogil;
    dpf::BitStream rs(bg);
    dpf::rr_binary(rs, i.ptr, t.ptr, t.size != 1, o.ptr, (std::size_t)o.size);
}

void rr_kary_impl(py::capsule cap, py::object out_, py::object in_, int64_t k, py::object thr_) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    require(k >= 2, "k must be >= 2");
    auto [o, i, t] = rr_args<int64_t>(out_, in_, thr_);
    py::gil_scoped_release nogil;
    dpf::BitStream rs(bg);
    dpf::rr_kary(rs, i.ptr, k, t.ptr, t.size != 1, o.ptr, (std::size_t)o.size);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "dpfast._core: continuous noise samplers (csrc/random/distributions.hpp, noise_fill.hpp)";
    m.attr("NOISE_BLOCK") = dpf::kNoiseBlock;
    auto def_noise = [&m](const char* name, auto fn, const char* doc) {
        m.def(name, fn, py::arg("bitgen"), py::arg("out").noconvert(), py::arg("values"), py::arg("scale"),
              py::arg("n_threads") = 1, doc);
    };
    def_noise("add_laplace", &add_noise_impl<dpf::LaplaceDist>, "out = values + scale * Laplace(0, 1) noise");
    def_noise("add_normal", &add_noise_impl<dpf::NormalDist>, "out = values + scale * N(0, 1) noise");
    def_noise("add_exponential", &add_noise_impl<dpf::ExponentialDist>, "out = values + scale * Exponential(1) noise");
    def_noise("add_gumbel", &add_noise_impl<dpf::GumbelDist>, "out = values + scale * Gumbel(0, 1) noise");
    m.attr("PHILOX_PARALLEL_MIN") = dpf::kPhiloxParallelMin;
    m.def("add_normal_philox", &add_normal_philox_impl, py::arg("k0"), py::arg("k1"), py::arg("outs"),
          py::arg("inplace"), py::arg("scale"), py::arg("n_threads") = 1, py::arg("divisor") = 1.0,
          "outs = ((inplace ? outs : 0) + scale * N(0, 1)) * (1 / divisor) from the Philox4x32-10 stream of key (k0, k1)");
    m.def("philox_words", &philox_words_impl, py::arg("k0"), py::arg("k1"), py::arg("first"), py::arg("n"),
          "words [first, first + n) of the Philox4x32-10 stream of key (k0, k1)");
    m.def("philox_avx2", []() { return dpf::philox_avx2(); }, "whether the AVX2 Philox kernel runs");
    m.def("normal1", &normal1_impl, py::arg("bitgen"),
          "one N(0, 1) variate: output 0 of add_normal with one element, on the same words");
    m.def("rr_binary", &rr_binary_impl, py::arg("bitgen"), py::arg("out").noconvert(), py::arg("bits"),
          py::arg("thr"), "binary randomized response: out = bits ^ (word < thr)");
    m.def("rr_kary", &rr_kary_impl, py::arg("bitgen"), py::arg("out").noconvert(), py::arg("values"),
          py::arg("k"), py::arg("thr"), "k-ary randomized response");
}
