"""Box queries: for each axis-aligned box, every point inside it (closed), as CSR rows.

On an open axis a point is inside when ``lower <= x <= upper``; the cell range is
``[cell(lower), cell(upper)]``, exact because the cell coordinate is monotone in ``x``.
On a periodic axis the box starts at ``lower`` wrapped into ``[0, box)`` and extends
``width = upper - lower`` (a box as wide as the period covers the whole axis), so a box may
cross the periodic boundary.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..._config import jit, jit_parallel
from ..._kernels.cells import (
    axis_range,
    cell_tolerance,
    gather_runs,
    run_buffers,
    runs_capacity,
)
from ..._kernels.indirect import kernel_caller
from ..._kernels.row_sort import row_sort_buffers, sort_row

#: Boxes handed to a thread at a time.
BOXES_PER_CHUNK = 16


@jit
def box_cell_range(origin, inv_cell_size, n_cells, box, lower, upper, width, first, last):
    """Fill ``first``/``last`` with the cell range of one box (see the module docstring)."""
    for axis in range(3):
        inv = inv_cell_size[axis]
        if math.isinf(box[axis]):
            first[axis], last[axis] = axis_range(
                n_cells[axis], box[axis],
                (lower[axis] - origin[axis]) * inv, (upper[axis] - origin[axis]) * inv,
            )
        elif width[axis] >= box[axis]:
            first[axis], last[axis] = 0, n_cells[axis] - 1
        else:
            u_lower = (lower[axis] - origin[axis]) * inv
            u_upper = (lower[axis] + width[axis] - origin[axis]) * inv
            tolerance = cell_tolerance(abs(u_upper))
            first[axis], last[axis] = axis_range(
                n_cells[axis], box[axis], u_lower - tolerance, u_upper + tolerance
            )


@jit
def box_scan_boxes(state, lower, upper, width, visit_order, t_lo, t_hi, positions, out_indices,
                   write, sort_rows):
    """Sequential kernel of `box_scan` over boxes ``visit_order[t_lo:t_hi]``.

    Box tests use the wrapped coordinates themselves: image shifts play no part.
    """
    points, order, cell_start = state.points, state.order, state.cell_start
    cell_coords, n_cells, box = state.cell_coords, state.n_cells, state.box
    dense_start, hash_keys, hash_ids = state.dense_start, state.hash_keys, state.hash_ids
    origin, inv_cell_size = state.origin, state.inv_cell_size
    no_distances = np.empty(0, np.float64)
    first = np.empty(3, np.int64)
    last = np.empty(3, np.int64)
    run_bounds, run_shifts = run_buffers(32)
    sort_keys, sort_values = row_sort_buffers()
    for t in range(t_lo, t_hi):
        q = visit_order[t]
        box_cell_range(origin, inv_cell_size, n_cells, box, lower[q], upper[q], width[q],
                       first, last)
        needed = runs_capacity(first, last, cell_coords.shape[0])
        if needed > run_bounds.shape[0]:
            run_bounds, run_shifts = run_buffers(needed)
        n_runs = gather_runs(n_cells, box, cell_coords, cell_start, dense_start, hash_keys,
                             hash_ids, first, last, False, (0, 0, 0), (run_bounds, run_shifts))
        start = positions[q] if write else 0
        position = start
        for r in range(n_runs):
            for j in range(np.uint64(run_bounds[r, 0]), np.uint64(run_bounds[r, 1])):
                inside = True
                for axis in range(3):
                    x = points[axis, j]
                    if math.isinf(box[axis]):
                        inside = lower[q, axis] <= x <= upper[q, axis]
                    elif width[q, axis] < box[axis]:
                        offset = x - lower[q, axis]
                        if offset < 0.0:
                            offset += box[axis]
                        inside = offset <= width[q, axis]
                    if not inside:
                        break
                if inside:
                    if write:
                        out_indices[position] = order[j]
                    position += 1
        if not write:
            positions[q] = position
        elif sort_rows:
            sort_row(out_indices, no_distances, start, position, sort_keys, sort_values)


_check_box_scan_boxes, _call_box_scan_boxes = kernel_caller(box_scan_boxes)


@jit_parallel
def box_scan(state, lower, upper, width, visit_order, positions, out_indices, write, sort_rows,
             kernel):
    """Count (``positions[q]`` receives the row length) or write the points in each box.

    Writing, row ``q`` starts at ``positions[q]`` and is sorted by index when ``sort_rows``.
    Boxes are taken in ``visit_order`` (see `build.query_order`) and answered by
    `box_scan_boxes`, called at ``kernel`` (see `indirect`).
    """
    m = lower.shape[0]
    _check_box_scan_boxes(kernel, (state, lower, upper, width, visit_order, m, m, positions,
                                   out_indices, write, sort_rows))
    n_chunks = (m + BOXES_PER_CHUNK - 1) // BOXES_PER_CHUNK
    for chunk in prange(n_chunks):
        t_lo = chunk * BOXES_PER_CHUNK
        _call_box_scan_boxes(kernel, (
            state, lower, upper, width, visit_order, t_lo, min(m, t_lo + BOXES_PER_CHUNK),
            positions, out_indices, write, sort_rows))
