"""The Dask engine against dask-geopandas: all pairs within r of 2-D points in Parquet, on
one Dask cluster, same data, answers checked equal.

Run from the repository root (needs the dask extra and ``pip install dask-geopandas``)::

    python benchmarks/bench_dask_geopandas.py                    # 1,000,000 points
    python benchmarks/bench_dask_geopandas.py --n 200000 --repeat 5 --sindex

Points are uniform in the unit square, with ``r`` giving 20 expected neighbours; they are
written once to ``--data`` as Parquet files of `ROWS_PER_FILE` rows with columns ``x, y``
and ``row`` (the global row number, for dask-geopandas, which has no other way to name a
row across partitions; the Dask engine reads ``x, y`` only and numbers the rows itself).
Every path runs on the same `LocalCluster` of ``--workers`` worker processes of one thread
each, in turn, and writes the pairs ``i < j`` (global row numbers, each pair once) to a
Parquet dataset:

- ``spatialhash``: `spatialhash.dask.query_pairs` with ``output=``;
- ``dask-geopandas``: read the Parquet files with ``dask.dataframe``, make point geometries
  (``dask_geopandas.points_from_xy``), ``spatial_shuffle(by="hilbert")`` into
  ``--peer-partitions`` partitions, persist, compute the partitions' convex hulls
  (``calculate_spatial_partitions``), then join every pair of partitions whose hulls lie
  within ``r`` of each other with ``geopandas.sjoin(predicate="dwithin", distance=r)``,
  keep the rows with ``row_left < row_right`` (which drops each point's pair with itself
  and the mirror image of every pair) and write them with ``to_parquet``;
- ``dask-geopandas sindex`` (with ``--sindex``): the same, each pair of partitions joined
  by the spatial index's query (``right.sindex.query(left.geometry, predicate="dwithin",
  distance=r)``, which ``sjoin`` calls) without the frames ``sjoin`` builds around it.

The ``dask-geopandas`` path is the graph that
``dask_geopandas.sjoin(points, points, predicate="dwithin")`` would build if it could: it
accepts that predicate but does not pass a distance on to ``geopandas.sjoin`` (the join
fails with "'distance' parameter is required for 'dwithin' predicate"), and it pairs
partitions whose hulls *intersect*, which misses pairs that cross the gap between two
hulls. The lines here pass the distance, and pair the hulls with the same ``dwithin`` test.

Every path runs once on the first file before the timing (numba's kernels and the
workers' imports of geopandas and shapely), and the answers there are compared; then
``--repeat`` times on all the files, the paths in turn. The table gives the median wall
time of each (every stage inside: reading, shuffling, searching, writing) and its ratio to
spatialhash's. The datasets are then compared exactly as sorted keys ``i * n + j``. A pair
at distance ``r`` to rounding is the only place a peer may differ, since GEOS decides
``dwithin`` in its own arithmetic: differing pairs are counted and listed with their
distances, and accepted only within `TIE_TOLERANCE` of ``r``.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import _common as common

ROWS_PER_FILE = 250_000
#: A pair decided differently by the two paths must lie this close to ``r`` (float64
#: distance, unit-square coordinates) to count as a tie at the boundary.
TIE_TOLERANCE = 1e-12
#: Differing pairs listed one per line, at most.
LISTED_PAIRS = 20


def write_points(directory: Path, n: int, seed: int) -> None:
    """``n`` uniform 2-D points, numbered in a ``row`` column, as Parquet files of
    `ROWS_PER_FILE` rows, once."""
    common.write_uniform_parquet(directory, n, 2, seed, ROWS_PER_FILE, row_column=True)


def read_points(source: Path, n: int | None) -> np.ndarray:
    """The points of a Parquet file or directory as an (n, 2) array, row ``k`` the point
    whose ``row`` is ``k`` (``n`` None: as many as the rows read)."""
    import pyarrow.parquet as pq

    table = pq.read_table(source, columns=["x", "y", "row"])
    rows = table.column("row").to_numpy()
    points = np.empty((table.num_rows if n is None else n, 2))
    points[rows, 0] = table.column("x").to_numpy()
    points[rows, 1] = table.column("y").to_numpy()
    return points


# ---------------------------------------------------------------------- the paths
def ours(data, r: float, output: Path, memory: int) -> dict:
    import spatialhash.dask as sd

    started = time.perf_counter()
    written = sd.query_pairs(data, r, columns=["x", "y"], output=output,
                             plan=sd.Plan(memory_per_worker=memory))
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "stages": written.seconds,
            "detail": f"{written.n_tiles} tiles"}


def join_partitions(left: pd.DataFrame, right: pd.DataFrame, r: float,
                    method: str) -> pd.DataFrame:
    """The pairs ``i < j`` of ``row`` numbers within ``r`` between two partitions, by
    ``geopandas.sjoin`` or by the spatial index's query alone (``"sindex"``)."""
    import geopandas

    if method == "sjoin":
        joined = geopandas.sjoin(left, right, predicate="dwithin", distance=r)
        first = joined["row_left"].to_numpy()
        second = joined["row_right"].to_numpy()
    else:
        found, tree = right.sindex.query(left.geometry.array, predicate="dwithin",
                                         distance=r)
        first = left["row"].to_numpy()[found]
        second = right["row"].to_numpy()[tree]
    keep = first < second
    return pd.DataFrame({"i": first[keep], "j": second[keep]})


