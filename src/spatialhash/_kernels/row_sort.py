"""Sorting one row of a query's result by index, with its distances alongside (radius and
box queries with ``sort=True``)."""

from __future__ import annotations

import numpy as np

from .._config import jit, jit_inline

#: Rows up to this length are sorted by counting ranks; longer ones by `merge_sort_row`.
#: A multiple of 16 (see `rank_sort_row`).
RANK_SORT_MAX = 128
#: Padding of the rank sort's keys: larger than any index.
SORT_PAD = np.iinfo(np.int64).max


@jit
def merge_sort_row(indices, distances, start, end):
    """`sort_row` for long rows: a bottom-up merge sort through scratch of the row's length.

    Written here rather than ``np.argsort(kind="mergesort")`` and a gather: numba's generic
    sort and fancy indexing compiled in about as long as the radius query's own kernel,
    for rows longer than `RANK_SORT_MAX` only (a radius of many cells' points)."""
    n = end - start
    with_distances = distances.shape[0] > 0
    keys = np.empty(n, indices.dtype)
    other_keys = np.empty(n, indices.dtype)
    values = np.empty(n if with_distances else 0, np.float64)
    other_values = np.empty(n if with_distances else 0, np.float64)
    for t in range(n):
        keys[t] = indices[start + t]
        if with_distances:
            values[t] = distances[start + t]
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            a, b = lo, mid
            for t in range(lo, hi):
                # Distinct keys: the merge needs no tie rule.
                take_a = b >= hi or (a < mid and keys[a] < keys[b])
                source = a if take_a else b
                other_keys[t] = keys[source]
                if with_distances:
                    other_values[t] = values[source]
                a += 1 if take_a else 0
                b += 0 if take_a else 1
        keys, other_keys = other_keys, keys
        values, other_values = other_values, values
        width *= 2
    for t in range(n):
        indices[start + t] = keys[t]
        if with_distances:
            distances[start + t] = values[t]


@jit
def row_sort_buffers():
    """Scratch for `sort_row`: keys and distances of one row of up to `RANK_SORT_MAX`."""
    return np.empty(RANK_SORT_MAX, np.int64), np.empty(RANK_SORT_MAX, np.float64)


@jit
def sort_row(indices, distances, start, end, keys, values):
    """Sort ``indices[start:end]`` ascending, moving ``distances`` alongside: by
    `rank_sort_row` where the row fits ``keys``, else by `merge_sort_row`. ``keys`` and
    ``values`` are scratch of `row_sort_buffers`; ``distances`` may be empty.
    """
    if end - start > keys.shape[0]:
        merge_sort_row(indices, distances, start, end)
    else:
        rank_sort_row(indices, distances, start, end, keys, values)


@jit_inline
def rank_sort_row(indices, distances, start, end, keys, values):
    """`sort_row` of a row of distinct indices no longer than ``keys`` (scratch of
    `row_sort_buffers`, as ``values``).

    The indices of a row are distinct (a point is met once per query), so each one's
    place is the number of smaller ones: for the short rows of radius and box queries
    (tens of entries) that count is a branch-free loop LLVM vectorizes, several times
    faster than insertion sort. Inlined into its callers: a caller whose rows all fit
    (the molecular sort's first pass) then compiles no merge sort.
    """
    n = end - start
    if n < 2:
        return
    with_distances = distances.shape[0] > 0
    for t in range(n):
        keys[t] = indices[start + t]
        if with_distances:
            values[t] = distances[start + t]
    # Keys padded to a multiple of 16 with the largest integer, which ranks no key: a
    # vectorized loop over a row of a few dozen entries otherwise runs mostly in its
    # scalar remainder (the sort took 12% less time).
    n_padded = (n + 15) & ~15
    for t in range(n, n_padded):
        keys[t] = SORT_PAD
    for a in range(n):
        key = keys[a]
        rank = 0
        # Unsigned bounds: see the module docstring.
        for b in range(np.uint64(0), np.uint64(n_padded)):
            rank += 1 if keys[b] < key else 0
        indices[start + rank] = key
        if with_distances:
            distances[start + rank] = values[a]
