"""The pair search of the CPU engine: the sort of the entries, kept between calls, and the
sweep (`_kernels/sort.py`, `_kernels/pairs.py`; the package docstring says why).

Module constants are read at each call, so tests can change them.
"""

from __future__ import annotations

import numba
import numpy as np

from .. import _config
from .._kernels import indirect
from ._kernels import pairs as pairs_kernels
from ._kernels import sort as sort_kernels
from ._kernels.state import ChunkPairs, EntrySort, SortWork
from ._storage import power_of_two

#: `query_pairs` runs its sweep on all threads from this many (object, cell) entries on,
#: and its sort from this many slots (below, a parallel region's start costs more than it
#: saves).
PARALLEL_MIN_ENTRIES = 20_000
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
#: it sorts from scratch (the crossover on one core, `benchmarks/bench_dynamic.py`; see
#: `_kernels/sort.py`).
SORT_UPDATE_FRACTION = 0.2
#: An array of the type of the ``inverted`` table that `pairs_kernels.pairs_chunks` passes
#: its chunk kernels (typing their targets needs one).
_INVERTED_LIKE = np.zeros((1, 1), np.uint8)


def chunk_targets(objects: tuple, cells: tuple, sort: tuple, out: tuple, filtered: bool,
                  used_levels: np.ndarray, scan_ratio: float) -> tuple:
    """The targets of `pairs_kernels.sweep_chunk` and `pairs_kernels.down_chunk` for the
    arguments of `pairs_kernels.pairs_chunks` (see `_kernels/indirect.py`): the chunk
    kernels take the driver's bundles and the plan it makes (`state.PairPlan`)."""
    plan = (cells[0], used_levels, _INVERTED_LIKE, filtered, scan_ratio)
    # One key: every argument type is fixed.
    sweep = indirect.kernel_target(pairs_kernels.sweep_chunk, (0, objects, plan, sort, out),
                                   "dynamic")
    down = indirect.kernel_target(pairs_kernels.down_chunk, (0, objects, plan, sort, out),
                                  "dynamic")
    return sweep, down


