"""Speed when other programs keep the cores busy: the default thread count against one thread.

Run from the repository root::

    python benchmarks/bench_contention.py                    # loads 0, 1 and every core
    python benchmarks/bench_contention.py --quick            # small sizes: a check that it runs
    python benchmarks/bench_contention.py --env OMP_WAIT_POLICY=active   # another policy too
    python benchmarks/bench_contention.py \
        --env SPATIALHASH_ADAPT_THREADS=0,GOMP_SPINCOUNT=300000   # all threads, libgomp's spin

For each load N (0, 1 and the number of usable cores, ``--loads``), the script starts N
busy-loop processes, then a fresh measuring process that runs every workload with the
library's default thread count and with ``n_threads=1``, calls alternating, and prints the
medians and their ratio (default / one thread: below 1 the threads help, above 1 they
hurt). Each ``--env NAME=VALUE[,NAME=VALUE...]`` adds a column: the default thread count in
a measuring process with those variables set, such as ``SPATIALHASH_ADAPT_THREADS=0`` (every
usable CPU whatever the load) or ``GOMP_SPINCOUNT=300000`` (libgomp's own spin before a
waiting thread sleeps) against the library's choices (see `spatialhash._threads`).

Workloads (3-D unless said, uniform points, ``r`` for 30 expected neighbours):

- ``pairs, 5,000 points``: ``Grid(points, cell_size=r).query_pairs(r)``, build included, as a
  simulation asks every step;
- ``pairs, n points``: the same on ``--n`` points (default a million);
- ``radius, m queries`` and ``16 nearest, m queries``: ``--queries`` other points against the
  grid of ``--n`` points (built once, outside the timing);
- ``dynamic step``: 100,000 boxes in 2-D (`bench_dynamic.make_boxes`), 10% moved, then every
  overlapping pair;
- ``cloth frame``: one frame of the cloth demo (100 x 100 particles, 10 substeps, self-
  collision), frames alternating between the two thread counts on one falling cloth.

Compile time is excluded: every call runs once before the timing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

try:
    from . import _common as common
except ImportError:  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as common

HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------------- measuring process
def workloads(n: int, n_queries: int, n_boxes: int, cloth_size: int, seed: int
              ) -> list[tuple[str, int, Callable[[int | None], object]]]:
    """(name, repeat, call) per workload; ``call(n_threads)`` runs it once."""
    import numpy as np

    import bench_dynamic
    from spatialhash import DynamicHash, Grid
    from spatialhash._config import threads
    from spatialhash.demos.cloth import Cloth

    small = common.uniform_points(5_000, 3, seed)
    r_small = common.radius_for_neighbors_3d(5_000)
    points = common.uniform_points(n, 3, seed + 1)
    queries = common.uniform_points(n_queries, 3, seed + 2)
    r = common.radius_for_neighbors_3d(n)
    grids = {n_threads: Grid(points, cell_size=r, n_threads=n_threads) for n_threads in (None, 1)}

    lower, sizes = bench_dynamic.make_boxes(n_boxes, seed, bench_dynamic.WORLD)
    world = DynamicHash(bench_dynamic.CELL_SIZE, n_dims=2, capacity=n_boxes)
    world.insert_many(np.arange(n_boxes), lower, lower + sizes)
    # Moves back and forth between two sets of positions, so that every step changes cells.
    steps = bench_dynamic.make_steps(n_boxes, 0.1, 2, lower, seed)
    dynamic_calls = [0]

    def dynamic_step(n_threads):
        ids, new_lower = steps[dynamic_calls[0] % 2]
        dynamic_calls[0] += 1
        moved = np.take(new_lower, ids, axis=0)
        with threads(n_threads):
            world.move_many(ids, moved, moved + np.take(sizes, ids, axis=0))
            return world.query_pairs()

    cloth = Cloth(cloth_size, seed=seed)

    def cloth_frame(n_threads):
        with threads(n_threads):
            cloth.step_frame()

    return [
        ("pairs, 5,000 points", 300,
         lambda t: Grid(small, cell_size=r_small, n_threads=t).query_pairs(r_small)),
        (f"pairs, {n:,} points", 7,
         lambda t: Grid(points, cell_size=r, n_threads=t).query_pairs(r)),
        (f"radius, {n_queries:,} queries", 7, lambda t: grids[t].query_radius(queries, r)),
        (f"16 nearest, {n_queries:,} queries", 7, lambda t: grids[t].query_knn(queries, 16)),
        (f"dynamic step, {n_boxes:,} boxes", 30, dynamic_step),
        (f"cloth frame, {cloth_size}x{cloth_size}", 30, cloth_frame),
    ]


def measure(args: argparse.Namespace) -> dict:
    """Medians (seconds) of every workload at the default thread count and at one thread."""
    import gc

    import numba

    from spatialhash import _threads

    results = {"rows": [], "layer": None, "default_threads": _threads.default_n_threads(),
               "wait_policy": _threads.wait_policy()}
    for name, repeat, call in workloads(args.n, args.queries, args.boxes, args.cloth_size,
                                        args.seed):
        call(None)
        call(1)  # compiled and warm at both thread counts
        times = {"default": [], "one": []}
        gc.disable()
        try:
            for _ in range(repeat if not args.quick else max(3, repeat // 10)):
                for key, n_threads in (("default", None), ("one", 1)):
                    start = time.perf_counter()
                    call(n_threads)
                    times[key].append(time.perf_counter() - start)
        finally:
            gc.enable()
        results["rows"].append({"name": name, "default": common.median(times["default"]),
                                "one": common.median(times["one"])})
    results["layer"] = numba.threading_layer()
    return results


# ---------------------------------------------------------------------- the runner
def start_load(n_processes: int) -> list[subprocess.Popen]:
    """``n_processes`` busy-loop processes (ended by `stop_load`)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(n_processes)]


