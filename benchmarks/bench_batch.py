"""Batch queries of spatialhash against its peers, on the same data in the same run.

Run from the repository root::

    python benchmarks/bench_batch.py                 # n = 1,000,000, 5 timed runs
    python benchmarks/bench_batch.py --quick         # n = 20,000: a check that it all works
    python benchmarks/bench_batch.py --workloads pairs3d knn --threads 2 --output-json out.json
    python benchmarks/bench_batch.py --peers vesin,freud   # cKDTree and these peers only
    python benchmarks/bench_batch.py --idle-gap 2    # each timed call after a 2 s idle gap

Workloads: all pairs among uniform points in 3-D and 2-D, in a periodic box and on a
clustered cloud; radius queries and k nearest of as many query points; all pairs among 5,000
points, called many times; and the radius and k-nearest workloads again with one point moved
to 1e6 on every axis (``*_outlier``), which the grid covers with its sparse form.

Method
------
- Peers: scipy ``cKDTree`` always; scikit-learn ``NearestNeighbors`` (kd-tree), vesin and
  freud when importable (a note is printed for each one missing). A peer that has no form
  of a workload (no periodic box, no separate query points) is left out of that workload.
- Every timed call builds the index and runs the query, and returns materialized arrays
  (or lists), so all the work is inside the timed region.
- Before anything is timed, each peer's answer is compared with ours: pairs and radius rows
  as sets, k-nearest distances with ``allclose`` and indices equal except at ties. A
  mismatch is printed, marked in the table, and makes the script exit with status 1.
- Our first call of each workload in this process is timed on its own; the first-call
  overhead (compiling the kernels, or loading them from numba's on-disk cache, plus first
  touches of memory) is that time minus the median of the warm calls. The cold compile
  from an empty cache is measured by ``bench_compile.py``.
- Times are medians over ``--repeat`` calls, back to back, or each after an idle gap
  (``--idle-gap SECONDS``: a sleep, then a foreign buffer allocated, touched and freed,
  `_common.idle_gap`), as a program that searches now and then meets them: cold caches,
  sleeping threads, and memory handed out afresh by the operating system. The report
  says which. A peer whose checking call took longer than
  ``--slow-peer-seconds`` is timed over ``--slow-peer-repeat`` calls only; the table says
  so next to its name. A peer whose answer would need more than 60% of the free memory
  (estimated from our answer's size) is skipped, with the estimate printed.
- Peak memory of our ``pairs3d`` build + query (and of cKDTree's, for scale) is measured
  in a fresh subprocess: peak resident set size (``VmHWM``, see
  `_common.peak_resident_bytes`) after the call
  minus the resident size just before it (``/proc/self/statm``), after a warm-up on small
  data so that compiling is not counted. It is shown next to the size of the input and
  output arrays.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

try:
    from . import _common as common
except ImportError:  # run as a script, or loaded by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as common

from spatialhash import Grid

FULL_N = 1_000_000
QUICK_N = 20_000
SMALL_PAIRS_N = 5_000
KNN_K = 16
WORKLOAD_NAMES = ("pairs3d", "pairs2d", "pairs3d_periodic", "pairs3d_clustered", "radius",
                  "knn", "small_pairs", "radius_outlier", "knn_outlier")
#: Where the outlier workloads put their first point: far from the unit cube on every axis.
OUTLIER = 1e6
#: Importable module of each optional peer.
OPTIONAL_PEERS = {"scikit-learn": "sklearn", "vesin": "vesin", "freud": "freud"}
#: Fraction of the free memory a peer's answer may be estimated to need.
MEMORY_FRACTION = 0.6
#: Our small_pairs median must stay well under this many seconds (the report says which
#: side of it a run fell on).
SMALL_PAIRS_TARGET_S = 1e-3


# ---------------------------------------------------------------------- workloads
@dataclass
class Workload:
    """One benchmark problem: data, query parameters and the kind of answer.

    Attributes
    ----------
    name : str
        Workload name (one of `WORKLOAD_NAMES`).
    kind : {"pairs", "radius", "knn"}
        What is asked.
    points : ndarray of float64, shape (n, d)
        The indexed points.
    queries : ndarray of float64, shape (m, d), or None
        Query points (radius and knn workloads).
    r : float or None
        Radius (pairs and radius workloads).
    k : int or None
        Neighbours per query (knn).
    box : float or None
        Edge of the periodic unit box, or None for open boundaries.
    repeat : int or None
        Timed calls, when the workload fixes its own (small_pairs).
    """

    name: str
    kind: str
    points: np.ndarray
    queries: np.ndarray | None = None
    r: float | None = None
    k: int | None = None
    box: float | None = None
    repeat: int | None = None

    @property
    def n(self) -> int:
        """Number of indexed points."""
        return self.points.shape[0]

    @property
    def row_points(self) -> np.ndarray:
        """The points that answer rows index: the queries, else the points themselves."""
        return self.points if self.queries is None else self.queries


def make_workload(name: str, n: int, seed: int, small_repeat: int) -> Workload:
    """Generate the data of workload ``name`` for ``n`` points (see the module docstring)."""
    r3 = common.radius_for_neighbors_3d(n)
    if name == "pairs3d":
        return Workload(name, "pairs", common.uniform_points(n, 3, seed), r=r3)
    if name == "pairs2d":
        return Workload(name, "pairs", common.uniform_points(n, 2, seed),
                        r=common.radius_for_neighbors_2d(n))
    if name == "pairs3d_periodic":
        return Workload(name, "pairs", common.uniform_points(n, 3, seed), r=r3, box=1.0)
    if name == "pairs3d_clustered":
        return Workload(name, "pairs", common.clustered_points(n, seed), r=r3)
    if name == "radius":
        return Workload(name, "radius", common.uniform_points(n, 3, seed),
                        queries=common.uniform_points(n, 3, seed + 1), r=r3)
    if name == "knn":
        return Workload(name, "knn", common.uniform_points(n, 3, seed),
                        queries=common.uniform_points(n, 3, seed + 1), k=KNN_K)
    if name in ("radius_outlier", "knn_outlier"):
        # The radius and knn workloads with one point far away: the grid cannot cover the
        # box of the points with a dense array, so it takes its sparse (hashed) form.
        workload = make_workload(name.removesuffix("_outlier"), n, seed, small_repeat)
        points = workload.points.copy()
        points[0] = OUTLIER
        workload.name, workload.points = name, points
        return workload
    if name == "small_pairs":
        return Workload(name, "pairs", common.uniform_points(SMALL_PAIRS_N, 3, seed),
                        r=common.radius_for_neighbors_3d(SMALL_PAIRS_N), repeat=small_repeat)
    raise ValueError(f"`workload` must be one of {WORKLOAD_NAMES}; got {name!r}.")


# ---------------------------------------------------------------------- contenders
@dataclass
class Contender:
    """One library's way of answering a workload.

    Attributes
    ----------
    name : str
        Library (and class) as shown in the table.
    compute : callable
        Builds the index and answers the query; returns materialized arrays. Timed.
    normalize : callable
        Turns ``compute``'s answer into the normal form compared with ours (sorted keys
        for pairs and radius rows, ``(indices, distances)`` for k-nearest). Not timed.
    bytes_per_entry : float
        Rough peak memory per pair or neighbour while computing, to skip a peer that
        would not fit.
    """

    name: str
    compute: Callable[[], object]
    normalize: Callable[[object], object]
    bytes_per_entry: float = 32.0


def _pairs_array_keys(workload: Workload) -> Callable[[np.ndarray], np.ndarray]:
    return lambda pairs: common.pair_keys(pairs[:, 0], pairs[:, 1], workload.n)


def ours_contender(workload: Workload) -> Contender:
    """spatialhash: ``Grid(points, cell_size=r)`` then the query (knn: default cell size)."""
    w = workload
    if w.kind == "pairs":
        return Contender(
            "spatialhash",
            lambda: Grid(w.points, cell_size=w.r, box=w.box).query_pairs(w.r),
            lambda result: common.pair_keys(result.indices[:, 0], result.indices[:, 1], w.n))
    if w.kind == "radius":
        return Contender(
            "spatialhash",
            lambda: Grid(w.points, cell_size=w.r).query_radius(w.queries, w.r),
            lambda result: common.csr_keys(result.indptr, result.indices, w.n))
    return Contender(
        "spatialhash",
        lambda: Grid(w.points).query_knn(w.queries, w.k),
        lambda result: (result.indices, result.distances))


def ckdtree_contender(workload: Workload, threads: int | None) -> Contender | str:
    """scipy ``cKDTree``: ``query_pairs(ndarray)``, ``query_ball_point``, ``query``."""
    from scipy.spatial import cKDTree

    w = workload
    workers = -1 if threads is None else threads
    if w.kind == "pairs":
        return Contender(
            "cKDTree",
            lambda: cKDTree(w.points, boxsize=w.box).query_pairs(w.r, output_type="ndarray"),
            _pairs_array_keys(w), bytes_per_entry=48.0)
    if w.kind == "radius":
        return Contender(
            "cKDTree",
            lambda: cKDTree(w.points).query_ball_point(w.queries, w.r, workers=workers),
            lambda rows: common.ragged_keys(rows, w.n), bytes_per_entry=64.0)
    return Contender(
        "cKDTree",
        lambda: cKDTree(w.points).query(w.queries, k=w.k, workers=workers),
        lambda result: (result[1], result[0]))


def sklearn_contender(workload: Workload, threads: int | None) -> Contender | str:
    """scikit-learn ``NearestNeighbors(algorithm="kd_tree", n_jobs=threads)``."""
    from sklearn.neighbors import NearestNeighbors

    w = workload
    jobs = -1 if threads is None else threads
    if w.box is not None:
        return "no periodic boxes"
    if w.kind == "pairs":
        def pairs_from_radius_neighbors():
            model = NearestNeighbors(radius=w.r, algorithm="kd_tree", n_jobs=jobs).fit(w.points)
            rows = model.radius_neighbors(return_distance=False)  # excludes each point itself
            counts = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
            columns = np.concatenate(rows)
            firsts = np.repeat(np.arange(w.n), counts)
            keep = firsts < columns
            return np.column_stack([firsts[keep], columns[keep]])

        return Contender("scikit-learn", pairs_from_radius_neighbors, _pairs_array_keys(w),
                         bytes_per_entry=96.0)
    if w.kind == "radius":
        return Contender(
            "scikit-learn",
            lambda: NearestNeighbors(radius=w.r, algorithm="kd_tree", n_jobs=jobs)
            .fit(w.points).radius_neighbors(w.queries, return_distance=False),
            lambda rows: common.ragged_keys(rows, w.n), bytes_per_entry=64.0)
    return Contender(
        "scikit-learn",
        lambda: NearestNeighbors(n_neighbors=w.k, algorithm="kd_tree", n_jobs=jobs)
        .fit(w.points).kneighbors(w.queries),
        lambda result: (result[1], result[0]))


def _padded_to_3d(points: np.ndarray) -> np.ndarray:
    if points.shape[1] == 3:
        return points
    padded = np.zeros((points.shape[0], 3))
    padded[:, : points.shape[1]] = points
    return padded


def vesin_contender(workload: Workload, threads: int | None) -> Contender | str:
    """vesin ``NeighborList(cutoff=r, full_list=False)`` in the unit box (2-D: z = 0)."""
    import vesin as vesin_module

    w = workload
    if w.kind != "pairs":
        return "no separate query points"
    points = np.ascontiguousarray(_padded_to_3d(w.points))
    calculator = vesin_module.NeighborList(cutoff=w.r, full_list=False,
                                           n_threads=0 if threads is None else threads)
    return Contender(
        "vesin",
        lambda: calculator.compute(points=points, box=np.eye(3), periodic=w.box is not None,
                                   quantities="ij"),
        lambda ij: common.pair_keys(ij[0], ij[1], w.n, unordered=True),
        bytes_per_entry=48.0)


def freud_contender(workload: Workload, threads: int | None) -> Contender | str:
    """freud ``AABBQuery`` (float32 inside).

    freud finds pairs only in periodic boxes and wants points in ``[-L/2, L/2)``: open
    data is shifted by -1/2 into a periodic box of edge 3, where no image is within ``r``.
    """
    import freud as freud_module

    w = workload
    if threads is not None:
        freud_module.parallel.set_num_threads(threads)
    n_dims = w.points.shape[1]
    edge = 1.0 if w.box is not None else 3.0
    box = (freud_module.box.Box.square(edge) if n_dims == 2
           else freud_module.box.Box.cube(edge))
    shift = np.array([0.5, 0.5, 0.0 if n_dims == 2 else 0.5])
    points = _padded_to_3d(w.points) - shift
    if w.kind == "pairs":
        def pairs_from_query():
            found = freud_module.locality.AABBQuery(box, points).query(
                points, {"r_max": w.r, "exclude_ii": True}).toNeighborList()
            firsts, seconds = found.query_point_indices, found.point_indices
            keep = firsts < seconds
            return np.column_stack([firsts[keep], seconds[keep]])

        return Contender("freud", pairs_from_query, _pairs_array_keys(w), bytes_per_entry=64.0)
    queries = _padded_to_3d(w.queries) - shift
    if w.kind == "radius":
        def radius_from_query():
            found = freud_module.locality.AABBQuery(box, points).query(
                queries, {"r_max": w.r}).toNeighborList()
            return np.column_stack([found.query_point_indices, found.point_indices])

        return Contender("freud", radius_from_query, _pairs_array_keys(w),
                         bytes_per_entry=48.0)

    def knn_from_query():
        found = freud_module.locality.AABBQuery(box, points).query(
            queries, {"num_neighbors": w.k}).toNeighborList()
        return (np.array(found.query_point_indices), np.array(found.point_indices),
                np.array(found.distances, dtype=np.float64))

    return Contender("freud", knn_from_query, lambda found: _knn_rows(found, len(queries), w.k))


def _knn_rows(found, n_queries: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """freud's neighbour list as (m, k) arrays, each row nearest first."""
    rows, indices, distances = found
    order = np.lexsort((indices, distances, rows))
    return indices[order].reshape(n_queries, k), distances[order].reshape(n_queries, k)


