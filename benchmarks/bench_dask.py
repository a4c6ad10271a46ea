"""The Dask engine against one machine's `Grid`: all pairs within r of points in Parquet,
written to Parquet, same data, answers checked equal.

Run from the repository root (needs the dask extra)::

    python benchmarks/bench_dask.py                         # 10,000,000 points
    python benchmarks/bench_dask.py --n 1000000 --repeat 3
    python benchmarks/bench_dask.py --n 100000000 --no-grid --keep-output
    python benchmarks/bench_dask.py --cold-start           # workers' compile, empty cache

Points are uniform in the unit cube, 3-D, with ``r`` giving 30 expected neighbours; they
are written once to ``--data`` as Parquet files of 1,000,000 rows (row groups of
250,000) and reused. Each path runs in a process of its own and writes the pairs
``i, j`` to a Parquet dataset:

- ``grid``: read the coordinates with pyarrow, build a `Grid` (every core), stream
  `Grid.iter_pairs` into a Parquet writer (what ``spatialhash pairs`` does);
- ``dask``: `spatialhash.dask.query_pairs` on a `LocalCluster` of ``--workers`` worker
  processes of one thread each, tiles planned for ``--memory-per-worker``.

The table gives each path's median wall time over ``--repeat`` runs (kernels warm), the
ratio, where the Dask engine's time goes (its stages, and the tiles' search and write
seconds summed over the tiles), the tiles and the ghosts' share of the rows shuffled, and
the peak resident memory of the client and of every worker (Linux ``VmHWM``). The pairs
of the two datasets are then compared exactly, as sorted keys ``i * n + j``.

``--cold-start`` measures instead what a new cluster pays for the kernels: a first query
(pairs of 100,000 points) on a fresh `LocalCluster`, with an empty numba cache, then again
on another fresh cluster with the cache that run filled, and the CPU seconds each worker
process spent (the worker plugin lets one worker of a machine compile while the others
wait, then load).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import _common as common

ROWS_PER_FILE = 1_000_000
ROW_GROUP = 250_000


def write_points(directory: Path, n: int, seed: int) -> None:
    """``n`` uniform 3-D points as Parquet files of `ROWS_PER_FILE` rows, once."""
    common.write_uniform_parquet(directory, n, 3, seed, ROWS_PER_FILE, row_group=ROW_GROUP)


def grid_child(data: Path, r: float, output: Path) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from spatialhash import Grid

    started = time.perf_counter()
    table = pq.read_table(data, columns=["x", "y", "z"])
    points = np.column_stack([table.column(c).to_numpy() for c in ("x", "y", "z")])
    del table
    read = time.perf_counter()
    grid = Grid(points, cell_size=r)
    built = time.perf_counter()
    output.mkdir()
    schema = pa.schema([("i", pa.int64()), ("j", pa.int64())])
    rows = 0
    with pq.ParquetWriter(output / "pairs.parquet", schema) as writer:
        for chunk in grid.iter_pairs(r, chunk_size=1 << 20):
            writer.write_table(pa.table({"i": chunk.indices[:, 0].astype(np.int64),
                                         "j": chunk.indices[:, 1].astype(np.int64)}))
            rows += len(chunk)
    done = time.perf_counter()
    return {"seconds": done - started, "read": read - started, "build": built - read,
            "pairs+write": done - built, "rows": rows,
            "peak_bytes": common.peak_resident_bytes()}


def dask_child(data: Path, r: float, output: Path, workers: int, memory: int) -> dict:
    import logging

    import distributed

    import spatialhash.dask as sd

    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                       processes=True, dashboard_address=":0",
                                       silence_logs=logging.ERROR, memory_limit=0)
    client = distributed.Client(cluster)
    # The worker plugin's warm-up runs when the first query registers it: pay it here,
    # on a small query, so the timed run is warm (the cold start is measured apart).
    warm = time.perf_counter()
    sd.query_pairs(common.uniform_points(20_000, 3, 1), r)
    warm = time.perf_counter() - warm
    started = time.perf_counter()
    written = sd.query_pairs(data, r, output=output, plan=sd.Plan(memory_per_worker=memory))
    seconds = time.perf_counter() - started

    def peak():
        return common.peak_resident_bytes()

    worker_peaks = sorted(client.run(peak).values())
    client.close()
    cluster.close()
    return {"seconds": seconds, "stages": written.seconds, "rows": written.rows,
            "tiles": written.n_tiles, "tile_rows": written.tile_rows, "warm_up": warm,
            "client_peak_bytes": common.peak_resident_bytes(), "worker_peak_bytes": worker_peaks}


def cold_start_child(workers: int) -> dict:
    import logging

    import dask.array as da
    import distributed

    import spatialhash.dask as sd

    def first_query() -> tuple[float, list[float]]:
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                           processes=True, dashboard_address=":0",
                                           silence_logs=logging.ERROR)
        client = distributed.Client(cluster)
        points = da.from_array(common.uniform_points(100_000, 3, 0), chunks=(25_000, 3))
        started = time.perf_counter()
        sd.query_pairs(points, common.radius_for_neighbors_3d(100_000))
        seconds = time.perf_counter() - started

        def cpu_seconds() -> float:
            return time.process_time()

        cpu = sorted(client.run(cpu_seconds).values())
        client.close()
        cluster.close()
        return seconds, cpu

    empty, warm = first_query(), first_query()
    return {"empty_cache": empty, "warm_cache": warm}


def cold_start(args: argparse.Namespace) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        command = [sys.executable, __file__, "--child", "cold", "--workers",
                   str(args.workers)]
        finished = subprocess.run(command, capture_output=True, text=True, check=False,
                                  env={**os.environ, "NUMBA_CACHE_DIR": cache,
                                       "SPATIALHASH_COMPILE_NOTICE": "0"})
    if finished.returncode:
        sys.exit(f"the cold-start run failed:\n{finished.stderr[-3000:]}")
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    print(f"# first query on a fresh LocalCluster of {args.workers} workers; "
          f"{common.cpu_model()}, load {os.getloadavg()[0]:.2f}")
    rows = [[label, f"{seconds:.1f}", ", ".join(f"{c:.1f}" for c in cpu)]
            for label, (seconds, cpu) in (("empty numba cache", result["empty_cache"]),
                                          ("cache filled by that run", result["warm_cache"]))]
    print(common.markdown_table(["cache", "first query (s)", "CPU s per worker"], rows))


def run_child(args: argparse.Namespace, path: str, output: Path) -> dict:
    command = [sys.executable, __file__, "--child", path, "--n", str(args.n),
               "--data", str(args.data), "--child-output", str(output),
               "--workers", str(args.workers), "--memory-per-worker",
               str(args.memory_per_worker)]
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    if finished.returncode:
        sys.exit(f"the {path} run failed:\n{finished.stderr[-3000:]}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def sorted_keys(output: Path, n: int) -> np.ndarray:
    import pyarrow.parquet as pq

    table = pq.read_table(output, columns=["i", "j"])
    keys = (table.column("i").to_numpy().astype(np.uint64) * np.uint64(n)
            + table.column("j").to_numpy().astype(np.uint64))
    keys.sort()
    return keys


def gib(value: float) -> str:
    return f"{value / 2**30:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-per-worker", type=int, default=2 << 30)
    parser.add_argument("--data", type=Path, default=None,
                        help="directory of the Parquet points (default: /tmp/spatialhash-"
                             "bench-dask/points-N)")
    parser.add_argument("--no-grid", action="store_true",
                        help="the Dask engine only (no one-machine run, no comparison)")
    parser.add_argument("--keep-output", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-json", type=Path, default=None)
    parser.add_argument("--cold-start", action="store_true",
                        help="measure the workers' kernel compile on a fresh cluster instead")
    parser.add_argument("--child", choices=["grid", "dask", "cold"], help=argparse.SUPPRESS)
    parser.add_argument("--child-output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    root = Path("/tmp/spatialhash-bench-dask")
    args.data = args.data or root / f"points-{args.n}"
    r = common.radius_for_neighbors_3d(args.n)
    if args.child == "grid":
        print(json.dumps(grid_child(args.data, r, args.child_output)))
        return
    if args.child == "cold":
        print(json.dumps(cold_start_child(args.workers)))
        return
    if args.cold_start:
        cold_start(args)
        return
    if args.child == "dask":
        print(json.dumps(dask_child(args.data, r, args.child_output, args.workers,
                                    args.memory_per_worker)))
        return

    write_points(args.data, args.n, args.seed)
    print(f"# {args.n:,} uniform 3-D points in Parquet ({args.data}), r = {r:.6g} "
          f"(30 expected neighbours); {common.cpu_model()}, {common.usable_cores()} cores, "
          f"load {os.getloadavg()[0]:.2f}; {args.workers} workers, memory per worker "
          f"{gib(args.memory_per_worker)} GiB")
    paths = ["dask"] if args.no_grid else ["grid", "dask"]
    results: dict[str, list[dict]] = {path: [] for path in paths}
    outputs = {path: root / f"out-{path}-{args.n}" for path in paths}
    for round_number in range(args.repeat):
        for path in paths:
            shutil.rmtree(outputs[path], ignore_errors=True)
            results[path].append(run_child(args, path, outputs[path]))
            print(f"  {path} run {round_number + 1}: {results[path][-1]['seconds']:.1f} s",
                  flush=True)

    dask_runs = results["dask"]
    last = dask_runs[-1]
    rows = []
    if "grid" in results:
        grid_seconds = common.median([run["seconds"] for run in results["grid"]])
        grid_peak = max(run["peak_bytes"] for run in results["grid"])
        rows.append(["grid (one process)", f"{grid_seconds:.1f}", "1.00", gib(grid_peak), "-"])
    dask_seconds = common.median([run["seconds"] for run in dask_runs])
    ratio = f"{dask_seconds / grid_seconds:.2f}" if "grid" in results else "-"
    rows.append([f"dask ({args.workers} workers)", f"{dask_seconds:.1f}", ratio,
                 gib(last["client_peak_bytes"]),
                 ", ".join(gib(p) for p in last["worker_peak_bytes"])])
    print()
    print(common.markdown_table(["path", "median s", "ratio to grid", "client peak GiB",
                                 "worker peaks GiB"], rows))
    shuffled = sum(last["tile_rows"])
    print("\nDask stages (last run, s): " + ", ".join(
        f"{stage} {seconds:.1f}" for stage, seconds in last["stages"].items()))
    print(f"tiles: {last['tiles']}; rows shuffled {shuffled:,} "
          f"(ghosts {shuffled / args.n - 1:.1%} of the points); largest tile "
          f"{max(last['tile_rows']):,} rows; pairs {last['rows']:,}; "
          f"workers' warm-up {last['warm_up']:.1f} s")
    if "grid" in results:
        g = results["grid"][-1]
        print(f"grid stages (last run, s): read {g['read']:.1f}, build {g['build']:.1f}, "
              f"pairs+write {g['pairs+write']:.1f}")
        started = time.perf_counter()
        same = np.array_equal(sorted_keys(outputs["grid"], args.n),
                              sorted_keys(outputs["dask"], args.n))
        print(f"answers equal: {same} (compared in {time.perf_counter() - started:.0f} s)")
        if not same:
            sys.exit("the Dask engine's pairs differ from the grid's")
    if args.output_json:
        args.output_json.write_text(json.dumps({"n": args.n, "r": r, "results": results},
                                               indent=1))
    if not args.keep_output:
        for output in outputs.values():
            shutil.rmtree(output, ignore_errors=True)


if __name__ == "__main__":
    main()
