"""The pair searches of the CPU engine, from the strategy to the kernel.

`query_pairs` takes one of two one-pass strategies: below
`PARALLEL_MIN_POINTS_ONE_PASS` points, `append_pairs` (one pass on the calling thread
into outputs that grow); from there on, `append_pairs_parallel` (regions of cells on
every thread, each appending to rows of its own, moved together afterwards), which falls
back to `count_pairs` and `fill_pairs` (a count pass that sizes the output exactly, then
a fill pass) when there are very many pairs per point. `iter_pairs` counts once, then
fills chunks (`fill_pairs`). Every path gives the same rows in the same order.

The kernels are in ``_kernels/pairs.py`` (the scan of ``_kernels/pair_scan.py`` with its
rows visitor): `pair_kernel` chooses the sequential kernel (the only place that does),
which `scan_cells` runs over a range of cells; `scan_parts` runs the parallel driver
``pairs.pairs_parts`` over parts of the cells, calling that kernel through its address
(see "Compiling" in the design, ``grid/__init__.py``). The kernels take the search as
``(r2, radii, reach_cells)`` and the outputs as the rows visitor's ``(cell_begin,
positions, indices, distances, write, as_found)`` (`pair_scan.half_stencil_scan`).

`FoundPairs` is the answer of `CpuEngine.found_pairs`: the pairs as the search found them,
with the order and the points they refer to.

Every function takes the engine (`_cpu_engine.CpuEngine`): its ``state``,
``index_dtype``, ``n_threads``, ``n_points``, ``n_occupied_cells``, and
``parallel_over_points``. Those that write pairs also take ``order``, the index written
for each of the grid's sorted points: None for the engine's ``state.order`` (the caller's
indices), or the positions themselves (`CpuEngine.found_pairs`), passed to the kernels in
the state's place of ``order``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

import numba
import numpy as np

from .. import _config, _outputs
from .._kernels import indirect
from .._results import Pairs
from ._kernels import pair_scan, pairs, regions, stencil

if TYPE_CHECKING:
    from ._cpu_engine import CpuEngine

#: Pair searches on one thread below this many points: a single pass into outputs that
#: grow. From there on, regions of cells on every thread (two threads beat one from about
#: 1,000 points on, by a quarter at 5,000 on 2 cores: the ``pairs, 5,000 points``
#: workload of ``benchmarks/bench_contention.py``, with ``--n``, measures it).
PARALLEL_MIN_POINTS_ONE_PASS = 2_000
#: Rows first allocated per point by the one-pass pair search of small inputs (it grows
#: by doubling when a dense cloud holds more).
PAIRS_PER_POINT_GUESS = 16
#: Above this many pairs per point (estimated), moving the regions' rows together costs
#: more than a count pass, and the count and fill passes run instead (1,000 Gaussian
#: clusters, 216 pairs per point: the count and fill passes take 5-19% less time;
#: uniform, 15 per point: one pass takes 22% less time; the ``pairs3d_clustered`` and
#: ``pairs3d`` workloads of ``benchmarks/bench_batch.py``).
ONE_PASS_MAX_PAIRS_PER_POINT = 64
#: Below this many points the regions' rows are not estimated but reserved,
#: `PAIRS_PER_POINT_RESERVED` per point: the estimate is a parallel region of its own,
#: whose start after idle (``prange after idle`` in ``benchmarks/bench_threading.py``)
#: matters at a few thousand points.
PAIR_ESTIMATE_MIN_POINTS = 50_000
PAIRS_PER_POINT_RESERVED = 64
#: Every this many cells of a region are counted to size its rows.
PAIR_SAMPLE_STRIDE = 16
#: Rows reserved per region: this multiple of its estimate, plus `PAIR_ROWS_SLACK`. Rows
#: never written cost no memory; a region that needs more is redone alone.
PAIR_ROWS_MARGIN = 1.2
PAIR_ROWS_SLACK = 4096
#: Regions of cells per thread in the parallel one-pass search (load balance).
PAIR_REGIONS_PER_THREAD = 4
#: `iter_pairs` fills the rows of several chunks at once, up to this many (or
#: ``chunk_size``, when larger), and yields copies of their slices: a fill pass costs
#: calls and allocations, and starts a parallel region on large grids, too much to pay
#: for every chunk of a few pairs. A row with its distance takes 24 bytes.
ITER_PAIRS_BATCH_ROWS = 1 << 16
#: Passed where a kernel writes no distances (one specialization with or without them).
_NO_DISTANCES = np.empty(0, dtype=np.float64)
_NO_POSITIONS = np.empty(0, dtype=np.int64)


class FoundPairs(NamedTuple):
    """The pairs of a search as it found them, and the points they refer to
    (`GridEngine.found_pairs`): what a neighbour list keeps as its rows."""

    #: (m, 2), the index dtype: ``(s, t)``, positions in ``order``, ``s`` the point whose
    #: search met ``t``; each pair once, grouped by ``s`` in increasing order.
    pairs: np.ndarray
    #: (n,), the index dtype: the caller's index of the point at each position.
    order: np.ndarray
    #: (n, 3) float64, C-contiguous: the point at each position, as the engine holds it
    #: (wrapped into the periodic box, zeros on padded axes); the caller's to write.
    points: np.ndarray
    #: (n_slabs, 2) int64: ranges of positions whose rows a function over the pairs may
    #: scan at once, in two phases (`_pair_functions.row_slabs`); None where there are none.
    slabs: np.ndarray | None


# ---------------------------------------------------------------------- strategies
def query_pairs(engine: CpuEngine, r2, radii, reach, return_distances,
                as_found: bool = False, order: np.ndarray | None = None) -> Pairs:
    """All pairs (`GridEngine.query_pairs`): one pass, on the calling thread for small
    inputs, else by regions of cells on every thread. With ``as_found``, each pair ``(i,
    j)`` as found, ``i`` the point whose scan met ``j``, rather than ``(min, max)`` (see
    `pair_scan.half_stencil_scan`); with ``order``, the index written for each sorted point
    (`CpuEngine.found_pairs` passes the positions themselves)."""
    if engine.n_points < PARALLEL_MIN_POINTS_ONE_PASS:
        return append_pairs(engine, r2, radii, reach, return_distances, as_found, order)
    with _config.threads(engine.n_threads):
        return append_pairs_parallel(engine, r2, radii, reach, return_distances, as_found,
                                     order)


def indexed_state(engine: CpuEngine, order: np.ndarray | None):
    """The engine's state, writing ``order``'s entry for each sorted point (None: its own
    ``order``, the caller's indices)."""
    return engine.state if order is None else engine.state._replace(order=order)


def append_pairs(engine: CpuEngine, r2, radii, reach, return_distances,
                 as_found: bool = False, order: np.ndarray | None = None) -> Pairs:
    """All pairs in one sequential pass into growing outputs (small inputs): the same
    rows in the same order as the count and fill passes, without the count pass."""
    n = engine.n_points
    state = indexed_state(engine, order)
    reach_cells = stencil.reach_in_cells(state.inv_cell_size, state.n_cells, reach)
    capacity = max(64, PAIRS_PER_POINT_GUESS * n)
    indices = np.empty((capacity, 2), dtype=engine.index_dtype)
    distances = np.empty(capacity if return_distances else 0, dtype=np.float64)
    indices, distances, n_pairs = scan_cells(
        state, (r2, radii, reach_cells), 0, engine.n_occupied_cells,
        (0, _NO_POSITIONS, indices, distances, True, as_found))
    # Keep the rows written; copy them out when the buffer is mostly empty.
    indices = indices[:n_pairs]
    distances = distances[:n_pairs]
    if indices.base is not None and 2 * n_pairs < indices.base.shape[0]:
        indices, distances = indices.copy(), distances.copy()
    return Pairs(indices, distances if return_distances else None, (n, n))


def append_pairs_parallel(engine: CpuEngine, r2, radii, reach, return_distances,
                          as_found: bool = False, order: np.ndarray | None = None) -> Pairs:
    """All pairs in one pass on every thread: the cells are cut into regions of about
    equal point counts, each appending its pairs to rows of its own, sized from a sample
    of its cells; the regions' rows are then moved down into one block. The same rows in
    the same order as the count and fill passes.

    Memory: rows reserved but never written cost nothing (untouched pages), so the
    result, a view of the first rows of the buffer, holds about as much memory as its
    rows; a buffer recycled from an earlier result (`_outputs`) is already paged in, and
    serves only a request of most of its size. A region whose rows overflow is redone
    alone, and the rows are then copied out instead.
    """
    n = engine.n_points
    state = indexed_state(engine, order)
    reach_cells = stencil.reach_in_cells(state.inv_cell_size, state.n_cells, reach)
    region_cells = regions.split_regions(state.cell_start,
                                       PAIR_REGIONS_PER_THREAD * numba.get_num_threads())
    if n < PAIR_ESTIMATE_MIN_POINTS:
        # Small: reserve generously rather than pay a second parallel region.
        estimates = np.empty(0)
    else:
        estimates = estimate_region_pairs(engine, r2, radii, reach_cells, region_cells)
        if estimates.sum() > ONE_PASS_MAX_PAIRS_PER_POINT * n:
            # So many pairs per point that moving the rows together would cost more
            # than a count pass: count, then fill in place.
            reach_cells, counts = count_pairs(engine, r2, radii, reach)
            return fill_pairs(engine, r2, radii, reach_cells, counts, 0, counts.shape[0],
                              return_distances, as_found, order)
    region_rows = regions.region_rows(region_cells, state.cell_start, estimates,
                                    PAIRS_PER_POINT_RESERVED, PAIR_ROWS_MARGIN,
                                    PAIR_ROWS_SLACK)
    capacity = int(region_rows[-1])
    indices = _outputs.empty((capacity, 2), engine.index_dtype)
    distances = _outputs.empty(capacity if return_distances else 0, np.float64)
    n_written = np.empty(region_cells.shape[0] - 1, dtype=np.int64)
    parts = np.column_stack((region_cells[:-1], region_cells[1:]))
    scan_parts(engine, (r2, radii, reach_cells), parts,
               (0, _NO_POSITIONS, indices, distances, True, as_found), region_rows,
               n_written, order)
    rows_written = n_written.tolist()
    if min(rows_written) >= 0:
        total = move_regions_down(indices, distances, region_rows, rows_written)
        return Pairs(indices[:total], distances[:total] if return_distances else None,
                     (n, n))
    index_pieces, distance_pieces = [], []
    for k, written in enumerate(rows_written):
        rows = slice(region_rows[k], region_rows[k + 1])
        if written < 0:
            index_piece, distance_piece, written = scan_cells(
                state, (r2, radii, reach_cells), region_cells[k], region_cells[k + 1],
                (region_cells[k], _NO_POSITIONS, indices[rows],
                 distances[rows] if return_distances else distances, True, as_found))
        else:
            index_piece, distance_piece = indices[rows], distances[rows]
        index_pieces.append(index_piece[:written])
        distance_pieces.append(distance_piece[:written])
    indices = np.concatenate(index_pieces)
    distances = np.concatenate(distance_pieces) if return_distances else None
    return Pairs(indices, distances, (n, n))


def estimate_region_pairs(engine: CpuEngine, r2, radii, reach_cells, region_cells):
    """Pairs of each region, estimated from a count over every `PAIR_SAMPLE_STRIDE`-th
    cell, scaled by the share of the region's points those cells hold.

    Only the sampled cells' counts are written and read: the array the count pass writes
    them into is left uninitialized elsewhere (recycled memory, `_outputs`), and the sums
    over each region run over the samples alone, so a search of many cells allocates
    nothing else of their number."""
    cell_start = engine.state.cell_start
    counts = _outputs.empty(engine.n_occupied_cells, np.int64)
    sampled = np.arange(0, counts.shape[0], PAIR_SAMPLE_STRIDE)
    scan_parts(engine, (r2, radii, reach_cells), np.column_stack((sampled, sampled + 1)),
               (0, counts, np.empty((0, 2), engine.index_dtype), _NO_DISTANCES, False, False),
               _NO_POSITIONS, _NO_POSITIONS)
    # Running sums over the samples; region k holds samples first[k] .. first[k + 1] - 1.
    sampled_pairs = np.zeros(sampled.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts[sampled], out=sampled_pairs[1:])
    sampled_points = np.zeros(sampled.shape[0] + 1, dtype=np.int64)
    np.cumsum(cell_start[sampled + 1] - cell_start[sampled], out=sampled_points[1:])
    first = -(-region_cells // PAIR_SAMPLE_STRIDE)
    points = np.diff(cell_start[region_cells])
    return (np.diff(sampled_pairs[first]) * points
            / np.maximum(np.diff(sampled_points[first]), 1))


def iter_pairs(engine: CpuEngine, r2, radii, reach, chunk_size,
               return_distances) -> Iterator[Pairs]:
    """The chunks of `Grid.iter_pairs` (`GridEngine.iter_pairs`): a count pass over all
    cells, then the chunks of `chunks_of_cells`. The threads are set around each pass,
    never across a ``yield``."""
    with _config.threads(engine.n_threads):
        reach_cells, counts = count_pairs(engine, r2, radii, reach)

    def fill(begin, end):
        with _config.threads(engine.n_threads):
            return fill_pairs(engine, r2, radii, reach_cells, counts, begin, end,
                              return_distances)

    yield from chunks_of_cells(counts, chunk_size, fill, return_distances)


def chunks_of_cells(counts: np.ndarray, chunk_size: int, fill,
                    return_distances, take=None) -> Iterator[Pairs]:
    """Consecutive chunks of at most ``chunk_size`` pairs (or the pairs found from one
    cell), ``counts`` being the pairs found from each cell and ``fill(begin, end)`` the
    `Pairs` found from cells ``begin .. end - 1``, in order: chunks are filled together,
    up to ``max(chunk_size, ITER_PAIRS_BATCH_ROWS)`` rows (or one chunk, when larger),
    and copied out one by one, so that a small ``chunk_size`` costs a copy per chunk
    rather than a fill pass, ``take(array, rows)`` (the engine's own, for arrays on a
    device; default a NumPy copy of ``array[rows]``) making each chunk's arrays its own.
    Every engine's `iter_pairs` cuts its chunks here."""
    take = _copy_rows if take is None else take
    ends = chunk_ends(counts, chunk_size)
    offsets = [0, *np.cumsum(counts).tolist()]
    batch_rows = max(chunk_size, ITER_PAIRS_BATCH_ROWS)
    begin = 0
    k = 0
    while k < len(ends):
        # Chunks k .. stop - 1, cells begin .. ends[stop - 1] - 1.
        stop = k + 1
        while stop < len(ends) and offsets[ends[stop]] - offsets[begin] <= batch_rows:
            stop += 1
        batch = fill(begin, ends[stop - 1])
        if stop == k + 1:
            begin = ends[k]
            k = stop
            yield batch
            continue
        base = offsets[begin]
        for end in ends[k:stop]:
            rows = slice(offsets[begin] - base, offsets[end] - base)
            begin = end
            yield Pairs(take(batch.indices, rows),
                        take(batch.distances, rows) if return_distances else None,
                        batch.shape)
        k = stop


def _copy_rows(array: np.ndarray, rows: slice) -> np.ndarray:
    return array[rows].copy()


def count_pairs(engine: CpuEngine, r2, radii, reach):
    """The count pass: the cells of ``reach`` and the pairs found from each cell."""
    state = engine.state
    reach_cells = stencil.reach_in_cells(state.inv_cell_size, state.n_cells, reach)
    counts = np.zeros(engine.n_occupied_cells, dtype=np.int64)
    scan_pairs(engine, (r2, radii, reach_cells), 0, counts.shape[0],
               (counts, np.empty((0, 2), engine.index_dtype), _NO_DISTANCES, False, False))
    return reach_cells, counts


def fill_pairs(engine: CpuEngine, r2, radii, reach_cells, counts, begin, end,
               return_distances, as_found: bool = False,
               order: np.ndarray | None = None) -> Pairs:
    """The fill pass over cells ``begin .. end - 1``, sized by the count pass."""
    offsets = np.zeros(end - begin + 1, dtype=np.int64)
    np.cumsum(counts[begin:end], out=offsets[1:])
    n_pairs = int(offsets[-1])
    indices = _outputs.empty((n_pairs, 2), engine.index_dtype)
    distances = _outputs.empty(n_pairs if return_distances else 0, np.float64)
    scan_pairs(engine, (r2, radii, reach_cells), begin, end,
               (offsets, indices, distances, True, as_found), order)
    n = engine.n_points
    return Pairs(indices, distances if return_distances else None, (n, n))


# ---------------------------------------------------------------------- kernels
def scan_pairs(engine: CpuEngine, search: tuple, begin, end, outputs: tuple,
               order: np.ndarray | None = None):
    """A count (``write`` False) or fill pass over cells ``begin .. end - 1``: in chunks of
    ``pairs.CELLS_PER_CHUNK`` cells on every thread, or on the calling thread. ``search =
    (r2, radii, reach_cells)``, ``outputs = (positions, indices, distances, write,
    as_found)`` (the rows visitor's outputs, from cell ``begin``)."""
    rows = (begin, *outputs)
    if engine.parallel_over_points(engine.n_points):
        chunk_starts = np.arange(begin, end, pairs.CELLS_PER_CHUNK)
        parts = np.column_stack((chunk_starts, np.minimum(
            chunk_starts + pairs.CELLS_PER_CHUNK, end)))
        scan_parts(engine, search, parts, rows, _NO_POSITIONS, _NO_POSITIONS, order)
    else:
        scan_cells(indexed_state(engine, order), search, begin, end, rows)


def scan_cells(state, search: tuple, begin, end, rows: tuple):
    """The sequential kernel of `pair_kernel` over cells ``begin .. end - 1`` on the calling
    thread: its outputs (grown or not) and the rows it appended."""
    params = (*search, np.array([[begin, end]], dtype=np.int64))
    return pair_kernel(state, search[2])(state, params, 0, 1, None, rows)


def scan_parts(engine: CpuEngine, search: tuple, parts, rows: tuple, part_rows, n_written,
               order: np.ndarray | None = None):
    """The parallel driver ``pairs.pairs_parts`` over ``parts`` (rows of first and end
    cells), calling the kernel of `pair_kernel` through its address."""
    state = indexed_state(engine, order)
    params = (*search, np.ascontiguousarray(parts, dtype=np.int64))
    kernel = indirect.kernel_target(pair_kernel(state, search[2]),
                                    (state, params, 0, 0, None, rows),
                                    engine.index_dtype)
    pairs.pairs_parts(state, params, *rows, part_rows, n_written, kernel)


def pair_kernel(state, reach_cells):
    """The sequential pair kernel for ``state`` and a search of ``reach_cells``: the one
    that gathers each cell's candidates first where cells hold at least
    ``pair_scan.GATHER_MIN_POINTS_PER_CELL`` points on average and the pairs are found on
    the half stencil, else the one that reads them in place, which alone walks the cells by
    id (`stencil.stencil_by_id`; see ``_kernels/pair_scan.py``).

    The only place that chooses between the two: the sequential calls run the kernel it
    returns, and `scan_parts` gives the parallel driver that kernel's address.
    """
    n_occupied = state.cell_coords.shape[0]
    if (state.points.shape[1] >= pair_scan.GATHER_MIN_POINTS_PER_CELL * n_occupied
            and not stencil.stencil_by_id(state.n_cells, state.box, reach_cells, n_occupied)):
        return pairs.pairs_scan_cells_gathered
    return pairs.pairs_scan_cells


# ---------------------------------------------------------------------- host helpers
def move_regions_down(indices, distances, region_rows, rows_written: list[int]) -> int:
    """Move each region's written rows down after the previous region's, in order (a move
    to lower rows never overwrites rows not yet moved); returns the rows in all.

    NumPy's block moves rather than a compiled row-by-row loop: the loop wins a little
    at 4,800 rows and loses from 16,000 on (1.7 times as long at 66,000 rows; the
    ``pairs3d`` workload of ``benchmarks/bench_batch.py``)."""
    total = 0
    for source, written in zip(region_rows.tolist(), rows_written, strict=False):
        if source != total:
            indices[total:total + written] = indices[source:source + written]
            if distances.shape[0]:
                distances[total:total + written] = distances[source:source + written]
        total += written
    return total


def chunk_ends(counts: np.ndarray, chunk_size: int) -> list[int]:
    """Cell indices that end each chunk of at most ``chunk_size`` pairs (or one cell)."""
    ends = []
    total = 0
    for cell, count in enumerate(counts.tolist()):
        if total and total + count > chunk_size:
            ends.append(cell)
            total = 0
        total += count
    ends.append(len(counts))
    return ends
