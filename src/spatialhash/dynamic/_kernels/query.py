"""Local queries of the dynamic hash: a cell, a box, a ball, the k nearest.

Queries walk the bucket lists of the cells they cover on every non-empty level. An object
spanning several cells is reported once: from the lowest cell it shares with the query's
range of cells, ``max(first, lo)`` per axis (integer arithmetic, no hash set). When a
level's range of cells is larger than a few times the number of objects on it, the level's
objects are scanned directly instead, so a huge query costs O(objects).

Tests (the arithmetic of `tests/dynamic_oracles.py`): a box query keeps objects whose
bounding box meets the closed query box and, for spheres, whose centre lies within the
radius of the box; a ball query keeps objects whose bounding box lies within ``r`` of the
centre (squared distance to the box ``<= r * r``) and, for spheres, whose centre lies
within ``r + radius``.
"""

from __future__ import annotations

import math

import numpy as np

from ..._config import jit, jit_inline
from ..._kernels.cells import cell_tolerance, floor_to_int
from ..._kernels.heap import heap_offer, heap_sort_ascending
from ..._kernels.shapes import box_distance2, center_distance2
from .state import BOUNDS, HEAD, INV_SIZE, LEVEL_COUNT, LINKS, META, SPHERES
from .storage import CATEGORY, ENTRIES, HI, LEVEL, LO, bucket_of, entry_in_cell

#: Query kinds.
KIND_CELL, KIND_BOX, KIND_BALL = 0, 1, 2
#: A level is scanned object by object when its range holds more cells than this many
#: times its objects.
SCAN_FACTOR = 4.0


@jit_inline
def _accept(objects, kind, query, slot):
    """Whether object ``slot`` passes the exact test of a query (see the module docstring).

    ``query`` is ``(x0, y0, z0, x1, y1, z1, r)``: a box, or a ball's centre in the first
    three and its radius last.
    """
    bounds = objects[BOUNDS]
    spheres = objects[SPHERES]
    if kind == KIND_CELL:
        return True
    if kind == KIND_BOX:
        for axis in range(3):
            if bounds[slot, axis] > query[axis + 3] or query[axis] > bounds[slot, axis + 3]:
                return False
        radius = spheres[slot, 3]
        if radius < 0.0:
            return True
        total = 0.0
        for axis in range(3):
            c = spheres[slot, axis]
            if c < query[axis]:
                d = query[axis] - c
            elif c > query[axis + 3]:
                d = c - query[axis + 3]
            else:
                d = 0.0
            total += d * d
        return total <= radius * radius
    r = query[6]
    if box_distance2(query[0], query[1], query[2], bounds, slot) > r * r:
        return False
    radius = spheres[slot, 3]
    if radius < 0.0:
        return True
    reach = r + radius
    return center_distance2(query[0], query[1], query[2], spheres, slot) <= reach * reach


@jit_inline
def _query_cells(kind, query, inv, first, last):
    """The cells ``first .. last`` (per axis) that a query covers on the level of inverse
    cell size ``inv``; returns their number as a float (clamped ends 2**63 apart
    overflow an int64 difference). A cell query covers the cell of ``query[0:3]``, a box
    query ``query[0:3]..query[3:6]``, a ball query its bounding box widened by a rounding
    tolerance."""
    volume = 1.0
    for axis in range(3):
        if kind == KIND_CELL:
            first[axis] = floor_to_int(query[axis] * inv)
            last[axis] = first[axis]
        elif kind == KIND_BOX:
            first[axis] = floor_to_int(query[axis] * inv)
            last[axis] = floor_to_int(query[axis + 3] * inv)
        else:
            u = query[axis] * inv
            reach = query[6] * inv
            tolerance = cell_tolerance(abs(u) + reach)
            first[axis] = floor_to_int(u - reach - tolerance)
            last[axis] = floor_to_int(u + reach + tolerance)
        volume *= float(last[axis]) - float(first[axis]) + 1.0
    return volume


