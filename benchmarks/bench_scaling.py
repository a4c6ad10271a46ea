"""Time against the number of points for every query family, spatialhash and its peers.

Run from the repository root::

    python benchmarks/bench_scaling.py --output-json docs/_static/benchmarks/scaling.json
    python benchmarks/bench_scaling.py --sizes 1000,10000 --families pairs knn   # a quick look

The JSON it writes is what the gallery's scaling figure
(``examples/gallery/plot_benchmark_scaling.py``) draws; the figure is never edited by hand,
it is redrawn from a new run.

Families, each on ``n`` uniform random points in the unit cube (3-D), ``n`` from
``--sizes``:

- ``pairs``: all pairs within ``r``, ``r`` for 30 expected neighbours (bench_batch's
  ``pairs3d``). Peers: cKDTree ``query_pairs``, vesin, freud, scikit-learn.
- ``radius``: the points within ``r`` of each of ``n`` other points, CSR rows
  (bench_batch's ``radius``). Peers: cKDTree ``query_ball_point``, freud, scikit-learn.
- ``count_radius``: the same, counts only. Peers: cKDTree ``query_ball_point(...,
  return_length=True)``, scikit-learn ``KDTree.query_radius(..., count_only=True)`` (one
  thread: it has no parallel form).
- ``knn``: the 16 nearest of each of ``n`` other points (bench_batch's ``knn``). Peers:
  cKDTree ``query``, freud, scikit-learn.
- ``box``: the points in each of ``n`` cubes centred on other points, of half-width
  ``h`` for 30 expected points. Peers: cKDTree ``query_ball_point(..., p=inf)`` and
  scikit-learn ``NearestNeighbors(metric="chebyshev")``: a ball of the maximum norm is
  the closed cube.
- ``ray``: first hits of ``n`` rays (origins in the cube, isotropic directions) against
  ``n`` spheres (radii as in ``bench_rays.py``: 0.001 to 0.004 at a million, scaled by
  ``(1e6 / n) ** (1/3)``). No peer here casts rays in 3-D; ``bench_rays.py`` times pymunk
  in 2-D.

Method
------
- Before anything is timed, every family runs once on 1,000 and on 60,000 points (the
  multi-threaded drivers), so that our kernels are compiled (or loaded from numba's disk
  cache) and the timings are of warm kernels; our first call at each size is recorded too.
- Every timed call builds the index and answers the query, and returns materialized
  arrays, as in ``bench_batch.py``.
- Each peer's answer is compared with ours before it is timed, in ``bench_batch``'s normal
  forms; box rows may differ only for a point within `BOX_TOLERANCE` of a face, counts
  only by the points within ``_common.BOUNDARY_TOLERANCE`` of ``r``, rays are compared
  with brute force on ``--check-rays`` random rays. A mismatch is printed, recorded and
  makes the script exit with status 1.
- Medians of as many calls as fit in ``--budget-seconds`` (judged from one warm call),
  at least ``--min-repeat`` and at most ``--max-repeat``. A call slower than
  ``--slow-seconds`` (a peer at a million points) is timed ``--slow-repeat`` times in all,
  its checking call counted as the first (the peers compile nothing, and at that length a
  first call's overhead is lost in the noise). A peer whose call is expected to take
  longer than ``--max-call-seconds`` (its last time, in proportion to ``n``) is skipped at
  that size and the larger ones, and the JSON says so: this keeps a run from a thousand
  to a million points under a quarter of an hour on two cores.
- Threads: numba's default for us (all cores, or fewer while the machine is loaded),
  every core for the peers that take a thread count (cKDTree ``workers=-1``, vesin,
  freud, scikit-learn ``n_jobs=-1``), as in ``bench_batch.py``.
- The JSON records the machine (CPU model, cores, memory, the load average before and
  after each size, the CPU time the hypervisor stole during each timing, a speed probe
  before and after), the versions of Python, numpy, numba, spatialhash and each peer, the
  date, the command line, and the path and git commit of the spatialhash it imported. On
  a machine shared with other work the figures move from run to run (see
  ``docs/benchmarks.md``); compare the curves of one run with each other.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

try:
    from . import _common as common
    from . import bench_batch, bench_rays
except ImportError:  # run as a script, or loaded by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_batch
    import bench_rays

    import _common as common

from spatialhash import Grid
from spatialhash._validation import as_rays

FAMILIES = ("pairs", "radius", "count_radius", "knn", "box", "ray")
#: What each family computes, for the table and the figure.
TITLES = {
    "pairs": "all pairs within r",
    "radius": "radius queries (CSR rows)",
    "count_radius": "radius counts",
    "knn": f"{bench_batch.KNN_K} nearest",
    "box": "points in boxes",
    "ray": "ray casts, first hit",
}
DEFAULT_SIZES = (1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000)
PEERS = ("cKDTree", "vesin", "freud", "scikit-learn")
#: Expected points in a box.
BOX_NEIGHBORS = 30
#: How far from a face (unit-box coordinates) a point decided differently by a peer may lie.
BOX_TOLERANCE = 1e-12
#: Points of the warm-up calls: a small input, and one large enough for the multi-threaded
#: drivers (as ``spatialhash compile`` does).
WARM_SIZES = (1_000, 60_000)


# ---------------------------------------------------------------------- cases
@dataclass
class Case:
    """One family at one size: our contender, the peers' and how to compare answers.

    Attributes
    ----------
    family : str
        One of `FAMILIES`.
    n : int
        Indexed points (spheres for rays); as many queries (boxes, rays).
    ours : bench_batch.Contender
        spatialhash's call.
    peers : dict of str to Contender or str
        Each peer's call, or why the peer is left out of this family.
    check : callable
        ``check(ours_normal, their_normal) -> _common.Check``; for rays, ``check(ours_normal)``
        against brute force.
    """

    family: str
    n: int
    ours: bench_batch.Contender
    peers: dict[str, bench_batch.Contender | str] = field(default_factory=dict)
    check: Callable[..., common.Check] | None = None


def box_half_width(n: int, neighbors: float = BOX_NEIGHBORS) -> float:
    """Half-width of a cube holding ``neighbors`` expected points of ``n`` uniform ones."""
    return 0.5 * (neighbors / n) ** (1.0 / 3.0)


def compare_box_keys(ours: np.ndarray, theirs: np.ndarray, points: np.ndarray,
                     lower: np.ndarray, upper: np.ndarray) -> common.Check:
    """Compare sorted keys of box rows; a differing entry must lie within `BOX_TOLERANCE`
    of a face of its box (a peer deciding ``|x - c| <= h`` rounds differently there)."""
    if np.array_equal(ours, theirs):
        return common.Check(True, f"identical ({len(ours):,} entries)")
    differing = np.setxor1d(ours, theirs)
    rows, columns = differing // len(points), differing % len(points)
    gap = np.minimum(np.abs(points[columns] - lower[rows]),
                     np.abs(points[columns] - upper[rows])).min(axis=1)
    summary = f"{len(differing):,} of {len(ours):,} entries differ, farthest {gap.max():.2e} " \
              "from a face"
    if gap.max() <= BOX_TOLERANCE:
        return common.Check(True, f"same up to rounding on the faces ({summary})")
    return common.Check(False, f"MISMATCH: {summary}")


def compare_counts(ours: np.ndarray, theirs: np.ndarray, grid_points: np.ndarray,
                   queries: np.ndarray, r: float) -> common.Check:
    """Compare counts; a query's counts may differ by at most its points within
    ``_common.BOUNDARY_TOLERANCE`` of distance ``r`` (float rounding at the boundary)."""
    theirs = np.asarray(theirs, dtype=np.int64)
    if np.array_equal(ours, theirs):
        return common.Check(True, f"identical ({len(ours):,} counts, {int(ours.sum()):,} in all)")
    rows = np.flatnonzero(ours != theirs)
    near = Grid(grid_points, cell_size=r).query_radius(
        queries[rows], r + common.BOUNDARY_TOLERANCE, return_distances=True)
    row_of = np.repeat(np.arange(len(rows)), np.diff(near.indptr))
    on_boundary = np.bincount(
        row_of, weights=np.abs(near.distances - r) <= common.BOUNDARY_TOLERANCE,
        minlength=len(rows))
    summary = f"{len(rows):,} of {len(ours):,} counts differ"
    if np.all(np.abs(ours[rows] - theirs[rows]) <= on_boundary):
        return common.Check(True, f"same up to rounding at distance r ({summary})")
    return common.Check(False, f"MISMATCH: {summary}")


def batch_case(family: str, n: int, seed: int) -> Case:
    """pairs, radius and knn: bench_batch's workloads, contenders and checks."""
    name = {"pairs": "pairs3d", "radius": "radius", "knn": "knn"}[family]
    workload = bench_batch.make_workload(name, n, seed, small_repeat=1)
    peers = {peer: bench_batch.PEER_FACTORIES[peer](workload, None) for peer in PEERS}
    return Case(family, n, bench_batch.ours_contender(workload), peers,
                lambda ours, theirs: bench_batch.check_answer(workload, ours, theirs))


