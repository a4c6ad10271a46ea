"""Storage of the dynamic hash: levels, cell ranges, bucket lists.

Every object lives in one slot. Per slot:
``bounds[s] = (x0, y0, z0, x1, y1, z1)`` its bounding box, ``spheres[s] = (cx, cy, cz, r)``
(``r < 0`` for a box or point), ``meta[s] = (level, lo_x, lo_y, lo_z, hi_x, hi_y, hi_z,
category, mask)`` with ``level = -1`` for a free slot (the bundle `state.Objects`). Apart
from the bundles, ``changed[s]`` is set whenever what decides the slot's entries in
`query_pairs`'s kept sort changes (see `set_cells`).

An object at level ``L`` covers the cells ``lo..hi`` (at most two per axis) of the grid of
cell size ``base * 4**L`` (`dynamic/_storage.py`'s ``LEVEL_RATIO``); its cell
``lo + (dx, dy, dz)`` is entry ``8 * s + k`` with ``k = dx + 2 dy + 4 dz``. Entries are
chained in doubly linked bucket lists (``links[e] = (next, prev)``, ``head[b]`` the first
entry of bucket ``b``); a bucket is the hash of ``(level, cell)`` and may hold entries of
several cells, so readers compare cells (`entry_in_cell`). The levels and the lists are the
bundle `state.Cells`, with the per-level boxes of cells ``level_cells`` and the lists'
``status`` apart.

Kernels take the bundles as plain tuples and take their arrays by index (see `state.py`),
at their entry point or in helpers that numba inlines into it.
"""

from __future__ import annotations

import numpy as np

from ..._config import jit, jit_inline
from ..._kernels.cells import COORDINATE_FLOOR, COORDINATE_LIMIT, floor_to_int, hash_cell
from .state import BOUNDS, HEAD, INV_SIZE, LEVEL_COUNT, LINKS, META, SPHERES

#: Cells an object occupies at most: two per axis.
ENTRIES = 8
#: Levels of the hierarchy; the last has infinite cells (inverse size 0): one cell for all.
N_LEVELS = 64
#: Mixes the level into the bucket hash (odd, below 2**63 so numba keeps int64 arithmetic).
LEVEL_SALT = 0x2545F4914F6CDD1D
#: Meta columns.
LEVEL, LO, HI, CATEGORY, MASK = 0, 1, 4, 7, 8
META_COLUMNS = 9


@jit
def bucket_of(level, cx, cy, cz, mask):
    """Bucket of cell ``(cx, cy, cz)`` of ``level`` in a power-of-two table."""
    return hash_cell(cx, cy, cz ^ (level * LEVEL_SALT), mask)


@jit_inline
def push_entry(links, head, bucket, entry):
    """Push ``entry`` onto the front of the list of ``bucket``."""
    first = head[bucket]
    links[entry, 0] = first
    links[entry, 1] = -1
    if first >= 0:
        links[first, 1] = entry
    head[bucket] = entry


@jit
def object_cells(inv_size, x0, y0, z0, x1, y1, z1):
    """Level and cell range ``(level, lx, ly, lz, hx, hy, hz)`` of the box ``x0..z1``.

    The level is the lowest whose cells are at least as large as the box on every axis, so
    the box covers at most two cells per axis; rounding in ``x * inv_size`` is caught by
    checking the range itself and moving up a level where it spans three cells.
    """
    extent = max(x1 - x0, max(y1 - y0, z1 - z0))
    last = inv_size.shape[0] - 1
    level = 0
    while level < last and not extent * inv_size[level] <= 1.0:
        level += 1
    while True:
        inv = inv_size[level]
        lx, ly, lz = floor_to_int(x0 * inv), floor_to_int(y0 * inv), floor_to_int(z0 * inv)
        hx, hy, hz = floor_to_int(x1 * inv), floor_to_int(y1 * inv), floor_to_int(z1 * inv)
        if level == last or (hx - lx <= 1 and hy - ly <= 1 and hz - lz <= 1):
            return level, lx, ly, lz, hx, hy, hz
        level += 1


@jit
def relink_object(meta, links, head, slot, push):
    """Push the entries of ``slot`` (its cell range in ``meta``) onto their buckets' lists,
    or, with ``push`` False, take them off (the lists are doubly linked: O(1) an entry)."""
    mask = head.shape[0] - 1
    level = meta[slot, LEVEL]
    lx, ly, lz = meta[slot, LO], meta[slot, LO + 1], meta[slot, LO + 2]
    for cz in range(lz, meta[slot, HI + 2] + 1):
        for cy in range(ly, meta[slot, HI + 1] + 1):
            for cx in range(lx, meta[slot, HI] + 1):
                entry = ENTRIES * slot + (cx - lx) + 2 * (cy - ly) + 4 * (cz - lz)
                if push:
                    push_entry(links, head, bucket_of(level, cx, cy, cz, mask), entry)
                else:
                    after = links[entry, 0]
                    before = links[entry, 1]
                    if before >= 0:
                        links[before, 0] = after
                    else:
                        head[bucket_of(level, cx, cy, cz, mask)] = after
                    if after >= 0:
                        links[after, 1] = before


