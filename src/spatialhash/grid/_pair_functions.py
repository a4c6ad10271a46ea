"""The host side of a user's function called from the grid's kernels on the CPU: the
engine's `for_each_pair` and `for_each_neighbor` (`_engine.GridEngine`), and the ray casts
with ``fn`` (`ray_function_hits`, for `CpuEngine.query_ray`). `run_scan` runs any of these
scans, and those of a neighbour list (``spatialhash/neighbors``), given a `ScanContext`:
the arrays the kernels take, their index dtype and the thread count.

Few points (or queries, or rays) run the sequential scan of ``_kernels/pair_functions.py``
(``_kernels/ray_functions.py``) on the calling thread. Many run its parallel driver, chunks
of cells (or queries, or rays) on every thread, which calls the scan through a guard that
catches exceptions (see the kernel module), through the guard's address
(`indirect.kernel_target`): called directly, the guard's code (the scan's) is optimized
and emitted once more inside the driver, and the first multi-threaded call with a new
``fn`` takes about 1.6 times as long (30,000 points, first call less the second in a fresh
process, 2-core machine). The calls of ``fn``, and their order for each point (or
ray), are the same on both paths.

Here too: numba's failure to type ``fn`` with its arguments becomes a `TypeError` that says
how ``fn`` is called (``spatialhash/_user_functions.py``); a chunk that raised on a worker
thread is run again on the calling thread, so that ``fn``'s own exception is raised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .. import _config
from .._kernels import indirect
from .._user_functions import GRID_RAY_CALL, PAIR_CALL, arg_types, typed_call
from ._kernels import pair_functions, ray_functions, stencil

#: The most slabs, and the fewest, of a half-stencil scan (`slab_plan`): enough for every
#: thread to take slabs of about equal work in each of the two phases. Below
#: `FEW_SLABS`, a multiple of 4 (two phases of an even number of slabs).
MAX_SLABS = 128
MIN_SLABS = 4
FEW_SLABS = 16
#: From this many points, `for_each_pair` (on the grid or a neighbour list) runs on every
#: thread, and a grid without slabs scans the full stencil, whatever the thread count (so
#: that the order of the calls does not depend on it); with fewer, everything runs on the
#: calling thread, on the half stencil where the grid allows it. As `query_pairs`'s
#: threshold (``_pair_search.PARALLEL_MIN_POINTS_ONE_PASS``): with the work of a function
#: at every pair, two threads beat one well below it (Lennard-Jones forces on 2,048
#: atoms, 2 cores: 31% less time on the grid, 41% on a list).
PARALLEL_MIN_PAIR_POINTS = 2_000

if TYPE_CHECKING:
    from ._cpu_engine import CpuEngine

#: The kernels of each scan: (sequential scan, guarded scan, parallel driver, items a chunk,
#: how it calls ``fn``, what its items are).
_PAIR_SCAN = (*pair_functions.PAIR_CELLS, pair_functions.CELLS_PER_CHUNK, PAIR_CALL,
              "occupied cells")
_HALF_SCAN = (*pair_functions.HALF_CELLS, 1, PAIR_CALL, "slabs of cells")
_ONCE_SCAN = (*pair_functions.ONCE_CELLS, 1, PAIR_CALL, "slabs of cells")
#: On the calling thread only: no guard, no driver.
_ONCE_FULL_SCAN = (pair_functions.pair_once_cells, None, None, None, PAIR_CALL,
                   "occupied cells")
_NEIGHBOR_SCAN = (*pair_functions.NEIGHBOR_QUERIES, pair_functions.QUERIES_PER_CHUNK,
                  PAIR_CALL, "queries")
_RAY_SCAN = (*ray_functions.RAYS, ray_functions.RAYS_PER_CHUNK, GRID_RAY_CALL, "rays")


class ScanContext(NamedTuple):
    """What `run_scan` needs besides the scan's kernels and parameters."""

    #: The arrays every kernel of the scan takes first: a `GridState`, or a neighbour
    #: list's ``ListState``.
    state: tuple
    #: The dtype of the state's point indices (part of the key of a driver's target).
    index_dtype: np.dtype
    #: Threads of a parallel scan (None: numba's, -1: all).
    n_threads: int | None


def engine_context(engine: CpuEngine) -> ScanContext:
    """The scan context of a CPU engine: its state, index dtype and thread count."""
    return ScanContext(engine.state, engine.index_dtype, engine.n_threads)