def count_case(n: int, seed: int) -> Case:
    """Counts of the points within ``r`` of each query."""
    from scipy.spatial import cKDTree
    from sklearn.neighbors import KDTree

    points = common.uniform_points(n, 3, seed)
    queries = common.uniform_points(n, 3, seed + 1)
    r = common.radius_for_neighbors_3d(n)
    identity = np.asarray
    peers = {
        "cKDTree": bench_batch.Contender(
            "cKDTree",
            lambda: cKDTree(points).query_ball_point(queries, r, workers=-1,
                                                     return_length=True), identity),
        "scikit-learn": bench_batch.Contender(
            "scikit-learn", lambda: KDTree(points).query_radius(queries, r, count_only=True),
            identity),
        "vesin": "no separate query points",
        "freud": "no count-only query",
    }
    return Case("count_radius", n, bench_batch.Contender(
        "spatialhash", lambda: Grid(points, cell_size=r).count_radius(queries, r), identity),
        peers, lambda ours, theirs: compare_counts(ours, theirs, points, queries, r))


def box_case(n: int, seed: int) -> Case:
    """The points in cubes of half-width ``h`` centred on ``n`` query points."""
    from scipy.spatial import cKDTree
    from sklearn.neighbors import NearestNeighbors

    points = common.uniform_points(n, 3, seed)
    centres = common.uniform_points(n, 3, seed + 1)
    h = box_half_width(n)
    lower, upper = centres - h, centres + h

    def ours():
        return Grid(points, cell_size=h).query_box(lower, upper)

    def chebyshev_sklearn():
        return NearestNeighbors(radius=h, metric="chebyshev", algorithm="kd_tree",
                                n_jobs=-1).fit(points).radius_neighbors(
                                    centres, return_distance=False)

    def rows_keys(rows):
        return common.ragged_keys(rows, n)

    peers = {
        "cKDTree": bench_batch.Contender(
            "cKDTree",
            lambda: cKDTree(points).query_ball_point(centres, h, p=np.inf, workers=-1),
            rows_keys, bytes_per_entry=64.0),
        "scikit-learn": bench_batch.Contender("scikit-learn", chebyshev_sklearn, rows_keys,
                                              bytes_per_entry=64.0),
        "vesin": "no separate query points",
        "freud": "no box query",
    }
    return Case("box", n, bench_batch.Contender(
        "spatialhash", ours, lambda result: common.csr_keys(result.indptr, result.indices, n)),
        peers, lambda ours_keys, theirs: compare_box_keys(ours_keys, theirs, points, lower,
                                                          upper))


