"""Before and after: workloads timed on two versions of spatialhash, batch by batch.

Run from the repository root::

    python benchmarks/bench_ab.py --base HEAD~1
    python benchmarks/bench_ab.py --base 1a2b3c4 --workloads particles pairs5k --gap-ms 5

The base version (``--base``, any git revision) is checked out into a temporary git
worktree; the other version is this checkout's ``src``, uncommitted changes included. Each
version runs in a process of its own (its ``src`` first on ``sys.path``), which stays up
for the whole workload: the two processes take turns, ``--rounds`` times, each timing one
batch of ``--calls`` calls while the other waits, the one going first swapping every round.
A round's two batches run within a fraction of a second of each other, so both meet the
same phase of a machine whose speed drifts (on the development machine, the same call's
median over 200 calls swung from 0.95 to 1.8 ms within seconds, in one process). The table
gives each version's median over its batches' medians and the median, over rounds, of the
ratio of the two batches of a round, with its quartiles. After each batch both versions
report a digest of their last answer; versions whose answers differ are not compared (exit
status 1). Before any timing, each process makes untimed calls (which fill or load its
version's numba cache).

Why processes: two copies of the package imported in one process under different names
gave implausible timings for the batch grid (the copy of the old code took 2,057 us for
the pairs of 5,000 points, where separate processes took 1,440-1,577 us).

``--gap-ms`` sleeps that long before each call, as a simulation's step does between two
searches: a call after a pause finds its data gone from the caches and costs more.
``--idle-gap SECONDS`` makes each timed call follow an idle gap (`_common.idle_gap`: a
sleep of that many seconds, then a foreign buffer allocated, touched and freed), as a
program that searches now and then meets it: besides cold caches and sleeping threads,
the memory a call allocates is handed out afresh by the operating system. Fewer calls per
batch suit it (``--calls 3``). The table also gives each version's median of minor page
faults per call, and the process's peak resident memory during the timed calls (inputs,
loaded code and what the calls keep included; on Linux the warm-up calls' own peak,
compiling or loading the cache, is left out).

Workloads: ``pairs5k`` and ``pairs5k_2d`` (build and all pairs of 5,000 uniform points, 30
expected neighbours in 3-D, 20 in 2-D), ``build5k`` (the build alone), ``build1m_2d`` (the
build of a million points in 2-D, cells for 20 expected neighbours), ``pairs1m`` and
``build1m`` (the build and all pairs, and the build alone, of a million uniform points in
3-D, 30 expected neighbours: the ``pairs3d`` workload of ``bench_batch.py``), ``particles`` (the
particle demo's search on its pile of 5,000 discs after 600 steps, made once by this
checkout's demo), ``cloth`` (a frame of the cloth demo's 100 x 100 cloth, default options:
each process drops its own cloth and the two step in lockstep, so a round's two batches
are the same frames; the digest is that of the positions), ``dynamic1``, ``dynamic10``,
``dynamic100`` (steps of `bench_dynamic`: 100,000 boxes, that percentage moved, then all
overlapping pairs; both processes make the same steps, outside the timed calls),
``dynamic3d10`` (the same in 3-D, 10% moved, boxes in a cube of side `WORLD_3D`),
``rays`` (the first hits of 20,000 rays among 100,000 spheres, on a grid built once, the
data of ``benchmarks/bench_rays.py``), ``rays_all`` (every hit of those rays) and
``rays_fn`` (the first hit of each that a numba function accepts: odd indices);
``radius200k`` and ``knn200k`` (50,000 queries with distances, and their 16 nearest, among
200,000 uniform points, 30 expected neighbours, on a grid built once), ``radius1m`` and
``knn1m`` (the same with a million queries among a million points),
``radius200k_periodic`` (those radius queries in a periodic unit cube), ``pairs_fn`` and
``pairs_fn_periodic`` (`Grid.for_each_pair` over those points, open and in a periodic unit
cube, build included, with a numba function adding a weight per pair), ``pairs_fn_full``
(the same over 200,000 points in a layer three cells thick, 30 expected neighbours: too
few planes for slabs, so every point scans its full stencil), ``neighbors_fn``
(`Grid.for_each_neighbor` of the 50,000 queries, the same function) and ``list_fn``
(`NeighborList.for_each_pair` over the 200,000 points, periodic, the same function);
``molecular_skin`` (a step of `MolecularNeighborList`, letters ``ijSdD``, cutoff 5 A, skin
1 A, on 30,000 atoms of ``bench_molecular``'s water box: Gaussian moves of 0.02 A per axis,
the atoms wrapped into the cell every 5 steps; both processes make the same steps),
``molecular_skin_batch`` (the same list, full, with ``ptr`` over ``bench_molecular``'s batch
of 1,000 systems of 100 atoms in triclinic cells, the same moves: no system is searched
again) and ``molecular_skin_batch_searching`` (moves of 0.06 A: some systems are searched
again at most steps, each on its own); ``molecular_sorted`` (`neighbor_list`, letters
``ijSdD``, cutoff 5 A, full list, ``sorted=True``, on 30,000 atoms of that water box) and
``molecular_batch`` (one `neighbor_list` call with ``ptr``, letters ``ijSdD``, cutoff 5 A,
full list, on ``bench_molecular``'s batch of 1,000 systems of 100 atoms),
``molecular_batch_half`` (the same, half list), and ``molecular_water_half``,
``molecular_water_full``, ``molecular_fcc_half``, ``molecular_fcc_full`` (one
`neighbor_list` call, letters ``ijSdD``, cutoff 5 A, on ``bench_molecular``'s water box of
100,000 atoms or its FCC crystal of 97,336, both in triclinic cells: the systems of its
targets against vesin).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BENCHMARKS = Path(__file__).resolve().parent
REPOSITORY = BENCHMARKS.parent
sys.path.insert(0, str(BENCHMARKS))
import _common as common  # noqa: E402 (the benchmarks folder, put on the path above)

WORKLOADS = ("pairs5k", "pairs5k_2d", "build5k", "build1m_2d", "pairs1m", "build1m", "particles",
             "cloth", "dynamic1", "dynamic10", "dynamic100", "dynamic3d10", "rays", "rays_all",
             "rays_fn", "radius200k", "radius200k_periodic", "knn200k", "radius1m", "knn1m",
             "pairs_fn", "pairs_fn_periodic", "list_fn", "pairs_fn_full", "neighbors_fn",
             "molecular_skin", "molecular_skin_batch", "molecular_skin_batch_searching",
             "molecular_sorted", "molecular_batch", "molecular_batch_half",
             "molecular_water_half", "molecular_water_full", "molecular_fcc_half",
             "molecular_fcc_full")
#: The workloads of one `neighbor_list` call (`_molecular_workload`).
MOLECULAR_CALLS = ("molecular_sorted", "molecular_batch", "molecular_batch_half",
                   "molecular_water_half", "molecular_water_full", "molecular_fcc_half",
                   "molecular_fcc_full")
#: Workloads of a million points (fewer warm-up calls).
MILLION_WORKLOADS = ("build1m_2d", "pairs1m", "build1m", "radius1m", "knn1m")
#: Points of the radius, k-nearest and pair-function workloads, and queries of the first two.
SCAN_POINTS = 200_000
SCAN_QUERIES = 50_000
#: Spheres and rays of the ray workloads.
RAY_SPHERES = 100_000
RAY_COUNT = 20_000
#: Side of the cube of `dynamic3d10`'s boxes: 0.1 box a unit of volume.
WORLD_3D = 100.0
#: Untimed calls a process makes before its first batch (a million points: fewer).
WARM_CALLS = 20
WARM_CALLS_MILLION = 2


# ---------------------------------------------------------------------- child process
def _ray_workload(name: str):
    """``(call, digest)`` of a ray workload: `bench_rays`' spheres and rays, fewer."""
    import numba

    import bench_rays
    from spatialhash import Grid

    centres, radii, origins, directions = bench_rays.make_data(RAY_SPHERES, RAY_COUNT, seed=0)
    grid = Grid(centres, cell_size=2.0 * float(radii.max()))
    options = {"all_hits": name == "rays_all"}
    if name == "rays_fn":
        options["fn"] = numba.njit(lambda ray, index, distance: index % 2 == 1)

    def digest(hits) -> str:
        parts = (hits.indptr, hits.indices, hits.distances) if name == "rays_all" else (
            hits.indices, hits.distances)
        return hashlib.sha1(b"".join(np.asarray(a).tobytes() for a in parts)).hexdigest()[:12]

    return lambda: grid.query_ray(origins, directions, radii, **options), digest


