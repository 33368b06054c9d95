// dpfast._clip: per-example clipping kernels (csrc/clip/clip.hpp) for dpfast.sgd.
// Python (dpfast/sgd) validates; these wrappers check dtypes/shapes again so that a misuse
// raises instead of crashing, then release the GIL around every kernel.
#include "bindings/array_view.hpp"
#include "bindings/loss_table.hpp"
#include "clip/clip.hpp"
#include "clip/conv.hpp"

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

// The sampled indices of a subsampling kernel, drawn with the GIL released.
template <class Sample>
py::array_t<int64_t> sampled(py::capsule cap, Sample&& sample) {
    bitgen_t* bg = bitgen_from_capsule(cap);
    std::vector<int64_t> idx;
    {
        py::gil_scoped_release nogil;
        dpf::BitStream rs(bg);
        sample(rs, idx);
    }
    return to_numpy(idx);
}

py::array_t<int64_t> poisson_sample(py::capsule cap, int64_t n, double q) {
    require(n >= 0 && q >= 0 && q <= 1, "need n >= 0 and 0 <= q <= 1");
    return sampled(cap, [&](dpf::BitStream& rs, std::vector<int64_t>& idx) { clip::poisson_sample(n, q, rs, idx); });
}

py::array_t<int64_t> fixed_sample(py::capsule cap, int64_t n, int64_t m, py::object mark) {
    require(n >= 0 && m >= 0 && m <= n, "need 0 <= m <= n");
    auto mk = out<uint8_t>(mark, "mark", Shape::size(n));
    return sampled(cap, [&](dpf::BitStream& rs, std::vector<int64_t>& idx) { clip::fixed_sample(n, m, rs, mk.ptr, idx); });
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

// The batch's row indices, each in [0, n) (IndexError otherwise).
View<const int64_t> batch_idx(const py::object& idx, int64_t n) {
    auto v = in<int64_t>(idx, "idx");
    for (py::ssize_t i = 0; i < v.size; ++i)
        if (v[i] < 0 || v[i] >= n) throw py::index_error("idx out of range");
    return v;
}

py::tuple glm_clipped_sum(Workspace& ws, py::array X, py::object yr, py::object yl, py::object idx_,
                          py::object W_, py::object b, int loss, double C, py::object gW, py::object gb,
                          py::object norms, py::object factors, double delta) {
    return with_float(X, "X", [&](auto tag) {
        using T = decltype(tag);
        auto [Xv, ldx] = strided_rows<T>(X, "X");
        const int64_t n = Xv.rows(), d = Xv.cols();
        auto W = in<T>(W_, "W", Shape::mat(d));
        const int K = static_cast<int>(W.cols());
        const dpf::loss::Info* info = dpf::loss::find(loss);
        if (!info) throw py::value_error("unknown loss code");
        const bool multi = info->outputs == dpf::loss::Outputs::classes;
        if (!multi && K != 1) throw py::value_error("a margin loss needs K == 1");
        if (!(delta > 0 && std::isfinite(delta))) throw py::value_error("delta must be finite and > 0");
        dpf::loss::LossParams lp;
        lp.loss = static_cast<dpf::loss::Loss>(loss);
        lp.delta = delta;
        auto idx = batch_idx(idx_, n);
        const int64_t B = idx.size;
        View<const T> yv;
        View<const int64_t> ylv;
        if (multi) {
            ylv = in<int64_t>(yl, "y labels", Shape::size(n));
            for (py::ssize_t i = 0; i < B; ++i)
                if (ylv[idx[i]] < 0 || ylv[idx[i]] >= K) throw py::value_error("label out of range");
        } else {
            yv = in<T>(yr, "y", Shape::size(n));
            // A {0, 1} label given to a {-1, +1} loss would train silently on the wrong loss.
            if (info->labels == dpf::loss::Labels::pm1)
                for (py::ssize_t i = 0; i < B; ++i)
                    if (yv[idx[i]] != T(1) && yv[idx[i]] != T(-1))
                        throw py::value_error(std::string("the ") + info->name + " loss needs labels in {-1, +1}");
        }
        auto bv = opt_in<T>(b, "b", Shape::size(K));
        auto gWv = out<T>(gW, "gW", Shape::size(d * K));
        auto gbv = opt_out<T>(gb, "gb", Shape::size(K));
        if ((bv.ptr == nullptr) != (gbv.ptr == nullptr)) throw py::value_error("b and gb go together");
        auto nv = opt_out<double>(norms, "norms", Shape::size(B));
        auto fv = opt_out<double>(factors, "factors", Shape::size(B));
        auto gemm = get_gemm<T>();
        clip::StepStats st;
        {
            py::gil_scoped_release nogil;
            st = clip::glm_clipped_sum<T>(gemm, ws.get<T>(), Xv.ptr, ldx, d, yv.ptr, ylv.ptr, idx.ptr, B, W.ptr,
                                          bv.ptr, K, lp, C, gWv.ptr, gbv.ptr, nv.ptr, fv.ptr);
        }
        return py::make_tuple(st.loss_sum, st.n_clipped);
    });
}

py::tuple mlp_clipped_sum(Workspace& ws, py::array X, py::object yl, py::object idx_, int h, int K, int act,
                          py::object params, double C, int mode, py::object grad, py::object norms,
                          py::object factors) {
    return with_float(X, "X", [&](auto tag) {
        using T = decltype(tag);
        auto [Xv, ldx] = strided_rows<T>(X, "X");
        const int64_t n = Xv.rows(), d = Xv.cols();
        if (h <= 0 || K <= 0) throw py::value_error("need h > 0 and K > 0");
        if (act != clip::RELU && act != clip::TANH) throw py::value_error("unknown activation");
        if (mode != 0 && mode != 1) throw py::value_error("unknown clipping mode");
        auto idx = batch_idx(idx_, n);
        const int64_t B = idx.size;
        const int64_t P = d * h + h + (int64_t)h * K + K;
        auto ylv = in<int64_t>(yl, "y labels", Shape::size(n));
        for (int64_t i = 0; i < B; ++i)
            if (ylv[idx[i]] < 0 || ylv[idx[i]] >= K) throw py::value_error("label out of range");
        auto pv = in<T>(params, "params", Shape::size(P));
        auto gv = out<T>(grad, "grad", Shape::size(P));
        auto nv = opt_out<double>(norms, "norms", Shape::size(2 * B));
        auto fv = opt_out<double>(factors, "factors", Shape::size(2 * B));
        auto gemm = get_gemm<T>();
        clip::StepStats st;
        {
            py::gil_scoped_release nogil;
            st = clip::mlp_clipped_sum<T>(gemm, ws.get<T>(), Xv.ptr, ldx, d, ylv.ptr, idx.ptr, B, h, K, act, pv.ptr,
                                          C, mode, gv.ptr, nv.ptr, fv.ptr);
        }
        return py::make_tuple(st.loss_sum, st.n_clipped);
    });
}

void mlp_forward(py::array X, int h, int K, int act, py::object params, py::object out_) {
    with_float(X, "X", [&](auto tag) {
        using T = decltype(tag);
        // The BLAS needs a leading dimension >= d: overlapping rows (stride < d, e.g. a broadcast
        // X) are copied to a C-contiguous array first.
        py::array Xc = X;
        if (X.ndim() == 2 && X.shape(0) > 1 && X.strides(0) < X.shape(1) * (py::ssize_t)sizeof(T))
            Xc = py::module_::import("numpy").attr("ascontiguousarray")(X);
        auto [Xv, ldx] = strided_rows<T>(Xc, "X");
        const int64_t n = Xv.rows(), d = Xv.cols();
        const int64_t P = d * h + h + (int64_t)h * K + K;
        auto pv = in<T>(params, "params", Shape::size(P));
        auto ov = out<T>(out_, "out", Shape::size(n * K));
        auto gemm = get_gemm<T>();
        std::vector<T> buf;
        py::gil_scoped_release nogil;
        clip::mlp_forward<T>(gemm, Xv.ptr, ldx, n, d, h, K, act, pv.ptr, ov.ptr, buf);
    });
}

int64_t clip_rows(py::array G, double C, py::object norms, py::object factors, py::object out_, py::object clipped) {
    return with_float(G, "G", [&](auto tag) {
        using T = decltype(tag);
        auto g = in<T>(G, "per-example gradients G", Shape::mat());
        const int64_t B = g.rows(), P = g.cols();
        auto nv = opt_out<double>(norms, "norms", Shape::size(B));
        auto fv = opt_out<double>(factors, "factors", Shape::size(B));
        auto ov = opt_out<T>(out_, "out", Shape::size(P));
        auto cv = opt_out<T>(clipped, "clipped", Shape::size(B * P));
        py::gil_scoped_release nogil;
        return clip::clip_rows<T>(g.ptr, B, P, C, nv.ptr, fv.ptr, ov.ptr, cv.ptr);
    });
}

void optimizer_step(py::array theta, py::object gsum, py::object noise, double noise_std, double inv_batch,
                    double wd, int64_t decay_end, int opt, double lr, double mom, double beta2, double adam_eps,
                    int64_t t, py::object m, py::object v) {
    with_float(theta, "theta", [&](auto tag) {
        using T = decltype(tag);
        auto th = out<T>(theta, "theta");
        const int64_t P = th.size;
        auto gs = in<T>(gsum, "gsum", Shape::size(P));
        auto nz = opt_in<T>(noise, "noise", Shape::size(P));
        auto mv = opt_out<T>(m, "m", Shape::size(P));
        auto vv = opt_out<T>(v, "v", Shape::size(P));
        if (opt < 0 || opt > 2) throw py::value_error("unknown optimizer");
        if (opt >= clip::MOMENTUM && !mv.ptr) throw py::value_error("optimizer needs m");
        if (opt == clip::ADAM && !vv.ptr) throw py::value_error("adam needs v");
        if (t < 1) throw py::value_error("t must be >= 1");
        py::gil_scoped_release nogil;
        clip::optimizer_step<T>(th.ptr, gs.ptr, nz.ptr, P, noise_std, inv_batch, wd, decay_end, opt, lr, mom, beta2,
                                adam_eps, t, mv.ptr, vv.ptr);
    });
}

// Per-sample weight gradients of a groups = 1 convolution (csrc/clip/conv.hpp): x (B, C, H, W)
// and g (B, Co, OH, OW), both float32 C-contiguous; `pad` (top, bottom, left, right) >= 0: the
// zeros the kernel pads x with (all 0: x is already padded); the geometry must give exactly OH x OW
// output positions inside the padded input.  Writes w (B, KH KW C Co) float32 (per sample
// (KH, KW, C, Co)) and sq, fa, fg (B) float64; with `bias` (B, Co) float32 and `bias_sq` (B)
// float64 (both or neither) the per-sample sums of g over the positions and their sums of squares.
// `use_omp`: run on the threads of the OpenMP runtime already loaded (torch's), if any (conv.hpp,
// loaded_gomp_parallel); the results are the same bits either way.  `grad_scale` (an integer in
// [1, 2^24]): g is taken as the float32 products fl(g * grad_scale) (conv.hpp).
void conv_weight_grads(py::object x_, py::object g_, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh,
                       int64_t dw, py::object w_, py::object sq_, py::object fa_, py::object fg_, int n_threads,
                       py::object pad_, py::object bias_, py::object bias_sq_, bool use_omp, double grad_scale) {
    auto x = in<float>(x_, "x");
    auto g = in<float>(g_, "g");
    if (x.arr.ndim() != 4) throw py::value_error("x must be 4-D");
    if (g.arr.ndim() != 4) throw py::value_error("g must be 4-D");
    if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || dh < 1 || dw < 1)
        throw py::value_error("kernel, stride and dilation must be >= 1");
    if (n_threads < 1) throw py::value_error("n_threads must be >= 1");
    // a batch size (a positive integer exactly representable in float32), so that fl(g * scale) is
    // torch's float32 `g * B`
    if (!(grad_scale >= 1.0 && grad_scale <= 16777216.0 && grad_scale == (double)(int64_t)grad_scale))
        throw py::value_error("grad_scale must be an integer in [1, 2^24]");
    // each pad at most 2^30: Hp = H + top + bottom cannot overflow
    int64_t pad[4] = {0, 0, 0, 0};
    if (!pad_.is_none()) {
        py::tuple pt = py::tuple(pad_);
        if (pt.size() != 4) throw py::value_error("pad must be (top, bottom, left, right)");
        for (int k = 0; k < 4; ++k) pad[k] = pt[k].cast<int64_t>();
    }
    for (int64_t v : pad)
        if (v < 0 || v > (int64_t(1) << 30)) throw py::value_error("pad must be in [0, 2^30]");
    dpf::conv::ConvGeom geo;
    geo.b = x.arr.shape(0);
    geo.c = x.arr.shape(1);
    geo.pt = pad[0];
    geo.pb = pad[1];
    geo.pl = pad[2];
    geo.pr = pad[3];
    geo.hp = x.arr.shape(2) + pad[0] + pad[1];
    geo.wp = x.arr.shape(3) + pad[2] + pad[3];
    geo.co = g.arr.shape(1);
    geo.oh = g.arr.shape(2);
    geo.ow = g.arr.shape(3);
    geo.kh = kh;
    geo.kw = kw;
    geo.sh = sh;
    geo.sw = sw;
    geo.dh = dh;
    geo.dw = dw;
    if (g.arr.shape(0) != geo.b) throw py::value_error("x and g must have the same batch size");
    // the positions: (OH - 1) sh + (KH - 1) dh < Hp exactly as torch's output size (and likewise W)
    // (k - 1) <= (n_in - 1) / d is d (k - 1) < n_in without forming the product: a kernel size and
    // dilation whose product wraps around int64 (k = 2^61, d = 8) passed this check as a negative
    // span and the kernel then wrote far outside its multiplicity tables (red team 32: segfault).
    auto span_ok = [](int64_t n_in, int64_t n_out, int64_t k, int64_t s, int64_t d) {
        return n_in >= 1 && n_out >= 1 && k - 1 <= (n_in - 1) / d && (n_in - d * (k - 1) - 1) / s + 1 == n_out;
    };
    if (geo.c < 1 || geo.co < 1 || !span_ok(geo.hp, geo.oh, kh, sh, dh) || !span_ok(geo.wp, geo.ow, kw, sw, dw))
        throw py::value_error("the convolution geometry does not match x and g");
    geo.co8 = (geo.co + 7) / 8 * 8;
    // k <= n_in now, but the output's entries B Co KH KW C may still exceed int64 (checked products)
    int64_t p = 0, bp = 0, bco = 0, tile = 0;
    if (__builtin_mul_overflow(geo.co, kh, &p) || __builtin_mul_overflow(p, kw, &p) ||
        __builtin_mul_overflow(p, geo.c, &p) || __builtin_mul_overflow(geo.b, p, &bp) ||
        __builtin_mul_overflow(geo.b, geo.co, &bco) || __builtin_mul_overflow(geo.c, geo.hp, &tile) ||
        __builtin_mul_overflow(tile, geo.wp, &tile))
        throw py::value_error("the convolution is too large");
    auto w = out<float>(w_, "w", Shape::size(bp));
    auto sq = out<double>(sq_, "sq", Shape::size(geo.b));
    auto fa = out<double>(fa_, "fa", Shape::size(geo.b));
    auto fg = out<double>(fg_, "fg", Shape::size(geo.b));
    if (bias_.is_none() != bias_sq_.is_none()) throw py::value_error("give bias and bias_sq together");
    auto bs = opt_out<float>(bias_, "bias", Shape::size(bco));
    auto bq = opt_out<double>(bias_sq_, "bias_sq", Shape::size(geo.b));
    // an output sharing memory with an input or another output would be read while it is written
    // (by other threads too): values from nowhere in the bound's inputs (red team 32)
    auto span = [](const py::array& a) {
        const auto* p = static_cast<const char*>(a.data());
        return std::make_pair(p, p + a.nbytes());
    };
    std::vector<std::pair<const char*, const char*>> sp = {span(x.arr), span(g.arr), span(w.arr),
                                                           span(sq.arr), span(fa.arr), span(fg.arr)};
    if (bs.ptr) {
        sp.push_back(span(bs.arr));
        sp.push_back(span(bq.arr));
    }
    const size_t n_sp = sp.size();
    for (size_t o = 2; o < n_sp; ++o)
        for (size_t i = 0; i < n_sp; ++i)
            if (i != o && sp[o].first < sp[o].second && sp[i].first < sp[i].second && sp[o].first < sp[i].second &&
                sp[i].first < sp[o].second)
                throw py::value_error("the outputs w, sq, fa, fg, bias, bias_sq must not share memory with x, g or "
                                      "each other");
    if (geo.b == 0) return;
    py::gil_scoped_release nogil;
    dpf::conv::weight_grads(geo, x.ptr, g.ptr, w.ptr, sq.ptr, fa.ptr, fg.ptr, n_threads, bs.ptr, bq.ptr, use_omp,
                            (float)grad_scale);
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
    m.def("conv_weight_grads", &conv_weight_grads, py::arg("x"), py::arg("g"), py::arg("kh"), py::arg("kw"),
          py::arg("sh"), py::arg("sw"), py::arg("dh"), py::arg("dw"), py::arg("w"), py::arg("sq"), py::arg("fa"),
          py::arg("fg"), py::arg("n_threads"), py::arg("pad") = py::none(),
          py::arg("bias") = py::none(), py::arg("bias_sq") = py::none(), py::arg("use_omp") = false,
          py::arg("grad_scale") = 1.0);
    m.def("conv_omp_runtime", [] { return dpf::conv::loaded_gomp_parallel() != nullptr; },
          "Whether an OpenMP runtime (torch's thread pool) is loaded for conv_weight_grads(use_omp=True).");
    m.def("conv_vectorised", [] { return dpf::conv::use_avx2(); },
          "Whether conv_weight_grads runs a vectorised build, AVX2+FMA or AVX-512 (same bits as the generic one).");
    m.def("conv_isa", [] { return std::string(dpf::conv::isa() == 2 ? "avx512" : dpf::conv::isa() == 1 ? "avx2" : "generic"); },
          "The build conv_weight_grads runs: 'avx512', 'avx2' or 'generic' (the same bits).");
    m.def("optimizer_step", &optimizer_step, py::arg("theta"), py::arg("gsum"), py::arg("noise"),
          py::arg("noise_std"), py::arg("inv_batch"), py::arg("weight_decay"), py::arg("decay_end"), py::arg("optimizer"),
          py::arg("lr"), py::arg("momentum"), py::arg("beta2"), py::arg("adam_eps"), py::arg("t"),
          py::arg("m"), py::arg("v"));
}
