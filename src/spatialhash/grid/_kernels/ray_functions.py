"""Rays whose hits are offered, nearest first, to a user's compiled function:
`Grid.query_ray` with ``fn``. The first hit ``fn`` accepts is the ray's answer.

`ray_function_rays` casts rays ``visit_order[lo:hi]`` with the walk of `ray.cast_rays`
(its helpers `ray.walk_start`, `ray.walk_step` and the like): the same clipping, the same
neighbourhood slabs, the same test of each sphere (`ray_sphere.sphere_entry`), so a ray finds the
same hits at the same distances. Instead of keeping the best, it keeps every hit found
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

import numpy as np

from ..._kernels.ray_functions import HEAP_ROOM, grown_hits, new_hits, pop_hit, push_hit
from ..._kernels.ray_sphere import sphere_entry
from .pair_functions import compiled_scans
from .ray import (
    row_points,
    slab_cells,
    walk_buffers,
    walk_exit,
    walk_start,
    walk_step,
)

#: Rays handed to a thread at a time.
RAYS_PER_CHUNK = 64


def ray_function_rays(state, params, lo, hi, fn, args):
    """Cast rays ``visit_order[lo:hi]``, writing for each ray ``q`` the first hit ``fn``
    accepts to ``out_indices[q]`` and ``out_distances[q]`` (-1 and ``inf`` for none).

    ``params`` is ``(radii, max_radius, walk_limit, origins, units, max_distance,
    visit_order, out_indices, out_distances)``, the first seven as `ray.cast_rays` takes
    them. ``fn(q, index, distance, *args)`` with ``q`` and ``index`` int64.
    """
    (radii, max_radius, walk_limit, origins, units, max_distance, visit_order, out_indices,
     out_distances) = params
    points, order, n_cells = state.points, state.order, state.n_cells
    dense_start, cell_start, cell_coords = state.dense_start, state.cell_start, state.cell_coords
    hash_keys, hash_ids = state.hash_keys, state.hash_ids
    n_points = np.int64(order.shape[0])
    shape = (n_cells[0], n_cells[1], n_cells[2])
    buffers = walk_buffers()
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
        missed, walk, k, t_lo, t_hi, at, u = walk_start(
            state, max_radius, walk_limit, origins[q], units[q], t_end, buffers)
        t_enter = t_lo
        while not missed:
            x_lo, x_hi, y_lo, y_hi, z_lo, z_hi = slab_cells(at, shape, walk)
            if x_lo <= x_hi:
                for row_z in range(z_lo, z_hi + 1):
                    for row_y in range(y_lo, y_hi + 1):
                        start, end = row_points(walk, n_points, shape[0], shape[1],
                                                dense_start, hash_keys, hash_ids, cell_start,
                                                cell_coords, row_y, row_z, x_lo, x_hi)
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
            t_exit = walk_exit(at, t_enter, t_hi)
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
            t_enter = t_exit
            at, ended = walk_step(at, k, shape, u, t_exit)
            if ended:
                break
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
