"""Radius queries: for each query, every point within its radius, as CSR rows.

A query scans the rows of cells that can hold its neighbours as runs of contiguous points
(`cells.gather_runs`). Inside the box of a dense grid, the points of a query's block of
cells are gathered into one run, kept for the next queries with the same block (queries go
in cell order, and with cells of size r every query of a cell has the same 3 x 3 x 3
block), so each query scans one long vectorized loop (ad hoc, 300,000 queries and points
in 3-D, one thread, both versions alternately in one process: 9% less time with sorted
rows, 16% less without; the same rows).

A count pass sizes each row of the result, a fill pass writes it; rows are independent,
so queries are spread over threads and the output does not depend on the thread count.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..._config import jit, jit_parallel
from ..._kernels.cells import (
    gather_runs,
    query_cell_range,
    run_buffers,
    runs_capacity,
    wrap_whole_axes,
)
from ..._kernels.distance import NO_BOX, NO_SHIFT, displacement
from ..._kernels.indirect import kernel_caller
from ..._kernels.row_sort import row_sort_buffers, sort_row
from .blocks import block_buffers, gather_block, row_slice
from .chunks import call_count, call_items

#: Fewest queries handed to a thread at a time (`chunks.call_count`).
QUERIES_PER_CHUNK = 64


@jit
def radius_scan_queries(state, queries, radii, visit_order, t_lo, t_hi, positions, out_indices,
                        out_distances, write, sort_rows):
    """Sequential kernel of `radius_scan` over queries ``visit_order[t_lo:t_hi]``.

    Differences to a run's points are ``(q - x) - shift`` (see `cells`), with the minimum image
    per pair on whole periodic axes. The distance loops are written out here: a helper call
    passing arrays costs an atomic reference-count update per array.
    """
    points, order, cell_start = state.points, state.order, state.cell_start
    cell_coords, n_cells, box_axis = state.cell_coords, state.n_cells, state.box
    dense_start, hash_keys, hash_ids = state.dense_start, state.hash_keys, state.hash_ids
    origin, inv_cell_size = state.origin, state.inv_cell_size
    box_x, box_y, box_z = box_axis[0], box_axis[1], box_axis[2]
    box3 = (box_x, box_y, box_z)
    want_distances = out_distances.shape[0] > 0
    first = np.empty(3, np.int64)
    last = np.empty(3, np.int64)
    half = np.empty(3, np.float64)
    run_bounds, run_shifts = run_buffers(32)
    sort_keys, sort_values = row_sort_buffers()
    # Scratch of one run: distances to the query, then the offsets of the hits.
    run_d2 = np.empty(256, np.float64)
    hit_k = np.empty(256, np.int64)
    n_occupied = cell_coords.shape[0]
    # The candidates of the last block of cells gathered (see below), and that block.
    near_x, near_y, near_z, near_index = block_buffers(order, 256)
    n_near = 0
    block = np.full(6, -1, np.int64)
    nx, ny, nz = n_cells[0], n_cells[1], n_cells[2]
    # On a periodic axis, a range within [0, n - 1] wraps nothing unless it is the whole
    # axis (then `wrap_whole_axes` takes minimum images): keep those to the general path.
    wrap_x = 0 if math.isinf(box_x) else 1
    wrap_y = 0 if math.isinf(box_y) else 1
    wrap_z = 0 if math.isinf(box_z) else 1
    for t in range(t_lo, t_hi):
        q = visit_order[t]
        qx, qy, qz = queries[q, 0], queries[q, 1], queries[q, 2]
        query_cell_range(origin, inv_cell_size, n_cells, box_axis, (qx, qy, qz), radii[q],
                         first, last)
        x_lo, y_lo, z_lo = first[0], first[1], first[2]
        x_hi, y_hi, z_hi = last[0], last[1], last[2]
        # The block's cell count in float64: an axis of a sparse grid can have up to 2**52
        # cells, and an int64 product of three long ranges can wrap around to a small or
        # negative count, which would send a huge r down this path, with buffers of one
        # run per row of the block.
        if (0 <= x_lo <= x_hi < nx - wrap_x and 0 <= y_lo <= y_hi < ny - wrap_y
                and 0 <= z_lo <= z_hi < nz - wrap_z
                and (float(x_hi - x_lo + 1) * float(y_hi - y_lo + 1) * float(z_hi - z_lo + 1)
                     <= n_occupied)):
            # Inside the box of cells, touching no periodic axis's ends. Queries taken in
            # cell order mostly share their block of cells (with cells of size r, always
            # the 3 x 3 x 3 around their own): its points are gathered once, in the order
            # of `cells.gather_runs`' runs (`blocks`), and each query scans them in one
            # long loop. Sparse grids read their rows here too (they took the general path
            # below: 1,000,000 queries among 1,000,000 points and one far outlier, counted
            # in 29% less time and answered in 32% less, one process, alternated).
            if (x_lo != block[0] or y_lo != block[1] or z_lo != block[2]
                    or x_hi != block[3] or y_hi != block[4] or z_hi != block[5]):
                # At most `n_occupied` cells, so the product cannot overflow here.
                n_rows = (y_hi - y_lo + 1) * (z_hi - z_lo + 1)
                if n_rows > run_bounds.shape[0]:
                    run_bounds, run_shifts = run_buffers(n_rows)
                r = 0
                for z in range(z_lo, z_hi + 1):
                    for y in range(y_lo, y_hi + 1):
                        run_bounds[r, 0], run_bounds[r, 1] = row_slice(
                            dense_start, hash_keys, hash_ids, cell_start, cell_coords, nx, ny,
                            x_lo, x_hi, y, z)
                        r += 1
                # Unpacked once a block, not per query: each unpacking counts a reference
                # per array.
                (near_x, near_y, near_z, near_index), n_near = gather_block(
                    points, order, run_bounds, n_rows, (near_x, near_y, near_z, near_index))
                block[0], block[1], block[2] = x_lo, y_lo, z_lo
                block[3], block[4], block[5] = x_hi, y_hi, z_hi
            start = positions[q] if write else 0
            r2 = radii[q] * radii[q]
            n_hits = 0
            if not write:
                # Counting: branch-free, so LLVM vectorizes it.
                for k in range(np.uint64(0), np.uint64(n_near)):
                    d2 = displacement(qx, qy, qz, near_x[k], near_y[k], near_z[k], NO_SHIFT,
                                      NO_BOX, NO_BOX, False)[3]
                    if d2 <= r2:
                        n_hits += 1
                positions[q] = n_hits
                continue
            # As in the runs below: distances, then the hits without a branch.
            if n_near > run_d2.shape[0]:
                run_d2 = np.empty(n_near, np.float64)
                hit_k = np.empty(n_near, np.int64)
            for k in range(np.uint64(0), np.uint64(n_near)):
                run_d2[k] = displacement(qx, qy, qz, near_x[k], near_y[k], near_z[k], NO_SHIFT,
                                         NO_BOX, NO_BOX, False)[3]
            for k in range(n_near):
                hit_k[n_hits] = k
                n_hits += 1 if run_d2[k] <= r2 else 0
            for h in range(n_hits):
                k = hit_k[h]
                out_indices[start + h] = near_index[k]
                if want_distances:
                    out_distances[start + h] = math.sqrt(run_d2[k])
            if sort_rows:
                sort_row(out_indices, out_distances, start, start + n_hits, sort_keys,
                         sort_values)
            continue
        use_min_image = wrap_whole_axes(n_cells, box_axis, state.half_box, first, last, half)
        half3 = (half[0], half[1], half[2])
        needed = runs_capacity(first, last, n_occupied)
        if needed > run_bounds.shape[0]:
            run_bounds, run_shifts = run_buffers(needed)
        n_runs = gather_runs(n_cells, box_axis, cell_coords, cell_start, dense_start, hash_keys,
                             hash_ids, first, last, False, (0, 0, 0), (run_bounds, run_shifts))
        start = positions[q] if write else 0
        position = start
        r2 = radii[q] * radii[q]
        for r in range(n_runs):
            shift = (run_shifts[r, 0], run_shifts[r, 1], run_shifts[r, 2])
            if not write and not use_min_image:
                # Counting: branch-free, so LLVM vectorizes it. Unsigned bounds: see
                # `cells.UNSIGNED_LOOPS`.
                for j in range(np.uint64(run_bounds[r, 0]), np.uint64(run_bounds[r, 1])):
                    d2 = displacement(qx, qy, qz, points[0, j], points[1, j], points[2, j], shift,
                                      NO_BOX, NO_BOX, False)[3]
                    if d2 <= r2:
                        position += 1
                continue
            # The distances first, in a loop LLVM vectorizes; then the hits picked out
            # without a branch (one test-and-branch per candidate, mispredicted around
            # every hit, made this pass 27% slower); then only the hits are written.
            run_lo = run_bounds[r, 0]
            n_run = run_bounds[r, 1] - run_lo
            if n_run > run_d2.shape[0]:
                run_d2 = np.empty(n_run, np.float64)
                hit_k = np.empty(n_run, np.int64)
            first_j = np.uint64(run_lo)
            # Two loops, the image test out of the one that vectorizes.
            if use_min_image:
                for k in range(np.uint64(0), np.uint64(n_run)):
                    j = first_j + k
                    run_d2[k] = displacement(qx, qy, qz, points[0, j], points[1, j], points[2, j],
                                             shift, box3, half3, True)[3]
            else:
                for k in range(np.uint64(0), np.uint64(n_run)):
                    j = first_j + k
                    run_d2[k] = displacement(qx, qy, qz, points[0, j], points[1, j], points[2, j],
                                             shift, NO_BOX, NO_BOX, False)[3]
            n_hits = 0
            for k in range(n_run):
                hit_k[n_hits] = k
                n_hits += 1 if run_d2[k] <= r2 else 0
            if write:
                for h in range(n_hits):
                    k = hit_k[h]
                    out_indices[position + h] = order[run_lo + k]
                    if want_distances:
                        out_distances[position + h] = math.sqrt(run_d2[k])
            position += n_hits
        if not write:
            positions[q] = position
        elif sort_rows:
            sort_row(out_indices, out_distances, start, position, sort_keys, sort_values)


_check_radius_scan_queries, _call_radius_scan_queries = kernel_caller(radius_scan_queries)


@jit_parallel
def radius_scan(state, queries, radii, visit_order, positions, out_indices, out_distances, write,
                sort_rows, kernel):
    """Count (``positions[q]`` receives the row length) or write each query's row.

    Writing, row ``q`` starts at ``positions[q]`` (the CSR ``indptr``) and is sorted by
    index when ``sort_rows``. Queries are taken in ``visit_order`` (see
    `build.query_order`). One kernel does both passes so they compile once. The queries
    are answered by `radius_scan_queries`, called at ``kernel`` (see `indirect`).
    """
    m = queries.shape[0]
    _check_radius_scan_queries(kernel, (state, queries, radii, visit_order, m, m, positions,
                                        out_indices, out_distances, write, sort_rows))
    n_calls = call_count(m, QUERIES_PER_CHUNK)
    for call in prange(n_calls):
        t_lo, t_hi = call_items(call, n_calls, m)
        _call_radius_scan_queries(kernel, (
            state, queries, radii, visit_order, t_lo, t_hi, positions, out_indices,
            out_distances, write, sort_rows))
