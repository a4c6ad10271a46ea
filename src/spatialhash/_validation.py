"""The one validation funnel: every public entry point converts its inputs here, once.

Messages follow "`<param>` must <requirement>; got <what was seen>." Inputs are never
modified: conversions copy when they must, and kernels only read what they are given.
"""

from __future__ import annotations

import math
import numbers
import sys

import numpy as np

from ._kernels.cells import COORDINATE_FLOOR, COORDINATE_LIMIT, N_AXES
from ._kernels.points import pad_columns, pad_with_bounds, wrap_columns


def _describe(array: np.ndarray) -> str:
    return f"an array of shape {array.shape} and dtype {array.dtype}"


def as_float_array(value, name: str) -> np.ndarray:
    """``value`` as a float64 ndarray (a copy only when needed); rejects non-real dtypes."""
    if type(value) is np.ndarray and value.dtype == np.float64:
        return value  # the common case, without the dtype checks
    if isinstance(value, np.ma.MaskedArray) and np.ma.is_masked(value):
        raise TypeError(
            f"`{name}` must not be a masked array with masked values (the mask would be "
            "ignored); pass `.compressed()` or `.filled(value)`."
        )
    nullable = _pandas_nullable_numbers(value, name)
    if nullable is not None:
        return nullable
    try:
        array = np.asarray(value)
    except Exception as error:  # ragged lists and the like
        raise TypeError(
            f"`{name}` must be array-like of real numbers; got {value!r:.80}."
        ) from error
    # By kind: NumPy counts timedelta64 among the integers.
    if array.dtype.kind not in "iuf":
        raise TypeError(
            f"`{name}` must hold real numbers (integer or floating dtype); got dtype "
            f"{array.dtype}."
        )
    return np.asarray(array, dtype=np.float64)


def _pandas_nullable_numbers(value, name: str) -> np.ndarray | None:
    """float64 values of a pandas object whose columns all have numeric dtypes, nullable
    ones (``Float64``, ``Int64``) included, which NumPy would make an object array; raises
    naming the first missing value (``pd.NA``) by row and column. None for anything else
    (pandas is looked up only where the caller imported it)."""
    pandas = sys.modules.get("pandas")
    if pandas is None or not isinstance(
            value, (pandas.DataFrame, pandas.Series, pandas.api.extensions.ExtensionArray)):
        return None
    dtypes = list(value.dtypes) if isinstance(value, pandas.DataFrame) else [value.dtype]
    extension = pandas.api.extensions.ExtensionDtype
    if not any(isinstance(dtype, extension) for dtype in dtypes) or not all(
            _numeric_kind(getattr(dtype, "numpy_dtype", dtype)) for dtype in dtypes):
        return None  # NumPy dtypes only, or some column not numeric: NumPy's path
    missing = np.asarray(pandas.isna(value))
    if missing.any():
        raise ValueError(
            f"`{name}` must have no missing values; got {pandas.NA} at "
            f"{name}{_at(np.argwhere(missing)[0])}."
        )
    return value.to_numpy(dtype=np.float64)


def _numeric_kind(dtype) -> bool:
    """Whether ``dtype`` is a NumPy integer or floating dtype (not bool, not timedelta)."""
    try:
        return np.dtype(dtype).kind in "iuf"
    except TypeError:
        return False


def as_array(value, name: str, what: str) -> np.ndarray:
    """``np.asarray(value)``, with ragged nested sequences (which NumPy refuses with a
    message naming no parameter) a TypeError naming ``name`` and saying ``what`` it must
    be."""
    try:
        return np.asarray(value)
    except ValueError as error:
        raise TypeError(f"`{name}` must be {what}; got {value!r:.80}.") from error



