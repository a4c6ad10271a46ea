"""The pairs of one or many systems within a cutoff, with their cell shifts: each system's
atoms wrapped into its cell and binned, then each atom's rows found and written by the
kernels of ``_kernels/molecular.py``, all systems in one call.

How
---
1. Wrap. Each point's fractional coordinates along the periodic axes
   (``CellGeometry.dual``) are floored to integers; the point is moved back by that many
   cell vectors (``T``, the point's wrap), into the cell. Open axes are left as they are.
2. Shifts. Wrapped point ``i`` looks for the images of the wrapped points by every
   integer shift ``s`` (on the periodic axes) that can bring one of them within reach:
   with ``k = reach / width`` (``width`` the cell's perpendicular width across the axis)
   and the wrapped points' fractional coordinates spanning ``[low, high]`` on the axis,
   ``s`` runs from ``ceil(f_i - k - high)`` to ``floor(f_i + k - low)``. Point ``i``
   then asks at ``q = wrapped[i] - s @ cell`` for each ``s``. On each axis a point asks
   as many shifts as the former search made images of it (``floor(f - low + k) +
   floor(high - f + k) + 1`` either way), so their total is `image_count`, and a search
   that would ask more than `MAX_IMAGES` is refused with a `ValueError` before any work.
3. Search. Each system's wrapped points are sorted into cubic bins at least as wide as
   the search radius (the reach enlarged by a margin, `SEARCH_MARGIN` of the largest
   coordinate involved, many orders of magnitude above the rounding of any of these
   steps): each query scans the bins within that radius, a superset of the pairs within
   reach.
4. Rows. A hit of wrapped point ``i`` at shift ``s`` and wrapped point ``j`` is the pair
   ``(i, j, S)`` with ``S = s + T[j] - T[i]``. Its vector ``D = x[j] - x[i] + S @ cell`` is
   computed from the caller's positions, its distance from ``D``, and the row kept when
   that distance is within the pair's bound: the decision is made on exactly the distance
   returned, never on the search's.

Why this design: the former one materialized every image of every point, searched them
with `Grid.query_radius` and built the rows with NumPy (fancy indexing, concatenation,
filtering), which took most of the time and memory. Shifted queries store no image; the
bins are the plain cell list of one system (wrapped points fill a box of their cell, so a
dense array of bins, capped at a few per point, is as compact as a hash), built for all
systems of a batch by one counting sort; the count and fill passes write only the arrays
asked for, straight into their final places.

The pair ``(j, i, -S)`` has the vector ``-D`` to the bit (a difference and a sum of
products negated are the negated results), so a full list holds both directions with the
same distance, and a half list is a subset of the full one.
"""

from __future__ import annotations

import numpy as np

from .._config import threads
from ._cells import CellGeometry
from ._kernels.molecular import MolecularState, bin_atoms, pair_counts, pair_fill

#: The search radius exceeds the reach by this fraction of the largest coordinate, query
#: or cell extent involved (plus the reach): rounding in the wrap, the queries and the
#: vectors is about 2**-52 of those, so no pair within reach is ever missed, and the
#: rows the margin adds are filtered out on their exact distances.
SEARCH_MARGIN = 1e-11
#: Points are wrapped from at most this many cells away (about 1e9). Farther, float64
#: keeps under 23 bits of a point's place within its cell, its vectors lose as much, and
#: the search's margin (which grows with the coordinates) reaches whole cells.
MAX_CELLS_AWAY = 2.0**30
#: The most periodic images (shifted queries, each point's own position among them) one
#: system's search may ask. With one atom about every other image is a row, and more
#: atoms make more rows per image, so this many would fill some gigabytes with rows
#: (BYTES_PER_IMAGE each, as the former search measured it with its images materialized).
#: Real systems stay far below it: a cell wider than the cutoff adds images of a fraction
#: of its points, so only tens of millions of atoms, whose list could not be held anyway,
#: would reach it. A few atoms reach it in a cell thinner than the cutoff by a factor of
#: hundreds: nearly always units mixed up, or a vector left near zero on a periodic axis.
#: Refusing up front gives that mistake a message rather than a MemoryError (or a machine
#: swapping) minutes later.
MAX_IMAGES = 5 * 10**7
#: Bytes of memory an image took at the least while the former search built the list
#: (its images materialized): the figure the refusal's message gives.
BYTES_PER_IMAGE = 180
#: Bins per system at most this many per point (plus `EXTRA_BINS`): wider bins where the
#: points are spread thinner than one per bin of the search radius (an open system).
BINS_PER_POINT = 4
EXTRA_BINS = 64
#: The letters the kernels write, in the order of their output tuple.
KERNEL_LETTERS = "ijSDdb"


