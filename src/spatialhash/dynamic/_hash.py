"""The dynamic hash: objects (points, boxes, spheres) inserted, moved and removed by id.

Design
------
Objects. Each object has a user id and a shape: a point, an axis-aligned box, or a sphere
(a centre and a radius, held with its bounding box ``centre -/+ radius``). Every object
lives in a slot of structure-of-arrays storage (``bounds``, ``spheres``, ``meta``; see
`_kernels/storage.py`); freed slots are reused and capacity doubles when full. Ids are any
hashable Python values, kept in a dict id -> slot. Integer ids are also kept in a NumPy
open-addressing table, so bulk calls (`insert_many`, `move_many`, `remove_many`) map
thousands of ids to slots in one compiled loop.

Levels for mixed sizes. Level ``L`` is a grid of cubic cells of size
``cell_size * LEVEL_RATIO**L``. An object goes to the lowest level whose cells are at least
as large as its largest extent, so it covers at most two cells per axis (eight in 3-D) and
is stored in each of them. Points and objects up to ``cell_size`` sit on level 0; a huge
object sits on a coarse level instead of flooding the fine one; the last level has one
infinite cell for objects larger than all the others. Queries visit only non-empty levels.
The ratio is 4 rather than 2: fewer levels means fewer cross-level lookups in
`query_pairs` (55 ms against 67 ms with ratio 2 for the benchmark's 100,000 boxes of three
size classes, measured on a loaded machine, so only the order is certain), while a level's
cells stay within 4x the size of its objects.

Cells and buckets. A cell is ``floor(x / cell)`` per axis, exactly, up to 2**62 cells
from the origin (4.6e18 cells; cell coordinates saturate there, so `query_cell` beyond it
reports the objects of the outermost cell, and queries only slow down); no world bounds. Every
(object, cell) entry is chained into a bucket list keyed by a hash of ``(level, cell)``
(doubly linked, so insert and remove are O(1)); readers compare cells, so bucket collisions
cost time, never correctness. A move that keeps an object in its cells writes its
coordinates and nothing else. Bulk moves of more than `RELINK_FRACTION` of the objects
drop the bucket lists instead of updating them entry by entry (an update touches scattered
memory: 35 ms for 100,000 objects, against 14 ms for a rebuild), and so does any
`move_many` when no query read the lists since the previous one (a simulation that only
asks for pairs: updating them for 10% of 100,000 boxes cost 4 ms a step); they are rebuilt
by the next query that reads them. `query_pairs` never reads them: it sorts all entries by bucket
with a counting sort, like the batch grid's build, copies each bucket run's boxes next to
it and sweeps the runs in 16 fixed chunks, on all threads from `PARALLEL_MIN_ENTRIES`
entries (same rows in the same order for any thread count; `_kernels/pairs.py`).
On the benchmark's 100,000 boxes that took the pairs from 78 to 50 ms on one core of the
loaded development machine (same run, CPU time, medians). The sweep reads ``meta``
(scattered rows) only for the category filters, and only when some object has other bits
than all: a candidate's cell is recomputed from its copied box instead (same-level part
8.5-10 ms -> 4.5-5.9 ms, cross-level 39-42 -> 33 ms medians, one core of the loaded
machine). The sort runs on all threads too, from `PARALLEL_MIN_ENTRIES` slots
(`_kernels/sort.py`): the slots are cut into one chunk per thread to hash their
entries (once: the old sort hashed each twice), the entries are partitioned stably by the
high bits of their bucket into parts of 2**14 buckets, and each part is counting-sorted
on its own (its starts stay in L2); a stable sort gives the same codes for any cut. On one
thread it went from 12-15 to 10-11 ms (CPU time, medians of 15 in two runs, both versions
alternately in one process) when the slots were first cut, and to 10.1-11.0 ms from
11.3-11.8 ms with the parts (medians of 21, loaded machine); an LSD radix sort was slower
on this machine (see `_kernels/sort.py`). The cross-level lookups
were then the largest part, 23-35 ms (one core, CPU time): every fine object looked up the
coarse cells it covers, 190,000 probes meeting 428,000 candidates for 38,000 pairs (neither
branch-free box tests, a 4x larger coarse table nor coarse buckets ordered like the fine
ones paid, all measured alternately with the code kept). They are now inverted where that
takes fewer probes (`CROSS_INVERT_WEIGHT`): each of the 8,900 coarse objects reads the runs
of the finer cells it covers in the main sort, 157,000 probes meeting 211,000 candidates,
of which the box test needs the records (cache misses into 9 MB of records: about 60 ns a
candidate); 17-21 ms against 23-35 ms in the same runs, and 12-13 ms for the kernel alone.
Reading each tile's run of buckets whole instead of cell by cell (fewer probes, 4x the
candidates) was 3-4 ms slower. In 3-D the gain is larger (100,000 boxes, 3-D: 390 -> 170
ms on one core). What is left, per step of the benchmark's 100,000 boxes (one core, CPU
time, loaded machine): the cross-level lookups, 13-21 ms; the sort, 10-11 ms;
copying records, 3.1 ms (4.7-4.9 ms before its loop took unsigned indices), and the
same-level sweep, 5.4 ms; a bulk move of everything, 5-6 ms
(which runs on all threads from `PARALLEL_MIN_MOVES` objects once the bucket lists are
dropped, `_kernels/move.py`). Wall-clock per step (1% / 10% / 100% moved, medians
of 11 in two runs, two threads, load average about 0.8): 35-41 / 47-49 / 57-58 ms before
the round that parallelized the sort, 32-34 / 38-40 / 40 ms after; the whole
`query_pairs` on one core went from 58-63 to 38-51 ms with the inverted lookups (CPU
time, medians of 15, both versions alternately, machine loaded by another job). With the
sort in parts and the unsigned copy of the records, a step on one core (move and pairs,
CPU time, medians of 15, two runs each, the old code alternately) went from 44-46 /
37-52 / 55-58 ms to 39-41 / 37 / 38-46 ms on the loaded machine; the 20 ms target was
not met then (the README has the current figures).

Kept sort. Between two calls of a simulation few objects change cells: in the benchmark
(steps of at most 0.5 in cells of 2), 0.4% / 4% / 40% of the objects at 1% / 10% / 100%
moved. So `query_pairs` keeps its sort (``codes``, ``bucket_start``, the coarse sort) in
its scratch, and every kernel that changes what decides an entry (cells, level, the sphere
bit; inserts and removals) sets a per-slot flag in ``_changed`` (one byte a slot, outside
the storage tuple: one more array there cost `move` about 0.1 us a call to unbox). The next
call counts the flags (5 us for 100,000), takes the entries of the flagged slots out of the
kept runs and merges their new entries in, sorted by a small radix sort
(`dynamic_sort.update_sort`); within a bucket a fresh sort's codes ascend, so the merge
gives exactly its codes, for any history and thread count (tested against a fresh sort).
With no flag set the sort is reused as it is. The records are copied again in any case
(boxes moved). Above `SORT_UPDATE_FRACTION` of the objects flagged (the crossover, one
core), when the lowest non-empty level changed (the coarse sort depends on it), or when the
buffers might overflow, it sorts from scratch; `clear` and growth drop the kept sort. The
sort inside a step (one core, CPU time, medians of 15, the old code alternately in one
process, fast phase of the machine): 7.0 / 7.0 / 7.0 ms -> 1.5 / 2.6 / 7.4 ms at 1% / 10% /
100% moved, the whole step (move and pairs) 28.0 / 30.1 / 32.9 -> 22.5 / 25.8 / 32.9 ms; on
two threads (wall-clock, medians of 15, load average 1.1, another run) 25.2 / 29.6 / 30.7
-> 20.4 / 26.5 / 30.0 ms. Still short of 20 ms at 2 threads then: the sweep and the
cross-level lookups are most of a step, and at 100% moved 40% of the objects change cells.

Bulk lookups. `move_many` keeps the ids and slots of its last lookup: a simulation that
moves the same ids every step compares them with the kept copy (0.05 ms for 100,000)
instead of looking each up in the open-addressing table (a cache miss each: 4 ms). Only a
removal can change the slot of an id in the hash, so `_unregister` and `clear` drop it.
Moving all 100,000 boxes went from 10-11 to 7-8 ms (one core, medians); with the move
itself on two threads (below), 9-12 -> 4-4.5 ms wall-clock (medians of 15, both versions
run alternately).

Single moves. `move` checks the common inputs (lists, tuples, 1-D float64 arrays of points
and boxes) in a few lines of Python and appends the slot and the box to a buffer, as a
physics engine's broad phase keeps a move buffer; anything that reads or changes the hash
otherwise (queries, inserts, removals, bulk moves, `bounds`, pickling) first applies the
buffer in one compiled call, `place_rows`, in order, so nobody sees the difference. A
compiled call per move unboxed the nine storage arrays every time, however it was called
(its compiled entry point was already called directly, past the dispatcher): ad hoc, 1.8
us for a call passing nine arrays against 0.8 us for one passing a single array. Moves
of 100,000 random 2-D boxes one by one, the buffer applied by a query at the end
(`time.thread_time`, medians of 8 rounds, both versions alternately in one process): 3.73
-> 2.67 us a move. Spheres and other inputs take the full checks and a direct call. Keeping
the storage in a numba `structref` (one pointer to unbox) was rejected earlier: its
constructor is compiled in every process (not cached) and the hash would no longer pickle
as plain arrays; a `jitclass` is never cached.

No duplicates, no hash set. An object in several cells is reported from one cell only: a
query reports it from the lowest cell it shares with the query's range of cells; a pair on
one level is reported from the lowest cell both share (``max(lo_a, lo_b)`` per axis), which
is one bit test per candidate (`_kernels/pairs.py`); pairs across levels are found
by the coarser object reading the finer cells it covers (or the other way round, whichever
takes fewer probes), with the same rule.

Threads. Every public method holds the hash's lock (an `threading.RLock`) for its whole
call: queries change the hash too (they apply buffered moves, rebuild dropped bucket lists
and reuse scratch buffers), and the kernels release the GIL, so two Python threads in two
calls at once would corrupt the storage (a crash, a hang or wrong answers). Calls from
several threads are therefore run one at a time, each seeing the hash as the previous call
left it. The lock costs 0.3 us a call: 100,000 single moves of 2-D boxes took 1.22-1.24
us a move without it, 1.49-1.57 with it (`time.thread_time`, medians of 8 rounds, each
version twice). A hash pickles without its lock and gets a new one when unpickled.

Semantics. Boxes are closed: touching counts as overlapping. Spheres are tested exactly
after their bounding boxes. Arithmetic is float64 without fast-math, as in the batch grid;
`tests/dynamic_oracles.py` repeats it in NumPy. Results hold ids: an int64 array when every
id in the hash is an integer (sorted ascending; pairs with the smaller id first), else an
object array in unspecified order.
"""

