"""The cloth demo's particle grid at rest: where the particles start, what joins them.

A ``size`` x ``size`` grid of particles, particle ``row * size + column``: `hanging_positions`
places it hanging above the ground, `grid_constraints` lists its stretch, shear and bending
distance constraints, ordered in bands of rows for the threads of the constraint pass
(`_cloth_kernels.solve_distances_parallel`). Plain NumPy, run once when a `Cloth` is made.
"""

from __future__ import annotations

import math

import numpy as np

#: Bands of rows the constraints are cut into for the threads (see `grid_constraints`).
CONSTRAINT_BANDS = 16


def hanging_positions(rows, columns, spacing, tilt, bottom, rng) -> np.ndarray:
    """The cloth hanging in the x-z plane, leaning by ``tilt`` towards +y, lower edge at
    height ``bottom``, jittered by a thousandth of the spacing."""
    half = 0.5 * (columns.max() * spacing)
    along = rows * spacing
    positions = np.stack(
        [columns * spacing - half, along * math.sin(tilt), bottom + along * math.cos(tilt)],
        axis=1,
    )
    positions += rng.uniform(-1e-3 * spacing, 1e-3 * spacing, positions.shape)
    return np.ascontiguousarray(positions)


def grid_constraints(n, spacing, stretch, shear, bend):
    """Stretch, shear and bending distance constraints of an n x n grid, in bands of rows.

    Returns the constraints, their rest lengths and compliances, the start of each band
    (with the end of the last) and the number of bands of even index. Band ``b`` holds the
    constraints whose first row is in rows ``b * h`` to ``(b + 1) * h - 1``, with ``h =
    max(2, ceil(n / CONSTRAINT_BANDS))``; they reach at most two rows further, so bands two
    apart share no particle. The bands of even index come first, then the odd ones, which
    lets `_cloth_kernels.solve_distances_parallel` run each half at once. Within a band the
    constraints come in groups that share no particle, one family along rows or columns
    or one diagonal on every other link (or pair of links, for bending), so that the
    solver's loop overlaps consecutive ones. Gauss-Seidel converges the same in any order.
    """
    ids = np.arange(n * n, dtype=np.int64).reshape(n, n)
    lines = np.arange(n)
    diagonal = spacing * math.sqrt(2.0)
    groups = []
    for step, length, compliance in ((1, spacing, stretch), (2, 2.0 * spacing, bend)):
        for parity in range(2):
            # Links from columns (rows) c with c // step of this parity: (0, 1), (2, 3)...
            # or, two apart, (0, 2), (1, 3), (4, 6), (5, 7)...: pairwise disjoint.
            first = lines[(lines < n - step) & ((lines // step) % 2 == parity)]
            groups.append((ids[:, first], ids[:, first + step], length, compliance))
            groups.append((ids[first, :], ids[first + step, :], length, compliance))
    for parity in range(2):
        rows = lines[(lines < n - 1) & (lines % 2 == parity)]
        groups.append((ids[rows, :-1], ids[rows + 1, 1:], diagonal, shear))
        groups.append((ids[rows, 1:], ids[rows + 1, :-1], diagonal, shear))
    groups = [group for group in groups if group[0].size]
    constraints = np.concatenate(
        [np.stack([a.ravel(), b.ravel()], axis=1) for a, b, _, _ in groups]
    )
    rest = np.concatenate([np.full(a.size, length) for a, _, length, _ in groups])
    compliance = np.concatenate([np.full(a.size, value) for a, _, _, value in groups])
    rows_per_band = max(2, -(-n // CONSTRAINT_BANDS))
    band = constraints.min(axis=1) // n // rows_per_band
    order = np.lexsort((band, band % 2))  # stable: the groups' order within a band
    n_bands = int(band.max()) + 1 if band.size else 0
    counts = np.bincount(band, minlength=n_bands)
    band_order = np.concatenate([np.arange(0, n_bands, 2), np.arange(1, n_bands, 2)])
    band_start = np.concatenate([[0], np.cumsum(counts[band_order])]).astype(np.int64)
    return (np.ascontiguousarray(constraints[order]), rest[order], compliance[order],
            band_start, (n_bands + 1) // 2)