@jit
def query_slots(objects, cells, kind, query, query_mask, out):
    """Slots of the objects matching one query (see `_accept`), written to ``out``.

    ``out`` must hold every object; returns how many were written. The cells of a cell
    query are those holding ``query[0:3]``; a box query covers ``query[0:3]..query[3:6]``;
    a ball query covers its bounding box widened by a rounding tolerance.
    """
    meta = objects[META]
    inv_size = cells[INV_SIZE]
    level_count = cells[LEVEL_COUNT]
    links = cells[LINKS]
    head = cells[HEAD]
    mask = head.shape[0] - 1
    n_out = 0
    first = np.empty(3, np.int64)
    last = np.empty(3, np.int64)
    for level in range(level_count.shape[0]):
        if level_count[level] == 0:
            continue
        volume = _query_cells(kind, query, inv_size[level], first, last)
        if volume > SCAN_FACTOR * level_count[level]:
            for slot in range(meta.shape[0]):
                if meta[slot, LEVEL] != level or (meta[slot, CATEGORY] & query_mask) == 0:
                    continue
                inside = True
                for axis in range(3):
                    if meta[slot, HI + axis] < first[axis] or meta[slot, LO + axis] > last[axis]:
                        inside = False
                if inside and _accept(objects, kind, query, slot):
                    out[n_out] = slot
                    n_out += 1
            continue
        for cz in range(first[2], last[2] + 1):
            for cy in range(first[1], last[1] + 1):
                for cx in range(first[0], last[0] + 1):
                    entry = head[bucket_of(level, cx, cy, cz, mask)]
                    while entry >= 0:
                        slot = entry // ENTRIES
                        in_cell = entry_in_cell(meta, entry, level, cx, cy, cz)
                        entry = links[entry, 0]
                        # Reported from the lowest cell shared with the query's range only.
                        if (not in_cell or cx != max(first[0], meta[slot, LO])
                                or cy != max(first[1], meta[slot, LO + 1])
                                or cz != max(first[2], meta[slot, LO + 2])):
                            continue
                        if (meta[slot, CATEGORY] & query_mask) == 0:
                            continue
                        if _accept(objects, kind, query, slot):
                            out[n_out] = slot
                            n_out += 1
    return n_out


@jit_inline
def object_distance(objects, px, py, pz, slot):
    """Distance from point ``p`` to object ``slot``: to its box, or to its sphere's surface
    (0 inside either)."""
    spheres = objects[SPHERES]
    radius = spheres[slot, 3]
    if radius < 0.0:
        return math.sqrt(box_distance2(px, py, pz, objects[BOUNDS], slot))
    return max(math.sqrt(center_distance2(px, py, pz, spheres, slot)) - radius, 0.0)


@jit
def _ring_cell_closest(meta, slot, c0x, c0y, c0z):
    """Chebyshev ring (about the query cell) of the object's cell nearest to it, as a
    float: two cell coordinates clamped to +-2**62 differ by up to 2**63, which overflows
    an int64 (a query and an object on opposite sides, that far out, were never met)."""
    ring = 0.0
    for axis, c0 in enumerate((c0x, c0y, c0z)):
        c = min(max(c0, meta[slot, LO + axis]), meta[slot, HI + axis])
        ring = max(ring, abs(float(c) - float(c0)))
    return ring


