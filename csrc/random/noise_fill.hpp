// The deterministic block-parallel noise fill: out = x + scale * D, D i.i.d. from one of the
// distributions of random/distributions.hpp.  The one multi-threaded fill behind every
// continuous noise draw (dpfast._core add_laplace / add_normal / add_exponential / add_gumbel,
// dispatched by dpfast.random); its output is a function of the stream and n alone, never of
// the number of threads.  Thread policy: the caller passes n_threads (dpfast.random.noise_threads:
// 1 up to kNoiseBlock outputs, else dpfast._threads.default_threads()).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "random/bitstream.hpp"
#include "random/distributions.hpp"

namespace dpf {

// ---------------------------------------------------------------------------------------
// Vectorized, multi-threaded, deterministic kernel
// ---------------------------------------------------------------------------------------
//
// out[i] = x[i] + scale[i] * D_i   (x == nullptr: out[i] = scale[i] * D_i;
//                                    scale_per_element false: scale[0] for every i)
// with D_i i.i.d. from Dist.  x may alias out.
//
// Stream order (this *defines* the output): words w_0 .. w_{n-1} are drawn first, one per
// output; output i is Dist's fast transform of w_i.  The outputs whose word the fast path
// rejects (about 1.2% for the normal ziggurat, none for the one-word Laplace,
// exponential and Gumbel) are then finished in
// increasing index order, each continuing the ziggurat from its own w_i with the next words
// of the stream.  So the output is a function of the stream alone: not of the number of
// threads, nor of the block sizes below.  For the one-word distributions, output i is a
// function of w_i alone, so n scalar calls give the same values as one call of length n.
//
// Execution: only the calling thread touches the stream.  It draws blocks of kNoiseBlock
// words into a ring of kNoiseRing buffers; helper threads (and the caller, whenever it would
// otherwise wait) transform sub-blocks of kNoiseSub words.  A slot is reused once its block
// is fully transformed; its rejected (index, word) pairs are then queued for the fix-ups.
constexpr std::size_t kNoiseBlock = std::size_t(1) << 13;
constexpr std::size_t kNoiseSub = std::size_t(1) << 11;
constexpr std::size_t kNoiseRing = 16;
// The normal fill's transform (a table look-up and a multiply per word) costs less than drawing
// its word, which only the calling thread can do, so helper threads can gain little (at most the
// transform's share) and cost much when the cores are busy (the caller waits on a descheduled
// helper: 6x slower at the median next to torch's spinning OpenMP threads on 2 loaded cores).  So
// below this many outputs the normal fill runs serially whatever n_threads says (same output).
constexpr std::size_t kNoiseNormalParallelMin = std::size_t(1) << 20;

// The transform of one run of words w[0..len) into outputs lo..lo+len-1: every output is
// written (branch-free, so that the ~1.2% of words the normal ziggurat's fast path rejects cost
// no mispredicted branch), and the positions j of the rejected words are stored in rej[0..nr),
// nr returned.  A rejected output keeps its input value (out[i] = x[i], or a discardable value
// when x is null), so that the fix-up, which reads x[i], is right also when x aliases out.
// Accepted outputs are exactly emit(i, d) of the reference loop: out[i] = T(x[i] + sc d) (or
// T(sc d)), in the same double operations.  Templated on whether x is given and whether the
// scale is per element, so the inner loop has no loop-invariant branch.
template <class T, class Dist, bool HasX, bool PerElem, class Idx>
inline uint32_t transform_run(const Dist& dist, const uint64_t* w, const T* x, const double* scale, T* out,
                              std::size_t lo, std::size_t len, Idx* rej) {
    uint32_t nr = 0;
    const double sc0 = scale[0];
    for (std::size_t j = 0; j < len; ++j) {
        const std::size_t i = lo + j;
        double d;
        const bool ok = dist.fast_branchless(w[j], d);
        const double sc = PerElem ? scale[i] : sc0;
        if (HasX) {
            const T xi = x[i];
            const T v = static_cast<T>(static_cast<double>(xi) + sc * d);
            out[i] = ok ? v : xi;
        } else {
            out[i] = static_cast<T>(sc * d);
        }
        if (Dist::may_reject) {
            rej[nr] = static_cast<Idx>(j);
            nr += ok ? 0u : 1u;
        }
    }
    return nr;
}

// Calls f(std::integral_constant<bool, x given>, std::integral_constant<bool, per element>).
template <class F>
inline void with_fill_variant(bool has_x, bool per_elem, F&& f) {
    using Y = std::true_type;
    using N = std::false_type;
    if (has_x) {
        if (per_elem) f(Y{}, Y{}); else f(Y{}, N{});
    } else {
        if (per_elem) f(N{}, Y{}); else f(N{}, N{});
    }
}

// One thread, no buffers: the same stream order as add_noise (words 0..n-1, then the
// fix-ups in index order), hence the same output.
template <class T, class Dist>
void add_noise_serial(BitStream& rs, const Dist& dist, const T* x, const double* scale,
                      bool scale_per_element, T* out, std::size_t n) {
    auto emit = [&](std::size_t i, double d) {
        const double sc = scale_per_element ? scale[i] : scale[0];
        out[i] = x ? static_cast<T>(static_cast<double>(x[i]) + sc * d) : static_cast<T>(sc * d);
    };
    // Words are drawn in small runs into a local buffer, so that the transform loop runs
    // without the opaque bit-generator call (which forces every pointer to be reloaded).
    constexpr std::size_t kRun = 256;
    uint64_t buf[kRun];
    uint32_t rej[kRun];
    std::vector<std::pair<std::size_t, uint64_t>> fix;
    if (Dist::may_reject) fix.reserve(n / 64 + 16);
    with_fill_variant(x != nullptr, scale_per_element, [&](auto has_x, auto per_elem) {
        for (std::size_t lo = 0; lo < n; lo += kRun) {
            const std::size_t len = std::min(kRun, n - lo);
            for (std::size_t j = 0; j < len; ++j) buf[j] = rs.u64();
            const uint32_t nr = transform_run<T, Dist, decltype(has_x)::value, decltype(per_elem)::value>(
                dist, buf, x, scale, out, lo, len, rej);
            for (uint32_t r = 0; r < nr; ++r) fix.emplace_back(lo + rej[r], buf[rej[r]]);
        }
    });
    for (const auto& iw : fix) emit(iw.first, dist.slow(iw.second, rs));
}

template <class T, class Dist>
void add_noise(BitStream& rs, const Dist& dist, const T* x, const double* scale,
               bool scale_per_element, T* out, std::size_t n, int n_threads) {
    if (n == 0) return;
    if (n_threads <= 1 || n <= kNoiseBlock || (Dist::may_reject && n < kNoiseNormalParallelMin)) {
        add_noise_serial(rs, dist, x, scale, scale_per_element, out, n);
        return;
    }
    constexpr std::size_t subs_per_block = kNoiseBlock / kNoiseSub;
    const std::size_t nb = (n + kNoiseBlock - 1) / kNoiseBlock;
    const std::size_t total_units = (n + kNoiseSub - 1) / kNoiseSub;  // unit u: [u*kSub, ...)
    const std::size_t nslots = std::min(nb, kNoiseRing);
    const std::size_t slot_len = std::min(n, kNoiseBlock);

    std::vector<uint64_t> words(nslots * slot_len);
    std::vector<uint16_t> rej(Dist::may_reject ? nslots * slot_len : 0);
    std::vector<uint32_t> rej_count(Dist::may_reject ? nslots * subs_per_block : 0);
    std::vector<std::pair<std::size_t, uint64_t>> fix;  // (index, first word), index order
    if (Dist::may_reject) fix.reserve(n / 64 + 64);

    auto emit = [&](std::size_t i, double d) {
        const double sc = scale_per_element ? scale[i] : scale[0];
        out[i] = x ? static_cast<T>(static_cast<double>(x[i]) + sc * d) : static_cast<T>(sc * d);
    };
    // Transform one unit of words into outputs: pure, thread-safe (disjoint writes).
    auto transform = [&](std::size_t u) {
        const std::size_t b = u / subs_per_block, s = u % subs_per_block, slot = b % nslots;
        const std::size_t lo = u * kNoiseSub, hi = std::min(n, lo + kNoiseSub);
        const uint64_t* wp = words.data() + slot * slot_len + s * kNoiseSub;
        uint16_t* rp = Dist::may_reject ? rej.data() + slot * slot_len + s * kNoiseSub : nullptr;
        uint32_t nrej = 0;
        with_fill_variant(x != nullptr, scale_per_element, [&](auto has_x, auto per_elem) {
            nrej = transform_run<T, Dist, decltype(has_x)::value, decltype(per_elem)::value>(
                dist, wp, x, scale, out, lo, hi - lo, rp);
        });
        if (Dist::may_reject) rej_count[slot * subs_per_block + s] = nrej;
    };
    auto units_of = [&](std::size_t b) -> uint32_t {
        return static_cast<uint32_t>(std::min(total_units, (b + 1) * subs_per_block) - b * subs_per_block);
    };

    std::atomic<std::size_t> published{0};  // blocks [0, published) have their words drawn
    std::atomic<std::size_t> next_unit{0};
    std::atomic<bool> stop{false};
    std::vector<std::atomic<uint32_t>> done(nb);
    for (auto& d : done) d.store(0, std::memory_order_relaxed);

    auto claim = [&](std::size_t& u) -> bool {
        std::size_t cur = next_unit.load(std::memory_order_acquire);
        while (cur < total_units && cur / subs_per_block < published.load(std::memory_order_acquire)) {
            if (next_unit.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel)) {
                u = cur;
                return true;
            }
        }
        return false;
    };
    auto run_unit = [&](std::size_t u) {
        transform(u);
        done[u / subs_per_block].fetch_add(1, std::memory_order_acq_rel);
    };

