"""The engine of the dynamic hash: the interface `DynamicHash` calls, and the CPU engine.

`DynamicHash` validates its input, calls its engine and wraps the results; the engine
holds the objects and answers the queries. `DynamicEngine` writes down every call the
class makes, with arguments already validated and in canonical form: coordinates padded
to three axes (unused axes 0), float64, C-contiguous; bulk ids int64; filter bits Python
ints in ``[0, 2**32)``. Another engine (one on a GPU, say) implements the same calls and
is chosen in `new_engine`, with no change to `DynamicHash`.

What depends on the contents is the engine's to check, before it changes anything: unknown
ids raise `UnknownIdError`, repeated or present ids `ValueError`, unhashable ids
`TypeError`, with the messages of `_validation.py`. `DynamicHash` holds its lock around
every call, so an engine needs no lock of its own; pickling goes through its
``__getstate__`` and ``__setstate__``, called under that lock.

`CpuDynamicEngine` keeps the objects in NumPy arrays and runs the numba kernels of
`_kernels/`: its storage, ids and moves are `_storage.CpuStorage`, its pair search
`_pair_search.PairSearch`, its contact events `_contacts.ContactState`.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from .._user_functions import DYNAMIC_RAY_CALL, typed_call
from . import _validation as check
from ._contacts import ContactState
from ._kernels import contacts as contact_kernels
from ._kernels import pairs as pairs_kernels
from ._kernels import query as query_kernels
from ._kernels import ray as ray_kernels
from ._kernels import ray_functions as ray_function_kernels
from ._kernels import storage as storage_kernels
from ._kernels.state import NO_SPHERES
from ._pair_search import PairSearch
from ._storage import CpuStorage, int_id


class DynamicEngine(Protocol):
    """What `DynamicHash` calls on its engine (see the module docstring).

    Shapes are given as a tuple ``(x0, y0, z0, x1, y1, z1, cx, cy, cz, r)`` of ten Python
    floats: the bounding box, then the sphere's centre and radius, with ``r = -1.0`` (and
    the centre 0) for a box or a point; in bulk as ``bounds``, float64 of shape (m, 6), the
    bounding boxes, and ``spheres``, float64 of shape (m, 4) or (0, 4) when every object
    is a box or point (`_kernels.state.NO_SPHERES`). Bulk arrays may be buffers that the
    caller reuses: the engine copies what it keeps. Ids come back as in `DynamicHash`: an
    int64 array when every id stored is an integer, else an object array.
    """

    def __len__(self) -> int:
        """The number of objects stored."""

    def __contains__(self, id) -> bool:
        """Whether ``id`` is stored; raises `TypeError` for an unhashable ``id``."""

    def ids(self) -> list:
        """Every id stored, in the order they were inserted."""

    def level_counts(self) -> np.ndarray:
        """Objects per level: a new int64 array of shape (N_LEVELS,)."""

    def bounds(self, id) -> np.ndarray:
        """The bounding box of object ``id``: float64 of shape (6,), ``(x0, y0, z0, x1,
        y1, z1)``; possibly a view of the engine's storage, which the caller copies."""

    def clear(self) -> None:
        """Remove every object."""

    def insert(self, id, shape: tuple, category: int, mask: int) -> None:
        """Add object ``id`` (hashable, not stored: the caller checked it with ``in``).

        Parameters
        ----------
        id : hashable
        shape : tuple of 10 float
            See the class docstring.
        category, mask : int
            Filter bits.
        """

    def insert_many(self, ids: np.ndarray, bounds: np.ndarray, spheres: np.ndarray,
                    categories: np.ndarray, masks: np.ndarray) -> None:
        """Add many objects; raises `ValueError` (`_validation.present_ids`) when an id is
        stored already or repeated.

        Parameters
        ----------
        ids : ndarray of int64, shape (m,)
        bounds : ndarray of float64, shape (m, 6)
        spheres : ndarray of float64, shape (m, 4) or (0, 4)
        categories, masks : ndarray of int64, shape (m,)
        """

    def move_box(self, id, x0: float, y0: float, z0: float, x1: float, y1: float,
                 z1: float) -> None:
        """Give object ``id`` the box (or point) ``x0 .. z1``: the single move of a point or
        a box, which the CPU engine buffers (it must look, to every later call, as if it
        had been applied at once). Raises `UnknownIdError` for an unknown ``id``."""

    def move(self, id, shape: tuple) -> None:
        """Give object ``id`` (stored: the caller checked it) the shape ``shape``."""

    def move_many(self, ids: np.ndarray, bounds: np.ndarray, spheres: np.ndarray) -> None:
        """Give many objects new shapes; raises `UnknownIdError` for unknown ids and
        `ValueError` (`_validation.repeated_ids`) for repeated ones.

        Parameters
        ----------
        ids : ndarray of int64, shape (m,)
        bounds : ndarray of float64, shape (m, 6)
        spheres : ndarray of float64, shape (m, 4) or (0, 4)
        """

    def remove(self, id) -> None:
        """Remove object ``id``; raises `UnknownIdError` for an unknown ``id``."""

    def remove_many(self, ids: np.ndarray) -> None:
        """Remove many objects (int64 ids of shape (m,)); raises as `move_many`."""

    def query(self, kind: int, query: np.ndarray, mask: int) -> np.ndarray:
        """Ids of the objects that pass a local query and the filter ``mask``.

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
        ndarray, shape (n,)
            int64 ids sorted ascending when every id is an integer, else objects.
        """

    def query_knn(self, point: np.ndarray, k: int, mask: int) -> tuple:
        """The ``k`` objects nearest to ``point`` (float64 of shape (3,)), ``k`` at least 1
        and at most the number of objects (or 1); see `DynamicHash.query_knn`.

        Returns
        -------
        ids : ndarray, shape (n,)
        distances : ndarray of float64, shape (n,)
            Nearest first, ``n <= k``.
        """

    def query_ray(self, origin: np.ndarray, direction: np.ndarray, max_distance: float,
                  mask: int, all_hits: bool, fn=None, args: tuple = ()) -> tuple:
        """Objects hit by the ray from ``origin`` along the unit vector ``direction`` (each
        float64 of shape (3,)) up to ``max_distance``; see `DynamicHash.query_ray`.

        ``fn`` (a numba dispatcher checked to return a bool for ``fn(0, id, distance,
        *args)``, ``all_hits`` then False) is offered the hits in order, nearest first,
        ties by the smaller id, up to the first it accepts, which is the one hit returned.
        It needs integer ids: the engine raises `TypeError` when it holds any other.

        Returns
        -------
        ids : ndarray, shape (n,)
        distances : ndarray of float64, shape (n,)
            Ordered by distance, ties by id (integer ids) or slot; one hit or none unless
            ``all_hits``.
        """

    def query_pairs(self) -> np.ndarray:
        """Every pair of overlapping objects that pass each other's filters, once: ids of
        shape (n_pairs, 2), with integer ids the smaller first; rows in an order that does
        not depend on the thread count."""

    def query_contacts(self) -> tuple:
        """The pairs of `query_pairs` that began and those that ended since the last call
        of this method (every pair began at the first); see `DynamicHash.query_contacts`.

        Returns
        -------
        began, ended : ndarray, shape (k, 2)
            int64 when every id stored now and at the last call is an integer, each row
            the smaller id first, rows ascending; else objects, in an order that depends
            only on the calls made.
        """

    def __getstate__(self) -> dict:
        """The engine's whole state, buffered changes applied, for pickling."""

    def __setstate__(self, state: dict) -> None:
        """Restore a state from `__getstate__` into an engine made by ``__new__``."""


