"""Cell arithmetic shared by every query: cell coordinates, lookups, cell ranges, images.

A cell coordinate is ``floor((x - origin) * inv_cell_size)``; the same expression is used
for points when the grid is built and for query bounds, so rounding never moves a point out
of the range of cells a query visits (the tolerances below widen query ranges by a few ulps,
which costs at most an occasional extra cell).

Periodic images. A range of cells on a periodic axis is unwrapped (it may run below 0 or
past ``n_cells``); a cell reached at unwrapped coordinate ``c`` lies ``c // n_cells`` periods
away: a difference to one of its points is ``(a - b) - shift`` with
``shift = (c // n_cells) * box``. When a range covers the whole axis no cell is reached twice
and the shift is 0; there the minimum image is taken per pair instead (`min_image`). Both
forms subtract the period after the difference, so swapping the two points negates the
difference exactly, and the results agree bit for bit with each other and with the oracle.

Kernels unpack the grid state once, at their entry, and every helper takes plain arrays
and scalars: numba updates the reference counts of all thirteen arrays of the state
whenever the tuple is passed or copied, which made a cell lookup 25 times slower.

Unsigned loop bounds. The loops over a run of points read ``range(np.uint64(start),
np.uint64(end))``. With a signed index numba must allow ``points[0, j]`` with ``j < 0``
(Python's wrap-around), so LLVM turns the loop's loads into gathers; with an unsigned one
the loads are contiguous vector loads, and the distance test took under a quarter of the
time per candidate (ad hoc).
"""

from __future__ import annotations

import math

import numpy as np

from .._config import jit, jit_inline

#: Relative widening of query ranges in cell units: covers rounding of ``(x - origin) *
#: inv_cell_size`` (a few ulps of the cell coordinate) with a wide margin.
RANGE_RELATIVE_TOLERANCE = 2.0**-44
#: Absolute widening in cell units.
RANGE_ABSOLUTE_TOLERANCE = 2.0**-30
#: Cell coordinates are clamped to this before conversion to integers (no int64 overflow).
COORD_LIMIT = 2.0**62
#: Largest coordinate magnitude accepted for points, queries, objects and ray origins:
#: squared distances between such coordinates (at most 3 * (2e150)**2, about 1.2e301) stay
#: finite in float64. From about 1.3e154 on they overflow to infinity, and pairs,
#: neighbours and nearest neighbours would come out wrong for a radius whose square
#: overflows too.
COORDINATE_LIMIT = 1e150
#: Smallest non-zero coordinate magnitude accepted wherever `COORDINATE_LIMIT` applies,
#: 2**-458 (about 1.34e-138). Two distinct coordinates that are each 0 or at least this
#: large differ by at least 2**-511 (the spacing of floats from 2**-458 up), whose square,
#: 2**-1022, is float64's smallest normal number: every non-zero squared distance is then a
#: normal float, computed to full precision. Closer coordinates could differ by less, and
#: their squared distance underflow to 0 or lose its digits (distinct points at distance 0,
#: nearest neighbours in the wrong order). A radius needs no floor: a squared radius below
#: 2**-1022 still orders correctly against squared distances that are 0 or at least that.
COORDINATE_FLOOR = 2.0**-458

#: Kernels work in three dimensions; 1-D and 2-D points are padded with zero columns.
#: The padded axes have one cell and never wrap, so they change no distance.
N_AXES = 3


@jit
def cell_tolerance(u_magnitude):
    """Widening, in cell units, of a query bound whose cell coordinate is ``u_magnitude``."""
    return RANGE_ABSOLUTE_TOLERANCE + abs(u_magnitude) * RANGE_RELATIVE_TOLERANCE


@jit
def floor_to_int(u):
    """``floor(u)`` as int64, clamped so that huge values cannot overflow.

    NaN (``inf * 0`` from a coordinate difference that overflowed, in a one-cell grid)
    maps to 0.
    """
    if u != u:
        return np.int64(0)
    if u > COORD_LIMIT:
        u = COORD_LIMIT
    elif u < -COORD_LIMIT:
        u = -COORD_LIMIT
    return np.int64(math.floor(u))


@jit
def hash_cell(cx, cy, cz, mask):
    """Slot of cell ``(cx, cy, cz)`` in a power-of-two table (``mask = capacity - 1``)."""
    h = np.uint64(cx) * np.uint64(0x9E3779B97F4A7C15)
    h ^= np.uint64(cy) * np.uint64(0xC2B2AE3D27D4EB4F)
    h ^= np.uint64(cz) * np.uint64(0x165667B19E3779F9)
    h ^= h >> np.uint64(31)
    return np.int64(h & np.uint64(mask))


