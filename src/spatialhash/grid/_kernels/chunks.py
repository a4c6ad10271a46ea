"""How the parallel drivers of the radius and k-nearest queries cut their queries into
calls of their sequential kernel.

Each call of a sequential kernel allocates its scratch (a dozen small arrays, through
numba's allocator) and starts its caches afresh (the gathered block of cells). Calls of
a fixed 64 queries made a million queries about 200,000 allocations a pass (numba's
``rtsys.get_allocation_stats()``); at most `MAX_CALLS` calls make them at most about
15,000. (The pair search's drivers call their kernel once per part of cells still: cut
so, its sampled estimate made 123,000 allocations fewer, yet a million-point
``query_pairs`` measured slower, not examined further; ``docs/benchmarks.md``.)

The cap is a constant rather than a number of calls per thread: a kernel that asks
numba for its thread count holds a pointer into the threading layer, and numba no
longer caches it on disk.
"""

from __future__ import annotations

import numpy as np

from ..._config import jit_inline

#: Most calls of the sequential kernel in one parallel pass: enough for the threads of a
#: large machine to share the work evenly (work stealing takes whole calls), few enough
#: that their scratch costs nothing next to their work.
MAX_CALLS = 1024


@jit_inline
def call_count(n_items, min_items):
    """Calls to cut ``n_items`` into: at most `MAX_CALLS`, of at least ``min_items``
    items each (one call for fewer items, none for none)."""
    if n_items < min_items:
        return min(n_items, 1)
    return min(n_items // min_items, MAX_CALLS)


@jit_inline
def call_items(call, n_calls, n_items):
    """Items ``lo .. hi - 1`` of call ``call`` of ``n_calls`` (of about equal sizes), as
    int64 (a `prange` index is unsigned)."""
    k = np.int64(call)
    return k * n_items // n_calls, (k + 1) * n_items // n_calls
