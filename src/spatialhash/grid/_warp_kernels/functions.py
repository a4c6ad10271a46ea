"""A user's Warp function called over pairs, over each query's neighbours and over each
ray's hits: the kernels of `WarpEngine.for_each_pair`, `WarpEngine.for_each_neighbor` and
`WarpEngine.query_ray` with ``fn``.

A Warp kernel calls only Warp functions it names in its source, and takes a fixed list of
typed parameters, while ``fn`` is the caller's and comes with any number of arguments. So
each kernel is generated, once for each ``fn`` and number of arguments (`pair_kernel`,
`neighbor_kernel`, `ray_kernel`): a short source, ``fn`` a closure variable, its
arguments parameters typed ``Any``, which Warp specializes at the first launch with each
set of argument types (and index dtype), compiles, and keeps on disk under a name hashed
from the source and ``fn``'s, so that a later process loads it.

The kernels share the walk of ``scan.py`` through `RunWalk`, an iterator of the runs of
sorted points in a probe's block of cells (`first_run`, `next_run`): the same runs, in
the same order, with the same image shifts and the same `displacement` arithmetic (each
axis of ``centre - point - shift`` at its nearest image where the block covers a whole
periodic axis, the squared distance summed x, y, z). The generated part is the loop over
a run's points and the call of ``fn``, which must be in the kernel's own source.

One thread per probe: a point (its full block of cells, every other point within reach)
or a query. A thread makes its calls in the walk's order, so the calls of a row come in
an order fixed by the grid; with ``once`` a point meets only the points after it in the
sorted order, and ``fn``'s writes to row ``j`` come from other threads. A ray's hits are
offered from its row of every hit (``ray.py``'s fill pass, sorted by distance, then
index), the order in which the CPU engine offers them.
"""

from __future__ import annotations

import itertools
import linecache
from typing import Any

import warp as wp

from . import MODULE_OPTIONS
from .cells import (
    DeviceGrid,
    axis_reach,
    block_volume,
    first_cell_at,
    image_shift,
    min_image,
    occupied_cell_offset,
    row_segment,
    whole_axis_half,
    wrap_cell,
)

wp.set_module_options(MODULE_OPTIONS)


@wp.struct
class RunWalk:
    """Where a walk of a block of cells ``first .. last`` stands, and its current run.

    ``by_cell``: the block holds more cells than are occupied, and the walk visits the
    occupied cells in id order (``cell`` the next one); otherwise it visits the block row
    by row of cells, ``(x, cy, cz)`` the next segment of a row. ``done`` once every run
    was visited; else ``run = (start, end)`` is the current run of sorted points and
    ``shift`` its image shift. ``half``: half the period on the axes the block covers
    whole (a minimum image per pair there), ``inf`` elsewhere."""

    first: wp.vec3l
    last: wp.vec3l
    half: wp.vec3d
    by_cell: wp.bool
    cell: wp.int64
    x: wp.int64
    cy: wp.int64
    cz: wp.int64
    done: wp.bool
    run: wp.vec2l
    shift: wp.vec3d


@wp.func
def first_run(grid: DeviceGrid, center: wp.vec3d, reach: wp.float64) -> RunWalk:
    """A walk of the cells within ``reach`` of ``center``, at its first run (`next_run`
    finds it): the block of `scan.probe_block`, `scan.walk`'s choice of a walk."""
    first = wp.vec3l()
    last = wp.vec3l()
    for axis in range(3):
        lo, hi = axis_reach(grid, axis, center[axis], reach)
        first[axis] = lo
        last[axis] = hi
    walk = RunWalk()
    walk.first = first
    walk.last = last
    volume = block_volume(walk.first, walk.last)
    walk.done = volume == wp.float64(0.0)
    walk.half = wp.vec3d(whole_axis_half(grid, walk.first, walk.last, 0),
                         whole_axis_half(grid, walk.first, walk.last, 1),
                         whole_axis_half(grid, walk.first, walk.last, 2))
    walk.by_cell = volume > wp.float64(grid.n_occupied)
    walk.cell = wp.int64(0)
    walk.x = walk.first[0]
    walk.cy = walk.first[1]
    walk.cz = walk.first[2]
    return next_run(grid, walk)


