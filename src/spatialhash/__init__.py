"""spatialhash: spatial hashing for points in 1-, 2- and 3-D.

Build a `Grid` over an (n, d) array once, then ask which pairs are closer than r, who is
near a point, the k nearest, or what lies in a box. Results are exact and match
``scipy.spatial.cKDTree`` where the query is the same.
"""

from ._one_call import query_pairs
from ._results import Contacts, Hits, KNearest, Neighbors, Pairs, RayHits
from .grid import Grid
from .neighbors import NeighborList

__version__ = "0.1.0"

__all__ = [
    "Contacts", "DynamicHash", "Grid", "Hits", "KNearest", "NeighborList", "Neighbors", "Pairs",
    "RayHits", "UnknownIdError",
    "query_pairs", "__version__",
]


#: Names loaded on first use: code using only `Grid` need not import the dynamic hash's
#: modules (about 40 numba kernels to declare). ``import spatialhash`` is a little faster
#: for it (lower in 5 of 6 paired runs); the whole warm start (with numba's set-up at the
#: first build) did not move measurably.
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
