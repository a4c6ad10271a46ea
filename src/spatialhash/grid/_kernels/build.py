"""Building the grid: cell coordinates, the cell lookup (dense or hashed), the counting sort."""

from __future__ import annotations

import numpy as np

from ..._config import jit, jit_inline, jit_variant
from ..._kernels.cells import find_cell, floor_to_int, hash_cell


@jit
def linear_cell(points, i, origin, inv_cell_size, n_periodic, n_cells):
    """Linear index, in the box of ``n_cells`` cells (x fastest), of the cell of point
    ``i`` of the (n, d) ``points`` (d <= 3, missing coordinates 0): the arithmetic of
    `cell_coords_of`, periodic axes (``n_periodic > 0``) clamped the same way."""
    d = points.shape[1]
    key = np.int64(0)
    for axis in range(2, -1, -1):
        x = points[i, axis] if axis < d else 0.0
        c = floor_to_int((x - origin[axis]) * inv_cell_size[axis])
        if n_periodic[axis] > 0:
            c = min(max(c, 0), n_periodic[axis] - 1)
        key = key * n_cells[axis] + c
    return key


@jit
def dense_build(points3, origin, inv_cell_size, n_periodic, n_cells, linear, permutation,
                columns):
    """Dense mode: the whole build of ``points3`` (n, d), d <= 3 (missing coordinates are
    0), into the box of ``n_cells`` cells, in one call: `dense_cells`, then `dense_sort`
    into cell arrays allocated here (a build of many cells calls the two itself, with the
    arrays of `_outputs`). Both are inlined here (`jit_inline`): called as functions of
    their own, they cost the first build of 1,000 points 1.3-1.5 times the compile (CPU
    time, two runs each).

    ``n_cells`` must cover every point's cell coordinate (the caller derives it from the
    largest coordinate with the same arithmetic, monotone); periodic axes (``n_periodic >
    0``) clamp as in `cell_coords_of`. ``linear``, ``permutation`` and ``columns`` as
    `build_parallel.dense_cells_parallel` and `build_parallel.dense_sort_parallel` take
    them. Returns ``(cell_start, permutation, columns, dense_lookup, dense_start,
    cell_coords)`` (see `GridState` and `sort_points`): occupied cells take ids in
    row-major cell order (x fastest), ``dense_lookup`` maps the linear index of every cell
    in the box of cells to its id or -1, and ``dense_start`` counts the points before each
    linear index.
    """
    n_linear = n_cells[0] * n_cells[1] * n_cells[2]
    dense_start = np.empty(n_linear + 1, np.int64)
    dense_lookup = np.empty(n_linear, np.int64)
    n_occupied = dense_cells(points3, origin, inv_cell_size, n_periodic, n_cells, linear,
                             dense_start, dense_lookup)
    cell_start = np.empty(n_occupied + 1, np.int64)
    cell_coords = np.empty((n_occupied, 3), np.int64)
    dense_sort(points3, n_cells, linear, dense_start, dense_lookup, cell_start, cell_coords,
               permutation, columns)
    return cell_start, permutation, columns, dense_lookup, dense_start, cell_coords


@jit_inline
def dense_cells(points3, origin, inv_cell_size, n_periodic, n_cells, linear, dense_start,
                dense_lookup):
    """The cells of the dense build (see `dense_build`), written whole into the caller's
    arrays: each point's linear index ``linear`` (n,), then ``dense_start`` (n_linear +
    1,) and ``dense_lookup`` (n_linear,) int64 as in `GridState`; returns the number of
    occupied cells, which sizes the arrays of `dense_sort`.

    The counting sort runs on the linear index, computed from the points in the pass that
    counts them, so neither per-point cell coordinates nor cell ids are stored (ad hoc: 9%
    less time for 5,000 points, and 120 kB less to bring back into the cache each frame).
    """
    n = points3.shape[0]
    n_linear = dense_lookup.shape[0]
    dense_start[:] = 0
    for i in range(n):
        key = linear_cell(points3, i, origin, inv_cell_size, n_periodic, n_cells)
        linear[i] = key
        dense_start[key + 1] += 1
    n_occupied = 0
    for key in range(n_linear):
        if dense_start[key + 1] != 0:
            dense_lookup[key] = n_occupied
            n_occupied += 1
        else:
            dense_lookup[key] = -1
        dense_start[key + 1] += dense_start[key]
    return n_occupied