def peer(data, r: float, output: Path, n_partitions: int, method: str) -> dict:
    import dask
    import dask.dataframe as dd
    import dask_geopandas
    import geopandas
    from distributed import default_client, futures_of, wait

    started = time.perf_counter()
    frame = dd.read_parquet(data, columns=["x", "y", "row"])
    points = dask_geopandas.from_dask_dataframe(
        frame, geometry=dask_geopandas.points_from_xy(frame, "x", "y"))[["row", "geometry"]]
    # calculate_partitions=False, then persist: spatial_shuffle's own hull pass would run
    # the read and the shuffle once more.
    shuffled = points.spatial_shuffle(by="hilbert", npartitions=n_partitions,
                                      calculate_partitions=False).persist()
    wait(shuffled)
    shuffle = time.perf_counter()
    shuffled.calculate_spatial_partitions()
    hulls = shuffled.spatial_partitions.to_frame("geometry")
    near = geopandas.sjoin(hulls, hulls, predicate="dwithin", distance=r)
    lefts = np.asarray(near.index)
    rights = near["index_right"].to_numpy()
    partitioned = time.perf_counter()
    parts = shuffled.to_delayed()
    join = dask.delayed(join_partitions, pure=True)
    meta = pd.DataFrame({"i": np.zeros(0, np.int64), "j": np.zeros(0, np.int64)})
    pairs = dd.from_delayed([join(parts[a], parts[b], r, method)
                             for a, b in zip(lefts, rights, strict=True)],
                            meta=meta, verify_meta=False)
    pairs.to_parquet(output, write_index=False)
    done = time.perf_counter()
    # Release the persisted partitions before the next run starts.
    default_client().cancel(futures_of(shuffled))
    return {"seconds": done - started,
            "stages": {"read+shuffle+persist": shuffle - started,
                       "hulls": partitioned - shuffle, "join+write": done - partitioned},
            "detail": f"{n_partitions} partitions, {len(lefts)} partition pairs joined"}


# ---------------------------------------------------------------------- the check
def sorted_keys(output: Path, n: int) -> np.ndarray:
    import pyarrow.parquet as pq

    table = pq.read_table(output, columns=["i", "j"])
    first = table.column("i").to_numpy()
    second = table.column("j").to_numpy()
    if len(first) and not (first < second).all():
        sys.exit(f"{output}: a pair with i >= j")
    keys = first.astype(np.uint64) * np.uint64(n) + second.astype(np.uint64)
    keys.sort()
    return keys


