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
from ._device_arrays import DeviceValues

if TYPE_CHECKING:
    from ._device_arrays import Boundary
    from ._engine import GridEngine

#: `Grid.query_knn` refuses a ``k`` beyond the point count whose padding columns (-1
#: and ``inf``, 16 bytes a slot with int64 indices) would take more than this many bytes.
KNN_MAX_PADDING_BYTES = 2**30


def pair_search_inputs(engine: GridEngine, n_points: int, box: np.ndarray,
                       periodic: np.ndarray, r, radii) -> tuple[float, np.ndarray, float]:
    """Validated (squared radius, radii in ``engine``'s point order, reach) of a pair
    search among ``n_points`` points in ``box`` (periodic on the axes of ``periodic``);
    ``radii`` as `Boundary.values` gives them."""
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


def box_inputs(lower, upper, n_dims: int, box: np.ndarray, io: Boundary):
    """Validated ``(lower3, upper3, width)`` of `Grid.query_box`, of ``lower`` and
    ``upper`` as the caller gave them, read by ``io`` (on the grid's Warp device where
    they lie there, `Boundary.boxes`)."""
    on_device = io.boxes(lower, upper, n_dims, box)
    if on_device is not None:
        return on_device
    lower, upper = as_bounds(io.host_argument(lower, "lower"),
                             io.host_argument(upper, "upper"), n_dims)
    with np.errstate(over="ignore"):
        # A width that overflows to inf covers any periodic axis, as it should.
        width = pad_to_3d(upper - lower)
    return wrap_into_box(pad_to_3d(lower), box), pad_to_3d(upper), width


def ray_inputs(n_dims: int, n_points: int, periodic: np.ndarray, origins, directions,
               radii, max_distance, io: Boundary):
    """Validated ``(origins3, units3, radii, limit)`` of `Grid.query_ray` on a grid of
    ``n_points`` points in ``n_dims`` dimensions, periodic on the axes of ``periodic``,
    of the arguments as the caller gave them, read by ``io`` (on the grid's Warp device
    where they lie there: `Boundary.rays`, `Boundary.values`, whose ``radii`` stay
    `DeviceValues`)."""
    if periodic.any():
        raise ValueError(
            "`box` must be None for ray casts (rays run through open grids only); got a "
            f"grid periodic on axes {np.flatnonzero(periodic).tolist()}."
        )
    rays = io.rays(origins, directions, n_dims)
    origins3, units3 = rays if rays is not None else as_rays(
        io.host_argument(origins, "origins"), io.host_argument(directions, "directions"),
        n_dims)
    m = origins3.shape[0]
    radii = io.values(radii, "radii", n_points)
    if not isinstance(radii, DeviceValues):
        radii = as_radii(radii, "radii", n_points)
    if max_distance is None:
        return origins3, units3, radii, np.full(m, np.inf)
    limit, _ = checked_values(io, max_distance, "max_distance", m, allow_inf=True)
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


def radius_inputs(queries, r, n_dims: int, box: np.ndarray, periodic: np.ndarray,
                  io: Boundary):
    """Validated query points and one radius per query of a radius search, ``queries``
    from ``io.queries`` and ``r`` as the caller gave it, read by ``io`` (`Boundary`: an
    array of radii on the grid's Warp device is checked there, `Boundary.values`)."""
    query_points = canonical_queries(queries, n_dims, box)
    radii, largest = checked_values(io, r, "r", query_points.shape[0])
    check_periodic_reach(box, periodic, largest, "r", largest)
    return query_points, radii


def checked_values(io: Boundary, value, name: str, n: int, *, allow_inf: bool = False
                   ) -> tuple:
    """``(values, largest)`` of ``n`` radii or distances as the caller gave them
    (`_validation.as_radii`, ``allow_inf`` as there): float64 on the grid's Warp device
    where they lie there, checked there (`Boundary.values`), else a NumPy array checked
    on the host."""
    values = io.values(value, name, n, allow_inf=allow_inf)
    if isinstance(values, DeviceValues):
        return values
    values = as_radii(values, name, n, allow_inf=allow_inf)
    return values, float(values.max()) if values.size else 0.0


