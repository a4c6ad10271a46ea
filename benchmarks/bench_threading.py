"""The cost of starting a numba parallel region under each threading layer.

Run from the repository root::

    python benchmarks/bench_threading.py
    python benchmarks/bench_threading.py --threads 2 --repeat 500

Each layer ("omp", "tbb", "workqueue") runs in a fresh subprocess with
``NUMBA_THREADING_LAYER`` set, since numba loads one layer per process; a layer that fails
to load is skipped with the reason. In each subprocess, after a warm-up call of everything:

- ``prange kernel``: a trivial ``prange`` loop over 5,000 float64s (``out[i] = 2 * x[i]``):
  almost all of its time is starting and joining the parallel region;
- ``prange after idle``: the same kernel called after ``--idle-ms`` of sleep each time, as
  in a simulation loop that does other work between queries: the worker threads may have
  stopped spinning and gone to sleep, and waking them costs more;
- ``serial kernel``: the same loop compiled without ``parallel``, for scale;
- ``query_pairs``: ``Grid(points, cell_size=r).query_pairs(r)`` on 5,000 uniform points
  with 30 expected neighbours, build included (several parallel regions per call).

Medians in microseconds over ``--repeat`` back-to-back calls (``--pairs-repeat`` for
query_pairs, ``--idle-repeat`` for the calls after idle). Garbage collection is off while
timing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

try:
    from . import _common as common
except ImportError:  # run as a script, or loaded by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as common

LAYERS = ("omp", "tbb", "workqueue")
N_ELEMENTS = 5_000


# ---------------------------------------------------------------------- child process
def _kernels():
    """The trivial parallel and serial kernels (compiled in the child only)."""
    import numba

    def double(values, out):
        for i in numba.prange(values.shape[0]):
            out[i] = 2.0 * values[i]

    return numba.njit(parallel=True)(double), numba.njit(double)


def time_after_idle(func, repeat: int, idle_s: float) -> list[float]:
    """Seconds of ``repeat`` calls of ``func``, each after sleeping ``idle_s`` seconds."""
    times = []
    for _ in range(repeat):
        time.sleep(idle_s)
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return times


def measure_layer(repeat: int, pairs_repeat: int, idle_repeat: int, idle_ms: float,
                  seed: int) -> dict:
    """Medians (microseconds) of this process's threading layer; see the module docstring."""
    import numba
    import numpy as np

    from spatialhash import Grid

    parallel_double, serial_double = _kernels()
    values = np.random.default_rng(seed).random(N_ELEMENTS)
    out = np.empty_like(values)
    points = common.uniform_points(N_ELEMENTS, 3, seed)
    r = common.radius_for_neighbors_3d(N_ELEMENTS)

    def query_pairs():
        return Grid(points, cell_size=r).query_pairs(r)

    for func in (lambda: parallel_double(values, out), lambda: serial_double(values, out),
                 query_pairs):
        func()  # compile or load from cache
    return {
        "layer": numba.threading_layer(),
        "threads": numba.get_num_threads(),
        "prange_kernel_us": 1e6 * common.median(common.time_repeated(
            lambda: parallel_double(values, out), repeat)),
        "prange_after_idle_us": 1e6 * common.median(time_after_idle(
            lambda: parallel_double(values, out), idle_repeat, idle_ms / 1e3)),
        "serial_kernel_us": 1e6 * common.median(common.time_repeated(
            lambda: serial_double(values, out), repeat)),
        "query_pairs_us": 1e6 * common.median(common.time_repeated(query_pairs, pairs_repeat)),
    }


