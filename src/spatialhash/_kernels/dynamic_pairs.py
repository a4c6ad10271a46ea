"""Overlapping pairs of the dynamic hash (the broad phase), and the shape tests.

The pairs query sorts all entries (object, cell) into buckets with a counting sort, like
the batch grid's build, so that the sweep reads each bucket as one contiguous slice.

Same level: two objects sharing cell ``c`` are compared there. Each object's entry ``k``
holds its offset from its lowest cell, one bit per axis, so the pair is reported only in
the lowest cell the two share, ``max(lo_a, lo_b)`` per axis, exactly when
``k_a & k_b == 0``: once, with no hash set. Across levels: each object looks up the cells
it covers on every coarser non-empty level and meets the objects stored there; the same
bit test on its own offset within that range reports each pair once.

Shapes: boxes are closed (touching counts as overlapping); a sphere is tested with its
bounding box first and then exactly (centre distances, or the squared distance from the
centre to a box), with the arithmetic of `box_distance2` and `center_distance2`.
"""

from __future__ import annotations

import numpy as np

from .._config import jit
from .cells import floor_to_int
from .dynamic import CATEGORY, HI, LEVEL, LO, MASK, bucket_of


@jit
def box_distance2(px, py, pz, bounds, slot):
    """Squared distance from point ``p`` to the closed box of ``slot`` (0 inside)."""
    total = 0.0
    for axis, p in enumerate((px, py, pz)):
        lower = bounds[slot, axis]
        upper = bounds[slot, axis + 3]
        if p < lower:
            d = lower - p
        elif p > upper:
            d = p - upper
        else:
            d = 0.0
        total += d * d
    return total


@jit
def center_distance2(px, py, pz, spheres, slot):
    """Squared distance from point ``p`` to the centre of sphere ``slot``."""
    dx = px - spheres[slot, 0]
    dy = py - spheres[slot, 1]
    dz = pz - spheres[slot, 2]
    return dx * dx + dy * dy + dz * dz


@jit
def shapes_overlap(bounds, spheres, a, b):
    """Whether objects ``a`` and ``b`` overlap: bounding boxes (closed), then spheres."""
    for axis in range(3):
        if bounds[a, axis] > bounds[b, axis + 3] or bounds[b, axis] > bounds[a, axis + 3]:
            return False
    radius_a = spheres[a, 3]
    radius_b = spheres[b, 3]
    if radius_a < 0.0 and radius_b < 0.0:
        return True
    if radius_a >= 0.0 and radius_b >= 0.0:
        reach = radius_a + radius_b
        return center_distance2(spheres[a, 0], spheres[a, 1], spheres[a, 2], spheres,
                                b) <= reach * reach
    if radius_a >= 0.0:
        return box_distance2(spheres[a, 0], spheres[a, 1], spheres[a, 2], bounds,
                             b) <= radius_a * radius_a
    return box_distance2(spheres[b, 0], spheres[b, 1], spheres[b, 2], bounds,
                         a) <= radius_b * radius_b


#: An entry in a sorted bucket is ``slot * CODE_STRIDE + bits``: bit ``axis`` (0..2) is set
#: when its cell is not the object's lowest on that axis, `SPHERE_BIT` for a sphere.
CODE_STRIDE = 16
LOWEST_BITS = 7
SPHERE_BIT = 8


@jit
def count_entries(meta, min_level, bucket_start):
    """Count the entries of the objects at ``min_level`` or above per bucket.

    ``bucket_start`` (``n_buckets + 1``, a power of two plus one) receives the running
    counts (see `fill_entries`); returns the number of entries.
    """
    n_buckets = bucket_start.shape[0] - 1
    mask = n_buckets - 1
    bucket_start[:] = 0
    for slot in range(meta.shape[0]):
        level = meta[slot, LEVEL]
        if level < min_level:
            continue
        for cz in range(meta[slot, LO + 2], meta[slot, HI + 2] + 1):
            for cy in range(meta[slot, LO + 1], meta[slot, HI + 1] + 1):
                for cx in range(meta[slot, LO], meta[slot, HI] + 1):
                    bucket_start[bucket_of(level, cx, cy, cz, mask) + 1] += 1
    for b in range(n_buckets):
        bucket_start[b + 1] += bucket_start[b]
    return bucket_start[n_buckets]