def ray_case(n: int, seed: int, n_check: int) -> Case:
    """First hits of ``n`` rays against ``n`` spheres; checked against brute force."""
    rng = np.random.default_rng(seed)
    centres = rng.random((n, 3))
    scale = (1e6 / n) ** (1.0 / 3.0)
    radius_max = bench_rays.RADIUS_MAX * scale
    radii = rng.uniform(bench_rays.RADIUS_MIN * scale, radius_max, n)
    origins = rng.random((n, 3))
    directions = rng.normal(size=(n, 3))
    sample = rng.choice(n, size=min(n_check, n), replace=False)

    def ours():
        return Grid(centres, 2.0 * radius_max).query_ray(origins, directions, radii)

    def check(found) -> common.Check:
        indices, distances = found
        origins3, units3 = as_rays(origins[sample], directions[sample], 3)
        index, distance, _ = bench_rays.brute_force(origins3, units3, centres, radii)
        if np.array_equal(indices[sample], index) and np.array_equal(distances[sample],
                                                                     distance):
            return common.Check(True, f"identical to brute force on {len(sample)} random rays "
                                      f"({int((index >= 0).sum())} hits)")
        return common.Check(False, "MISMATCH with brute force on the sampled rays")

    peers = {peer: "no ray casts in 3-D" for peer in PEERS}
    return Case("ray", n, bench_batch.Contender(
        "spatialhash", ours, lambda result: (result.indices, result.distances)), peers, check)


