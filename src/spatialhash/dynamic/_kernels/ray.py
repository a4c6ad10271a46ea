"""Ray and segment casts through the dynamic hash, cell by cell on every level.

Each non-empty level is traversed with the shared DDA (`dda.py`, Amanatides & Woo) from
where the ray enters the level's box of cells to where it leaves it or reaches
``max_distance``. In each visited cell, with parameter interval ``[t_enter, t_exit]``, the
objects of the cells holding the ray's points of that interval are tested, the range
widened by the rounding tolerance of `cells.cell_tolerance` so that a ray along a cell face
or through a corner meets the objects on both sides. A stamp per slot tests each object
once per ray. A level whose stretch of the ray crosses more cells than a few times its
objects (`query.SCAN_FACTOR`) has its objects tested one by one instead, so a
ray costs O(objects) at most: two objects 1e9 cells apart took over a minute cell by
cell. So does a level when the ray starts, or the level's cells reach, more than
`FAR_CELLS` cells from the origin: there ``u_start + t * u_rate`` rounds by whole cells
(a ray from -2**55 cells missed an object at 2), and cell coordinates saturate at 2**62
(a ray starting inside an object at 2**67 cells missed it). Nearer, the widening of each
cell range is sized from the terms of that sum, not from its result.

Tests, with the arithmetic of `tests/dynamic_oracles.py`: the slab test against the
closed bounding box over ``[0, max_distance]`` gives the entry parameter (0 when the ray
starts inside); a sphere is then intersected exactly (entry at 0 when the origin is inside
or on the ball). The direction is a unit vector (normalized by the caller), so parameters
are distances. For the first hit, a level's traversal stops once the best hit lies before
the current cell's exit.
"""

from __future__ import annotations

import numpy as np

