"""Compile time of spatialhash: a cold start from an empty numba cache, then a warm start.

Run from the repository root::

    python benchmarks/bench_compile.py
    python benchmarks/bench_compile.py --warm-runs 5 --output-json compile.json
    python benchmarks/bench_compile.py --molecular --runs 3 --src src ../main/src

(a) Cold: a subprocess with ``NUMBA_CACHE_DIR`` set to a fresh temporary folder imports
numba, then spatialhash, sets numba's CPU target up (timed apart: numba does it once per
process for any compiled code), then calls every query once on small data (1,000 points,
so the grid path is used rather than brute force), timing the imports and each first
call; then
the main queries once more on 60,000 points, where they take their multi-threaded paths
(parallel drivers, which numba compiles apart, with the kernels they call); then ray casts
on the grid and the dynamic hash (bulk insert, pairs, bulk moves; on 1,000 and 60,000
objects; then one object at a time and its other queries). Each first call
compiles what it needs and writes it to the cache; the total is what a new user who uses
everything waits for once.

The calls are those of ``spatialhash compile`` (`spatialhash._warmup`). After the cold
child, the kernels with no index file in its cache are listed (`kernels_not_cached`): a
kernel the calls never reach would be missing from the total.

(c) First calls (``--first-calls``): each query family alone, as a new user meets it: a
fresh process and an empty cache per family, which builds a grid (timed) and makes that
family's first call (timed), on 1,000 points (the calling thread's kernels) and on 60,000
(the multi-threaded drivers too).

(d) Molecular lists (``--molecular``): the first calls of `neighbor_list` and
`MolecularNeighborList`, each step after the ones before it in one fresh process on an
empty cache (`MOLECULAR_STEPS`), on random atoms at water's density in triclinic cells
(``bench_molecular.batch_systems``): CPU seconds (``time.process_time``, numba compiles on
the calling thread) and wall seconds of each, and numba's own view, the seconds of each
kernel's compile less those of the kernels it compiled inside it (``"numba:compile"``
events). ``--runs`` fresh processes give medians; ``--src`` names the ``src`` folders to
compare (another checkout's, say), one process each in turn.

(b) Warm: the same cache, now filled, in new subprocesses (``--warm-runs`` of them): the
import time and the first ``Grid(points, cell_size=r).query_pairs(r)`` on 1,000 points,
which loads the kernels from the cache. Each child also counts numba's cache hits and
misses over spatialhash's kernels, so a warm start that recompiles is visible.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    from . import _common as common
except ImportError:  # run as a script, or loaded by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as common

# The child imports spatialhash itself, timed: nothing here may import it at module level.


# ---------------------------------------------------------------------- child process
def _timed(func) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def child(phase: str, seed: int) -> dict:
    """Import, then the first calls (cold: all of them; warm: build + query_pairs)."""
    start = time.perf_counter()
    import numba  # noqa: F401
    import numpy  # noqa: F401
    import_numba_s = time.perf_counter() - start
    start = time.perf_counter()
    import spatialhash  # noqa: F401
    import_spatialhash_s = time.perf_counter() - start
    # Numba sets its CPU target up (importing its own array-math modules, and scipy.linalg
    # for its BLAS check) the first time any compiled function loads or compiles: a cost
    # of numba, not of spatialhash, timed apart so the first call shows only ours.
    from numba.core.registry import cpu_target

    from spatialhash import _warmup

    start = time.perf_counter()
    cpu_target.target_context.refresh()
    numba_setup_s = time.perf_counter() - start
    calls = _warmup.warm_up_calls(seed)
    if phase == "warm":
        calls = calls[:2]  # Grid build, query_pairs
    steps = {name: _timed(call) for name, call in calls}
    return {"phase": phase, "import_numba_numpy_s": import_numba_s,
            "import_spatialhash_s": import_spatialhash_s, "numba_setup_s": numba_setup_s,
            "first_calls_s": steps,
            **_warmup.cache_counts()}


#: The query families of ``--first-calls``: name -> the call, given a grid, its points,
#: query points and a radius.
FIRST_CALLS = {
    "query_pairs": lambda grid, points, queries, r: grid.query_pairs(r),
    "query_radius": lambda grid, points, queries, r: grid.query_radius(queries, r),
    "query_knn": lambda grid, points, queries, r: grid.query_knn(queries, 16),
    "query_box": lambda grid, points, queries, r: grid.query_box(queries, queries + 2 * r),
    "query_ray": lambda grid, points, queries, r: grid.query_ray(
        queries, queries[::-1] - 0.5, 0.25 * r),
}


def first_call_child(family: str, n: int, seed: int) -> dict:
    """A new user's first build and first ``family`` call (or a dynamic hash's first bulk
    insert and pairs), on ``n`` points; seconds of each, after numba's set-up."""
    import numpy as np
    from numba.core.registry import cpu_target

    import spatialhash

    cpu_target.target_context.refresh()
    rng = np.random.default_rng(seed)
    points, queries = rng.random((n, 3)), rng.random((n, 3))
    r = common.radius_for_neighbors_3d(n)
    if family == "DynamicHash":
        world = spatialhash.DynamicHash(cell_size=2 * r)
        build_s = _timed(lambda: world.insert_many(np.arange(n), points, points + r))
        return {"build_s": build_s, "query_s": _timed(world.query_pairs)}
    grid = {}
    build_s = _timed(lambda: grid.setdefault("grid", spatialhash.Grid(points, cell_size=r)))
    query_s = _timed(lambda: FIRST_CALLS[family](grid["grid"], points, queries, r))
    return {"build_s": build_s, "query_s": query_s}


