"""The checks of a query's array arguments on the device: the caller's float32 or float64
values converted to float64 there and the checks of the host (`_validation`) folded into
a few scalars, so that only those cross to the host (`_warp_arguments`).

``values_in`` takes radii and distances, one per point or per query: what
`_validation.as_radii` checks (NaN, negative, infinite unless allowed) folds into the
largest valid value and the smallest index of an invalid one. ``in_order`` gathers
per-point values into the grid's order of points, as ``radii[order]`` does on the host.
"""

from __future__ import annotations

from typing import Any

import warp as wp

from . import MODULE_OPTIONS

wp.set_module_options(MODULE_OPTIONS)

#: `values_in`'s ``folds``: the largest valid value, the smallest index of an invalid one.
LARGEST, FIRST_BAD = wp.constant(0), wp.constant(1)


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
