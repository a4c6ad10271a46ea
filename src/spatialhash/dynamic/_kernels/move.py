"""Bulk moves of the dynamic hash on all threads, while its bucket lists are dropped, and
the rebuild of those lists on all threads.

`storage.place_many` moves objects one after the other and keeps the bucket lists, the
per-level counts and the per-level boxes of cells up to date. A bulk move of many objects
drops the bucket lists (``status[0] == 0``; see `DynamicHash.move_many`), and then each
object's work touches only its own rows (distinct slots: the caller checked the ids) but
for the counts and the boxes of cells. Here the objects are cut into chunks; each chunk
writes its objects' rows and keeps its own count changes and boxes, which are added up in
chunk order afterwards: sums and min/max, so the storage ends byte for byte as
`place_many` leaves it, for any number of chunks.

`move_chunk` has `place_many`'s loop, built of the same helpers (inlined by numba), rather
than the chunks calling `place_many` with their own counts and boxes (through
`storage.set_cells`): that made a bulk move of `benchmarks/bench_dynamic.py`'s 100,000
boxes about 13% slower (ad hoc, the two versions alternately in one process).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..._config import jit, jit_parallel
from .state import BOUNDS, HEAD, INV_SIZE, LEVEL_COUNT, LINKS, META, SPHERES
from .storage import (
    LEVEL,
    fit_level_cells,
    grow_level_cells,
    has_cells,
    link_range,
    object_cells,
    reset_level_cells,
    write_cells,
    write_shape,
)


@jit
def move_chunk(objects, inv_size, changed, slots, new_bounds, new_spheres, level_change,
               cells):
    """Move the objects of a chunk: ``slots``, rows of ``new_bounds`` and ``new_spheres``
    (empty for boxes and points only), as `storage.place_many` does; count changes per
    level go to ``level_change``, the cell ranges of changed objects widen ``cells``
    (``(n_levels, 6)``, like ``level_cells``) and their ``changed`` flags are set (as
    `storage.set_cells` does). Returns how many changed cells."""
    bounds = objects[BOUNDS]
    spheres = objects[SPHERES]
    meta = objects[META]
    boxes_only = new_spheres.shape[0] == 0
    n_changed = 0
    for i in range(slots.shape[0]):
        slot = slots[i]
        was_sphere = write_shape(bounds, spheres, slot, new_bounds, new_spheres, i, boxes_only)
        new_cells = object_cells(
            inv_size, new_bounds[i, 0], new_bounds[i, 1], new_bounds[i, 2], new_bounds[i, 3],
            new_bounds[i, 4], new_bounds[i, 5])
        if has_cells(meta, slot, new_cells):
            if was_sphere != (spheres[slot, 3] >= 0.0):
                changed[slot] = 1
            continue
        n_changed += 1
        changed[slot] = 1
        level_change[meta[slot, LEVEL]] -= 1
        level_change[new_cells[0]] += 1
        write_cells(meta, slot, new_cells)
        grow_level_cells(cells, new_cells)
    return n_changed


@jit
def merge_chunks(level_count, level_cells, level_change, cells):
    """Add each chunk's count changes and widen the boxes of cells by its boxes."""
    for k in range(level_change.shape[0]):
        for level in range(level_count.shape[0]):
            level_count[level] += level_change[k, level]
            for axis in range(3):
                level_cells[level, axis] = min(level_cells[level, axis], cells[k, level, axis])
                level_cells[level, axis + 3] = max(level_cells[level, axis + 3],
                                                   cells[k, level, axis + 3])


@jit_parallel
def move_many_unlinked(objects, cells, level_cells, changed, slots, new_bounds, new_spheres,
                       n_chunks):
    """`storage.place_many` for objects already placed (distinct ``slots``) while the
    bucket lists are dropped, on all threads; the same storage afterwards. Returns how
    many objects changed cells."""
    inv_size = cells[INV_SIZE]
    level_count = cells[LEVEL_COUNT]
    m = slots.shape[0]
    n_levels = level_count.shape[0]
    level_change = np.zeros((n_chunks, n_levels), np.int64)
    chunk_cells = np.empty((n_chunks, n_levels, 6), np.int64)
    n_changed = np.zeros(n_chunks, np.int64)
    for k in prange(n_chunks):
        # `prange` indices are unsigned: int64 for the slices below.
        chunk = np.int64(k)
        begin = chunk * m // n_chunks
        end = (chunk + 1) * m // n_chunks
        reset_level_cells(chunk_cells[chunk])
        # An empty ``new_spheres`` (boxes only) stays empty when cut.
        n_changed[chunk] = move_chunk(
            objects, inv_size, changed, slots[begin:end], new_bounds[begin:end],
            new_spheres[begin:end], level_change[chunk], chunk_cells[chunk])
    merge_chunks(level_count, level_cells, level_change, chunk_cells)
    return n_changed.sum()


@jit_parallel
def relink_all_parallel(objects, cells, level_cells, n_parts):
    """`storage.relink_all` on all threads: the buckets cut into ``n_parts`` ranges, each
    linked by one thread (every thread reads every object and links the entries of its
    buckets). A list is built by one thread, objects in slot order, so the lists are
    those of `relink_all`, for any number of parts. For 100,000 boxes two threads take
    about two thirds of the time of one (ad hoc)."""
    meta = objects[META]
    links = cells[LINKS]
    head = cells[HEAD]
    head[:] = -1
    n_buckets = head.shape[0]
    for k in prange(n_parts):
        link_range(meta, links, head, k * n_buckets // n_parts,
                   (k + 1) * n_buckets // n_parts)
    fit_level_cells(meta, level_cells)