def _array_digest(*arrays) -> str:
    return hashlib.sha1(b"".join(np.asarray(a).tobytes() for a in arrays)).hexdigest()[:12]


def _scan_workload(name: str):
    """``(call, digest)`` of a workload of the other scans: radius and k-nearest queries on
    a grid built once, a numba function over the pairs of a grid (open or periodic), and
    one over a neighbour list's pairs (the forces of `bench_neighbor_list`'s kind)."""
    import numba

    from spatialhash import Grid, NeighborList

    n, m = (1_000_000, 1_000_000) if name.endswith("1m") else (SCAN_POINTS, SCAN_QUERIES)
    points = common.uniform_points(n, 3, seed=0)
    r = common.radius_for_neighbors_3d(n)
    if name in ("radius200k", "radius200k_periodic", "knn200k", "radius1m", "knn1m"):
        queries = common.uniform_points(m, 3, seed=1)
        box = 1.0 if name == "radius200k_periodic" else None
        grid = Grid(points, cell_size=r, box=box)
        if not name.startswith("knn"):
            return (lambda: grid.query_radius(queries, r, return_distances=True),
                    lambda near: _array_digest(near.indptr, near.indices, near.distances))
        return (lambda: grid.query_knn(queries, 16),
                lambda nearest: _array_digest(nearest.indices, nearest.distances))

    @numba.njit
    def add_weight(i, j, d2, dx, dy, dz, r2, out):
        out[i] += (r2 - d2) * dx

    out = np.zeros(SCAN_POINTS)
    if name == "list_fn":
        neighbors = NeighborList(points, r=r, skin=0.1 * r, box=1.0)

        def call():
            out[:] = 0.0
            neighbors.for_each_pair(add_weight, r * r, out)
            return out
        return call, _array_digest
    if name == "neighbors_fn":
        queries = common.uniform_points(SCAN_QUERIES, 3, seed=1)
        grid = Grid(points, cell_size=r)

        def call():
            out[:] = 0.0
            grid.for_each_neighbor(queries, r, add_weight, r * r, out)
            return out
        return call, _array_digest
    if name == "pairs_fn_full":
        # A layer three cells thick: too few planes for slabs, so each point scans its
        # full stencil (`_pair_functions.for_each_pair`); 30 expected neighbours.
        r = math.sqrt(30.0 * 3.0 / (4.0 / 3.0 * math.pi * n))
        points = points * np.array([1.0, 1.0, 3.0 * r])
    box = 1.0 if name == "pairs_fn_periodic" else None

    def call():
        out[:] = 0.0
        Grid(points, cell_size=r, box=box).for_each_pair(r, add_weight, r * r, out)
        return out
    return call, _array_digest