def for_each_pair(engine: CpuEngine, r2, radii, reach, fn, args, once: bool = False) -> None:
    """``fn(i, j, d2, dx, dy, dz, *args)`` for every ordered pair within ``r2`` (or
    ``radii``, in the engine's point order; see `_engine.GridEngine.for_each_pair`), or
    with ``once`` for every pair in one of its orders.

    Each unordered pair is found once, on the half stencil, and ``fn`` called for both
    orders (or, ``once``, the one it was found in), where the grid cuts into slabs
    (`slab_plan`), and on the calling thread where it does not and has fewer than
    `PARALLEL_MIN_PAIR_POINTS` points. Otherwise (more points without slabs, or pairs
    found by cell id) each point scans its full stencil and meets each pair from its own
    side; with ``once``, on the calling thread (the half stencil, or by cell id the full
    one, keeping ``i < j``). The choice depends on the grid, never on the threads."""
    state = engine.state
    context = engine_context(engine)
    n_occupied = engine.n_occupied_cells
    reach_cells, by_id, slabs = _cell_slabs(state, reach)
    many = engine.n_points >= PARALLEL_MIN_PAIR_POINTS
    parallel = many and engine.n_threads != 1
    full_params = (r2, radii, reach_cells)
    if by_id and once:
        run_scan(context, False, _ONCE_FULL_SCAN, full_params, n_occupied, fn, args)
        return
    if by_id or (slabs is None and many and not once):
        run_scan(context, parallel, _PAIR_SCAN, full_params, n_occupied, fn, args)
        return
    if slabs is None:
        slabs, parallel = np.array([[0, n_occupied]], dtype=np.int64), False
    params = (r2, radii, reach_cells, slabs)
    run_scan(context, parallel, _ONCE_SCAN if once else _HALF_SCAN, params, slabs.shape[0],
             fn, args)


def row_slabs(state, reach: float) -> np.ndarray | None:
    """The slabs of `slab_plan` for pairs within ``reach`` on the grid ``state`` as ranges
    of its sorted points (rows of a neighbour list built on that grid,
    `FoundPairs.slabs`); None where the grid has no slabs."""
    slabs = _cell_slabs(state, reach)[2]
    return None if slabs is None else state.cell_start[slabs]


def _cell_slabs(state, reach: float) -> tuple:
    """``(reach_cells, by_id, slabs)`` of pairs within ``reach`` on the grid ``state``:
    the reach in cells, whether pairs are found by cell id, and the `slab_plan` (None by
    id or without slabs)."""
    reach_cells = stencil.reach_in_cells(state.inv_cell_size, state.n_cells, reach)
    by_id = stencil.stencil_by_id(state.n_cells, state.box, reach_cells,
                                state.cell_coords.shape[0])
    return reach_cells, by_id, None if by_id else slab_plan(state, reach_cells)


