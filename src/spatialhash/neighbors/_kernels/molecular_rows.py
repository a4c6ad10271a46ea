"""The rows of the molecular lists: their vectors ``D``, in one order of floating-point
operations (`_pair_vector`, `_row_vector`, sharing `_shifted`), and the second pass of
``molecular.py``'s `pair_rows`, which writes each atom's rows from its hits
(`chunk_rows`).

The second pass reads each atom's position, wrap and shift once and its system's cell
once per system, and computes ``S``, ``D`` and ``d`` from numbers, not arrays, in one
loop over the atom's hits, compiled apart for the common case (all of ``jSDd`` asked
for, cells periodic on three axes). The atoms come in bin order, their rows are grouped
in the caller's order: each atom's rows lie elsewhere in every output array, so the
pass asks for the memory of the rows a few atoms ahead before it writes them
(`prefetch`), where the processor's own prefetchers, which follow streams, would leave
each atom's writes waiting.
"""

from __future__ import annotations

import math

import numpy as np

from ..._config import jit, jit_inline
from ..._kernels.prefetch import prefetch_read, prefetch_write

#: The rows of the atom this many places ahead in a chunk are prefetched (and the
#: per-atom values of the one twice as far): far enough for the lines to arrive, near
#: enough for them to stay.
AHEAD = 4
#: Elements of 8 bytes in a cache line.
LINE = 8


# The helpers of D below take no arrays but `_cell_axes`'s: plain kernels, compiled once
# and inlined by LLVM where they are called (inlined by numba, at each call site of the
# two copies of `_rows`, the first call compiled seconds longer).
@jit
def _shifted(value, s0, s1, s2, w0, w1, w2, p0, p1, p2):
    """``value`` plus the vector of the shift ``(s0, s1, s2)`` along one axis, ``w`` the
    cell vectors' components along it: the terms ``s * w`` of the periodic axes (``p``)
    summed in increasing order, the first as it is (not added to 0.0, which would turn a
    -0.0 into 0.0); ``value`` as it is without periodic axes."""
    shift = 0.0
    if p0:
        shift = s0 * w0
    if p1:
        shift = shift + s1 * w1 if p0 else s1 * w1
    if p2:
        shift = shift + s2 * w2 if p0 or p1 else s2 * w2
    return value + shift if p0 or p1 or p2 else value


@jit
def _cell_axes(vectors, periodic, b, n_dims):
    """System ``b``'s cell vectors as three rows of three (zeros past ``n_dims``) and its
    periodic flags (false past ``n_dims``): ``((v0, v1, v2), (p0, p1, p2))``, read once
    for the many rows of a system rather than at each."""
    v0 = _padded_vector(vectors, b, 0, n_dims)
    v1 = _padded_vector(vectors, b, 1, n_dims)
    v2 = _padded_vector(vectors, b, 2, n_dims)
    p0 = periodic[b, 0]
    p1 = periodic[b, 1] if n_dims > 1 else False
    p2 = periodic[b, 2] if n_dims > 2 else False
    return (v0, v1, v2), (p0, p1, p2)


@jit
def _padded_vector(vectors, b, c, n_dims):
    """Cell vector ``c`` of system ``b``, three components (zeros past ``n_dims``, all
    zeros for ``c >= n_dims``)."""
    if c >= n_dims:
        return 0.0, 0.0, 0.0
    return (vectors[b, c, 0], vectors[b, c, 1] if n_dims > 1 else 0.0,
            vectors[b, c, 2] if n_dims > 2 else 0.0)


@jit
def _row_vector(x, y, z, s0, s1, s2, axes, flags):
    """``D = (x, y, z) + s @ cell`` of a row (the difference ``x[j] - x[i]`` padded to
    three axes with zeros, ``s`` its shift, ``axes`` and ``flags`` from `_cell_axes`), in
    the order of the oracle (``tests/molecular_oracle.py``): per axis the difference,
    then the shift's vector along it (`_shifted`) added; with its squared length, the
    squares summed in axis order (a padded axis adds 0.0 to a sum of squares, which is
    never -0.0: the same bits). Returns ``(dx, dy, dz, squared)``."""
    (v00, v01, v02), (v10, v11, v12), (v20, v21, v22) = axes
    p0, p1, p2 = flags
    dx = _shifted(x, s0, s1, s2, v00, v10, v20, p0, p1, p2)
    dy = _shifted(y, s0, s1, s2, v01, v11, v21, p0, p1, p2)
    dz = _shifted(z, s0, s1, s2, v02, v12, v22, p0, p1, p2)
    return dx, dy, dz, dx * dx + dy * dy + dz * dz