def check_magnitude(array: np.ndarray, name: str) -> None:
    """Raise when some value of ``array`` lies outside ``[-COORDINATE_LIMIT,
    COORDINATE_LIMIT]``, or is non-zero and smaller in magnitude than `COORDINATE_FLOOR`,
    naming the first such value."""
    if not array.size:
        return
    lowest, highest = array.min(), array.max()
    if not (-COORDINATE_LIMIT <= lowest and highest <= COORDINATE_LIMIT):
        bad = np.argwhere(np.abs(array) > COORDINATE_LIMIT)[0]
        raise ValueError(
            f"`{name}` must lie within +-{COORDINATE_LIMIT:g} (squared distances of larger "
            f"coordinates overflow float64); got {array[tuple(bad)]} at {name}{_at(bad)}."
        )
    if lowest < COORDINATE_FLOOR and highest > -COORDINATE_FLOOR:  # values near 0: look
        tiny = (np.abs(array) < COORDINATE_FLOOR) & (array != 0.0)
        if tiny.any():
            raise_tiny(array, name, np.argwhere(tiny)[0])


def raise_tiny(array: np.ndarray, name: str, bad) -> None:
    """The error for a coordinate ``array[bad]`` that is non-zero and below the floor."""
    raise ValueError(
        f"`{name}` must be 0 or at least {COORDINATE_FLOOR:.3g} in magnitude (squared "
        f"distances between closer coordinates underflow float64); got "
        f"{array[tuple(bad)]} at {name}{_at(bad)}. Scale the coordinates up."
    )


def _at(index) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def check_finite(array: np.ndarray, name: str) -> None:
    """Raise when ``array`` holds NaN or infinity, naming the first bad row."""
    if array.size and not np.isfinite(array).all():
        bad = np.argwhere(~np.isfinite(array))[0]
        where = "[" + ", ".join(str(int(i)) for i in bad) + "]"
        raise ValueError(
            f"`{name}` must be finite; got {array[tuple(bad)]} at {name}{where}."
        )


def as_points(points, name: str = "points", n_dims: int | None = None, *,
              finite: bool = True) -> np.ndarray:
    """Validate an (n, d) coordinate array, d in 1..3 (or ``n_dims``); returns float64.

    With ``finite`` false the caller checks for NaN and infinity itself."""
    array = as_float_array(points, name)
    if array.ndim != 2:
        hint = (" Use `.reshape(-1, 1)` for n points in 1-D, or `.reshape(1, -1)` for a "
                "single point." if array.ndim == 1 else "")
        raise ValueError(
            f"`{name}` must be a 2-D array of shape (n, d); got {_describe(array)}.{hint}"
        )
    if n_dims is None and not 1 <= array.shape[1] <= N_AXES:
        raise ValueError(
            f"`{name}` must have 1, 2 or 3 columns (the dimension d); got shape {array.shape}."
        )
    if n_dims is not None and array.shape[1] != n_dims:
        raise ValueError(
            f"`{name}` must have {n_dims} columns, like the grid's points; got shape "
            f"{array.shape}."
        )
    if finite:
        check_finite(array, name)
    return array


