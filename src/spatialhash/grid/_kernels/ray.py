"""Ray casts against the grid's points taken as spheres (circles in 2-D): first hit or all.

A ray ``origin + t * unit`` (unit direction, so ``t`` is a length) walks the cells with the
DDA of `dda.py`. A sphere centred in one cell can be hit while the ray is in another, so at
each cell the spheres centred within ``k`` cells of it are tested, with
``k = ceil(max_radius / cell_size + tolerance)`` (the tolerance covers rounding near faces,
see `dda.py`). Consecutive cells differ by one step on one axis, so only the new slab of that
neighbourhood is scanned at each step: the cells of the ray's path are monotone per axis, so
a cell enters the neighbourhood once and leaves it once, and every sphere is tested exactly
once per ray.

The ray is first clipped to the cells that can hold a hit point (the occupied box of cells
widened by ``k``) and stops once it has left it. A ray whose walk would look up more cells
than there are points (a long ray through a sparse, hashed grid) or whose reach spans the
whole grid tests every sphere instead, in one run: same answers, bounded cost.

Ray-sphere arithmetic: `ray_sphere.sphere_entry`, the oracle's (`tests/ray_oracles.py`).

First hit: the best ``(t, index)`` so far is final once ``t <= t_exit`` of the current cell:
every hit point before it lies in a cell already visited (up to the tolerance), whose
spheres have been tested. All hits: every sphere met along the clipped ray, each once; rows
are sorted by ``t``, then by index.

One walk, two kernels. `cast_kernel` is the walk (clipping, slabs, sphere tests) and
takes as a constant whether a user's function consumes the hits, so numba prunes the
other's branches: `cast_rays` keeps the best hit, or counts or writes every hit
(``mode``, at run time: the first-hit, count and fill passes share one cached kernel,
which compiles once; a kernel per consumer took as long to compile each), and the kernel
of ``grid/_kernels/ray_functions.py`` offers the hits to a user's function (see that
module). Both take ``(state, params, lo, hi, fn, args)``; `cast_rays` takes ``fn=None``
and ``args=()``, and its parallel driver calls it through its address (`indirect`). Rays
are split into fixed chunks and each writes only its own outputs, so results are the same
for any thread count.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..._config import jit, jit_inline, jit_parallel, jit_variant
from ..._kernels.cells import cell_tolerance, sparse_row_slice
from ..._kernels.dda import clip_to_cells, dda_start, leave_parameter, next_axis, ray_to_cells
from ..._kernels.indirect import kernel_caller
from ..._kernels.ray_functions import HEAP_ROOM, add_hit, new_hits, take_hit
from ..._kernels.ray_sphere import sphere_entry

#: Rays handed to a thread at a time.
RAYS_PER_CHUNK = 64
#: What `cast_rays` computes (``mode``, at run time): the first hit, the number of hits,
#: the hits.
MODE_FIRST = 0
MODE_COUNT = 1
MODE_FILL = 2
#: Rows longer than this are sorted with a merge sort rather than an insertion sort.
INSERTION_SORT_MAX = 64
#: A ray walks the cells while its walk would look up at most this many cells per point
#: (steps times cells per step); beyond, testing every sphere costs less. The public layer
#: passes ``WALK_COST_PER_POINT * n_points`` as ``walk_limit``; tests set it to 0 or ``inf``
#: to check both paths.
WALK_COST_PER_POINT = 1.0


@jit
def reach_cells(max_radius, inv_cell_size, u_start, n_cells):
    """``(reach, k)``: the reach in cell units of a ray starting at ``u_start`` (the
    largest radius plus a rounding tolerance), and the neighbourhood half-width
    ``k = ceil(reach) >= 1`` in whole cells, capped at one more than the grid is wide (no
    walk then: every sphere is a candidate)."""
    inv = max(inv_cell_size[0], max(inv_cell_size[1], inv_cell_size[2]))
    reach = max_radius * inv
    largest = max(n_cells[0], max(n_cells[1], n_cells[2]))
    magnitude = max(abs(u_start[0]), max(abs(u_start[1]), abs(u_start[2])))
    reach += cell_tolerance(magnitude + largest + reach + 2.0)
    if reach >= largest + 1.0:
        return reach, largest + 1
    return reach, max(np.int64(math.ceil(reach)), 1)


@jit
def sort_hits(indices, distances, start, end):
    """Sort ``[start, end)`` of a row by distance, then by index (``indices`` alongside)."""
    if end - start <= INSERTION_SORT_MAX:
        for i in range(start + 1, end):
            index = indices[i]
            distance = distances[i]
            j = i - 1
            while j >= start and (distances[j] > distance
                                  or (distances[j] == distance and indices[j] > index)):
                indices[j + 1] = indices[j]
                distances[j + 1] = distances[j]
                j -= 1
            indices[j + 1] = index
            distances[j + 1] = distance
        return
    # Stable sorts: by index, then by distance.
    by_index = np.argsort(indices[start:end], kind="mergesort")
    row_distances = distances[start:end][by_index]
    by_distance = by_index[np.argsort(row_distances, kind="mergesort")]
    sorted_indices = indices[start:end][by_distance]
    sorted_distances = distances[start:end][by_distance]
    for t in range(end - start):  # not slice assignment: see `pairs.grown_outputs`
        indices[start + t] = sorted_indices[t]
        distances[start + t] = sorted_distances[t]


@jit
def walk_buffers():
    """The arrays `walk_start` fills: the ray in cell units (``u_start``, ``u_rate``), the
    start of its DDA (``cell``, ``step``, ``t_next``) and the clipping box."""
    return (np.empty(3), np.empty(3), np.empty(3, np.int64), np.empty(3, np.int64),
            np.empty(3), np.empty(3), np.empty(3))


@jit
def walk_start(state, max_radius, walk_limit, origin, unit, t_end, buffers):
    """How the ray ``origin + t * unit``, ``0 <= t <= t_end``, meets the grid's spheres:
    ``(missed, walk, k, t_lo, t_hi, at, ray)``.

    ``missed``: no sphere can be hit (the ray misses the occupied cells widened by ``k``,
    or there are no points). ``walk``: the ray walks the cells of ``[t_lo, t_hi]`` (else
    it tests every sphere, in one run: see `WALK_COST_PER_POINT`), its first cell's
    neighbourhood in ``at``, the walk's position (`walk_step`); ``ray`` is the ray in cell
    units, ``u(t) = u_start + t * u_rate`` (``u_start`` then ``u_rate``, per axis)."""
    u_start, u_rate, cell, step, t_next, box_lower, box_upper = buffers
    n_cells = state.n_cells
    n_x, n_y, n_z = n_cells[0], n_cells[1], n_cells[2]
    ray_to_cells(origin, unit, state.origin, state.inv_cell_size, u_start, u_rate)
    reach, k = reach_cells(max_radius, state.inv_cell_size, u_start, n_cells)
    for axis in range(3):
        box_lower[axis] = -reach
        box_upper[axis] = n_cells[axis] + reach
    t_lo, t_hi = clip_to_cells(u_start, u_rate, box_lower, box_upper, 0.0, t_end)
    missed = t_lo > t_hi or state.order.shape[0] == 0
    # Steps the walk would take, times the cells each step looks up: past `walk_limit`
    # (a long ray through a sparse grid), testing every sphere is cheaper.
    n_steps = 1.0
    if not missed and t_hi < np.inf:
        for axis in range(3):
            n_steps += abs(u_rate[axis]) * (t_hi - t_lo) + 1.0
    # A reach past the whole grid (huge spheres, or an origin so far away that rounding
    # blurs its cell): every sphere is a candidate from every cell, so no walk.
    walk = (not missed and k <= max(n_x, max(n_y, n_z))
            and n_steps * (2 * k + 1) * (2 * k + 1) <= walk_limit)
    zero = np.int64(0)
    at = (zero, zero, zero, zero, zero, zero, 0.0, 0.0, 0.0, zero, zero, zero, zero, zero,
          zero)
    if walk:
        dda_start(u_start, u_rate, t_lo, cell, step, t_next)
        cx, cy, cz = cell[0], cell[1], cell[2]
        at = (cx, cy, cz, step[0], step[1], step[2], t_next[0], t_next[1], t_next[2],
              cx - k, cx + k, cy - k, cy + k, cz - k, cz + k)
    ray = (u_start[0], u_start[1], u_start[2], u_rate[0], u_rate[1], u_rate[2])
    return missed, walk, k, t_lo, t_hi, at, ray


@jit_inline
def slab_cells(at, shape, walk):
    """``(x_lo, x_hi, y_lo, y_hi, z_lo, z_hi)``: the cells of the walk's new slab (those
    that entered its neighbourhood) clipped to the grid; not walking, the one run of
    every point (`row_points`). Empty when ``x_lo > x_hi``."""
    if not walk:
        zero = np.int64(0)
        return zero, zero, zero, zero, zero, zero
    x_first, x_last, y_first, y_last, z_first, z_last = at[9:]
    n_x, n_y, n_z = shape
    return (max(x_first, 0), min(x_last, n_x - 1), max(y_first, 0), min(y_last, n_y - 1),
            max(z_first, 0), min(z_last, n_z - 1))


@jit
def row_points(walk, n_points, shape, cells, row_y, row_z, x_lo, x_hi):
    """``(start, end)``: the sorted points of cells ``x_lo .. x_hi`` of row ``(row_y,
    row_z)`` of the grid; not walking, every point. ``cells`` is ``(dense_start,
    hash_keys, hash_ids, cell_start, cell_coords)`` of the grid state. A call of its own:
    inlined into the kernels by numba (`jit_inline`), it made the all-hits casts 1.9 times
    as slow (one thread, old and new code in alternating processes)."""
    if not walk:
        return np.int64(0), n_points
    dense_start, hash_keys, hash_ids, cell_start, cell_coords = cells
    if dense_start.shape[0] > 0:
        base = (row_z * shape[1] + row_y) * shape[0]
        return dense_start[base + x_lo], dense_start[base + x_hi + 1]
    return sparse_row_slice(hash_keys, hash_ids, cell_start, cell_coords, x_lo, x_hi, row_y,
                            row_z)


@jit_inline
def walk_exit(at, t_enter, t_hi):
    """Where the ray leaves the walk's cell, within ``[t_enter, t_hi]`` (`dda.dda_exit`)."""
    return min(max(min(at[6], min(at[7], at[8])), t_enter), t_hi)


