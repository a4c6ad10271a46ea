"""The engine of the dynamic hash: the interface `DynamicHash` calls, the CPU engine, and
the registry of engines.

`DynamicHash` validates its input, keeps the ids (`_ids.IdRegistry`), calls its engine and
wraps the results; the engine holds the objects in slots and answers the queries with
slots. `DynamicEngine` writes down every call the class makes, with arguments already
validated and in canonical form: coordinates padded to three axes (unused axes 0),
float64, C-contiguous; slots int64 (an int for one object); filter bits Python ints in
``[0, 2**32)``. An engine never sees an id: what it needs of them to order its results
deterministically comes down as values, a key per slot (``keys``: the integer ids when
every id is one, else the slots). Another engine (one on a GPU, say) implements the same
calls and takes one entry in `ENGINES`, which ``DynamicHash(..., engine=name)`` picks from,
with no change to `DynamicHash`.

Every check happens before the engine is called: the slots it is given are those of
objects it holds (or, for inserts, it chooses them). `DynamicHash` holds its lock around
every call, so an engine needs no lock of its own; pickling goes through its
``__getstate__`` and ``__setstate__``, called under that lock.

`CpuDynamicEngine` keeps the objects in NumPy arrays and runs the numba kernels of
`_kernels/`: its storage and moves are `_storage.CpuStorage`, its pair search
`_pair_search.PairSearch`.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from .._user_functions import DYNAMIC_RAY_CALL, typed_call
from ._kernels import query as query_kernels
from ._kernels import ray as ray_kernels
from ._kernels import ray_functions as ray_function_kernels
from ._kernels import storage as storage_kernels
from ._kernels.state import NO_SPHERES
from ._pair_search import PairSearch
from ._storage import CpuStorage


class DynamicEngine(Protocol):
    """What `DynamicHash` calls on its engine (see the module docstring).

    Objects are named by their slots: int64 numbers the engine chooses at insertion
    (`insert`, `insert_many`) and that stay the object's until it is removed; a freed slot
    may be given to a new object. Every slot passed in is one the engine holds, and bulk
    slots are distinct: the caller checked.

    Shapes are given as a tuple ``(x0, y0, z0, x1, y1, z1, cx, cy, cz, r)`` of ten Python
    floats: the bounding box, then the sphere's centre and radius, with ``r = -1.0`` (and
    the centre 0) for a box or a point; in bulk as ``bounds``, float64 of shape (m, 6), the
    bounding boxes, and ``spheres``, float64 of shape (m, 4) or (0, 4) when every object
    is a box or point (`_kernels.state.NO_SPHERES`). Bulk arrays may be buffers that the
    caller reuses: the engine copies what it keeps. Arrays returned may be the engine's
    buffers, valid until its next call: the caller copies what it keeps.

    ``keys`` (int64, one per slot, at least as long as the largest slot held plus one,
    distinct over the slots held) rank ties, the smaller key first; the caller passes the
    integer ids, or the slots.
    """

    def level_counts(self) -> np.ndarray:
        """Objects per level: a new int64 array of shape (N_LEVELS,)."""

    def bounds(self, slot: int) -> np.ndarray:
        """The bounding box of the object in ``slot``: float64 of shape (6,), ``(x0, y0,
        z0, x1, y1, z1)``; possibly a view of the engine's storage, which the caller
        copies."""

    def clear(self) -> None:
        """Remove every object (every slot is free again)."""

    def insert(self, shape: tuple, category: int, mask: int) -> int:
        """Add an object; returns its slot.

        Parameters
        ----------
        shape : tuple of 10 float
            See the class docstring.
        category, mask : int
            Filter bits.
        """

    def insert_many(self, bounds: np.ndarray, spheres: np.ndarray, categories: np.ndarray,
                    masks: np.ndarray) -> np.ndarray:
        """Add many objects; returns their slots, int64 of shape (m,), in the order given.

        Parameters
        ----------
        bounds : ndarray of float64, shape (m, 6)
        spheres : ndarray of float64, shape (m, 4) or (0, 4)
        categories, masks : ndarray of int64, shape (m,)
        """

    def move_box(self, slot: int, x0: float, y0: float, z0: float, x1: float, y1: float,
                 z1: float) -> None:
        """Give the object in ``slot`` the box (or point) ``x0 .. z1``: the single move of
        a point or a box, which the CPU engine buffers (it must look, to every later call,
        as if it had been applied at once)."""

    def move(self, slot: int, shape: tuple) -> None:
        """Give the object in ``slot`` the shape ``shape``."""

    def move_many(self, slots: np.ndarray, bounds: np.ndarray, spheres: np.ndarray) -> None:
        """Give many objects new shapes.

        Parameters
        ----------
        slots : ndarray of int64, shape (m,)
            Distinct; not to be written to.
        bounds : ndarray of float64, shape (m, 6)
        spheres : ndarray of float64, shape (m, 4) or (0, 4)
        """

    def remove(self, slot: int) -> None:
        """Remove the object in ``slot``."""

    def remove_many(self, slots: np.ndarray) -> None:
        """Remove many objects (distinct int64 slots of shape (m,), not to be written
        to)."""

    def query(self, kind: int, query: np.ndarray, mask: int) -> np.ndarray:
        """Slots of the objects that pass a local query and the filter ``mask``.

        Parameters
        ----------
        kind : int
            `_kernels.query.KIND_CELL`, ``KIND_BOX`` or ``KIND_BALL``.
        query : ndarray of float64, shape (7,)
            ``(x0, y0, z0, x1, y1, z1, r)``: a position twice (a cell query), a box, or a
            ball's centre twice and its radius.
        mask : int

        Returns
        -------
        ndarray of int64, shape (n,)
            In the order of the engine's walk (the caller sorts).
        """

    def query_knn(self, point: np.ndarray, k: int, mask: int,
                  keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` objects nearest to ``point`` (float64 of shape (3,)), ``k`` at least 1
        and at most the number of objects (or 1); see `DynamicHash.query_knn`.

        Returns
        -------
        keys : ndarray of int64, shape (n,)
            ``keys[slot]`` of the objects found: the one value of the engine's answers
            that is not a slot, since the ranking by key ends in a heap of keys, and keys
            tell the objects apart (`_ids.IdRegistry.ids_of_keys` turns them into ids).
        distances : ndarray of float64, shape (n,)
            Nearest first, ties by the smaller key, ``n <= k``.
        """

    def query_ray(self, origin: np.ndarray, direction: np.ndarray, max_distance: float,
                  mask: int, all_hits: bool, keys: np.ndarray, fn=None,
                  args: tuple = ()) -> tuple[np.ndarray, np.ndarray]:
        """Objects hit by the ray from ``origin`` along the unit vector ``direction`` (each
        float64 of shape (3,)) up to ``max_distance``; see `DynamicHash.query_ray`.

        ``fn`` (a numba dispatcher checked to return a bool for ``fn(0, key, distance,
        *args)``, ``all_hits`` then False) is offered the hits in order, nearest first,
        ties by the smaller key, as ``fn(0, keys[slot], distance, *args)``, up to the
        first it accepts, which is the one hit returned (the caller passes the integer ids
        as ``keys``).

        Returns
        -------
        slots : ndarray of int64, shape (n,)
        distances : ndarray of float64, shape (n,)
            Ordered by distance, ties by the smaller ``keys[slot]``; one hit or none
            unless ``all_hits``.
        """

    def query_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every pair of overlapping objects that pass each other's filters, once, as
        slots in regions, in an order that does not depend on the thread count.

        Returns
        -------
        pairs : ndarray of int64, shape (n_regions * per_region, 2)
            Region ``c`` in rows ``c * per_region`` on (an engine with one region: all of
            them).
        counts : ndarray of int64, shape (n_regions,)
            The pairs of each region: ``pairs[c * per_region : c * per_region +
            counts[c]]``.
        """

    def __getstate__(self) -> dict:
        """The engine's whole state, buffered changes applied, for pickling."""

    def __setstate__(self, state: dict) -> None:
        """Restore a state from `__getstate__` into an engine made by ``__new__``."""