PEER_FACTORIES = {"cKDTree": ckdtree_contender, "scikit-learn": sklearn_contender,
                  "vesin": vesin_contender, "freud": freud_contender}


def importable_peers(log: Callable[[str], None] = print) -> list[str]:
    """Peers that can be imported here, in table order; prints a note for each missing."""
    peers = ["cKDTree"]
    for name, module in OPTIONAL_PEERS.items():
        try:
            importlib.import_module(module)
        except ImportError:
            log(f"note: {name} is not installed (import {module} failed); skipping it.")
            continue
        peers.append(name)
    return peers


# ---------------------------------------------------------------------- checks
def check_answer(workload: Workload, ours_answer, their_answer) -> common.Check:
    """Compare a peer's normalized answer with ours (see `_common`)."""
    if workload.kind == "knn":
        return common.compare_knn(ours_answer[0], ours_answer[1], their_answer[0],
                                  their_answer[1], workload.points, workload.queries)
    return common.compare_keys(ours_answer, their_answer, workload.r, workload.row_points,
                               workload.points, workload.box)


def _entries(answer) -> int:
    return answer[0].size if isinstance(answer, tuple) else len(answer)


# ---------------------------------------------------------------------- running
@dataclass
class Settings:
    """How a run times things (see `run` for the meaning of each field)."""

    repeat: int
    threads: int | None
    slow_peer_seconds: float
    slow_peer_repeat: int
    idle_gap: float = 0.0

    def before_call(self) -> None:
        """Untimed, before each timed call: the idle gap, if any (`_common.idle_gap`)."""
        if self.idle_gap:
            common.idle_gap(self.idle_gap)


