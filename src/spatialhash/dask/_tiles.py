"""The work of one tile: rows tagged with their tiles, then the CPU engine on each tile.

Tagging turns a block into rows ``tile, row, home, x0[, x1, x2][, radius][, id]``, one per
membership of a point (`TilePlan.memberships`), and one per query at its home tile
(``kind`` tells points from queries). After the shuffle a tile's rows are sorted by their
global row number, so local indices run in the order of global ones: a local pair
``a < b`` is a global pair ``row[a] < row[b]``, and the grid's ties by the smaller local
index are ties by the smaller global index.

Each pair is kept in one tile only, the home of its lower global index: a decision on
indices, never on coordinates, so no pair is lost or doubled by rounding. Each query is
answered in its home tile only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..grid import Grid
from ._plan import TilePlan, padded

POINT, QUERY = 0, 1
#: The columns of the rows a user sees, named as the command line names them without
#: ``--dask``: a pair's ``i, j``, a radius query's ``query, point``, a k-nearest query's
#: ``query, rank, point, distance``, and the ``distance`` the first two may add.
PAIR_COLUMNS = ("i", "j")
RADIUS_COLUMNS = ("query", "point")
KNN_COLUMNS = ("query", "rank", "point", "distance")
DISTANCE_COLUMN = "distance"


@dataclass(frozen=True)
class Geometry:
    """What every tile needs to build its grid: dimension, box and periodic flags as
    `Grid` takes them (``box`` None when open)."""

    n_dims: int
    box: np.ndarray | None
    periodic: np.ndarray | None


def coordinate_names(n_dims: int) -> list[str]:
    return [f"x{axis}" for axis in range(n_dims)]


def tagged_meta(n_dims: int, radii: bool, ids: bool) -> pd.DataFrame:
    """The empty frame of tagged rows (dask's ``meta``)."""
    columns = {"tile": np.int64, "row": np.int64, "home": np.bool_, "kind": np.int8}
    columns.update({name: np.float64 for name in coordinate_names(n_dims)})
    if radii:
        columns["radius"] = np.float64
    if ids:
        columns["id"] = np.int64
    return pd.DataFrame({name: np.zeros(0, dtype) for name, dtype in columns.items()})


def tag_block(block, offset: int, plan: TilePlan, margin, kind: int) -> pd.DataFrame:
    """Rows of one block with their tiles: every membership of a point (home and ghosts,
    with ``margin``), or the home tile of a query (``margin`` None)."""
    points3 = padded(block.coords, plan.box)
    if margin is None:
        rows = np.arange(points3.shape[0])
        tiles = plan.home(points3)
        home = np.ones(rows.size, dtype=bool)
    else:
        rows, tiles = plan.memberships(points3, margin)
        home = plan.home(points3)[rows] == tiles
    columns = {"tile": tiles, "row": rows + offset, "home": home,
               "kind": np.full(rows.size, kind, dtype=np.int8)}
    for axis, name in enumerate(coordinate_names(block.coords.shape[1])):
        columns[name] = block.coords[rows, axis]
    if block.radii is not None:
        columns["radius"] = block.radii[rows]
    if block.ids is not None:
        columns["id"] = block.ids[rows]
    return pd.DataFrame(columns)


@dataclass
class TileRows:
    """One kind of rows of a tile, sorted by global row number."""

    rows: np.ndarray
    coords: np.ndarray
    home: np.ndarray
    radii: np.ndarray | None
    ids: np.ndarray | None

    @classmethod
    def of(cls, frame: pd.DataFrame, kind: int, n_dims: int) -> TileRows:
        part = frame[frame["kind"].to_numpy() == kind]
        rows = part["row"].to_numpy()
        order = np.argsort(rows, kind="stable")
        coords = part[coordinate_names(n_dims)].to_numpy(dtype=np.float64)[order]
        radii = part["radius"].to_numpy()[order] if "radius" in part else None
        ids = part["id"].to_numpy()[order] if "id" in part else None
        return cls(rows[order], coords, part["home"].to_numpy()[order], radii, ids)

    def labels(self, local: np.ndarray) -> np.ndarray:
        """Global row numbers, or the user's ids, of local indices."""
        return (self.rows if self.ids is None else self.ids)[local]


def tile_grid(points: TileRows, geometry: Geometry, reach: float,
              n_threads: int | None) -> Grid:
    cell_size = reach if reach > 0 else None
    return Grid(points.coords, cell_size=cell_size, box=geometry.box,
                periodic=geometry.periodic, n_threads=n_threads)


def tile_pairs(frame: pd.DataFrame, geometry: Geometry, r: float | None,
               return_distances: bool, chunk_rows: int,
               n_threads: int | None) -> Iterator[list[np.ndarray]]:
    """The pairs kept in this tile, as column lists ``[i, j(, distance)]``, in chunks."""
    points = TileRows.of(frame, POINT, geometry.n_dims)
    if points.rows.size < 2 or not points.home.any():
        return
    if r is None:
        reach = 2.0 * float(points.radii.max())
        radii = points.radii
    else:
        reach, radii = r, None
    grid = tile_grid(points, geometry, reach, n_threads)
    for chunk in grid.iter_pairs(r, radii=radii, chunk_size=chunk_rows,
                                 return_distances=return_distances):
        lower, higher = chunk.indices[:, 0], chunk.indices[:, 1]
        keep = points.home[lower]  # the home of the lower global index keeps the pair
        columns = [points.labels(lower[keep]), points.labels(higher[keep])]
        if return_distances:
            columns.append(chunk.distances[keep])
        if columns[0].size:
            yield columns


def tile_neighbors(frame: pd.DataFrame, geometry: Geometry, r: float,
                   return_distances: bool, query_block: int,
                   n_threads: int | None) -> Iterator[list[np.ndarray]]:
    """Rows ``[query, point(, distance)]`` for the queries at home in this tile, by query
    then point."""
    points = TileRows.of(frame, POINT, geometry.n_dims)
    queries = TileRows.of(frame, QUERY, geometry.n_dims)
    if queries.rows.size == 0 or points.rows.size == 0:
        return
    grid = tile_grid(points, geometry, r, n_threads)
    for start in range(0, queries.rows.size, query_block):
        block = slice(start, start + query_block)
        found = grid.query_radius(queries.coords[block], r,
                                  return_distances=return_distances)
        counts = np.diff(found.indptr)
        columns = [np.repeat(queries.labels(np.arange(block.start, block.start + counts.size)),
                             counts), points.labels(found.indices)]
        if return_distances:
            columns.append(found.distances)
        if columns[0].size:
            yield columns
