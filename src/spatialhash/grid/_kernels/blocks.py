"""Blocks of cells read once for the queries that share them (radius and k-nearest queries).

Queries go in cell order (`build.query_order`), so consecutive queries mostly need the same
block of cells around their own: its points are copied next to each other once, in the
order of its rows, and each query scans them in one long loop that LLVM vectorizes (row by
row, the loops' set-up and scalar remainders cost more than the distances). The copy holds
the points' caller indices (``order[j]``), read in order here rather than at random for
every hit.

The helpers are called once per row or once per block, never per candidate, and inlined
(`jit_inline`): `gather_block` compiled as a function of its own made 50,000 radius queries
among 200,000 points 9-15% slower (``benchmarks/bench_ab.py`` ``radius200k``, two runs),
likely because the arrays it returned were, to LLVM, of unknown origin in the loops that
scan them (the assembly was not checked).
"""

from __future__ import annotations

import numpy as np

from ..._config import jit_inline
from ..._kernels.cells import sparse_row_slice


@jit_inline
def row_slice(dense_start, hash_keys, hash_ids, cell_start, cell_coords, n_x, n_y, x_lo, x_hi,
              y, z):
    """Slice ``(start, end)`` of the sorted points in cells ``x_lo .. x_hi`` of row
    ``(y, z)`` of the box of cells (``n_x`` by ``n_y`` cells a plane): two loads in a dense
    grid, `cells.sparse_row_slice` in a sparse one."""
    if dense_start.shape[0] > 0:
        row = (z * n_y + y) * n_x
        return dense_start[row + x_lo], dense_start[row + x_hi + 1]
    return sparse_row_slice(hash_keys, hash_ids, cell_start, cell_coords, x_lo, x_hi, y, z)


@jit_inline
def block_buffers(order, size):
    """Room for ``size`` points of a block: coordinates, and indices of ``order``'s type."""
    return (np.empty(size, np.float64), np.empty(size, np.float64), np.empty(size, np.float64),
            np.empty(size, order.dtype))


@jit_inline
def gather_block(points, order, run_bounds, n_rows, near):
    """Copy the points of runs ``0 .. n_rows - 1`` of ``run_bounds`` next to each other
    into ``near = (x, y, z, index)``, ``index`` the caller's (``order[j]``), the arrays
    grown as needed. Returns the arrays and how many points were copied."""
    near_x, near_y, near_z, near_index = near
    n_near = 0
    for r in range(n_rows):
        n_near += run_bounds[r, 1] - run_bounds[r, 0]
    if n_near > near_x.shape[0]:
        near_x = np.empty(n_near, np.float64)
        near_y = np.empty(n_near, np.float64)
        near_z = np.empty(n_near, np.float64)
        near_index = np.empty(n_near, order.dtype)
    e = 0
    for r in range(n_rows):
        # Unsigned bounds: see the `cells` docstring.
        for j in range(np.uint64(run_bounds[r, 0]), np.uint64(run_bounds[r, 1])):
            near_x[e] = points[0, j]
            near_y[e] = points[1, j]
            near_z[e] = points[2, j]
            near_index[e] = order[j]
            e += 1
    return (near_x, near_y, near_z, near_index), n_near
