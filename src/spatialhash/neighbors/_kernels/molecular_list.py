"""The molecular skin list's kernels (``_molecular_list.py``): the atoms' moves since the
build, each split into a whole number of cell vectors and what is left, and the stored
candidate rows within reach at the current positions, for the atoms of one system or of a
batch (each atom in the cell of its system: ``cells = (vectors, periodic, system)``,
vectors (B, d, d), periodic (B, d) and the system of each atom (n,)).

An atom wrapped back into its cell between steps has jumped by a lattice vector, not
moved far: `atom_moves` rounds each atom's displacement in fractional coordinates along
the periodic axes to the integers ``n`` (its jump) and measures what is left,
``x - x_built - n @ cell``. A candidate ``(i, j, S)`` of the build is the same image pair
at the current positions as ``(i, j, S + n[i] - n[j])``: its vector is the build's plus
the difference of the two atoms' leftovers. When the jumps change, the first pass of
`listed_rows` adds the change to the stored shifts once, so that the passes of later
updates read each candidate's current shift and no jump (gathering both atoms' jumps for
every candidate made that loop 1.4 to 2.4 times slower, on one thread).

`listed_rows` recomputes each candidate's vector with `molecular_rows._pair_vector`, the
arithmetic of the search's rows, so a candidate is kept exactly when the search at the
current positions finds its row, with the same ``d`` and ``D`` to the bit. The candidates
are cut into fixed chunks and tested, their results kept (one byte each) and counted per
chunk; then the rows kept are written at offsets fixed by the counts, their vectors
computed again (cheaper than holding every candidate's vector between the passes): the
rows keep the candidates' order, for any thread count. A chunk is `chunk_rows`, which the
parallel `listed_rows` calls through its address (``_kernels/indirect.py``): it is
compiled once, by itself, not again inside the driver's parallel loop.

The candidates lie in slots: system ``b``'s in ``starts[b]`` up to ``ends[b]``, with room
up to ``starts[b + 1]`` (``slots = (starts, ends)``, int64 (B + 1,) and (B,)), so that a
system searched again takes its new candidates in its own slots (`place_candidates`)
while the others' stay where they are. The kernels walk a chunk's slots system by system
and skip the unused ones.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..._config import jit, jit_parallel
from ..._kernels.indirect import kernel_caller
from .molecular_rows import _pair_vector

#: Candidates handed to a thread at a time.
ROWS_PER_CHUNK = 4096
#: Beyond this many cells, a displacement's jump is not rounded (it does not fit an int64):
#: the atom counts as moved beyond the skin.
MAX_JUMP = 2.0**62


@jit_parallel
def atom_moves(positions, built_at, cells, dual, limit2, limits, jumps, far):
    """The jumps ``n`` (int64 (n, d), 0 on open axes) of each atom since ``built_at``, into
    ``jumps``: its displacement's fractional coordinates (``dual[b, a] @ (x - x_built)``,
    ``dual`` (B, d, d) with zero rows on open axes) rounded to the nearest integers. Marks
    in ``far`` (bool (n,)) the atoms whose displacement less ``n @ vectors`` has a squared
    length above ``limit2`` (a jump too large to round counts), or with a coordinate
    above ``limits`` (float64 (B,)) of its system. (Their number is the caller's to
    count: a sum over a parallel loop is a reduction, which takes numba a fifth longer to
    compile.)"""
    vectors, periodic, system = cells
    n, n_dims = positions.shape
    for i in prange(n):
        b = system[i]
        beyond = False
        for a in range(n_dims):
            jumps[i, a] = 0
            if periodic[b, a]:
                value = 0.0
                for k in range(n_dims):
                    value += dual[b, a, k] * (positions[i, k] - built_at[i, k])
                if abs(value) < MAX_JUMP:
                    jumps[i, a] = int(round(value))
                else:
                    beyond = True
        squared = 0.0
        for k in range(n_dims):
            left = positions[i, k] - built_at[i, k]
            for a in range(n_dims):
                if jumps[i, a] != 0:
                    left -= jumps[i, a] * vectors[b, a, k]
            squared += left * left
            beyond = beyond or not abs(positions[i, k]) <= limits[b]
        far[i] = beyond or not squared <= limit2


@jit
def place_candidates(source, source_starts, counts, index_shift, target, target_starts):
    """Copy ``counts[k]`` candidates ``(i, j, S)`` of ``source`` from ``source_starts[k]``
    into ``target`` from ``target_starts[k]``, adding ``index_shift[k]`` to their ``i``
    and ``j``, for each ``k`` (int64 (K,) each): one system's candidates each. On one
    thread: a copy, a small share of the search that precedes it, and a parallel kernel
    takes several times longer to compile."""
    source_i, source_j, source_shifts = source
    target_i, target_j, target_shifts = target
    n_dims = source_shifts.shape[1]
    for k in range(counts.shape[0]):
        moved_by = index_shift[k]
        for r in range(counts[k]):
            at = source_starts[k] + r
            to = target_starts[k] + r
            target_i[to] = source_i[at] + moved_by
            target_j[to] = source_j[at] + moved_by
            for a in range(n_dims):
                target_shifts[to, a] = source_shifts[at, a]


@jit
def _first_system(starts, slot):
    """The last system ``b`` with ``starts[b] <= slot`` (``starts`` non-decreasing, its
    first 0): the one whose slots, ``starts[b]`` up to ``starts[b + 1]``, hold ``slot``
    when it has any. A bisection of its own (``np.searchsorted`` compiles slowly)."""
    lo, hi = 0, starts.shape[0] - 1
    while lo < hi:
        middle = (lo + hi + 1) // 2
        if starts[middle] <= slot:
            lo = middle
        else:
            hi = middle - 1
    return lo


@jit
def chunk_rows(positions, cells, candidates, delta, radii, cutoff, lo, hi, keep, start, out):
    """The candidates in the used slots ``lo`` to ``hi - 1`` within reach at
    ``positions``: with ``start`` < 0, each one's shift first moved by ``delta`` (int64
    (n, d), the change of each atom's jump: ``delta[i] - delta[j]`` added, in place; none
    with (0, d)), then its test into ``keep`` and their number returned; else the rows of
    those ``keep`` marks written from ``start`` into ``out`` (as `listed_rows`). Taken a
    run of one system's candidates at a time, its cell copied as system 0 of a batch of
    one: the cell is then read at a fixed place, as for a single system (read at each
    row's system, it made the passes over a single system's candidates measurably
    slower)."""
    vectors, periodic, _ = cells
    cand_i, cand_j, cand_shifts, starts, ends = candidates
    out_i, out_j, out_shifts, out_vectors, out_distances, out_systems = out
    n_dims = positions.shape[1]
    vector = np.zeros(n_dims, np.float64)
    cell_vectors = np.zeros((1, n_dims, n_dims), np.float64)
    cell_periodic = np.zeros((1, n_dims), np.bool_)
    with_radii = radii.shape[0] > 0
    fill = start >= 0
    moved = not fill and delta.shape[0] > 0
    count = 0
    b = _first_system(starts, lo)
    while b < ends.shape[0] and starts[b] < hi:
        run, run_end = max(lo, starts[b]), min(hi, ends[b])
        if run >= run_end:
            b += 1
            continue
        for a in range(n_dims):  # element by element: a slice's copy compiles slowly
            cell_periodic[0, a] = periodic[b, a]
            for c in range(n_dims):
                cell_vectors[0, a, c] = vectors[b, a, c]
        for r in range(run, run_end):
            if fill and not keep[r]:
                continue
            i = cand_i[r]
            j = cand_j[r]
            if moved:
                for a in range(n_dims):
                    cand_shifts[r, a] += delta[i, a] - delta[j, a]
            squared = _pair_vector(positions, cell_vectors, cell_periodic, i, positions, j, 0,
                                   cand_shifts[r], vector)
            distance = math.sqrt(squared)
            if not fill:
                bound = radii[i] + radii[j] if with_radii else cutoff
                keep[r] = distance <= bound
                count += keep[r]
                continue
            at = start + count
            count += 1
            if out_i.shape[0]:
                out_i[at] = i
            if out_j.shape[0]:
                out_j[at] = j
            for a in range(n_dims if out_shifts.shape[0] else 0):
                out_shifts[at, a] = cand_shifts[r, a]
            for a in range(n_dims if out_vectors.shape[0] else 0):
                out_vectors[at, a] = vector[a]
            if out_distances.shape[0]:
                out_distances[at] = distance
            if out_systems.shape[0]:
                out_systems[at] = b
        b += 1
    return count


_check_chunk_rows, _call_chunk_rows = kernel_caller(chunk_rows)


@jit_parallel
def listed_rows(positions, cells, candidates, delta, radii, cutoff, keep, starts, out,
                kernel):
    """The candidates ``(i, j, S, slot_starts, slot_ends)`` (int64 (m,), (m,), (m, d),
    (B + 1,), (B,); ``S`` the shift at the current positions once moved by ``delta``;
    system ``b``'s candidates in the slots ``slot_starts[b]`` up to ``slot_ends[b]``,
    those up to ``slot_starts[b + 1]`` unused) whose rows at ``positions`` (in the cell of
    their system, ``cells`` as `atom_moves` takes them) have ``d <= cutoff`` (with
    ``radii`` (n,), ``d <= radii[i] + radii[j]``; (0,) without). Two passes: with
    ``starts`` (0,), each candidate's shift moved by ``delta`` (int64 (n, d): the change
    of each atom's jump, ``delta[i] - delta[j]`` added in place; (0, d): none), its test
    into ``keep`` (bool (m,)) and the number kept in each chunk of `ROWS_PER_CHUNK` slots
    returned; with ``starts`` (the running sum of those numbers), the kept rows written,
    in the candidates' order, into ``out``, ``(i, j, S, D, d, b)``: int64 (k,), int64
    (k,), int64 (k, d), float64 (k, d), float64 (k,), int64 (k,), each with k rows or
    none (not asked for); the second pass computes only the vectors of the rows kept.
    Each chunk is `chunk_rows`, called at ``kernel`` (``indirect.kernel_target``)."""
    m = candidates[0].shape[0]
    n_chunks = (m + ROWS_PER_CHUNK - 1) // ROWS_PER_CHUNK
    # Every chunk writes its count. (`np.zeros` here is a parallel loop of its own to
    # compile.)
    counts = np.empty(n_chunks, np.int64)
    fill = starts.shape[0] > 0
    _check_chunk_rows(kernel, (positions, cells, candidates, delta, radii, cutoff, m, m, keep,
                               m, out))
    for chunk in prange(n_chunks):
        lo = chunk * ROWS_PER_CHUNK
        counts[chunk] = _call_chunk_rows(kernel, (
            positions, cells, candidates, delta, radii, cutoff, lo,
            min(m, lo + ROWS_PER_CHUNK), keep, starts[chunk] if fill else -1, out))
    return counts
