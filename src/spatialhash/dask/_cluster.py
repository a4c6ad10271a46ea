"""What the engine asks of the Dask cluster: memory and threads per worker, and compiled
kernels on every worker.

Kernels. A worker process that meets a kernel for the first time compiles it (tens of
seconds for the pair, radius and k-nearest families together) unless numba's disk cache
holds it. `KernelCache` is a worker plugin: when a worker starts (or when the plugin is
registered, on every running worker) it runs the calls that reach the engine's kernels,
under a file lock in the cache directory, so the workers of one machine compile each
kernel once between them and the others load it from the cache that first one filled
(one to two seconds). Workers on other machines do the same with their own cache, or
load a shared one (``NUMBA_CACHE_DIR`` on a shared file system).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

#: Memory a worker holds besides its tile (the interpreter, numpy, numba, pandas, dask).
WORKER_BASE_BYTES = 400 << 20
#: Bytes a tile needs per row it holds (the shuffled rows, their sorted copies, the grid,
#: a chunk of pairs): `benchmarks/bench_dask.py` at 1e8 points saw a worker peak at
#: 1.65 GiB with tiles of up to 3.4 million rows, about 350 bytes a row above the base.
BYTES_PER_TILE_ROW = 400
#: The memory per worker assumed without a distributed cluster.
DEFAULT_MEMORY = 2 << 30
#: Tiles hold at least this many rows, however many threads there are: a smaller tile
#: costs more in ghosts and task overhead than it gains in balance.
MIN_TILE_ROWS = 50_000
#: Tiles per thread of the cluster, at least, when the data allow (`MIN_TILE_ROWS`): a
#: worker that finishes early takes another tile.
TILES_PER_THREAD = 2
PLUGIN_NAME = "spatialhash-kernels"


def current_client():
    """The distributed client in use, or None (the local schedulers)."""
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


def memory_per_worker(client) -> int:
    """The memory of the smallest worker divided by its threads; `DEFAULT_MEMORY` without
    a cluster or when workers have no limit."""
    if client is None:
        return DEFAULT_MEMORY
    workers = client.scheduler_info().get("workers", {}).values()
    budgets = [w["memory_limit"] // max(w.get("nthreads", 1), 1)
               for w in workers if w.get("memory_limit")]
    return min(budgets) if budgets else DEFAULT_MEMORY


def rows_per_tile(memory: int) -> int:
    """The rows a tile may hold within ``memory`` bytes of a worker."""
    return max(MIN_TILE_ROWS, (int(memory) - WORKER_BASE_BYTES) // BYTES_PER_TILE_ROW)


def total_threads(client) -> int:
    """Threads that run tasks at once: the cluster's, or this machine's cores."""
    if client is None:
        return os.cpu_count() or 1
    workers = client.scheduler_info().get("workers", {}).values()
    return max(1, sum(w.get("nthreads", 1) for w in workers))


def tile_threads() -> int | None:
    """Threads for a tile's grid: the worker's share of its machine's cores inside a
    distributed worker (so workers do not oversubscribe), else numba's default."""
    try:
        from distributed import get_worker
        worker = get_worker()
    except (ImportError, ValueError):
        return None
    return max(1, worker.state.nthreads)


@contextlib.contextmanager
def _cache_lock() -> Iterator[None]:
    from numba.core.config import CACHE_DIR

    directory = CACHE_DIR or os.path.join(os.path.expanduser("~"), ".cache")
    os.makedirs(directory, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, each worker compiles what it lacks
        yield
        return
    with open(os.path.join(directory, ".spatialhash-compile.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def warm_kernels() -> list[str]:
    """Run the calls that reach the engine's kernels (pairs, radius, k-nearest, small and
    multi-threaded), under the machine's compile lock; returns their names."""
    from .. import _warmup

    wanted = ("Grid build", "query_pairs", "iter_pairs", "query_radius", "query_knn",
              "periodic build")
    calls = [(name, call) for name, call in [*_warmup.small_calls(), *_warmup.parallel_calls()]
             if any(name.split(": ")[-1].startswith(w) for w in wanted)]
    with _cache_lock():
        for _, call in calls:
            call()
    return [name for name, _ in calls]


def kernel_plugin():
    """The worker plugin that warms the kernels (needs ``distributed``)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class KernelCache(WorkerPlugin):
        """Warm spatialhash's kernels on each worker, once per machine's cache."""

        name = PLUGIN_NAME

        def setup(self, worker) -> None:
            warm_kernels()

    return KernelCache()


def prepare(client) -> None:
    """Register the kernel plugin on ``client``'s cluster (once; a no-op without one)."""
    if client is None:
        return
    if PLUGIN_NAME in getattr(client, "_spatialhash_plugins", set()):
        return
    client.register_plugin(kernel_plugin(), name=PLUGIN_NAME)
    client._spatialhash_plugins = {PLUGIN_NAME}
