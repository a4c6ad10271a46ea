"""The storage of the CPU engine: slots, their growth, the ids, the bucket lists, the moves.

`CpuStorage` owns the arrays (the bundles of `_kernels/state.py`) and keeps the ids: any
hashable in a dict id -> slot, and integer ids also in an open-addressing table that the
bulk calls search in one compiled loop. `CpuDynamicEngine` (`_engine.py`) adds the calls of
`DynamicEngine` on top. Every method expects its caller to hold the hash's lock.
"""

from __future__ import annotations

import itertools

import numba
import numpy as np

from .. import _config
from . import _validation as check
from ._kernels import move as move_kernels
from ._kernels import storage as storage_kernels
from ._kernels.state import Cells, Objects, QueryBuffers
from ._kernels.storage import ENTRIES, LEVEL, META_COLUMNS, N_LEVELS

#: Cell size ratio between consecutive levels (see the package docstring).
LEVEL_RATIO = 4.0
#: Smallest capacity (slots) allocated.
MIN_CAPACITY = 64
#: Single moves buffered before they are applied (see `CpuStorage.move_box`); bounds the
#: buffer's memory when nothing reads the hash for a long time.
MOVE_BUFFER = 65_536
#: Bulk moves of more than this fraction of the objects rebuild the bucket lists lazily
#: rather than updating them in place.
RELINK_FRACTION = 0.25
#: `move_many` moves objects on all threads from this many on, when the bucket lists are
#: dropped (measured by `benchmarks/bench_dynamic.py`: 10,000 of its 100,000 boxes moved in
#: 1.61 ms on one thread, 1.16 ms on two); the dropped lists are rebuilt on all threads
#: from this many slots in use.
PARALLEL_MIN_MOVES = 2_000
_MISSING = object()


def power_of_two(n: float, minimum: int = 1024) -> int:
    """The smallest power of two at least ``n`` and ``minimum``."""
    size = minimum
    while size < n:
        size *= 2
    return size


def int_id(value):
    """``value`` as a Python int when it is an integer id that fits int64, else None."""
    kind = type(value)
    if kind is int or isinstance(value, np.integer):
        value = int(value)
        if -(2**63) <= value < 2**63:
            return value
    return None


