"""The CPU engines of `Grid`: `CpuEngine` (``algorithm="grid"``) owns the grid state and
answers every query with the numba kernels of ``_kernels/`` on the threads of this
process; `BruteEngine` (``algorithm="brute"``) is the same with every point in one cell.

The pair searches are in ``_pair_search.py``, the functions run over pairs and
neighbours (`for_each_pair`, `for_each_neighbor`) and over ray hits (`query_ray` with
``fn``) in ``_pair_functions.py``; the radius,
k-nearest, box and ray queries are here, each a count pass and a fill pass (or one pass)
that run on the calling thread for few queries and through a parallel driver for many.
The interface is `_engine.GridEngine`.
"""

from __future__ import annotations

import numba
import numpy as np

from .. import _config, _outputs
from .._kernels import indirect
from .._results import KNearest, Neighbors, Pairs, RayHits
from . import _build, _pair_functions, _pair_search
from ._kernels import box as box_kernels
from ._kernels import build, build_parallel, knn, radius, regions
from ._kernels import ray as ray_kernels
from ._pair_search import FoundPairs

#: Below these sizes queries (and the build) run on the calling thread: waking the other
#: threads costs more than the work (benchmarks/bench_threading.py measures both).
PARALLEL_MIN_POINTS = 20_000
PARALLEL_MIN_QUERIES = 2_000
#: Passed where a kernel writes no distances (one specialization with or without them).
_NO_DISTANCES = np.empty(0, dtype=np.float64)


