"""The sort of `query_pairs`: every (object, cell) entry by bucket, on all threads.

The sort is stable (equal buckets keep the order of slots, then of the cell loop in
`entry_keys`), and a stable sort has one output, so the codes come out identical, byte for
byte, for any number of chunks (the sequential driver runs the same chunks in order).
Passes:

1. per chunk of slots, its number of entries (sequential: it only reads ``meta``);
2. per chunk of slots, each entry's bucket and code, written in slot order, and the
   chunk's count of entries per part (parallel): a part is ``2**PART_BITS`` consecutive
   buckets (their starts, 128 kB, stay in a core's L2);
3. per chunk of slots, its entries moved to their parts, in order (parallel; the chunks'
   counts merged in chunk order make the partition stable);
4. per part, a counting sort of its entries into ``codes`` and the starts of its buckets
   (parallel).

Entries come in slot order, which is not spatial order, so a counting sort over the whole
table (2**18 starts, 2 MB, for the 192,000 entries of `benchmarks/bench_dynamic.py`'s
100,000 boxes) increments and writes at random in it; the partition first (16 parts, 16
output streams) keeps each part's sort in L2. On one core (`time.thread_time`, medians of
21, the two in one process alternately) the count and scatter take, with the partition
(unsigned indices), about 70% of their time without it, and the whole sort about 90%. A
least-significant-digit radix sort (two passes of 9 bits, histograms fused in one read,
starts from the sorted buckets) is slower: about twice the time of the count and scatter
it would replace (each 512-stream pass takes about two thirds of that, the starts a third;
fewer streams, down to 64, do not make a scattered write cheaper). Collecting the coarse
entries while hashing (the coarse sort then reads 18,000 entries, not 192,000) does not
pay either (the same medians within 1%).

The entries above the lowest non-empty level are then sorted apart, sequentially (they
are few), into a smaller table: their bucket is the stored one masked again, which is
what `tile_bucket` gives for the smaller mask, since masks are powers of two less one.

Kept sort (`update_sort`). `query_pairs` keeps both sorts between calls; the storage
kernels flag every slot whose entries may have changed (see `storage.set_cells`). Within a
bucket the codes of a sort from scratch ascend: slots ascend, and the offset bits of one
object's cells ascend in the order of the cell loop. So the flagged slots' new entries,
made in slot order and sorted stably by bucket, are merged into the kept runs by comparing
codes while the flagged slots' old entries are dropped (`sort_merge.py`): the result is
the fresh sort, byte for byte. The merge reads and writes every code and start, however
few changed. The whole update inside a step of the benchmark (one core, CPU time, medians of
15), against the sort from scratch: about a fifth of its time with 400 objects changed, a
third with 4,000, slightly less with 20,000 (20%) and 1.4 times as long with 40,000; hence
``SORT_UPDATE_FRACTION = 0.2`` in `dynamic/_pair_search.py`. The update runs on one thread
(the sort from scratch on all).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..._config import jit, jit_parallel
from .pairs import (
    ALL_BITS,
    LEVEL_FIELD,
    LEVEL_SHIFT,
    SLOT_SHIFT,
    SPHERE_BIT,
    copy_records,
    tile_bucket,
)
from .sort_merge import merge_runs, radix_sort_pairs
from .state import (
    BOUNDS,
    BUCKET_START,
    COARSE_CODES,
    COARSE_RECORDS,
    COARSE_SPARE,
    COARSE_START,
    CODES,
    ENTRY_BUCKET,
    ENTRY_CODE,
    META,
    PART_BUCKET,
    PART_CODE,
    SPHERES,
)
from .storage import CATEGORY, HI, LEVEL, LO, MASK


@jit
def chunk_range(n_items, n_chunks, chunk):
    """Items (slots or buckets) ``begin .. end - 1`` of chunk ``chunk``."""
    return chunk * n_items // n_chunks, (chunk + 1) * n_items // n_chunks


@jit
def count_chunk(meta, begin, end):
    """Entries of the objects in slots ``begin .. end - 1``, and whether one of them has a
    category or mask other than all bits."""
    n = 0
    filtered = False
    for slot in range(begin, end):
        if meta[slot, LEVEL] < 0:
            continue
        filtered |= (meta[slot, CATEGORY] & meta[slot, MASK]) != ALL_BITS
        n += ((meta[slot, HI] - meta[slot, LO] + 1) * (meta[slot, HI + 1] - meta[slot, LO + 1] + 1)
              * (meta[slot, HI + 2] - meta[slot, LO + 2] + 1))
    return n, filtered


@jit
def entry_keys(meta, spheres, mask, begin, end, e, entry_bucket, entry_code):
    """Bucket and code (see `pairs.py`) of every entry of slots ``begin .. end - 1``,
    written from ``e`` on; returns the index after the last written."""
    for slot in range(begin, end):
        level = meta[slot, LEVEL]
        if level < 0:
            continue
        head = (slot << SLOT_SHIFT) + (level << LEVEL_SHIFT)
        if spheres[slot, 3] >= 0.0:
            head += SPHERE_BIT
        lx, ly, lz = meta[slot, LO], meta[slot, LO + 1], meta[slot, LO + 2]
        for cz in range(lz, meta[slot, HI + 2] + 1):
            for cy in range(ly, meta[slot, HI + 1] + 1):
                for cx in range(lx, meta[slot, HI] + 1):
                    entry_bucket[e] = tile_bucket(level, cx, cy, cz, mask)
                    entry_code[e] = head + (cx != lx) + 2 * (cy != ly) + 4 * (cz != lz)
                    e += 1
    return e


#: Buckets of one part (`sort_part`) at most: 2**14 starts (128 kB) stay in a core's L2.
PART_BITS = 14


@jit
def part_shift(n_buckets):
    """Bits of a bucket below its part: parts of ``2**PART_BITS`` buckets (one part for a
    smaller table); ``n_buckets`` is a power of two."""
    bits = 0
    while (1 << bits) < n_buckets:
        bits += 1
    return min(bits, PART_BITS)


@jit
def part_counts(entry_bucket, e_begin, e_end, shift, counts):
    """``counts[d]``: entries ``e_begin .. e_end - 1`` in part ``d``."""
    counts[:] = 0
    for e in range(e_begin, e_end):
        counts[entry_bucket[e] >> shift] += 1


@jit
def part_positions(counts):
    """Where each chunk (row of ``counts``) writes its first entry of each part: parts in
    order, chunks in order inside a part (a stable partition); and where each part
    starts (``n_parts + 1`` values)."""
    n_chunks, n_parts = counts.shape
    positions = np.empty_like(counts)
    part_start = np.empty(n_parts + 1, np.int64)
    running = 0
    for d in range(n_parts):
        part_start[d] = running
        for k in range(n_chunks):
            positions[k, d] = running
            running += counts[k, d]
    part_start[n_parts] = running
    return positions, part_start


@jit
def part_scatter(entry_bucket, entry_code, e_begin, e_end, shift, positions, part_bucket,
                 part_code):
    """Entries ``e_begin .. e_end - 1`` into their parts, in order, from ``positions``."""
    # Unsigned indices here and in `sort_part`: no negative-index wrap-around code (about
    # 10% less time for both on the benchmark's entries, one core, medians of 21).
    for e in range(np.uint64(e_begin), np.uint64(e_end)):
        b = entry_bucket[e]
        d = np.uint64(b) >> np.uint64(shift)
        p = np.uint64(positions[d])
        positions[d] = p + np.uint64(1)
        part_bucket[p] = b
        part_code[p] = entry_code[e]


@jit
def sort_part(part_bucket, part_code, e_begin, e_end, b_begin, b_end, bucket_start, codes):
    """Counting sort of the entries ``e_begin .. e_end - 1`` of one part (buckets
    ``b_begin .. b_end - 1``) into ``codes``, and the starts of its buckets."""
    bucket_start[b_begin:b_end] = 0
    for e in range(np.uint64(e_begin), np.uint64(e_end)):
        bucket_start[np.uint64(part_bucket[e])] += 1
    running = e_begin
    for b in range(np.uint64(b_begin), np.uint64(b_end)):
        count = bucket_start[b]
        bucket_start[b] = running
        running += count
    for e in range(np.uint64(e_begin), np.uint64(e_end)):
        b = np.uint64(part_bucket[e])
        p = bucket_start[b]
        bucket_start[b] = p + 1
        codes[np.uint64(p)] = part_code[e]
    # Each start was advanced to the next bucket's start: shift back.
    for b in range(b_end - 1, b_begin, -1):
        bucket_start[b] = bucket_start[b - 1]
    if b_end > b_begin:
        bucket_start[b_begin] = e_begin


@jit
def sort_coarse(entry_bucket, entry_code, n_entries, lowest_level, coarse_start,
                coarse_codes):
    """Counting sort of the entries above ``lowest_level`` by their bucket masked to
    ``coarse_start``'s table (at most as large as the fine one). Returns their number;
    nothing is written past ``coarse_codes`` (the caller grows it and calls again)."""
    n_buckets = coarse_start.shape[0] - 1
    mask = n_buckets - 1
    coarse_start[:] = 0
    for e in range(n_entries):
        if (entry_code[e] >> LEVEL_SHIFT) & LEVEL_FIELD > lowest_level:
            coarse_start[(entry_bucket[e] & mask) + 1] += 1
    for b in range(n_buckets):
        coarse_start[b + 1] += coarse_start[b]
    n_coarse = coarse_start[n_buckets]
    if n_coarse > coarse_codes.shape[0]:
        return n_coarse
    for e in range(n_entries):
        if (entry_code[e] >> LEVEL_SHIFT) & LEVEL_FIELD > lowest_level:
            b = entry_bucket[e] & mask
            p = coarse_start[b]
            coarse_start[b] = p + 1
            coarse_codes[p] = entry_code[e]
    for b in range(n_buckets, 0, -1):
        coarse_start[b] = coarse_start[b - 1]
    coarse_start[0] = 0
    return n_coarse


@jit
def lowest_used_level(level_count):
    n_levels = level_count.shape[0]
    lowest = 0
    while lowest < n_levels - 1 and level_count[lowest] == 0:
        lowest += 1
    return lowest


@jit
def finish_sort(bounds, level_count, sort, work, n_entries):
    """The coarse sort and its records (`sort_coarse`) of the `state.EntrySort` ``sort``
    from the entries in the `state.SortWork` ``work``; returns ``n_coarse``."""
    coarse_codes = sort[COARSE_CODES]
    n_coarse = sort_coarse(work[ENTRY_BUCKET], work[ENTRY_CODE], n_entries,
                           lowest_used_level(level_count), sort[COARSE_START], coarse_codes)
    if n_coarse <= coarse_codes.shape[0]:
        copy_records(coarse_codes, bounds, sort[COARSE_RECORDS], 0, n_coarse)
    return n_coarse


@jit
def entry_counts(meta, n_chunks):
    """Per chunk of slots, where its entries start (``n_chunks + 1`` values, the last the
    number of entries), and whether some object has other bits than all."""
    n_slots = meta.shape[0]
    firsts = np.empty(n_chunks + 1, np.int64)
    firsts[0] = 0
    filtered = False
    for k in range(n_chunks):
        begin, end = chunk_range(n_slots, n_chunks, k)
        n, some = count_chunk(meta, begin, end)
        firsts[k + 1] = firsts[k] + n
        filtered |= some
    return firsts, filtered


@jit_parallel
def sort_entries(objects, level_count, sort, work, n_chunks):
    """Sort all entries by bucket into the `state.EntrySort` ``sort`` (``codes`` in runs
    ``bucket_start``) and, apart, those above the lowest non-empty level, with their
    records, in ``n_chunks`` chunks of slots on all threads (the result depends on
    neither), with the `state.SortWork` ``work`` as scratch. Returns ``(n_entries,
    n_coarse, filtered)``; when a buffer is too small nothing is sorted (the caller grows
    the buffers and calls again). Small hashes run it on one thread, with one chunk (a
    sequential copy of this driver would cost about a second of cold compile of its
    own)."""
    spheres = objects[SPHERES]
    meta = objects[META]
    bucket_start = sort[BUCKET_START]
    codes = sort[CODES]
    entry_bucket = work[ENTRY_BUCKET]
    entry_code = work[ENTRY_CODE]
    part_bucket = work[PART_BUCKET]
    part_code = work[PART_CODE]
    n_slots = meta.shape[0]
    n_buckets = bucket_start.shape[0] - 1
    firsts, filtered = entry_counts(meta, n_chunks)
    n_entries = firsts[n_chunks]
    if n_entries > min(codes.shape[0], part_bucket.shape[0], part_code.shape[0]):
        return n_entries, 0, filtered
    shift = part_shift(n_buckets)
    n_parts = n_buckets >> shift
    counts = np.empty((n_chunks, n_parts), np.int64)
    # `prange` indices are unsigned: passed on as int64, so that the kernels compile once
    # (`update_sort` calls some of them with int64 too).
    for k in prange(n_chunks):
        begin, end = chunk_range(n_slots, n_chunks, np.int64(k))
        entry_keys(meta, spheres, n_buckets - 1, begin, end, firsts[k], entry_bucket,
                   entry_code)
        part_counts(entry_bucket, firsts[k], firsts[k + 1], shift, counts[k])
    positions, part_start = part_positions(counts)
    for k in prange(n_chunks):
        part_scatter(entry_bucket, entry_code, firsts[k], firsts[k + 1], shift, positions[k],
                     part_bucket, part_code)
    for d in prange(n_parts):
        part = np.int64(d)
        sort_part(part_bucket, part_code, part_start[part], part_start[part + 1],
                  part << shift, (part + 1) << shift, bucket_start, codes)
    bucket_start[n_buckets] = n_entries
    n_coarse = finish_sort(objects[BOUNDS], level_count, sort, work, n_entries)
    return n_entries, n_coarse, filtered


# ---------------------------------------------------------------------- kept sort
@jit
def update_sort(objects, level_count, changed, changed_slots, kept_lowest, n_coarse, sort,
                work):
    """The sort of `sort_entries` from the one kept from the last call in ``sort``, when
    the slots ``changed_slots`` (ascending, their ``changed`` flags set) are the only ones
    whose entries may differ: their entries are taken out of the kept runs and their new
    entries merged in (`merge_runs`), for the main sort into ``work.part_code`` and for
    the coarse one (``n_coarse`` kept codes) into ``work.coarse_spare``; the coarse
    records are copied again (boxes moved). The result is the fresh sort's, byte for byte.
    Returns ``(n_entries, n_coarse, filtered)``, where ``filtered`` covers the changed
    slots only (the caller ORs it with the kept one), and clears the flags of
    ``changed_slots``; or ``n_entries = -1`` when the sort must be redone from scratch
    (the lowest level changed, or a buffer is too small), with the kept sort partly
    overwritten and the flags left set."""
    bounds = objects[BOUNDS]
    spheres = objects[SPHERES]
    meta = objects[META]
    bucket_start = sort[BUCKET_START]
    codes = sort[CODES]
    coarse_start = sort[COARSE_START]
    coarse_codes = sort[COARSE_CODES]
    coarse_records = sort[COARSE_RECORDS]
    new_bucket = work[ENTRY_BUCKET]
    new_code = work[ENTRY_CODE]
    codes_out = work[PART_CODE]
    coarse_out = work[COARSE_SPARE]
    if lowest_used_level(level_count) != kept_lowest:
        return -1, 0, False
    n_buckets = bucket_start.shape[0] - 1
    n_old = bucket_start[n_buckets]
    if changed_slots.shape[0] == 0:
        # Nothing to merge: the kept codes stand (the caller keeps its buffers).
        copy_records(coarse_codes, bounds, coarse_records, 0, n_coarse)
        return n_old, n_coarse, False
    n_new = 0
    filtered = False
    for i in range(changed_slots.shape[0]):
        slot = changed_slots[i]
        n, some = count_chunk(meta, slot, slot + 1)
        n_new += n
        filtered |= some
    if n_new > new_bucket.shape[0]:
        return -1, 0, False
    e = 0
    for i in range(changed_slots.shape[0]):
        slot = changed_slots[i]
        e = entry_keys(meta, spheres, n_buckets - 1, slot, slot + 1, e, new_bucket, new_code)
    # Entries come in code order; a stable sort by bucket gives (bucket, code) order.
    sorted_bucket, sorted_code = radix_sort_pairs(new_bucket[:n_new], new_code[:n_new],
                                                  n_buckets)
    coarse_mask = coarse_start.shape[0] - 2
    n_new_coarse = 0
    for k in range(n_new):
        if (new_code[k] >> LEVEL_SHIFT) & LEVEL_FIELD > kept_lowest:
            n_new_coarse += 1
    coarse_bucket = np.empty(n_new_coarse, np.int64)
    coarse_code = np.empty(n_new_coarse, np.int64)
    c = 0
    for k in range(n_new):
        if (new_code[k] >> LEVEL_SHIFT) & LEVEL_FIELD > kept_lowest:
            coarse_bucket[c] = new_bucket[k] & coarse_mask
            coarse_code[c] = new_code[k]
            c += 1
    coarse_bucket, coarse_code = radix_sort_pairs(coarse_bucket, coarse_code,
                                                  coarse_start.shape[0] - 1)
    n_entries = merge_runs(bucket_start, codes, changed, sorted_bucket, sorted_code,
                           codes_out)
    if n_entries < 0:
        return -1, 0, False
    n_coarse = merge_runs(coarse_start, coarse_codes, changed, coarse_bucket, coarse_code,
                          coarse_out)
    if n_coarse < 0:
        return -1, 0, False
    copy_records(coarse_out, bounds, coarse_records, 0, n_coarse)
    for i in range(changed_slots.shape[0]):
        changed[changed_slots[i]] = 0
    return n_entries, n_coarse, filtered
