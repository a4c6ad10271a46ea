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
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..._config import jit, jit_parallel, jit_variant
from . import build
from .build import linear_cell, query_key_count, query_keys


@jit_parallel
def build_dense_parallel(points3, origin, inv_cell_size, n_periodic, n_cells, n_chunks,
                         linear, permutation, columns):
    """Sort ``points3`` (n, d), d <= 3, into the dense box of ``n_cells`` cells.

    ``n_cells`` must cover every point's cell coordinate (the caller derives it from the
    largest coordinate with the same arithmetic); periodic axes (``n_periodic > 0``) clamp
    as in `build.cell_coords_of`. ``linear`` and ``permutation`` (n,) int64 and
    ``columns`` (3, n) float64 come from the caller, uninitialized (recycled, see
    `_outputs`); the first is scratch. Returns ``(cell_start, permutation, columns,
    dense_lookup, dense_start, cell_coords)``, equal to `build.dense_build`'s.
    """
    n = points3.shape[0]
    nx, ny, nz = n_cells[0], n_cells[1], n_cells[2]
    n_linear = nx * ny * nz
    for i in prange(n):
        # As int64: a `prange` index is unsigned, and the helper would compile twice.
        linear[i] = linear_cell(points3, np.int64(i), origin, inv_cell_size, n_periodic,
                                n_cells)

    counts = chunk_histograms(linear, n_linear, n_chunks)

    # counts[k, key] becomes where chunk k writes its first point of cell `key`.
    dense_start = chunk_starts(counts)
    dense_lookup = np.empty(n_linear, np.int64)
    n_occupied = 0
    for key in range(n_linear):
        if dense_start[key + 1] > dense_start[key]:
            dense_lookup[key] = n_occupied
            n_occupied += 1
        else:
            dense_lookup[key] = -1

    cell_start = np.empty(n_occupied + 1, np.int64)
    cell_coords = np.empty((n_occupied, 3), np.int64)
    for key in range(n_linear):
        cell = dense_lookup[key]
        if cell >= 0:
            cell_start[cell] = dense_start[key]
            cell_coords[cell, 0] = key % nx
            cell_coords[cell, 1] = (key // nx) % ny
            cell_coords[cell, 2] = key // (nx * ny)
    cell_start[n_occupied] = n

    chunk_scatter(linear, counts, permutation)
    return (cell_start, permutation, gather_columns_parallel(points3, permutation, columns),
            dense_lookup, dense_start, cell_coords)


@jit  # its parallel loops are in the kernels it calls
def sort_points_parallel(points3, cell_id, n_occupied, n_chunks, permutation, columns):
    """`build.sort_points` on every thread (the sparse build): the same ``(cell_start,
    permutation, columns)``, a stable counting sort being unique, from per-chunk
    histograms of the cell ids (``n_chunks`` times ``n_occupied`` counts), into
    ``permutation`` and ``columns`` as `build_dense_parallel` takes them. A million
    points and one far outlier, the whole build: 17% less time than with `build.sort_points`
    (two threads, one process, alternated, medians of 10)."""
    counts = chunk_histograms(cell_id, n_occupied, n_chunks)
    cell_start = chunk_starts(counts)
    chunk_scatter(cell_id, counts, permutation)
    return cell_start, permutation, gather_columns_parallel(points3, permutation, columns)


@jit
def chunk_starts(counts):
    """Turn ``counts[k, key]`` (`chunk_histograms`) into where chunk ``k`` puts its first
    item of ``key`` in a stable sort by key; returns the start of each key's run (with
    the total at the end), shape ``(n_keys + 1,)``."""
    n_chunks, n_keys = counts.shape
    key_start = np.empty(n_keys + 1, np.int64)
    total = 0
    for key in range(n_keys):
        key_start[key] = total
        for k in range(n_chunks):
            count = counts[k, key]
            counts[k, key] = total
            total += count
    key_start[n_keys] = total
    return key_start


gather_columns_parallel = jit_variant(build.gather_columns_source(prange),
                                      "gather_columns_parallel", parallel=True)


@jit_parallel
def query_order_parallel(state, queries, n_chunks, keys, permutation):
    """`build.query_order` on every thread: the same permutation (a stable counting sort
    is unique), from per-chunk histograms of the keys (``n_chunks`` times their count),
    written into ``permutation`` (m,) int64 and returned; ``keys`` (m,) int64 is scratch."""
    m = queries.shape[0]
    n_keys = query_key_count(state)
    chunk = (m + n_chunks - 1) // n_chunks
    for k in prange(n_chunks):
        query_keys(state, queries, k * chunk, min(m, (k + 1) * chunk), keys)
    counts = chunk_histograms(keys, n_keys, n_chunks)
    chunk_starts(counts)
    return chunk_scatter(keys, counts, permutation)


@jit_parallel
def chunk_histograms(keys, n_keys, n_chunks):
    """``counts[k, key]``: how often ``key`` occurs in chunk ``k`` of ``keys`` (cut into
    ``n_chunks`` equal chunks), shape ``(n_chunks, n_keys)``."""
    n = keys.shape[0]
    chunk = (n + n_chunks - 1) // n_chunks
    counts = np.zeros((n_chunks, n_keys), np.int64)
    for k in prange(n_chunks):
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
