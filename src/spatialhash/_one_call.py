"""`query_pairs`, the one-call form of a pair search: a grid sized for the search, then
its pairs."""

from __future__ import annotations

import math
import numbers

from ._results import Pairs
from .grid import Grid


def query_pairs(points, r=None, *, radii=None, box=None, periodic=None,
                return_distances=False, n_threads=None) -> Pairs:
    """Every pair of ``points`` within ``r`` (or within the sum of their ``radii``).

    A one-call form of ``Grid(points, cell_size=reach, ...).query_pairs(...)`` with the cell
    size set to the search reach (``r``, or ``2 * max(radii)``), raised where the points
    span more cells of that size than a grid may have (a tiny ``r`` over a wide cloud) and
    made finite for an infinite reach. See `Grid.query_pairs`.
    """
    from ._validation import as_float, as_points, as_radii

    coords = as_points(points)
    if radii is not None:
        # Validated here first: the cell size is derived from the largest radius.
        radii = as_radii(radii, "radii", coords.shape[0])
        reach = 2.0 * float(radii.max()) if radii.size else 0.0
    elif isinstance(r, numbers.Real) and not isinstance(r, bool) and math.isfinite(
            as_float(r, "r")):
        reach = float(r)
    else:
        reach = 0.0  # Grid.query_pairs reports what is wrong with r
    cell_size = _cell_size_for_reach(coords, reach, box, periodic) if reach > 0 else None
    grid = Grid(coords, cell_size, box=box, periodic=periodic, n_threads=n_threads)
    return grid.query_pairs(r, radii=radii, return_distances=return_distances)


def _cell_size_for_reach(coords, reach: float, box, periodic) -> float:
    """``reach`` as a cell size, at least the smallest size whose cells the points' spread
    (or a periodic box) does not make too many (half of `grid.MAX_CELLS_PER_AXIS` per
    axis), and finite: any cell size finds the same pairs, a small one more slowly."""
    import numpy as np

    from ._kernels.points import pad_with_bounds
    from ._validation import as_box
    from .grid._build import MAX_CELLS_PER_AXIS

    lowest, highest, _, _ = pad_with_bounds(np.ascontiguousarray(coords),
                                         np.empty((0, 3)))
    lengths, _ = as_box(box, periodic, coords.shape[1])
    widest = max(float((highest - lowest).max()),
                 float(lengths[np.isfinite(lengths)].max(initial=0.0)))
    smallest = widest / (0.5 * MAX_CELLS_PER_AXIS)
    if math.isinf(reach):
        return widest if widest > 0 else 1.0
    return max(reach, smallest)
