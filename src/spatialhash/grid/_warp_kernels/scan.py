"""The radius, box and pair queries: one thread per query (or per point, or per box),
each walking the block of cells within its reach (or its box's), counted in one pass and
written in a second.

`walk` visits the block as the CPU engine's radius query does (`cells.gather_runs`): an
empty block visits nothing; a block of more cells than are occupied visits the occupied
cells in id order, each at its image in the block; any other block is read row by row of
cells (z, then y), each row one run of contiguous sorted points per period it spans. So
an unsorted row of `query_radius` or `query_box` lists its points in the CPU engine's
order (a box's block is `box.box_cell_range`'s, its test `box.box_scan_boxes`'s). Each
candidate's squared distance is `cells.displacement_d2` of the probe's centre minus the
candidate, less the run's image shift, the arithmetic of the CPU engine.

A probe (`Probe`) is a query or one of the grid's points. A point's probe pairs it with
the points after it in the sorted order only (``s`` its own position), so each pair is
met once, from its first point: the CPU engine's half stencil finds the same pairs, with
the same squared distances (the difference of two points is the negation of the other
way round, exactly), in another order. Rows are written from offsets the count pass gave
(an exclusive scan of the counts, by Warp's `array_scan`), so a thread writes its row
alone, in a fixed order: the output does not depend on the scheduling.

The kernels are generic in the index dtype (the grid's order and the output indices,
int32 or int64). Their int32 overloads are declared here, so that a first load compiles
them with the rest of the module; an int64 grid (2**31 - 1 points or more) adds its own
on first use.
"""

from __future__ import annotations

from typing import Any

import warp as wp

from . import MODULE_OPTIONS
from .cells import (
    DeviceGrid,
    axis_range,
    axis_reach,
    block_volume,
    cell_tolerance,
    displacement_d2,
    first_cell_at,
    image_shift,
    occupied_cell_offset,
    row_segment,
    whole_axis_half,
    wrap_cell,
)

wp.set_module_options(MODULE_OPTIONS)


@wp.struct
class Probe:
    """One search: its ``center``, its own sorted position ``s`` (-1 for a query), the
    squared radius ``r2`` (or, with per-point radii, its own ``radius``), the ``reach``
    of its block of cells, and whether it ``write``s its row (else counts it).

    A box query (``in_box``) takes the points inside the closed box from ``lower`` over
    ``width`` (``upper`` on open axes) instead, and its block of cells is the box's
    (`box_axis_range`)."""

    center: wp.vec3d
    s: wp.int64
    r2: wp.float64
    radius: wp.float64
    reach: wp.float64
    write: wp.bool
    in_box: wp.bool
    lower: wp.vec3d
    upper: wp.vec3d
    width: wp.vec3d


@wp.func
def new_probe(center: wp.vec3d, s: wp.int64, r2: wp.float64, radius: wp.float64,
              reach: wp.float64, write: wp.bool):
    """A `Probe` with these fields."""
    probe = Probe()
    probe.center = center
    probe.s = s
    probe.r2 = r2
    probe.radius = radius
    probe.reach = reach
    probe.write = write
    probe.in_box = False
    return probe


@wp.func
def inside_box(grid: DeviceGrid, probe: Probe, x: wp.vec3d) -> wp.bool:
    """Whether ``x`` lies in the probe's closed box, by `box.box_scan_boxes`'s tests:
    ``lower <= x <= upper`` on an open axis; on a periodic one, ``x`` at most ``width``
    past ``lower`` going up round the period, unless the box covers the whole period."""
    for axis in range(3):
        if wp.isinf(grid.box[axis]):
            if not (probe.lower[axis] <= x[axis] and x[axis] <= probe.upper[axis]):
                return False
        elif probe.width[axis] < grid.box[axis]:
            offset = x[axis] - probe.lower[axis]
            if offset < wp.float64(0.0):
                offset = offset + grid.box[axis]
            if not (offset <= probe.width[axis]):
                return False
    return True


