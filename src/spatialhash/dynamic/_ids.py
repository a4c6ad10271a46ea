"""The ids of the dynamic hash: which slot of the engine holds each id, and back.

`DynamicHash` keeps its ids here, above the engine seam: an engine (`_engine.DynamicEngine`)
stores objects in slots (int64 numbers it chooses) and never sees an id. `IdRegistry` maps
any hashable id to its slot in a dict (in insertion order: `DynamicHash.__iter__`), each
slot back to its id in a list, and integer ids also in a NumPy open-addressing table
(`_kernels/id_table.py`: ``ids_lookup``, ``ids_insert``, ``ids_delete``), so that the bulk
calls (`insert_many`, `move_many`, `remove_many`) map thousands of integer ids to slots in
one compiled loop.

Order. The engines rank ties (k nearest, rays) by a key per slot, `IdRegistry.tie_keys`:
the integer ids when every id is one, else the slots. The registry hands it down as a plain
int64 array, so an engine orders its results without knowing what an id is; `ids_of` turns
the slots an engine returns into ids, an int64 array when every id is an integer, else an
object array.

Errors are raised here, before the engine changes anything, with the messages of
`_validation.py`: unknown ids `UnknownIdError`, repeated or present ids `ValueError`,
unhashable ids `TypeError`. Every method expects its caller to hold the hash's lock.
"""

from __future__ import annotations

import numpy as np

from . import _validation as check
from ._kernels import id_table
from ._kernels import pairs as pairs_kernels
from ._storage import power_of_two

#: The id of a slot that holds none.
MISSING = object()
#: Smallest size of the integer-id table.
MIN_TABLE = 1024


def int_id(value):
    """``value`` as a Python int when it is an integer id that fits int64, else None."""
    kind = type(value)
    if kind is int or isinstance(value, np.integer):
        value = int(value)
        if -(2**63) <= value < 2**63:
            return value
    return None


