"""Scale-out (issue 9): private linear models on Dask, the pass they are built on, out of core.

Side by side in one run, on a 2-worker ``LocalCluster`` (processes, 1 thread each):

1. private ``LogisticRegression`` (AMP, epsilon = 1, delta = 1e-5) on n x d float32 persisted in
   the cluster vs dask-ml's ``LogisticRegression(solver="lbfgs")`` (non-private, defaults), the
   two fits alternating ``--repeat`` times on the same cluster (the ratio of each pair is what a
   loaded machine leaves comparable; ``uptime`` is recorded with each pair);
2. one loss-and-gradient pass on Dask (the fit's oracle: one graph, the native kernel per chunk,
   d + 1 floats back per chunk) vs the same kernel in process over the whole array (2 threads);
3. the in-process pass against the memory-bandwidth yardstick: NumPy's column sum
   ``X.sum(axis=0)`` of the same array (GB/s = X.nbytes / time);
4. out of core: a float32 .npy on disk, memory-mapped, ``da.from_array`` chunks, private fit end
   to end with the threaded scheduler: time, passes, peak anonymous RSS (the process's own
   memory; VmHWM also counts the mapped file's cached pages), disk read rate (/proc/diskstats).

Run from the repo root (needs ``pip install -e ".[dask,bench]"`` and dask-ml):

    python benchmarks/bench_scale.py                       # the issue's sizes: 4e6 x 100, out of core 1.5 x RAM
    python benchmarks/bench_scale.py --n 400000 --ooc-gb 2 # a quick run
    python benchmarks/bench_scale.py --n 1000000 --skip-ooc --compare-old  # issue 23's 10^6 rows, 3 rounds

The figures and the machine's load at the time go to benchmarks/results/scale.md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np


def _kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


class _AnonPeak:
    """Peak of RssAnon (anonymous resident memory) sampled every 0.2 s: the process's own memory,
    without the page cache of the memory-mapped file that VmRSS/VmHWM also count."""

    def __enter__(self):
        import threading

        self.peak = _kib("RssAnon")
        self._stop = threading.Event()

        def run():
            while not self._stop.wait(0.2):
                self.peak = max(self.peak, _kib("RssAnon"))

        self._t = threading.Thread(target=run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _kib("RssAnon"))


def _disk_read_bytes(path: str) -> int:
    """Bytes read so far from the block device holding ``path`` (/proc/diskstats; all readers)."""
    st = os.stat(os.path.dirname(os.path.abspath(path)))
    key = (os.major(st.st_dev), os.minor(st.st_dev))
    with open("/proc/diskstats") as f:
        for line in f:
            v = line.split()
            if (int(v[0]), int(v[1])) == key:
                return int(v[5]) * 512
    return -1


def _chunk(k: int, rows: int, d: int, seed: int):
    """Rows of chunk k: unit-norm float32 rows and labels of a noisy linear rule (deterministic)."""
    rng = np.random.default_rng([seed, k])
    X = rng.standard_normal((rows, d), dtype=np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = np.random.default_rng(seed).normal(size=d).astype(np.float32)
    y = ((X @ w) + 0.1 * rng.standard_normal(rows, dtype=np.float32) > 0).astype(np.int64)
    return X, y


class _counting_passes:
    """Counts the Dask fit's loss-and-gradient evaluations (one pass over X each) in a list."""

    def __enter__(self):
        from dpfast.linear_model import _dask as lm_dask

        self.mod, self.orig, passes = lm_dask, lm_dask.DaskDesign.oracle, []
        orig = self.orig

        def counting(design, *a, **k):
            fg = orig(design, *a, **k)

            def wrapped(th):
                passes.append(1)
                return fg(th)

            return wrapped

        lm_dask.DaskDesign.oracle = counting
        return passes

    def __exit__(self, *exc):
        self.mod.DaskDesign.oracle = self.orig


