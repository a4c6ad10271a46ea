"""Ray casts against the grid's points taken as spheres: one thread per ray, walking the
cells as the CPU engine's `ray.cast_rays` does, with its arithmetic.

A ray (`Ray`) is brought to cell units, clipped to the occupied box of cells widened by
its reach ``k`` (`start_ray`), and then either walks the cells by the DDA of ``dda.py``,
testing at each step the new slab of cells within ``k`` of its cell (`step_ray`), or,
where the walk would cost more than testing every sphere (``walk_limit``, the CPU
engine's `ray.WALK_COST_PER_POINT` rule) or its reach spans the grid, tests every sphere
once. A slab is read row by row of cells (z, then y), each row one run of contiguous
sorted points (`cells.first_cell_at`), so the spheres are met in the CPU engine's order.

The hit test is `ray_sphere.sphere_entry` (`sphere_entry`, with `point_on_ray` for
spheres of radius 0), written with the same operations in the same order: with the fused
multiply-add off (``MODULE_OPTIONS``) each distance is the CPU engine's, bit for bit. The
minima and maxima of the walk are Python's (`larger`, `smaller`): the first of two equal
values, as numba computes them.

Three modes, the CPU engine's (`ray.MODE_FIRST`, `MODE_COUNT`, `MODE_FILL`): the first
hit (nearest, ties to the smaller index; the walk stops once it lies before the current
cell's exit), the number of hits, or every hit, written from the offset the count pass
gave and then sorted by distance, then index (`scan.sort_row`: a row's indices are distinct,
so the sorted row is the CPU engine's whatever the sort). Rays need an open grid (`Grid`
refuses periodic ones), so no image is taken.
"""

from __future__ import annotations

from typing import Any

import warp as wp

from ..._kernels.cells import RANGE_ABSOLUTE_TOLERANCE, RANGE_RELATIVE_TOLERANCE
from .._kernels.ray import MODE_COUNT, MODE_FILL, MODE_FIRST
from . import MODULE_OPTIONS
from .cells import DeviceGrid, first_cell_at, floor_to_int
from .scan import sort_row

wp.set_module_options(MODULE_OPTIONS)

_INF = wp.constant(wp.float64(float("inf")))
_ABSOLUTE_TOLERANCE = wp.constant(wp.float64(RANGE_ABSOLUTE_TOLERANCE))
_RELATIVE_TOLERANCE = wp.constant(wp.float64(RANGE_RELATIVE_TOLERANCE))
_FIRST = wp.constant(MODE_FIRST)
_COUNT = wp.constant(MODE_COUNT)
_FILL = wp.constant(MODE_FILL)


@wp.struct
class Ray:
    """One ray's cast: the ray (``origin``, unit direction ``unit``, longest hit
    ``t_end``), in cell units (``u(t) = u_start + t * u_rate``), its reach ``k`` in
    cells, whether it ``missed`` the grid or ``walk``s it, its clipped span ``t_lo ..
    t_hi``; the walk's ``cell``, ``step`` and ``t_next`` (`dda.dda_start`), the slab of
    cells to test next (``slab_lo .. slab_hi``, unclipped), and whether the walk has
    ``ended``; what the mode keeps: the best hit so far (``best_t``, ``best_index``) or
    the next ``position`` of the row."""

    origin: wp.vec3d
    unit: wp.vec3d
    t_end: wp.float64
    u_start: wp.vec3d
    u_rate: wp.vec3d
    k: wp.int64
    missed: wp.bool
    walk: wp.bool
    t_lo: wp.float64
    t_hi: wp.float64
    cell: wp.vec3l
    step: wp.vec3l
    t_next: wp.vec3d
    slab_lo: wp.vec3l
    slab_hi: wp.vec3l
    ended: wp.bool
    mode: wp.int32
    best_t: wp.float64
    best_index: wp.int64
    position: wp.int64


@wp.func
def larger(a: Any, b: Any):
    """Python's ``max(a, b)``: ``b`` only where it is greater."""
    if b > a:
        return b
    return a


@wp.func
def smaller(a: Any, b: Any):
    """Python's ``min(a, b)``: ``b`` only where it is less."""
    if b < a:
        return b
    return a


