"""The device grid and its cell arithmetic, as Warp functions.

Each function is the one of the same name in ``_kernels/cells.py``, written with the same
operations in the same order, so that a query visits the same cells, in the same order,
with the same image shifts as on the CPU engine, and computes the same distances bit for
bit (`displacement`). Warp's ``range`` takes 32-bit bounds only: loops over cell
coordinates and point positions (int64) are ``while`` loops.

The occupied cells are numbered in row-major order of their coordinates (x fastest), as
on the CPU engine, and a run of cells of one row is found by two binary searches over
their coordinates (`first_cell_at`): the CPU engine's sparse layout without its hash
table of rows, and without its dense lookup, so one search serves every spread of points.
"""

from __future__ import annotations

import warp as wp

from ..._kernels.cells import COORD_LIMIT, RANGE_ABSOLUTE_TOLERANCE, RANGE_RELATIVE_TOLERANCE
from . import MODULE_OPTIONS

wp.set_module_options(MODULE_OPTIONS)

_COORD_LIMIT = wp.constant(wp.float64(COORD_LIMIT))
_ABSOLUTE_TOLERANCE = wp.constant(wp.float64(RANGE_ABSOLUTE_TOLERANCE))
_RELATIVE_TOLERANCE = wp.constant(wp.float64(RANGE_RELATIVE_TOLERANCE))
_INF = wp.constant(wp.float64(float("inf")))


@wp.struct
class DeviceGrid:
    """The arrays and constants of `GridState` that the queries read, on the device.

    ``points``: the sorted points, padded to three axes; ``cell_start``: shape
    (n_occupied + 1,); ``cell_coords``: shape (n_occupied, 3), in row-major order;
    ``origin``, ``cell_size``, ``inv_cell_size``, ``n_cells``, ``box``, ``half_box`` as
    in `GridState`.
    """

    points: wp.array(dtype=wp.vec3d)
    cell_start: wp.array(dtype=wp.int64)
    cell_coords: wp.array2d(dtype=wp.int64)
    n_occupied: wp.int64
    origin: wp.vec3d
    cell_size: wp.vec3d
    inv_cell_size: wp.vec3d
    n_cells: wp.vec3l
    box: wp.vec3d
    half_box: wp.vec3d


@wp.func
def floor_to_int(u: wp.float64) -> wp.int64:
    """``floor(u)`` as int64, clamped to +-2**62; NaN gives 0 (`cells.floor_to_int`)."""
    if wp.isnan(u):
        return wp.int64(0)
    return wp.int64(wp.floor(wp.min(wp.max(u, -_COORD_LIMIT), _COORD_LIMIT)))


@wp.func
def wrap_coordinate(x: wp.float64, period: wp.float64) -> wp.float64:
    """A finite ``x`` wrapped into ``[0, period)`` on a periodic axis (``period`` finite),
    as itself on an open one (`points.wrap_columns`: ``fmod``, exact, then the period
    added to a negative remainder, +0 for a remainder of 0, and 0 for a tiny negative
    number whose remainder plus the period rounds to the period)."""
    if not wp.isfinite(period) or (x > wp.float64(0.0) and x < period):
        return x
    wrapped = wp.mod(x, period)  # fmod: exact
    if wrapped == wp.float64(0.0):
        wrapped = wp.float64(0.0)  # +0 for -0, as NumPy's mod
    elif wrapped < wp.float64(0.0):
        wrapped = wrapped + period
    if wrapped >= period:
        wrapped = wp.float64(0.0)
    return wrapped


@wp.func
def floor_div(c: wp.int64, n: wp.int64) -> wp.int64:
    """Python's ``c // n`` for ``n > 0``: Warp's integer division truncates toward zero."""
    q = c / n
    if q * n != c and c < wp.int64(0):
        q = q - wp.int64(1)
    return q


@wp.func
def wrap_cell(c: wp.int64, n_cells: wp.int64, box: wp.float64) -> wp.int64:
    """Unwrapped cell coordinate ``c`` brought into ``[0, n_cells)`` on a periodic axis."""
    if wp.isinf(box):
        return c
    return c - floor_div(c, n_cells) * n_cells


@wp.func
def image_shift(c: wp.int64, n_cells: wp.int64, box: wp.float64) -> wp.float64:
    """Offset of the image of unwrapped cell ``c`` on one axis: whole periods."""
    if wp.isinf(box):
        return wp.float64(0.0)
    return wp.float64(floor_div(c, n_cells)) * box


@wp.func
def axis_range(n_cells: wp.int64, box: wp.float64, lower_u: wp.float64,
               upper_u: wp.float64):
    """Cells ``(first, last)`` on one axis covering cell units [lower_u, upper_u]: clipped
    to the occupied span on open axes, the whole axis once on a periodic one it covers."""
    first = floor_to_int(lower_u)
    last = floor_to_int(upper_u)
    if wp.isinf(box):
        first = wp.max(first, wp.int64(0))
        last = wp.min(last, n_cells - wp.int64(1))
    elif last - first + wp.int64(1) >= n_cells:
        first = wp.int64(0)
        last = n_cells - wp.int64(1)
    return first, last


