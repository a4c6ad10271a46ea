"""Overlapping pairs of the dynamic hash (the broad phase), and the shape tests.

Sort. Every (object, cell) entry is sorted by bucket with a counting sort
(`sort.py`; kept between calls and updated for the objects that changed cells), so
that a bucket is one contiguous run. An entry is a code, ``slot <<
10 | level << 4 | sphere << 3 | offset``: ``offset`` has bit ``axis`` set when the cell is
not the object's lowest on that axis. Buckets keep space local: a bucket is a hash of the
tile of 8 x 8 cells of one plane plus the cell's place in the tile (`tile_bucket`), so
neighbouring cells sit in neighbouring buckets, and the objects met one after the other in
the sweep look up the same coarse cells. The tile's shape is measured by
`benchmarks/bench_ab.py` (the two versions taking turns; workloads ``dynamic1``,
``dynamic10``, ``dynamic100`` and, in 3-D, ``dynamic3d10``): against 4 x 4 x 4 tiles, a
step of 8 x 8 x 1 took 0.91 times as long in 2-D and 0.80 times in 3-D; in 3-D, 8 x 8 x 2,
8 x 8 x 4, 8 x 8 x 8 and 16 x 16 x 4 tiles were all slower than 8 x 8 x 1 (why deep tiles
cost so much in 3-D is not known), and 16 x 16 tiles slowed the 2-D steps. Each run's
bounding boxes are copied next to the codes (`records`, chunk by chunk in the sweep), so
the sweep reads memory in order. A candidate whose box overlaps is checked to be in the
same cell (a bucket may hold several) with its lowest cell recomputed from its record,
exactly as `object_cells` computed it; ``meta`` (scattered rows, a cache miss each) is read
only for the category filters, and only when the sort saw an object with other bits than
all. The box tests are written out in each loop: moved into shared helpers (`numba.njit`
functions taking the records and a box), they made `query_pairs` on the benchmark's boxes
about 30% slower (one core, the two versions alternately in one process). The cell test
of a run's entry (`in_cell`) and the last tests of a pair (`kept_pair`) are helpers that
numba inlines: no call.

Same level: two objects sharing cell ``c`` are compared there, and the pair is reported
only in the lowest cell the two share, ``max(lo_a, lo_b)`` per axis, exactly when their
offsets have no bit in common: once, with no hash set. Across levels, for each pair of
non-empty levels (fine, coarse), one of two directions (`choose_inverted`):

- from the coarse side (`coarse_down_pairs`): each coarse object (its entry in its lowest
  cell, in a second, small sort of the objects above the lowest level) enumerates the
  fine cells its box covers, with offset bits relative to its lowest fine cell, and reads
  their runs in the main sort, which holds every level's entries; a fine entry of that
  cell is reported when the bits have nothing in common, the same-level rule. An object
  covering more than ``n_entries / scan_ratio`` fine cells (a box larger than the world)
  reads every entry instead and takes each fine object's lowest entry: O(n), never
  O(world / cell);
- from the fine side (`cross_level_pairs`): each fine object (its lowest entry) looks up
  the coarse cells it covers in the small sort, with the same bit test.

The coarse side runs when its probes (fine cells covered, a scan counted as
``n_entries / scan_ratio``) are at most ``invert_weight`` times the fine level's objects:
the fine side probes at least one cell per object, but its coarse cells hold more objects
each. On `benchmarks/bench_dynamic.py`'s 100,000 2-D boxes (8,900 coarse objects) the
coarse side probes 157,000 cells and meets 211,000 candidates, the fine side 190,000 and
428,000, and the coarse side takes about half the time (one core). In 3-D a coarse object
covers more fine cells (level 2 over 0: up to 17^3), yet the coarse side still wins
(100,000 3-D boxes: half the time with a weight of 8, which inverts two pairs of levels
that a weight of 2 keeps on the fine side); 2,000 fine objects under 50,000 coarse ones
are faster from the fine side (the whole query in about three quarters of the time), which
the weight 8 keeps. The coarse side's time is mostly cache misses on ``codes`` and
``records``: hashing the 157,000 cells and reading their starts takes about an eighth of
it, reading their codes nearly a third, the box tests on the records half, the cell test
under a tenth (one core, medians of 11).

Threads. The buckets are cut into `N_CHUNKS` fixed chunks; a chunk copies its records,
sweeps its buckets and does the fine-side lookups of its entries, writing into its own
region of the output (`sweep_chunk`). Once every chunk has copied its records, chunk ``c``
does the coarse-side lookups of the ``c``-th `N_CHUNKS` part of the small sort and appends
to its region (`down_chunk`). The chunks are the same for any thread count, so the output
is too (`pairs_chunks` runs them on all threads; the engine runs it on one thread below
``PARALLEL_MIN_ENTRIES`` entries, `dynamic/_pair_search.py`: a sequential copy of the
driver would be no faster and cost about a second of cold compile of its own).

The kernels take the bundles of `state.py` as plain tuples: the objects, the entry sort
(`state.EntrySort`), the output (`state.ChunkPairs`) and the plan of the search
(`state.PairPlan`, made by `pairs_chunks`); a chunk writes to its region of the output,
a view whose length bounds what it writes.

Shapes: boxes are closed (touching counts as overlapping); a sphere is tested with its
bounding box first and then exactly (centre distances, or the squared distance from the
centre to a box), with the arithmetic of `box_distance2` and `center_distance2`.
"""