@wp.func
def point_on_ray(mx: wp.float64, my: wp.float64, mz: wp.float64, dx: wp.float64,
                 dy: wp.float64, dz: wp.float64) -> wp.float64:
    """Where the ray meets a point of radius 0 (``m = origin - point``), or -1
    (`ray_sphere.point_on_ray`): the same parameter ``-m / d`` on every moving axis, ``m``
    zero on the others."""
    m = wp.vec3d(mx, my, mz)
    d = wp.vec3d(dx, dy, dz)
    t = wp.float64(wp.nan)
    for axis in range(3):
        if d[axis] == wp.float64(0.0):
            if m[axis] != wp.float64(0.0):
                return wp.float64(-1.0)
        else:
            axis_t = -m[axis] / d[axis]
            if not wp.isnan(t) and axis_t != t:
                return wp.float64(-1.0)
            t = axis_t
    if t >= wp.float64(0.0):
        return t
    return wp.float64(-1.0)


@wp.func
def sphere_entry(mx: wp.float64, my: wp.float64, mz: wp.float64, dx: wp.float64,
                 dy: wp.float64, dz: wp.float64, radius: wp.float64) -> wp.float64:
    """Where the ray enters the sphere (``m = origin - centre``), 0 from inside the closed
    ball, -1 when it misses: `ray_sphere.sphere_entry`'s arithmetic."""
    c = (mx * mx + my * my + mz * mz) - radius * radius
    if c <= wp.float64(0.0):
        return wp.float64(0.0)
    # Negated tests: NaN (overflowed squares) misses.
    b = mx * dx + my * dy + mz * dz
    if not b < wp.float64(0.0):
        return wp.float64(-1.0)
    if radius == wp.float64(0.0):
        return point_on_ray(mx, my, mz, dx, dy, dz)
    qx = mx - b * dx
    qy = my - b * dy
    qz = mz - b * dz
    disc = radius * radius - (qx * qx + qy * qy + qz * qz)
    if not disc >= wp.float64(0.0):
        return wp.float64(-1.0)
    return c / (wp.sqrt(disc) - b)


@wp.func
def reach_cells(grid: DeviceGrid, max_radius: wp.float64, u_start: wp.vec3d):
    """``(reach, k)``: the ray's reach in cell units and its neighbourhood half-width in
    whole cells, capped at one more than the grid is wide (`ray.reach_cells`)."""
    inv = larger(grid.inv_cell_size[0], larger(grid.inv_cell_size[1], grid.inv_cell_size[2]))
    reach = max_radius * inv
    largest = larger(grid.n_cells[0], larger(grid.n_cells[1], grid.n_cells[2]))
    magnitude = larger(wp.abs(u_start[0]), larger(wp.abs(u_start[1]), wp.abs(u_start[2])))
    reach = reach + (_ABSOLUTE_TOLERANCE + wp.abs(
        magnitude + wp.float64(largest) + reach + wp.float64(2.0)) * _RELATIVE_TOLERANCE)
    if reach >= wp.float64(largest) + wp.float64(1.0):
        return reach, largest + wp.int64(1)
    return reach, larger(wp.int64(wp.ceil(reach)), wp.int64(1))


@wp.func
def face_parameter(u_start: wp.float64, u_rate: wp.float64, face: wp.float64) -> wp.float64:
    """``t`` at which the ray crosses the face ``u == face`` of one axis."""
    return (face - u_start) / u_rate


@wp.func
def clip_to_cells(grid: DeviceGrid, ray: Ray, reach: wp.float64) -> Ray:
    """``t_lo``, ``t_hi``: the part of the ray's ``0 .. t_end`` in the box of cells
    ``-reach <= u <= n_cells + reach`` (`dda.clip_to_cells`); ``t_lo > t_hi`` when it
    misses."""
    ray.t_lo = wp.float64(0.0)
    ray.t_hi = ray.t_end
    for axis in range(3):
        lower = -reach
        upper = wp.float64(grid.n_cells[axis]) + reach
        rate = ray.u_rate[axis]
        if rate == wp.float64(0.0):
            if ray.u_start[axis] < lower or ray.u_start[axis] > upper:
                ray.t_lo = _INF
                ray.t_hi = -_INF
                return ray
        else:
            t_a = (lower - ray.u_start[axis]) / rate
            t_b = (upper - ray.u_start[axis]) / rate
            if t_a > t_b:
                swapped = t_a
                t_a = t_b
                t_b = swapped
            ray.t_lo = larger(ray.t_lo, t_a)
            ray.t_hi = smaller(ray.t_hi, t_b)
    return ray


