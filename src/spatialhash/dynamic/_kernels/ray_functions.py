"""A ray through the dynamic hash whose hits are offered, nearest first, to a user's
compiled function: `DynamicHash.query_ray` with ``fn``. The first hit ``fn`` accepts is
the answer.

The levels are walked as `ray.ray_hits` walks them (the same clipping, the same cells with
the same widening, each object tested once with `ray.ray_object`, or a level's objects one
by one where `ray_hits` scans them), so the ray finds the same hits at the same distances.
But `ray_hits` walks one level after the other, and hits must reach ``fn`` in order of
distance over all levels: here the levels walk side by side. Each walking level has a
frontier, the ``t_exit`` of the last cell it visited: every hit of that level nearer than
its frontier has been found (the rule by which `ray_hits` takes its best hit as final,
``best < t_exit``), and a level whose walk is over (or that was scanned whole) has an
infinite frontier. The level furthest behind visits its next cell, the hits found wait in
a heap (``spatialhash/_kernels/ray_functions.py``), and those nearer than the smallest
frontier are offered to ``fn``, nearest first, ties by the smaller key (the id): no hit
still to be found can come before them. ``fn`` returning True ends the cast.

Compiled anew for each ``fn`` (and types of ``args``), ``fn`` inlined; not cached on disk,
for the reason given in ``grid/_kernels/pair_functions.py``.
"""

from __future__ import annotations

import numba
import numpy as np

from ..._config import _JIT_OPTIONS, _kernel
from ..._kernels.cells import cell_tolerance, floor_to_int
from ..._kernels.dda import clip_to_cells, dda_exit, dda_start, dda_step, ray_to_cells
from ..._kernels.ray_functions import HEAP_ROOM, grown_hits, new_hits, pop_hit, push_hit
from .query import SCAN_FACTOR
from .ray import FAR_CELLS, ray_object
from .state import (
    BOUNDS,
    CAST_MASK,
    CAST_STAMP,
    DIRECTION,
    FOUND_DISTANCES,
    FOUND_SLOTS,
    HEAD,
    INV_SIZE,
    LEVEL_COUNT,
    LINKS,
    MAX_DISTANCE,
    META,
    ORIGIN,
    SPHERES,
    STAMP,
)
from .storage import CATEGORY, ENTRIES, LEVEL, bucket_of, entry_in_cell


