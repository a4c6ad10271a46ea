"""Where a ray enters a sphere: the arithmetic of every ray cast, on the batch grid and in
the dynamic hash.

Ray-sphere arithmetic (the oracle's, `tests/ray_oracles.py`): ``m = origin - center``,
``c = |m|^2 - r^2``; ``c <= 0`` (origin in the closed ball) is a hit at ``t = 0``; otherwise
``b = m . unit`` and the ray hits when ``b < 0`` and ``disc = r^2 - |m - b unit|^2 >= 0``
(tangent rays hit), at ``t = c / (sqrt(disc) - b)``: the near root written without
cancellation. ``m - b unit`` runs from the centre to the nearest point of the line; taking
``disc`` from it rather than as ``b^2 - c`` keeps a sphere far along the ray from being hit
by rounding (Haines et al., "Precision improvements for ray/sphere intersection", Ray
Tracing Gems, 2019). A sphere of radius 0 is a point, met where the ray's parameter is the
same on every axis (`point_on_ray`): ``disc = -|q|^2`` would lose a ray through it to the
rounding of ``q``. A hit counts when ``t <= max_distance``.
"""

from __future__ import annotations

import math

import numpy as np

from .._config import jit, jit_inline


@jit
def point_on_ray(mx, my, mz, dx, dy, dz):
    """Where the ray meets a point of radius 0 (``m = origin - point``), or -1.0.

    The ray parameter of the point on each axis, ``-m / d``, must be the same on every
    axis where ``d`` is not zero, and ``m`` zero on the others: the slab test of a box of
    size zero, exact where the sphere arithmetic (``disc = -|q|^2``, ``q`` rounded) would
    lose a ray through the point, such as ``(1, 1)`` through ``(5, 5)``.
    """
    t = np.nan
    for m, d in ((mx, dx), (my, dy), (mz, dz)):
        if d == 0.0:
            if m != 0.0:
                return -1.0
        else:
            axis_t = -m / d
            if not math.isnan(t) and axis_t != t:
                return -1.0
            t = axis_t
    return t if t >= 0.0 else -1.0


@jit_inline
def sphere_entry(mx, my, mz, dx, dy, dz, radius):
    """Where the ray enters the sphere (``m = origin - centre``, ``d`` the unit direction):
    0.0 from inside the closed ball, -1.0 when it misses (see the module docstring). Inlined
    into its callers: called for every candidate of a cast, as a call it cost a grid's
    all-hits casts 17% (``benchmarks/bench_ab.py``-style A/B, one thread)."""
    c = (mx * mx + my * my + mz * mz) - radius * radius
    if c <= 0.0:
        return 0.0
    # Negated tests: NaN (overflowed squares) misses.
    b = mx * dx + my * dy + mz * dz
    if not b < 0.0:
        return -1.0
    if radius == 0.0:
        hit_t = point_on_ray(mx, my, mz, dx, dy, dz)
        return hit_t if hit_t >= 0.0 else -1.0
    # Centre to the nearest point of the line.
    qx = mx - b * dx
    qy = my - b * dy
    qz = mz - b * dz
    disc = radius * radius - (qx * qx + qy * qy + qz * qz)
    if not disc >= 0.0:
        return -1.0
    return c / (math.sqrt(disc) - b)
