"""A brute-force molecular neighbour list in plain NumPy: every shift in a range large
enough, every pair, the same arithmetic as `spatialhash.neighbors.neighbor_list`.

The range of shifts on each periodic axis covers the reach in cells (from the cell's
perpendicular widths, here through a pseudo-inverse) plus the spread of the points'
fractional coordinates, plus one: no image within reach lies outside it, however far
outside the cell the points are. Vectors are ``D = (x[j] - x[i]) + shift`` with
``shift = S[a0] * cell[a0] + S[a1] * cell[a1] + ...`` over the periodic axes in increasing
order, distances ``sqrt(D0 * D0 + D1 * D1 + D2 * D2)`` in that order, kept with
``d <= cutoff`` (or ``d <= radii[i] + radii[j]``): on dyadic inputs every value, tie and
pair at exactly the cutoff agrees with the function's bit for bit.
"""

from __future__ import annotations

import itertools

import numpy as np


def widths(cell: np.ndarray, periodic: np.ndarray) -> np.ndarray:
    """The perpendicular widths of ``cell`` across its periodic axes: ``1 / |dual|``, the
    dual vectors of the periodic ones in their span (rows of the pseudo-inverse)."""
    rows = cell[np.flatnonzero(periodic)]
    if not len(rows):
        return np.empty(0)
    dual = np.linalg.pinv(rows).T
    return 1.0 / np.linalg.norm(dual, axis=1)


def pairs(positions, cell, periodic, cutoff=None, radii=None) -> dict:
    """Every row ``(i, j, S)`` of the full list, as a dict to ``(d, D)``, with ``S`` a
    tuple of ints (d entries) and ``D`` a tuple of floats."""
    x = np.asarray(positions, dtype=np.float64)
    n, n_dims = x.shape
    cell = np.zeros((n_dims, n_dims)) if cell is None else np.asarray(cell, dtype=np.float64)
    periodic = np.broadcast_to(np.asarray(periodic, dtype=bool), (n_dims,))
    axes = np.flatnonzero(periodic)
    reach = cutoff if radii is None else 2.0 * float(np.max(radii, initial=0.0))
    ranges = [range(1)] * n_dims
    if len(axes) and n:
        fractional = x @ np.linalg.pinv(cell[axes])
        spread = fractional.max(axis=0) - fractional.min(axis=0)
        reach_cells = np.ceil(reach / widths(cell, periodic) + spread).astype(int) + 1
        for column, axis in enumerate(axes):
            ranges[axis] = range(-reach_cells[column], reach_cells[column] + 1)
    shifts = np.array(list(itertools.product(*ranges)), dtype=np.int64).reshape(-1, n_dims)
    shift_vectors = np.zeros((len(shifts), n_dims))
    for k, axis in enumerate(axes):
        term = shifts[:, axis, np.newaxis] * cell[axis]
        shift_vectors = term if k == 0 else shift_vectors + term
    difference = x[np.newaxis, :, :] - x[:, np.newaxis, :]  # [i, j] = x[j] - x[i]
    # [shift, i, j]: every shift at once, the same operations element by element.
    vectors = difference + shift_vectors[:, np.newaxis, np.newaxis, :] if len(axes) else (
        np.broadcast_to(difference, (len(shifts), n, n, n_dims)))
    squared = vectors[..., 0] * vectors[..., 0]
    for axis in range(1, n_dims):
        squared = squared + vectors[..., axis] * vectors[..., axis]
    distances = np.sqrt(squared)
    radii = None if radii is None else np.asarray(radii, dtype=np.float64)
    bound = reach if radii is None else radii[:, np.newaxis] + radii[np.newaxis, :]
    within = distances <= bound
    within[~shifts.any(axis=1)] &= ~np.eye(n, dtype=bool)  # not a point with itself
    return {(int(i), int(j), tuple(int(s) for s in shifts[k])):
            (float(distances[k, i, j]), tuple(float(v) for v in vectors[k, i, j]))
            for k, i, j in zip(*np.nonzero(within), strict=True)}


def is_half_row(i: int, j: int, shift: tuple) -> bool:
    """Whether a half list keeps ``(i, j, S)``: ``i < j``; for ``i == j`` a shift of
    positive sum, or of zero sum whose last non-zero component is positive."""
    if i != j:
        return i < j
    total = sum(shift)
    if total != 0:
        return total > 0
    last = [s for s in shift if s != 0][-1]
    return last > 0


def as_rows(i, j, shifts, distances, vectors) -> dict:
    """The arrays of `neighbor_list` as the oracle's dict; fails on a repeated row."""
    rows = {}
    for k in range(len(i)):
        key = (int(i[k]), int(j[k]), tuple(int(s) for s in shifts[k]))
        assert key not in rows, f"row {key} appears twice"
        rows[key] = (float(distances[k]), tuple(float(v) for v in vectors[k]))
    return rows
