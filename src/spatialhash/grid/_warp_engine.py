"""The Warp engine of `Grid` (``device="cuda"``, ``"cuda:N"`` or ``"warp-cpu"``): the grid
built and queried by NVIDIA Warp kernels (``_warp_kernels/``), on a GPU or, compiled by
Warp for the CPU, on any machine.

Its answers are the CPU engine's: the same cells and the same order of points in them
(`_warp_build`), the same pairs and rows, distances equal bit for bit (the CPU engine's
arithmetic, with the fused multiply-add off, see ``_warp_kernels/__init__.py``), and the
unsorted rows of `query_radius` and `query_box` in the CPU engine's order. The rows of
`query_pairs` come in an order of its own, grouped by the first point of each pair in
the grid's order (which the API leaves open); `iter_pairs` cuts them into chunks by the
CPU engine's rule (`_pair_search.chunks_of_cells`). Every query but `query_knn` and the
first hits of `query_ray` counts its rows, sizes the output exactly from an exclusive scan
of the counts, then fills it: no cap on a row, and each thread writes its own rows, so
the output does not depend on the scheduling. An output the device cannot hold is one
`MemoryError` naming the query and its size (`_warp_memory`). `query_knn` writes its
(m, k) rows in one pass: each query's thread keeps its heap of candidates in its own
row, so ``k`` has no cap and needs no scratch (``_warp_kernels/knn.py``). `query_ray`
walks the cells of each ray as the CPU engine does (``_warp_kernels/ray.py``). Results
are the CPU engine's result types holding Warp arrays on the device (the grid's points
in their own order and `found_pairs` excepted, which the host reads); `Grid` gives them
to its caller in the kind of the points (``_device_arrays.py``), a NumPy caller's copied
to the host.

`for_each_pair` and `for_each_neighbor` take a Warp function (``@wp.func``) as ``fn``,
called from a kernel generated for it (``_warp_kernels/functions.py``): one thread per
point (or query), its calls in the order of its walk of the cells.

So far it answers `query_pairs`, `iter_pairs` and `found_pairs` (one distance or one
radius per point, open or periodic boxes), `query_radius`, `count_radius`, `query_box`,
`query_knn`, `for_each_pair`, `for_each_neighbor` and `query_ray` without a user's
function, and `query_ray` with a Warp function as ``fn`` (offered each ray's row of
every hit in order, `_chosen_hits`). `n_threads` is accepted and unused.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import numpy as np
import warp as wp

from .._results import KNearest, Neighbors, Pairs, RayHits
from .._user_functions import GRID_RAY_CALL, PAIR_CALL, warp_arguments
from . import _build
from ._device_arrays import DeviceValues
from ._kernels import ray as cpu_rays
from ._pair_search import FoundPairs, chunks_of_cells
from ._warp_arguments import own_points, values_in_order
from ._warp_build import build_device_grid
from ._warp_kernels import functions, knn, ray, scan
from ._warp_kernels import rows as row_kernels
from ._warp_memory import device_empty


class WarpEngine:
    """The grid on a Warp device: a `_warp_build.DeviceBuild`, queried by Warp kernels.

    Parameters and attributes are those of `_engine.GridEngine`, and:

    Parameters
    ----------
    device : str
        Warp's name of the device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    device_name : str
        The ``device`` the caller gave `Grid` (``"warp-cpu"`` for Warp's ``"cpu"``), for
        messages.
    """

    #: Every point in one cell (`WarpBruteEngine`).
    one_cell = False

    def __init__(self, points3, lowest, highest, cell_size, box, n_threads, *, device,
                 device_name) -> None:
        n = points3.shape[0]
        self.device = device
        self.device_name = device_name
        self.n_threads = n_threads
        self.n_points = n
        self.index_dtype = _build.index_dtype(n)
        self._build_inputs = (lowest.copy(), highest.copy(), cell_size, box.copy())
        self._device_build = build_device_grid(points3, lowest, highest, cell_size, box,
                                               self.one_cell, self.index_dtype, device)
        self.n_occupied_cells = int(self._device_build.grid.n_occupied)
        self._order = _host(self._device_build.order)
        self._state = None

    @property
    def state(self):
        """The cells as the CPU engine's `GridState` (built on the host at the first call
        from the device's sorted points: the same cells, points and order)."""
        if self._state is None:
            lowest, highest, cell_size, box = self._build_inputs
            points = _host(self._device_build.grid.points).reshape(self.n_points, 3)
            state = _build.build_state(points, lowest, highest, cell_size, box, self.one_cell,
                                       self.index_dtype, False)
            # The host build sorts the sorted points again; its order maps to theirs.
            self._state = state._replace(order=self._order[state.order])
        return self._state

    def sorted_radii(self, radii):
        """``radii`` in the grid's point order, the largest, and whether all are valid."""
        in_order = radii[self._order]
        valid = bool(np.all((in_order >= 0.0) & (in_order < np.inf)))
        return in_order, float(in_order.max()) if valid and in_order.size else 0.0, valid

    def own_points(self, n_dims: int) -> wp.array:
        """The grid's points in the caller's order as it holds them (periodic axes
        wrapped, zeros on the axes past ``n_dims``): (n,) float64 vectors on the device,
        the queries of ``queries=None``, which `_inputs.canonical_queries` takes as
        they are."""
        return own_points(self._device_build.grid.points, self._device_build.order)

    def in_grid_order(self, radii: wp.array) -> wp.array:
        """Per-point float64 ``radii`` on the device, checked there already
        (`_device_arrays.Boundary.values`), in the grid's point order, as `sorted_radii`
        puts them on the host."""
        return values_in_order(radii, self._device_build.order)

    # ------------------------------------------------------------------ pairs
    def query_pairs(self, r2, radii, reach, return_distances) -> Pairs:
        n = self.n_points
        rows = functools.partial(self._pair_rows(r2, radii, reach), 0, n)
        indptr, indices, distances = self._count_and_fill(n, rows, 2, return_distances,
                                                          "query_pairs")
        return Pairs(indices, distances, (n, n))

    def iter_pairs(self, r2, radii, reach, chunk_size, return_distances) -> Iterator[Pairs]:
        """The pairs of `query_pairs`, in its order, in the chunks of
        `_pair_search.chunks_of_cells`: a count pass over every point, whose counts summed
        over each cell's points are the pairs found from that cell (a point's row holds
        its pairs with the points after it, so a cell's rows are consecutive), then fill
        passes over the points of a few cells at a time, from offsets the counts give."""
        n = self.n_points
        rows = self._pair_rows(r2, radii, reach)
        counts = wp.zeros(n, dtype=wp.int64, device=self.device)
        rows(0, n, False, counts, *self._no_output(2))
        point_counts = _host(counts)
        cell_start = _host(self._device_build.grid.cell_start)[:self.n_occupied_cells + 1]
        running = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(point_counts, out=running[1:])

        def fill(begin, end):
            first, last = int(cell_start[begin]), int(cell_start[end])
            offsets = running[first:last + 1] - running[first]
            indices, distances = self._row_outputs(int(offsets[-1]), 2, return_distances,
                                                   "iter_pairs")
            rows(first, last - first, True,
                 wp.array(offsets, dtype=wp.int64, device=self.device), indices, distances)
            return Pairs(indices, distances if return_distances else None, (n, n))

        yield from chunks_of_cells(running[cell_start[1:]] - running[cell_start[:-1]],
                                   chunk_size, fill, return_distances, _take_rows)

    def found_pairs(self, r2, radii, reach) -> FoundPairs:
        """The pairs of `query_pairs` as its search found them (`GridEngine.found_pairs`):
        the same passes, writing each sorted point's position in place of its index, so
        that each pair is ``(s, t)`` with ``s < t``, the point whose row holds it first;
        no slabs (the rows are grouped by ``s``, in increasing order)."""
        n = self.n_points
        positions = wp.array(np.arange(n, dtype=self.index_dtype), device=self.device)
        rows = functools.partial(self._pair_rows(r2, radii, reach, positions), 0, n)
        _, pairs, _ = self._count_and_fill(n, rows, 2, False, "found_pairs")
        points = _host(self._device_build.grid.points).reshape(n, 3)
        return FoundPairs(_host(pairs), self._order.copy(), np.ascontiguousarray(points),
                          None)

    def _pair_rows(self, r2, radii, reach, order=None):
        """``rows(first, n_rows, write, positions, indices, distances)``: the count or fill
        pass of a pair search over the sorted points ``first .. first + n_rows - 1``,
        writing ``order``'s entry for each point (None: the caller's index)."""
        radii_device = self._floats(radii)
        # Typed: a generic kernel would take a Python float for a float32.
        r2, reach = wp.float64(r2), wp.float64(reach)
        order = self._device_build.order if order is None else order

        def rows(first, n_rows, write, positions, indices, distances):
            self._launch(scan.pair_rows, n_rows, (
                self._device_build.grid, order, radii_device, r2, reach,
                wp.int64(first), write, positions, indices, distances))

        return rows

    # ------------------------------------------------------------------ radius
    def query_radius(self, query_points, radii, return_distances, sort) -> Neighbors:
        rows = self._radius_rows(query_points, radii, sort)
        indptr, indices, distances = self._count_and_fill(query_points.shape[0], rows, 1,
                                                          return_distances, "query_radius")
        return Neighbors(indptr, indices.reshape(-1), distances, self.n_points)

    def count_radius(self, query_points, radii, out=None) -> np.ndarray:
        m = query_points.shape[0]
        counts = wp.zeros(m, dtype=wp.int64, device=self.device)
        self._radius_rows(query_points, radii, False)(False, counts, *self._no_output(1))
        return counts if out is None else _host(counts, out)

    def _radius_rows(self, query_points, radii, sort):
        """The count or fill pass of a radius query, as `_count_and_fill` calls it."""
        queries = self._vectors(query_points)
        query_radii = self._floats(radii)
        no_radii = wp.empty(0, dtype=wp.float64, device=self.device)

        def rows(write, positions, indices, distances):
            self._launch(scan.radius_rows, query_points.shape[0], (
                self._device_build.grid, self._device_build.order, queries, query_radii,
                no_radii, write, sort, positions, indices, distances))

        return rows

    # ------------------------------------------------------------------ k nearest
    def query_knn(self, query_points, k, limit, out=None) -> KNearest:
        m = query_points.shape[0]
        # Uninitialized: the kernel keeps each row's heap in the row itself and writes
        # every slot.
        what = f"query_knn's results of shape ({m}, {k}) (`k` = {k})"
        indices = device_empty((m, k), self._index_type(), self.device, what)
        distances = device_empty((m, k), wp.float64, self.device, what)
        counts = wp.zeros(m, dtype=wp.int64, device=self.device)
        self._launch(knn.knn_rows, m, (
            self._device_build.grid, self._device_build.order,
            self._vectors(query_points), wp.int64(k),
            wp.float64(limit), indices, distances, counts))
        if out is None:
            return KNearest(indices, distances, counts, self.n_points)
        return KNearest(_host(indices, out[0]), _host(distances, out[1]), counts,
                        self.n_points)

    # ------------------------------------------------------------------ boxes
    def query_box(self, lower3, upper3, width, sort) -> Neighbors:
        m = lower3.shape[0]
        lowers, uppers, widths = (self._vectors(corner) for corner in (lower3, upper3, width))
        no_floats = wp.empty(0, dtype=wp.float64, device=self.device)

        def rows(write, positions, indices, distances):
            self._launch(scan.box_rows, m, (
                self._device_build.grid, self._device_build.order, lowers, uppers, widths,
                no_floats, write, sort, positions, indices))

        indptr, indices, _ = self._count_and_fill(m, rows, 1, False, "query_box")
        return Neighbors(indptr, indices.reshape(-1), None, self.n_points)

    # ------------------------------------------------------------------ rays
    def query_ray(self, origins3, units3, radii, limit, all_hits, fn=None,
                  args=()) -> RayHits | Neighbors:
        """Rays against the points as spheres (`GridEngine.query_ray`): the first hits in
        one pass, or every hit counted, scanned and written (`_warp_kernels/ray.py`);
        with a user's Warp function ``fn``, every hit, then `_chosen_hits`."""
        if fn is not None:
            args = warp_arguments(fn, args, self.device, GRID_RAY_CALL)
        m = origins3.shape[0]
        device = self.device
        if isinstance(radii, DeviceValues):  # checked on the device already
            radii_in_order, largest = self.in_grid_order(radii.values), radii.largest
        else:
            radii_in_order, largest = radii[self._order], radii.max() if radii.size else 0.0
        inputs = (self._device_build.grid, self._device_build.order,
                  self._floats(radii_in_order), wp.float64(largest),
                  wp.float64(cpu_rays.WALK_COST_PER_POINT * self.n_points),
                  self._vectors(origins3), self._vectors(units3), self._floats(limit))

        def rows(write, positions, indices, distances):
            mode = cpu_rays.MODE_FILL if write else cpu_rays.MODE_COUNT
            self._launch(ray.ray_hits, m, (*inputs, mode, positions, indices, distances))

        if all_hits or fn is not None:
            indptr, indices, distances = self._count_and_fill(m, rows, 1, True, "query_ray")
            if fn is not None:
                return self._chosen_hits(indptr, indices, distances, fn, args)
            return Neighbors(indptr, indices.reshape(-1), distances, self.n_points)
        indices = wp.empty((m, 1), dtype=self._index_type(), device=device)
        distances = wp.empty(m, dtype=wp.float64, device=device)
        self._launch(ray.ray_hits, m, (*inputs, cpu_rays.MODE_FIRST,
                                       wp.empty(0, dtype=wp.int64, device=device), indices,
                                       distances))
        return RayHits(indices.reshape(-1), distances)

    # ------------------------------------------------------------------ rows
    def pairs_of_rows(self, found: Neighbors) -> Pairs:
        """``found.to_pairs()`` on the device: the rows of a radius query as (query,
        point) pairs, the distances as they are (`_warp_kernels/rows.py`)."""
        m, nnz = found.indptr.shape[0] - 1, found.indices.shape[0]
        pairs = device_empty((nnz, 2), self._index_type(), self.device,
                             f"the {nnz:,} pairs of query_pairs")
        self._launch(row_kernels.pairs_of_rows, m, (found.indptr, found.indices, pairs))
        return Pairs(pairs, found.distances, (m, self.n_points))

    def rows_without_own(self, found: Neighbors) -> Neighbors:
        """The rows of a radius query of the grid's own points, each less its own index
        (`_self_exclusion.radius_without_self`), counted, scanned and filled on the
        device."""
        m = found.indptr.shape[0] - 1
        with_distances = found.distances is not None
        distances = found.distances if with_distances else self._no_output(1)[1]

        def kept_rows(write, positions, kept, kept_distances):
            self._launch(row_kernels.rows_without_own, m, (
                found.indptr, found.indices, distances, write, positions, kept,
                kept_distances))

        indptr, indices, kept_distances = self._count_and_fill(
            m, kept_rows, 1, with_distances, "query_radius")
        return Neighbors(indptr, indices.reshape(-1), kept_distances, found.n_points)

    def counts_without_own(self, counts: wp.array) -> wp.array:
        """The counts of `count_radius` of the grid's own points, on the device, less
        one each, in place (`_self_exclusion.counts_without_self`)."""
        self._launch(row_kernels.less_one, counts.shape[0], (counts,))
        return counts

    def knn_without_own(self, found: KNearest, out=None) -> KNearest:
        """The ``k + 1`` nearest of each of the grid's own points less its own index
        (`_self_exclusion.knn_without_self`), on the device; copied into ``out`` (NumPy
        arrays of shape (n, k)) where given."""
        n, width = found.indices.shape
        what = f"query_knn's results of shape ({n}, {width - 1})"
        indices = device_empty((n, width - 1), self._index_type(), self.device, what)
        distances = device_empty((n, width - 1), wp.float64, self.device, what)
        counts = device_empty(n, wp.int64, self.device, what)
        self._launch(row_kernels.knn_without_own, n, (found.indices, found.distances,
                                               found.counts, indices, distances, counts))
        if out is None:
            return KNearest(indices, distances, counts, found.n_points)
        return KNearest(_host(indices, out[0]), _host(distances, out[1]), counts,
                        found.n_points)

    # ------------------------------------------------------------------ functions
    def for_each_pair(self, r2, radii, reach, fn, args, once=False) -> None:
        """``fn(i, j, d2, dx, dy, dz, *args)``, ``fn`` a Warp function, for every ordered
        pair within ``r2`` (or ``radii``, in the grid's order), or with ``once`` each pair
        once (`_warp_kernels/functions.py`): one thread per point, which walks its block
        of cells and calls ``fn`` for its row ``i``, in the walk's order; with ``once``
        only for the points after it in the grid's order, so that the calls writing a
        row ``j`` come from other threads."""
        args = warp_arguments(fn, args, self.device, PAIR_CALL)
        inputs = (self._device_build.grid, self._device_build.order,
                  self._floats(radii), wp.float64(r2),
                  wp.float64(reach), bool(once), *args)
        self._launch_function(functions.pair_kernel(fn, len(args)), self.n_points, inputs,
                              fn)

    def for_each_neighbor(self, query_points, radii, fn, args) -> None:
        """``fn(q, j, d2, dx, dy, dz, *args)``, ``fn`` a Warp function, for each point
        ``j`` within ``radii[q]`` of each query: one thread per query, its ``j`` in the
        order of the rows of `query_radius`."""
        args = warp_arguments(fn, args, self.device, PAIR_CALL)
        inputs = (self._device_build.grid, self._device_build.order,
                  self._vectors(query_points), self._floats(radii), *args)
        self._launch_function(functions.neighbor_kernel(fn, len(args)),
                              query_points.shape[0], inputs, fn)

    def _chosen_hits(self, indptr, hits, distances, fn, args) -> RayHits:
        """The first hit of each ray that ``fn(ray, index, distance, *args)`` accepts, from
        the rows of every hit (sorted by distance, then index), offered to ``fn`` in that
        order, one thread per ray, until it accepts one (`functions.ray_kernel`). ``fn``
        sees the calls it sees on the CPU engine, whose walk offers the same row's prefix;
        the memory is that of every hit."""
        m = indptr.shape[0] - 1
        chosen = wp.full((m, 1), -1, dtype=self._index_type(), device=self.device)
        chosen_distances = wp.full(m, np.inf, dtype=wp.float64, device=self.device)
        self._launch_function(functions.ray_kernel(fn, len(args)), m, (
            indptr, hits, distances, chosen, chosen_distances, *args), fn, GRID_RAY_CALL,
            ", and return a bool")
        return RayHits(chosen.reshape(-1), chosen_distances)

    def _launch_function(self, kernel, dim, inputs, fn, call=PAIR_CALL, returns=""):
        """`_launch` of a kernel calling ``fn`` as ``call`` says, where Warp's failure to
        compile the call (``fn``'s parameter types against the values passed, or what it
        ``returns``) is a `TypeError` naming ``fn``, Warp's error as its cause."""
        try:
            self._launch(kernel, dim, inputs)
        except _WARP_CODEGEN_ERRORS as error:
            functions.forget(kernel)
            raise TypeError(
                f"`fn` must take {call}, typed as Warp passes them (wp.int64, "
                f"wp.float64, then each argument's type){returns}; got {fn.key!r}, which "
                "Warp could not compile for that call (Warp's error is the cause above)."
            ) from error

    # ------------------------------------------------------------------ passes
    def _count_and_fill(self, n_rows, rows, n_columns, return_distances, what):
        """Count the rows, scan the counts into offsets, fill the rows: ``(indptr,
        indices, distances)`` on the device, ``indices`` of shape (nnz, n_columns) and
        ``distances`` None unless ``return_distances``. ``rows(write, positions, indices,
        distances)`` runs one pass; ``what`` names the query in an out-of-memory error."""
        indptr = wp.zeros(n_rows + 1, dtype=wp.int64, device=self.device)
        counts = wp.zeros(n_rows, dtype=wp.int64, device=self.device)
        rows(False, counts, *self._no_output(n_columns))
        if n_rows:
            wp.utils.array_scan(counts, indptr[1:], inclusive=True)
        nnz = int(indptr[n_rows:].numpy()[0])  # the one value the host needs
        indices, distances = self._row_outputs(nnz, n_columns, return_distances, what)
        rows(True, indptr, indices, distances)
        return indptr, indices, distances if return_distances else None

    def _row_outputs(self, n_rows, n_columns, return_distances, what):
        """The uninitialized (n_rows, n_columns) indices and, with ``return_distances``,
        n_rows distances of a fill pass (`_warp_memory.device_empty`)."""
        what = f"the {n_rows:,} rows of {what}"
        indices = device_empty((n_rows, n_columns), self._index_type(), self.device, what)
        distances = device_empty(n_rows if return_distances else 0, wp.float64, self.device,
                                 what)
        return indices, distances

    def _no_output(self, n_columns):
        """The empty outputs of a count pass."""
        return (wp.empty((0, n_columns), dtype=self._index_type(), device=self.device),
                wp.empty(0, dtype=wp.float64, device=self.device))

    def _vectors(self, points3):
        """(m, 3) float64 points (queries, ray origins and directions, box corners) as
        vectors on the device: copied there from NumPy, or as they are, the vectors
        `_device_arrays` made there of a caller's arrays."""
        if isinstance(points3, wp.array):
            return points3
        return wp.array(points3, dtype=wp.vec3d, device=self.device)

    def _floats(self, values):
        """(n,) float64 values on the device: copied there from NumPy, or as they are,
        the values `_device_arrays` checked there (`in_grid_order`'s, or a caller's)."""
        if isinstance(values, wp.array):
            return values
        return wp.array(values, dtype=wp.float64, device=self.device)

    def _index_type(self):
        return wp.int32 if self.index_dtype == np.int32 else wp.int64

    def _launch(self, kernel, dim, inputs):
        # Quiet: a first launch of an int64 grid compiles its overloads, which Warp
        # announces at its default log level.
        with wp.ScopedLogLevel(wp.LOG_WARNING):
            wp.launch(kernel, dim, inputs, device=self.device)


class WarpBruteEngine(WarpEngine):
    """Brute force on a Warp device: every point in one cell (`_cpu_engine.BruteEngine`)."""

    one_cell = True


def _host(array: wp.array, out: np.ndarray | None = None) -> np.ndarray:
    """A Warp array's values in a NumPy array of its own (on Warp's CPU device, `numpy`
    gives a view of the Warp array's memory), or copied into ``out`` (the caller's, of
    the same shape and dtype) and ``out`` returned."""
    if out is not None:
        wp.copy(wp.array(out, dtype=array.dtype, device="cpu", copy=False), array)
        return out
    values = array.numpy()
    return values.copy() if array.device.is_cpu else values


def _take_rows(array: wp.array, rows: slice) -> wp.array:
    """A copy of ``array[rows]`` on its device (Warp refuses an empty slice)."""
    if rows.stop <= rows.start:
        return wp.empty((0, *array.shape[1:]), dtype=array.dtype, device=array.device)
    return wp.clone(array[rows])


#: Warp's errors of a kernel it cannot generate: here, a call of ``fn`` that does not type.
_WARP_CODEGEN_ERRORS = (wp.WarpCodegenError, wp.WarpCodegenTypeError,
                        wp.WarpCodegenAttributeError, wp.WarpCodegenIndexError,
                        wp.WarpCodegenKeyError, wp.WarpCodegenValueError)

#: The Warp engines by ``algorithm`` (`_devices.choose_engine`).
ENGINES = {"grid": WarpEngine, "brute": WarpBruteEngine}
