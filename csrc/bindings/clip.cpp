// dpfast._clip: per-example clipping kernels (csrc/clip/clip.hpp) for dpfast.sgd.
// Python (dpfast/sgd) validates; these wrappers check dtypes/shapes again so that a misuse
// raises instead of crashing, then release the GIL around every kernel.
#include "bindings/common.hpp"
#include "bindings/loss_table.hpp"
#include "clip/clip.hpp"

#include <Python.h>

using namespace dpf_bind;
namespace clip = dpf::clip;

namespace {

// Fortran ?gemm from SciPy's cython_blas capsules (the BLAS SciPy links, usually OpenBLAS).
template <class T>
clip::gemm_t<T> get_gemm() {
    static clip::gemm_t<T> fn = nullptr;
    if (!fn) {
        py::object capi = py::module_::import("scipy.linalg.cython_blas").attr("__pyx_capi__");
        py::object cap = capi[std::is_same<T, float>::value ? "sgemm" : "dgemm"];
        PyObject* c = cap.ptr();
        void* p = PyCapsule_GetPointer(c, PyCapsule_GetName(c));
        if (!p) throw py::error_already_set();
        fn = reinterpret_cast<clip::gemm_t<T>>(p);
    }
    return fn;
}

// dtypes are compared by value (np.dtype ==: kind, size and byte order), not by identity: an
// unpickled array carries an equal but distinct dtype object.
template <class T>
bool is_dtype(const py::array& a) {
    return a.dtype().equal(py::dtype::of<T>());
}

template <class T>
void check_arr(const py::array& a, const char* name, py::ssize_t size) {
    if (!is_dtype<T>(a)) throw py::type_error(std::string(name) + ": unexpected dtype " + std::string(py::str(a.dtype())));
    if (!(a.flags() & py::array::c_style))
        throw py::value_error(std::string(name) + ": must be C-contiguous");
    if (size >= 0 && a.size() != size)
        throw py::value_error(std::string(name) + ": wrong size");
}

// Output (written) arrays.
template <class T>
T* data(py::array& a, const char* name, py::ssize_t size = -1) {
    check_arr<T>(a, name, size);
    if (!a.writeable()) throw py::value_error(std::string(name) + ": must be writeable");
    return static_cast<T*>(a.mutable_data());
}

// Input (read-only) arrays: read-only arrays are accepted and never written.
template <class T>
const T* cdata(const py::array& a, const char* name, py::ssize_t size = -1) {
    check_arr<T>(a, name, size);
    return static_cast<const T*>(a.data());
}

template <class T>
T* opt_data(py::object o, const char* name, py::ssize_t size) {
    if (o.is_none()) return nullptr;
    py::array a = o.cast<py::array>();
    return data<T>(a, name, size);
}

template <class T>
const T* opt_cdata(py::object o, const char* name, py::ssize_t size) {
    if (o.is_none()) return nullptr;
    py::array a = o.cast<py::array>();
    return cdata<T>(a, name, size);
}

// X: 2-D with unit column stride; returns (pointer, row stride in elements).  The row stride is
// honoured as it is, including 0 (np.broadcast_to) and strides below d (overlapping rows, as
// in sliding_window_view): the kernels read row i at X + i * ld, which is exactly the memory
// NumPy's view addresses.  (Replacing a short stride by d read past the buffer.)
template <class T>
std::pair<const T*, int64_t> matrix(const py::array& X) {
    if (X.ndim() != 2) throw py::value_error("X must be 2-D");
    if (!is_dtype<T>(X)) throw py::type_error("X: unexpected dtype");
    if (X.shape(1) > 1 && X.strides(1) != (py::ssize_t)sizeof(T))
        throw py::value_error("X rows must be contiguous");
    if (X.strides(0) % (py::ssize_t)sizeof(T) != 0 || X.strides(0) < 0)
        throw py::value_error("X: unsupported row stride");
    int64_t ld = X.strides(0) / (py::ssize_t)sizeof(T);
    if (X.shape(0) <= 1) ld = X.shape(1);  // one row: any stride is reported, none is used
    return {static_cast<const T*>(X.data()), ld};
}

py::array_t<int64_t> to_array(const std::vector<int64_t>& v) {
    py::array_t<int64_t> out(static_cast<py::ssize_t>(v.size()));
    if (!v.empty()) std::memcpy(out.mutable_data(), v.data(), v.size() * sizeof(int64_t));
    return out;
}

py::array_t<int64_t> poisson_sample(py::capsule cap, int64_t n, double q) {
    if (n < 0 || !(q >= 0 && q <= 1)) throw py::value_error("need n >= 0 and 0 <= q <= 1");
    bitgen_t* bg = bitgen_from_capsule(cap);
    std::vector<int64_t> out;
    {
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        out.reserve(static_cast<size_t>(std::min<double>(n, n * q + 10 * std::sqrt(n * q + 1) + 16)));
        clip::poisson_sample(n, q, rs, out);
    }
    return to_array(out);
}

py::array_t<int64_t> fixed_sample(py::capsule cap, int64_t n, int64_t m, py::array mark) {
    if (n < 0 || m < 0 || m > n) throw py::value_error("need 0 <= m <= n");
    uint8_t* mk = data<uint8_t>(mark, "mark", n);
    bitgen_t* bg = bitgen_from_capsule(cap);
    std::vector<int64_t> out;
    {
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        out.reserve(static_cast<size_t>(m));
        clip::fixed_sample(n, m, rs, mk, out);
    }
    return to_array(out);
}

struct Workspace {
    clip::Workspace<float> f;
    clip::Workspace<double> d;
    template <class T>
    clip::Workspace<T>& get();
};
template <>
clip::Workspace<float>& Workspace::get<float>() { return f; }
template <>
clip::Workspace<double>& Workspace::get<double>() { return d; }

void check_idx(py::array& idx, int64_t n) {
    const int64_t* p = cdata<int64_t>(idx, "idx");
    for (py::ssize_t i = 0; i < idx.size(); ++i)
        if (p[i] < 0 || p[i] >= n) throw py::index_error("idx out of range");
}

template <class T>
py::tuple glm_impl(Workspace& ws, py::array X, py::object yr, py::object yl, py::array idx,
                   py::array W, py::object b, int loss, double C, py::array gW, py::object gb,
                   py::object norms, py::object factors, double delta) {
    auto [Xp, ldx] = matrix<T>(X);
    const int64_t n = X.shape(0), d = X.shape(1);
    if (W.ndim() != 2 || W.shape(0) != d) throw py::value_error("W must be (d, K)");
    const int K = static_cast<int>(W.shape(1));
    const dpf::loss::Info* info = dpf::loss::find(loss);
    if (!info) throw py::value_error("unknown loss code");
    const bool multi = info->outputs == dpf::loss::Outputs::classes;
    if (!multi && K != 1) throw py::value_error("a margin loss needs K == 1");
    if (!(delta > 0 && std::isfinite(delta))) throw py::value_error("delta must be finite and > 0");
    dpf::loss::LossParams lp;
    lp.loss = static_cast<dpf::loss::Loss>(loss);
    lp.delta = delta;
    check_idx(idx, n);
    const int64_t B = idx.size();
    const T* yrp = nullptr;
    const int64_t* ylp = nullptr;
    if (multi) {
        py::array a = yl.cast<py::array>();
        ylp = cdata<int64_t>(a, "y labels", n);
        for (py::ssize_t i = 0; i < B; ++i) {
            const int64_t lab = ylp[static_cast<const int64_t*>(idx.data())[i]];
            if (lab < 0 || lab >= K) throw py::value_error("label out of range");
        }
    } else {
        py::array a = yr.cast<py::array>();
        yrp = cdata<T>(a, "y", n);
        // A {0, 1} label given to a {-1, +1} loss would train silently on the wrong loss.
        if (info->labels == dpf::loss::Labels::pm1)
            for (py::ssize_t i = 0; i < B; ++i) {
                const T lab = yrp[static_cast<const int64_t*>(idx.data())[i]];
                if (lab != T(1) && lab != T(-1))
                    throw py::value_error(std::string("the ") + info->name + " loss needs labels in {-1, +1}");
            }
    }
    const T* Wp = cdata<T>(W, "W", d * K);
    const T* bp = opt_cdata<T>(b, "b", K);
    T* gWp = data<T>(gW, "gW", d * K);
    T* gbp = opt_data<T>(gb, "gb", K);
    if ((bp == nullptr) != (gbp == nullptr)) throw py::value_error("b and gb go together");
    double* np_ = opt_data<double>(norms, "norms", B);
    double* fp = opt_data<double>(factors, "factors", B);
    const int64_t* ip = static_cast<const int64_t*>(idx.data());
    auto gemm = get_gemm<T>();
    clip::StepStats st;
    {
        py::gil_scoped_release nogil;
        st = clip::glm_clipped_sum<T>(gemm, ws.get<T>(), Xp, ldx, d, yrp, ylp, ip, B, Wp, bp, K,
                                      lp, C, gWp, gbp, np_, fp);
    }
    return py::make_tuple(st.loss_sum, st.n_clipped);
}

py::tuple glm_clipped_sum(Workspace& ws, py::array X, py::object yr, py::object yl,
                          py::array idx, py::array W, py::object b, int loss, double C,
                          py::array gW, py::object gb, py::object norms, py::object factors,
                          double delta) {
    if (is_dtype<float>(X))
        return glm_impl<float>(ws, X, yr, yl, idx, W, b, loss, C, gW, gb, norms, factors, delta);
    return glm_impl<double>(ws, X, yr, yl, idx, W, b, loss, C, gW, gb, norms, factors, delta);
}

template <class T>
py::tuple mlp_impl(Workspace& ws, py::array X, py::array yl, py::array idx, int h, int K, int act,
                   py::array params, double C, int mode, py::array grad, py::object norms,
                   py::object factors) {
    auto [Xp, ldx] = matrix<T>(X);
    const int64_t n = X.shape(0), d = X.shape(1);
    if (h <= 0 || K <= 0) throw py::value_error("need h > 0 and K > 0");
    if (act != clip::RELU && act != clip::TANH) throw py::value_error("unknown activation");
    if (mode != 0 && mode != 1) throw py::value_error("unknown clipping mode");
    check_idx(idx, n);
    const int64_t B = idx.size();
    const int64_t P = d * h + h + (int64_t)h * K + K;
    const int64_t* ylp = cdata<int64_t>(yl, "y labels", n);
    const int64_t* ip = static_cast<const int64_t*>(idx.data());
    for (int64_t i = 0; i < B; ++i)
        if (ylp[ip[i]] < 0 || ylp[ip[i]] >= K) throw py::value_error("label out of range");
    const T* pp = cdata<T>(params, "params", P);
    T* gp = data<T>(grad, "grad", P);
    double* np_ = opt_data<double>(norms, "norms", 2 * B);
    double* fp = opt_data<double>(factors, "factors", 2 * B);
    auto gemm = get_gemm<T>();
    clip::StepStats st;
    {
        py::gil_scoped_release nogil;
        st = clip::mlp_clipped_sum<T>(gemm, ws.get<T>(), Xp, ldx, d, ylp, ip, B, h, K, act, pp, C,
                                      mode, gp, np_, fp);
    }
    return py::make_tuple(st.loss_sum, st.n_clipped);
}

py::tuple mlp_clipped_sum(Workspace& ws, py::array X, py::array yl, py::array idx, int h, int K,
                          int act, py::array params, double C, int mode, py::array grad,
                          py::object norms, py::object factors) {
    if (is_dtype<float>(X))
        return mlp_impl<float>(ws, X, yl, idx, h, K, act, params, C, mode, grad, norms, factors);
    return mlp_impl<double>(ws, X, yl, idx, h, K, act, params, C, mode, grad, norms, factors);
}

template <class T>
void mlp_forward_impl(py::array X, int h, int K, int act, py::array params, py::array out) {
    // The BLAS needs a leading dimension >= d: overlapping rows (stride < d, e.g. a broadcast
    // X) are copied to a C-contiguous array first.
    if (X.ndim() == 2 && X.shape(0) > 1 && X.strides(0) < X.shape(1) * (py::ssize_t)sizeof(T))
        X = py::module_::import("numpy").attr("ascontiguousarray")(X);
    auto [Xp, ldx] = matrix<T>(X);
    const int64_t n = X.shape(0), d = X.shape(1);
    const int64_t P = d * h + h + (int64_t)h * K + K;
    const T* pp = cdata<T>(params, "params", P);
    T* op = data<T>(out, "out", n * K);
    auto gemm = get_gemm<T>();
    std::vector<T> buf;
    py::gil_scoped_release nogil;
    clip::mlp_forward<T>(gemm, Xp, ldx, n, d, h, K, act, pp, op, buf);
}

void mlp_forward(py::array X, int h, int K, int act, py::array params, py::array out) {
    if (is_dtype<float>(X)) return mlp_forward_impl<float>(X, h, K, act, params, out);
    return mlp_forward_impl<double>(X, h, K, act, params, out);
}

template <class T>
int64_t clip_rows_impl(py::array G, double C, py::object norms, py::object factors, py::object out,
                       py::object clipped) {
    if (G.ndim() != 2) throw py::value_error("per-example gradients must be 2-D (B, P)");
    const int64_t B = G.shape(0), P = G.shape(1);
    const T* gp = cdata<T>(G, "G");
    double* np_ = opt_data<double>(norms, "norms", B);
    double* fp = opt_data<double>(factors, "factors", B);
    T* op = opt_data<T>(out, "out", P);
    T* cp = opt_data<T>(clipped, "clipped", B * P);
    py::gil_scoped_release nogil;
    return clip::clip_rows<T>(gp, B, P, C, np_, fp, op, cp);
}

int64_t clip_rows(py::array G, double C, py::object norms, py::object factors, py::object out,
                  py::object clipped) {
    if (is_dtype<float>(G)) return clip_rows_impl<float>(G, C, norms, factors, out, clipped);
    return clip_rows_impl<double>(G, C, norms, factors, out, clipped);
}

template <class T>
void opt_impl(py::array theta, py::array gsum, py::object noise, double noise_std, double inv_batch,
              double wd, int64_t decay_end, int opt, double lr, double mom, double beta2,
              double adam_eps, int64_t t, py::object m, py::object v) {
    const int64_t P = theta.size();
    T* th = data<T>(theta, "theta");
    const T* gs = cdata<T>(gsum, "gsum", P);
    const T* nz = opt_cdata<T>(noise, "noise", P);
    T* mp = opt_data<T>(m, "m", P);
    T* vp = opt_data<T>(v, "v", P);
    if (opt < 0 || opt > 2) throw py::value_error("unknown optimizer");
    if (opt >= clip::MOMENTUM && !mp) throw py::value_error("optimizer needs m");
    if (opt == clip::ADAM && !vp) throw py::value_error("adam needs v");
    if (t < 1) throw py::value_error("t must be >= 1");
    py::gil_scoped_release nogil;
    clip::optimizer_step<T>(th, gs, nz, P, noise_std, inv_batch, wd, decay_end, opt, lr, mom, beta2, adam_eps,
                            t, mp, vp);
}

void optimizer_step(py::array theta, py::array gsum, py::object noise, double noise_std,
                    double inv_batch, double wd, int64_t decay_end, int opt, double lr, double mom,
                    double beta2, double adam_eps, int64_t t, py::object m, py::object v) {
    if (is_dtype<float>(theta))
        return opt_impl<float>(theta, gsum, noise, noise_std, inv_batch, wd, decay_end, opt, lr, mom, beta2, adam_eps, t, m, v);
    return opt_impl<double>(theta, gsum, noise, noise_std, inv_batch, wd, decay_end, opt, lr, mom, beta2, adam_eps, t, m, v);
}

}  // namespace

