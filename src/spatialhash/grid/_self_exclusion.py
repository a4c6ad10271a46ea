"""Queries of a `Grid`'s own points with each point left out of its own row
(``queries=None, exclude_self=True``), scikit-learn's ``kneighbors()`` and
``radius_neighbors()`` without ``X``.

Everything here runs above the engine, in NumPy, on the engine's ordinary results: no
kernel of its own and no new specialization of one (the queries are float64 arrays
through `canonical_queries`, as any caller's). The Warp engine's results, on its device,
are taken apart there, by its passes of the same rules (``_warp_kernels/rows.py``). A
point is left out by its index, not by its distance, so a duplicate point at distance 0
stays in the row, as in scikit-learn.

- k nearest: the engine searches ``k + 1``. Each point is at distance 0 from itself,
  within any ``r_max``, so its row holds its own index unless ``k + 1`` points at distance
  0 with smaller indices (duplicates: ties go to the smaller index) fill the row before
  it. Where the own index is in the row it is removed; where it is not, the row is
  ``k + 1`` points that all rank before it, and the first ``k`` are the answer. Either
  way the row is the first ``k`` of the ranking of the other points.
- Radius: each point lies within any ``r >= 0`` of itself, so each row holds its own
  index once; it is removed with its distance, the others keep their order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._results import KNearest, Neighbors
from ._inputs import check_knn_size

if TYPE_CHECKING:
    from ._engine import GridEngine


def own_queries(engine: GridEngine, n_dims: int, queries, exclude_self):
    """The queries of a query that may name the grid's own points, and whether to leave
    each point out of its own row.

    Parameters
    ----------
    engine : GridEngine
        The grid's engine, which gives its own points (`GridEngine.own_points`).
    n_dims : int
        Dimension of the grid's points.
    queries : array_like or None
        The caller's queries; None for the grid's own points.
    exclude_self : bool
        The caller's ``exclude_self``.

    Returns
    -------
    queries : array_like, ndarray of float64, shape (n, n_dims), or Warp vectors
        ``queries`` as given, or for None the grid's points in the caller's order as the
        grid holds them (periodic axes wrapped), a new array: on the Warp engine, (n,)
        float64 vectors on its device, which `_inputs.canonical_queries` takes as they
        are.
    exclude_self : bool

    Raises
    ------
    TypeError
        When ``exclude_self`` is not a bool, or is True with ``queries`` given.
    """
    if not isinstance(exclude_self, bool | np.bool_):
        raise TypeError(f"`exclude_self` must be a bool; got {exclude_self!r}.")
    if queries is not None:
        if exclude_self:
            seen = getattr(queries, "shape", None)
            seen = (f"an array of shape {tuple(seen)}" if seen is not None
                    else f"a {type(queries).__name__}")
            raise TypeError(
                "`exclude_self` must be False when `queries` are given (a point is left out "
                f"of its own row only among the grid's own points); got exclude_self=True "
                f"and `queries` {seen}. Pass `queries=None` to query the grid's points.")
        return queries, False
    return engine.own_points(n_dims), bool(exclude_self)


def knn_without_self(engine: GridEngine, query_points: np.ndarray, k: int,
                     limit: float, out=None) -> KNearest:
    """`GridEngine.query_knn` of the grid's own points, each left out of its own row.

    Parameters
    ----------
    engine : GridEngine
        The grid's engine.
    query_points : ndarray of float64, shape (n, 3)
        The grid's points in the caller's order, through `canonical_queries`.
    k : int
        Neighbours wanted per point, >= 1.
    limit : float
        ``r_max``, or ``inf``.
    out : (ndarray, ndarray) or None
        Checked arrays of shape (n, k) that receive the rows (`_inputs.knn_out`).

    Returns
    -------
    KNearest
        Shape (n, k), the ``k`` nearest other points of each point, padded with -1 and
        ``inf`` past ``counts``.
    """
    n = query_points.shape[0]
    # The (n, k + 1) search pads as many slots as a k search among n - 1 points would.
    check_knn_size(n, k, n - 1)
    found = engine.query_knn(query_points, k + 1, limit)
    if not isinstance(found.indices, np.ndarray):  # on a Warp device: the same, there
        return engine.knn_without_own(found, out)
    own = found.indices == np.arange(n, dtype=found.indices.dtype)[:, np.newaxis]
    absent = ~own.any(axis=1)
    # Rows without their own index are k + 1 points ranked before it: the last one goes.
    own[absent, -1] = True
    keep = ~own
    counts = np.where(absent, np.minimum(found.counts, k), found.counts - 1)
    indices, distances = found.indices[keep].reshape(n, k), found.distances[keep].reshape(n, k)
    if out is not None:
        out[0][...], out[1][...] = indices, distances
        indices, distances = out
    return KNearest(indices, distances, counts, found.n_points)


def counts_without_self(engine: GridEngine, counts: np.ndarray) -> np.ndarray:
    """``counts``, the engine's `GridEngine.count_radius` of the grid's own points (each
    within any ``r`` of itself), less one each, in place (in ``out`` where one was given)."""
    if not isinstance(counts, np.ndarray):  # on a Warp device: the same, there
        return engine.counts_without_own(counts)
    counts -= 1
    return counts


def radius_without_self(engine: GridEngine, found: Neighbors) -> Neighbors:
    """``found``, rows of ``engine``'s `GridEngine.query_radius` of the grid's own
    points, with each point's own index (and its distance) taken out of its row; the rest
    keep their order."""
    if not isinstance(found.indptr, np.ndarray):  # on a Warp device: the same, there
        return engine.rows_without_own(found)
    m = len(found)
    rows = np.repeat(np.arange(m, dtype=found.indices.dtype), found.counts)
    own = found.indices == rows
    removed = np.bincount(rows[own], minlength=m)
    indptr = found.indptr.copy()
    indptr[1:] -= np.cumsum(removed)
    keep = ~own
    distances = None if found.distances is None else found.distances[keep]
    return Neighbors(indptr, found.indices[keep], distances, found.n_points)
