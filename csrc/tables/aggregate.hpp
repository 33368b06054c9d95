// Group-by with per-unit contribution bounding and per-group sums (dpfast.tables.aggregate).
//
// Input rows carry an integer unit code in [0, U) and a group code in [0, G) (-1: out of
// scope, dropped), plus k value columns.  Per unit: at most L0 of its groups are kept and, per
// kept (unit, group), at most Linf of its rows (Wilson et al. 2020, "Differentially private
// SQL with bounded user contribution", Sec. 3).  The choice is by smallest pseudo-random
// priority, where a priority is a keyed hash of (seed, unit key, group key[, row content,
// occurrence]) -- a function of the unit's own rows and public keys only, so the rows kept for
// one unit never depend on the other units, on row order or on how the table is partitioned
// (the same output for pandas and Dask inputs).  Kept values are clamped to [lo, hi] and summed
// per group: continuous sums of y = clamp(x) - (lo+hi)/2 and y^2 in double-double (an error of
// ~2^-106 relative per addition, so partial sums merged in any order round to the same double
// in practice); lattice sums (noise="discrete") of k = round(clamp(x)/gamma) and of the
// centred (2k - klo - khi)^2 in exact 128-bit integers.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "parallel.hpp"

namespace dpf {
namespace tables {

// MurmurHash3's 64-bit finaliser (a bijection with full avalanche).
inline uint64_t fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb93fe53ec2cbULL;
    k ^= k >> 33;
    return k;
}

// Keyed combination of two words: distinct (a, b) pairs give independent-looking outputs.
inline uint64_t mix2(uint64_t a, uint64_t b) { return fmix64(a ^ fmix64(b + 0x9E3779B97F4A7C15ULL)); }

// Error-free sum of a double-double (hi, lo) and a double (Knuth's TwoSum).
inline void dd_add(double& hi, double& lo, double x) {
    const double s = hi + x;
    const double bp = s - hi;
    const double e = (hi - (s - bp)) + (x - bp);
    hi = s;
    lo += e;
}

struct Params {
    int64_t n = 0, U = 0, G = 0, k = 0;
    const int64_t* unit = nullptr;      // [n] in [0, U)
    const uint64_t* unit_key = nullptr;  // [U]
    const int64_t* group = nullptr;     // [n] in [-1, G)
    const uint64_t* group_key = nullptr;  // [G]
    const double* values = nullptr;     // [k][n]
    const double* lo = nullptr;         // [k]
    const double* hi = nullptr;         // [k]
    const double* gamma = nullptr;      // [k] lattice step (discrete) or nullptr (continuous)
    uint64_t seed = 0;
    int64_t l0 = 1, linf = 1;
    uint8_t* keep = nullptr;            // [n] optional kept-row mask
    int threads = 1;
};

struct Result {
    std::vector<int64_t> count, units;           // [G]
    std::vector<double> s1h, s1l, s2h, s2l;      // [k][G] continuous
    std::vector<__int128> t1, t3;                // [k][G] discrete
};

namespace detail {

struct RowRef {
    int64_t g;
    uint64_t c;
    int64_t i;
};

struct Local {
    std::vector<int64_t> count, units;
    std::vector<double> s1h, s1l, s2h, s2l;
    std::vector<__int128> t1, t3;
};

inline uint64_t content_hash(const Params& p, int64_t i) {
    uint64_t h = 0x243F6A8885A308D3ULL;
    for (int64_t j = 0; j < p.k; ++j) {
        double v = p.values[j * p.n + i];
        if (v == 0.0) v = 0.0;  // -0.0 and 0.0 are the same value
        uint64_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        h = mix2(h, bits);
    }
    return h;
}

// The interval [ylo, yhi] of centred terms y = clamp(x) - mid of one value column, as doubles,
// such that every y in it respects, exactly (after rounding), each bound the release's
// sensitivities assume (dpfast/tables/_aggregate.py: r = (hi - lo)/2, m = (lo + hi)/2, with the
// same roundings): |y| <= r (centred sums of mean / variance: the bound r) and lo <= y + m <= hi
// (the sum metric releases sum(y) + m C, a term per row of |y + m| <= max(|lo|, |hi|)).  The
// rounded x - mid can exceed both: for bounds a few ulps apart (1060.3046685859608,
// 1060.304668585962) mid rounds to one side and a row at the bound gives |y| = 1.2 r.
struct Centre {
    double mid, ylo, yhi, h2;  // h2 = r*r/2: y*y is capped at 2 h2 (<= fl(r*r)), so y^2 - h2 in [-h2, h2]
};

inline Centre centre(double lo, double hi) {
    Centre c;
    c.mid = 0.5 * (lo + hi);
    const double r = 0.5 * (hi - lo);
    c.h2 = r * r / 2.0;
    // TwoSum: d = a - b rounded, e its exact error (a - b = d + e exactly)
    auto diff = [](double a, double b, double& e) {
        const double d = a - b;
        const double bp = d - a;
        e = (a - (d - bp)) + (-b - bp);
        return d;
    };
    double e;
    double up = diff(hi, c.mid, e);  // the largest y with y + mid <= hi exactly
    if (e < 0) up = std::nextafter(up, -INFINITY);
    double dn = diff(lo, c.mid, e);  // the smallest y with y + mid >= lo exactly
    if (e > 0) dn = std::nextafter(dn, INFINITY);
    c.yhi = std::min(r, up);
    c.ylo = std::max(-r, dn);
    return c;
}

inline void add_row(const Params& p, Local& L, int64_t i, int64_t g, const std::vector<Centre>& cen,
                    const std::vector<int64_t>& klo, const std::vector<int64_t>& khi) {
    L.count[g] += 1;
    for (int64_t j = 0; j < p.k; ++j) {
        const double x = std::min(std::max(p.values[j * p.n + i], p.lo[j]), p.hi[j]);
        const int64_t at = j * p.G + g;
        if (p.gamma) {
            int64_t kx = (int64_t)std::llround(x / p.gamma[j]);
            kx = std::min(std::max(kx, klo[j]), khi[j]);
            const __int128 y2 = (__int128)2 * kx - klo[j] - khi[j];
            L.t1[at] += kx;
            L.t3[at] += y2 * y2;
        } else {
            const Centre& c = cen[j];
            const double y = std::min(std::max(x - c.mid, c.ylo), c.yhi);
            dd_add(L.s1h[at], L.s1l[at], y);
            dd_add(L.s2h[at], L.s2l[at], std::min(y * y, 2.0 * c.h2));
        }
    }
}

// Units [u0, u1) of the unit-sorted records (each unit's records are sorted here, in place).
inline void run_units(const Params& p, const std::vector<int64_t>& start, std::vector<RowRef>& recs,
                      int64_t u0, int64_t u1, Local& L) {
    std::vector<Centre> mid(p.k);
    std::vector<int64_t> klo(p.k), khi(p.k);
    for (int64_t j = 0; j < p.k; ++j) {
        mid[j] = centre(p.lo[j], p.hi[j]);
        if (p.gamma) {
            klo[j] = (int64_t)std::llround(p.lo[j] / p.gamma[j]);
            khi[j] = (int64_t)std::llround(p.hi[j] / p.gamma[j]);
        }
    }
    struct Pair {
        uint64_t prio;
        int64_t b, e;  // run [b, e) in recs
    };
    std::vector<Pair> pairs;
    std::vector<std::pair<uint64_t, int64_t>> rp;  // (row priority, index in recs)
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t b = start[u], e = start[u + 1];
        if (b == e) continue;
        const uint64_t uk = mix2(p.seed, p.unit_key[u]);
        RowRef* rows = recs.data();
        if (e - b > 1)
            std::sort(rows + b, rows + e, [](const RowRef& a, const RowRef& c) {
                return a.g != c.g ? a.g < c.g : a.c < c.c;
            });
        pairs.clear();
        for (int64_t s = b; s < e;) {
            int64_t t = s + 1;
            while (t < e && rows[t].g == rows[s].g) ++t;
            pairs.push_back({mix2(uk, p.group_key[rows[s].g]), s, t});
            s = t;
        }
        if ((int64_t)pairs.size() > p.l0) {
            auto by_prio = [](const Pair& a, const Pair& c) {
                return a.prio != c.prio ? a.prio < c.prio : a.b < c.b;
            };
            std::nth_element(pairs.begin(), pairs.begin() + p.l0, pairs.end(), by_prio);
            pairs.resize(p.l0);
        }
        for (const Pair& pr : pairs) {
            const int64_t g = rows[pr.b].g;
            L.units[g] += 1;
            if (pr.e - pr.b <= p.linf) {
                for (int64_t s = pr.b; s < pr.e; ++s) {
                    add_row(p, L, rows[s].i, g, mid, klo, khi);
                    if (p.keep) p.keep[rows[s].i] = 1;
                }
                continue;
            }
            rp.clear();
            int64_t occ = 0;
            for (int64_t s = pr.b; s < pr.e; ++s) {
                occ = (s > pr.b && rows[s].c == rows[s - 1].c) ? occ + 1 : 0;
                rp.push_back({mix2(mix2(pr.prio, rows[s].c), (uint64_t)occ), s});
            }
            std::nth_element(rp.begin(), rp.begin() + p.linf, rp.end());
            for (int64_t q = 0; q < p.linf; ++q) {
                const int64_t s = rp[q].second;
                add_row(p, L, rows[s].i, g, mid, klo, khi);
                if (p.keep) p.keep[rows[s].i] = 1;
            }
        }
    }
}

}  // namespace detail