def grid_points(points: np.ndarray, box: np.ndarray, name: str = "points"
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The float64 points a grid is built from, ``points`` being an (n, d) float64 array
    already through `as_points` (with ``finite=False``), and their smallest and largest
    coordinate per axis (three axes, zeros for the missing ones and for no points). One
    compiled pass bounds and checks finiteness.

    Writable points that need no wrapping (open axes, or every coordinate strictly inside
    its periodic axis, as a simulation that wraps its own positions keeps them) are not
    copied: the result is the C-contiguous (n, d) input itself, which the build kernels
    read as (n, 3) points with zeros for the missing coordinates, and no kernel writes.
    Otherwise the result is an (n, 3) copy, wrapped into the periodic axes of ``box``.

    Raises when some coordinate (wrapped, on periodic axes) lies beyond
    `COORDINATE_LIMIT` (squared distances of such coordinates overflow to infinity), or is
    non-zero and below `COORDINATE_FLOOR` (they underflow).
    """
    array = np.ascontiguousarray(points)
    periodic = np.isfinite(box).any()
    if array.flags.writeable:
        # Nothing to wrap: the build reads the caller's array instead of an (n, 3) copy (a
        # pass and n * 24 bytes fewer to bring into the cache on every frame of a
        # simulation, and the largest allocation of a build of periodic points). Read-only
        # arrays are copied: numba compiles every kernel again for them.
        points3 = array
        lowest, highest, poison, smallest = pad_with_bounds(array, _NO_COPY)
        if periodic and not _inside_box(lowest, highest, box, array.shape[1]):
            points3 = np.empty((array.shape[0], N_AXES), dtype=np.float64)
            pad_columns(array, points3)
        else:
            periodic = False
    else:
        points3 = np.empty((array.shape[0], N_AXES), dtype=np.float64)
        lowest, highest, poison, smallest = pad_with_bounds(array, points3)
    if poison != 0.0:
        check_finite(array, name)
    if periodic:
        wrap_into_box(points3, box)
        # The wrapped coordinates are the ones compared: -1e-300 wraps to 0 (see
        # `wrap_into_box`), 1e-300 stays.
        lowest, highest, _, smallest = pad_with_bounds(points3, _NO_COPY)
        array = points3
    if smallest < COORDINATE_FLOOR:
        tiny = (np.abs(array) < COORDINATE_FLOOR) & (array != 0.0)
        raise_tiny(array, name, np.argwhere(tiny)[0])
    for axis in range(N_AXES):
        if not -COORDINATE_LIMIT <= lowest[axis] <= highest[axis] <= COORDINATE_LIMIT:
            value = lowest[axis] if lowest[axis] < -COORDINATE_LIMIT else highest[axis]
            raise ValueError(
                f"`{name}` must lie within +-{COORDINATE_LIMIT:g} (squared distances of "
                f"larger coordinates overflow float64); got {value} on axis {axis}."
            )
    return points3, lowest, highest


def _inside_box(lowest, highest, box: np.ndarray, n_dims: int) -> bool:
    """Whether every coordinate on the periodic axes of ``box`` lies strictly inside
    ``(0, box)``, from the bounds of `pad_with_bounds`: there, wrapping leaves every
    coordinate as it is (`points.wrap_columns`), zeros of either sign aside."""
    return all(lowest[axis] > 0.0 and highest[axis] < box[axis]
               for axis in range(n_dims) if np.isfinite(box[axis]))


#: Passed to `pad_with_bounds` for bounds and checks without a copy.
_NO_COPY = np.empty((0, N_AXES), dtype=np.float64)


def pad_to_3d(points: np.ndarray) -> np.ndarray:
    """A C-contiguous (n, 3) float64 copy of ``points`` with zero columns appended."""
    padded = np.empty((points.shape[0], N_AXES), dtype=np.float64)
    pad_columns(np.ascontiguousarray(points, dtype=np.float64), padded)
    return padded


def as_float(value: numbers.Real, name: str) -> float:
    """A real number as a float; an integer beyond float64's range is a ValueError naming
    ``name`` (Python raises OverflowError), not infinity."""
    try:
        return float(value)
    except OverflowError:
        raise ValueError(
            f"`{name}` must fit float64; got an integer of {len(str(abs(value)))} digits."
        ) from None


def scalar(value):
    """``value`` itself, or the scalar inside a 0-d NumPy array (``np.array(0.1)``), so
    that every parameter taking a number takes a 0-d array too."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value[()]
    return value


def as_positive_scalar(value, name: str, *, allow_zero: bool = False,
                       allow_inf: bool = False) -> float:
    """A real scalar > 0 (or >= 0 with ``allow_zero``), finite unless ``allow_inf``."""
    value = scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number; got {value!r}.")
    value = as_float(value, name)
    bound = ">= 0" if allow_zero else "> 0"
    if math.isnan(value) or (value < 0 if allow_zero else value <= 0):
        raise ValueError(f"`{name}` must be {bound}; got {value}.")
    if math.isinf(value) and not allow_inf:
        raise ValueError(f"`{name}` must be finite; got {value}.")
    return value


def as_radii(value, name: str, n: int, *, allow_inf: bool = False) -> np.ndarray:
    """A scalar or length-``n`` array of radii >= 0 as a float64 array of length ``n``."""
    try:
        n_dims = np.ndim(value)
    except ValueError as error:  # ragged nested sequences
        raise TypeError(f"`{name}` must be a scalar or a 1-D array of real numbers; got "
                        f"{value!r:.80}.") from error
    if n_dims == 0:
        radius = as_positive_scalar(
            value.item() if isinstance(value, np.ndarray) else value,
            name, allow_zero=True, allow_inf=allow_inf,
        )
        return np.full(n, radius)
    array = as_float_array(value, name)
    if array.shape != (n,):
        raise ValueError(
            f"`{name}` must be a scalar or an array of shape ({n},); got {_describe(array)}."
        )
    # One or two passes when all is well (NaN fails `>= 0`); the culprit is looked for
    # only when something is wrong.
    if (array >= 0).all() and (allow_inf or np.isfinite(array).all()):
        return np.ascontiguousarray(array)
    bad = np.flatnonzero(np.isnan(array) | (array < 0) | (np.isinf(array) & (not allow_inf)))
    if bad.size:
        raise_bad_radius(name, array[bad[0]], bad[0])
    return np.ascontiguousarray(array)


def raise_bad_radius(name: str, value: np.float64, index: int) -> None:
    """The error of `as_radii` for the first bad value, ``value`` (float64) at
    ``name[index]``: the host's check, and the device's (`grid._warp_arguments`)."""
    raise ValueError(f"`{name}` must hold finite values >= 0; got {value} at {name}[{index}].")


def as_count(value, name: str) -> int:
    """An integer >= 1."""
    value = scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an integer; got {value!r}.")
    if value < 1:
        raise ValueError(f"`{name}` must be >= 1; got {value}.")
    return int(value)


def as_box(box, periodic, n_dims: int) -> tuple[np.ndarray, np.ndarray]:
    """Periods per axis as (box, periodic) arrays of length 3 (``inf`` on open axes)."""
    lengths = np.full(N_AXES, np.inf)
    is_periodic = np.zeros(N_AXES, dtype=bool)
    if box is None:
        if periodic is not None and np.any(periodic):
            raise ValueError(f"`periodic` needs `box`; got periodic={periodic!r} and box=None.")
        return lengths, is_periodic
    values = as_float_array(box, "box")
    if values.ndim == 0:
        values = np.full(n_dims, float(values))
    if values.shape != (n_dims,):
        raise ValueError(
            f"`box` must be a scalar or hold one length per dimension ({n_dims}); got "
            f"{_describe(values)}."
        )
    flags = (np.ones(n_dims, dtype=bool) if periodic is None
             else as_array(periodic, "periodic", "a bool or a sequence of bools"))
    if flags.dtype != np.bool_:
        raise TypeError(f"`periodic` must be a bool or a sequence of bools; got {periodic!r}.")
    flags = np.broadcast_to(flags, (n_dims,)) if flags.ndim == 0 else flags
    if flags.shape != (n_dims,):
        raise ValueError(
            f"`periodic` must be a bool or hold one flag per dimension ({n_dims}); got "
            f"{periodic!r}."
        )
    for axis in np.flatnonzero(flags):
        if not (np.isfinite(values[axis]) and values[axis] > 0):
            raise ValueError(
                f"`box` must be finite and > 0 on periodic axes; got box[{axis}] = "
                f"{values[axis]}."
            )
    lengths[:n_dims][flags] = values[flags]
    is_periodic[:n_dims] = flags
    return lengths, is_periodic


def wrap_into_box(points3: np.ndarray, box: np.ndarray) -> np.ndarray:
    """Positions on periodic axes wrapped into ``[0, box)``, in place on a private copy
    (`points.wrap_columns`: ``np.mod``'s arithmetic, a tiny negative number to 0)."""
    if not np.isfinite(box).any():
        return points3
    return wrap_columns(points3, np.ascontiguousarray(box, dtype=np.float64))


def check_periodic_reach(box: np.ndarray, periodic: np.ndarray, reach: float, name: str,
                         seen) -> None:
    """Refuse a search reaching beyond half the periodic box (the minimum image):
    ``reach`` against half of ``box`` on the axes of ``periodic`` ((3,) each, as `as_box`
    returns them), the message naming ``name`` and showing ``seen``. `Grid` (and so a
    neighbour list's builds) and the Dask engine check their searches here."""
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


def as_rows(value, name: str, n_dims: int) -> np.ndarray:
    """An (m, n_dims) float64 array of query points, box corners or rays, where a 1-D
    array is one of them (a single query point, as cKDTree and scikit-learn take it)."""
    array = as_float_array(value, name)
    if array.ndim == 1:
        if array.shape[0] != n_dims:
            hint = (f" Use `.reshape(-1, 1)` for {array.shape[0]} points." if n_dims == 1
                    else "")
            raise ValueError(
                f"`{name}` must have {n_dims} columns, like the grid's points, or be one "
                f"point of shape ({n_dims},); got shape {array.shape}.{hint}"
            )
        array = array[np.newaxis, :]
    return as_points(array, name, n_dims=n_dims)


def as_bounds(lower, upper, n_dims: int) -> tuple[np.ndarray, np.ndarray]:
    """Boxes as (m, d) ``lower`` and ``upper`` arrays (a single box may be 1-D)."""
    arrays = [as_rows(value, name, n_dims) for value, name in ((lower, "lower"),
                                                               (upper, "upper"))]
    lower, upper = arrays
    if lower.shape != upper.shape:
        raise ValueError(
            f"`lower` and `upper` must have the same shape; got {lower.shape} and {upper.shape}."
        )
    check_rows_order(lower, upper)
    return lower, upper


def as_rays(origins, directions, n_dims: int) -> tuple[np.ndarray, np.ndarray]:
    """Rays as (m, 3) origins and unit directions, padded with zeros (a single ray may be 1-D).

    Each direction is divided by its largest component, then by its norm, so directions
    of any magnitude, subnormal or near the float64 maximum, give a unit vector.
    """
    origins, directions = (as_rows(value, name, n_dims) for value, name in
                           ((origins, "origins"), (directions, "directions")))
    check_magnitude(origins, "origins")
    if origins.shape != directions.shape:
        raise ValueError(
            f"`directions` must have the same shape as `origins`; got {directions.shape} and "
            f"{origins.shape}."
        )
    scale = np.abs(directions).max(axis=1, initial=0.0)
    zero = np.flatnonzero(scale == 0.0)
    if zero.size:
        raise ValueError(
            f"`directions` must be non-zero vectors; got {directions[zero[0]].tolist()} at "
            f"directions[{zero[0]}]."
        )
    return pad_to_3d(origins), unit_vectors(pad_to_3d(directions) / scale[:, np.newaxis])


def unit_vectors(vectors3: np.ndarray) -> np.ndarray:
    """(m, 3) vectors divided by their norms ``sqrt(x*x + y*y + z*z)``."""
    x, y, z = vectors3[:, 0], vectors3[:, 1], vectors3[:, 2]
    norm = np.sqrt(x * x + y * y + z * z)
    return np.ascontiguousarray(vectors3 / norm[:, np.newaxis])


def check_rows_order(lower: np.ndarray, upper: np.ndarray) -> None:
    """Raise unless ``lower <= upper`` on every row and axis of two (m, d) arrays."""
    inverted = np.argwhere(lower > upper)
    if inverted.size:
        row, axis = inverted[0]
        raise ValueError(
            f"`upper` must be >= `lower` on every axis; got lower[{row}, {axis}] = "
            f"{lower[row, axis]} > upper[{row}, {axis}] = {upper[row, axis]}."
        )
