"""`Grid`'s query API answered by the Dask engine (`spatialhash.dask`), for the contract
suite (``test_contract.py``).

`DaskGrid` holds the points; each query hands them to the Dask engine as a dask array of
three chunks (a dask DataFrame of three partitions, with a radius column, for per-point
radii) with a tile target that cuts even a handful of points into two tiles or more
(``Plan.rows_per_tile``), so that ghosts and tile edges take part in the answers. The query
runs on Dask's synchronous scheduler (one thread, no cluster), and its rows (``i, j[, d]``,
``q, i[, d]`` or ``q, rank, i, d``: int64 global row numbers) become `Grid`'s result types
with `Grid`'s conventions: indices in the grid's index dtype (int32 below 2**31 - 1
points), ``indptr`` and counts in int64, the rows of `Neighbors` sorted by index unless
``sort=False``, `KNearest` padded with -1 and ``inf``.

What the Dask engine does not offer, the adapter does not pretend to: it has no
``iter_pairs``, ``query_box`` or ``query_ray``, and refuses a radius per query
(`NotImplementedError`). ``test_contract.py`` names these in its table of what each
engine lacks (``LACKS``), and never runs the tests that need them on this engine.
"""

from __future__ import annotations

import math

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd

import spatialhash.dask as sd
from spatialhash import KNearest, Neighbors, Pairs
from spatialhash.grid._build import index_dtype

#: Chunks of the dask arrays the points and queries become.
N_CHUNKS = 3


def rows_per_tile(n: int, spread: np.ndarray, reach: float) -> int:
    """A target of rows per tile that cuts ``n`` points spread over ``spread`` (per axis)
    into about two tiles for a search of ``reach`` (more in a small periodic box, where
    the images of points are ghosts too).

    The planner counts a tile's ghosts too (the points within the reach of its sides,
    estimated as if its density went on beyond them), so a target that is a fixed share
    of ``n`` gives one tile for a short reach and a hundred for a long one (300 points in
    3-D, a reach of a fifth of their spread: ~190 tiles at ``n // 5``), and each tile
    costs a Dask query some 5 ms. Two thirds of what the planner counts for the whole
    set, ghosts included, makes it cut once, at times twice.
    """
    held = float(n)
    if reach > 0:
        held *= float(np.prod(1.0 + 2.0 * reach / np.maximum(spread, reach)))
    return max(1, int(held / 1.5))


def periods(box, periodic, n_dims: int) -> np.ndarray:
    """The period of each axis, ``inf`` on open ones, as `Grid` reads ``box`` and
    ``periodic``."""
    if box is None:
        return np.full(n_dims, np.inf)
    lengths = np.broadcast_to(np.asarray(box, dtype=np.float64), (n_dims,))
    flags = np.broadcast_to(np.asarray(True if periodic is None else periodic), (n_dims,))
    return np.where(flags, lengths, np.inf)


