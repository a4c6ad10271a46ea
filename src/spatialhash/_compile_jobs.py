"""`spatialhash compile --jobs`: the warm-up calls' groups compiled in worker processes.

Numba compiles in the calling thread, one function at a time, so a compile of every kernel
uses one core. The groups of `spatialhash._warmup.CALL_GROUPS` share no data, so each can
run in a process of its own, all writing to the one disk cache.

Numba writes each cache file to a temporary name and renames it, so no reader sees a half
file; but a save reads the function's index, adds its entry, then writes the index and the
data file, and two processes saving two signatures of one function at once could each
write an index without the other's entry, or both pick the same data file name. The
workers therefore hold an exclusive lock on a file in the cache folder around every save
(`_numba_internals.lock_cache_saves`). Where that lock cannot be had (no ``fcntl``, or a
numba whose cache class has changed) the command runs the calls in its own process
instead.

After the workers, the command runs every call once more in its own process: each kernel
must then load from the cache, and one that does not (a worker killed, say) is compiled
there, so the cache ends complete whatever happened in the workers.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

#: The lock file the workers take around each cache save, in the folder being written.
LOCK_NAME = ".spatialhash-compile.lock"


def can_run_jobs() -> bool:
    """Whether workers can lock the cache around their saves here."""
    from ._numba_internals import can_lock_cache_saves

    return can_lock_cache_saves()


def run_groups(groups: list[str], n_jobs: int, seed: int,
               on_call: Callable[[str, float], None]) -> dict[str, int]:
    """Run the call groups named ``groups`` in up to ``n_jobs`` worker processes at once,
    in the order given (`CALL_GROUPS` lists the largest first), calling
    ``on_call(name, seconds)`` as each call ends.

    Returns the kernels the workers compiled and loaded (``compiled``, ``loaded``).
    Raises `RuntimeError` with a worker's error output when one fails, once the other
    workers are stopped.
    """
    events: queue.Queue = queue.Queue()
    pending = list(groups)
    running = 0
    workers: list[subprocess.Popen] = []
    totals = {"compiled": 0, "loaded": 0}

    def start(group: str) -> None:
        # Errors go to a file, not a pipe: a worker that wrote much there while this
        # process reads its output would block on a full pipe.
        errors = tempfile.TemporaryFile(mode="w+")
        worker = subprocess.Popen([sys.executable, "-m", __name__, group, str(seed)],
                                  stdout=subprocess.PIPE, stderr=errors, text=True)
        workers.append(worker)

        def read() -> None:
            with worker, errors:
                for line in worker.stdout:
                    events.put(("line", group, line))
                status = worker.wait()
                errors.seek(0)
                events.put(("end", group, (status, errors.read())))

        threading.Thread(target=read, daemon=True).start()

    while pending or running:
        while pending and running < n_jobs:
            start(pending.pop(0))
            running += 1
        kind, group, payload = events.get()
        if kind == "line":
            record = json.loads(payload)
            if "call" in record:
                on_call(record["call"], record["seconds"])
            else:
                totals["compiled"] += record["compiled"]
                totals["loaded"] += record["loaded"]
        else:
            running -= 1
            status, errors = payload
            if status != 0:
                for other in workers:
                    other.kill()  # no effect on those that have ended
                raise RuntimeError(f"the worker compiling {group!r} failed (exit status "
                                   f"{status}):\n{errors.strip()}")
    return totals


def _worker(group: str, seed: int) -> None:
    """Run one group's calls, printing a JSON line per call and one of cache counts."""
    from ._numba_internals import lock_cache_saves
    from ._warmup import CALL_GROUPS, cache_counts

    lock_cache_saves(LOCK_NAME)

    for name, call in CALL_GROUPS[group](seed):
        start = time.perf_counter()
        call()
        print(json.dumps({"call": name, "seconds": time.perf_counter() - start}), flush=True)
    counts = cache_counts()
    print(json.dumps({"compiled": counts["cache_misses"], "loaded": counts["cache_hits"]}),
          flush=True)


if __name__ == "__main__":
    _worker(sys.argv[1], int(sys.argv[2]))
