"""The storage of the CPU engine: slots, their growth, the bucket lists, the moves.

`CpuStorage` owns the arrays (the bundles of `_kernels/state.py`) and hands out slots: freed
ones are reused, and capacity doubles when full. It knows no ids
(`_ids.IdRegistry`, above the engine seam, keeps them). `CpuDynamicEngine` (`_engine.py`)
adds the calls of `DynamicEngine` on top. Every method expects its caller to hold the
hash's lock.
"""

from __future__ import annotations

import itertools

import numba
import numpy as np

from .. import _config
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
#: dropped (measured by `benchmarks/bench_dynamic.py`: 10,000 of its 100,000 boxes moved
#: 1.4 times as fast on two threads as on one); the dropped lists are rebuilt on all
#: threads from this many slots in use.
PARALLEL_MIN_MOVES = 2_000


def power_of_two(n: float, minimum: int = 1024) -> int:
    """The smallest power of two at least ``n`` and ``minimum``."""
    size = minimum
    while size < n:
        size *= 2
    return size


class CpuStorage:
    """Objects in slots of NumPy arrays, and the changes the kernels make.

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
        level_count, level_cells = self._level_count, self._level_cells
        self._allocate(capacity)
        self._bounds[:old] = bounds
        self._spheres[:old] = spheres
        self._meta[:old] = meta
        self._level_count[:] = level_count
        self._level_cells[:] = level_cells
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

    def __len__(self) -> int:
        return self._n_used - len(self._free)

    def clear(self) -> None:
        """Remove every object (capacity is kept)."""
        self._pending: list = []  # single moves not applied yet (see `move_box`)
        self._meta[:, LEVEL] = -1
        self._level_count[:] = 0
        storage_kernels.reset_level_cells(self._level_cells)
        self._head[:] = -1
        self._status[0] = 1
        self._free: list = []
        self._n_used = 0
        self._pair_search = None
        self._ray_count = 0
        self._stamp[:] = 0

    def __getstate__(self) -> dict:
        self._apply_moves()
        return self.__dict__.copy()

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    # ------------------------------------------------------------------ changes
    def _apply_moves(self) -> None:
        """Apply the single moves buffered by `move_box`, in the order they were made."""
        if self._pending:
            pending, self._pending = self._pending, []
            # Flattened by `fromiter`: 1.7 times as fast as NumPy's `array` of a list of
            # tuples (ad hoc, 65,536 rows).
            rows = np.fromiter(itertools.chain.from_iterable(pending), dtype=np.float64,
                               count=7 * len(pending)).reshape(-1, 7)
            storage_kernels.place_rows(self._objects, self._cells, self._level_cells,
                                       self._status, self._changed, rows)

    def move_box(self, slot: int, x0: float, y0: float, z0: float, x1: float, y1: float,
                 z1: float) -> None:
        """Buffer the move of the object in ``slot`` to the box (or point) ``x0 .. z1``
        (checked by the caller), as a physics engine's broad phase keeps a move buffer;
        anything that reads or changes the storage otherwise applies the buffer first
        (`_apply_moves`)."""
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
        if m > RELINK_FRACTION * len(self) or not lists_read:
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
        """Remove the objects of ``slots`` and free the slots for reuse."""
        storage_kernels.release_many(self._objects, self._cells, self._status, self._changed,
                                     slots)
        self._free.extend(slots.tolist())

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
