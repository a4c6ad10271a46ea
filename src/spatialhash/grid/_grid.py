"""The batch grid: points sorted into cells once, then queried many times.

Design
------
Building. Each point gets an integer cell coordinate ``floor((x - origin) / cell_size)``
per axis (1-D and 2-D points are padded to three axes with zeros, so one set of kernels
serves every dimension). The occupied cells are numbered in row-major order of their
coordinates and the points are sorted by cell with a stable counting sort: ``cell_start``
gives each cell's slice of the sorted points and ``order`` maps a sorted point back to the
caller's index. The sorted copy keeps every cell's points contiguous in memory. The box of
cells is known before any pass (the largest coordinate has the largest cell coordinate), so
a dense build sorts by each point's linear cell index, computed in its counting pass, and
stores no per-point coordinates. Large dense grids are sorted on every thread (per-thread
histograms of the box of cells, then each thread scatters its share of the points); a
stable counting sort is unique, so the grid is the same, byte for byte, whatever the thread
count.

Finding a cell. There are no world bounds. When the box of cells spanned by the points is
small next to the number of points (at most ``max(4 n, 65536)`` cells), a dense array maps
each cell of that box to its occupied-cell id: one load per lookup. Otherwise (an outlier
far from the rest, coordinates around 1e9 with a small cell, a few clusters far apart) an
open-addressing hash table of the occupied rows of cells, keyed by their exact integer
coordinates ``(y, z)``, gives each row's run of occupied cells, and a binary search over
their x finds a cell or a row segment: memory stays proportional to the number of points
and two cells never share an entry. One probe per row rather than per cell, into a table
that holds rows rather than cells: 100,000 radius queries among a million points with one
far outlier took 2.2 times as long as without it when the table held cells (ad hoc).

Cell size. The cell size should be at least the query radius, so that a radius query or a
pair search looks at the 3 x 3 x 3 block around a cell. Any radius works with any grid:
a larger radius searches more cells, a much smaller one scans more points per cell. The
size is enlarged internally by a relative 2**-20 so that ``r == cell_size`` still needs
only one ring of cells despite rounding. On a periodic axis the cells tile the box
exactly, so the cell size there is ``box / floor(box / cell_size)``.

Queries. Radius and box queries (and `iter_pairs`) have a count pass that sizes the
output exactly and a fill pass that writes it, both parallel over cells or queries. Work
is split into fixed chunks and each row (or cell) writes to an offset fixed by the count
pass, so the output is identical for any thread count. `query_pairs` skips the count
pass: the cells are cut into regions, each appending its pairs to rows of its own, sized
from a count over a sixteenth of its cells (rows reserved but never written cost no
memory); the regions' rows are then moved down into one block, in order. Same rows, same
order, about a third less time. Coordinates are float64 throughout; float32 input is
converted once.

Compiling. Numba compiles a kernel once by itself and again inside every function that
calls it (it links the callee in, optimizes the whole again and emits its machine code
once more). So small inputs call the sequential kernels directly rather than through a
sequential driver, and each parallel driver is one ``prange`` loop that calls its one
kernel through the kernel's address (`_kernels/indirect.py`): the kernel is compiled
once, and the driver costs 2 to 3 s of cold compile instead of 7 to 14 s (ad hoc, CPU
time on a cold cache). Calls between kernels are typed without literal constants
(`_config.jit`), so a flag passed as ``True`` does not compile a kernel a second time.

Brute force. ``algorithm="brute"`` puts every point into a single cell, so every query
compares every candidate pair: the same arithmetic with no spatial pruning, which is the
fastest choice for a handful of points and a second opinion for checking.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numba
import numpy as np

from .. import _config
from .._kernels import indirect
from .._kernels.cells import N_AXES, floor_to_int
from .._results import KNearest, Neighbors, Pairs, RayHits
from .._validation import (
    as_array,
    as_bounds,
    as_box,
    as_count,
    as_points,
    as_positive_scalar,
    as_radii,
    as_rays,
    check_magnitude,
    grid_points,
    pad_to_3d,
    wrap_into_box,
)
from ._kernels import box as box_kernels
from ._kernels import build, build_parallel, knn, pairs, radius
from ._kernels import ray as ray_kernels
from ._kernels.state import GridState

#: ``algorithm="auto"`` uses brute force up to this many points.
BRUTE_FORCE_MAX_POINTS = 32
#: Relative enlargement of the cell size (see the module docstring).
CELL_SIZE_MARGIN = 2.0**-20
#: Largest cell coordinate: beyond it coordinates stop being exact in float64.
MAX_CELLS_PER_AXIS = 2.0**52
#: Below these sizes queries run on the calling thread: waking the other threads costs
#: more than the work (benchmarks/bench_threading.py measures both).
PARALLEL_MIN_POINTS = 20_000
PARALLEL_MIN_QUERIES = 2_000
#: The parallel build keeps a histogram of the box of cells per thread; it runs when
#: those hold at most this many counts per point, 32 bytes (else the sequential build
#: does): room for 16 threads at the 7 points per cell of a grid sized for pair searches.
PARALLEL_BUILD_MAX_COUNTS_PER_POINT = 4
#: Rows first allocated per point by the one-pass pair search of small inputs (it grows
#: by doubling when a dense cloud holds more).
PAIRS_PER_POINT_GUESS = 16
#: Pair searches on one thread below this many points: a single pass into outputs that
#: grow. From there on, regions of cells on every thread (measured on the 2-core
#: development machine: two threads beat one from 1,000 points on, 0.24 against 0.33 ms).
PARALLEL_MIN_POINTS_ONE_PASS = 2_000
#: Above this many pairs per point (estimated), moving the regions' rows together costs
#: more than a count pass, and the count and fill passes run instead (1,000 Gaussian
#: clusters, 216 pairs per point: 2.1 s against 2.2-2.6 s; uniform, 15 per point: one
#: pass 0.45 s against 0.58 s).
ONE_PASS_MAX_PAIRS_PER_POINT = 64
#: Below this many points the regions' rows are not estimated but reserved,
#: `PAIRS_PER_POINT_RESERVED` per point: the estimate is a parallel region of its own,
#: whose start (tens of microseconds after idle) matters at a few thousand points.
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
#: 15-40 us of calls and allocations, and starts a parallel region on large grids, too
#: much to pay for every chunk of a few pairs. 1.5 MiB of rows with distances.
ITER_PAIRS_BATCH_ROWS = 1 << 16
#: Average points per cell aimed at when no cell size is given.
DEFAULT_POINTS_PER_CELL = 4.0
#: The default cell size ignores this share of the points at each end of every axis...
DEFAULT_SIZE_QUANTILE = 0.005
#: ...in a sample of about this many points (see `_default_cell_size`).
DEFAULT_SIZE_SAMPLE = 1024
ALGORITHMS = ("auto", "grid", "brute")
_INT32, _INT64 = np.dtype(np.int32), np.dtype(np.int64)
_INT32_MAX = int(np.iinfo(np.int32).max)
#: Passed where a kernel writes no distances (one specialization with or without them).
_NO_DISTANCES = np.empty(0, dtype=np.float64)
_NO_POSITIONS = np.empty(0, dtype=np.int64)
#: The hash table of a dense grid.
_NO_HASH_KEYS = np.empty((0, N_AXES), dtype=np.int64)
_NO_HASH_IDS = np.empty(0, dtype=np.int64)
#: The dense lookup and starts of a sparse grid.
_NO_DENSE_LOOKUP = np.empty(0, dtype=np.int64)


class Grid:
    """A spatial hash grid over a fixed set of points, built once and queried many times.

    Parameters
    ----------
    points : array_like of float, shape (n, d)
        Coordinates, d = 1, 2 or 3, within +-1e150 (squared distances of larger ones
        overflow float64). Any real dtype is accepted and converted to float64 once; the
        array is never modified.
    cell_size : float, optional
        Edge of the cubic cells. Choose the query radius (or the largest one) for radius
        and pair queries. Default: the size that puts about four points in a cell on
        average over the box of the points less the outermost 0.5% at each end of each
        axis (so a few outliers do not make the cells huge), good for k-nearest queries.
    box : float or array_like of float, shape (d,), optional
        Period of each axis for periodic boundary conditions. Coordinates on periodic axes
        are wrapped into ``[0, box)`` and distances use the minimum image.
    periodic : bool or sequence of bool, optional
        Which axes of ``box`` are periodic; default all of them when ``box`` is given.
        An open axis ignores its ``box`` entry.
    algorithm : {"auto", "grid", "brute"}, default "auto"
        ``"grid"`` sorts the points into cells; ``"brute"`` compares every candidate pair
        (single cell); ``"auto"`` takes brute force for at most 32 points.
    n_threads : int, optional
        Threads for building and querying; default numba's (all cores), -1 for all.
        Results are the same for any thread count.

    Notes
    -----
    Semantics follow ``scipy.spatial.cKDTree`` where the query is the same: balls are
    closed (``distance <= r``), ``query_pairs`` reports each pair once with ``i < j``, and
    periodic boxes use the minimum image. Distances are Euclidean in float64.

    Examples
    --------
    >>> import numpy as np
    >>> from spatialhash import Grid
    >>> points = np.random.default_rng(0).random((1000, 3))
    >>> grid = Grid(points, cell_size=0.1)
    >>> pairs = grid.query_pairs(0.1)
    >>> neighbors = grid.query_radius(points[:5], 0.1)
    >>> nearest = grid.query_knn(points[:5], k=4)
    """

    def __init__(
        self,
        points,
        cell_size: float | None = None,
        *,
        box=None,
        periodic=None,
        algorithm: str = "auto",
        n_threads: int | None = None,
    ) -> None:
        coords = as_points(points, finite=False)
        n, n_dims = coords.shape
        self._n_dims = n_dims
        self._box, self._periodic = as_box(box, periodic, n_dims)
        self._n_threads = _config.check_n_threads(n_threads)
        if algorithm not in ALGORITHMS:
            raise ValueError(f"`algorithm` must be one of {ALGORITHMS}; got {algorithm!r}.")
        if algorithm == "auto":
            algorithm = "brute" if n <= BRUTE_FORCE_MAX_POINTS else "grid"
        self._algorithm = algorithm
        # One pass for the finiteness check and the bounds (the spread check, the default
        # cell size and the origin), and the copy where one is made (`grid_points`).
        points3, lowest, highest = grid_points(coords, self._box)
        if cell_size is None:
            cell_size = _default_cell_size(points3, lowest, highest, self._box, n_dims)
        self._cell_size = as_positive_scalar(cell_size, "cell_size")
        self._index_dtype = _INT32 if n < _INT32_MAX else _INT64
        with _config.threads(self._n_threads):
            self.state = _build_state(
                points3, lowest, highest, self._cell_size, self._box, algorithm == "brute",
                self._index_dtype, self._parallel(n, PARALLEL_MIN_POINTS),
            )

    # ------------------------------------------------------------------ properties
    @property
    def n_points(self) -> int:
        """Number of points."""
        return self.state.points.shape[1]

    @property
    def n_dims(self) -> int:
        """Dimension d of the points."""
        return self._n_dims

    @property
    def cell_size(self) -> float:
        """The cell size asked for (periodic axes may use slightly larger cells)."""
        return self._cell_size

    @property
    def n_occupied_cells(self) -> int:
        """Number of cells holding at least one point."""
        return self.state.cell_coords.shape[0]

    @property
    def box(self) -> np.ndarray | None:
        """Period of each axis (``inf`` on open axes), or None for an open grid."""
        if not self._periodic.any():
            return None
        return self._box[: self._n_dims].copy()

    @property
    def periodic(self) -> np.ndarray:
        """Which axes are periodic, shape (d,)."""
        return self._periodic[: self._n_dims].copy()

    @property
    def algorithm(self) -> str:
        """``"grid"`` or ``"brute"`` (what ``"auto"`` chose)."""
        return self._algorithm

    def __repr__(self) -> str:
        box = "" if self.box is None else f", box={self.box.tolist()}"
        return (
            f"Grid(n_points={self.n_points}, n_dims={self.n_dims}, cell_size={self.cell_size}"
            f"{box}, algorithm={self.algorithm!r}, n_occupied_cells={self.n_occupied_cells})"
        )

    # ------------------------------------------------------------------ helpers
    def _queries(self, queries, name: str = "queries") -> np.ndarray:
        coords = wrap_into_box(pad_to_3d(as_points(queries, name, n_dims=self._n_dims)),
                               self._box)
        check_magnitude(coords, name)
        return coords

    def _check_periodic_reach(self, reach: float, name: str, seen: float) -> None:
        if not self._periodic.any():
            return
        half = self._box / 2.0
        too_far = np.flatnonzero(reach > half)
        if too_far.size:
            axis = too_far[0]
            raise ValueError(
                f"`{name}` must be at most half the periodic box ({half[axis]} on axis "
                f"{axis}); got {seen}. Use a larger box or a smaller radius."
            )

    def _pair_search(self, r, radii) -> tuple[float, np.ndarray, float]:
        """Validated (squared radius, sorted radii, reach) of a pair search."""
        if (r is None) == (radii is None):
            raise TypeError("give exactly one of `r` (a distance) and `radii` (one per point).")
        if radii is not None:
            array = as_array(radii, "radii", "a scalar or a 1-D array of real numbers")
            if array.dtype == np.float64 and array.shape == (self.n_points,):
                # One compiled pass: sorted copy, largest, validity (the message comes
                # from `as_radii` when something is wrong).
                radii_sorted, largest, valid = pairs.sorted_radii(
                    np.ascontiguousarray(array), self.state.order)
                if not valid:
                    as_radii(array, "radii", self.n_points)
            else:
                array = as_radii(radii, "radii", self.n_points)
                largest = float(array.max()) if array.size else 0.0
                radii_sorted = np.ascontiguousarray(array[self.state.order])
            self._check_periodic_reach(2.0 * largest, "radii", f"2 * max(radii) = {2 * largest}")
            return 0.0, radii_sorted, 2.0 * largest
        r = as_positive_scalar(r, "r", allow_zero=True)
        self._check_periodic_reach(r, "r", r)
        return r * r, np.empty(0), r

    # ------------------------------------------------------------------ pairs
    def query_pairs(
        self,
        r: float | None = None,
        *,
        radii=None,
        queries=None,
        return_distances: bool = False,
    ) -> Pairs:
        """Every pair of points closer than a distance.

        Parameters
        ----------
        r : float, optional
            Distance; pairs with ``distance <= r`` are reported. Give ``r`` or ``radii``.
        radii : array_like of float, shape (n,), optional
            One radius per point (contacts of spheres): pairs with
            ``distance <= radii[i] + radii[j]``. The search reaches ``2 * max(radii)``, so
            build the grid with ``cell_size = 2 * max(radii)``; when radii vary widely,
            most candidates are farther apart than their own radii allow and are scanned
            for nothing (the cost grows with ``(max / typical radius) ** d``).
        queries : array_like of float, shape (m, d), optional
            A second point set: report the pairs ``(q, i)`` between ``queries[q]`` and
            ``points[i]`` within ``r`` instead of the pairs among the points.
        return_distances : bool, default False
            Also return the distance of each pair.

        Returns
        -------
        Pairs
            ``indices`` of shape (n_pairs, 2). Among one point set each pair appears once
            with ``i < j``, like ``cKDTree.query_pairs(r, output_type="ndarray")``. The
            order is deterministic but unspecified; ``Pairs.sorted()`` sorts them.
        """
        if queries is not None:
            if radii is not None:
                raise TypeError("`radii` applies to pairs among the points, not with `queries`.")
            return self.query_radius(queries, r, return_distances=return_distances,
                                     sort=False).to_pairs()
        r2, radii_sorted, reach = self._pair_search(r, radii)
        if self.n_points < PARALLEL_MIN_POINTS_ONE_PASS:
            return self._append_pairs(r2, radii_sorted, reach, return_distances)
        with _config.threads(self._n_threads):
            return self._append_pairs_parallel(r2, radii_sorted, reach, return_distances)

    def _append_pairs_parallel(self, r2, radii_sorted, reach, return_distances) -> Pairs:
        """All pairs in one pass on every thread: the cells are cut into regions of about
        equal point counts, each appending its pairs to rows of its own, sized from a
        sample of its cells; the regions' rows are then moved down into one block. The
        same rows in the same order as the count and fill passes.

        Memory: rows reserved but never written cost nothing (untouched pages), so the
        result, a view of the first rows of the buffer, holds about as much memory as
        its rows. A region whose rows overflow is redone alone, and the rows are then
        copied out instead.
        """
        n = self.n_points
        reach_cells = self._reach_cells(reach)
        region_cells = pairs.split_regions(self.state.cell_start,
                                           PAIR_REGIONS_PER_THREAD * numba.get_num_threads())
        if n < PAIR_ESTIMATE_MIN_POINTS:
            # Small: reserve generously rather than pay a second parallel region.
            estimates = np.empty(0)
        else:
            estimates = self._estimate_region_pairs(r2, radii_sorted, reach_cells,
                                                    region_cells)
            if estimates.sum() > ONE_PASS_MAX_PAIRS_PER_POINT * n:
                # So many pairs per point that moving the rows together would cost more
                # than a count pass: count, then fill in place.
                reach_cells, counts = self._count_pairs(r2, radii_sorted, reach)
                return self._fill_pairs(r2, radii_sorted, reach_cells, counts, 0,
                                        counts.shape[0], return_distances)
        region_rows = pairs.region_rows(region_cells, self.state.cell_start, estimates,
                                        PAIRS_PER_POINT_RESERVED, PAIR_ROWS_MARGIN,
                                        PAIR_ROWS_SLACK)
        capacity = int(region_rows[-1])
        indices = np.empty((capacity, 2), dtype=self._index_dtype)
        distances = np.empty(capacity if return_distances else 0, dtype=np.float64)
        n_written = np.empty(region_cells.shape[0] - 1, dtype=np.int64)
        parts = np.column_stack((region_cells[:-1], region_cells[1:]))
        self._pairs_parts(r2, radii_sorted, reach_cells, parts, 0, _NO_POSITIONS,
                          region_rows, indices, distances, True, n_written)
        rows_written = n_written.tolist()
        if min(rows_written) >= 0:
            total = _move_regions_down(indices, distances, region_rows, rows_written)
            return Pairs(indices[:total], distances[:total] if return_distances else None,
                         (n, n))
        index_pieces, distance_pieces = [], []
        for k, written in enumerate(rows_written):
            rows = slice(region_rows[k], region_rows[k + 1])
            if written < 0:
                index_piece, distance_piece, written = self._scan_cells(
                    self.state, r2, radii_sorted, reach_cells, region_cells[k],
                    region_cells[k + 1], region_cells[k], np.empty(0, np.int64),
                    indices[rows], distances[rows] if return_distances else distances, True,
                )
            else:
                index_piece, distance_piece = indices[rows], distances[rows]
            index_pieces.append(index_piece[:written])
            distance_pieces.append(distance_piece[:written])
        indices = np.concatenate(index_pieces)
        distances = np.concatenate(distance_pieces) if return_distances else None
        return Pairs(indices, distances, (n, n))

    def _estimate_region_pairs(self, r2, radii_sorted, reach_cells, region_cells):
        """Pairs of each region, estimated from a count over every `PAIR_SAMPLE_STRIDE`-th
        cell, scaled by the share of the region's points those cells hold."""
        cell_start = self.state.cell_start
        counts = np.zeros(self.n_occupied_cells, dtype=np.int64)
        sampled = np.arange(0, counts.shape[0], PAIR_SAMPLE_STRIDE)
        self._pairs_parts(r2, radii_sorted, reach_cells,
                          np.column_stack((sampled, sampled + 1)), 0, counts, _NO_POSITIONS,
                          np.empty((0, 2), self._index_dtype), _NO_DISTANCES, False,
                          _NO_POSITIONS)
        sampled_points = np.zeros(self.n_occupied_cells, dtype=np.int64)
        sampled_points[::PAIR_SAMPLE_STRIDE] = np.diff(cell_start)[::PAIR_SAMPLE_STRIDE]
        starts = region_cells[:-1]
        points = np.diff(cell_start[region_cells])
        return (np.add.reduceat(counts, starts) * points
                / np.maximum(np.add.reduceat(sampled_points, starts), 1))

    def _append_pairs(self, r2, radii_sorted, reach, return_distances) -> Pairs:
        """All pairs in one sequential pass into growing outputs (small inputs): the same
        rows in the same order as the count and fill passes, without the count pass."""
        n = self.n_points
        reach_cells = self._reach_cells(reach)
        capacity = max(64, PAIRS_PER_POINT_GUESS * n)
        indices = np.empty((capacity, 2), dtype=self._index_dtype)
        distances = np.empty(capacity if return_distances else 0, dtype=np.float64)
        indices, distances, n_pairs = self._scan_cells(
            self.state, r2, radii_sorted, reach_cells, 0, self.n_occupied_cells, 0,
            np.empty(0, np.int64), indices, distances, True,
        )
        # Keep the rows written; copy them out when the buffer is mostly empty.
        indices = indices[:n_pairs]
        distances = distances[:n_pairs]
        if indices.base is not None and 2 * n_pairs < indices.base.shape[0]:
            indices, distances = indices.copy(), distances.copy()
        return Pairs(indices, distances if return_distances else None, (n, n))

    def _parallel(self, n_items: int, threshold: int) -> bool:
        """Whether work over ``n_items`` is worth the other threads."""
        return self._n_threads != 1 and n_items >= threshold

    def _scan_pairs(self, r2, radii_sorted, reach_cells, begin, n_cells, positions, indices,
                    distances, write):
        if self._parallel(self.n_points, PARALLEL_MIN_POINTS):
            chunk_starts = np.arange(begin, begin + n_cells, pairs.CELLS_PER_CHUNK)
            parts = np.column_stack((chunk_starts, np.minimum(
                chunk_starts + pairs.CELLS_PER_CHUNK, begin + n_cells)))
            self._pairs_parts(r2, radii_sorted, reach_cells, parts, begin,
                              positions, _NO_POSITIONS, indices, distances, write,
                              _NO_POSITIONS)
        else:
            self._scan_cells(self.state, r2, radii_sorted, reach_cells, begin,
                             begin + n_cells, begin, positions, indices, distances, write)

    @property
    def _gathers_candidates(self) -> bool:
        """Whether pair searches gather each cell's candidates (see `_kernels/pairs.py`)."""
        return self.n_points >= pairs.GATHER_MIN_POINTS_PER_CELL * self.n_occupied_cells

    def _pairs_parts(self, r2, radii_sorted, reach_cells, parts, cell_begin, positions,
                     part_rows, indices, distances, write, n_written):
        """Run the parallel pair driver with this grid's kernel (see `_gathers_candidates`)."""
        state = self.state
        kernel = indirect.kernel_target(self._scan_cells, (
            state, r2, radii_sorted, reach_cells, 0, 0, 0, positions, indices, distances, write),
            self._index_dtype)
        pairs.pairs_parts(state, r2, radii_sorted, reach_cells, parts, cell_begin, positions,
                          part_rows, indices, distances, write, n_written, kernel)

    def _reach_cells(self, reach: float) -> np.ndarray:
        """Cells to search on each side of a cell for pairs within ``reach``."""
        return pairs.reach_in_cells(self.state.inv_cell_size, self.state.n_cells, reach)

    @property
    def _scan_cells(self):
        """The sequential pair kernel for this grid (see `_gathers_candidates`)."""
        if self._gathers_candidates:
            return pairs.pairs_scan_cells_gathered
        return pairs.pairs_scan_cells

    def _count_pairs(self, r2, radii_sorted, reach):
        reach_cells = self._reach_cells(reach)
        counts = np.zeros(self.n_occupied_cells, dtype=np.int64)
        self._scan_pairs(r2, radii_sorted, reach_cells, 0, counts.shape[0], counts,
                         np.empty((0, 2), self._index_dtype), _NO_DISTANCES, False)
        return reach_cells, counts

    def _fill_pairs(self, r2, radii_sorted, reach_cells, counts, begin, end, return_distances):
        offsets = np.zeros(end - begin + 1, dtype=np.int64)
        np.cumsum(counts[begin:end], out=offsets[1:])
        n_pairs = int(offsets[-1])
        indices = np.empty((n_pairs, 2), dtype=self._index_dtype)
        distances = np.empty(n_pairs if return_distances else 0, dtype=np.float64)
        self._scan_pairs(r2, radii_sorted, reach_cells, begin, end - begin, offsets, indices,
                         distances, True)
        n = self.n_points
        return Pairs(indices, distances if return_distances else None, (n, n))

    def iter_pairs(
        self,
        r: float | None = None,
        *,
        radii=None,
        chunk_size: int = 1 << 22,
        return_distances: bool = False,
    ) -> Iterator[Pairs]:
        """The pairs of `query_pairs` in chunks, with memory bounded by ``chunk_size``.

        Parameters
        ----------
        r, radii, return_distances
            As in `query_pairs`.
        chunk_size : int, default 4,194,304
            Most pairs in one chunk; a single cell with more pairs than this forms a chunk
            of its own. Chunks of fewer than 65,536 pairs are computed several at a time,
            up to 65,536 pairs (`ITER_PAIRS_BATCH_ROWS`), and copied out one by one, so a
            small ``chunk_size`` costs little more than the pairs it yields.

        Yields
        ------
        Pairs
            Consecutive chunks; together they hold exactly the pairs of `query_pairs`, in
            the same order. Each chunk owns its arrays. A counting pass over all cells runs
            first (memory: one integer per occupied cell).
        """
        # Arguments are checked now, not at the first next(): this is not a generator.
        chunk_size = as_count(chunk_size, "chunk_size")
        r2, radii_sorted, reach = self._pair_search(r, radii)
        return self._pair_chunks(r2, radii_sorted, reach, chunk_size, return_distances)

    def _pair_chunks(self, r2, radii_sorted, reach, chunk_size, return_distances):
        """The chunks of `iter_pairs`: consecutive chunks are filled together, up to
        ``max(chunk_size, ITER_PAIRS_BATCH_ROWS)`` rows (or one chunk, when larger), and
        copied out one by one, so that a small ``chunk_size`` costs a copy per chunk
        rather than a fill pass."""
        with _config.threads(self._n_threads):
            reach_cells, counts = self._count_pairs(r2, radii_sorted, reach)
        ends = _chunk_ends(counts, chunk_size)
        offsets = _indptr(counts).tolist()
        batch_rows = max(chunk_size, ITER_PAIRS_BATCH_ROWS)
        shape = (self.n_points, self.n_points)
        begin = 0
        k = 0
        while k < len(ends):
            # Chunks k .. stop - 1, cells begin .. ends[stop - 1] - 1.
            stop = k + 1
            while stop < len(ends) and offsets[ends[stop]] - offsets[begin] <= batch_rows:
                stop += 1
            with _config.threads(self._n_threads):
                batch = self._fill_pairs(r2, radii_sorted, reach_cells, counts, begin,
                                         ends[stop - 1], return_distances)
            if stop == k + 1:
                begin = ends[k]
                k = stop
                yield batch
                continue
            base = offsets[begin]
            for end in ends[k:stop]:
                rows = slice(offsets[begin] - base, offsets[end] - base)
                begin = end
                yield Pairs(batch.indices[rows].copy(),
                            batch.distances[rows].copy() if return_distances else None, shape)
            k = stop

    # ------------------------------------------------------------------ radius
    def _radius_inputs(self, queries, r):
        query_points = self._queries(queries)
        radii = as_radii(r, "r", query_points.shape[0])
        largest = float(radii.max()) if radii.size else 0.0
        self._check_periodic_reach(largest, "r", largest)
        return query_points, radii

    def query_radius(
        self, queries, r, *, return_distances: bool = False, sort: bool = True
    ) -> Neighbors:
        """For each query point, every point within distance ``r``.

        Parameters
        ----------
        queries : array_like of float, shape (m, d)
            Query positions.
        r : float or array_like of float, shape (m,)
            Radius, one for all queries or one per query; ``distance <= r`` is a match.
        return_distances : bool, default False
            Also return the distance of each neighbour.
        sort : bool, default True
            Sort each row by point index (as ``cKDTree.query_ball_point(...,
            return_sorted=True)``). Unsorted rows come out in cell order, deterministic.

        Returns
        -------
        Neighbors
            CSR rows: ``indptr`` (int64, shape (m + 1,)), ``indices``, ``distances``.
        """
        query_points, radii = self._radius_inputs(queries, r)
        with _config.threads(self._n_threads):
            visit_order, visited_points, visited_radii = self._visit(query_points, radii)
            in_visit_order = np.arange(query_points.shape[0])
            counts = self._scatter(
                self._count_radius(visited_points, visited_radii, in_visit_order), visit_order)
            indptr = _indptr(counts)
            nnz = int(indptr[-1])
            indices = np.empty(nnz, dtype=self._index_dtype)
            distances = np.empty(nnz if return_distances else 0, dtype=np.float64)
            self._scan_radius(visited_points, visited_radii, in_visit_order,
                              self._gather(indptr, visit_order), indices, distances, True,
                              sort)
        return Neighbors(indptr, indices, distances if return_distances else None,
                         self.n_points)

    def _visit(self, query_points, radii):
        """The order in which to answer queries (cell by cell, see `build.query_order`),
        and the queries and radii taken in that order: reading them one after the other
        saves a cache miss per query in each pass over a large query set."""
        visit_order = self._query_order(query_points)
        if self._parallel(query_points.shape[0], PARALLEL_MIN_POINTS):
            visited = build_parallel.take_rows_parallel(query_points, visit_order)
        else:
            visited = build.take_rows(query_points, visit_order)
        return visit_order, visited, self._gather(radii, visit_order)

    def _gather(self, values: np.ndarray, order: np.ndarray) -> np.ndarray:
        """``values[order]``, on every thread for many."""
        if self._parallel(order.shape[0], PARALLEL_MIN_POINTS):
            return build_parallel.gather_parallel(values, order)
        return values[order]

    def _scatter(self, values: np.ndarray, order: np.ndarray) -> np.ndarray:
        """The array ``out`` with ``out[order] = values`` (``order`` a permutation)."""
        if self._parallel(order.shape[0], PARALLEL_MIN_POINTS):
            return build_parallel.scatter_parallel(values, order)
        out = np.empty_like(values)
        out[order] = values
        return out

    def _query_order(self, query_points) -> np.ndarray:
        """`build.query_order` of (m, 3) query points, on every thread for many queries
        (the same permutation) when the per-thread histograms of the keys stay small."""
        m = query_points.shape[0]
        n_threads = numba.get_num_threads()
        if self._parallel(m, PARALLEL_MIN_POINTS) and n_threads > 1:
            n_keys = (self.state.dense_lookup.shape[0] or self.n_occupied_cells + 1)
            if _histograms_fit(n_threads, n_keys, m):
                return build_parallel.query_order_parallel(self.state, query_points, n_threads)
        return build.query_order(self.state, query_points)

    def count_radius(self, queries, r) -> np.ndarray:
        """Number of points within ``r`` of each query, shape (m,), int64.

        Parameters are as in `query_radius`; nothing but the counts is stored.
        """
        query_points, radii = self._radius_inputs(queries, r)
        with _config.threads(self._n_threads):
            visit_order, visited_points, visited_radii = self._visit(query_points, radii)
            return self._scatter(self._count_radius(
                visited_points, visited_radii, np.arange(query_points.shape[0])), visit_order)

    def _count_radius(self, query_points, radii, visit_order):
        counts = np.zeros(query_points.shape[0], dtype=np.int64)
        self._scan_radius(query_points, radii, visit_order, counts,
                          np.empty(0, self._index_dtype), _NO_DISTANCES, False, False)
        return counts

    def _scan_radius(self, query_points, radii, visit_order, positions, indices, distances,
                     write, sort):
        m = query_points.shape[0]
        if self._parallel(m, PARALLEL_MIN_QUERIES):
            kernel = indirect.kernel_target(radius.radius_scan_queries, (
                self.state, query_points, radii, visit_order, 0, m, positions, indices,
                distances, write, sort), self._index_dtype)
            radius.radius_scan(self.state, query_points, radii, visit_order, positions, indices,
                               distances, write, sort, kernel)
        else:
            radius.radius_scan_queries(self.state, query_points, radii, visit_order, 0, m,
                                       positions, indices, distances, write, sort)

    # ------------------------------------------------------------------ k nearest
    def query_knn(self, queries, k: int, *, r_max: float | None = None) -> KNearest:
        """The ``k`` nearest points of each query, nearest first, exact.

        Parameters
        ----------
        queries : array_like of float, shape (m, d)
            Query positions.
        k : int
            Neighbours wanted per query, >= 1.
        r_max : float, optional
            Only points with ``distance <= r_max`` count (default: no limit).

        Returns
        -------
        KNearest
            ``indices`` and ``distances`` of shape (m, k), ties broken by the smaller
            index, and ``counts``: fewer than ``k`` when the grid holds fewer points or
            ``r_max`` excludes them, in which case the remaining slots hold -1 and
            ``inf``.
        """
        query_points = self._queries(queries)
        k = as_count(k, "k")
        limit = np.inf if r_max is None else as_positive_scalar(
            r_max, "r_max", allow_zero=True, allow_inf=True)
        m = query_points.shape[0]
        indices, distances = _knn_outputs(m, k, self.n_points, self._index_dtype)
        counts = np.zeros(m, dtype=np.int64)
        with _config.threads(self._n_threads):
            visit_order = self._query_order(query_points)
            limits = np.full(m, limit)
            if self._parallel(m, PARALLEL_MIN_QUERIES):
                kernel = indirect.kernel_target(knn.knn_queries, (
                    self.state, query_points, k, limits, visit_order, 0, m, indices, distances,
                    counts), self._index_dtype)
                knn.knn_query(self.state, query_points, k, limits, visit_order, indices,
                              distances, counts, kernel)
            else:
                # The kernel itself, not a sequential driver: numba would compile the kernel
                # into a driver once more.
                knn.knn_queries(self.state, query_points, k, limits, visit_order, 0, m,
                                indices, distances, counts)
        return KNearest(indices, distances, counts)

    # ------------------------------------------------------------------ boxes
    def query_box(self, lower, upper, *, sort: bool = True) -> Neighbors:
        """Every point inside each of ``m`` axis-aligned boxes (closed: faces included).

        Parameters
        ----------
        lower, upper : array_like of float, shape (m, d) or (d,)
            Corners of the boxes, ``lower <= upper``. On a periodic axis a box runs from
            ``lower`` over ``upper - lower`` and may cross the boundary; one as wide as the
            period covers the whole axis.
        sort : bool, default True
            Sort each row by point index.

        Returns
        -------
        Neighbors
            CSR rows of point indices, one row per box; ``distances`` is None.
        """
        lower, upper = as_bounds(lower, upper, self._n_dims)
        with np.errstate(over="ignore"):
            # A width that overflows to inf covers any periodic axis, as it should.
            width = pad_to_3d(upper - lower)
        lower3 = wrap_into_box(pad_to_3d(lower), self._box)
        upper3 = pad_to_3d(upper)
        with _config.threads(self._n_threads):
            visit_order = self._query_order(lower3)
            m = lower3.shape[0]
            parallel = self._parallel(m, PARALLEL_MIN_QUERIES)

            def scan(positions, indices, write, sort_rows):
                if parallel:
                    kernel = indirect.kernel_target(box_kernels.box_scan_boxes, (
                        self.state, lower3, upper3, width, visit_order, 0, m, positions, indices,
                        write, sort_rows), self._index_dtype)
                    box_kernels.box_scan(self.state, lower3, upper3, width, visit_order,
                                         positions, indices, write, sort_rows, kernel)
                else:
                    # The kernel on all boxes, not a sequential driver (see `query_knn`).
                    box_kernels.box_scan_boxes(self.state, lower3, upper3, width, visit_order,
                                               0, m, positions, indices, write, sort_rows)

            counts = np.zeros(m, dtype=np.int64)
            scan(counts, np.empty(0, self._index_dtype), False, False)
            indptr = _indptr(counts)
            indices = np.empty(int(indptr[-1]), dtype=self._index_dtype)
            scan(indptr, indices, True, sort)
        return Neighbors(indptr, indices, None, self.n_points)

    # ------------------------------------------------------------------ rays
    def query_ray(
        self,
        origins,
        directions,
        radii,
        *,
        max_distance=None,
        all_hits: bool = False,
    ) -> RayHits | Neighbors:
        """Cast rays (or segments) against the points taken as spheres (circles in 2-D).

        Parameters
        ----------
        origins : array_like of float, shape (m, d) or (d,)
            Start of each ray.
        directions : array_like of float, shape (m, d) or (d,)
            Direction of each ray, any non-zero length: it is normalized, so distances
            are lengths along the ray, not multiples of ``directions``.
        radii : float or array_like of float, shape (n,)
            Radius of the sphere around each point (one for all or one per point), >= 0.
            Spheres are closed: a ray that grazes one (tangent) hits it.
        max_distance : float or array_like of float, shape (m,), optional
            Segment casts: only hits at distance ``<= max_distance`` count (one for all
            rays or one per ray; ``inf`` or None: unbounded rays).
        all_hits : bool, default False
            Return every sphere each ray meets rather than the first.

        Returns
        -------
        RayHits or Neighbors
            First hits: `RayHits` with ``indices`` and ``distances`` of shape (m,), -1 and
            ``inf`` where a ray hits nothing, ties broken by the smaller index. With
            ``all_hits``: `Neighbors`, one CSR row per ray sorted by distance along the ray,
            then by index; ``distances`` are the distances along the ray.

        Notes
        -----
        The distance of a hit is where the ray enters the sphere; a ray starting inside
        (or on) a sphere hits it at distance 0. Rays walk the cells (3-D DDA) and test the
        spheres centred within ``max(radii)`` of each cell, so the cost grows with
        ``(max(radii) / cell_size) ** d``: build the grid with a cell size near the largest
        radius or larger. Rays need an open grid (no periodic axes).
        """
        if self._periodic.any():
            raise ValueError(
                "`box` must be None for ray casts (rays run through open grids only); got a "
                f"grid periodic on axes {np.flatnonzero(self._periodic).tolist()}."
            )
        origins3, units3 = as_rays(origins, directions, self._n_dims)
        m = origins3.shape[0]
        radii = as_radii(radii, "radii", self.n_points)
        limit = np.full(m, np.inf) if max_distance is None else as_radii(
            max_distance, "max_distance", m, allow_inf=True)
        rays = (np.ascontiguousarray(radii[self.state.order]),
                float(radii.max()) if radii.size else 0.0,
                ray_kernels.WALK_COST_PER_POINT * self.n_points, origins3, units3, limit)
        with _config.threads(self._n_threads):
            visit_order = self._query_order(origins3)
            if not all_hits:
                indices = np.empty(m, dtype=self._index_dtype)
                distances = np.empty(m)
                self._cast_rays(rays, visit_order, ray_kernels.MODE_FIRST,
                                np.empty(0, np.int64), indices, distances)
                return RayHits(indices, distances)
            counts = np.zeros(m, dtype=np.int64)
            self._cast_rays(rays, visit_order, ray_kernels.MODE_COUNT, counts,
                            np.empty(0, self._index_dtype), _NO_DISTANCES)
            indptr = _indptr(counts)
            indices = np.empty(int(indptr[-1]), dtype=self._index_dtype)
            distances = np.empty(int(indptr[-1]))
            self._cast_rays(rays, visit_order, ray_kernels.MODE_FILL, indptr, indices,
                            distances)
        return Neighbors(indptr, indices, distances, self.n_points)

    def _cast_rays(self, rays, visit_order, mode, positions, indices, distances):
        """One pass of the ray kernel; ``rays`` is ``(radii in sorted order, max radius,
        walk limit, origins3, units3, max_distance)``."""
        m = visit_order.shape[0]
        if self._parallel(m, PARALLEL_MIN_QUERIES):
            # The ray limits may be the caller's array (read-only or not): part of the key.
            kernel = indirect.kernel_target(ray_kernels.cast_rays, (
                self.state, *rays, visit_order, 0, m, mode, positions, indices, distances),
                (self._index_dtype, rays[-1].flags.writeable))
            ray_kernels.cast_rays_parallel(self.state, *rays, visit_order, mode, positions,
                                           indices, distances, kernel)
        else:
            ray_kernels.cast_rays(self.state, *rays, visit_order, 0, m, mode, positions,
                                  indices, distances)