class CpuDynamicEngine(CpuStorage):
    """`DynamicEngine` on the CPU: NumPy arrays and the numba kernels of `_kernels/`.

    Parameters
    ----------
    cell_size : float
        Edge of the cells of level 0.
    n_dims : int
        1, 2 or 3: the nearest-object search walks rings of cells in these axes only.
    capacity : int
        Slots allocated up front.
    """

    def __init__(self, cell_size: float, n_dims: int, capacity: int) -> None:
        self._n_dims = n_dims
        super().__init__(cell_size, capacity)

    def level_counts(self) -> np.ndarray:
        self._apply_moves()
        return self._level_count.copy()

    def bounds(self, slot: int) -> np.ndarray:
        self._apply_moves()
        return self._bounds[slot]

    # ------------------------------------------------------------------ changes
    def insert(self, shape: tuple, category: int, mask: int) -> int:
        self._apply_moves()
        slots = self._take_slots(1)
        self._place_new(slots, np.array([shape[:6]]),
                        np.array([shape[6:]]) if shape[9] >= 0 else NO_SPHERES, category, mask)
        self._commit_slots(slots)
        return int(slots[0])

    def insert_many(self, bounds: np.ndarray, spheres: np.ndarray, categories: np.ndarray,
                    masks: np.ndarray) -> np.ndarray:
        self._apply_moves()
        slots = self._take_slots(bounds.shape[0])
        self._place_new(slots, bounds, spheres, categories, masks)
        self._commit_slots(slots)
        return slots

    def move(self, slot: int, shape: tuple) -> None:
        self._apply_moves()
        if storage_kernels.place_one(self._objects, self._cells, self._level_cells, self._status,
                                     slot, shape):
            self._changed[slot] = 1

    def move_many(self, slots: np.ndarray, bounds: np.ndarray, spheres: np.ndarray) -> None:
        self._apply_moves()
        self._move_rows(slots, bounds, spheres)

    def remove(self, slot: int) -> None:
        self._apply_moves()
        self._release(np.array([slot], np.int64))

    def remove_many(self, slots: np.ndarray) -> None:
        self._apply_moves()
        self._release(slots)

    # ------------------------------------------------------------------ queries
    def query(self, kind: int, query: np.ndarray, mask: int) -> np.ndarray:
        self._ensure_linked()
        n = query_kernels.query_slots(self._objects, self._cells, kind, query, mask, self._out)
        return self._out[:n]

    def query_knn(self, point: np.ndarray, k: int, mask: int,
                  keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self._ensure_linked()
        heap_distance = np.empty(k)
        heap_key = np.empty(k, dtype=np.int64)
        n = query_kernels.knn_query(self._objects, self._cells, keys, point, mask,
                                    self._n_dims, heap_distance, heap_key)
        return heap_key[:n], heap_distance[:n]

    def query_ray(self, origin: np.ndarray, direction: np.ndarray, max_distance: float,
                  mask: int, all_hits: bool, keys: np.ndarray, fn=None,
                  args: tuple = ()) -> tuple[np.ndarray, np.ndarray]:
        self._ensure_linked()
        self._ray_count += 1
        cast = (origin, direction, max_distance, mask, not all_hits, self._ray_count)
        if fn is not None:
            n = typed_call(fn, args, DYNAMIC_RAY_CALL, ray_function_kernels.ray_function_hit,
                           self._objects, self._cells, self._level_cells, keys, cast,
                           self._buffers, fn, args)
            return self._out[:n], self._out_distances[:n].copy()
        n = ray_kernels.ray_hits(self._objects, self._cells, self._level_cells, keys, cast,
                                 self._buffers, None, ())
        slots = self._out[:n].copy()
        distances = self._out_distances[:n].copy()
        order = np.lexsort((keys[slots], distances))
        return slots[order], distances[order]

    def query_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        self._apply_moves()
        search = self._pair_search
        n_objects = len(self)
        if search is None:
            search = self._pair_search = PairSearch(n_objects)
        return search.find(self._objects, self._cells, self._changed, n_objects)


#: The engines `DynamicHash` can run, by the name its ``engine`` argument gives.
ENGINES: dict[str, type[DynamicEngine]] = {
    "cpu": CpuDynamicEngine,
}


def new_engine(engine: str, cell_size: float, n_dims: int, capacity: int) -> DynamicEngine:
    """The engine named ``engine`` (a key of `ENGINES`) of a new `DynamicHash` of
    validated ``cell_size``, ``n_dims`` and ``capacity`` (slots to allocate up front)."""
    if not isinstance(engine, str) or engine not in ENGINES:
        raise ValueError(f"`engine` must be one of {tuple(ENGINES)}; got {engine!r}.")
    return ENGINES[engine](cell_size, n_dims, capacity)
