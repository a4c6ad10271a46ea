"""The bundles of arrays that the dynamic hash's kernels take, each a NamedTuple.

Like the batch grid's `GridState`, a few bundles stand for the many arrays of the storage,
the sort and the queries, so that no kernel takes more than eight arguments. Every field
has a fixed dtype and layout, so each kernel compiles once.

Kernels take each bundle as a plain ``tuple`` of its fields, in the order given here; the
engine (`dynamic/_engine.py`) makes those tuples once, when it allocates the arrays. Numba's
dispatcher types a plain tuple of arrays in C, and a NamedTuple in Python: a NamedTuple
argument adds a fixed cost to each call (ad hoc, a kernel that writes one value,
`time.perf_counter` over 200,000 calls; see docs/benchmarks.md), which every single
`insert`, `move` or `query_box` would pay. The bundles are kept few for the same reason: a
single call passes the arrays it reads in two or three bundles and the rest alone.

A kernel takes a bundle's arrays by index, with the constants below, one a statement
(``meta = objects[META]``), never by unpacking (``bounds, spheres, meta = objects``):
numba's dead-code elimination, which runs in every parallel kernel and wherever numba
inlines code, does not see an array unpacked from a tuple argument as the argument's (its
alias analysis does not follow ``exhaust_iter``, numba 0.68) and drops writes to it: in a
parallel kernel, ``bucket_start[n_buckets] = n_entries`` after a ``prange`` loop is lost.
Tuples of scalars (a cell range, a shape) are unpacked.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: The spheres of boxes and points only, for `storage.place_many` (``new_spheres``).
NO_SPHERES = np.empty((0, 4))

# Field indices of the bundles, in the order of their fields (see the module docstring).
#: `Objects`.
BOUNDS, SPHERES, META = 0, 1, 2
#: `Cells`.
INV_SIZE, LEVEL_COUNT, LINKS, HEAD = 0, 1, 2, 3
#: `QueryBuffers`.
FOUND_SLOTS, FOUND_DISTANCES, STAMP = 0, 1, 2
#: `RayCast`.
ORIGIN, DIRECTION, MAX_DISTANCE, CAST_MASK, FIRST_ONLY, CAST_STAMP = 0, 1, 2, 3, 4, 5
#: `EntrySort`.
BUCKET_START, CODES, RECORDS, COARSE_START, COARSE_CODES, COARSE_RECORDS = 0, 1, 2, 3, 4, 5
#: `SortWork`.
ENTRY_BUCKET, ENTRY_CODE, PART_BUCKET, PART_CODE, COARSE_SPARE = 0, 1, 2, 3, 4
#: `ChunkPairs`.
PAIRS, COUNTS = 0, 1
#: `PairPlan`.
PLAN_INV_SIZE, USED_LEVELS, INVERTED, FILTERED, SCAN_RATIO = 0, 1, 2, 3, 4


class Objects(NamedTuple):
    """The objects, one slot each (``capacity`` slots). C-contiguous arrays.

    Attributes
    ----------
    bounds : ndarray of float64, shape (capacity, 6)
        Bounding box ``(x0, y0, z0, x1, y1, z1)``, padded to three axes.
    spheres : ndarray of float64, shape (capacity, 4)
        ``(cx, cy, cz, r)``; ``r < 0`` for a box or a point.
    meta : ndarray of int64, shape (capacity, 9)
        ``(level, lo_x, lo_y, lo_z, hi_x, hi_y, hi_z, category, mask)`` (columns
        `storage.LEVEL`, `storage.LO`, `storage.HI`, `storage.CATEGORY`, `storage.MASK`);
        ``level = -1`` for a free slot.
    """

    bounds: np.ndarray
    spheres: np.ndarray
    meta: np.ndarray


class Cells(NamedTuple):
    """The levels and the bucket lists of the cells (see `storage.py`): what the queries
    read. The per-level boxes of cells (``level_cells``, int64 of shape (N_LEVELS, 6),
    ``(lo_x, lo_y, lo_z, hi_x, hi_y, hi_z)``, at least the cells in use) and the lists'
    ``status`` (int64 of shape (1,): 1 while the lists are current, 0 once they are dropped,
    to be rebuilt by the next query that reads them) are passed apart, to the kernels that
    need them: at each call, an array in a bundle costs the dispatcher nearly twice as much
    to type as one passed alone.

    Attributes
    ----------
    inv_size : ndarray of float64, shape (N_LEVELS,)
        Inverse cell size of each level; 0 for the last level's one infinite cell.
    level_count : ndarray of int64, shape (N_LEVELS,)
        Objects per level.
    links : ndarray of int64, shape (capacity * ENTRIES, 2)
        ``(next, prev)`` of each entry in its bucket list.
    head : ndarray of int64, shape (n_buckets,)
        First entry of each bucket (-1: empty); ``n_buckets`` a power of two.
    """

    inv_size: np.ndarray
    level_count: np.ndarray
    links: np.ndarray
    head: np.ndarray


class QueryBuffers(NamedTuple):
    """Output buffers of the queries, one row a slot, reused by every call.

    Attributes
    ----------
    slots : ndarray of int64, shape (capacity,)
        Slots found.
    distances : ndarray of float64, shape (capacity,)
        Their distances along a ray.
    stamp : ndarray of int64, shape (capacity,)
        The last ray that tested each slot (`RayCast.stamp`).
    """

    slots: np.ndarray
    distances: np.ndarray
    stamp: np.ndarray


class RayCast(NamedTuple):
    """One ray cast (`ray.ray_hits`).

    Attributes
    ----------
    origin : ndarray of float64, shape (3,)
    direction : ndarray of float64, shape (3,)
        A unit vector.
    max_distance : float
    mask : int
        Category filter.
    first_only : bool
        Only the first hit.
    stamp : int
        New for each cast (see `QueryBuffers.stamp`).
    """

    origin: np.ndarray
    direction: np.ndarray
    max_distance: float
    mask: int
    first_only: bool
    stamp: int


class EntrySort(NamedTuple):
    """Every (object, cell) entry sorted by bucket, and apart the entries above the lowest
    non-empty level (`sort.py`; codes as in `pairs.py`).

    Attributes
    ----------
    bucket_start : ndarray of int64, shape (n_buckets + 1,)
        The entries of bucket ``b`` are ``codes[bucket_start[b]:bucket_start[b + 1]]``.
    codes : ndarray of int64, shape (room,)
    records : ndarray of float64, shape (room, 6)
        The bounding box of each entry's object, next to its code (copied by the sweep).
    coarse_start, coarse_codes, coarse_records : ndarray
        The same for the entries above the lowest level, in a table of at most as many
        buckets; ``coarse_codes`` may be cut to the entries in use.
    """

    bucket_start: np.ndarray
    codes: np.ndarray
    records: np.ndarray
    coarse_start: np.ndarray
    coarse_codes: np.ndarray
    coarse_records: np.ndarray


class SortWork(NamedTuple):
    """Scratch of the sort (`sort.py`), int64 arrays.

    Attributes
    ----------
    entry_bucket, entry_code : ndarray of int64, shape (room,)
        Bucket and code of each entry, in slot order (of the changed slots only, in an
        update of the kept sort).
    part_bucket, part_code : ndarray of int64, shape (room,)
        The entries partitioned by part; an update writes its merged codes to
        ``part_code``, which then takes the place of `EntrySort.codes`.
    coarse_spare : ndarray of int64, shape (coarse room,)
        Where an update writes the merged coarse codes (then swapped likewise).
    """

    entry_bucket: np.ndarray
    entry_code: np.ndarray
    part_bucket: np.ndarray
    part_code: np.ndarray
    coarse_spare: np.ndarray


class ChunkPairs(NamedTuple):
    """The pairs found by the chunks of `pairs.pairs_chunks`.

    Attributes
    ----------
    pairs : ndarray of int64, shape (N_CHUNKS * per_chunk, 2)
        Chunk ``c`` writes slot pairs to rows ``c * per_chunk`` on.
    counts : ndarray of int64, shape (N_CHUNKS,)
        Pairs each chunk found (more than ``per_chunk``: it wrote the first ones only).
    """

    pairs: np.ndarray
    counts: np.ndarray


class PairPlan(NamedTuple):
    """How `pairs_chunks` searches the levels, made inside the kernel for its chunks.

    Attributes
    ----------
    inv_size : ndarray of float64, shape (N_LEVELS,)
    used_levels : ndarray of int64, shape (n_used,)
        The non-empty levels, ascending.
    inverted : ndarray of uint8, shape (N_LEVELS, N_LEVELS)
        Per pair of levels (fine, coarse): 1 when the coarse side finds their pairs
        (`pairs.choose_inverted`).
    filtered : bool
        Whether some object has category or mask bits other than all (the filters are
        tested only then).
    scan_ratio : float
        A coarse object covering more than ``n_entries / scan_ratio`` finer cells scans
        every entry instead.
    """

    inv_size: np.ndarray
    used_levels: np.ndarray
    inverted: np.ndarray
    filtered: bool
    scan_ratio: float


def _check_indices() -> None:
    """The field constants name the fields of the bundles (checked once, at import)."""
    for bundle, names in ((Objects, "BOUNDS SPHERES META"),
                          (Cells, "INV_SIZE LEVEL_COUNT LINKS HEAD"),
                          (QueryBuffers, "FOUND_SLOTS FOUND_DISTANCES STAMP"),
                          (RayCast, "ORIGIN DIRECTION MAX_DISTANCE CAST_MASK FIRST_ONLY "
                                    "CAST_STAMP"),
                          (EntrySort, "BUCKET_START CODES RECORDS COARSE_START COARSE_CODES "
                                      "COARSE_RECORDS"),
                          (SortWork, "ENTRY_BUCKET ENTRY_CODE PART_BUCKET PART_CODE "
                                     "COARSE_SPARE"),
                          (ChunkPairs, "PAIRS COUNTS"),
                          (PairPlan, "PLAN_INV_SIZE USED_LEVELS INVERTED FILTERED SCAN_RATIO")):
        indices = [globals()[name] for name in names.split()]
        assert indices == list(range(len(bundle._fields))), bundle.__name__


_check_indices()