from __future__ import annotations

import numba
import numpy as np

from ..._config import jit, jit_inline, jit_parallel
from ..._kernels.cells import floor_to_int, hash_cell
from ..._kernels.indirect import kernel_caller
from ..._kernels.shapes import shapes_overlap
from .state import (
    BOUNDS,
    BUCKET_START,
    COARSE_CODES,
    COARSE_RECORDS,
    COARSE_START,
    CODES,
    COUNTS,
    FILTERED,
    INV_SIZE,
    INVERTED,
    LEVEL_COUNT,
    META,
    PAIRS,
    PLAN_INV_SIZE,
    RECORDS,
    SCAN_RATIO,
    SPHERES,
    USED_LEVELS,
)
from .storage import CATEGORY, LEVEL_SALT, MASK

#: Every category bit (the default category and mask; see `dynamic/_validation.py`).
ALL_BITS = 0xFFFFFFFF
#: Entry codes (see the module docstring): ``slot << SLOT_SHIFT | level << LEVEL_SHIFT |
#: sphere | offset``.
LOWEST_BITS = 7
SPHERE_BIT = 8
LEVEL_SHIFT = 4
LEVEL_FIELD = 63
SLOT_SHIFT = 10
#: A tile of `tile_bucket` is ``2**TILE_BITS`` cells on each of the x and y axes, one on z.
TILE_BITS = 3
TILE_MASK = (1 << TILE_BITS) - 1
#: Fixed chunks of the sweep (a multiple of any likely thread count, small enough that the
#: per-chunk output regions stay cheap).
N_CHUNKS = 16


@jit
def tile_bucket(level, cx, cy, cz, mask):
    """Bucket of cell ``(cx, cy, cz)`` of ``level``: a hash of its tile (`TILE_BITS`)
    plus its place in the tile, so the cells of a tile take consecutive buckets."""
    base = hash_cell(cx >> TILE_BITS, cy >> TILE_BITS, cz ^ (level * LEVEL_SALT), mask)
    return (base + (cx & TILE_MASK) + ((cy & TILE_MASK) << TILE_BITS)) & mask


