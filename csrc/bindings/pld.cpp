// dpfast._pld: PLD discretization and delta/epsilon scans (kernels in csrc/pld/pld.hpp).
#include <cmath>
#include <string>
#include <vector>

#include "bindings/array_view.hpp"
#include "pld/pld.hpp"

using namespace dpf_bind;

// Every array argument is a float64 vector, converted (a copy) when given otherwise.
static View<const double> vec(const py::object& o, const char* name) {
    return in<double>(o, name, Shape::any(), Take::convert);
}
namespace P = dpf::pld;

static py::tuple subsampled_gaussian_ctd(double sigma, double q, bool remove, double i0, double h,
                                         std::size_t n) {
    if (!(sigma > 0) || !(q > 0 && q <= 1) || !(h > 0) || n < 2)
        throw py::value_error("subsampled_gaussian_ctd: bad arguments");
    py::array_t<double> pess(n), opt(n);
    double pinf = 0, shift = 0, excess = 0;
    {
        py::gil_scoped_release nogil;
        std::vector<double> dP(n + 1), dQ(n + 1);
        P::subsampled_gaussian_bins(sigma, q, remove, i0, h, n, dP.data(), dQ.data());
        P::ctd_split(dP.data(), dQ.data(), n, i0, h, pess.mutable_data(), opt.mutable_data(), &pinf, &shift, &excess);
    }
    return py::make_tuple(pess, opt, pinf, shift, excess);
}

static py::tuple ctd_split(py::object dP_, py::object dQ_, double i0, double h) {
    auto dP = vec(dP_, "dP");
    auto dQ = vec(dQ_, "dQ");
    std::size_t nb = (std::size_t)dP.size;
    if (dQ.size != dP.size || nb < 3 || !(h > 0)) throw py::value_error("ctd_split: bad arguments");
    std::size_t n = nb - 1;
    py::array_t<double> pess(n), opt(n);
    double pinf = 0, shift = 0, excess = 0;
    P::ctd_split(dP.ptr, dQ.ptr, n, i0, h, pess.mutable_data(), opt.mutable_data(), &pinf, &shift, &excess);
    return py::make_tuple(pess, opt, pinf, shift, excess);
}

static py::tuple profile_ctd(py::object d_, double step) {
    auto d = vec(d_, "d");
    std::size_t n = (std::size_t)d.size;
    if (n < 2 || !(step > 0)) throw py::value_error("profile_ctd: need >= 2 dots and step > 0");
    py::array_t<double> out(n);
    double pinf = 0, worst = 0;
    worst = P::profile_ctd(d.ptr, n, step, out.mutable_data(), &pinf);
    return py::make_tuple(out, pinf, worst);
}

// Replace-one subset-sampling profile (P::symmetric_subsampled_gaussian_ctd): marshalling only.
static py::tuple symmetric_subsampled_gaussian_ctd(double sigma, double q, double i0, double h,
                                                   std::size_t n) {
    if (!(sigma > 0) || !(q > 0 && q <= 1) || !(h > 0) || n < 2)
        throw py::value_error("symmetric_subsampled_gaussian_ctd: bad arguments");
    py::array_t<double> out(n);
    double pinf = 0, worst = 0;
    {
        py::gil_scoped_release nogil;
        worst = P::symmetric_subsampled_gaussian_ctd(sigma, q, i0, h, n, out.mutable_data(), &pinf);
    }
    return py::make_tuple(out, pinf, worst);
}

static py::array_t<double> subsampled_gaussian_delta(py::object eps_, double sigma, double q, bool remove) {
    auto eps = vec(eps_, "eps");
    py::array_t<double> out(eps.size);
    auto e = eps.ptr;
    auto o = out.mutable_data();
    for (py::ssize_t i = 0; i < eps.size; ++i) o[i] = (double)P::subsampled_gaussian_delta(e[i], sigma, q, remove);
    return out;
}