@wp.func
def cell_tolerance(u_magnitude: wp.float64) -> wp.float64:
    """Widening, in cell units, of a query bound whose cell coordinate is ``u_magnitude``
    (`cells.cell_tolerance`)."""
    return _ABSOLUTE_TOLERANCE + wp.abs(u_magnitude) * _RELATIVE_TOLERANCE


@wp.func
def axis_reach(grid: DeviceGrid, axis: int, x: wp.float64, reach: wp.float64):
    """`axis_range` of the cells within ``reach`` of coordinate ``x`` on ``axis``, widened
    by the tolerance of `cells.query_cell_range`."""
    u = (x - grid.origin[axis]) * grid.inv_cell_size[axis]
    u_reach = reach * grid.inv_cell_size[axis]
    tolerance = cell_tolerance(wp.abs(u) + u_reach)
    return axis_range(grid.n_cells[axis], grid.box[axis], u - u_reach - tolerance,
                      u + u_reach + tolerance)


@wp.func
def block_volume(first: wp.vec3l, last: wp.vec3l) -> wp.float64:
    """Cells in the block ``first..last`` as a float (it may pass 2**63); 0 when empty."""
    volume = wp.float64(1.0)
    for axis in range(3):
        if last[axis] < first[axis]:
            return wp.float64(0.0)
        volume = volume * wp.float64(last[axis] - first[axis] + wp.int64(1))
    return volume


@wp.func
def whole_axis_half(grid: DeviceGrid, first: wp.vec3l, last: wp.vec3l, axis: int):
    """Half the period where the block covers a whole periodic axis (a minimum image per
    pair there), ``inf`` elsewhere (`cells.wrap_whole_axes`)."""
    if (not wp.isinf(grid.box[axis])
            and last[axis] - first[axis] + wp.int64(1) >= grid.n_cells[axis]):
        return grid.half_box[axis]
    return _INF


@wp.func
def min_image(delta: wp.float64, box: wp.float64, half_box: wp.float64) -> wp.float64:
    """A difference brought to the nearest image; ``half_box = inf`` never wraps."""
    if delta > half_box:
        return delta - box
    if delta < -half_box:
        return delta + box
    return delta


@wp.func
def displacement_d2(a: wp.vec3d, b: wp.vec3d, shift: wp.vec3d, grid: DeviceGrid,
                    half: wp.vec3d) -> wp.float64:
    """The squared length of ``a - b - shift``, each axis at its nearest image where
    ``half`` is finite: `distance.displacement`'s arithmetic, summed x, y, z."""
    dx = min_image((a[0] - b[0]) - shift[0], grid.box[0], half[0])
    dy = min_image((a[1] - b[1]) - shift[1], grid.box[1], half[1])
    dz = min_image((a[2] - b[2]) - shift[2], grid.box[2], half[2])
    return dx * dx + dy * dy + dz * dz


@wp.func
def first_cell_at(grid: DeviceGrid, cx: wp.int64, cy: wp.int64, cz: wp.int64) -> wp.int64:
    """The first occupied cell at or after ``(cx, cy, cz)`` in row-major order (x fastest),
    or ``n_occupied``: a binary search."""
    lo = wp.int64(0)
    hi = grid.n_occupied
    while lo < hi:
        middle = (lo + hi) / wp.int64(2)
        z = grid.cell_coords[middle, 2]
        y = grid.cell_coords[middle, 1]
        before = z < cz or (z == cz and (y < cy or (y == cy and grid.cell_coords[middle, 0] < cx)))
        if before:
            lo = middle + wp.int64(1)
        else:
            hi = middle
    return lo


@wp.func
def row_segment(x: wp.int64, x_last: wp.int64, n_x: wp.int64, box_x: wp.float64):
    """The part of the unwrapped x range ``x..x_last`` in one period: ``(x_lo, x_hi,
    periods, next_x)`` (`cells.row_segment`)."""
    if wp.isinf(box_x):
        return x, x_last, wp.int64(0), x_last + wp.int64(1)
    period = floor_div(x, n_x)
    segment_last = wp.min(x_last, (period + wp.int64(1)) * n_x - wp.int64(1))
    return x - period * n_x, segment_last - period * n_x, period, segment_last + wp.int64(1)


@wp.func
def occupied_cell_offset(grid: DeviceGrid, cell: wp.int64, first: wp.int64, last: wp.int64,
                         axis: int) -> wp.int64:
    """Where occupied cell ``cell`` lies on ``axis`` from ``first``, periodic axes wrapped
    (`cells.occupied_cell_image`); past ``last - first`` when outside the block."""
    offset = grid.cell_coords[cell, axis] - first
    if not wp.isinf(grid.box[axis]):
        offset = offset - floor_div(offset, grid.n_cells[axis]) * grid.n_cells[axis]
    return offset
