"""Passes over the rows a query found, on the device: its rows as pairs, and each point's
own index taken out of its row (``queries=None, exclude_self=True``), with the
arithmetic-free bookkeeping of the host's `Neighbors.to_pairs` and
``_self_exclusion.py``, so that the rows stay where they were found.

``pairs_of_rows``: row ``q`` of a radius query as the pairs ``(q, i)``.
``rows_without_own``: the count or fill pass (as `_warp_engine.WarpEngine._count_and_fill`
runs them) of the radius rows less each row's own index. ``knn_without_own``: the
``k + 1`` nearest of each point less its own index, or less the last where its index is
not in the row. ``less_one``: the counts of those rows.
"""

from __future__ import annotations

from typing import Any

import warp as wp

from . import MODULE_OPTIONS

wp.set_module_options(MODULE_OPTIONS)


@wp.kernel
def pairs_of_rows(indptr: wp.array(dtype=wp.int64), indices: wp.array(dtype=Any),
                  pairs: wp.array2d(dtype=Any)):
    """``pairs[t] = (q, indices[t])`` for the entries ``t`` of row ``q`` (CSR
    ``indptr``)."""
    q = wp.tid()
    t = indptr[q]
    while t < indptr[q + 1]:
        pairs[t, 0] = pairs.dtype(q)
        pairs[t, 1] = indices[t]
        t += wp.int64(1)


@wp.kernel
def rows_without_own(indptr: wp.array(dtype=wp.int64), indices: wp.array(dtype=Any),
                     distances: wp.array(dtype=wp.float64), write: bool,
                     positions: wp.array(dtype=wp.int64), kept: wp.array2d(dtype=Any),
                     kept_distances: wp.array(dtype=wp.float64)):
    """Row ``q`` of CSR ``indptr`` and ``indices`` (and ``distances`` where not empty)
    without the entries ``q``: counted into ``positions[q]``, or with ``write``
    written from ``positions[q]`` (the new row's offset) on, in their order."""
    q = wp.tid()
    t = indptr[q]
    n_kept = wp.int64(0)
    start = wp.int64(0)
    if write:
        start = positions[q]
    while t < indptr[q + 1]:
        if wp.int64(indices[t]) != wp.int64(q):
            if write:
                kept[start + n_kept, 0] = indices[t]
                if kept_distances.shape[0] > 0:
                    kept_distances[start + n_kept] = distances[t]
            n_kept += wp.int64(1)
        t += wp.int64(1)
    if not write:
        positions[q] = n_kept


@wp.kernel
def knn_without_own(indices: wp.array2d(dtype=Any), distances: wp.array2d(dtype=wp.float64),
                    counts: wp.array(dtype=wp.int64), kept: wp.array2d(dtype=Any),
                    kept_distances: wp.array2d(dtype=wp.float64),
                    kept_counts: wp.array(dtype=wp.int64)):
    """Row ``q`` of a ``k + 1`` nearest search less its own index ``q``, or less its last
    slot where ``q`` is not in the row (``k + 1`` points rank before it), into the ``k``
    slots of ``kept``; ``kept_counts`` as the host's `knn_without_self` counts."""
    q = wp.tid()
    width = indices.shape[1]
    drop = width - 1
    for j in range(width):
        if drop == width - 1 and wp.int64(indices[q, j]) == wp.int64(q):
            drop = j
    own = wp.int64(indices[q, drop]) == wp.int64(q)
    for j in range(width - 1):
        source = j
        if j >= drop:
            source = j + 1
        kept[q, j] = indices[q, source]
        kept_distances[q, j] = distances[q, source]
    if own:
        kept_counts[q] = counts[q] - wp.int64(1)
    else:
        kept_counts[q] = wp.min(counts[q], wp.int64(width - 1))


@wp.kernel
def less_one(counts: wp.array(dtype=wp.int64)):
    """``counts[q] -= 1``: the counts of each point's row less its own index."""
    q = wp.tid()
    counts[q] = counts[q] - wp.int64(1)


for _dtype in (wp.int32, wp.int64):
    wp.overload(pairs_of_rows, {"indices": wp.array(dtype=_dtype),
                                "pairs": wp.array2d(dtype=_dtype)})
    wp.overload(rows_without_own, {"indices": wp.array(dtype=_dtype),
                                   "kept": wp.array2d(dtype=_dtype)})
    wp.overload(knn_without_own, {"indices": wp.array2d(dtype=_dtype),
                                  "kept": wp.array2d(dtype=_dtype)})
