"""dpfast.tables.aggregate vs PipelineDP's LocalBackend; 10^7 rows; Dask 2-worker throughput.

Workload (issue 10): one row per event, ``u`` a privacy unit, ``g`` a group, ``x`` a value in
[0, 200]; five metrics (count, sum, mean, variance, median), L0 = 2 groups per unit, Linf = 3
rows per (unit, group), epsilon = 1, delta = 1e-6, private partition selection, Laplace noise.

* ``python benchmarks/bench_tables.py`` -- the table of ``benchmarks/results/tables.md``
  (200k rows side by side with PipelineDP, 10^7 rows in process, Dask 2-worker LocalCluster vs
  in-process on the same 10^7 rows, laid out at random -- shuffled by unit -- and indexed by the
  unit -- no shuffle).  ``--quick`` for small sizes; ``--dask`` for the 10^7-row rows only.
* ``pytest benchmarks/bench_tables.py`` -- pytest-benchmark at smoke size
  (``DPFAST_BENCH_FULL=1`` for 200k rows).
"""
from __future__ import annotations

import argparse
import os

import numpy as np
import pandas as pd
import pytest

from dpfast.tables import aggregate

from _bench import best_time  # noqa: E402  (benchmarks/ is on sys.path under pytest and as a script)

METRICS = {"n": "count", "total": ("sum", "x"), "avg": ("mean", "x"), "var": ("variance", "x"),
           "p50": ("quantile", "x", 0.5)}
KW = dict(bounds={"x": (0.0, 200.0)}, max_groups_per_unit=2, max_rows_per_group=3, epsilon=1.0, delta=1e-6)


def table(n_rows: int, n_units: int, n_groups: int, seed: int = 0) -> pd.DataFrame:
    r = np.random.default_rng(seed)
    return pd.DataFrame({"u": r.integers(0, n_units, n_rows), "g": r.integers(0, n_groups, n_rows),
                         "x": r.uniform(0.0, 200.0, n_rows)})


def run_dpfast(df, rng=0):
    return aggregate(df, "u", "g", METRICS, rng=rng, **KW)


def run_pipelinedp(df):
    """The same release with PipelineDP (LocalBackend, Laplace, the same budget and bounds)."""
    import pipeline_dp
    rows = list(zip(df["u"].to_numpy().tolist(), df["g"].to_numpy().tolist(), df["x"].to_numpy().tolist()))
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=KW["epsilon"], total_delta=KW["delta"])
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    M = pipeline_dp.Metrics
    params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        metrics=[M.COUNT, M.SUM, M.MEAN, M.VARIANCE, M.PERCENTILE(50)],
        max_partitions_contributed=KW["max_groups_per_unit"],
        max_contributions_per_partition=KW["max_rows_per_group"],
        min_value=0.0, max_value=200.0)
    ex = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                    value_extractor=lambda r: r[2])
    res = engine.aggregate(rows, params, ex)
    accountant.compute_budgets()
    return list(res)


def dask_side_by_side(big: pd.DataFrame, out: pd.DataFrame, t_big: float) -> list:
    """The same 10^7 rows on a 2-worker LocalCluster, persisted in 8 partitions, laid out two ways:
    randomly (units span partitions: the shuffle by unit runs) and indexed by the unit
    (``set_index("u")``: disjoint unit ranges, proved in the first pass, no shuffle)."""
    import dask.dataframe as dd
    import distributed

    from dpfast.tables._dask import units_confined
    lines = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster):
        for label, frame in (("random partitions (shuffle by unit)", big),
                             ("indexed by unit, set_index (no shuffle)", big.set_index("u").sort_index())):
            ddf = dd.from_pandas(frame, npartitions=8).persist()  # data on the workers, as when read there
            distributed.wait(ddf)
            confined = units_confined(ddf.reset_index() if ddf.index.name == "u" else ddf, "u")
            t_dask, dout = best_time(lambda: run_dpfast(ddf), 3)  # best of 3, as the in-process side
            ddf = None  # released on the workers before the next layout
            lines.append(f"| Dask 2-worker LocalCluster, {label}; units confined: {confined} | {len(big):,} | "
                         f"{t_dask:.2f} s | in process {t_big:.2f} s | {t_big / t_dask:.0%} of in-process "
                         f"throughput; same frame as pandas: {dout.equals(out)} |")
    return lines


def main(quick: bool = False, dask_only: bool = False) -> None:
    n_small = 20_000 if quick else 200_000
    n_big, u_big, g_big = (200_000, 20_000, 100) if quick else (10_000_000, 1_000_000, 1_000)
    print(f"load average before: {os.getloadavg()}")
    lines = ["| what | rows | dpfast | peer | ratio |", "|---|---|---|---|---|"]

    if not dask_only:
        df = table(n_small, n_small // 10, 100)
        t_ours, out = best_time(lambda: run_dpfast(df), 5)
        try:
            t_peer, peer = best_time(lambda: run_pipelinedp(df), 1)
            lines.append(f"| five metrics vs PipelineDP LocalBackend | {n_small:,} | {t_ours * 1e3:.0f} ms "
                         f"({len(out)} groups) | {t_peer * 1e3:.0f} ms ({len(peer)} groups) | "
                         f"{t_peer / t_ours:.0f}x |")
        except ImportError:
            lines.append(f"| five metrics (PipelineDP not installed) | {n_small:,} | {t_ours * 1e3:.0f} ms | - | - |")

    big = table(n_big, u_big, g_big, seed=1)
    t_big, out = best_time(lambda: run_dpfast(big), 3)
    lines.append(f"| five metrics in process, {u_big:,} units, {g_big:,} groups | {n_big:,} | {t_big:.2f} s "
                 f"({n_big / t_big / 1e6:.1f} M rows/s) | goal <= 2 s | |")
    lines += dask_side_by_side(big, out, t_big)
    print(f"load average after: {os.getloadavg()}")
    print("\n".join(lines))


# ---- pytest-benchmark (smoke size in CI) -----------------------------------------------------

def test_bench_aggregate_dpfast(benchmark):
    from _bench import size
    df = table(size(20_000, 200_000), size(2_000, 20_000), 100)
    benchmark(run_dpfast, df)


def test_bench_aggregate_pipelinedp(benchmark):
    pytest.importorskip("pipeline_dp")
    from _bench import size
    df = table(size(20_000, 200_000), size(2_000, 20_000), 100)
    benchmark.pedantic(run_pipelinedp, args=(df,), rounds=1, iterations=1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dask", action="store_true", help="only the 10^7-row in-process and Dask rows")
    args = ap.parse_args()
    main(args.quick, args.dask)
