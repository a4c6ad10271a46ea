"""The engine seam of `Grid`: the interface every engine implements, and the registry
that maps ``Grid(..., algorithm=name)`` to an engine class.

`Grid` validates its inputs into canonical arrays (float64, C-contiguous, padded to three
columns, wrapped into the periodic box), checks what does not depend on the engine (the
reach of a periodic search, the size of a k-nearest result), and hands them to its engine;
the engine owns the arrays of the built grid, runs the kernels and returns the result
objects of ``_results.py``. An engine never validates: what it gets is valid. Results are
the same, byte for byte, for any thread count, and equal to those of the CPU engine
wherever the order of rows is fixed (see ``tests/test_contract.py``, which runs on every
engine).

Adding an engine (a CUDA grid, a Dask grid) is one class implementing `GridEngine` and
one entry in `ENGINES`; `Grid` does not change.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np

from .._results import KNearest, Neighbors, Pairs, RayHits
from ._cpu_engine import BruteEngine, CpuEngine
from ._kernels.state import GridState
from ._pair_search import FoundPairs


class GridEngine(Protocol):
    """What `Grid` asks of an engine: build once, then answer queries.

    Parameters
    ----------
    points3 : ndarray of float64, shape (n, d)
        The points, C-contiguous, d <= 3: either the caller's (n, d) array (open axes,
        writable: not copied; read as (n, 3) with zeros for the missing columns) or an
        (n, 3) copy wrapped into the periodic axes of ``box``. Never written.
    lowest, highest : ndarray of float64, shape (3,)
        Smallest and largest coordinate per axis (zeros for missing axes and no points).
    cell_size : float
        The cell size asked for, > 0.
    box : ndarray of float64, shape (3,)
        Period of each axis; ``inf`` on open axes.
    n_threads : int or None
        Thread count of builds and queries (None: the default, -1: all), as
        `_config.check_n_threads` returns it.

    Attributes
    ----------
    n_points : int
        Number of points.
    n_occupied_cells : int
        Number of cells holding at least one point.
    state : GridState
        The cells, as plain host arrays (`Grid.state`).
    index_dtype : numpy.dtype
        int32 below 2**31 - 1 points, else int64: the dtype of every point index in the
        results.
    """

    n_points: int
    n_occupied_cells: int
    state: GridState
    index_dtype: np.dtype

    def __init__(self, points3: np.ndarray, lowest: np.ndarray, highest: np.ndarray,
                 cell_size: float, box: np.ndarray, n_threads: int | None) -> None: ...

    def own_points(self, n_dims: int) -> np.ndarray:
        """The grid's points in the caller's order as the engine holds them (periodic
        axes wrapped), the queries of ``queries=None``: a new (n, n_dims) float64 array,
        or on the Warp engine (n,) float64 vectors on its device (padded to three axes)."""

    def pairs_of_rows(self, found: Neighbors) -> Pairs:
        """The rows of `query_radius` as (query, point) pairs (`Neighbors.to_pairs`),
        where the engine holds them."""

    def sorted_radii(self, radii: np.ndarray) -> tuple[np.ndarray, float, bool]:
        """Per-point radii prepared for `query_pairs` and `iter_pairs`, in one pass.

        Parameters
        ----------
        radii : ndarray of float64, shape (n,)
            One radius per point in the caller's order, C-contiguous, not yet checked.

        Returns
        -------
        tuple of (ndarray of float64, float, bool)
            The radii in the engine's own point order, the largest (0 for none), and
            whether every radius is finite and >= 0.
        """

    def query_pairs(self, r2: float, radii: np.ndarray, reach: float,
                    return_distances: bool) -> Pairs:
        """Every pair ``i < j`` within ``r`` (``r2 = r * r``) or within ``radii[i] +
        radii[j]``.

        Parameters
        ----------
        r2 : float
            Squared distance; 0 with ``radii``.
        radii : ndarray of float64, shape (n,) or (0,)
            From `sorted_radii`, or empty for one distance.
        reach : float
            Largest distance of a pair: ``r``, or ``2 * max(radii)``.
        return_distances : bool
            Also return each pair's distance.

        Returns
        -------
        Pairs
            Rows in the engine's deterministic order; shape ``(n, n)``.
        """

    def found_pairs(self, r2: float, radii: np.ndarray, reach: float) -> FoundPairs:
        """The pairs of `query_pairs` as the search found them, with the point order and
        the points they refer to: everything a neighbour list (`NeighborList`) takes from
        the grid it builds on, which keeps them as its rows.

        Parameters
        ----------
        r2, radii, reach
            As `query_pairs`.

        Returns
        -------
        FoundPairs
            ``pairs``, shape (m, 2), the index dtype: ``(s, t)``, positions in the
            engine's point order, ``s`` the point whose search met ``t``, each pair of
            `query_pairs` once, grouped by ``s`` in increasing order. ``order``, shape
            (n,), the index dtype: the caller's index of the point at each position.
            ``points``, shape (n, 3), float64, C-contiguous: the point at each position as
            the engine holds it (wrapped into the periodic box, zeros on padded axes), a
            new array the caller may write. ``slabs``, shape (n_slabs, 2), int64, or None:
            ranges of positions (first, one past the last) cut so that every pair's ``t``
            lies in the range of its ``s`` or in the next one along the grid (the last
            one's next being the first), listed every other one first, then the rest:
            the ranges of each half may be scanned at once, writing the rows of both
            points of a pair (the slabs of ``_pair_functions.slab_plan``); None where the
            grid has none.

        Notes
        -----
        Positions rather than the caller's indices: a list keeps its points in this
        order, so that the points of a row, found in nearby cells, lie near each other in
        memory.
        """

    def iter_pairs(self, r2: float, radii: np.ndarray, reach: float, chunk_size: int,
                   return_distances: bool) -> Iterator[Pairs]:
        """The pairs of `query_pairs`, in its order, as chunks of at most ``chunk_size``
        pairs (or the pairs found from one cell). A generator: nothing runs before the
        first ``next()``, and no thread setting is held across a ``yield``. Each chunk
        owns its arrays.
        """

    def for_each_pair(self, r2: float, radii: np.ndarray, reach: float, fn,
                      args: tuple, once: bool = False) -> None:
        """Call ``fn(i, j, d2, dx, dy, dz, *args)`` for every ordered pair ``(i, j)``,
        ``i != j``, of the pairs of `query_pairs` (each unordered pair twice), or with
        ``once`` for each unordered pair in one of its orders.

        Parameters
        ----------
        r2, radii, reach
            As in `query_pairs`.
        fn : numba dispatcher
            The caller's compiled function (checked to be one; its signature is not).
        args : tuple
            Passed to ``fn`` after the pair's values.
        once : bool
            Each pair once; ``fn`` may then write rows ``i`` and ``j``.

        Notes
        -----
        ``i`` and ``j`` are the caller's indices (int64); ``d2`` the squared distance, with
        the arithmetic of `query_pairs` (the same pairs, the same ``d2``); ``dx, dy, dz``
        ``points[i] - points[j]`` with the minimum image on periodic axes (0 on padded
        axes), those of ``(j, i)`` being their negation. The calls that write each row
        come in an order that does not depend on the thread count, and no two threads
        write one row at a time.
        Typing ``fn`` with those arguments fails with a `TypeError`; an exception raised
        by ``fn`` is raised again here, with its type and message.
        """

    def for_each_neighbor(self, query_points: np.ndarray, radii: np.ndarray, fn,
                          args: tuple) -> None:
        """Call ``fn(q, j, d2, dx, dy, dz, *args)`` for every point ``j`` within
        ``radii[q]`` of each query ``q``: the rows of `query_radius`, ``(dx, dy, dz)`` being
        ``query_points[q] - points[j]``. Arguments as in `query_radius` and
        `for_each_pair`, with the same promises (one thread per query, a fixed order of
        ``j``, errors).
        """

    def query_radius(self, query_points: np.ndarray, radii: np.ndarray,
                     return_distances: bool, sort: bool) -> Neighbors:
        """Every point within ``radii[q]`` of each query.

        Parameters
        ----------
        query_points : ndarray of float64, shape (m, 3)
            C-contiguous, wrapped into the periodic box.
        radii : ndarray of float64, shape (m,)
            One radius per query, finite and >= 0.
        return_distances, sort : bool
            As in `Grid.query_radius`.

        Returns
        -------
        Neighbors
            CSR rows, one per query; unsorted rows in the engine's deterministic order.
        """

    def count_radius(self, query_points: np.ndarray, radii: np.ndarray,
                     out: np.ndarray | None = None) -> np.ndarray:
        """The row lengths of `query_radius`, int64, shape (m,): written into ``out`` and
        returned where it is given (checked by `_inputs.count_out`)."""

    def query_knn(self, query_points: np.ndarray, k: int, limit: float,
                  out: tuple[np.ndarray, np.ndarray] | None = None) -> KNearest:
        """The ``k`` nearest points within ``limit`` (``inf``: no limit) of each query.

        ``query_points`` are as in `query_radius`; ``k >= 1``, and the (m, k) result's
        size was checked. ``out``, where given, is the pair ``(indices, distances)`` the
        result holds, written in place (checked by `_inputs.knn_out`). Raises
        ``MemoryError`` when the result cannot be allocated.
        """

    def query_box(self, lower3: np.ndarray, upper3: np.ndarray, width: np.ndarray,
                  sort: bool) -> Neighbors:
        """Every point in each closed box.

        Parameters
        ----------
        lower3 : ndarray of float64, shape (m, 3)
            Lower corners, wrapped into the periodic box.
        upper3 : ndarray of float64, shape (m, 3)
            Upper corners, not wrapped.
        width : ndarray of float64, shape (m, 3)
            ``upper - lower`` before wrapping (may be ``inf``).
        sort : bool
            Sort each row by point index.
        """

    def query_ray(self, origins3: np.ndarray, units3: np.ndarray, radii: np.ndarray,
                  limit: np.ndarray, all_hits: bool, fn=None,
                  args: tuple = ()) -> RayHits | Neighbors:
        """Rays against the points taken as spheres (open grids only).

        Parameters
        ----------
        origins3, units3 : ndarray of float64, shape (m, 3)
            Origins and unit directions.
        radii : ndarray of float64, shape (n,)
            Sphere radii in the caller's point order, finite and >= 0.
        limit : ndarray of float64, shape (m,)
            Largest hit distance per ray (``inf``: none); may be the caller's read-only
            array.
        all_hits : bool
            Every hit (`Neighbors`) rather than the first (`RayHits`); False with ``fn``.
        fn : numba dispatcher, optional
            The caller's compiled function, checked to be one that returns a bool for
            ``fn(ray, index, distance, *args)``, ``ray`` and ``index`` int64 (the caller's
            ray and point), ``distance`` float64. Offered each ray's hits in the order of
            its `all_hits` row, up to the first it accepts (returns True), which is the
            ray's `RayHits` entry; one thread calls ``fn`` for a ray's hits, in that order,
            for any thread count. An exception raised by ``fn`` is raised again here.
        args : tuple
            Passed to ``fn`` after the hit's values.
        """


#: The engines `Grid` can run, by the name ``algorithm`` gives (``"auto"`` picks one of
#: these two by the point count).
ENGINES: dict[str, type[GridEngine]] = {
    "grid": CpuEngine,
    "brute": BruteEngine,
}
