"""The checks of a query's array arguments on the device: the caller's float32 or float64
values converted to float64 there and the checks of the host (`_validation`) folded into
a few scalars, so that only those cross to the host (`_warp_arguments`).

``values_in`` takes radii and distances, one per point or per query: what
`_validation.as_radii` checks (NaN, negative, infinite unless allowed) folds into the
largest valid value and the smallest index of an invalid one. ``in_order`` gathers
per-point values into the grid's order of points, as ``radii[order]`` does on the host,
and ``in_caller_order`` puts the grid's sorted points back in the caller's order, the
queries of ``queries=None``.
``rays_in`` and ``boxes_in`` take the rows of `Grid.query_ray` and `Grid.query_box`,
padded to three axes, with the arithmetic of `_validation.as_rays` and
`_inputs.box_inputs`, and count the rows that fail a check of theirs; the host then
raises the host's error from its own check of the same values.
"""

from __future__ import annotations

from typing import Any

import warp as wp

from ..._kernels.cells import COORDINATE_FLOOR, COORDINATE_LIMIT
from . import MODULE_OPTIONS
from .cells import wrap_coordinate

wp.set_module_options(MODULE_OPTIONS)

#: `values_in`'s ``folds``: the largest valid value, the smallest index of an invalid one.
LARGEST, FIRST_BAD = wp.constant(0), wp.constant(1)
_FLOOR = wp.constant(wp.float64(COORDINATE_FLOOR))
_LIMIT = wp.constant(wp.float64(COORDINATE_LIMIT))


@wp.kernel
def values_in(values: wp.array(dtype=Any), allow_inf: bool,
              converted: wp.array(dtype=wp.float64), folds: wp.array(dtype=wp.float64)):
    """``values`` (float32 or float64, shape (n,)) as float64 in ``converted``; a value is
    valid where it is >= 0 (NaN is not) and finite, or infinite with ``allow_inf``.
    ``folds[LARGEST]`` (from 0) takes the largest valid value, ``folds[FIRST_BAD]`` (from
    infinity) the smallest index of an invalid one, as a float64 (exact below 2**53)."""
    i = wp.tid()
    x = wp.float64(values[i])
    converted[i] = x
    if x >= wp.float64(0.0) and (allow_inf or wp.isfinite(x)):
        wp.atomic_max(folds, LARGEST, x)
    else:
        wp.atomic_min(folds, FIRST_BAD, wp.float64(i))


for _dtype in (wp.float32, wp.float64):
    wp.overload(values_in, {"values": wp.array(dtype=_dtype)})


@wp.kernel
def in_order(values: wp.array(dtype=wp.float64), order: wp.array(dtype=Any),
             ordered: wp.array(dtype=wp.float64)):
    """``ordered[s] = values[order[s]]``: per-point values in the grid's order of points
    (``order``, int32 or int64, the caller's index of each sorted point)."""
    s = wp.tid()
    ordered[s] = values[wp.int64(order[s])]


for _dtype in (wp.int32, wp.int64):
    wp.overload(in_order, {"order": wp.array(dtype=_dtype)})


@wp.kernel
def in_caller_order(points: wp.array(dtype=wp.vec3d), order: wp.array(dtype=Any),
                    own: wp.array(dtype=wp.vec3d)):
    """``own[order[s]] = points[s]``: the grid's sorted points in the caller's order."""
    s = wp.tid()
    own[wp.int64(order[s])] = points[s]


for _dtype in (wp.int32, wp.int64):
    wp.overload(in_caller_order, {"order": wp.array(dtype=_dtype)})


@wp.kernel
def rays_in(origins: wp.array2d(dtype=Any), directions: wp.array2d(dtype=Any),
            origins3: wp.array(dtype=wp.vec3d), units3: wp.array(dtype=wp.vec3d),
            n_bad: wp.array(dtype=wp.int64)):
    """Rays of (m, d) float32 or float64 ``origins`` and ``directions`` as float64
    vectors: the origins padded, the directions divided by their largest magnitude, then
    by their norm ``sqrt(x*x + y*y + z*z)`` (`_validation.as_rays`); ``n_bad`` counts the
    rays the host refuses: a coordinate NaN or infinite, an origin beyond the
    coordinate limit or non-zero below its floor (`_validation.check_magnitude`), a zero
    direction."""
    i = wp.tid()
    d = origins.shape[1]
    origin = wp.vec3d()
    direction = wp.vec3d()
    scale = wp.float64(0.0)
    bad = False
    for axis in range(3):
        if axis < d:
            o = wp.float64(origins[i, axis])
            u = wp.float64(directions[i, axis])
            if not (wp.isfinite(o) and wp.isfinite(u)):
                bad = True
            elif wp.abs(o) > _LIMIT or (o != wp.float64(0.0) and wp.abs(o) < _FLOOR):
                bad = True
            origin[axis] = o
            direction[axis] = u
            scale = wp.max(scale, wp.abs(u))
    if bad or scale == wp.float64(0.0):
        wp.atomic_add(n_bad, 0, wp.int64(1))
        return
    x = direction[0] / scale
    y = direction[1] / scale
    z = direction[2] / scale
    norm = wp.sqrt(x * x + y * y + z * z)
    origins3[i] = origin
    units3[i] = wp.vec3d(x / norm, y / norm, z / norm)


for _dtype in (wp.float32, wp.float64):
    wp.overload(rays_in, {"origins": wp.array2d(dtype=_dtype),
                          "directions": wp.array2d(dtype=_dtype)})


@wp.kernel
def boxes_in(lower: wp.array2d(dtype=Any), upper: wp.array2d(dtype=Any), box: wp.vec3d,
             lower3: wp.array(dtype=wp.vec3d), upper3: wp.array(dtype=wp.vec3d),
             width: wp.array(dtype=wp.vec3d), n_bad: wp.array(dtype=wp.int64)):
    """Boxes of (m, d) float32 or float64 ``lower`` and ``upper`` corners as float64
    vectors, padded: ``width = upper - lower`` (infinite where it overflows), ``lower``
    wrapped into ``box`` on its periodic axes (`_inputs.box_inputs`); ``n_bad`` counts
    the boxes the host refuses: a coordinate NaN or infinite, ``lower > upper``."""
    i = wp.tid()
    d = lower.shape[1]
    low = wp.vec3d()
    high = wp.vec3d()
    wide = wp.vec3d()
    bad = False
    for axis in range(3):
        if axis < d:
            a = wp.float64(lower[i, axis])
            b = wp.float64(upper[i, axis])
            if not (wp.isfinite(a) and wp.isfinite(b)) or a > b:
                bad = True
            else:
                low[axis] = wrap_coordinate(a, box[axis])
                high[axis] = b
                wide[axis] = b - a
    if bad:
        wp.atomic_add(n_bad, 0, wp.int64(1))
        return
    lower3[i] = low
    upper3[i] = high
    width[i] = wide


for _dtype in (wp.float32, wp.float64):
    wp.overload(boxes_in, {"lower": wp.array2d(dtype=_dtype), "upper": wp.array2d(dtype=_dtype)})
