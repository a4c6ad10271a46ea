"""The host side of the checks of a query's array arguments on a Warp device
(``_warp_kernels/arguments.py``): the caller's array read where it lies, converted and
checked there, and only the folded scalars (and, for an error, the one bad value that
names it) copied to the host. The errors are the host's (`_validation`), word for word.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .._validation import raise_bad_radius
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


def in_order(values: wp.array, order: wp.array) -> wp.array:
    """Per-point float64 ``values`` in the grid's order of points (``order``: the caller's
    index of each sorted point), a new array on their device."""
    n = order.shape[0]
    ordered = device_empty(n, wp.float64, values.device, f"the {n:,} values in order")
    if n:
        with wp.ScopedLogLevel(wp.LOG_WARNING):
            wp.launch(kernels.in_order, n, (values, order, ordered), device=values.device)
    return ordered
