"""The parallel build gives the sequential build's grid, byte for byte."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from spatialhash import Grid
from spatialhash.grid import _build, _cpu_engine
from spatialhash.grid._kernels import build, build_parallel

rng = np.random.default_rng(21)
#: (points, cell size, keyword arguments): every kind of dense grid the build meets.
CLOUDS = {
    "3-D uniform": (rng.random((5000, 3)), 0.07, {}),
    "2-D, negative, elongated": (rng.random((4000, 2)) * [1.0, 3.0] - 5.0, 0.05, {}),
    "1-D": (rng.random((3000, 1)), 0.001, {}),
    "periodic": (rng.random((5000, 3)) * 2.0 - 0.5, 0.1, {"box": 1.0}),
    "periodic on two axes": (rng.random((5000, 3)), 0.1,
                             {"box": [1.0, 1.0, 1.0], "periodic": [True, False, True]}),
    # A point whose wrap rounds onto the box's upper face: clamped into the last cell.
    "upper face": (np.array([[-1e-18, 0.5, 0.5], [0.25, 0.25, 0.25]] * 50), 0.1,
                   {"box": 1.0}),
    "duplicates": (np.repeat(rng.random((40, 3)), 100, axis=0), 0.05, {}),
    "dyadic lattice, points on cell faces": (
        rng.integers(-8, 8, size=(3000, 3)) * 0.125, 0.25, {}),
    "float32": (rng.random((3000, 3)).astype(np.float32), 0.1, {}),
    "brute force": (rng.random((2000, 3)), 0.1, {"algorithm": "brute"}),
    "one point": (np.array([[0.3, -2.0, 7.0]]), 0.1, {}),
}


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
@pytest.mark.parametrize("name", list(CLOUDS))
def test_parallel_build_equals_sequential_build(name, monkeypatch):
    points, cell_size, options = CLOUDS[name]
    sequential = Grid(points, cell_size, n_threads=1, **options).state
    monkeypatch.setattr(_cpu_engine, "PARALLEL_MIN_POINTS", 0)
    monkeypatch.setattr(_build, "PARALLEL_BUILD_MAX_COUNTS_PER_POINT", 10**6)
    calls = []
    original = _build.build_parallel.dense_cells_parallel
    monkeypatch.setattr(_build.build_parallel, "dense_cells_parallel",
                        lambda *args: calls.append(1) or original(*args))
    parallel = Grid(points, cell_size, n_threads=2, **options).state
    assert calls, "the parallel build did not run"
    for field in sequential._fields:
        expected, got = getattr(sequential, field), getattr(parallel, field)
        assert got.dtype == expected.dtype, field
        assert got.shape == expected.shape, field
        assert np.array_equal(got, expected), field


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
def test_parallel_build_leaves_sparse_and_large_boxes_to_the_sequential_build(monkeypatch):
    monkeypatch.setattr(_cpu_engine, "PARALLEL_MIN_POINTS", 0)
    calls = []
    original = _build.build_parallel.dense_cells_parallel
    monkeypatch.setattr(_build.build_parallel, "dense_cells_parallel",
                        lambda *args: calls.append(1) or original(*args))
    points = rng.random((1000, 3))
    # 1,000 points in 100**3 cells: their histograms would dwarf the points.
    assert len(Grid(points, 0.01, n_threads=2).query_pairs(0.01).indices) >= 0
    # An outlier makes the grid sparse (hashed).
    outlier = np.vstack([points, [[1e6, 0.0, 0.0]]])
    grid = Grid(outlier, 0.1, n_threads=2)
    assert grid.state.hash_ids.size > 0
    assert not calls


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
@pytest.mark.parametrize("periodic", [False, True])
def test_parallel_sparse_build_equals_sequential_build(periodic, monkeypatch):
    """A sparse grid (an outlier on an open axis) sorts its points on every thread once
    its cells are numbered: the same state, byte for byte."""
    points = rng.integers(0, 40, size=(5000, 3)) * 0.05
    points[::7] += 0.013  # several points a cell, some cells with one
    points[17] = [3e6, 1.0, 1.0]
    options = {"box": [4.0, 4.0, 4.0], "periodic": [False, True, True]} if periodic else {}
    sequential = Grid(points, 0.1, n_threads=1, **options).state
    assert sequential.hash_ids.size > 0  # sparse
    monkeypatch.setattr(_cpu_engine, "PARALLEL_MIN_POINTS", 0)
    calls = []
    original = _build.build_parallel.sort_points_parallel
    monkeypatch.setattr(_build.build_parallel, "sort_points_parallel",
                        lambda *args: calls.append(1) or original(*args))
    parallel = Grid(points, 0.1, n_threads=2, **options).state
    assert calls, "the parallel sort did not run"
    for field in sequential._fields:
        expected, got = getattr(sequential, field), getattr(parallel, field)
        assert got.dtype == expected.dtype, field
        assert np.array_equal(got, expected), field


@pytest.mark.parametrize("layout", ["dense", "sparse", "periodic"])
def test_parallel_query_order_and_gather_equal_the_sequential_ones(layout):
    points = rng.random((3000, 3))
    options = {"box": 1.0} if layout == "periodic" else {}
    if layout == "sparse":
        points[0] = [1e7, 0.0, 0.0]  # an outlier: the hash table
    grid = Grid(points, 0.05, **options)
    assert (grid.state.hash_ids.size > 0) == (layout == "sparse")
    # Queries inside, outside and far outside the cells, with repeats.
    queries = np.vstack([rng.random((4000, 3)) * 1.4 - 0.2, points[:500], [[-1e9, 5.0, 5.0]]])
    queries3 = np.ascontiguousarray(queries)
    expected = build.query_order(grid.state, queries3)
    m = queries3.shape[0]
    for n_chunks in (1, 2, 7):
        n_keys = grid.state.dense_lookup.shape[0] or grid.state.cell_coords.shape[0] + 1
        got = build_parallel.query_order_parallel(
            grid.state, queries3, np.empty((n_chunks, n_keys), np.int64),
            np.empty(m, np.int64), np.empty(m, np.int64))
        assert np.array_equal(got, expected)
    assert np.array_equal(build_parallel.take_rows_parallel(queries3, expected,
                                                            np.empty_like(queries3)),
                          build.take_rows(queries3, expected, np.empty_like(queries3)))


def test_parallel_scatter_and_gather_equal_numpy_indexing():
    order = rng.permutation(50_000)
    values = rng.integers(0, 1000, 50_000)
    expected = np.empty_like(values)
    expected[order] = values
    assert np.array_equal(build_parallel.scatter_parallel(values, order,
                                                          np.empty_like(values)), expected)
    radii = rng.random(50_000)
    assert np.array_equal(build_parallel.gather_parallel(radii, order, np.empty_like(radii)),
                          radii[order])


def _state_oracle(points, state):
    """The state's sorted points, order and cells, from its geometry, in plain NumPy: a
    stable sort of the points by cell, occupied cells in row-major order (x fastest)."""
    n, d = points.shape
    points3 = np.zeros((n, 3))
    points3[:, :d] = points
    coords = np.floor((points3 - state.origin) * state.inv_cell_size).astype(np.int64)
    permutation = np.lexsort((coords[:, 0], coords[:, 1], coords[:, 2]))  # stable
    by_cell = coords[permutation]
    first = np.flatnonzero(np.append(True, (by_cell[1:] != by_cell[:-1]).any(axis=1)))
    expected = {"order": permutation, "points": points3[permutation].T,
                "cell_start": np.append(first, n), "cell_coords": by_cell[first]}
    if state.dense_lookup.size:
        nx, ny, _ = state.n_cells.tolist()
        n_linear = int(np.prod(state.n_cells))
        linear = (coords[:, 2] * ny + coords[:, 1]) * nx + coords[:, 0]
        occupied = linear[permutation[first]]
        lookup = np.full(n_linear, -1)
        lookup[occupied] = np.arange(occupied.shape[0])
        expected["dense_lookup"] = lookup
        expected["dense_start"] = np.concatenate(
            ([0], np.cumsum(np.bincount(linear, minlength=n_linear))))
    return expected


#: (layout, threads, settings): every way the build writes its arrays; "pooled": the
#: kernels of a build of many cells, called with recycled memory (every array counts as
#: large here).
BUILD_PATHS = [("dense", 1, {}), ("dense", 1, {"pooled": True}), ("dense", 2, {}),
               ("sparse", 1, {}), ("sparse", 1, {"pooled": True}), ("sparse", 2, {})]


@pytest.mark.parametrize(("layout", "n_threads", "settings"), BUILD_PATHS)
@pytest.mark.parametrize("n_dims", [2, 3])
def test_build_equals_a_plain_stable_sort_by_cell(layout, n_threads, settings, n_dims,
                                                 monkeypatch):
    from spatialhash import _outputs

    if n_threads > 1 and numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs two numba threads")
    monkeypatch.setattr(_cpu_engine, "PARALLEL_MIN_POINTS", 0)
    monkeypatch.setattr(_outputs, "MIN_BYTES", 1 if settings.get("pooled") else 1 << 40)
    points = np.random.default_rng(8).random((6000, n_dims))
    if layout == "sparse":
        points[5] = 1e6  # an outlier: the hash table
    state = Grid(points, 0.05, n_threads=n_threads).state
    assert (state.hash_ids.size > 0) == (layout == "sparse")
    for field, expected in _state_oracle(points, state).items():
        got = getattr(state, field)
        assert got.shape == expected.shape, field
        np.testing.assert_array_equal(got, expected, field)
