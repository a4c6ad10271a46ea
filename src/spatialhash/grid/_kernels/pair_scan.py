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

Shape. The walk finds each cell's runs (`dense_half_stencil` inline, else
`wrapping_ranges` with `cells.gather_runs` or `runs_by_id`), and the visits of
``pair_visits.py`` make the distance loops; all are inlined at numba's IR level. Arrays
pass into them one by one and only scalars come back: a call that is not inlined costs
numba an atomic reference-count update per array it passes, and a tuple of arrays built or
returned for each cell costs reference counts that numba does not prune; on small cells
either costs more than the distances.
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
from ..._kernels.distance import NO_BOX
from .pair_visits import (  # noqa: F401 (the consumers, named here for the scan's callers)
    BOTH_ORDERS,
    ONCE,
    ROWS,
    gather_near,
    grown_outputs,
    near_buffers,
    visit_gathered,
    visit_runs,
)
from .stencil import stencil_by_id

#: ``images`` of a visit without image shifts or minimum images (`pair_visits`).
NO_IMAGES = (NO_BOX, NO_BOX, False)
#: Grids of at least this many points per occupied cell gather each cell's candidates
#: into one run (see the module docstring).
GATHER_MIN_POINTS_PER_CELL = 3.0


@jit_inline
def dense_half_stencil(cell_start, dense_start, a, center, n_cells, reach, run_bounds,
                       run_shifts):
    """The runs of cell ``a``'s half stencil in a dense grid, for a cell whose stencil wraps
    no periodic axis, in the order of `cells.gather_runs`: the own row from cell ``a`` on,
    the other rows of the own plane, then the planes after it. Returns how many; the
    buffers must hold them all."""
    cx, cy, cz = center
    nx, ny, nz = n_cells
    reach_x, reach_y, reach_z = reach
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
    return n_runs


@jit_inline
def wrapping_ranges(state, a, reach_cells, first, last, half):
    """Fill ``first``, ``last`` and ``half`` for cell ``a``'s stencil in the general case
    (periodic images, sparse grids; `cells.axis_range`); returns ``(use_min_image,
    half3)``: minimum images per pair where the range covers a whole periodic axis."""
    cell_coords, n_cells, box_axis = state.cell_coords, state.n_cells, state.box
    for axis in range(3):
        first[axis], last[axis] = axis_range(n_cells[axis], box_axis[axis],
                                             float(cell_coords[a, axis] - reach_cells[axis]),
                                             float(cell_coords[a, axis] + reach_cells[axis]))
    use_min_image = wrap_whole_axes(n_cells, box_axis, state.half_box, first, last, half)
    return use_min_image, (half[0], half[1], half[2])


@jit_inline
def runs_by_id(state, a, first, last, found_cells, cell_shifts, run_bounds, run_shifts):
    """The occupied cells ``b >= a`` of the cell box ``first..last``, each once, by id, as
    runs, cell ``a`` first; returns how many. The buffers must hold `cells.cells_needed`
    cells and one run more."""
    cell_start = state.cell_start
    n_found = gather_cells(state.n_cells, state.box, state.cell_coords, state.dense_lookup,
                           state.hash_keys, state.hash_ids, first, last, found_cells,
                           cell_shifts)
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
    return n_runs

@jit
def dense_interior(n_cells, box, reach_cells):
    """``(low, high, most_runs)``: the cells ``low <= (x, y, z) < high`` of a dense grid
    whose half stencil wraps no periodic axis, whose runs `dense_half_stencil` finds, and
    the most runs it finds for a cell. A periodic axis has ``2 * reach + 1`` cells or more
    where it is used (else the pairs are found by id): cells ``reach`` from its ends do not
    wrap; on an open axis no cell does."""
    low = np.empty(3, np.int64)
    high = np.empty(3, np.int64)
    for axis in range(3):
        margin = -n_cells[axis] if math.isinf(box[axis]) else reach_cells[axis]
        low[axis], high[axis] = margin, n_cells[axis] - margin
    most_runs = 1 + min(2 * reach_cells[1] + 1, n_cells[1]) * (
        min(reach_cells[2], n_cells[2] - 1) + 1)
    return (low[0], low[1], low[2]), (high[0], high[1], high[2]), most_runs


@jit
def no_rows():
    """Empty placeholders of the rows outputs, for the visitors that call functions."""
    return np.empty(0, np.int64), np.empty((0, 2), np.int64), np.empty(0, np.float64)


