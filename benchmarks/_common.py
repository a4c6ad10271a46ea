"""Helpers shared by the benchmark scripts: data, radii, timing, answer checks, tables.

Every benchmark compares answers in one normal form before it times anything:

- pairs and radius rows become one sorted int64 key per (row, column) entry,
  ``row * n_columns + column``, so two answers agree exactly when the key arrays are equal;
- k-nearest answers stay (m, k) arrays of indices and distances.

Peers that compute in float32 (freud) may decide a pair lying within rounding of the radius
the other way; `compare_keys` accepts such differences only within `BOUNDARY_TOLERANCE` of
the radius, and says how many there were.
"""

from __future__ import annotations

import gc
import itertools
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: Expected neighbours within the radius, for the pair and radius workloads (3-D).
NEIGHBORS_3D = 30
#: Expected neighbours within the radius in 2-D.
NEIGHBORS_2D = 20
#: How far from the radius (absolute, unit-box coordinates) a pair decided differently
#: by a peer may lie and still count as rounding rather than a wrong answer.
BOUNDARY_TOLERANCE = 1e-6


# ---------------------------------------------------------------------- data
def radius_for_neighbors_3d(n: int, neighbors: float = NEIGHBORS_3D) -> float:
    """Radius holding ``neighbors`` expected points of ``n`` uniform in the unit cube.

    ``(3 * neighbors / (4 pi n)) ** (1/3)``; with 30 neighbours, ``(90 / (4 pi n)) ** (1/3)``.
    """
    return (3.0 * neighbors / (4.0 * np.pi * n)) ** (1.0 / 3.0)


def radius_for_neighbors_2d(n: int, neighbors: float = NEIGHBORS_2D) -> float:
    """Radius holding ``neighbors`` expected points of ``n`` uniform in the unit square."""
    return float(np.sqrt(neighbors / (np.pi * n)))


def uniform_points(n: int, n_dims: int, seed: int) -> np.ndarray:
    """``n`` points uniform in ``[0, 1) ** n_dims``, float64, shape (n, n_dims)."""
    return np.random.default_rng(seed).random((n, n_dims))


def clustered_points(n: int, seed: int, n_clusters: int = 1000, sigma: float = 0.01
                     ) -> np.ndarray:
    """``n`` points in ``n_clusters`` Gaussian clusters of equal size, clipped to [0, 1].

    Centres are uniform in the unit cube; each coordinate has standard deviation ``sigma``.
    """
    rng = np.random.default_rng(seed)
    centres = rng.random((n_clusters, 3))
    labels = np.arange(n) % n_clusters
    points = centres[labels] + rng.normal(0.0, sigma, (n, 3))
    return np.clip(points, 0.0, 1.0)


# ---------------------------------------------------------------------- timing
def write_uniform_parquet(directory, n: int, n_dims: int, seed: int, rows_per_file: int,
                          row_group: int | None = None, row_column: bool = False) -> None:
    """``n`` uniform points in the unit cube of ``n_dims`` dimensions as Parquet files of
    ``rows_per_file`` rows (columns ``x``, ``y``[, ``z``], and the point's number as
    ``row`` with ``row_column``), once: a ``_complete`` marker is written last, and a
    directory without it is made again."""
    import shutil
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = Path(directory)
    done = directory / "_complete"
    if done.exists():
        return
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for number, start in enumerate(range(0, n, rows_per_file)):
        rows = min(rows_per_file, n - start)
        points = rng.random((rows, n_dims))
        columns = {name: points[:, axis] for axis, name in enumerate("xyz"[:n_dims])}
        if row_column:
            columns["row"] = np.arange(start, start + rows, dtype=np.int64)
        pq.write_table(pa.table(columns), directory / f"points-{number:05d}.parquet",
                       row_group_size=row_group)
    done.write_text("")


def time_call(func: Callable[[], object]) -> tuple[float, object]:
    """Seconds taken by one call of ``func`` and its result (the result is kept)."""
    gc.collect()
    start = time.perf_counter()
    result = func()
    return time.perf_counter() - start, result


#: Bytes the idle gap (`idle_gap`) allocates, touches and frees after its sleep.
IDLE_GAP_FOREIGN_BYTES = 256 << 20