def time_ours(workload: Workload, settings: Settings, log) -> tuple[dict, object]:
    """First call (kept for checking) and warm median of our contender."""
    contender = ours_contender(workload)
    first_s, answer = common.time_call(contender.compute)
    normal = contender.normalize(answer)
    del answer
    repeat = workload.repeat or settings.repeat
    steal = common.StealMeter()
    warm = common.time_repeated(contender.compute, repeat, settings.before_call)
    stolen = steal.share()
    warm_s = common.median(warm)
    log(f"  spatialhash: first call {first_s:.3g} s, median {warm_s:.3g} s over {repeat} "
        f"runs, {_entries(normal):,} entries (CPU stolen by the host: "
        f"{common.format_share(stolen)})")
    timing = {"ours_s": warm_s, "ours_runs": repeat, "ours_first_call_s": first_s,
              "ours_first_call_overhead_s": max(first_s - warm_s, 0.0), "ours_stolen": stolen}
    return timing, normal


def time_peer(workload: Workload, peer: str, ours_normal, settings: Settings,
              log) -> dict:
    """Check one peer against our answer, then time it; returns its row fields."""
    contender = PEER_FACTORIES[peer](workload, settings.threads)
    if isinstance(contender, str):
        return {"peer": peer, "status": f"not applicable: {contender}"}
    needed = _entries(ours_normal) * contender.bytes_per_entry
    free = common.available_memory_bytes()
    if needed > MEMORY_FRACTION * free:
        note = f"skipped: would need ~{needed / 1e9:.2g} GB of {free / 1e9:.2g} GB free"
        log(f"  {peer}: {note}")
        return {"peer": contender.name, "status": note}
    check_s, answer = common.time_call(contender.compute)
    check = check_answer(workload, ours_normal, contender.normalize(answer))
    del answer
    log(f"  check {contender.name}: {'ok' if check.ok else 'FAILED'}: {check.message}")
    full_repeat = workload.repeat or settings.repeat
    repeat = full_repeat
    if check_s > settings.slow_peer_seconds:
        repeat = min(full_repeat, settings.slow_peer_repeat)
    steal = common.StealMeter()
    times = common.time_repeated(contender.compute, repeat, settings.before_call)
    stolen = steal.share()
    peer_s = common.median(times)
    log(f"  {contender.name}: median {peer_s:.3g} s over {repeat} runs (CPU stolen by the "
        f"host: {common.format_share(stolen)})")
    return {"peer": contender.name, "peer_s": peer_s, "peer_runs": repeat,
            "peer_runs_reduced": repeat < full_repeat, "check_ok": check.ok,
            "check": check.message, "status": "timed", "peer_stolen": stolen}