def first_calls(sizes, seed: int) -> list[dict]:
    """`first_call_child` of every family and size, each in a new process and empty cache."""
    rows = []
    for family in [*FIRST_CALLS, "DynamicHash"]:
        for n in sizes:
            cache_dir = tempfile.mkdtemp(prefix="spatialhash-numba-cache-")
            try:
                env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, SPATIALHASH_COMPILE_NOTICE="0",
                           SPATIALHASH_ADAPT_THREADS="0")
                command = [sys.executable, str(Path(__file__).resolve()), "--child-first",
                           family, str(n), "--seed", str(seed)]
                start = time.perf_counter()
                finished = subprocess.run(command, env=env, capture_output=True, text=True,
                                          check=True)
                wall_s = time.perf_counter() - start
            finally:
                shutil.rmtree(cache_dir, ignore_errors=True)
            result = json.loads(finished.stdout.strip().splitlines()[-1])
            rows.append({"family": family, "n": n, **result, "process_wall_s": wall_s})
            print(f"{family}, {n:,} points: done", file=sys.stderr)
    return rows


def first_calls_table(rows: list[dict]) -> str:
    return common.markdown_table(
        ["first call, empty cache", "points", "build or insert (s)", "the call (s)",
         "whole process (s)"],
        [[row["family"], f"{row['n']:,}", f"{row['build_s']:.2f}", f"{row['query_s']:.2f}",
          f"{row['process_wall_s']:.2f}"] for row in rows])


#: The steps of ``--molecular``, in order, each a first call after the ones before it:
#: what it is, and the kernels it adds (the letters ``ijSdD``, cutoff 5 A, skin 1 A).
MOLECULAR_STEPS = (
    "neighbor_list",  # the search
    "neighbor_list sorted=True",  # the sort of each atom's rows
    "MolecularNeighborList first update",  # the candidates' rows
    "update: moves within the skin",  # the atoms' moves
    "update: an atom wrapped by a cell vector",  # the shifts of the candidates
    "batch of two: first update",
    "batch: one system searched again",  # its candidates copied into its slots
)


class _CompileClock:
    """numba's ``"numba:compile"`` events of spatialhash's kernels, as CPU seconds per
    kernel less those of the spatialhash kernels compiled inside its compile (numba's own
    functions count to the kernel that compiles them)."""

    def __init__(self) -> None:
        from numba.core import event

        self.seconds: dict[str, float] = {}
        self._stack: list[list] = []

        clock = self

        class Listener(event.Listener):
            def on_start(self, ev):
                dispatcher = ev.data["dispatcher"]
                module = getattr(dispatcher.py_func, "__module__", "") or ""
                name = (f"{module.removeprefix('spatialhash.')}."
                        f"{dispatcher.py_func.__qualname__}")
                clock._stack.append([name, time.process_time(), 0.0,
                                     module.startswith("spatialhash.")])

            def on_end(self, ev):
                name, start, inner, ours = clock._stack.pop()
                if not ours:
                    return
                total = time.process_time() - start
                clock.seconds[name] = clock.seconds.get(name, 0.0) + total - inner
                for frame in reversed(clock._stack):
                    if frame[3]:
                        frame[2] += total
                        break

        event.register("numba:compile", Listener())


