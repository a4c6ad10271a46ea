"""The reach of a pair search in cells, and which stencil finds its pairs.

`reach_in_cells` bounds the cells a search must look at on each side; `stencil_by_id`
decides, once for the grid, whether the scan of pairs (``pair_scan.py``) walks each cell's
half stencil or the occupied cells after it by id.
"""

from __future__ import annotations

import math

import numpy as np

from ..._config import jit
from ..._kernels.cells import RANGE_ABSOLUTE_TOLERANCE, RANGE_RELATIVE_TOLERANCE


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
    """Whether pairs are found by cell id rather than by the half stencil (see
    ``pair_scan.py``): when the stencil wraps a whole periodic axis (its offsets alias), or holds
    at least as many cells as are occupied. Decided once for the whole grid."""
    volume = 1.0
    for axis in range(3):
        span = 2 * reach_cells[axis] + 1
        if not math.isinf(box[axis]) and span >= n_cells[axis]:
            return True
        volume *= min(span, n_cells[axis])
    return volume >= n_occupied