def pair_radii(engine: GridEngine, radii, n_points: int) -> tuple[np.ndarray, float]:
    """Validated per-point ``radii`` of a pair search in the engine's point order, and
    the largest: radii checked on a Warp device already (`DeviceValues`) put in order
    there (the Warp engine's `in_grid_order`)."""
    if isinstance(radii, DeviceValues):
        return engine.in_grid_order(radii.values), radii.largest
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


def output_array(out, name: str, shape: tuple, dtype, inputs: dict) -> np.ndarray:
    """``out``, checked as an array a query writes its answer into: a NumPy array of
    ``shape`` and ``dtype``, C-contiguous, writeable, sharing no memory with any array of
    ``inputs`` (names to values: the query's arguments, the grid's own arrays)."""
    dtype = np.dtype(dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"`{name}` must be a NumPy array of {dtype}; got "
                        f"{type(out).__name__}.")
    if out.dtype != dtype:
        raise TypeError(f"`{name}` must have dtype {dtype}; got {out.dtype}.")
    if out.shape != shape:
        raise ValueError(f"`{name}` must have shape {shape}; got {out.shape}.")
    if not out.flags.c_contiguous:
        raise ValueError(f"`{name}` must be C-contiguous; got an array with strides "
                         f"{out.strides}. Pass a new array, or np.ascontiguousarray of it.")
    if not out.flags.writeable:
        raise ValueError(f"`{name}` must be writeable; got a read-only array.")
    for input_name, value in inputs.items():
        if isinstance(value, np.ndarray) and np.shares_memory(out, value):
            raise ValueError(f"`{name}` must not share memory with the query's inputs or "
                             f"the grid; got an array that shares memory with {input_name}.")
    return out


def count_out(out, query_points: np.ndarray, inputs: dict, engine: GridEngine,
              kind: str = "numpy") -> np.ndarray | None:
    """`Grid.count_radius`'s ``out``, checked (`output_array`): None, or int64 of shape
    (m,), sharing no memory with ``inputs`` (the caller's arguments, by name), the query
    points or the arrays the ``engine`` holds. Results of another ``kind`` than NumPy's
    (points given as tensors or device arrays) take no ``out``."""
    if out is None:
        return None
    _check_numpy_results(kind)
    return output_array(out, "out", query_points.shape[:1], np.int64,
                        _read_arrays(inputs, query_points, engine))


def knn_out(out, query_points: np.ndarray, k: int, inputs: dict, engine: GridEngine,
            kind: str = "numpy"):
    """`Grid.query_knn`'s ``out``, checked as in `count_out`: None, or a pair ``(indices,
    distances)`` of shape (m, k), of the grid's index dtype and float64, sharing no memory
    with each other."""
    if out is None:
        return None
    _check_numpy_results(kind)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        length = f" of length {len(out)}" if isinstance(out, (tuple, list)) else ""
        raise TypeError("`out` must be a pair (indices, distances) of arrays of shape "
                        f"(m, k); got {type(out).__name__}{length}.")
    reads = _read_arrays(inputs, query_points, engine)
    shape = (query_points.shape[0], k)
    indices = output_array(out[0], "out[0]", shape, engine.index_dtype, reads)
    distances = output_array(out[1], "out[1]", shape, np.float64,
                             {**reads, "`out[0]`": indices})
    return indices, distances


def _check_numpy_results(kind: str) -> None:
    """Refuse ``out`` where the results are not NumPy arrays: they are the points' kind
    (tensors over the engine's arrays, or arrays on a device), which a NumPy ``out``
    would not be."""
    if kind != "numpy":
        raise TypeError("`out` takes NumPy arrays, for a grid built on NumPy points; got "
                        f"points of kind {kind!r}, whose results are of that kind.")


def _read_arrays(inputs: dict, query_points: np.ndarray, engine: GridEngine) -> dict:
    """The arrays a query reads while it writes its answer, by name: the caller's
    ``inputs`` (names in backticks), the query points as converted, and the grid's state
    where the engine holds one (the CPU engines; the Warp engine makes its state on the
    CPU only when asked for it, and its kernels do not read it)."""
    state = vars(engine).get("state")
    grid_arrays = state._asdict().items() if state is not None else ()
    return {**{f"`{name}`": value for name, value in inputs.items()},
            "the converted queries": query_points,
            **{f"the grid's `{name}`": value for name, value in grid_arrays}}