@jit_inline
def walk_step(at, k, shape, ray, t_exit):
    """``(at, ended)``: the walk moved to the next cell (`dda.dda_step`) and its new slab,
    one layer of cells on the axis stepped; ``ended`` once past the grid (plus the reach
    ``k``) along that axis, where no sphere is left to meet. The walk is kept in tuples of
    scalars, and this helper inlined: helpers passing arrays cost reference-count updates
    on every step (the count pass took 1.5 times as long a ray, 1e6 spheres)."""
    cx, cy, cz, sx, sy, sz, tnx, tny, tnz = at[:9]
    n_x, n_y, n_z = shape
    ux, uy, uz, rx, ry, rz = ray
    axis = next_axis(tnx, tny, tnz)
    if axis == 0:
        cx += sx
        tnx = leave_parameter(ux, rx, cx, sx, t_exit)
        ended = (cx - k >= n_x) if sx > 0 else (cx + k < 0)
        slab = (cx + sx * k, cx + sx * k, cy - k, cy + k, cz - k, cz + k)
    elif axis == 1:
        cy += sy
        tny = leave_parameter(uy, ry, cy, sy, t_exit)
        ended = (cy - k >= n_y) if sy > 0 else (cy + k < 0)
        slab = (cx - k, cx + k, cy + sy * k, cy + sy * k, cz - k, cz + k)
    else:
        cz += sz
        tnz = leave_parameter(uz, rz, cz, sz, t_exit)
        ended = (cz - k >= n_z) if sz > 0 else (cz + k < 0)
        slab = (cx - k, cx + k, cy - k, cy + k, cz + sz * k, cz + sz * k)
    return (cx, cy, cz, sx, sy, sz, tnx, tny, tnz) + slab, ended


