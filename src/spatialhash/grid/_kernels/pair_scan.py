"""The scan of pairs: every pair of points within reach met once, each consumer a visitor.

Each occupied cell ``a`` pairs its points with the cells of the half stencil: the cells of
its own row from ``a`` on (within the cell, pairs ``i < j``), and every row after its own in
(z, y) order. Each unordered pair of cells, hence of points, is met once. Rows are scanned
as runs of contiguous points (`cells.gather_runs`).

When the search range covers a whole periodic axis (a box of fewer than ``2 * reach + 1``
cells), stencil offsets alias the same cell; there, and when the stencil holds more cells
than are occupied, each cell ``a`` pairs with the occupied cells ``b >= a`` by id instead
(taking the minimum image per pair on whole periodic axes). The choice is made once for the
grid (`stencil.stencil_by_id`): a cell on the half stencil and its neighbour by id would both
claim their pairs. Only the rows kernel that reads its candidates in place walks by id
(`_pair_search.pair_kernel` sends those grids to it): the others compile without that walk,
which cost the first ``query_pairs`` about a sixth of its compile.

Visitors. `half_stencil_scan` makes the one cell walk and distance step
(`distance.displacement`), and `_config.jit_variant` compiles it once per consumer, the
consumer a constant numba prunes the other consumers' branches on:

- `ROWS`: the pairs as rows, counted, filled at counted offsets or appended
  (``query_pairs``, ``iter_pairs``, the build of a neighbour list; ``_kernels/pairs.py``);
- `BOTH_ORDERS`: a user's ``fn(i, j, d2, dx, dy, dz, *args)`` then ``fn(j, i, d2, -dx,
  -dy, -dz, *args)`` for each pair (`Grid.for_each_pair`; ``_kernels/pair_functions.py``);
- `ONCE`: ``fn(i, j, ...)`` only, for a function that writes both rows.

Every variant takes ``(state, params, lo, hi, fn, args)``: ``params = (r2, radii,
reach_cells, cell_ranges)``, and items ``lo .. hi - 1`` are rows of ``cell_ranges`` (first
and end cell ids: a driver's parts of the cells, or slabs). ``fn`` is the user's function
and ``args`` its extra arguments; for `ROWS`, ``fn`` is None and ``args`` the outputs
(`ROWS` docstring of `half_stencil_scan`).

Gathering. In grids of several points per cell (`GATHER_MIN_POINTS_PER_CELL`), a cell whose
runs need no periodic image copies the candidates within reach of the box bounding its
points next to each other once (coordinates and sorted indices, `gather_near`), so each of
its points scans one long run, the candidates after it, in a loop that vectorizes; scanning
the few short runs point by point costs more in loop set-up and scalar remainders than in
distances (ad hoc, one thread, both versions alternately: 40% less time for 5,000 points in
3-D, 36% for 200,000 in 3-D, 34% for the cloth demo's contact list; the same rows in the
same order). Cells with image shifts (at the ends of periodic axes) or minimum images scan
their runs one by one. With fewer points per cell (the 5,000 discs of the particle demo:
2.4) the copy costs more than it saves. The rows kernels are compiled twice, ``gather`` a
constant (the caller picks one, `_pair_search.pair_kernel`): with the gathering's buffers
live across the run-by-run loops, those loops ran 1.4-1.8 times slower for grids of few
points per cell (register spills, most likely; the assembly was not checked). The
functions' kernels, compiled anew for each ``fn``, are compiled once, gathering and
checking the grid's density at run time.

The distance loops are written out in the walk rather than in helpers: a call that passes
arrays costs numba an atomic reference-count update per array, which in these loops cost
more than the distances themselves; calling a helper for the inline runs (inlined or not)
made the rows kernel 16-38% slower on small cells (200,000 points in 2-D with radii, one
thread, versions alternated).
"""

from __future__ import annotations

import math

import numpy as np

