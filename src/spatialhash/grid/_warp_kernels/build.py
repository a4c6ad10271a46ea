"""The build's passes on the device: cell coordinates, sort keys, the sorted points and
the table of occupied cells.

The host side (`_warp_build.build_device_grid`) sorts the points by cell with Warp's
radix sort, which is stable: the points of a cell keep their increasing original index,
and the cells come in row-major order, so the sorted points and ``order`` are those of
the CPU engine's counting sort, position for position.
"""

from __future__ import annotations

from typing import Any

import warp as wp

from . import MODULE_OPTIONS
from .cells import floor_to_int, wrap_coordinate

wp.set_module_options(MODULE_OPTIONS)

#: `sort_keys`' axis for the linear index of the cell in the box of cells.
LINEAR_KEY = wp.constant(-1)


@wp.kernel
def cell_coords_of(points: wp.array(dtype=wp.vec3d), origin: wp.vec3d,
                   inv_cell_size: wp.vec3d, n_periodic: wp.vec3l,
                   coords: wp.array2d(dtype=wp.int64)):
    """Integer cell coordinates of each point (`build.cell_coords_of`): periodic axes
    (``n_periodic > 0``) clamped, which matters only for a point rounded onto the box's
    upper face."""
    i = wp.tid()
    for axis in range(3):
        c = floor_to_int((points[i][axis] - origin[axis]) * inv_cell_size[axis])
        if n_periodic[axis] > wp.int64(0):
            c = wp.min(wp.max(c, wp.int64(0)), n_periodic[axis] - wp.int64(1))
        coords[i, axis] = c


@wp.kernel
def points_in(points: wp.array2d(dtype=Any), box: wp.vec3d,
              padded: wp.array(dtype=wp.vec3d), bounds: wp.array2d(dtype=wp.float64),
              smallest: wp.array(dtype=wp.float64), n_not_finite: wp.array(dtype=wp.int64)):
    """The caller's (n, d) float32 or float64 points as (n,) float64 vectors, zeros for
    the missing axes, wrapped into ``box`` on its finite (periodic) axes with the
    arithmetic of the CPU engine (`points.wrap_columns`); and what
    `_validation.grid_points` checks, folded by atomics: the lowest (``bounds[0]``) and
    highest (``bounds[1]``) coordinate per axis, the smallest non-zero magnitude, the
    number of coordinates that are NaN or infinite."""
    i = wp.tid()
    d = points.shape[1]
    p = wp.vec3d()
    for axis in range(3):
        x = wp.float64(0.0)
        if axis < d:
            x = wp.float64(points[i, axis])
        if not wp.isfinite(x):
            wp.atomic_add(n_not_finite, 0, wp.int64(1))
        else:
            x = wrap_coordinate(x, box[axis])
        p[axis] = x
        wp.atomic_min(bounds, 0, axis, x)
        wp.atomic_max(bounds, 1, axis, x)
        if x != wp.float64(0.0):
            wp.atomic_min(smallest, 0, wp.abs(x))
    padded[i] = p


for _dtype in (wp.float32, wp.float64):
    wp.overload(points_in, {"points": wp.array2d(dtype=_dtype)})


@wp.kernel
def identity(permutation: wp.array(dtype=wp.int64)):
    """``permutation[t] = t``: the order before the first sort pass."""
    t = wp.tid()
    permutation[t] = wp.int64(t)


@wp.kernel
def sort_keys(coords: wp.array2d(dtype=wp.int64), permutation: wp.array(dtype=wp.int64),
              n_cells: wp.vec3l, axis: int, keys: wp.array(dtype=wp.int64)):
    """The key of the point at position ``t`` of the current order: its cell coordinate
    on ``axis``, or with `LINEAR_KEY` its cell's linear index (x fastest)."""
    t = wp.tid()
    i = permutation[t]
    if axis == LINEAR_KEY:
        keys[t] = (coords[i, 2] * n_cells[1] + coords[i, 1]) * n_cells[0] + coords[i, 0]
    else:
        keys[t] = coords[i, axis]


@wp.kernel
def gather_sorted(points: wp.array(dtype=wp.vec3d), coords: wp.array2d(dtype=wp.int64),
                  permutation: wp.array(dtype=wp.int64),
                  sorted_points: wp.array(dtype=wp.vec3d),
                  sorted_coords: wp.array2d(dtype=wp.int64),
                  heads: wp.array(dtype=wp.int64)):
    """The points and cell coordinates in sorted order, and ``heads[s] = 1`` where
    position ``s`` starts a cell (it differs from the cell of ``s - 1``)."""
    s = wp.tid()
    i = permutation[s]
    sorted_points[s] = points[i]
    head = wp.int64(0)
    if s == 0:
        head = wp.int64(1)
    else:
        before = permutation[s - 1]
        for axis in range(3):
            if coords[i, axis] != coords[before, axis]:
                head = wp.int64(1)
    for axis in range(3):
        sorted_coords[s, axis] = coords[i, axis]
    heads[s] = head


@wp.kernel
def cell_table(sorted_coords: wp.array2d(dtype=wp.int64), heads: wp.array(dtype=wp.int64),
               cell_ids: wp.array(dtype=wp.int64), cell_start: wp.array(dtype=wp.int64),
               cell_coords: wp.array2d(dtype=wp.int64)):
    """``cell_start`` and ``cell_coords`` of the occupied cells: ``cell_ids`` is the
    inclusive scan of ``heads`` (cell ``c`` holds the positions where it is ``c + 1``)."""
    s = wp.tid()
    n = sorted_coords.shape[0]
    if heads[s] == wp.int64(1):
        cell = cell_ids[s] - wp.int64(1)
        cell_start[cell] = wp.int64(s)
        for axis in range(3):
            cell_coords[cell, axis] = sorted_coords[s, axis]
    if s == n - 1:
        cell_start[cell_ids[s]] = wp.int64(n)


@wp.kernel
def narrow_order(permutation: wp.array(dtype=wp.int64), order: wp.array(dtype=wp.int32)):
    """The order in int32, the index dtype of grids under 2**31 - 1 points."""
    s = wp.tid()
    order[s] = wp.int32(permutation[s])