def cast_kernel(with_fn):
    """The cast of rays ``visit_order[lo:hi]`` on the calling thread: without ``with_fn``
    (a constant of each compiled kernel), `cast_rays`, whose ``mode`` (at run time) keeps
    the first hit or counts or writes every hit; with it, the first hit a user's function
    accepts.

    ``params`` starts with ``(radii, max_radius, walk_limit, origins, units, max_distance,
    visit_order, out_indices, out_distances)``: ``radii`` follow the sorted points; see
    `WALK_COST_PER_POINT` for ``walk_limit``. Without ``with_fn`` it has two more,
    ``(positions, mode)``: `MODE_FIRST` writes ``out_indices[q]`` and ``out_distances[q]``
    (-1 and ``inf`` for a miss); `MODE_COUNT` counts the hits of ray ``q`` into
    ``positions[q]``; `MODE_FILL` writes them from ``positions[q]`` on, sorted by
    distance, then index. With ``with_fn``, the first hit that ``fn(q, index, distance,
    *args)`` accepts is written as `MODE_FIRST` writes the first hit (``fn`` and ``args``
    are unused otherwise).

    The walk is that of `walk_start`, `slab_cells`, `row_points` and `walk_step`. The
    consumers differ in what a hit does (keep the best, count or write, push on a heap)
    and in when the walk stops: the first hit once the best hit lies before the current
    cell's exit, the user's function once it accepts a hit it is offered, every hit at the
    end of the ray. With ``fn``, the hits found wait in a heap
    (``spatialhash/_kernels/ray_functions.py``) and, once a cell's slab has been tested,
    those at distances ``<= t_exit`` are offered, nearest first (the rule by which the
    first hit is taken as final: see the module docstring); at the end of the walk the
    rest.
    """

    def cast(state, params, lo, hi, fn, args):
        (radii, max_radius, walk_limit, origins, units, max_distance, visit_order, out_indices,
         out_distances) = params[:9]
        points, order, n_cells = state.points, state.order, state.n_cells
        cells = (state.dense_start, state.hash_keys, state.hash_ids, state.cell_start,
                 state.cell_coords)
        n_points = np.int64(order.shape[0])
        shape = (n_cells[0], n_cells[1], n_cells[2])
        buffers = walk_buffers()
        if with_fn:
            heap = new_hits(HEAP_ROOM)
            first_only = write = False
        else:
            positions, mode = params[9], params[10]
            first_only = mode == MODE_FIRST
            write = mode == MODE_FILL
        for t in range(lo, hi):
            q = visit_order[t]
            ox, oy, oz = origins[q, 0], origins[q, 1], origins[q, 2]
            dx, dy, dz = units[q, 0], units[q, 1], units[q, 2]
            t_end = max_distance[q]
            best_t = np.inf
            best_index = -1
            if with_fn:
                n_pending = 0
            else:
                row_start = positions[q] if write else 0
                position = row_start
            missed, walk, k, t_lo, t_hi, at, ray = walk_start(
                state, max_radius, walk_limit, origins[q], units[q], t_end, buffers)
            t_enter = t_exit = t_lo
            while not missed:
                x_lo, x_hi, y_lo, y_hi, z_lo, z_hi = slab_cells(at, shape, walk)
                if x_lo <= x_hi:
                    for row_z in range(z_lo, z_hi + 1):
                        for row_y in range(y_lo, y_hi + 1):
                            start, end = row_points(walk, n_points, shape, cells, row_y, row_z,
                                                    x_lo, x_hi)
                            # Unsigned bounds: see `cells` (no wrap-around checks on loads).
                            for j in range(np.uint64(start), np.uint64(end)):
                                hit_t = sphere_entry(ox - points[0, j], oy - points[1, j],
                                                     oz - points[2, j], dx, dy, dz, radii[j])
                                if not (hit_t >= 0.0 and hit_t <= t_end):
                                    continue
                                if with_fn:
                                    index = np.int64(order[j])
                                    heap, n_pending = add_hit(heap, n_pending, hit_t, index,
                                                              index)
                                elif first_only:
                                    index = order[j]
                                    if hit_t < best_t or (hit_t == best_t
                                                          and index < best_index):
                                        best_t = hit_t
                                        best_index = index
                                else:
                                    if write:
                                        out_indices[position] = order[j]
                                        out_distances[position] = hit_t
                                    position += 1
                ended = not walk
                if walk:
                    t_exit = walk_exit(at, t_enter, t_hi)
                    ended = t_exit >= t_hi or (first_only and best_t <= t_exit)
                    if not ended:
                        t_enter = t_exit
                        at, ended = walk_step(at, k, shape, ray, t_exit)
                if with_fn:
                    # Every hit up to t_exit is found (all of them at the end): offer
                    # those, nearest first.
                    limit = np.inf if ended else t_exit
                    while n_pending > 0 and heap[0][0] <= limit:
                        n_pending, hit_t, index, _ = take_hit(heap, n_pending)
                        if fn(np.int64(q), index, hit_t, *args):
                            best_t, best_index = hit_t, index
                            ended = True
                            break
                if ended:
                    break
            if first_only or with_fn:
                out_indices[q] = best_index
                out_distances[q] = best_t
            elif write:
                sort_hits(out_indices, out_distances, row_start, position)
            else:
                positions[q] = position

    return cast


#: The casts without a user's function, one kernel for the three modes (compiled once).
cast_rays = jit_variant(cast_kernel(with_fn=False), "cast_rays")
_check_cast_rays, _call_cast_rays = kernel_caller(cast_rays)


@jit_parallel
def cast_rays_parallel(state, params, n_rays, kernel):
    """`cast_rays`, called at ``kernel`` (see `indirect`), over all ``n_rays`` rays, in
    chunks of `RAYS_PER_CHUNK` spread over the threads."""
    _check_cast_rays(kernel, (state, params, n_rays, n_rays, None, ()))
    n_chunks = (n_rays + RAYS_PER_CHUNK - 1) // RAYS_PER_CHUNK
    for chunk in prange(n_chunks):
        r_lo = chunk * RAYS_PER_CHUNK
        _call_cast_rays(kernel, (state, params, r_lo, min(n_rays, r_lo + RAYS_PER_CHUNK), None,
                                 ()))
