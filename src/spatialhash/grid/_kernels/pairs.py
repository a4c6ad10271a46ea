"""All pairs within a distance: a count pass, then a fill pass into exact-size outputs.

Each occupied cell ``a`` pairs its points with the cells of the half stencil: the cells of
its own row from ``a`` on (within the cell, pairs ``i < j``), and every row after its own in
(z, y) order. Each unordered pair of cells, hence of points, is met once. Rows are scanned
as runs of contiguous points (`cells.gather_runs`).

Grids of several points per cell (`GATHER_MIN_POINTS_PER_CELL`; the caller picks the kernel)
use `pairs_scan_cells_gathered`: a cell whose runs need no periodic image copies their
points next to each other once (coordinates and sorted indices), so each of its points
then scans one long run, the candidates after it, in a loop that vectorizes; scanning the
few short runs point by point cost more in loop set-up and scalar remainders than in
distances (ad hoc, one thread, the same process, both versions alternately: 40% less time
for 5,000 points in 3-D, 36% for 200,000 in 3-D, 34% for the cloth demo's contact list; the
rows are the same, in the same order). Cells with image shifts (at the ends of periodic
axes) or minimum images scan their runs one by one. With fewer points per cell (the 5,000
discs of the particle demo: 2.4) the copy costs more than it saves.

When the search range covers a whole periodic axis (a box of fewer than ``2 * reach + 1``
cells), stencil offsets alias the same cell; there, and when the stencil holds more cells
than are occupied, each cell ``a`` pairs with the occupied cells ``b >= a`` by id instead
(taking the minimum image per pair on whole periodic axes). The choice is made once for the
grid: a cell on the half stencil and its neighbour by id would both claim their pairs.

Cells are spread over threads in chunks; the count pass gives each cell its offset in the
output, so the fill pass writes every pair to a place fixed in advance and the output is
the same for any thread count.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..._config import jit, jit_inline, jit_parallel, jit_variant
from ..._kernels.cells import (
    RANGE_ABSOLUTE_TOLERANCE,
    RANGE_RELATIVE_TOLERANCE,
    axis_range,
    cell_buffers,
    cells_needed,
    gather_cells,
    gather_runs,
    run_buffers,
    runs_capacity,
    wrap_whole_axes,
)
from ..._kernels.distance import NO_BOX, NO_SHIFT, displacement
from ..._kernels.indirect import kernel_caller

#: Occupied cells handed to a thread at a time.
CELLS_PER_CHUNK = 16
#: Grids of at least this many points per occupied cell gather each cell's candidates
#: into one run (`pairs_scan_cells_gathered`).
GATHER_MIN_POINTS_PER_CELL = 3.0


@jit
def reach_in_cells(inv_cell_size, n_cells, reach):
    """Cells to search on each side of a cell so that no pair within ``reach`` is missed.

    Two cell coordinates of points within ``reach`` differ by at most ``reach / cell_size``
    plus the rounding of each coordinate (a few ulps of the largest cell coordinate). No
    search needs more cells than the axis has: the count is capped there, which also keeps
    a reach of 2**63 cells or more (a huge ``r`` over tiny cells) from overflowing.
    """
    cells = np.empty(3, np.int64)
    for axis in range(3):
        u_reach = reach * inv_cell_size[axis]
        rounding = 2.0 * (n_cells[axis] + 1.0) * 2.0**-50
        needed = u_reach * (1.0 + RANGE_RELATIVE_TOLERANCE) + rounding + RANGE_ABSOLUTE_TOLERANCE
        cells[axis] = math.ceil(min(needed, float(n_cells[axis])))
    return cells


@jit
def stencil_by_id(n_cells, box, reach_cells, n_occupied):
    """Whether pairs are found by cell id rather than by the half stencil (see the module
    docstring): when the stencil wraps a whole periodic axis (its offsets alias), or holds
    at least as many cells as are occupied. Decided once for the whole grid."""
    volume = 1.0
    for axis in range(3):
        span = 2 * reach_cells[axis] + 1
        if not math.isinf(box[axis]) and span >= n_cells[axis]:
            return True
        volume *= min(span, n_cells[axis])
    return volume >= n_occupied


@jit_inline
def half_stencil_runs(state, a, reach_cells, inline_runs, first, last, half, run_bounds,
                      run_shifts):
    """The runs of cell ``a``'s half stencil (see the module docstring) when pairs are not
    found by id: ``(n_runs, use_min_image, run_bounds, run_shifts)``, the buffers grown
    when they were too small, and ``half`` set to the half periods of the axes that take
    minimum images. Run 0 starts at cell ``a``'s first point.

    ``inline_runs``: a dense grid not paired by id, whose cells away from the ends of
    periodic axes find their runs with a few loads of ``dense_start`` rather than by the
    general path (ranges, images, probing), which cost as much a cell as the distance
    tests of a cell of a few points. Buffers of `half_stencil_capacity` runs always hold
    the inline runs.
    """
    cell_coords, n_cells, box = state.cell_coords, state.n_cells, state.box
    cx, cy, cz = cell_coords[a, 0], cell_coords[a, 1], cell_coords[a, 2]
    nx, ny, nz = n_cells[0], n_cells[1], n_cells[2]
    reach_x, reach_y, reach_z = reach_cells[0], reach_cells[1], reach_cells[2]
    # A periodic axis has 2 * reach + 1 cells or more here (else pairs by id): cells this
    # far from its ends do not wrap.
    wrap_x = reach_x if not math.isinf(box[0]) else -nx
    wrap_y = reach_y if not math.isinf(box[1]) else -ny
    wrap_z = reach_z if not math.isinf(box[2]) else -nz
    if (inline_runs and wrap_x <= cx < nx - wrap_x and wrap_y <= cy < ny - wrap_y
            and wrap_z <= cz < nz - wrap_z):
        # The half stencil of `cells.gather_runs`, in its order: the own row from cell a
        # on, the other rows of the own plane, then the planes after it.
        dense_start = state.dense_start
        x_lo, x_hi = max(cx - reach_x, 0), min(cx + reach_x, nx - 1)
        row = (cz * ny + cy) * nx
        run_bounds[0, 0], run_bounds[0, 1] = state.cell_start[a], dense_start[row + x_hi + 1]
        n_runs = 1
        for z in range(cz, min(cz + reach_z, nz - 1) + 1):
            for y in range(cy + 1 if z == cz else max(cy - reach_y, 0),
                           min(cy + reach_y, ny - 1) + 1):
                row = (z * ny + y) * nx
                start, end = dense_start[row + x_lo], dense_start[row + x_hi + 1]
                if end > start:
                    run_bounds[n_runs, 0], run_bounds[n_runs, 1] = start, end
                    n_runs += 1
        for r in range(n_runs):
            run_shifts[r, 0] = run_shifts[r, 1] = run_shifts[r, 2] = 0.0
        half[0] = half[1] = half[2] = np.inf
        return n_runs, False, run_bounds, run_shifts
    for axis in range(3):
        first[axis], last[axis] = axis_range(
            n_cells[axis], box[axis], float(cell_coords[a, axis] - reach_cells[axis]),
            float(cell_coords[a, axis] + reach_cells[axis]),
        )
    use_min_image = wrap_whole_axes(n_cells, box, state.half_box, first, last, half)
    needed = runs_capacity(first, last, cell_coords.shape[0])
    if needed > run_bounds.shape[0]:
        run_bounds, run_shifts = run_buffers(needed)
    n_runs = gather_runs(n_cells, box, cell_coords, state.cell_start, state.dense_start,
                         state.hash_keys, state.hash_ids, first, last, True,
                         (cx, cy, cz), run_bounds, run_shifts)
    return n_runs, use_min_image, run_bounds, run_shifts


@jit_inline
def gather_near(points, order, radii, r2, run_bounds, n_runs, own_start, own_end, keep_below,
                near_x, near_y, near_z, near_j, near_radii):
    """Copy the points of ``n_runs`` runs that lie within reach of the box bounding the
    points ``own_start .. own_end - 1`` (one cell's) next to each other, in the order of
    the runs: coordinates, original indices (``order``) and, ``radii`` not empty, radii;
    returns how many. The buffers must hold every point of the runs. Within reach:
    ``sqrt(r2)``, or the cell's largest radius plus the point's. Points before
    ``keep_below`` (the cell's own, for a half stencil, whose index arithmetic counts on
    them) are kept whatever their distance.

    A point left out is no pair of any point of the cell, in floating point too:
    ``|x_i - x_j|`` rounds to at least what the distance to the box's face rounds to
    (rounding is monotone), and so do the squares and sums. On 5,000 uniform points in
    3-D, 54% of the other cells' points were copied (counted).
    """
    with_radii = radii.shape[0] > 0
    lo_x = hi_x = points[0, own_start]
    lo_y = hi_y = points[1, own_start]
    lo_z = hi_z = points[2, own_start]
    largest_radius = 0.0
    for i in range(own_start, own_end):
        lo_x, hi_x = min(lo_x, points[0, i]), max(hi_x, points[0, i])
        lo_y, hi_y = min(lo_y, points[1, i]), max(hi_y, points[1, i])
        lo_z, hi_z = min(lo_z, points[2, i]), max(hi_z, points[2, i])
        if with_radii:
            largest_radius = max(largest_radius, radii[i])
    limit2 = r2
    keep_below = np.uint64(keep_below)
    k = 0
    for r in range(n_runs):
        for j in range(np.uint64(run_bounds[r, 0]), np.uint64(run_bounds[r, 1])):
            px, py, pz = points[0, j], points[1, j], points[2, j]
            near_x[k] = px
            near_y[k] = py
            near_z[k] = pz
            # The original index: read in order here, once per cell, rather than at random
            # for every pair (ad hoc, 5,000 points in 3-D, one thread, order alternated:
            # 9% less time).
            near_j[k] = order[j]
            if with_radii:
                near_radii[k] = radii[j]
                limit = largest_radius + radii[j]
                limit2 = limit * limit
            ex = max(lo_x - px, px - hi_x, 0.0)
            ey = max(lo_y - py, py - hi_y, 0.0)
            ez = max(lo_z - pz, pz - hi_z, 0.0)
            # Written unconditionally, kept only within reach.
            within = ex * ex + ey * ey + ez * ez <= limit2
            k += 1 if within | (j < keep_below) else 0
    return k


@jit
def half_stencil_capacity(n_cells, reach_cells):
    """Runs of the inline half stencil of `half_stencil_runs`."""
    return 1 + min(2 * reach_cells[1] + 1, n_cells[1]) * (min(reach_cells[2], n_cells[2] - 1) + 1)


def _pair_scan_kernel(gather):
    """The sequential pair kernel over cells ``cell_lo .. cell_hi - 1`` (`pairs_parts`
    runs it on every thread), compiled twice from this one source: `pairs_scan_cells`
    scans each run of candidates in turn; `pairs_scan_cells_gathered` (``gather``), for
    grids of several points per cell, first copies the runs of a cell that needs no
    periodic image next to each other, and each of its points scans one long run (see the
    module docstring). The same rows in the same order.

    ``gather`` is a constant of each compiled kernel: numba prunes the branches on it, so
    each kernel holds only its own loops, with the speed and the compile time of a kernel
    written for it alone. A branch at run time would cost speed: with the gathering's
    buffers live across the loops of one kernel, its run-by-run loops ran 1.4-1.8 times
    slower for grids of few points per cell (register spills, most likely; the assembly
    was not checked).

    Pairs are written as ``(min, max)`` of the points' caller indices (``state.order``);
    with ``as_found`` as ``(i, j)`` as found, ``i`` the point whose scan met ``j`` (its
    cell's half stencil holds ``j``): a neighbour list passes a state whose ``order`` is
    the identity, and gets its rows, grouped by ``i`` in the grid's point order.

    Besides counting and writing at counted offsets, it can append in one pass: with
    ``write`` true and ``positions`` empty, pairs are written one after the other and the
    outputs grow as needed (``out_distances`` empty: no distances; otherwise it must be as
    long as ``out_indices``, at least one row). Small inputs take that path: it skips the
    count pass and gives the same rows in the same order. Returns the outputs (grown or
    not) and the number of rows written when appending.

    The distance loops are written out here rather than in helpers: a call that passes
    arrays costs numba an atomic reference-count update per array, which in these loops
    cost more than the distances themselves.
    """

    def scan_cells(state, r2, radii, reach_cells, cell_lo, cell_hi, cell_begin, positions,
                   out_indices, out_distances, write, as_found):
        points, order, cell_start = state.points, state.order, state.cell_start
        cell_coords, n_cells, box_axis = state.cell_coords, state.n_cells, state.box
        dense_lookup, dense_start = state.dense_lookup, state.dense_start
        hash_keys, hash_ids = state.hash_keys, state.hash_ids
        box_x, box_y, box_z = box_axis[0], box_axis[1], box_axis[2]
        box3 = (box_x, box_y, box_z)
        with_radii = radii.shape[0] > 0
        want_distances = out_distances.shape[0] > 0
        run_bounds, run_shifts = run_buffers(32)
        found_cells, cell_shifts = cell_buffers(32)
        hit_index = np.empty(256, np.int64)
        hit_d2 = np.empty(256, np.float64)
        if gather:
            near_x, near_y, near_z, near_j, near_radii = near_buffers(256)
        first = np.empty(3, np.int64)
        last = np.empty(3, np.int64)
        half = np.empty(3, np.float64)
        n_occupied = cell_coords.shape[0]
        # One strategy for every cell: mixing them would meet some pairs of cells twice.
        by_id = stencil_by_id(n_cells, box_axis, reach_cells, n_occupied)
        appending = write and positions.shape[0] == 0
        n_appended = 0
        # In a dense grid, a cell whose stencil wraps no periodic axis (every cell when no
        # axis is periodic) finds its runs inline: the general path (ranges, images, probing)
        # cost as much a cell as the distance tests of a cell of a few points.
        # Written out here, as `half_stencil_runs` does for the functions over pairs:
        # calling that helper (inlined or not) made this kernel 16-38% slower on small
        # cells (200,000 points in 2-D with radii, one thread, versions alternated).
        inline_runs = dense_start.shape[0] > 0 and not by_id
        nx, ny, nz = n_cells[0], n_cells[1], n_cells[2]
        reach_x, reach_y, reach_z = reach_cells[0], reach_cells[1], reach_cells[2]
        # A periodic axis has 2 * reach + 1 cells or more here (else `by_id`): cells this
        # far from its ends do not wrap.
        wrap_x, wrap_y, wrap_z = (reach_x if not math.isinf(box_x) else -nx,
                                  reach_y if not math.isinf(box_y) else -ny,
                                  reach_z if not math.isinf(box_z) else -nz)
        if inline_runs:
            most_runs = 1 + min(2 * reach_y + 1, ny) * (min(reach_z, nz - 1) + 1)
            if most_runs > run_bounds.shape[0]:
                run_bounds, run_shifts = run_buffers(most_runs)
        for a in range(cell_lo, cell_hi):
            center = (cell_coords[a, 0], cell_coords[a, 1], cell_coords[a, 2])
            cx, cy, cz = center
            if (inline_runs and wrap_x <= cx < nx - wrap_x and wrap_y <= cy < ny - wrap_y
                    and wrap_z <= cz < nz - wrap_z):
                # The half stencil of `cells.gather_runs`, in its order: the own row from
                # cell a on, the other rows of the own plane, then the planes after it.
                use_min_image = False
                half3 = NO_BOX
                x_lo, x_hi = max(cx - reach_x, 0), min(cx + reach_x, nx - 1)
                row = (cz * ny + cy) * nx
                run_bounds[0, 0], run_bounds[0, 1] = cell_start[a], dense_start[row + x_hi + 1]
                n_runs = 1
                for z in range(cz, min(cz + reach_z, nz - 1) + 1):
                    for y in range(cy + 1 if z == cz else max(cy - reach_y, 0),
                                   min(cy + reach_y, ny - 1) + 1):
                        row = (z * ny + y) * nx
                        start, end = dense_start[row + x_lo], dense_start[row + x_hi + 1]
                        if end > start:
                            run_bounds[n_runs, 0], run_bounds[n_runs, 1] = start, end
                            n_runs += 1
                for r in range(n_runs):
                    run_shifts[r, 0] = run_shifts[r, 1] = run_shifts[r, 2] = 0.0
            else:
                for axis in range(3):
                    first[axis], last[axis] = axis_range(
                        n_cells[axis], box_axis[axis], float(center[axis] - reach_cells[axis]),
                        float(center[axis] + reach_cells[axis]),
                    )
                use_min_image = wrap_whole_axes(n_cells, box_axis, state.half_box, first, last,
                                                half)
                half3 = (half[0], half[1], half[2])
                if by_id:
                    # The occupied cells b >= a, each once, by id, with cell a first.
                    needed = cells_needed(first, last, n_occupied)
                    if needed > found_cells.shape[0]:
                        found_cells, cell_shifts = cell_buffers(needed)
                    n_found = gather_cells(n_cells, box_axis, cell_coords, dense_lookup, hash_keys,
                                           hash_ids, first, last, found_cells, cell_shifts)
                    if n_found + 1 > run_bounds.shape[0]:
                        run_bounds, run_shifts = run_buffers(n_found + 1)
                    run_bounds[0, 0], run_bounds[0, 1] = cell_start[a], cell_start[a + 1]
                    run_shifts[0, 0] = run_shifts[0, 1] = run_shifts[0, 2] = 0.0
                    n_runs = 1
                    for f in range(n_found):
                        b = found_cells[f]
                        if b > a:
                            run_bounds[n_runs, 0] = cell_start[b]
                            run_bounds[n_runs, 1] = cell_start[b + 1]
                            for axis in range(3):
                                run_shifts[n_runs, axis] = cell_shifts[f, axis]
                            n_runs += 1
                else:
                    needed = runs_capacity(first, last, n_occupied)
                    if needed > run_bounds.shape[0]:
                        run_bounds, run_shifts = run_buffers(needed)
                    n_runs = gather_runs(n_cells, box_axis, cell_coords, cell_start, dense_start,
                                         hash_keys, hash_ids, first, last, True, center,
                                         run_bounds, run_shifts)
            n_candidates = 0
            # A cell with image shifts or minimum images scans its runs one by one.
            shifted = True
            if gather:
                shifted = use_min_image
            for r in range(n_runs):
                n_candidates += run_bounds[r, 1] - run_bounds[r, 0]
                if gather:
                    shifted |= (run_shifts[r, 0] != 0.0) | (run_shifts[r, 1] != 0.0) | (
                        run_shifts[r, 2] != 0.0)
            if n_candidates > hit_index.shape[0]:
                hit_index = np.empty(n_candidates, np.int64)
                hit_d2 = np.empty(n_candidates, np.float64)
            c = a - cell_begin
            if appending:
                position = n_appended
            else:
                position = positions[c] if write else 0
            if gather and not shifted:
                # No image shifts: copy the runs' points next to each other once, so that
                # each point of cell a scans one long run (the candidates after it) instead
                # of a few short ones, whose loop set-up and scalar remainders cost more
                # than their distances. The copy is paid once per cell, the scan per point.
                if n_candidates > near_x.shape[0]:
                    near_x, near_y, near_z, near_j, near_radii = near_buffers(n_candidates)
                # Only the candidates within reach of the box bounding cell a's points are
                # copied (the own cell's points always: see `gather_near`). The pairs and
                # their order are unchanged.
                own_start, own_end = cell_start[a], cell_start[a + 1]
                n_candidates = gather_near(points, order, radii, r2, run_bounds, n_runs,
                                           own_start, own_end, own_end, near_x, near_y, near_z,
                                           near_j, near_radii)
                # Run 0 starts at cell a: the candidates of its point i are the points after
                # it there, then the other runs, in the order of the run-by-run loops below.
                for i in range(own_start, own_end):
                    x, y, z = points[0, i], points[1, i], points[2, i]
                    radius = radii[i] if with_radii else 0.0
                    k_lo = np.uint64(i - own_start + 1)
                    k_hi = np.uint64(n_candidates)
                    n_hits = 0
                    if not write:
                        # Counting: branch-free, so LLVM vectorizes it.
                        if with_radii:
                            for k in range(k_lo, k_hi):
                                d2 = displacement(x, y, z, near_x[k], near_y[k], near_z[k],
                                                  NO_SHIFT, NO_BOX, NO_BOX, False)[3]
                                limit = radius + near_radii[k]
                                if d2 <= limit * limit:
                                    n_hits += 1
                        else:
                            for k in range(k_lo, k_hi):
                                d2 = displacement(x, y, z, near_x[k], near_y[k], near_z[k],
                                                  NO_SHIFT, NO_BOX, NO_BOX, False)[3]
                                if d2 <= r2:
                                    n_hits += 1
                        position += n_hits
                        continue
                    # The distances in a loop LLVM vectorizes, then the hits picked out
                    # without a branch (no test-and-branch to mispredict around every hit).
                    for k in range(k_lo, k_hi):
                        hit_d2[k] = displacement(x, y, z, near_x[k], near_y[k], near_z[k],
                                                 NO_SHIFT, NO_BOX, NO_BOX, False)[3]
                    if with_radii:
                        for k in range(k_lo, k_hi):
                            limit = radius + near_radii[k]
                            hit_index[n_hits] = k
                            n_hits += 1 if hit_d2[k] <= limit * limit else 0
                    else:
                        for k in range(k_lo, k_hi):
                            hit_index[n_hits] = k
                            n_hits += 1 if hit_d2[k] <= r2 else 0
                    if appending and position + n_hits > out_indices.shape[0]:
                        out_indices, out_distances = grown_outputs(out_indices, out_distances,
                                                                   position + n_hits)
                    oi = order[i]
                    for h in range(n_hits):
                        k = hit_index[h]
                        oj = near_j[k]
                        out_indices[position + h, 0] = oi if as_found else min(oi, oj)
                        out_indices[position + h, 1] = oj if as_found else max(oi, oj)
                        if want_distances:
                            out_distances[position + h] = math.sqrt(hit_d2[k])
                    position += n_hits
            else:
                # Run 0 starts at cell a: point i pairs with the points after it there.
                for i in range(cell_start[a], cell_start[a + 1]):
                    x, y, z = points[0, i], points[1, i], points[2, i]
                    radius = radii[i] if with_radii else 0.0
                    n_hits = 0
                    for r in range(n_runs):
                        # Unsigned bounds: see the `cells` docstring.
                        start = np.uint64(i + 1 if r == 0 else run_bounds[r, 0])
                        end = np.uint64(run_bounds[r, 1])
                        shift = (run_shifts[r, 0], run_shifts[r, 1], run_shifts[r, 2])
                        if not write and not use_min_image:
                            # Counting: branch-free, so LLVM vectorizes it.
                            if with_radii:
                                for j in range(start, end):
                                    d2 = displacement(x, y, z, points[0, j], points[1, j],
                                                      points[2, j], shift, NO_BOX, NO_BOX,
                                                      False)[3]
                                    limit = radius + radii[j]
                                    if d2 <= limit * limit:
                                        n_hits += 1
                            else:
                                for j in range(start, end):
                                    d2 = displacement(x, y, z, points[0, j], points[1, j],
                                                      points[2, j], shift, NO_BOX, NO_BOX,
                                                      False)[3]
                                    if d2 <= r2:
                                        n_hits += 1
                            continue
                        for j in range(start, end):
                            d2 = displacement(x, y, z, points[0, j], points[1, j], points[2, j],
                                              shift, box3, half3, use_min_image)[3]
                            if with_radii:
                                limit = radius + radii[j]
                                hit = d2 <= limit * limit
                            else:
                                hit = d2 <= r2
                            # Written unconditionally, kept only on a hit: no branch to mispredict.
                            hit_index[n_hits] = j
                            hit_d2[n_hits] = d2
                            n_hits += 1 if hit else 0
                    if appending and position + n_hits > out_indices.shape[0]:
                        out_indices, out_distances = grown_outputs(out_indices, out_distances,
                                                                   position + n_hits)
                    if write:
                        oi = order[i]
                        for h in range(n_hits):
                            oj = order[hit_index[h]]
                            out_indices[position + h, 0] = oi if as_found else min(oi, oj)
                            out_indices[position + h, 1] = oj if as_found else max(oi, oj)
                            if want_distances:
                                out_distances[position + h] = math.sqrt(hit_d2[h])
                    position += n_hits
            if appending:
                n_appended = position
            elif not write:
                positions[c] = position
        return out_indices, out_distances, n_appended

    return scan_cells


pairs_scan_cells = jit_variant(_pair_scan_kernel(gather=False), "pairs_scan_cells")
pairs_scan_cells_gathered = jit_variant(_pair_scan_kernel(gather=True), "pairs_scan_cells_gathered")


@jit
def near_buffers(size):
    """Room for ``size`` gathered candidates: coordinates, original indices and radii."""
    return (np.empty(size, np.float64), np.empty(size, np.float64), np.empty(size, np.float64),
            np.empty(size, np.int64), np.empty(size, np.float64))








@jit
def grown_outputs(indices, distances, needed):
    """Copies of the pair outputs with room for at least ``needed`` rows (doubling)."""
    capacity = max(needed, 2 * indices.shape[0])
    # Element loops, not slice assignment: numba compiles a shape-mismatch error message
    # for every array slice assignment, seconds of cold compile (see `_config.jit`).
    grown_indices = np.empty((capacity, 2), indices.dtype)
    for row in range(indices.shape[0]):
        grown_indices[row, 0] = indices[row, 0]
        grown_indices[row, 1] = indices[row, 1]
    grown_distances = distances
    if distances.shape[0] > 0:
        grown_distances = np.empty(capacity, np.float64)
        for row in range(distances.shape[0]):
            grown_distances[row] = distances[row]
    return grown_indices, grown_distances


# One parallel driver for both pair kernels: one `prange` loop with one call, through the
# kernel's address (see `indirect`; the two kernels take and return the same types).
# Numba links the code of every function a function calls into it, and into the function
# it outlines for each `prange` loop, and optimizes and emits it again there: a driver
# that called both kernels directly cost the compile of both, twice; the gathering
# kernel's own count driver, with one loop for whole chunks and one for samples, cost more
# than twice the kernel's own compile on top of it; one loop calling it directly, half as
# much again as the kernel; through its address, a third of the kernel (ad hoc, cold cache,
# CPU time; the figures are in ``docs/benchmarks.md``, "Compile time and warm start").
_check_scan_cells, _call_scan_cells = kernel_caller(pairs_scan_cells,
                                                   pairs_scan_cells_gathered)


@jit_parallel
def pairs_parts(state, r2, radii, reach_cells, parts, cell_begin, positions, part_rows,
                out_indices, out_distances, write, as_found, n_written, kernel):
    """Scan the parts of the cells on every thread with the pair kernel at ``kernel`` (see
    `indirect`): `pairs_scan_cells` or `pairs_scan_cells_gathered`, which take the same
    arguments. Part ``k`` is cells ``parts[k, 0]`` to ``parts[k, 1] - 1``.

    Two modes, one loop and one call of the kernel (see above):

    - ``part_rows`` empty: the count and fill passes. Counting (``write`` false),
      ``positions[c]`` receives the number of pairs of cell ``cell_begin + c``; writing,
      cell ``cell_begin + c`` writes from ``positions[c]``. Parts that skip cells give a
      sample of the counts (to estimate how many pairs there are).
    - ``part_rows`` of ``len(parts) + 1`` rows (``write`` true): part ``k`` appends its
      pairs to rows ``part_rows[k]`` to ``part_rows[k + 1] - 1`` of the outputs, and
      ``n_written[k]`` receives the number it wrote, or -1 when they did not fit (the caller
      redoes that part). Every part must have at least one row.

    ``out_distances`` is empty when distances are not wanted; ``as_found`` writes the
    pairs as found (see `pairs_scan_cells`). The outputs are those of the count and fill
    passes, in their order, for any thread count.
    """
    appending = part_rows.shape[0] > 0
    want_distances = out_distances.shape[0] > 0
    no_positions = np.empty(0, np.int64)
    _check_scan_cells(kernel, (state, r2, radii, reach_cells, cell_begin, cell_begin, cell_begin,
                       positions, out_indices, out_distances, write, as_found))
    for k in prange(parts.shape[0]):
        if appending:
            rows_lo, rows_hi = part_rows[k], part_rows[k + 1]
            begin, part_positions = parts[k, 0], no_positions
        else:
            rows_lo, rows_hi = 0, out_indices.shape[0]
            begin, part_positions = cell_begin, positions
        indices = out_indices[rows_lo:rows_hi]
        distances = out_distances[rows_lo:rows_hi] if want_distances else out_distances
        written, _, n = _call_scan_cells(kernel, (
            state, r2, radii, reach_cells, parts[k, 0], parts[k, 1], begin, part_positions,
            indices, distances, write, as_found))
        if appending:
            # Outputs that had to grow are copies: what they hold is lost, the part is
            # redone.
            n_written[k] = n if written.shape[0] == indices.shape[0] else -1
