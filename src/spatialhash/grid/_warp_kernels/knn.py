"""k-nearest neighbours on the device: one thread per query, searching outward from the
query's cell ring by ring, as the CPU engine's `knn.knn_queries` does.

Ring ``s`` holds the cells at Chebyshev offset ``s`` from the query's cell, clipped per
axis to the offsets that hold cells (`new_search`); it is read row by row of cells, each
row one run of contiguous sorted points per period it spans (`offer_ring`). After each
ring the search stops when the k-th best squared distance is strictly below the square of
`unvisited_distance` (a lower bound on the distance to any point not yet seen), when that
bound passes ``r_max``, or when no cell is left; a ring of more cells than are occupied
is replaced by one scan of the occupied cells not yet visited, and ends the search
(`offer_unvisited`). These are the CPU engine's rules, with its arithmetic.

The candidates of a query live in its own row of the output: ``out_indices[q]`` and
``out_distances[q]`` (squared distances until the end) are a max-heap ordered by
``(squared distance, index)``, so a tie goes to the smaller index, and the k kept are the
same whatever order the candidates come in: any exact search gives the CPU engine's
rows. No cap on ``k`` and no scratch beyond the output: a row is as long as ``k``. The
row is then heap-sorted nearest first and its distances square-rooted; slots past the
row's count keep the -1 and ``inf`` the caller filled them with.

The CPU engine also reads rings 0 and 1 as one gathered block for speed; it offers the
same candidates, so the rows are the same.
"""

from __future__ import annotations

from typing import Any

import warp as wp

from . import MODULE_OPTIONS
from .cells import (
    DeviceGrid,
    cell_tolerance,
    displacement_d2,
    first_cell_at,
    floor_div,
    floor_to_int,
    row_segment,
    wrap_cell,
)

wp.set_module_options(MODULE_OPTIONS)

_INF = wp.constant(wp.float64(float("inf")))
_NO_SHIFT = wp.constant(wp.vec3d(0.0, 0.0, 0.0))
#: `knn.unvisited_distance` shrinks its bound by this factor, so that rounding never ends
#: a search early.
_BOUND_SHRINK = wp.constant(wp.float64(1.0 - 2.0**-40))


@wp.struct
class Search:
    """One query's search: its row ``q`` of the output and its ``k``, its position
    ``query`` and squared limit ``max_d2``, its cell coordinate ``u`` and cell
    ``center``, the smallest (``lowest``) and largest (``highest``) cell offsets that
    hold cells per axis, and the first and last ring worth visiting (`new_search`)."""

    q: wp.int64
    k: wp.int64
    query: wp.vec3d
    max_d2: wp.float64
    u: wp.vec3d
    center: wp.vec3l
    lowest: wp.vec3l
    highest: wp.vec3l
    first_ring: wp.int64
    last_ring: wp.int64


@wp.func
def ranks_before(d2_a: wp.float64, index_a: Any, d2_b: wp.float64, index_b: Any) -> wp.bool:
    """Whether candidate a ranks before b: nearer, or as near with a smaller index."""
    return d2_a < d2_b or (d2_a == d2_b and index_a < index_b)


@wp.func
def move(indices: wp.array2d(dtype=Any), d2s: wp.array2d(dtype=wp.float64), q: wp.int64,
         source: wp.int64, target: wp.int64):
    """Copy the heap entry of row ``q`` at ``source`` to ``target``."""
    d2s[q, target] = d2s[q, source]
    indices[q, target] = indices[q, source]


@wp.func
def sift_down(indices: wp.array2d(dtype=Any), d2s: wp.array2d(dtype=wp.float64),
              q: wp.int64, position: wp.int64, size: wp.int64, d2: wp.float64, index: Any):
    """Place ``(d2, index)`` at ``position`` of row ``q``'s heap of ``size`` entries and
    sift it down (`heap._sift_down`)."""
    while True:
        child = wp.int64(2) * position + wp.int64(1)
        if child >= size:
            break
        if child + wp.int64(1) < size and ranks_before(
                d2s[q, child], indices[q, child], d2s[q, child + wp.int64(1)],
                indices[q, child + wp.int64(1)]):
            child += wp.int64(1)
        if not ranks_before(d2, index, d2s[q, child], indices[q, child]):
            break
        move(indices, d2s, q, child, position)
        position = child
    d2s[q, position] = d2
    indices[q, position] = index


@wp.func
def heap_offer(indices: wp.array2d(dtype=Any), d2s: wp.array2d(dtype=wp.float64),
               search: Search, size: wp.int64, d2: wp.float64, index: Any) -> wp.int64:
    """Offer a candidate to row ``search.q``'s max-heap of the best ``k``; returns the new
    size (`heap.heap_offer`)."""
    q = search.q
    if size < search.k:
        position = size
        while position > wp.int64(0):
            parent = (position - wp.int64(1)) / wp.int64(2)
            if not ranks_before(d2s[q, parent], indices[q, parent], d2, index):
                break
            move(indices, d2s, q, parent, position)
            position = parent
        d2s[q, position] = d2
        indices[q, position] = index
        return size + wp.int64(1)
    if ranks_before(d2, index, d2s[q, 0], indices[q, 0]):
        sift_down(indices, d2s, q, wp.int64(0), size, d2, index)
    return size