@jit_inline
def runs_extent(run_bounds, run_shifts, n_runs):
    """``(points, shifted)``: how many points the first ``n_runs`` runs hold, and whether
    any of them has an image shift."""
    n_points = 0
    shifted = False
    for r in range(n_runs):
        n_points += run_bounds[r, 1] - run_bounds[r, 0]
        shifted |= (run_shifts[r, 0] != 0.0) | (run_shifts[r, 1] != 0.0) | (
            run_shifts[r, 2] != 0.0)
    return n_points, shifted


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

    def scan(state, params, lo, hi, fn, args):
        points, order, cell_start = state.points, state.order, state.cell_start
        cell_coords, n_cells, box_axis = state.cell_coords, state.n_cells, state.box
        box3 = (box_axis[0], box_axis[1], box_axis[2])
        r2, radii, reach_cells, cell_ranges = params
        if visits_rows:
            cell_begin, positions, out_indices, out_distances, write, as_found = args
            appending = write and positions.shape[0] == 0
        else:  # no rows: placeholders for the visits' row arguments, never read
            cell_begin, positions, out_indices, out_distances = 0, *no_rows()
            write = appending = as_found = False
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
        first, last, half = np.empty(3, np.int64), np.empty(3, np.int64), np.empty(3, np.float64)
        # One strategy for every cell: mixing them would meet some pairs of cells twice.
        by_id = stencil_by_id(n_cells, box_axis, reach_cells, n_occupied)
        # In a dense grid, a cell whose stencil wraps no periodic axis (every cell when no
        # axis is periodic) finds its runs inline: the general path (ranges, images, probing)
        # cost as much a cell as the distance tests of a cell of a few points.
        inline_runs = state.dense_start.shape[0] > 0 and not by_id
        low, high, most_runs = dense_interior(n_cells, box_axis, reach_cells)
        if inline_runs and most_runs > run_bounds.shape[0]:
            run_bounds, run_shifts = run_buffers(most_runs)
        dims = (n_cells[0], n_cells[1], n_cells[2])
        reach = (reach_cells[0], reach_cells[1], reach_cells[2])
        for item in range(lo, hi):
            for a in range(cell_ranges[item, 0], cell_ranges[item, 1]):
                center = (cell_coords[a, 0], cell_coords[a, 1], cell_coords[a, 2])
                cx, cy, cz = center
                if (inline_runs and low[0] <= cx < high[0] and low[1] <= cy < high[1]
                        and low[2] <= cz < high[2]):
                    use_min_image, half3 = False, NO_BOX
                    n_runs = dense_half_stencil(cell_start, state.dense_start, a, center, dims,
                                                reach, run_bounds, run_shifts)
                else:
                    use_min_image, half3 = wrapping_ranges(state, a, reach_cells, first, last,
                                                           half)
                    # Only the rows kernel that reads in place walks by id (`_pair_search.
                    # pair_kernel`; the functions' callers take the full stencil there):
                    # pruned from the others, with the helpers it calls.
                    if walks_by_id and by_id:
                        needed = cells_needed(first, last, n_occupied)
                        if needed > found_cells.shape[0]:
                            found_cells, cell_shifts = cell_buffers(needed)
                        if needed + 1 > run_bounds.shape[0]:
                            run_bounds, run_shifts = run_buffers(needed + 1)
                        n_runs = runs_by_id(state, a, first, last, found_cells, cell_shifts,
                                            run_bounds, run_shifts)
                    else:
                        needed = runs_capacity(first, last, n_occupied)
                        if needed > run_bounds.shape[0]:
                            run_bounds, run_shifts = run_buffers(needed)
                        n_runs = gather_runs(n_cells, box_axis, cell_coords, cell_start,
                                             state.dense_start, state.hash_keys,
                                             state.hash_ids, first, last, True, center,
                                             (run_bounds, run_shifts))
                n_candidates, any_shift = runs_extent(run_bounds, run_shifts, n_runs)
                # A cell with image shifts or minimum images scans its runs one by one.
                shifted = use_min_image | sparse | any_shift if gather else True
                if n_candidates > hit_index.shape[0]:
                    hit_index = np.empty(n_candidates, np.int64)
                    hit_d2 = np.empty(n_candidates, np.float64)
                c, position = a - cell_begin, 0
                if visits_rows:
                    if appending:
                        position = n_appended
                        # Room for every candidate of every point of the cell.
                        most = position + (cell_start[a + 1] - cell_start[a]) * n_candidates
                        if most > out_indices.shape[0]:
                            out_indices, out_distances = grown_outputs(out_indices,
                                                                       out_distances, most)
                    elif write:
                        position = positions[c]
                if gather and not shifted:
                    # The candidates copied next to each other (the module docstring).
                    if n_candidates > near[0].shape[0]:
                        near = near_buffers(n_candidates)
                    own_end = cell_start[a + 1]
                    n_near = gather_near(points, order, radii, r2, (run_bounds, n_runs),
                                         cell_start[a], own_end, own_end, near)
                    position = visit_gathered(
                        state, params, near, hit_index, hit_d2, out_indices, out_distances,
                        (a, n_near, position, write, as_found, NO_IMAGES), visitor, fn, args)
                else:
                    position = visit_runs(
                        state, params, run_bounds, run_shifts, hit_index, hit_d2, out_indices,
                        out_distances, (a, n_runs, position, write, as_found,
                                        (box3, half3, use_min_image)), visitor, fn, args)
                if visits_rows:
                    if appending:
                        n_appended = position
                    elif not write:
                        positions[c] = position
        if visits_rows:
            return out_indices, out_distances, n_appended
        return None

    return scan