def new_engine(cell_size: float, n_dims: int, capacity: int) -> DynamicEngine:
    """The engine of a new `DynamicHash` of validated ``cell_size``, ``n_dims`` and
    ``capacity`` (slots to allocate up front)."""
    return CpuDynamicEngine(cell_size, n_dims, capacity)


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

    def bounds(self, id) -> np.ndarray:
        slot = self._slot(id)
        self._apply_moves()
        return self._bounds[slot]

    # ------------------------------------------------------------------ changes
    def insert(self, id, shape: tuple, category: int, mask: int) -> None:
        self._apply_moves()
        slots = self._take_slots(1)
        self._place_new(slots, np.array([shape[:6]]),
                        np.array([shape[6:]]) if shape[9] >= 0 else NO_SPHERES, category, mask)
        self._commit_slots(slots)
        self._register([id], slots)

    def insert_many(self, ids: np.ndarray, bounds: np.ndarray, spheres: np.ndarray,
                    categories: np.ndarray, masks: np.ndarray) -> None:
        bad = storage_kernels.ids_repeated(self._id_keys, self._id_values, ids)
        if bad.size == 0 and self._n_other_ids:
            slot_of = self._slot_of
            bad = np.array([i for i, id in enumerate(ids.tolist()) if id in slot_of], np.int64)
        if bad.size:
            raise check.present_ids("ids", ids[bad].tolist())
        self._apply_moves()
        slots = self._take_slots(ids.shape[0])
        self._place_new(slots, bounds, spheres, categories, masks)
        self._commit_slots(slots)
        self._register_ints(ids, slots)

    def move(self, id, shape: tuple) -> None:
        slot = self._slot_of[id]
        self._apply_moves()
        if storage_kernels.place_one(self._objects, self._cells, self._level_cells, self._status,
                                     slot, shape):
            self._changed[slot] = 1

    def move_many(self, ids: np.ndarray, bounds: np.ndarray, spheres: np.ndarray) -> None:
        slots = self._slots_of(ids)
        self._apply_moves()
        self._move_rows(slots, bounds, spheres)

    def remove(self, id) -> None:
        slot = self._slot(id)
        self._apply_moves()
        slots = np.array([slot], np.int64)
        storage_kernels.release_many(self._objects, self._cells, self._status, self._changed,
                                     slots)
        self._unregister(slots)

    def remove_many(self, ids: np.ndarray) -> None:
        slots = self._slots_of(ids)
        self._apply_moves()
        self._release(slots)

    # ------------------------------------------------------------------ queries
    def query(self, kind: int, query: np.ndarray, mask: int) -> np.ndarray:
        self._ensure_linked()
        n = query_kernels.query_slots(self._objects, self._cells, kind, query, mask, self._out)
        return self._ids_of(self._out[:n].copy())

    def query_knn(self, point: np.ndarray, k: int, mask: int) -> tuple:
        self._ensure_linked()
        heap_distance = np.empty(k)
        heap_key = np.empty(k, np.int64)
        keys = self._tie_keys()
        n = query_kernels.knn_query(self._objects, self._cells, keys, point, mask,
                                    self._n_dims, heap_distance, heap_key)
        found = heap_key[:n]
        if self._n_other_ids == 0:
            ids = found.copy()
        else:
            ids = np.empty(n, dtype=object)
            for i, slot in enumerate(found.tolist()):
                ids[i] = self._id_of[slot]
        return ids, heap_distance[:n].copy()

    def query_ray(self, origin: np.ndarray, direction: np.ndarray, max_distance: float,
                  mask: int, all_hits: bool, fn=None, args: tuple = ()) -> tuple:
        if fn is not None and self._n_other_ids:
            other = next(id for id in self._slot_of if int_id(id) is None)
            raise TypeError(
                "`fn` needs integer ids (it is called with the id as an int64); got a hash "
                f"holding ids of other types, such as {other!r:.80}. Give the objects "
                "integer ids, or map yours to integers."
            )
        self._ensure_linked()
        self._ray_count += 1
        keys = self._tie_keys()
        cast = (origin, direction, max_distance, mask, not all_hits, self._ray_count)
        if fn is not None:
            n = typed_call(fn, args, DYNAMIC_RAY_CALL, ray_function_kernels.ray_function_hit,
                           self._objects, self._cells, self._level_cells, keys, cast,
                           self._buffers, fn, args)
            return self._slot_key[self._out[:n]], self._out_distances[:n].copy()
        n = ray_kernels.ray_hits(self._objects, self._cells, self._level_cells, keys, cast,
                                 self._buffers)
        slots = self._out[:n].copy()
        distances = self._out_distances[:n].copy()
        order = np.lexsort((keys[slots], distances))
        slots = slots[order]
        if self._n_other_ids == 0:
            ids = self._slot_key[slots]
        else:
            ids = np.empty(n, dtype=object)
            for i, slot in enumerate(slots.tolist()):
                ids[i] = self._id_of[slot]
        return ids, distances[order]

    def _slot_pairs(self) -> tuple:
        """Every pair of overlapping objects once, as slots in the chunks' regions
        (`_pair_search.PairSearch.find`)."""
        self._apply_moves()
        search = self._pair_search
        if search is None:
            search = self._pair_search = PairSearch(len(self._slot_of))
        return search.find(self._objects, self._cells, self._changed, len(self._slot_of))

    def query_pairs(self) -> np.ndarray:
        pairs, counts = self._slot_pairs()
        if self._n_other_ids == 0:
            return pairs_kernels.chunk_pairs_as_ids(pairs, counts, self._slot_key)
        per_chunk = pairs.shape[0] // pairs_kernels.N_CHUNKS
        slots = np.concatenate([pairs[c * per_chunk : c * per_chunk + counts[c]]
                                for c in range(pairs_kernels.N_CHUNKS)])
        out = np.empty((len(slots), 2), dtype=object)
        id_of = self._id_of
        for i, (a, b) in enumerate(slots.tolist()):
            out[i, 0] = id_of[a]
            out[i, 1] = id_of[b]
        return out

    def query_contacts(self) -> tuple:
        pairs, counts = self._slot_pairs()
        keys = contact_kernels.sorted_pair_keys(pairs, counts, self._meta.shape[0])
        state = self._contacts
        if state is None:
            state = self._contacts = ContactState()
        return state.update(keys, self._slot_of, self._id_of, self._slot_key,
                            self._n_other_ids == 0)