from ..._config import jit, jit_inline
from ..._kernels.cells import (
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
from .stencil import stencil_by_id

#: Grids of at least this many points per occupied cell gather each cell's candidates
#: into one run (see the module docstring).
GATHER_MIN_POINTS_PER_CELL = 3.0
#: The consumers of `half_stencil_scan` (see the module docstring).
ROWS, BOTH_ORDERS, ONCE = "rows", "both orders", "once"


@jit_inline
def gather_near(points, order, radii, r2, runs, own_start, own_end, keep_below, near):
    """Copy the points of the runs ``runs = (run_bounds, n_runs)`` that lie within reach of
    the box bounding the points ``own_start .. own_end - 1`` (one cell's) next to each
    other, in the order of the runs, into ``near = (x, y, z, j, radii)``: coordinates,
    original indices (``order``) and, ``radii`` not empty, radii; returns how many. The
    buffers must hold every point of the runs. Within reach: ``sqrt(r2)``, or the cell's
    largest radius plus the point's. Points before ``keep_below`` (the cell's own, for a
    half stencil, whose index arithmetic counts on them) are kept whatever their distance.

    A point left out is no pair of any point of the cell, in floating point too:
    ``|x_i - x_j|`` rounds to at least what the distance to the box's face rounds to
    (rounding is monotone), and so do the squares and sums. On 5,000 uniform points in
    3-D, 54% of the other cells' points were copied (counted).
    """
    run_bounds, n_runs = runs
    near_x, near_y, near_z, near_j, near_radii = near
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


def half_stencil_scan(gather, visitor):
    """The sequential scan of the pairs of the cells of items ``lo .. hi - 1`` (see the
    module docstring), made for one consumer: ``visitor`` is `ROWS`, `BOTH_ORDERS` or
    `ONCE`, and ``gather`` whether cells of a grid of several points per cell gather their
    candidates (true for the functions' kernels; a constant of each rows kernel).

    `ROWS`: ``args = (cell_begin, positions, out_indices, out_distances, write, as_found)``;
    the gathering kernel takes grids whose pairs are not found by id (its caller sends those
    to the other, the only one that walks by id). Pairs are written as ``(min, max)`` of the
    points' caller indices (``state.order``); with ``as_found`` as ``(i, j)`` as found,
    ``i`` the point whose scan met ``j`` (its cell's half stencil holds ``j``): a neighbour
    list passes a state whose ``order`` is the identity, and gets its rows, grouped by ``i``
    in the grid's point order. Counting (``write`` false), ``positions[c]`` receives the
    number of pairs of cell ``cell_begin + c``; writing, cell ``cell_begin + c`` writes from
    ``positions[c]``. With ``write`` true and ``positions`` empty, pairs are appended one
    after the other and the outputs grow as needed (``out_distances`` empty: no distances;
    otherwise as long as ``out_indices``, at least one row): small inputs skip the count
    pass so, and get the same rows in the same order. Returns the outputs (grown or not) and
    the number of rows appended.

    `BOTH_ORDERS` and `ONCE`: ``fn`` and ``args`` are the user's function and its extra
    arguments, on grids whose pairs are not found by id (`stencil.stencil_by_id`: their
    callers take the full stencil there, and the walk by id is pruned from these kernels);
    returns None. Each point's distances to a run are computed first, in a loop
    LLVM vectorizes, the hits picked out without a branch, then ``fn`` called for each,
    with the differences computed again by the same arithmetic: a branch on every
    distance, mispredicted around every hit, cost more than the distances.
    """
    visits_rows = visitor == ROWS
    visits_fn = not visits_rows
    walks_by_id = visits_rows and not gather
    calls_both = visitor == BOTH_ORDERS

    def scan(state, params, lo, hi, fn, args):
        points, order, cell_start = state.points, state.order, state.cell_start
        cell_coords, n_cells, box_axis = state.cell_coords, state.n_cells, state.box
        dense_lookup, dense_start = state.dense_lookup, state.dense_start
        hash_keys, hash_ids = state.hash_keys, state.hash_ids
        box_x, box_y, box_z = box_axis[0], box_axis[1], box_axis[2]
        box3 = (box_x, box_y, box_z)
        r2, radii, reach_cells, cell_ranges = params
        with_radii = radii.shape[0] > 0
        if visits_rows:
            cell_begin, positions, out_indices, out_distances, write, as_found = args
            want_distances = out_distances.shape[0] > 0
            appending = write and positions.shape[0] == 0
            n_appended = 0
        run_bounds, run_shifts = run_buffers(32)
        found_cells, cell_shifts = cell_buffers(32)
        hit_index = np.empty(256, np.int64)
        hit_d2 = np.empty(256, np.float64)
        n_occupied = cell_coords.shape[0]
        if gather:
            near = near_buffers(256)
        # The rows kernels' caller chose by the density (`_pair_search.pair_kernel`); the
        # functions' kernels, compiled once, check it here.
        sparse = False
        if visits_fn:
            sparse = cell_start[n_occupied] < GATHER_MIN_POINTS_PER_CELL * n_occupied
        first = np.empty(3, np.int64)
        last = np.empty(3, np.int64)
        half = np.empty(3, np.float64)
        # One strategy for every cell: mixing them would meet some pairs of cells twice.
        by_id = stencil_by_id(n_cells, box_axis, reach_cells, n_occupied)
        # In a dense grid, a cell whose stencil wraps no periodic axis (every cell when no
        # axis is periodic) finds its runs inline: the general path (ranges, images, probing)
        # cost as much a cell as the distance tests of a cell of a few points.
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
        for item in range(lo, hi):
            for a in range(cell_ranges[item, 0], cell_ranges[item, 1]):
                center = (cell_coords[a, 0], cell_coords[a, 1], cell_coords[a, 2])
                cx, cy, cz = center
                if (inline_runs and wrap_x <= cx < nx - wrap_x and wrap_y <= cy < ny - wrap_y
                        and wrap_z <= cz < nz - wrap_z):
                    # The half stencil of `cells.gather_runs`, in its order: the own row
                    # from cell a on, the other rows of the own plane, then the planes
                    # after it.
                    use_min_image = False
                    half3 = NO_BOX
                    x_lo, x_hi = max(cx - reach_x, 0), min(cx + reach_x, nx - 1)
                    row = (cz * ny + cy) * nx
                    run_bounds[0, 0] = cell_start[a]
                    run_bounds[0, 1] = dense_start[row + x_hi + 1]
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
                            n_cells[axis], box_axis[axis],
                            float(center[axis] - reach_cells[axis]),
                            float(center[axis] + reach_cells[axis]),
                        )
                    use_min_image = wrap_whole_axes(n_cells, box_axis, state.half_box, first,
                                                    last, half)
                    half3 = (half[0], half[1], half[2])
                    # Only the rows kernel that reads in place runs by id (`_pair_search.
                    # pair_kernel`; the functions' callers take the full stencil there): pruned
                    # from the others, with the helpers it calls.
                    if walks_by_id and by_id:
                        # The occupied cells b >= a, each once, by id, with cell a first.
                        needed = cells_needed(first, last, n_occupied)
                        if needed > found_cells.shape[0]:
                            found_cells, cell_shifts = cell_buffers(needed)
                        n_found = gather_cells(n_cells, box_axis, cell_coords, dense_lookup,
                                               hash_keys, hash_ids, first, last, found_cells,
                                               cell_shifts)
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
                        n_runs = gather_runs(n_cells, box_axis, cell_coords, cell_start,
                                             dense_start, hash_keys, hash_ids, first, last,
                                             True, center, (run_bounds, run_shifts))
                n_candidates = 0
                # A cell with image shifts or minimum images scans its runs one by one.
                shifted = True
                if gather:
                    shifted = use_min_image | sparse
                for r in range(n_runs):
                    n_candidates += run_bounds[r, 1] - run_bounds[r, 0]
                    if gather:
                        shifted |= (run_shifts[r, 0] != 0.0) | (run_shifts[r, 1] != 0.0) | (
                            run_shifts[r, 2] != 0.0)
                if n_candidates > hit_index.shape[0]:
                    hit_index = np.empty(n_candidates, np.int64)
                    hit_d2 = np.empty(n_candidates, np.float64)
                if visits_rows:
                    c = a - cell_begin
                    if appending:
                        position = n_appended
                    else:
                        position = positions[c] if write else 0
                own_start, own_end = cell_start[a], cell_start[a + 1]
                if gather and not shifted:
                    # No image shifts: copy the runs' points next to each other once, so
                    # that each point of cell a scans one long run (the candidates after it)
                    # instead of a few short ones. The copy is paid once per cell, the scan
                    # per point. Only the candidates within reach of the box bounding cell
                    # a's points are copied (the own cell's points always: see
                    # `gather_near`); the pairs and their order are unchanged.
                    if n_candidates > near[0].shape[0]:
                        near = near_buffers(n_candidates)
                    near_x, near_y, near_z, near_j, near_radii = near
                    n_candidates = gather_near(points, order, radii, r2, (run_bounds, n_runs),
                                               own_start, own_end, own_end, near)
                    # Run 0 starts at cell a: the candidates of its point i are the points
                    # after it there, then the other runs, in the order of the run-by-run
                    # loops below.
                    for i in range(own_start, own_end):
                        x, y, z = points[0, i], points[1, i], points[2, i]
                        radius = radii[i] if with_radii else 0.0
                        k_lo = np.uint64(i - own_start + 1)
                        k_hi = np.uint64(n_candidates)
                        n_hits = 0
                        if visits_rows and not write:
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
                        # without a branch (no test-and-branch to mispredict around every
                        # hit).
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
                        if visits_fn:
                            oi = np.int64(order[i])
                            for h in range(n_hits):
                                k = hit_index[h]
                                oj, d2 = near_j[k], hit_d2[k]
                                dx, dy, dz, _ = displacement(x, y, z, near_x[k], near_y[k],
                                                             near_z[k], NO_SHIFT, NO_BOX,
                                                             NO_BOX, False)
                                fn(oi, oj, d2, dx, dy, dz, *args)
                                if calls_both:
                                    fn(oj, oi, d2, -dx, -dy, -dz, *args)
                            continue
                        if appending and position + n_hits > out_indices.shape[0]:
                            out_indices, out_distances = grown_outputs(
                                out_indices, out_distances, position + n_hits)
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
                    for i in range(own_start, own_end):
                        x, y, z = points[0, i], points[1, i], points[2, i]
                        radius = radii[i] if with_radii else 0.0
                        n_hits = 0
                        for r in range(n_runs):
                            # Unsigned bounds: see the `cells` docstring.
                            start = np.uint64(i + 1 if r == 0 else run_bounds[r, 0])
                            end = np.uint64(run_bounds[r, 1])
                            shift = (run_shifts[r, 0], run_shifts[r, 1], run_shifts[r, 2])
                            if visits_rows and not write and not use_min_image:
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
                                d2 = displacement(x, y, z, points[0, j], points[1, j],
                                                  points[2, j], shift, box3, half3,
                                                  use_min_image)[3]
                                if with_radii:
                                    limit = radius + radii[j]
                                    hit = d2 <= limit * limit
                                else:
                                    hit = d2 <= r2
                                # Written unconditionally, kept only on a hit: no branch to
                                # mispredict.
                                hit_index[n_hits] = j
                                hit_d2[n_hits] = d2
                                n_hits += 1 if hit else 0
                            if visits_fn:
                                # Called run by run: the differences need the run's shift.
                                oi = np.int64(order[i])
                                for h in range(n_hits):
                                    j = hit_index[h]
                                    dx, dy, dz, _ = displacement(
                                        x, y, z, points[0, j], points[1, j], points[2, j],
                                        shift, box3, half3, use_min_image)
                                    oj = np.int64(order[j])
                                    fn(oi, oj, hit_d2[h], dx, dy, dz, *args)
                                    if calls_both:
                                        fn(oj, oi, hit_d2[h], -dx, -dy, -dz, *args)
                                n_hits = 0
                        if visits_rows:
                            if appending and position + n_hits > out_indices.shape[0]:
                                out_indices, out_distances = grown_outputs(
                                    out_indices, out_distances, position + n_hits)
                            if write:
                                oi = order[i]
                                for h in range(n_hits):
                                    oj = order[hit_index[h]]
                                    out_indices[position + h, 0] = oi if as_found else min(oi,
                                                                                           oj)
                                    out_indices[position + h, 1] = oj if as_found else max(oi,
                                                                                           oj)
                                    if want_distances:
                                        out_distances[position + h] = math.sqrt(hit_d2[h])
                            position += n_hits
                if visits_rows:
                    if appending:
                        n_appended = position
                    elif not write:
                        positions[c] = position
        if visits_rows:
            return out_indices, out_distances, n_appended
        return None

    return scan