def stop_load(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.kill()
    for process in processes:
        process.wait()


def run_measuring_process(args: argparse.Namespace, extra_env: dict) -> dict:
    """`measure` in a fresh process with ``extra_env`` added to the environment."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "result.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--measure", str(out),
                   "--n", str(args.n), "--queries", str(args.queries), "--boxes",
                   str(args.boxes), "--cloth-size", str(args.cloth_size), "--seed",
                   str(args.seed)] + (["--quick"] if args.quick else [])
        subprocess.run(command, check=True, env={**os.environ, **extra_env})
        return json.loads(out.read_text())


def parse_env(values: list[str]) -> list[dict]:
    """``--env`` values (``NAME=VALUE[,NAME=VALUE...]``) as one dict of variables each."""
    settings = []
    for value in values:
        setting = {}
        for assignment in value.split(","):
            name, sep, variable = assignment.partition("=")
            if not sep or not name:
                raise SystemExit(f"--env must be NAME=VALUE[,NAME=VALUE...]; got {value!r}.")
            setting[name] = variable
        settings.append(setting)
    return settings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", type=int, nargs="+", default=None,
                        help="busy processes to run beside the measuring process (default: 0, "
                             "1 and the number of usable cores)")
    parser.add_argument("--n", type=int, default=1_000_000, help="points of the large rows")
    parser.add_argument("--queries", type=int, default=200_000,
                        help="query points of the radius and nearest rows")
    parser.add_argument("--boxes", type=int, default=100_000, help="boxes of the dynamic step")
    parser.add_argument("--cloth-size", type=int, default=100, help="cloth particles per side")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="also measure the default thread count with this variable set "
                             "(repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="100,000 points, 20,000 queries, 10,000 boxes, a 40x40 cloth, "
                             "few repeats")
    parser.add_argument("--output-json", help="write every measurement to this JSON file")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.queries, args.boxes, args.cloth_size = 100_000, 20_000, 10_000, 40
    if args.measure:
        Path(args.measure).write_text(json.dumps(measure(args)))
        return 0

    import numba
    import numpy

    cores = common.usable_cores()
    loads = args.loads if args.loads is not None else sorted({0, 1, cores})
    settings = [{}] + parse_env(args.env)
    runs = []
    for load in loads:
        busy = start_load(load)
        try:
            time.sleep(0.5)
            for extra_env in settings:
                result = run_measuring_process(args, extra_env)
                runs.append({"load": load, "env": extra_env, **result})
                print(f"load {load}, {extra_env or 'library defaults'}: done", file=sys.stderr)
        finally:
            stop_load(busy)

    import spatialhash

    print(f"CPU: {common.cpu_model()}, {cores} usable cores; spatialhash "
          f"{spatialhash.__version__}, numba {numba.__version__}, numpy {numpy.__version__}; "
          f"threading layer {runs[0]['layer']}, default threads {runs[0]['default_threads']}, "
          f"wait policy: {runs[0]['wait_policy']}; {time.strftime('%Y-%m-%d')}")
    print("Medians in milliseconds; ratio = default / one thread (under 1: the threads help).")
    headers = ["workload", "busy processes", "1 thread", "default", "ratio"]
    for extra_env in settings[1:]:
        label = ",".join(f"{k}={v}" for k, v in extra_env.items())
        headers += [f"default, {label}", "ratio"]
    table = []
    names = [row["name"] for row in runs[0]["rows"]]
    for index, name in enumerate(names):
        for load in loads:
            base = next(run for run in runs if run["load"] == load and not run["env"])
            one = base["rows"][index]["one"]
            row = [name, load, f"{one * 1e3:.3g}", f"{base['rows'][index]['default'] * 1e3:.3g}",
                   f"{base['rows'][index]['default'] / one:.2f}"]
            for extra_env in settings[1:]:
                other = next(run for run in runs if run["load"] == load and run["env"] == extra_env)
                default = other["rows"][index]["default"]
                row += [f"{default * 1e3:.3g}", f"{default / other['rows'][index]['one']:.2f}"]
            table.append(row)
    print(common.markdown_table(headers, table))
    if args.output_json:
        Path(args.output_json).write_text(json.dumps({"runs": runs, "loads": loads}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