@jit
def fill_entries(meta, spheres, min_level, bucket_start, codes):
    """Counting sort by bucket of the entries counted by `count_entries`.

    Afterwards bucket ``b`` holds ``codes[bucket_start[b]:bucket_start[b + 1]]`` (see
    `CODE_STRIDE`), in increasing slot order. Only the small codes are scattered: copying
    each entry's box and cell along (a 112-byte record) made the sort five times slower,
    and the sweep's reads of ``meta`` and ``bounds`` by slot are independent loads that
    overlap. The buffers are the caller's and reused between calls (fresh arrays of this
    size cost more in page faults than the sort itself).
    """
    n_buckets = bucket_start.shape[0] - 1
    mask = n_buckets - 1
    for slot in range(meta.shape[0]):
        level = meta[slot, LEVEL]
        if level < min_level:
            continue
        sphere = SPHERE_BIT if spheres[slot, 3] >= 0.0 else 0
        for cz in range(meta[slot, LO + 2], meta[slot, HI + 2] + 1):
            for cy in range(meta[slot, LO + 1], meta[slot, HI + 1] + 1):
                for cx in range(meta[slot, LO], meta[slot, HI] + 1):
                    b = bucket_of(level, cx, cy, cz, mask)
                    e = bucket_start[b]
                    bucket_start[b] = e + 1
                    codes[e] = (slot * CODE_STRIDE + (cx != meta[slot, LO])
                                + 2 * (cy != meta[slot, LO + 1]) + 4 * (cz != meta[slot, LO + 2])
                                + sphere)
    # Each start was advanced to the next bucket's start: shift back.
    for b in range(n_buckets, 0, -1):
        bucket_start[b] = bucket_start[b - 1]
    bucket_start[0] = 0