@jit
def entry_in_cell(meta, entry, level, cx, cy, cz):
    """Whether ``entry`` (of a bucket list: a bucket may hold entries of several cells) is
    the cell ``(cx, cy, cz)`` of ``level``: entry ``ENTRIES * slot + k`` is the cell
    ``lo + (k & 1, (k >> 1) & 1, k >> 2)`` of its slot. Small enough to be inlined in the
    queries' walks (a helper that walked the list itself, loop and all, made a box query
    slower, ad hoc)."""
    slot = entry // ENTRIES
    k = entry % ENTRIES
    return (meta[slot, LEVEL] == level and meta[slot, LO] + (k & 1) == cx
            and meta[slot, LO + 1] + ((k >> 1) & 1) == cy and meta[slot, LO + 2] + (k >> 2) == cz)


@jit_inline
def write_shape(bounds, spheres, slot, new_bounds, new_spheres, i, boxes_only):
    """Row ``i`` of ``new_bounds`` and, unless ``boxes_only``, of ``new_spheres`` written
    into ``slot`` (``boxes_only``: a box or point, ``r = -1``). Returns whether the slot
    held a sphere before."""
    was_sphere = spheres[slot, 3] >= 0.0
    for axis in range(6):
        bounds[slot, axis] = new_bounds[i, axis]
    if boxes_only:
        spheres[slot, 3] = -1.0
    else:
        for axis in range(4):
            spheres[slot, axis] = new_spheres[i, axis]
    return was_sphere


@jit_inline
def has_cells(meta, slot, cell_range):
    """Whether ``slot`` has the level and cells ``cell_range = (level, lx, ly, lz, hx, hy,
    hz)`` (a free slot, level -1, has none)."""
    level, lx, ly, lz, hx, hy, hz = cell_range
    return (meta[slot, LEVEL] == level and meta[slot, LO] == lx and meta[slot, LO + 1] == ly
            and meta[slot, LO + 2] == lz and meta[slot, HI] == hx
            and meta[slot, HI + 1] == hy and meta[slot, HI + 2] == hz)


@jit_inline
def write_cells(meta, slot, cell_range):
    """``meta``'s level and cell range of ``slot`` set to ``cell_range``."""
    level, lx, ly, lz, hx, hy, hz = cell_range
    meta[slot, LEVEL] = level
    meta[slot, LO] = lx
    meta[slot, LO + 1] = ly
    meta[slot, LO + 2] = lz
    meta[slot, HI] = hx
    meta[slot, HI + 1] = hy
    meta[slot, HI + 2] = hz


@jit
def place_many(objects, cells, level_cells, status, changed, slots, new_bounds, new_spheres):
    """Write new shapes into ``slots`` and keep levels and bucket lists up to date; returns
    how many objects changed cells.

    Row ``i`` is ``new_bounds[i] = (x0, y0, z0, x1, y1, z1)``, the bounding box, and
    ``new_spheres[i] = (cx, cy, cz, r)``, with ``r < 0`` for a box or point (an empty
    ``new_spheres``, `state.NO_SPHERES`, makes every object a box or point). Bucket lists
    are touched only for objects whose cells change, and only while they are current
    (``status[0] == 1``); otherwise they are rebuilt before the next query that reads
    them. (The bundles are taken apart once here: passing them to a helper per object
    tripled the time; the helpers here are inlined by numba or take plain arrays.)
    """
    bounds = objects[BOUNDS]
    spheres = objects[SPHERES]
    meta = objects[META]
    inv_size = cells[INV_SIZE]
    level_count = cells[LEVEL_COUNT]
    links = cells[LINKS]
    head = cells[HEAD]
    linked = status[0] == 1
    boxes_only = new_spheres.shape[0] == 0
    n_changed = 0
    for i in range(slots.shape[0]):
        slot = slots[i]
        was_sphere = write_shape(bounds, spheres, slot, new_bounds, new_spheres, i, boxes_only)
        new_cells = object_cells(
            inv_size, new_bounds[i, 0], new_bounds[i, 1], new_bounds[i, 2], new_bounds[i, 3],
            new_bounds[i, 4], new_bounds[i, 5])
        # A new object's slot is free (level -1): never on its cells already.
        if has_cells(meta, slot, new_cells):
            if was_sphere != (spheres[slot, 3] >= 0.0):
                changed[slot] = 1  # its entries' sphere bit (see `set_cells`)
            continue
        n_changed += 1
        changed[slot] = 1
        set_cells(meta, links, head, level_count, level_cells, linked, slot, new_cells)
    return n_changed