def make_dask(n: int, d: int, chunk_rows: int, seed: int = 0):
    import dask
    import dask.array as da

    sizes = [min(chunk_rows, n - a) for a in range(0, n, chunk_rows)]
    parts = [dask.delayed(_chunk, nout=2)(k, r, d, seed) for k, r in enumerate(sizes)]
    X = da.concatenate([da.from_delayed(p[0], (r, d), np.float32) for p, r in zip(parts, sizes)])
    y = da.concatenate([da.from_delayed(p[1], (r,), np.int64) for p, r in zip(parts, sizes)])
    return X, y


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def dask_pass(X, y, d: int):
    """(the Dask fit's loss-and-gradient oracle, its labels as +-1, a probe theta): one evaluation
    is one Dask pass over X (row bounds computed once, labels kept on the workers, as in the fit)."""
    from dpfast.linear_model import LogisticRegression
    from dpfast.linear_model._dask import DaskTarget, validated_design

    # row_norm="check": the rows are within norm_bound, so the design keeps them unscaled, as the
    # in-process kernel below does (the default "clip" rescales the rows whose norm exceeds the bound
    # by float32 rounding, which moves the sums in the 8th digit)
    design = validated_design(LogisticRegression(epsilon=1.0, random_state=0, row_norm="check"), X, y)
    y_local = np.where(y.compute() == 1, 1.0, -1.0)
    fg = design.oracle(DaskTarget(1, X.shape[0]), "logistic", alpha=1.0, linear=None, clip=2 ** 0.5,
                       sample_weight=None, huber_delta=1.0)
    return fg, y_local, np.full(d + 1, 0.01)


def in_process_pass(Xl, y_local):
    """The same native kernel over the whole in-memory array: a function of (theta, n_threads)
    returning the data term's (loss, gradient) without the ridge."""
    from dpfast import _glm

    n, d = Xl.shape
    ones = np.ones(n)
    _, sq = _glm.row_bounds(Xl, n, d, ones, 1.0, 0.0, 2)
    return lambda theta, nt: _glm.chunk_loss_grad(Xl, n, d, y_local, None, 0, 1.0, sq, 2 ** 0.5, ones, 1.0,
                                                  theta, nt)


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average: %.2f, %.2f, %.2f" % os.getloadavg()


class _pre_issue23:
    """The Dask fit as it was before issue 23 (same numbers per pass): the warm start from 2^20
    rows and one task per worker and pass through the scheduler (no actors)."""

    def __enter__(self):
        from dpfast.linear_model import _dask as lm_dask, _mechanisms

        self.saved = (_mechanisms.WARM_START_MIN_ROWS, lm_dask._group_actors)
        _mechanisms.WARM_START_MIN_ROWS = 1 << 20
        lm_dask._group_actors = lambda *a: None

    def __exit__(self, *exc):
        from dpfast.linear_model import _dask as lm_dask, _mechanisms

        _mechanisms.WARM_START_MIN_ROWS, lm_dask._group_actors = self.saved


