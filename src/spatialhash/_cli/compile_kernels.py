"""``spatialhash compile``: compile every kernel now, into numba's disk cache.

A new user's first calls compile the kernels they reach (under a minute for all of them
on one core; see docs/benchmarks.md), and every later process loads them from the
cache. This runs every query once on generated data (`spatialhash._warmup`), so that the
wait can be paid ahead of time: in an image build, a CI set-up step, or after an upgrade.
The groups of calls run in worker processes, one per core (`spatialhash._compile_jobs`),
then once more here, where every kernel must load from the cache.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from .common import CommandError, add_command, progress
from .info import kernel_cache

DESCRIPTION = (
    "Compile every kernel of spatialhash now (or load it from numba's disk cache, if it is "
    "there already), by running each query once on generated data: the batch grid's "
    "queries on 1,000 and on 60,000 points (the multi-threaded paths), ray casts and the "
    "dynamic hash. Later processes load the kernels from the cache instead of compiling "
    "them on their first calls. The cache is the one `spatialhash info` shows "
    "(NUMBA_CACHE_DIR, or __pycache__ next to the sources); numba keys it by CPU, so fill "
    "it on the kind of machine that will use it. The four groups of calls run in parallel "
    "worker processes (--jobs), then once more in this process, which checks that every "
    "kernel loads from the cache (and compiles any that does not)."
)


def add_parser(subparsers) -> None:
    """Add ``compile`` to the command line's ``subparsers``."""
    parser = add_command(subparsers, "compile", run,
                         "compile every kernel into the cache now", DESCRIPTION)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: seconds per call, total, kernels "
                             "compiled and loaded, cache")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--jobs", type=int, default=None,
                        help="worker processes compiling at once (default: one per core, at "
                             "most one per group of calls, 4); 1 runs every call in this "
                             "process")


def _default_jobs(n_groups: int) -> int:
    """One worker per CPU this process may use (affinity and CPU quota), at most one a group."""
    from .._threads import process_cpus

    return max(1, min(process_cpus(), n_groups))


def run(args: argparse.Namespace) -> int:
    """``spatialhash compile``."""
    from .. import _compile_jobs
    from .._warmup import CALL_GROUPS, cache_counts, warm_up_calls

    if args.jobs is not None and args.jobs < 1:
        raise CommandError(f"--jobs must be at least 1; got {args.jobs}.")
    # The progress counter says what is compiling: no per-family notices here or in the
    # workers (which inherit the environment). Every thread whatever the load: on a busy
    # machine the calls would otherwise run on one thread and skip the kernels that only
    # multi-threaded paths compile.
    os.environ["SPATIALHASH_COMPILE_NOTICE"] = "0"
    os.environ["SPATIALHASH_ADAPT_THREADS"] = "0"
    from .._threads import adapts_to_load

    adapts_to_load.cache_clear()
    n_jobs = args.jobs if args.jobs is not None else _default_jobs(len(CALL_GROUPS))
    if n_jobs > 1 and not _compile_jobs.can_run_jobs():
        n_jobs = 1  # no lock for the workers' cache saves here: one process
    calls = warm_up_calls()
    before = cache_counts()
    seconds = {}
    worker_counts = {"compiled": 0, "loaded": 0}
    start = time.perf_counter()
    with progress(args.quiet or args.json, total=len(calls) * (2 if n_jobs > 1 else 1),
                  unit="call", desc="compiling kernels") as bar:
        if n_jobs > 1:
            def on_call(name: str, call_seconds: float) -> None:
                seconds[name] = call_seconds
                bar.update()

            try:
                worker_counts = _compile_jobs.run_groups(list(CALL_GROUPS), n_jobs, 0, on_call)
            except RuntimeError as error:
                raise CommandError(str(error)) from error
        workers_s = time.perf_counter() - start
        # Here every call again: with workers, a check that each kernel loads from the
        # cache (and the compile of any that does not).
        for name, call in calls:
            call_start = time.perf_counter()
            call()
            if n_jobs == 1:
                seconds[name] = time.perf_counter() - call_start
            bar.update()
    total = time.perf_counter() - start
    folder, n_cached = kernel_cache()
    # This process's counts from here on (a caller may have compiled kernels before).
    counts = {key: value - before[key] for key, value in cache_counts().items()}
    compiled = worker_counts["compiled"] + counts["cache_misses"]
    if args.json:
        report = {"calls_s": {name: seconds[name] for name, _ in calls}, "total_s": total,
                  "jobs": n_jobs, "compiled": compiled,
                  "loaded": worker_counts["loaded"] + counts["cache_hits"],
                  "kernel_cache": folder, "cached_kernels": n_cached}
        if n_jobs > 1:
            report["workers_s"] = workers_s
            report["check"] = {"loaded": counts["cache_hits"],
                               "compiled": counts["cache_misses"]}
        print(json.dumps(report, indent=2))
    elif n_jobs == 1:
        print(f"ran {len(calls)} calls in {total:.1f} s: {counts['cache_misses']} kernels "
              f"compiled, {counts['cache_hits']} loaded from the cache; kernel cache: "
              f"{folder} ({n_cached} cached kernels)")
    else:
        print(f"ran {len(calls)} calls in {n_jobs} worker processes in {workers_s:.1f} s: "
              f"{worker_counts['compiled']} kernels compiled, {worker_counts['loaded']} "
              f"loaded from the cache; then here in {total - workers_s:.1f} s: "
              f"{counts['cache_hits']} loaded, {counts['cache_misses']} compiled; kernel "
              f"cache: {folder} ({n_cached} cached kernels)")
    return 0
