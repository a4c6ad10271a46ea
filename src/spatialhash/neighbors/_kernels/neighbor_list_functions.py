"""A user's compiled function called for every pair of a neighbour list within ``r``,
storing nothing (`NeighborList.for_each_pair`).

The list's state is a `ListState`: its candidate rows over the build's cell order and the
current positions in that order (``_kernels/neighbor_list.py``). The scan of a row
computes the distances of its candidates first, in a loop of its own, then calls ``fn(i,
j, d2, dx, dy, dz, *args)`` for those within ``r`` (with the arithmetic of the pair
kernels: a pair is met here exactly when ``query_pairs`` reports it, with the same ``d2``;
``(dx, dy, dz)`` of ``(j, i)`` is that of ``(i, j)`` negated). A row's ``j`` come in the
order of the row, and each row is scanned by one thread: the same calls in the same order
for any thread count.

The guard and the parallel driver are those of ``grid/_kernels/pair_functions.py`` (a
chunk that raised is marked failed and run again on the calling thread), and like those
these kernels are compiled anew for each ``fn`` and not cached on disk (see that module).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..._config import jit
from ..._kernels.distance import NO_SHIFT, displacement
from ...grid._kernels.pair_functions import compiled_scans

#: Rows handed to a thread at a time.
ROWS_PER_CHUNK = 64


class ListState(NamedTuple):
    """A neighbour list's arrays, as its kernels read them."""

    #: (n, 3) float64: the current positions in the build's cell order, wrapped.
    positions: np.ndarray
    #: (n,): the caller's index of each position.
    order: np.ndarray
    #: (n + 1,) int64, and the (indptr[-1],) positions of each row's candidates.
    indptr: np.ndarray
    neighbours: np.ndarray
    #: (3,) float64: the period of each axis, ``inf`` on open axes, and its half.
    box: np.ndarray
    half_box: np.ndarray
    #: (n,) float64 in the build's cell order: each point's radius (pairs within
    #: ``radii[s] + radii[t]``); (0,) for pairs within one distance.
    radii: np.ndarray


@jit
def _hit_buffers(size):
    """Buffers of a row's hits: their positions in the cell order, and ``(d2, dx, dy, dz)``
    of each in a row of its own: one row written a candidate rather than four arrays, which
    took the Lennard-Jones forces of 4,000 and 32,000 atoms 5-11% less time (the two
    layouts timed in alternating processes)."""
    return np.empty(size, np.int64), np.empty((size, 4), np.float64)


def _list_scan_kernel(half, once=False):
    """The sequential scan of a list's rows, compiled three times from this one source.

    Full rows (not ``half``; ``params = (r2, lower_indptr, lower_neighbours)``): ``fn``
    over the pairs within ``sqrt(r2)`` (or within ``radii[s] + radii[t]``, where the state
    has radii) of rows ``lo .. hi - 1``, each row's candidates on both sides: first those
    of its transposed row (`neighbor_list.lower_rows`), then those of its own.

    Half rows (``half``; ``params = (r2, slabs)``): slabs ``lo .. hi - 1`` of ``slabs``,
    each the rows ``slabs[k, 0] .. slabs[k, 1] - 1``, in the order they run
    (`grid._pair_functions.slab_plan`, on the build's grid); each row's own candidates, each
    pair met once and ``fn`` called for ``(i, j)`` then ``(j, i)``. Row ``t`` lies in the
    slab of ``s`` or the next one (the last slab's next is the first): the driver runs
    only slabs that write disjoint rows at the same time. With ``once`` (half rows only),
    ``fn`` is called for ``(i, j)`` only.

    A row's candidates within reach are first written, without a branch on their distance,
    to buffers of hits (a hit's place is taken by the next candidate unless it is kept),
    then ``fn`` is called for each hit: no mispredicted branch, no distance computed
    twice."""

    def scan(state, params, lo, hi, fn, args):
        positions, order = state.positions, state.order
        box3 = (state.box[0], state.box[1], state.box[2])
        half3 = (state.half_box[0], state.half_box[1], state.half_box[2])
        r2 = params[0]
        radii = state.radii
        with_radii = radii.shape[0] > 0
        hit_t, hit = _hit_buffers(256)
        if half:
            slabs = params[1]
            n_ranges = hi - lo
            n_sides = 1
        else:
            n_ranges = 1
            n_sides = 2
        for k in range(n_ranges):
            if half:
                rows_lo, rows_hi = slabs[lo + k, 0], slabs[lo + k, 1]
            else:
                rows_lo, rows_hi = lo, hi
            for s in range(rows_lo, rows_hi):
                x, y, z = positions[s, 0], positions[s, 1], positions[s, 2]
                own = np.int64(order[s])
                for side in range(n_sides):
                    # Full rows: the transposed row, then the own one.
                    if half or side == 1:
                        indptr, neighbours = state.indptr, state.neighbours
                    else:
                        indptr, neighbours = params[1], params[2]
                    first, last = indptr[s], indptr[s + 1]
                    if last - first > hit_t.shape[0]:
                        hit_t, hit = _hit_buffers(last - first)
                    n_hits = 0
                    for c in range(first, last):
                        t = neighbours[c]
                        dx, dy, dz, d2 = displacement(x, y, z, positions[t, 0], positions[t, 1],
                                                      positions[t, 2], NO_SHIFT, box3, half3,
                                                      True)
                        hit_t[n_hits] = t
                        hit[n_hits, 0] = d2
                        hit[n_hits, 1] = dx
                        hit[n_hits, 2] = dy
                        hit[n_hits, 3] = dz
                        if with_radii:
                            limit = radii[s] + radii[t]
                            n_hits += 1 if d2 <= limit * limit else 0
                        else:
                            n_hits += 1 if d2 <= r2 else 0
                    for h in range(n_hits):
                        other = np.int64(order[hit_t[h]])
                        d2, dx, dy, dz = hit[h, 0], hit[h, 1], hit[h, 2], hit[h, 3]
                        fn(own, other, d2, dx, dy, dz, *args)
                        if half and not once:
                            fn(other, own, d2, -dx, -dy, -dz, *args)

    return scan


#: Each scan's (sequential scan, guarded scan, parallel driver): full rows (a row and its
#: transposed row) over chunks of rows, the rows over slabs for both orders and for
#: ``once``.
FULL_ROWS = compiled_scans(_list_scan_kernel(half=False), "list_function_rows",
                           ROWS_PER_CHUNK)
HALF_ROWS = compiled_scans(_list_scan_kernel(half=True), "list_function_half_rows")
ONCE_ROWS = compiled_scans(_list_scan_kernel(half=True, once=True), "list_once_half_rows")
