"""Result types: small frozen objects holding plain arrays, indices first, then distances."""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np


def _shape(array: np.ndarray | None) -> str:
    if array is None:
        return "None"
    dtype = array.dtype
    if not isinstance(array, np.ndarray) and isinstance(dtype, type):  # a Warp array's
        dtype = f"warp.{dtype.__name__}"
    return f"{dtype}{list(array.shape)}"


def _kind(array) -> str:
    """The kind of a result's array, for messages: ``"numpy"``, or the library and type
    with the device (``"torch.Tensor on cuda:0"``)."""
    if isinstance(array, np.ndarray):
        return "numpy"
    device = getattr(array, "device", None)
    return f"{type(array).__module__.split('.')[0]}.{type(array).__name__} on {device}"


def _require(result, method: str, *, torch_too: bool = False) -> None:
    """Raise `TypeError` when ``method`` of ``result`` needs NumPy arrays (or, with
    ``torch_too``, PyTorch tensors on any device) and ``result`` holds another kind: a
    grid built on a tensor or a Warp array gives results of that kind
    (``grid/_device_arrays.py``), on which NumPy's functions do not run."""
    array = next(iter(vars(result).values()))
    if isinstance(array, np.ndarray):
        return
    if torch_too and type(array).__module__.split(".")[0] == "torch":
        return
    raise TypeError(
        f"`{type(result).__name__}.{method}` needs NumPy arrays"
        f"{' or PyTorch tensors' if torch_too else ''}; this result holds "
        f"{_kind(array)} arrays (a grid's results have the kind of its points). Build "
        "one from NumPy arrays on the host for it (e.g. `.cpu().numpy()` of a tensor, "
        "`.numpy()` of a Warp array).")


def _sparse():
    try:
        import scipy.sparse
    except ImportError as error:  # scipy is an optional dependency
        raise ImportError("to_scipy() needs scipy: pip install 'spatialhash[scipy]'.") from error
    return scipy.sparse


@dataclass(frozen=True, repr=False)
class Pairs:
    """Pairs of points within a distance of each other.

    Attributes
    ----------
    indices : ndarray of int32 or int64, shape (n_pairs, 2)
        One pair a row. For the pairs of one point set, ``indices[:, 0] < indices[:, 1]``
        and each pair appears once. For the pairs between queries and points, column 0
        indexes the queries and column 1 the grid's points.
    distances : ndarray of float64, shape (n_pairs,), or None
        The distance of each pair, when asked for.
    shape : tuple of int
        ``(n_rows, n_columns)`` of the array the pairs index: ``(n, n)`` for one point set,
        ``(m, n)`` between ``m`` queries and ``n`` points.
    """

    indices: np.ndarray
    distances: np.ndarray | None
    shape: tuple[int, int]

    def __len__(self) -> int:
        return self.indices.shape[0]

    def __repr__(self) -> str:
        return (
            f"Pairs(n_pairs={len(self)}, shape={self.shape}, indices={_shape(self.indices)}, "
            f"distances={_shape(self.distances)})"
        )

    def sorted(self) -> Pairs:
        """The same pairs in lexicographic order of ``(indices[:, 0], indices[:, 1])``.
        NumPy arrays only (a `TypeError` names another kind)."""
        _require(self, "sorted")
        order = np.lexsort((self.indices[:, 1], self.indices[:, 0]))
        distances = None if self.distances is None else self.distances[order]
        # `np.take`: indexing the rows with ``[order]`` took ten times longer (NumPy 2.4,
        # 100,000 rows of two columns).
        return Pairs(np.take(self.indices, order, axis=0), distances, self.shape)

    def to_scipy(self, symmetric: bool = False):
        """The pairs as a ``scipy.sparse.coo_array`` of ``shape``.

        A sparse array, not a sparse matrix: ``*`` multiplies elementwise and ``@`` is the
        matrix product, as for NumPy arrays. Entries hold the distances when they were
        computed, else ones. Explicit zeros (pairs at distance 0) are kept. With
        ``symmetric``, each pair of one point set is also entered as ``(j, i)``. NumPy
        arrays only (a `TypeError` names another kind).
        """
        _require(self, "to_scipy")
        sparse = _sparse()
        rows, columns = self.indices[:, 0], self.indices[:, 1]
        data = np.ones(len(self)) if self.distances is None else self.distances
        if symmetric:
            rows, columns = np.concatenate([rows, columns]), np.concatenate([columns, rows])
            data = np.concatenate([data, data])
        return sparse.coo_array((data, (rows, columns)), shape=self.shape)


