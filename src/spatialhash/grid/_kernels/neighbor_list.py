"""The pairs of a neighbour list's candidates within ``r``, as the pair kernels compute them."""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..._config import jit_parallel
from ..._kernels.cells import min_image

#: Fixed parts of the candidates, so that the output is the same for any thread count.
N_PARTS = 64


@jit_parallel
def candidates_within(points, order, candidates, box, half_box, r2, out_indices,
                      out_distances):
    """Write the candidate pairs within ``sqrt(r2)`` to ``out_indices`` (the caller's
    indices, smaller first) and ``out_distances``, in candidate order; returns how many.

    ``points`` are the (n, d) positions in the caller's order, wrapped into the periodic
    axes of ``box`` (``half_box`` is ``box / 2``, ``inf`` on open axes); ``order`` maps a
    position in the build's cell order to the caller's index, and ``candidates`` index
    that cell order, so that a candidate's two points are read from memory near the last
    candidate's. The difference per axis, its nearest image (`cells.min_image`), squared
    and summed in axis order: the arithmetic of the pair kernels, so a pair is kept exactly
    when ``query_pairs`` reports it.

    The candidates are cut into `N_PARTS` fixed parts, each scanned on some thread into
    its own rows of the outputs (a part keeps at most its own candidates), then moved down
    in order: the rows are the same for any thread count.
    """
    n, d = points.shape
    in_cells = np.zeros((n, 3), np.float64)
    for s in prange(n):
        i = order[s]
        for axis in range(d):
            in_cells[s, axis] = points[i, axis]
    m = candidates.shape[0]
    kept = np.zeros(N_PARTS, np.int64)
    for part in prange(N_PARTS):
        lo, hi = part * m // N_PARTS, (part + 1) * m // N_PARTS
        row = lo
        for c in range(lo, hi):
            a, b = candidates[c, 0], candidates[c, 1]
            d2 = 0.0
            for axis in range(d):
                delta = min_image(in_cells[a, axis] - in_cells[b, axis], box[axis],
                                  half_box[axis])
                d2 += delta * delta
            # Written unconditionally, kept only within r: no branch to mispredict (about
            # half the candidates are kept).
            first, second = order[a], order[b]
            out_indices[row, 0] = min(first, second)
            out_indices[row, 1] = max(first, second)
            out_distances[row] = d2
            row += 1 if d2 <= r2 else 0
        kept[part] = row - lo
    n_kept = kept[0]
    for part in range(1, N_PARTS):
        lo = part * m // N_PARTS
        for t in range(kept[part]):
            out_indices[n_kept + t, 0] = out_indices[lo + t, 0]
            out_indices[n_kept + t, 1] = out_indices[lo + t, 1]
            out_distances[n_kept + t] = out_distances[lo + t]
        n_kept += kept[part]
    for k in prange(n_kept):
        out_distances[k] = math.sqrt(out_distances[k])
    return n_kept