    struct Joiner {  // joins the helpers on every exit path (also if the caller throws)
        std::vector<std::thread> th;
        std::atomic<bool>* stop;
        ~Joiner() {
            stop->store(true, std::memory_order_release);
            for (auto& t : th) if (t.joinable()) t.join();
        }
    } helpers{{}, &stop};
    const int want = (nb >= 2) ? std::max(1, std::min(n_threads, 64)) - 1 : 0;
    for (int t = 0; t < want; ++t) {
        try {
            helpers.th.emplace_back([&]() {
                int idle = 0;
                for (;;) {
                    std::size_t u;
                    if (claim(u)) {
                        run_unit(u);
                        idle = 0;
                    } else if (stop.load(std::memory_order_acquire) ||
                               next_unit.load(std::memory_order_acquire) >= total_units) {
                        return;
                    } else if (++idle < 64) {
                        std::this_thread::yield();
                    } else {
                        // Caught up with the drawing thread (the usual case when the
                        // transform is cheaper than the draw): sleep rather than spin, so
                        // that a loaded machine's cores go to the drawing thread.
                        std::this_thread::sleep_for(std::chrono::microseconds(30));
                    }
                }
            });
        } catch (...) {
            break;  // fewer threads: same output
        }
    }

    // Wait until block b is transformed (helping meanwhile), then queue its rejections.
    auto reclaim = [&](std::size_t b) {
        const uint32_t need = units_of(b);
        while (done[b].load(std::memory_order_acquire) < need) {
            std::size_t u;
            if (claim(u)) run_unit(u);
            else std::this_thread::yield();
        }
        if (!Dist::may_reject) return;
        const std::size_t slot = b % nslots;
        for (uint32_t s = 0; s < need; ++s) {
            const std::size_t lo = (b * subs_per_block + s) * kNoiseSub;
            const uint16_t* rp = rej.data() + slot * slot_len + s * kNoiseSub;
            const uint64_t* wp = words.data() + slot * slot_len + s * kNoiseSub;
            for (uint32_t j = 0; j < rej_count[slot * subs_per_block + s]; ++j)
                fix.emplace_back(lo + rp[j], wp[rp[j]]);
        }
    };

    for (std::size_t b = 0; b < nb; ++b) {
        if (b >= nslots) reclaim(b - nslots);
        uint64_t* p = words.data() + (b % nslots) * slot_len;
        const std::size_t len = std::min(kNoiseBlock, n - b * kNoiseBlock);
        for (std::size_t i = 0; i < len; ++i) p[i] = rs.u64();
        published.store(b + 1, std::memory_order_release);
    }
    for (std::size_t b = (nb > nslots ? nb - nslots : 0); b < nb; ++b) reclaim(b);
    // Fix-ups: sequential, in index order, continuing the stream after the n first words.
    for (const auto& iw : fix) emit(iw.first, dist.slow(iw.second, rs));
}

}  // namespace dpf
