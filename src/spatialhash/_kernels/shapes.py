"""Distance and overlap tests of boxes and spheres.

Objects are rows of two arrays: ``bounds`` (``lower x, y, z, upper x, y, z``, the closed
bounding box) and ``spheres`` (``centre x, y, z, radius``; a negative radius marks a box).
"""

from __future__ import annotations

from .._config import jit
from .distance import NO_BOX, NO_SHIFT, displacement


@jit
def box_distance2(px, py, pz, bounds, slot):
    """Squared distance from point ``p`` to the closed box of ``slot`` (0 inside)."""
    total = 0.0
    for axis, p in enumerate((px, py, pz)):
        lower = bounds[slot, axis]
        upper = bounds[slot, axis + 3]
        if p < lower:
            d = lower - p
        elif p > upper:
            d = p - upper
        else:
            d = 0.0
        total += d * d
    return total


@jit
def center_distance2(px, py, pz, spheres, slot):
    """Squared distance from point ``p`` to the centre of sphere ``slot``."""
    return displacement(px, py, pz, spheres[slot, 0], spheres[slot, 1], spheres[slot, 2],
                        NO_SHIFT, NO_BOX, NO_BOX, False)[3]


@jit
def shapes_overlap(bounds, spheres, a, b):
    """Whether objects ``a`` and ``b`` overlap: bounding boxes (closed), then spheres."""
    for axis in range(3):
        if bounds[a, axis] > bounds[b, axis + 3] or bounds[b, axis] > bounds[a, axis + 3]:
            return False
    radius_a = spheres[a, 3]
    radius_b = spheres[b, 3]
    if radius_a < 0.0 and radius_b < 0.0:
        return True
    if radius_a >= 0.0 and radius_b >= 0.0:
        reach = radius_a + radius_b
        return center_distance2(spheres[a, 0], spheres[a, 1], spheres[a, 2], spheres,
                                b) <= reach * reach
    if radius_a >= 0.0:
        return box_distance2(spheres[a, 0], spheres[a, 1], spheres[a, 2], bounds,
                             b) <= radius_a * radius_a
    return box_distance2(spheres[b, 0], spheres[b, 1], spheres[b, 2], bounds,
                         a) <= radius_b * radius_b