@jit_inline
def dense_sort(points3, n_cells, linear, dense_start, dense_lookup, cell_start, cell_coords,
               permutation, columns):
    """The rest of the dense build after `dense_cells` (its ``linear``, ``dense_start`` and
    ``dense_lookup``): the occupied cells' ``cell_start`` (n_occupied + 1,) and
    ``cell_coords`` (n_occupied, 3) int64, the points' ``permutation`` (n,) int64 and
    their sorted ``columns`` (3, n) float64, written whole into the caller's arrays.

    The cells are walked in nested loops, since an integer division per cell to recover
    its coordinates cost as much as the sort of a small grid (ad hoc: a fifth of the build
    of 5,000 points).
    """
    nx, ny, nz = n_cells[0], n_cells[1], n_cells[2]
    n_occupied = cell_coords.shape[0]
    cell = 0
    key = 0
    for z in range(nz):
        for y in range(ny):
            for x in range(nx):
                if dense_lookup[key] >= 0:
                    cell_start[cell] = dense_start[key]
                    cell_coords[cell, 0] = x
                    cell_coords[cell, 1] = y
                    cell_coords[cell, 2] = z
                    cell += 1
                key += 1
    cell_start[n_occupied] = linear.shape[0]
    # Stable: each cell's points in increasing original index.
    stable_placement(linear, dense_start, permutation)
    gather_columns(points3, permutation, columns)


@jit
def hashed_cell_ids(coords, cell_id, unique_coords):
    """Sparse mode: provisional occupied-cell ids in order of first appearance.

    Writes each point's id into ``cell_id`` (n,) and the coordinates of each occupied cell
    into the first rows of ``unique_coords`` (n, 3) int64, both the caller's, and returns
    the number of occupied cells. The table of cells is scratch: it starts small
    and doubles whenever it is half full, so it stays about the size of the occupied
    cells rather than of the points (a million points in 46,000 cells: a table sized for
    the points, 64 MB, missed the cache on nearly every probe; with the table that grows,
    the whole sparse build took 15% less time, one process, alternated). Queries
    probe the smaller table of rows (`row_table`) instead.
    """
    n = coords.shape[0]
    capacity = 1024
    mask = capacity - 1
    hash_ids = np.full(capacity, -1, np.int64)
    n_occupied = 0
    for i in range(n):
        cx = coords[i, 0]
        cy = coords[i, 1]
        cz = coords[i, 2]
        slot = hash_cell(cx, cy, cz, mask)
        while True:
            found = hash_ids[slot]
            if found < 0:
                hash_ids[slot] = n_occupied
                unique_coords[n_occupied, 0] = cx
                unique_coords[n_occupied, 1] = cy
                unique_coords[n_occupied, 2] = cz
                cell_id[i] = n_occupied
                n_occupied += 1
                if 2 * n_occupied > capacity:
                    # Double, and enter the cells again (their keys are `unique_coords`).
                    capacity *= 2
                    mask = capacity - 1
                    hash_ids = np.full(capacity, -1, np.int64)
                    for c in range(n_occupied):
                        slot = hash_cell(unique_coords[c, 0], unique_coords[c, 1],
                                         unique_coords[c, 2], mask)
                        while hash_ids[slot] >= 0:
                            slot = (slot + 1) & mask
                        hash_ids[slot] = c
                break
            if (unique_coords[found, 0] == cx and unique_coords[found, 1] == cy
                    and unique_coords[found, 2] == cz):
                cell_id[i] = found
                break
            slot = (slot + 1) & mask
    return n_occupied


