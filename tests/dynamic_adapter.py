"""`Grid`'s query API answered by a `DynamicHash` of points, for the contract suite
(``test_contract.py``).

`DynamicGrid` inserts the points into a `DynamicHash` with their row numbers as ids
(integer ids: the hash's answers are int64 arrays, sorted ascending, and its ties go to the
smaller id, as `Grid`'s go to the smaller index) and answers each query through it, one
hash query per row of queries:

- `query_radius`, `count_radius`: `DynamicHash.query_radius` (a closed ball, as `Grid`'s),
  one ``r`` per query or one for all;
- `query_knn`: `DynamicHash.query_knn`, its distances; ``r_max`` keeps the hits within it
  (the k nearest within ``r_max`` are the k nearest cut at ``r_max``);
- `query_box`: `DynamicHash.query_box` (a closed box, as `Grid`'s);
- `query_pairs`: the points as spheres of radius ``r / 2`` (or their ``radii``) in a hash
  of their own, whose `DynamicHash.query_pairs` are the overlapping spheres: ``d2 <=
  (r/2 + r/2)**2 = r * r`` (halving is exact), ``d2 <= (ri + rj)**2`` for radii, each pair
  once with the smaller id first (`Grid`'s ``i < j``); pairs with queries are the rows of
  `query_radius`, as `Grid.query_pairs` defines them.

Conversions to `Grid`'s conventions, here rather than in the hash: the ids become indices
of the grid's index dtype (int32 below 2**31 - 1 points); rows are CSR `Neighbors` (the
hash's ids come sorted, so ``sort=False`` rows are sorted too, which the contract allows);
`KNearest` is padded with -1 and ``inf``. A hash reports which objects a query meets, not
their distances, except `query_knn`: the distances of radius rows and pairs are computed
here from the points, ``dx*dx + dy*dy + dz*dz`` over three padded axes, the arithmetic of
the kernels and of ``oracles.py``.

What a `DynamicHash` does not offer, the adapter does not pretend to: periodic boxes
(``box`` raises `NotImplementedError`), chunks of pairs (``iter_pairs``), `Grid`'s checks
of the points at construction, and rays (``query_ray``): the hash casts against spheres
too, but normalizes a direction by another sequence of roundings than `Grid`, so distances
along oblique rays differ from `Grid`'s in the last bit. ``test_contract.py`` names these
in its table of what each engine lacks (``LACKS``), and never runs the tests that need them
on this engine.
"""

from __future__ import annotations

import numpy as np

from spatialhash import DynamicHash, KNearest, Neighbors, Pairs
from spatialhash.grid._build import index_dtype

#: The hash's cell size when the factory is given none.
DEFAULT_CELL_SIZE = 1.0


def as_rows(values, n_dims: int) -> np.ndarray:
    """Query points or box corners as a float64 array of shape (m, n_dims)."""
    array = np.asarray(values, dtype=np.float64)
    return array.reshape(-1, n_dims)