def _pair_digest(pairs) -> str:
    """Digest of a pair set, whatever the order of its rows."""
    indices = np.asarray(pairs.indices if hasattr(pairs, "indices") else pairs, np.int64)
    keys = np.sort(indices[:, 0] * (int(indices.max(initial=0)) + 1) + indices[:, 1])
    return hashlib.sha1(keys.tobytes()).hexdigest()[:12]


def _molecular_skin_workload(name: str):
    """``(next_arguments, call, digest)`` of the skin list's workloads: the positions of
    the next step, the list's update, the digest of its rows in normal form."""
    import bench_molecular
    from spatialhash.neighbors import MolecularNeighborList

    if name == "molecular_skin":
        system = bench_molecular.water_box(30_000, 0)
        positions, cells, ptr = system.positions, system.cell, None
    else:
        positions, cells, ptr = bench_molecular.batch_systems(1_000, 100, 0)
    move = 0.06 if name == "molecular_skin_batch_searching" else 0.02
    neighbors = MolecularNeighborList("ijSdD", 5.0, 1.0, cells, ptr=ptr)
    neighbors.update(positions)
    rng = np.random.default_rng(1)
    cells = cells.reshape(-1, 3, 3)
    system = (np.zeros(len(positions), np.int64) if ptr is None
              else np.repeat(np.arange(len(ptr) - 1), np.diff(ptr)))
    state = {"positions": positions, "step": 0}

    def next_step():
        state["step"] += 1
        state["positions"] = bench_molecular.skin_step(
            state["positions"], cells, system, rng, move, state["step"] % 5 == 0)
        return (state["positions"],)

    def digest(rows):
        rows = bench_molecular.normal_rows(*rows, half=False)
        return _array_digest(rows.i, rows.j, rows.shifts, rows.distances, rows.vectors)

    return next_step, neighbors.update, digest