PYBIND11_MODULE(_clip, m) {
    m.doc() = "dpfast._clip: fused per-example clipping, ghost norms, O(batch) subsampling "
              "(kernels in csrc/clip/clip.hpp)";
    py::class_<Workspace>(m, "Workspace", "Scratch buffers reused across steps (not thread-safe).")
        .def(py::init<>())
        .def_property(
            "n_threads", [](const Workspace& w) { return w.f.nthreads; },
            [](Workspace& w, int n) {
                if (n < 1) throw py::value_error("n_threads must be >= 1");
                w.f.nthreads = w.d.nthreads = n;
            },
            "Threads for the fixed-block matrix products (results do not depend on it; the BLAS "
            "must be limited to one thread by the caller).");
    m.def("poisson_sample", &poisson_sample, py::arg("bitgen"), py::arg("n"), py::arg("q"));
    m.def("fixed_sample", &fixed_sample, py::arg("bitgen"), py::arg("n"), py::arg("m"),
          py::arg("mark"));
    m.def("glm_clipped_sum", &glm_clipped_sum, py::arg("ws"), py::arg("X"), py::arg("yr"),
          py::arg("yl"), py::arg("idx"), py::arg("W"), py::arg("b"), py::arg("loss"),
          py::arg("max_norm"), py::arg("gW"), py::arg("gb"), py::arg("norms"), py::arg("factors"),
          py::arg("delta") = 1.0);
    m.def("loss_table", &dpf_bind::loss_table, "Every loss once: name -> code, outputs, labels and constants (csrc/losses/losses.hpp).");
    m.def("mlp_clipped_sum", &mlp_clipped_sum, py::arg("ws"), py::arg("X"), py::arg("yl"),
          py::arg("idx"), py::arg("hidden"), py::arg("n_outputs"), py::arg("activation"),
          py::arg("params"), py::arg("max_norm"), py::arg("mode"), py::arg("grad"),
          py::arg("norms"), py::arg("factors"));
    m.def("mlp_forward", &mlp_forward, py::arg("X"), py::arg("hidden"), py::arg("n_outputs"),
          py::arg("activation"), py::arg("params"), py::arg("out"));
    m.def("clip_rows", &clip_rows, py::arg("G"), py::arg("max_norm"), py::arg("norms"),
          py::arg("factors"), py::arg("out"), py::arg("clipped"));
    m.def("optimizer_step", &optimizer_step, py::arg("theta"), py::arg("gsum"), py::arg("noise"),
          py::arg("noise_std"), py::arg("inv_batch"), py::arg("weight_decay"), py::arg("decay_end"), py::arg("optimizer"),
          py::arg("lr"), py::arg("momentum"), py::arg("beta2"), py::arg("adam_eps"), py::arg("t"),
          py::arg("m"), py::arg("v"));
}
