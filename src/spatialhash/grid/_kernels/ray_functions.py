"""Rays whose hits are offered, nearest first, to a user's compiled function:
`Grid.query_ray` with ``fn``. The first hit ``fn`` accepts is the ray's answer.

`ray_function_rays` casts rays ``visit_order[lo:hi]`` with the walk of `ray.cast_rays`:
the same clipping, the same neighbourhood slabs, the same test of each sphere (the
arithmetic of `sphere_entry` is `cast_rays`'s, operation for operation), so a ray finds
the same hits at the same distances. Instead of keeping the best, it keeps every hit found
in a heap (``spatialhash/_kernels/ray_functions.py``) and, once the slab of a cell has
been tested, offers ``fn`` the heap's hits at distances ``<= t_exit`` of that cell,
nearest first, ties by the smaller index. That is the rule by which `cast_rays` takes its
best hit as final: every hit point before ``t_exit`` lies in a cell already visited (up to
the tolerance of the reach), whose neighbourhood's spheres have been tested, so no hit
still to be found comes first. ``fn`` returning True ends the ray's walk; hits beyond
``t_exit`` wait for later cells; at the end of the walk (or of the one run over every
sphere, for a ray that does not walk) the remaining hits are offered in order. So ``fn``
sees a prefix of the ray's `all_hits` row, in that row's order, and the ray's answer is
the first hit of that row ``fn`` accepts.

Threads, errors and compiling are those of `pair_functions`, whose factories make the
guard and the parallel driver here: rays in chunks of `RAYS_PER_CHUNK`, each ray cast by
one thread, ``fn`` called for its hits in the same order for any thread count; compiled
anew for each ``fn``, never cached on disk.
"""

from __future__ import annotations

import math

import numpy as np

from ..._config import jit
from ..._kernels.cells import sparse_row_slice
from ..._kernels.dda import clip_to_cells, dda_start, leave_parameter, next_axis, ray_to_cells
from ..._kernels.ray_functions import HEAP_ROOM, grown_hits, new_hits, pop_hit, push_hit
from .pair_functions import compiled_scans
from .ray import point_on_ray, reach_cells

#: Rays handed to a thread at a time.
RAYS_PER_CHUNK = 64


@jit
def sphere_entry(mx, my, mz, dx, dy, dz, radius):
    """Where the ray enters the sphere (``m = origin - centre``, ``d`` the unit direction),
    or -1.0 when it misses: the arithmetic of `ray.cast_rays` (see `ray`'s docstring)."""
    c = (mx * mx + my * my + mz * mz) - radius * radius
    if c <= 0.0:
        return 0.0
    # Negated tests: NaN (overflowed squares) misses.
    b = mx * dx + my * dy + mz * dz
    if not b < 0.0:
        return -1.0
    if radius == 0.0:
        hit_t = point_on_ray(mx, my, mz, dx, dy, dz)
        return hit_t if hit_t >= 0.0 else -1.0
    qx = mx - b * dx
    qy = my - b * dy
    qz = mz - b * dz
    disc = radius * radius - (qx * qx + qy * qy + qz * qz)
    if not disc >= 0.0:
        return -1.0
    return c / (math.sqrt(disc) - b)


