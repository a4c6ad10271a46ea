"""The input checks of `Grid`'s queries: each turns a query's arguments into the canonical
arrays and scalars an engine takes (`_engine.GridEngine`), or raises naming the parameter
and the value seen. They take values (the grid's sizes, box and engine), never the grid."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np

from .._validation import (
    as_array,
    as_bounds,
    as_positive_scalar,
    as_radii,
    as_rays,
    as_rows,
    check_magnitude,
    check_periodic_reach,
    pad_to_3d,
    wrap_into_box,
)

if TYPE_CHECKING:
    from ._engine import GridEngine

#: `Grid.query_knn` refuses a ``k`` beyond the point count whose padding columns (-1
#: and ``inf``, 16 bytes a slot with int64 indices) would take more than this many bytes.
KNN_MAX_PADDING_BYTES = 2**30


def pair_search_inputs(engine: GridEngine, n_points: int, box: np.ndarray,
                       periodic: np.ndarray, r, radii) -> tuple[float, np.ndarray, float]:
    """Validated (squared radius, radii in ``engine``'s point order, reach) of a pair
    search among ``n_points`` points in ``box`` (periodic on the axes of ``periodic``)."""
    if (r is None) == (radii is None):
        raise TypeError("give exactly one of `r` (a distance) and `radii` (one per point).")
    if radii is not None:
        radii_sorted, largest = pair_radii(engine, radii, n_points)
        check_periodic_reach(box, periodic, 2.0 * largest, "radii",
                             f"2 * max(radii) = {2 * largest}")
        return 0.0, radii_sorted, 2.0 * largest
    r = as_positive_scalar(r, "r", allow_zero=True)
    check_periodic_reach(box, periodic, r, "r", r)
    return r * r, np.empty(0), r


def box_inputs(lower, upper, n_dims: int, box: np.ndarray):
    """Validated ``(lower3, upper3, width)`` of `Grid.query_box`."""
    lower, upper = as_bounds(lower, upper, n_dims)
    with np.errstate(over="ignore"):
        # A width that overflows to inf covers any periodic axis, as it should.
        width = pad_to_3d(upper - lower)
    return wrap_into_box(pad_to_3d(lower), box), pad_to_3d(upper), width


def ray_inputs(n_dims: int, n_points: int, periodic: np.ndarray, origins, directions,
               radii, max_distance):
    """Validated ``(origins3, units3, radii, limit)`` of `Grid.query_ray` on a grid of
    ``n_points`` points in ``n_dims`` dimensions, periodic on the axes of ``periodic``."""
    if periodic.any():
        raise ValueError(
            "`box` must be None for ray casts (rays run through open grids only); got a "
            f"grid periodic on axes {np.flatnonzero(periodic).tolist()}."
        )
    origins3, units3 = as_rays(origins, directions, n_dims)
    m = origins3.shape[0]
    radii = as_radii(radii, "radii", n_points)
    limit = np.full(m, np.inf) if max_distance is None else as_radii(
        max_distance, "max_distance", m, allow_inf=True)
    return origins3, units3, radii, limit


def check_knn_size(m: int, k: int, n_points: int) -> None:
    """Refuse, naming ``k``, a `Grid.query_knn` result whose padding columns would take
    more than `KNN_MAX_PADDING_BYTES`."""
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


def canonical_queries(queries, n_dims: int, box: np.ndarray, name: str = "queries") -> np.ndarray:
    """``queries`` as a C-contiguous (m, 3) float64 array wrapped into ``box`` (a single
    point may be 1-D: one query). Queries on a Warp device come checked already, as
    (m,) float64 vectors (`_device_arrays.Boundary.queries`), and pass as they are."""
    if not isinstance(queries, np.ndarray) and _is_vectors(queries):
        return queries
    coords = wrap_into_box(pad_to_3d(as_rows(queries, name, n_dims)), box)
    check_magnitude(coords, name)
    return coords


def _is_vectors(value) -> bool:
    """Whether ``value`` is a Warp array of float64 vectors (found without importing
    Warp: where the caller has not imported it, nothing is)."""
    warp = sys.modules.get("warp")
    return warp is not None and isinstance(value, warp.array) and value.dtype is warp.vec3d


def radius_inputs(queries, r, n_dims: int, box: np.ndarray, periodic: np.ndarray):
    """Validated query points and one radius per query of a radius search."""
    query_points = canonical_queries(queries, n_dims, box)
    radii = as_radii(r, "r", query_points.shape[0])
    largest = float(radii.max()) if radii.size else 0.0
    check_periodic_reach(box, periodic, largest, "r", largest)
    return query_points, radii


def pair_radii(engine: GridEngine, radii, n_points: int) -> tuple[np.ndarray, float]:
    """Validated per-point ``radii`` of a pair search in the engine's point order, and
    the largest."""
    array = as_array(radii, "radii", "a scalar or a 1-D array of real numbers")
    if array.dtype == np.float64 and array.shape == (n_points,):
        # One compiled pass: sorted copy, largest, validity (the message comes from
        # `as_radii` when something is wrong).
        radii_sorted, largest, valid = engine.sorted_radii(np.ascontiguousarray(array))
        if not valid:
            as_radii(array, "radii", n_points)
        return radii_sorted, largest
    array = as_radii(radii, "radii", n_points)
    return engine.sorted_radii(array)[0], float(array.max()) if array.size else 0.0
