// dpfast._exact: floating-point-safe samplers (kernels in csrc/samplers/{exact_arith,
// discrete,snapping}.hpp).  Python validates (dpfast.mechanisms.discrete / .snapping); these
// bindings re-check what the kernels assume, so that bad input raises instead of crashing.
// 128-bit integers cross the boundary as (hi, lo) pairs of uint64.  Every fill is
// block-parallel over n_threads threads with per-block ChaCha20 keystreams keyed from the
// caller's generator (csrc/samplers/exact_arith.hpp, run_exact_blocks): the output does not
// depend on n_threads.
#include "bindings/array_view.hpp"
#include "samplers/discrete.hpp"
#include "samplers/snapping.hpp"

using namespace dpf_bind;

namespace {

using dpf::u128;

u128 join(uint64_t hi, uint64_t lo) { return ((u128)hi << 64) | lo; }

// Every fill is block-parallel over [1, 256] threads.
void check_threads(int n_threads) {
    require(n_threads >= 1 && n_threads <= 256, "n_threads must be in [1, 256]");
}

void discrete_laplace_fill(py::capsule cap, uint64_t s, uint64_t t, py::object out_, int n_threads) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    check_threads(n_threads);
    if (s == 0 || t == 0) throw py::value_error("s and t must be >= 1");
    if (t / s > (uint64_t(1) << 40)) throw py::value_error("scale t/s must be <= 2^40");
    auto o = out<int64_t>(out_, "out");
    py::gil_scoped_release nogil;
    dpf::fill_discrete_laplace(bg, s, t, o.ptr, (std::size_t)o.size, n_threads);
}

void discrete_gaussian_fill(py::capsule cap, uint64_t n_hi, uint64_t n_lo, uint64_t d_hi,
                            uint64_t d_lo, uint64_t tau, py::object out_, int n_threads) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    check_threads(n_threads);
    const u128 n = join(n_hi, n_lo), d = join(d_hi, d_lo);
    if (const char* err = dpf::DiscreteGaussianParams::invalid(n, d, tau)) throw py::value_error(err);
    auto o = out<int64_t>(out_, "out");
    const dpf::DiscreteGaussianParams p(n, d, tau);
    py::gil_scoped_release nogil;
    dpf::fill_discrete_gaussian(bg, p, o.ptr, (std::size_t)o.size, n_threads);
}

void bernoulli_exp_fill(py::capsule cap, uint64_t num_hi, uint64_t num_lo, uint64_t den_hi,
                        uint64_t den_lo, py::object out_, int n_threads) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    check_threads(n_threads);
    const u128 num = join(num_hi, num_lo), den = join(den_hi, den_lo);
    if (den == 0) throw py::value_error("gamma = num/den needs den >= 1");
    auto o = out<uint8_t>(out_, "out");
    py::gil_scoped_release nogil;
    dpf::fill_bernoulli_exp(bg, num, den, o.ptr, (std::size_t)o.size, n_threads);
}

void snapping_fill(py::capsule cap, py::object x_, double lambda, double big_lambda,
                   double bound, py::object out_, int n_threads) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    check_threads(n_threads);
    if (!(lambda > 0) || !std::isfinite(lambda)) throw py::value_error("lambda must be finite and > 0");
    int e = 0;
    if (!(big_lambda >= lambda) || !std::isfinite(big_lambda) || std::frexp(big_lambda, &e) != 0.5)
        throw py::value_error("Lambda must be a power of two >= lambda");
    if (!(bound > 0) || !std::isfinite(bound)) throw py::value_error("bound must be finite and > 0");
    auto o = out<double>(out_, "out");
    auto x = in<double>(x_, "x", Shape::any(), Take::convert);
    require(x.size == o.size, "x and out must have the same size");
    py::gil_scoped_release nogil;
    dpf::fill_snapping(bg, x.ptr, lambda, big_lambda, bound, o.ptr, (std::size_t)o.size, n_threads);
}

}  // namespace

PYBIND11_MODULE(_exact, m) {
    m.doc() = "dpfast._exact: exact discrete samplers (CKS20) and the snapping mechanism (Mironov 2012)";
    m.attr("EXACT_BLOCK") = dpf::kExactBlock;
    m.def("discrete_laplace_fill", &discrete_laplace_fill, py::arg("bitgen"), py::arg("s"), py::arg("t"),
          py::arg("out").noconvert(), py::arg("n_threads") = 1, "out[:] = Lap_Z(t/s) draws (CKS20 Algorithm 2)");
    m.def("discrete_gaussian_fill", &discrete_gaussian_fill, py::arg("bitgen"), py::arg("n_hi"),
          py::arg("n_lo"), py::arg("d_hi"), py::arg("d_lo"), py::arg("tau"), py::arg("out").noconvert(), py::arg("n_threads") = 1,
          "out[:] = N_Z(0, n/d) draws (CKS20 Algorithm 3), tau = floor(sqrt(n/d)) + 1");
    m.def("bernoulli_exp_fill", &bernoulli_exp_fill, py::arg("bitgen"), py::arg("num_hi"), py::arg("num_lo"),
          py::arg("den_hi"), py::arg("den_lo"), py::arg("out").noconvert(), py::arg("n_threads") = 1,
          "out[:] = Bernoulli(exp(-num/den)) draws as 0/1 bytes (CKS20 Algorithm 1)");
    m.def("snapping_fill", &snapping_fill, py::arg("bitgen"), py::arg("x"), py::arg("lam"),
          py::arg("big_lambda"), py::arg("bound"), py::arg("out").noconvert(), py::arg("n_threads") = 1,
          "out = clamp_B(round_Lambda(clamp_B(x) + S*lam*ln(U*))) (Mironov 2012)");
}