// Throws std::invalid_argument on out-of-range codes (checked before any work).
inline Result bound_and_sum(const Params& p) {
    const int64_t n = p.n, U = p.U, G = p.G, k = p.k;
    // Rows into unit order by a two-level counting sort: first into <= 4096 buckets of
    // consecutive unit codes (streaming writes), then, inside each bucket (cache resident),
    // by unit.  The content hash is computed in the first, sequential pass over the values.
    int shift = 0;
    while (U > 0 && ((U - 1) >> shift) >= 4096) ++shift;
    const int64_t B = U > 0 ? ((U - 1) >> shift) + 1 : 0;
    std::vector<int64_t> bstart(B + 1, 0);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t u = p.unit[i], g = p.group[i];
        if (u < 0 || u >= U) throw std::invalid_argument("unit code out of range");
        if (g < -1 || g >= G) throw std::invalid_argument("group code out of range");
        if (g >= 0) bstart[(u >> shift) + 1] += 1;
    }
    for (int64_t q = 0; q < B; ++q) bstart[q + 1] += bstart[q];
    const int64_t m = B > 0 ? bstart[B] : 0;
    struct Tmp {
        uint64_t c;
        int64_t i;
        int64_t g;
        int64_t u;
    };
    std::unique_ptr<Tmp[]> tmp(new Tmp[std::max<int64_t>(m, 1)]);
    {
        std::vector<int64_t> pos(bstart.begin(), bstart.end() - (B > 0 ? 1 : 0));
        for (int64_t i = 0; i < n; ++i) {
            const int64_t g = p.group[i];
            if (g >= 0) {
                const int64_t u = p.unit[i];
                tmp[pos[u >> shift]++] = {detail::content_hash(p, i), i, g, u};
            }
        }
    }
    std::vector<detail::RowRef> recs(m);
    // start[u]: first record of unit u.  A bucket's first unit starts where the bucket does: set
    // here, before the chunks run, because the last unit of a chunk reads start[] of the next
    // chunk's first unit (its end).  (Before 2026-11-26 the chunks wrote it themselves, so that
    // read raced with the other thread: it could see 0 and drop the unit -- which unit sits at a
    // chunk boundary depends on the other units, so that broke the sensitivity bound, and the
    // output depended on thread timing.)
    std::vector<int64_t> start(U + 1, 0);
    for (int64_t q = 0; q < B; ++q) start[q << shift] = bstart[q];
    start[U] = m;
    if (p.keep) std::fill(p.keep, p.keep + n, 0);
    // Second level and the per-unit work on first-level buckets [b0, b1).
    auto second_level = [&](int64_t b0, int64_t b1) {
        std::vector<int64_t> cnt((size_t)1 << shift);
        for (int64_t q = b0; q < b1; ++q) {
            const int64_t u0 = q << shift, nu = std::min<int64_t>(U - u0, (int64_t)1 << shift);
            std::fill(cnt.begin(), cnt.begin() + nu, 0);
            for (int64_t t = bstart[q]; t < bstart[q + 1]; ++t) cnt[tmp[t].u - u0] += 1;
            int64_t acc = bstart[q];
            for (int64_t v = 0; v < nu; ++v) {
                if (v > 0) start[u0 + v] = acc;  // start[u0] = bstart[q], set before the chunks
                const int64_t c = cnt[v];
                cnt[v] = acc;
                acc += c;
            }
            for (int64_t t = bstart[q]; t < bstart[q + 1]; ++t) {
                const Tmp& r = tmp[t];
                recs[cnt[r.u - u0]++] = {r.g, r.c, r.i};
            }
        }
    };
    // Chunks of consecutive first-level buckets, balanced by row count; their number depends on
    // the data only (rows, groups, value columns), never on p.threads, and each chunk sums into
    // its own accumulators, merged in chunk order below: the result is the same bits for any
    // number of threads.  At most 64 chunks, about 10^5 rows each, and accumulators of at most
    // 256 MiB together (a table with millions of groups runs in fewer, larger chunks).
    const int64_t local_bytes = G * (16 + 32 * k) + 1;  // count, units; 4 doubles or 2 int128 per (column, group)
    const int64_t mem_cap = std::max<int64_t>(1, (int64_t(256) << 20) / local_bytes);
    const int64_t K = std::max<int64_t>(1, std::min({B, m / 100000, int64_t(64), mem_cap}));
    std::vector<detail::Local> locals(K);
    for (auto& L : locals) {
        L.count.assign(G, 0);
        L.units.assign(G, 0);
        if (p.gamma) {
            L.t1.assign(k * G, 0);
            L.t3.assign(k * G, 0);
        } else {
            L.s1h.assign(k * G, 0.0);
            L.s1l.assign(k * G, 0.0);
            L.s2h.assign(k * G, 0.0);
            L.s2l.assign(k * G, 0.0);
        }
    }
    std::vector<int64_t> cut(K + 1, B);
    cut[0] = 0;
    for (int64_t c = 1; c < K; ++c) {
        const int64_t target = m * c / K;
        cut[c] = std::lower_bound(bstart.begin(), bstart.end(), target) - bstart.begin();
        cut[c] = std::max(cut[c - 1], std::min(cut[c], B));
    }
    // csrc/parallel.hpp: chunk c writes its own accumulators, keep[] of its own rows and the
    // start[] / recs[] ranges of its own units
    run_chunks(K, p.threads, [&](int64_t c) {
        second_level(cut[c], cut[c + 1]);
        detail::run_units(p, start, recs, std::min<int64_t>(cut[c] << shift, U),
                          std::min<int64_t>(cut[c + 1] << shift, U), locals[c]);
    });
    tmp.reset();
    // Merge in chunk order.
    Result r;
    r.count = std::move(locals[0].count);
    r.units = std::move(locals[0].units);
    r.s1h = std::move(locals[0].s1h);
    r.s1l = std::move(locals[0].s1l);
    r.s2h = std::move(locals[0].s2h);
    r.s2l = std::move(locals[0].s2l);
    r.t1 = std::move(locals[0].t1);
    r.t3 = std::move(locals[0].t3);
    for (int64_t c = 1; c < K; ++c) {
        const auto& L = locals[c];
        for (int64_t g = 0; g < G; ++g) {
            r.count[g] += L.count[g];
            r.units[g] += L.units[g];
        }
        for (int64_t a = 0; a < k * G; ++a) {
            if (p.gamma) {
                r.t1[a] += L.t1[a];
                r.t3[a] += L.t3[a];
            } else {
                dd_add(r.s1h[a], r.s1l[a], L.s1h[a]);
                dd_add(r.s1h[a], r.s1l[a], L.s1l[a]);
                dd_add(r.s2h[a], r.s2l[a], L.s2h[a]);
                dd_add(r.s2h[a], r.s2l[a], L.s2l[a]);
            }
        }
    }
    return r;
}