@jit
def row_table(cell_coords):
    """Sparse mode: the table of occupied rows of cells that queries probe (`cells.find_row`).

    ``cell_coords`` are the occupied cells in row-major order (x fastest), so each row of
    cells ``(y, z)`` is one run of cell ids ``first .. end - 1``; the table maps ``(y, z)``
    to ``first`` (``hash_ids``) and holds ``(y, z, end)`` in ``hash_keys``. Its power-of-two
    capacity is at least twice the number of rows, so probes stay short.
    """
    n = cell_coords.shape[0]
    n_rows = 0
    for c in range(n):
        if c == 0 or (cell_coords[c, 1] != cell_coords[c - 1, 1]
                      or cell_coords[c, 2] != cell_coords[c - 1, 2]):
            n_rows += 1
    capacity = 16
    while capacity < 2 * n_rows:
        capacity *= 2
    mask = capacity - 1
    hash_keys = np.zeros((capacity, 3), np.int64)  # zeros: the same bytes on every build
    hash_ids = np.full(capacity, -1, np.int64)
    slot = 0
    for c in range(n):
        cy = cell_coords[c, 1]
        cz = cell_coords[c, 2]
        if c > 0 and cy == cell_coords[c - 1, 1] and cz == cell_coords[c - 1, 2]:
            hash_keys[slot, 2] = c + 1
            continue
        slot = hash_cell(cy, cz, 0, mask)
        while hash_ids[slot] >= 0:  # rows come once each: no key to compare
            slot = (slot + 1) & mask
        hash_keys[slot, 0] = cy
        hash_keys[slot, 1] = cz
        hash_keys[slot, 2] = c + 1
        hash_ids[slot] = c
    return hash_keys, hash_ids


@jit
def relabel(values, new_label):
    """``values[i] = new_label[values[i]]`` in place (the sparse build's cell ids)."""
    for i in range(values.shape[0]):
        values[i] = new_label[values[i]]


@jit
def cell_offsets(cell_id, cell_start):
    """``cell_start`` of a counting sort of ``cell_id`` by its ``n_cells`` ids: where each
    cell's entries begin, written whole into ``cell_start`` (n_cells + 1,) and returned."""
    n_cells = cell_start.shape[0] - 1
    cell_start[:] = 0
    for i in range(cell_id.shape[0]):
        cell_start[cell_id[i] + 1] += 1
    for c in range(n_cells):
        cell_start[c + 1] += cell_start[c]
    return cell_start


@jit
def stable_placement(keys, starts, permutation):
    """The placement pass of a stable counting sort: the permutation whose position
    ``starts[k] + m`` holds the ``m``-th index ``i`` (in increasing order) with ``keys[i] ==
    k``, written into ``permutation`` and returned. ``starts`` (n_keys + 1,) serves as the
    cursor, and is given back as it was: no scratch of the keys' number."""
    first = starts[0]
    for i in range(keys.shape[0]):
        key = keys[i]
        permutation[starts[key]] = i
        starts[key] += 1
    # Each key's cursor ended at the next key's start: move them back by one key.
    for key in range(starts.shape[0] - 1, 0, -1):
        starts[key] = starts[key - 1]
    starts[0] = first
    return permutation


@jit
def counting_sort(cell_id, n_occupied):
    """Stable counting sort of points by cell id.

    Returns ``(cell_start, permutation)``: sorted position ``s`` holds point
    ``permutation[s]``, and the points of cell ``c`` fill ``cell_start[c]:cell_start[c + 1]``
    in increasing original index.
    """
    cell_start = cell_offsets(cell_id, np.empty(n_occupied + 1, np.int64))
    permutation = np.empty(cell_id.shape[0], np.int64)
    return cell_start, stable_placement(cell_id, cell_start, permutation)


def max_dense_cells(n_points: int) -> float:
    """Most cells a dense lookup may span: small next to the input (two int64 per cell)."""
    return max(4.0 * n_points, 65536.0)


def take_rows_source(loop):
    """The kernel of ``rows[order]`` for an (m, 3) array, written into and returning
    ``taken`` (m, 3), iterating with ``loop``: `take_rows` (``range``) and
    ``build_parallel.take_rows_parallel`` (``prange``). A plain loop, five times faster
    than NumPy's fancy indexing of rows."""

    def take(rows, order, taken):
        for t in loop(order.shape[0]):
            q = order[t]
            taken[t, 0] = rows[q, 0]
            taken[t, 1] = rows[q, 1]
            taken[t, 2] = rows[q, 2]
        return taken

    return take


take_rows = jit_variant(take_rows_source(range), "take_rows")


