"""A user's compiled function called for every pair or every neighbour, storing nothing.

`Grid.for_each_pair` and `Grid.for_each_neighbor` call ``fn(i, j, d2, dx, dy, dz,
*args)``, ``fn`` being the caller's numba function (a dispatcher argument). Three scans:

- the scan of ``query_pairs`` (`pair_scan.half_stencil_scan`) with the `BOTH_ORDERS` or
  `ONCE` visitor, pairs on grids cut into slabs (`_pair_functions.slab_plan`, most grids):
  each point of a cell against the points after it in the cell's half stencil, so each
  unordered pair is met once and ``fn`` called for ``(i, j)`` and then ``(j, i)`` (or
  once). Its items are slabs (``params = (r2, radii, reach_cells, slabs)``), which the
  driver runs in two phases (`_slab_parallel_kernel`);
- `_scan_kernel` over cells (``over_cells``), pairs on the other grids (pairs by cell id,
  too few planes for slabs): each point of a cell against the runs of the cell's full
  stencil, so each unordered pair is met twice, once from each side;
- `_scan_kernel` over queries: each query against the runs of its block of cells.

Runs come from `cells.gather_runs`, periodic images as run shifts, and whole periodic axes
as per-pair minimum images (`cells.min_image`), with the arithmetic of the pair and radius
kernels: a pair is met here exactly when ``query_pairs`` (or ``query_radius``) reports it,
with the same ``d2``, and ``(dx, dy, dz)`` of the pair ``(j, i)`` is that of ``(i, j)``
negated, bit for bit. Each scan computes a point's distances in a loop LLVM vectorizes,
picks out the hits without a branch, then calls ``fn`` for each hit: a branch on every
distance, mispredicted around every hit, had cost more than the distances.

Determinism. The full-stencil scans visit a point (or query) on the one thread that scans
its cell (or chunk of queries), which calls ``fn`` for its ``j`` in the order of the runs.
The half-stencil scan calls ``fn`` for row ``j`` from the cell of ``i``, in the slab of
``j`` or the slab before it; slabs run in two phases, those of a phase writing disjoint
rows, and on one thread in the same phase order. Either way, the calls for each row come
in an order fixed by the grid, for any thread count, so accumulations into row ``i`` come
out the same, bit for bit.

Errors. Numba does not carry an exception raised inside a ``prange`` loop out cleanly (the
caller gets ``SystemError: ... returned a result with an exception set``, numba 0.68). The
parallel driver therefore calls each chunk through a guard (`_guarded_kernel`) that catches
any exception and marks the chunk failed; the host then runs the first failed chunk again
on the calling thread, so that ``fn``'s own exception, type and message, reaches the
caller (``_pair_functions.py``). The driver calls the guard through its address
(`indirect.kernel_caller`), so that the scan is not compiled into the driver once more.

Compiling and caching. Each ``fn`` (and each set of ``args`` types) is a new type for numba,
so these kernels compile anew for each function, with ``fn`` inlined. They are not cached
on disk: numba's cache keys them by the dispatcher of ``fn``, a new object in every
process, so a later process never finds the entry. Checked on a kernel of this form with
``cache=True``: three processes in turn, each with 0 hits and 1 miss, each adding a data
file to the cache (which would grow with every run). The cell helpers they call
(`cells.gather_runs` and the like) are cached as usual.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from ..._config import _JIT_OPTIONS, _kernel
from ..._kernels.cells import (
    axis_range,
    gather_runs,
    query_cell_range,
    run_buffers,
    runs_capacity,
    wrap_whole_axes,
)
from ..._kernels.distance import NO_BOX, NO_SHIFT, displacement
from ..._kernels.indirect import kernel_caller
from .pair_scan import (
    BOTH_ORDERS,
    GATHER_MIN_POINTS_PER_CELL,
    ONCE,
    gather_near,
    half_stencil_scan,
    near_buffers,
)

#: Occupied cells handed to a thread at a time.
CELLS_PER_CHUNK = 16
#: Queries handed to a thread at a time.
QUERIES_PER_CHUNK = 64
#: The shared options of `_config.jit`, without the disk cache (see the module docstring).
_UNCACHED = {**_JIT_OPTIONS, "cache": False}


def _jit_uncached(func, name: str, *, parallel: bool = False):
    """Compile ``func`` (made by a factory) as the uncached kernel ``name``."""
    func.__name__ = func.__qualname__ = name
    return _kernel(numba.njit(parallel=parallel, **_UNCACHED)(func))


def _scan_kernel(over_cells, once=False):
    """The sequential scan over items ``lo .. hi - 1``: occupied cells (``over_cells``,
    ``params = (r2, radii, reach_cells)``, ``radii`` in the grid's point order or empty) or
    queries (``params = (queries, radii)``, one radius per query). With ``once`` (over
    cells only), each pair is kept from the side of its smaller index only: ``fn(i, j,
    ...)`` with ``i < j``, once. ``over_cells`` and ``once`` are constants of each
    compiled kernel: numba prunes the branches on them.

    For each point ``i`` of the item (or the query), the distances to a run's points are
    computed first, in a loop LLVM vectorizes, then ``fn`` is called for the hits, with the
    differences computed again, by the same arithmetic. In grids of several points per cell
    (`pair_scan.GATHER_MIN_POINTS_PER_CELL`), a cell whose runs need no periodic image first
    copies the candidates within reach of the box bounding its points next to each other,
    in the order of the runs, as `pair_scan.half_stencil_scan` does; each of its points
    then scans that one run: the same calls in the same order, 18% less time for the SPH
    density of a million points (``benchmarks/bench_pair_functions.py``).
    """

    def scan(state, params, lo, hi, fn, args):
        points, order, cell_start = state.points, state.order, state.cell_start
        cell_coords, n_cells, box_axis = state.cell_coords, state.n_cells, state.box
        dense_start, hash_keys, hash_ids = state.dense_start, state.hash_keys, state.hash_ids
        box3 = (box_axis[0], box_axis[1], box_axis[2])
        if over_cells:
            pair_r2, radii, reach_cells = params
            with_radii = radii.shape[0] > 0
        else:
            queries, radii = params
            with_radii = False
        first = np.empty(3, np.int64)
        last = np.empty(3, np.int64)
        half = np.empty(3, np.float64)
        run_bounds, run_shifts = run_buffers(32)
        run_d2 = np.empty(256, np.float64)
        n_occupied = cell_coords.shape[0]
        # Grids of several points per cell gather a cell's candidates (see `_scan_kernel`).
        gather = over_cells and cell_start[n_occupied] >= GATHER_MIN_POINTS_PER_CELL * n_occupied
        near_x, near_y, near_z, near_j, near_radii = near_buffers(256)
        hit_index = np.empty(256, np.int64)
        for item in range(lo, hi):
            if over_cells:
                for axis in range(3):
                    first[axis], last[axis] = axis_range(
                        n_cells[axis], box_axis[axis],
                        float(cell_coords[item, axis] - reach_cells[axis]),
                        float(cell_coords[item, axis] + reach_cells[axis]))
                source_lo, source_hi = cell_start[item], cell_start[item + 1]
                r2 = pair_r2
            else:
                query_cell_range(state.origin, state.inv_cell_size, n_cells, box_axis,
                                 (queries[item, 0], queries[item, 1], queries[item, 2]),
                                 radii[item], first, last)
                source_lo, source_hi = item, item + 1
                r2 = radii[item] * radii[item]
            use_min_image = wrap_whole_axes(n_cells, box_axis, state.half_box, first, last,
                                            half)
            half3 = (half[0], half[1], half[2])
            needed = runs_capacity(first, last, n_occupied)
            if needed > run_bounds.shape[0]:
                run_bounds, run_shifts = run_buffers(needed)
            n_runs = gather_runs(n_cells, box_axis, cell_coords, cell_start, dense_start,
                                 hash_keys, hash_ids, first, last, False, (0, 0, 0),
                                 (run_bounds, run_shifts))
            shifted = use_min_image
            n_candidates = 0
            for r in range(n_runs):
                n_candidates += run_bounds[r, 1] - run_bounds[r, 0]
                shifted |= (run_shifts[r, 0] != 0.0) | (run_shifts[r, 1] != 0.0) | (
                    run_shifts[r, 2] != 0.0)
            if gather and not shifted:
                # The candidates within reach of the box bounding the cell's points, copied
                # next to each other in the order of the runs (`pair_scan.gather_near`).
                if n_candidates > near_x.shape[0]:
                    near_x, near_y, near_z, near_j, near_radii = near_buffers(n_candidates)
                if n_candidates > run_d2.shape[0]:
                    run_d2 = np.empty(n_candidates, np.float64)
                    hit_index = np.empty(n_candidates, np.int64)
                n_near = gather_near(points, order, radii, r2, (run_bounds, n_runs), source_lo,
                                     source_hi, 0, (near_x, near_y, near_z, near_j, near_radii))
                for source in range(source_lo, source_hi):
                    x, y, z = points[0, source], points[1, source], points[2, source]
                    own = np.int64(order[source])
                    radius = radii[source] if with_radii else 0.0
                    for k in range(n_near):
                        run_d2[k] = displacement(x, y, z, near_x[k], near_y[k], near_z[k],
                                                 NO_SHIFT, NO_BOX, NO_BOX, False)[3]
                    # The hits picked out without a branch (a hit's place is taken by the
                    # next candidate unless it is kept), then ``fn`` called for each.
                    n_hits = 0
                    if with_radii:
                        for k in range(n_near):
                            limit = radius + near_radii[k]
                            hit_index[n_hits] = k
                            other = near_j[k] > own if once else near_j[k] != own
                            n_hits += 1 if (run_d2[k] <= limit * limit) & other else 0
                    else:
                        for k in range(n_near):
                            hit_index[n_hits] = k
                            other = near_j[k] > own if once else near_j[k] != own
                            n_hits += 1 if (run_d2[k] <= r2) & other else 0
                    for h in range(n_hits):
                        k = hit_index[h]
                        fn(own, near_j[k], run_d2[k], x - near_x[k], y - near_y[k],
                           z - near_z[k], *args)
                continue
            for source in range(source_lo, source_hi):
                if over_cells:
                    x, y, z = points[0, source], points[1, source], points[2, source]
                    own = np.int64(order[source])
                    radius = radii[source] if with_radii else 0.0
                else:
                    x, y, z = queries[source, 0], queries[source, 1], queries[source, 2]
                    own = np.int64(source)
                    radius = 0.0
                for r in range(n_runs):
                    run_lo = run_bounds[r, 0]
                    n_run = run_bounds[r, 1] - run_lo
                    shift = (run_shifts[r, 0], run_shifts[r, 1], run_shifts[r, 2])
                    if n_run > run_d2.shape[0]:
                        run_d2 = np.empty(n_run, np.float64)
                        hit_index = np.empty(n_run, np.int64)
                    # Unsigned bounds: see the `cells` docstring.
                    first_j = np.uint64(run_lo)
                    for k in range(np.uint64(0), np.uint64(n_run)):
                        j = first_j + k
                        run_d2[k] = displacement(x, y, z, points[0, j], points[1, j], points[2, j],
                                                 shift, box3, half3, use_min_image)[3]
                    # Without a branch, as in the gathered scan above.
                    n_hits = 0
                    for k in range(n_run):
                        if with_radii:
                            limit = radius + radii[run_lo + k]
                            hit = run_d2[k] <= limit * limit
                        else:
                            hit = run_d2[k] <= r2
                        if over_cells and once:
                            hit = hit & (order[run_lo + k] > own)
                        elif over_cells:
                            hit = hit & (run_lo + k != source)
                        hit_index[n_hits] = k
                        n_hits += 1 if hit else 0
                    for h in range(n_hits):
                        k = hit_index[h]
                        j = run_lo + k
                        dx, dy, dz, _ = displacement(x, y, z, points[0, j], points[1, j],
                                                     points[2, j], shift, box3, half3,
                                                     use_min_image)
                        fn(own, np.int64(order[j]), run_d2[k], dx, dy, dz, *args)

    return scan


def _guarded_kernel(kernel):
    """``kernel`` run inside ``try``: returns False when it raised (whatever the
    exception), True otherwise. The parallel drivers call this, so that no exception has
    to cross a ``prange`` loop."""

    def guarded(state, params, lo, hi, fn, args):
        try:
            kernel(state, params, lo, hi, fn, args)
        except Exception:  # noqa: BLE001 (any exception: the host raises it again)
            return False
        return True

    return guarded


def _parallel_kernel(guarded, per_chunk):
    """The parallel driver over ``n_items`` items in chunks of ``per_chunk``, one chunk
    per ``failed`` entry: ``failed[c]`` is set when chunk ``c`` raised (it is left as it
    was otherwise). It calls ``guarded`` at ``target`` (`indirect.kernel_target`), so that
    the scan's code is not compiled into the driver once more."""
    check, call = kernel_caller(guarded)

    def scan_parallel(state, params, n_items, failed, fn, args, target):
        check(target, (state, params, n_items, n_items, fn, args))
        for chunk in prange(failed.shape[0]):
            lo = np.int64(chunk) * per_chunk
            if not call(target, (state, params, lo, min(lo + per_chunk, n_items), fn, args)):
                failed[chunk] = True

    return scan_parallel


def _slab_parallel_kernel(guarded):
    """The parallel driver of the half-stencil scan over its ``n_slabs`` slabs (in
    ``params[4]``, the even slabs first, then the odd ones): the first half on every
    thread, then the second. A slab's half stencils reach no further than the next slab
    (see `_pair_functions.slab_plan`), so the slabs running at the same time write
    disjoint rows, and the calls for each row come in the order of the sequential scan.
    ``failed[s]`` is set when slab ``s`` raised."""
    check, call = kernel_caller(guarded)

    def scan_slabs(state, params, n_slabs, failed, fn, args, target):
        check(target, (state, params, 0, 0, fn, args))
        n_first = (n_slabs + 1) // 2
        for phase_lo, phase_hi in ((0, n_first), (n_first, n_slabs)):
            for s in prange(phase_lo, phase_hi):
                if not call(target, (state, params, s, s + 1, fn, args)):
                    failed[s] = True

    return scan_slabs


def compiled_scans(scan, name: str, per_chunk: int | None = None) -> tuple:
    """The sequential scan ``scan`` (made by a factory) compiled uncached as ``name``, its
    guard, and its parallel driver: over chunks of ``per_chunk`` items
    (`_parallel_kernel`), or over slabs where ``per_chunk`` is None
    (`_slab_parallel_kernel`)."""
    sequential = _jit_uncached(scan, name)
    guarded = _jit_uncached(_guarded_kernel(sequential), f"{name}_guarded")
    if per_chunk is None:
        driver = _jit_uncached(_slab_parallel_kernel(guarded), f"{name}_slabs", parallel=True)
    else:
        driver = _jit_uncached(_parallel_kernel(guarded, per_chunk), f"{name}_parallel",
                               parallel=True)
    return sequential, guarded, driver


#: Each scan's (sequential scan, guarded scan, parallel driver): the full stencil over
#: chunks of cells, the queries over chunks of queries, the half stencil over slabs for
#: both orders and for ``once``.
PAIR_CELLS = compiled_scans(_scan_kernel(over_cells=True), "pair_function_cells",
                            CELLS_PER_CHUNK)
NEIGHBOR_QUERIES = compiled_scans(_scan_kernel(over_cells=False), "neighbor_function_queries",
                                  QUERIES_PER_CHUNK)
HALF_CELLS = compiled_scans(half_stencil_scan(gather=True, visitor=BOTH_ORDERS),
                            "pair_function_half_cells")
ONCE_CELLS = compiled_scans(half_stencil_scan(gather=True, visitor=ONCE), "pair_once_half_cells")
#: On the calling thread only (grids without slabs, ``once``).
pair_once_cells = _jit_uncached(_scan_kernel(over_cells=True, once=True), "pair_once_cells")