@wp.func
def next_run(grid: DeviceGrid, walk: RunWalk) -> RunWalk:
    """The walk at its next non-empty run, or ``done``: `scan.walk`'s runs in its order."""
    walk.run = wp.vec2l(wp.int64(0), wp.int64(0))
    if walk.done:
        return walk
    first = walk.first
    last = walk.last
    if walk.by_cell:
        while walk.cell < grid.n_occupied:
            cell = walk.cell
            walk.cell = cell + wp.int64(1)
            off_x = occupied_cell_offset(grid, cell, first[0], last[0], 0)
            off_y = occupied_cell_offset(grid, cell, first[1], last[1], 1)
            off_z = occupied_cell_offset(grid, cell, first[2], last[2], 2)
            if off_x <= last[0] - first[0] and off_y <= last[1] - first[1] and (
                    off_z <= last[2] - first[2]):
                walk.shift = wp.vec3d(
                    image_shift(first[0] + off_x, grid.n_cells[0], grid.box[0]),
                    image_shift(first[1] + off_y, grid.n_cells[1], grid.box[1]),
                    image_shift(first[2] + off_z, grid.n_cells[2], grid.box[2]))
                walk.run = wp.vec2l(grid.cell_start[cell], grid.cell_start[cell + wp.int64(1)])
                # `scan.walk` visits empty cells too, to no effect.
                if walk.run[1] > walk.run[0]:
                    return walk
        walk.done = True
        return walk
    while walk.cz <= last[2]:
        wz = wrap_cell(walk.cz, grid.n_cells[2], grid.box[2])
        wy = wrap_cell(walk.cy, grid.n_cells[1], grid.box[1])
        x_lo, x_hi, periods, x_next = row_segment(walk.x, last[0], grid.n_cells[0],
                                                  grid.box[0])
        run = wp.vec2l(grid.cell_start[first_cell_at(grid, x_lo, wy, wz)],
                       grid.cell_start[first_cell_at(grid, x_hi + wp.int64(1), wy, wz)])
        shift_x = wp.float64(0.0)
        if periods != wp.int64(0):
            shift_x = wp.float64(periods) * grid.box[0]
        shift = wp.vec3d(shift_x, image_shift(walk.cy, grid.n_cells[1], grid.box[1]),
                         image_shift(walk.cz, grid.n_cells[2], grid.box[2]))
        # Step past this segment: the next one of the row, or the next row.
        walk.x = x_next
        if walk.x > last[0]:
            walk.x = first[0]
            walk.cy = walk.cy + wp.int64(1)
            if walk.cy > last[1]:
                walk.cy = first[1]
                walk.cz = walk.cz + wp.int64(1)
        if run[1] > run[0]:
            walk.run = run
            walk.shift = shift
            return walk
    walk.done = True
    return walk


@wp.func
def displacement(a: wp.vec3d, b: wp.vec3d, shift: wp.vec3d, grid: DeviceGrid,
                 half: wp.vec3d) -> wp.vec3d:
    """``a - b - shift``, each axis at its nearest image where ``half`` is finite: the
    arithmetic of `cells.displacement_d2`, whose squared length this is."""
    return wp.vec3d(min_image((a[0] - b[0]) - shift[0], grid.box[0], half[0]),
                    min_image((a[1] - b[1]) - shift[1], grid.box[1], half[1]),
                    min_image((a[2] - b[2]) - shift[2], grid.box[2], half[2]))


#: The kernel of `pair_kernel`: thread ``s`` walks the block of sorted point ``s`` and
#: calls ``fn`` for each other point within reach (with ``once``, each point after it).
_PAIR_SOURCE = '''
def make_kernel(fn):
    def pair_calls(grid: DeviceGrid, order: wp.array(dtype=Any),
                   radii: wp.array(dtype=wp.float64), r2: wp.float64, reach: wp.float64,
                   once: wp.bool{params}):
{again}
        s = wp.int64(wp.tid())
        center = grid.points[s]
        i = wp.int64(order[s])
        with_radii = radii.shape[0] > 0
        radius = wp.float64(0.0)
        if with_radii:
            radius = radii[s]
        walk = first_run(grid, center, reach)
        while not walk.done:
            t = walk.run[0]
            if once:
                t = wp.max(t, s + wp.int64(1))
            while t < walk.run[1]:
                if t != s:
                    d = displacement(center, grid.points[t], walk.shift, grid, walk.half)
                    d2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
                    limit2 = r2
                    if with_radii:
                        limit = radius + radii[t]
                        limit2 = limit * limit
                    if d2 <= limit2:
                        fn(i, wp.int64(order[t]), d2, d[0], d[1], d[2]{args})
                t += wp.int64(1)
            walk = next_run(grid, walk)
    return pair_calls
'''