from __future__ import annotations

import itertools
import math
import numbers
import threading
from collections.abc import Iterator

import numba
import numpy as np

from .. import _config
from .._kernels import indirect
from .._results import Hits
from .._validation import as_count, as_positive_scalar, check_rows_order
from . import _validation as check
from ._kernels import (
    move as dynamic_move,
)
from ._kernels import (
    pairs as dynamic_pairs,
)
from ._kernels import (
    query as dynamic_query,
)
from ._kernels import (
    ray as dynamic_ray,
)
from ._kernels import (
    sort as dynamic_sort,
)
from ._kernels import storage as storage_kernels
from ._kernels.storage import CATEGORY, ENTRIES, LEVEL, MASK, META_COLUMNS, N_LEVELS
from ._validation import ALL_BITS, UnknownIdError

__all__ = ["DynamicHash", "UnknownIdError"]

#: Cell size ratio between consecutive levels (see the module docstring).
LEVEL_RATIO = 4.0
#: Bulk moves of more than this fraction of the objects rebuild the bucket lists lazily
#: rather than updating them in place.
RELINK_FRACTION = 0.25
#: `query_pairs` runs its sweep on all threads from this many (object, cell) entries on,
#: and its sort from this many slots (below, a parallel region's start costs more than it
#: saves).
PARALLEL_MIN_ENTRIES = 20_000
#: `move_many` moves objects on all threads from this many on, when the bucket lists are
#: dropped (10,000 of the benchmark's 100,000 boxes: 1.61 -> 1.16 ms against a threshold
#: of 20,000, one process, alternated, medians of 38 steps); the dropped lists are rebuilt
#: on all threads from this many slots in use.
PARALLEL_MIN_MOVES = 2_000
#: `query_pairs` finds the pairs of a finer and a coarser level from the coarser side
#: (each coarse object reads the finer cells it covers) when that takes at most this many
#: times as many probes as the finer level has objects (each of which would look up the
#: coarser cells it covers); see `_kernels/pairs.py`.
CROSS_INVERT_WEIGHT = 8.0
#: A coarse object covering more than ``n_entries / CROSS_SCAN_RATIO`` finer cells scans
#: all entries instead of probing each cell (a box larger than the world costs O(n), not
#: O(world / cell)).
CROSS_SCAN_RATIO = 16.0
#: `query_pairs` keeps its sort of the entries between calls and updates it when at most
#: this fraction of the objects changed cells (or were inserted or removed) since; above,
#: it sorts from scratch (see the module docstring).
SORT_UPDATE_FRACTION = 0.2
#: Smallest capacity (slots) allocated.
MIN_CAPACITY = 64
#: Single moves buffered before they are applied (see `DynamicHash.move`); bounds the
#: buffer's memory when nothing reads the hash for a long time.
MOVE_BUFFER = 65_536
_NO_SPHERES = np.empty((0, 4))
_MISSING = object()
_NDARRAY = np.ndarray
_FLOAT64 = np.dtype(np.float64)


