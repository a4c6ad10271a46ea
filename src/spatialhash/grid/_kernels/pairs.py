"""All pairs within a distance as rows: a count pass, then a fill pass into exact-size
outputs, or one pass appending.

The scan is `pair_scan.half_stencil_scan` with the `pair_scan.ROWS` visitor, compiled
twice: `pairs_scan_cells` scans each run of candidates in turn, `pairs_scan_cells_gathered`
(for grids of several points per cell) first gathers each cell's candidates (see
``pair_scan.py``). `pairs_parts` runs either on every thread.

Cells are spread over threads in chunks; the count pass gives each cell its offset in the
output, so the fill pass writes every pair to a place fixed in advance and the output is
the same for any thread count.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..._config import jit_parallel, jit_variant
from ..._kernels.indirect import kernel_caller
from .pair_scan import ROWS, half_stencil_scan

#: Occupied cells handed to a thread at a time.
CELLS_PER_CHUNK = 16

pairs_scan_cells = jit_variant(half_stencil_scan(gather=False, visitor=ROWS),
                               "pairs_scan_cells")
pairs_scan_cells_gathered = jit_variant(half_stencil_scan(gather=True, visitor=ROWS),
                                        "pairs_scan_cells_gathered")

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
def pairs_parts(state, params, cell_begin, positions, out_indices, out_distances, write,
                as_found, part_rows, n_written, kernel):
    """Scan the parts of the cells on every thread with the pair kernel at ``kernel`` (see
    `indirect`): `pairs_scan_cells` or `pairs_scan_cells_gathered`, which take the same
    arguments. ``params = (r2, radii, reach_cells, parts)``: part ``k`` is cells
    ``parts[k, 0]`` to ``parts[k, 1] - 1``. ``cell_begin .. as_found`` are the outputs of
    the `pair_scan.ROWS` visitor, passed one by one rather than as a tuple: the driver
    that took them as a tuple cost more cold compile (first multi-threaded ``query_pairs``
    of 60,000 points, alternating, ad hoc).

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
    pairs as found (see `pair_scan.half_stencil_scan`). The outputs are those of the count
    and fill passes, in their order, for any thread count.
    """
    parts = params[3]
    appending = part_rows.shape[0] > 0
    want_distances = out_distances.shape[0] > 0
    no_positions = np.empty(0, np.int64)
    _check_scan_cells(kernel, (state, params, 0, 0, None, (cell_begin, positions, out_indices,
                                                            out_distances, write, as_found)))
    for k in prange(parts.shape[0]):
        if appending:
            rows_lo, rows_hi = part_rows[k], part_rows[k + 1]
            begin, part_positions = parts[k, 0], no_positions
        else:
            rows_lo, rows_hi = 0, out_indices.shape[0]
            begin, part_positions = cell_begin, positions
        indices = out_indices[rows_lo:rows_hi]
        distances = out_distances[rows_lo:rows_hi] if want_distances else out_distances
        part = np.int64(k)  # prange's index is unsigned; the kernel takes int64
        written, _, n = _call_scan_cells(kernel, (
            state, params, part, part + 1, None,
            (begin, part_positions, indices, distances, write, as_found)))
        if appending:
            # Outputs that had to grow are copies: what they hold is lost, the part is
            # redone.
            n_written[k] = n if written.shape[0] == indices.shape[0] else -1
