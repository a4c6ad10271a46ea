"""Input checks of the dynamic hash, in the house form of `_validation.py`.

Single-object calls take a fast path for the common input (a tuple, list or 1-D array of
Python or NumPy numbers) and fall back to the full checks, which explain what is wrong.
"""

from __future__ import annotations

import math
import numbers
import sys

import numpy as np

from .._validation import (
    COORDINATE_FLOOR,
    COORDINATE_LIMIT,
    as_array,
    as_float,
    as_float_array,
    check_finite,
    check_magnitude,
    check_rows_order,
    scalar,
)
from ._kernels.state import NO_SPHERES
from ._kernels.storage import box_rows

#: Every category bit: the default category of an object and mask of a query.
ALL_BITS = 0xFFFFFFFF


class UnknownIdError(KeyError):
    """Ids that are not in the hash (a `KeyError`); ``ids`` lists them."""

    def __init__(self, message: str, ids: list) -> None:
        super().__init__(message)
        self.message = message
        self.ids = ids

    def __str__(self) -> str:
        return self.message


def unhashable(id) -> TypeError:
    """The error for an id that cannot be hashed."""
    return TypeError(f"`id` must be hashable; got {id!r:.80}.")


def _show(values: list, limit: int = 10) -> str:
    shown = ", ".join(repr(value) for value in values[:limit])
    more = f", ... ({len(values)} in all)" if len(values) > limit else ""
    return f"[{shown}{more}]"


def unknown_ids(name: str, ids: list) -> UnknownIdError:
    """The error for ids not in the hash."""
    if name == "id":
        return UnknownIdError(f"`id` must be in the hash; got unknown id {ids[0]!r}.", ids)
    return UnknownIdError(f"`{name}` must all be in the hash; got unknown ids {_show(ids)}.",
                          ids)


def repeated_ids(name: str, ids: list) -> ValueError:
    """The error for ids given twice in one call."""
    return ValueError(f"`{name}` must not repeat an id; got {_show(ids)} more than once.")


def present_ids(name: str, ids: list) -> ValueError:
    """The error for inserting ids the hash holds already."""
    if name == "id":
        return ValueError(f"`id` must not be in the hash already; got {ids[0]!r}. Use move() "
                          "to change an object's shape.")
    return ValueError(f"`{name}` must be new and distinct; got ids already in the hash or "
                      f"repeated: {_show(ids)}.")


def function_needs_int_ids(other) -> TypeError:
    """The error for a ray's ``fn`` on a hash holding ``other``, an id that is not an
    integer."""
    return TypeError(
        "`fn` needs integer ids (it is called with the id as an int64); got a hash "
        f"holding ids of other types, such as {other!r:.80}. Give the objects "
        "integer ids, or map yours to integers."
    )


def fast_coordinates(value, n_dims: int, limit: float = COORDINATE_LIMIT):
    """``value`` as a tuple of ``n_dims`` floats within ``+-limit`` (and, with the default
    limit, each 0 or at least `COORDINATE_FLOOR` in magnitude), or None when it needs full
    checks."""
    floor = COORDINATE_FLOOR if limit == COORDINATE_LIMIT else 0.0
    kind = type(value)
    if kind is np.ndarray:
        if value.ndim != 1 or value.dtype.kind not in "fiu":
            return None
        value = value.tolist()
    elif kind is not tuple and kind is not list:
        return None
    if len(value) != n_dims:
        return None
    for x in value:
        kind = type(x)
        if kind is not float and kind is not int:
            return None
        if not -limit <= x <= limit:  # NaN fails too
            return None
        if -floor < x < floor and x != 0:
            return None
    return value


def coordinates(value, name: str, n_dims: int, *, bounded: bool = True) -> tuple:
    """One position of ``n_dims`` finite coordinates, padded to three floats; within
    `COORDINATE_LIMIT` when ``bounded`` (positions whose distances are computed: objects,
    centres, query points, ray origins; not box corners or directions)."""
    fast = fast_coordinates(value, n_dims, COORDINATE_LIMIT if bounded else sys.float_info.max)
    if fast is None:
        array = as_float_array(value, name)
        if array.shape != (n_dims,):
            raise ValueError(
                f"`{name}` must hold {n_dims} coordinates (shape ({n_dims},)); got an array "
                f"of shape {array.shape}."
            )
        check_finite(array, name)
        if bounded:
            check_magnitude(array, name)
        fast = array.tolist()
    padded = [0.0, 0.0, 0.0]
    for axis, x in enumerate(fast):
        padded[axis] = float(x)
    return tuple(padded)