# ---------------------------------------------------------------------- parent process
def _failure_reason(stderr: str) -> str:
    """The most telling line of a failed child's stderr."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "error" in line:
            return line[:200]
    return lines[-1][:200] if lines else "no output"


def run_layer(layer: str, repeat: int, pairs_repeat: int, idle_repeat: int, idle_ms: float,
              threads: int | None, seed: int) -> dict:
    """Measure one layer in a fresh subprocess; ``{"layer", "skipped"}`` when it fails."""
    env = dict(os.environ, NUMBA_THREADING_LAYER=layer)
    if threads is not None:
        env["NUMBA_NUM_THREADS"] = str(threads)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--repeat",
               str(repeat), "--pairs-repeat", str(pairs_repeat), "--idle-repeat",
               str(idle_repeat), "--idle-ms", str(idle_ms), "--seed", str(seed)]
    finished = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        return {"layer": layer, "skipped": _failure_reason(finished.stderr)}
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    if result["layer"] != layer:
        return {"layer": layer, "skipped": f"numba loaded {result['layer']!r} instead"}
    return result


def run(layers=LAYERS, repeat: int = 2000, pairs_repeat: int = 200, idle_repeat: int = 100,
        idle_ms: float = 5.0, threads: int | None = None, seed: int = 0,
        log=print) -> list[dict]:
    """Measure every layer; returns one dict per layer (see `measure_layer`).

    Parameters
    ----------
    layers : sequence of str, default ("omp", "tbb", "workqueue")
        Threading layers to try.
    repeat : int, default 2000
        Calls of each trivial kernel; medians are reported.
    pairs_repeat : int, default 200
        Calls of query_pairs.
    idle_repeat : int, default 100
        Calls of the prange kernel after an idle pause.
    idle_ms : float, default 5.0
        Length of that pause in milliseconds.
    threads : int, optional
        ``NUMBA_NUM_THREADS`` of the subprocesses; default all cores.
    seed : int, default 0
        Seed of the generated data.
    log : callable, default print
        Receives a line per layer skipped.
    """
    results = []
    for layer in layers:
        result = run_layer(layer, repeat, pairs_repeat, idle_repeat, idle_ms, threads, seed)
        if "skipped" in result:
            log(f"note: threading layer {layer!r} skipped: {result['skipped']}")
        results.append(result)
    return results


def results_table(results: list[dict]) -> str:
    """Markdown table of medians in microseconds, one row per layer that loaded."""
    rows = [[result["layer"], result["threads"], f"{result['prange_kernel_us']:,.1f}",
             f"{result['prange_after_idle_us']:,.1f}", f"{result['serial_kernel_us']:,.1f}",
             f"{result['query_pairs_us']:,.0f}"]
            for result in results if "skipped" not in result]
    return common.markdown_table(
        ["layer", "threads", "prange kernel (us)", "prange after idle (us)",
         "serial kernel (us)", "query_pairs 5,000 points (us)"], rows)


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", nargs="+", choices=LAYERS, default=list(LAYERS))
    parser.add_argument("--repeat", type=int, default=2000,
                        help="calls of each trivial kernel (default 2000)")
    parser.add_argument("--pairs-repeat", type=int, default=200,
                        help="calls of query_pairs (default 200)")
    parser.add_argument("--idle-repeat", type=int, default=100,
                        help="calls of the prange kernel after an idle pause (default 100)")
    parser.add_argument("--idle-ms", type=float, default=5.0,
                        help="idle pause before each of those calls, ms (default 5)")
    parser.add_argument("--threads", type=int, default=None,
                        help="NUMBA_NUM_THREADS for the subprocesses (default: all cores)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-json", type=Path, default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    """Run the benchmark from the command line."""
    args = parse_args(argv)
    if args.child:
        print(json.dumps(measure_layer(args.repeat, args.pairs_repeat, args.idle_repeat,
                                       args.idle_ms, args.seed)))
        return 0
    results = run(args.layers, args.repeat, args.pairs_repeat, args.idle_repeat, args.idle_ms,
                  args.threads, args.seed)
    print(f"\nStarting a parallel region: medians over {args.repeat} back-to-back calls "
          f"(after idle: {args.idle_repeat} calls, each after {args.idle_ms:g} ms of sleep; "
          f"query_pairs: {args.pairs_repeat}), {common.usable_cores()} cores "
          f"({common.cpu_model()})\n")
    print(results_table(results))
    if args.output_json:
        args.output_json.write_text(json.dumps(results, indent=2))
        print(f"\nwrote {args.output_json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
