"""The host side of the grid build: the cell size, the box of cells, and the choice
between the dense and the sparse (hashed) layout and between the sequential and the
parallel sort; the kernels that sort are in ``_kernels/build.py`` and
``_kernels/build_parallel.py``. See the "Building", "Finding a cell" and "Cell size"
sections of the design (``grid/__init__.py``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .. import _outputs
from .._kernels.cells import N_AXES, floor_to_int
from ._kernels import build, build_parallel
from ._kernels.state import GridState

#: Relative enlargement of the cell size (see "Cell size" in the design).
CELL_SIZE_MARGIN = 2.0**-20
#: Largest cell coordinate: beyond it coordinates stop being exact in float64.
MAX_CELLS_PER_AXIS = 2.0**52
#: The parallel build keeps a histogram of the box of cells per thread; it runs when
#: those hold at most this many counts per point, 32 bytes (else the sequential build
#: does): room for 16 threads at the 7 points per cell of a grid sized for pair searches.
PARALLEL_BUILD_MAX_COUNTS_PER_POINT = 4
#: Average points per cell aimed at when no cell size is given.
DEFAULT_POINTS_PER_CELL = 4.0
#: The default cell size ignores this share of the points at each end of every axis...
DEFAULT_SIZE_QUANTILE = 0.005
#: ...in a sample of about this many points (see `default_cell_size`).
DEFAULT_SIZE_SAMPLE = 1024
_INT32, _INT64 = np.dtype(np.int32), np.dtype(np.int64)
#: Grids of fewer points index with int32, others with int64 (see `index_dtype`).
_INT32_MAX = int(np.iinfo(np.int32).max)
#: The hash table of a dense grid.
_NO_HASH_KEYS = np.empty((0, N_AXES), dtype=np.int64)
_NO_HASH_IDS = np.empty(0, dtype=np.int64)
#: The dense lookup and starts of a sparse grid.
_NO_DENSE_LOOKUP = np.empty(0, dtype=np.int64)


def index_dtype(n: int) -> np.dtype:
    """The dtype of point indices in a grid of ``n`` points, and in its results."""
    return _INT32 if n < _INT32_MAX else _INT64


def default_cell_size(points3: np.ndarray, lowest: np.ndarray, highest: np.ndarray,
                      box: np.ndarray, n_dims: int, n_points: int | None = None) -> float:
    """Cell size putting about `DEFAULT_POINTS_PER_CELL` points in a cell on average over
    the box that holds all but the outermost points.

    The box spans the `DEFAULT_SIZE_QUANTILE` to ``1 - DEFAULT_SIZE_QUANTILE`` order
    statistics of every axis, taken over every ``n // DEFAULT_SIZE_SAMPLE``-th point (at
    most twice `DEFAULT_SIZE_SAMPLE` points): over the bounding box, one point far from a
    million others would put them all in one cell, and a k-nearest query would then
    compare every query with every point. An axis whose statistics coincide takes its
    whole spread. The sample is sorted column by column: ``np.quantile`` over every point
    of 5,000 costs three times the rest of the build (the ``build5k`` workload of
    ``benchmarks/bench_ab.py`` times the build).

    With ``n_points``, ``points3`` is that sample already, of a grid of ``n_points``
    points (a grid on a device, whose points stay there: `sample_step` gives the stride).
    """
    n = points3.shape[0] if n_points is None else n_points
    if n == 0:
        return 1.0
    step = 1 if n_points is not None else sample_step(n)
    sample = np.sort(np.ascontiguousarray(points3[::step, :n_dims].T), axis=1)
    last = sample.shape[1] - 1
    low = sample[:, round(last * DEFAULT_SIZE_QUANTILE)]
    high = sample[:, round(last * (1.0 - DEFAULT_SIZE_QUANTILE))]
    inner = high - low
    spread = (highest - lowest)[:n_dims]
    extent = np.where(np.isfinite(box[:n_dims]), box[:n_dims],
                      np.where(inner > 0, inner, spread))
    extent = extent[extent > 0]
    if extent.size == 0:
        return 1.0
    # In logarithms: the volume of a cloud spanning 1e150 per axis overflows float64.
    log_size = (np.log(extent).sum() + math.log(DEFAULT_POINTS_PER_CELL / n)) / extent.size
    size = float(min(math.exp(log_size), extent.max()))
    # No more than half the cells an axis may have (`MAX_CELLS_PER_AXIS`) over the whole
    # spread: a far outlier (1,000 points in [0, 1] and one at 1e15) would otherwise get a
    # default size the build refuses as too small.
    return max(size, float(spread.max()) / (0.5 * MAX_CELLS_PER_AXIS))


def sample_step(n: int) -> int:
    """The stride of `default_cell_size`'s sample of ``n`` points."""
    return max(1, n // DEFAULT_SIZE_SAMPLE)


def histograms_fit(n_threads: int, n_keys: float, n: int) -> bool:
    """Whether a counting sort of ``n`` items by ``n_keys`` keys may keep a histogram per
    thread (`build_parallel`): at most `PARALLEL_BUILD_MAX_COUNTS_PER_POINT` per item."""
    return n_threads * n_keys <= PARALLEL_BUILD_MAX_COUNTS_PER_POINT * n


def build_state(points3, lowest, highest, cell_size, box, one_cell, index_dtype,
                parallel) -> GridState:
    """Sort ``points3`` (n, d), d <= 3 (missing coordinates 0), already wrapped, into
    cells.

    ``lowest`` and ``highest`` are the smallest and largest coordinate per axis (the origin
    of open axes, and the extent of the box of cells). With ``one_cell`` every point goes
    into one cell (brute force). With ``parallel``, a dense grid whose counts fit
    `PARALLEL_BUILD_MAX_COUNTS_PER_POINT` is sorted on every thread (`build_parallel`),
    and so are the points of a sparse one once its cells are numbered: the same state,
    byte for byte.
    """
    n = points3.shape[0]
    origin, size, inv_size, n_periodic, n_cells = grid_geometry(
        lowest, highest, cell_size, box, one_cell)
    n_linear = float(np.prod(n_cells.astype(np.float64)))
    n_threads = numba.get_num_threads() if parallel else 1
    if n_linear <= build.max_dense_cells(n):
        if n_threads > 1 and histograms_fit(n_threads, n_linear, n):
            built = dense_build_parallel(points3, origin, inv_size, n_periodic, n_cells,
                                         n_threads)
        elif 8 * n_linear >= _outputs.MIN_BYTES:
            built = dense_build_sequential(points3, origin, inv_size, n_periodic, n_cells)
        else:
            built = build.dense_build(points3, origin, inv_size, n_periodic, n_cells,
                                      *_sort_outputs(n))
        cell_start, permutation, columns, dense_lookup, dense_start, cell_coords = built
        return grid_state((columns, permutation), index_dtype,
                          (origin, size, inv_size, n_cells, box),
                          (cell_start, cell_coords, dense_lookup, dense_start, _NO_HASH_KEYS,
                           _NO_HASH_IDS))
    check_cells_per_axis(n_cells, highest, origin, inv_size, cell_size)
    coords = build.cell_coords_of(points3, origin, inv_size, n_periodic,
                                  _outputs.empty((n, 3), np.int64))
    cell_id, unique = _outputs.empty(n, np.int64), _outputs.empty((n, 3), np.int64)
    n_occupied = build.hashed_cell_ids(coords, cell_id, unique)
    del coords
    unique = unique[:n_occupied]
    cell_order = np.lexsort((unique[:, 0], unique[:, 1], unique[:, 2]))
    rank = _outputs.empty(n_occupied, np.int64)
    rank[cell_order] = np.arange(n_occupied)
    build.relabel(cell_id, rank)
    # Rows (see `Pairs.sorted`); "clip" writes straight into ``out``, unbuffered.
    cell_coords = np.take(unique, cell_order, axis=0, mode="clip",
                          out=_outputs.empty((n_occupied, 3), np.int64))
    del unique  # its block, a row per point, back to the pool before the sort
    # Queries look up rows of cells, not cells (see `cells.sparse_row_slice`).
    hash_keys, hash_ids = build.row_table(cell_coords)
    permutation, columns = _sort_outputs(n)[1:]
    cell_start = _outputs.empty(n_occupied + 1, np.int64)
    if n_threads > 1 and histograms_fit(n_threads, n_occupied, n):
        build_parallel.sort_points_parallel(
            points3, cell_id, _outputs.empty((n_threads, n_occupied), np.int64), cell_start,
            permutation, columns)
    else:
        build.sort_points(points3, cell_id, cell_start, permutation, columns)
    return grid_state((columns, permutation), index_dtype,
                      (origin, size, inv_size, n_cells, box),
                      (cell_start, cell_coords, _NO_DENSE_LOOKUP, _NO_DENSE_LOOKUP, hash_keys,
                       hash_ids))


def dense_build_parallel(points3, origin, inv_size, n_periodic, n_cells,
                         n_threads) -> tuple:
    """The dense build on ``n_threads`` threads (`build_parallel`): ``(cell_start,
    permutation, columns, dense_lookup, dense_start, cell_coords)``, equal to
    `build.dense_build`'s. Every array the kernels write, scratch or kept, is allocated
    here, where its size is known, and for many points or cells in recycled memory
    (`_outputs`): those of the occupied cells after the kernel that counts them."""
    n = points3.shape[0]
    n_linear = int(np.prod(n_cells))
    linear, permutation, columns = _sort_outputs(n)
    dense_start = _outputs.empty(n_linear + 1, np.int64)
    dense_lookup = _outputs.empty(n_linear, np.int64)
    counts = _outputs.empty((n_threads, n_linear), np.int64)
    n_occupied = build_parallel.dense_cells_parallel(
        points3, origin, inv_size, n_periodic, n_cells, linear, counts, dense_start,
        dense_lookup)
    cell_start = _outputs.empty(n_occupied + 1, np.int64)
    cell_coords = _outputs.empty((n_occupied, 3), np.int64)
    build_parallel.dense_sort_parallel(points3, n_cells, linear, counts, dense_start,
                                       dense_lookup, cell_start, cell_coords, permutation,
                                       columns)
    return cell_start, permutation, columns, dense_lookup, dense_start, cell_coords


def dense_build_sequential(points3, origin, inv_size, n_periodic, n_cells) -> tuple:
    """`build.dense_build` for a box of many cells: its two kernels, called here so that
    every array they write comes from recycled memory (`_outputs`), those of the occupied
    cells once `build.dense_cells` has counted them."""
    n_linear = int(np.prod(n_cells))
    linear, permutation, columns = _sort_outputs(points3.shape[0])
    dense_start = _outputs.empty(n_linear + 1, np.int64)
    dense_lookup = _outputs.empty(n_linear, np.int64)
    n_occupied = build.dense_cells(points3, origin, inv_size, n_periodic, n_cells, linear,
                                   dense_start, dense_lookup)
    cell_start = _outputs.empty(n_occupied + 1, np.int64)
    cell_coords = _outputs.empty((n_occupied, 3), np.int64)
    build.dense_sort(points3, n_cells, linear, dense_start, dense_lookup, cell_start,
                     cell_coords, permutation, columns)
    return cell_start, permutation, columns, dense_lookup, dense_start, cell_coords


def _sort_outputs(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arrays a sort of ``n`` points writes, uninitialized: each point's key
    (scratch), the permutation, and the (3, n) sorted columns; for many points in memory
    recycled from earlier grids and results (`_outputs`): a build of a million points
    writes 40 MB, which fresh would be paged in anew on every call."""
    empty = _outputs.empty if 8 * n >= _outputs.MIN_BYTES else np.empty
    return empty(n, np.int64), empty(n, np.int64), empty((3, n), np.float64)


def grid_geometry(lowest, highest, cell_size, box, one_cell) -> tuple:
    """The cells of a grid over points whose coordinates span ``lowest`` to ``highest``
    per axis: ``(origin, size, inv_size, n_periodic, n_cells)``, as in `GridState`
    (``n_periodic``: cells across each periodic axis, 0 on open ones). With ``one_cell``,
    one cell holds every point (brute force). Raises `ValueError` for a cell size or
    period too small for float64 cell arithmetic."""
    is_periodic = np.isfinite(box)
    origin = np.where(is_periodic, 0.0, lowest)
    size = np.empty(N_AXES)
    n_periodic = np.zeros(N_AXES, dtype=np.int64)
    for axis in range(N_AXES):
        if is_periodic[axis]:
            cells_across = box[axis] / (cell_size * (1 + CELL_SIZE_MARGIN))
            if cells_across >= MAX_CELLS_PER_AXIS:
                raise ValueError(
                    f"`cell_size` is too small for the periodic box: {cell_size} would need "
                    f"{cells_across:.3g} cells along axis {axis} (at most 2**52). Use a "
                    "larger cell_size."
                )
            count = 1 if one_cell else max(1, math.floor(cells_across))
            n_periodic[axis] = count
            size[axis] = box[axis] / count
        else:
            size[axis] = np.inf if one_cell else cell_size * (1 + CELL_SIZE_MARGIN)
    with np.errstate(over="ignore"):
        inv_size = 1.0 / size
    if not np.isfinite(inv_size).all():
        # A subnormal cell size or period: 1 / size overflows, and no cell arithmetic holds.
        axis = int(np.argmax(~np.isfinite(inv_size)))
        name, value = ("box", box[axis]) if is_periodic[axis] else ("cell_size", cell_size)
        raise ValueError(
            f"`{name}` is too small: {value} (axis {axis}) has no finite inverse in float64."
        )
    # The cell coordinate of the largest coordinate is the largest cell coordinate (the
    # same arithmetic, monotone), so the box of cells is known before any pass.
    n_cells = np.array([
        n_periodic[axis] if n_periodic[axis] > 0 else
        floor_to_int((highest[axis] - origin[axis]) * inv_size[axis]) + 1
        for axis in range(N_AXES)
    ], dtype=np.int64)
    return origin, size, inv_size, n_periodic, n_cells


def check_cells_per_axis(n_cells, highest, origin, inv_size, cell_size) -> None:
    """Refuse, naming ``cell_size``, a grid with more than `MAX_CELLS_PER_AXIS` cells
    along an axis, where cell coordinates stop being exact in float64."""
    # Only open axes can exceed it: periodic ones were checked by `grid_geometry`.
    if n_cells.max() > MAX_CELLS_PER_AXIS:
        axis = int(np.argmax(n_cells > MAX_CELLS_PER_AXIS))
        # From the coordinates: `n_cells` is clamped at 2**62.
        needed = (highest[axis] - origin[axis]) * inv_size[axis] + 1.0
        raise ValueError(
            f"`cell_size` is too small for the spread of the points: {cell_size} would "
            f"need {needed:.3g} cells along axis {axis} (at most 2**52). "
            "Use a larger cell_size."
        )


def grid_state(sorted_points: tuple, index_dtype, geometry: tuple,
               cells: tuple) -> GridState:
    """The `GridState` of a build's arrays: ``sorted_points = (columns, permutation)``
    (``order`` is the permutation in the grid's index dtype), ``geometry = (origin, size,
    inv_size, n_cells, box)``, ``cells = (cell_start, cell_coords, dense_lookup,
    dense_start, hash_keys, hash_ids)``."""
    columns, permutation = sorted_points
    origin, size, inv_size, n_cells, box = geometry
    cell_start, cell_coords, dense_lookup, dense_start, hash_keys, hash_ids = cells
    n = permutation.shape[0]
    if 8 * n >= _outputs.MIN_BYTES:
        order = _outputs.empty(n, index_dtype)
        order[:] = permutation
    else:
        order = permutation.astype(index_dtype)
    return GridState(
        points=columns,
        order=order,
        origin=origin,
        cell_size=size,
        inv_cell_size=inv_size,
        n_cells=n_cells,
        box=box.copy(),
        half_box=box / 2.0,
        cell_start=cell_start,
        cell_coords=cell_coords,
        dense_lookup=dense_lookup,
        dense_start=dense_start,
        hash_keys=hash_keys,
        hash_ids=hash_ids,
    )