@jit
def copy_records(codes, bounds, records, begin, end):
    """``records[e] = bounds[slot of codes[e]]`` for ``begin <= e < end``."""
    # Unsigned indices (no negative-index wrap-around code) and the six loads before the
    # six stores take about a third off the time for the benchmark's 192,000 entries (one
    # core, medians of 21, both versions alternately; the loads are cache misses on
    # ``bounds``).
    for e in range(np.uint64(begin), np.uint64(end)):
        slot = np.uint64(codes[e]) >> np.uint64(SLOT_SHIFT)
        x0, y0, z0 = bounds[slot, 0], bounds[slot, 1], bounds[slot, 2]
        x1, y1, z1 = bounds[slot, 3], bounds[slot, 4], bounds[slot, 5]
        records[e, 0], records[e, 1], records[e, 2] = x0, y0, z0
        records[e, 3], records[e, 4], records[e, 5] = x1, y1, z1


@jit
def same_level_pairs(objects, plan, sort, b_begin, b_end, region, n_pairs):
    """Pairs within the buckets ``b_begin .. b_end - 1`` (see the module docstring),
    written to ``region`` from row ``n_pairs`` on; returns the new ``n_pairs``, counting
    on past the region's end without writing."""
    inv_size = plan[PLAN_INV_SIZE]
    bucket_start = sort[BUCKET_START]
    codes = sort[CODES]
    records = sort[RECORDS]
    for bucket in range(b_begin, b_end):
        start = bucket_start[bucket]
        end = bucket_start[bucket + 1]
        if end - start < 2:
            continue
        # Unsigned indices: no negative-index wrap-around code in the loops (see cells.py).
        for i in range(np.uint64(start), np.uint64(end - 1)):
            code_a = codes[i]
            ax0, ay0, az0 = records[i, 0], records[i, 1], records[i, 2]
            ax1, ay1, az1 = records[i, 3], records[i, 4], records[i, 5]
            for j in range(i + np.uint64(1), np.uint64(end)):
                code_b = codes[j]
                # One branch for the offsets and the boxes (closed): fewer mispredictions.
                if ((code_a & code_b & LOWEST_BITS) != 0
                        or max(ax0, records[j, 0]) > min(ax1, records[j, 3])
                        or max(ay0, records[j, 1]) > min(ay1, records[j, 4])
                        or max(az0, records[j, 2]) > min(az1, records[j, 5])):
                    continue
                if ((code_a ^ code_b) >> LEVEL_SHIFT) & LEVEL_FIELD != 0:
                    continue
                # Same cell (a bucket may hold several). The lowest cells are those of
                # `object_cells`, recomputed from the records: reading them from ``meta``
                # cost a cache miss per candidate.
                inv = inv_size[(code_a >> LEVEL_SHIFT) & LEVEL_FIELD]
                if (floor_to_int(ax0 * inv) + (code_a & 1)
                        != floor_to_int(records[j, 0] * inv) + (code_b & 1)
                        or floor_to_int(ay0 * inv) + ((code_a >> 1) & 1)
                        != floor_to_int(records[j, 1] * inv) + ((code_b >> 1) & 1)
                        or floor_to_int(az0 * inv) + ((code_a >> 2) & 1)
                        != floor_to_int(records[j, 2] * inv) + ((code_b >> 2) & 1)):
                    continue
                n_pairs = kept_pair(objects, plan, code_a >> SLOT_SHIFT, code_b >> SLOT_SHIFT,
                                    (code_a | code_b) & SPHERE_BIT, region, n_pairs)
    return n_pairs


@jit_inline
def kept_pair(objects, plan, a, b, any_sphere, region, n_pairs):
    """The last tests of a candidate pair whose boxes overlap in the cell that reports it:
    each one's category meets the other's mask (only tested when ``plan.filtered``: some
    object has other bits than all), and with a sphere among them the shapes overlap. A
    kept pair is written to row ``n_pairs`` of ``region`` while there is room; returns the
    new ``n_pairs``.

    It runs once per candidate pair: inlined by numba, so that passing the bundles costs
    nothing (called, with the `state.Objects` bundle rather than its three arrays, the 3-D
    pair search took about 3% longer, ``benchmarks/bench_ab.py``, workload
    ``dynamic3d10``)."""
    meta = objects[META]
    if plan[FILTERED] and ((meta[a, CATEGORY] & meta[b, MASK]) == 0
                           or (meta[b, CATEGORY] & meta[a, MASK]) == 0):
        return n_pairs
    if any_sphere and not shapes_overlap(objects[BOUNDS], objects[SPHERES], a, b):
        return n_pairs
    if n_pairs < region.shape[0]:
        region[n_pairs, 0] = a
        region[n_pairs, 1] = b
    return n_pairs + 1


