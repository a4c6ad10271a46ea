"""The input checks of `Grid`'s queries: each turns a query's arguments into the canonical
arrays and scalars an engine takes (`_engine.GridEngine`), or raises naming the parameter
and the value seen."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np

from .._numba_internals import is_dispatcher
from .._validation import (
    as_array,
    as_bounds,
    as_points,
    as_positive_scalar,
    as_radii,
    as_rays,
    check_magnitude,
    pad_to_3d,
    wrap_into_box,
)

if TYPE_CHECKING:
    from ._engine import GridEngine
    from ._grid import Grid

#: `Grid.query_knn` refuses a ``k`` beyond the point count whose padding columns (-1
#: and ``inf``, 16 bytes a slot with int64 indices) would take more than this many bytes.
KNN_MAX_PADDING_BYTES = 2**30


def pair_search_inputs(grid: Grid, r, radii) -> tuple[float, np.ndarray, float]:
    """Validated (squared radius, radii in the engine's order, reach) of a pair search."""
    if (r is None) == (radii is None):
        raise TypeError("give exactly one of `r` (a distance) and `radii` (one per point).")
    if radii is not None:
        radii_sorted, largest = pair_radii(grid._engine, radii, grid._n_points)
        check_periodic_reach(grid._box, grid._periodic, 2.0 * largest, "radii",
                              f"2 * max(radii) = {2 * largest}")
        return 0.0, radii_sorted, 2.0 * largest
    r = as_positive_scalar(r, "r", allow_zero=True)
    check_periodic_reach(grid._box, grid._periodic, r, "r", r)
    return r * r, np.empty(0), r


def box_inputs(lower, upper, n_dims: int, box: np.ndarray):
    """Validated ``(lower3, upper3, width)`` of `Grid.query_box`."""
    lower, upper = as_bounds(lower, upper, n_dims)
    with np.errstate(over="ignore"):
        # A width that overflows to inf covers any periodic axis, as it should.
        width = pad_to_3d(upper - lower)
    return wrap_into_box(pad_to_3d(lower), box), pad_to_3d(upper), width


def ray_inputs(grid: Grid, origins, directions, radii, max_distance):
    """Validated ``(origins3, units3, radii, limit)`` of `Grid.query_ray`."""
    if grid._periodic.any():
        raise ValueError(
            "`box` must be None for ray casts (rays run through open grids only); got a "
            f"grid periodic on axes {np.flatnonzero(grid._periodic).tolist()}."
        )
    origins3, units3 = as_rays(origins, directions, grid._n_dims)
    m = origins3.shape[0]
    radii = as_radii(radii, "radii", grid._n_points)
    limit = np.full(m, np.inf) if max_distance is None else as_radii(
        max_distance, "max_distance", m, allow_inf=True)
    return origins3, units3, radii, limit


def pair_function(fn):
    """``fn`` if it is a compiled numba function (any callable under NUMBA_DISABLE_JIT)."""
    if is_dispatcher(fn) or (numba.config.DISABLE_JIT and callable(fn)):
        return fn
    raise TypeError(
        "`fn` must be a function compiled with numba's `njit` (it is called from compiled "
        f"code, on every thread); got {fn!r}. Decorate it with `@njit` (`from numba "
        "import njit`)."
    )


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
    """``queries`` as a C-contiguous (m, 3) float64 array wrapped into ``box``."""
    coords = wrap_into_box(pad_to_3d(as_points(queries, name, n_dims=n_dims)), box)
    check_magnitude(coords, name)
    return coords


def radius_inputs(queries, r, n_dims: int, box: np.ndarray, periodic: np.ndarray):
    """Validated query points and one radius per query of a radius search."""
    query_points = canonical_queries(queries, n_dims, box)
    radii = as_radii(r, "r", query_points.shape[0])
    largest = float(radii.max()) if radii.size else 0.0
    check_periodic_reach(box, periodic, largest, "r", largest)
    return query_points, radii


def check_periodic_reach(box: np.ndarray, periodic: np.ndarray, reach: float, name: str,
                          seen) -> None:
    """Refuse a search reaching beyond half the periodic box (the minimum image)."""
    if not periodic.any():
        return
    half = box / 2.0
    too_far = np.flatnonzero(reach > half)
    if too_far.size:
        axis = too_far[0]
        raise ValueError(
            f"`{name}` must be at most half the periodic box ({half[axis]} on axis "
            f"{axis}); got {seen}. Use a larger box or a smaller radius."
        )


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
