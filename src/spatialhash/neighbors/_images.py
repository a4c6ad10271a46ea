"""One system's pairs within a cutoff, with their cell shifts, found by `Grid`'s search
among the periodic images of its points.

How
---
1. Wrap. Each point's fractional coordinates along the periodic axes
   (``CellGeometry.dual``) are floored to integers; the point is moved back by that many
   cell vectors (``T``, the point's wrap), into the cell. Open axes are left as they are.
2. Images. Each wrapped point is copied by every integer shift ``s`` (on the periodic
   axes) that puts its fractional coordinate on each periodic axis within
   ``k = reach / width`` of the range the wrapped points span there (about [0, 1]): a
   point within ``reach`` of a wrapped point differs from it by at most ``k`` in that
   coordinate, ``width`` being the cell's perpendicular width across the axis. So the
   images hold every image of every point that any wrapped point can reach: at most
   ``ceil(k)`` copies each side per axis, ``(2 k + 1) ** p`` copies a point on average.
   Their number is counted first, from each point's range of shifts, and a search that
   would make more than `MAX_IMAGES` is refused with a `ValueError` before any is made.
3. Search. `Grid.query_radius` of the wrapped points among the images, at the reach
   enlarged by a margin (`SEARCH_MARGIN` of the largest coordinate involved, many orders
   of magnitude above the rounding of any of these steps): the hits are a superset of the
   pairs within reach.
4. Rows. A hit of wrapped point ``i`` and image ``s`` of point ``j`` is the pair
   ``(i, j, S)`` with ``S = s + T[j] - T[i]``. Its vector ``D = x[j] - x[i] + S @ cell`` is
   computed from the caller's positions (`pair_vectors`), its distance from ``D``, and the
   row kept when that distance is within the pair's bound: the decision is made on
   exactly the distance returned, never on the search's.

The pair ``(j, i, -S)`` has the vector ``-D`` to the bit (a difference and a sum of
products negated are the negated results), so a full list holds both directions with the
same distance, and a half list is a subset of the full one.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._one_call import _cell_size_for_reach
from ..grid import Grid
from ._cells import CellGeometry

#: The search radius exceeds the reach by this fraction of the largest coordinate, image
#: or cell extent involved (plus the reach): rounding in the wrap, the images and the
#: vectors is about 2**-52 of those, so no pair within reach is ever missed, and the
#: rows the margin adds are filtered out on their exact distances.
SEARCH_MARGIN = 1e-11
#: Points are wrapped from at most this many cells away (about 1e9). Farther, float64
#: keeps under 23 bits of a point's place within its cell, its vectors lose as much, and
#: the search's margin (which grows with the coordinates) reaches whole cells.
MAX_CELLS_AWAY = 2.0**30
#: The most periodic images (copies of points, each point's own position among them) one
#: system's search may make. Each takes at least BYTES_PER_IMAGE bytes while the list is
#: built (its position, the point it copies, its shift, its place in the grid, and the
#: rows it yields: with one atom about every other image is a row, and more atoms make
#: more rows per image), so this many need some 9 GB, more than most machines have to
#: spare. Real systems stay far below it: a cell wider than the cutoff adds images of a
#: fraction of its points, so only tens of millions of atoms, whose list could not be held
#: anyway, would reach it. A few atoms reach it in a cell thinner than the cutoff by a
#: factor of hundreds: nearly always units mixed up, or a vector left near zero on a
#: periodic axis. Refusing up front gives that mistake a message rather than a
#: MemoryError (or a machine swapping) minutes later.
MAX_IMAGES = 5 * 10**7
#: Bytes of memory an image takes at the least while the list is built: the peak resident
#: size of one atom's list in a triclinic cell over its 1.9 million images (180 bytes).
BYTES_PER_IMAGE = 180


class SystemPairs(NamedTuple):
    """One system's pairs: ``i``, ``j`` (int64, local indices), ``shifts`` (int64, (m, d)),
    ``vectors`` (float64, (m, d)) and ``distances`` (float64, (m,)), grouped by ``i`` in
    increasing order."""

    i: np.ndarray
    j: np.ndarray
    shifts: np.ndarray
    vectors: np.ndarray
    distances: np.ndarray


def system_pairs(positions: np.ndarray, cell: CellGeometry, reach: float, radii,
                 full_list: bool, names: tuple[str, str, str] = ("cutoff", "cutoff", "cell")
                 ) -> SystemPairs:
    """The pairs of one system's (n, d) float64 ``positions`` in ``cell`` with
    ``distance <= reach`` (or, with ``radii`` (n,), ``distance <= radii[i] + radii[j]``,
    ``reach`` being ``2 * max(radii)``): both directions, or with ``full_list`` false each
    pair once (`half_rows`). No point is paired with itself at shift 0.

    ``names``: the caller's parameter that set the reach, how to show the reach, and the
    name of the cell, for the refusal of more than `MAX_IMAGES` images (`ValueError`)."""
    n, n_dims = positions.shape
    if n == 0:
        return _no_pairs(n_dims)
    wrapped, wraps = _wrap(positions, cell)
    scale = max(_largest(positions), _largest(wrapped), reach)
    lower, upper = _image_ranges(wrapped, cell, reach + SEARCH_MARGIN * scale)
    _check_image_count(lower, upper, cell, reach, names)
    owner, image_shifts, images = _images(wrapped, cell, lower, upper)
    search = reach + SEARCH_MARGIN * max(scale, _largest(images))
    if search == 0.0:
        search = 1.0  # every point and image at the origin, reach 0: any radius serves
    grid = Grid(images, _cell_size_for_reach(images, search, None, None))
    found = grid.query_radius(wrapped, search, sort=False)
    i = np.repeat(np.arange(n, dtype=np.int64), np.diff(found.indptr))
    hit = found.indices.astype(np.int64)
    j = owner[hit]
    periodic_shifts = image_shifts[hit] + wraps[j] - wraps[i]
    keep = ~((i == j) & ~periodic_shifts.any(axis=1))  # a point's own position
    if not full_list:
        keep &= half_rows(i, j, periodic_shifts)
    i, j, periodic_shifts = i[keep], j[keep], periodic_shifts[keep]
    shifts = np.zeros((len(i), n_dims), dtype=np.int64)
    shifts[:, cell.axes] = periodic_shifts
    vectors = pair_vectors(positions, i, j, shifts, cell.vectors, cell.axes)
    distances = vector_lengths(vectors)
    bound = reach if radii is None else radii[i] + radii[j]
    within = distances <= bound
    return SystemPairs(i[within], j[within], shifts[within], vectors[within],
                       distances[within])


def half_rows(i: np.ndarray, j: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """Which rows ``(i, j, S)`` of a full list a half list keeps, one of each pair
    ``(i, j, S)``, ``(j, i, -S)``: ``i < j`` whatever ``S``; for ``i == j`` (a point and
    its own image) the shift whose components sum to a positive number, a zero sum going
    to the shift whose last non-zero component is positive."""
    total = shifts.sum(axis=1)
    last_sign = np.zeros(len(shifts), dtype=np.int64)
    for axis in range(shifts.shape[1] - 1, -1, -1):
        last_sign = np.where(last_sign == 0, np.sign(shifts[:, axis]), last_sign)
    positive = (total > 0) | ((total == 0) & (last_sign > 0))
    return (i < j) | ((i == j) & positive)


def pair_vectors(positions: np.ndarray, i: np.ndarray, j: np.ndarray, shifts: np.ndarray,
                 vectors: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """``D = x[j] - x[i] + S @ cell`` of each row: the difference first, then the shift
    ``sum over a of S[:, a] * cell[a]`` added up over the periodic ``axes`` in increasing
    order (the other components of ``S`` are 0). Written out rather than a matrix product,
    whose order of summation (and fused multiply-adds) is the library's choice, so that
    the vectors are the same on every machine, and ``(j, i, -S)`` gets exactly ``-D``."""
    difference = positions[j] - positions[i]
    if not len(axes):
        return difference
    shift = shifts[:, axes[0], np.newaxis] * vectors[axes[0]]
    for axis in axes[1:]:
        shift = shift + shifts[:, axis, np.newaxis] * vectors[axis]
    return difference + shift


def vector_lengths(vectors: np.ndarray) -> np.ndarray:
    """``sqrt(D[:, 0]**2 + D[:, 1]**2 + D[:, 2]**2)``, summed in that order."""
    squared = vectors[:, 0] * vectors[:, 0]
    for axis in range(1, vectors.shape[1]):
        squared = squared + vectors[:, axis] * vectors[:, axis]
    return np.sqrt(squared)


def _wrap(positions: np.ndarray, cell: CellGeometry) -> tuple[np.ndarray, np.ndarray]:
    """The positions moved into the cell on its periodic axes, and the whole cells each
    was moved by, ``T`` (int64, (n, p)): ``wrapped = x + T @ cell`` on those axes."""
    if not len(cell.axes):
        return positions, np.zeros((len(positions), 0), dtype=np.int64)
    fractional = positions @ cell.dual.T
    farthest = _largest(fractional)
    if not farthest < MAX_CELLS_AWAY:
        raise ValueError(
            f"`points` must lie within 2**30 cells of the origin along the periodic axes "
            f"(farther, float64 keeps too little of a point's place in its cell); got a "
            f"point {farthest:.6g} cells away. Wrap the positions into the cell first."
        )
    wraps = -np.floor(fractional).astype(np.int64)
    wrapped = positions.copy()
    for column, axis in enumerate(cell.axes):
        wrapped += wraps[:, column, np.newaxis] * cell.vectors[axis]
    return wrapped, wraps


def _image_ranges(wrapped: np.ndarray, cell: CellGeometry, reach: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)``, float64 (n, p): the first and last shift of each wrapped point
    on each periodic axis whose copy lies within ``reach`` (the search's, with its margin)
    of the range the wrapped points span on that axis. Whole numbers kept as floats, so
    that a count too large for int64 is still counted (`_check_image_count`)."""
    # Fractional coordinates of the wrapped points as the search will see them (not those
    # before the wrap, less the wrap): the copies are bounded by what the queries span.
    fractional = wrapped @ cell.dual.T
    cells = reach / cell.widths  # the reach in cells
    lower = np.ceil(fractional.min(axis=0) - cells - fractional)
    upper = np.floor(fractional.max(axis=0) + cells - fractional)
    return lower, upper


