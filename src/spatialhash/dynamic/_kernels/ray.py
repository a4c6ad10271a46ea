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

One walk, two consumers. `cast_kernel` is the walk and takes its consumer as a constant:
`ray_hits` records the hits (all of them, or the first, chosen by ``cast.first_only``)
and the kernel of ``ray_functions.py`` offers them, nearest first, to a user's function
(see that module). Hits must reach a function in order of distance over all levels, so
the levels walk side by side: each walking level has a frontier, the ``t_exit`` of the
last cell it visited (every hit of that level nearer than its frontier has been found: the
rule by which the first hit is taken as final, ``best < t_exit``), infinite once its walk
is over; and the level furthest behind visits its next cell. Recording hits, `ray_hits`
needs no such order: it walks each level to its end before the next, the side-by-side walk
with the first level still walking always chosen. Levels whose objects are tested one by
one are tested before any walk; the set of hits, and the first, are the same in any order.

The cells of a level are looked up here rather than through a helper shared with the
batch grid: a level's cell is a bucket list of a hash table (`storage.bucket_of`, each
entry checked with `storage.entry_in_cell`, an object in up to eight cells, stamped so it
is tested once), the grid's a run of sorted points; and the ray visits the cells its own
points cross, widened for rounding, where the grid's walk visits a neighbourhood of
spheres' reach. What both share is the DDA (`dda.py`), the sphere test
(`ray_sphere.py`) and the heap of hits waiting for a function
(``spatialhash/_kernels/ray_functions.py``).
"""

from __future__ import annotations

import numpy as np

from ..._config import jit, jit_inline, jit_variant
from ..._kernels.cells import cell_tolerance, floor_to_int
from ..._kernels.dda import clip_to_cells, dda_start, ray_to_cells, row_exit, row_step
from ..._kernels.ray_functions import HEAP_ROOM, add_hit, new_hits, take_hit
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
#: What `level_start` finds a level to need: nothing (the ray misses its cells), a test of
#: its objects one by one, or a walk of its cells.
LEVEL_MISSED = 0
LEVEL_SCAN = 1
LEVEL_WALK = 2


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
def level_start(origin, direction, max_distance, inv, level_box, n_objects, u_start, u_rate):
    """How the ray ``origin + t * direction``, ``0 <= t <= max_distance``, meets a level of
    ``n_objects`` objects, cells of size ``1 / inv``, the box of cells ``level_box``
    (`state.Cells`' row of the level): ``(action, t_lo, t_hi)``, ``action`` one of
    `LEVEL_MISSED`, `LEVEL_SCAN` and `LEVEL_WALK`, the last to walk the cells of
    ``[t_lo, t_hi]``. Writes the ray in the level's cell units to ``u_start`` and
    ``u_rate``."""
    lower_u = np.empty(3)
    upper_u = np.empty(3)
    ray_to_cells(origin, direction, np.zeros(3), np.full(3, inv), u_start, u_rate)
    for axis in range(3):
        # Widened for rounding, like the cells visited (`cell_range`).
        lower_u[axis] = float(level_box[axis])
        upper_u[axis] = float(level_box[axis + 3] + 1)
        lower_u[axis] -= cell_tolerance(abs(lower_u[axis]))
        upper_u[axis] += cell_tolerance(abs(upper_u[axis]))
    if inv == 0.0:
        return LEVEL_WALK, 0.0, 0.0  # one infinite cell: visit it once
    far = 0.0
    for axis in range(3):
        far = max(far, abs(u_start[axis]), abs(lower_u[axis]), abs(upper_u[axis]))
    if far >= FAR_CELLS:
        return LEVEL_SCAN, 0.0, 0.0
    t_lo, t_hi = clip_to_cells(u_start, u_rate, lower_u, upper_u, 0.0, max_distance)
    if t_lo > t_hi:
        return LEVEL_MISSED, t_lo, t_hi
    crossed = 1.0
    for axis in range(3):
        crossed += abs(u_rate[axis]) * (t_hi - t_lo)
    if crossed > SCAN_FACTOR * n_objects:
        return LEVEL_SCAN, t_lo, t_hi
    return LEVEL_WALK, t_lo, t_hi


@jit_inline
def cell_range(u_start, u_rate, cell, t_enter, level, t_exit, level_cells, first, last):
    """The cells holding the points of ``[t_enter[level], t_exit]`` of the walk of
    ``level`` (the arrays of `walk_buffers`), widened for rounding: ``first`` to ``last``
    per axis, within the level's box of cells. The arrays one by one, not the tuple of
    `walk_buffers`: a slice of that tuple costs reference counting on every cell."""
    for axis in range(3):
        u_a = u_start[level, axis] + t_enter[level] * u_rate[level, axis]
        u_b = u_start[level, axis] + t_exit * u_rate[level, axis]
        low = min(u_a, u_b)
        high = max(u_a, u_b)
        # From the terms: u_start and t * u_rate may be far larger than their sum.
        tolerance = cell_tolerance(max(abs(low), abs(high)) + abs(u_start[level, axis]))
        first[axis] = max(min(floor_to_int(low - tolerance), cell[level, axis]),
                          level_cells[level, axis])
        last[axis] = min(max(floor_to_int(high + tolerance), cell[level, axis]),
                         level_cells[level, axis + 3])


@jit
def walk_buffers(n_levels):
    """The walks of the levels, a row (or an entry) per level: ``(u_start, u_rate, cell,
    step, t_next, t_enter, t_end, walking, frontier)``, the ray in the level's cell units,
    the DDA's cell, steps and face parameters (`dda.py`), the entry parameter of the cell
    to visit next and the walk's end; then the walking levels, in level order, and their
    frontiers."""
    return (np.empty((n_levels, 3)), np.empty((n_levels, 3)), np.empty((n_levels, 3), np.int64),
            np.empty((n_levels, 3), np.int64), np.empty((n_levels, 3)), np.empty(n_levels),
            np.empty(n_levels), np.empty(n_levels, np.int64), np.empty(n_levels))


@jit_inline
def slot_entry(objects, cast, stamp, slot):
    """Where the ray of ``cast`` enters object ``slot`` (`ray_object`), or -1 when it
    misses, is filtered out by the cast's mask, or was tested before in this cast (the
    slot is stamped: `state.QueryBuffers`)."""
    stamp_value = cast[CAST_STAMP]
    if stamp[slot] == stamp_value:
        return -1.0
    stamp[slot] = stamp_value
    if (objects[META][slot, CATEGORY] & cast[CAST_MASK]) == 0:
        return -1.0
    return ray_object(objects[BOUNDS], objects[SPHERES], slot, cast[ORIGIN], cast[DIRECTION],
                      cast[MAX_DISTANCE])


@jit_inline
def record_hit(found, out_slots, out_t, first_only, slot, t, key):
    """The hit ``(slot, t)`` written to ``out_slots`` and ``out_t`` (those of
    `state.QueryBuffers`): after the others, or with ``first_only`` in place of the first
    hit so far when it comes first (nearer, or as near with a smaller ``key``). ``found``
    is ``(n_out, best_t, best_key)`` so far; returns it updated. How `ray_hits` keeps a
    hit."""
    n_out, best_t, best_key = found
    if first_only:
        if t < best_t or (t == best_t and key < best_key):
            out_slots[0] = slot
            out_t[0] = t
            return 1, t, key
        return found
    out_slots[n_out] = slot
    out_t[n_out] = t
    return n_out + 1, best_t, best_key


@jit_inline
def pending_hit(pending, out_slots, out_t, first_only, slot, t, key):
    """The hit ``(slot, t)`` pushed on the heap of hits waiting for a user's function:
    ``pending`` is ``(heap, n_pending)`` (`ray_functions.add_hit`); returns it updated.
    How the kernel with ``fn`` keeps a hit; the other arguments are those of
    `record_hit`."""
    heap, n_pending = pending
    return add_hit(heap, n_pending, t, key, slot)


def cast_kernel(with_fn):
    """The cast of the `RayCast` ``cast`` through every level, for one consumer (a
    constant of each compiled kernel; see the module docstring): without ``with_fn``,
    `ray_hits`; with it, the first hit ``fn(0, keys[slot], distance, *args)`` accepts,
    offered the hits nearest first, ties by the smaller key, its slot and distance written
    to position 0 of ``buffers``, returning 1, or 0 when ``fn`` accepts none
    (``cast.first_only`` is not read).

    Each keeps the hits it finds in ``kept``: `ray_hits` as `record_hit` does, the kernel
    with ``fn`` as `pending_hit` does."""
    keep = pending_hit if with_fn else record_hit

    def cast_levels(objects, cells, level_cells, keys, cast, buffers, fn, args):
        meta = objects[META]
        level_count, links, head = cells[LEVEL_COUNT], cells[LINKS], cells[HEAD]
        origin, direction, max_distance = cast[ORIGIN], cast[DIRECTION], cast[MAX_DISTANCE]
        bounds, spheres, stamp = objects[BOUNDS], objects[SPHERES], buffers[STAMP]
        stamp_value, query_mask = cast[CAST_STAMP], cast[CAST_MASK]
        out_slots, out_t = buffers[FOUND_SLOTS], buffers[FOUND_DISTANCES]
        mask = head.shape[0] - 1
        first_only = cast[FIRST_ONLY]
        walks = walk_buffers(level_count.shape[0])
        u_start, u_rate, cell, step, t_next, t_enter, t_end, walking, frontier = walks
        first = np.empty(3, np.int64)
        last = np.empty(3, np.int64)
        if with_fn:
            kept = (new_hits(HEAP_ROOM), 0)
        else:
            kept = (0, np.inf, np.int64(0))
        n_walking = 0
        for level in range(level_count.shape[0]):
            if level_count[level] == 0:
                continue
            action, t_lo, t_hi = level_start(origin, direction, max_distance,
                                             cells[INV_SIZE][level], level_cells[level],
                                             level_count[level], u_start[level], u_rate[level])
            if action == LEVEL_WALK:
                dda_start(u_start[level], u_rate[level], t_lo, cell[level], step[level],
                          t_next[level])
                t_enter[level], t_end[level] = t_lo, t_hi
                walking[n_walking], frontier[n_walking] = level, -np.inf
                n_walking += 1
            elif action == LEVEL_SCAN:
                for slot in range(meta.shape[0]):
                    if meta[slot, LEVEL] != level:
                        continue
                    t = slot_entry(objects, cast, stamp, slot)
                    if t >= 0.0:
                        kept = keep(kept, out_slots, out_t, first_only, slot, t, keys[slot])
        while True:
            # The level furthest behind; recording hits, the first level still walking.
            behind = -1
            safe = np.inf
            for w in range(n_walking):
                if frontier[w] < safe:
                    safe = frontier[w]
                    behind = w
                    if not with_fn:
                        break
            if with_fn:
                # Every hit nearer than every frontier is found: offer those, nearest first.
                heap, n_pending = kept
                while n_pending > 0 and (heap[0][0] < safe or behind < 0):
                    n_pending, t, key, slot = take_hit(heap, n_pending)
                    if fn(np.int64(0), key, t, *args):
                        out_slots[0] = slot
                        out_t[0] = t
                        return 1
                kept = (heap, n_pending)
            if behind < 0:
                break
            level = walking[behind]
            t_exit = min(row_exit(t_next, level, t_enter[level]), t_end[level])
            cell_range(u_start, u_rate, cell, t_enter, level, t_exit, level_cells, first, last)
            for cz in range(first[2], last[2] + 1):
                for cy in range(first[1], last[1] + 1):
                    for cx in range(first[0], last[0] + 1):
                        entry = head[bucket_of(level, cx, cy, cz, mask)]
                        while entry >= 0:
                            slot = entry // ENTRIES
                            in_cell = entry_in_cell(meta, entry, level, cx, cy, cz)
                            entry = links[entry, 0]
                            # `slot_entry`, written out: with a helper here the casts of
                            # 100,000 boxes in 2-D took 1.3-1.4 times as long (ad hoc).
                            if not in_cell or stamp[slot] == stamp_value:
                                continue
                            stamp[slot] = stamp_value
                            if (meta[slot, CATEGORY] & query_mask) == 0:
                                continue
                            t = ray_object(bounds, spheres, slot, origin, direction,
                                           max_distance)
                            if t >= 0.0:
                                kept = keep(kept, out_slots, out_t, first_only, slot, t,
                                            keys[slot])
            if t_exit >= t_end[level] or (not with_fn and first_only and kept[1] < t_exit):
                frontier[behind] = np.inf
            else:
                frontier[behind] = t_exit
                _, t_enter[level] = row_step(u_start, u_rate, cell, step, t_next, level)
        return 0 if with_fn else kept[0]

    return cast_levels


#: Objects hit by the ray ``origin + t * direction``, ``0 <= t <= max_distance``, of the
#: `RayCast` ``cast``, called ``(objects, cells, level_cells, keys, cast, buffers, None,
#: ())``: ``level_cells`` are the boxes of cells of the levels (see `state.Cells`). Writes
#: each hit's slot and entry parameter to the `QueryBuffers` ``buffers`` (room for every
#: object) and returns how many; with ``cast.first_only``, only the first hit (smallest
#: ``t``, ties by the smaller ``keys[slot]``), so 0 or 1. ``buffers.stamp`` holds per slot
#: the last ray that tested it; ``cast.stamp`` is new for this ray.
ray_hits = jit_variant(cast_kernel(with_fn=False), "ray_hits")