def _power_of_two(n: float, minimum: int = 1024) -> int:
    size = minimum
    while size < n:
        size *= 2
    return size


#: An array of the type of the ``inverted`` table that `dynamic_pairs.pairs_chunks`
#: passes its chunk kernels (typing their targets needs one).
_INVERTED_LIKE = np.zeros((1, 1), np.uint8)


def _chunk_targets(arguments) -> tuple[np.ndarray, np.ndarray]:
    """The targets of `dynamic_pairs.sweep_chunk` and `dynamic_pairs.down_chunk` for the
    arguments of `dynamic_pairs.pairs_chunks` (see `_kernels/indirect.py`)."""
    (bounds, spheres, meta, inv_size, filtered, used_levels, _, bucket_start, codes, records,
     coarse_start, coarse_codes, coarse_records, pairs, counts, _, scan_ratio) = arguments
    shared = (bounds, spheres, meta, inv_size, filtered, used_levels, _INVERTED_LIKE)
    # One key: every argument type is fixed.
    sweep = indirect.kernel_target(dynamic_pairs.sweep_chunk, (
        0, *shared, bucket_start, codes, records, coarse_start, coarse_codes, coarse_records,
        pairs, counts), "dynamic")
    down = indirect.kernel_target(dynamic_pairs.down_chunk, (
        0, *shared, scan_ratio, bucket_start, codes, records, coarse_codes, coarse_records,
        pairs, counts), "dynamic")
    return sweep, down


def _int_id(value):
    """``value`` as a Python int when it is an integer id that fits int64, else None."""
    kind = type(value)
    if kind is int or isinstance(value, np.integer):
        value = int(value)
        if -(2**63) <= value < 2**63:
            return value
    return None