def run_workload(workload: Workload, peers: list[str], settings: Settings, log) -> list[dict]:
    """Rows (one per peer) of one workload; our answer is computed and timed once."""
    log(f"\n{workload.name}: n = {workload.n:,}" + (
        f", {len(workload.queries):,} queries" if workload.queries is not None else ""))
    timing, ours_normal = time_ours(workload, settings, log)
    base = {"workload": workload.name, "kind": workload.kind, "n": workload.n, **timing}
    rows = []
    for peer in peers:
        row = {**base, **time_peer(workload, peer, ours_normal, settings, log)}
        if row.get("peer_s") is not None:
            row["ratio"] = row["peer_s"] / row["ours_s"]
        rows.append(row)
    return rows


def configure_threads(threads: int | None) -> None:
    """Set numba's thread count (None: leave numba's default, all cores)."""
    if threads is not None:
        numba.set_num_threads(threads)


def run(n: int = FULL_N, repeat: int = 5, workloads=WORKLOAD_NAMES, threads: int | None = None,
        small_repeat: int = 200, seed: int = 0, slow_peer_seconds: float = 5.0,
        slow_peer_repeat: int = 2, peers: list[str] | None = None,
        log: Callable[[str], None] = print, idle_gap: float = 0.0) -> list[dict]:
    """Check, then time, spatialhash and its peers on each workload.

    Parameters
    ----------
    n : int, default 1,000,000
        Points (and queries) of every workload but small_pairs (5,000 points).
    repeat : int, default 5
        Timed calls per contender; medians are reported.
    workloads : sequence of str, default all of `WORKLOAD_NAMES`
        Which workloads to run, in this order.
    threads : int, optional
        Threads for us (numba) and every peer; default all cores.
    small_repeat : int, default 200
        Timed calls of small_pairs.
    seed : int, default 0
        Seed of the generated data.
    slow_peer_seconds, slow_peer_repeat : float, int
        A peer whose checking call took longer than ``slow_peer_seconds`` is timed over
        ``slow_peer_repeat`` calls only.
    peers : list of str, optional
        Peers to run (default: every importable one of `PEER_FACTORIES`).
    log : callable, default print
        Receives progress lines.
    idle_gap : float, default 0
        Seconds of the idle gap (`_common.idle_gap`: a sleep, then a foreign allocation)
        before each timed call of every contender; 0 times the calls back to back.

    Returns
    -------
    list of dict
        One row per (workload, peer): ``workload``, ``kind``, ``n``, ``ours_s``,
        ``ours_runs``, ``ours_first_call_s``, ``ours_first_call_overhead_s``,
        ``ours_stolen`` (`_common.StealMeter`'s share during our timed runs), ``peer``,
        ``status`` and, for timed peers, ``peer_s``, ``peer_runs``, ``peer_runs_reduced``,
        ``ratio`` (peer time / our time), ``check_ok``, ``check`` and ``peer_stolen``.
    """
    configure_threads(threads)
    settings = Settings(repeat, threads, slow_peer_seconds, slow_peer_repeat, idle_gap)
    peers = importable_peers(log) if peers is None else peers
    rows = []
    for name in workloads:
        workload = make_workload(name, n, seed, small_repeat)
        rows += run_workload(workload, peers, settings, log)
        del workload
    return rows