#: The kernel of `neighbor_kernel`: thread ``q`` walks the block of query ``q`` and calls
#: ``fn`` for each point within its radius.
_NEIGHBOR_SOURCE = '''
def make_kernel(fn):
    def neighbor_calls(grid: DeviceGrid, order: wp.array(dtype=Any),
                       queries: wp.array(dtype=wp.vec3d),
                       query_radii: wp.array(dtype=wp.float64){params}):
{again}
        q = wp.tid()
        center = queries[q]
        radius = query_radii[q]
        r2 = radius * radius
        walk = first_run(grid, center, radius)
        while not walk.done:
            t = walk.run[0]
            while t < walk.run[1]:
                d = displacement(center, grid.points[t], walk.shift, grid, walk.half)
                d2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
                if d2 <= r2:
                    fn(wp.int64(q), wp.int64(order[t]), d2, d[0], d[1], d[2]{args})
                t += wp.int64(1)
            walk = next_run(grid, walk)
    return neighbor_calls
'''

#: The kernel of `ray_kernel`: thread ``q`` offers ``fn`` the hits of ray ``q``'s row of
#: every hit (sorted by distance, then index) until ``fn`` accepts one, and writes it.
_RAY_SOURCE = '''
def make_kernel(fn):
    def ray_choices(indptr: wp.array(dtype=wp.int64), indices: wp.array2d(dtype=Any),
                    distances: wp.array(dtype=wp.float64), out_indices: wp.array2d(dtype=Any),
                    out_distances: wp.array(dtype=wp.float64){params}):
{again}
        q = wp.tid()
        k = indptr[q]
        end = indptr[q + 1]
        accepted = wp.bool(False)
        while k < end:
            # Assigned to a bool: a number returned does not compile.
            accepted = fn(wp.int64(q), wp.int64(indices[k, 0]), distances[k]{args})
            if accepted:
                out_indices[q, 0] = indices[k, 0]
                out_distances[q] = distances[k]
                k = end
            k += wp.int64(1)
    return ray_choices
'''

#: The kernels made so far, by (source, fn, number of arguments): Warp's kernel objects,
#: generic in the arguments' types, whose overloads Warp adds and keeps.
_KERNELS: dict = {}
#: Kernels dropped by `forget`, by the same key: each is made again in a module of its own.
_GENERATIONS: dict = {}
_SERIAL = itertools.count()


def pair_kernel(fn, n_args: int):
    """The kernel calling ``fn(i, j, d2, dx, dy, dz, *args)`` for the pairs of a grid,
    launched over its sorted points with ``(grid, order, radii, r2, reach, once, *args)``."""
    return _kernel(_PAIR_SOURCE, fn, n_args)


def neighbor_kernel(fn, n_args: int):
    """The kernel calling ``fn(q, j, d2, dx, dy, dz, *args)`` for each query's neighbours,
    launched over the queries with ``(grid, order, queries, query_radii, *args)``."""
    return _kernel(_NEIGHBOR_SOURCE, fn, n_args)


def ray_kernel(fn, n_args: int):
    """The kernel calling ``fn(ray, index, distance, *args)`` for the hits of each ray in
    order until it returns True, launched over the rays with ``(indptr, indices,
    distances, out_indices, out_distances, *args)``: the rows of every hit in, the first
    accepted hit out (rows of no accepted hit left as they are)."""
    return _kernel(_RAY_SOURCE, fn, n_args)


def forget(kernel) -> None:
    """Drop ``kernel``, whose module failed to build: Warp keeps an overload that does not
    compile in the kernel's module, which then fails every launch, so the next call makes
    the kernel again, in a new module (a comment in its source numbers it)."""
    for key, known in list(_KERNELS.items()):
        if known is kernel:
            del _KERNELS[key]
            _GENERATIONS[key] = _GENERATIONS.get(key, 0) + 1


def _kernel(template: str, fn, n_args: int):
    key = (template, fn, n_args)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _generate(template, fn, n_args, _GENERATIONS.get(key, 0))
    return kernel


def _generate(template: str, fn, n_args: int, generation: int):
    """Compile ``template`` for ``fn`` and ``n_args`` arguments into a Warp kernel in a
    module of its own (Warp names it from a hash of the source and ``fn``, so that equal
    kernels share one compile and its disk cache)."""
    # A kernel made again has its own source, hence its own module (see `forget`).
    again = f"        # made again ({generation}) after a failed build" if generation else ""
    source = template.format(params="".join(f", arg{k}: Any" for k in range(n_args)),
                             args="".join(f", arg{k}" for k in range(n_args)), again=again)
    # Warp reads a kernel's source through `linecache`: a file name in angle brackets
    # keeps it there rather than on disk.
    filename = f"<spatialhash user function kernel {next(_SERIAL)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"wp": wp, "Any": Any, "DeviceGrid": DeviceGrid, "first_run": first_run,
                 "next_run": next_run, "displacement": displacement}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 (our own template)
    return wp.kernel(namespace["make_kernel"](fn), module="unique",
                     module_options=dict(MODULE_OPTIONS))