def batch_rows(positions: np.ndarray, cells: list[CellGeometry], offsets: np.ndarray,
               reach: float, radii, full_list: bool, letters: str,
               names: tuple[str, str, str, bool]) -> dict[str, np.ndarray]:
    """The rows of the systems ``positions[offsets[b]:offsets[b + 1]]`` (float64 (n, d))
    in ``cells`` with ``distance <= reach`` (or, with ``radii`` (n,),
    ``distance <= radii[i] + radii[j]``, ``reach`` being ``2 * max(radii)``): both
    directions, or with ``full_list`` false each pair once (``i < j``; for ``i == j`` the
    shift of positive sum, a zero sum going to the last non-zero component positive). No
    point is paired with itself at shift 0. Rows come grouped by ``i`` in increasing order.

    Returns the arrays of the ``letters`` among ``"ijSDdb"`` (indices into ``positions``).
    ``names``: the caller's parameter that set the reach, how to show the reach, the name
    of the cell, and whether this is a batch, for the refusal of more than `MAX_IMAGES`
    images (`ValueError`)."""
    parts = [_system_tables(positions[offsets[b]:offsets[b + 1]], cell, reach,
                            _system_names(names, b)) for b, cell in enumerate(cells)]
    state = _state(positions, cells, offsets, parts, radii)
    n, n_dims = positions.shape
    with threads(None):
        counts = pair_counts(state, reach, bool(full_list))
        starts = np.cumsum(counts) - counts
        m = int(counts.sum())
        out = tuple(np.empty((m if letter in letters else 0,) + ((n_dims,) if letter in "SD"
                                                                else ()),
                             dtype=np.float64 if letter in "Dd" else np.int64)
                    for letter in KERNEL_LETTERS)
        pair_fill(state, reach, bool(full_list), starts, out)
    return {letter: array for letter, array in zip(KERNEL_LETTERS, out, strict=True)
            if letter in letters}


def _system_names(names: tuple[str, str, str, bool], system: int) -> tuple[str, str, str]:
    """The names a refusal gives for ``system``: the cell's with its index in a batch."""
    parameter, seen, cell_name, batch = names
    return parameter, seen, f"{cell_name}[{system}]" if batch else cell_name


def _system_tables(positions: np.ndarray, cell: CellGeometry, reach: float,
                   names: tuple[str, str, str]) -> tuple:
    """One system's ``(wrapped, wraps, lower, upper, search, origin, bin_width, n_bins)``
    (`MolecularState`; ``wraps``, ``lower``, ``upper`` with a column per axis, 0 on open
    ones), after the checks of the wrap and of the image count."""
    n, n_dims = positions.shape
    full = np.zeros((3, n, n_dims), dtype=np.int64)  # wraps, lower, upper
    if n == 0:
        return positions, *full, 0.0, np.zeros(n_dims), 1.0, np.ones(n_dims, np.int64)
    wrapped, wraps = _wrap(positions, cell)
    scale = max(_largest(positions), _largest(wrapped), reach)
    fractional = wrapped @ cell.dual.T
    lower, upper = _image_ranges(fractional, cell, reach + SEARCH_MARGIN * scale)
    _check_image_count(lower, upper, cell, reach, names)
    # The queries reach as far from the cell as the images did: the margin grows with it.
    farthest = np.maximum(-lower, upper).max(axis=0, initial=0.0) if len(cell.axes) else 0.0
    extent = _largest(wrapped) + float(np.sum(
        farthest * np.abs(cell.vectors[cell.axes]).max(axis=1, initial=0.0)))
    search = reach + SEARCH_MARGIN * max(scale, extent)
    full[0][:, cell.axes] = wraps
    full[1][:, cell.axes], full[2][:, cell.axes] = _query_ranges(fractional, cell, search)
    origin = wrapped.min(axis=0)
    return (wrapped, *full, search, origin, *_bins(wrapped.max(axis=0) - origin, search, n))


