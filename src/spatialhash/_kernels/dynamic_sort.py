"""The counting sort of `query_pairs`: every (object, cell) entry by bucket, on all threads.

The sort is stable (equal buckets keep the order of slots, then of the cell loop in
`entry_keys`), and a stable sort has one output, so the codes come out identical, byte for
byte, for any number of chunks (the sequential driver runs the same chunks in order).
Passes:

1. per chunk of slots, its number of entries (sequential: it only reads ``meta``);
2. per chunk of slots, each entry's bucket and code, written in slot order (parallel):
   every hash is computed once (before, a count pass and a fill pass both hashed them);
3. per chunk of buckets, a scan of all entries counting those in its buckets (parallel),
   then the starts of its buckets;
4. per chunk of buckets, a second scan writing its entries' codes in place (parallel).

Cutting the buckets rather than the slots for passes 3 and 4 keeps each thread's scattered
writes in its own part of ``bucket_start`` and ``codes`` (half of each on two threads, which
stays in its core's cache) at the price of reading the entries once more per chunk, in
order. Per-chunk histograms of all buckets, merged afterwards, took 10.5 ms against 8.0 ms
on the two threads of the development machine (one thread: 12.8 ms; wall-clock medians of
15, run alternately in one process).

The entries above the lowest non-empty level are then sorted apart, sequentially (they
are few), into a smaller table: their bucket is the stored one masked again, which is
what `tile_bucket` gives for the smaller mask, since masks are powers of two less one.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from .._config import jit, jit_parallel
from .dynamic import CATEGORY, HI, LEVEL, LO, MASK
from .dynamic_pairs import (
    ALL_BITS,
    LEVEL_FIELD,
    LEVEL_SHIFT,
    SLOT_SHIFT,
    SPHERE_BIT,
    copy_records,
    tile_bucket,
)


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
    """Bucket and code (see `dynamic_pairs`) of every entry of slots ``begin .. end - 1``,
    written from ``e`` on."""
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


@jit
def count_range(entry_bucket, n_entries, b_begin, b_end, bucket_start):
    """Starts of buckets ``b_begin .. b_end - 1`` counted from 0 (the entries before
    them are added by `scatter_range`); returns how many entries they hold."""
    bucket_start[b_begin:b_end] = 0
    for e in range(n_entries):
        b = entry_bucket[e]
        if b_begin <= b < b_end:
            bucket_start[b] += 1
    running = 0
    for b in range(b_begin, b_end):
        count = bucket_start[b]
        bucket_start[b] = running
        running += count
    return running


@jit
def scatter_range(entry_bucket, entry_code, n_entries, b_begin, b_end, offset, bucket_start,
                  codes):
    """Write the codes of the entries in buckets ``b_begin .. b_end - 1``, which start at
    ``offset``, in entry order, and leave their starts in ``bucket_start``."""
    for b in range(b_begin, b_end):
        bucket_start[b] += offset
    for e in range(n_entries):
        b = entry_bucket[e]
        if b_begin <= b < b_end:
            p = bucket_start[b]
            bucket_start[b] = p + 1
            codes[p] = entry_code[e]
    # Each start was advanced to the next bucket's start: shift back.
    for b in range(b_end - 1, b_begin, -1):
        bucket_start[b] = bucket_start[b - 1]
    if b_end > b_begin:
        bucket_start[b_begin] = offset


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
def finish_sort(bounds, level_count, entry_bucket, entry_code, n_entries, coarse_start,
                coarse_codes, coarse_records):
    """The coarse sort and its records (`sort_coarse`); returns ``n_coarse``."""
    n_coarse = sort_coarse(entry_bucket, entry_code, n_entries, lowest_used_level(level_count),
                           coarse_start, coarse_codes)
    if n_coarse <= coarse_codes.shape[0]:
        copy_records(coarse_codes, bounds, coarse_records, 0, n_coarse)
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


@jit
def range_offsets(totals):
    """Where each chunk of buckets starts: the entries of the chunks before it."""
    offsets = np.empty(totals.shape[0], np.int64)
    running = 0
    for k in range(totals.shape[0]):
        offsets[k] = running
        running += totals[k]
    return offsets


@jit
def sort_entries(bounds, spheres, meta, level_count, bucket_start, codes, entry_bucket,
                 entry_code, n_chunks, coarse_start, coarse_codes, coarse_records):
    """Sort all entries by bucket into ``codes`` (runs ``bucket_start``) and, apart, those
    above the lowest non-empty level, with their records, in ``n_chunks`` chunks (the
    result does not depend on it). Returns ``(n_entries, n_coarse, filtered)``; when a
    buffer is too small nothing is sorted (the caller grows the buffers and calls again)."""
    n_slots = meta.shape[0]
    n_buckets = bucket_start.shape[0] - 1
    firsts, filtered = entry_counts(meta, n_chunks)
    n_entries = firsts[n_chunks]
    if n_entries > codes.shape[0]:
        return n_entries, 0, filtered
    for k in range(n_chunks):
        begin, end = chunk_range(n_slots, n_chunks, k)
        entry_keys(meta, spheres, n_buckets - 1, begin, end, firsts[k], entry_bucket,
                   entry_code)
    totals = np.empty(n_chunks, np.int64)
    for k in range(n_chunks):
        b_begin, b_end = chunk_range(n_buckets, n_chunks, k)
        totals[k] = count_range(entry_bucket, n_entries, b_begin, b_end, bucket_start)
    offsets = range_offsets(totals)
    for k in range(n_chunks):
        b_begin, b_end = chunk_range(n_buckets, n_chunks, k)
        scatter_range(entry_bucket, entry_code, n_entries, b_begin, b_end, offsets[k],
                      bucket_start, codes)
    bucket_start[n_buckets] = n_entries
    n_coarse = finish_sort(bounds, level_count, entry_bucket, entry_code, n_entries,
                           coarse_start, coarse_codes, coarse_records)
    return n_entries, n_coarse, filtered


@jit_parallel
def sort_entries_parallel(bounds, spheres, meta, level_count, bucket_start, codes,
                          entry_bucket, entry_code, n_chunks, coarse_start, coarse_codes,
                          coarse_records):
    """`sort_entries` with the chunks on all threads (the same output)."""
    n_slots = meta.shape[0]
    n_buckets = bucket_start.shape[0] - 1
    firsts, filtered = entry_counts(meta, n_chunks)
    n_entries = firsts[n_chunks]
    if n_entries > codes.shape[0]:
        return n_entries, 0, filtered
    for k in prange(n_chunks):
        begin, end = chunk_range(n_slots, n_chunks, k)
        entry_keys(meta, spheres, n_buckets - 1, begin, end, firsts[k], entry_bucket,
                   entry_code)
    totals = np.empty(n_chunks, np.int64)
    for k in prange(n_chunks):
        b_begin, b_end = chunk_range(n_buckets, n_chunks, k)
        totals[k] = count_range(entry_bucket, n_entries, b_begin, b_end, bucket_start)
    offsets = range_offsets(totals)
    for k in prange(n_chunks):
        b_begin, b_end = chunk_range(n_buckets, n_chunks, k)
        scatter_range(entry_bucket, entry_code, n_entries, b_begin, b_end, offsets[k],
                      bucket_start, codes)
    bucket_start[n_buckets] = n_entries
    n_coarse = finish_sort(bounds, level_count, entry_bucket, entry_code, n_entries,
                           coarse_start, coarse_codes, coarse_records)
    return n_entries, n_coarse, filtered
