"""The host side of the checks of a query's array arguments on a Warp device
(``_warp_kernels/arguments.py``): the caller's array read where it lies, converted and
checked there, and only the folded scalars (and, for an error, the one bad value that
names it) copied to the host. The errors are the host's (`_validation`), word for word:
radii and distances name their first bad value through the host's message
(`_validation.raise_bad_radius`); rays and boxes, whose checks span two arrays, are
copied to the host where some row fails, and the host's own check raises (as the
points' `_warp_build.device_points` do).
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .._validation import as_bounds, as_rays, raise_bad_radius
from ._warp_kernels import arguments as kernels
from ._warp_kernels.arguments import FIRST_BAD, LARGEST
from ._warp_memory import device_empty


def device_values(values: wp.array, name: str, allow_inf: bool, device
                  ) -> tuple[wp.array, float]:
    """``values``, a caller's (n,) float32 or float64 array of radii or distances on the
    Warp ``device``, as a new float64 array there and the largest (0 for none), checked
    as `_validation.as_radii` checks them (``allow_inf`` as there): the first bad value
    raises its `ValueError`."""
    n = values.shape[0]
    converted = device_empty(n, wp.float64, device, f"`{name}` of {n:,} values")
    if not n:
        return converted, 0.0
    start = np.empty(2)
    start[LARGEST], start[FIRST_BAD] = 0.0, np.inf
    folds = wp.array(start, dtype=wp.float64, device=device)
    with wp.ScopedLogLevel(wp.LOG_WARNING):
        wp.launch(kernels.values_in, n, (values, bool(allow_inf), converted, folds),
                  device=device)
    folded = folds.numpy()
    largest, first_bad = folded[LARGEST], folded[FIRST_BAD]
    if first_bad < np.inf:
        bad = int(first_bad)
        raise_bad_radius(name, converted[bad:bad + 1].numpy()[0], bad)
    return converted, float(largest)


def values_in_order(values: wp.array, order: wp.array) -> wp.array:
    """Per-point float64 ``values`` in the grid's order of points (``order``: the caller's
    index of each sorted point), a new array on their device."""
    n = order.shape[0]
    return _gathered(kernels.in_order, values, order, wp.float64,
                     f"the {n:,} values in order")


def own_points(points: wp.array, order: wp.array) -> wp.array:
    """A grid's sorted float64 vectors ``points`` (its first n, n the length of
    ``order``) in the caller's order (``order``: the caller's index of each sorted
    point), a new (n,) array on their device."""
    n = order.shape[0]
    return _gathered(kernels.in_caller_order, points, order, wp.vec3d,
                     f"the grid's {n:,} points as queries")


def _gathered(kernel, source: wp.array, order: wp.array, dtype, what: str) -> wp.array:
    """A new array of ``dtype``, one value per entry of ``order``, written by ``kernel``
    from ``source`` and ``order`` on ``source``'s device (``what`` names it if the device
    cannot hold it)."""
    n = order.shape[0]
    out = device_empty(n, dtype, source.device, what)
    if n:
        with wp.ScopedLogLevel(wp.LOG_WARNING):
            wp.launch(kernel, n, (source, order, out), device=source.device)
    return out


def device_rays(origins: wp.array, directions: wp.array, n_dims: int, device
                ) -> tuple[wp.array, wp.array]:
    """``(origins3, units3)`` of `_validation.as_rays`, as new (m,) float64 vectors on
    the Warp ``device``, of a caller's (m, n_dims) ``origins`` and ``directions`` there
    (float32 or float64, one dtype): the host's error where a ray fails its checks."""
    m = origins.shape[0]
    what = f"the {m:,} rays of query_ray"
    origins3 = device_empty(m, wp.vec3d, device, what)
    units3 = device_empty(m, wp.vec3d, device, what)
    _check_rows(kernels.rays_in, m, (origins, directions), (origins3, units3), device,
                lambda: as_rays(origins.numpy(), directions.numpy(), n_dims))
    return origins3, units3


def device_boxes(lower: wp.array, upper: wp.array, n_dims: int, box: np.ndarray, device
                 ) -> tuple[wp.array, wp.array, wp.array]:
    """``(lower3, upper3, width)`` of `_inputs.box_inputs`, as new (m,) float64 vectors
    on the Warp ``device``, of a caller's (m, n_dims) ``lower`` and ``upper`` corners
    there (float32 or float64, one dtype): the host's error where a box fails its
    checks."""
    m = lower.shape[0]
    what = f"the {m:,} boxes of query_box"
    outputs = tuple(device_empty(m, wp.vec3d, device, what) for _ in range(3))
    _check_rows(kernels.boxes_in, m, (lower, upper, wp.vec3d(*box)), outputs, device,
                lambda: as_bounds(lower.numpy(), upper.numpy(), n_dims))
    return outputs


def _check_rows(kernel, m, inputs, outputs, device, host_check) -> None:
    """Launch ``kernel`` over ``m`` rows, and where it counts a bad one, run the host's
    ``host_check`` of the same values, which raises the host's error."""
    if not m:
        return
    n_bad = wp.zeros(1, dtype=wp.int64, device=device)
    with wp.ScopedLogLevel(wp.LOG_WARNING):
        wp.launch(kernel, m, (*inputs, *outputs, n_bad), device=device)
    if n_bad.numpy()[0]:
        host_check()
        raise AssertionError("the device refused rows that the host's check accepts")
