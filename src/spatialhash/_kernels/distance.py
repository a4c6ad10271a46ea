"""The distance step: a candidate's displacement and squared distance, for every scan.

Each scan of the batch grid and of the neighbour lists built on it (pairs, radius, count, k
nearest, functions over pairs, the lists' rows), and the dynamic hash's sphere centres,
compute a candidate's distance here, so that the arithmetic is written once: on each axis
``(a - b) - shift`` (``shift`` the period a run of cells is seen across, zeros elsewhere),
brought to the nearest image where the scan needs it (`cells.min_image`), then ``dx * dx +
dy * dy + dz * dz`` summed in that order, the order the brute-force references and every
engine use, so that a pair at exactly ``distance == r`` is decided alike everywhere. A
cell of another shape (triclinic) changes this function only.

`displacement` is inlined at numba's IR level: the constants a call passes (`NO_SHIFT`,
``wrap`` False) fold away, ``x - 0.0`` being ``x`` exactly, and the loops around it
vectorize as the same arithmetic written out in each loop did.
"""

from __future__ import annotations

import math

from .._config import jit_inline
from .cells import min_image

#: The shift of a candidate seen in place.
NO_SHIFT = (0.0, 0.0, 0.0)
#: Box and half box where ``wrap`` is False (never read).
NO_BOX = (math.inf, math.inf, math.inf)


@jit_inline
def displacement(ax, ay, az, bx, by, bz, shift, box, half_box, wrap):
    """``a - b - shift`` per axis, each brought to the nearest image of ``box`` (with
    ``half_box``, see `cells.min_image`) where ``wrap``, and its squared length.

    Returns ``(dx, dy, dz, d2)``. ``shift``, ``box`` and ``half_box`` are 3-tuples (or
    arrays of three) of float64.
    """
    dx = (ax - bx) - shift[0]
    dy = (ay - by) - shift[1]
    dz = (az - bz) - shift[2]
    if wrap:
        dx = min_image(dx, box[0], half_box[0])
        dy = min_image(dy, box[1], half_box[1])
        dz = min_image(dz, box[2], half_box[2])
    return dx, dy, dz, dx * dx + dy * dy + dz * dz