@wp.func
def visit_run(grid: DeviceGrid, order: wp.array(dtype=Any), probe: Probe,
              radii: wp.array(dtype=wp.float64), run: wp.vec2l, shift: wp.vec3d,
              half: wp.vec3d, position: wp.int64, out_indices: wp.array2d(dtype=Any),
              out_distances: wp.array(dtype=wp.float64)) -> wp.int64:
    """Count, or write from ``position``, the points of the run ``run = (start, end)``
    within reach of the probe (or in its box); returns the position after them.

    Within reach: squared distance ``<= r2``, or with ``radii`` (not empty) ``<= (radius
    + radii[t]) ** 2``, the CPU engine's tests. A row of two columns is a pair, written
    as ``(min, max)`` of the two points' indices; a row of one column, a neighbour.
    """
    t = wp.max(run[0], probe.s + wp.int64(1))
    with_radii = radii.shape[0] > 0
    with_distances = out_distances.shape[0] > 0
    while t < run[1]:
        d2 = wp.float64(0.0)
        hit = wp.bool(False)
        if probe.in_box:
            # The wrapped coordinates themselves: a box test takes no image shift.
            hit = inside_box(grid, probe, grid.points[t])
        else:
            d2 = displacement_d2(probe.center, grid.points[t], shift, grid, half)
            limit2 = probe.r2
            if with_radii:
                limit = probe.radius + radii[t]
                limit2 = limit * limit
            hit = d2 <= limit2
        if hit:
            if probe.write:
                if out_indices.shape[1] == 2:
                    own = order[probe.s]
                    other = order[t]
                    out_indices[position, 0] = wp.min(own, other)
                    out_indices[position, 1] = wp.max(own, other)
                else:
                    out_indices[position, 0] = order[t]
                if with_distances:
                    out_distances[position] = wp.sqrt(d2)
            position += wp.int64(1)
        t += wp.int64(1)
    return position


@wp.func
def box_axis_range(grid: DeviceGrid, axis: int, lower: wp.float64, upper: wp.float64,
                   width: wp.float64):
    """The cells ``(first, last)`` of a box on ``axis`` (`box.box_cell_range`): exact on an
    open axis, where the cell coordinate is monotone in ``x``; on a periodic one from
    ``lower`` over ``width``, widened by the cell tolerance at its far end."""
    n_cells = grid.n_cells[axis]
    box = grid.box[axis]
    inv = grid.inv_cell_size[axis]
    if wp.isinf(box):
        return axis_range(n_cells, box, (lower - grid.origin[axis]) * inv,
                          (upper - grid.origin[axis]) * inv)
    if width >= box:
        return wp.int64(0), n_cells - wp.int64(1)
    u_lower = (lower - grid.origin[axis]) * inv
    u_upper = (lower + width - grid.origin[axis]) * inv
    tolerance = cell_tolerance(u_upper)
    return axis_range(n_cells, box, u_lower - tolerance, u_upper + tolerance)


@wp.func
def probe_block(grid: DeviceGrid, probe: Probe):
    """The probe's block of cells ``(first, last)``: its box's, or those within its
    reach of its centre."""
    first = wp.vec3l()
    last = wp.vec3l()
    for axis in range(3):
        if probe.in_box:
            lo, hi = box_axis_range(grid, axis, probe.lower[axis], probe.upper[axis],
                                    probe.width[axis])
        else:
            lo, hi = axis_reach(grid, axis, probe.center[axis], probe.reach)
        first[axis] = lo
        last[axis] = hi
    return first, last