def image_count(lower: np.ndarray, upper: np.ndarray) -> float:
    """The number of images `_images` makes from the ranges of `_image_ranges`, as a
    float (it may be far beyond int64)."""
    return float(np.prod(upper - lower + 1.0, axis=1).sum())


def _check_image_count(lower: np.ndarray, upper: np.ndarray, cell: CellGeometry,
                       reach: float, names: tuple[str, str, str]) -> None:
    """Refuse a search that would make more than `MAX_IMAGES` images (see there why). A
    cell without periodic axes makes no copies: its points are searched as they are."""
    count = image_count(lower, upper)
    if count <= MAX_IMAGES or not len(cell.axes):
        return
    parameter, seen, cell_name = names
    widths = ", ".join(f"{width:.6g}" for width in cell.widths)
    raise ValueError(
        f"`{parameter}` and `{cell_name}` must need at most {MAX_IMAGES:,} periodic images "
        f"of the points (at least {BYTES_PER_IMAGE} bytes each while the list is built); got "
        f"{seen} in a cell {widths} wide across its periodic axes {cell.axes.tolist()}, "
        f"which needs {count:,.0f} images ({reach / cell.widths.min():,.1f} times the "
        "narrowest width). Check that the cutoff and the cell are in the same units, or "
        "make a thin axis open (`pbc`)."
    )


