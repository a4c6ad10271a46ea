"""A neighbour list's candidates: stored as rows, checked for moves, and the pairs among
them within ``r``, as the pair kernels compute them.

The candidates are kept in CSR form over the build's cell order: row ``s`` (the point at
position ``s`` of the build's `order`) lists the positions ``t`` of the points its scan met
in the build's pair search (`pair_scan.half_stencil_scan`, rows ``as_found``): those after it in
its cell, then those of its cell's half stencil, in the order of that search. Each
candidate pair is in one row only. A scan that needs every point's candidates on its own
row (the full rows) adds the transposed rows of `lower_rows`. The positions of the points
are copied into the same order, so that a row's candidates, nearby cells, are read from
memory near each other. Distances: the difference per axis, its nearest image
(`cells.min_image`), squared and summed in axis order: the arithmetic of the pair kernels,
so a pair is kept exactly when ``query_pairs`` reports it.

The pairs' search is cut into `N_PARTS` fixed parts of the rows, each counted and filled
on some thread into rows fixed by the counts: the output is the same for any thread count.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..._config import jit, jit_parallel
from ..._kernels.distance import NO_SHIFT, displacement

#: Fixed parts of the rows, so that the output is the same for any thread count.
N_PARTS = 64


@jit
def rows_of_found_pairs(found, indptr, neighbours):
    """The rows of the pairs ``found`` ((m, 2), ``(s, t)`` grouped by ``s`` in increasing
    order, `GridEngine.found_pairs`): fills ``indptr`` (n + 1) and ``neighbours`` (m, the
    ``t``). One pass: numpy's ``bincount`` of the strided column took more than a quarter
    of the time of the search (1.2 million pairs)."""
    n = indptr.shape[0] - 1
    m = found.shape[0]
    row = 0
    indptr[0] = 0
    for p in range(m):
        s = found[p, 0]
        while row < s:
            row += 1
            indptr[row] = p
        neighbours[p] = found[p, 1]
    while row < n:
        row += 1
        indptr[row] = m


@jit
def lower_rows(indptr, neighbours, lower_indptr, lower_neighbours):
    """The rows transposed: row ``t`` of ``lower_indptr`` (n + 1) and ``lower_neighbours``
    (as long as ``neighbours``) lists the rows ``s`` that hold ``t``, in increasing ``s``.
    A count pass and a fill pass, on the calling thread."""
    n = indptr.shape[0] - 1
    for t in range(n + 1):
        lower_indptr[t] = 0
    for c in range(indptr[n]):
        lower_indptr[neighbours[c] + 1] += 1
    for t in range(n):
        lower_indptr[t + 1] += lower_indptr[t]
    filled = lower_indptr[:n].copy()
    for s in range(n):
        for c in range(indptr[s], indptr[s + 1]):
            t = neighbours[c]
            lower_neighbours[filled[t]] = s
            filled[t] += 1


@jit
def moved_beyond(coords, built_at, box, limit2):
    """Whether two points of ``coords`` (n, d) may have come closer by more than
    ``2 * sqrt(limit2)`` since ``built_at``: whether every displacement (the difference
    per axis brought to its nearest image on the periodic axes of ``box``; ``coords``
    need not be wrapped) lies within ``sqrt(limit2)`` of neither the origin nor the
    centre of the box bounding the displacements. Any centre ``c`` bounds every pair,
    ``|d_i - d_j| <= |d_i - c| + |d_j - c|``: the origin serves points that jiggle in
    place, the centre a drift of them all (a falling body keeps its list). Two passes at
    most, on the calling thread: each pass reads every point once, and a parallel version
    cost far more cold compile than its passes would save."""
    n, d = coords.shape
    lower = np.full(d, np.inf)
    upper = np.full(d, -np.inf)
    farthest = 0.0
    for i in range(n):
        moved = 0.0
        for axis in range(d):
            delta = _displacement(coords[i, axis], built_at[i, axis], box[axis])
            lower[axis] = min(lower[axis], delta)
            upper[axis] = max(upper[axis], delta)
            moved += delta * delta
        farthest = max(farthest, moved)
    if farthest <= limit2:
        return False
    centre = 0.5 * (lower + upper)
    for i in range(n):
        moved = 0.0
        for axis in range(d):
            delta = _displacement(coords[i, axis], built_at[i, axis], box[axis]) - centre[axis]
            moved += delta * delta
        if moved > limit2:
            return True
    return False


@jit
def _displacement(now, then, period):
    """``now - then``, its nearest image on a periodic axis (``period`` finite). Within
    half a period the nearest image is the difference itself (up to the sign of a zero),
    and the division is skipped: it was about half the time of `moved_beyond`."""
    delta = now - then
    if np.isfinite(period) and abs(delta) > 0.5 * period:
        delta = delta - period * np.rint(delta / period)
    return delta


@jit_parallel
def positions_in_order(points, order, out):
    """``out[s] = points[order[s]]``, ``out`` (n, 3) with zeros on the axes ``points``
    (n, d) lacks."""
    d = points.shape[1]
    for s in prange(order.shape[0]):
        i = order[s]
        for axis in range(3):
            out[s, axis] = points[i, axis] if axis < d else 0.0


@jit
def _rows_count(positions, radii, indptr, neighbours, box, half_box, r2, lo, hi):
    """How many pairs of rows ``lo .. hi - 1`` lie within ``sqrt(r2)`` (or, ``radii`` not
    empty, within ``radii[s] + radii[t]``)."""
    kept = 0
    with_radii = radii.shape[0] > 0
    for s in range(lo, hi):
        x, y, z = positions[s, 0], positions[s, 1], positions[s, 2]
        for c in range(indptr[s], indptr[s + 1]):
            t = neighbours[c]
            d2 = displacement(x, y, z, positions[t, 0], positions[t, 1], positions[t, 2],
                              NO_SHIFT, box, half_box, True)[3]
            limit2 = _limit2(radii, s, t, r2) if with_radii else r2
            # Counted without a branch: about half the candidates are kept, a branch on
            # them would be mispredicted half the time.
            kept += 1 if d2 <= limit2 else 0
    return kept


@jit
def _limit2(radii, s, t, r2):
    """The squared contact distance of ``s`` and ``t``, as the pair kernels compute it."""
    limit = radii[s] + radii[t]
    return limit * limit


@jit
def _rows_fill(positions, radii, order, rows, box, half_box, r2, lo, hi, outputs):
    """The ``n_kept`` pairs of rows ``lo .. hi - 1`` (of ``rows = (indptr, neighbours)``)
    within reach (see `_rows_count`), written into ``outputs = (indices, distances, row,
    n_kept)`` from ``row`` on. Every candidate is written, at the next row while some remain
    to be kept and at the last row of the outputs (a spare, cut off by the caller) once all
    are: no branch on the distances."""
    indptr, neighbours = rows
    indices, distances, row, n_kept = outputs
    spare = indices.shape[0] - 1
    kept = 0
    with_radii = radii.shape[0] > 0
    for s in range(lo, hi):
        x, y, z = positions[s, 0], positions[s, 1], positions[s, 2]
        own = order[s]
        for c in range(indptr[s], indptr[s + 1]):
            t = neighbours[c]
            d2 = displacement(x, y, z, positions[t, 0], positions[t, 1], positions[t, 2],
                              NO_SHIFT, box, half_box, True)[3]
            other = order[t]
            at = row + kept if kept < n_kept else spare
            indices[at, 0] = min(own, other)
            indices[at, 1] = max(own, other)
            distances[at] = math.sqrt(d2)
            limit2 = _limit2(radii, s, t, r2) if with_radii else r2
            kept += 1 if d2 <= limit2 else 0


@jit_parallel
def candidates_within(positions, radii, order, indptr, neighbours, box, half_box, r2):
    """The pairs among the candidates within ``sqrt(r2)`` (or, ``radii`` not empty, within
    ``radii[s] + radii[t]``, in the cell order): ``(indices, distances)``,
    ``indices`` (k, 2) the caller's indices (smaller first, ``order``'s dtype), row by row
    of the cell order, each in the order of the row. A count pass, then a fill pass, both
    over `N_PARTS` fixed parts of the rows."""
    n = order.shape[0]
    counts = np.zeros(N_PARTS + 1, np.int64)
    for part in prange(N_PARTS):
        counts[part + 1] = _rows_count(positions, radii, indptr, neighbours, box,
                                       half_box, r2, part * n // N_PARTS,
                                       (part + 1) * n // N_PARTS)
    for part in range(N_PARTS):
        counts[part + 1] += counts[part]
    n_pairs = counts[N_PARTS]
    indices = np.empty((n_pairs + 1, 2), order.dtype)
    distances = np.empty(n_pairs + 1, np.float64)
    for part in prange(N_PARTS):
        _rows_fill(positions, radii, order, (indptr, neighbours), box, half_box, r2,
                   part * n // N_PARTS, (part + 1) * n // N_PARTS,
                   (indices, distances, counts[part], counts[part + 1] - counts[part]))
    return indices[:n_pairs], distances[:n_pairs]