@jit
def find_row(hash_keys, hash_ids, cy, cz):
    """Sparse mode: occupied-cell ids ``(first, end)`` of the row of cells ``(cy, cz)``
    (its cells are ``first .. end - 1``, in order of x), or ``(0, 0)`` when it has none.

    The table (`build.row_table`) holds one entry per occupied row: ``hash_keys[s]`` is
    ``(cy, cz, end)`` and ``hash_ids[s]`` is ``first`` (-1 for an empty slot).
    """
    mask = hash_ids.shape[0] - 1
    slot = hash_cell(cy, cz, 0, mask)
    while True:
        first = hash_ids[slot]
        if first < 0:
            return np.int64(0), np.int64(0)
        if hash_keys[slot, 0] == cy and hash_keys[slot, 1] == cz:
            return first, hash_keys[slot, 2]
        slot = (slot + 1) & mask


@jit
def first_cell_from(cell_coords, lo, hi, cx):
    """The first cell of ``lo .. hi - 1`` (cells of one row, ascending in x) at ``x >= cx``,
    or ``hi``: a binary search."""
    while lo < hi:
        middle = (lo + hi) >> 1
        if cell_coords[middle, 0] < cx:
            lo = middle + 1
        else:
            hi = middle
    return lo


@jit
def find_cell(n_cells, dense_lookup, hash_keys, hash_ids, cell_coords, cx, cy, cz):
    """Occupied-cell id of cell ``(cx, cy, cz)``, or -1 when the cell holds no point.

    Dense grids look the cell up in ``dense_lookup``; sparse ones (``dense_lookup`` empty)
    find its row in the table of rows (`find_row`), then the cell in the row.
    """
    if cx < 0 or cy < 0 or cz < 0 or cx >= n_cells[0] or cy >= n_cells[1] or cz >= n_cells[2]:
        return -1
    if dense_lookup.shape[0] > 0:
        return dense_lookup[(cz * n_cells[1] + cy) * n_cells[0] + cx]
    first, end = find_row(hash_keys, hash_ids, cy, cz)
    cell = first_cell_from(cell_coords, first, end, cx)
    return cell if cell < end and cell_coords[cell, 0] == cx else -1


@jit
def axis_range(n_cells, box, lower_u, upper_u):
    """Integer cell range ``[first, last]`` on one axis covering cell units [lower_u, upper_u].

    ``n_cells`` and ``box`` are the axis's. Open axes are clipped to the cells that hold
    points (``first > last`` when none). On a periodic axis the range is unwrapped; one as
    long as the axis becomes ``[0, n_cells - 1]`` so that no cell is visited twice.
    """
    first = floor_to_int(lower_u)
    last = floor_to_int(upper_u)
    if math.isinf(box):
        first = max(first, 0)
        last = min(last, n_cells - 1)
    elif last - first + 1 >= n_cells:
        first = 0
        last = n_cells - 1
    return first, last


@jit
def wrap_cell(c, n_cells, box):
    """Unwrapped cell coordinate ``c`` brought into ``[0, n_cells)`` on a periodic axis."""
    if math.isinf(box):
        return c
    return c % n_cells