from ..._config import jit
from ..._kernels.cells import cell_tolerance, floor_to_int
from ..._kernels.dda import clip_to_cells, dda_exit, dda_start, dda_step, ray_to_cells
from ..._kernels.ray_sphere import sphere_entry
from .query import SCAN_FACTOR
from .state import (
    BOUNDS,
    CAST_MASK,
    CAST_STAMP,
    DIRECTION,
    FIRST_ONLY,
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

#: Rays starting, or levels reaching, this many cells or more from the origin are cast by
#: testing the level's objects one by one (see the module docstring).
FAR_CELLS = 2.0**40


@jit
def ray_object(bounds, spheres, slot, origin, direction, max_distance):
    """Entry parameter of the ray in object ``slot``, or -1 when it misses."""
    t_lo = 0.0
    t_hi = max_distance
    for axis in range(3):
        o = origin[axis]
        d = direction[axis]
        if d == 0.0:
            if o < bounds[slot, axis] or o > bounds[slot, axis + 3]:
                return -1.0
            continue
        t_a = (bounds[slot, axis] - o) / d
        t_b = (bounds[slot, axis + 3] - o) / d
        if t_a > t_b:
            t_a, t_b = t_b, t_a
        t_lo = max(t_lo, t_a)
        t_hi = min(t_hi, t_b)
    if t_lo > t_hi:
        return -1.0
    radius = spheres[slot, 3]
    if radius <= 0.0:
        # A box or point (radius < 0), or a sphere of radius 0: its centre, which the box
        # test above decided exactly (the sphere arithmetic could lose a ray through it
        # to rounding).
        return t_lo
    # The arithmetic of every ray cast (`ray_sphere`; ``direction`` is a unit vector); a
    # miss is -1.0.
    t = sphere_entry(origin[0] - spheres[slot, 0], origin[1] - spheres[slot, 1],
                     origin[2] - spheres[slot, 2], direction[0], direction[1], direction[2],
                     radius)
    return t if t <= max_distance else -1.0


@jit
def ray_hits(objects, cells, level_cells, keys, cast, buffers):
    """Objects hit by the ray ``origin + t * direction``, ``0 <= t <= max_distance``, of
    `RayCast` ``cast``.

    ``level_cells`` are the boxes of cells of the levels (see `state.Cells`). Writes each
    hit's slot and entry parameter to the `QueryBuffers` ``buffers`` (room for every object)
    and returns how many; with ``first_only``, only the first hit (smallest
    ``t``, ties by the smaller ``keys[slot]``), so 0 or 1. ``buffers.stamp`` holds per slot
    the last ray that tested it; ``cast.stamp`` is new for this ray.
    """
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
    first_only = cast[FIRST_ONLY]
    stamp_value = cast[CAST_STAMP]
    out_slots = buffers[FOUND_SLOTS]
    out_t = buffers[FOUND_DISTANCES]
    stamp = buffers[STAMP]
    mask = head.shape[0] - 1
    n_out = 0
    best_t = np.inf
    best_key = 0
    u_start = np.empty(3)
    u_rate = np.empty(3)
    cell = np.empty(3, np.int64)
    step = np.empty(3, np.int64)
    t_next = np.empty(3)
    lower_u = np.empty(3)
    upper_u = np.empty(3)
    first = np.empty(3, np.int64)
    last = np.empty(3, np.int64)
    zero = np.zeros(3)
    for level in range(level_count.shape[0]):
        if level_count[level] == 0:
            continue
        inv = inv_size[level]
        inv3 = np.full(3, inv)
        ray_to_cells(origin, direction, zero, inv3, u_start, u_rate)
        for axis in range(3):
            # Widened for rounding, like the cells visited below.
            lower_u[axis] = float(level_cells[level, axis])
            upper_u[axis] = float(level_cells[level, axis + 3] + 1)
            lower_u[axis] -= cell_tolerance(abs(lower_u[axis]))
            upper_u[axis] += cell_tolerance(abs(upper_u[axis]))
        if inv == 0.0:
            t_lo, t_hi = 0.0, 0.0  # one infinite cell: visit it once
        else:
            far = 0.0
            for axis in range(3):
                far = max(far, abs(u_start[axis]), abs(lower_u[axis]), abs(upper_u[axis]))
            crossed = 0.0
            if far < FAR_CELLS:
                t_lo, t_hi = clip_to_cells(u_start, u_rate, lower_u, upper_u, 0.0,
                                           max_distance)
                if t_lo > t_hi:
                    continue
                crossed = 1.0
                for axis in range(3):
                    crossed += abs(u_rate[axis]) * (t_hi - t_lo)
            if far >= FAR_CELLS or crossed > SCAN_FACTOR * level_count[level]:
                for slot in range(meta.shape[0]):
                    if meta[slot, LEVEL] == level:
                        n_out, best_t, best_key = _test_object(
                            objects, keys, cast, buffers, slot, (n_out, best_t, best_key))
                continue
        dda_start(u_start, u_rate, t_lo, cell, step, t_next)
        t_enter = t_lo
        while True:
            t_exit = min(dda_exit(t_next, t_enter), t_hi)
            # The cells holding the ray's points of [t_enter, t_exit], widened for rounding.
            for axis in range(3):
                u_a = u_start[axis] + t_enter * u_rate[axis]
                u_b = u_start[axis] + t_exit * u_rate[axis]
                low = min(u_a, u_b)
                high = max(u_a, u_b)
                # From the terms: u_start and t * u_rate may be far larger than their sum.
                tolerance = cell_tolerance(max(abs(low), abs(high)) + abs(u_start[axis]))
                first[axis] = max(min(floor_to_int(low - tolerance), cell[axis]),
                                  level_cells[level, axis])
                last[axis] = min(max(floor_to_int(high + tolerance), cell[axis]),
                                 level_cells[level, axis + 3])
            for cz in range(first[2], last[2] + 1):
                for cy in range(first[1], last[1] + 1):
                    for cx in range(first[0], last[0] + 1):
                        entry = head[bucket_of(level, cx, cy, cz, mask)]
                        while entry >= 0:
                            slot = entry // ENTRIES
                            in_cell = entry_in_cell(meta, entry, level, cx, cy, cz)
                            entry = links[entry, 0]
                            # The body of `_test_object`, written out: called here, the
                            # 2-D casts of 100,000 boxes took 1.3-1.4 times as long (ad hoc,
                            # processes alternated), even inlined by numba.
                            if not in_cell or stamp[slot] == stamp_value:
                                continue
                            stamp[slot] = stamp_value
                            if (meta[slot, CATEGORY] & query_mask) == 0:
                                continue
                            t = ray_object(bounds, spheres, slot, origin, direction,
                                           max_distance)
                            if t < 0.0:
                                continue
                            if first_only:
                                if t < best_t or (t == best_t and keys[slot] < best_key):
                                    best_t = t
                                    best_key = keys[slot]
                                    out_slots[0] = slot
                                    out_t[0] = t
                                    n_out = 1
                            else:
                                out_slots[n_out] = slot
                                out_t[n_out] = t
                                n_out += 1
            if t_exit >= t_hi or (first_only and best_t < t_exit):
                break
            _, t_enter = dda_step(u_start, u_rate, cell, step, t_next)
    return n_out


@jit
def _test_object(objects, keys, cast, buffers, slot, found):
    """Test object ``slot`` against the ray once (see `ray_hits`) and record a hit: all of
    them, or the first one. ``found`` is ``(n_out, best_t, best_key)`` so far; returns it
    updated. For the scan of a level's objects; the cell-by-cell loop has the same body
    written out."""
    stamp = buffers[STAMP]
    stamp_value = cast[CAST_STAMP]
    out_slots = buffers[FOUND_SLOTS]
    out_t = buffers[FOUND_DISTANCES]
    n_out, best_t, best_key = found
    if stamp[slot] == stamp_value:
        return n_out, best_t, best_key
    stamp[slot] = stamp_value
    if (objects[META][slot, CATEGORY] & cast[CAST_MASK]) == 0:
        return n_out, best_t, best_key
    t = ray_object(objects[BOUNDS], objects[SPHERES], slot, cast[ORIGIN], cast[DIRECTION],
                   cast[MAX_DISTANCE])
    if t < 0.0:
        return n_out, best_t, best_key
    if cast[FIRST_ONLY]:
        if t < best_t or (t == best_t and keys[slot] < best_key):
            out_slots[0] = slot
            out_t[0] = t
            return 1, t, keys[slot]
        return n_out, best_t, best_key
    out_slots[n_out] = slot
    out_t[n_out] = t
    return n_out + 1, best_t, best_key