class IdRegistry:
    """The ids of a hash and the slots of its engine that hold them.

    Parameters
    ----------
    capacity : int
        Slots to make room for up front; the per-slot arrays grow with the largest slot
        registered.

    Attributes
    ----------
    slot_of : dict
        Id -> slot, in insertion order. The same dict for the registry's whole life (`clear`
        empties it), so that `DynamicHash.move` can keep a reference.
    id_of : list
        Slot -> id, `MISSING` for a slot holding none.
    slot_key : ndarray of int64
        Slot -> the id when it is an integer, else the slot itself.
    contacts : `_contacts.ContactState` or None
        The state of `DynamicHash.query_contacts`, from its first call on: told of every
        slot whose id is forgotten, so that it can follow ids to their slots.
    """

    def __init__(self, capacity: int) -> None:
        self.slot_of: dict = {}
        self.id_of: list = [MISSING] * capacity
        self.slot_key = np.zeros(capacity, np.int64)
        self.contacts = None
        self.clear()

    def clear(self) -> None:
        """Forget every id (the per-slot arrays keep their size)."""
        if self.contacts is not None:
            self.contacts.release_all(self.slot_of)
        self.slot_of.clear()
        self.id_of = [MISSING] * len(self.id_of)
        self._n_other_ids = 0
        self._id_keys = np.zeros(MIN_TABLE, np.int64)
        self._id_values = np.full(MIN_TABLE, -1, np.int64)
        self._n_int_ids = 0
        self._last_lookup = None

    @classmethod
    def from_engine_state(cls, state: dict) -> IdRegistry:
        """The registry of a hash pickled with its ids inside the CPU engine's state (the
        attributes ``_slot_of`` .. ``_contacts`` of ``state``, taken out of it)."""
        registry = cls.__new__(cls)
        registry.slot_of = state.pop("_slot_of")
        registry.id_of = state.pop("_id_of")
        registry.slot_key = state.pop("_slot_key")
        registry.contacts = state.pop("_contacts", None)
        registry._n_other_ids = state.pop("_n_other_ids")
        registry._id_keys = state.pop("_id_keys")
        registry._id_values = state.pop("_id_values")
        registry._n_int_ids = state.pop("_n_int_ids")
        registry._last_lookup = state.pop("_last_lookup", None)
        return registry

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self.slot_of)

    def __contains__(self, id) -> bool:
        return id in self.slot_of

    def ids(self) -> list:
        """Every id, in the order they were inserted."""
        return list(self.slot_of)

    @property
    def all_int(self) -> bool:
        """Whether every id held is an integer (fitting int64)."""
        return self._n_other_ids == 0

    @property
    def n_slots(self) -> int:
        """An upper bound of the slots registered: the length of the per-slot arrays."""
        return self.slot_key.shape[0]

    def first_other_id(self):
        """An id held that is not an integer (the registry holds one)."""
        return next(id for id in self.slot_of if int_id(id) is None)

    def slot(self, id) -> int:
        """The slot of ``id``; raises `UnknownIdError` or, unhashable, `TypeError`."""
        try:
            slot = self.slot_of.get(id, MISSING)
        except TypeError as error:
            raise check.unhashable(id) from error
        if slot is MISSING:
            raise check.unknown_ids("id", [id])
        return slot

    def slots_of(self, ids: np.ndarray) -> np.ndarray:
        """Slots of bulk integer ids; raises before any change for unknown or repeated ids.

        The last lookup is kept: a simulation that moves the same ids every step (all of
        its bodies, say) compares them with the last ones, one sequential pass, instead of
        looking each up in the table (a cache miss each). Only a removal can change the
        slot of an id that is held (`unregister` and `clear` drop the kept lookup). The
        returned array must not be written to.
        """
        last = self._last_lookup
        if last is not None and last[0].shape == ids.shape and np.array_equal(last[0], ids):
            return last[1]
        slots, missing, repeated = id_table.ids_lookup(
            self._id_keys, self._id_values, ids, self.n_slots)
        if missing.size:
            # Ids equal to an integer but held as another type (1.0, True) are in the dict.
            unknown = []
            for position in missing.tolist():
                slot = self.slot_of.get(int(ids[position]), MISSING)
                if slot is MISSING:
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

    def check_new(self, ids: np.ndarray) -> None:
        """Raise `ValueError` (`_validation.present_ids`) when a bulk integer id is held
        already or repeated in ``ids``."""
        bad = id_table.ids_repeated(self._id_keys, self._id_values, ids)
        if bad.size == 0 and self._n_other_ids:
            slot_of = self.slot_of
            bad = np.array([i for i, id in enumerate(ids.tolist()) if id in slot_of], np.int64)
        if bad.size:
            raise check.present_ids("ids", ids[bad].tolist())

    # ------------------------------------------------------------------ slots to ids
    def tie_keys(self) -> np.ndarray:
        """A key per slot by which the engines rank ties (k nearest, rays): the integer ids
        when every id is one, so that ties go to the smaller id, else the slots themselves
        (an integer id's key could not be told from another object's slot)."""
        if self._n_other_ids == 0:
            return self.slot_key
        return np.arange(self.slot_key.shape[0], dtype=np.int64)

    def ids_of(self, slots: np.ndarray) -> np.ndarray:
        """The ids of ``slots`` (int64, any shape), in their order and shape: int64 when
        every id is an integer, else objects."""
        if self._n_other_ids == 0:
            return self.slot_key[slots]
        out = np.empty(slots.shape, dtype=object)
        flat = out.reshape(-1)
        id_of = self.id_of
        for i, slot in enumerate(slots.reshape(-1).tolist()):
            flat[i] = id_of[slot]
        return out

    def ids_of_keys(self, keys: np.ndarray) -> np.ndarray:
        """The ids of objects given by their `tie_keys`, as `ids_of` gives them: the keys
        themselves when every id is an integer, else the ids of the slots they are."""
        if self._n_other_ids == 0:
            return keys
        return self.ids_of(keys)

    def pair_ids(self, pairs: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The ids of the slot pairs of regions (region ``c`` in rows ``c * per_region`` on,
        ``counts[c]`` of them; see `DynamicEngine.query_pairs`), regions in order: shape
        (n_pairs, 2), as `ids_of` gives them, with integer ids the smaller first."""
        if self._n_other_ids == 0:
            # One compiled pass: the lookup and the order of each row at once.
            return pairs_kernels.chunk_pairs_as_ids(pairs, counts, self.slot_key)
        per_region = pairs.shape[0] // counts.shape[0]
        slots = np.concatenate([pairs[c * per_region : c * per_region + counts[c]]
                                for c in range(counts.shape[0])])
        return self.ids_of(slots)

    # ------------------------------------------------------------------ changes
    def _slot_room(self, largest: int) -> None:
        """Grow the per-slot arrays to hold slot ``largest``."""
        size = self.slot_key.shape[0]
        if largest < size:
            return
        grown = max(2 * size, largest + 1)
        slot_key = np.zeros(grown, np.int64)
        slot_key[:size] = self.slot_key
        self.slot_key = slot_key
        self.id_of.extend([MISSING] * (grown - size))

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
        id_table.ids_insert(self._id_keys, self._id_values, keys[live], values[live])

    def register(self, id, slot: int) -> None:
        """Enter ``id`` (hashable, checked new) for ``slot``."""
        self._slot_room(slot)
        self.slot_of[id] = slot
        self.id_of[slot] = id
        value = int_id(id)
        if value is None:
            self.slot_key[slot] = slot
            self._n_other_ids += 1
            return
        self.slot_key[slot] = value
        self._int_table_room(1)
        id_table.ids_insert(self._id_keys, self._id_values,
                                   np.array([value], np.int64), np.array([slot], np.int64))
        self._n_int_ids += 1

    def register_ints(self, ids: np.ndarray, slots: np.ndarray) -> None:
        """Enter integer ids (checked new and distinct) for ``slots``, in a few vectorized
        steps."""
        if slots.shape[0]:
            self._slot_room(int(slots.max()))
        id_list, slot_list = ids.tolist(), slots.tolist()
        self.slot_of.update(zip(id_list, slot_list, strict=True))
        id_of = self.id_of
        for id, slot in zip(id_list, slot_list, strict=True):
            id_of[slot] = id
        self.slot_key[slots] = ids
        self._int_table_room(ids.shape[0])
        id_table.ids_insert(self._id_keys, self._id_values, ids, slots)
        self._n_int_ids += ids.shape[0]

    def unregister(self, slots: np.ndarray) -> None:
        """Forget the ids of ``slots`` (int64), telling the contact state which id each
        slot held."""
        self._last_lookup = None
        ints = []
        released = None if self.contacts is None else self.contacts.released
        for slot in slots.tolist():
            stored = self.id_of[slot]
            if released is not None:
                released.setdefault(slot, stored)
            del self.slot_of[stored]
            self.id_of[slot] = MISSING
            value = int_id(stored)
            if value is None:
                self._n_other_ids -= 1
            else:
                ints.append(value)
        if ints:
            id_table.ids_delete(self._id_keys, self._id_values, np.array(ints, np.int64))
            self._n_int_ids -= len(ints)