@wp.func
def dda_start(ray: Ray) -> Ray:
    """The walk's first ``cell``, ``step`` and ``t_next``, from ``t_lo`` (`dda.dda_start`)."""
    for axis in range(3):
        rate = ray.u_rate[axis]
        origin = ray.u_start[axis]
        c = floor_to_int(origin + ray.t_lo * rate)
        if rate > wp.float64(0.0):
            ray.step[axis] = wp.int64(1)
            if face_parameter(origin, rate, wp.float64(c)) > ray.t_lo:
                c -= wp.int64(1)
            elif face_parameter(origin, rate, wp.float64(c + wp.int64(1))) <= ray.t_lo:
                c += wp.int64(1)
            ray.t_next[axis] = face_parameter(origin, rate, wp.float64(c + wp.int64(1)))
        elif rate < wp.float64(0.0):
            ray.step[axis] = wp.int64(-1)
            if face_parameter(origin, rate, wp.float64(c + wp.int64(1))) > ray.t_lo:
                c += wp.int64(1)
            elif face_parameter(origin, rate, wp.float64(c)) <= ray.t_lo:
                c -= wp.int64(1)
            ray.t_next[axis] = face_parameter(origin, rate, wp.float64(c))
        else:
            ray.step[axis] = wp.int64(0)
            ray.t_next[axis] = _INF
        ray.cell[axis] = c
    return ray


@wp.func
def start_ray(grid: DeviceGrid, n_points: wp.int64, max_radius: wp.float64,
              walk_limit: wp.float64, origin: wp.vec3d, unit: wp.vec3d, t_end: wp.float64,
              mode: wp.int32) -> Ray:
    """The `Ray` of ``origin + t * unit``, ``0 <= t <= t_end``, as `ray.walk_start` sets
    it out: clipped, walking or testing every sphere, its first slab the whole
    neighbourhood of its first cell."""
    ray = Ray()
    ray.origin = origin
    ray.unit = unit
    ray.t_end = t_end
    ray.mode = mode
    ray.best_t = _INF
    ray.best_index = wp.int64(-1)
    for axis in range(3):
        ray.u_start[axis] = (origin[axis] - grid.origin[axis]) * grid.inv_cell_size[axis]
        ray.u_rate[axis] = unit[axis] * grid.inv_cell_size[axis]
    reach, k = reach_cells(grid, max_radius, ray.u_start)
    ray.k = k
    ray = clip_to_cells(grid, ray, reach)
    ray.missed = ray.t_lo > ray.t_hi or n_points == wp.int64(0)
    # Steps the walk would take, times the cells each step looks up (`ray.walk_start`).
    n_steps = wp.float64(1.0)
    if not ray.missed and ray.t_hi < _INF:
        for axis in range(3):
            n_steps = n_steps + (wp.abs(ray.u_rate[axis]) * (ray.t_hi - ray.t_lo)
                                 + wp.float64(1.0))
    largest = larger(grid.n_cells[0], larger(grid.n_cells[1], grid.n_cells[2]))
    side = wp.float64(wp.int64(2) * k + wp.int64(1))
    ray.walk = (not ray.missed and k <= largest and n_steps * side * side <= walk_limit)
    if ray.walk:
        ray = dda_start(ray)
        for axis in range(3):
            ray.slab_lo[axis] = ray.cell[axis] - k
            ray.slab_hi[axis] = ray.cell[axis] + k
    return ray


@wp.func
def run_hits(grid: DeviceGrid, order: wp.array(dtype=Any), radii: wp.array(dtype=wp.float64),
             ray: Ray, start: wp.int64, end: wp.int64, out_indices: wp.array2d(dtype=Any),
             out_distances: wp.array(dtype=wp.float64)) -> Ray:
    """Test the spheres of sorted points ``start .. end - 1``: keep the best hit, count
    the hits or write them, by the ray's mode."""
    j = start
    while j < end:
        point = grid.points[j]
        hit_t = sphere_entry(ray.origin[0] - point[0], ray.origin[1] - point[1],
                             ray.origin[2] - point[2], ray.unit[0], ray.unit[1],
                             ray.unit[2], radii[j])
        if hit_t >= wp.float64(0.0) and hit_t <= ray.t_end:
            index = wp.int64(order[j])
            if ray.mode == _FIRST:
                if hit_t < ray.best_t or (hit_t == ray.best_t and index < ray.best_index):
                    ray.best_t = hit_t
                    ray.best_index = index
            else:
                if ray.mode == _FILL:
                    out_indices[ray.position, 0] = order[j]
                    out_distances[ray.position] = hit_t
                ray.position += wp.int64(1)
        j += wp.int64(1)
    return ray