def make_case(family: str, n: int, seed: int, n_check: int) -> Case:
    """The `Case` of ``family`` at ``n`` points."""
    if family in ("pairs", "radius", "knn"):
        return batch_case(family, n, seed)
    if family == "count_radius":
        return count_case(n, seed)
    if family == "box":
        return box_case(n, seed)
    if family == "ray":
        return ray_case(n, seed, n_check)
    raise ValueError(f"`family` must be one of {FAMILIES}; got {family!r}.")


# ---------------------------------------------------------------------- timing
@dataclass
class Settings:
    """How many calls a timing takes (see the options of the same names)."""

    budget_seconds: float = 0.5
    min_repeat: int = 3
    max_repeat: int = 50
    slow_seconds: float = 5.0
    slow_repeat: int = 3
    max_call_seconds: float = 25.0


def timed_runs(compute: Callable[[], object], probe_s: float, settings: Settings
               ) -> tuple[list[float], bool]:
    """Times of the calls of ``compute`` after a call that took ``probe_s``; the flag says
    that call is to count as the first run (a slow call, see the module docstring)."""
    if probe_s > settings.slow_seconds:
        return common.time_repeated(compute, settings.slow_repeat - 1), True
    repeat = math.ceil(settings.budget_seconds / max(probe_s, 1e-9))
    repeat = min(settings.max_repeat, max(settings.min_repeat, repeat))
    return common.time_repeated(compute, repeat), False


def time_ours(case: Case, settings: Settings, log) -> tuple[dict, object]:
    """Our first call, then a warm call that sizes the timed runs; returns the row and our
    normalized answer."""
    first_s, answer = common.time_call(case.ours.compute)
    normal = case.ours.normalize(answer)
    del answer
    probe_s, _ = common.time_call(case.ours.compute)
    steal = common.StealMeter()
    times, counted = timed_runs(case.ours.compute, probe_s, settings)
    if counted:
        times.insert(0, probe_s)
    row = {"library": "spatialhash", "seconds": common.median(times), "runs": len(times),
           "times": times, "first_call_seconds": first_s, "stolen": steal.share(),
           "status": "timed"}
    log(f"  spatialhash: first call {first_s:.3g} s, median {row['seconds']:.3g} s over "
        f"{len(times)} runs (CPU stolen: {common.format_share(row['stolen'])})")
    return row, normal


def time_peer(case: Case, name: str, ours_normal, settings: Settings, log) -> dict:
    """Check one peer against our answer, then time it; returns its row."""
    contender = case.peers.get(name)
    if contender is None or isinstance(contender, str):
        return {"library": name, "status": f"not applicable: {contender or 'not installed'}"}
    needed = bench_batch._entries(ours_normal) * contender.bytes_per_entry
    free = common.available_memory_bytes()
    if needed > bench_batch.MEMORY_FRACTION * free:
        note = f"skipped: would need ~{needed / 1e9:.2g} GB of {free / 1e9:.2g} GB free"
        log(f"  {name}: {note}")
        return {"library": name, "status": note}
    check_s, answer = common.time_call(contender.compute)
    check = case.check(ours_normal, contender.normalize(answer))
    del answer
    log(f"  check {name}: {'ok' if check.ok else 'FAILED'}: {check.message}")
    steal = common.StealMeter()
    times, counted = timed_runs(contender.compute, check_s, settings)
    if counted:
        times.insert(0, check_s)
    row = {"library": name, "seconds": common.median(times), "runs": len(times),
           "times": times, "check_call_counted": counted, "stolen": steal.share(),
           "check_ok": check.ok, "check": check.message, "status": "timed"}
    log(f"  {name}: median {row['seconds']:.3g} s over {len(times)} runs (CPU stolen: "
        f"{common.format_share(row['stolen'])})")
    return row


def expected_seconds(rows: list[dict], family: str, library: str, n: int) -> float | None:
    """A call's time at ``n`` points extrapolated in proportion to ``n`` from the largest
    size timed so far (None when none was)."""
    timed = [row for row in rows if row["family"] == family and row["library"] == library
             and row["status"] == "timed"]
    if not timed:
        return None
    last = max(timed, key=lambda row: row["n"])
    return last["seconds"] * n / last["n"]