@dataclass(frozen=True, repr=False)
class Neighbors:
    """Neighbours of each query in compressed sparse row (CSR) form.

    Row ``q`` is ``indices[indptr[q]:indptr[q + 1]]``. The result is also a sequence of
    its rows, as cKDTree's ``query_ball_point`` returns one list a query: ``result[q]``
    is row ``q`` (a view into ``indices``; negative ``q`` counts from the end), iterating
    yields the rows in order, and ``len(result)`` is the number of queries. An integer
    picks one row; a slice is refused with a `TypeError` (a range of rows is
    ``indices[indptr[a]:indptr[b]]``).

    Attributes
    ----------
    indptr : ndarray of int64, shape (m + 1,)
        Row offsets.
    indices : ndarray of int32 or int64, shape (nnz,)
        Indices into the grid's points.
    distances : ndarray of float64, shape (nnz,), or None
        Distance of each neighbour, when asked for.
    n_points : int
        Number of points in the grid (the number of columns).
    """

    indptr: np.ndarray
    indices: np.ndarray
    distances: np.ndarray | None
    n_points: int

    def __len__(self) -> int:
        return self.indptr.shape[0] - 1

    def __getitem__(self, q: int) -> np.ndarray:
        """Row ``q``, as `row` gives it."""
        return self.row(q)

    def __iter__(self):
        """The rows' index arrays, in query order (views into ``indices``)."""
        _require(self, "__iter__", torch_too=True)
        # Plain ints: slicing with NumPy scalars costs more per row.
        offsets = self.indptr.tolist()
        indices = self.indices
        for start, stop in zip(offsets[:-1], offsets[1:], strict=True):
            yield indices[start:stop]

    def __repr__(self) -> str:
        return (
            f"Neighbors(n_queries={len(self)}, n_neighbors={self.indices.shape[0]}, "
            f"indices={_shape(self.indices)}, distances={_shape(self.distances)})"
        )

    @property
    def counts(self) -> np.ndarray:
        """Number of neighbours of each query, shape (m,), int64."""
        _require(self, "counts", torch_too=True)
        return self.indptr[1:] - self.indptr[:-1]

    def row(self, q: int, return_distances: bool = False):
        """The neighbours of query ``q``.

        Parameters
        ----------
        q : int
            The query; negative ``q`` counts from the end, as in Python.
        return_distances : bool, default False
            Also give the distances of the row; the result must have been computed with
            them (``query_radius(..., return_distances=True)``, or a ray query with
            ``all_hits=True``).

        Returns
        -------
        indices : ndarray of int32 or int64, shape (counts[q],)
            Indices into the grid's points: a view into ``indices``.
        distances : ndarray of float64, shape (counts[q],)
            Only with ``return_distances``: ``(indices, distances)``, both views.

        Raises
        ------
        TypeError
            When ``q`` is not an integer (a slice included).
        IndexError
            When ``q`` is outside ``[-len(self), len(self))``.
        ValueError
            When ``return_distances`` is asked of a result without distances.
        """
        _require(self, "row", torch_too=True)
        m = len(self)
        try:
            position = operator.index(q)
        except TypeError:
            remedy = (" Take rows one at a time; rows a to b are "
                      "`indices[indptr[a]:indptr[b]]`." if isinstance(q, slice) else "")
            raise TypeError(f"`q` must be an integer; got {q!r}.{remedy}") from None
        if not -m <= position < m:
            raise IndexError(f"`q` must be in [{-m}, {m}) for {m} queries; got {position}.")
        position %= m
        start, stop = self.indptr[position], self.indptr[position + 1]
        if not return_distances:
            return self.indices[start:stop]
        if self.distances is None:
            raise ValueError(
                "`return_distances` must be False for a result computed without distances; "
                "got True. Pass `return_distances=True` to the query (`query_radius`); "
                "`query_box` gives no distances.")
        return self.indices[start:stop], self.distances[start:stop]

    def to_pairs(self) -> Pairs:
        """The neighbours as (query, point) pairs. NumPy arrays only (a `TypeError`
        names another kind)."""
        _require(self, "to_pairs")
        queries = np.repeat(np.arange(len(self), dtype=self.indices.dtype), self.counts)
        indices = np.column_stack([queries, self.indices])
        return Pairs(indices, self.distances, (len(self), self.n_points))

    def to_scipy(self):
        """The neighbours as a ``scipy.sparse.csr_array`` of shape (m, n_points).

        A sparse array, not a sparse matrix: ``*`` multiplies elementwise and ``@`` is the
        matrix product. Entries hold the distances when they were computed, else ones;
        explicit zeros (neighbours at distance 0) are kept. NumPy arrays only (a
        `TypeError` names another kind).
        """
        _require(self, "to_scipy")
        sparse = _sparse()
        data = np.ones(self.indices.shape[0]) if self.distances is None else self.distances
        return sparse.csr_array(
            (data, self.indices, self.indptr), shape=(len(self), self.n_points)
        )


