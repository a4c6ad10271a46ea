"""Brute-force references in plain NumPy, with the same arithmetic as the kernels.

Every oracle pads points to three columns with zeros, wraps periodic coordinates with
``np.mod`` (entries rounded up to the period set to 0.0), takes per-axis differences
``a - b`` with one minimum-image correction (``(a - b) - L``), sums
``dx*dx + dy*dy + dz*dz`` in that order
and matches with ``d2 <= r*r``. On exact (dyadic) inputs the results therefore agree with
the kernels bit for bit, including every tie and every pair at exactly ``distance == r``.

Work is chunked so that no intermediate holds more than about `CHUNK_ELEMENTS` entries.
"""

from __future__ import annotations

import numpy as np

#: Largest number of (query, point) distances held at once.
CHUNK_ELEMENTS = 1 << 20


# ---------------------------------------------------------------------- inputs
def periods(box, periodic, n_dims: int) -> np.ndarray:
    """Period of each of the three axes, ``inf`` on open (and padded) axes."""
    lengths = np.full(3, np.inf)
    if box is None:
        return lengths
    values = np.broadcast_to(np.asarray(box, dtype=np.float64), (n_dims,))
    flags = np.broadcast_to(np.ones(n_dims, bool) if periodic is None else periodic, (n_dims,))
    lengths[:n_dims] = np.where(flags, values, np.inf)
    return lengths


def prepare(points, box3: np.ndarray) -> np.ndarray:
    """``points`` as float64 (n, 3): zero columns appended, periodic axes wrapped."""
    array = np.asarray(points, dtype=np.float64)
    padded = np.zeros((array.shape[0], 3))
    padded[:, : array.shape[1]] = array
    for axis in range(3):
        if np.isfinite(box3[axis]):
            column = np.mod(padded[:, axis], box3[axis])
            column[column >= box3[axis]] = 0.0
            padded[:, axis] = column
    return padded


def squared_distances(a3: np.ndarray, b3: np.ndarray, box3: np.ndarray) -> np.ndarray:
    """(len(a3), len(b3)) squared minimum-image distances, ``a - b`` per axis."""
    deltas = []
    for axis in range(3):
        delta = a3[:, np.newaxis, axis] - b3[np.newaxis, :, axis]
        length = box3[axis]
        if np.isfinite(length):
            # The period is subtracted after the difference, as in the kernels.
            half = length / 2.0
            delta = np.where(delta > half, delta - length,
                             np.where(delta < -half, delta + length, delta))
        deltas.append(delta)
    dx, dy, dz = deltas
    return dx * dx + dy * dy + dz * dz


def _row_chunks(m: int, n: int):
    step = max(1, CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, m, step):
        yield start, min(m, start + step)


# ---------------------------------------------------------------------- oracles
def pairs(points, r=None, *, radii=None, box3=None):
    """Pairs ``i < j`` with ``d2 <= r*r`` (or ``d2 <= (ri + rj)**2``), sorted.

    Returns ``(indices (n_pairs, 2) int64, distances (n_pairs,) float64)``.
    """
    box3 = np.full(3, np.inf) if box3 is None else box3
    p = prepare(points, box3)
    n = p.shape[0]
    rows, cols, dists = [], [], []
    for start, end in _row_chunks(n, n):
        d2 = squared_distances(p[start:end], p, box3)
        i = np.arange(start, end)[:, np.newaxis]
        j = np.arange(n)[np.newaxis, :]
        if radii is None:
            hit = d2 <= r * r
        else:
            radii = np.asarray(radii, dtype=np.float64)
            limit = radii[start:end, np.newaxis] + radii[np.newaxis, :]
            hit = d2 <= limit * limit
        hit &= j > i
        qi, pj = np.nonzero(hit)  # row-major: already lexicographic
        rows.append(qi + start)
        cols.append(pj)
        dists.append(np.sqrt(d2[qi, pj]))
    indices = np.column_stack([np.concatenate(rows or [np.empty(0, int)]),
                               np.concatenate(cols or [np.empty(0, int)])]).astype(np.int64)
    return indices.reshape(-1, 2), np.concatenate(dists or [np.empty(0)])


