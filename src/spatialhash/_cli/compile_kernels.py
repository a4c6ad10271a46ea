"""``spatialhash compile``: compile every kernel now, into numba's disk cache.

A new user's first calls compile the kernels they reach (minutes for all of them; see the
README's "Compile time"), and every later process loads them from the cache. This runs
every query once on generated data (`spatialhash._warmup`), so that the wait can be paid
ahead of time: in an image build, a CI set-up step, or after an upgrade.
"""

from __future__ import annotations

import argparse
import json
import time

from .common import progress
from .info import kernel_cache

DESCRIPTION = (
    "Compile every kernel of spatialhash now (or load it from numba's disk cache, if it is "
    "there already), by running each query once on generated data: the batch grid's "
    "queries on 1,000 and on 60,000 points (the multi-threaded paths), ray casts and the "
    "dynamic hash. Later processes load the kernels from the cache instead of compiling "
    "them on their first calls. The cache is the one `spatialhash info` shows "
    "(NUMBA_CACHE_DIR, or __pycache__ next to the sources); numba keys it by CPU, so fill "
    "it on the kind of machine that will use it."
)


def add_parser(subparsers) -> None:
    """Add ``compile`` to the command line's ``subparsers``."""
    parser = subparsers.add_parser("compile", help="compile every kernel into the cache now",
                                   description=DESCRIPTION)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: seconds per call, total, kernels "
                             "compiled and loaded, cache")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run, prog=parser.prog)


def run(args: argparse.Namespace) -> int:
    """``spatialhash compile``."""
    from .._warmup import cache_counts, warm_up_calls

    calls = warm_up_calls()
    before = cache_counts()
    seconds = {}
    start = time.perf_counter()
    with progress(args.quiet or args.json, total=len(calls), unit="call",
                  desc="compiling kernels") as bar:
        for name, call in calls:
            call_start = time.perf_counter()
            call()
            seconds[name] = time.perf_counter() - call_start
            bar.update()
    total = time.perf_counter() - start
    folder, n_cached = kernel_cache()
    # This process's counts from here on (a caller may have compiled kernels before).
    counts = {key: value - before[key] for key, value in cache_counts().items()}
    if args.json:
        print(json.dumps({"calls_s": seconds, "total_s": total,
                          "compiled": counts["cache_misses"], "loaded": counts["cache_hits"],
                          "kernel_cache": folder, "cached_kernels": n_cached}, indent=2))
    else:
        print(f"ran {len(calls)} calls in {total:.1f} s: {counts['cache_misses']} kernels "
              f"compiled, {counts['cache_hits']} loaded from the cache; kernel cache: "
              f"{folder} ({n_cached} cached kernels)")
    return 0