def molecular_child(seed: int) -> dict:
    """`MOLECULAR_STEPS` in order, CPU and wall seconds of each, and each kernel's compile
    seconds (`_CompileClock`)."""
    import numpy as np
    from numba.core.registry import cpu_target

    import bench_molecular
    from spatialhash.neighbors import MolecularNeighborList, neighbor_list

    cpu_target.target_context.refresh()
    clock = _CompileClock()
    positions, cells, ptr = bench_molecular.batch_systems(2, 300, seed)
    one, cell = positions[:300], cells[0]
    cutoff, skin = 5.0, 1.0
    moved = one + np.random.default_rng(seed).normal(0.0, 0.01, one.shape)
    wrapped = moved.copy()
    wrapped[0] += cell[0]
    searched = positions.copy()
    searched[0, 0] += 0.8 * skin  # beyond half the skin, in system 0
    lists = {}
    calls = (
        lambda: neighbor_list("ijSdD", one, cutoff, cell),
        lambda: neighbor_list("ijSdD", one, cutoff, cell, sorted=True),
        lambda: lists.setdefault("one", MolecularNeighborList(
            "ijSdD", cutoff, skin, cell)).update(one),
        lambda: lists["one"].update(moved),
        lambda: lists["one"].update(wrapped),
        lambda: lists.setdefault("batch", MolecularNeighborList(
            "ijSdD", cutoff, skin, cells, ptr=ptr)).update(positions),
        lambda: lists["batch"].update(searched),
    )
    steps = {}
    for name, call in zip(MOLECULAR_STEPS, calls, strict=True):
        cpu, wall = time.process_time(), time.perf_counter()
        call()
        steps[name] = (time.process_time() - cpu, time.perf_counter() - wall)
    return {"steps": steps, "kernels": clock.seconds}


def molecular_runs(sources: list[str], runs: int, seed: int) -> dict[str, list[dict]]:
    """`molecular_child` ``runs`` times for each of ``sources`` (``src`` folders), each in
    a new process on an empty cache, the sources in turn."""
    results: dict[str, list[dict]] = {source: [] for source in sources}
    for run in range(runs):
        for source in sources:
            cache_dir = tempfile.mkdtemp(prefix="spatialhash-numba-cache-")
            try:
                env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir,
                           SPATIALHASH_COMPILE_NOTICE="0", SPATIALHASH_ADAPT_THREADS="0",
                           PYTHONPATH=str(Path(source).resolve()))
                command = [sys.executable, str(Path(__file__).resolve()), "--child-molecular",
                           "--seed", str(seed)]
                finished = subprocess.run(command, env=env, capture_output=True, text=True,
                                          check=True)
            finally:
                shutil.rmtree(cache_dir, ignore_errors=True)
            results[source].append(json.loads(finished.stdout.strip().splitlines()[-1]))
            print(f"{source}: run {run + 1} of {runs} done", file=sys.stderr)
    return results


def molecular_tables(results: dict[str, list[dict]]) -> str:
    """Medians over the runs: each step's CPU and wall seconds, and each kernel's compile
    seconds, one column per source."""
    sources = list(results)

    def step_seconds(source: str, pick) -> str:
        cpu = common.median([pick({k: v[0] for k, v in r["steps"].items()})
                             for r in results[source]])
        wall = common.median([pick({k: v[1] for k, v in r["steps"].items()})
                              for r in results[source]])
        return f"{cpu:.2f} / {wall:.2f}"

    steps = [[name] + [step_seconds(s, lambda values, name=name: values[name])
                       for s in sources] for name in MOLECULAR_STEPS]
    steps.append(["all of them"] + [step_seconds(s, lambda values: sum(values.values()))
                                    for s in sources])
    kernels = {name for runs in results.values() for r in runs for name in r["kernels"]}
    rows = [[name] + [common.median([r["kernels"].get(name, 0.0) for r in results[s]])
                      for s in sources] for name in kernels]
    rows.sort(key=lambda row: -max(row[1:]))
    return (common.markdown_table(["first call, after those above (median)"]
                                  + [f"{s}: CPU / wall (s)" for s in sources], steps)
            + "\n\n" + common.markdown_table(
                ["kernel compiled, less the kernels inside (median)"]
                + [f"{s}: CPU (s)" for s in sources],
                [[row[0]] + [f"{value:.2f}" for value in row[1:]] for row in rows]))


