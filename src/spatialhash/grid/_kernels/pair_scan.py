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
thread, versions alternated). The runs are found a batch of `half_runs.CELLS_PER_BATCH`
cells at a time instead (`half_runs.half_stencil_runs`), so those counts are paid once a
batch. A gathered cell's candidates are a ``(3, n)`` array and an index array, as the
grid's points and ``order`` are, scanned as one run: one loop serves both.
"""

from __future__ import annotations

import math

import numpy as np

from ..._config import jit, jit_inline
from ..._kernels.cells import hit_buffers
from ..._kernels.distance import NO_BOX, displacement
from .half_runs import (
    CELLS_PER_BATCH,
    batch_buffers,
    half_stencil_runs,
    half_stencil_runs_by_id,
)

#: Grids of at least this many points per occupied cell gather each cell's candidates
#: into one run (see the module docstring).
GATHER_MIN_POINTS_PER_CELL = 3.0
#: The consumers of `half_stencil_scan` (see the module docstring).
ROWS, BOTH_ORDERS, ONCE = "rows", "both orders", "once"


@jit_inline
def gather_near(points, order, radii, r2, runs, own_start, own_end, keep_below, near):
    """Copy the points of the runs ``runs = (run_bounds, r_lo, r_hi)`` that lie within reach of
    the box bounding the points ``own_start .. own_end - 1`` (one cell's) next to each
    other, in the order of the runs, into ``near = (points, j, radii)``: coordinates (one
    row per axis), original indices (``order``) and, ``radii`` not empty, radii (its
    `near_buffers`, grown to hold every point of the runs); returns the buffers and how
    many were copied. Within reach: ``sqrt(r2)``, or the cell's
    largest radius plus the point's. Points before ``keep_below`` (the cell's own, for a
    half stencil, whose index arithmetic counts on them) are kept whatever their distance.

    A point left out is no pair of any point of the cell, in floating point too:
    ``|x_i - x_j|`` rounds to at least what the distance to the box's face rounds to
    (rounding is monotone), and so do the squares and sums. On 5,000 uniform points in
    3-D, 54% of the other cells' points were copied (counted).
    """
    run_bounds, r_lo, r_hi = runs
    n_candidates = 0
    for r in range(r_lo, r_hi):
        n_candidates += run_bounds[r, 1] - run_bounds[r, 0]
    if n_candidates > near[1].shape[0]:
        near = near_buffers(order, n_candidates)
    near_points, near_j, near_radii = near
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
    for r in range(r_lo, r_hi):
        for j in range(np.uint64(run_bounds[r, 0]), np.uint64(run_bounds[r, 1])):
            px, py, pz = points[0, j], points[1, j], points[2, j]
            near_points[0, k] = px
            near_points[1, k] = py
            near_points[2, k] = pz
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
    return near, k


@jit
def near_buffers(order, size):
    """Room for ``size`` gathered candidates: coordinates (one row per axis, as the grid's
    points), original indices (of ``order``'s type) and radii."""
    return (np.empty((3, size), np.float64), np.empty(size, order.dtype),
            np.empty(size, np.float64))


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
    run by run, with the differences computed again by the same arithmetic and the run's
    shift: a branch on every
    distance, mispredicted around every hit, cost more than the distances.
    """
    visits_rows = visitor == ROWS
    walks_by_id = visits_rows and not gather
    calls_both = visitor == BOTH_ORDERS

    def scan(state, params, lo, hi, fn, args):
        points, order, cell_start = state.points, state.order, state.cell_start
        box3 = (state.box[0], state.box[1], state.box[2])
        r2, radii, reach_cells, cell_ranges = params
        with_radii = radii.shape[0] > 0
        if visits_rows:
            cell_begin, positions, out_indices, out_distances, write, as_found = args
            want_distances = out_distances.shape[0] > 0
            appending = write and positions.shape[0] == 0
            n_appended = 0
        hit_d2, hit_index = hit_buffers(256)
        # A module's function, not a closure's variable: numba keys its disk cache by those.
        find_runs = half_stencil_runs_by_id if walks_by_id else half_stencil_runs
        if gather:
            near = near_buffers(order, 256)
            one_run, no_shifts = np.zeros((1, 2), np.int64), np.zeros((1, 3), np.float64)
        # The functions' kernels check the density (the rows kernels' caller chose by it).
        dense = visits_rows or cell_start[-1] >= GATHER_MIN_POINTS_PER_CELL * (len(cell_start) - 1)
        batch = batch_buffers()
        cell_runs, run_bounds, run_shifts, cell_half, cell_info = batch
        b_lo = b_hi = 0
        for item in range(lo, hi):
            for a in range(cell_ranges[item, 0], cell_ranges[item, 1]):
                if a == cell_ranges[item, 0] or a == b_hi:
                    b_lo, b_hi = a, min(a + CELLS_PER_BATCH, cell_ranges[item, 1])
                    batch = find_runs(state, reach_cells, gather and dense, (b_lo, b_hi), batch)
                    cell_runs, run_bounds, run_shifts, cell_half, cell_info = batch
                cb = a - b_lo
                n_candidates, use_min_image = cell_info[cb, 0], cell_info[cb, 1] != 0
                half3 = (cell_half[cb, 0], cell_half[cb, 1], cell_half[cb, 2])
                if n_candidates > hit_index.shape[0]:
                    hit_d2, hit_index = hit_buffers(n_candidates)
                if visits_rows:
                    position = n_appended if appending else (positions[a - cell_begin] if write
                                                             else 0)
                own_start, own_end = cell_start[a], cell_start[a + 1]
                # The candidates: the runs' points where they lie, or, a cell without image
                # shifts, copied next to each other once, as one run (see "Gathering").
                src, src_j, src_radii, bounds, shifts = points, order, radii, run_bounds, run_shifts
                rr_lo, rr_hi = cell_runs[cb], cell_runs[cb + 1]
                if gather and cell_info[cb, 2] != 0:
                    near, one_run[0, 1] = gather_near(points, order, radii, r2,
                                                      (run_bounds, rr_lo, rr_hi), own_start,
                                                      own_end, own_end, near)
                    src, src_j, src_radii = near
                    bounds, shifts, rr_lo, rr_hi = one_run, no_shifts, 0, 1
                for i in range(own_start, own_end):
                    x, y, z = points[0, i], points[1, i], points[2, i]
                    radius = radii[i] if with_radii else 0.0
                    for r in range(rr_lo, rr_hi):
                        # Point i pairs with the points after it in cell a, the first run.
                        start = np.uint64(bounds[r, 0] + (i + 1 - own_start if r == rr_lo else 0))
                        end = np.uint64(bounds[r, 1])
                        shift = (shifts[r, 0], shifts[r, 1], shifts[r, 2])
                        if visits_rows and not write and not use_min_image:
                            # Counting: branch-free, so LLVM vectorizes it (unsigned bounds:
                            # see the `cells` docstring; `with_radii` is unswitched).
                            for j in range(start, end):
                                d2 = displacement(x, y, z, src[0, j], src[1, j], src[2, j],
                                                  shift, NO_BOX, NO_BOX, False)[3]
                                limit = radius + src_radii[j] if with_radii else 0.0
                                position += 1 if (d2 <= limit * limit if with_radii
                                                  else d2 <= r2) else 0
                            continue
                        # The distances (the image test out of the loop), then the hits.
                        if use_min_image:
                            for k in range(end - start):
                                j = start + k
                                hit_d2[k] = displacement(x, y, z, src[0, j], src[1, j],
                                                         src[2, j], shift, box3, half3, True)[3]
                        else:
                            for k in range(end - start):
                                j = start + k
                                hit_d2[k] = displacement(x, y, z, src[0, j], src[1, j],
                                                         src[2, j], shift, NO_BOX, NO_BOX,
                                                         False)[3]
                        n_hits = 0
                        for k in range(end - start):
                            limit = radius + src_radii[start + k] if with_radii else 0.0
                            hit_index[n_hits] = k
                            n_hits += 1 if (hit_d2[k] <= limit * limit if with_radii
                                            else hit_d2[k] <= r2) else 0
                        if not visits_rows:
                            oi = np.int64(order[i])
                            for h in range(n_hits):
                                j, d2 = start + np.uint64(hit_index[h]), hit_d2[hit_index[h]]
                                dx, dy, dz, _ = displacement(x, y, z, src[0, j], src[1, j],
                                                             src[2, j], shift, box3, half3,
                                                             use_min_image)
                                oj = np.int64(src_j[j])
                                fn(oi, oj, d2, dx, dy, dz, *args)
                                if calls_both:
                                    fn(oj, oi, d2, -dx, -dy, -dz, *args)
                            continue
                        if appending and position + n_hits > out_indices.shape[0]:
                            out_indices, out_distances = grown_outputs(
                                out_indices, out_distances, position + n_hits)
                        if write:
                            oi = order[i]
                            for h in range(n_hits):
                                k = hit_index[h]
                                oj = src_j[start + np.uint64(k)]
                                out_indices[position + h, 0] = oi if as_found else min(oi, oj)
                                out_indices[position + h, 1] = oj if as_found else max(oi, oj)
                                if want_distances:
                                    out_distances[position + h] = math.sqrt(hit_d2[k])
                        position += n_hits
                if visits_rows and appending:
                    n_appended = position
                elif visits_rows and not write:
                    positions[a - cell_begin] = position
        if visits_rows:
            return out_indices, out_distances, n_appended
        return None

    return scan