# ---------------------------------------------------------------------- memory
def memory_probe(library: str, n: int, seed: int) -> dict:
    """Peak memory of one pairs3d build + query in this (fresh) process; see the docstring."""
    points = common.uniform_points(n, 3, seed)
    r = common.radius_for_neighbors_3d(n)
    if library == "spatialhash":
        warm_points = common.uniform_points(2000, 3, seed)
        Grid(warm_points, cell_size=0.1).query_pairs(0.1)

        def compute():
            return Grid(points, cell_size=r).query_pairs(r).indices
    else:
        from scipy.spatial import cKDTree

        def compute():
            return cKDTree(points).query_pairs(r, output_type="ndarray")
    peak_before = common.peak_resident_bytes()
    resident_before = common.resident_bytes()
    output = compute()
    peak_after = common.peak_resident_bytes()
    return {
        "library": library, "n": n, "input_bytes": points.nbytes,
        "output_bytes": output.nbytes, "n_pairs": len(output),
        "peak_above_resident_bytes": peak_after - resident_before,
        "peak_raised": peak_after > peak_before,
    }


def measure_peak_memory(n: int, seed: int, threads: int | None,
                        libraries=("spatialhash", "cKDTree")) -> list[dict]:
    """Run `memory_probe` for each library in a fresh subprocess of this script."""
    results = []
    for library in libraries:
        command = [sys.executable, str(Path(__file__).resolve()), "--memory-probe", library,
                   "--n", str(n), "--seed", str(seed)]
        if threads is not None:
            command += ["--threads", str(threads)]
        finished = subprocess.run(command, capture_output=True, text=True, check=False)
        if finished.returncode != 0:
            tail = finished.stderr.strip().splitlines()[-1:] or ["no output"]
            results.append({"library": library, "error": tail[0]})
            continue
        results.append(json.loads(finished.stdout.strip().splitlines()[-1]))
    return results