@jit
def image_shift(c, n_cells, box):
    """Offset of the image of unwrapped cell ``c`` on one axis: a whole number of periods."""
    if math.isinf(box):
        return 0.0
    return (c // n_cells) * box


@jit
def wrap_whole_axes(n_cells, box, half_box, first, last, half_out):
    """``half_out`` per axis for `min_image`: half the period where the range ``first..last``
    covers a whole periodic axis (per-pair minimum image), ``inf`` elsewhere. Returns
    whether any axis needs it."""
    any_whole = False
    for axis in range(3):
        whole = not math.isinf(box[axis]) and last[axis] - first[axis] + 1 >= n_cells[axis]
        half_out[axis] = half_box[axis] if whole else np.inf
        any_whole = any_whole or whole
    return any_whole


@jit
def min_image(delta, box, half_box):
    """A coordinate difference brought to the nearest image; ``half_box = inf`` never wraps.

    Positions on periodic axes are wrapped into ``[0, box)``, so one correction suffices. A
    difference of exactly half the box is kept as it is.
    """
    if delta > half_box:
        return delta - box
    if delta < -half_box:
        return delta + box
    return delta


@jit_inline
def block_volume(first, last):
    """Cells in the cell box ``first..last`` (a float: it may pass 2**63); 0 when the box
    is empty on an axis."""
    volume = 1.0
    for axis in range(3):
        if last[axis] < first[axis]:
            return 0.0
        volume *= last[axis] - first[axis] + 1
    return volume


@jit_inline
def occupied_cell_image(cell_coords, cell, n_cells, box, block, shifts, row):
    """Whether occupied cell ``cell`` lies in the cell box ``block = (first, last)``,
    periodic axes wrapped; if it does, the shift of its image there (see the module
    docstring) is written to ``shifts[row]``. The scan of `gather_cells` and `gather_runs`
    over the occupied cells, for a box larger than their number."""
    first, last = block
    for axis in range(3):
        offset = cell_coords[cell, axis] - first[axis]
        if not math.isinf(box[axis]):
            offset %= n_cells[axis]
        if offset > last[axis] - first[axis]:
            return False
    for axis in range(3):
        unwrapped = cell_coords[cell, axis]
        if not math.isinf(box[axis]):
            unwrapped = first[axis] + (unwrapped - first[axis]) % n_cells[axis]
        shifts[row, axis] = image_shift(unwrapped, n_cells[axis], box[axis])
    return True


@jit
def cells_needed(first, last, n_occupied):
    """Buffer size `gather_cells` needs for the range ``first..last``."""
    volume = block_volume(first, last)
    if volume == 0.0:
        return 0
    return int(min(volume, n_occupied))


@jit
def gather_cells(n_cells, box, cell_coords, dense_lookup, hash_keys, hash_ids, first, last,
                 cells_out, shifts_out):
    """Occupied cells in the cell box ``first..last`` (per axis, see `axis_range`).

    Writes the ids to ``cells_out`` and, per cell, the shift of its image (see the module
    docstring) to ``shifts_out``, which must hold `cells_needed` entries; returns the count.
    When the box of cells is larger than the number of occupied cells, the occupied cells
    are scanned instead, so a range far larger than the data costs O(occupied cells).
    """
    n_occupied = cell_coords.shape[0]
    volume = block_volume(first, last)
    if volume == 0.0:
        return 0
    count = 0
    if volume > n_occupied:
        for cell in range(n_occupied):
            if occupied_cell_image(cell_coords, cell, n_cells, box, (first, last), shifts_out,
                                   count):
                cells_out[count] = cell
                count += 1
        return count
    # Buffers are never grown in here: reassigning an array inside a hot loop makes numba
    # update reference counts on every iteration (ten times slower).
    for cz in range(first[2], last[2] + 1):
        wz = wrap_cell(cz, n_cells[2], box[2])
        for cy in range(first[1], last[1] + 1):
            wy = wrap_cell(cy, n_cells[1], box[1])
            for cx in range(first[0], last[0] + 1):
                wx = wrap_cell(cx, n_cells[0], box[0])
                cell = find_cell(n_cells, dense_lookup, hash_keys, hash_ids, cell_coords, wx,
                                 wy, wz)
                if cell >= 0:
                    cells_out[count] = cell
                    shifts_out[count, 0] = image_shift(cx, n_cells[0], box[0])
                    shifts_out[count, 1] = image_shift(cy, n_cells[1], box[1])
                    shifts_out[count, 2] = image_shift(cz, n_cells[2], box[2])
                    count += 1
    return count


@jit
def cell_buffers(size):
    """Scratch buffers for `gather_cells`: occupied-cell ids and image shifts."""
    return np.empty(size, np.int64), np.empty((size, 3), np.float64)


@jit
def sparse_row_slice(hash_keys, hash_ids, cell_start, cell_coords, x_lo, x_hi, wy, wz):
    """Slice ``(start, end)`` of the sorted points in cells ``x_lo..x_hi`` of row (wy, wz)
    of a sparse grid: one probe of the table of rows (`find_row`), then two binary searches
    among the row's cells.

    Occupied cells are numbered in row-major order (x fastest), so the points of a row
    segment are contiguous: a run of cells is scanned as one slice. Coordinates are
    wrapped, ``0 <= x_lo <= x_hi < n_cells[0]``. (Dense grids read the slice off
    ``dense_start`` with two loads.) A table of cells, probed for the first and the last
    occupied cell of the segment, cost a probe per cell of the segment and a cache miss
    per probe into a table twice the size of the points: 100,000 radius queries among a
    million points with one far outlier took 2.2 times as long as without it (ad hoc).
    """
    first, end = find_row(hash_keys, hash_ids, wy, wz)
    lo = first_cell_from(cell_coords, first, end, x_lo)
    hi = first_cell_from(cell_coords, lo, end, x_hi + 1)
    return cell_start[lo], cell_start[hi]


@jit
def row_segment(x, x_last, n_x, box_x):
    """The part of the unwrapped x range ``x..x_last`` that lies in one period.

    Returns ``(x_lo, x_hi, periods, next_x)``: wrapped cells, how many periods the
    segment's image lies away, and where the next segment starts (``> x_last``: none).
    A range from `axis_range` is shorter than a periodic axis, so it has two segments at
    most.
    """
    if math.isinf(box_x):
        return x, x_last, 0, x_last + 1
    period = x // n_x
    segment_last = min(x_last, (period + 1) * n_x - 1)
    return x - period * n_x, segment_last - period * n_x, period, segment_last + 1


@jit
def runs_capacity(first, last, n_occupied):
    """Buffer size `gather_runs` needs for the cell box ``first..last``."""
    volume = block_volume(first, last)
    if volume == 0.0:
        return 0
    if volume > n_occupied:
        return n_occupied
    # Two per row: a wrapped row splits in two.
    return 2 * (last[1] - first[1] + 1) * (last[2] - first[2] + 1)


@jit
def gather_runs(n_cells, box, cell_coords, cell_start, dense_start, hash_keys, hash_ids, first,
                last, half_stencil, center, runs):
    """Runs of sorted points covering the cell box ``first..last``; returns their number.

    A run is a slice ``run_bounds[r] = (start, end)`` of the sorted points (one row of
    cells) and the offset ``run_shifts[r]`` of its image (see the module docstring), written
    into ``runs = (run_bounds, run_shifts)``.

    With ``half_stencil``, only the half of the box after cell ``center`` in row-major
    order: its own row from ``center`` on (that run comes first and starts at the cell's
    first point), then the rows after it. Otherwise, when the box of cells is larger than
    the number of occupied cells, one run per occupied cell inside it, so that a range far
    larger than the data costs O(occupied cells). The buffers must hold `runs_capacity`
    runs.
    """
    run_bounds, run_shifts = runs
    n_occupied = cell_coords.shape[0]
    volume = block_volume(first, last)
    if volume == 0.0:
        return 0
    n_runs = 0
    if volume > n_occupied and not half_stencil:
        for cell in range(n_occupied):
            if occupied_cell_image(cell_coords, cell, n_cells, box, (first, last), run_shifts,
                                   n_runs):
                run_bounds[n_runs, 0] = cell_start[cell]
                run_bounds[n_runs, 1] = cell_start[cell + 1]
                n_runs += 1
        return n_runs
    center_x, center_y, center_z = center
    # The dense lookup is two loads, written out so no call stands in the row loop.
    dense = dense_start.shape[0] > 0
    for cz in range(center_z if half_stencil else first[2], last[2] + 1):
        own_plane = half_stencil and cz == center_z
        wz = wrap_cell(cz, n_cells[2], box[2])
        shift_z = image_shift(cz, n_cells[2], box[2])
        for cy in range(center_y if own_plane else first[1], last[1] + 1):
            wy = wrap_cell(cy, n_cells[1], box[1])
            shift_y = image_shift(cy, n_cells[1], box[1])
            x = center_x if own_plane and cy == center_y else first[0]
            while x <= last[0]:
                x_lo, x_hi, periods, x = row_segment(x, last[0], n_cells[0], box[0])
                if dense:
                    base = (wz * n_cells[1] + wy) * n_cells[0]
                    start, end = dense_start[base + x_lo], dense_start[base + x_hi + 1]
                else:
                    start, end = sparse_row_slice(hash_keys, hash_ids, cell_start,
                                                  cell_coords, x_lo, x_hi, wy, wz)
                if end > start:
                    run_bounds[n_runs, 0] = start
                    run_bounds[n_runs, 1] = end
                    run_shifts[n_runs, 0] = periods * box[0] if periods != 0 else 0.0
                    run_shifts[n_runs, 1] = shift_y
                    run_shifts[n_runs, 2] = shift_z
                    n_runs += 1
    return n_runs


@jit
def run_buffers(size):
    """Scratch buffers for `gather_runs`: slices and image shifts."""
    size = max(size, 1)
    return np.empty((size, 2), np.int64), np.empty((size, 3), np.float64)


@jit
def query_cell_range(origin, inv_cell_size, n_cells, box, query, reach, first, last):
    """Fill ``first``/``last`` with the cells holding every point within ``reach`` of ``query``.

    ``query`` is a length-3 position already wrapped on periodic axes.
    """
    for axis in range(3):
        u = (query[axis] - origin[axis]) * inv_cell_size[axis]
        u_reach = reach * inv_cell_size[axis]
        tolerance = cell_tolerance(abs(u) + u_reach)
        first[axis], last[axis] = axis_range(
            n_cells[axis], box[axis], u - u_reach - tolerance, u + u_reach + tolerance
        )