def ray_function_hit(objects, cells, level_cells, keys, cast, buffers, fn, args):
    """The first hit of the `RayCast` ``cast`` that ``fn(0, keys[slot], distance,
    *args)`` accepts, offered the hits nearest first, ties by the smaller key: its slot
    and distance written to the `QueryBuffers` ``buffers`` (position 0); returns 1, or 0
    when ``fn`` accepts none. Arguments as in `ray.ray_hits` (``cast.first_only`` is
    not read)."""
    bounds = objects[BOUNDS]
    spheres = objects[SPHERES]
    meta = objects[META]
    inv_size = cells[INV_SIZE]
    level_count = cells[LEVEL_COUNT]
    links = cells[LINKS]
    head = cells[HEAD]
    origin = cast[ORIGIN]
    direction = cast[DIRECTION]
    max_distance = cast[MAX_DISTANCE]
    query_mask = cast[CAST_MASK]
    stamp_value = cast[CAST_STAMP]
    out_slots = buffers[FOUND_SLOTS]
    out_t = buffers[FOUND_DISTANCES]
    stamp = buffers[STAMP]
    mask = head.shape[0] - 1
    n_levels = level_count.shape[0]
    ray = np.int64(0)
    # The walk of each level, a row per level: the ray in its cell units, its cell, steps,
    # face parameters, the entry parameter of the cell to visit next and the walk's end.
    u_start = np.empty((n_levels, 3))
    u_rate = np.empty((n_levels, 3))
    cell = np.empty((n_levels, 3), np.int64)
    step = np.empty((n_levels, 3), np.int64)
    t_next = np.empty((n_levels, 3))
    t_enter = np.empty(n_levels)
    t_end = np.empty(n_levels)
    # The walking levels and their frontiers (-inf before their first cell).
    walking = np.empty(n_levels, np.int64)
    frontier = np.empty(n_levels)
    n_walking = 0
    lower_u = np.empty(3)
    upper_u = np.empty(3)
    first = np.empty(3, np.int64)
    last = np.empty(3, np.int64)
    zero = np.zeros(3)
    heap_t, heap_key, heap_slot = new_hits(HEAP_ROOM)
    n_pending = 0
    for level in range(n_levels):
        if level_count[level] == 0:
            continue
        inv = inv_size[level]
        inv3 = np.full(3, inv)
        ray_to_cells(origin, direction, zero, inv3, u_start[level], u_rate[level])
        for axis in range(3):
            lower_u[axis] = float(level_cells[level, axis])
            upper_u[axis] = float(level_cells[level, axis + 3] + 1)
            lower_u[axis] -= cell_tolerance(abs(lower_u[axis]))
            upper_u[axis] += cell_tolerance(abs(upper_u[axis]))
        if inv == 0.0:
            t_lo, t_hi = 0.0, 0.0  # one infinite cell: visit it once
        else:
            far = 0.0
            for axis in range(3):
                far = max(far, abs(u_start[level, axis]), abs(lower_u[axis]),
                          abs(upper_u[axis]))
            crossed = 0.0
            t_lo = t_hi = 0.0
            if far < FAR_CELLS:
                t_lo, t_hi = clip_to_cells(u_start[level], u_rate[level], lower_u, upper_u,
                                           0.0, max_distance)
                if t_lo > t_hi:
                    continue
                crossed = 1.0
                for axis in range(3):
                    crossed += abs(u_rate[level, axis]) * (t_hi - t_lo)
            if far >= FAR_CELLS or crossed > SCAN_FACTOR * level_count[level]:
                # `ray_hits`'s scan of the level's objects: found whole, nothing to walk.
                for slot in range(meta.shape[0]):
                    if meta[slot, LEVEL] != level or stamp[slot] == stamp_value:
                        continue
                    stamp[slot] = stamp_value
                    if (meta[slot, CATEGORY] & query_mask) == 0:
                        continue
                    t = ray_object(bounds, spheres, slot, origin, direction, max_distance)
                    if t < 0.0:
                        continue
                    if n_pending == heap_t.shape[0]:
                        heap_t, heap_key, heap_slot = grown_hits(heap_t, heap_key, heap_slot)
                    n_pending = push_hit(heap_t, heap_key, heap_slot, n_pending, t,
                                         keys[slot], slot)
                continue
        dda_start(u_start[level], u_rate[level], t_lo, cell[level], step[level], t_next[level])
        t_enter[level] = t_lo
        t_end[level] = t_hi
        walking[n_walking] = level
        frontier[n_walking] = -np.inf
        n_walking += 1
    while True:
        behind = -1
        safe = np.inf
        for w in range(n_walking):
            if frontier[w] < safe:
                safe = frontier[w]
                behind = w
        # Every hit nearer than every frontier is found: offer those, nearest first.
        while n_pending > 0 and (heap_t[0] < safe or behind < 0):
            t, slot, key = heap_t[0], heap_slot[0], heap_key[0]
            n_pending = pop_hit(heap_t, heap_key, heap_slot, n_pending)
            if fn(ray, key, t, *args):
                out_slots[0] = slot
                out_t[0] = t
                return 1
        if behind < 0:
            return 0
        # The next cell of the level furthest behind, as `ray_hits` visits it.
        level = walking[behind]
        t_lo = t_enter[level]
        t_exit = min(dda_exit(t_next[level], t_lo), t_end[level])
        for axis in range(3):
            u_a = u_start[level, axis] + t_lo * u_rate[level, axis]
            u_b = u_start[level, axis] + t_exit * u_rate[level, axis]
            low = min(u_a, u_b)
            high = max(u_a, u_b)
            tolerance = cell_tolerance(max(abs(low), abs(high)) + abs(u_start[level, axis]))
            first[axis] = max(min(floor_to_int(low - tolerance), cell[level, axis]),
                              level_cells[level, axis])
            last[axis] = min(max(floor_to_int(high + tolerance), cell[level, axis]),
                             level_cells[level, axis + 3])
        for cz in range(first[2], last[2] + 1):
            for cy in range(first[1], last[1] + 1):
                for cx in range(first[0], last[0] + 1):
                    entry = head[bucket_of(level, cx, cy, cz, mask)]
                    while entry >= 0:
                        slot = entry // ENTRIES
                        in_cell = entry_in_cell(meta, entry, level, cx, cy, cz)
                        entry = links[entry, 0]
                        if not in_cell or stamp[slot] == stamp_value:
                            continue
                        stamp[slot] = stamp_value
                        if (meta[slot, CATEGORY] & query_mask) == 0:
                            continue
                        t = ray_object(bounds, spheres, slot, origin, direction, max_distance)
                        if t < 0.0:
                            continue
                        if n_pending == heap_t.shape[0]:
                            heap_t, heap_key, heap_slot = grown_hits(heap_t, heap_key,
                                                                     heap_slot)
                        n_pending = push_hit(heap_t, heap_key, heap_slot, n_pending, t,
                                             keys[slot], slot)
        if t_exit >= t_end[level]:
            frontier[behind] = np.inf
        else:
            frontier[behind] = t_exit
            _, t_enter[level] = dda_step(u_start[level], u_rate[level], cell[level],
                                         step[level], t_next[level])


#: Not cached on disk (see the module docstring).
ray_function_hit = _kernel(numba.njit(**{**_JIT_OPTIONS, "cache": False})(ray_function_hit))