def _images(wrapped: np.ndarray, cell: CellGeometry, lower: np.ndarray, upper: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(owner, shifts, images)``: the copies of the wrapped points by the shifts from
    ``lower`` to ``upper`` (`_image_ranges`) on each periodic axis, by the point each
    copies (int64, (m,)), its shift on the periodic axes (int64, (m, p)) and its position
    ((m, d)). Every point's shift 0 is among them. Built axis by axis with ``np.repeat``,
    no loop over points or shifts."""
    n = len(wrapped)
    owner = np.arange(n, dtype=np.int64)
    shifts = np.zeros((n, 0), dtype=np.int64)
    if not len(cell.axes):
        return owner, shifts, wrapped
    lower, upper = lower.astype(np.int64), upper.astype(np.int64)
    for column in range(len(cell.axes)):
        low, high = lower[owner, column], upper[owner, column]
        counts = high - low + 1
        rows = np.repeat(np.arange(len(owner)), counts)
        starts = np.cumsum(counts) - counts
        offsets = np.arange(len(rows), dtype=np.int64) - starts[rows]
        owner = owner[rows]
        shifts = np.column_stack([shifts[rows], low[rows] + offsets])
    images = wrapped[owner]
    for column, axis in enumerate(cell.axes):
        images += shifts[:, column, np.newaxis] * cell.vectors[axis]
    return owner, shifts, images


def _largest(values: np.ndarray) -> float:
    """The largest magnitude in ``values``, 0 for none."""
    return float(np.abs(values).max(initial=0.0))


def _no_pairs(n_dims: int) -> SystemPairs:
    """The empty result of a system without points."""
    return SystemPairs(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64),
                       np.empty((0, n_dims), dtype=np.int64), np.empty((0, n_dims)),
                       np.empty(0))