def ray_function_rays(state, params, lo, hi, fn, args):
    """Cast rays ``visit_order[lo:hi]``, writing for each ray ``q`` the first hit ``fn``
    accepts to ``out_indices[q]`` and ``out_distances[q]`` (-1 and ``inf`` for none).

    ``params`` is ``(radii, max_radius, walk_limit, origins, units, max_distance,
    visit_order, out_indices, out_distances)``, the first seven as `ray.cast_rays` takes
    them. ``fn(q, index, distance, *args)`` with ``q`` and ``index`` int64.
    """
    (radii, max_radius, walk_limit, origins, units, max_distance, visit_order, out_indices,
     out_distances) = params
    points, order, cell_start = state.points, state.order, state.cell_start
    n_cells, dense_start = state.n_cells, state.dense_start
    hash_keys, hash_ids, cell_coords = state.hash_keys, state.hash_ids, state.cell_coords
    grid_origin, inv_cell_size = state.origin, state.inv_cell_size
    n_x, n_y, n_z = n_cells[0], n_cells[1], n_cells[2]
    dense = dense_start.shape[0] > 0
    n_points = order.shape[0]
    u_start = np.empty(3)
    u_rate = np.empty(3)
    cell = np.empty(3, np.int64)
    step = np.empty(3, np.int64)
    t_next = np.empty(3)
    box_lower = np.empty(3)
    box_upper = np.empty(3)
    heap_t, heap_key, heap_item = new_hits(HEAP_ROOM)
    for t in range(lo, hi):
        q = visit_order[t]
        ray = np.int64(q)
        ox, oy, oz = origins[q, 0], origins[q, 1], origins[q, 2]
        dx, dy, dz = units[q, 0], units[q, 1], units[q, 2]
        t_end = max_distance[q]
        n_pending = 0
        accepted = False
        answer_t = np.inf
        answer_index = np.int64(-1)
        ray_to_cells(origins[q], units[q], grid_origin, inv_cell_size, u_start, u_rate)
        reach, k = reach_cells(max_radius, inv_cell_size, u_start, n_cells)
        for axis in range(3):
            box_lower[axis] = -reach
            box_upper[axis] = n_cells[axis] + reach
        t_lo, t_hi = clip_to_cells(u_start, u_rate, box_lower, box_upper, 0.0, t_end)
        missed = t_lo > t_hi or n_points == 0
        # Walk or test every sphere: `cast_rays`'s choice, made the same way.
        n_steps = 1.0
        if not missed and t_hi < np.inf:
            for axis in range(3):
                n_steps += abs(u_rate[axis]) * (t_hi - t_lo) + 1.0
        walk = (not missed and k <= max(n_x, max(n_y, n_z))
                and n_steps * (2 * k + 1) * (2 * k + 1) <= walk_limit)
        cx = cy = cz = sx = sy = sz = np.int64(0)
        tnx = tny = tnz = 0.0
        x_first = x_last = y_first = y_last = z_first = z_last = np.int64(0)
        if walk:
            dda_start(u_start, u_rate, t_lo, cell, step, t_next)
            cx, cy, cz = cell[0], cell[1], cell[2]
            sx, sy, sz = step[0], step[1], step[2]
            tnx, tny, tnz = t_next[0], t_next[1], t_next[2]
            x_first, x_last = cx - k, cx + k
            y_first, y_last = cy - k, cy + k
            z_first, z_last = cz - k, cz + k
        ux, uy, uz = u_start[0], u_start[1], u_start[2]
        rx, ry, rz = u_rate[0], u_rate[1], u_rate[2]
        t_enter = t_lo
        while not missed:
            x_lo, x_hi = max(x_first, 0), min(x_last, n_x - 1)
            y_lo, y_hi = max(y_first, 0), min(y_last, n_y - 1)
            z_lo, z_hi = max(z_first, 0), min(z_last, n_z - 1)
            if not walk:
                x_lo = x_hi = y_lo = y_hi = z_lo = z_hi = 0
            if x_lo <= x_hi:
                for row_z in range(z_lo, z_hi + 1):
                    for row_y in range(y_lo, y_hi + 1):
                        if not walk:
                            start, end = 0, n_points
                        elif dense:
                            base = (row_z * n_y + row_y) * n_x
                            start, end = dense_start[base + x_lo], dense_start[base + x_hi + 1]
                        else:
                            start, end = sparse_row_slice(hash_keys, hash_ids, cell_start,
                                                          cell_coords, x_lo, x_hi, row_y,
                                                          row_z)
                        for j in range(np.uint64(start), np.uint64(end)):
                            hit_t = sphere_entry(ox - points[0, j], oy - points[1, j],
                                                 oz - points[2, j], dx, dy, dz, radii[j])
                            if not (hit_t >= 0.0 and hit_t <= t_end):
                                continue
                            if n_pending == heap_t.shape[0]:
                                heap_t, heap_key, heap_item = grown_hits(heap_t, heap_key,
                                                                         heap_item)
                            index = np.int64(order[j])
                            n_pending = push_hit(heap_t, heap_key, heap_item, n_pending, hit_t,
                                                 index, index)
            if not walk:
                break
            t_exit = min(max(min(tnx, min(tny, tnz)), t_enter), t_hi)  # `dda.dda_exit`
            # Every hit up to t_exit is found: offer those, nearest first.
            while n_pending > 0 and heap_t[0] <= t_exit:
                hit_t, index = heap_t[0], heap_key[0]
                n_pending = pop_hit(heap_t, heap_key, heap_item, n_pending)
                if fn(ray, index, hit_t, *args):
                    accepted = True
                    answer_t, answer_index = hit_t, index
                    break
            if accepted or t_exit >= t_hi:
                break
            # `cast_rays`'s step to the next cell and its new slab.
            t_enter = t_exit
            axis = next_axis(tnx, tny, tnz)
            if axis == 0:
                cx += sx
                tnx = leave_parameter(ux, rx, cx, sx, t_exit)
                if (cx - k >= n_x) if sx > 0 else (cx + k < 0):
                    break
                x_first = x_last = cx + sx * k
                y_first, y_last = cy - k, cy + k
                z_first, z_last = cz - k, cz + k
            elif axis == 1:
                cy += sy
                tny = leave_parameter(uy, ry, cy, sy, t_exit)
                if (cy - k >= n_y) if sy > 0 else (cy + k < 0):
                    break
                y_first = y_last = cy + sy * k
                x_first, x_last = cx - k, cx + k
                z_first, z_last = cz - k, cz + k
            else:
                cz += sz
                tnz = leave_parameter(uz, rz, cz, sz, t_exit)
                if (cz - k >= n_z) if sz > 0 else (cz + k < 0):
                    break
                z_first = z_last = cz + sz * k
                x_first, x_last = cx - k, cx + k
                y_first, y_last = cy - k, cy + k
        # The walk is over: every hit is found; the rest in order.
        while not accepted and n_pending > 0:
            hit_t, index = heap_t[0], heap_key[0]
            n_pending = pop_hit(heap_t, heap_key, heap_item, n_pending)
            if fn(ray, index, hit_t, *args):
                accepted = True
                answer_t, answer_index = hit_t, index
        out_indices[q] = answer_index
        out_distances[q] = answer_t


#: (sequential scan, guarded scan, parallel driver over chunks of rays).
RAYS = compiled_scans(ray_function_rays, "ray_function_rays", RAYS_PER_CHUNK)