# ---------------------------------------------------------------------- parent process
def run_child(phase: str, cache_dir: str, seed: int) -> dict:
    """One child process with ``NUMBA_CACHE_DIR=cache_dir``; its measurements."""
    # Every thread whatever the load, as `spatialhash compile` runs: the multi-threaded
    # paths compile kernels of their own.
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, SPATIALHASH_ADAPT_THREADS="0")
    command = [sys.executable, str(Path(__file__).resolve()), "--child", phase,
               "--seed", str(seed)]
    start = time.perf_counter()
    finished = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall_s = time.perf_counter() - start
    if finished.returncode != 0:
        raise RuntimeError(f"the {phase} child failed:\n{finished.stderr[-2000:]}")
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = wall_s
    return result


#: Kernels only the tests call (the warm-up cannot reach them): `dda.traverse` runs the DDA
#: loop whole, as a reference for the loop the ray casts inline.
TEST_ONLY_KERNELS = {"_kernels.dda.traverse"}


def kernels_not_cached(cache_dir: str) -> list[str]:
    """spatialhash's kernels (``module.function``) with no index file in the cold cache:
    the warm-up calls never compiled them, so the cold total leaves them out."""
    from spatialhash._warmup import kernel_dispatchers

    # numba names a kernel's index file by its module file's stem, its qualified name and
    # its first line ("sort.entry_keys-103.py311.nbi"), under a folder that depends on the
    # cache locator: the file name alone identifies the kernel.
    cached = {path.name.rsplit(".", 2)[0] for path in Path(cache_dir).rglob("*.nbi")}

    def index_name(dispatcher) -> str:
        code = dispatcher.py_func.__code__
        return f"{Path(code.co_filename).stem}.{dispatcher.py_func.__qualname__}-" \
               f"{code.co_firstlineno}"

    # Inlined functions are compiled into their callers, never on their own.
    return sorted(name for name, dispatcher in kernel_dispatchers(import_all=True)
                  if dispatcher.targetoptions.get("inline") != "always"
                  and index_name(dispatcher) not in cached and name not in TEST_ONLY_KERNELS)


def run(warm_runs: int = 3, seed: int = 0, keep_cache: bool = False) -> dict:
    """The cold child, then ``warm_runs`` warm children on the same fresh cache.

    Returns
    -------
    dict
        ``cold``: one child's result; ``warm``: a list of them; ``cache_dir``.
    """
    cache_dir = tempfile.mkdtemp(prefix="spatialhash-numba-cache-")
    try:
        cold = run_child("cold", cache_dir, seed)
        cold["kernels_not_cached"] = kernels_not_cached(cache_dir)
        warm = [run_child("warm", cache_dir, seed) for _ in range(warm_runs)]
    finally:
        if not keep_cache:
            shutil.rmtree(cache_dir, ignore_errors=True)
    return {"cold": cold, "warm": warm, "cache_dir": cache_dir}


def cold_table(cold: dict) -> str:
    """Markdown table of the cold child's imports and first calls."""
    from spatialhash._warmup import N_PARALLEL

    rows = [["import numpy + numba", f"{cold['import_numba_numpy_s']:.2f}"],
            ["import spatialhash", f"{cold['import_spatialhash_s']:.2f}"],
            ["numba's target set-up (once per process, any numba code)",
             f"{cold['numba_setup_s']:.2f}"]]
    rows += [[name, f"{seconds:.2f}"] for name, seconds in cold["first_calls_s"].items()]
    parallel = sum(seconds for name, seconds in cold["first_calls_s"].items()
                   if name.startswith(f"{N_PARALLEL:,} points"))
    others = sum(seconds for name, seconds in cold["first_calls_s"].items()
                 if " rays " in name or "DynamicHash" in name)
    total = (cold["import_spatialhash_s"] + cold["numba_setup_s"]
             + sum(cold["first_calls_s"].values()))
    rows.append([f"of which the batch grid's {N_PARALLEL:,}-point calls (multi-threaded paths)",
                 f"{parallel:.2f}"])
    rows.append(["of which rays and the dynamic hash", f"{others:.2f}"])
    rows.append(["total (import spatialhash, numba's set-up, first calls)", f"{total:.2f}"])
    rows.append(["whole process (interpreter start to exit)", f"{cold['process_wall_s']:.2f}"])
    return common.markdown_table(["cold start: step", "seconds"], rows)