def check_order(lower: tuple, upper: tuple) -> None:
    """Raise unless ``lower <= upper`` on every axis (single box)."""
    for axis in range(3):
        if lower[axis] > upper[axis]:
            raise ValueError(
                f"`upper` must be >= `lower` on every axis; got lower[{axis}] = "
                f"{lower[axis]} > upper[{axis}] = {upper[axis]}."
            )


def radius_value(value, name: str = "radius") -> float:
    """A finite radius >= 0."""
    value = scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number; got {value!r}.")
    value = as_float(value, name)
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"`{name}` must be finite and >= 0; got {value}.")
    return value


def bits_value(value, name: str) -> int:
    """A category or mask: an integer in ``[0, 2**32)``."""
    value = scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an integer; got {value!r}.")
    if not 0 <= value <= ALL_BITS:
        raise ValueError(f"`{name}` must be in [0, 2**32); got {value}.")
    return int(value)


def id_array(ids, name: str = "ids") -> np.ndarray:
    """Bulk ids: a 1-D array of integers as int64."""
    try:
        array = np.asarray(ids)
    except Exception as error:  # ragged input
        raise TypeError(f"`{name}` must be a 1-D array of integers; got {ids!r:.80}.") from error
    if array.ndim != 1:
        raise ValueError(f"`{name}` must be a 1-D array of integers; got an array of shape "
                         f"{array.shape}.")
    if array.size == 0:
        return np.zeros(0, np.int64)
    if array.dtype.kind == "u" and array.dtype.itemsize == 8 and array.max() > 2**63 - 1:
        raise ValueError(f"`{name}` must fit in int64; got {int(array.max())}.")
    if array.dtype.kind not in "iu":
        raise TypeError(f"`{name}` must be a 1-D array of integers; got dtype {array.dtype}.")
    return np.ascontiguousarray(array, dtype=np.int64)


def coordinate_rows(value, name: str, m: int, n_dims: int) -> np.ndarray:
    """Bulk positions, shape (m, n_dims), as a new C-contiguous (m, 3) float64 array."""
    array = as_float_array(value, name)
    if array.shape != (m, n_dims):
        raise ValueError(f"`{name}` must have shape ({m}, {n_dims}), one row per id; got an "
                         f"array of shape {array.shape}.")
    check_finite(array, name)
    check_magnitude(array, name)
    padded = np.zeros((m, 3))
    padded[:, :n_dims] = array
    return padded




def radius_rows(value, m: int) -> np.ndarray:
    """Bulk radii: a scalar or shape (m,), finite and >= 0."""
    if as_array(value, "radius", "a scalar or a 1-D array of real numbers").ndim == 0:
        return np.full(m, radius_value(value.item() if isinstance(value, np.ndarray) else value))
    array = as_float_array(value, "radius")
    if array.shape != (m,):
        raise ValueError(f"`radius` must be a scalar or have shape ({m},); got an array of "
                         f"shape {array.shape}.")
    bad = np.flatnonzero(~(np.isfinite(array) & (array >= 0)))
    if bad.size:
        raise ValueError(f"`radius` must be finite and >= 0; got {array[bad[0]]} at "
                         f"radius[{bad[0]}].")
    return array


def bits_rows(value, name: str, m: int) -> np.ndarray:
    """Bulk categories or masks: a scalar or shape (m,) of integers in ``[0, 2**32)``."""
    if value is None:
        return np.full(m, ALL_BITS, np.int64)
    array = as_array(value, name, "an integer or a 1-D array of integers")
    if array.ndim == 0:
        return np.full(m, bits_value(value.item() if isinstance(value, np.ndarray) else value,
                                     name), np.int64)
    if array.dtype.kind not in "iu":
        raise TypeError(f"`{name}` must hold integers; got dtype {array.dtype}.")
    if array.shape != (m,):
        raise ValueError(f"`{name}` must be a scalar or have shape ({m},); got an array of "
                         f"shape {array.shape}.")
    bad = np.flatnonzero((array < 0) | (array > ALL_BITS))
    if bad.size:
        raise ValueError(f"`{name}` must be in [0, 2**32); got {array[bad[0]]} at "
                         f"{name}[{bad[0]}].")
    return array.astype(np.int64)