def as_chunked(array: np.ndarray):
    """``array`` (n, d) as a dask array of about `N_CHUNKS` chunks of rows."""
    return da.from_array(array, chunks=(max(1, -(-len(array) // N_CHUNKS)), array.shape[1]))


class DaskGrid:
    """The points of a `Grid`, queried through `spatialhash.dask`.

    ``cell_size`` is accepted for the factory's signature and ignored: the Dask engine
    chooses its tiles from the points and builds each tile's grid with the search's reach
    as its cell size.
    """

    def __init__(self, points, cell_size: float | None = None, *, box=None, periodic=None):
        self._points = np.asarray(points)
        self._n, n_dims = self._points.shape
        self._index = index_dtype(self._n)
        self._box = {"box": box, "periodic": periodic}
        # The spread the planner sees: coordinates wrapped into the box on periodic axes.
        self._periods = periods(box, periodic, n_dims)
        coords = self._points.astype(np.float64)
        for axis in np.flatnonzero(np.isfinite(self._periods)):
            coords[:, axis] %= self._periods[axis]
        self._spread = np.ptp(coords, axis=0) if self._n else np.zeros(n_dims)

    def _options(self, reach: float) -> dict:
        """The box, and a plan with a tile target for a search of ``reach``."""
        plan = sd.Plan(rows_per_tile=rows_per_tile(self._n, self._spread, reach))
        return {**self._box, "plan": plan}

    def _knn_reach(self, k: int, r_max: float | None) -> float:
        """About the halo of the Dask engine's k-nearest tiles: 1.5 times the k-th
        neighbour distance of a uniform density over the spread (a period on periodic
        axes), at most ``r_max``."""
        n, n_dims = self._points.shape
        if n == 0:
            return 0.0
        extent = np.where(np.isfinite(self._periods), self._periods, self._spread)
        volume = float(np.prod(np.maximum(extent, 1e-300)))
        unit_ball = math.pi ** (n_dims / 2) / math.gamma(n_dims / 2 + 1)
        halo = 1.5 * (k * volume / (n * unit_ball)) ** (1.0 / n_dims)
        return halo if r_max is None else min(halo, r_max)

    def _coords(self):
        return as_chunked(self._points)

    def _queries(self, queries):
        return as_chunked(np.asarray(queries))

    def query_pairs(self, r: float | None = None, *, radii=None, queries=None,
                    return_distances: bool = False) -> Pairs:
        """`Grid.query_pairs`: pairs among the points (within ``r``, or in contact with
        per-point ``radii``), or between ``queries`` and the points (`query_radius`'s
        rows)."""
        if queries is not None:
            if radii is not None:
                raise TypeError("`radii` applies to pairs among the points, not with `queries`.")
            near = self.query_radius(queries, r, return_distances=return_distances,
                                     sort=False)
            return near.to_pairs()
        with dask.config.set(scheduler="sync"):
            if radii is None:
                frame = sd.query_pairs(self._coords(), r, return_distances=return_distances,
                                       **self._options(r))
            else:
                reach = 2.0 * float(np.max(radii, initial=0.0))
                frame = sd.query_pairs(self._table(radii), radii_column="radius",
                                       columns=self._columns(),
                                       return_distances=return_distances,
                                       **self._options(reach))
        indices = np.column_stack([frame["i"].to_numpy(), frame["j"].to_numpy()])
        distances = frame["distance"].to_numpy() if return_distances else None
        return Pairs(indices.astype(self._index).reshape(-1, 2), distances, (self._n, self._n))

    def _columns(self) -> list[str]:
        return [f"x{axis}" for axis in range(self._points.shape[1])]

    def _table(self, radii):
        """The points and their radii as a dask DataFrame of `N_CHUNKS` partitions."""
        columns = dict(zip(self._columns(), self._points.T, strict=True))
        table = pd.DataFrame({**columns, "radius": np.asarray(radii)})
        return dd.from_pandas(table, npartitions=N_CHUNKS, sort=False)

    def query_radius(self, queries, r, *, return_distances: bool = False,
                     sort: bool = True) -> Neighbors:
        """`Grid.query_radius` with one ``r`` for all queries: CSR rows by query, each
        sorted by index unless ``sort=False`` (then in the engine's order)."""
        if np.ndim(r) != 0:
            raise NotImplementedError("the Dask engine takes one `r` for all queries.")
        m = len(queries)
        with dask.config.set(scheduler="sync"):
            frame = sd.query_radius(self._coords(), self._queries(queries), r,
                                    return_distances=return_distances,
                                    **self._options(r))
        q = frame["query"].to_numpy()
        order = (np.lexsort((frame["point"].to_numpy(), q)) if sort
                 else np.argsort(q, kind="stable"))
        indptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(np.bincount(q, minlength=m), out=indptr[1:])
        indices = frame["point"].to_numpy()[order].astype(self._index)
        distances = frame["distance"].to_numpy()[order] if return_distances else None
        return Neighbors(indptr, indices, distances, self._n)

    def count_radius(self, queries, r) -> np.ndarray:
        """`Grid.count_radius`, derived here from the rows of `query_radius`: the Dask
        engine has no count of its own."""
        return self.query_radius(queries, r).counts

    def query_knn(self, queries, k: int, *, r_max: float | None = None) -> KNearest:
        """`Grid.query_knn`: (m, k) indices and distances padded with -1 and ``inf``."""
        m = len(queries)
        with dask.config.set(scheduler="sync"):
            frame = sd.query_knn(self._coords(), self._queries(queries), k, r_max=r_max,
                                 **self._options(self._knn_reach(k, r_max)))
        q, rank = frame["query"].to_numpy(), frame["rank"].to_numpy()
        indices = np.full((m, k), -1, dtype=self._index)
        distances = np.full((m, k), np.inf)
        indices[q, rank] = frame["point"].to_numpy()
        distances[q, rank] = frame["distance"].to_numpy()
        return KNearest(indices, distances, np.bincount(q, minlength=m).astype(np.int64))
