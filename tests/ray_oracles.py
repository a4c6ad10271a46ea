"""Brute-force references for rays: the cells a segment passes through (exact rationals) and
ray-sphere intersection over every sphere (plain NumPy, the kernels' arithmetic).

Ray-sphere arithmetic, as in ``grid/_kernels/ray.py``: the direction is divided by its largest
component and then by its norm ``sqrt(dx*dx + dy*dy + dz*dz)`` once; per sphere
``m = origin - center`` per axis and ``c = (mx*mx + my*my + mz*mz) - r*r``; ``c <= 0`` (the
origin in the closed ball) is a hit at ``t = 0``; otherwise ``b = mx*dx + my*dy + mz*dz``,
``q = m - b*d`` per axis and ``disc = r*r - (qx*qx + qy*qy + qz*qz)``, and the ray hits when
``b < 0`` and ``disc >= 0``, at ``t = c / (sqrt(disc) - b)``; a sphere of radius 0 is a
point, hit where ``-m / d`` is the same on every axis. A hit counts when
``t <= max_distance``; NaN (overflowed squares) never does. Same operations in the same
order, so exact inputs agree bit for bit.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

#: Largest number of (ray, sphere) entries computed at once.
CHUNK_ELEMENTS = 1 << 20


# ---------------------------------------------------------------------- cells
def segment_cells(u_start, u_rate, t_lo, t_hi):
    """Cells the segment ``u(t) = u_start + t * u_rate``, ``t`` in ``[t_lo, t_hi]``, spends a
    positive length of ``t`` in, in order, with their exact intervals.

    The cell of a position is ``floor(u)`` per axis (cells are half-open ``[c, c + 1)``).
    Arguments are floats converted exactly to rationals. Returns a list of
    ``(cell tuple, t_enter Fraction, t_exit Fraction)``.
    """
    u0 = [Fraction(float(x)) for x in u_start]
    du = [Fraction(float(x)) for x in u_rate]
    lo, hi = Fraction(float(t_lo)), Fraction(float(t_hi))
    if lo >= hi:
        return []
    breaks = {lo, hi}
    for axis in range(3):
        if du[axis] == 0:
            continue
        ends = sorted((u0[axis] + lo * du[axis], u0[axis] + hi * du[axis]))
        for face in range(math.ceil(ends[0]), math.floor(ends[1]) + 1):
            t = (face - u0[axis]) / du[axis]
            if lo < t < hi:
                breaks.add(t)
    times = sorted(breaks)
    result = []
    for a, b in zip(times[:-1], times[1:], strict=True):
        mid = (a + b) / 2
        cell = tuple(math.floor(u0[axis] + mid * du[axis]) for axis in range(3))
        result.append((cell, a, b))
    return result


# ---------------------------------------------------------------------- spheres
def unit_directions(directions3):
    """Directions divided by their largest component, then by their norms, as the public
    layer does (shape (m, 3))."""
    d = np.asarray(directions3, dtype=np.float64)
    d = d / np.abs(d).max(axis=1)[:, np.newaxis]
    norm = np.sqrt(d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2])
    return d / norm[:, np.newaxis]


def ray_sphere_times(origins3, units3, centers3, radii, max_distance):
    """(m, n) hit parameters of every ray with every sphere; ``inf`` where none.

    ``units3`` are the unit directions (`unit_directions`); ``max_distance`` is a scalar or
    one per ray (``inf``: no limit).
    """
    o = np.asarray(origins3, dtype=np.float64)
    d = np.asarray(units3, dtype=np.float64)
    p = np.asarray(centers3, dtype=np.float64)
    r = np.asarray(radii, dtype=np.float64)
    limit = np.broadcast_to(np.asarray(max_distance, dtype=np.float64), (o.shape[0],))
    step = max(1, CHUNK_ELEMENTS // max(p.shape[0], 1))
    if o.shape[0] > step:
        return np.concatenate([
            ray_sphere_times(o[i:i + step], d[i:i + step], p, r, limit[i:i + step])
            for i in range(0, o.shape[0], step)
        ])
    mx = o[:, np.newaxis, 0] - p[np.newaxis, :, 0]
    my = o[:, np.newaxis, 1] - p[np.newaxis, :, 1]
    mz = o[:, np.newaxis, 2] - p[np.newaxis, :, 2]
    c = (mx * mx + my * my + mz * mz) - (r * r)[np.newaxis, :]
    dx, dy, dz = d[:, 0:1], d[:, 1:2], d[:, 2:3]
    b = mx * dx + my * dy + mz * dz
    qx, qy, qz = mx - b * dx, my - b * dy, mz - b * dz
    disc = (r * r)[np.newaxis, :] - (qx * qx + qy * qy + qz * qz)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = c / (np.sqrt(disc) - b)
    t = np.where(c <= 0, 0.0, np.where((b < 0) & (disc >= 0), t, np.inf))
    # Radius 0: a point, on the ray where its parameter -m / d is the same on every axis
    # with d != 0, and m is 0 on the others (the kernels' `point_on_ray`).
    axis_t, on_line = [], np.ones_like(c, dtype=bool)
    for m, dm in ((mx, dx), (my, dy), (mz, dz)):
        with np.errstate(invalid="ignore", divide="ignore"):
            axis_t.append(np.where(dm != 0, -m / dm, np.nan))
        on_line &= (dm != 0) | (m == 0)
    with np.errstate(invalid="ignore"):
        t_point = np.fmax(np.fmax(axis_t[0], axis_t[1]), axis_t[2])
        on_line &= t_point == np.fmin(np.fmin(axis_t[0], axis_t[1]), axis_t[2])
        point_hit = np.where(on_line & (b < 0) & (t_point >= 0), t_point, np.inf)
    t = np.where((r == 0)[np.newaxis, :] & (c > 0), point_hit, t)
    return np.where(t <= limit[:, np.newaxis], t, np.inf)


def first_hits(times):
    """``(indices, distances)`` of the first hit per row of ``times``, ties by smaller index;
    -1 and ``inf`` for rows without one."""
    if times.shape[1] == 0:
        m = times.shape[0]
        return np.full(m, -1, np.int64), np.full(m, np.inf)
    indices = np.argmin(times, axis=1)  # the first minimum: the smallest index on ties
    distances = times[np.arange(times.shape[0]), indices]
    indices = np.where(np.isfinite(distances), indices, -1)
    return indices, distances


def all_hits(times):
    """CSR ``(indptr, indices, distances)`` of every hit per row, sorted by distance, then
    by index."""
    indptr = [0]
    indices, distances = [], []
    for row in times:
        hit = np.flatnonzero(np.isfinite(row))
        order = np.lexsort((hit, row[hit]))
        indices.append(hit[order])
        distances.append(row[hit[order]])
        indptr.append(indptr[-1] + hit.size)
    if not indices:
        return np.zeros(1, np.int64), np.empty(0, np.int64), np.empty(0)
    return (np.array(indptr, np.int64), np.concatenate(indices).astype(np.int64),
            np.concatenate(distances))