def radius(points, queries, r, *, box3=None):
    """For each query, points with ``d2 <= r_q * r_q`` as CSR ``(indptr, indices, distances)``.

    ``r`` is a scalar or one radius per query; rows are sorted by point index.
    """
    box3 = np.full(3, np.inf) if box3 is None else box3
    p, q = prepare(points, box3), prepare(queries, box3)
    m, n = q.shape[0], p.shape[0]
    radii = np.broadcast_to(np.asarray(r, dtype=np.float64), (m,))
    counts, indices, dists = [], [], []
    for start, end in _row_chunks(m, n):
        d2 = squared_distances(q[start:end], p, box3)
        rq = radii[start:end, np.newaxis]
        hit = d2 <= rq * rq
        qi, pj = np.nonzero(hit)
        counts.append(hit.sum(axis=1))
        indices.append(pj)
        dists.append(np.sqrt(d2[qi, pj]))
    indptr = np.zeros(m + 1, dtype=np.int64)
    if m:
        np.cumsum(np.concatenate(counts), out=indptr[1:])
    return (indptr, np.concatenate(indices or [np.empty(0, int)]).astype(np.int64),
            np.concatenate(dists or [np.empty(0)]))


def count(points, queries, r, *, box3=None) -> np.ndarray:
    """Number of points within ``r`` of each query, int64."""
    return np.diff(radius(points, queries, r, box3=box3)[0])


def knn(points, queries, k: int, r_max=None, *, box3=None):
    """k nearest by a stable sort on ``(d2, index)``; only ``d2 <= r_max*r_max`` counts.

    Returns ``(indices (m, k) int64 padded with -1, distances (m, k) padded with inf,
    counts (m,) int64)``.
    """
    box3 = np.full(3, np.inf) if box3 is None else box3
    p, q = prepare(points, box3), prepare(queries, box3)
    m, n = q.shape[0], p.shape[0]
    max_d2 = np.inf if r_max is None else r_max * r_max
    indices = np.full((m, k), -1, dtype=np.int64)
    distances = np.full((m, k), np.inf)
    counts = np.zeros(m, dtype=np.int64)
    for start, end in _row_chunks(m, n):
        d2 = squared_distances(q[start:end], p, box3)
        for row in range(end - start):
            order = np.argsort(d2[row], kind="stable")  # ties: smaller index first
            order = order[d2[row, order] <= max_d2][:k]
            counts[start + row] = order.size
            indices[start + row, : order.size] = order
            distances[start + row, : order.size] = np.sqrt(d2[row, order])
    return indices, distances, counts


def box(points, lower, upper, *, box3=None):
    """Points inside each closed box as CSR ``(indptr, indices)``, rows sorted.

    Open axis: ``lower <= x <= upper``. Periodic axis: the box starts at the wrapped
    ``lower`` and extends ``width = upper - lower``; a width of a whole period or more
    takes the whole axis.
    """
    box3 = np.full(3, np.inf) if box3 is None else box3
    p = prepare(points, box3)
    lower = np.atleast_2d(np.asarray(lower, dtype=np.float64))
    upper = np.atleast_2d(np.asarray(upper, dtype=np.float64))
    width = np.zeros((lower.shape[0], 3))
    width[:, : lower.shape[1]] = upper - lower
    lower_wrapped = prepare(lower, box3)
    lower3 = np.zeros_like(width)
    upper3 = np.zeros_like(width)
    lower3[:, : lower.shape[1]] = lower
    upper3[:, : upper.shape[1]] = upper
    m = lower.shape[0]
    counts, indices = [], []
    for start, end in _row_chunks(m, p.shape[0]):
        inside = np.ones((end - start, p.shape[0]), dtype=bool)
        for axis in range(3):
            x = p[np.newaxis, :, axis]
            length = box3[axis]
            if not np.isfinite(length):
                inside &= (lower3[start:end, axis, np.newaxis] <= x)
                inside &= (x <= upper3[start:end, axis, np.newaxis])
                continue
            w = width[start:end, axis, np.newaxis]
            offset = x - lower_wrapped[start:end, axis, np.newaxis]
            offset = np.where(offset < 0.0, offset + length, offset)
            inside &= (w >= length) | (offset <= w)
        counts.append(inside.sum(axis=1))
        indices.append(np.nonzero(inside)[1])
    indptr = np.zeros(m + 1, dtype=np.int64)
    if m:
        np.cumsum(np.concatenate(counts), out=indptr[1:])
    return indptr, np.concatenate(indices or [np.empty(0, int)]).astype(np.int64)
