"""Two numba threading layers on the library's workloads, in processes that take turns.

Run from the repository root::

    python benchmarks/bench_layers.py                      # tbb against omp, loads 0 and 2
    python benchmarks/bench_layers.py --layers tbb workqueue --loads 0 --rounds 4
    python benchmarks/bench_layers.py --quick              # small sizes: a check that it runs

Numba loads one threading layer per process, and a machine's speed drifts from minute to
minute, so layers measured one after the other meet different machines. Here one process
per layer (``NUMBA_THREADING_LAYER``) stays up with the workloads of
``benchmarks/bench_contention.py`` built and warm; the two take turns, ``--rounds`` times,
each timing one batch of calls of a workload while the other waits, the one going first
swapping every round. For each load (``--loads``: that many busy-loop processes beside
them) and thread count (the library's default, then one thread) the table gives each
layer's median over its batches' medians and the median over rounds of the ratio of a
round's two batches (first layer / second), with its quartiles.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

try:
    from . import _common as common
except ImportError:  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as common

HERE = Path(__file__).resolve().parent
#: Calls per batch, by workload name's first word: long calls need fewer.
CALLS = {"pairs, 5,000": 40, "pairs": 3, "radius": 3, "16": 3, "dynamic": 20, "cloth": 10}


def calls_per_batch(name: str) -> int:
    for prefix, calls in CALLS.items():
        if name.startswith(prefix):
            return calls
    return 5


# ---------------------------------------------------------------------- layer process
def serve(args: argparse.Namespace) -> None:
    """Build the workloads, then time batches as the runner asks on stdin, one JSON line
    ``[workload, calls, n_threads]`` each; answers the median in seconds."""
    import gc

    import numba

    import bench_contention

    workloads = bench_contention.workloads(args.n, args.queries, args.boxes,
                                           args.cloth_size, args.seed)
    for _, _, call in workloads:
        call(None)  # compiled and warm at both thread counts
        call(1)
    print(json.dumps({"layer": numba.threading_layer(),
                      "names": [name for name, _, _ in workloads]}), flush=True)
    for line in sys.stdin:
        index, calls, n_threads = json.loads(line)
        call = workloads[index][2]
        times = []
        gc.disable()
        try:
            for _ in range(calls):
                start = time.perf_counter()
                call(n_threads)
                times.append(time.perf_counter() - start)
        finally:
            gc.enable()
        print(json.dumps(common.median(times)), flush=True)


# ---------------------------------------------------------------------- the runner
def start_layer(layer: str, args: argparse.Namespace) -> tuple[subprocess.Popen, dict]:
    command = [sys.executable, str(Path(__file__).resolve()), "--serve", "--n", str(args.n),
               "--queries", str(args.queries), "--boxes", str(args.boxes), "--cloth-size",
               str(args.cloth_size), "--seed", str(args.seed)]
    process = subprocess.Popen(command, env=dict(os.environ, NUMBA_THREADING_LAYER=layer),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    info = json.loads(process.stdout.readline())
    if info["layer"] != layer:
        raise SystemExit(f"numba loaded {info['layer']!r} where {layer!r} was asked for")
    return process, info


def batch(process: subprocess.Popen, index: int, calls: int, n_threads) -> float:
    process.stdin.write(json.dumps([index, calls, n_threads]) + "\n")
    process.stdin.flush()
    return json.loads(process.stdout.readline())


def compare(processes: dict, names: list[str], rounds: int, load: int) -> list[list]:
    """Table rows for one load: every workload at the default thread count, then one."""
    first, second = processes
    rows = []
    for n_threads in (None, 1):
        for index, name in enumerate(names):
            medians = {first: [], second: []}
            ratios = []
            for round_ in range(rounds):
                order = (first, second) if round_ % 2 == 0 else (second, first)
                seen = {layer: batch(processes[layer], index, calls_per_batch(name),
                                     n_threads) for layer in order}
                for layer in order:
                    medians[layer].append(seen[layer])
                ratios.append(seen[first] / seen[second])
            quartiles = statistics.quantiles(ratios, n=4) if rounds > 1 else [ratios[0]] * 3
            rows.append([name, load, n_threads or "default",
                         f"{1e3 * common.median(medians[first]):.3g}",
                         f"{1e3 * common.median(medians[second]):.3g}",
                         f"{common.median(ratios):.3f}",
                         f"{quartiles[0]:.2f}-{quartiles[2]:.2f}"])
            print(f"load {load}, threads {n_threads or 'default'}: {name} done", flush=True)
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", nargs=2, default=["tbb", "omp"],
                        choices=["tbb", "omp", "workqueue"], help="the two layers compared")
    parser.add_argument("--loads", type=int, nargs="+", default=[0, 2],
                        help="busy processes beside the two (default: 0 and 2)")
    parser.add_argument("--rounds", type=int, default=8, help="batches per layer")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200_000)
    parser.add_argument("--boxes", type=int, default=100_000)
    parser.add_argument("--cloth-size", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="100,000 points, 20,000 queries, 10,000 boxes, a 40x40 cloth, "
                             "2 rounds")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.queries, args.boxes, args.cloth_size, args.rounds = (
            100_000, 20_000, 10_000, 40, 2)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve(args)
        return 0
    import bench_contention

    rows = []
    for load in args.loads:
        busy = bench_contention.start_load(load)
        processes = {}
        try:
            for layer in args.layers:
                processes[layer], info = start_layer(layer, args)
            rows += compare(processes, info["names"], args.rounds, load)
        finally:
            for process in processes.values():
                process.stdin.close()
                process.wait()
            bench_contention.stop_load(busy)
    first, second = args.layers
    print(f"\n{common.cpu_model()}, {common.usable_cores()} usable cores; "
          f"{time.strftime('%Y-%m-%d')}; {args.rounds} rounds. Medians in milliseconds; "
          f"ratio = {first} / {second}, median over rounds (quartiles).")
    print(common.markdown_table(["workload", "busy processes", "threads", first, second,
                                 "ratio", "quartiles"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