@jit
def set_cells(meta, links, head, level_count, level_cells, linked, slot, cell_range):
    """Give ``slot`` the level and cells ``cell_range = (level, lx, ly, lz, hx, hy, hz)``:
    counts, the level's box of cells and (while ``linked``) the bucket lists follow. A slot
    that held an object until now (level >= 0; a free slot's is -1) leaves its old cells.

    The callers flag the slot in ``changed`` (`place_one`'s caller, from its result):
    `query_pairs` keeps its sort of the entries between calls and redoes only the entries
    of changed slots (`sort.update_sort`). Everything that decides an entry's place
    or code sets the flag: new cells or level, an insert, a removal (`release_many`), a box
    that becomes a sphere or back (the sphere bit of its codes).
    """
    if meta[slot, LEVEL] >= 0:
        if linked:
            relink_object(meta, links, head, slot, False)
        level_count[meta[slot, LEVEL]] -= 1
    write_cells(meta, slot, cell_range)
    level_count[cell_range[0]] += 1
    grow_level_cells(level_cells, cell_range)
    if linked:
        relink_object(meta, links, head, slot, True)


@jit
def place_one(objects, cells, level_cells, status, slot, shape):
    """`place_many` of one existing object, from scalars (the single-object move): ``shape``
    is ``(x0, y0, z0, x1, y1, z1, cx, cy, cz, radius)``, the bounding box and the sphere
    (``radius < 0``: a box or point). Written straight into the slot, without the
    temporary one-row arrays that `place_many` would need (they were half of this kernel's
    time). Returns whether the object changed cells or became a sphere or a box: the
    caller then flags the slot as changed (the flags are not passed: one more array adds
    its unboxing to every call, measured in a hot loop, medians)."""
    bounds = objects[BOUNDS]
    spheres = objects[SPHERES]
    meta = objects[META]
    x0, y0, z0, x1, y1, z1, cx, cy, cz, radius = shape
    was_sphere = spheres[slot, 3] >= 0.0
    bounds[slot, 0] = x0
    bounds[slot, 1] = y0
    bounds[slot, 2] = z0
    bounds[slot, 3] = x1
    bounds[slot, 4] = y1
    bounds[slot, 5] = z1
    spheres[slot, 0] = cx
    spheres[slot, 1] = cy
    spheres[slot, 2] = cz
    spheres[slot, 3] = radius
    new_cells = object_cells(cells[INV_SIZE], x0, y0, z0, x1, y1, z1)
    if has_cells(meta, slot, new_cells):
        return was_sphere != (radius >= 0.0)
    set_cells(meta, cells[LINKS], cells[HEAD], cells[LEVEL_COUNT], level_cells,
              status[0] == 1, slot, new_cells)
    return True


@jit
def place_rows(objects, cells, level_cells, status, changed, rows):
    """Single moves buffered by `DynamicHash.move`, applied in order: row ``k`` is
    ``(slot, x0, y0, z0, x1, y1, z1)``, a box or point (slots are exact in float64 below
    2**53). One `place_many` over the rows, which applies them one after the other, so a
    slot moved twice ends where its last move put it. (`place_one` per row, which unpacks
    the storage at every call, took 1.4 and 1.6 times as long a row in two ad hoc runs,
    65,536 random rows among 100,000 boxes.)"""
    m = rows.shape[0]
    slots = np.empty(m, np.int64)
    new_bounds = np.empty((m, 6))
    for k in range(m):
        slots[k] = np.int64(rows[k, 0])
        for axis in range(6):
            new_bounds[k, axis] = rows[k, axis + 1]
    place_many(objects, cells, level_cells, status, changed, slots, new_bounds,
               np.empty((0, 4)))


