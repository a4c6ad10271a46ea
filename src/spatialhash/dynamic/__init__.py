"""The dynamic hash: objects (points, boxes, spheres) inserted, moved and removed by id.

Layers
------
`DynamicHash` (``_hash.py``) is the public class: it validates the input, keeps the ids
(``_ids.py``), calls its engine with slots and turns the slots it gets back into ids;
``_contacts.py`` turns the engine's pairs into the contact events of `query_contacts`. The
engine's interface is `_engine.DynamicEngine`, and `_engine.ENGINES` names the engines
(``DynamicHash(..., engine="cpu")``). The CPU engine, `_engine.CpuDynamicEngine`, keeps the
objects in NumPy arrays (``_storage.py``: slots, growth, moves; ``_pair_search.py``: the
sort of the entries and the sweep) and runs the numba kernels of ``_kernels/``, which take
their arrays in a few bundles (``_kernels/state.py``). The tuned constants named below live
where they are used: ``LEVEL_RATIO``, ``RELINK_FRACTION``, ``PARALLEL_MIN_MOVES`` and
``MOVE_BUFFER`` in ``_storage.py``; ``PARALLEL_MIN_ENTRIES``, ``CROSS_INVERT_WEIGHT`` and
``SORT_UPDATE_FRACTION`` in ``_pair_search.py``. The figures below are of
`benchmarks/bench_dynamic.py`'s 100,000 2-D boxes of three size classes unless named
otherwise, on the 2-core development machine.

Objects
-------
Each object has a user id and a shape: a point, an axis-aligned box, or a sphere (a centre
and a radius, held with its bounding box ``centre -/+ radius``). Every object lives in a
slot of structure-of-arrays storage (``bounds``, ``spheres``, ``meta``: `state.Objects`);
freed slots are reused and capacity doubles when full. Ids are any hashable Python values,
kept above the engine (``_ids.py``) in a dict id -> slot. Integer ids are also kept in a
NumPy open-addressing table, so bulk calls (`insert_many`, `move_many`, `remove_many`) map
thousands of ids to slots in one compiled loop. The engine sees slots only; what ordering
needs of the ids (ties in `query_knn` and `query_ray` go to the smaller integer id) comes
down to it as a key per slot.

Levels for mixed sizes
----------------------
Level ``L`` is a grid of cubic cells of size ``cell_size * LEVEL_RATIO**L``. An object goes
to the lowest level whose cells are at least as large as its largest extent, so it covers
at most two cells per axis (eight in 3-D) and is stored in each of them. Points and objects
up to ``cell_size`` sit on level 0; a huge object sits on a coarse level instead of
flooding the fine one; the last level has one infinite cell for objects larger than all
the others. Queries visit only non-empty levels. The ratio is 4 rather than 2: fewer levels
mean fewer cross-level lookups in `query_pairs` (the benchmark's boxes took 1.2 times as
long with ratio 2, on a loaded machine, so only the order is certain), while a level's
cells stay within 4x the size of its objects.

Cells and buckets
-----------------
A cell is ``floor(x / cell)`` per axis, exactly, up to 2**62 cells from the origin (4.6e18
cells; cell coordinates saturate there, so `query_cell` beyond it reports the objects of
the outermost cell, and queries only slow down); no world bounds. Every (object, cell)
entry is chained into a bucket list keyed by a hash of ``(level, cell)`` (doubly linked, so
insert and remove are O(1)); readers compare cells, so bucket collisions cost time, never
correctness. A move that keeps an object in its cells writes its coordinates and nothing
else. Bulk moves of more than `RELINK_FRACTION` of the objects drop the bucket lists
instead of updating them entry by entry (an update touches scattered memory: for 100,000
objects it takes 2.5 times as long as a rebuild), and so does any `move_many` when no query
read the lists since the previous one (a simulation that only asks for pairs would update
lists it never reads); they are rebuilt by the next query that reads them, on all threads
from `PARALLEL_MIN_MOVES` objects; and a bulk move while they are dropped runs on all
threads from `PARALLEL_MIN_MOVES` objects too (`_kernels/move.py`).

Pairs
-----
`query_pairs` never reads the bucket lists: it sorts all entries by bucket with a counting
sort, like the batch grid's build, copies each bucket run's boxes next to it and sweeps the
runs in 16 fixed chunks, on all threads from `PARALLEL_MIN_ENTRIES` entries (same rows in
the same order for any thread count; `_kernels/pairs.py`). The sweep reads ``meta``
(scattered rows) only for the category filters, and only when some object has other bits
than all: a candidate's cell is recomputed from its copied box instead. The sort runs on
all threads too, from `PARALLEL_MIN_ENTRIES` slots (`_kernels/sort.py`): the slots are cut
into one chunk per thread to hash their entries once, the entries are partitioned stably by
the high bits of their bucket into parts of 2**14 buckets, and each part is counting-sorted
on its own (its starts stay in L2); a stable sort gives the same codes for any cut. Pairs
across levels are found from whichever side takes fewer probes (`CROSS_INVERT_WEIGHT`):
each fine object looks up the coarse cells it covers, or each coarse object reads the runs
of the finer cells it covers in the main sort. On the benchmark's boxes the coarse side
makes 157,000 probes meeting 211,000 candidates, the fine side 190,000 meeting 428,000, for
38,000 pairs (of which the box test needs the records: a cache miss into 9 MB of records
per candidate); 3-D boxes gain more (100,000 3-D boxes: 2.3 times as fast as from the fine
side, one core). Reading each tile's run of buckets whole instead of cell by cell (fewer
probes, 4x the candidates) is slower; branch-free box tests, a 4x larger coarse table and
coarse buckets ordered like the fine ones do not pay either (each measured against this
code, alternately). A step of the benchmark, per part (one core, CPU time, loaded machine),
largest first: the cross-level lookups (40-50% of the step), the sort from scratch (about
30%), the same-level sweep (about 15%), copying records (about 9%); a bulk move of
everything costs about half the sort.

Kept sort
---------
Between two calls of a simulation few objects change cells: in the benchmark (steps of at
most 0.5 in cells of 2), 0.4% / 4% / 40% of the objects at 1% / 10% / 100% moved. So
`query_pairs` keeps its sort (``codes``, ``bucket_start``, the coarse sort:
`state.EntrySort`) between calls, and every kernel that changes what decides an entry
(cells, level, the sphere bit; inserts and removals) sets a per-slot flag in ``changed``
(one byte a slot, outside the bundles: one more array there would be one more to unbox in
every `move`). The next call counts the flags (one pass over a byte a slot), takes the
entries of the flagged slots out of the kept runs and merges their new entries in, sorted
by a small radix sort (`sort.update_sort`); within a bucket a fresh sort's codes ascend, so
the merge gives exactly its codes, for any history and thread count (tested against a fresh
sort). With no flag set the sort is reused as it is. The records are copied again in any
case (boxes moved). Above `SORT_UPDATE_FRACTION` of the objects flagged (the crossover, one
core), when the lowest non-empty level changed (the coarse sort depends on it), or when the
buffers might overflow, it sorts from scratch; `clear` and growth drop the kept sort. The
sort inside a step (one core, CPU time, medians of 15) takes 0.2 / 0.4 / 1.06 times the
time of a sort from scratch at 1% / 10% / 100% moved. Most of a step is then the sweep and
the cross-level lookups, and at 100% moved 40% of the objects change cells.

Bulk lookups
------------
`move_many` keeps the ids and slots of its last lookup (`_ids.IdRegistry.slots_of`): a
simulation that moves the same ids every step compares them with the kept copy instead of
looking each up in the open-addressing table (a cache miss each; for 100,000 ids the
comparison is 80 times as fast). Only a removal can change the slot of an id in the hash,
so a removal and `clear` drop it.

Single moves
------------
`move` checks the common inputs (lists, tuples, 1-D float64 arrays of points and boxes) in
a few lines of Python, looks the id up in the registry's dict, and the engine appends the
slot and the box to a buffer, as a physics
engine's broad phase keeps a move buffer; anything that reads or changes the hash
otherwise (queries, inserts, removals, bulk moves, `bounds`, pickling) first applies the
buffer in one compiled call, `storage.place_rows`, in order, so nobody sees the difference.
A compiled call per move unboxes the storage's arrays every time, however it is called: ad
hoc, a call passing nine arrays takes 2.2 times as long as one passing a single array.
Moves of 100,000 random 2-D boxes one by one, the buffer applied by a query at the end, are
1.4 times as fast as with a compiled call each (`time.thread_time`, medians of 8 rounds,
both alternately in one process). Spheres and other inputs take the full checks
and a direct call. The storage is not a numba `structref` (one pointer to unbox): its
constructor is compiled in every process (not cached) and the hash would no longer pickle
as plain arrays; a `jitclass` is never cached.

No duplicates, no hash set
--------------------------
An object in several cells is reported from one cell only: a query reports it from the
lowest cell it shares with the query's range of cells; a pair on one level is reported from
the lowest cell both share (``max(lo_a, lo_b)`` per axis), which is one bit test per
candidate (`_kernels/pairs.py`); pairs across levels are found by the coarser object
reading the finer cells it covers (or the other way round, whichever takes fewer probes),
with the same rule.

Threads
-------
Every public method holds the hash's lock (a `spatialhash._fair_lock.FairLock`, reentrant,
with waiting bounded: a call is passed by later ones for at most a short handoff, then
served) for its whole call: queries change the hash too (they apply buffered moves,
rebuild dropped bucket lists and reuse scratch buffers), and the kernels release the GIL,
so two Python threads in two calls at once would corrupt the storage (a crash, a hang or
wrong answers). Calls from several threads are therefore run one at a time, each seeing
the hash as the previous call left it. The lock makes a single move 1.2-1.3 times as long
(100,000 single moves of 2-D boxes, `time.thread_time`, medians of 8 rounds). A hash
pickles without its lock and gets a new one when unpickled.

Semantics
---------
Boxes are closed: touching counts as overlapping. Spheres are tested exactly after their
bounding boxes. Arithmetic is float64 without fast-math, as in the batch grid;
`tests/dynamic_oracles.py` repeats it in NumPy. Results hold ids: an int64 array when every
id in the hash is an integer (sorted ascending; pairs with the smaller id first), else an
object array in unspecified order.
"""

from ._hash import DynamicHash
from ._validation import ALL_BITS, UnknownIdError

__all__ = ["ALL_BITS", "DynamicHash", "UnknownIdError"]
