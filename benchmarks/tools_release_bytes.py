"""Byte-for-byte snapshot of dpfast.tools releases (9,035 cases) for before/after comparisons of speed work.

Run: PYTHONPATH=<tree> python benchmarks/tools_release_bytes.py OUT.pkl in each tree (and with
DPFAST_STATS_NO_AVX2=1 / DPFAST_NUM_THREADS=2), then `cmp` the pickles.  Records every statistic of
dpfast.tools (and the generator's next word after a release drawn from a Generator), error types
and messages, and the raw dpfast._stats.moments integers.
"""
import itertools
import pickle
import sys

import numpy as np

import dpfast.tools as T
from dpfast import _stats


def rec(f):
    try:
        r = f()
    except Exception as e:
        return ("ERR", type(e).__name__, str(e))
    if isinstance(r, tuple):
        return tuple(np.asarray(v).tobytes() + str(np.asarray(v).dtype).encode() + str(np.shape(v)).encode() for v in r)
    return (np.asarray(r).tobytes(), str(np.asarray(r).dtype), np.shape(r), type(r).__name__)

out = []
datas = {}
g = np.random.default_rng(12345)
for n in (1, 2, 7, 8, 9, 100, 1000, 65537, 200003):
    datas[f"u{n}"] = g.uniform(-0.5, 1.5, n)
datas["n2d"] = g.normal(0.3, 1.0, (5000, 3))
datas["n3d"] = g.normal(0.3, 1.0, (300, 2, 4))
datas["f32"] = g.uniform(0, 1, 3001).astype(np.float32)
datas["int"] = g.integers(-5, 20, 4000)
datas["neg"] = g.uniform(-1e6, 1e6, 5003)
nanx = g.uniform(0, 1, 7000)
nanx[g.random(7000) < 0.05] = np.nan
datas["nan"] = nanx
nan2 = g.uniform(0, 1, (3000, 4))
nan2[g.random((3000, 4)) < 0.05] = np.nan
datas["nan2d"] = nan2
edge = np.concatenate([[-0.0, 0.0, 5e-324, -5e-324, 1.0, -1.0, 1e6, -1e6, 0.5, 2.0, 2.5, 7.0, -3.0], g.uniform(-2, 2, 1000) * np.where(g.random(1000) < 0.3, 0.0, 1.0) * np.where(g.random(1000) < 0.5, -1.0, 1.0)])
datas["edge"] = edge
datas["edge0"] = np.array([-0.0] * 33)
bad = g.uniform(0, 1, 1000)
bad[17] = np.inf
datas["inf"] = bad
bounds_list = [(0.0, 1.0), (-0.5, 1.5), (-3, 7), (0.1, 0.2), (-1e6, 1e6), (2.0, 2.5), (-1.0, 1.0), (-2.0, 0.0), (-1e-300, 1e-300)]
funcs = ["mean", "sum", "var", "std", "nanmean", "nansum", "nanvar", "nanstd"]
for (dn, x), fn, b in itertools.product(datas.items(), funcs, bounds_list):
    axes = [None] if x.ndim == 1 else [None, 0]
    for ax in axes:
        for seed in (0, 7):
            for eps in (0.3, 2.0):
                f = getattr(T, fn)
                out.append((dn, fn, b, ax, seed, eps, rec(lambda: f(x, eps, b, axis=ax, rng=seed))))
        gen = np.random.default_rng(99)
        r = rec(lambda: getattr(T, fn)(x, 1.0, b, axis=ax, keepdims=True, rng=gen))
        out.append((dn, fn, b, ax, "gen-keepdims", r, gen.integers(0, 2**63)))
for (dn, x) in datas.items():
    for seed in (0, 3):
        out.append((dn, "cnz", seed, rec(lambda: T.count_nonzero(x > 0.5, 1.0, rng=seed))))
        out.append((dn, "cnz0", seed, rec(lambda: T.count_nonzero(x, 0.7, axis=0, rng=seed))))
        out.append((dn, "hist", seed, rec(lambda: T.histogram(x.ravel(), 1.0, bins=7, range=(0, 1), rng=seed))))
    gen = np.random.default_rng(5)
    out.append((dn, "cnz-gen", rec(lambda: T.count_nonzero(x, 1.0, rng=gen)), gen.integers(0, 2**63)))
x2 = datas["n2d"]
for seed in range(5):
    out.append(("h2d", seed, rec(lambda: T.histogram2d(x2[:, 0], x2[:, 1], 1.0, bins=5, range=[(-1, 1), (-1, 1)], rng=seed))))
    out.append(("hdd", seed, rec(lambda: T.histogramdd(x2, 1.0, bins=4, range=[(-1, 1)] * 3, rng=seed))))
# the native pass directly
for (dn, x), b in itertools.product(datas.items(), bounds_list):
    if x.dtype.kind != "f":
        continue
    cols = x.reshape(x.shape[0], -1)
    lo, hi = map(float, b)
    c, r = 0.5 * (lo + hi), 0.5 * (hi - lo)
    for (cc, cap, B, order) in ((c, r, r, 1), (c, r, r, 2), (0.0, np.inf, max(abs(lo), abs(hi)), 1)):
        for nan in (False, True):
            try:
                res = _stats.moments(np.ascontiguousarray(cols), lo, hi, cc, cap, B, nan, order, 1)
                key = tuple(None if v is None else (tuple(np.asarray(w).tobytes() for w in v) if isinstance(v, tuple) else np.asarray(v).tobytes()) for v in res)
            except Exception as e:
                key = ("ERR", type(e).__name__, str(e))
            out.append(("moments", dn, b, cc, order, nan, key))
print(len(out))
pickle.dump(out, open(sys.argv[1], "wb"))
