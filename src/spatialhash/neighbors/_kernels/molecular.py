"""Molecular neighbour lists' kernels: the atoms of one or many systems wrapped into their
cells, given their query shifts and binned, and their rows ``(i, j, S)`` within reach
found and counted, then written straight into the arrays asked for (the design:
``_images.py``).

Before any scan, `state_chunks` sets the atoms up in three passes, each over chunks of
atoms on all threads (`_system_chunks`): it wraps them (`_wrap_pieces`), each piece of a
system reducing its bounds, merged in order (`_system_bounds`); gives them their query
shifts and bins (`_bin_pieces`), sorted by a stable counting sort whose places are given
in atom order on one thread (`_sort_atoms`); and gathers them in bin order
(`_gather_atoms`). So the state is that of one pass in order, for any thread count.

Atom ``i`` scans, for each shift ``s`` of its range (`_bin_pieces`), the bins of its
system near ``q = wrapped[i] - s @ cell`` (cubic bins as wide as the search radius over
the system's wrapped atoms): an atom ``j`` there is ``j``'s image by ``s``
near ``i``. No image is stored: the shifted positions are only queries, and most atoms,
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
copies in that order, next to each other. Arrays not asked for are passed with zero
rows and never written. All systems of a batch go through one call; an atom only meets
the atoms of its own system's bins.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import prange

from ..._config import jit, jit_inline, jit_parallel
from ..._kernels.indirect import kernel_caller

#: Atoms handed to a thread at a time.
ATOMS_PER_CHUNK = 64
#: Atoms a thread wraps, or gives their shifts and bins, at a time, at most.
ATOMS_PER_STATE_CHUNK = 4096
#: The passes of `state_chunks`.
WRAP, SHIFTS_AND_BINS, GATHER = 0, 1, 2
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
def _padded(array, i, n_dims):
    """Row ``i`` of the (n, d) ``array`` as three values, zeros past ``d``: the atoms'
    loops keep an atom's coordinates in registers, whatever ``d``."""
    return (array[i, 0], array[i, 1] if n_dims > 1 else 0.0,
            array[i, 2] if n_dims > 2 else 0.0)


@jit_inline
def _fraction(dual, b, a, x0, x1, x2, n_dims):
    """``dual[b, a] @ x`` of the point ``(x0, x1, x2)`` (`_padded`): the fractional
    coordinate along axis ``a``, its terms summed from 0.0 in axis order. The sum is
    never -0.0, so the 0.0 added for each axis past ``d`` leaves it as it is; one
    expression, where statements under ``if`` made numba's loops several times slower."""
    return (0.0 + dual[b, a, 0] * x0 + (dual[b, a, 1] * x1 if n_dims > 1 else 0.0)
            + (dual[b, a, 2] * x2 if n_dims > 2 else 0.0))


