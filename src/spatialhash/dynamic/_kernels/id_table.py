"""The table of integer ids of the dynamic hash: id -> slot, open addressing.

`dynamic/_ids.py` keeps every integer id in it, so that the bulk calls map thousands of
integer ids to slots in one compiled loop. Two int64 arrays of a power-of-two length, ``keys`` and
``values``: ``values[p]`` is the slot of the id ``keys[p]``, -1 for an empty place. Linear
probing from a multiplicative hash of the id (`_id_slot`); deletion shifts entries back
(no tombstones), and the table is never full.
"""

from __future__ import annotations

import numpy as np

from ..._config import jit


@jit
def _id_slot(value, mask):
    """Home place of the id ``value`` in a table of ``mask + 1`` places."""
    h = np.uint64(value) * np.uint64(0x9E3779B97F4A7C15)
    h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(mask))


@jit
def ids_lookup(keys, values, ids, n_slots):
    """Slots of integer ``ids`` in the table (``keys``, ``values``: -1 marks empty).

    Returns ``(slots, missing, repeated)``: ``slots[i] = -1`` for an id not in the table;
    ``missing`` and ``repeated`` are the positions in ``ids`` of unknown ids and of ids met
    before in ``ids``.
    """
    mask = keys.shape[0] - 1
    m = ids.shape[0]
    slots = np.empty(m, np.int64)
    seen = np.zeros(n_slots, np.bool_)
    missing = np.empty(m, np.int64)
    repeated = np.empty(m, np.int64)
    n_missing = 0
    n_repeated = 0
    for i in range(m):
        value = ids[i]
        position = _id_slot(value, mask)
        slot = -1
        while values[position] >= 0:
            if keys[position] == value:
                slot = values[position]
                break
            position = (position + 1) & mask
        slots[i] = slot
        if slot < 0:
            missing[n_missing] = i
            n_missing += 1
        elif seen[slot]:
            repeated[n_repeated] = i
            n_repeated += 1
        else:
            seen[slot] = True
    return slots, missing[:n_missing].copy(), repeated[:n_repeated].copy()


@jit
def ids_repeated(keys, values, ids):
    """Positions in ``ids`` of ids already in the table or repeated within ``ids``."""
    m = ids.shape[0]
    capacity = 16
    while capacity < 2 * m:
        capacity *= 2
    local_mask = capacity - 1
    local_keys = np.empty(capacity, np.int64)
    local_used = np.zeros(capacity, np.bool_)
    mask = keys.shape[0] - 1
    bad = np.empty(m, np.int64)
    n_bad = 0
    for i in range(m):
        value = ids[i]
        position = _id_slot(value, mask)
        present = False
        while values[position] >= 0:
            if keys[position] == value:
                present = True
                break
            position = (position + 1) & mask
        position = _id_slot(value, local_mask)
        while local_used[position] and local_keys[position] != value:
            position = (position + 1) & local_mask
        if local_used[position]:
            present = True
        else:
            local_used[position] = True
            local_keys[position] = value
        if present:
            bad[n_bad] = i
            n_bad += 1
    return bad[:n_bad].copy()


@jit
def ids_insert(keys, values, ids, slots):
    """Enter ``ids[i] -> slots[i]``; the ids must be absent (the table is never full)."""
    mask = keys.shape[0] - 1
    for i in range(ids.shape[0]):
        position = _id_slot(ids[i], mask)
        while values[position] >= 0:
            position = (position + 1) & mask
        keys[position] = ids[i]
        values[position] = slots[i]


@jit
def ids_delete(keys, values, ids):
    """Remove ``ids`` (present) with backward-shift deletion (no tombstones)."""
    mask = keys.shape[0] - 1
    for i in range(ids.shape[0]):
        position = _id_slot(ids[i], mask)
        while keys[position] != ids[i] or values[position] < 0:
            position = (position + 1) & mask
        hole = position
        position = (hole + 1) & mask
        while values[position] >= 0:
            home = _id_slot(keys[position], mask)
            # The entry may move into the hole when its home is not in (hole, position].
            if (position - home) & mask >= (position - hole) & mask:
                keys[hole] = keys[position]
                values[hole] = values[position]
                hole = position
            position = (position + 1) & mask
        values[hole] = -1
