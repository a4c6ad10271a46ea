"""A short line on stderr when a first call is about to compile kernels, so a wait is explained.

Numba compiles a kernel on its first call in a process whose disk cache lacks it: seconds
for each family of queries, once per machine (later processes load it from the cache).
Without a word, a new user's first ``query_pairs`` looks hung. Numba fires a
``"numba:compile"`` event only when it compiles (never when it loads from the cache), so
a listener costs nothing on a warm start. The listener prints one short line per family
of kernels per process, at the first compile of that family, naming it and about how long
it took on an idle 2-core development machine (`FAMILY_SECONDS`); the advice (the disk
cache, ``spatialhash compile``, how to hide the lines) follows the first of them, once per
process (`ADVICE`). A wait of that size is numba's typing and lowering of the kernels, in
Python, and LLVM's optimization, on one core: the whole set takes tens of seconds, which
``spatialhash compile`` pays ahead of time.

``SPATIALHASH_COMPILE_NOTICE=0`` in the environment silences it.
"""

from __future__ import annotations

import os
import sys
import threading

from numba.core import event

#: Kernel module (the last part of its name) -> the family a notice names.
FAMILIES = {
    "build": "the grid build", "build_parallel": "the grid build", "cells": "the grid build",
    "state": "the grid build", "indirect": "the grid build", "points": "the grid build",
    "heap": "k-nearest queries", "shapes": "the dynamic hash",
    "pairs": "the pair search", "pair_scan": "the pair search", "stencil": "the pair search",
    "regions": "the pair search", "radius": "radius queries",
    "neighbor_list": "the neighbour list", "molecular": "the molecular neighbour list",
    "molecular_list": "the molecular neighbour list",
    "molecular_sort": "the molecular neighbour list",
    "molecular_rows": "the molecular neighbour list",
    "prefetch": "the molecular neighbour list",
    "molecular_state": "the molecular neighbour list",
    "knn": "k-nearest queries",
    "box": "box queries", "ray": "ray casts", "dda": "ray casts", "ray_sphere": "ray casts",
    "distance": "the distance step", "row_sort": "radius queries", "blocks": "radius queries",
    "chunks": "radius queries",
    "_cloth_kernels": "the cloth demo", "_particle_kernels": "the particle demo",
    "pair_functions": "functions run over pairs",
    "neighbor_list_functions": "functions run over pairs",
    "ray_functions": "functions run over ray hits",
}
#: Families compiled for each new user function (`Grid.for_each_pair`'s ``fn``, the ``fn``
#: of `Grid.query_ray` and `DynamicHash.query_ray`) and never cached on disk: their notice
#: says so instead of pointing to the cache.
PER_FUNCTION_FAMILIES = {"functions run over pairs", "functions run over ray hits"}

#: Seconds a family's first call spent compiling, from an empty cache, in a fresh process,
#: on 1,000 and on 60,000 points (the multi-threaded drivers too), on the 2-core development
#: machine (``benchmarks/bench_compile.py --first-calls``; the grid build's own seconds are
#: apart, and a dynamic hash's first insert and pairs are one). Families not measured there
#: get no figure.
FAMILY_SECONDS = {
    "the grid build": (2, 5), "the pair search": (8, 11), "radius queries": (8, 12),
    "k-nearest queries": (8, 9), "box queries": (6, 8), "ray casts": (7, 8),
    "the dynamic hash": (11, 12),
    # Not from that script: `Grid.for_each_pair` with a new ``fn``, first call less the
    # second, in a fresh process on an empty cache (its cell helpers compile too).
    "functions run over pairs": (3, 4),
    # Likewise: `Grid.query_ray` with a new ``fn``, 100 and 5,000 rays (one thread, the
    # multi-threaded driver); `DynamicHash.query_ray`'s falls within the same range.
    "functions run over ray hits": (2, 4),
}


def family_of(module_name: str) -> str | None:
    """The family of a kernel defined in ``module_name``, or ``None`` if not ours."""
    if not module_name.startswith("spatialhash."):
        return None
    last = module_name.rpartition(".")[2]
    if module_name.startswith("spatialhash.dynamic.") and (
            FAMILIES.get(last) not in PER_FUNCTION_FAMILIES):
        return "the dynamic hash"
    return FAMILIES.get(last, "spatialhash's kernels")


def notice(family: str) -> str:
    """The line printed for ``family``."""
    seconds = FAMILY_SECONDS.get(family)
    about = f" (about {seconds[0]}-{seconds[1]} s)" if seconds else ""
    if family in PER_FUNCTION_FAMILIES:
        return f"spatialhash: compiling {family} for a new `fn`{about}"
    return f"spatialhash: compiling {family}, once{about}"


#: Printed after the first notice of a process.
ADVICE = ("spatialhash: compiled kernels stay in numba's disk cache, so later runs skip "
          "this (a new `fn` excepted); `spatialhash compile` compiles ahead of time; "
          "SPATIALHASH_COMPILE_NOTICE=0 hides these lines.")


class CompileNotices(event.Listener):
    """Prints `notice` to ``stream`` at the first compile of each family, and `ADVICE` after
    the first notice (see the module docstring); compiles nested in another (a kernel's
    callees) add nothing."""

    def __init__(self, stream=None):
        self._stream = stream
        self._announced = set()
        self._lock = threading.Lock()
        self._depth = threading.local()

    def on_start(self, event_):
        depth = getattr(self._depth, "value", 0)
        self._depth.value = depth + 1
        if depth or os.environ.get("SPATIALHASH_COMPILE_NOTICE", "1") == "0":
            return
        dispatcher = event_.data.get("dispatcher")
        function = getattr(dispatcher, "py_func", None)
        family = family_of(getattr(function, "__module__", "") or "")
        if family is None:
            return
        with self._lock:
            if family in self._announced:
                return
            first = not self._announced
            self._announced.add(family)
        stream = self._stream if self._stream is not None else sys.stderr
        print(notice(family), file=stream, flush=True)
        if first:
            print(ADVICE, file=stream, flush=True)

    def on_end(self, event_):
        self._depth.value = max(0, getattr(self._depth, "value", 1) - 1)


_listener = CompileNotices()


def install() -> None:
    """Listen to numba's compile events (once per process)."""
    if not getattr(install, "done", False):
        event.register("numba:compile", _listener)
        install.done = True