class DynamicHash:
    """A spatial hash of objects that are inserted, moved and removed by id.

    Parameters
    ----------
    cell_size : float
        Edge of the cells of the finest level. Choose about the size of the typical object
        (or the typical query radius): objects up to this size sit on the finest level,
        larger ones on coarser levels (see the module docstring).
    n_dims : int, default 3
        Dimension of the positions: 1, 2 or 3.
    capacity : int, default 64
        Slots allocated up front; the storage doubles when full.

    Notes
    -----
    Boxes are closed; a sphere overlaps what its surface or interior touches. A failed call
    (unknown id, bad coordinates) raises before changing anything.

    Examples
    --------
    >>> import numpy as np
    >>> from spatialhash import DynamicHash
    >>> world = DynamicHash(cell_size=1.0, n_dims=2)
    >>> world.insert("player", [0.5, 0.5])                       # a point
    >>> world.insert("wall", [2.0, 0.0], [2.5, 10.0])            # a box
    >>> world.insert("ball", [1.0, 1.0], radius=0.5)             # a sphere
    >>> world.move("player", [1.2, 1.1])
    >>> sorted(world.query_radius([1.0, 1.0], 0.3))
    ['ball', 'player']
    """

    def __init__(self, cell_size: float, n_dims: int = 3, *, capacity: int = MIN_CAPACITY):
        self._cell_size = as_positive_scalar(cell_size, "cell_size")
        if math.isinf(1.0 / self._cell_size):
            # Subnormal: no cell arithmetic holds (the batch grid's rule and message).
            raise ValueError(f"`cell_size` is too small: {self._cell_size} has no finite "
                             "inverse in float64.")
        if isinstance(n_dims, (bool, np.bool_)) or not isinstance(n_dims, numbers.Integral):
            raise TypeError(f"`n_dims` must be an integer (1, 2 or 3); got {n_dims!r}.")
        if not 1 <= n_dims <= 3:
            raise ValueError(f"`n_dims` must be 1, 2 or 3; got {n_dims!r}.")
        self._n_dims = int(n_dims)
        capacity = max(as_count(capacity, "capacity"), MIN_CAPACITY)
        with np.errstate(over="ignore"):
            sizes = self._cell_size * LEVEL_RATIO ** np.arange(N_LEVELS, dtype=np.float64)
        inv_size = np.where(np.isfinite(sizes), 1.0 / sizes, 0.0)
        inv_size[-1] = 0.0  # one infinite cell for anything larger than every level
        self._inv_size = inv_size
        self._lock = threading.RLock()
        self._allocate(capacity)
        self.clear()

    # ------------------------------------------------------------------ storage
    def _allocate(self, capacity: int) -> None:
        """Fresh storage of ``capacity`` slots (contents set by the caller)."""
        self._bounds = np.zeros((capacity, 6))
        self._spheres = np.full((capacity, 4), -1.0)
        self._meta = np.zeros((capacity, META_COLUMNS), np.int64)
        self._meta[:, LEVEL] = -1
        self._links = np.full((capacity * ENTRIES, 2), -1, np.int64)
        self._head = np.full(_power_of_two(4 * capacity), -1, np.int64)
        self._slot_key = np.zeros(capacity, np.int64)
        self._out = np.empty(capacity, np.int64)
        self._out_distances = np.empty(capacity)
        self._level_count = np.zeros(N_LEVELS, np.int64)
        self._status = np.zeros(1, np.int64)
        self._level_cells = np.zeros((N_LEVELS, 6), np.int64)
        storage_kernels.reset_level_cells(self._level_cells)
        self._stamp = np.zeros(capacity, np.int64)
        # Slots whose entries changed since `query_pairs` last sorted (set by the kernels
        # that place and release objects); a new storage drops the kept sort.
        self._changed = np.zeros(capacity, np.uint8)
        self._sort_kept = False
        # Whether a query read the bucket lists since the last `move_many` (see there).
        self._lists_read = True
        self._pack()

    def __getstate__(self) -> dict:
        with self._lock:
            self._apply_moves()
            state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def _pack(self) -> None:
        self._storage = (self._bounds, self._spheres, self._meta, self._links, self._head,
                         self._inv_size, self._level_count, self._status, self._level_cells)

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

    def _ensure_linked(self) -> None:
        """Apply the buffered moves, and rebuild the bucket lists when bulk moves or growth
        dropped them (queries that read them call this first)."""
        self._apply_moves()
        self._lists_read = True
        if self._status[0] == 0:
            if self._n_used >= PARALLEL_MIN_MOVES:
                with _config.threads(None):
                    dynamic_move.relink_all_parallel(self._meta, self._links, self._head,
                                                     self._level_cells, numba.get_num_threads())
            else:
                storage_kernels.relink_all(self._meta, self._links, self._head,
                                           self._level_cells)
            self._status[0] = 1

    def _apply_moves(self) -> None:
        """Apply the single moves buffered by `move`, in the order they were made."""
        if self._pending:
            pending, self._pending = self._pending, []
            # Flattened by `fromiter`: NumPy's `array` of a list of tuples took 0.67 us a
            # row against 0.39 (ad hoc, 65,536 rows).
            rows = np.fromiter(itertools.chain.from_iterable(pending), dtype=np.float64,
                               count=7 * len(pending)).reshape(-1, 7)
            storage_kernels.place_rows(self._storage, self._changed, rows)

    # ------------------------------------------------------------------ properties
    @property
    def cell_size(self) -> float:
        """Edge of the finest cells."""
        return self._cell_size

    @property
    def n_dims(self) -> int:
        """Dimension of the positions."""
        return self._n_dims

    @property
    def level_counts(self) -> np.ndarray:
        """Objects per level (level ``L`` has cells of ``cell_size * 4**L``), shape (64,)."""
        with self._lock:
            self._apply_moves()
            return self._level_count.copy()

    def __len__(self) -> int:
        with self._lock:
            return len(self._slot_of)

    def __contains__(self, id) -> bool:
        with self._lock:
            return id in self._slot_of

    def __iter__(self) -> Iterator:
        with self._lock:
            return iter(list(self._slot_of))

    def __repr__(self) -> str:
        with self._lock:
            self._apply_moves()
            levels = np.flatnonzero(self._level_count).tolist()
            return (f"DynamicHash(n_objects={len(self)}, n_dims={self._n_dims}, "
                    f"cell_size={self._cell_size}, levels={levels})")

    def clear(self) -> None:
        """Remove every object (capacity is kept)."""
        with self._lock:
            capacity = self._meta.shape[0]
            self._pending: list = []  # single moves not applied yet (see `move`)
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
            self._pair_scratch = None
            self._sort_kept = False
            self._last_lookup = None
            self._rows = np.empty((0, 6))
            self._ray_count = 0
            self._stamp[:] = 0

    def bounds(self, id) -> tuple[np.ndarray, np.ndarray]:
        """Bounding box ``(lower, upper)`` of object ``id``, each of shape (n_dims,)."""
        with self._lock:
            slot = self._slot(id)
            self._apply_moves()
            row = self._bounds[slot]
            return row[: self._n_dims].copy(), row[3 : 3 + self._n_dims].copy()

    # ------------------------------------------------------------------ ids
    def _slot(self, id) -> int:
        try:
            slot = self._slot_of.get(id, _MISSING)
        except TypeError as error:
            raise TypeError(f"`id` must be hashable; got {id!r:.80}.") from error
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
        size = _power_of_two(needed)
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
            value = _int_id(id)
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

    def _unregister(self, slots: np.ndarray) -> None:
        """Forget the ids of ``slots`` and free the slots."""
        self._last_lookup = None
        ints = []
        for slot in slots.tolist():
            stored = self._id_of[slot]
            del self._slot_of[stored]
            self._id_of[slot] = _MISSING
            self._free.append(slot)
            value = _int_id(stored)
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

    # ------------------------------------------------------------------ shapes
    def _shape(self, lower, upper, radius) -> tuple:
        """``(x0, y0, z0, x1, y1, z1, cx, cy, cz, r)`` of one point, box or sphere."""
        n_dims = self._n_dims
        low = check.coordinates(lower, "lower", n_dims)
        if radius is not None:
            if upper is not None:
                raise TypeError("give `upper` (a box) or `radius` (a sphere), not both.")
            r = check.radius_value(radius)
            x, y, z = low
            # Finite: a centre within +-1e150 moves the largest radius by less than half
            # its last unit, so no corner rounds to infinity.
            corners = (x - r, y - r, z - r, x + r, y + r, z + r)
            return (*corners[:n_dims], *low[n_dims:], *corners[3:3 + n_dims], *low[n_dims:],
                    x, y, z, r)
        high = low if upper is None else check.coordinates(upper, "upper", n_dims)
        check.check_order(low, high)
        return (*low, *high, 0.0, 0.0, 0.0, -1.0)

    def _shape_rows(self, m: int, lower, upper, radius) -> tuple[np.ndarray, np.ndarray]:
        """Bulk shapes: ``(bounds (m, 6), spheres (m, 4) or (0, 4) for boxes)``.

        The rows may be a buffer reused by the next call: the kernels copy them."""
        high = lower if upper is None else upper
        if (radius is None and type(lower) is np.ndarray and type(high) is np.ndarray
                and lower.dtype == np.float64 and high.dtype == np.float64
                and lower.shape == (m, self._n_dims) and high.shape == (m, self._n_dims)
                and lower.flags.c_contiguous and high.flags.c_contiguous):
            # The common bulk input checked and packed in one compiled pass; any error is
            # reported by the full checks below.
            if self._rows.shape[0] < m:
                self._rows = np.empty((m, 6))
            rows = self._rows[:m]
            if storage_kernels.box_rows(lower, high, rows):
                return rows, _NO_SPHERES
        low = check.coordinate_rows(lower, "lower", m, self._n_dims)
        rows = np.empty((m, 6))
        if radius is not None:
            if upper is not None:
                raise TypeError("give `upper` (boxes) or `radius` (spheres), not both.")
            r = check.radius_rows(radius, m)
            spheres = np.empty((m, 4))
            spheres[:, :3] = low
            spheres[:, 3] = r
            pad = np.zeros(3)
            pad[: self._n_dims] = 1.0
            # Finite corners: see `_shape`.
            rows[:, :3] = low - r[:, None] * pad
            rows[:, 3:] = low + r[:, None] * pad
            return rows, spheres
        rows[:, :3] = low
        if upper is None:
            rows[:, 3:] = low
        else:
            high = check.coordinate_rows(upper, "upper", m, self._n_dims)
            check_rows_order(low, high)
            rows[:, 3:] = high
        return rows, _NO_SPHERES

    # ------------------------------------------------------------------ changes
    def insert(self, id, lower, upper=None, *, radius=None, category: int = ALL_BITS,
               mask: int = ALL_BITS) -> None:
        """Add an object: a point (``lower`` only), a box, or a sphere (``radius``).

        Parameters
        ----------
        id : hashable
            The object's id; must not be in the hash yet.
        lower : array_like of float, shape (n_dims,)
            The point, the box's lower corner, or the sphere's centre; coordinates within
            +-1e150, like every position whose distances are computed.
        upper : array_like of float, shape (n_dims,), optional
            The box's upper corner, ``>= lower`` on every axis.
        radius : float, optional
            The sphere's radius, ``>= 0``.
        category, mask : int, default all bits
            Collision filter bits in ``[0, 2**32)``: a query with ``mask`` reports the
            object when ``category & mask != 0``; `query_pairs` reports a pair when each
            one's category meets the other's mask.
        """
        with self._lock:
            try:
                present = id in self._slot_of
            except TypeError as error:
                raise TypeError(f"`id` must be hashable; got {id!r:.80}.") from error
            if present:
                raise check.present_ids("id", [id])
            shape = self._shape(lower, upper, radius)
            category = check.bits_value(category, "category")
            mask = check.bits_value(mask, "mask")
            self._apply_moves()
            slots = self._take_slots(1)
            self._place_new(slots, np.array([shape[:6]]),
                            np.array([shape[6:]]) if shape[9] >= 0 else _NO_SPHERES,
                            category, mask)
            self._commit_slots(slots)
            self._register([id], slots)

    def _place_new(self, slots, rows, spheres, category, mask) -> None:
        self._meta[slots, CATEGORY] = category
        self._meta[slots, MASK] = mask
        storage_kernels.place_many(self._storage, self._changed, slots, rows, spheres, True)

    def move(self, id, lower, upper=None, *, radius=None) -> None:
        """Give object ``id`` a new shape: a point, a box (``upper``) or a sphere (``radius``).

        The arguments are those of `insert`. Points and boxes given as lists, tuples or
        float64 arrays are buffered and applied, in order, before anything next reads or
        changes the hash (see the module docstring): the call only checks them.
        """
        with self._lock:
            try:
                slot = self._slot_of[id]
            except KeyError:
                raise check.unknown_ids("id", [id]) from None
            except TypeError as error:
                raise TypeError(f"`id` must be hashable; got {id!r:.80}.") from error
            # The common case kept short (the budget is 5 us a call): a point or box given as
            # lists, tuples or 1-D float64 arrays of Python floats, checked here and buffered.
            # Anything else (integers too) takes the full checks of `_shape` and is applied now.
            if radius is None:
                kind = type(lower)
                if kind is _NDARRAY and lower.dtype == _FLOAT64:
                    lower = lower.tolist()
                    kind = type(lower)  # a list, or a float for a 0-d array
                if upper is None:
                    high, high_kind = lower, kind
                else:
                    high, high_kind = upper, type(upper)
                    if high_kind is _NDARRAY and upper.dtype == _FLOAT64:
                        high = upper.tolist()
                        high_kind = type(high)
                n_dims = self._n_dims
                if ((kind is list or kind is tuple) and (high_kind is list or high_kind is tuple)
                        and len(lower) == n_dims and len(high) == n_dims):
                    if n_dims == 3:
                        x0, y0, z0 = lower
                        x1, y1, z1 = high
                    elif n_dims == 2:
                        (x0, y0), (x1, y1), z0, z1 = lower, high, 0.0, 0.0
                    else:
                        x0, x1, y0, y1, z0, z1 = lower[0], high[0], 0.0, 0.0, 0.0, 0.0
                    if (type(x0) is float and type(y0) is float and type(z0) is float
                            and type(x1) is float and type(y1) is float and type(z1) is float
                            # Finite and within +-1e150 (`_validation.COORDINATE_LIMIT`): NaN,
                            # infinities and squares that overflow fail; values near the limit
                            # take the full checks below.
                            and x0 * x0 + y0 * y0 + z0 * z0 + x1 * x1 + y1 * y1 + z1 * z1 <= 1e300
                            # Each 0 or at least `_validation.COORDINATE_FLOOR` (2**-458,
                            # squared 2**-916): smaller ones take the full checks below.
                            and (x0 * x0 >= 2.0**-916 or x0 == 0.0)
                            and (y0 * y0 >= 2.0**-916 or y0 == 0.0)
                            and (z0 * z0 >= 2.0**-916 or z0 == 0.0)
                            and (x1 * x1 >= 2.0**-916 or x1 == 0.0)
                            and (y1 * y1 >= 2.0**-916 or y1 == 0.0)
                            and (z1 * z1 >= 2.0**-916 or z1 == 0.0)
                            and x0 <= x1 and y0 <= y1 and z0 <= z1):
                        pending = self._pending
                        pending.append((slot, x0, y0, z0, x1, y1, z1))
                        if len(pending) >= MOVE_BUFFER:
                            self._apply_moves()
                        return
            shape = self._shape(lower, upper, radius)
            self._apply_moves()
            if storage_kernels.place_one(self._storage, slot, *shape):
                self._changed[slot] = 1

    def remove(self, id) -> None:
        """Remove object ``id``."""
        with self._lock:
            slot = self._slot(id)
            self._apply_moves()
            slots = np.array([slot], np.int64)
            storage_kernels.release_many(self._storage, self._changed, slots)
            self._unregister(slots)

    def insert_many(self, ids, lower, upper=None, *, radius=None, category=None,
                    mask=None) -> None:
        """Add many objects with integer ids: points, boxes (``upper``) or spheres (``radius``).

        Parameters
        ----------
        ids : array_like of int, shape (m,)
            New, distinct ids.
        lower : array_like of float, shape (m, n_dims)
            Points, lower corners or centres.
        upper : array_like of float, shape (m, n_dims), optional
            Upper corners of boxes.
        radius : float or array_like of float, shape (m,), optional
            Radii of spheres.
        category, mask : int or array_like of int, shape (m,), optional
            Filter bits as in `insert`; default all bits.
        """
        with self._lock:
            ids = check.id_array(ids)
            m = ids.shape[0]
            rows, spheres = self._shape_rows(m, lower, upper, radius)
            categories = check.bits_rows(category, "category", m)
            masks = check.bits_rows(mask, "mask", m)
            bad = storage_kernels.ids_repeated(self._id_keys, self._id_values, ids)
            id_list = ids.tolist()
            if bad.size == 0 and self._n_other_ids:
                bad = np.array([i for i, id in enumerate(id_list) if id in self._slot_of], np.int64)
            if bad.size:
                raise check.present_ids("ids", ids[bad].tolist())
            self._apply_moves()
            slots = self._take_slots(m)
            self._meta[slots, CATEGORY] = categories
            self._meta[slots, MASK] = masks
            storage_kernels.place_many(self._storage, self._changed, slots, rows, spheres, True)
            self._commit_slots(slots)
            # Integer ids in bulk: the dict and the table in a few vectorized steps.
            slot_list = slots.tolist()
            self._slot_of.update(zip(id_list, slot_list, strict=True))
            id_of = self._id_of
            for id, slot in zip(id_list, slot_list, strict=True):
                id_of[slot] = id
            self._slot_key[slots] = ids
            self._int_table_room(m)
            storage_kernels.ids_insert(self._id_keys, self._id_values, ids, slots)
            self._n_int_ids += m

    def move_many(self, ids, lower, upper=None, *, radius=None) -> None:
        """Give many objects new shapes; arguments as in `insert_many`.

        Objects that stay in their cells only have their coordinates written. The bucket
        lists are dropped, to be rebuilt by the next query that reads them (`query_pairs`
        does not), when more than a quarter of the objects move (faster than updating them
        object by object), and when no query read them since the previous `move_many`: a
        simulation that only asks for pairs does not pay for lists it never reads (100,000
        boxes, 10% moved: 4.0 ms a step to update them, ad hoc).
        """
        with self._lock:
            ids = check.id_array(ids)
            m = ids.shape[0]
            rows, spheres = self._shape_rows(m, lower, upper, radius)
            slots = self._slots_of(ids)
            self._apply_moves()
            lists_read, self._lists_read = self._lists_read, False
            if m > RELINK_FRACTION * len(self) or not lists_read:
                self._status[0] = 0
                if m >= PARALLEL_MIN_MOVES:
                    with _config.threads(None):
                        dynamic_move.move_many_unlinked(self._storage, self._changed, slots, rows,
                                                        spheres, numba.get_num_threads())
                    return
            storage_kernels.place_many(self._storage, self._changed, slots, rows, spheres, False)

    def remove_many(self, ids) -> None:
        """Remove many objects by integer id."""
        with self._lock:
            ids = check.id_array(ids)
            slots = self._slots_of(ids)
            self._apply_moves()
            storage_kernels.release_many(self._storage, self._changed, slots)
            self._unregister(slots)

    # ------------------------------------------------------------------ queries
    def _query(self, kind: int, query: np.ndarray, mask) -> np.ndarray:
        mask = check.bits_value(mask, "mask")
        self._ensure_linked()
        n = dynamic_query.query_slots(self._bounds, self._spheres, self._meta, self._links,
                                      self._head, self._inv_size, self._level_count, kind,
                                      query, mask, self._out)
        return self._ids_of(self._out[:n].copy())

    def query_cell(self, position, *, mask: int = ALL_BITS) -> np.ndarray:
        """Ids of the objects stored in the cells holding ``position``, on every level.

        The classic spatial-hash lookup: what shares a bucket with ``position`` (no
        geometric test), at the cell size of each object's level.
        """
        with self._lock:
            point = check.coordinates(position, "position", self._n_dims, bounded=False)
            query = np.array([*point, *point, 0.0])
            return self._query(dynamic_query.KIND_CELL, query, mask)

    def query_box(self, lower, upper, *, mask: int = ALL_BITS) -> np.ndarray:
        """Ids of the objects overlapping the closed box ``lower..upper``."""
        with self._lock:
            low = check.coordinates(lower, "lower", self._n_dims, bounded=False)
            high = check.coordinates(upper, "upper", self._n_dims, bounded=False)
            check.check_order(low, high)
            return self._query(dynamic_query.KIND_BOX, np.array([*low, *high, 0.0]), mask)

    def query_radius(self, center, r: float, *, mask: int = ALL_BITS) -> np.ndarray:
        """Ids of the objects within distance ``r`` of ``center`` (closed ball)."""
        with self._lock:
            point = check.coordinates(center, "center", self._n_dims)
            r = as_positive_scalar(r, "r", allow_zero=True)
            return self._query(dynamic_query.KIND_BALL, np.array([*point, *point, r]), mask)

    def query_knn(self, point, k: int, *, mask: int = ALL_BITS) -> Hits:
        """The ``k`` objects nearest to ``point``, nearest first, exact.

        The distance to a box is to its nearest point (0 inside), to a sphere to its
        surface (0 inside). Ties are broken by the smaller id when every id is an integer,
        else by storage slot (deterministic, not the ids' order). Fewer than ``k`` come
        back when the hash holds fewer matching objects.
        """
        with self._lock:
            position = np.array(check.coordinates(point, "point", self._n_dims))
            # No more than every object can come back: room for those only (a huge k, valid,
            # would otherwise allocate terabytes).
            k = min(as_count(k, "k"), max(len(self), 1))
            mask = check.bits_value(mask, "mask")
            self._ensure_linked()
            heap_distance = np.empty(k)
            heap_key = np.empty(k, np.int64)
            mixed = self._n_other_ids > 0
            keys = self._tie_keys()
            n = dynamic_query.knn_query(self._bounds, self._spheres, self._meta, self._links,
                                        self._head, self._inv_size, self._level_count,
                                        keys, position, k, mask, self._n_dims,
                                        heap_distance, heap_key)
            found = heap_key[:n]
            if not mixed:
                ids = found.copy()
            else:
                ids = np.empty(n, dtype=object)
                for i, slot in enumerate(found.tolist()):
                    ids[i] = self._id_of[slot]
            return Hits(ids, heap_distance[:n].copy())

    def query_ray(self, origin, direction, *, max_distance: float = math.inf,
                  all_hits: bool = False, mask: int = ALL_BITS) -> Hits:
        """Objects hit by a ray (or a segment, with ``max_distance``), nearest first.

        Parameters
        ----------
        origin : array_like of float, shape (n_dims,)
            Where the ray starts.
        direction : array_like of float, shape (n_dims,)
            Its direction, any non-zero length; normalized once, so distances are lengths.
        max_distance : float, default inf
            Length of the segment.
        all_hits : bool, default False
            Every object hit, ordered by distance (ties as in `query_knn`), rather
            than only the first.
        mask : int, default all bits
            Category filter.

        Returns
        -------
        Hits
            ``ids`` and ``distances`` along the ray to where it enters each object (0 when
            it starts inside): one hit or none unless ``all_hits``.
        """
        with self._lock:
            start = np.array(check.coordinates(origin, "origin", self._n_dims))
            x, y, z = check.coordinates(direction, "direction", self._n_dims, bounded=False)
            length = math.sqrt(x * x + y * y + z * z)  # Python floats: overflow gives inf
            if not 1e-150 < length < 1e150:
                # Squares that overflow or underflow: divided by the largest component first,
                # any non-zero direction gives its unit vector.
                scale = max(abs(x), abs(y), abs(z))
                if scale == 0.0:
                    raise ValueError(f"`direction` must be non-zero; got "
                                     f"{[x, y, z][: self._n_dims]}.")
                x, y, z = x / scale, y / scale, z / scale
                length = math.sqrt(x * x + y * y + z * z)
            heading = np.array([x / length, y / length, z / length])
            max_distance = as_positive_scalar(max_distance, "max_distance", allow_zero=True,
                                              allow_inf=True)
            mask = check.bits_value(mask, "mask")
            self._ensure_linked()
            self._ray_count += 1
            out_slots, out_t = self._out, self._out_distances
            keys = self._tie_keys()
            n = dynamic_ray.ray_hits(self._bounds, self._spheres, self._meta, self._links,
                                     self._head, self._inv_size, self._level_count,
                                     self._level_cells, keys, self._stamp,
                                     self._ray_count, start, heading, max_distance, mask,
                                     not all_hits, out_slots, out_t)
            slots = out_slots[:n].copy()
            distances = out_t[:n].copy()
            order = np.lexsort((keys[slots], distances))
            slots = slots[order]
            if self._n_other_ids == 0:
                ids = self._slot_key[slots]
            else:
                ids = np.empty(n, dtype=object)
                for i, slot in enumerate(slots.tolist()):
                    ids[i] = self._id_of[slot]
            return Hits(ids, distances[order])

    def _sort_entries(self, scratch: dict) -> tuple[int, int, bool]:
        """Sort every (object, cell) entry by bucket into the scratch (`dynamic_sort`):
        from the sort kept from the last call when few slots changed since, else from
        scratch. Returns ``(n_entries, n_coarse, filtered)``."""
        # Counted first: listing 40,000 changed slots of 100,000 costs 0.7 ms (5 us to count).
        if self._sort_kept and (np.count_nonzero(self._changed)
                                <= SORT_UPDATE_FRACTION * len(self)):
            changed_slots = np.flatnonzero(self._changed)
            n_entries, n_coarse, filtered = dynamic_sort.update_sort(
                self._bounds, self._spheres, self._meta, self._level_count, self._changed,
                changed_slots, scratch["lowest"], scratch["bucket_start"], scratch["codes"],
                scratch["part_code"], scratch["n_coarse"], scratch["coarse_start"],
                scratch["coarse_codes"], scratch["coarse_spare"],
                scratch["coarse_records"], scratch["entry_bucket"], scratch["entry_code"])
            if n_entries >= 0:
                if changed_slots.size:
                    # The merged sorts were written to the spare buffers.
                    scratch["codes"], scratch["part_code"] = (scratch["part_code"],
                                                              scratch["codes"])
                    scratch["coarse_codes"], scratch["coarse_spare"] = (
                        scratch["coarse_spare"], scratch["coarse_codes"])
                # Other bits than all may only stay set (a removal does not clear it):
                # the sweep then tests filters it could skip, never the other way.
                filtered = bool(filtered or scratch["filtered"])
                scratch["n_coarse"] = n_coarse
                scratch["filtered"] = filtered
                return n_entries, n_coarse, filtered
        parallel = self._meta.shape[0] >= PARALLEL_MIN_ENTRIES
        while True:
            # Small hashes on this thread alone: waking the others costs more than it saves.
            with _config.threads(None if parallel else 1):
                n_chunks = numba.get_num_threads()
                n_entries, n_coarse, filtered = dynamic_sort.sort_entries(
                    self._bounds, self._spheres, self._meta, self._level_count,
                    scratch["bucket_start"], scratch["codes"], scratch["entry_bucket"],
                    scratch["entry_code"], scratch["part_bucket"], scratch["part_code"],
                    n_chunks, scratch["coarse_start"], scratch["coarse_codes"],
                    scratch["coarse_records"])
            if n_entries <= scratch["codes"].shape[0] and (
                    n_coarse <= scratch["coarse_codes"].shape[0]):
                break
            # Room for a quarter more, and about one entry per bucket. The coarse table is
            # never larger than the fine one (its buckets are the fine ones masked again).
            if n_entries > scratch["codes"].shape[0]:
                size = int(1.25 * n_entries) + 16
                scratch["codes"] = np.empty(size, np.int64)
                scratch["entry_bucket"] = np.empty(size, np.int64)
                scratch["entry_code"] = np.empty(size, np.int64)
                scratch["part_bucket"] = np.empty(size, np.int64)
                scratch["part_code"] = np.empty(size, np.int64)
                scratch["records"] = np.empty((size, 6))
                scratch["bucket_start"] = np.empty(_power_of_two(n_entries) + 1, np.int64)
            if n_coarse > scratch["coarse_codes"].shape[0]:
                scratch["coarse_codes"] = np.empty(int(1.25 * n_coarse) + 16, np.int64)
                scratch["coarse_spare"] = np.empty_like(scratch["coarse_codes"])
                scratch["coarse_records"] = np.empty((scratch["coarse_codes"].shape[0], 6))
                scratch["coarse_start"] = np.empty(
                    min(_power_of_two(n_coarse), scratch["bucket_start"].shape[0] - 1) + 1,
                    np.int64)
        self._changed[:] = 0
        self._sort_kept = True
        scratch["lowest"] = int(dynamic_sort.lowest_used_level(self._level_count))
        scratch["n_coarse"] = n_coarse
        scratch["filtered"] = bool(filtered)
        return n_entries, n_coarse, filtered

    def query_pairs(self) -> np.ndarray:
        """Every pair of overlapping objects, once: ids of shape (n_pairs, 2).

        Pairs pass the category filters both ways. With integer ids, each row holds the
        smaller id first; the order of the rows is unspecified (but the same for any
        thread count).
        """
        with self._lock:
            self._apply_moves()
            scratch = self._pair_scratch
            if scratch is None:
                n = max(len(self), 1)
                scratch = {"bucket_start": np.empty(_power_of_two(n) + 1, np.int64),
                           "codes": np.empty(0, np.int64), "records": np.empty((0, 6)),
                           "entry_bucket": np.empty(0, np.int64),
                           "entry_code": np.empty(0, np.int64),
                           "part_bucket": np.empty(0, np.int64),
                           "part_code": np.empty(0, np.int64),
                           "coarse_start": np.empty(1025, np.int64),
                           "coarse_codes": np.empty(0, np.int64),
                           "coarse_spare": np.empty(0, np.int64),
                           "coarse_records": np.empty((0, 6)),
                           "pairs": np.empty((dynamic_pairs.N_CHUNKS * max(n // 8, 16), 2),
                                             np.int64),
                           "counts": np.zeros(dynamic_pairs.N_CHUNKS, np.int64)}
                self._pair_scratch = scratch
            n_entries, n_coarse, filtered = self._sort_entries(scratch)
            used_levels = np.flatnonzero(self._level_count)
            parallel = n_entries >= PARALLEL_MIN_ENTRIES
            counts = scratch["counts"]
            while True:
                pairs = scratch["pairs"]
                arguments = (self._bounds, self._spheres, self._meta, self._inv_size, filtered,
                             used_levels, self._level_count, scratch["bucket_start"],
                             scratch["codes"], scratch["records"], scratch["coarse_start"],
                             scratch["coarse_codes"][:n_coarse], scratch["coarse_records"], pairs,
                             counts, CROSS_INVERT_WEIGHT, CROSS_SCAN_RATIO)
                with _config.threads(None if parallel else 1):
                    dynamic_pairs.pairs_chunks(*arguments, *_chunk_targets(arguments))
                per_chunk = pairs.shape[0] // dynamic_pairs.N_CHUNKS
                most = int(counts.max())
                if most <= per_chunk:
                    break
                scratch["pairs"] = np.empty((dynamic_pairs.N_CHUNKS * (int(1.25 * most) + 16), 2),
                                            np.int64)
            if self._n_other_ids == 0:
                return dynamic_pairs.chunk_pairs_as_ids(pairs, counts, self._slot_key)
            slots = np.concatenate([pairs[c * per_chunk : c * per_chunk + counts[c]]
                                    for c in range(dynamic_pairs.N_CHUNKS)])
            out = np.empty((len(slots), 2), dtype=object)
            id_of = self._id_of
            for i, (a, b) in enumerate(slots.tolist()):
                out[i, 0] = id_of[a]
                out[i, 1] = id_of[b]
            return out