def _bins(extent: np.ndarray, search: float, n: int) -> tuple[float, np.ndarray]:
    """``(bin_width, n_bins)``: cubic bins at least ``search`` wide over the ``extent``
    of ``n`` points, widened until they number at most `BINS_PER_POINT` per point."""
    width = search if search > 0.0 else 1.0  # every point at one place, reach 0
    limit = BINS_PER_POINT * n + EXTRA_BINS
    while True:
        n_bins = np.floor(extent / width) + 1.0
        total = float(np.prod(n_bins))
        if total <= limit:
            return width, n_bins.astype(np.int64)
        width *= 1.01 * (total / limit) ** (1.0 / len(extent))


def _state(positions: np.ndarray, cells: list[CellGeometry], offsets: np.ndarray,
           parts: list[tuple], radii) -> MolecularState:
    """The kernels' arrays of all systems (`MolecularState`), the atoms binned."""
    columns = list(zip(*parts, strict=True))
    wrapped, wraps, lower, upper = (np.concatenate(column) for column in columns[:4])
    search, origin, bin_width, n_bins = (np.array(column) for column in columns[4:])
    n_bins = n_bins.reshape(len(cells), -1)
    origin = origin.reshape(n_bins.shape)
    inv_bin = 1.0 / bin_width
    system = np.repeat(np.arange(len(cells), dtype=np.int64), np.diff(offsets))
    bin_offset = np.concatenate([[0], np.cumsum(np.prod(n_bins, axis=1))]).astype(np.int64)
    bin_start, order, binned = bin_atoms(wrapped, system, origin, inv_bin, n_bins, bin_offset)
    return MolecularState(
        positions, wrapped, wraps, lower, upper, system,
        np.empty(0) if radii is None else radii,
        np.stack([cell.vectors for cell in cells]), np.stack([cell.periodic for cell in cells]),
        search, origin, inv_bin, n_bins, bin_offset, bin_start, order, binned)


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


def _image_ranges(fractional: np.ndarray, cell: CellGeometry, reach: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)``, float64 (n, p): the first and last shift of each wrapped point
    (of ``fractional`` coordinates) on each periodic axis whose image lies within
    ``reach`` (the search's, with its margin) of the range the wrapped points span on that
    axis. Whole numbers kept as floats, so that a count too large for int64 is still
    counted (`_check_image_count`)."""
    cells = reach / cell.widths  # the reach in cells
    lower = np.ceil(fractional.min(axis=0) - cells - fractional)
    upper = np.floor(fractional.max(axis=0) + cells - fractional)
    return lower, upper


def _query_ranges(fractional: np.ndarray, cell: CellGeometry, reach: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)``, int64 (n, p): the first and last query shift ``s`` of each
    wrapped point on each periodic axis, those for which some wrapped point's image by
    ``s`` may lie within ``reach`` of it: `_image_ranges` seen from the other point."""
    cells = reach / cell.widths
    lower = np.ceil(fractional - cells - fractional.max(axis=0))
    upper = np.floor(fractional + cells - fractional.min(axis=0))
    return lower.astype(np.int64), upper.astype(np.int64)


def image_count(lower: np.ndarray, upper: np.ndarray) -> float:
    """The number of images (shifted queries) of the ranges of `_image_ranges`, as a
    float (it may be far beyond int64)."""
    return float(np.prod(upper - lower + 1.0, axis=1).sum())


def _check_image_count(lower: np.ndarray, upper: np.ndarray, cell: CellGeometry,
                       reach: float, names: tuple[str, str, str]) -> None:
    """Refuse a search that would ask more than `MAX_IMAGES` images (see there why). A
    cell without periodic axes asks none but each point's own position."""
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


def _largest(values: np.ndarray) -> float:
    """The largest magnitude in ``values``, 0 for none."""
    return float(np.abs(values).max(initial=0.0))
