"""A function over pairs against the pairs stored: an SPH density, two ways, same data.

Run from the repository root::

    python benchmarks/bench_pair_functions.py             # 1,000,000 points
    python benchmarks/bench_pair_functions.py --n 200000 --repeat 5

Points are uniform in a periodic unit cube; the smoothing length ``h`` gives 30 expected
neighbours a point. The density of point ``i`` is ``m * (W(0) + sum_j W(r_ij))`` with the
poly6 kernel ``W(r) = C * (h**2 - r**2)**3`` for ``r <= h``. Two paths compute it on the
same grid (built once, apart, and timed apart):

- ``query_pairs``: ``Grid.query_pairs(h, return_distances=True)``, then ``W`` of every
  distance and two ``np.bincount`` (each pair adds to both of its points);
- ``for_each_pair``: ``Grid.for_each_pair(h, fn, density)``, where the numba function
  ``fn`` adds ``W`` to ``density[i]`` (each ordered pair once, so every row is written by
  one thread).

Each path runs in a process of its own; its peak resident memory (Linux ``VmHWM``, reset
after the grid's build and the untimed first call) above the size it then had is its own.
The table gives the median time of ``--repeat`` calls after one untimed call (which
compiles ``fn`` into the driver), that peak, and the ratios; the densities are checked
equal to a relative 1e-12 (the two sum in different orders).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np

try:
    from . import _common as common
except ImportError:  # run as a script, or loaded by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as common

NEIGHBORS = 30
PATHS = ("query_pairs", "for_each_pair")


def _setup(n: int, seed: int):
    from spatialhash import Grid

    points = np.random.default_rng(seed).random((n, 3))
    h = (3.0 * NEIGHBORS / (4.0 * math.pi * n)) ** (1.0 / 3.0)
    grid = Grid(points, cell_size=h, box=1.0)
    return grid, h


def _poly6(h: float) -> float:
    return 315.0 / (64.0 * math.pi * h**9)


def _density_by_pairs(grid, h: float) -> np.ndarray:
    pairs = grid.query_pairs(h, return_distances=True)
    weight = _poly6(h) * (h * h - pairs.distances**2) ** 3
    n = grid.n_points
    return (np.bincount(pairs.indices[:, 0], weight, n)
            + np.bincount(pairs.indices[:, 1], weight, n) + _poly6(h) * h**6)


def _density_by_function(grid, h: float) -> np.ndarray:
    import numba

    @numba.njit
    def add_weight(i, j, d2, dx, dy, dz, density, h2, c):
        density[i] += c * (h2 - d2) ** 3

    def run():
        density = np.full(grid.n_points, _poly6(h) * h**6)
        grid.for_each_pair(h, add_weight, density, h * h, _poly6(h))
        return density

    return run


def _reset_peak() -> None:
    """Start the peak resident memory (``VmHWM``) afresh from the current size (Linux)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        pass


def child(path: str, n: int, seed: int, repeat: int) -> dict:
    grid, h = _setup(n, seed)
    run = (lambda: _density_by_pairs(grid, h)) if path == "query_pairs" \
        else _density_by_function(grid, h)
    run()  # compiles (or loads) what the path needs; untimed
    _reset_peak()
    baseline = common.resident_bytes()
    times = common.time_repeated(run, repeat)
    density = run()
    peak = common.peak_resident_bytes() - baseline
    return {"seconds": common.median(times), "peak_bytes": max(peak, 0.0),
            "density": density[:: max(1, n // 1000)].tolist()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-json", type=Path, default=None)
    parser.add_argument("--child", choices=PATHS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.n, args.seed, args.repeat)))
        return 0
    results = {}
    for path in PATHS:
        done = subprocess.run([sys.executable, __file__, "--child", path, "--n", str(args.n),
                               "--repeat", str(args.repeat), "--seed", str(args.seed)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        results[path] = json.loads(done.stdout.strip().splitlines()[-1])
    stored, streamed = results["query_pairs"], results["for_each_pair"]
    equal = np.allclose(stored["density"], streamed["density"], rtol=1e-12, atol=0.0)
    print(f"SPH density of {args.n:,} uniform points in a periodic cube, {NEIGHBORS} expected "
          f"neighbours; {common.cpu_model()}, {common.usable_cores()} cores; medians of "
          f"{args.repeat}; densities equal: {equal}\n")
    rows = [[path, f"{results[path]['seconds']:.4f}",
             f"{results[path]['peak_bytes'] / 2**20:.0f}"] for path in PATHS]
    rows.append(["query_pairs / for_each_pair",
                 f"{stored['seconds'] / streamed['seconds']:.2f}x",
                 f"{stored['peak_bytes'] / max(streamed['peak_bytes'], 2**20):.1f}x"])
    print(common.markdown_table(["path", "time (s)", "peak memory above the grid (MiB)"], rows))
    if args.output_json:
        args.output_json.write_text(json.dumps({"n": args.n, "equal": bool(equal),
                                                "results": results}, indent=1))
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
