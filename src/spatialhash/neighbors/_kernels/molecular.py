"""Molecular neighbour lists' scan: the rows ``(i, j, S)`` within reach of the atoms of
one or many systems, found and counted, then written straight into the arrays asked for
(the design: ``_images.py``). The atoms come wrapped into their cells, given their query
shifts and binned by ``molecular_state.py``, in the arrays of `MolecularState`.

Atom ``i`` scans, for each shift ``s`` of its range (``lower``, ``upper``), the bins of
its system near ``q = wrapped[i] - s @ cell`` (cubic bins as wide as the search radius
over the system's wrapped atoms): an atom ``j`` there is ``j``'s image by ``s`` near
``i``. No image is stored: the shifted positions are only queries, and most atoms,
those away from the faces of their cell, ask with ``s = 0`` only.

A candidate whose wrapped distance to ``q`` is within the search radius (which has a
margin far above rounding, so nothing within reach is missed) becomes the row
``S = s + T[j] - T[i]``, with ``D = x[j] - x[i] + S @ cell`` computed from the caller's
positions in a fixed order of floating-point operations (`_pair_vector`, that of the
oracle ``tests/molecular_oracle.py``) and ``d`` from ``D``; the row is kept when ``d``
is within the pair's bound.

One kernel, `pair_rows`, called twice: first it scans, keeping each row found as a hit
(its candidate's place in ``order`` and the rank of its shift, one int64) in its chunk's
share of one array, and counts each atom's rows; then it writes each atom's rows from its
hits at offsets fixed by the counts, scanning again only a chunk whose hits overflowed
its share. An atom is scanned by one thread in a fixed order (its shifts in
lexicographic order, its bins in row-major order, a bin's atoms in increasing index), so
the output is the same for any thread count. The atoms are handed out in bin order
(``order``), not the caller's: the atoms of a chunk are neighbours, which scan the same
bins while they are in cache, and the candidates' positions and wraps are read from
copies in that order, next to each other. The second pass (`chunk_rows`) and the
vectors' arithmetic (`_pair_vector`) are in ``molecular_rows.py``. Arrays not asked
for are passed with zero rows and never written. All systems of a batch go through one
call; an atom only meets the atoms of its own system's bins.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import prange

from ..._config import jit, jit_inline, jit_parallel
from .molecular_rows import _pair_vector, chunk_rows

#: Atoms handed to a thread at a time.
ATOMS_PER_CHUNK = 64
#: Candidates whose distances are computed in one vectorized loop.
RUN_BLOCK = 64


class MolecularState(NamedTuple):
    """The arrays the kernels read, over all atoms ``n`` of all systems ``B`` in ``d``
    dimensions. The per-atom arrays are in the caller's order.

    Attributes
    ----------
    positions, wrapped : ndarray of float64, shape (n, d)
        The caller's positions, and those wrapped into their cell.
    wraps : ndarray of int64, shape (n, d)
        ``T``: ``wrapped = positions + T @ cell``; 0 on open axes.
    lower, upper : ndarray of int64, shape (n, d)
        Each atom's range of query shifts per axis; 0 on open axes.
    system : ndarray of int64, shape (n,)
        The system of each atom.
    radii : ndarray of float64, shape (n,) or (0,)
        Per-atom radii (pairs within ``radii[i] + radii[j]``), or none (the reach).
    vectors : ndarray of float64, shape (B, d, d)
        The cell vectors of each system, as rows.
    periodic : ndarray of bool, shape (B, d)
    search : ndarray of float64, shape (B,)
        Each system's search radius: its reach and margin.
    origin : ndarray of float64, shape (B, d)
        The lower corner of each system's bins.
    inv_bin : ndarray of float64, shape (B,)
        The reciprocal of each system's bin width.
    n_bins : ndarray of int64, shape (B, d)
        Bins per axis of each system.
    bin_offset : ndarray of int64, shape (B + 1,)
        System ``b``'s bins are ``bin_offset[b]:bin_offset[b + 1]``, row-major.
    bin_start : ndarray of int64, shape (bin_offset[-1] + 1,)
        The atoms of bin ``k`` are ``order[bin_start[k]:bin_start[k + 1]]``.
    order : ndarray of int64, shape (n,)
        The atoms by bin, in increasing index within a bin.
    binned : ndarray of float64, shape (3, n)
        ``wrapped[order]``, one row per axis padded to three with zeros, so that the
        candidates' distances are one fixed expression over contiguous rows.
    binned_positions : ndarray of float64, shape (n, d)
        ``positions[order]``: a candidate's own position next to its neighbours in the
        bin, not gathered from wherever the caller's order put it.
    binned_wraps : ndarray of int64, shape (n, d)
        ``wraps[order]``, for the same reason.
    """

    positions: np.ndarray
    wrapped: np.ndarray
    wraps: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    system: np.ndarray
    radii: np.ndarray
    vectors: np.ndarray
    periodic: np.ndarray
    search: np.ndarray
    origin: np.ndarray
    inv_bin: np.ndarray
    n_bins: np.ndarray
    bin_offset: np.ndarray
    bin_start: np.ndarray
    order: np.ndarray
    binned: np.ndarray
    binned_positions: np.ndarray
    binned_wraps: np.ndarray


@jit_inline
def _positive(shift, n_dims):
    """Whether a half list keeps ``(i, i, shift)`` rather than ``(i, i, -shift)``
    (``docs/molecular.md``): the components sum to a positive number, or to zero with the
    last non-zero one positive."""
    total = 0
    last = 0
    for a in range(n_dims):
        total += shift[a]
        if shift[a] != 0:
            last = shift[a]
    return total > 0 or (total == 0 and last > 0)


@jit_inline
def _atom_hits(state, i, reach, full_list, bits, hits, at, scratch):
    """The hits of atom ``i``, its query shifts in lexicographic order (the last axis
    fastest): at each, the atoms of the bins within the search radius of the shifted
    query that make a row, in row-major order of bins (a run of bins along the last axis
    is one slice of ``order``), each stored from ``hits[at]`` (while ``hits`` has room) as
    ``rank << bits | t``, ``rank`` the shift's rank in that order and ``t`` the atom's
    place in ``order``. Returns their number. The arrays are taken out of their tuples
    once per atom, before the loops: an access inside them costs a reference count."""
    shifts, query, first, last, pair_shift, vector, run_d2, near = scratch
    positions, wraps, radii = state.positions, state.wraps, state.radii
    binned_positions, binned_wraps = state.binned_positions, state.binned_wraps
    vectors, periodic, binned, order = state.vectors, state.periodic, state.binned, state.order
    bin_start, lower, upper = state.bin_start, state.lower, state.upper
    n_dims = positions.shape[1]
    b = state.system[i]
    search = state.search[b]
    inv_bin = state.inv_bin[b]
    bin_offset = state.bin_offset[b]
    pad = 3 - n_dims  # bins padded to 3 axes in front, one bin wide
    width1 = state.n_bins[b, n_dims - 2] if n_dims >= 2 else 1
    width2 = state.n_bins[b, n_dims - 1]
    search2 = search * search
    margin = search - reach
    with_radii = radii.shape[0] > 0
    room = hits.shape[0]
    for a in range(3):
        first[a] = 0
        last[a] = 0
        query[a] = 0.0
    for a in range(n_dims):
        shifts[a] = lower[i, a]
    count = 0
    rank = 0
    while True:
        tag = rank << bits
        missed = False
        for a in range(n_dims):
            value = state.wrapped[i, a]
            for c in range(n_dims):
                if shifts[c] != 0:
                    value -= shifts[c] * vectors[b, c, a]
            query[a] = value
            top = float(state.n_bins[b, a] - 1)
            low = math.floor((value - search - state.origin[b, a]) * inv_bin)
            high = math.floor((value + search - state.origin[b, a]) * inv_bin)
            if high < 0.0 or low > top:
                missed = True
                break
            first[pad + a] = int(max(low, 0.0))
            last[pad + a] = int(min(high, top))
        query_x, query_y, query_z = query[0], query[1], query[2]  # zeros past n_dims
        stop = first[0] if missed else last[0] + 1  # a query beside the bins scans none
        for k0 in range(first[0], stop):
            for k1 in range(first[1], last[1] + 1):
                base = bin_offset + (k0 * width1 + k1) * width2
                run_end = bin_start[base + last[2] + 1]
                for block in range(bin_start[base + first[2]], run_end, RUN_BLOCK):
                    # The distances first, in a loop LLVM vectorizes (unsigned bounds: see
                    # `cells.UNSIGNED_LOOPS`), then the candidates within the search radius
                    # picked out without a branch, then only those looked at.
                    n_block = min(RUN_BLOCK, run_end - block)
                    for offset in range(np.uint64(0), np.uint64(n_block)):
                        u = np.uint64(block) + offset
                        dx = binned[0, u] - query_x
                        dy = binned[1, u] - query_y
                        dz = binned[2, u] - query_z
                        run_d2[offset] = dx * dx + dy * dy + dz * dz
                    n_near = 0
                    for k in range(n_block):
                        near[n_near] = k
                        within = run_d2[k] <= search2
                        # A half list's rows have j >= i: the others are dropped here too.
                        n_near += 1 if within & (full_list | (order[block + k] >= i)) else 0
                    for h in range(n_near):
                        t = block + near[h]
                        d2 = run_d2[near[h]]
                        j = order[t]
                        bound = radii[i] + radii[j] if with_radii else reach
                        if with_radii and d2 > (bound + margin) * (bound + margin):
                            continue
                        # Within the bound less the margin on the search's distance, the
                        # exact one is within the bound too (the margin is far above the
                        # rounding of either): its test is skipped.
                        certain = bound > margin and d2 <= (bound - margin) * (bound - margin)
                        if i == j or not certain:
                            zero = True
                            for a in range(n_dims):
                                pair_shift[a] = shifts[a] + binned_wraps[t, a] - wraps[i, a]
                                zero = zero and pair_shift[a] == 0
                            if i == j and (zero or not (full_list
                                                        or _positive(pair_shift, n_dims))):
                                continue
                            if not certain and math.sqrt(_pair_vector(
                                    positions, vectors, periodic, i, binned_positions, t, b,
                                    pair_shift, vector)) > bound:
                                continue
                        if at + count < room:
                            hits[at + count] = tag | t
                        count += 1
        a = n_dims - 1
        while a >= 0 and shifts[a] == upper[i, a]:
            shifts[a] = lower[i, a]
            a -= 1
        if a < 0:
            break
        shifts[a] += 1
        rank += 1
    return count


@jit
def chunk_hits(state, lo, hi, reach, full_list, hits, bits, counts):
    """The hits of the atoms ``order[lo:hi]`` (`_atom_hits`), stored one after another
    into ``hits`` while it has room; each atom's number of hits into ``counts``. Returns
    their total (above the length of ``hits``: they did not all fit)."""
    scratch = (np.zeros(3, np.int64), np.zeros(3, np.float64), np.zeros(3, np.int64),
               np.zeros(3, np.int64), np.zeros(3, np.int64), np.zeros(3, np.float64),
               np.empty(RUN_BLOCK, np.float64), np.empty(RUN_BLOCK, np.int64))
    order = state.order
    total = 0
    for t in range(lo, hi):
        i = order[t]
        count = _atom_hits(state, i, reach, full_list, bits, hits, total, scratch)
        counts[i] = count
        total += count
    return total


@jit_parallel
def pair_rows(state, reach, full_list, hits, bits, totals, counts, starts, out):
    """Each atom's rows within ``reach`` (or the sum of the radii), both directions or
    with ``full_list`` false each pair once, in two calls over chunks of
    `ATOMS_PER_CHUNK` atoms. Without ``starts`` ((0,)): each chunk's hits (`chunk_hits`)
    into its share of ``hits`` (int64, a multiple of the chunks' number), their number
    into ``totals`` (int64 (n_chunks,)) and each atom's into ``counts`` (int64 (n,)).
    With ``starts`` (the running sum of ``counts``): the rows written from ``starts[i]``
    into ``out``, ``(i, j, S, D, d, b)``: int64 (m,), int64 (m,), int64 (m, d),
    float64 (m, d), float64 (m,), int64 (m,), each with m rows or none (not asked for);
    a chunk whose hits did not fit its share finds them again first, into memory of its
    own. One kernel for both calls: one parallel loop to compile."""
    n = state.positions.shape[0]
    n_chunks = totals.shape[0]
    share = hits.shape[0] // max(n_chunks, 1)
    for chunk in prange(n_chunks):
        lo, hi = chunk * ATOMS_PER_CHUNK, min(n, (chunk + 1) * ATOMS_PER_CHUNK)
        mine = hits[chunk * share:(chunk + 1) * share]
        if starts.shape[0] == 0:
            totals[chunk] = chunk_hits(state, lo, hi, reach, full_list, mine, bits, counts)
            continue
        if totals[chunk] > share:
            mine = np.empty(totals[chunk], np.int64)
            chunk_hits(state, lo, hi, reach, full_list, mine, bits, counts)
        chunk_rows(state, lo, hi, mine, bits, counts, starts, out)