# ---------------------------------------------------------------------- reporting
def environment() -> dict:
    """Versions, cores, numba's thread count and threading layer."""
    versions = {"python": sys.version.split()[0]}
    for module in ("numpy", "numba", "scipy", "spatialhash", "sklearn", "vesin", "freud"):
        try:
            versions[module] = importlib.import_module(module).__version__
        except ImportError:
            versions[module] = None
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel region has run yet
        layer = "not started"
    return {"versions": versions, "cpu": common.cpu_model(), "cores": common.usable_cores(),
            "numba_threads": numba.get_num_threads(), "threading_layer": layer}


def _peer_cell(row: dict) -> str:
    if row.get("peer_runs_reduced"):
        return f"{row['peer']} (median of {row['peer_runs']}: slow)"
    return row["peer"]


def _check_cell(row: dict) -> str:
    if row.get("check_ok") is None:
        return row["status"]
    return "ok" if row["check_ok"] else "MISMATCH"


def results_table(rows: list[dict], repeat: int) -> str:
    """The markdown table of `run`'s rows."""
    headers = ["workload", "n", "ours median (s)", "peer", "peer median (s)",
               "ratio (x faster)", "check", "CPU stolen (ours / peer)"]
    body = []
    for row in rows:
        if row["status"].startswith("not applicable"):
            continue
        ratio = row.get("ratio")
        stolen = common.format_share(row.get("ours_stolen"))
        if "peer_stolen" in row:
            stolen += " / " + common.format_share(row["peer_stolen"])
        body.append([row["workload"], f"{row['n']:,}", common.format_seconds(row["ours_s"]),
                     _peer_cell(row), common.format_seconds(row.get("peer_s", np.nan)),
                     "-" if ratio is None else f"{ratio:.2f}", _check_cell(row), stolen])
    return common.markdown_table(headers, body)