@dataclass(frozen=True, repr=False)
class KNearest:
    """The k nearest points of each query, nearest first.

    The attributes name indices first, as every result here does; unpacking follows the
    peers: ``distances, indices = result``, the order of cKDTree's ``query`` and
    scikit-learn's ``kneighbors``. Iterating yields these two arrays, while
    ``len(result)`` stays the number of queries.

    Attributes
    ----------
    indices : ndarray of int32 or int64, shape (m, k)
        Indices into the grid's points; ties in distance are broken by the smaller index.
        Slots beyond ``counts[q]`` hold -1.
    distances : ndarray of float64, shape (m, k)
        Distances; slots beyond ``counts[q]`` hold ``inf``.
    counts : ndarray of int64, shape (m,)
        How many neighbours were found: ``k`` unless the grid holds fewer points or
        ``r_max`` excluded some.
    n_points : int or None, default None
        Number of points in the grid (the number of columns of `to_scipy`); None when
        whoever built the result did not say.
    """

    indices: np.ndarray
    distances: np.ndarray
    counts: np.ndarray
    n_points: int | None = None

    def __len__(self) -> int:
        return self.indices.shape[0]

    def __iter__(self):
        """``distances``, then ``indices``: the order of cKDTree and scikit-learn."""
        return iter((self.distances, self.indices))

    def __repr__(self) -> str:
        if not isinstance(self.counts, np.ndarray):
            return (f"KNearest(n_queries={len(self)}, k={self.indices.shape[1]}, "
                    f"indices={_shape(self.indices)}, distances={_shape(self.distances)})")
        short = int(np.count_nonzero(self.counts < self.indices.shape[1]))
        return (
            f"KNearest(n_queries={len(self)}, k={self.indices.shape[1]}, "
            f"queries_with_fewer_than_k={short})"
        )

    def to_scipy(self, mode: str = "connectivity"):
        """The neighbours as a ``scipy.sparse.csr_array`` of shape (m, n_points).

        The k-nearest graph of scikit-learn's ``kneighbors_graph``, as a sparse array
        rather than its sparse matrix (``*`` multiplies elementwise, ``@`` is the matrix
        product): row ``q`` holds one entry a neighbour, in the order of the neighbours
        (nearest first; call ``sort_indices()`` for column order). Padding slots
        (index -1) are left out, so a row has ``counts[q]`` entries.

        Parameters
        ----------
        mode : {"connectivity", "distance"}, default "connectivity"
            "connectivity": every entry is 1.0. "distance": every entry is the
            neighbour's distance; a neighbour at distance 0 is kept as an explicit zero
            (scipy drops explicit zeros only when asked, by ``eliminate_zeros()``).

        Returns
        -------
        scipy.sparse.csr_array of float64, shape (m, n_points)

        Raises
        ------
        ValueError
            When ``mode`` is neither, or the result does not know ``n_points``.
        """
        _require(self, "to_scipy")
        if mode not in ("connectivity", "distance"):
            raise ValueError(f"`mode` must be 'connectivity' or 'distance'; got {mode!r}.")
        if self.n_points is None:
            raise ValueError(
                "`n_points` must be known to size the graph; got None. Build the result "
                "with `KNearest(indices, distances, counts, n_points=n)`.")
        sparse = _sparse()
        # The mask copies: scipy keeps the arrays it is given, and `sort_indices()` on
        # the graph would otherwise reorder this result's own arrays.
        present = self.indices >= 0
        columns = self.indices[present]
        indptr = np.zeros(len(self) + 1, dtype=np.int64)
        np.cumsum(np.count_nonzero(present, axis=1), out=indptr[1:])
        data = np.ones(columns.shape[0]) if mode == "connectivity" else self.distances[present]
        return sparse.csr_array((data, columns, indptr), shape=(len(self), self.n_points))