@wp.func
def offer_run(grid: DeviceGrid, order: wp.array(dtype=Any), search: Search,
              start: wp.int64, end: wp.int64, indices: wp.array2d(dtype=Any),
              d2s: wp.array2d(dtype=wp.float64), size: wp.int64) -> wp.int64:
    """Offer the sorted points ``start..end`` within ``max_d2`` (each at its nearest image
    on periodic axes); returns the heap's size."""
    j = start
    while j < end:
        d2 = displacement_d2(search.query, grid.points[j], _NO_SHIFT, grid, grid.half_box)
        # `not >`, as the CPU engine skips: a NaN would be offered there too.
        if not (d2 > search.max_d2):
            size = heap_offer(indices, d2s, search, size, d2, order[j])
        j += wp.int64(1)
    return size


@wp.func
def offer_row(grid: DeviceGrid, order: wp.array(dtype=Any), search: Search, x: wp.int64,
              x_last: wp.int64, wy: wp.int64, wz: wp.int64, indices: wp.array2d(dtype=Any),
              d2s: wp.array2d(dtype=wp.float64), size: wp.int64) -> wp.int64:
    """Offer the points of cells ``x..x_last`` (unwrapped) of the row ``(wy, wz)``, one
    run per period the range spans; returns the heap's size."""
    while x <= x_last:
        x_lo, x_hi, periods, x_next = row_segment(x, x_last, grid.n_cells[0], grid.box[0])
        start = grid.cell_start[first_cell_at(grid, x_lo, wy, wz)]
        end = grid.cell_start[first_cell_at(grid, x_hi + wp.int64(1), wy, wz)]
        size = offer_run(grid, order, search, start, end, indices, d2s, size)
        x = x_next
    return size


@wp.func
def offer_ring(grid: DeviceGrid, order: wp.array(dtype=Any), search: Search, s: wp.int64,
               indices: wp.array2d(dtype=Any), d2s: wp.array2d(dtype=wp.float64),
               size: wp.int64) -> wp.int64:
    """Offer the points of ring ``s`` (`knn.ring_runs`): a row of cells on the ring's
    faces whole, a row inside them its two end cells; returns the heap's size."""
    lo = wp.vec3l()
    hi = wp.vec3l()
    for axis in range(3):
        lo[axis] = wp.max(search.lowest[axis], -s)
        hi[axis] = wp.min(search.highest[axis], s)
    center = search.center
    oz = lo[2]
    while oz <= hi[2]:
        wz = wrap_cell(center[2] + oz, grid.n_cells[2], grid.box[2])
        oy = lo[1]
        while oy <= hi[1]:
            wy = wrap_cell(center[1] + oy, grid.n_cells[1], grid.box[1])
            if wp.abs(oz) == s or wp.abs(oy) == s:
                size = offer_row(grid, order, search, center[0] + lo[0], center[0] + hi[0],
                                 wy, wz, indices, d2s, size)
            else:
                if -s >= lo[0]:
                    size = offer_row(grid, order, search, center[0] - s, center[0] - s, wy,
                                     wz, indices, d2s, size)
                if s <= hi[0] and s != wp.int64(0):
                    size = offer_row(grid, order, search, center[0] + s, center[0] + s, wy,
                                     wz, indices, d2s, size)
            oy += wp.int64(1)
        oz += wp.int64(1)
    return size


@wp.func
def offer_unvisited(grid: DeviceGrid, order: wp.array(dtype=Any), search: Search,
                    s: wp.int64, indices: wp.array2d(dtype=Any),
                    d2s: wp.array2d(dtype=wp.float64), size: wp.int64) -> wp.int64:
    """Offer the points of every occupied cell at Chebyshev offset ``s`` or more (on a
    periodic axis, the offset within ``lowest..highest``); returns the heap's size."""
    cell = wp.int64(0)
    while cell < grid.n_occupied:
        chebyshev = wp.int64(0)
        for axis in range(3):
            offset = grid.cell_coords[cell, axis] - search.center[axis]
            if not wp.isinf(grid.box[axis]):
                n = grid.n_cells[axis]
                offset = offset - search.lowest[axis]
                offset = offset - floor_div(offset, n) * n + search.lowest[axis]
            chebyshev = wp.max(chebyshev, wp.abs(offset))
        if chebyshev >= s:
            size = offer_run(grid, order, search, grid.cell_start[cell],
                             grid.cell_start[cell + wp.int64(1)], indices, d2s, size)
        cell += wp.int64(1)
    return size