class CpuEngine:
    """The grid on the CPU: a `GridState` built once, queried by numba kernels.

    Parameters and attributes are those of `_engine.GridEngine`; ``n_threads`` is the
    thread count of every build and query (None: numba's, -1: all), set around each
    parallel pass with `_config.threads`.
    """

    #: Every point in one cell (`BruteEngine`).
    one_cell = False

    def __init__(self, points3, lowest, highest, cell_size, box, n_threads) -> None:
        n = points3.shape[0]
        self.n_threads = n_threads
        self.index_dtype = _build.index_dtype(n)
        with _config.threads(n_threads):
            self.state = _build.build_state(
                points3, lowest, highest, cell_size, box, self.one_cell, self.index_dtype,
                self.parallel_over_points(n),
            )
        self.n_points = n
        self.n_occupied_cells = self.state.cell_coords.shape[0]

    def parallel_over_points(self, n_items: int) -> bool:
        """Whether work over ``n_items`` points is worth the other threads."""
        return self.n_threads != 1 and n_items >= PARALLEL_MIN_POINTS

    def parallel_over_queries(self, n_items: int) -> bool:
        """Whether ``n_items`` queries are worth the other threads."""
        return self.n_threads != 1 and n_items >= PARALLEL_MIN_QUERIES

    def own_points(self, n_dims: int) -> np.ndarray:
        """The grid's points in the caller's order as it holds them (periodic axes
        wrapped): a new (n, n_dims) float64 array, the queries of ``queries=None``."""
        # The sorted copy the grid keeps, put back in the caller's order: the grid's
        # points as it was built on them, whatever became of the caller's array since.
        points = np.empty((self.state.order.shape[0], n_dims))
        points[self.state.order] = self.state.points[:n_dims].T
        return points

    @staticmethod
    def pairs_of_rows(found: Neighbors) -> Pairs:
        """The rows of a radius query as (query, point) pairs (`Neighbors.to_pairs`)."""
        return found.to_pairs()

    def sorted_radii(self, radii):
        """``radii`` in the grid's point order, the largest, and whether all are valid."""
        return regions.sorted_radii(radii, self.state.order)

    # ------------------------------------------------------------------ pairs
    query_pairs = _pair_search.query_pairs
    iter_pairs = _pair_search.iter_pairs
    for_each_pair = _pair_functions.for_each_pair
    for_each_neighbor = _pair_functions.for_each_neighbor

    def found_pairs(self, r2, radii, reach) -> FoundPairs:
        """The pairs of `query_pairs` as its search found them (`GridEngine.found_pairs`):
        the same search, writing each sorted point's position in place of its index."""
        positions = np.arange(self.n_points, dtype=self.index_dtype)
        found = _pair_search.query_pairs(self, r2, radii, reach, False, as_found=True,
                                         order=positions)
        state = self.state
        # A copy, always (``ascontiguousarray`` of a single point's transpose is a view).
        points = np.array(state.points.T, order="C")
        return FoundPairs(found.indices, state.order, points,
                          _pair_functions.row_slabs(state, reach))

    # ------------------------------------------------------------------ radius
    def query_radius(self, query_points, radii, return_distances, sort) -> Neighbors:
        with _config.threads(self.n_threads):
            visit_order, visited_points, visited_radii = self._visit(query_points, radii)
            in_visit_order = np.arange(query_points.shape[0])
            counts = self._scatter(
                self._count_radius(visited_points, visited_radii, in_visit_order), visit_order)
            indptr = _indptr(counts)
            nnz = int(indptr[-1])
            indices = _outputs.empty(nnz, self.index_dtype)
            distances = _outputs.empty(nnz if return_distances else 0, np.float64)
            self._scan_radius(visited_points, visited_radii, in_visit_order,
                              self._gather(indptr, visit_order), indices, distances, True,
                              sort)
        return Neighbors(indptr, indices, distances if return_distances else None,
                         self.n_points)

    def count_radius(self, query_points, radii, out=None) -> np.ndarray:
        with _config.threads(self.n_threads):
            visit_order, visited_points, visited_radii = self._visit(query_points, radii)
            return self._scatter(self._count_radius(
                visited_points, visited_radii, np.arange(query_points.shape[0])), visit_order,
                out)

    def _visit(self, query_points, radii):
        """The order in which to answer queries (cell by cell, see `build.query_order`),
        and the queries and radii taken in that order: reading them one after the other
        saves a cache miss per query in each pass over a large query set."""
        visit_order = self._query_order(query_points)
        if self.parallel_over_points(query_points.shape[0]):
            visited = build_parallel.take_rows_parallel(
                query_points, visit_order, _outputs.empty(query_points.shape, np.float64))
        else:
            visited = build.take_rows(query_points, visit_order, np.empty_like(query_points))
        return visit_order, visited, self._gather(radii, visit_order)

    def _gather(self, values: np.ndarray, order: np.ndarray) -> np.ndarray:
        """``values[order]``, on every thread for many (into memory of `_outputs`)."""
        if self.parallel_over_points(order.shape[0]):
            return build_parallel.gather_parallel(
                values, order, _outputs.empty(order.shape[0], values.dtype))
        return values[order]

    def _scatter(self, values: np.ndarray, order: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray:
        """The array ``out`` (new where None) with ``out[order] = values`` (``order`` a
        permutation)."""
        if self.parallel_over_points(order.shape[0]):
            if out is None:
                out = _outputs.empty(values.shape[0], values.dtype)
            return build_parallel.scatter_parallel(values, order, out)
        if out is None:
            out = np.empty_like(values)
        out[order] = values
        return out

    def _query_order(self, query_points) -> np.ndarray:
        """`build.query_order` of (m, 3) query points, on every thread for many queries
        (the same permutation) when the per-thread histograms of the keys stay small."""
        m = query_points.shape[0]
        n_threads = numba.get_num_threads()
        if self.parallel_over_points(m) and n_threads > 1:
            n_keys = int(self.state.dense_lookup.shape[0] or self.n_occupied_cells + 1)
            if _build.histograms_fit(n_threads, n_keys, m):
                return build_parallel.query_order_parallel(
                    self.state, query_points, _outputs.empty((n_threads, n_keys), np.int64),
                    _outputs.empty(m, np.int64), _outputs.empty(m, np.int64))
        return build.query_order(self.state, query_points)

    def _count_radius(self, query_points, radii, visit_order):
        m = query_points.shape[0]
        if self.parallel_over_points(m):
            counts = _outputs.empty(m, np.int64)
            counts[:] = 0
        else:
            counts = np.zeros(m, dtype=np.int64)
        self._scan_radius(query_points, radii, visit_order, counts,
                          np.empty(0, self.index_dtype), _NO_DISTANCES, False, False)
        return counts

    def _scan_radius(self, query_points, radii, visit_order, positions, indices, distances,
                     write, sort):
        m = query_points.shape[0]
        if self.parallel_over_queries(m):
            kernel = indirect.kernel_target(radius.radius_scan_queries, (
                self.state, query_points, radii, visit_order, 0, m, positions, indices,
                distances, write, sort), self.index_dtype)
            radius.radius_scan(self.state, query_points, radii, visit_order, positions, indices,
                               distances, write, sort, kernel)
        else:
            radius.radius_scan_queries(self.state, query_points, radii, visit_order, 0, m,
                                       positions, indices, distances, write, sort)

    # ------------------------------------------------------------------ k nearest
    def query_knn(self, query_points, k, limit, out=None) -> KNearest:
        m = query_points.shape[0]
        indices, distances = _knn_outputs(m, k, self.index_dtype) if out is None else out
        counts = _outputs.empty(m, np.int64)
        with _config.threads(self.n_threads):
            visit_order = self._query_order(query_points)
            limits = np.full(m, limit)
            if self.parallel_over_queries(m):
                kernel = indirect.kernel_target(knn.knn_queries, (
                    self.state, query_points, k, limits, visit_order, 0, m, indices, distances,
                    counts), self.index_dtype)
                knn.knn_query(self.state, query_points, k, limits, visit_order, indices,
                              distances, counts, kernel)
            else:
                # The kernel itself, not a sequential driver: numba would compile the kernel
                # into a driver once more.
                knn.knn_queries(self.state, query_points, k, limits, visit_order, 0, m,
                                indices, distances, counts)
        return KNearest(indices, distances, counts, self.n_points)

    # ------------------------------------------------------------------ boxes
    def query_box(self, lower3, upper3, width, sort) -> Neighbors:
        with _config.threads(self.n_threads):
            visit_order = self._query_order(lower3)
            m = lower3.shape[0]
            parallel = self.parallel_over_queries(m)

            def scan(positions, indices, write, sort_rows):
                if parallel:
                    kernel = indirect.kernel_target(box_kernels.box_scan_boxes, (
                        self.state, lower3, upper3, width, visit_order, 0, m, positions, indices,
                        write, sort_rows), self.index_dtype)
                    box_kernels.box_scan(self.state, lower3, upper3, width, visit_order,
                                         positions, indices, write, sort_rows, kernel)
                else:
                    # The kernel on all boxes, not a sequential driver (see `query_knn`).
                    box_kernels.box_scan_boxes(self.state, lower3, upper3, width, visit_order,
                                               0, m, positions, indices, write, sort_rows)

            counts = np.zeros(m, dtype=np.int64)
            scan(counts, np.empty(0, self.index_dtype), False, False)
            indptr = _indptr(counts)
            indices = _outputs.empty(int(indptr[-1]), self.index_dtype)
            scan(indptr, indices, True, sort)
        return Neighbors(indptr, indices, None, self.n_points)

    # ------------------------------------------------------------------ rays
    def query_ray(self, origins3, units3, radii, limit, all_hits, fn=None,
                  args=()) -> RayHits | Neighbors:
        m = origins3.shape[0]
        rays = (np.ascontiguousarray(radii[self.state.order]),
                float(radii.max()) if radii.size else 0.0,
                ray_kernels.WALK_COST_PER_POINT * self.n_points, origins3, units3, limit)
        with _config.threads(self.n_threads):
            visit_order = self._query_order(origins3)
            if fn is not None:
                return RayHits(*_pair_functions.ray_function_hits(self, rays, visit_order, fn,
                                                                  args))
            if not all_hits:
                indices = np.empty(m, dtype=self.index_dtype)
                distances = np.empty(m)
                self._cast_rays((*rays, visit_order, indices, distances,
                                 np.empty(0, np.int64), ray_kernels.MODE_FIRST))
                return RayHits(indices, distances)
            counts = np.zeros(m, dtype=np.int64)
            self._cast_rays((*rays, visit_order, np.empty(0, self.index_dtype), _NO_DISTANCES,
                             counts, ray_kernels.MODE_COUNT))
            indptr = _indptr(counts)
            indices = np.empty(int(indptr[-1]), dtype=self.index_dtype)
            distances = np.empty(int(indptr[-1]))
            self._cast_rays((*rays, visit_order, indices, distances, indptr,
                             ray_kernels.MODE_FILL))
        return Neighbors(indptr, indices, distances, self.n_points)

    def _cast_rays(self, params):
        """One pass of `ray.cast_rays` over every ray; ``params`` as `ray.cast_kernel`
        takes them."""
        m = params[6].shape[0]
        if self.parallel_over_queries(m):
            # The ray limits may be the caller's array (read-only or not): part of the key.
            target = indirect.kernel_target(ray_kernels.cast_rays,
                                            (self.state, params, 0, m, None, ()),
                                            (self.index_dtype, params[5].flags.writeable))
            ray_kernels.cast_rays_parallel(self.state, params, m, target)
        else:
            ray_kernels.cast_rays(self.state, params, 0, m, None, ())


class BruteEngine(CpuEngine):
    """Brute force: every point in one cell, so every query compares every candidate
    pair, with the kernels and arithmetic of `CpuEngine` and no spatial pruning."""

    one_cell = True


def _indptr(counts: np.ndarray) -> np.ndarray:
    """CSR row offsets from row lengths (for many rows, into memory of `_outputs`)."""
    if counts.shape[0] < PARALLEL_MIN_POINTS:
        indptr = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    else:
        indptr = _outputs.empty(counts.shape[0] + 1, np.int64)
        indptr[0] = 0
    np.cumsum(counts, out=indptr[1:])
    return indptr


def _knn_outputs(m: int, k: int, index_dtype) -> tuple[np.ndarray, np.ndarray]:
    """The (m, k) index and distance arrays of `query_knn`, uninitialized (`_outputs`):
    the kernel writes every slot, the empty ones as -1 and ``inf``, so each page of the
    answer is written once, by the thread that fills it, rather than first filled on one
    thread (their size was checked by `Grid.query_knn`)."""
    try:
        return (_outputs.empty((m, k), index_dtype), _outputs.empty((m, k), np.float64))
    except (MemoryError, ValueError) as error:
        raise MemoryError(
            f"query_knn: no memory for results of shape ({m}, {k}) (`k` = {k}); ask for "
            f"fewer neighbours or fewer queries at a time ({error})."
        ) from error