@jit_inline
def in_cell(records, j, code, inv, cx, cy, cz):
    """Whether the entry ``j`` of a sorted run (``code``, its object's box ``records[j]``)
    is the cell ``(cx, cy, cz)`` of the level of inverse cell size ``inv``: its object's
    lowest cell, recomputed from the record exactly as `object_cells` computed it, plus
    the entry's offset bits (a bucket may hold several cells)."""
    return (floor_to_int(records[j, 0] * inv) + (code & 1) == cx
            and floor_to_int(records[j, 1] * inv) + ((code >> 1) & 1) == cy
            and floor_to_int(records[j, 2] * inv) + ((code >> 2) & 1) == cz)


@jit
def cross_level_pairs(objects, plan, sort, e_begin, e_end, region, n_pairs):
    """Pairs of the objects whose lowest entry is in ``e_begin .. e_end - 1`` with the
    objects of coarser levels, for the pairs of levels that do not run ``inverted`` (see
    the module docstring); output as `same_level_pairs`."""
    inv_size = plan[PLAN_INV_SIZE]
    used_levels = plan[USED_LEVELS]
    inverted = plan[INVERTED]
    codes = sort[CODES]
    records = sort[RECORDS]
    coarse_start = sort[COARSE_START]
    coarse_codes = sort[COARSE_CODES]
    coarse_records = sort[COARSE_RECORDS]
    coarse_mask = coarse_start.shape[0] - 2
    top = used_levels[used_levels.shape[0] - 1]
    for e in range(e_begin, e_end):
        code_a = codes[e]
        level_a = (code_a >> LEVEL_SHIFT) & LEVEL_FIELD
        if code_a & LOWEST_BITS or level_a >= top:
            continue
        a = code_a >> SLOT_SHIFT
        sphere_a = code_a & SPHERE_BIT
        ax0, ay0, az0 = records[e, 0], records[e, 1], records[e, 2]
        ax1, ay1, az1 = records[e, 3], records[e, 4], records[e, 5]
        for t in range(used_levels.shape[0]):
            level = used_levels[t]
            if level <= level_a or inverted[level_a, level] != 0:
                continue
            inv = inv_size[level]
            lx, ly, lz = floor_to_int(ax0 * inv), floor_to_int(ay0 * inv), floor_to_int(az0 * inv)
            hx, hy, hz = floor_to_int(ax1 * inv), floor_to_int(ay1 * inv), floor_to_int(az1 * inv)
            for cz in range(lz, hz + 1):
                for cy in range(ly, hy + 1):
                    for cx in range(lx, hx + 1):
                        bits_a = (cx != lx) + 2 * (cy != ly) + 4 * (cz != lz) + sphere_a
                        bucket = tile_bucket(level, cx, cy, cz, coarse_mask)
                        for j in range(np.uint64(coarse_start[bucket]),
                                       np.uint64(coarse_start[bucket + 1])):
                            code_b = coarse_codes[j]
                            box = coarse_records
                            if ((bits_a & code_b & LOWEST_BITS) != 0
                                    or max(ax0, box[j, 0]) > min(ax1, box[j, 3])
                                    or max(ay0, box[j, 1]) > min(ay1, box[j, 4])
                                    or max(az0, box[j, 2]) > min(az1, box[j, 5])):
                                continue
                            if ((code_b >> LEVEL_SHIFT) & LEVEL_FIELD != level
                                    or not in_cell(box, j, code_b, inv, cx, cy, cz)):
                                continue
                            n_pairs = kept_pair(objects, plan, a, code_b >> SLOT_SHIFT,
                                                (bits_a | code_b) & SPHERE_BIT, region, n_pairs)
    return n_pairs


