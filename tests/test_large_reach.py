"""Radius queries that reach far more cells than a sparse grid holds, and pair chunks far
smaller than a cell's pairs.

A sparse grid (an outlier far from the other points, see the design note of
`spatialhash.grid`) can have up to 2**52 cells per axis, so the range of cells a radius
covers can be astronomically larger than the occupied cells. Every size computed from such
a range must stay finite and bounded by the occupied cells; the memory test below runs the
queries in a process whose address space is capped.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from spatialhash import Grid
from spatialhash.grid import _cpu_engine, _pair_search

import oracles


def assert_radius_queries_match_oracle(grid, points, queries, r):
    """`query_radius`, `count_radius` and `query_pairs(queries=...)` against the oracle."""
    indptr, indices, distances = oracles.radius(points, queries, r)
    found = grid.query_radius(queries, r, return_distances=True)
    np.testing.assert_array_equal(found.indptr, indptr)
    np.testing.assert_array_equal(found.indices, indices)
    np.testing.assert_array_equal(found.distances, distances)
    np.testing.assert_array_equal(grid.count_radius(queries, r), np.diff(indptr))
    pairs = grid.query_pairs(r, queries=queries).sorted()
    expected = np.column_stack((np.repeat(np.arange(len(queries)), np.diff(indptr)), indices))
    np.testing.assert_array_equal(pairs.indices, expected.reshape(-1, 2))


# ---------------------------------------------------------------------- regressions
@pytest.mark.parametrize("r", [1e6, 1e13])
def test_radius_far_beyond_a_sparse_3d_grid(r):
    """20,000 points in the unit cube and one at 1e12 on every axis, cells of 0.01: 1e14
    cells per axis. The block of cells within ``r`` of a query was sized by an int64
    product of its three ranges, which overflowed and sent the query down the path that
    gathers the block row by row, with buffers of one entry per row of cells.

    Expected: the oracle's neighbours. Got: ``count_radius(points[:10], 1e6)`` raised
    MemoryError; with r = 1e13, ValueError "array is too big".
    """
    rng = np.random.default_rng(0)
    points = np.vstack([rng.random((20_000, 3)), np.full((1, 3), 1e12)])
    grid = Grid(points, 0.01)
    assert grid.state.dense_lookup.shape[0] == 0  # sparse
    assert_radius_queries_match_oracle(grid, points, points[:10], r)


def test_radius_far_beyond_a_sparse_2d_grid():
    """20,000 points in the unit square and one at (1e12, 1e12), cells of 0.01, two
    queries at r = 3e9: the int64 cell count of the block overflowed (see above).

    Expected: the oracle's neighbours. Got: MemoryError. (With the far point at
    (1e12, 4e5) the block had 4e7 rows of cells, each looked up, with buffers for all of
    them: 0.8-1.7 GB and 1.5-19 s, where r = 1e10 took under a millisecond. That case
    runs in the memory test below.)
    """
    rng = np.random.default_rng(0)
    points = np.vstack([rng.random((20_000, 2)), [[1e12, 1e12]]])
    grid = Grid(points, 0.01)
    assert grid.state.dense_lookup.shape[0] == 0  # sparse
    for r in (3e9, 1e10):
        assert_radius_queries_match_oracle(grid, points, points[:2], r)


# ---------------------------------------------------------------------- memory
#: Address space the sweep may use beyond what the process holds after its first queries.
#: Every query needs a few kilobytes; an overflowed block size asked for gigabytes, which
#: this cap turns into a MemoryError (without it, some radii ran for seconds instead).
HEADROOM_BYTES = 1 << 30

SWEEP = textwrap.dedent("""
    import resource
    import sys

    import numpy as np

    sys.path.insert(0, sys.argv[1])
    import oracles
    from spatialhash import Grid


    def address_space():
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmSize in /proc/self/status")


    rng = np.random.default_rng(7)
    scenes = []
    # 3-D and 2-D with the far point on every axis; and 2-D grids whose rows of cells
    # span 4e7 and 7e7 cells in y: an overflowed block size then asked for buffers of
    # 1.6 GB (r = 3e9, as reported) and 2.8 GB (r = 1e10 and 1e11).
    for far in ([1e12, 1e12, 1e12], [1e12, 1e12], [1e12, 4e5], [1e12, 7e5]):
        n_dims = len(far)
        points = np.vstack([rng.random((3000, n_dims)), [far]])
        queries = np.vstack([rng.random((20, n_dims)) * 3 - 1, points[:5], [far]])
        grid = Grid(points, 0.01, algorithm="grid")
        assert grid.state.dense_lookup.shape[0] == 0, far  # sparse
        # Load (or compile) the kernels before the cap.
        grid.count_radius(queries[:1], 0.01)
        grid.query_radius(queries[:1], 0.01, return_distances=True)
        scenes.append((grid, points, queries))
    cap = address_space() + int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    for grid, points, queries in scenes:
        for r in [10.0 ** exponent for exponent in range(-3, 16)] + [3e9]:
            indptr, indices, distances = oracles.radius(points, queries, r)
            found = grid.query_radius(queries, r, return_distances=True)
            assert np.array_equal(found.indptr, indptr), r
            assert np.array_equal(found.indices, indices), r
            assert np.array_equal(found.distances, distances), r
            assert np.array_equal(grid.count_radius(queries, r), np.diff(indptr)), r
    print("ok")
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="reads the address space from /proc/self/status")
def test_radius_sweep_on_sparse_grids_in_bounded_memory():
    """r from 1e-3 to 1e15 (and 3e9) on sparse grids in 3-D and 2-D, in a process whose
    address space is capped at `HEADROOM_BYTES` above its needs after the first queries:
    every answer equals the oracle's. Got: MemoryError, "array is too big", or a crash of
    the process for some radii (the subprocess keeps a crash out of the test run).
    """
    result = subprocess.run(
        [sys.executable, "-c", SWEEP, str(Path(__file__).parent), str(HEADROOM_BYTES)],
        capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    assert result.stdout.strip() == "ok"


# ---------------------------------------------------------------------- iter_pairs
def cells_of_points(grid) -> np.ndarray:
    """The occupied cell of each point, by the caller's index."""
    state = grid.state
    cell_of = np.repeat(np.arange(len(state.cell_start) - 1), np.diff(state.cell_start))
    cells = np.empty(len(state.order), np.int64)
    cells[state.order] = cell_of
    return cells


@pytest.mark.parametrize("n_dims", [2, 3])
@pytest.mark.parametrize("with_radii", [False, True])
def test_iter_pairs_with_chunk_size_one_gives_the_pairs_of_query_pairs(n_dims, with_radii):
    """One pair a chunk: the chunks hold the pairs of `query_pairs`, in its order; a chunk
    of more than one pair holds the pairs found from one cell; each chunk owns its arrays."""
    rng = np.random.default_rng(3)
    points = rng.random((4000, n_dims))
    r = 0.1 if n_dims == 3 else 0.04
    kwargs = {"radii": rng.uniform(0.25, 0.5, len(points)) * r} if with_radii else {"r": r}
    grid = Grid(points, r, algorithm="grid")
    whole = grid.query_pairs(return_distances=True, **kwargs)
    chunks = list(grid.iter_pairs(chunk_size=1, return_distances=True, **kwargs))
    assert len(whole) > 5000
    np.testing.assert_array_equal(np.concatenate([chunk.indices for chunk in chunks]),
                                  whole.indices)
    np.testing.assert_array_equal(np.concatenate([chunk.distances for chunk in chunks]),
                                  whole.distances)
    cells = cells_of_points(grid)
    for chunk in chunks:
        assert len(chunk) >= 1
        assert chunk.shape == whole.shape
        assert chunk.indices.base is None and chunk.distances.base is None
        if len(chunk) > 1:
            pair_cells = cells[chunk.indices]
            shared = set(pair_cells[0].tolist())
            for row in pair_cells.tolist():
                shared &= set(row)
            assert shared, pair_cells


@pytest.mark.parametrize("chunk_size", [1, 3, 100, 1 << 22])
@pytest.mark.parametrize("batch_rows", [2, 57, 1 << 16])
@pytest.mark.parametrize("parallel", [False, True])
def test_iter_pairs_chunks_do_not_depend_on_how_many_are_filled_at_once(
        chunk_size, batch_rows, parallel, monkeypatch):
    """The chunks, filled several at a time, equal the chunks filled one at a time
    (``ITER_PAIRS_BATCH_ROWS`` of 1: no two chunks fit in ``chunk_size`` rows together), on
    one thread and on the parallel fill."""
    rng = np.random.default_rng(5)
    points = rng.random((3000, 3))
    grid = Grid(points, 0.05, algorithm="grid", n_threads=2 if parallel else 1)
    if parallel:
        monkeypatch.setattr(_cpu_engine, "PARALLEL_MIN_POINTS", 0)
    monkeypatch.setattr(_pair_search, "ITER_PAIRS_BATCH_ROWS", 1)
    expected = list(grid.iter_pairs(0.05, chunk_size=chunk_size, return_distances=True))
    monkeypatch.setattr(_pair_search, "ITER_PAIRS_BATCH_ROWS", batch_rows)
    chunks = list(grid.iter_pairs(0.05, chunk_size=chunk_size, return_distances=True))
    assert [len(chunk) for chunk in chunks] == [len(chunk) for chunk in expected]
    for chunk, reference in zip(chunks, expected, strict=True):
        np.testing.assert_array_equal(chunk.indices, reference.indices)
        np.testing.assert_array_equal(chunk.distances, reference.distances)
    without_distances = list(grid.iter_pairs(0.05, chunk_size=chunk_size))
    assert all(chunk.distances is None for chunk in without_distances)
    np.testing.assert_array_equal(
        np.concatenate([chunk.indices for chunk in without_distances]),
        grid.query_pairs(0.05).indices)