def slab_plan(state, reach_cells) -> np.ndarray | None:
    """Slabs of cells for the half-stencil scan (`pair_functions.HALF_CELLS`):
    ``(n_slabs, 2)`` int64, the first and one past the last cell id of each slab, the even
    slabs first then the odd ones (the order in which the scan runs them); None for fewer
    than `MIN_SLABS`.

    A slab is a range of planes across the slowest axis of more than one cell (z, or y in
    a plane, or x on a line): a range of cell ids, cells being in row-major order. Each
    slab is at least ``reach`` planes thick, so the half stencils of a slab's cells (which
    reach ``reach`` planes forward) end in the next slab, and those of the last slab, on a
    periodic axis, in the first. On a periodic axis the number of slabs is even, so that
    the last slab and the first never run together (an odd number of slabs loses the cut
    between the two neighbours of fewest points). Up to `MAX_SLABS` slabs of about equal
    numbers of points; with room for fewer than `FEW_SLABS`, a multiple of 4, so that
    each phase splits evenly over two threads. The plan depends on the grid alone, so the
    order of the calls does too.
    """
    n_cells = state.n_cells
    axis = next((axis for axis in (2, 1, 0) if n_cells[axis] > 1), None)
    if axis is None:
        return None
    thickness = max(int(reach_cells[axis]), 1)
    n_planes = int(n_cells[axis])
    n_slabs = min(MAX_SLABS, n_planes // thickness)
    if n_slabs < FEW_SLABS:
        n_slabs -= n_slabs % 4
    if n_slabs < MIN_SLABS:
        return None
    coords = state.cell_coords[:, axis]
    cell_start = state.cell_start
    points_before = np.cumsum(np.bincount(coords, weights=np.diff(cell_start),
                                          minlength=n_planes))
    wanted = np.searchsorted(points_before,
                             np.arange(1, n_slabs) * (cell_start[-1] / n_slabs)) + 1
    cuts = [0]
    for plane in wanted.tolist():
        if plane - cuts[-1] >= thickness and n_planes - plane >= thickness:
            cuts.append(plane)
    if len(cuts) < MIN_SLABS:
        return None
    if not np.isinf(state.box[axis]) and len(cuts) % 2 == 1:
        # Merge the two neighbouring slabs of fewest points: the phases stay balanced.
        points_at = np.append(points_before[np.array(cuts[1:], np.int64) - 1], cell_start[-1])
        per_slab = np.diff(points_at, prepend=0.0)
        cuts.pop(1 + int(np.argmin(per_slab[:-1] + per_slab[1:])))
    if len(cuts) < MIN_SLABS:
        return None
    bounds = np.append(np.searchsorted(coords, cuts), coords.shape[0]).astype(np.int64)
    slabs = np.column_stack([bounds[:-1], bounds[1:]])
    return np.ascontiguousarray(np.concatenate([slabs[0::2], slabs[1::2]]))


def for_each_neighbor(engine: CpuEngine, query_points, radii, fn, args) -> None:
    """``fn(q, j, d2, dx, dy, dz, *args)`` for every point ``j`` within ``radii[q]`` of
    each query (see `_engine.GridEngine.for_each_neighbor`)."""
    m = query_points.shape[0]
    run_scan(engine_context(engine), engine.parallel_over_queries(m), _NEIGHBOR_SCAN,
             (query_points, radii), m, fn, args)


def ray_function_hits(engine: CpuEngine, rays: tuple, visit_order: np.ndarray, fn,
                      args) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, distances)`` of the first hit of each ray that ``fn(ray, index, distance,
    *args)`` accepts, offered its hits nearest first (``_kernels/ray_functions.py``);
    ``rays`` as `CpuEngine._cast_rays` takes them."""
    m = visit_order.shape[0]
    limit = rays[-1]
    if not limit.flags.writeable:
        # The caller's read-only array would type the kernels apart from a writable one,
        # which the parallel driver's target (keyed by ``fn`` and ``args``) does not tell.
        rays = (*rays[:-1], limit.copy())
    indices = np.empty(m, dtype=engine.index_dtype)
    distances = np.empty(m)
    run_scan(engine_context(engine), engine.parallel_over_queries(m), _RAY_SCAN,
             (*rays, visit_order, indices, distances), m, fn, args)
    return indices, distances


def run_scan(context: ScanContext, parallel: bool, kernels, params, n_items: int, fn,
             args) -> None:
    """The ``n_items`` items (cells, slabs, rows or queries) of ``kernels`` (see
    `_PAIR_SCAN`): on the calling thread, or on every thread in chunks, then the first
    chunk that raised, if any, again on the calling thread, to raise its exception here."""
    scan, guarded, driver, per_chunk, call, noun = kernels
    state = context.state
    if not parallel:
        typed_call(fn, args, call, scan, state, params, 0, n_items, fn, args)
        return
    failed = np.zeros(-(-n_items // per_chunk), dtype=np.bool_)
    # The target is kept by `indirect` under this key, which tells its types apart.
    key = (context.index_dtype, fn, arg_types(fn, args, call))
    with _config.threads(context.n_threads):
        target = typed_call(fn, args, call, indirect.kernel_target, guarded,
                            (state, params, 0, 0, fn, args), key)
        driver(state, params, n_items, failed, fn, args, target)
    if not failed.any():
        return
    lo = int(np.flatnonzero(failed)[0]) * per_chunk
    hi = min(lo + per_chunk, n_items)
    scan(state, params, lo, hi, fn, args)
    raise RuntimeError(
        f"`fn` raised an exception on a worker thread (items {lo} to {hi - 1} of "
        f"{n_items} {noun}), but not when these were run again on the calling thread; got "
        f"{fn!r}. Its exception cannot be shown: run with n_threads=1 to see it."
    )