@dataclass(frozen=True, repr=False)
class RayHits:
    """The first sphere each ray hits, nearest along the ray.

    Attributes
    ----------
    indices : ndarray of int32 or int64, shape (m,)
        Index of the first point (sphere) each ray hits; ties in distance are broken by
        the smaller index; -1 where the ray hits nothing.
    distances : ndarray of float64, shape (m,)
        Distance along the ray to the hit (0 for a ray starting inside its sphere);
        ``inf`` where the ray hits nothing.
    """

    indices: np.ndarray
    distances: np.ndarray

    def __len__(self) -> int:
        return self.indices.shape[0]

    @property
    def hit(self) -> np.ndarray:
        """Which rays hit something, shape (m,), bool."""
        _require(self, "hit", torch_too=True)
        return self.indices >= 0

    def __repr__(self) -> str:
        if not isinstance(self.indices, np.ndarray):
            return f"RayHits(n_rays={len(self)}, indices={_shape(self.indices)})"
        return f"RayHits(n_rays={len(self)}, n_hit={int(np.count_nonzero(self.hit))})"


@dataclass(frozen=True, repr=False)
class Hits:
    """Objects of a dynamic hash found by a query, in order, with a distance each.

    Attributes
    ----------
    ids : ndarray, shape (n,)
        Ids of the objects: int64 when every id in the hash is an integer, else objects.
    distances : ndarray of float64, shape (n,)
        For `DynamicHash.query_knn`, the distance from the query point, ascending; for
        `DynamicHash.query_ray`, the distance along the ray to where it enters each
        object (0 when the ray starts inside), ascending.
    """

    ids: np.ndarray
    distances: np.ndarray

    def __len__(self) -> int:
        return self.ids.shape[0]

    def __repr__(self) -> str:
        return f"Hits(n={len(self)}, ids={_shape(self.ids)}, distances={_shape(self.distances)})"


@dataclass(frozen=True, repr=False)
class Contacts:
    """Contact events of a dynamic hash: the overlapping pairs that began and those that
    ended between two calls of `DynamicHash.query_contacts`.

    Attributes
    ----------
    began : ndarray, shape (n_began, 2)
        Pairs of ids that overlap now and did not at the previous call.
    ended : ndarray, shape (n_ended, 2)
        Pairs of ids that overlapped at the previous call and do not now (an object
        removed since ends its pairs).

    Both are int64 when every id in the hash, now and at the previous call, is an integer:
    each row holds the smaller id first and the rows are sorted; else object arrays, rows
    in an unspecified order that depends only on the calls made.
    """

    began: np.ndarray
    ended: np.ndarray

    def __repr__(self) -> str:
        return (f"Contacts(n_began={self.began.shape[0]}, n_ended={self.ended.shape[0]}, "
                f"began={_shape(self.began)}, ended={_shape(self.ended)})")
