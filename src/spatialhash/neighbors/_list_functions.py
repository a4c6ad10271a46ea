"""The host side of a user's function over a neighbour list's pairs
(`NeighborList.for_each_pair`): which scan of ``_kernels/neighbor_list_functions.py`` runs,
on which rows, and on how many threads.

The scans run as the grid's do (``grid/_pair_functions.py``, `run_scan`): on the calling
thread, or through their parallel driver and guard on every thread, a chunk that raised
run again on the calling thread to raise its exception here. They take a `ScanContext` of
the list's own arrays, the index dtype of its points and its thread count; the threshold
of the threads, ``_pair_functions.PARALLEL_MIN_PAIR_POINTS``, is the grid's, so that a
list and a grid on the same points choose alike.
"""

from __future__ import annotations

import numpy as np

from .._user_functions import PAIR_CALL
from ..grid import _pair_functions
from ..grid._pair_functions import ScanContext, run_scan
from ._kernels import neighbor_list_functions

#: The kernels of each scan, as `run_scan` takes them: (sequential scan, guarded scan,
#: parallel driver, items a chunk, how it calls ``fn``, what its items are).
_LIST_SCAN = (*neighbor_list_functions.FULL_ROWS, neighbor_list_functions.ROWS_PER_CHUNK,
              PAIR_CALL, "rows")
_LIST_HALF_SCAN = (*neighbor_list_functions.HALF_ROWS, 1, PAIR_CALL, "slabs of rows")
_LIST_ONCE_SCAN = (*neighbor_list_functions.ONCE_ROWS, 1, PAIR_CALL, "slabs of rows")


def for_each_listed_pair(state, r2: float, slabs, lower_rows, n_threads, fn, args,
                         once: bool = False) -> None:
    """``fn(i, j, d2, dx, dy, dz, *args)`` for every ordered pair of a neighbour list's
    candidates within ``r2`` (`NeighborList.for_each_pair`; ``state`` a
    `neighbor_list_functions.ListState`, whose ``order`` has the index dtype of its
    points): over the rows in ``slabs`` of rows (`FoundPairs.slabs` of the build), each
    pair met once and ``fn`` called for both orders (or, ``once``, one); where ``slabs``
    is None, with ``PARALLEL_MIN_PAIR_POINTS`` points or more and both orders, over the full
    rows (with ``lower_rows()``, the transposed rows), else all rows as one slab on the
    calling thread. As the grid's `for_each_pair`: on every thread from that many points,
    and the choice of the scan does not depend on the threads."""
    context = ScanContext(state, state.order.dtype, n_threads)
    n_rows = state.order.shape[0]
    # Read at each call: the grid's threshold, and the one tests patch.
    many = n_rows >= _pair_functions.PARALLEL_MIN_PAIR_POINTS
    parallel = many and n_threads != 1
    if slabs is None and many and not once:
        run_scan(context, parallel, _LIST_SCAN, (r2, *lower_rows()), n_rows, fn, args)
        return
    if slabs is None:
        slabs = np.array([[0, n_rows]], dtype=np.int64)
        parallel = False
    run_scan(context, parallel, _LIST_ONCE_SCAN if once else _LIST_HALF_SCAN, (r2, slabs),
             slabs.shape[0], fn, args)