@jit
def covered_cells(box, inv):
    """Cell range of the box ``box = (x0, y0, z0, x1, y1, z1)`` on the level of cell size
    ``1 / inv``, and its number of cells as a float (a huge box's count would overflow
    int64): ``(lx, ly, lz, hx, hy, hz, n_cells)``."""
    x0, y0, z0, x1, y1, z1 = box
    lx, ly, lz = floor_to_int(x0 * inv), floor_to_int(y0 * inv), floor_to_int(z0 * inv)
    hx, hy, hz = floor_to_int(x1 * inv), floor_to_int(y1 * inv), floor_to_int(z1 * inv)
    n_cells = ((float(hx) - float(lx) + 1.0) * (float(hy) - float(ly) + 1.0)
               * (float(hz) - float(lz) + 1.0))
    return lx, ly, lz, hx, hy, hz, n_cells


@jit
def choose_inverted(used_levels, level_count, inv_size, n_entries, coarse_codes,
                    coarse_records, invert_weight, scan_ratio):
    """Per pair of levels ``(fine, coarse)``, whether `coarse_down_pairs` finds its pairs
    (1) or `cross_level_pairs` does (0). The inverted lookup probes the finer cells each
    coarse object covers (an object covering more than ``n_entries / scan_ratio`` scans
    the entries instead: as costly as that many probes); it runs when those probes are at
    most ``invert_weight`` times the finer level's objects (the probes of the lookup from
    the finer side, at least one each, which meet more candidates each)."""
    n_levels = level_count.shape[0]
    probes = np.zeros((n_levels, n_levels))
    scan_cost = n_entries / scan_ratio
    for k in range(coarse_codes.shape[0]):
        code_b = coarse_codes[k]
        if code_b & LOWEST_BITS:
            continue
        level_b = (code_b >> LEVEL_SHIFT) & LEVEL_FIELD
        box_b = (coarse_records[k, 0], coarse_records[k, 1], coarse_records[k, 2],
                 coarse_records[k, 3], coarse_records[k, 4], coarse_records[k, 5])
        for t in range(used_levels.shape[0]):
            level = used_levels[t]
            if level >= level_b:
                break
            n_cells = covered_cells(box_b, inv_size[level])[6]
            probes[level, level_b] += min(n_cells, scan_cost)
    inverted = np.zeros((n_levels, n_levels), np.uint8)
    for fine in range(n_levels):
        for coarse in range(fine + 1, n_levels):
            if probes[fine, coarse] <= invert_weight * level_count[fine]:
                inverted[fine, coarse] = 1
    return inverted


