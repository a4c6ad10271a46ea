"""k-nearest neighbours: search outward from the query's cell, ring by ring.

Ring ``s`` holds the cells whose Chebyshev offset from the query's cell is ``s``. After each
ring, every point not yet seen lies outside the block of visited cells, so its distance is
at least the query's distance to that block's faces. The search stops when the k-th best
distance found is strictly below that bound (strictly: a point at exactly the bound could
still win a tie on index), when the bound passes ``r_max``, or when no cell is left.

Candidates are kept in a max-heap ordered by ``(squared distance, index)``, so ties are
broken by the smaller index, as in a stable sort of the brute-force distances. Distances
take the minimum image per pair on periodic axes: a ring's offsets say which cells to
visit, not which image of their points is nearest.

A ring is read row by row as runs of contiguous points (see `cells.gather_runs`). When a ring
would hold more cells than there are occupied cells (a sparse grid around a far query, or a
grid of very few cells), the occupied cells not yet visited are scanned directly instead,
which bounds the work per query by the number of occupied cells.

Rings 0 and 1 of a query inside the box of cells are read together, as one block of cells
whose points are gathered once for all the queries of a cell (queries go in cell order):
the distances then come from one vectorized loop (`gathered_block` says when; the heap
gets the same candidates, so the result is the same). Ad hoc, both versions alternately
in one process, two threads, query only: 6% less time for 1e6 queries in 3-D and for
300,000 in 2-D. The heap's offers, not the distances, took most of the time, so the
block's rows are gathered nearest first (the query's own row, then those beside it, then
the diagonal ones): the heap fills with near points and later ones rarely displace its
top (the same measurement: 23% less time in 3-D, 3% in 2-D). Sparse grids (an outlier far
away) gather the block too, finding its rows in the table of rows: 300,000 queries among
1e6 points and one at 1e6, query only, 20% less time, leaving them 1.3 times the dense
grid's (one process, both versions alternated, medians of 6).
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..._config import jit, jit_parallel
from ..._kernels.cells import (
    cell_tolerance,
    floor_to_int,
    row_segment,
    run_buffers,
    sparse_row_slice,
    wrap_cell,
)
from ..._kernels.distance import NO_BOX, NO_SHIFT, displacement
from ..._kernels.heap import heap_offer, heap_sort_ascending, ranks_before
from ..._kernels.indirect import kernel_caller
from .blocks import block_buffers, gather_block
from .chunks import call_count, call_items

#: Fewest queries handed to a thread at a time (`chunks.call_count`).
QUERIES_PER_CHUNK = 64
#: (z, y) offsets of the rows of a gathered block, nearest the query's cell first.
ROW_OFFSETS = np.array([(0, 0), (0, -1), (0, 1), (-1, 0), (1, 0), (-1, -1), (-1, 1), (1, -1),
                        (1, 1)], dtype=np.int64)


@jit
def ring_runs(state, center, s, lowest, highest, run_bounds):
    """Runs of sorted points (``run_bounds``) of the cells of ring ``s``; returns how many.

    ``lowest``/``highest`` bound the cell offsets that hold cells on each axis. The buffer
    must hold four runs per row of the ring's block.
    """
    n_cells, box, dense_start = state.n_cells, state.box, state.dense_start
    dense = dense_start.shape[0] > 0
    lo_x, hi_x = max(lowest[0], -s), min(highest[0], s)
    lo_y, hi_y = max(lowest[1], -s), min(highest[1], s)
    lo_z, hi_z = max(lowest[2], -s), min(highest[2], s)
    n_runs = 0
    for oz in range(lo_z, hi_z + 1):
        wz = wrap_cell(center[2] + oz, n_cells[2], box[2])
        for oy in range(lo_y, hi_y + 1):
            wy = wrap_cell(center[1] + oy, n_cells[1], box[1])
            # A row on the ring's faces is new from end to end; a row inside them adds its
            # two end cells only.
            on_face = abs(oz) == s or abs(oy) == s
            for piece in range(1 if on_face else 2):
                if on_face:
                    x_first, x_last = lo_x, hi_x
                elif piece == 0:
                    x_first = x_last = -s
                else:
                    x_first = x_last = s
                if x_first < lo_x or x_last > hi_x or (piece == 1 and s == 0):
                    continue
                x = center[0] + x_first
                while x <= center[0] + x_last:
                    x_lo, x_hi, _, x = row_segment(x, center[0] + x_last, n_cells[0], box[0])
                    if dense:
                        base = (wz * n_cells[1] + wy) * n_cells[0]
                        start, end = dense_start[base + x_lo], dense_start[base + x_hi + 1]
                    else:
                        start, end = sparse_row_slice(state.hash_keys, state.hash_ids,
                                                      state.cell_start, state.cell_coords,
                                                      x_lo, x_hi, wy, wz)
                    if end > start:
                        run_bounds[n_runs, 0] = start
                        run_bounds[n_runs, 1] = end
                        n_runs += 1
    return n_runs


@jit
def unvisited_runs(state, center, lowest, s, run_bounds):
    """Runs (one per cell) of every occupied cell at Chebyshev offset ``s`` or more."""
    coords, n_cells, box = state.cell_coords, state.n_cells, state.box
    n_runs = 0
    for cell in range(coords.shape[0]):
        chebyshev = 0
        for axis in range(3):
            offset = coords[cell, axis] - center[axis]
            if not math.isinf(box[axis]):
                offset = (offset - lowest[axis]) % n_cells[axis] + lowest[axis]
            chebyshev = max(chebyshev, abs(offset))
        if chebyshev >= s:
            run_bounds[n_runs, 0] = state.cell_start[cell]
            run_bounds[n_runs, 1] = state.cell_start[cell + 1]
            n_runs += 1
    return n_runs


@jit_parallel
def knn_query(state, queries, k, max_distance, visit_order, out_indices, out_distances,
              out_counts, kernel):
    """k nearest points of each query, nearest first; slots beyond a query's count get -1
    and ``inf``, so the outputs may come uninitialized (each is written once).

    Queries are taken in ``visit_order`` (see `build.query_order`) and answered by
    `knn_queries`, called at ``kernel`` (see `indirect`).
    """
    m = queries.shape[0]
    _check_knn_queries(kernel, (state, queries, k, max_distance, visit_order, m, m, out_indices,
                                out_distances, out_counts))
    n_calls = call_count(m, QUERIES_PER_CHUNK)
    for call in prange(n_calls):
        t_lo, t_hi = call_items(call, n_calls, m)
        _call_knn_queries(kernel, (
            state, queries, k, max_distance, visit_order, t_lo, t_hi, out_indices,
            out_distances, out_counts))


@jit
def knn_queries(state, queries, k, max_distance, visit_order, t_lo, t_hi, out_indices,
                out_distances, out_counts):
    """Sequential kernel of `knn_query` over queries ``visit_order[t_lo:t_hi]``.

    The distance loop is written out here: a helper call passing arrays costs an atomic
    reference-count update per array.
    """
    points, order = state.points, state.order
    box, half_box = state.box, state.half_box
    box3 = (box[0], box[1], box[2])
    half3 = (half_box[0], half_box[1], half_box[2])
    n_occupied = state.cell_coords.shape[0]
    heap_d2 = np.empty(k, np.float64)
    heap_index = np.empty(k, order.dtype)
    center = np.empty(3, np.int64)
    u = np.empty(3, np.float64)
    lowest = np.empty(3, np.int64)  # smallest cell offset that holds cells, per axis
    highest = np.empty(3, np.int64)
    run_bounds, _ = run_buffers(64)
    n_cells, dense_start = state.n_cells, state.dense_start
    dense = dense_start.shape[0] > 0
    nx, ny = n_cells[0], n_cells[1]
    # The points of the block of cells around the last query's cell (rings 0 and 1: 3 x 3
    # x 3 inside the grid), gathered once for the queries of that cell (`gathered_block`).
    near_x, near_y, near_z, near_index = block_buffers(order, 256)
    near_d2 = np.empty(256, np.float64)
    n_near = 0
    block = np.full(6, -1, np.int64)
    block_lo = np.empty(3, np.int64)
    block_hi = np.empty(3, np.int64)
    for t in range(t_lo, t_hi):
        q = visit_order[t]
        qx, qy, qz = queries[q, 0], queries[q, 1], queries[q, 2]
        max_d2 = max_distance[q] * max_distance[q]
        first_ring, last_ring = ring_limits(state, (qx, qy, qz), center, u, lowest, highest)
        size = 0
        next_ring = first_ring
        if gathered_block(n_cells, box, n_occupied, center, lowest, highest, first_ring,
                          last_ring, block_lo, block_hi):
            if (block_lo[0] != block[0] or block_lo[1] != block[1] or block_lo[2] != block[2]
                    or block_hi[0] != block[3] or block_hi[1] != block[4]
                    or block_hi[2] != block[5]):
                # Rows nearest the query's cell first (its own, then those beside it, then
                # the diagonal ones): the heap fills with near points early, and fewer
                # later candidates displace its top. A dense grid reads a row's slice with
                # two loads, a sparse one with `sparse_row_slice`, once per block.
                n_rows = 0
                for rank in range(ROW_OFFSETS.shape[0]):
                    z = center[2] + ROW_OFFSETS[rank, 0]
                    y = center[1] + ROW_OFFSETS[rank, 1]
                    if not (block_lo[2] <= z <= block_hi[2] and block_lo[1] <= y <= block_hi[1]):
                        continue
                    if dense:
                        row = (z * ny + y) * nx
                        row_lo = dense_start[row + block_lo[0]]
                        row_hi = dense_start[row + block_hi[0] + 1]
                    else:
                        row_lo, row_hi = sparse_row_slice(
                            state.hash_keys, state.hash_ids, state.cell_start,
                            state.cell_coords, block_lo[0], block_hi[0], y, z)
                    run_bounds[n_rows, 0], run_bounds[n_rows, 1] = row_lo, row_hi
                    n_rows += 1
                # Unpacked once a block, not per query: each unpacking counts a reference
                # per array.
                (near_x, near_y, near_z, near_index), n_near = gather_block(
                    points, order, run_bounds, n_rows, (near_x, near_y, near_z, near_index))
                if n_near > near_d2.shape[0]:
                    near_d2 = np.empty(n_near, np.float64)
                for axis in range(3):
                    block[axis] = block_lo[axis]
                    block[3 + axis] = block_hi[axis]
            # Rings 0 and 1 at once: the distances in a loop LLVM vectorizes (no image is
            # nearer within the block, see `gathered_block`), then the offers.
            for e in range(np.uint64(0), np.uint64(n_near)):
                near_d2[e] = displacement(qx, qy, qz, near_x[e], near_y[e], near_z[e], NO_SHIFT,
                                          NO_BOX, NO_BOX, False)[3]
            for e in range(n_near):
                d2 = near_d2[e]
                if d2 > max_d2:
                    continue
                if size == k and not ranks_before(d2, near_index[e], heap_d2[0], heap_index[0]):
                    continue
                size = heap_offer(heap_d2, heap_index, size, d2, near_index[e])
            next_ring = 2
            bound = unvisited_distance(u, center, lowest, highest, 1, state.cell_size,
                                       n_cells, box)
            if bound < 0.0 or bound * bound > max_d2 or (size == k
                                                          and heap_d2[0] < bound * bound):
                next_ring = last_ring + 1
        for s in range(next_ring, last_ring + 1):
            span_y = min(highest[1], s) - max(lowest[1], -s) + 1.0
            span_z = min(highest[2], s) - max(lowest[2], -s) + 1.0
            span_x = min(highest[0], s) - max(lowest[0], -s) + 1.0
            last_pass = span_x * span_y * span_z > n_occupied
            if last_pass:
                # Cheaper to look at every occupied cell not yet visited, once, and stop.
                if n_occupied > run_bounds.shape[0]:
                    run_bounds, _ = run_buffers(n_occupied)
                n_runs = unvisited_runs(state, center, lowest, s, run_bounds)
            else:
                if 4 * span_y * span_z > run_bounds.shape[0]:
                    run_bounds, _ = run_buffers(int(4 * span_y * span_z))
                n_runs = ring_runs(state, center, s, lowest, highest, run_bounds)
            for r in range(n_runs):
                for j in range(np.uint64(run_bounds[r, 0]), np.uint64(run_bounds[r, 1])):
                    d2 = displacement(qx, qy, qz, points[0, j], points[1, j], points[2, j],
                                      NO_SHIFT, box3, half3, True)[3]
                    if d2 > max_d2:
                        continue
                    # Most candidates lose to a full heap's worst entry: test that first.
                    if size == k and not ranks_before(d2, order[j], heap_d2[0], heap_index[0]):
                        continue
                    size = heap_offer(heap_d2, heap_index, size, d2, order[j])
            if last_pass:
                break
            bound = unvisited_distance(u, center, lowest, highest, s, state.cell_size,
                                       state.n_cells, state.box)
            if bound < 0.0 or bound * bound > max_d2:
                break
            if size == k and heap_d2[0] < bound * bound:
                break
        heap_sort_ascending(heap_d2, heap_index, size)
        for rank in range(k):
            out_indices[q, rank] = heap_index[rank] if rank < size else -1
            out_distances[q, rank] = math.sqrt(heap_d2[rank]) if rank < size else np.inf
        out_counts[q] = size


_check_knn_queries, _call_knn_queries = kernel_caller(knn_queries)


@jit
def gathered_block(n_cells, box, n_occupied, center, lowest, highest, first_ring,
                   last_ring, block_lo, block_hi):
    """Whether a query's rings 0 and 1 are read as one gathered block of cells, from
    ``block_lo`` to ``block_hi`` per axis (set here): the query inside the box of cells
    (dense or sparse), no periodic wrap (on a periodic axis the query's cell has both
    neighbours, and the axis at least 5 cells, so that no other image of a block point is
    nearer: a difference within the block is under 2 cells, at most half the box), and
    at most as many cells in the block as are occupied (else the ring loop would scan
    every cell at ring 1)."""
    if first_ring != 0 or last_ring < 1:
        return False
    volume = 1
    for axis in range(3):
        if math.isinf(box[axis]):
            # Open: the block stops where the cells do, as `ring_runs` does.
            block_lo[axis] = center[axis] + max(lowest[axis], -1)
            block_hi[axis] = center[axis] + min(highest[axis], 1)
        else:
            if not 1 <= center[axis] <= n_cells[axis] - 2 or n_cells[axis] < 5:
                return False
            block_lo[axis] = center[axis] - 1
            block_hi[axis] = center[axis] + 1
        volume *= block_hi[axis] - block_lo[axis] + 1
    return volume <= n_occupied


@jit
def ring_limits(state, query, center, u, lowest, highest):
    """Set the query's cell ``center``, its cell coordinate ``u`` and the cell offsets that
    hold cells per axis; return the first and last ring worth visiting."""
    first_ring = 0
    last_ring = 0
    for axis in range(3):
        n = state.n_cells[axis]
        u[axis] = (query[axis] - state.origin[axis]) * state.inv_cell_size[axis]
        c = floor_to_int(u[axis])
        if math.isinf(state.box[axis]):
            lowest[axis] = -c
            highest[axis] = n - 1 - c
            # A query outside the cells starts at the first ring that reaches them.
            first_ring = max(first_ring, lowest[axis], -highest[axis])
        else:
            c = min(max(c, 0), n - 1)
            lowest[axis] = -((n - 1) // 2)
            highest[axis] = n - 1 + lowest[axis]
        center[axis] = c
        last_ring = max(last_ring, -lowest[axis], highest[axis])
    return first_ring, last_ring


@jit
def unvisited_distance(u, center, lowest, highest, s, cell_size, n_cells, box):
    """Lower bound on the distance to any point outside the rings up to ``s``; -1 when no
    cell is left. Shrunk slightly so that rounding never ends the search early.

    On an open axis the cells left lie beyond the faces that still have cells behind them.
    On a periodic axis, while the rings cover fewer than all its cells, the cells left lie
    beyond both faces (going either way round leads to them).
    """
    bound = np.inf
    for axis in range(3):
        tolerance = cell_tolerance(abs(u[axis]) + s + 1.0)
        if math.isinf(box[axis]):
            below = -s > lowest[axis]
            above = s < highest[axis]
        else:
            below = above = 2 * s + 1 < n_cells[axis]
        if below:
            gap = u[axis] - (center[axis] - s) - tolerance
            bound = min(bound, max(gap, 0.0) * cell_size[axis])
        if above:
            gap = (center[axis] + s + 1) - u[axis] - tolerance
            bound = min(bound, max(gap, 0.0) * cell_size[axis])
    if math.isinf(bound):
        return -1.0
    return bound * (1.0 - 2.0**-40)
