"""The dense build on every thread: the same cells, order and sorted points as `build`.

A stable counting sort is unique: whatever way the points are cut into chunks, sorting
them by cell and keeping equal keys in index order gives one permutation. So the chunks
may follow the thread count and the grid is still identical, byte for byte, to the one
the sequential `build.dense_build` makes.

The sort is by the cell's linear index in the box of cells (row-major, x fastest), whose
order is that of the occupied-cell ids. Four passes:

1. per point, its linear index (parallel over points);
2. per chunk of points, a histogram of linear indices (parallel over chunks);
3. one sequential sweep over the box of cells: where each chunk's points of each cell go,
   the dense lookup and offsets, the occupied cells' coordinates;
4. per chunk, its points scattered to their places (parallel over chunks), then the
   coordinates gathered in sorted order (parallel over points).

The histograms hold ``n_chunks * n_linear`` counts, so the caller takes this path only
when that is small next to the number of points.

The kernels allocate nothing that grows with the points or the cells: the caller passes
every array, to be written whole, so that a build of many points takes them from the
memory recycled from earlier grids (`_outputs`) rather than from fresh pages. So the
build is two kernels, `dense_cells_parallel` up to the count of occupied cells, and
`dense_sort_parallel` into the arrays that count sizes.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..._config import jit, jit_parallel, jit_variant
from . import build
from .build import linear_cell, query_keys


@jit_parallel
def dense_cells_parallel(points3, origin, inv_cell_size, n_periodic, n_cells, linear, counts,
                         dense_start, dense_lookup):
    """Passes 1 and 2 of the dense build of ``points3`` (n, d), d <= 3, and the cells of
    pass 3 (see the module docstring): returns the number of occupied cells, which the
    caller needs to size the arrays of `dense_sort_parallel`.

    ``n_cells`` must cover every point's cell coordinate (the caller derives it from the
    largest coordinate with the same arithmetic); periodic axes (``n_periodic > 0``) clamp
    as in `build.cell_coords_of`. Every array comes from the caller, uninitialized
    (recycled, see `_outputs`), and is written whole: ``linear`` (n,) int64, each point's
    linear index; ``counts`` (n_chunks, n_linear) int64, where chunk ``k``'s points of each
    cell go (`chunk_starts`); ``dense_start`` (n_linear + 1,) and ``dense_lookup``
    (n_linear,) int64, as in `GridState`, equal to `build.dense_build`'s.
    """
    n = points3.shape[0]
    n_linear = dense_lookup.shape[0]
    for i in prange(n):
        # As int64: a `prange` index is unsigned, and the helper would compile twice.
        linear[i] = linear_cell(points3, np.int64(i), origin, inv_cell_size, n_periodic,
                                n_cells)

    chunk_histograms(linear, counts)

    # counts[k, key] becomes where chunk k writes its first point of cell `key`.
    chunk_starts(counts, dense_start)
    n_occupied = 0
    for key in range(n_linear):
        if dense_start[key + 1] > dense_start[key]:
            dense_lookup[key] = n_occupied
            n_occupied += 1
        else:
            dense_lookup[key] = -1
    return n_occupied


@jit  # its parallel loops are in the kernels it calls
def dense_sort_parallel(points3, n_cells, linear, counts, dense_start, dense_lookup,
                        cell_start, cell_coords, permutation, columns):
    """The rest of the dense build after `dense_cells_parallel` (its ``linear``,
    ``counts``, ``dense_start`` and ``dense_lookup``): the occupied cells' ``cell_start``
    (n_occupied + 1,) and ``cell_coords`` (n_occupied, 3) int64, then pass 4, the points'
    ``permutation`` (n,) int64 and their sorted ``columns`` (3, n) float64, all written
    whole into the caller's arrays (see `GridState` and `build.sort_points`); ``counts``
    is used up. Equal to `build.dense_build`'s."""
    n = linear.shape[0]
    nx, ny = n_cells[0], n_cells[1]
    n_occupied = cell_coords.shape[0]
    for key in range(dense_lookup.shape[0]):
        cell = dense_lookup[key]
        if cell >= 0:
            cell_start[cell] = dense_start[key]
            cell_coords[cell, 0] = key % nx
            cell_coords[cell, 1] = (key // nx) % ny
            cell_coords[cell, 2] = key // (nx * ny)
    cell_start[n_occupied] = n
    chunk_scatter(linear, counts, permutation)
    gather_columns_parallel(points3, permutation, columns)


@jit  # its parallel loops are in the kernels it calls
def sort_points_parallel(points3, cell_id, counts, cell_start, permutation, columns):
    """`build.sort_points` on every thread (the sparse build): the same ``cell_start``,
    ``permutation`` and ``columns``, a stable counting sort being unique, from per-chunk
    histograms of the cell ids, all written into the caller's arrays, uninitialized
    (recycled, see `_outputs`): ``counts`` (n_chunks, n_occupied) int64 (scratch),
    ``cell_start`` (n_occupied + 1,) int64, and ``permutation`` and ``columns`` as
    `dense_sort_parallel` takes them. A million points and one far outlier, the whole
    build: 17% less time than with `build.sort_points` (two threads, one process,
    alternated, medians of 10)."""
    chunk_histograms(cell_id, counts)
    chunk_starts(counts, cell_start)
    chunk_scatter(cell_id, counts, permutation)
    gather_columns_parallel(points3, permutation, columns)


@jit
def chunk_starts(counts, key_start):
    """Turn ``counts[k, key]`` (`chunk_histograms`) into where chunk ``k`` puts its first
    item of ``key`` in a stable sort by key; writes the start of each key's run (with the
    total at the end) into ``key_start`` (n_keys + 1,), unless it is empty, and returns
    it."""
    n_chunks, n_keys = counts.shape
    write_starts = key_start.shape[0] > 0
    total = 0
    for key in range(n_keys):
        if write_starts:
            key_start[key] = total
        for k in range(n_chunks):
            count = counts[k, key]
            counts[k, key] = total
            total += count
    if write_starts:
        key_start[n_keys] = total
    return key_start


gather_columns_parallel = jit_variant(build.gather_columns_source(prange),
                                      "gather_columns_parallel", parallel=True)


@jit_parallel
def query_order_parallel(state, queries, counts, keys, permutation):
    """`build.query_order` on every thread: the same permutation (a stable counting sort
    is unique), from per-chunk histograms of the keys, written into ``permutation`` (m,)
    int64 and returned; ``keys`` (m,) int64 and ``counts`` (n_chunks, n_keys) int64, with
    ``n_keys = build.query_key_count(state)``, are scratch (`chunk_starts`)."""
    m = queries.shape[0]
    n_chunks = counts.shape[0]
    chunk = (m + n_chunks - 1) // n_chunks
    for k in prange(n_chunks):
        query_keys(state, queries, k * chunk, min(m, (k + 1) * chunk), keys)
    chunk_histograms(keys, counts)
    chunk_starts(counts, np.empty(0, np.int64))  # the counts alone
    return chunk_scatter(keys, counts, permutation)


@jit_parallel
def chunk_histograms(keys, counts):
    """``counts[k, key]``: how often ``key`` occurs in chunk ``k`` of ``keys``, cut into
    as many equal chunks as ``counts`` (n_chunks, n_keys) has rows; written whole, each
    row on the thread that counts its chunk, and returned."""
    n = keys.shape[0]
    n_chunks = counts.shape[0]
    chunk = (n + n_chunks - 1) // n_chunks
    for k in prange(n_chunks):
        for key in range(counts.shape[1]):
            counts[k, key] = 0
        for i in range(k * chunk, min(n, (k + 1) * chunk)):
            counts[k, keys[i]] += 1
    return counts


@jit_parallel
def chunk_scatter(keys, starts, permutation):
    """The permutation of a stable counting sort of ``keys``, written into and returned:
    chunk ``k`` (as in `chunk_histograms`) places its first item of each ``key`` at
    ``starts[k, key]`` (``starts`` is used up)."""
    n = keys.shape[0]
    n_chunks = starts.shape[0]
    chunk = (n + n_chunks - 1) // n_chunks
    for k in prange(n_chunks):
        for i in range(k * chunk, min(n, (k + 1) * chunk)):
            key = keys[i]
            permutation[starts[k, key]] = i
            starts[k, key] += 1
    return permutation


take_rows_parallel = jit_variant(build.take_rows_source(prange), "take_rows_parallel",
                                 parallel=True)


@jit_parallel
def scatter_parallel(values, order, out):
    """``out[order[t]] = values[t]`` on every thread (``order`` a permutation); returns
    ``out``."""
    for t in prange(order.shape[0]):
        out[order[t]] = values[t]
    return out


@jit_parallel
def gather_parallel(values, order, out):
    """``values[order]`` on every thread, written into ``out`` and returned."""
    for t in prange(order.shape[0]):
        out[t] = values[order[t]]
    return out
