"""dpfast.tools vs NumPy and diffprivlib.tools at 10^6 rows (issue 24).

Run: PYTHONPATH=. DPFAST_NUM_THREADS=1 python benchmarks/bench_tools.py [--speed-only] [--rounds R]
(diffprivlib from /tmp/dpl_site, appended to sys.path so that the venv's NumPy wins).

Speed: the median of R rounds (default 31) of each call at epsilon 1 with a seed (``rng=1``: the
seeding is part of a release's cost), NumPy and dpfast rounds interleaved so that both see the
same load; diffprivlib the median of 5.  Goals (issue 24): dpfast / NumPy <= 1.5 for the
one-pass statistics, diffprivlib / dpfast >= 1.  Cases: 10^6 uniform(0, 1) float64 values
(1-D), and 10^6 x 10 (per column, ``axis=0``, and over all elements, ``axis=None``); the nan
forms on the same data with 1% NaN against NumPy's nan functions.
Accuracy (1-D): mean absolute error vs NumPy over 10 seeds, at eps 0.1, 1, 10.
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import dpfast.tools as T

from _peers import import_diffprivlib

_dpl = import_diffprivlib(required=False)  # diffprivlib 0.6.6 from /tmp/dpl_site (see _peers.py)
D = _dpl.tools if _dpl else None

warnings.simplefilter("ignore")
N = 10**6
_rng = np.random.default_rng(0)
x = _rng.uniform(0.0, 1.0, N)
xn = x.copy()
xn[_rng.random(N) < 0.01] = np.nan
X = _rng.uniform(0.0, 1.0, (N, 10))
XN = X.copy()
XN[_rng.random(X.shape) < 0.01] = np.nan
B = (0.0, 1.0)
E3 = [np.linspace(0.0, 1.0, 11)] * 3


def _dpl(name, a, **kw):
    if D is None:
        return None
    f = getattr(D, name)
    return lambda e, s: f(a, epsilon=e, bounds=B, random_state=s, **kw)


# name: (NumPy, dpfast(eps, seed), diffprivlib(eps, seed) or None)
SPEED = {
    "mean": (lambda: np.mean(x), lambda e, s: T.mean(x, e, B, rng=s), _dpl("mean", x)),
    "var": (lambda: np.var(x), lambda e, s: T.var(x, e, B, rng=s), _dpl("var", x)),
    "std": (lambda: np.std(x), lambda e, s: T.std(x, e, B, rng=s), _dpl("std", x)),
    "sum": (lambda: np.sum(x), lambda e, s: T.sum(x, e, B, rng=s), _dpl("sum", x)),
    "nanmean (1% NaN)": (lambda: np.nanmean(xn), lambda e, s: T.nanmean(xn, e, B, rng=s), _dpl("nanmean", xn)),
    "nanvar (1% NaN)": (lambda: np.nanvar(xn), lambda e, s: T.nanvar(xn, e, B, rng=s), _dpl("nanvar", xn)),
    "nanstd (1% NaN)": (lambda: np.nanstd(xn), lambda e, s: T.nanstd(xn, e, B, rng=s), _dpl("nanstd", xn)),
    "nansum (1% NaN)": (lambda: np.nansum(xn), lambda e, s: T.nansum(xn, e, B, rng=s), _dpl("nansum", xn)),
    "count_nonzero": (lambda: np.count_nonzero(x > 0.5), lambda e, s: T.count_nonzero(x > 0.5, e, rng=s),
                      (lambda e, s: D.count_nonzero(x > 0.5, epsilon=e, random_state=s)) if D else None),
    "histogram (10 bins)": (lambda: np.histogram(x, 10, B), lambda e, s: T.histogram(x, e, bins=10, range=B, rng=s),
                            (lambda e, s: D.histogram(x, epsilon=e, bins=10, range=B, random_state=s)) if D else None),
    "mean 10^6x10 axis=0": (lambda: np.mean(X, axis=0), lambda e, s: T.mean(X, e, B, axis=0, rng=s),
                            _dpl("mean", X, axis=0)),
    "var 10^6x10 axis=0": (lambda: np.var(X, axis=0), lambda e, s: T.var(X, e, B, axis=0, rng=s),
                           _dpl("var", X, axis=0)),
    "std 10^6x10 axis=0": (lambda: np.std(X, axis=0), lambda e, s: T.std(X, e, B, axis=0, rng=s),
                           _dpl("std", X, axis=0)),
    "sum 10^6x10 axis=0": (lambda: np.sum(X, axis=0), lambda e, s: T.sum(X, e, B, axis=0, rng=s),
                           _dpl("sum", X, axis=0)),
    "nanmean 10^6x10 axis=0": (lambda: np.nanmean(XN, axis=0), lambda e, s: T.nanmean(XN, e, B, axis=0, rng=s),
                               _dpl("nanmean", XN, axis=0)),
    "mean 10^6x10 axis=None": (lambda: np.mean(X), lambda e, s: T.mean(X, e, B, rng=s), _dpl("mean", X)),
    "var 10^6x10 axis=None": (lambda: np.var(X), lambda e, s: T.var(X, e, B, rng=s), _dpl("var", X)),
    "sum 10^6x10 axis=None": (lambda: np.sum(X), lambda e, s: T.sum(X, e, B, rng=s), _dpl("sum", X)),
    "histogramdd 10^6x3 (10^3 bins)": (lambda: np.histogramdd(X[:, :3], E3),
                                       lambda e, s: T.histogramdd(X[:, :3], e, bins=E3, rng=s),
                                       (lambda e, s: D.histogramdd(X[:, :3], epsilon=e, bins=E3,
                                                                   random_state=s)) if D else None),
    "median (not one-pass)": (lambda: np.median(x), lambda e, s: T.median(x, e, B, rng=s), _dpl("median", x)),
}

ACCURACY = ["mean", "var", "std", "sum", "median (not one-pass)", "histogram (10 bins)"]


def median_time(f, rounds):
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def interleaved(f, g, rounds):
    """Median times of f and g over rounds taken alternately (f, g, f, g, ...)."""
    tf, tg = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        tf.append(time.perf_counter() - t)
        t = time.perf_counter()
        g()
        tg.append(time.perf_counter() - t)
    return float(np.median(tf)), float(np.median(tg))


def _value(r):
    return np.asarray(r[0] if isinstance(r, tuple) else r, dtype=float)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--speed-only", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated substrings of the case names")
    args = ap.parse_args(argv)
    only = [s for s in args.only.split(",") if s]
    print(f"n = {N}, uniform(0, 1), bounds (0, 1); median of {args.rounds} rounds (diffprivlib: of 5); "
          f"diffprivlib {'loaded' if D else 'missing'}")
    print("| statistic | NumPy ms | dpfast ms | diffprivlib ms | dpfast / NumPy | diffprivlib / dpfast |")
    print("|---|---|---|---|---|---|")
    for name, (ref, ours, theirs) in SPEED.items():
        if only and not any(s in name for s in only):
            continue
        rounds = args.rounds if "median" not in name and "dd" not in name else max(3, args.rounds // 6)
        for _ in range(2):  # warm-up (first touch, imports)
            ref(), ours(1.0, 1)
        t_np, t_us = interleaved(ref, lambda: ours(1.0, 1), rounds)
        t_dl = median_time(lambda: theirs(1.0, 1), 5) if theirs else float("nan")
        print(f"| {name} | {t_np * 1e3:.3f} | {t_us * 1e3:.3f} | {t_dl * 1e3:.3f} | {t_us / t_np:.2f}x | "
              f"{t_dl / t_us:.2f}x |", flush=True)
    if args.speed_only:
        return
    print()
    print("| statistic | MAE eps=0.1 dpfast / dpl | eps=1 | eps=10 |")
    print("|---|---|---|---|")
    for name in ACCURACY:
        ref, ours, theirs = SPEED[name]
        truth = _value(ref())
        acc = []
        for eps in (0.1, 1.0, 10.0):
            a = np.mean([np.mean(np.abs(_value(ours(eps, s)) - truth)) for s in range(10)])
            b = np.mean([np.mean(np.abs(_value(theirs(eps, s)) - truth)) for s in range(10)]) if theirs else np.nan
            acc.append(f"{a:.2e} / {b:.2e}")
        print(f"| {name} | " + " | ".join(acc) + " |", flush=True)


if __name__ == "__main__":
    main()
