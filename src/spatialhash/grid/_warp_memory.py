"""Arrays on a Warp device whose failure to allocate is one clear error.

A GPU holds far less memory than the host, and the outputs of a query are sized by its
count pass: a large answer is the common way to run out. Warp reports that as a
`RuntimeError` ("Failed to allocate ... bytes on device ...") and refuses a dimension
longer than a signed 32-bit integer with a `ValueError`. `device_empty` turns both into a
`DeviceMemoryError`, a `MemoryError` that names what the array was for, its shape and
dtype, the bytes asked for and the device, and carries ``shape`` and ``dtype`` as NumPy's
own `MemoryError` does, so that the command line's message reads the same on every engine.
"""

from __future__ import annotations

import math

import numpy as np
import warp as wp

#: The longest dimension of a Warp array (its shapes are signed 32-bit integers).
MAX_DIMENSION = 2**31 - 1

#: NumPy's dtype of each Warp type the engine allocates through `device_empty`.
_NUMPY_DTYPES = {wp.int32: np.dtype(np.int32), wp.int64: np.dtype(np.int64),
                 wp.float64: np.dtype(np.float64), wp.vec3d: np.dtype((np.float64, 3))}


class DeviceMemoryError(MemoryError):
    """An array that a Warp device could not hold.

    Attributes
    ----------
    shape : tuple of int
        The shape asked for.
    dtype : numpy.dtype
        Its element type, as NumPy names it.
    n_bytes : int
        The bytes asked for.
    device : str
        Warp's name of the device.
    """

    def __init__(self, message: str, shape: tuple[int, ...], dtype: np.dtype, n_bytes: int,
                 device: str):
        super().__init__(message)
        self.shape, self.dtype, self.n_bytes, self.device = shape, dtype, n_bytes, device


def device_empty(shape: int | tuple[int, ...], dtype, device, what: str) -> wp.array:
    """``wp.empty(shape, dtype, device)``, or a `DeviceMemoryError` naming ``what``.

    Parameters
    ----------
    shape : int or tuple of int
        The array's shape.
    dtype : Warp scalar or vector type
        Its element type.
    device : warp.context.Device or str
        Where it is allocated.
    what : str
        What the array holds, for the message (e.g. ``"the rows of query_pairs"``).

    Returns
    -------
    warp.array
        Uninitialized.

    Raises
    ------
    DeviceMemoryError
        When the device cannot hold it, or a dimension exceeds `MAX_DIMENSION`.
    """
    shape = (shape,) if isinstance(shape, int) else tuple(int(n) for n in shape)
    numpy_dtype = _NUMPY_DTYPES[dtype]
    n_bytes = math.prod(shape) * numpy_dtype.itemsize
    device_name = str(device)
    if max(shape, default=0) > MAX_DIMENSION:
        raise DeviceMemoryError(
            f"{what}: an array of shape {shape} on device {device_name!r} is longer than a "
            f"Warp array can be ({MAX_DIMENSION:,} rows); ask for fewer rows at a time "
            "(fewer points or queries, a smaller radius, or iter_pairs).",
            shape, numpy_dtype, n_bytes, device_name)
    try:
        return wp.empty(shape, dtype=dtype, device=device)
    except RuntimeError as error:
        if "Failed to allocate" not in str(error):
            raise
        raise DeviceMemoryError(
            f"{what}: out of memory on device {device_name!r}, asking for {n_bytes:,} bytes "
            f"(an array of shape {shape} and dtype {numpy_dtype}); ask for fewer rows at a "
            "time (fewer points or queries, a smaller radius, or iter_pairs).",
            shape, numpy_dtype, n_bytes, device_name) from error