@wp.func
def walk(grid: DeviceGrid, order: wp.array(dtype=Any), probe: Probe,
         radii: wp.array(dtype=wp.float64), position: wp.int64,
         out_indices: wp.array2d(dtype=Any),
         out_distances: wp.array(dtype=wp.float64)) -> wp.int64:
    """Visit the probe's block of cells (see the module docstring), counting or writing
    from ``position``; returns the position after its row."""
    first, last = probe_block(grid, probe)
    first_x = first[0]
    first_y = first[1]
    first_z = first[2]
    last_x = last[0]
    last_y = last[1]
    last_z = last[2]
    volume = block_volume(first, last)
    if volume == wp.float64(0.0):
        return position
    half = wp.vec3d(whole_axis_half(grid, first, last, 0),
                    whole_axis_half(grid, first, last, 1),
                    whole_axis_half(grid, first, last, 2))
    if volume > wp.float64(grid.n_occupied):
        cell = wp.int64(0)
        while cell < grid.n_occupied:
            off_x = occupied_cell_offset(grid, cell, first_x, last_x, 0)
            off_y = occupied_cell_offset(grid, cell, first_y, last_y, 1)
            off_z = occupied_cell_offset(grid, cell, first_z, last_z, 2)
            if off_x <= last_x - first_x and off_y <= last_y - first_y and (
                    off_z <= last_z - first_z):
                shift = wp.vec3d(
                    image_shift(first_x + off_x, grid.n_cells[0], grid.box[0]),
                    image_shift(first_y + off_y, grid.n_cells[1], grid.box[1]),
                    image_shift(first_z + off_z, grid.n_cells[2], grid.box[2]))
                run = wp.vec2l(grid.cell_start[cell], grid.cell_start[cell + wp.int64(1)])
                position = visit_run(grid, order, probe, radii, run, shift, half, position,
                                     out_indices, out_distances)
            cell += wp.int64(1)
        return position
    cz = first_z
    while cz <= last_z:
        wz = wrap_cell(cz, grid.n_cells[2], grid.box[2])
        shift_z = image_shift(cz, grid.n_cells[2], grid.box[2])
        cy = first_y
        while cy <= last_y:
            wy = wrap_cell(cy, grid.n_cells[1], grid.box[1])
            shift_y = image_shift(cy, grid.n_cells[1], grid.box[1])
            x = first_x
            while x <= last_x:
                x_lo, x_hi, periods, x_next = row_segment(x, last_x, grid.n_cells[0],
                                                          grid.box[0])
                run = wp.vec2l(grid.cell_start[first_cell_at(grid, x_lo, wy, wz)],
                               grid.cell_start[first_cell_at(grid, x_hi + wp.int64(1), wy, wz)])
                if run[1] > run[0]:
                    shift_x = wp.float64(0.0)
                    if periods != wp.int64(0):
                        shift_x = wp.float64(periods) * grid.box[0]
                    position = visit_run(grid, order, probe, radii, run,
                                         wp.vec3d(shift_x, shift_y, shift_z), half, position,
                                         out_indices, out_distances)
                x = x_next
            cy += wp.int64(1)
        cz += wp.int64(1)
    return position


@wp.func
def swap(indices: wp.array2d(dtype=Any), distances: wp.array(dtype=wp.float64),
         a: wp.int64, b: wp.int64):
    """Exchange rows ``a`` and ``b`` of a result."""
    index = indices[a, 0]
    indices[a, 0] = indices[b, 0]
    indices[b, 0] = index
    if distances.shape[0] > 0:
        distance = distances[a]
        distances[a] = distances[b]
        distances[b] = distance


@wp.func
def row_before(indices: wp.array2d(dtype=Any), distances: wp.array(dtype=wp.float64),
               a: wp.int64, b: wp.int64, by_distance: wp.bool) -> wp.bool:
    """Whether row ``a`` of a result sorts before row ``b``: by index, or (``by_distance``)
    nearer, or as near with a smaller index."""
    if by_distance:
        return distances[a] < distances[b] or (distances[a] == distances[b]
                                               and indices[a, 0] < indices[b, 0])
    return indices[a, 0] < indices[b, 0]


@wp.func
def sift_down(indices: wp.array2d(dtype=Any), distances: wp.array(dtype=wp.float64),
              start: wp.int64, root: wp.int64, n: wp.int64, by_distance: wp.bool):
    """Restore the max-heap (in `row_before`'s order) of ``start .. start + n - 1`` below
    ``root``."""
    child = wp.int64(2) * root + wp.int64(1)
    while child < n:
        if child + wp.int64(1) < n and row_before(indices, distances, start + child,
                                                  start + child + wp.int64(1), by_distance):
            child += wp.int64(1)
        if not row_before(indices, distances, start + root, start + child, by_distance):
            return
        swap(indices, distances, start + root, start + child)
        root = child
        child = wp.int64(2) * root + wp.int64(1)


@wp.func
def sort_row(indices: wp.array2d(dtype=Any), distances: wp.array(dtype=wp.float64),
             start: wp.int64, end: wp.int64, by_distance: wp.bool):
    """Sort rows ``start .. end - 1`` of a result, ``distances`` alongside, by index or
    (``by_distance``: the ray casts' order, `_kernels/ray.py`) by distance, then index: a
    heap sort, in place and in ``n log n`` for rows of any length. The indices of a row
    are distinct, so the sorted row is unique, whatever the sort."""
    n = end - start
    root = n / wp.int64(2)
    while root > wp.int64(0):
        root -= wp.int64(1)
        sift_down(indices, distances, start, root, n, by_distance)
    last = n - wp.int64(1)
    while last > wp.int64(0):
        swap(indices, distances, start, start + last)
        sift_down(indices, distances, start, wp.int64(0), last, by_distance)
        last -= wp.int64(1)