static py::tuple scan_prepare(py::object p_, double h) {
    auto p = vec(p_, "p");
    std::size_t N = (std::size_t)p.size;
    if (N < 1 || !(h > 0)) throw py::value_error("scan_prepare: bad arguments");
    py::array_t<double> T(N), D(N);
    double tm1 = 0, dm1 = 0;
    {
        py::gil_scoped_release nogil;
        P::scan_prepare(p.ptr, N, h, T.mutable_data(), D.mutable_data(), &tm1, &dm1);
    }
    return py::make_tuple(T, D, tm1, dm1);
}

// The scans index the grid with (eps / h - A): A and h must be finite (h > 0) and pinf a mass.
static void check_scan_grid(const char* who, double A, double h, double pinf) {
    if (!std::isfinite(A) || !(h > 0) || !std::isfinite(h) || !(pinf >= 0 && pinf <= 1))
        throw py::value_error(std::string(who) + ": need finite A, finite h > 0 and pinf in [0, 1]");
}

static py::array_t<double> scan_delta(py::object T_, py::object D_, double tm1, double dm1, double A,
                                      double h, double pinf, py::object eps_) {
    auto T = vec(T_, "T");
    auto D = vec(D_, "D");
    auto eps = vec(eps_, "eps");
    if (T.size != D.size || T.size < 1) throw py::value_error("scan_delta: bad arrays");
    check_scan_grid("scan_delta", A, h, pinf);  // any eps is fine (NaN gives NaN, +-inf are clamped)
    py::array_t<double> out(eps.size);
    auto e = eps.ptr;
    auto o = out.mutable_data();
    for (py::ssize_t i = 0; i < eps.size; ++i)
        o[i] = P::scan_delta(T.ptr, D.ptr, tm1, dm1, (std::size_t)T.size, A, h, pinf, e[i]);
    return out;
}

static py::array_t<double> scan_epsilon(py::object T_, py::object D_, double tm1, double dm1, double A,
                                        double h, double pinf, py::object delta_) {
    auto T = vec(T_, "T");
    auto D = vec(D_, "D");
    auto delta = vec(delta_, "delta");
    if (T.size != D.size || T.size < 1) throw py::value_error("scan_epsilon: bad arrays");
    check_scan_grid("scan_epsilon", A, h, pinf);
    auto d = delta.ptr;
    for (py::ssize_t i = 0; i < delta.size; ++i)
        if (std::isnan(d[i])) throw py::value_error("scan_epsilon: delta must not be NaN");
    py::array_t<double> out(delta.size);
    auto o = out.mutable_data();
    for (py::ssize_t i = 0; i < delta.size; ++i)
        o[i] = P::scan_epsilon(T.ptr, D.ptr, tm1, dm1, (std::size_t)T.size, A, h, pinf, d[i]);
    return out;
}

static py::array_t<double> log_mgf(py::object p_, double lo, double h, py::object ts_) {
    auto p = vec(p_, "p");
    auto ts = vec(ts_, "ts");
    py::array_t<double> out(ts.size);
    {
        py::gil_scoped_release nogil;
        P::log_mgf(p.ptr, (std::size_t)p.size, lo, h, ts.ptr, (std::size_t)ts.size, out.mutable_data());
    }
    return out;
}

static py::tuple pmf_moments(py::object p_) {
    auto p = vec(p_, "p");
    double t = 0, m = 0, v = 0;
    P::pmf_moments(p.ptr, (std::size_t)p.size, &t, &m, &v);
    return py::make_tuple(t, m, v);
}

PYBIND11_MODULE(_pld, m) {
    m.def("pmf_moments", &pmf_moments);
    m.def("log_mgf", &log_mgf);
    m.doc() = "dpfast PLD kernels: connect-the-dots discretization and delta/epsilon scans";
    m.def("subsampled_gaussian_ctd", &subsampled_gaussian_ctd);
    m.def("ctd_split", &ctd_split);
    m.def("profile_ctd", &profile_ctd);
    m.def("symmetric_subsampled_gaussian_ctd", &symmetric_subsampled_gaussian_ctd);
    m.def("subsampled_gaussian_delta", &subsampled_gaussian_delta);
    m.def("scan_prepare", &scan_prepare);
    m.def("scan_delta", &scan_delta);
    m.def("scan_epsilon", &scan_epsilon);
}