def idle_gap(seconds: float) -> None:
    """What a program does between two searches, as the ``--idle-gap`` modes of the
    benchmarks simulate it: sleep ``seconds``, then allocate, touch and free
    `IDLE_GAP_FOREIGN_BYTES` of memory of its own. After such a gap the next call finds
    its threads asleep, its data out of the caches, and the memory it frees and allocates
    again handed out afresh by the operating system (zeroed, and as huge pages
    assembled anew where NumPy asks for them); back to back, it finds them warm."""
    time.sleep(seconds)
    foreign = np.ones(IDLE_GAP_FOREIGN_BYTES // 8)
    del foreign


def time_repeated(func: Callable[[], object], repeat: int,
                  before: Callable[[], None] | None = None) -> list[float]:
    """Seconds of ``repeat`` calls of ``func``; each result is dropped after its call.

    ``func`` must materialize its output (return arrays, not lazy objects), so the work is
    inside the timed region. As in `timeit`, garbage is collected once before the calls and
    the cyclic collector is off during them (reference counting still frees each result).
    ``before``, when given, runs untimed before each call (an `idle_gap`).
    """
    times = []
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            if before is not None:
                before()
            start = time.perf_counter()
            result = func()
            times.append(time.perf_counter() - start)
            del result
    finally:
        if was_enabled:
            gc.enable()
    return times


def _cpu_times() -> list[int] | None:
    """The machine's CPU time counters of ``/proc/stat`` (user ... steal), or None."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    return [int(value) for value in fields[1:9]]


class StealMeter:
    """Share of the machine's CPU time that the hypervisor gave to other guests ("steal"
    in ``/proc/stat``) since the meter was made.

    On a shared virtual machine this is what makes one run twice as slow as the next: a
    timing taken while much was stolen is worth less. `share` is None where ``/proc/stat``
    has no steal counter (not Linux).
    """

    def __init__(self) -> None:
        self._start = _cpu_times()

    def share(self) -> float | None:
        end = _cpu_times()
        if self._start is None or end is None:
            return None
        delta = [after - before for before, after in zip(self._start, end, strict=True)]
        total = sum(delta)
        return delta[7] / total if total > 0 else 0.0


def speed_probe(seed: int = 0) -> str:
    """Milliseconds of two fixed single-threaded loops, to tell a slow phase of the machine
    from a slow change: one bound by the interpreter's arithmetic (a million Python
    multiplications), one by memory latency (4 million random reads from 64 MB). A VM
    shared with other guests can slow either without any CPU time being stolen."""
    start = time.perf_counter()
    sum(i * i for i in range(1_000_000))
    arithmetic = time.perf_counter() - start
    rng = np.random.default_rng(seed)
    table = np.arange(8 * 2**20, dtype=np.int64)
    where = rng.integers(0, table.shape[0], 4 * 2**20)
    start = time.perf_counter()
    table[where].sum()
    memory = time.perf_counter() - start
    return f"speed probe: arithmetic {arithmetic * 1e3:.0f} ms, random reads {memory * 1e3:.0f} ms"


def format_share(share: float | None) -> str:
    """A `StealMeter` share as a percentage ("n/a" when unknown)."""
    return "n/a" if share is None else f"{100 * share:.0f}%"


def median(values: Sequence[float]) -> float:
    """Median of ``values`` (NaN for none)."""
    return statistics.median(values) if len(values) else float("nan")


# ---------------------------------------------------------------------- normal forms
def pair_keys(first: np.ndarray, second: np.ndarray, n_columns: int,
              unordered: bool = False) -> np.ndarray:
    """Sorted int64 keys ``first * n_columns + second`` of a list of pairs.

    Parameters
    ----------
    first, second : ndarray of int, shape (n_pairs,)
        Row and column of each pair.
    n_columns : int
        Number of columns (points).
    unordered : bool, default False
        The pairs are unordered (one point set): each is keyed as ``(min, max)``.
    """
    first = np.asarray(first).astype(np.int64)
    second = np.asarray(second).astype(np.int64)
    if unordered:
        first, second = np.minimum(first, second), np.maximum(first, second)
    keys = first * n_columns + second
    keys.sort()
    return keys


def csr_keys(indptr: np.ndarray, indices: np.ndarray, n_columns: int) -> np.ndarray:
    """Sorted int64 keys of CSR rows (``indptr``, ``indices``)."""
    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    return pair_keys(rows, indices, n_columns)


def ragged_keys(rows_of_indices: Sequence, n_columns: int) -> np.ndarray:
    """Sorted int64 keys of a sequence of rows, each a list or array of column indices.

    Reads cKDTree's object array of lists and scikit-learn's object array of arrays.
    """
    counts = np.fromiter(map(len, rows_of_indices), dtype=np.int64,
                         count=len(rows_of_indices))
    flat = np.fromiter(itertools.chain.from_iterable(rows_of_indices), dtype=np.int64,
                       count=int(counts.sum()))
    rows = np.repeat(np.arange(len(rows_of_indices), dtype=np.int64), counts)
    return pair_keys(rows, flat, n_columns)


# ---------------------------------------------------------------------- checks
@dataclass(frozen=True)
class Check:
    """Outcome of comparing a peer's answer with ours.

    Attributes
    ----------
    ok : bool
        The answers agree (exactly, or up to rounding at the boundary where allowed).
    message : str
        One line for the reader: what was compared and what was found.
    """

    ok: bool
    message: str


def _distances(rows: np.ndarray, columns: np.ndarray, row_points: np.ndarray,
               column_points: np.ndarray, box: float | None) -> np.ndarray:
    """Euclidean (minimum-image with a periodic ``box``) distances of index pairs."""
    delta = row_points[rows] - column_points[columns]
    if box is not None:
        delta -= box * np.round(delta / box)
    return np.sqrt(np.einsum("ij,ij->i", delta, delta))


def compare_keys(ours: np.ndarray, theirs: np.ndarray, r: float, row_points: np.ndarray,
                 column_points: np.ndarray, box: float | None = None) -> Check:
    """Compare two sorted key arrays of pairs or radius rows (see `pair_keys`).

    Keys present in only one answer are accepted when the pair's float64 distance lies
    within `BOUNDARY_TOLERANCE` of ``r`` (a peer computing in float32 rounds there).
    """
    if np.array_equal(ours, theirs):
        return Check(True, f"identical ({len(ours):,} entries)")
    if len(np.unique(theirs)) != len(theirs):
        return Check(False, "MISMATCH: the peer reports some entries twice")
    differing = np.setxor1d(ours, theirs, assume_unique=True)
    n_columns = column_points.shape[0]
    distances = _distances(differing // n_columns, differing % n_columns, row_points,
                           column_points, box)
    gap = float(np.max(np.abs(distances - r)))
    summary = (f"{len(differing):,} of {len(ours):,} entries differ, farthest {gap:.2e} "
               "from r")
    if gap <= BOUNDARY_TOLERANCE:
        return Check(True, f"same up to rounding at distance r ({summary})")
    return Check(False, f"MISMATCH: {summary}")


def compare_knn(ours_indices: np.ndarray, ours_distances: np.ndarray,
                their_indices: np.ndarray, their_distances: np.ndarray,
                points: np.ndarray, queries: np.ndarray, rtol: float = 1e-5,
                atol: float = 1e-7) -> Check:
    """Compare k-nearest answers: distances allclose, indices equal except at ties.

    A slot where the indices differ is a tie when the peer's point lies at the same
    distance (recomputed in float64) as ours in that slot.
    """
    if ours_indices.shape != their_indices.shape:
        return Check(False, f"MISMATCH: shapes {ours_indices.shape} and "
                            f"{their_indices.shape}")
    if not np.allclose(ours_distances, their_distances, rtol=rtol, atol=atol):
        worst = float(np.max(np.abs(ours_distances - their_distances)))
        return Check(False, f"MISMATCH: distances differ by up to {worst:.3g}")
    rows, slots = np.nonzero(ours_indices != their_indices)
    if rows.size == 0:
        return Check(True, f"identical indices, distances allclose ({ours_indices.size:,} "
                           "neighbours)")
    theirs = _distances(rows, their_indices[rows, slots].astype(np.int64), queries, points,
                        None)
    tied = np.isclose(theirs, ours_distances[rows, slots], rtol=rtol, atol=atol)
    if tied.all():
        return Check(True, f"distances allclose, {rows.size:,} slots differ only at ties")
    return Check(False, f"MISMATCH: {int((~tied).sum()):,} slots hold a farther point")


# ---------------------------------------------------------------------- reporting
def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table with columns padded to a common width."""
    cells = [[str(value) for value in row] for row in rows]
    widths = [max(len(header), *(len(row[i]) for row in cells)) if cells else len(header)
              for i, header in enumerate(headers)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        "| " + " | ".join("-" * w for w in widths) + " |",
    ]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
              for row in cells]
    return "\n".join(lines)


def format_seconds(seconds: float) -> str:
    """Seconds with three significant digits (``nan`` as ``-``)."""
    return "-" if seconds != seconds else f"{seconds:.3g}"


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or the platform's processor string."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def available_memory_bytes() -> float:
    """``MemAvailable`` from /proc/meminfo in bytes (infinity where unknown)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    return float("inf")


def resident_bytes() -> float:
    """Current resident set size of this process in bytes (NaN where unknown)."""
    try:
        with open("/proc/self/statm") as statm:
            return float(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return float("nan")


def reset_peak_resident() -> None:
    """Start the peak resident size (``VmHWM``) afresh from the current size (Linux's
    ``/proc/self/clear_refs``; elsewhere the peak keeps counting from the start)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        pass


def peak_resident_bytes() -> float:
    """Peak resident set size of this process so far, in bytes.

    Linux's ``VmHWM`` where available: ``getrusage().ru_maxrss`` is inherited across
    ``fork`` and ``exec``, so in a subprocess of a large process it reports the parent's
    peak (this script's memory probes once read 16 GB that way).
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(peak) if sys.platform == "darwin" else float(peak) * 1024.0