class CpuStorage:
    """Objects in slots of NumPy arrays, their ids, and the changes the kernels make.

    Parameters
    ----------
    cell_size : float
        Edge of the cells of level 0 (validated).
    capacity : int
        Slots allocated up front (at least `MIN_CAPACITY`).
    """

    def __init__(self, cell_size: float, capacity: int) -> None:
        with np.errstate(over="ignore"):
            sizes = cell_size * LEVEL_RATIO ** np.arange(N_LEVELS, dtype=np.float64)
        inv_size = np.where(np.isfinite(sizes), 1.0 / sizes, 0.0)
        inv_size[-1] = 0.0  # one infinite cell for anything larger than every level
        self._inv_size = inv_size
        self._pair_search = None
        # The state of `query_contacts` (`_contacts.ContactState`), from its first call on:
        # told of every slot freed, so that it can follow ids to their slots.
        self._contacts = None
        self._allocate(max(capacity, MIN_CAPACITY))
        self.clear()

    # ------------------------------------------------------------------ arrays
    def _allocate(self, capacity: int) -> None:
        """Fresh storage of ``capacity`` slots (contents set by the caller)."""
        objects = Objects(bounds=np.zeros((capacity, 6)), spheres=np.full((capacity, 4), -1.0),
                          meta=np.zeros((capacity, META_COLUMNS), np.int64))
        objects.meta[:, LEVEL] = -1
        cells = Cells(inv_size=self._inv_size, level_count=np.zeros(N_LEVELS, np.int64),
                      links=np.full((capacity * ENTRIES, 2), -1, np.int64),
                      head=np.full(power_of_two(4 * capacity), -1, np.int64))
        buffers = QueryBuffers(slots=np.empty(capacity, np.int64),
                               distances=np.empty(capacity), stamp=np.zeros(capacity, np.int64))
        # The kernels take plain tuples (`_kernels/state.py`); the arrays read here are
        # kept by name too.
        self._objects, self._cells, self._buffers = tuple(objects), tuple(cells), tuple(buffers)
        self._bounds, self._spheres, self._meta = objects
        self._level_count, self._head = cells.level_count, cells.head
        self._out, self._out_distances, self._stamp = buffers
        # Apart from the bundles (see `state.Cells`): the boxes of cells of the levels and
        # whether the bucket lists are current.
        self._level_cells = np.zeros((N_LEVELS, 6), np.int64)
        storage_kernels.reset_level_cells(self._level_cells)
        self._status = np.zeros(1, np.int64)
        self._slot_key = np.zeros(capacity, np.int64)
        # Slots whose entries changed since `query_pairs` last sorted (set by the kernels
        # that place and release objects), one byte a slot, outside the bundles (see
        # `storage.place_one`). A new storage drops the kept sort.
        self._changed = np.zeros(capacity, np.uint8)
        if self._pair_search is not None:
            self._pair_search.kept = False
        # Whether a query read the bucket lists since the last `move_many` (see there).
        self._lists_read = True

    def _grow(self, needed: int) -> None:
        """Make room for ``needed`` slots in all, copying the objects."""
        old = self._meta.shape[0]
        capacity = old
        while capacity < needed:
            capacity *= 2
        bounds, spheres, meta = self._bounds, self._spheres, self._meta
        slot_key, level_count, level_cells = self._slot_key, self._level_count, self._level_cells
        self._allocate(capacity)
        self._bounds[:old] = bounds
        self._spheres[:old] = spheres
        self._meta[:old] = meta
        self._slot_key[:old] = slot_key
        self._level_count[:] = level_count
        self._level_cells[:] = level_cells
        self._id_of.extend([_MISSING] * (capacity - old))
        self._status[0] = 0  # bucket lists are rebuilt for the new table on the next query

    def _take_slots(self, m: int) -> np.ndarray:
        """``m`` free slots (growing the storage when needed), not yet marked used."""
        reuse = min(m, len(self._free))
        fresh = m - reuse
        if self._n_used + fresh > self._meta.shape[0]:
            self._grow(self._n_used + fresh)
        slots = np.empty(m, np.int64)
        if reuse:
            slots[:reuse] = self._free[len(self._free) - reuse:]
        slots[reuse:] = np.arange(self._n_used, self._n_used + fresh)
        return slots

    def _commit_slots(self, slots: np.ndarray) -> None:
        """Mark slots from `_take_slots` as used."""
        reuse = min(len(slots), len(self._free))
        if reuse:
            del self._free[len(self._free) - reuse:]
        self._n_used += len(slots) - reuse

    def clear(self) -> None:
        """Remove every object (capacity is kept)."""
        capacity = self._meta.shape[0]
        if self._contacts is not None:
            self._contacts.release_all(self._slot_of)
        self._pending: list = []  # single moves not applied yet (see `move_box`)
        self._meta[:, LEVEL] = -1
        self._level_count[:] = 0
        storage_kernels.reset_level_cells(self._level_cells)
        self._head[:] = -1
        self._status[0] = 1
        self._slot_of: dict = {}
        self._id_of: list = [_MISSING] * capacity
        self._free: list = []
        self._n_used = 0
        self._n_other_ids = 0
        self._id_keys = np.zeros(1024, np.int64)
        self._id_values = np.full(1024, -1, np.int64)
        self._n_int_ids = 0
        self._pair_search = None
        self._last_lookup = None
        self._ray_count = 0
        self._stamp[:] = 0

    def __getstate__(self) -> dict:
        self._apply_moves()
        return self.__dict__.copy()

    def __setstate__(self, state: dict) -> None:
        self._contacts = None  # absent from the states of versions without contact events
        self.__dict__.update(state)

    # ------------------------------------------------------------------ changes
    def _apply_moves(self) -> None:
        """Apply the single moves buffered by `move_box`, in the order they were made."""
        if self._pending:
            pending, self._pending = self._pending, []
            # Flattened by `fromiter`: NumPy's `array` of a list of tuples took 0.67 us a
            # row against 0.39 (ad hoc, 65,536 rows).
            rows = np.fromiter(itertools.chain.from_iterable(pending), dtype=np.float64,
                               count=7 * len(pending)).reshape(-1, 7)
            storage_kernels.place_rows(self._objects, self._cells, self._level_cells,
                                       self._status, self._changed, rows)

    def move_box(self, id, x0: float, y0: float, z0: float, x1: float, y1: float,
                 z1: float) -> None:
        """Buffer the move of object ``id`` to the box (or point) ``x0 .. z1`` (checked by
        the caller), as a physics engine's broad phase keeps a move buffer; anything that
        reads or changes the storage otherwise applies the buffer first (`_apply_moves`)."""
        try:
            slot = self._slot_of[id]
        except KeyError:
            raise check.unknown_ids("id", [id]) from None
        except TypeError as error:
            raise check.unhashable(id) from error
        pending = self._pending
        pending.append((slot, x0, y0, z0, x1, y1, z1))
        if len(pending) >= MOVE_BUFFER:
            self._apply_moves()

    def _place_new(self, slots: np.ndarray, rows: np.ndarray, spheres: np.ndarray, categories,
                   masks) -> None:
        """Place new objects in ``slots`` (from `_take_slots`), with their filter bits."""
        self._meta[slots, storage_kernels.CATEGORY] = categories
        self._meta[slots, storage_kernels.MASK] = masks
        storage_kernels.place_many(self._objects, self._cells, self._level_cells, self._status,
                                   self._changed, slots, rows, spheres)

    def _move_rows(self, slots: np.ndarray, rows: np.ndarray, spheres: np.ndarray) -> None:
        """Give placed objects new shapes (distinct ``slots``). The bucket lists are dropped,
        to be rebuilt by the next query that reads them, when more than `RELINK_FRACTION`
        of the objects move (faster than updating them object by object) and when no query
        read them since the previous bulk move (see `DynamicHash.move_many`)."""
        m = slots.shape[0]
        lists_read, self._lists_read = self._lists_read, False
        if m > RELINK_FRACTION * len(self._slot_of) or not lists_read:
            self._status[0] = 0
            if m >= PARALLEL_MIN_MOVES:
                with _config.threads(None):
                    move_kernels.move_many_unlinked(self._objects, self._cells, self._level_cells,
                                                    self._changed, slots, rows, spheres,
                                                    numba.get_num_threads())
                return
        storage_kernels.place_many(self._objects, self._cells, self._level_cells, self._status,
                                   self._changed, slots, rows, spheres)

    def _release(self, slots: np.ndarray) -> None:
        """Remove the objects of ``slots`` and forget their ids."""
        storage_kernels.release_many(self._objects, self._cells, self._status, self._changed,
                                     slots)
        self._unregister(slots)

    def _ensure_linked(self) -> None:
        """Apply the buffered moves, and rebuild the bucket lists when bulk moves or growth
        dropped them (queries that read them call this first)."""
        self._apply_moves()
        self._lists_read = True
        if self._status[0] == 0:
            if self._n_used >= PARALLEL_MIN_MOVES:
                with _config.threads(None):
                    move_kernels.relink_all_parallel(self._objects, self._cells,
                                                     self._level_cells, numba.get_num_threads())
            else:
                storage_kernels.relink_all(self._objects, self._cells, self._level_cells)
            self._status[0] = 1

    # ------------------------------------------------------------------ ids
    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, id) -> bool:
        return id in self._slot_of

    def ids(self) -> list:
        """Every id, in the order they were inserted."""
        return list(self._slot_of)

    def _slot(self, id) -> int:
        try:
            slot = self._slot_of.get(id, _MISSING)
        except TypeError as error:
            raise check.unhashable(id) from error
        if slot is _MISSING:
            raise check.unknown_ids("id", [id])
        return slot

    def _int_table_room(self, extra: int) -> None:
        """Keep the integer-id table at most half full after adding ``extra`` ids."""
        needed = 2 * (self._n_int_ids + extra)
        if needed <= self._id_keys.shape[0]:
            return
        keys, values = self._id_keys, self._id_values
        live = values >= 0
        size = power_of_two(needed)
        self._id_keys = np.zeros(size, np.int64)
        self._id_values = np.full(size, -1, np.int64)
        storage_kernels.ids_insert(self._id_keys, self._id_values, keys[live], values[live])

    def _slots_of(self, ids: np.ndarray) -> np.ndarray:
        """Slots of bulk integer ids; raises before any change for unknown or repeated ids.

        The last lookup is kept: a simulation that moves the same ids every step (all of
        its bodies, say) compares them with the last ones (0.05 ms for 100,000) instead of
        looking each up in the table (4 ms: a cache miss each). Only a removal can change
        the slot of an id that is in the hash (`_unregister` and `clear` drop the cache).
        The returned array must not be written to.
        """
        last = self._last_lookup
        if last is not None and last[0].shape == ids.shape and np.array_equal(last[0], ids):
            return last[1]
        slots, missing, repeated = storage_kernels.ids_lookup(
            self._id_keys, self._id_values, ids, self._meta.shape[0])
        if missing.size:
            # Ids equal to an integer but stored as another type (1.0, True) are in the dict.
            unknown = []
            for position in missing.tolist():
                slot = self._slot_of.get(int(ids[position]), _MISSING)
                if slot is _MISSING:
                    unknown.append(int(ids[position]))
                else:
                    slots[position] = slot
            if unknown:
                raise check.unknown_ids("ids", unknown)
            _, first, counts = np.unique(slots, return_index=True, return_counts=True)
            repeated = np.sort(first[counts > 1])
        if repeated.size:
            raise check.repeated_ids("ids", sorted(set(ids[repeated].tolist())))
        self._last_lookup = (ids.copy(), slots)
        return slots

    def _register(self, ids: list, slots: np.ndarray) -> None:
        """Enter ids (already checked new) for ``slots``."""
        ints = []
        int_slots = []
        for id, slot in zip(ids, slots.tolist(), strict=True):
            self._slot_of[id] = slot
            self._id_of[slot] = id
            value = int_id(id)
            if value is None:
                self._slot_key[slot] = slot
                self._n_other_ids += 1
            else:
                self._slot_key[slot] = value
                ints.append(value)
                int_slots.append(slot)
        if ints:
            self._int_table_room(len(ints))
            storage_kernels.ids_insert(self._id_keys, self._id_values,
                                       np.array(ints, np.int64), np.array(int_slots, np.int64))
            self._n_int_ids += len(ints)

    def _register_ints(self, ids: np.ndarray, slots: np.ndarray) -> None:
        """Enter integer ids (already checked new and distinct) for ``slots``, in a few
        vectorized steps."""
        id_list, slot_list = ids.tolist(), slots.tolist()
        self._slot_of.update(zip(id_list, slot_list, strict=True))
        id_of = self._id_of
        for id, slot in zip(id_list, slot_list, strict=True):
            id_of[slot] = id
        self._slot_key[slots] = ids
        self._int_table_room(ids.shape[0])
        storage_kernels.ids_insert(self._id_keys, self._id_values, ids, slots)
        self._n_int_ids += ids.shape[0]

    def _unregister(self, slots: np.ndarray) -> None:
        """Forget the ids of ``slots`` and free the slots."""
        self._last_lookup = None
        ints = []
        released = None if self._contacts is None else self._contacts.released
        for slot in slots.tolist():
            stored = self._id_of[slot]
            if released is not None:
                released.setdefault(slot, stored)
            del self._slot_of[stored]
            self._id_of[slot] = _MISSING
            self._free.append(slot)
            value = int_id(stored)
            if value is None:
                self._n_other_ids -= 1
            else:
                ints.append(value)
        if ints:
            storage_kernels.ids_delete(self._id_keys, self._id_values, np.array(ints, np.int64))
            self._n_int_ids -= len(ints)

    def _tie_keys(self) -> np.ndarray:
        """A key per slot, by which the nearest-object and ray kernels rank ties and which
        the nearest-object kernel hands back: the integer ids when every id is one, else
        the slots themselves, from which the ids are looked up (an integer id's key could
        not be told from another object's slot)."""
        if self._n_other_ids == 0:
            return self._slot_key
        return np.arange(self._slot_key.shape[0], dtype=np.int64)

    def _ids_of(self, slots: np.ndarray) -> np.ndarray:
        """Ids of ``slots``: sorted int64 when every id is an integer, else objects."""
        if self._n_other_ids == 0:
            ids = self._slot_key[slots]
            ids.sort()
            return ids
        out = np.empty(len(slots), dtype=object)
        id_of = self._id_of
        for i, slot in enumerate(slots.tolist()):
            out[i] = id_of[slot]
        return out
