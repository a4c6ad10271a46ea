"""The host side of `Grid.for_each_pair` and `Grid.for_each_neighbor` on the CPU: the
engine's `for_each_pair` and `for_each_neighbor` (`_engine.GridEngine`).

Few points (or queries) run the sequential scan of ``_kernels/pair_functions.py`` on the
calling thread. Many run its parallel driver, chunks of cells (or queries) on every
thread, which calls the scan through a guard that catches exceptions (see the kernel
module), through the guard's address (`indirect.kernel_target`): called directly, the
guard's code (the scan's) was optimized and emitted once more inside the driver, and the
first multi-threaded call with a new ``fn`` took 3.4-3.6 s instead of 2.1-2.3 s (ad hoc:
30,000 points, first call less the second in a fresh process, 2-core machine). The calls
of ``fn``, and their order for each point, are the same on both paths.

Here too: numba's failure to type ``fn`` with its arguments becomes a `TypeError` that says
how ``fn`` is called; a chunk that raised on a worker thread is run again on the calling
thread, so that ``fn``'s own exception is raised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np
from numba.core.errors import TypingError

from .. import _config
from .._kernels import indirect
from ._kernels import pair_functions, pairs

if TYPE_CHECKING:
    from ._cpu_engine import CpuEngine

#: The kernels of each scan: (sequential scan, guarded scan, parallel driver, items a chunk).
_PAIR_SCAN = (pair_functions.pair_function_cells, pair_functions.pair_function_cells_guarded,
              pair_functions.pair_function_parallel, pair_functions.CELLS_PER_CHUNK)
_NEIGHBOR_SCAN = (pair_functions.neighbor_function_queries,
                  pair_functions.neighbor_function_queries_guarded,
                  pair_functions.neighbor_function_parallel, pair_functions.QUERIES_PER_CHUNK)


def for_each_pair(engine: CpuEngine, r2, radii, reach, fn, args) -> None:
    """``fn(i, j, d2, dx, dy, dz, *args)`` for every ordered pair within ``r2`` (or
    ``radii``, in the engine's point order; see `_engine.GridEngine.for_each_pair`)."""
    state = engine.state
    reach_cells = pairs.reach_in_cells(state.inv_cell_size, state.n_cells, reach)
    _scan(engine, engine.parallel_over_points(engine.n_points), _PAIR_SCAN,
          (r2, radii, reach_cells), engine.n_occupied_cells, fn, args)


def for_each_neighbor(engine: CpuEngine, query_points, radii, fn, args) -> None:
    """``fn(q, j, d2, dx, dy, dz, *args)`` for every point ``j`` within ``radii[q]`` of
    each query (see `_engine.GridEngine.for_each_neighbor`)."""
    m = query_points.shape[0]
    _scan(engine, engine.parallel_over_queries(m), _NEIGHBOR_SCAN, (query_points, radii), m,
          fn, args)


def _scan(engine: CpuEngine, parallel: bool, kernels, params, n_items: int, fn,
          args) -> None:
    """The ``n_items`` items (cells or queries) of ``kernels`` (see `_PAIR_SCAN`): on the
    calling thread, or on every thread in chunks, then the first chunk that raised, if
    any, again on the calling thread, to raise its exception here."""
    scan, guarded, driver, per_chunk = kernels
    state = engine.state
    if not parallel:
        _typed_call(fn, args, scan, state, params, 0, n_items, fn, args)
        return
    failed = np.zeros(-(-n_items // per_chunk), dtype=np.bool_)
    # The target is kept by `indirect` under this key, which tells its types apart.
    key = (engine.index_dtype, fn, _arg_types(fn, args))
    with _config.threads(engine.n_threads):
        target = _typed_call(fn, args, indirect.kernel_target, guarded,
                             (state, params, 0, 0, fn, args), key)
        driver(state, params, n_items, failed, fn, args, target)
    if not failed.any():
        return
    lo = int(np.flatnonzero(failed)[0]) * per_chunk
    hi = min(lo + per_chunk, n_items)
    scan(state, params, lo, hi, fn, args)
    raise RuntimeError(
        f"`fn` raised an exception on a worker thread (items {lo} to {hi - 1} of "
        f"{n_items}), but not when these were run again on the calling thread; got "
        f"{fn!r}. Its exception cannot be shown: run with n_threads=1 to see it."
    )


def _typed_call(fn, args, call, *call_args):
    """``call(*call_args)``, where numba's failure to type ``fn`` with ``args`` raises
    `_call_error` instead (numba's error as its cause)."""
    try:
        return call(*call_args)
    except TypingError as error:
        raise _call_error(fn, args) from error


def _arg_types(fn, args) -> tuple:
    """The numba types of ``args``; a `_call_error` when numba cannot type one."""
    try:
        return tuple(numba.typeof(arg) for arg in args)
    except ValueError as error:
        raise _call_error(fn, args) from error


def _call_error(fn, args) -> TypeError:
    """The error for an ``fn`` numba cannot compile with the arguments it is given."""
    described = []
    for arg in args:
        try:
            described.append(str(numba.typeof(arg)))
        except ValueError:
            described.append(f"{type(arg).__name__}, which numba cannot type")
    return TypeError(
        "`fn` must take fn(i, j, d2, dx, dy, dz, *args), i and j int64, d2, dx, dy and dz "
        f"float64, args the arguments after `fn` (here: {', '.join(described) or 'none'}); "
        f"got {fn!r}, which numba could not compile for that call (numba's error is the "
        "cause above)."
    )