@wp.func
def count_or_fill_row(grid: DeviceGrid, order: wp.array(dtype=Any), probe: Probe,
                      radii: wp.array(dtype=wp.float64), positions: wp.array(dtype=wp.int64),
                      row: int, sort: wp.bool, out_indices: wp.array2d(dtype=Any),
                      out_distances: wp.array(dtype=wp.float64)):
    """Walk ``probe``'s cells: count its hits into ``positions[row]``, or (``probe.write``)
    write them from ``positions[row]``, sorted by index with ``sort``."""
    start = wp.int64(0)
    if probe.write:
        start = positions[row]
    end = walk(grid, order, probe, radii, start, out_indices, out_distances)
    if not probe.write:
        positions[row] = end
    elif sort:
        sort_row(out_indices, out_distances, start, end, False)


@wp.kernel
def radius_rows(grid: DeviceGrid, order: wp.array(dtype=Any),
                queries: wp.array(dtype=wp.vec3d), query_radii: wp.array(dtype=wp.float64),
                no_radii: wp.array(dtype=wp.float64), write: wp.bool, sort: wp.bool,
                positions: wp.array(dtype=wp.int64), out_indices: wp.array2d(dtype=Any),
                out_distances: wp.array(dtype=wp.float64)):
    """Count (``positions[q]`` receives the row length) or write row ``q`` of a radius
    query from ``positions[q]``, sorted by index with ``sort``. ``no_radii`` is empty."""
    q = wp.tid()
    radius = query_radii[q]
    probe = new_probe(queries[q], wp.int64(-1), radius * radius, wp.float64(0.0), radius,
                      write)
    count_or_fill_row(grid, order, probe, no_radii, positions, q, sort, out_indices,
                      out_distances)


@wp.kernel
def box_rows(grid: DeviceGrid, order: wp.array(dtype=Any), lowers: wp.array(dtype=wp.vec3d),
             uppers: wp.array(dtype=wp.vec3d), widths: wp.array(dtype=wp.vec3d),
             no_floats: wp.array(dtype=wp.float64), write: wp.bool, sort: wp.bool,
             positions: wp.array(dtype=wp.int64), out_indices: wp.array2d(dtype=Any)):
    """Count (``positions[q]`` receives the row length) or write row ``q`` of a box query
    from ``positions[q]``, sorted by index with ``sort``: the points in the closed box
    from ``lowers[q]`` (wrapped into the period) to ``uppers[q]``, ``widths[q]`` apart
    before wrapping. ``no_floats`` is empty: no radii, no distances."""
    q = wp.tid()
    probe = new_probe(lowers[q], wp.int64(-1), wp.float64(0.0), wp.float64(0.0),
                      wp.float64(0.0), write)
    probe.in_box = True
    probe.lower = lowers[q]
    probe.upper = uppers[q]
    probe.width = widths[q]
    count_or_fill_row(grid, order, probe, no_floats, positions, q, sort, out_indices,
                      no_floats)


@wp.kernel
def pair_rows(grid: DeviceGrid, order: wp.array(dtype=Any), radii: wp.array(dtype=wp.float64),
              r2: wp.float64, reach: wp.float64, first: wp.int64, write: wp.bool,
              positions: wp.array(dtype=wp.int64), out_indices: wp.array2d(dtype=Any),
              out_distances: wp.array(dtype=wp.float64)):
    """Count (``positions[row]`` receives it) or write from ``positions[row]`` the pairs of
    sorted point ``s = first + row`` with the points after it within ``r2`` (or, with
    ``radii`` in the sorted order, within the sum of the two radii), in a block of cells
    of ``reach``: a launch over the points ``first`` on (`WarpEngine.iter_pairs` fills
    the points of a few cells at a time)."""
    row = wp.tid()
    s = first + wp.int64(row)
    radius = wp.float64(0.0)
    if radii.shape[0] > 0:
        radius = radii[s]
    probe = new_probe(grid.points[s], s, r2, radius, reach, write)
    count_or_fill_row(grid, order, probe, radii, positions, row, False, out_indices,
                      out_distances)


# The int32 overloads, compiled with the module (see the module docstring).
_INDEX32 = {"order": wp.array(dtype=wp.int32), "out_indices": wp.array2d(dtype=wp.int32)}
wp.overload(radius_rows, _INDEX32)
wp.overload(pair_rows, _INDEX32)
wp.overload(box_rows, _INDEX32)