def _molecular_workload(name: str):
    """``(call, digest)`` of the `MOLECULAR_CALLS`: one `neighbor_list` call, the digest
    of its arrays."""
    import bench_molecular
    from spatialhash.neighbors import neighbor_list

    if name == "molecular_sorted":
        system = bench_molecular.water_box(30_000, 0)
        arguments, options = (system.positions, 5.0, system.cell), {"sorted": True}
    elif name.startswith("molecular_batch"):
        positions, cells, ptr = bench_molecular.batch_systems(1000, 100, 0)
        arguments, options = (positions, 5.0, cells), {"ptr": ptr}
    else:
        system = bench_molecular.make_system(name.split("_")[1], 100_000, 0)
        arguments, options = (system.positions, 5.0, system.cell), {}
    options["full_list"] = not name.endswith("_half")

    def digest(rows):
        return hashlib.sha1(b"".join(array.tobytes() for array in rows)).hexdigest()[:12]

    return lambda: neighbor_list("ijSdD", *arguments, **options), digest


def _workload(name: str, inputs: str):
    """``(next_arguments, call, digest)`` for workload ``name``: ``call(*next_arguments())``
    runs it once (only the call is timed) and ``digest(result)`` names its answer."""
    from spatialhash import DynamicHash, Grid

    none = lambda: ()  # noqa: E731 (the same arguments every call: none)
    if name in ("pairs5k", "pairs5k_2d", "build5k", "build1m_2d", "pairs1m", "build1m"):
        n_dims = 2 if name.endswith("2d") else 3
        n = 1_000_000 if "1m" in name else 5_000
        points = common.uniform_points(n, n_dims, seed=0)
        r = (common.radius_for_neighbors_2d(n) if n_dims == 2
             else common.radius_for_neighbors_3d(n))
        if name.startswith("build"):
            return none, lambda: Grid(points, cell_size=r), lambda grid: str(grid.n_points)
        return none, lambda: Grid(points, cell_size=r).query_pairs(r), _pair_digest
    if name == "particles":
        pile = np.load(inputs)
        positions, radii = pile["positions"], pile["search_radii"]
        reach = 2.0 * float(radii.max())
        return none, lambda: Grid(positions, cell_size=reach).query_pairs(radii=radii), \
            _pair_digest
    if name.startswith("rays"):
        return none, *_ray_workload(name)
    if name in ("radius200k", "radius200k_periodic", "knn200k", "radius1m", "knn1m", "pairs_fn",
                "pairs_fn_periodic", "list_fn", "pairs_fn_full", "neighbors_fn"):
        return none, *_scan_workload(name)
    if name.startswith("molecular_skin"):
        return _molecular_skin_workload(name)
    if name in MOLECULAR_CALLS:
        return none, *_molecular_workload(name)
    if name == "cloth":
        from spatialhash.demos.cloth import Cloth

        cloth = Cloth(100)
        return none, cloth.step_frame, \
            lambda _: hashlib.sha1(cloth.positions.tobytes()).hexdigest()[:12]
    import bench_dynamic

    n = 100_000
    if name == "dynamic3d10":
        # `bench_dynamic.make_boxes` in 3-D: the same three classes of sizes.
        rng = np.random.default_rng(0)
        kind = rng.random(n)
        side = np.where(kind < 0.9, rng.uniform(0.5, 1.5, n), np.where(
            kind < 0.99, rng.uniform(2.0, 6.0, n), rng.uniform(10.0, 30.0, n)))
        sizes = side[:, None] * rng.uniform(0.5, 1.0, (n, 3))
        lower = rng.random((n, 3)) * WORLD_3D
        world = bench_dynamic.Ours.__new__(bench_dynamic.Ours)
        world.sizes = sizes
        world.hash = DynamicHash(bench_dynamic.CELL_SIZE, n_dims=3, capacity=n)
        world.hash.insert_many(np.arange(n), lower, lower + sizes)
        percent = 10
    else:
        lower, sizes = bench_dynamic.make_boxes(n, 0, bench_dynamic.WORLD)
        world = bench_dynamic.Ours(lower, sizes)
        percent = int(name.removeprefix("dynamic"))
    m = max(1, round(percent / 100 * n))
    rng = np.random.default_rng(1)
    current = lower.copy()

    def next_step():
        # As `bench_dynamic.make_steps`, one step at a time (a step's corners take 1.6 MB).
        ids = np.sort(rng.choice(n, m, replace=False)) if m < n else np.arange(n)
        current[ids] += rng.uniform(-0.5, 0.5, (m, current.shape[1]))
        return ids, current.copy()

    world.step(*next_step())
    return next_step, world.step, _pair_digest


