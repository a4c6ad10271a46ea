"""Point arrays in: the padding to three axes and the bounds, in one compiled pass, and the
wrapping into a periodic box."""

from __future__ import annotations

import numpy as np

from .._config import jit


@jit
def pad_columns(points, padded):
    """Copy the (n, d) ``points`` into the first d columns of the (n, 3) ``padded`` and
    zeros into the others (NumPy's strided copy of a narrow array cost ten times more)."""
    d = points.shape[1]
    for i in range(points.shape[0]):
        for axis in range(3):
            padded[i, axis] = points[i, axis] if axis < d else 0.0


@jit
def pad_with_bounds(points, padded):
    """`pad_columns` and the bounds per axis in one pass, and two tests: returns ``(lowest, highest,
    poison, smallest)``, where ``poison`` is NaN when some value is NaN or infinite (the sum
    of ``x * 0``, so the loop needs no branch for it) and 0 otherwise, and ``smallest`` the
    smallest non-zero magnitude (infinity if none; the caller refuses values whose squared
    differences could underflow). Zeros for no points. An empty ``padded`` (no rows) asks
    for the bounds and the tests only, without the copy.

    One compiled call instead of NumPy's ``isfinite`` and two kernels: at 5,000 points
    each of those cost up to a tenth of the whole build.
    """
    n, d = points.shape
    lowest = np.zeros(3)
    highest = np.zeros(3)
    poison = 0.0
    smallest = np.inf
    if n == 0:
        return lowest, highest, poison, smallest
    for axis in range(d):
        lowest[axis] = highest[axis] = points[0, axis]
    copy = padded.shape[0] > 0
    for i in range(n):
        for axis in range(3):
            x = points[i, axis] if axis < d else 0.0
            if copy:
                padded[i, axis] = x
            lowest[axis] = min(lowest[axis], x)
            highest[axis] = max(highest[axis], x)
            poison += x * 0.0
            magnitude = abs(x)
            if magnitude < smallest and magnitude != 0.0:
                smallest = magnitude
    return lowest, highest, poison, smallest


@jit
def wrap_columns(points, box):
    """Each column ``axis`` of ``points`` (n, d) whose ``box[axis]`` is finite wrapped into
    ``[0, box[axis])``, in place; returns ``points``. The arithmetic of NumPy's ``np.mod``
    for a positive period (``fmod``, which is exact, then the period added to a negative
    remainder, and 0 for a remainder of 0), except that a tiny negative number, whose
    remainder plus the period rounds to the period itself, wraps to 0. One compiled pass
    that leaves the coordinates already inside as they are (``fmod`` is slow): ``np.mod``
    took twice as long as the rest of a neighbour list's update (32,000 points in 3-D).
    """
    n, d = points.shape
    for axis in range(min(d, box.shape[0])):
        period = box[axis]
        if not np.isfinite(period):
            continue
        for i in range(n):
            x = points[i, axis]
            if 0.0 < x < period:
                continue  # inside already: np.mod gives x itself (fmod is slow)
            wrapped = np.fmod(x, period)
            if wrapped == 0.0:
                wrapped = 0.0  # NumPy's +0 for -0 and for exact multiples
            elif wrapped < 0.0:
                wrapped += period
            if wrapped >= period:
                wrapped = 0.0
            points[i, axis] = wrapped
    return points
