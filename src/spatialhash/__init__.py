"""spatialhash: spatial hashing for points in 1-, 2- and 3-D.

Build a `Grid` over an (n, d) array once, then ask which pairs are closer than r, who is
near a point, the k nearest, or what lies in a box. Results are exact and match
``scipy.spatial.cKDTree`` where the query is the same.
"""

from __future__ import annotations

import math
import numbers

from ._results import Hits, KNearest, Neighbors, Pairs, RayHits
from .grid import Grid

__version__ = "0.1.0"

__all__ = [
    "DynamicHash", "Grid", "Hits", "KNearest", "Neighbors", "Pairs", "RayHits", "UnknownIdError",
    "query_pairs", "__version__",
]


#: Names loaded on first use: the dynamic hash's modules (about 40 numba kernels to
#: declare) are a fifth of ``import spatialhash``, which code using only `Grid` need not pay.
_LAZY = {"DynamicHash": "dynamic", "UnknownIdError": "dynamic"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value  # the next lookup finds it without this hook
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def query_pairs(points, r=None, *, radii=None, box=None, periodic=None,
                return_distances=False, n_threads=None) -> Pairs:
    """Every pair of ``points`` within ``r`` (or within the sum of their ``radii``).

    A one-call form of ``Grid(points, cell_size=reach, ...).query_pairs(...)`` with the cell
    size set to the search reach (``r``, or ``2 * max(radii)``). See `Grid.query_pairs`.
    """
    from ._validation import as_points, as_radii

    coords = as_points(points)
    if radii is not None:
        # Validated here first: the cell size is derived from the largest radius.
        radii = as_radii(radii, "radii", coords.shape[0])
        reach = 2.0 * float(radii.max()) if radii.size else 0.0
    elif isinstance(r, numbers.Real) and not isinstance(r, bool) and math.isfinite(r):
        reach = float(r)
    else:
        reach = 0.0  # Grid.query_pairs reports what is wrong with r
    cell_size = reach if reach > 0 else None
    grid = Grid(coords, cell_size, box=box, periodic=periodic, n_threads=n_threads)
    return grid.query_pairs(r, radii=radii, return_distances=return_distances)