@jit
def query_order(state, queries):
    """A permutation of ``queries`` (m, 3) that visits them cell by cell.

    Queries are processed in this order so that neighbouring queries read the same cells
    from cache; it changes nothing in the results. Dense grids sort by the query's cell in
    the box of cells (queries outside are clipped to its faces); sparse grids sort by the
    occupied cell holding the query, with all other queries last (`query_keys`).
    """
    keys = np.empty(queries.shape[0], np.int64)
    query_keys(state, queries, 0, queries.shape[0], keys)
    _, permutation = counting_sort(keys, query_key_count(state))
    return permutation


@jit
def query_key_count(state):
    """Number of distinct keys `query_keys` gives."""
    if state.dense_lookup.shape[0] > 0:
        return state.dense_lookup.shape[0]
    return state.cell_coords.shape[0] + 1


@jit
def query_keys(state, queries, lo, hi, keys):
    """``keys[q]`` for queries ``lo .. hi - 1``: the sort key of `query_order`."""
    n_cells = state.n_cells
    dense = state.dense_lookup.shape[0] > 0
    n_keys = query_key_count(state)
    coords = np.empty(3, np.int64)
    for q in range(lo, hi):
        for axis in range(3):
            c = floor_to_int((queries[q, axis] - state.origin[axis]) * state.inv_cell_size[axis])
            coords[axis] = min(max(c, 0), n_cells[axis] - 1)
        if dense:
            keys[q] = (coords[2] * n_cells[1] + coords[1]) * n_cells[0] + coords[0]
        else:
            cell = find_cell(n_cells, state.dense_lookup, state.hash_keys, state.hash_ids,
                             state.cell_coords, coords[0], coords[1], coords[2])
            keys[q] = cell if cell >= 0 else n_keys - 1


@jit
def cell_coords_of(points3, origin, inv_cell_size, n_periodic, coords):
    """Integer cell coordinates of each point of the (n, d) ``points3`` (d <= 3, missing
    coordinates 0), written whole into ``coords`` (n, 3) int64 and returned.

    The arithmetic of `cells.floor_to_int`. Periodic axes (``n_periodic > 0``) are clamped to
    ``[0, n_periodic - 1]``, which only matters for a point rounded onto the box's upper face.
    """
    n, d = points3.shape
    # Axis by axis, with the axis' constants hoisted out of the loop over points.
    for axis in range(3):
        low, inv_size, top = origin[axis], inv_cell_size[axis], n_periodic[axis] - 1
        for i in range(n):
            c = floor_to_int(((points3[i, axis] if axis < d else 0.0) - low) * inv_size)
            if top >= 0:
                c = min(max(c, 0), top)
            coords[i, axis] = c
    return coords


@jit
def sort_points(points3, cell_id, cell_start, permutation, columns):
    """Stable counting sort of the points by cell id, written whole into the caller's
    ``cell_start`` (n_occupied + 1,) and ``permutation`` (n,) int64 and ``columns`` (3, n)
    float64: sorted position ``s`` holds point ``permutation[s]`` with coordinates
    ``columns[:, s]``, and the points of cell ``c`` fill ``cell_start[c]:cell_start[c +
    1]`` in increasing original index.
    """
    cell_offsets(cell_id, cell_start)
    stable_placement(cell_id, cell_start, permutation)
    gather_columns(points3, permutation, columns)


def gather_columns_source(loop):
    """The kernel that writes the (n, d) points, d <= 3, in sorted order into the
    C-contiguous (3, n) ``columns`` it returns, zeros for missing coordinates (the caller
    allocates them: the parallel build's come recycled, see `_outputs`), iterating with
    ``loop``: `gather_columns`
    (``range``) and ``build_parallel.gather_columns_parallel`` (``prange``) are compiled
    from it. Gathering the coordinates after the sort measured faster than scattering
    them during it (less than half the time for a million points). One loop in the
    kernel itself: as a helper that both called over ranges of positions, the build of a
    million 2-D points took 1.08-1.10 times as long (`benchmarks/bench_ab.py`)."""

    def gather(points3, permutation, columns):
        n, d = permutation.shape[0], points3.shape[1]
        for s in loop(n):
            i = permutation[s]
            columns[0, s] = points3[i, 0]
            if d > 1:
                columns[1, s] = points3[i, 1]
            if d > 2:
                columns[2, s] = points3[i, 2]
        for axis in range(d, 3):
            columns[axis, :] = 0.0
        return columns

    return gather


gather_columns = jit_variant(gather_columns_source(range), "gather_columns")