def run_case(case: Case, peers: list[str], settings: Settings, log,
             earlier: list[dict] = ()) -> list[dict]:
    """Rows (ours, then one per peer) of one family at one size; a peer whose call is
    expected to take more than ``settings.max_call_seconds`` (from the ``earlier`` rows) is
    skipped."""
    log(f"\n{case.family}: n = {case.n:,}")
    load = _load_average()
    ours, normal = time_ours(case, settings, log)
    rows = [ours]
    if case.family == "ray":
        check = case.check(normal)
        log(f"  check against brute force: {'ok' if check.ok else 'FAILED'}: {check.message}")
        ours.update(check_ok=check.ok, check=check.message)
    for name in peers:
        expected = expected_seconds(list(earlier), case.family, name, case.n)
        if expected is not None and expected > settings.max_call_seconds:
            note = (f"skipped: a call would take about {expected:.0f} s (over "
                    f"{settings.max_call_seconds:g} s)")
            log(f"  {name}: {note}")
            rows.append({"library": name, "status": note})
            continue
        rows.append(time_peer(case, name, normal, settings, log))
    for row in rows:
        row.update(family=case.family, n=case.n, load_average=load)
    return rows


def warm_up(families, seed: int, log) -> None:
    """Call each family once at each of `WARM_SIZES` (compile or load our kernels)."""
    start = time.perf_counter()
    for n in WARM_SIZES:
        for family in families:
            make_case(family, n, seed, n_check=0).ours.compute()
    log(f"warm-up ({' and '.join(f'{n:,}' for n in WARM_SIZES)} points, every family): "
        f"{time.perf_counter() - start:.2f} s")


def run(sizes, families=FAMILIES, peers: list[str] | None = None, seed: int = 0,
        n_check: int = 32, settings: Settings | None = None,
        log: Callable[[str], None] = print) -> tuple[list[dict], list[dict]]:
    """Time every family at every size.

    Returns
    -------
    rows : list of dict
        One per (family, size, library): ``family``, ``n``, ``library``, ``status`` and,
        when timed, ``seconds`` (median), ``runs``, ``times``, ``stolen`` (the share of the
        machine's CPU time stolen during the runs), ``check_ok`` and ``check``; ours also
        ``first_call_seconds``.
    loads : list of dict
        Per size: ``n``, ``load_average_before``, ``load_average_after`` (1, 5 and 15
        minutes), ``seconds`` (wall time of that size).
    """
    settings = settings or Settings()
    peers = bench_batch.importable_peers(log) if peers is None else peers
    warm_up(families, seed, log)
    rows, loads = [], []
    for n in sizes:
        before, start = _load_average(), time.perf_counter()
        for family in families:
            rows += run_case(make_case(family, n, seed, n_check), peers, settings, log,
                             rows)
        loads.append({"n": n, "load_average_before": before,
                      "load_average_after": _load_average(),
                      "seconds": time.perf_counter() - start})
        log(f"n = {n:,} done in {loads[-1]['seconds']:.1f} s; load average "
            f"{before} -> {loads[-1]['load_average_after']}")
    return rows, loads