// Dense codes of integer keys with a small range: codes[i] = rank of v[i] among the distinct
// values (sorted).  Returns false (nothing written) when max - min + 1 > max_range.
inline bool dense_codes(const int64_t* v, int64_t n, int64_t max_range, int64_t* codes,
                        std::vector<int64_t>& uniques) {
    if (n == 0) return false;
    int64_t mn = v[0], mx = v[0];
    for (int64_t i = 1; i < n; ++i) {
        mn = std::min(mn, v[i]);
        mx = std::max(mx, v[i]);
    }
    const unsigned __int128 range = (unsigned __int128)((__int128)mx - mn) + 1;
    if (range > (unsigned __int128)max_range) return false;
    std::vector<int64_t> lookup((size_t)range, 0);
    for (int64_t i = 0; i < n; ++i) lookup[(uint64_t)v[i] - (uint64_t)mn] = 1;
    int64_t c = 0;
    uniques.clear();
    for (size_t r = 0; r < lookup.size(); ++r) {
        if (lookup[r]) {
            uniques.push_back((int64_t)((uint64_t)mn + r));
            lookup[r] = c++;
        }
    }
    for (int64_t i = 0; i < n; ++i) codes[i] = lookup[(uint64_t)v[i] - (uint64_t)mn];
    return true;
}

}  // namespace tables
}  // namespace dpf