class PairSearch:
    """The entry sort (`state.EntrySort`), its scratch (`state.SortWork`) and the pairs
    of the chunks (`state.ChunkPairs`), kept between calls of `find`.

    ``kept`` says whether ``sort`` holds the sort of the last call, to be updated for the
    slots flagged in ``changed`` since (the storage clears it when it grows); ``lowest``,
    ``n_coarse`` and ``filtered`` describe that sort.
    """

    __slots__ = ("sort", "work", "out", "kept", "lowest", "n_coarse", "filtered")

    def __init__(self, n_objects: int) -> None:
        n = max(n_objects, 1)
        empty = np.empty(0, np.int64)
        self.sort = EntrySort(bucket_start=np.empty(power_of_two(n) + 1, np.int64),
                              codes=empty, records=np.empty((0, 6)),
                              coarse_start=np.empty(1025, np.int64), coarse_codes=empty,
                              coarse_records=np.empty((0, 6)))
        self.work = SortWork(entry_bucket=empty, entry_code=empty, part_bucket=empty,
                             part_code=empty, coarse_spare=empty)
        self.out = ChunkPairs(
            pairs=np.empty((pairs_kernels.N_CHUNKS * max(n // 8, 16), 2), np.int64),
            counts=np.zeros(pairs_kernels.N_CHUNKS, np.int64))
        self.kept = False
        self.lowest = 0
        self.n_coarse = 0
        self.filtered = False

    def _update(self, objects: tuple, level_count: np.ndarray, changed: np.ndarray,
                n_objects: int) -> tuple | None:
        """The kept sort updated for the changed slots (`sort_kernels.update_sort`):
        ``(n_entries, n_coarse, filtered)``, or None when it must be redone from scratch."""
        # Counted first: counting the changed slots costs under a hundredth of listing them
        # (40,000 of 100,000).
        if not self.kept or np.count_nonzero(changed) > SORT_UPDATE_FRACTION * n_objects:
            return None
        changed_slots = np.flatnonzero(changed)
        n_entries, n_coarse, filtered = sort_kernels.update_sort(
            objects, level_count, changed, changed_slots, self.lowest, self.n_coarse,
            tuple(self.sort), tuple(self.work))
        if n_entries < 0:
            return None
        if changed_slots.size:
            # The merged sorts were written to the spare buffers: they change places.
            self.sort, self.work = (
                self.sort._replace(codes=self.work.part_code,
                                   coarse_codes=self.work.coarse_spare),
                self.work._replace(part_code=self.sort.codes,
                                   coarse_spare=self.sort.coarse_codes))
        # Other bits than all may only stay set (a removal does not clear it): the sweep
        # then tests filters it could skip, never the other way.
        self.filtered = bool(filtered or self.filtered)
        self.n_coarse = n_coarse
        return n_entries, n_coarse, self.filtered

    def _sort(self, objects: tuple, level_count: np.ndarray, changed: np.ndarray,
              n_objects: int) -> tuple[int, int, bool]:
        """Sort every (object, cell) entry by bucket into ``sort``: from the sort kept from
        the last call when few slots changed since, else from scratch. Returns
        ``(n_entries, n_coarse, filtered)``."""
        updated = self._update(objects, level_count, changed, n_objects)
        if updated is not None:
            return updated
        parallel = objects[2].shape[0] >= PARALLEL_MIN_ENTRIES
        while True:
            sort, work = self.sort, self.work
            # Small hashes on this thread alone: waking the others costs more than it saves.
            with _config.threads(None if parallel else 1):
                n_entries, n_coarse, filtered = sort_kernels.sort_entries(
                    objects, level_count, tuple(sort), tuple(work), numba.get_num_threads())
            if n_entries <= sort.codes.shape[0] and n_coarse <= sort.coarse_codes.shape[0]:
                break
            # Room for a quarter more, and about one entry per bucket. The coarse table is
            # never larger than the fine one (its buckets are the fine ones masked again).
            if n_entries > sort.codes.shape[0]:
                size = int(1.25 * n_entries) + 16
                sort = sort._replace(
                    codes=np.empty(size, np.int64), records=np.empty((size, 6)),
                    bucket_start=np.empty(power_of_two(n_entries) + 1, np.int64))
                work = work._replace(
                    entry_bucket=np.empty(size, np.int64), entry_code=np.empty(size, np.int64),
                    part_bucket=np.empty(size, np.int64), part_code=np.empty(size, np.int64))
            if n_coarse > sort.coarse_codes.shape[0]:
                size = int(1.25 * n_coarse) + 16
                sort = sort._replace(
                    coarse_codes=np.empty(size, np.int64), coarse_records=np.empty((size, 6)),
                    coarse_start=np.empty(
                        min(power_of_two(n_coarse), sort.bucket_start.shape[0] - 1) + 1,
                        np.int64))
                work = work._replace(coarse_spare=np.empty(size, np.int64))
            self.sort, self.work = sort, work
        changed[:] = 0
        self.kept = True
        self.lowest = int(sort_kernels.lowest_used_level(level_count))
        self.n_coarse = n_coarse
        self.filtered = bool(filtered)
        return n_entries, n_coarse, self.filtered

    def find(self, objects: tuple, cells: tuple, changed: np.ndarray,
             n_objects: int) -> ChunkPairs:
        """Every pair of overlapping objects once, as slots, in the regions of the chunks
        (`state.ChunkPairs`: the buffers kept here, valid until the next call).

        ``objects`` and ``cells`` are the storage's bundles (plain tuples), ``changed`` its
        flags of the slots changed since the last call (cleared here), ``n_objects`` the
        objects stored.
        """
        level_count = cells[1]
        n_entries, n_coarse, filtered = self._sort(objects, level_count, changed, n_objects)
        used_levels = np.flatnonzero(level_count)
        parallel = n_entries >= PARALLEL_MIN_ENTRIES
        settings = (CROSS_INVERT_WEIGHT, CROSS_SCAN_RATIO)
        while True:
            bucket_start, codes, records, coarse_start, coarse_codes, coarse_records = self.sort
            sort = (bucket_start, codes, records, coarse_start, coarse_codes[:n_coarse],
                    coarse_records)
            out = tuple(self.out)
            targets = chunk_targets(objects, cells, sort, out, filtered, used_levels,
                                    CROSS_SCAN_RATIO)
            with _config.threads(None if parallel else 1):
                pairs_kernels.pairs_chunks(objects, cells, sort, out, filtered, used_levels,
                                           settings, targets)
            pairs, counts = self.out
            most = int(counts.max())
            if most <= pairs.shape[0] // pairs_kernels.N_CHUNKS:
                return self.out
            self.out = self.out._replace(
                pairs=np.empty((pairs_kernels.N_CHUNKS * (int(1.25 * most) + 16), 2), np.int64))
