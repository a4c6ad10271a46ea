"""Contact events of the dynamic hash: the overlapping pairs that began and those that
ended between two calls of `DynamicHash.query_contacts`.

Keys. The engine's `query_pairs` gives pairs of slots. Each becomes one int64 key,
``min slot << 32 | max slot``, sorted by a counting sort on the smaller slot
(`contacts.sorted_pair_keys`: for the 50,000 pairs of `benchmarks/bench_dynamic.py`'s
100,000 boxes, 2.4-2.6 times as fast as NumPy's sort of the keys, on a loaded 2-core
machine). The keys of a call are kept, so that the events of the next call are one merge of
the kept keys with the new ones (`contacts.sorted_difference`, a single pass), and only the
pairs reported are mapped back to ids (and the ids of the objects removed since the last
call looked up), so this works alike for any id type. Slots stay below ``2**31`` (the
storage of that many objects would take 300 GB), so the keys are non-negative and ordered
as their pairs of slots.

Slots that change owner. Contacts are keyed by the pair of ids: the events are the set
difference of the pairs of the two calls, so that they compose (the pairs of the last call,
less those ended, plus those begun, are the pairs now) whatever happened in between. Keys
of slots alone would not do: a slot can change owner between two calls (a removal frees it,
an insert may give it to another id, and an id removed and inserted again may get another
slot), and another id in a slot would inherit the contacts of the last one. So the id
registry (`_ids.IdRegistry`, whose ``contacts`` this state is) hands the state every slot
whose id it forgets, with the id it held (`ContactState.released`; the
first release since the last call wins, so the id is that of the last call), and `clear`
every slot in use. At the next call the kept keys' slots among those are mapped to the slot
each one's id holds now, or to none: a pair with a slot whose id is gone ended, and is
reported with the ids of the last call; the mapped keys are sorted again before the merge.
With no release since the last call the kept keys are merged as they are.
"""

from __future__ import annotations

import numpy as np

from ._ids import int_id
from ._kernels import contacts as contact_kernels
from ._kernels.contacts import LOW_SLOT, PAIR_SHIFT

_NO_KEYS = np.empty(0, np.int64)


class ContactState:
    """What `query_contacts` keeps between calls: the sorted keys of the pairs of the last
    call (``keys``), the slots freed since with the id each held then (``released``, slot ->
    id), and whether every id in the hash was an integer at the last call (``all_int``).
    Plain attributes: it pickles with the id registry."""

    __slots__ = ("keys", "released", "all_int")

    def __init__(self) -> None:
        self.keys = _NO_KEYS
        self.released: dict = {}
        self.all_int = True

    def release_all(self, slot_of: dict) -> None:
        """Every slot of ``slot_of`` (id -> slot, the objects stored) is freed (`clear`)."""
        released = dict(zip(slot_of.values(), slot_of.keys(), strict=True))
        released.update(self.released)  # slots freed earlier held other ids at the last call
        self.released = released

    def _kept_keys(self, slot_of: dict, capacity: int) -> tuple[np.ndarray, np.ndarray]:
        """The kept keys with their slots mapped to the slots their ids hold now, sorted, and
        the kept keys (of the last call's slots) whose pair lost an id."""
        keys, released = self.keys, self.released
        if not released or keys.size == 0:
            return keys, _NO_KEYS
        remap = np.arange(capacity, dtype=np.int64)
        remap[np.fromiter(released, np.int64, len(released))] = np.fromiter(
            (slot_of.get(id, -1) for id in released.values()), np.int64, len(released))
        first = remap[keys >> PAIR_SHIFT]
        second = remap[keys & LOW_SLOT]
        alive = (first >= 0) & (second >= 0)
        gone = _NO_KEYS
        if not alive.all():
            gone = keys[~alive]
            first, second = first[alive], second[alive]
        # Distinct: the slots now of distinct pairs of ids.
        mapped = (np.minimum(first, second) << PAIR_SHIFT) | np.maximum(first, second)
        mapped.sort()
        return mapped, gone

    def update(self, pairs: np.ndarray, counts: np.ndarray,
               registry) -> tuple[np.ndarray, np.ndarray]:
        """The pairs that began and those that ended since the last call, as ids, given
        the pairs of slots now (``pairs`` and ``counts``, in the regions of
        `DynamicEngine.query_pairs`; their keys are kept for the next call) and the hash's
        ids (``registry``, an `_ids.IdRegistry`).

        Returns
        -------
        began, ended : ndarray, shape (k, 2)
            int64 when every id stored now and at the last call is an integer, each row
            ``(smaller, larger)``, rows ascending; else objects, rows in order of their
            slots' keys (the pairs that lost an id last).
        """
        keys = contact_kernels.sorted_pair_keys(pairs, counts, registry.n_slots)
        slot_of, id_of, slot_key = registry.slot_of, registry.id_of, registry.slot_key
        all_int = registry.all_int
        kept, gone = self._kept_keys(slot_of, slot_key.shape[0])
        began, ended = contact_kernels.sorted_difference(keys, kept)
        released = self.released
        if all_int and self.all_int:
            began_ids = _int_rows(slot_key[began >> PAIR_SHIFT], slot_key[began & LOW_SLOT])
            first = slot_key[ended >> PAIR_SHIFT]
            second = slot_key[ended & LOW_SLOT]
            if gone.size:
                # The ids of the last call: those of the freed slots, the others unchanged.
                old_key = slot_key.copy()
                for slot, id in released.items():
                    value = int_id(id)  # not an integer: freed before any call saw it
                    if value is not None:
                        old_key[slot] = value
                first = np.concatenate([first, old_key[gone >> PAIR_SHIFT]])
                second = np.concatenate([second, old_key[gone & LOW_SLOT]])
            ended_ids = _int_rows(first, second)
        else:
            began_ids = _object_rows(began, id_of, {})
            ended_ids = np.concatenate([_object_rows(ended, id_of, {}),
                                        _object_rows(gone, id_of, released)])
        self.keys = keys
        self.released = {}
        self.all_int = all_int
        return began_ids, ended_ids


def _int_rows(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Pairs of integer ids as rows ``(smaller, larger)``, sorted: shape (k, 2)."""
    rows = np.empty((first.shape[0], 2), np.int64)
    np.minimum(first, second, out=rows[:, 0])
    np.maximum(first, second, out=rows[:, 1])
    order = np.lexsort((rows[:, 1], rows[:, 0]))
    return np.take(rows, order, axis=0)


def _object_rows(keys: np.ndarray, id_of: list, released: dict) -> np.ndarray:
    """The ids of the slots of ``keys`` as an object array of shape (k, 2): those of
    ``released`` (slot -> id) where it has the slot, else those of ``id_of``."""
    rows = np.empty((keys.shape[0], 2), dtype=object)
    get = released.get
    for row, key in enumerate(keys.tolist()):
        first, second = key >> PAIR_SHIFT, key & LOW_SLOT
        rows[row, 0] = get(first, id_of[first]) if released else id_of[first]
        rows[row, 1] = get(second, id_of[second]) if released else id_of[second]
    return rows
