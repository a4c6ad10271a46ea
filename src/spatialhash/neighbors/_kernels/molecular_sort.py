"""The order of a molecular list's rows sorted by ``(i, j, S)`` (``sorted=True``), from
rows already grouped by ``i`` in increasing order, as the search gives them.

Only each atom's own rows need sorting, by ``(j, S)``: the groups are sorted on their own,
on all threads, where one sort of all the rows by five keys (``np.lexsort``) runs on one
thread over all of them, five times over. A group's keys are packed into one int64 each,
``j`` and the shift's components counted from their least in the group, with the row's
place in the group in the lowest bits (so the keys are distinct, and equal ``(j, S)``
would keep their order), and sorted by `row_sort.sort_row` (ranks counted for the few
dozen rows of an atom, a merge sort for more). A group whose spans do not fit 62 bits (a
cell far thinner than the cutoff, among very many atoms) is merge sorted on the keys
themselves (`sort_group`). Either way the order is the one ``np.lexsort`` gives.

Compile time. The groups are cut into chunks of `GROUPS_PER_CHUNK` and sorted in two
passes of one parallel driver, `sorted_rows`, which calls a sequential kernel per chunk
through its address (``_kernels/indirect.py``: the kernel is compiled once, by itself,
not again inside the driver's parallel loop). The first pass, `sort_short_groups`, sorts
the groups whose keys pack and whose rows are few enough to rank, nearly all of them at
the cutoffs of molecular codes, and leaves a chunk at its first other group; the second,
`sort_groups`, sorts the chunks left, every group by its rule. So the merge sorts compile
only when some rows need them (the two kernels are one source, `jit_variant`'s constant
pruning the merge sorts from the first).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..._config import jit, jit_inline, jit_parallel, jit_variant
from ..._kernels.indirect import kernel_caller
from ..._kernels.row_sort import RANK_SORT_MAX, rank_sort_row, row_sort_buffers, sort_row

#: Atoms' groups of rows handed to a thread at a time.
GROUPS_PER_CHUNK = 256
#: Packed keys stay below this: `row_sort.SORT_PAD` ranks above them all.
PACKED_LIMIT = 2.0**62


@jit_inline
def _before(j, shifts, a, b):
    """Whether row ``a`` comes strictly before row ``b`` by ``(j, S)``."""
    if j[a] != j[b]:
        return j[a] < j[b]
    for axis in range(shifts.shape[1]):
        if shifts[a, axis] != shifts[b, axis]:
            return shifts[a, axis] < shifts[b, axis]
    return False


@jit
def sort_group(j, shifts, start, end, rows, scratch):
    """The rows ``start:end`` in order of ``(j, S)``, stably, into ``rows[:end - start]``
    (``scratch`` as long), by a bottom-up merge sort."""
    n = end - start
    for t in range(n):
        rows[t] = start + t
    width = 1
    source, target = rows, scratch
    in_rows = True
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            a, b = lo, mid
            for t in range(lo, hi):
                # The right run's row first only when strictly before: stable.
                take_b = a >= mid or (b < hi and _before(j, shifts, source[b], source[a]))
                target[t] = source[b] if take_b else source[a]
                b += 1 if take_b else 0
                a += 0 if take_b else 1
        source, target = target, source
        in_rows = not in_rows
        width *= 2
    if not in_rows:
        for t in range(n):
            rows[t] = source[t]


@jit
def pack_group(j, shifts, start, end, keys, least, spans):
    """The rows ``start:end``'s packed keys into ``keys[:end - start]`` (see the module's
    docstring; ``least`` and ``spans``, int64 (d + 1,), scratch): ``j`` and the shift's
    components, each less its least in the group, in mixed radix, then the row's place.
    Returns the bits of the place, or 0, with nothing packed, where the keys would not
    fit below `PACKED_LIMIT`."""
    n, n_dims = end - start, shifts.shape[1]
    place_bits = 1
    while (1 << place_bits) < n:
        place_bits += 1
    room = 2.0**place_bits
    for axis in range(n_dims + 1):
        low, high = j[start], j[start]
        if axis > 0:
            low, high = shifts[start, axis - 1], shifts[start, axis - 1]
        for t in range(start, end):
            value = j[t] if axis == 0 else shifts[t, axis - 1]
            low, high = min(low, value), max(high, value)
        least[axis] = low
        room *= float(high) - float(low) + 1.0
        spans[axis] = high - low + 1 if room < PACKED_LIMIT else 0
    if not room < PACKED_LIMIT:
        return 0
    for t in range(n):
        key = j[start + t] - least[0]
        for axis in range(1, n_dims + 1):
            key = key * spans[axis] + (shifts[start + t, axis - 1] - least[axis])
        keys[t] = (key << place_bits) | t
    return place_bits


def _groups_kernel(every_group: bool):
    """The kernel that sorts the rows ``begin:stop`` (whole groups of ``first``) by
    ``(j, S)`` within each group, into ``order[begin:stop]``: with ``every_group``, each
    group by the rule of the module's docstring, returning 0; else only groups whose keys
    pack and whose length is at most `RANK_SORT_MAX`, by counting ranks, and at the
    first other group it returns 1, leaving the rest of its rows."""

    def sort_groups(first, j, shifts, begin, stop, order):
        n_dims = shifts.shape[1]
        longest, start = 0, begin
        for t in range(begin, stop + 1):
            if t == stop or first[t] != first[start]:
                longest, start = max(longest, t - start), t
        if not every_group and longest > RANK_SORT_MAX:
            return 1
        keys = np.empty(longest, np.int64)
        rows = np.empty(longest if every_group else 0, np.int64)
        scratch = np.empty(longest if every_group else 0, np.int64)
        least, spans = np.empty(n_dims + 1, np.int64), np.empty(n_dims + 1, np.int64)
        rank_keys, rank_values = row_sort_buffers()
        no_values = np.empty(0, np.float64)
        start = begin
        for t in range(begin, stop + 1):
            if t == stop or first[t] != first[start]:
                place_bits = pack_group(j, shifts, start, t, keys, least, spans)
                if place_bits:
                    if every_group:
                        sort_row(keys, no_values, 0, t - start, rank_keys, rank_values)
                    else:
                        rank_sort_row(keys, no_values, 0, t - start, rank_keys, rank_values)
                    mask = (1 << place_bits) - 1
                    for k in range(t - start):
                        order[start + k] = start + (keys[k] & mask)
                elif every_group:
                    sort_group(j, shifts, start, t, rows, scratch)
                    for k in range(t - start):
                        order[start + k] = rows[k]
                else:
                    return 1
                start = t
        return np.int64(0)  # not a literal 0: both variants return int64, called alike

    return sort_groups


#: The first pass: groups of short rows whose keys pack (nearly all of them), sorted
#: without the merge sorts, which it does not compile.
sort_short_groups = jit_variant(_groups_kernel(every_group=False), "sort_short_groups")
#: Every group (the chunks the first pass left).
sort_groups = jit_variant(_groups_kernel(every_group=True), "sort_groups")
_check_sort_groups, _call_sort_groups = kernel_caller(sort_short_groups, sort_groups)


def chunk_bounds(first):
    """The rows of each chunk of `GROUPS_PER_CHUNK` groups of ``first`` (int64 (m,),
    grouped in increasing order): chunk ``c``'s rows are ``bounds[c]:bounds[c + 1]``."""
    n_groups = int(first[-1]) + 1 if first.shape[0] else 0
    n_chunks = -(-n_groups // GROUPS_PER_CHUNK)
    cuts = np.arange(n_chunks + 1, dtype=np.int64) * GROUPS_PER_CHUNK
    return np.searchsorted(first, cuts).astype(np.int64)


@jit_parallel
def sorted_rows(first, j, shifts, bounds, chunks, order, kernel):
    """The order of the rows ``(i, j, S)`` (int64 (m,), (m,), (m, d)), grouped by
    ``i = first`` in increasing order, sorted by ``(j, S)`` within each group, the groups
    staying in place, into ``order`` (int64 (m,)), for the chunks ``chunks`` of the
    groups (chunk ``c`` the rows ``bounds[c]:bounds[c + 1]``, `chunk_bounds`) on all
    threads, each by the kernel at ``kernel`` (``indirect.kernel_target`` of
    `sort_short_groups` or `sort_groups`). Returns what the kernel returned for each
    chunk (int64, as ``chunks``): 1 where `sort_short_groups` left it."""
    left = np.empty(chunks.shape[0], np.int64)
    _check_sort_groups(kernel, (first, j, shifts, 0, 0, order))
    for k in prange(chunks.shape[0]):
        chunk = chunks[k]
        left[k] = _call_sort_groups(kernel, (first, j, shifts, bounds[chunk],
                                             bounds[chunk + 1], order))
    return left
