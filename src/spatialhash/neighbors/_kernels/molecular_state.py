"""The molecular lists' set-up before any scan (``_images._state``): the atoms of one or
many systems wrapped into their cells, given their query shifts, sorted into bins by a
stable counting sort and gathered in bin order, into the arrays of `MolecularState`
(``molecular.py``; the design: ``_images.py``).

`state_chunks` makes three passes, each over chunks of atoms on all threads
(`_system_chunks`: pieces of one system, a batch's small systems handed out together),
each chunk by `_chunk_pass`, called through its address so that its code is compiled
once: it wraps the atoms (`_wrap_pieces`), each piece reducing its system's bounds in
registers; gives them their query shifts and bins (`_bin_pieces`); and gathers them in
bin order (`_gather_atoms`). Between the passes, `system_results` merges the pieces'
reductions in order (`_system_bounds`) and sorts the atoms (`_sort_atoms`, the sort's
places given in atom order), on one thread. So the state is that of one pass over the
atoms in order, for any thread count.

An atom's coordinates are kept in three registers whatever the dimension (`_padded`), and
its fractional coordinates computed in one expression (`_fraction`); loops over the axes
of a system's matrices with the atom's values in arrays cost several times as much.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..._config import jit, jit_inline, jit_parallel
from ..._kernels.indirect import kernel_caller

#: Atoms a thread wraps, or gives their shifts and bins, at a time, at most.
ATOMS_PER_STATE_CHUNK = 4096
#: The passes of `state_chunks`.
WRAP, SHIFTS_AND_BINS, GATHER = 0, 1, 2


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
    time: chunk ``c`` holds the pieces ``chunk_piece[c]:chunk_piece[c + 1]``, so that a
    batch's small systems go to a thread tens at a time, not one by one."""
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
    cells: ``wraps`` (``T``), ``-floor`` of the fractional coordinates (`_fraction` of
    ``x``, on periodic axis ``a``; 0 on open ones); ``wrapped``, ``x + T @ cell`` added
    axis by axis in increasing order. Each piece's reductions, kept in registers, into its row of
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