def bench_cluster(n: int, d: int, chunk_rows: int, skip_daskml: bool, repeat: int = 3,
                  compare_old: bool = False) -> dict:
    import distributed

    from dpfast.linear_model import LogisticRegression

    res = {"n": n, "d": d, "chunk_rows": chunk_rows}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40, memory_limit=0) as cl, distributed.Client(cl) as client:
        X, y = make_dask(n, d, chunk_rows)
        X, y = client.persist([X, y])
        distributed.wait([X, y])
        res["nbytes"] = int(X.nbytes)

        # 1. private fit on the persisted data (first a warm-up fit on 1 % for imports / caches),
        # then dask-ml's (1b) on the same data, alternating, `repeat` pairs
        LogisticRegression(epsilon=1.0, random_state=0).fit(X[: max(n // 100, 2 * d)], y[: max(n // 100, 2 * d)])
        if not skip_daskml:
            from dask_ml.linear_model import LogisticRegression as DaskMLLogistic
        runs = []
        for _ in range(max(repeat, 1)):
            run = {"uptime_before": _uptime()}
            with _counting_passes() as passes:
                t_fit, est = timed(lambda: LogisticRegression(epsilon=1.0, delta=1e-5, random_state=0).fit(X, y))
            run["dpfast_fit_s"] = t_fit
            run["dpfast_passes"] = 1 + len(passes)  # the validation pass and one per evaluation
            if compare_old:  # the same fit as before issue 23: warm start from 2^20 rows, a task per pass
                with _pre_issue23():
                    run["dpfast_old_fit_s"] = timed(
                        lambda: LogisticRegression(epsilon=1.0, delta=1e-5, random_state=0).fit(X, y))[0]
            if not skip_daskml:  # 1b. the peer: dask-ml, non-private, its defaults with lbfgs
                run["daskml_fit_s"] = timed(lambda: DaskMLLogistic(solver="lbfgs").fit(X, y))[0]
                run["ratio"] = run["daskml_fit_s"] / t_fit
            run["uptime_after"] = _uptime()
            runs.append(run)
            print(json.dumps(run, default=float), flush=True)
        res["runs"] = runs
        res["dpfast_fit_s"] = float(np.median([r["dpfast_fit_s"] for r in runs]))
        if compare_old:
            res["dpfast_old_fit_s"] = float(np.median([r["dpfast_old_fit_s"] for r in runs]))
        if not skip_daskml:
            res["daskml_fit_s"] = float(np.median([r["daskml_fit_s"] for r in runs]))
            res["ratio_median"] = float(np.median([r["ratio"] for r in runs]))
        res["dpfast_n_iter"] = int(est.n_iter_[0])
        res["dpfast_passes"] = runs[-1]["dpfast_passes"]
        res["dpfast_solver"] = est.solver_[0]
        print(json.dumps(res, default=float), flush=True)

        # 2. one pass on Dask: the oracle of the fit (bounds persisted once, as in the fit)
        fg, y_local, theta = dask_pass(X, y, d)
        fg(theta)
        # a new theta each time: the tasks are pure, so a repeated theta gives repeated task keys,
        # which the cluster may answer from memory without reading X
        res["dask_pass_s"] = min(timed(lambda: fg(theta * (1.0 + 1e-9 * k)))[0] for k in range(1, 6))

        # 3. the same kernel in process over the whole array, and NumPy's column sum
        Xl = X.compute()
        inproc = in_process_pass(Xl, y_local)
        for nt in (1, 2):
            res[f"inproc_pass_s_{nt}t"] = min(timed(lambda: inproc(theta, nt))[0] for _ in range(5))
        res["numpy_colsum_s"] = min(timed(lambda: Xl.sum(axis=0))[0] for _ in range(5))
        Xl = inproc = None  # free the in-process copy (a `del` reads as unbinding the closures above)
    return res


def bench_out_of_core(gb: float, d: int, chunk_rows: int, path: str, mem_limit_gb: float = 0.0) -> dict:
    import dask

    from dpfast.linear_model import LogisticRegression

    n = int(gb * 2**30 / (4 * d))
    res = {"ooc_n": n, "ooc_d": d, "ooc_bytes": n * d * 4}
    t0 = time.perf_counter()
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, d))
    y = np.empty(n, np.int64)
    # 2^20 random rows written over and over (generating 10^10 normals would take longer than
    # the fit; what is measured here is the streaming, not the statistics)
    base, ybase = _chunk(0, min(n, 2**20), d, seed=1)
    for a in range(0, n, len(base)):
        m = min(len(base), n - a)
        mm[a:a + m] = base[:m]
        y[a:a + m] = ybase[:m]
    mm.flush()
    del mm
    res["ooc_write_s"] = time.perf_counter() - t0
    os.system("sync")
    try:  # drop the file from the page cache where allowed, so that the fit reads the disk
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1")
        res["ooc_cache_dropped"] = True
    except OSError:
        res["ooc_cache_dropped"] = False
    from dpfast.io import read_npy_rows

    if mem_limit_gb:  # page cache + process memory capped below the file size (cgroup v1)
        cg = "/sys/fs/cgroup/memory/dpfast_bench_scale"
        os.makedirs(cg, exist_ok=True)
        with open(os.path.join(cg, "memory.limit_in_bytes"), "w") as f:
            f.write(str(int(mem_limit_gb * 2**30)))
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        res["ooc_memory_limit_gib"] = mem_limit_gb
    # (dask.array.from_array(np.load(path, mmap_mode="r")) would copy the whole file into memory)
    Xd = read_npy_rows(path, chunk_rows)
    rb0 = _disk_read_bytes(path)
    anon0 = _kib("RssAnon")
    with dask.config.set(scheduler="threads"), _AnonPeak() as peak, _counting_passes() as passes:
        t_fit, est = timed(lambda: LogisticRegression(epsilon=1.0, delta=1e-5, random_state=0).fit(Xd, y))
    rb1 = _disk_read_bytes(path)
    res.update(ooc_fit_s=t_fit, ooc_passes=1 + len(passes), ooc_peak_anon_gib=peak.peak / 2**20,
               ooc_anon_before_gib=anon0 / 2**20, ooc_peak_rss_incl_file_pages_gib=_kib("VmHWM") / 2**20, ooc_disk_read_gib=(rb1 - rb0) / 2**30,
               ooc_read_rate_gbs=(rb1 - rb0) / 1e9 / t_fit, ooc_n_iter=int(est.n_iter_[0]))
    os.remove(path)
    return res


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4_000_000)
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--chunk-rows", type=int, default=250_000)
    p.add_argument("--ooc-gb", type=float, default=None, help="on-disk size (default 1.5 x RAM)")
    p.add_argument("--ooc-dir", default=tempfile.gettempdir())
    p.add_argument("--skip-daskml", action="store_true")
    p.add_argument("--repeat", type=int, default=3, help="pairs of fits (dpfast, then dask-ml) on the cluster")
    p.add_argument("--compare-old", action="store_true",
                   help="also time the pre-issue-23 Dask fit (warm start from 2^20 rows, a task per pass) in each pair")
    p.add_argument("--skip-ooc", action="store_true")
    p.add_argument("--skip-cluster", action="store_true")
    p.add_argument("--ooc-mem-limit-gb", type=float, default=0.0,
                   help="run the out-of-core fit in a cgroup with this memory limit (page cache included)")
    a = p.parse_args(argv)
    res = {"load_before": os.getloadavg()}
    if not a.skip_cluster:
        res.update(bench_cluster(a.n, a.d, a.chunk_rows, a.skip_daskml, a.repeat, a.compare_old))
        nb = res["nbytes"]
        res["gbs_dask_pass"] = nb / 1e9 / res["dask_pass_s"]
        for nt in (1, 2):
            res[f"gbs_inproc_{nt}t"] = nb / 1e9 / res[f"inproc_pass_s_{nt}t"]
        res["gbs_numpy_colsum"] = nb / 1e9 / res["numpy_colsum_s"]
        print(json.dumps(res, default=float), flush=True)
    if not a.skip_ooc:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        limit = a.ooc_mem_limit_gb or ram / 2**30
        gb = a.ooc_gb if a.ooc_gb is not None else 1.5 * limit
        res.update(bench_out_of_core(gb, a.d, a.chunk_rows, os.path.join(a.ooc_dir, "dpfast_ooc.npy"),
                                     a.ooc_mem_limit_gb))
    res["load_after"] = os.getloadavg()
    print(json.dumps(res, default=float), flush=True)


# ---- pytest-benchmark (smoke size in CI; the figures come from the script above) ----------------

def test_bench_dask_pass_vs_in_process(benchmark):
    # One loss-and-gradient pass on Dask (threaded scheduler, no cluster in the smoke) next to
    # the same kernel in process; the smoke checks the two sums agree.
    import pytest
    pytest.importorskip("dask")
    import dask

    from _bench import size

    n, d = size(20_000, 4_000_000), 20
    X, y = make_dask(n, d, max(n // 4, 1))
    with dask.config.set(scheduler="threads"):
        fg, y_local, theta = dask_pass(X, y, d)
        f_dask, g_dask = benchmark(fg, theta)[:2]
    ref = in_process_pass(X.compute(), y_local)(theta, 1)
    # the Dask objective is the in-process data term plus the ridge alpha/2 ||theta||^2 (alpha = 1),
    # its sums grouped by chunk: equal to rounding
    np.testing.assert_allclose(f_dask, ref[0] + 0.5 * theta @ theta, rtol=1e-10)
    np.testing.assert_allclose(g_dask, np.asarray(ref[1]) + theta, rtol=1e-9, atol=1e-9)


if __name__ == "__main__":
    main()