@jit_inline
def _pair_vector(positions, vectors, periodic, i, positions_j, j, b, pair_shift, vector):
    """``D`` of the row ``(i, j, pair_shift)`` of system ``b`` (``j``'s position being
    ``positions_j[j]``), into ``vector``, and its squared length: in the order of the
    oracle (``tests/molecular_oracle.py``), per axis the difference, then the shift's
    vector along it added (`_shifted`); the squares summed in axis order."""
    n_dims = positions.shape[1]
    s1 = pair_shift[1] if n_dims > 1 else 0
    s2 = pair_shift[2] if n_dims > 2 else 0
    p1 = periodic[b, 1] if n_dims > 1 else False
    p2 = periodic[b, 2] if n_dims > 2 else False
    squared = 0.0
    for a in range(n_dims):
        value = _shifted(positions_j[j, a] - positions[i, a], pair_shift[0], s1, s2,
                         vectors[b, 0, a], vectors[b, 1, a] if n_dims > 1 else 0.0,
                         vectors[b, 2, a] if n_dims > 2 else 0.0, periodic[b, 0], p1, p2)
        vector[a] = value
        squared = value * value if a == 0 else squared + value * value
    return squared


@jit_inline
def _rows(state, lo, hi, hits, bits, counts, starts, out, n_dims, periodic3, wanted):
    """`chunk_rows`, with ``n_dims``, ``wanted`` (whether ``j``, ``S``, ``D`` and ``d``
    are asked for) and ``periodic3`` (whether every atom's system is periodic on three
    axes) given: a caller passing them as constants gets the loops compiled without the
    branches on them. The arrays are taken out of their tuples once, before the loops
    (inside them, each access costs a reference count), and the helpers called for each
    row take numbers only; `_cell_axes` is called once per system met."""
    shifts = np.zeros(3, np.int64)
    lower, upper = state.lower, state.upper
    binned_positions, binned_wraps = state.binned_positions, state.binned_wraps
    vectors, periodic, order, system = state.vectors, state.periodic, state.order, state.system
    out_i, out_j, out_shifts, out_vectors, out_distances, out_systems = out
    with_i, with_b = out_i.shape[0] > 0, out_systems.shape[0] > 0
    with_j, with_shift, with_vector, with_distance = wanted
    flat_lower = lower.reshape(lower.size)
    flat_positions = binned_positions.reshape(binned_positions.size)
    flat_wraps = binned_wraps.reshape(binned_wraps.size)
    flat_shifts = out_shifts.reshape(out_shifts.size)
    flat_vectors = out_vectors.reshape(out_vectors.size)
    width, one, two = np.uint64(n_dims), np.uint64(1), np.uint64(2)
    mask = (1 << bits) - 1
    b_cell = -1
    axes, flags = _cell_axes(vectors, periodic, 0, n_dims)
    at = 0
    for place in range(lo, hi):
        i = order[place]
        b = system[i]
        row, n_rows = starts[i], counts[i]
        # The per-atom values of an atom further on, the rows' lines of a nearer one.
        if place + 2 * AHEAD < hi:
            later = order[place + 2 * AHEAD]
            prefetch_read(starts, later)
            prefetch_read(counts, later)
            prefetch_read(system, later)
            prefetch_read(flat_lower, later * n_dims)
        if place + AHEAD < hi:
            ahead = order[place + AHEAD]
            first, n_ahead = starts[ahead], counts[ahead]
            for k in range(first, first + n_ahead, LINE):
                if with_i:
                    prefetch_write(out_i, k)
                if with_j:
                    prefetch_write(out_j, k)
                if with_distance:
                    prefetch_write(out_distances, k)
                if with_b:
                    prefetch_write(out_systems, k)
            for k in range(first * n_dims, (first + n_ahead) * n_dims, LINE):
                if with_shift:
                    prefetch_write(flat_shifts, k)
                if with_vector:
                    prefetch_write(flat_vectors, k)
        if with_i:
            for k in range(row, row + n_rows):
                out_i[k] = i
        if with_b:
            for k in range(row, row + n_rows):
                out_systems[k] = b
        if not (with_shift or with_vector or with_distance):
            for k in range(n_rows if with_j else 0):
                out_j[row + k] = order[hits[at + k] & mask]
            at += n_rows
            continue
        if b != b_cell:
            axes, flags = _cell_axes(vectors, periodic, b, n_dims)
            b_cell = b
        if periodic3:
            flags = (True, True, True)
        # Atom i's position and wrap from their copies in bin order.
        x0 = binned_positions[place, 0]
        x1 = binned_positions[place, 1] if n_dims > 1 else 0.0
        x2 = binned_positions[place, 2] if n_dims > 2 else 0.0
        wrap0 = binned_wraps[place, 0]
        wrap1 = binned_wraps[place, 1] if n_dims > 1 else 0
        wrap2 = binned_wraps[place, 2] if n_dims > 2 else 0
        for a in range(n_dims):
            shifts[a] = lower[i, a]
        rank = 0  # base: the hit's shift less atom i's wrap (S less j's wrap)
        base0 = shifts[0] - wrap0
        base1 = shifts[1] - wrap1 if n_dims > 1 else 0
        base2 = shifts[2] - wrap2 if n_dims > 2 else 0
        for k in range(n_rows):
            hit = hits[at + k]
            if hit >> bits != rank:  # a run of hits shares a shift
                while rank < hit >> bits:  # the next shift in lexicographic order
                    a = n_dims - 1
                    while shifts[a] == upper[i, a]:
                        shifts[a] = lower[i, a]
                        a -= 1
                    shifts[a] += 1
                    rank += 1
                base0 = shifts[0] - wrap0
                base1 = shifts[1] - wrap1 if n_dims > 1 else 0
                base2 = shifts[2] - wrap2 if n_dims > 2 else 0
            # Indices unsigned (no check for a negative one), into the 2-D arrays' rows
            # flattened (a multiple of a constant n_dims, not of a stride).
            t = np.uint64(hit & mask)
            u = t * width
            at_row = np.uint64(row + k)
            v = at_row * width
            if with_j:
                out_j[at_row] = order[t]
            s0 = base0 + flat_wraps[u]
            s1 = base1 + flat_wraps[u + one] if n_dims > 1 else 0
            s2 = base2 + flat_wraps[u + two] if n_dims > 2 else 0
            if with_shift:
                flat_shifts[v] = s0
                if n_dims > 1:
                    flat_shifts[v + one] = s1
                if n_dims > 2:
                    flat_shifts[v + two] = s2
            if not (with_vector or with_distance):
                continue
            y0 = flat_positions[u] - x0
            y1 = flat_positions[u + one] - x1 if n_dims > 1 else 0.0
            y2 = flat_positions[u + two] - x2 if n_dims > 2 else 0.0
            d0, d1, d2, squared = _row_vector(y0, y1, y2, s0, s1, s2, axes, flags)
            if with_vector:
                flat_vectors[v] = d0
                if n_dims > 1:
                    flat_vectors[v + one] = d1
                if n_dims > 2:
                    flat_vectors[v + two] = d2
            if with_distance:
                out_distances[at_row] = math.sqrt(squared)
        at += n_rows


