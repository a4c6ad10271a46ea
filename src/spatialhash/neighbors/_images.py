"""The pairs of one or many systems within a cutoff, with their cell shifts, for all
systems of a call at once: each atom's shifted positions searched among the atoms of its
system wrapped into its cell, by the kernels of ``_kernels/molecular_state.py`` (the
set-up) and ``_kernels/molecular.py`` (the scan).

How
---
1. Wrap (`state_chunks`, `_wrap_pieces`). Each point's fractional coordinates along the
   periodic axes (``CellGeometry.dual``) are floored to integers; the point is moved
   back by that many cell vectors (``T``, the point's wrap), into the cell. Open axes
   are left as they are.
2. Shifts (`_bin_pieces`). Wrapped point ``i`` asks for the images of the wrapped
   points by every integer shift ``s`` (on the periodic axes) that can bring one of them
   within reach: with ``k = reach / width`` (``width`` the cell's perpendicular width
   across the axis) and the wrapped points' fractional coordinates spanning
   ``[low, high]`` on the axis, ``s`` runs from ``ceil(f_i - k - high)`` to
   ``floor(f_i + k - low)``; point ``i`` asks at ``q = wrapped[i] - s @ cell`` for each.
   On each axis a point asks as many shifts as there are images of it within ``k`` of
   ``[low, high]`` (``floor(f - low + k) + floor(high - f + k) + 1`` either way), so
   their total is the number of images a search among materialized images would make;
   it is counted first, from the images' side, and a system that would need more than
   `MAX_IMAGES` is refused with a `ValueError` before any search.
3. Search (`_bin_pieces`, `_sort_atoms`, `pair_rows`). Each system's wrapped points are
   sorted into cubic bins as wide as the search radius (the reach enlarged by a margin,
   `SEARCH_MARGIN` of the largest coordinate involved, many orders of magnitude above
   the rounding of any of these steps): each query scans the bins within that radius, a
   superset of the pairs within reach. The shifts and the bins come from one pass over
   the wrapped points (the bins' origin and the shifts' ranges need the wrap of all of a
   system's points first), so the set-up reads the atoms twice, each pass on all
   threads.
4. Rows (`pair_rows`). A hit of wrapped point ``i`` at shift ``s`` and wrapped point
   ``j`` is the pair ``(i, j, S)`` with ``S = s + T[j] - T[i]``. Its vector
   ``D = x[j] - x[i] + S @ cell`` is computed from the caller's positions, its distance
   from ``D``, and the row kept when that distance is within the pair's bound: the
   decision is made on the distance returned, never on the search's, except where the
   search's is within the bound less the margin (the returned one then is too, by far
   more than rounding, and is not computed unless asked for).

Why this design: the former one copied every point by each of its shifts, searched the
copies with `Grid.query_radius` and built the rows with NumPy (fancy indexing,
concatenation, filtering), one system after another; the row building took most of the
time and memory. Shifted queries store no copy; the bins are a plain cell list per
system (wrapped points fill a box about their cell, so a dense array of bins, capped at a
few per point, is as compact as a hash table and needs no lookup), built for all systems
by one counting sort. A first pass scans and keeps each chunk's hits (8 bytes each, where
a row takes up to 72) in memory sized from the density its atoms see (`_hit_share`) and
counts each atom's rows; a second writes only the arrays asked for from the hits,
straight into their places, without scanning again (a chunk whose hits did not fit
scans again). `Grid` is not used: its cells are one set per grid, where a
batch needs one per system, and its radius search returns indices where the rows need
the shift each was found at.

The pair ``(j, i, -S)`` has the vector ``-D`` to the bit (a difference and a sum of
products negated are the negated results), so a full list holds both directions with the
same distance, and a half list is a subset of the full one.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _outputs
from .._config import threads
from .._kernels import indirect
from ._cells import CellGeometry, SystemCells
from ._kernels.molecular import ATOMS_PER_CHUNK, MolecularState, pair_rows
from ._kernels.molecular_state import (
    ATOMS_PER_STATE_CHUNK,
    GATHER,
    SHIFTS_AND_BINS,
    WRAP,
    _chunk_pass,
    state_chunks,
    system_results,
)

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
#: system's search may ask. The rows grow with them (with one atom about every other
#: image is a row, and more atoms make more rows per image), so this many would need
#: gigabytes. Real systems stay far below it: a cell wider than the cutoff adds images of
#: a fraction of its points, so only tens of millions of atoms, whose list could not be
#: held anyway, would reach it. A few atoms reach it in a cell thinner than the cutoff by
#: a factor of hundreds: nearly always units mixed up, or a vector left near zero on a
#: periodic axis. Refusing up front gives that mistake a message rather than a
#: MemoryError (or a machine swapping) minutes later.
MAX_IMAGES = 5 * 10**7
#: Bins per system at most this many per point (plus `EXTRA_BINS`): wider bins where the
#: points are spread thinner than one per bin of the search radius (an open system).
BINS_PER_POINT = 4
EXTRA_BINS = 64
#: A chunk of atoms may store this many times the hits expected of it in the first pass.
HIT_ROOM = 1.25
#: `state_chunks`' arguments of the passes that use none: of the types of the real ones.
_NO_SHIFT_BOUNDS = (np.empty((0, 0)),) * 4
_NO_BINS = (np.empty((0, 0)), np.empty(0), np.empty((0, 0), np.int64), np.empty(0, np.int64))
#: Of the types of the pieces `state_chunks` hands `_chunk_pass` (`indirect.kernel_target`).
_PIECES = (np.empty(0, np.int64),) * 2
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
    of the cell, and whether this is a batch, for the refusals of points too far from
    their cell and of more than `MAX_IMAGES` images (`ValueError`)."""
    n, n_dims = positions.shape
    n_chunks = -(-n // ATOMS_PER_CHUNK)
    totals, counts = np.empty(n_chunks, np.int64), np.empty(n, np.int64)
    # A hit is its candidate's place in `order` in the low `bits` bits, the rank of its
    # shift above: an atom asks far fewer than 2**(63 - bits) shifts (`MAX_IMAGES`).
    bits = max(1, n.bit_length())
    with threads(None):
        state, crowding = _state(positions, cells, offsets, reach, radii, names)
        hits = _outputs.empty(
            (n_chunks * _hit_share(state, crowding, np.diff(offsets), full_list),),
            dtype=np.int64)
        none = _row_arrays("", 0, n_dims)
        pair_rows(state, reach, full_list, hits, bits, totals, counts, np.empty(0, np.int64),
                  none)
        starts = np.cumsum(counts) - counts
        out = _row_arrays(letters, int(counts.sum()), n_dims)
        pair_rows(state, reach, full_list, hits, bits, totals, counts, starts, out)
    return {letter: array for letter, array in zip(KERNEL_LETTERS, out, strict=True)
            if letter in letters}


def _hit_share(state: MolecularState, crowding: np.ndarray, n: np.ndarray,
               full_list: bool) -> int:
    """The hits a chunk of `ATOMS_PER_CHUNK` atoms may store in the first pass (a chunk
    with more finds them again in the second): `HIT_ROOM` times the rows expected per
    atom in the system with the most, the atoms of a ball of the search radius at the
    density its atoms see: the larger of the mean over its atoms of their own bin's
    count over a bin's volume (which follows clusters) and, in a cell periodic on every
    axis, its atoms over its volume (an atom's images within a cell thinner than the
    bins count too)."""
    n_dims = state.positions.shape[1]
    seen = crowding / np.maximum(n, 1)
    density = seen * state.inv_bin**n_dims
    periodic = state.periodic.all(axis=1)
    if periodic.any():
        volume = np.abs(np.linalg.det(state.vectors[periodic]))
        density[periodic] = np.maximum(density[periodic], n[periodic] / volume)
    ball = {1: 2.0 * state.search, 2: np.pi * state.search**2,
            3: 4.0 / 3.0 * np.pi * state.search**3}[n_dims]
    per_atom = density * ball * (1.0 if full_list else 0.5)
    return int(math.ceil(ATOMS_PER_CHUNK * HIT_ROOM * per_atom.max(initial=0.0))) + 16


def _row_arrays(letters: str, m: int, n_dims: int) -> tuple[np.ndarray, ...]:
    """The kernels' output arrays, ``"ijSDdb"``: m rows for the ``letters``, none for the
    others; large ones from the pool of ``_outputs.py``, memory of earlier results nobody
    holds, already paged in."""
    return tuple(_outputs.empty((m if letter in letters else 0,)
                                + ((n_dims,) if letter in "SD" else ()),
                                dtype=np.float64 if letter in "Dd" else np.int64)
                 for letter in KERNEL_LETTERS)


def _state(positions: np.ndarray, cells: SystemCells, offsets: np.ndarray,
           reach: float, radii, names: tuple[str, str, str, bool]
           ) -> tuple[MolecularState, np.ndarray]:
    """The kernels' arrays of all systems (`MolecularState`): the atoms wrapped, checked,
    given their query shifts and binned, each system's search radius and bins; and each
    system's sum over its bins of their atoms' number squared (for `_hit_share`). Three
    passes of `state_chunks` over the atoms, each on all threads: the wrap, then (each
    system's bounds known) the shifts and bins, then (the sort's places known) the
    gathering in bin order."""
    n_systems = len(cells)
    vectors, periodic, dual, widths = cells.vectors, cells.periodic, cells.dual, cells.widths
    sizes = np.diff(offsets)
    system = np.repeat(np.arange(n_systems, dtype=np.int64), sizes)
    shape = positions.shape
    # The large arrays from recycled memory (`_outputs.py`), as the rows'.
    wraps, wrapped = _outputs.empty(shape, np.int64), _outputs.empty(shape, np.float64)
    atoms, cell = (positions, wraps, wrapped), (vectors, periodic, dual)
    out = (_outputs.empty(shape, np.int64), _outputs.empty(shape, np.int64),
           np.empty(shape[0], np.int64), np.empty(shape[0], np.int64),
           _outputs.empty((3, shape[0]), np.float64), _outputs.empty(shape, np.float64),
           _outputs.empty(shape, np.int64))
    lower, upper, _, order, binned, binned_positions, binned_wraps = out
    partial = np.empty((int((-(-sizes // ATOMS_PER_STATE_CHUNK)).sum()), 14))
    farthest, largest = np.empty(n_systems), np.empty(n_systems)
    bounds = np.empty((4, n_systems, shape[1]))
    counts, crowding = np.empty(n_systems), np.empty(n_systems)
    systems = (farthest, largest, bounds, counts, crowding, np.empty(0, np.int64))
    kernel = indirect.kernel_target(
        _chunk_pass, (WRAP, atoms, cell, _NO_SHIFT_BOUNDS, _NO_BINS, _PIECES, 0, 0, out,
                      partial), None)
    state_chunks(WRAP, offsets, atoms, cell, _NO_SHIFT_BOUNDS, _NO_BINS, out, partial, kernel)
    system_results(WRAP, offsets, partial, _NO_BINS[3], out, systems)
    low, high, wrapped_min, wrapped_max = bounds
    empty = (sizes == 0)[:, np.newaxis]
    unused = ~periodic | empty
    low[unused] = 0.0
    high[unused] = 0.0
    scale = np.maximum(largest, reach)
    # The queries reach as far from the cell as the images do (a shift at most the reach
    # in cells and 2 beyond, the wrapped atoms spanning a cell): the margin grows with it.
    check_cells = (reach + SEARCH_MARGIN * scale)[:, np.newaxis] / widths
    extent = largest + ((check_cells + 2.0) * np.abs(vectors).max(axis=2)).sum(
        axis=1, where=periodic)
    search = reach + SEARCH_MARGIN * np.maximum(scale, extent)
    origin = np.where(empty, 0.0, wrapped_min)
    # A system with a point too far from its cell, refused below (`_check`), gets one bin:
    # its extent may be beyond float64's range.
    sized = ~empty & (farthest < MAX_CELLS_AWAY)[:, np.newaxis]
    spread = np.subtract(wrapped_max, origin, out=np.zeros_like(origin), where=sized)
    bin_width, n_bins = _bins(spread, search, sizes)
    inv_bin = 1.0 / bin_width
    bin_offset = np.zeros(n_systems + 1, np.int64)
    np.cumsum(np.prod(n_bins, axis=1), out=bin_offset[1:])
    shift_bounds = (low, high, check_cells, search[:, np.newaxis] / widths)
    bins = (origin, inv_bin, n_bins, bin_offset)
    bin_start = np.empty(bin_offset[-1] + 1, np.int64)
    systems = (*systems[:5], bin_start)
    state_chunks(SHIFTS_AND_BINS, offsets, atoms, cell, shift_bounds, bins, out, partial,
                 kernel)
    system_results(SHIFTS_AND_BINS, offsets, partial, bin_offset, out, systems)
    _check(cells, farthest, counts, reach, names)
    state_chunks(GATHER, offsets, atoms, cell, shift_bounds, bins, out, partial, kernel)
    return MolecularState(
        positions, wrapped, wraps, lower, upper, system,
        np.empty(0) if radii is None else radii, vectors, periodic, search, origin, inv_bin,
        n_bins, bin_offset, bin_start, order, binned, binned_positions, binned_wraps
    ), crowding


def _bins(extent: np.ndarray, search: np.ndarray, n: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray]:
    """``(bin_width, n_bins)`` of each system: cubic bins at least ``search`` wide over
    the ``extent`` (B, d) of its ``n`` points, widened until they number at most
    `BINS_PER_POINT` per point (plus `EXTRA_BINS`)."""
    width = np.where(search > 0.0, search, 1.0)  # 1.0: every point at one place, reach 0
    limit = BINS_PER_POINT * n + EXTRA_BINS
    while True:
        n_bins = np.floor(extent / width[:, np.newaxis]) + 1.0
        total = np.prod(n_bins, axis=1)
        over = total > limit
        if not over.any():
            return width, n_bins.astype(np.int64)
        width = np.where(over, width * 1.01 * (total / limit) ** (1.0 / extent.shape[1]),
                         width)


def _check(cells: SystemCells, farthest: np.ndarray, counts: np.ndarray,
           reach: float, names: tuple[str, str, str, bool]) -> None:
    """Refuse the first system, in order, with points beyond `MAX_CELLS_AWAY` cells of the
    origin or needing more than `MAX_IMAGES` images (see there why). A cell without
    periodic axes asks none but each point's own position."""
    refused = np.flatnonzero(~(farthest < MAX_CELLS_AWAY) | (counts > MAX_IMAGES))
    for b in refused:
        cell = cells[b]
        if not farthest[b] < MAX_CELLS_AWAY:
            raise ValueError(
                f"`points` must lie within 2**30 cells of the origin along the periodic "
                f"axes (farther, float64 keeps too little of a point's place in its cell); "
                f"got a point {farthest[b]:.6g} cells away. Wrap the positions into the "
                "cell first."
            )
        if not len(cell.axes):
            continue
        parameter, seen, cell_name, batch = names
        cell_name = f"{cell_name}[{b}]" if batch else cell_name
        widths = ", ".join(f"{width:.6g}" for width in cell.widths)
        raise ValueError(
            f"`{parameter}` and `{cell_name}` must need at most {MAX_IMAGES:,} periodic "
            f"images of the points (each a search of the cell's atoms, and rows of the "
            f"list); got {seen} in a cell {widths} wide across its periodic axes "
            f"{cell.axes.tolist()}, which needs {counts[b]:,.0f} images "
            f"({reach / cell.widths.min():,.1f} times the narrowest width). Check that the "
            "cutoff and the cell are in the same units, or make a thin axis open (`pbc`)."
        )