def child(args: argparse.Namespace) -> int:
    """Serve batches: each line on stdin asks for that many timed calls; each answer is a
    line of JSON, the batch's median in microseconds, its median of minor page faults per
    call and the digest of its last answer."""
    sys.path.insert(0, args.src)
    import spatialhash

    if not Path(spatialhash.__file__).resolve().is_relative_to(Path(args.src).resolve()):
        raise RuntimeError(f"imported {spatialhash.__file__}, not the version in {args.src}")
    next_arguments, call, digest = _workload(args.workload, args.inputs)
    for _ in range(WARM_CALLS_MILLION if args.workload in MILLION_WORKLOADS else WARM_CALLS):
        call(*next_arguments())
    # The peak of the timed calls only: the warm-up's compile or cache loading is not the
    # workload's memory. What stays resident (inputs, loaded code, recycled blocks) counts.
    common.reset_peak_resident()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        times, faults, result = [], [], None
        for _ in range(int(line)):
            arguments = next_arguments()
            result = None  # the last answer's memory freed before the gap, as in a loop
            if args.gap_ms:
                time.sleep(args.gap_ms / 1e3)
            if args.idle_gap:
                common.idle_gap(args.idle_gap)
            faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = time.perf_counter()
            result = call(*arguments)
            times.append(time.perf_counter() - start)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before)
        print(json.dumps({"median_us": common.median(times) * 1e6,
                          "faults": common.median(faults), "digest": digest(result),
                          "peak_mb": common.peak_resident_bytes() / 1e6}),
              flush=True)
    return 0


# ---------------------------------------------------------------------- parent process
class Version:
    """A child process serving one version's batches of one workload."""

    def __init__(self, src: str, workload: str, args: argparse.Namespace, inputs: str) -> None:
        command = [sys.executable, __file__, "--child", "--src", src, "--workload", workload,
                   "--gap-ms", str(args.gap_ms), "--idle-gap", str(args.idle_gap),
                   "--inputs", inputs]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, bufsize=1)
        self._read()

    def batch(self, calls: int) -> dict:
        self.process.stdin.write(f"{calls}\n")
        return self._read()

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the process of {self.process.args[4]} ended early "
                               f"(exit status {self.process.wait()})")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def make_particle_pile(path: str) -> None:
    """The particle demo's pile of 5,000 discs after 600 steps (this checkout's demo)."""
    sys.path.insert(0, str(REPOSITORY / "src"))
    from spatialhash.demos.particles import ParticleSystem

    system = ParticleSystem(5_000, seed=0)
    for _ in range(600):
        system.step()
    np.savez(path, positions=system.positions, search_radii=system.radii + system.skin)