def first_call_table(rows: list[dict]) -> str:
    """Our first call of each workload next to the warm median."""
    seen = {}
    for row in rows:
        seen.setdefault(row["workload"], row)
    body = [[name, common.format_seconds(row["ours_first_call_s"]),
             common.format_seconds(row["ours_s"]),
             common.format_seconds(row["ours_first_call_overhead_s"])]
            for name, row in seen.items()]
    return common.markdown_table(
        ["workload", "first call (s)", "warm median (s)", "first-call overhead (s)"], body)


def memory_lines(results: list[dict]) -> list[str]:
    """One line per memory probe."""
    lines = []
    for result in results:
        if "error" in result:
            lines.append(f"- {result['library']}: probe failed: {result['error']}")
            continue
        extra_mb = result["peak_above_resident_bytes"] / 1e6
        peak = (f"peak {extra_mb:,.1f} MB" if result["peak_raised"] else
                f"peak at most {extra_mb:,.1f} MB (the call stayed below the process's "
                "earlier peak)")
        lines.append(
            f"- {result['library']}: {peak} above the resident size before the call; input "
            f"{result['input_bytes'] / 1e6:,.1f} MB, output {result['output_bytes'] / 1e6:,.1f}"
            f" MB ({result['n_pairs']:,} pairs)")
    return lines


def small_pairs_line(rows: list[dict]) -> str | None:
    """The small_pairs verdict in microseconds, if that workload ran."""
    for row in rows:
        if row["workload"] == "small_pairs":
            microseconds = row["ours_s"] * 1e6
            # The target is "well under" a millisecond: this run only says which side of
            # it the median fell on.
            side = "under" if row["ours_s"] < SMALL_PAIRS_TARGET_S else "NOT under"
            return (f"small_pairs ({row['n']:,} points): ours median {microseconds:,.0f} us "
                    f"over {row['ours_runs']} runs: {side} 1,000 us (target: well under)")
    return None


def report(rows: list[dict], env: dict, memory: list[dict], repeat: int) -> str:
    """Everything printed at the end of `main`."""
    parts = [
        "\n## Results",
        f"numba threads: {env['numba_threads']}, threading layer: {env['threading_layer']}, "
        f"cores: {env['cores']} ({env['cpu']})",
        "versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v),
        env.get("speed_probe", ""),
        f"medians over {repeat} runs (small_pairs: its own count), {env['timing_mode']}; "
        "build + query timed together; ratio = peer time / our time; CPU stolen = the share "
        "of the machine's CPU time the hypervisor gave to other guests during the timed runs",
        "",
        results_table(rows, repeat),
        "",
        "## First call (compile or cache load) of our queries",
        first_call_table(rows),
    ]
    line = small_pairs_line(rows)
    if line:
        parts += ["", line]
    if memory:
        parts += ["", "## Peak memory of pairs3d build + query (peak resident size, VmHWM, "
                      "minus resident size before, fresh subprocess)", *memory_lines(memory)]
    return "\n".join(parts)