@jit
def box_rows(lower, upper, rows):
    """``rows[i] = (lower[i], upper[i])``, padded with zeros to three axes, for the bulk
    calls. Returns False (rows partly written) as soon as a value is not finite, beyond
    `cells.COORDINATE_LIMIT`, non-zero below `cells.COORDINATE_FLOOR` or ``lower > upper``:
    the caller then raises with the full checks. One pass and a reused ``rows``: the NumPy
    checks and fresh arrays took several times as long as the whole bulk move of 100,000
    boxes."""
    n_dims = lower.shape[1]
    for i in range(lower.shape[0]):
        for axis in range(3):
            low = 0.0
            high = 0.0
            if axis < n_dims:
                low = lower[i, axis]
                high = upper[i, axis]
                # NaN fails every comparison.
                if not (-COORDINATE_LIMIT <= low <= high <= COORDINATE_LIMIT):
                    return False
                if (abs(low) < COORDINATE_FLOOR and low != 0.0
                        or abs(high) < COORDINATE_FLOOR and high != 0.0):
                    return False
            rows[i, axis] = low
            rows[i, axis + 3] = high
    return True


@jit
def release_many(objects, cells, status, changed, slots):
    """Take the objects in ``slots`` out of their cells and mark the slots free."""
    meta = objects[META]
    level_count = cells[LEVEL_COUNT]
    links = cells[LINKS]
    head = cells[HEAD]
    for i in range(slots.shape[0]):
        slot = slots[i]
        if status[0] == 1:
            relink_object(meta, links, head, slot, False)
        level_count[meta[slot, LEVEL]] -= 1
        meta[slot, LEVEL] = -1
        changed[slot] = 1


@jit_inline
def grow_level_cells(level_cells, cell_range):
    """Widen the box of cells (``(lo_x, lo_y, lo_z, hi_x, hi_y, hi_z)``) of the level of
    ``cell_range = (level, lx, ly, lz, hx, hy, hz)`` to hold its cells. The box only grows
    between rebuilds (`relink_all`), so it may be larger than the cells in use: rays then
    cross some empty cells."""
    level, lx, ly, lz, hx, hy, hz = cell_range
    level_cells[level, 0] = min(level_cells[level, 0], lx)
    level_cells[level, 1] = min(level_cells[level, 1], ly)
    level_cells[level, 2] = min(level_cells[level, 2], lz)
    level_cells[level, 3] = max(level_cells[level, 3], hx)
    level_cells[level, 4] = max(level_cells[level, 4], hy)
    level_cells[level, 5] = max(level_cells[level, 5], hz)


@jit
def reset_level_cells(level_cells):
    """Empty boxes of cells (lower above upper)."""
    level_cells[:, :3] = np.iinfo(np.int64).max
    level_cells[:, 3:] = np.iinfo(np.int64).min


@jit
def link_range(meta, links, head, bucket_lo, bucket_hi):
    """Push every entry whose bucket lies in ``bucket_lo .. bucket_hi - 1`` onto its list,
    objects in slot order, on lists emptied before (``head`` -1 there).

    Each list comes out as `relink_object` called slot after slot leaves it, so parts of
    the buckets can be linked on separate threads with the same result. The loops are
    written out rather than calling `relink_object` per object: a call that passes arrays
    costs an atomic reference-count update per array, and those were half of a relink
    (100,000 boxes, one thread, ad hoc); `push_entry`, inlined by numba, costs no call.
    """
    mask = head.shape[0] - 1
    for slot in range(meta.shape[0]):
        level = meta[slot, LEVEL]
        if level < 0:
            continue
        lx, ly, lz = meta[slot, LO], meta[slot, LO + 1], meta[slot, LO + 2]
        for cz in range(lz, meta[slot, HI + 2] + 1):
            for cy in range(ly, meta[slot, HI + 1] + 1):
                for cx in range(lx, meta[slot, HI] + 1):
                    bucket = bucket_of(level, cx, cy, cz, mask)
                    if bucket < bucket_lo or bucket >= bucket_hi:
                        continue
                    push_entry(links, head, bucket,
                               ENTRIES * slot + (cx - lx) + 2 * (cy - ly) + 4 * (cz - lz))


@jit
def fit_level_cells(meta, level_cells):
    """The boxes of cells of every level, exactly, from ``meta``."""
    reset_level_cells(level_cells)
    for slot in range(meta.shape[0]):
        level = meta[slot, LEVEL]
        if level < 0:
            continue
        for axis in range(3):
            level_cells[level, axis] = min(level_cells[level, axis], meta[slot, LO + axis])
            level_cells[level, axis + 3] = max(level_cells[level, axis + 3],
                                               meta[slot, HI + axis])


@jit
def relink_all(objects, cells, level_cells):
    """Rebuild every bucket list, and the boxes of cells exactly, from ``meta``."""
    meta = objects[META]
    head = cells[HEAD]
    head[:] = -1
    link_range(meta, cells[LINKS], head, 0, head.shape[0])
    fit_level_cells(meta, level_cells)