@wp.func
def slab_hits(grid: DeviceGrid, order: wp.array(dtype=Any), radii: wp.array(dtype=wp.float64),
              ray: Ray, out_indices: wp.array2d(dtype=Any),
              out_distances: wp.array(dtype=wp.float64)) -> Ray:
    """Test the spheres of the ray's slab, clipped to the grid, row by row of cells (z,
    then y; `ray.slab_cells`, `ray.row_points`); not walking, every sphere."""
    if not ray.walk:
        return run_hits(grid, order, radii, ray, wp.int64(0), wp.int64(order.shape[0]),
                        out_indices, out_distances)
    lo = wp.vec3l()
    hi = wp.vec3l()
    for axis in range(3):
        lo[axis] = larger(ray.slab_lo[axis], wp.int64(0))
        hi[axis] = smaller(ray.slab_hi[axis], grid.n_cells[axis] - wp.int64(1))
    if lo[0] > hi[0]:
        return ray
    row_z = lo[2]
    while row_z <= hi[2]:
        row_y = lo[1]
        while row_y <= hi[1]:
            start = grid.cell_start[first_cell_at(grid, lo[0], row_y, row_z)]
            end = grid.cell_start[first_cell_at(grid, hi[0] + wp.int64(1), row_y, row_z)]
            ray = run_hits(grid, order, radii, ray, start, end, out_indices, out_distances)
            row_y += wp.int64(1)
        row_z += wp.int64(1)
    return ray


@wp.func
def step_ray(grid: DeviceGrid, ray: Ray, t_exit: wp.float64) -> Ray:
    """The walk moved to the next cell on the axis whose face comes first (the lowest on
    ties), its new slab one layer of cells on that axis, ``ended`` once past the grid
    plus the reach on it (`ray.walk_step`, `dda.leave_parameter`)."""
    t = ray.t_next
    axis = 2
    if t[0] <= t[1] and t[0] <= t[2]:
        axis = 0
    elif t[1] <= t[2]:
        axis = 1
    step = ray.step[axis]
    c = ray.cell[axis] + step
    ray.cell[axis] = c
    face = wp.float64(c)
    if step > wp.int64(0):
        face = wp.float64(c + wp.int64(1))
    ray.t_next[axis] = larger(face_parameter(ray.u_start[axis], ray.u_rate[axis], face),
                              t_exit)
    if step > wp.int64(0):
        ray.ended = c - ray.k >= grid.n_cells[axis]
    else:
        ray.ended = c + ray.k < wp.int64(0)
    for other in range(3):
        ray.slab_lo[other] = ray.cell[other] - ray.k
        ray.slab_hi[other] = ray.cell[other] + ray.k
    ray.slab_lo[axis] = c + step * ray.k
    ray.slab_hi[axis] = c + step * ray.k
    return ray


@wp.kernel
def ray_hits(grid: DeviceGrid, order: wp.array(dtype=Any), radii: wp.array(dtype=wp.float64),
             max_radius: wp.float64, walk_limit: wp.float64, origins: wp.array(dtype=wp.vec3d),
             units: wp.array(dtype=wp.vec3d), max_distance: wp.array(dtype=wp.float64),
             mode: wp.int32, positions: wp.array(dtype=wp.int64),
             out_indices: wp.array2d(dtype=Any), out_distances: wp.array(dtype=wp.float64)):
    """Ray ``q``: its first hit into ``out_indices[q, 0]`` and ``out_distances[q]`` (-1 and
    ``inf`` for a miss), the count of its hits into ``positions[q]``, or its hits from
    ``positions[q]`` on, sorted by distance, then index, by ``mode`` (`ray.cast_kernel`'s
    walk; ``radii`` follow the sorted points)."""
    q = wp.tid()
    ray = start_ray(grid, wp.int64(order.shape[0]), max_radius, walk_limit, origins[q],
                    units[q], max_distance[q], mode)
    row_start = wp.int64(0)
    if mode == _FILL:
        row_start = positions[q]
    ray.position = row_start
    t_enter = ray.t_lo
    while not ray.missed:
        ray = slab_hits(grid, order, radii, ray, out_indices, out_distances)
        ended = not ray.walk
        if ray.walk:
            t_exit = smaller(larger(smaller(ray.t_next[0], smaller(ray.t_next[1],
                                                                   ray.t_next[2])),
                                    t_enter), ray.t_hi)
            ended = t_exit >= ray.t_hi or (mode == _FIRST and ray.best_t <= t_exit)
            if not ended:
                t_enter = t_exit
                ray = step_ray(grid, ray, t_exit)
                ended = ray.ended
        if ended:
            break
    if mode == _FIRST:
        out_indices[q, 0] = out_indices.dtype(ray.best_index)
        out_distances[q] = ray.best_t
    elif mode == _FILL:
        sort_row(out_indices, out_distances, row_start, ray.position, True)
    else:
        positions[q] = ray.position


# The int32 overload, compiled with the module (see ``scan.py``).
wp.overload(ray_hits, {"order": wp.array(dtype=wp.int32),
                       "out_indices": wp.array2d(dtype=wp.int32)})
