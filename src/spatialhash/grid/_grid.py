"""`Grid`, the public class of the batch grid: it validates its inputs into canonical
arrays, picks the engine named by ``algorithm`` and ``device`` (`_devices`), calls it, and
returns its result. The engines own the arrays and run the kernels (``_cpu_engine.py``,
``_pair_search.py``); the design is described in ``grid/__init__.py``. Queries of the
grid's own points, each left out of its own row, are put together in ``_self_exclusion.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from .. import _config
from .._results import KNearest, Neighbors, Pairs
from .._validation import as_box, as_count, as_positive_scalar
from ._device_arrays import Boundary, grid_device
from ._devices import choose_engine
from ._grid_functions import FunctionQueries
from ._grid_rays import RayQueries
from ._inputs import (
    box_inputs,
    canonical_queries,
    check_knn_size,
    count_out,
    knn_out,
    pair_search_inputs,
    radius_inputs,
)
from ._self_exclusion import (
    counts_without_self,
    knn_without_self,
    own_queries,
    radius_without_self,
)

if TYPE_CHECKING:
    from ._kernels.state import GridState
    from ._pair_search import FoundPairs


class Grid(FunctionQueries, RayQueries):
    """A spatial hash grid over a fixed set of points, built once and queried many times.

    Parameters
    ----------
    points : array_like of float, shape (n, d)
        Coordinates, d = 1, 2 or 3, within +-1e150 (squared distances of larger ones
        overflow float64). Any real dtype is accepted and converted to float64 once; the
        array is never modified. A PyTorch tensor, a Warp array, or another library's
        CUDA array (CuPy, JAX: DLPack or the CUDA array interface) is read where it lies,
        and the results are of its kind (``docs/gpu.md``, "Arrays of other libraries").
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
        Results are the same for any thread count. The CPU engine's only.
    device : {"cpu", "cuda", "cuda:N", "warp-cpu"}, optional
        Where the grid is built and queried: ``"cpu"``, the numba engine; ``"cuda"``
        (``"cuda:N"``: GPU N), the Warp engine on a GPU (the ``gpu`` extra, NVIDIA Warp);
        ``"warp-cpu"``, the Warp engine's kernels compiled for the CPU, to run them where
        there is no GPU (slower than ``"cpu"``). Default: where ``points`` lie, ``"cpu"``
        for host memory and ``"cuda:N"`` for points on GPU N. Points on a GPU with
        ``device="cpu"`` (or another device) raise `TypeError`: they are not copied
        without asking. Same answers on every device, and every query on each; a user's
        ``fn`` is a Warp function (``@wp.func``) on the Warp engine.

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

    def __init__(self, points, cell_size: float | None = None, *, box=None, periodic=None,
                 algorithm: str = "auto", n_threads: int | None = None,
                 device: str | None = None) -> None:
        device = grid_device(device, points)
        # The caller's kind of array: the points read where they lie, results given back.
        self._io = Boundary.of(points, device)
        coords = self._io.points(points)
        n, n_dims = coords.shape
        self._n_dims = n_dims
        self._n_points = n
        self._box, self._periodic = as_box(box, periodic, n_dims)
        n_threads = _config.check_n_threads(n_threads)
        self._algorithm, engine = choose_engine(algorithm, device, n)
        self._device = device
        # One pass for the finiteness check and the bounds (the spread check, the default
        # cell size and the origin), and the copy where one is made (`grid_points`).
        points3, lowest, highest = self._io.grid_points(coords, self._box)
        if cell_size is None:
            cell_size = self._io.default_cell_size(points3, lowest, highest, self._box, n_dims)
        self._cell_size = as_positive_scalar(cell_size, "cell_size")
        self._engine = engine(points3, lowest, highest, self._cell_size, self._box, n_threads)

    @property
    def n_points(self) -> int:
        """Number of points."""
        return self._n_points

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
        return self._engine.n_occupied_cells

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

    @property
    def device(self) -> str:
        """Where the grid runs: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"warp-cpu"``."""
        return self._device

    @property
    def state(self) -> GridState:
        """The engine's cells: a `GridState` of plain arrays (see ``_kernels/state.py``)."""
        return self._engine.state

    def __repr__(self) -> str:
        box = "" if self.box is None else f", box={self.box.tolist()}"
        box += "" if self._device == "cpu" else f", device={self._device!r}"
        return (
            f"Grid(n_points={self.n_points}, n_dims={self.n_dims}, cell_size={self.cell_size}"
            f"{box}, algorithm={self.algorithm!r}, n_occupied_cells={self.n_occupied_cells})"
        )

    def query_pairs(self, r: float | None = None, *, radii=None, queries=None,
                    return_distances: bool = False) -> Pairs:
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
            found = self._radius(queries, r, return_distances, False, False)
            return self._io.results(self._engine.pairs_of_rows(found))
        r2, radii_sorted, reach = self._pair_inputs(r, radii)
        return self._io.results(self._engine.query_pairs(r2, radii_sorted, reach,
                                                         return_distances))

    def _pair_inputs(self, r, radii) -> tuple[float, np.ndarray, float]:
        """``(r2, radii, reach)`` of a pair search, validated (`pair_search_inputs`)."""
        return pair_search_inputs(self._engine, self._n_points, self._box, self._periodic,
                                  r, self._io.values(radii, "radii", self._n_points))

    def _found_pairs(self, r: float | None = None, radii=None) -> FoundPairs:
        """The pairs of ``query_pairs(r)`` (or ``query_pairs(radii=radii)``) as the
        engine's search found them, with the point order and the points they refer to
        (`GridEngine.found_pairs`): the rows a neighbour list keeps
        (``spatialhash/neighbors``), which builds on nothing else of the grid."""
        return self._engine.found_pairs(*self._pair_inputs(r, radii))

    def iter_pairs(self, r: float | None = None, *, radii=None, chunk_size: int = 1 << 22,
                   return_distances: bool = False) -> Iterator[Pairs]:
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
        r2, radii_sorted, reach = self._pair_inputs(r, radii)
        return map(self._io.results, self._engine.iter_pairs(r2, radii_sorted, reach,
                                                             chunk_size, return_distances))

    def query_radius(self, queries, r, *, return_distances: bool = False,
                     sort: bool = True, exclude_self: bool = False) -> Neighbors:
        """For each query point, every point within distance ``r``.

        Parameters
        ----------
        queries : array_like of float, shape (m, d), or None
            Query positions; None queries the grid's own points (m = n), as it holds them.
        r : float or array_like of float, shape (m,)
            Radius, one for all queries or one per query; ``distance <= r`` is a match.
        return_distances : bool, default False
            Also return the distance of each neighbour.
        sort : bool, default True
            Sort each row by point index (as ``cKDTree.query_ball_point(...,
            return_sorted=True)``). Unsorted rows come out in cell order, deterministic.
        exclude_self : bool, default False
            With ``queries=None``, leave each point out of its own row, by index: a
            duplicate point at distance 0 stays (scikit-learn's ``radius_neighbors()``
            without ``X``). A `TypeError` with ``queries`` given.

        Returns
        -------
        Neighbors
            CSR rows: ``indptr`` (int64, shape (m + 1,)), ``indices``, ``distances``.
        """
        return self._io.results(self._radius(queries, r, return_distances, sort,
                                             exclude_self))

    def _radius(self, queries, r, return_distances, sort, exclude_self) -> Neighbors:
        """`query_radius` as the engine answers it (on its device)."""
        queries, exclude_self = self._queries(queries, exclude_self)
        query_points, radii = radius_inputs(queries, r, self._n_dims, self._box,
                                            self._periodic, self._io)
        found = self._engine.query_radius(query_points, radii, return_distances, sort)
        return radius_without_self(self._engine, found) if exclude_self else found

    def _queries(self, queries, exclude_self):
        """The queries of a radius or k-nearest query as `canonical_queries` takes them
        (the caller's through `Boundary.queries`, or for None the grid's own points,
        `own_queries`), and whether each point leaves out its own row."""
        own = queries is None
        queries, exclude_self = own_queries(self._engine, self._n_dims, queries,
                                            exclude_self)
        return (queries if own else self._io.queries(queries, self._n_dims, self._box),
                exclude_self)

    def count_radius(self, queries, r, *, exclude_self: bool = False,
                     out: np.ndarray | None = None) -> np.ndarray:
        """Number of points within ``r`` of each query, shape (m,), int64.

        Parameters are as in `query_radius` (with ``exclude_self``, one less: each point
        lies within ``r`` of itself); nothing but the counts is stored. ``out``, an int64
        array of shape (m,), C-contiguous, writeable and sharing no memory with the
        inputs or the grid, receives the counts and is returned: a loop that passes the
        same array each call takes no new memory for them (on a grid built on NumPy
        points: a grid on tensors or device arrays answers in their kind, and refuses it).
        """
        queries, exclude_self = self._queries(queries, exclude_self)
        query_points, radii = radius_inputs(queries, r, self._n_dims, self._box,
                                            self._periodic, self._io)
        counts = self._engine.count_radius(query_points, radii, count_out(
            out, query_points, {"queries": queries, "r": r}, self._engine, self._io.kind))
        if exclude_self:
            counts = counts_without_self(self._engine, counts)
        return self._io.results(counts)

    def query_knn(self, queries, k: int, *, r_max: float | None = None,
                  exclude_self: bool = False, out=None) -> KNearest:
        """The ``k`` nearest points of each query, nearest first, exact.

        Parameters
        ----------
        queries : array_like of float, shape (m, d), or None
            Query positions; None queries the grid's own points (m = n), as it holds them.
        k : int
            Neighbours wanted per query, >= 1.
        r_max : float, optional
            Only points with ``distance <= r_max`` count (default: no limit). This is
            cKDTree's ``distance_upper_bound`` made closed: cKDTree counts only ``distance
            < distance_upper_bound``, so a point at exactly ``r_max`` is found here and not
            there; empty slots hold -1 here where cKDTree puts ``n`` (the number of
            points), ``inf`` in both.
        exclude_self : bool, default False
            With ``queries=None``, the ``k`` nearest other points of each point: its own
            index is left out, not the points at distance 0 (scikit-learn's
            ``kneighbors()`` without ``X``). A `TypeError` with ``queries`` given.
        out : (ndarray, ndarray), optional
            Arrays to write ``indices`` and ``distances`` into, and return in the result:
            shape (m, k), of the grid's index dtype (that of ``indices``; int32 below
            2**31 points) and float64, C-contiguous, writeable, sharing no memory with each
            other, the inputs or the grid. A loop that passes the same pair each call takes
            no new memory for the answer (``counts`` is new each call). On a grid built
            on NumPy points only, as for `count_radius`.

        Returns
        -------
        KNearest
            ``indices`` and ``distances`` of shape (m, k), ties broken by the smaller
            index, and ``counts``: fewer than ``k`` when the grid holds fewer points or
            ``r_max`` excludes them, in which case the remaining slots hold -1 and
            ``inf``.
        """
        queries, exclude_self = self._queries(queries, exclude_self)
        query_points = canonical_queries(queries, self._n_dims, self._box)
        k = as_count(k, "k")
        limit = np.inf if r_max is None else as_positive_scalar(
            r_max, "r_max", allow_zero=True, allow_inf=True)
        out = knn_out(out, query_points, k, {"queries": queries}, self._engine,
                      self._io.kind)
        if exclude_self:
            return self._io.results(knn_without_self(self._engine, query_points, k, limit,
                                                     out))
        check_knn_size(query_points.shape[0], k, self._n_points)
        return self._io.results(self._engine.query_knn(query_points, k, limit, out))

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
        return self._io.results(self._engine.query_box(
            *box_inputs(lower, upper, self._n_dims, self._box, self._io), sort))