def parent(args: argparse.Namespace) -> int:
    base = subprocess.run(["git", "rev-parse", "--short", args.base], cwd=REPOSITORY,
                          capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="spatialhash-ab-") as scratch:
        worktree = os.path.join(scratch, "base")
        subprocess.run(["git", "worktree", "add", "--detach", worktree, base],
                       cwd=REPOSITORY, capture_output=True, check=True)
        try:
            return compare(args, base, os.path.join(worktree, "src"), scratch)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", worktree],
                           cwd=REPOSITORY, capture_output=True, check=False)


def compare(args: argparse.Namespace, base: str, base_src: str, scratch: str) -> int:
    sources = {f"base {base}": base_src, "this checkout": str(REPOSITORY / "src")}
    inputs = os.path.join(scratch, "pile.npz")
    if "particles" in args.workloads:
        make_particle_pile(inputs)
    print(common.speed_probe())
    rows, differ = [], False
    for workload in args.workloads:
        start = time.perf_counter()
        versions = {label: Version(src, workload, args, inputs)
                    for label, src in sources.items()}
        print(f"{workload}: processes ready in {time.perf_counter() - start:.1f} s "
              "(numba caches filled or loaded, warm-up calls)")
        medians = {label: [] for label in versions}
        faults = {label: [] for label in versions}
        peaks = {label: 0.0 for label in versions}
        ratios = []
        steal = common.StealMeter()
        try:
            for k in range(args.rounds):
                order = list(versions) if k % 2 == 0 else list(versions)[::-1]
                seen = {label: versions[label].batch(args.calls) for label in order}
                if len({answer["digest"] for answer in seen.values()}) > 1:
                    differ = True
                    rows.append([workload, "", "", f"answers differ in round {k}", "", "", ""])
                    break
                for label, answer in seen.items():
                    medians[label].append(answer["median_us"])
                    faults[label].append(answer["faults"])
                    peaks[label] = max(peaks[label], answer["peak_mb"])
                before, after = (seen[label]["median_us"] for label in versions)
                ratios.append(after / before)
            else:
                quartiles = np.percentile(ratios, [25, 50, 75])
                rows.append([workload, *(f"{common.median(values):,.0f}"
                                         for values in medians.values()),
                             f"{quartiles[1]:.3f} ({quartiles[0]:.3f}-{quartiles[2]:.3f})",
                             " / ".join(f"{common.median(values):,.0f}"
                                        for values in faults.values()),
                             " / ".join(f"{peak:,.0f}" for peak in peaks.values()),
                             common.format_share(steal.share())])
        finally:
            for version in versions.values():
                version.close()
    gap = (f"an idle gap of {args.idle_gap:g} s (sleep, then "
           f"{common.IDLE_GAP_FOREIGN_BYTES >> 20} MiB allocated, touched and freed)"
           if args.idle_gap else f"{args.gap_ms:g} ms of sleep")
    print(f"\nmicroseconds: median over {args.rounds} rounds of each batch's median of "
          f"{args.calls} calls; {gap} before each call\n")
    print(common.markdown_table(["workload", *sources, "after / before, per round (quartiles)",
                                 "minor faults per call (before / after)",
                                 "peak resident MB (before / after)", "CPU stolen"],
                                rows))
    print(common.speed_probe())
    return 1 if differ else 0


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="HEAD", help="git revision to compare against")
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS,
                        default=["pairs5k", "particles", "dynamic10"])
    parser.add_argument("--rounds", type=int, default=40, help="batches per version")
    parser.add_argument("--calls", type=int, default=25, help="timed calls per batch")
    parser.add_argument("--gap-ms", type=float, default=0.0,
                        help="sleep before each timed call, in milliseconds")
    parser.add_argument("--idle-gap", type=float, default=0.0, metavar="SECONDS",
                        help="before each timed call, sleep this long, then allocate, touch "
                        "and free a foreign buffer (default 0: no idle gap)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--src", help=argparse.SUPPRESS)
    parser.add_argument("--workload", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--inputs", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.calls < 1 or args.gap_ms < 0 or args.idle_gap < 0:
        parser.error("--rounds and --calls must be at least 1, --gap-ms and --idle-gap at "
                     "least 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    return child(args) if args.child else parent(args)


if __name__ == "__main__":
    sys.exit(main())