# ---------------------------------------------------------------------- reporting
def _load_average() -> list[float] | None:
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return round(float(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def source_revision() -> dict:
    """Where the imported spatialhash lives, and its git commit and whether files there
    differ from it (None outside a git checkout)."""
    import spatialhash

    where = Path(spatialhash.__file__).resolve().parent
    revision = {"path": str(where), "commit": None, "modified": None}
    try:
        commit = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        changed = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--", "."],
                                 capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return revision
    revision.update(commit=commit, modified=bool(changed))
    return revision


def machine(load_before, speed_before: str) -> dict:
    """CPU, cores, memory, platform, the load average and the speed probe."""
    return {"cpu": common.cpu_model(), "cores": common.usable_cores(),
            "memory_gib": _memory_gib(), "platform": platform.platform(),
            "load_average_before": load_before, "load_average_after": _load_average(),
            "speed_probe_before": speed_before, "speed_probe_after": common.speed_probe()}


def results_table(rows: list[dict]) -> str:
    """Medians in seconds, one line per family and size, a column per library."""
    libraries = ["spatialhash", *PEERS]
    cells: dict[tuple[str, int], dict[str, str]] = {}
    for row in rows:
        line = cells.setdefault((row["family"], row["n"]), {})
        if row["status"] == "timed":
            text = common.format_seconds(row["seconds"])
            if row.get("check_ok") is False:
                text += " MISMATCH"
            line[row["library"]] = text
        elif row["status"].startswith("skipped"):
            line[row["library"]] = "skipped"
    body = [[family, f"{n:,}", *(line.get(library, "") for library in libraries)]
            for (family, n), line in cells.items()]
    return common.markdown_table(["family", "n", *(f"{name} (s)" for name in libraries)], body)


def parse_sizes(text: str) -> list[int]:
    """``"1000,1e4,100_000"`` as a list of ints."""
    sizes = [int(float(part.replace("_", ""))) for part in text.split(",") if part.strip()]
    if not sizes or min(sizes) < 100:
        raise argparse.ArgumentTypeError(f"sizes must be at least 100; got {text!r}")
    return sizes


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=list(DEFAULT_SIZES),
                        help="comma-separated point counts (default "
                        f"{','.join(str(n) for n in DEFAULT_SIZES)})")
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--peers", default=None,
                        help="comma-separated optional peers, of "
                        f"{', '.join(bench_batch.OPTIONAL_PEERS)} (default: every installed "
                        "one; cKDTree always runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-seconds", type=float, default=0.5,
                        help="time a contender's runs aim at, per size (default 0.5)")
    parser.add_argument("--min-repeat", type=int, default=3)
    parser.add_argument("--max-repeat", type=int, default=50)
    parser.add_argument("--slow-seconds", type=float, default=5.0)
    parser.add_argument("--slow-repeat", type=int, default=3)
    parser.add_argument("--max-call-seconds", type=float, default=25.0,
                        help="skip a peer at the sizes where one call is expected to take "
                        "longer (linear in n from its last size; default 25)")
    parser.add_argument("--check-rays", type=int, default=32,
                        help="rays checked against brute force (default 32)")
    parser.add_argument("--output-json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.peers is not None:
        chosen = [name.strip() for name in args.peers.split(",") if name.strip()]
        unknown = sorted(set(chosen) - set(bench_batch.OPTIONAL_PEERS))
        if unknown:
            parser.error(f"--peers: unknown peer(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(bench_batch.OPTIONAL_PEERS)}")
        args.peers = ["cKDTree", *(name for name in bench_batch.OPTIONAL_PEERS
                                   if name in chosen)]
    return args


def main(argv=None) -> int:
    """Run the benchmark from the command line; returns 1 when any answer mismatched."""
    args = parse_args(argv)
    command = shlex.join(["python", "benchmarks/bench_scaling.py",
                          *(sys.argv[1:] if argv is None else argv)])
    date = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    load_before, speed_before = _load_average(), common.speed_probe()
    settings = Settings(args.budget_seconds, args.min_repeat, args.max_repeat,
                        args.slow_seconds, args.slow_repeat, args.max_call_seconds)
    start = time.perf_counter()
    rows, loads = run(args.sizes, args.families, args.peers, args.seed, args.check_rays,
                      settings, log=lambda line: print(line, flush=True))
    env = bench_batch.environment()
    result = {
        "benchmark": "benchmarks/bench_scaling.py",
        "command": command,
        "date": date,
        "seconds": round(time.perf_counter() - start, 1),
        "machine": machine(load_before, speed_before),
        "versions": env["versions"],
        "spatialhash_source": source_revision(),
        "numba_threads": env["numba_threads"],
        "threading_layer": env["threading_layer"],
        "settings": {"sizes": args.sizes, "families": args.families, "seed": args.seed,
                     "budget_seconds": args.budget_seconds, "min_repeat": args.min_repeat,
                     "max_repeat": args.max_repeat, "slow_seconds": args.slow_seconds,
                     "slow_repeat": args.slow_repeat,
                     "max_call_seconds": args.max_call_seconds, "check_rays": args.check_rays,
                     "neighbors": common.NEIGHBORS_3D, "k": bench_batch.KNN_K,
                     "box_neighbors": BOX_NEIGHBORS},
        "titles": TITLES,
        "loads": loads,
        "rows": rows,
    }
    print("\n## Results")
    print(f"{result['machine']['cpu']}, {result['machine']['cores']} cores; numba threads "
          f"{env['numba_threads']} ({env['threading_layer']}); load average "
          f"{load_before} before, {result['machine']['load_average_after']} after")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v))
    print(f"{speed_before} before; {result['machine']['speed_probe_after']} after")
    print("medians, build + query timed together\n")
    print(results_table(rows))
    print(f"\ntotal {result['seconds']:.0f} s")
    if args.output_json:
        args.output_json.parent.mkdir(parents=True, exist_ok=True)
        args.output_json.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.output_json}")
    mismatched = [row for row in rows if row.get("check_ok") is False]
    if mismatched:
        print(f"\n{len(mismatched)} answer(s) did not match.")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