@jit
def knn_query(objects, cells, keys, point, query_mask, n_dims, heap_distance, heap_key):
    """The ``k`` objects nearest to ``point``, ring by ring on each level, exact.

    Candidates rank by ``(distance, keys[slot])``: ``keys`` is a value per slot, distinct
    for the objects held (the engine's caller passes the integer ids, or the slots). On
    each level the rings of cells around the point's cell are visited outward; an object is
    considered from the cell of its range nearest to the point's cell (visited first,
    exactly once). After ring ``R`` every unseen object of the level lies outside the block
    of ``2R + 1`` cells, at least ``R * cell`` away, and the level stops once the k-th best
    is nearer than that (a margin of 2**-20 cell covers the rounding of cell coordinates).
    A ring holding more cells than a few times the unseen objects gives way to a scan of
    them, and so do the rings once they have visited that many times the level's objects in
    all (in 1-D a ring is always two cells: two objects 1e9 cells apart would take a
    billion rings).
    Returns how many were found; ``heap_distance`` and ``heap_key`` (length ``k``) hold
    them nearest first: the keys, which tell the objects apart.
    """
    meta = objects[META]
    inv_size = cells[INV_SIZE]
    level_count = cells[LEVEL_COUNT]
    links = cells[LINKS]
    head = cells[HEAD]
    k = heap_distance.shape[0]
    size = 0
    mask = head.shape[0] - 1
    px, py, pz = point[0], point[1], point[2]
    for level in range(level_count.shape[0]):
        n_level = level_count[level]
        if n_level == 0:
            continue
        inv = inv_size[level]
        c0x = floor_to_int(px * inv)
        c0y = floor_to_int(py * inv)
        c0z = floor_to_int(pz * inv)
        seen = 0
        ring = 0
        visited = 0.0
        while seen < n_level:
            if size == k and ring > 1 and inv > 0.0:
                # Unseen objects lie outside the block of rings 0 .. ring - 1.
                bound = (ring - 1 - 2.0**-20) / inv
                if bound > heap_distance[0]:
                    break
            span_z = ring if n_dims == 3 else 0
            span_y = ring if n_dims >= 2 else 0
            n_ring_cells = (2.0 * ring + 1) ** n_dims - (2.0 * ring - 1) ** n_dims if ring else 1.0
            # 27 more (a 3 x 3 x 3 block): a level of few objects still walks the rings
            # next to the point before it scans.
            visited += n_ring_cells
            if (n_ring_cells > SCAN_FACTOR * (n_level - seen)
                    or visited > SCAN_FACTOR * n_level + 27.0):
                # Scan every object of the level not met in rings 0 .. ring - 1.
                for slot in range(meta.shape[0]):
                    if meta[slot, LEVEL] != level:
                        continue
                    if _ring_cell_closest(meta, slot, c0x, c0y, c0z) < ring:
                        continue
                    if (meta[slot, CATEGORY] & query_mask) != 0:
                        distance = object_distance(objects, px, py, pz, slot)
                        size = heap_offer(heap_distance, heap_key, size, distance, keys[slot])
                break
            for dz in range(-span_z, span_z + 1):
                for dy in range(-span_y, span_y + 1):
                    on_shell = abs(dz) == ring or abs(dy) == ring
                    step = 1 if on_shell else 2 * ring
                    dx = -ring
                    while dx <= ring:
                        cx, cy, cz = c0x + dx, c0y + dy, c0z + dz
                        entry = head[bucket_of(level, cx, cy, cz, mask)]
                        while entry >= 0:
                            slot = entry // ENTRIES
                            in_cell = entry_in_cell(meta, entry, level, cx, cy, cz)
                            entry = links[entry, 0]
                            # Considered from its cell nearest to the point's only.
                            if (not in_cell or min(max(c0x, meta[slot, LO]), meta[slot, HI]) != cx
                                    or min(max(c0y, meta[slot, LO + 1]), meta[slot, HI + 1]) != cy
                                    or min(max(c0z, meta[slot, LO + 2]), meta[slot, HI + 2])
                                    != cz):
                                continue
                            seen += 1
                            if (meta[slot, CATEGORY] & query_mask) != 0:
                                distance = object_distance(objects, px, py, pz, slot)
                                size = heap_offer(heap_distance, heap_key, size, distance,
                                                  keys[slot])
                        dx += step if ring else 1
            ring += 1
    heap_sort_ascending(heap_distance, heap_key, size)
    return size