def shape(lower, upper, radius, n_dims: int) -> tuple:
    """``(x0, y0, z0, x1, y1, z1, cx, cy, cz, r)`` of one point, box or sphere, ten floats
    (``r = -1.0`` for a box or point)."""
    low = coordinates(lower, "lower", n_dims)
    if radius is not None:
        if upper is not None:
            raise TypeError("give `upper` (a box) or `radius` (a sphere), not both.")
        r = radius_value(radius)
        x, y, z = low
        # Finite: a centre within +-1e150 moves the largest radius by less than half its
        # last unit, so no corner rounds to infinity.
        corners = (x - r, y - r, z - r, x + r, y + r, z + r)
        return (*corners[:n_dims], *low[n_dims:], *corners[3:3 + n_dims], *low[n_dims:],
                x, y, z, r)
    high = low if upper is None else coordinates(upper, "upper", n_dims)
    check_order(low, high)
    return (*low, *high, 0.0, 0.0, 0.0, -1.0)


def shape_rows(m: int, n_dims: int, lower, upper, radius, buffer: np.ndarray) -> tuple:
    """Bulk shapes: ``(bounds (m, 6), spheres (m, 4) or NO_SPHERES for boxes, buffer)``.

    The common input (float64 C-contiguous arrays of boxes or points) is checked and
    packed in one compiled pass (`storage.box_rows`) into ``buffer``, grown when too
    small and returned for the next call (the bounds are then a view of it); any error
    is reported by the full checks.
    """
    high = lower if upper is None else upper
    if (radius is None and type(lower) is np.ndarray and type(high) is np.ndarray
            and lower.dtype == np.float64 and high.dtype == np.float64
            and lower.shape == (m, n_dims) and high.shape == (m, n_dims)
            and lower.flags.c_contiguous and high.flags.c_contiguous):
        if buffer.shape[0] < m:
            buffer = np.empty((m, 6))
        rows = buffer[:m]
        if box_rows(lower, high, rows):
            return rows, NO_SPHERES, buffer
    low = coordinate_rows(lower, "lower", m, n_dims)
    rows = np.empty((m, 6))
    if radius is not None:
        if upper is not None:
            raise TypeError("give `upper` (boxes) or `radius` (spheres), not both.")
        r = radius_rows(radius, m)
        spheres = np.empty((m, 4))
        spheres[:, :3] = low
        spheres[:, 3] = r
        pad = np.zeros(3)
        pad[:n_dims] = 1.0
        # Finite corners: see `shape`.
        rows[:, :3] = low - r[:, None] * pad
        rows[:, 3:] = low + r[:, None] * pad
        return rows, spheres, buffer
    rows[:, :3] = low
    if upper is None:
        rows[:, 3:] = low
    else:
        high = coordinate_rows(upper, "upper", m, n_dims)
        check_rows_order(low, high)
        rows[:, 3:] = high
    return rows, NO_SPHERES, buffer


def unit_direction(direction, n_dims: int) -> np.ndarray:
    """A ray's non-zero ``direction`` as a unit vector, float64 of shape (3,)."""
    x, y, z = coordinates(direction, "direction", n_dims, bounded=False)
    length = math.sqrt(x * x + y * y + z * z)  # Python floats: overflow gives inf
    if not 1e-150 < length < 1e150:
        # Squares that overflow or underflow: divided by the largest component first, any
        # non-zero direction gives its unit vector.
        scale = max(abs(x), abs(y), abs(z))
        if scale == 0.0:
            raise ValueError(f"`direction` must be non-zero; got {[x, y, z][:n_dims]}.")
        x, y, z = x / scale, y / scale, z / scale
        length = math.sqrt(x * x + y * y + z * z)
    return np.array([x / length, y / length, z / length])