@jit_inline
def _system_chunks(offsets):
    """``(piece_start, piece_system, chunk_piece)``: the atoms cut into pieces of one
    system each, of at most `ATOMS_PER_STATE_CHUNK`, in order (piece ``p`` holds the atoms
    ``piece_start[p]:piece_start[p + 1]`` of system ``piece_system[p]``), and the pieces
    grouped into chunks of at most that many atoms (or one piece), handed to a thread at a
    time: chunk ``c`` holds the pieces ``chunk_piece[c]:chunk_piece[c + 1]``, so that the
    small systems of a batch go to the threads by the thousand."""
    n_systems = offsets.shape[0] - 1
    n_pieces = 0
    for b in range(n_systems):
        n_pieces += -(-(offsets[b + 1] - offsets[b]) // ATOMS_PER_STATE_CHUNK)
    piece_start = np.empty(n_pieces + 1, np.int64)
    piece_system = np.empty(n_pieces, np.int64)
    p = 0
    for b in range(n_systems):
        for lo in range(offsets[b], offsets[b + 1], ATOMS_PER_STATE_CHUNK):
            piece_start[p] = lo
            piece_system[p] = b
            p += 1
    piece_start[n_pieces] = offsets[n_systems]
    chunk_piece = np.empty(n_pieces + 1, np.int64)
    n_chunks = 0
    filled = 0
    for p in range(n_pieces):
        size = piece_start[p + 1] - piece_start[p]
        if p == 0 or filled + size > ATOMS_PER_STATE_CHUNK:
            chunk_piece[n_chunks] = p
            n_chunks += 1
            filled = 0
        filled += size
    chunk_piece[n_chunks] = n_pieces
    return piece_start, piece_system, chunk_piece[:n_chunks + 1]


@jit
def _chunk_pass(task, atoms, cell, shift_bounds, bins, pieces, first, last, out, partial):
    """`state_chunks`' pass ``task`` over the pieces ``first:last``: `_wrap_pieces`,
    `_bin_pieces` or `_gather_atoms` (their atoms taken as places in ``order``)."""
    if task == WRAP:
        _wrap_pieces(atoms, cell, pieces, first, last, partial)
    elif task == SHIFTS_AND_BINS:
        _bin_pieces(atoms[2], cell, shift_bounds, bins, pieces, first, last, out, partial)
    else:
        _gather_atoms(atoms, pieces[0][first], pieces[0][last], out)


_check_chunk_pass, _call_chunk_pass = kernel_caller(_chunk_pass)


@jit_parallel
def state_chunks(task, offsets, atoms, cell, shift_bounds, bins, out, partial, kernel):
    """One pass of the set-up over the chunks of `_system_chunks`, on all threads, each
    by `_chunk_pass` called at ``kernel`` (``indirect.kernel_target``: compiled once, by
    itself, not again inside this loop): with ``task`` `WRAP`, the atoms wrapped, each
    piece's reductions into its row of ``partial`` (float64 (n_pieces, 14));
    `SHIFTS_AND_BINS`, their shifts and bins, each piece's image count into
    ``partial[p, 0]``; `GATHER`, the atoms gathered in bin order. One kernel for the
    three passes: one parallel loop to compile. What the first two give each system,
    `system_results` computes on one thread.

    ``atoms`` is ``(positions, wraps, wrapped)``, ``cell`` ``(vectors, periodic, dual)``
    as the cells hold them, ``shift_bounds`` ``(low, high, check_cells, search_cells)``
    and ``bins`` ``(origin, inv_bin, n_bins, bin_offset)`` (the fields of
    `MolecularState`; empty for `WRAP`), ``out`` ``(lower, upper, bin_of, order, binned,
    binned_positions, binned_wraps)``."""
    piece_start, piece_system, chunk_piece = _system_chunks(offsets)
    pieces = (piece_start, piece_system)
    _check_chunk_pass(kernel, (task, atoms, cell, shift_bounds, bins, pieces, 0, 0, out,
                               partial))
    for c in prange(chunk_piece.shape[0] - 1):
        _call_chunk_pass(kernel, (task, atoms, cell, shift_bounds, bins, pieces,
                                  chunk_piece[c], chunk_piece[c + 1], out, partial))


@jit
def system_results(task, offsets, partial, bin_offset, out, systems):
    """What `state_chunks`' pass ``task`` gives each system, on one thread, into
    ``systems``, ``(farthest, largest, bounds, counts, crowding, bin_start)`` (``bounds``
    float64 (4, B, d): ``low``, ``high``, ``wrapped_min`` and ``wrapped_max``): with
    `WRAP`, the pieces' reductions merged (`_system_bounds`); with `SHIFTS_AND_BINS`, the
    pieces' image counts summed and the atoms sorted by bin (`_sort_atoms`, its places
    into ``order`` of ``out``)."""
    piece_system = _system_chunks(offsets)[1]
    if task == WRAP:
        _system_bounds(piece_system, partial, systems)
    elif task == SHIFTS_AND_BINS:
        _sort_atoms(piece_system, partial, bin_offset, out[2], out[3], systems)


@jit_inline
def _wrap_pieces(atoms, cell, pieces, first, last, partial):
    """The atoms of the pieces ``first:last`` (`_system_chunks`) wrapped into their
    cells: ``wraps``
    (``T``), ``-floor`` of the fractional coordinates (`_fraction` of ``x``, on periodic
    axis ``a``; 0 on open ones); ``wrapped``, ``x + T @ cell`` added axis by axis in
    increasing order. Each piece's reductions, kept in registers, into its row of
    ``partial`` (14,): the largest magnitude of a fractional coordinate before the wrap,
    of a coordinate before or after it; then along the three padded axes (from 2, 5, 8
    and 11) the least and greatest fractional coordinate (`_fraction` of the wrapped
    atom; periodic axes only) and wrapped coordinate (infinite where none)."""
    positions, wraps, wrapped = atoms
    vectors, periodic, dual = cell
    piece_start, piece_system = pieces
    n_dims = positions.shape[1]
    for p in range(first, last):
        b = piece_system[p]
        far = 0.0
        big = 0.0
        low0 = low1 = low2 = min0 = min1 = min2 = np.inf
        high0 = high1 = high2 = max0 = max1 = max2 = -np.inf
        periodic0 = periodic[b, 0]
        periodic1 = n_dims > 1 and periodic[b, 1]
        periodic2 = n_dims > 2 and periodic[b, 2]
        for i in range(piece_start[p], piece_start[p + 1]):
            x0, x1, x2 = _padded(positions, i, n_dims)
            w0, w1, w2 = x0, x1, x2
            for a in range(n_dims):
                wrap = 0
                if periodic[b, a]:
                    value = _fraction(dual, b, a, x0, x1, x2, n_dims)
                    far = max(far, abs(value))
                    wrap = -int(math.floor(value)) if abs(value) < 2.0**62 else 0
                    w0 += wrap * vectors[b, a, 0]
                    if n_dims > 1:
                        w1 += wrap * vectors[b, a, 1]
                    if n_dims > 2:
                        w2 += wrap * vectors[b, a, 2]
                wraps[i, a] = wrap
            wrapped[i, 0] = w0
            big = max(big, abs(x0), abs(w0), abs(x1), abs(w1), abs(x2), abs(w2))
            min0, max0 = min(min0, w0), max(max0, w0)
            if periodic0:
                value = _fraction(dual, b, 0, w0, w1, w2, n_dims)
                low0, high0 = min(low0, value), max(high0, value)
            if n_dims > 1:
                wrapped[i, 1] = w1
                min1, max1 = min(min1, w1), max(max1, w1)
                if periodic1:
                    value = _fraction(dual, b, 1, w0, w1, w2, n_dims)
                    low1, high1 = min(low1, value), max(high1, value)
            if n_dims > 2:
                wrapped[i, 2] = w2
                min2, max2 = min(min2, w2), max(max2, w2)
                if periodic2:
                    value = _fraction(dual, b, 2, w0, w1, w2, n_dims)
                    low2, high2 = min(low2, value), max(high2, value)
        partial[p, 0] = far
        partial[p, 1] = big
        partial[p, 2], partial[p, 3], partial[p, 4] = low0, low1, low2
        partial[p, 5], partial[p, 6], partial[p, 7] = high0, high1, high2
        partial[p, 8], partial[p, 9], partial[p, 10] = min0, min1, min2
        partial[p, 11], partial[p, 12], partial[p, 13] = max0, max1, max2


@jit_inline
def _system_bounds(piece_system, partial, systems):
    """Each system's pieces' reductions (`_wrap_pieces`, ``partial``) merged in order,
    as one pass over its atoms in order would have them (the same minimum and maximum
    whatever the pieces), into ``farthest``, ``largest`` and ``bounds`` of ``systems``:
    ``farthest``, the largest magnitude of a fractional coordinate before the wrap;
    ``largest``, of a coordinate before or after it; ``bounds`` ``low`` and ``high``,
    the wrapped atoms' range of fractional coordinates, ``wrapped_min`` and
    ``wrapped_max``, their bounding box (infinite where none). Loops, not array
    expressions, which numba would make parallel loops of their own."""
    farthest, largest, bounds = systems[0], systems[1], systems[2]
    n_systems, n_dims = bounds.shape[1], bounds.shape[2]
    for b in range(n_systems):
        farthest[b] = 0.0
        largest[b] = 0.0
        for a in range(n_dims):
            bounds[0, b, a] = bounds[2, b, a] = np.inf
            bounds[1, b, a] = bounds[3, b, a] = -np.inf
    for p in range(piece_system.shape[0]):
        b = piece_system[p]
        farthest[b] = max(farthest[b], partial[p, 0])
        largest[b] = max(largest[b], partial[p, 1])
        for a in range(n_dims):
            bounds[0, b, a] = min(bounds[0, b, a], partial[p, 2 + a])
            bounds[1, b, a] = max(bounds[1, b, a], partial[p, 5 + a])
            bounds[2, b, a] = min(bounds[2, b, a], partial[p, 8 + a])
            bounds[3, b, a] = max(bounds[3, b, a], partial[p, 11 + a])


@jit_inline
def _bin_pieces(wrapped, cell, shift_bounds, bins, pieces, first, last, out, partial):
    """The query shifts and bins of the atoms of the pieces ``first:last``, into
    ``lower``, ``upper`` and ``bin_of`` of ``out``; each piece's sum of their image
    counts into ``partial[p, 0]``.

    An atom's query shifts per axis run from ``ceil(f - k - high)`` to
    ``floor(f + k - low)``, ``f`` its ``wrapped`` position's fractional coordinate
    (`_fraction`, 0 on open axes) and ``k = search_cells[b]`` (the search radius in
    cells, 0 on open axes). Its image count is the product over axes of
    ``floor(high + k - f) - ceil(low - k - f) + 1`` at ``k = check_cells[b]``, from the
    images' side (the same number of shifts, seen from the other atom of each pair). Its
    bin, row-major among its system's from ``bin_offset[b]``, holds its wrapped
    position."""
    _, periodic, dual = cell
    low, high, check_cells, search_cells = shift_bounds
    origin, inv_bin, n_bins, bin_offset = bins
    lower, upper, bin_of = out[0], out[1], out[2]
    piece_start, piece_system = pieces
    n_dims = wrapped.shape[1]
    for p in range(first, last):
        b = piece_system[p]
        images = 0.0
        for i in range(piece_start[p], piece_start[p + 1]):
            w0, w1, w2 = _padded(wrapped, i, n_dims)
            product = 1.0
            linear = 0
            for a in range(n_dims):
                f = _fraction(dual, b, a, w0, w1, w2, n_dims) if periodic[b, a] else 0.0
                k = check_cells[b, a]
                product *= (math.floor(high[b, a] + k - f) - math.ceil(low[b, a] - k - f)
                            + 1.0)
                k = search_cells[b, a]
                lower[i, a] = int(math.ceil(f - k - high[b, a]))
                upper[i, a] = int(math.floor(f + k - low[b, a]))
                top = n_bins[b, a] - 1
                place = math.floor((wrapped[i, a] - origin[b, a]) * inv_bin[b])
                place = min(max(place, 0.0), float(top))  # as floats: a far point's is huge
                linear = linear * n_bins[b, a] + int(place)
            images += product
            bin_of[i] = bin_offset[b] + linear
        partial[p, 0] = images


@jit_inline
def _sort_atoms(piece_system, partial, bin_offset, bin_of, order, systems):
    """Into ``counts``, ``crowding`` and ``bin_start`` of ``systems``: each system's
    image count, its pieces' (`_bin_pieces`, ``partial[:, 0]``) summed (whole numbers,
    summed exactly below 2**53 in any order); the sum over each system's bins of their
    atoms' number squared; and the stable counting sort of the atoms by ``bin_of``, its
    places into ``order`` (`MolecularState`)."""
    counts, crowding, bin_start = systems[3], systems[4], systems[5]
    n = bin_of.shape[0]
    n_systems = counts.shape[0]
    for b in range(n_systems):
        counts[b] = 0.0
    for p in range(piece_system.shape[0]):
        counts[piece_system[p]] += partial[p, 0]
    for k in range(bin_start.shape[0]):
        bin_start[k] = 0
    for i in range(n):
        bin_start[bin_of[i] + 1] += 1
    for b in range(n_systems):
        squares = 0.0
        for k in range(bin_offset[b] + 1, bin_offset[b + 1] + 1):
            squares += float(bin_start[k]) * float(bin_start[k])
        crowding[b] = squares
    for k in range(1, bin_start.shape[0]):
        bin_start[k] += bin_start[k - 1]
    for i in range(n):
        slot = bin_start[bin_of[i]]
        bin_start[bin_of[i]] += 1
        order[slot] = i
    # Each bin's start moved to the next one's by its atoms: shifted back.
    for k in range(bin_start.shape[0] - 1, 0, -1):
        bin_start[k] = bin_start[k - 1]
    bin_start[0] = 0


@jit_inline
def _gather_atoms(atoms, lo, hi, out):
    """The atoms at places ``lo:hi`` of ``order``: their wrapped positions (padded to
    three rows with zeros), positions and wraps into ``binned``, ``binned_positions``
    and ``binned_wraps`` of ``out``, one place after another."""
    positions, wraps, wrapped = atoms
    order, binned, binned_positions, binned_wraps = out[3], out[4], out[5], out[6]
    n_dims = positions.shape[1]
    for slot in range(lo, hi):
        i = order[slot]
        w0, w1, w2 = _padded(wrapped, i, n_dims)
        binned[0, slot] = w0
        binned[1, slot] = w1
        binned[2, slot] = w2
        for a in range(n_dims):
            binned_positions[slot, a] = positions[i, a]
            binned_wraps[slot, a] = wraps[i, a]


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
def _pair_vector(positions, vectors, periodic, i, positions_j, j, b, pair_shift, vector):
    """``D`` of the row ``(i, j, pair_shift)`` of system ``b`` (``j``'s position being
    ``positions_j[j]``), into ``vector``, and its squared length: in the order of the
    oracle (``tests/molecular_oracle.py``) and of the former NumPy rows, the difference,
    then the shift summed over the periodic axes in increasing order (its first term as
    it is, not added to 0.0, which would turn a -0.0 into 0.0), then added; the squares
    summed in axis order."""
    n_dims = positions.shape[1]
    squared = 0.0
    for a in range(n_dims):
        value = positions_j[j, a] - positions[i, a]
        shift = 0.0
        started = False
        for c in range(n_dims):
            if periodic[b, c]:
                term = pair_shift[c] * vectors[b, c, a]
                shift = shift + term if started else term
                started = True
        if started:
            value = value + shift
        vector[a] = value
        squared = value * value if a == 0 else squared + value * value
    return squared


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


@jit
def chunk_rows(state, lo, hi, hits, bits, counts, starts, out):
    """The rows of the atoms ``order[lo:hi]`` written from their hits (`chunk_hits`, in
    that order in ``hits``): atom ``i``'s from ``starts[i]``, in the order found. Each
    hit's shift is found by stepping through the atom's shifts in the order of their
    ranks; ``S``, ``D`` and ``d`` are computed only where asked for."""
    shifts, pair_shift = np.zeros(3, np.int64), np.zeros(3, np.int64)
    vector = np.zeros(3, np.float64)
    positions, wraps, lower, upper = state.positions, state.wraps, state.lower, state.upper
    binned_positions, binned_wraps = state.binned_positions, state.binned_wraps
    vectors, periodic, order = state.vectors, state.periodic, state.order
    out_i, out_j, out_shifts, out_vectors, out_distances, out_systems = out
    n_dims = positions.shape[1]
    wants_vector = out_vectors.shape[0] > 0 or out_distances.shape[0] > 0
    wants_shift = out_shifts.shape[0] > 0 or wants_vector
    mask = (1 << bits) - 1
    at = 0
    for place in range(lo, hi):
        i = order[place]
        b = state.system[i]
        for a in range(n_dims):
            shifts[a] = lower[i, a]
        rank = 0
        row = starts[i]
        for k in range(counts[i]):
            hit = hits[at + k]
            while rank < hit >> bits:  # the next shift in lexicographic order
                a = n_dims - 1
                while shifts[a] == upper[i, a]:
                    shifts[a] = lower[i, a]
                    a -= 1
                shifts[a] += 1
                rank += 1
            t = hit & mask
            if out_i.shape[0]:
                out_i[row + k] = i
            if out_j.shape[0]:
                out_j[row + k] = order[t]
            if out_systems.shape[0]:
                out_systems[row + k] = b
            if wants_shift:
                for a in range(n_dims):
                    pair_shift[a] = shifts[a] + binned_wraps[t, a] - wraps[i, a]
                for a in range(n_dims if out_shifts.shape[0] else 0):
                    out_shifts[row + k, a] = pair_shift[a]
            if wants_vector:
                squared = _pair_vector(positions, vectors, periodic, i, binned_positions, t,
                                       b, pair_shift, vector)
                for a in range(n_dims if out_vectors.shape[0] else 0):
                    out_vectors[row + k, a] = vector[a]
                if out_distances.shape[0]:
                    out_distances[row + k] = math.sqrt(squared)
        at += counts[i]


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