class DynamicGrid:
    """The points of a `Grid`, held and queried by a `DynamicHash`.

    Parameters
    ----------
    points : array_like of float, shape (n, d)
    cell_size : float, optional
        The hash's cell size (`DEFAULT_CELL_SIZE` when None).
    box, periodic : None
        A `DynamicHash` has no periodic box: anything else raises `NotImplementedError`.
    """

    def __init__(self, points, cell_size: float | None = None, *, box=None, periodic=None):
        if box is not None or periodic is not None:
            raise NotImplementedError("a DynamicHash has no periodic box.")
        self._points = np.asarray(points, dtype=np.float64)
        self._n, self._n_dims = self._points.shape
        self._index = index_dtype(self._n)
        self._cell_size = DEFAULT_CELL_SIZE if cell_size is None else cell_size
        self._ids = np.arange(self._n)
        self._hash = self._filled()
        padded = np.zeros((self._n, 3))
        padded[:, : self._n_dims] = self._points
        self._points3 = padded

    def _filled(self, radius=None) -> DynamicHash:
        """A hash of the points (spheres of ``radius`` when given), ids their rows."""
        hash_ = DynamicHash(self._cell_size, self._n_dims, capacity=max(self._n, 1))
        hash_.insert_many(self._ids, self._points, radius=radius)
        return hash_

    def _distances(self, first: np.ndarray, second3: np.ndarray) -> np.ndarray:
        """Distances from the points ``first`` (indices) to the points ``second3`` (rows of
        shape (k, 3)), the kernels' arithmetic."""
        delta = self._points3[first] - second3
        dx, dy, dz = delta[:, 0], delta[:, 1], delta[:, 2]
        return np.sqrt(dx * dx + dy * dy + dz * dz)

    def _rows(self, found: list[np.ndarray], queries3: np.ndarray | None) -> Neighbors:
        """CSR rows of the ids ``found`` per query, with the distances to ``queries3``
        (shape (m, 3)) when given."""
        counts = np.array([len(row) for row in found], dtype=np.int64)
        indptr = np.zeros(len(found) + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        indices = np.concatenate([np.zeros(0, np.int64), *found])
        distances = None
        if queries3 is not None:
            distances = self._distances(indices, np.repeat(queries3, counts, axis=0))
        return Neighbors(indptr, indices.astype(self._index), distances, self._n)

    def query_radius(self, queries, r, *, return_distances: bool = False,
                     sort: bool = True) -> Neighbors:
        """`Grid.query_radius`: one `DynamicHash.query_radius` per query. The hash's ids
        come sorted, so ``sort=False`` changes nothing."""
        queries = as_rows(queries, self._n_dims)
        m = queries.shape[0]
        radii = np.broadcast_to(np.asarray(r, dtype=np.float64), (m,))
        found = [self._hash.query_radius(queries[q], radii[q]) for q in range(m)]
        queries3 = None
        if return_distances:
            queries3 = np.zeros((m, 3))
            queries3[:, : self._n_dims] = queries
        return self._rows(found, queries3)

    def count_radius(self, queries, r) -> np.ndarray:
        """`Grid.count_radius`: the lengths of the rows of `query_radius`."""
        return self.query_radius(queries, r).counts

    def query_knn(self, queries, k: int, *, r_max: float | None = None) -> KNearest:
        """`Grid.query_knn`: one `DynamicHash.query_knn` per query, cut at ``r_max``,
        padded with -1 and ``inf``."""
        queries = as_rows(queries, self._n_dims)
        m = queries.shape[0]
        indices = np.full((m, k), -1, dtype=self._index)
        distances = np.full((m, k), np.inf)
        counts = np.zeros(m, dtype=np.int64)
        for q in range(m):
            hits = self._hash.query_knn(queries[q], k)
            keep = hits.distances.shape[0]
            if r_max is not None:
                keep = int(np.count_nonzero(hits.distances <= r_max))
            indices[q, :keep] = hits.ids[:keep]
            distances[q, :keep] = hits.distances[:keep]
            counts[q] = keep
        return KNearest(indices, distances, counts)

    def query_box(self, lower, upper, *, sort: bool = True) -> Neighbors:
        """`Grid.query_box`: one `DynamicHash.query_box` per box (rows sorted either
        way)."""
        lower, upper = as_rows(lower, self._n_dims), as_rows(upper, self._n_dims)
        found = [self._hash.query_box(lower[q], upper[q]) for q in range(lower.shape[0])]
        return self._rows(found, None)

    def query_pairs(self, r: float | None = None, *, radii=None, queries=None,
                    return_distances: bool = False) -> Pairs:
        """`Grid.query_pairs`: the overlapping spheres of a hash of the points as spheres
        of radius ``r / 2`` (or ``radii``); with ``queries``, the rows of `query_radius`."""
        if queries is not None:
            return self.query_radius(queries, r, return_distances=return_distances).to_pairs()
        if radii is None:
            radius = np.full(self._n, float(r) / 2.0)
        else:
            radius = np.asarray(radii, dtype=np.float64)
        pairs = self._filled(radius).query_pairs()
        distances = None
        if return_distances:
            distances = self._distances(pairs[:, 0], self._points3[pairs[:, 1]])
        return Pairs(pairs.astype(self._index).reshape(-1, 2), distances, (self._n, self._n))
