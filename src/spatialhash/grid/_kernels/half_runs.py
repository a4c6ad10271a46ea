"""The runs of the half stencils of a batch of cells, found in one call (`half_stencil_runs`).

The pair scan (`pair_scan.half_stencil_scan`) asks for the runs of its cells
`CELLS_PER_BATCH` cells at a time, into flat buffers (a CSR of runs by cell): one call, and
its reference counts, a batch rather than a cell, and the run finding compiled on its own
and cached (with the walk by id and without) rather than into every
variant of the scan and every user's function of `Grid.for_each_pair`.
"""

from __future__ import annotations

import math

import numpy as np

from ..._config import jit, jit_variant
from ..._kernels.cells import (
    cell_buffers,
    cells_needed,
    gather_cells,
    gather_runs,
    range_buffers,
    run_buffers,
    runs_capacity,
    stencil_range,
    wrap_whole_axes,
)
from .stencil import stencil_by_id

#: Cells whose runs `half_stencil_runs` finds in one call.
CELLS_PER_BATCH = 32


@jit
def batch_buffers():
    """The buffers of `half_stencil_runs`: ``(cell_runs, run_bounds, run_shifts, cell_half,
    cell_info)``."""
    return (np.empty(CELLS_PER_BATCH + 1, np.int64), np.empty((256, 2), np.int64),
            np.empty((256, 3), np.float64), np.empty((CELLS_PER_BATCH, 3), np.float64),
            np.empty((CELLS_PER_BATCH, 3), np.int64))


@jit
def _grown_runs(run_bounds, run_shifts, n_kept, needed):
    """Copies of the runs buffers with room for ``needed`` runs, the first ``n_kept`` kept."""
    bounds, shifts = run_buffers(max(needed, 2 * run_bounds.shape[0]))
    for r in range(n_kept):
        bounds[r, 0], bounds[r, 1] = run_bounds[r, 0], run_bounds[r, 1]
        shifts[r, 0], shifts[r, 1], shifts[r, 2] = run_shifts[r, 0], run_shifts[r, 1], \
            run_shifts[r, 2]
    return bounds, shifts


