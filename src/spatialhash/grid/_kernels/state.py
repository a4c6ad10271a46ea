"""The grid state: one NamedTuple of plain arrays that every kernel takes.

Plain arrays pickle, ship to Dask workers and copy to a GPU; numba types a NamedTuple of
arrays as one argument, so kernels stay short. The fields are fixed in dtype (only ``order``
follows the index dtype), so each kernel compiles to one or two specializations.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class GridState(NamedTuple):
    """Cells of a built grid. All arrays are C-contiguous.

    Attributes
    ----------
    points : ndarray of float64, shape (3, n)
        The points sorted by cell, one row per axis (so the distance loops read contiguous
        coordinates and vectorize), padded to three axes; periodic axes wrapped into
        ``[0, box)``.
    order : ndarray of int32 or int64, shape (n,)
        ``order[s]`` is the caller's index of sorted point ``s``.
    origin : ndarray of float64, shape (3,)
        Lower corner of cell ``(0, 0, 0)``.
    cell_size, inv_cell_size : ndarray of float64, shape (3,)
        Cell edge per axis and its reciprocal (cell coordinates are
        ``floor((x - origin) * inv_cell_size)``).
    n_cells : ndarray of int64, shape (3,)
        Cells per axis spanned by the points (open axes) or tiling the box (periodic axes).
    box : ndarray of float64, shape (3,)
        Period per axis; ``inf`` on open axes.
    half_box : ndarray of float64, shape (3,)
        ``box / 2``; ``inf`` on open axes, so minimum-image code needs no branch per axis.
    cell_start : ndarray of int64, shape (n_occupied + 1,)
        Sorted points of occupied cell ``c`` are ``points[cell_start[c]:cell_start[c + 1]]``.
    cell_coords : ndarray of int64, shape (n_occupied, 3)
        Integer coordinates of each occupied cell, in cell order (row-major, x fastest).
    dense_lookup : ndarray of int64, shape (prod(n_cells),) or (0,)
        Dense mode: occupied-cell id of each cell in the box of cells, or -1.
    dense_start : ndarray of int64, shape (prod(n_cells) + 1,) or (0,)
        Dense mode: ``dense_start[L]`` is the number of points in the cells of linear index
        below ``L`` (row-major, x fastest), so the points of the cells ``L0..L1`` of one row
        are the slice ``dense_start[L0]:dense_start[L1 + 1]``: a row of cells is read with
        two loads.
    hash_keys : ndarray of int64, shape (capacity, 3) or (0, 3)
        Sparse mode: open-addressing table of the occupied rows of cells: ``(y, z, end)``
        per slot, the row's cell coordinates and one past its last occupied-cell id
        (``hash_ids == -1``: empty slot).
    hash_ids : ndarray of int64, shape (capacity,) or (0,)
        Sparse mode: the first occupied-cell id of the row at each table slot (its cells
        are ``hash_ids[s] .. hash_keys[s, 2] - 1``, ascending in x).
    """

    points: np.ndarray
    order: np.ndarray
    origin: np.ndarray
    cell_size: np.ndarray
    inv_cell_size: np.ndarray
    n_cells: np.ndarray
    box: np.ndarray
    half_box: np.ndarray
    cell_start: np.ndarray
    cell_coords: np.ndarray
    dense_lookup: np.ndarray
    dense_start: np.ndarray
    hash_keys: np.ndarray
    hash_ids: np.ndarray
