"""The host side of the Warp engine's build: the points sorted into cells on the device.

The cells are those of the CPU engine (`_build.grid_geometry`: the same origin, cell size
and box of cells). The points are sorted by cell with Warp's radix sort, which is stable,
so that each cell keeps its points in increasing original index, as the CPU engine's
counting sort does: one pass on the cell's linear index where the box of cells numbers
fewer than 2**63 cells, else one pass per axis, x first (least significant), each on the
bits its coordinates take. The occupied cells are then numbered by a scan of the
positions where a new cell starts.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import warp as wp

from .._kernels.cells import COORDINATE_FLOOR, COORDINATE_LIMIT
from .._validation import grid_points
from . import _build
from ._warp_kernels import build as kernels
from ._warp_kernels.cells import DeviceGrid
from ._warp_memory import device_empty


class DeviceBuild(NamedTuple):
    """A built grid on the device: `cells.DeviceGrid`, ``order`` (the caller's index of
    each sorted point, in the index dtype, on the device) and the grid's geometry on the
    host, ``(origin, size, inv_size, n_periodic, n_cells)``."""

    grid: DeviceGrid
    order: wp.array
    geometry: tuple


def build_device_grid(points3, lowest, highest, cell_size, box, one_cell, index_dtype,
                      device) -> DeviceBuild:
    """Sort ``points3`` (an (n, d) NumPy array, d <= 3, or the (n,) vectors of
    `device_points` on ``device``) into the cells of `_build.grid_geometry`, on the Warp
    ``device``; arguments as `_build.build_state` takes them."""
    geometry = _build.grid_geometry(lowest, highest, cell_size, box, one_cell)
    origin, size, inv_size, n_periodic, n_cells = geometry
    _build.check_cells_per_axis(n_cells, highest, origin, inv_size, cell_size)
    n = points3.shape[0]
    what = f"the build of {n:,} points"
    if isinstance(points3, wp.array):
        points = points3  # padded and wrapped on the device already (`device_points`)
    else:
        padded = np.zeros((n, 3))
        padded[:, :points3.shape[1]] = points3
        points = device_empty(n, wp.vec3d, device, what)
        points.assign(padded)
    coords = device_empty((n, 3), wp.int64, device, what)
    wp.launch(kernels.cell_coords_of, n, (points, wp.vec3d(*origin), wp.vec3d(*inv_size),
                                          wp.vec3l(*n_periodic), coords), device=device)
    permutation = _sort_by_cell(coords, n_cells, device, what)
    sorted_points = device_empty(n, wp.vec3d, device, what)
    sorted_coords = device_empty((n, 3), wp.int64, device, what)
    heads = device_empty(n, wp.int64, device, what)
    wp.launch(kernels.gather_sorted, n, (points, coords, permutation, sorted_points,
                                         sorted_coords, heads), device=device)
    cell_ids = device_empty(n, wp.int64, device, what)
    wp.utils.array_scan(heads, cell_ids, inclusive=True)
    n_occupied = int(cell_ids[n - 1:].numpy()[0]) if n else 0
    cell_start = device_empty(n_occupied + 1, wp.int64, device, what)
    cell_start.zero_()
    cell_coords = device_empty((n_occupied, 3), wp.int64, device, what)
    wp.launch(kernels.cell_table, n, (sorted_coords, heads, cell_ids, cell_start, cell_coords),
              device=device)
    grid = DeviceGrid()
    grid.points = sorted_points
    grid.cell_start = cell_start
    grid.cell_coords = cell_coords
    grid.n_occupied = n_occupied
    grid.origin = wp.vec3d(*origin)
    grid.cell_size = wp.vec3d(*size)
    grid.inv_cell_size = wp.vec3d(*inv_size)
    grid.n_cells = wp.vec3l(*n_cells)
    grid.box = wp.vec3d(*box)
    grid.half_box = wp.vec3d(*(box / 2.0))
    return DeviceBuild(grid, _order(permutation, index_dtype, device), geometry)


def _sort_by_cell(coords: wp.array, n_cells: np.ndarray, device, what: str) -> wp.array:
    """The stable permutation (int64, shape (n,)) that sorts the points by cell in
    row-major order (see the module docstring); ``what`` names the build in an
    out-of-memory error."""
    n = coords.shape[0]
    # The radix sort takes keys and values with room for twice the items.
    keys = device_empty(2 * n, wp.int64, device, what)
    permutation = device_empty(2 * n, wp.int64, device, what)
    wp.launch(kernels.identity, n, (permutation,), device=device)
    # Python integers: the product may pass 2**63.
    n_linear = math.prod(int(count) for count in n_cells)
    if n_linear < 2**63:
        passes = [(kernels.LINEAR_KEY, n_linear)]
    else:
        passes = [(axis, int(n_cells[axis])) for axis in range(3)]
    for axis, n_keys in passes:
        bits = (n_keys - 1).bit_length()
        if bits == 0 or n == 0:
            continue  # one key: the order stays
        wp.launch(kernels.sort_keys, n, (coords, permutation, wp.vec3l(*n_cells), axis, keys),
                  device=device)
        wp.utils.radix_sort_pairs(keys, permutation, n, 0, bits)
    # Warp refuses an empty slice.
    return permutation[:n] if n else permutation


def _order(permutation: wp.array, index_dtype: np.dtype, device) -> wp.array:
    """The permutation in the grid's index dtype (a new int32 array, or itself)."""
    if index_dtype == np.int64:
        return permutation
    order = device_empty(permutation.shape[0], wp.int32, device,
                         f"the build of {permutation.shape[0]:,} points")
    wp.launch(kernels.narrow_order, permutation.shape[0], (permutation, order), device=device)
    return order


def device_points(points: wp.array, box: np.ndarray, device, check=None
                  ) -> tuple[wp.array, np.ndarray, np.ndarray]:
    """The points of a grid (or the queries of a query) whose caller's (n, d) float32 or
    float64 ``points`` lie on the Warp ``device``: ``(points3, lowest, highest)`` as
    `_validation.grid_points` gives them, ``points3`` the (n,) float64 vectors on the
    device (`kernels.points_in`: padded, wrapped into the periodic axes of ``box``), the
    bounds and checks folded there, so that only scalars come to the host. Where a check
    fails, the points are copied to the host and ``check`` (default `grid_points` with
    ``box``), the host's check of the same values, raises its own error, naming the first
    bad value."""
    n = points.shape[0]
    padded = device_empty(n, wp.vec3d, device, f"the build of {n:,} points")
    bounds = wp.array(np.array([[np.inf] * 3, [-np.inf] * 3]), dtype=wp.float64,
                      device=device)
    smallest = wp.array(np.array([np.inf]), dtype=wp.float64, device=device)
    n_not_finite = wp.zeros(1, dtype=wp.int64, device=device)
    if n:
        with wp.ScopedLogLevel(wp.LOG_WARNING):
            wp.launch(kernels.points_in, n, (points, wp.vec3d(*box), padded, bounds,
                                             smallest, n_not_finite), device=device)
    lowest, highest = bounds.numpy() if n else np.zeros((2, 3))
    if (n_not_finite.numpy()[0] or smallest.numpy()[0] < COORDINATE_FLOOR
            or lowest.min() < -COORDINATE_LIMIT or highest.max() > COORDINATE_LIMIT):
        host = np.ascontiguousarray(points.numpy(), dtype=np.float64)
        grid_points(host, box) if check is None else check(host)
    return padded, lowest.copy(), highest.copy()