@wp.func
def new_search(grid: DeviceGrid, q: wp.int64, k: wp.int64, query: wp.vec3d,
               limit: wp.float64) -> Search:
    """The `Search` of query ``q``, its cells and rings as `knn.ring_limits` sets them."""
    search = Search()
    search.q = q
    search.k = k
    search.query = query
    search.max_d2 = limit * limit
    for axis in range(3):
        n = grid.n_cells[axis]
        u = (query[axis] - grid.origin[axis]) * grid.inv_cell_size[axis]
        search.u[axis] = u
        c = floor_to_int(u)
        if wp.isinf(grid.box[axis]):
            search.lowest[axis] = -c
            search.highest[axis] = n - wp.int64(1) - c
            # A query outside the cells starts at the first ring that reaches them.
            search.first_ring = wp.max(search.first_ring,
                                       wp.max(-c, c - (n - wp.int64(1))))
        else:
            c = wp.min(wp.max(c, wp.int64(0)), n - wp.int64(1))
            search.lowest[axis] = -((n - wp.int64(1)) / wp.int64(2))
            search.highest[axis] = n - wp.int64(1) + search.lowest[axis]
        search.center[axis] = c
        search.last_ring = wp.max(search.last_ring,
                                  wp.max(-search.lowest[axis], search.highest[axis]))
    return search


@wp.func
def unvisited_distance(grid: DeviceGrid, search: Search, s: wp.int64) -> wp.float64:
    """Lower bound on the distance to any point outside the rings up to ``s``; -1 when no
    cell is left (`knn.unvisited_distance`, its arithmetic)."""
    bound = _INF
    for axis in range(3):
        u = search.u[axis]
        center = search.center[axis]
        tolerance = cell_tolerance(wp.abs(u) + wp.float64(s) + wp.float64(1.0))
        below = wp.int64(2) * s + wp.int64(1) < grid.n_cells[axis]
        above = below
        if wp.isinf(grid.box[axis]):
            below = -s > search.lowest[axis]
            above = s < search.highest[axis]
        cell_size = grid.cell_size[axis]
        if below:
            gap = u - wp.float64(center - s) - tolerance
            bound = wp.min(bound, wp.max(gap, wp.float64(0.0)) * cell_size)
        if above:
            gap = wp.float64(center + s + wp.int64(1)) - u - tolerance
            bound = wp.min(bound, wp.max(gap, wp.float64(0.0)) * cell_size)
    if wp.isinf(bound):
        return wp.float64(-1.0)
    return bound * _BOUND_SHRINK


@wp.func
def ring_span(search: Search, s: wp.int64, axis: int) -> wp.float64:
    """Cells of ring ``s``'s block on ``axis``, as a float."""
    return wp.float64(wp.min(search.highest[axis], s) - wp.max(search.lowest[axis], -s)) + (
        wp.float64(1.0))


@wp.func
def heap_sort_ascending(indices: wp.array2d(dtype=Any), d2s: wp.array2d(dtype=wp.float64),
                        q: wp.int64, size: wp.int64):
    """Sort row ``q``'s heap of ``size`` entries nearest first (`heap.heap_sort_ascending`)."""
    end = size - wp.int64(1)
    while end > wp.int64(0):
        top_d2 = d2s[q, 0]
        top_index = indices[q, 0]
        last_d2 = d2s[q, end]
        last_index = indices[q, end]
        d2s[q, end] = top_d2
        indices[q, end] = top_index
        sift_down(indices, d2s, q, wp.int64(0), end, last_d2, last_index)
        end -= wp.int64(1)


@wp.kernel
def knn_rows(grid: DeviceGrid, order: wp.array(dtype=Any), queries: wp.array(dtype=wp.vec3d),
             k: wp.int64, limit: wp.float64, out_indices: wp.array2d(dtype=Any),
             out_distances: wp.array2d(dtype=wp.float64), counts: wp.array(dtype=wp.int64)):
    """Row ``q``: the ``k`` nearest points of query ``q`` within ``limit``, nearest first,
    and their count (see the module docstring); the slots past the count get -1 and
    ``inf``, as on the CPU, so the rows may come uninitialized."""
    q = wp.tid()
    search = new_search(grid, wp.int64(q), k, queries[q], limit)
    size = wp.int64(0)
    s = search.first_ring
    while s <= search.last_ring:
        volume = ring_span(search, s, 0) * ring_span(search, s, 1) * ring_span(search, s, 2)
        if volume > wp.float64(grid.n_occupied):
            # Cheaper to look at every occupied cell not yet visited, once, and stop.
            size = offer_unvisited(grid, order, search, s, out_indices, out_distances, size)
            break
        size = offer_ring(grid, order, search, s, out_indices, out_distances, size)
        bound = unvisited_distance(grid, search, s)
        if bound < wp.float64(0.0) or bound * bound > search.max_d2:
            break
        if size == k and out_distances[q, 0] < bound * bound:
            break
        s += wp.int64(1)
    heap_sort_ascending(out_indices, out_distances, search.q, size)
    rank = wp.int64(0)
    while rank < size:
        out_distances[q, rank] = wp.sqrt(out_distances[q, rank])
        rank += wp.int64(1)
    while rank < k:
        out_indices[q, rank] = out_indices.dtype(-1)
        out_distances[q, rank] = wp.float64(wp.inf)
        rank += wp.int64(1)
    counts[q] = size


# The int32 overload, compiled with the module (see ``scan.py``).
wp.overload(knn_rows, {"order": wp.array(dtype=wp.int32),
                       "out_indices": wp.array2d(dtype=wp.int32)})