def _half_stencil_runs(walks_by_id):
    """`half_stencil_runs`, ``walks_by_id`` a constant (see `half_stencil_runs_by_id`)."""

    def half_stencil_runs(state, reach_cells, gather, cells, batch):
        """The runs of the half stencils of the cells ``cells = (a_lo, a_hi)`` (at most
        `CELLS_PER_BATCH`) of the grid ``state``, written into ``batch`` (`batch_buffers`,
        grown as needed, and returned): cell ``a_lo + c``'s runs are ``cell_runs[c] ..
        cell_runs[c + 1] - 1`` of ``run_bounds``/``run_shifts``, the first starting at the
        cell's first point; ``cell_half[c]`` holds its half periods for `cells.min_image`
        (``inf`` where none), and ``cell_info[c]`` its number of candidates, whether it takes
        minimum images, and whether it gathers its candidates (``gather``, and no image shift
        nor minimum image).

        Where the grid's pairs are found by id (`stencil.stencil_by_id`) and ``walks_by_id``
        (the rows kernel that reads in place, `_pair_search.pair_kernel`: the other kernels
        are not sent such grids), the runs are the occupied cells ``b >= a`` by id, cell ``a``
        first. In a dense grid otherwise, a cell whose stencil wraps no periodic axis finds
        its runs inline: the general path (ranges, images, probing) cost as much a cell as
        the distance tests of a cell of a few points.
        """
        a_lo, a_hi = cells
        cell_runs, run_bounds, run_shifts, cell_half, cell_info = batch
        cell_start, cell_coords, n_cells = state.cell_start, state.cell_coords, state.n_cells
        box, dense_start = state.box, state.dense_start
        n_occupied = cell_coords.shape[0]
        by_id = stencil_by_id(n_cells, box, reach_cells, n_occupied)
        first, last, half = range_buffers()
        scratch = run_buffers(32)
        found_cells, cell_shifts = cell_buffers(32)
        inline_runs = dense_start.shape[0] > 0 and not by_id
        nx, ny, nz = n_cells[0], n_cells[1], n_cells[2]
        reach_x, reach_y, reach_z = reach_cells[0], reach_cells[1], reach_cells[2]
        # A periodic axis has 2 * reach + 1 cells or more here (else `by_id`): cells this far
        # from its ends do not wrap.
        wrap_x = reach_x if not math.isinf(box[0]) else -nx
        wrap_y = reach_y if not math.isinf(box[1]) else -ny
        wrap_z = reach_z if not math.isinf(box[2]) else -nz
        most_runs = 1 + min(2 * reach_y + 1, ny) * (min(reach_z, nz - 1) + 1)
        n_runs = 0
        cell_runs[0] = 0
        for c in range(a_hi - a_lo):
            a = a_lo + c
            cx, cy, cz = cell_coords[a, 0], cell_coords[a, 1], cell_coords[a, 2]
            use_min_image = False
            if (inline_runs and wrap_x <= cx < nx - wrap_x and wrap_y <= cy < ny - wrap_y
                    and wrap_z <= cz < nz - wrap_z):
                # The half stencil of `cells.gather_runs`, in its order: the own row from cell
                # a on, the other rows of the own plane, then the planes after it.
                if n_runs + most_runs > run_bounds.shape[0]:
                    run_bounds, run_shifts = _grown_runs(run_bounds, run_shifts, n_runs,
                                                         n_runs + most_runs)
                x_lo, x_hi = max(cx - reach_x, 0), min(cx + reach_x, nx - 1)
                row = (cz * ny + cy) * nx
                run_bounds[n_runs, 0] = cell_start[a]
                run_bounds[n_runs, 1] = dense_start[row + x_hi + 1]
                n_runs += 1
                for z in range(cz, min(cz + reach_z, nz - 1) + 1):
                    for y in range(cy + 1 if z == cz else max(cy - reach_y, 0),
                                   min(cy + reach_y, ny - 1) + 1):
                        row = (z * ny + y) * nx
                        start, end = dense_start[row + x_lo], dense_start[row + x_hi + 1]
                        if end > start:
                            run_bounds[n_runs, 0], run_bounds[n_runs, 1] = start, end
                            n_runs += 1
                for r in range(cell_runs[c], n_runs):
                    run_shifts[r, 0] = run_shifts[r, 1] = run_shifts[r, 2] = 0.0
                for axis in range(3):
                    cell_half[c, axis] = np.inf
            else:
                stencil_range(n_cells, box, cell_coords, a, reach_cells, first, last)
                use_min_image = wrap_whole_axes(n_cells, box, state.half_box, first, last, half)
                for axis in range(3):
                    cell_half[c, axis] = half[axis]
                if walks_by_id and by_id:
                    needed = cells_needed(first, last, n_occupied)
                    if needed > found_cells.shape[0]:
                        found_cells, cell_shifts = cell_buffers(needed)
                    n_found = gather_cells(n_cells, box, cell_coords, state.dense_lookup,
                                           state.hash_keys, state.hash_ids, first, last,
                                           found_cells, cell_shifts)
                    if n_runs + n_found + 1 > run_bounds.shape[0]:
                        run_bounds, run_shifts = _grown_runs(run_bounds, run_shifts, n_runs,
                                                             n_runs + n_found + 1)
                    run_bounds[n_runs, 0], run_bounds[n_runs, 1] = cell_start[a], cell_start[a + 1]
                    run_shifts[n_runs, 0] = run_shifts[n_runs, 1] = run_shifts[n_runs, 2] = 0.0
                    n_runs += 1
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
                    if needed > scratch[0].shape[0]:
                        scratch = run_buffers(needed)
                    n_found = gather_runs(n_cells, box, cell_coords, cell_start, dense_start,
                                          state.hash_keys, state.hash_ids, first, last, True,
                                          (cx, cy, cz), scratch)
                    if n_runs + n_found > run_bounds.shape[0]:
                        run_bounds, run_shifts = _grown_runs(run_bounds, run_shifts, n_runs,
                                                             n_runs + n_found)
                    for f in range(n_found):
                        run_bounds[n_runs + f, 0] = scratch[0][f, 0]
                        run_bounds[n_runs + f, 1] = scratch[0][f, 1]
                        for axis in range(3):
                            run_shifts[n_runs + f, axis] = scratch[1][f, axis]
                    n_runs += n_found
            n_candidates = 0
            shifted = use_min_image
            for r in range(cell_runs[c], n_runs):
                n_candidates += run_bounds[r, 1] - run_bounds[r, 0]
                shifted |= (run_shifts[r, 0] != 0.0) | (run_shifts[r, 1] != 0.0) | (
                    run_shifts[r, 2] != 0.0)
            cell_runs[c + 1] = n_runs
            cell_info[c, 0] = n_candidates
            cell_info[c, 1] = 1 if use_min_image else 0
            cell_info[c, 2] = 1 if gather and not shifted else 0
        return cell_runs, run_bounds, run_shifts, cell_half, cell_info

    return half_stencil_runs


#: The run finders: without the walk by id, and with it for the rows kernel that reads in
#: place (the only one that walks by id): the others compile without that walk and the
#: helpers it calls (numba prunes the branch on the constant), which cost the first
#: ``query_pairs`` about a sixth of its compile.
half_stencil_runs = jit_variant(_half_stencil_runs(False), "half_stencil_runs")
half_stencil_runs_by_id = jit_variant(_half_stencil_runs(True), "half_stencil_runs_by_id")