@jit
def coarse_down_pairs(objects, plan, sort, c_begin, c_end, region, n_pairs):
    """Pairs of the objects whose lowest entry is in ``coarse_codes[c_begin:c_end]`` with
    the objects of finer levels, for the pairs of levels that run ``inverted``: the coarse
    object enumerates the finer cells it covers and reads their runs of ``codes`` (every
    record copied); output as `same_level_pairs`."""
    inv_size = plan[PLAN_INV_SIZE]
    used_levels = plan[USED_LEVELS]
    inverted = plan[INVERTED]
    bucket_start = sort[BUCKET_START]
    codes = sort[CODES]
    records = sort[RECORDS]
    coarse_codes = sort[COARSE_CODES]
    coarse_records = sort[COARSE_RECORDS]
    mask = bucket_start.shape[0] - 2
    n_entries = bucket_start[mask + 1]
    scan_above = n_entries / plan[SCAN_RATIO]
    for k in range(c_begin, c_end):
        code_b = coarse_codes[k]
        if code_b & LOWEST_BITS:
            continue
        level_b = (code_b >> LEVEL_SHIFT) & LEVEL_FIELD
        b = code_b >> SLOT_SHIFT
        sphere_b = code_b & SPHERE_BIT
        bx0, by0, bz0 = coarse_records[k, 0], coarse_records[k, 1], coarse_records[k, 2]
        bx1, by1, bz1 = coarse_records[k, 3], coarse_records[k, 4], coarse_records[k, 5]
        for t in range(used_levels.shape[0]):
            level = used_levels[t]
            if level >= level_b:
                break
            if inverted[level, level_b] == 0:
                continue
            inv = inv_size[level]
            lx, ly, lz, hx, hy, hz, n_cells = covered_cells((bx0, by0, bz0, bx1, by1, bz1), inv)
            if n_cells > scan_above:
                # Huge: every lowest entry of the level instead (one each per object).
                for j in range(np.uint64(0), np.uint64(n_entries)):
                    code_a = codes[j]
                    if ((code_a & LOWEST_BITS) != 0
                            or (code_a >> LEVEL_SHIFT) & LEVEL_FIELD != level
                            or max(bx0, records[j, 0]) > min(bx1, records[j, 3])
                            or max(by0, records[j, 1]) > min(by1, records[j, 4])
                            or max(bz0, records[j, 2]) > min(bz1, records[j, 5])):
                        continue
                    n_pairs = kept_pair(objects, plan, code_a >> SLOT_SHIFT, b,
                                        (sphere_b | code_a) & SPHERE_BIT, region, n_pairs)
                continue
            for cz in range(lz, hz + 1):
                for cy in range(ly, hy + 1):
                    for cx in range(lx, hx + 1):
                        bits_b = (cx != lx) + 2 * (cy != ly) + 4 * (cz != lz) + sphere_b
                        bucket = tile_bucket(level, cx, cy, cz, mask)
                        for j in range(np.uint64(bucket_start[bucket]),
                                       np.uint64(bucket_start[bucket + 1])):
                            code_a = codes[j]
                            if ((bits_b & code_a & LOWEST_BITS) != 0
                                    or (code_a >> LEVEL_SHIFT) & LEVEL_FIELD != level
                                    or max(bx0, records[j, 0]) > min(bx1, records[j, 3])
                                    or max(by0, records[j, 1]) > min(by1, records[j, 4])
                                    or max(bz0, records[j, 2]) > min(bz1, records[j, 5])):
                                continue
                            if not in_cell(records, j, code_a, inv, cx, cy, cz):
                                continue
                            n_pairs = kept_pair(objects, plan, code_a >> SLOT_SHIFT, b,
                                                (bits_b | code_a) & SPHERE_BIT, region, n_pairs)
    return n_pairs


@jit
def sweep_chunk(chunk, objects, plan, sort, out):
    """First pass of chunk ``chunk``: its buckets' records, same-level pairs and the
    cross-level pairs found from the finer side, written to its region of the
    `state.ChunkPairs` ``out`` (``counts[chunk]`` found)."""
    bucket_start = sort[BUCKET_START]
    pairs = out[PAIRS]
    counts = out[COUNTS]
    n_buckets = bucket_start.shape[0] - 1
    per_chunk = pairs.shape[0] // N_CHUNKS
    b_begin = chunk * n_buckets // N_CHUNKS
    b_end = (chunk + 1) * n_buckets // N_CHUNKS
    e_begin = bucket_start[b_begin]
    e_end = bucket_start[b_end]
    copy_records(sort[CODES], objects[BOUNDS], sort[RECORDS], e_begin, e_end)
    region = pairs[chunk * per_chunk : (chunk + 1) * per_chunk]
    n = same_level_pairs(objects, plan, sort, b_begin, b_end, region, 0)
    if sort[COARSE_CODES].shape[0] > 0 and plan[USED_LEVELS].shape[0] > 1:
        n = cross_level_pairs(objects, plan, sort, e_begin, e_end, region, n)
    counts[chunk] = n


