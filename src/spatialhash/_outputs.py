"""Memory for large query results and grids, recycled from earlier ones nobody holds.

Why: a result of a few hundred megabytes (the pairs of a million points, the rows of a
million radius queries) is too large for the C allocator to keep, and so, often, are the
tens of megabytes of a grid's sorted points: memory of that size comes from the
operating system and goes back to it when freed, so each call pays for fresh pages,
zeroed by the kernel and, where NumPy asks for huge pages, assembled anew. Back to back,
the pages just given back come again at once; after the program has been idle or has
used memory elsewhere, finding them can cost far more (the idle-gap mode of
``benchmarks/bench_ab.py`` and ``bench_batch.py`` measures both). A program that
searches in a loop drops each answer, and each grid, before it asks for the next: their
memory can serve the next ones as it is, already paged in.

How: `empty` hands out arrays over blocks of memory. While any array over a block (a
result, a slice of it, a view, a grid's state) is alive, the block is leased: the arrays'
base is a `_Lease`, and nothing else writes to the block. When the last of them goes,
the lease dies and its block returns to the pool, where the next request of about its
size takes it. So an answer never shares memory with a later one. A request that no
pooled block fits allocates afresh, and releases the pooled blocks smaller than itself;
between calls the pool keeps at most `MAX_BLOCKS` blocks and `MAX_POOLED_BYTES` bytes
(`release` gives them back). A loop whose calls ask for the same sizes holds no more
memory at its peak than without the pool. Requests under `MIN_BYTES` go to NumPy.
``SPATIALHASH_RECYCLE_OUTPUTS=0`` in the environment turns the pool off.
"""

from __future__ import annotations

import collections
import math
import os
import threading
import weakref

import numpy as np

#: Requests of fewer bytes are NumPy's own: the C allocator serves them from memory it
#: keeps. Larger ones it may take from the kernel afresh, and give back when freed.
MIN_BYTES = 1 << 20
#: A pooled block serves a request of at least this share of its size: a result holds
#: its whole block, and should not hold much more than it uses.
MIN_FILL = 0.8
#: Blocks the pool keeps between calls: the parallel build of a dense grid takes up to
#: nine (its sorted points, their order, its four arrays of cells, and three of
#: scratch), a query's answer two (indices and distances), its scratch a few more...
MAX_BLOCKS = 16
#: ...and at most this many bytes in all, the oldest blocks going first.
MAX_POOLED_BYTES = 1 << 30
#: Whether the pool is used (``SPATIALHASH_RECYCLE_OUTPUTS=0`` turns it off).
ENABLED = os.environ.get("SPATIALHASH_RECYCLE_OUTPUTS", "1") != "0"

_lock = threading.Lock()
#: Blocks (1-D uint8 arrays) that no result uses, oldest first.
_free: list[np.ndarray] = []
#: Blocks whose last array has gone, not yet in `_free`. The finalizer that returns a
#: block runs wherever the last array goes, which may be a garbage collection inside this
#: module's own locked code: it only appends here (atomic, no lock), and the next user of
#: the pool moves them under the lock.
_returned: collections.deque = collections.deque()


def _after_fork_in_child() -> None:
    """A new lock in a forked child: the parent's may have been held by another thread
    at the fork, and would never be released in the child."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _Lease:
    """The base of the arrays over a block: alive while any of them is. Its finalizer
    gives the block back to the pool."""

    __slots__ = ("__array_interface__", "__weakref__")


def empty(shape, dtype) -> np.ndarray:
    """An uninitialized array like ``np.empty(shape, dtype)``, over a recycled block of
    memory when it is large (see the module's docstring)."""
    # Cheap for small requests: many queries are small, and called often.
    n_bytes = (math.prod(shape) if isinstance(shape, tuple) else int(shape)) * np.dtype(
        dtype).itemsize
    if n_bytes < MIN_BYTES or not ENABLED:
        return np.empty(shape, dtype)
    block = _take(n_bytes)
    if block is None:
        block = np.empty(n_bytes, np.uint8)
    lease = _Lease()
    lease.__array_interface__ = {"shape": (n_bytes,), "typestr": "|u1", "version": 3,
                                 "data": (block.ctypes.data, False)}
    finalizer = weakref.finalize(lease, _give_back, block)
    finalizer.atexit = False
    return np.asarray(lease).view(dtype).reshape(shape)


def release() -> int:
    """Give every pooled block back (to NumPy, and so to the operating system); returns
    the bytes released."""
    with _lock:
        _collect_returned()
        blocks = _free[:]
        _free.clear()
    return sum(block.nbytes for block in blocks)


def pooled_bytes() -> int:
    """Bytes the pool holds for later results."""
    with _lock:
        _collect_returned()
        return sum(block.nbytes for block in _free)


def _take(n_bytes: int) -> np.ndarray | None:
    """The smallest pooled block that serves ``n_bytes``, out of the pool; or None, after
    releasing the pooled blocks too small for it (the caller allocates afresh; a result
    that grew from call to call leaves no stale block behind)."""
    with _lock:
        _collect_returned()
        fits = [k for k, block in enumerate(_free)
                if MIN_FILL * block.nbytes <= n_bytes <= block.nbytes]
        if fits:
            return _free.pop(min(fits, key=lambda k: _free[k].nbytes))
        dropped = [block for block in _free if block.nbytes < n_bytes]
        _free[:] = [block for block in _free if block.nbytes >= n_bytes]
    del dropped  # freed outside the lock
    return None


def _give_back(block: np.ndarray) -> None:
    """``block``'s last array has gone: queue it for the pool (see `_returned`), and move
    it there at once, within the pool's limits, unless the lock is taken (then the next
    user of the pool does)."""
    _returned.append(block)
    if _lock.acquire(blocking=False):
        try:
            _collect_returned()
        finally:
            _lock.release()


def _collect_returned() -> None:
    """Move the returned blocks into the pool, under the lock; the oldest blocks beyond
    `MAX_BLOCKS` or `MAX_POOLED_BYTES` go (freeing a block runs no finalizer: blocks are
    plain arrays)."""
    while _returned:
        _free.append(_returned.popleft())
    total = sum(pooled.nbytes for pooled in _free)
    n_dropped = 0
    while len(_free) - n_dropped > MAX_BLOCKS or total > MAX_POOLED_BYTES:
        total -= _free[n_dropped].nbytes
        n_dropped += 1
    del _free[:n_dropped]