# ---------------------------------------------------------------------- command line
def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=None,
                        help=f"points per workload (default {FULL_N:,}; --quick: {QUICK_N:,})")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed runs per contender (default 5; --quick: 3)")
    parser.add_argument("--small-repeat", type=int, default=None,
                        help="timed runs of small_pairs (default 200; --quick: 50)")
    parser.add_argument("--workloads", nargs="+", choices=WORKLOAD_NAMES,
                        default=list(WORKLOAD_NAMES), help="workloads to run, in order")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for us and every peer (default: all cores)")
    parser.add_argument("--peers", default=None,
                        help="comma-separated optional peers to run, of "
                        f"{', '.join(OPTIONAL_PEERS)} (default: every installed one; "
                        "cKDTree always runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slow-peer-seconds", type=float, default=5.0)
    parser.add_argument("--slow-peer-repeat", type=int, default=2)
    parser.add_argument("--idle-gap", type=float, default=0.0, metavar="SECONDS",
                        help="before each timed call, sleep this long, then allocate and "
                        "free a foreign buffer (default 0: calls back to back)")
    parser.add_argument("--no-memory", action="store_true",
                        help="skip the peak-memory subprocesses")
    parser.add_argument("--output-json", type=Path, default=None)
    parser.add_argument("--quick", action="store_true",
                        help=f"small sizes: n = {QUICK_N:,}, 3 runs")
    parser.add_argument("--memory-probe", choices=("spatialhash", "cKDTree"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.n = args.n or (QUICK_N if args.quick else FULL_N)
    args.repeat = args.repeat or (3 if args.quick else 5)
    args.small_repeat = args.small_repeat or (50 if args.quick else 200)
    if args.peers is not None:
        chosen = [name.strip() for name in args.peers.split(",") if name.strip()]
        unknown = sorted(set(chosen) - set(OPTIONAL_PEERS))
        if unknown:
            parser.error(f"--peers: unknown peer(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(OPTIONAL_PEERS)}")
        args.peers = ["cKDTree", *(name for name in OPTIONAL_PEERS if name in chosen)]
    return args


def main(argv=None) -> int:
    """Run the benchmark from the command line; returns 1 when any answer mismatched."""
    args = parse_args(argv)
    configure_threads(args.threads)
    if args.memory_probe:
        print(json.dumps(memory_probe(args.memory_probe, args.n, args.seed)))
        return 0
    probe_before = common.speed_probe()
    rows = run(args.n, args.repeat, args.workloads, args.threads, args.small_repeat,
               args.seed, args.slow_peer_seconds, args.slow_peer_repeat, args.peers,
               log=lambda line: print(line, flush=True), idle_gap=args.idle_gap)
    env = environment()
    env["speed_probe"] = f"before the run: {probe_before}; after: {common.speed_probe()}"
    env["timing_mode"] = (f"each call after an idle gap of {args.idle_gap:g} s (a sleep, then "
                          f"{common.IDLE_GAP_FOREIGN_BYTES >> 20} MiB allocated, touched and "
                          "freed)" if args.idle_gap else "calls back to back")
    memory = [] if args.no_memory or "pairs3d" not in args.workloads else (
        measure_peak_memory(args.n, args.seed, args.threads))
    print(report(rows, env, memory, args.repeat))
    if args.output_json:
        args.output_json.write_text(json.dumps(
            {"environment": env, "n": args.n, "repeat": args.repeat, "rows": rows,
             "memory": memory}, indent=2))
        print(f"\nwrote {args.output_json}")
    mismatched = [row for row in rows if row.get("check_ok") is False]
    if mismatched:
        print(f"\n{len(mismatched)} peer answer(s) did not match ours.")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