@jit
def overlap_pairs(bounds, spheres, meta, inv_size, level_count, scratch, pairs):
    """Every pair of overlapping objects, once, as slots written to ``pairs``.

    ``scratch = (bucket_start, codes, coarse_start, coarse_codes)`` are reused buffers (see
    `fill_entries`). Returns ``(n_entries, n_coarse, n_pairs)``: when a buffer is too small
    for the first two nothing else is done; when ``pairs`` is, only its first rows are
    written; the caller grows the buffers and calls again.

    Category filters: a pair is kept when ``category_a & mask_b`` and
    ``category_b & mask_a`` are both non-zero. The tests are written out in the loops:
    helpers taking arrays are not inlined, and their reference counting tripled the time.
    """
    bucket_start, codes, coarse_start, coarse_codes = scratch
    n_levels = level_count.shape[0]
    lowest_level = 0
    while lowest_level < n_levels - 1 and level_count[lowest_level] == 0:
        lowest_level += 1
    n_entries = count_entries(meta, 0, bucket_start)
    n_coarse = count_entries(meta, lowest_level + 1, coarse_start)
    if n_entries > codes.shape[0] or n_coarse > coarse_codes.shape[0]:
        return n_entries, n_coarse, 0
    fill_entries(meta, spheres, 0, bucket_start, codes)
    fill_entries(meta, spheres, lowest_level + 1, coarse_start, coarse_codes)
    n_buckets = bucket_start.shape[0] - 1
    capacity = pairs.shape[0]
    n_pairs = 0
    # Same level: pairs within each bucket, reported in the lowest shared cell only.
    for bucket in range(n_buckets):
        end = bucket_start[bucket + 1]
        for i in range(bucket_start[bucket], end - 1):
            a = codes[i] // CODE_STRIDE
            bits_a = codes[i] % CODE_STRIDE
            for j in range(i + 1, end):
                b = codes[j] // CODE_STRIDE
                bits_b = codes[j] % CODE_STRIDE
                if (bits_a & bits_b & LOWEST_BITS != 0
                        or meta[a, LO] + (bits_a & 1) != meta[b, LO] + (bits_b & 1)
                        or meta[a, LO + 1] + ((bits_a >> 1) & 1)
                        != meta[b, LO + 1] + ((bits_b >> 1) & 1)
                        or meta[a, LO + 2] + ((bits_a >> 2) & 1)
                        != meta[b, LO + 2] + ((bits_b >> 2) & 1)
                        or meta[a, LEVEL] != meta[b, LEVEL]
                        or (meta[a, CATEGORY] & meta[b, MASK]) == 0
                        or (meta[b, CATEGORY] & meta[a, MASK]) == 0
                        or bounds[a, 0] > bounds[b, 3] or bounds[b, 0] > bounds[a, 3]
                        or bounds[a, 1] > bounds[b, 4] or bounds[b, 1] > bounds[a, 4]
                        or bounds[a, 2] > bounds[b, 5] or bounds[b, 2] > bounds[a, 5]):
                    continue
                if (bits_a | bits_b) & SPHERE_BIT and not shapes_overlap(bounds, spheres, a, b):
                    continue
                if n_pairs < capacity:
                    pairs[n_pairs, 0] = a
                    pairs[n_pairs, 1] = b
                n_pairs += 1
    if n_coarse == 0:
        return n_entries, n_coarse, n_pairs
    # Across levels: each object meets the coarser levels in the cells it covers there,
    # looked up in a second, small sort of the coarser objects only.
    coarse_mask = coarse_start.shape[0] - 2
    coarser = np.empty(n_levels, np.int64)
    for a in range(meta.shape[0]):
        level_a = meta[a, LEVEL]
        if level_a < 0:
            continue
        n_coarser = 0
        for level in range(level_a + 1, n_levels):
            if level_count[level] > 0:
                coarser[n_coarser] = level
                n_coarser += 1
        for t in range(n_coarser):
            level = coarser[t]
            inv = inv_size[level]
            lx = floor_to_int(bounds[a, 0] * inv)
            ly = floor_to_int(bounds[a, 1] * inv)
            lz = floor_to_int(bounds[a, 2] * inv)
            hx = floor_to_int(bounds[a, 3] * inv)
            hy = floor_to_int(bounds[a, 4] * inv)
            hz = floor_to_int(bounds[a, 5] * inv)
            for cz in range(lz, hz + 1):
                for cy in range(ly, hy + 1):
                    for cx in range(lx, hx + 1):
                        bits_a = (cx != lx) + 2 * (cy != ly) + 4 * (cz != lz)
                        if spheres[a, 3] >= 0.0:
                            bits_a += SPHERE_BIT
                        bucket = bucket_of(level, cx, cy, cz, coarse_mask)
                        for j in range(coarse_start[bucket], coarse_start[bucket + 1]):
                            b = coarse_codes[j] // CODE_STRIDE
                            bits_b = coarse_codes[j] % CODE_STRIDE
                            if (bits_a & bits_b & LOWEST_BITS != 0
                                    or meta[b, LO] + (bits_b & 1) != cx
                                    or meta[b, LO + 1] + ((bits_b >> 1) & 1) != cy
                                    or meta[b, LO + 2] + ((bits_b >> 2) & 1) != cz
                                    or meta[b, LEVEL] != level
                                    or (meta[a, CATEGORY] & meta[b, MASK]) == 0
                                    or (meta[b, CATEGORY] & meta[a, MASK]) == 0
                                    or bounds[a, 0] > bounds[b, 3] or bounds[b, 0] > bounds[a, 3]
                                    or bounds[a, 1] > bounds[b, 4] or bounds[b, 1] > bounds[a, 4]
                                    or bounds[a, 2] > bounds[b, 5]
                                    or bounds[b, 2] > bounds[a, 5]):
                                continue
                            if ((bits_a | bits_b) & SPHERE_BIT
                                    and not shapes_overlap(bounds, spheres, a, b)):
                                continue
                            if n_pairs < capacity:
                                pairs[n_pairs, 0] = a
                                pairs[n_pairs, 1] = b
                            n_pairs += 1
    return n_entries, n_coarse, n_pairs