def warm_table(warm: list[dict]) -> str:
    """Markdown table of the warm children, one row each."""
    from spatialhash._warmup import N_POINTS

    rows = []
    for number, result in enumerate(warm, start=1):
        first = result["first_calls_s"]
        rows.append([number, f"{result['import_numba_numpy_s']:.3f}",
                     f"{result['import_spatialhash_s']:.3f}", f"{result['numba_setup_s']:.3f}",
                     f"{first['Grid build']:.3f}",
                     f"{first['query_pairs']:.3f}", f"{sum(first.values()):.3f}",
                     f"{result['process_wall_s']:.2f}",
                     f"{result['cache_hits']} / {result['cache_misses']}"])
    return common.markdown_table(
        ["warm run", "import numpy + numba (s)", "import spatialhash (s)",
         "numba's target set-up (s)", "first Grid build (s)", "first query_pairs (s)",
         f"build + query_pairs, {N_POINTS:,} points (s)", "whole process (s)",
         "cache hits / misses"], rows)


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warm-runs", type=int, default=3,
                        help="warm subprocesses after the cold one (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-cache", action="store_true",
                        help="keep the temporary numba cache folder")
    parser.add_argument("--output-json", type=Path, default=None)
    parser.add_argument("--first-calls", action="store_true",
                        help="instead: each query family's first call alone, a fresh process "
                             "and empty cache each, on 1,000 and 60,000 points")
    parser.add_argument("--molecular", action="store_true",
                        help="instead: the molecular lists' first calls, one after another, "
                             "in fresh processes on empty caches")
    parser.add_argument("--runs", type=int, default=3,
                        help="with --molecular: processes per source (default 3)")
    parser.add_argument("--src", nargs="+", default=[str(Path(__file__).resolve().parents[1]
                                                         / "src")],
                        help="with --molecular: the src folders to compare (default this "
                             "checkout's)")
    parser.add_argument("--child", choices=("cold", "warm"), help=argparse.SUPPRESS)
    parser.add_argument("--child-molecular", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-first", nargs=2, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    """Run the benchmark from the command line."""
    args = parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.seed)))
        return 0
    if args.child_first:
        family, n = args.child_first
        print(json.dumps(first_call_child(family, int(n), args.seed)))
        return 0
    if args.child_molecular:
        print(json.dumps(molecular_child(args.seed)))
        return 0
    if args.molecular:
        results = molecular_runs(args.src, args.runs, args.seed)
        print(molecular_tables(results))
        if args.output_json:
            args.output_json.write_text(json.dumps(results, indent=2))
        return 0
    if args.first_calls:
        from spatialhash._warmup import N_PARALLEL, N_POINTS

        rows = first_calls((N_POINTS, N_PARALLEL), args.seed)
        print(first_calls_table(rows))
        if args.output_json:
            args.output_json.write_text(json.dumps(rows, indent=2))
        return 0
    results = run(args.warm_runs, args.seed, args.keep_cache)
    cold = results["cold"]
    print(f"numba cache: {results['cache_dir']}"
          + ("" if args.keep_cache else " (removed afterwards)"))
    print(f"cold start: {cold['cache_misses']} kernel compilations written to the cache")
    missing = cold["kernels_not_cached"]
    print(f"kernels the calls never compiled: {', '.join(missing) if missing else 'none'}"
          f" (test-only kernels left out: {', '.join(sorted(TEST_ONLY_KERNELS))})\n")
    print(cold_table(cold))
    print()
    print(warm_table(results["warm"]))
    if args.output_json:
        args.output_json.write_text(json.dumps(results, indent=2))
        print(f"\nwrote {args.output_json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
