"""A function over pairs against the pairs stored: an SPH density, three ways, same data.

Run from the repository root::

    python benchmarks/bench_pair_functions.py             # 1,000,000 points, periodic cube
    python benchmarks/bench_pair_functions.py --open      # open box, with Warp's HashGrid
    python benchmarks/bench_pair_functions.py --n 200000 --repeat 5

Points are uniform in the unit cube, periodic by default, an open box (no wrapping: points
near a face have fewer neighbours) with ``--open``; the smoothing length ``h`` gives 30
expected neighbours a point. The density of point ``i`` is ``m * (W(0) + sum_j W(r_ij))``
with the poly6 kernel ``W(r) = C * (h**2 - r**2)**3`` for ``r <= h``. The paths:

- ``query_pairs``: ``Grid(points, cell_size=h)``, ``Grid.query_pairs(h,
  return_distances=True)``, then ``W`` of every distance and two ``np.bincount`` (each pair
  adds to both of its points);
- ``for_each_pair``: the same grid, then ``Grid.for_each_pair(h, fn, density)``, where the
  numba function ``fn`` adds ``W`` to ``density[i]`` (each ordered pair once, so every row
  is written by one thread);
- ``for_each_pair_once``: the same with ``once=True``, a function called once a pair that
  adds ``W`` to ``density[i]`` and ``density[j]`` (the kernel is symmetric: half the calls);
- ``warp``, with ``--open`` only (NVIDIA Warp's hash grid does not wrap): a CPU
  ``wp.HashGrid`` with a cell per ``h`` across the cube, ``grid.build(points, radius=h)``,
  and a ``@wp.kernel`` that loops ``wp.hash_grid_query`` over the neighbours of each point
  and writes ``density[i]``, launched on the ``"cpu"`` device. Warp computes in float32
  (points as ``wp.vec3``); the other paths in float64. Skipped, with one line, where
  ``warp`` is not installed (``pip install warp-lang``).

Each timed call builds the index and computes the density (``wp.HashGrid(...)``,
``build``, ``launch``, ``synchronize`` and the copy of the densities to a float64 NumPy
array, for Warp); the points (for Warp, a float32 ``wp.array`` made once) are not in it.
Each path runs in a process of its own. The table gives the time of the first call apart
(it compiles ``fn`` into the driver; for Warp it compiles the kernel with LLVM, or loads it
from Warp's kernel cache when an earlier run compiled it: the table says which), the median
of ``--repeat`` calls after it, the process CPU time of those calls over their wall time
(about the number of threads kept busy), and the peak resident memory (Linux ``VmHWM``,
reset after the first call) above the size the process then had. The densities of every
point are checked against those of ``query_pairs``: the other float64 path's equal to a
relative 1e-12 (they sum in different orders), Warp's to a relative 1e-6 (float32
arithmetic). With ``--open`` the points are rounded to float32 for every path, so that all
read the same coordinates and only Warp's arithmetic differs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:
    from . import _common as common
except ImportError:  # run as a script, or loaded by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as common

NEIGHBORS = 30
PATHS = ("query_pairs", "for_each_pair", "for_each_pair_once", "warp")
#: Relative agreement asked of each path's densities with those of ``query_pairs``.
RTOL = {"for_each_pair": 1e-12, "for_each_pair_once": 1e-12, "warp": 1e-6}


def _setup(n: int, seed: int, open_box: bool) -> tuple[np.ndarray, float]:
    points = np.random.default_rng(seed).random((n, 3))
    if open_box:  # coordinates Warp's float32 points hold exactly, for every path
        points = points.astype(np.float32).astype(np.float64)
    h = (3.0 * NEIGHBORS / (4.0 * math.pi * n)) ** (1.0 / 3.0)
    return points, h


def _poly6(h: float) -> float:
    return 315.0 / (64.0 * math.pi * h**9)


def _density_by_pairs(points: np.ndarray, h: float, box) -> np.ndarray:
    from spatialhash import Grid

    grid = Grid(points, cell_size=h, box=box)
    pairs = grid.query_pairs(h, return_distances=True)
    weight = _poly6(h) * (h * h - pairs.distances**2) ** 3
    n = grid.n_points
    return (np.bincount(pairs.indices[:, 0], weight, n)
            + np.bincount(pairs.indices[:, 1], weight, n) + _poly6(h) * h**6)


def _density_by_function(points: np.ndarray, h: float, box, once: bool = False):
    import numba

    from spatialhash import Grid

    @numba.njit
    def add_weight(i, j, d2, dx, dy, dz, density, h2, c):
        density[i] += c * (h2 - d2) ** 3

    @numba.njit
    def add_weight_to_both(i, j, d2, dx, dy, dz, density, h2, c):
        weight = c * (h2 - d2) ** 3
        density[i] += weight
        density[j] += weight

    def run():
        grid = Grid(points, cell_size=h, box=box)
        density = np.full(grid.n_points, _poly6(h) * h**6)
        grid.for_each_pair(h, add_weight_to_both if once else add_weight, density, h * h,
                           _poly6(h), once=once)
        return density

    return run


def _density_by_warp(points: np.ndarray, h: float):
    """The Warp path's timed function, and a function counting the entries of Warp's
    kernel cache (one more after the first call when that call compiled the kernel)."""
    import warp as wp

    wp.config.quiet = True
    wp.init()

    @wp.kernel
    def sph_density(grid: wp.uint64, points: wp.array(dtype=wp.vec3), h: float, c: float,
                    density: wp.array(dtype=float)):
        tid = wp.tid()
        i = wp.hash_grid_point_id(grid, tid)  # points in cell order, for locality
        p = points[i]
        h2 = h * h
        total = wp.float32(0.0)
        neighbors = wp.hash_grid_query(grid, p, h)
        for j in neighbors:
            d = p - points[j]
            d2 = wp.dot(d, d)
            if d2 <= h2:
                total += (h2 - d2) * (h2 - d2) * (h2 - d2)
        density[i] = c * total

    n = points.shape[0]
    points_wp = wp.array(points, dtype=wp.vec3, device="cpu")
    dim = math.ceil(1.0 / h)
    c = _poly6(h)

    def run():
        grid = wp.HashGrid(dim, dim, dim, device="cpu")
        grid.build(points_wp, radius=h)
        density = wp.empty(n, dtype=float, device="cpu")
        wp.launch(sph_density, dim=n, inputs=[grid.id, points_wp, h, c, density],
                  device="cpu")
        wp.synchronize()
        return density.numpy().astype(np.float64)

    cache = Path(wp.config.kernel_cache_dir)

    def cached_modules() -> int:
        return sum(1 for _ in cache.iterdir()) if cache.is_dir() else 0

    return run, cached_modules


def child(path: str, n: int, seed: int, repeat: int, open_box: bool,
          density_file: Path) -> dict:
    points, h = _setup(n, seed, open_box)
    box = None if open_box else 1.0
    compiled = None
    if path == "query_pairs":
        def run():
            return _density_by_pairs(points, h, box)
    elif path.startswith("for_each_pair"):
        run = _density_by_function(points, h, box, once=path.endswith("_once"))
    else:
        run, cached_modules = _density_by_warp(points, h)
        before = cached_modules()
    start = time.perf_counter()
    run()  # compiles (or loads) what the path needs; untimed
    first = time.perf_counter() - start
    if path == "warp":
        compiled = cached_modules() > before
    common.reset_peak_resident()
    baseline = common.resident_bytes()
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    times = common.time_repeated(run, repeat)
    cpu_per_wall = (time.process_time() - cpu_start) / (time.perf_counter() - wall_start)
    density = run()
    peak = common.peak_resident_bytes() - baseline
    np.save(density_file, density)
    return {"first_seconds": first, "compiled": compiled, "seconds": common.median(times),
            "cpu_per_wall": cpu_per_wall, "peak_bytes": max(peak, 0.0)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--open", action="store_true",
                        help="an open box instead of a periodic cube (adds the Warp path)")
    parser.add_argument("--output-json", type=Path, default=None)
    parser.add_argument("--child", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--density-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.n, args.seed, args.repeat, args.open,
                               args.density_file)))
        return 0
    paths = list(PATHS)
    if not args.open:
        paths.remove("warp")
        print("warp: skipped (its hash grid is not periodic; run with --open)")
    elif importlib.util.find_spec("warp") is None:
        paths.remove("warp")
        print("warp not installed: skipped")
    results, densities = {}, {}
    with tempfile.TemporaryDirectory() as scratch:
        for path in paths:
            density_file = Path(scratch) / f"{path}.npy"
            done = subprocess.run(
                [sys.executable, __file__, "--child", path, "--n", str(args.n), "--repeat",
                 str(args.repeat), "--seed", str(args.seed), "--density-file",
                 str(density_file)] + (["--open"] if args.open else []),
                capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return 1
            results[path] = json.loads(done.stdout.strip().splitlines()[-1])
            densities[path] = np.load(density_file)
    ours = densities["query_pairs"]
    checks = {}
    for path in paths[1:]:
        theirs = densities[path]
        worst = float(np.max(np.abs(theirs - ours) / ours))
        checks[path] = {"equal": bool(worst <= RTOL[path]), "worst_relative": worst}
    equal = all(check["equal"] for check in checks.values())
    where = "an open unit box" if args.open else "a periodic cube"
    print(f"SPH density of {args.n:,} uniform points in {where}, {NEIGHBORS} expected "
          f"neighbours; {common.cpu_model()}, {common.usable_cores()} cores; medians of "
          f"{args.repeat} calls of build + density")
    for path, check in checks.items():
        print(f"{path} densities equal query_pairs' to a relative {RTOL[path]:g}: "
              f"{check['equal']} (largest relative difference {check['worst_relative']:.1e}"
              f" over {len(ours):,} points)")
    print()
    rows = []
    for path in paths:
        result = results[path]
        first = f"{result['first_seconds']:.3f}"
        if result["compiled"] is not None:
            first += " (kernel compiled)" if result["compiled"] else " (kernel cache)"
        rows.append([path, first, f"{result['seconds']:.4f}",
                     f"{result['cpu_per_wall']:.1f}",
                     f"{result['peak_bytes'] / 2**20:.0f}"])
    stored = results["query_pairs"]
    for path in paths[1:]:
        other = results[path]
        rows.append([f"query_pairs / {path}", "",
                     f"{stored['seconds'] / other['seconds']:.2f}x", "",
                     f"{stored['peak_bytes'] / max(other['peak_bytes'], 2**20):.1f}x"])
    print(common.markdown_table(["path", "first call (s)", "time (s)", "CPU / wall",
                                 "peak memory above the points (MiB)"], rows))
    if args.output_json:
        args.output_json.write_text(json.dumps(
            {"n": args.n, "open": args.open, "equal": equal, "checks": checks,
             "results": results}, indent=1))
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