def compare(ours_keys: np.ndarray, peer_keys: np.ndarray, peer_name: str,
            points: np.ndarray, r: float) -> bool:
    """Print how a peer's pairs compare with ours; True when equal or differing only at
    ties within `TIE_TOLERANCE` of ``r``."""
    n = np.uint64(len(points))
    for name, keys in (("spatialhash", ours_keys), (peer_name, peer_keys)):
        if len(keys) > 1 and (np.diff(keys) == 0).any():
            print(f"answers of {peer_name}: {name} reports "
                  f"{int((np.diff(keys) == 0).sum()):,} pairs twice")
            return False
    if np.array_equal(ours_keys, peer_keys):
        print(f"answers of {peer_name}: equal to spatialhash's ({len(ours_keys):,} pairs)")
        return True
    only_ours = np.setdiff1d(ours_keys, peer_keys, assume_unique=True)
    only_peer = np.setdiff1d(peer_keys, ours_keys, assume_unique=True)
    print(f"answers of {peer_name}: differ; {len(only_ours):,} pairs only in spatialhash's, "
          f"{len(only_peer):,} only in {peer_name}'s (of {len(ours_keys):,} and "
          f"{len(peer_keys):,})")
    gaps = []
    for name, keys in (("spatialhash", only_ours), (peer_name, only_peer)):
        first, second = (keys // n).astype(np.int64), (keys % n).astype(np.int64)
        delta = points[first] - points[second]
        distances = np.sqrt(delta[:, 0] * delta[:, 0] + delta[:, 1] * delta[:, 1])
        gaps.append(np.abs(distances - r))
        for a, b, d in list(zip(first, second, distances, strict=True))[:LISTED_PAIRS]:
            print(f"  only {name}: ({a}, {b}) distance {float(d)!r}, distance - r {d - r:.3e}")
    gap = float(np.concatenate(gaps).max())
    at_ties = gap <= TIE_TOLERANCE
    print(f"  farthest from r: {gap:.3e}; all within {TIE_TOLERANCE:g} of r: {at_ties}")
    return at_ties


# ---------------------------------------------------------------------- driver
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--peer-partitions", type=int, default=None,
                        help="partitions of dask-geopandas' spatial shuffle (default: one "
                             "per 31,250 points, at least 4 per worker: the fastest of 4 to "
                             "64 at 1,000,000 points on 2 workers)")
    parser.add_argument("--sindex", action="store_true",
                        help="also time dask-geopandas with the spatial index's query in "
                             "place of sjoin (the pairs without sjoin's frames)")
    parser.add_argument("--memory-per-worker", type=int, default=2 << 30)
    parser.add_argument("--data", type=Path, default=None,
                        help="directory of the Parquet points (default: /tmp/spatialhash-"
                             "bench-dask/points2d-N)")
    parser.add_argument("--keep-output", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        import dask_geopandas
        import geopandas
        import shapely
    except ImportError as error:
        sys.exit(f"this benchmark needs dask-geopandas: pip install dask-geopandas ({error})")
    import distributed

    root = Path("/tmp/spatialhash-bench-dask")
    data = args.data or root / f"points2d-{args.n}"
    r = common.radius_for_neighbors_2d(args.n)
    n_partitions = args.peer_partitions or max(4 * args.workers, args.n // 31_250)
    write_points(data, args.n, args.seed)
    print(f"# {args.n:,} uniform 2-D points in Parquet ({data}), r = {r:.6g} "
          f"({common.NEIGHBORS_2D} expected neighbours); {common.cpu_model()}, "
          f"{common.usable_cores()} cores, load average {os.getloadavg()[0]:.2f} at the "
          f"start; one LocalCluster of {args.workers} worker processes x 1 thread; "
          f"dask {distributed.__version__}, dask-geopandas {dask_geopandas.__version__}, "
          f"geopandas {geopandas.__version__}, shapely {shapely.__version__} "
          f"(GEOS {shapely.geos_version_string})")

    cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                       processes=True, dashboard_address=":0",
                                       silence_logs=logging.ERROR, memory_limit=0)
    client = distributed.Client(cluster)

    def run_ours(source, output, n_partitions):
        return ours(source, r, output, args.memory_per_worker)

    def peer_path(method):
        return lambda source, output, n_partitions: peer(source, r, output, n_partitions,
                                                         method)

    paths = {"spatialhash": run_ours, "dask-geopandas": peer_path("sjoin")}
    if args.sindex:
        paths["dask-geopandas sindex"] = peer_path("sindex")
    outputs = {name: root / f"out-{name.replace(' ', '-')}-2d-{args.n}" for name in paths}
    first_file = sorted(data.glob("*.parquet"))[0]
    first_points = read_points(first_file, None)
    warm_up, first_keys = {}, {}
    for name, run_path in paths.items():
        output = root / f"warm-{name.replace(' ', '-')}"
        shutil.rmtree(output, ignore_errors=True)
        started = time.perf_counter()
        run_path(first_file, output, 4)
        warm_up[name] = time.perf_counter() - started
        first_keys[name] = sorted_keys(output, len(first_points))
        shutil.rmtree(output, ignore_errors=True)
    print(f"warm-up on the first file, {len(first_points):,} points (untimed): " + ", ".join(
        f"{name} {seconds:.1f} s" for name, seconds in warm_up.items()))
    if not all([compare(first_keys["spatialhash"], first_keys[name], name, first_points, r)
                for name in paths if name != "spatialhash"]):
        sys.exit("a peer's pairs differ from spatialhash's beyond ties at distance r")

    results: dict[str, list[dict]] = {name: [] for name in paths}
    steal = common.StealMeter()
    for round_number in range(args.repeat):
        for name, run_path in paths.items():
            shutil.rmtree(outputs[name], ignore_errors=True)
            results[name].append(run_path(data, outputs[name], n_partitions))
            print(f"  {name} run {round_number + 1}: {results[name][-1]['seconds']:.1f} s",
                  flush=True)
    load_end = os.getloadavg()[0]
    stolen = common.format_share(steal.share())
    client.close()
    cluster.close()

    started = time.perf_counter()
    keys = {name: sorted_keys(outputs[name], args.n) for name in paths}
    points = read_points(data, args.n)
    ours_seconds = common.median([run["seconds"] for run in results["spatialhash"]])
    rows = []
    for name, runs in results.items():
        seconds = common.median([run["seconds"] for run in runs])
        rows.append([name, f"{seconds:.2f}", f"{seconds / ours_seconds:.2f}",
                     ", ".join(f"{run['seconds']:.2f}" for run in runs),
                     f"{len(keys[name]):,}", runs[-1]["detail"]])
    print()
    print(common.markdown_table(["path", "median s", "ratio to spatialhash", "runs s",
                                 "pairs", "partitioning"], rows))
    print()
    for name, runs in results.items():
        print(f"{name} stages (last run, s): " + ", ".join(
            f"{stage} {seconds:.2f}" for stage, seconds in runs[-1]["stages"].items()))
    print(f"load average {load_end:.2f} at the end of the timed runs; CPU time stolen by the "
          f"hypervisor during them: {stolen}")
    same = all([compare(keys["spatialhash"], keys[name], name, points, r)
                for name in paths if name != "spatialhash"])
    print(f"(compared in {time.perf_counter() - started:.1f} s)")
    if not args.keep_output:
        for output in outputs.values():
            shutil.rmtree(output, ignore_errors=True)
    if not same:
        sys.exit("a peer's pairs differ from spatialhash's beyond ties at distance r")


if __name__ == "__main__":
    main()