def _indptr(counts: np.ndarray) -> np.ndarray:
    """CSR row offsets from row lengths."""
    indptr = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return indptr


# ---------------------------------------------------------------------- building
def _default_cell_size(points3: np.ndarray, lowest: np.ndarray, highest: np.ndarray,
                       box: np.ndarray, n_dims: int) -> float:
    """Cell size putting about `DEFAULT_POINTS_PER_CELL` points in a cell on average over
    the box that holds all but the outermost points.

    The box spans the `DEFAULT_SIZE_QUANTILE` to ``1 - DEFAULT_SIZE_QUANTILE`` order
    statistics of every axis, taken over every ``n // DEFAULT_SIZE_SAMPLE``-th point (at
    most twice `DEFAULT_SIZE_SAMPLE` points): over the bounding box, one point far from a
    million others put them all in one cell, and a k-nearest query then compared every
    query with every point. An axis whose statistics coincide takes its whole spread. The
    sample is sorted column by column (``np.quantile`` over every point of 5,000 took 0.6
    ms, three times the rest of the build; ad hoc).
    """
    n = points3.shape[0]
    if n == 0:
        return 1.0
    sample = np.sort(np.ascontiguousarray(
        points3[::max(1, n // DEFAULT_SIZE_SAMPLE), :n_dims].T), axis=1)
    last = sample.shape[1] - 1
    low = sample[:, round(last * DEFAULT_SIZE_QUANTILE)]
    high = sample[:, round(last * (1.0 - DEFAULT_SIZE_QUANTILE))]
    inner = high - low
    spread = (highest - lowest)[:n_dims]
    extent = np.where(np.isfinite(box[:n_dims]), box[:n_dims],
                      np.where(inner > 0, inner, spread))
    extent = extent[extent > 0]
    if extent.size == 0:
        return 1.0
    # In logarithms: the volume of a cloud spanning 1e150 per axis overflows float64.
    log_size = (np.log(extent).sum() + math.log(DEFAULT_POINTS_PER_CELL / n)) / extent.size
    size = float(min(math.exp(log_size), extent.max()))
    # No more than half the cells an axis may have (`MAX_CELLS_PER_AXIS`) over the whole
    # spread: a far outlier (1,000 points in [0, 1] and one at 1e15) would otherwise get a
    # default size the build refuses as too small.
    return max(size, float(spread.max()) / (0.5 * MAX_CELLS_PER_AXIS))


#: `Grid.query_knn` refuses a ``k`` beyond the point count whose padding columns (-1
#: and ``inf``, 16 bytes a slot with int64 indices) would take more than this many bytes.
KNN_MAX_PADDING_BYTES = 2**30


def _knn_outputs(m: int, k: int, n_points: int, index_dtype) -> tuple[np.ndarray, np.ndarray]:
    """The (m, k) index and distance arrays of `Grid.query_knn`, filled with -1 and
    ``inf``; a clear error, naming ``k``, for results that cannot be made."""
    padding = m * max(k - n_points, 0) * 16
    if padding > KNN_MAX_PADDING_BYTES:
        # Python ints of any size: beyond float64's range, the size is said as a power of 10.
        size = (f"{padding / 2**30:.3g} GiB" if padding.bit_length() < 1000
                else f"about 10**{len(str(padding // 2**30)) - 1} GiB")
        raise ValueError(
            f"`k` must not exceed the number of points ({n_points}) by so much: the "
            f"result's padding columns alone would take {size} "
            f"({m} x {k - n_points} slots); got k = {k} (k = {max(n_points, 1)} finds every "
            "point)."
        )
    try:
        return (np.full((m, k), -1, dtype=index_dtype), np.full((m, k), np.inf))
    except (MemoryError, ValueError) as error:
        raise MemoryError(
            f"query_knn: no memory for results of shape ({m}, {k}) (`k` = {k}); ask for "
            f"fewer neighbours or fewer queries at a time ({error})."
        ) from error


def _histograms_fit(n_threads: int, n_keys: float, n: int) -> bool:
    """Whether a counting sort of ``n`` items by ``n_keys`` keys may keep a histogram per
    thread (`build_parallel`): at most `PARALLEL_BUILD_MAX_COUNTS_PER_POINT` per item."""
    return n_threads * n_keys <= PARALLEL_BUILD_MAX_COUNTS_PER_POINT * n


def _build_state(points3, lowest, highest, cell_size, box, brute, index_dtype,
                 parallel) -> GridState:
    """Sort ``points3`` (n, d), d <= 3 (missing coordinates 0), already wrapped, into
    cells; see the module docstring.

    ``lowest`` and ``highest`` are the smallest and largest coordinate per axis (the origin
    of open axes, and the extent of the box of cells). With ``parallel``, a dense grid
    whose counts fit `PARALLEL_BUILD_MAX_COUNTS_PER_POINT` is sorted on every thread
    (`build_parallel`), and so are the points of a sparse one once its cells are
    numbered: the same state, byte for byte.
    """
    n = points3.shape[0]
    is_periodic = np.isfinite(box)
    origin = np.where(is_periodic, 0.0, lowest)
    size = np.empty(N_AXES)
    n_periodic = np.zeros(N_AXES, dtype=np.int64)
    for axis in range(N_AXES):
        if is_periodic[axis]:
            cells_across = box[axis] / (cell_size * (1 + CELL_SIZE_MARGIN))
            if cells_across >= MAX_CELLS_PER_AXIS:
                raise ValueError(
                    f"`cell_size` is too small for the periodic box: {cell_size} would need "
                    f"{cells_across:.3g} cells along axis {axis} (at most 2**52). Use a "
                    "larger cell_size."
                )
            count = 1 if brute else max(1, math.floor(cells_across))
            n_periodic[axis] = count
            size[axis] = box[axis] / count
        else:
            size[axis] = np.inf if brute else cell_size * (1 + CELL_SIZE_MARGIN)
    with np.errstate(over="ignore"):
        inv_size = 1.0 / size
    if not np.isfinite(inv_size).all():
        # A subnormal cell size or period: 1 / size overflows, and no cell arithmetic holds.
        axis = int(np.argmax(~np.isfinite(inv_size)))
        name, value = ("box", box[axis]) if is_periodic[axis] else ("cell_size", cell_size)
        raise ValueError(
            f"`{name}` is too small: {value} (axis {axis}) has no finite inverse in float64."
        )
    # The cell coordinate of the largest coordinate is the largest cell coordinate (the
    # same arithmetic, monotone), so the box of cells is known before any pass.
    n_cells = np.array([
        n_periodic[axis] if n_periodic[axis] > 0 else
        floor_to_int((highest[axis] - origin[axis]) * inv_size[axis]) + 1
        for axis in range(N_AXES)
    ], dtype=np.int64)
    n_linear = float(np.prod(n_cells.astype(np.float64)))
    n_threads = numba.get_num_threads() if parallel else 1
    if n_linear <= build.max_dense_cells(n):
        if n_threads > 1 and _histograms_fit(n_threads, n_linear, n):
            built = build_parallel.build_dense_parallel(points3, origin, inv_size,
                                                        n_periodic, n_cells, n_threads)
        else:
            built = build.dense_build(points3, origin, inv_size, n_periodic, n_cells)
        cell_start, permutation, columns, dense_lookup, dense_start, cell_coords = built
        return _grid_state(columns, permutation, index_dtype, origin, size, inv_size,
                           n_cells, box, cell_start, cell_coords, dense_lookup, dense_start,
                           _NO_HASH_KEYS, _NO_HASH_IDS)
    # Only open axes can exceed it: periodic ones were checked above.
    if n_cells.max() > MAX_CELLS_PER_AXIS:
        axis = int(np.argmax(n_cells > MAX_CELLS_PER_AXIS))
        # From the coordinates: `n_cells` is clamped at 2**62.
        needed = (highest[axis] - origin[axis]) * inv_size[axis] + 1.0
        raise ValueError(
            f"`cell_size` is too small for the spread of the points: {cell_size} would "
            f"need {needed:.3g} cells along axis {axis} (at most 2**52). "
            "Use a larger cell_size."
        )
    coords = build.cell_coords_of(points3, origin, inv_size, n_periodic)
    cell_id, unique = build.hashed_cell_ids(coords)
    n_occupied = unique.shape[0]
    cell_order = np.lexsort((unique[:, 0], unique[:, 1], unique[:, 2]))
    rank = np.empty(n_occupied, dtype=np.int64)
    rank[cell_order] = np.arange(n_occupied)
    build.relabel(cell_id, rank)
    cell_coords = np.take(unique, cell_order, axis=0)  # rows: see `Pairs.sorted`
    # Queries look up rows of cells, not cells (see `cells.sparse_row_slice`).
    hash_keys, hash_ids = build.row_table(cell_coords)
    if n_threads > 1 and _histograms_fit(n_threads, n_occupied, n):
        cell_start, permutation, columns = build_parallel.sort_points_parallel(
            points3, cell_id, n_occupied, n_threads)
    else:
        cell_start, permutation, columns = build.sort_points(points3, cell_id, n_occupied)
    return _grid_state(columns, permutation, index_dtype, origin, size, inv_size, n_cells,
                       box, cell_start, cell_coords, _NO_DENSE_LOOKUP, _NO_DENSE_LOOKUP,
                       hash_keys, hash_ids)


def _grid_state(columns, permutation, index_dtype, origin, size, inv_size, n_cells, box,
                cell_start, cell_coords, dense_lookup, dense_start, hash_keys,
                hash_ids) -> GridState:
    return GridState(
        points=columns,
        order=permutation.astype(index_dtype),
        origin=origin,
        cell_size=size,
        inv_cell_size=inv_size,
        n_cells=n_cells,
        box=box.copy(),
        half_box=box / 2.0,
        cell_start=cell_start,
        cell_coords=cell_coords,
        dense_lookup=dense_lookup,
        dense_start=dense_start,
        hash_keys=hash_keys,
        hash_ids=hash_ids,
    )


def _move_regions_down(indices, distances, region_rows, rows_written: list[int]) -> int:
    """Move each region's written rows down after the previous region's, in order (a move
    to lower rows never overwrites rows not yet moved); returns the rows in all.

    NumPy's block moves: a compiled row-by-row loop, tried, won 4 us at 4,800 rows and lost
    from 16,000 on (134 against 78 us at 66,000 rows; 20 ms at a million points)."""
    total = 0
    for source, written in zip(region_rows.tolist(), rows_written, strict=False):
        if source != total:
            indices[total:total + written] = indices[source:source + written]
            if distances.shape[0]:
                distances[total:total + written] = distances[source:source + written]
        total += written
    return total


def _chunk_ends(counts: np.ndarray, chunk_size: int) -> list[int]:
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