@jit
def chunk_rows(state, lo, hi, hits, bits, counts, starts, out):
    """The rows of the atoms ``order[lo:hi]`` written from their hits (`chunk_hits`, in
    that order in ``hits``): atom ``i``'s from ``starts[i]``, in the order found. ``i``
    and ``b`` are one value per atom, filled; ``j``, ``S``, ``D`` and ``d`` are written
    in one loop over the atom's hits, ``S``, ``D`` and ``d`` computed only where asked
    for, from the atom's position and wrap and its system's cell read once. Each hit's
    shift is found by stepping through the atom's shifts in the order of their ranks
    where its rank differs from the hit before's. Compiled apart (`_rows`) for the
    common case, all of ``jSDd`` asked for in systems periodic on three axes."""
    _, out_j, out_shifts, out_vectors, out_distances, _ = out
    wanted = (out_j.shape[0] > 0, out_shifts.shape[0] > 0, out_vectors.shape[0] > 0,
              out_distances.shape[0] > 0)
    periodic, system, order = state.periodic, state.system, state.order
    n_dims = periodic.shape[1]
    common = n_dims == 3 and wanted[0] and wanted[1] and wanted[2] and wanted[3]
    for place in range(lo, hi if common else lo):
        b = system[order[place]]
        common = common and periodic[b, 0] and periodic[b, 1] and periodic[b, 2]
    if common:
        _rows(state, lo, hi, hits, bits, counts, starts, out, 3, True,
              (True, True, True, True))
    else:
        _rows(state, lo, hi, hits, bits, counts, starts, out, n_dims, False, wanted)