@jit
def down_chunk(chunk, objects, plan, sort, out):
    """Second pass of chunk ``chunk`` (after every chunk's first): the inverted lookups of
    its share of the coarse entries, appended to its region."""
    pairs = out[PAIRS]
    counts = out[COUNTS]
    per_chunk = pairs.shape[0] // N_CHUNKS
    n_coarse = sort[COARSE_CODES].shape[0]
    region = pairs[chunk * per_chunk : (chunk + 1) * per_chunk]
    counts[chunk] = coarse_down_pairs(objects, plan, sort, chunk * n_coarse // N_CHUNKS,
                                      (chunk + 1) * n_coarse // N_CHUNKS, region, counts[chunk])


_check_sweep, _call_sweep = kernel_caller(sweep_chunk)
_check_down, _call_down = kernel_caller(down_chunk)


@jit_parallel
def pairs_chunks(objects, cells, sort, out, filtered, used_levels, settings, targets):
    """Every chunk's first pass (`sweep_chunk`), then every chunk's second (`down_chunk`),
    the chunks on all threads; the output is the same for any thread count. ``sort`` is
    the `state.EntrySort` (its coarse codes cut to those in use); the `state.ChunkPairs`
    ``out`` holds `N_CHUNKS` regions of equal length; chunk ``c`` found ``counts[c]``
    pairs (its region holds the first of them when it is too short: the caller grows it
    and calls again). ``used_levels`` are the non-empty levels; ``settings`` is
    ``(invert_weight, scan_ratio)`` (see `choose_inverted`).

    `sweep_chunk` and `down_chunk` are called at ``targets = (sweep_target, down_target)``
    (see `indirect`): called directly, their code is compiled again into this driver,
    seconds more of a cold compile."""
    inv_size = cells[INV_SIZE]
    invert_weight, scan_ratio = settings
    sweep_target = targets[0]
    down_target = targets[1]
    bucket_start = sort[BUCKET_START]
    inverted = choose_inverted(used_levels, cells[LEVEL_COUNT], inv_size,
                               bucket_start[bucket_start.shape[0] - 1], sort[COARSE_CODES],
                               sort[COARSE_RECORDS], invert_weight, scan_ratio)
    plan = (inv_size, used_levels, inverted, filtered, scan_ratio)  # a `state.PairPlan`
    first = np.int64(0)
    _check_sweep(sweep_target, (first, objects, plan, sort, out))
    _check_down(down_target, (first, objects, plan, sort, out))
    # `prange` indices are unsigned: the chunk is passed as int64, the type of the
    # targets (`_pair_search.chunk_targets`).
    for chunk in numba.prange(N_CHUNKS):
        _call_sweep(sweep_target, (np.int64(chunk), objects, plan, sort, out))
    for chunk in numba.prange(N_CHUNKS):
        _call_down(down_target, (np.int64(chunk), objects, plan, sort, out))


@jit
def chunk_pairs_as_ids(pairs, counts, slot_key):
    """The pairs the chunks wrote (chunk ``c`` in rows ``c * per_chunk`` on, ``counts[c]``
    of them), in chunk order, as integer ids with the smaller first: shape (n_pairs, 2).

    One pass, in place of NumPy's concatenation, id lookup and columnwise minimum and
    maximum, a pass and a temporary array each.
    """
    per_chunk = pairs.shape[0] // counts.shape[0]
    out = np.empty((counts.sum(), 2), np.int64)
    row = 0
    for chunk in range(counts.shape[0]):
        base = chunk * per_chunk
        for k in range(base, base + counts[chunk]):
            a = slot_key[pairs[k, 0]]
            b = slot_key[pairs[k, 1]]
            out[row, 0] = min(a, b)
            out[row, 1] = max(a, b)
            row += 1
    return out
