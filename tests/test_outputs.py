"""Recycled result memory (`spatialhash._outputs`): a result's block serves a later result
only once nothing holds the first, and the answers do not change."""

from __future__ import annotations

import gc
import time

import numba
import numpy as np
import pytest

from spatialhash import Grid, _outputs
from spatialhash.grid import _cpu_engine, _pair_search
from spatialhash.grid._kernels import regions


@pytest.fixture
def small_blocks(monkeypatch):
    """Every result pooled, however small; the pool empty before and after."""
    monkeypatch.setattr(_outputs, "MIN_BYTES", 1)
    monkeypatch.setattr(_outputs, "ENABLED", True)
    _outputs.release()
    yield
    _outputs.release()


def _points(n=3_000, seed=0):
    return np.random.default_rng(seed).random((n, 3))


def test_block_comes_back_only_when_the_result_is_gone(small_blocks):
    grid = Grid(_points(), cell_size=0.08)
    _outputs.release()  # the build's scratch
    first = grid.query_radius(_points(500, 1), 0.08, return_distances=True)
    kept = first.indices  # a reference to one array keeps the whole block leased
    expected = (first.indptr.copy(), kept.copy(), first.distances.copy())
    del first
    second = grid.query_radius(_points(500, 1), 0.08, return_distances=True)
    assert not np.shares_memory(kept, second.indices)
    assert not np.shares_memory(kept, second.distances)
    np.testing.assert_array_equal(kept, expected[1])
    address = second.indices.ctypes.data
    del second
    gc.collect()
    assert _outputs.pooled_bytes() > 0
    third = grid.query_radius(_points(500, 1), 0.08, return_distances=True)
    assert third.indices.ctypes.data == address  # reused
    np.testing.assert_array_equal(third.indptr, expected[0])
    np.testing.assert_array_equal(third.indices, expected[1])
    np.testing.assert_array_equal(third.distances, expected[2])


def test_recycled_answers_equal_fresh_ones(small_blocks, monkeypatch):
    points = _points(30_000)
    grid = Grid(points, cell_size=0.05)
    queries = _points(4_000, 2)

    def answers():
        pairs = Grid(points, cell_size=0.05).query_pairs(0.05, return_distances=True)
        nearest = grid.query_knn(queries, 7, r_max=0.04)
        boxes = grid.query_box(queries[:50], queries[:50] + 0.1)
        return [pairs.indices, pairs.distances, nearest.indices, nearest.distances,
                nearest.counts, boxes.indptr, boxes.indices]

    monkeypatch.setattr(_outputs, "ENABLED", False)
    fresh = [array.copy() for array in answers()]
    monkeypatch.setattr(_outputs, "ENABLED", True)
    for _ in range(3):  # the first call fills the pool, the next ones take from it
        for got, want in zip(answers(), fresh, strict=True):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_knn_empty_slots_on_recycled_memory(small_blocks):
    grid = Grid(_points(50), cell_size=0.2)
    full = grid.query_knn(_points(10, 3), 8)
    del full  # its block, full of indices and distances, goes back to the pool
    sparse = grid.query_knn(_points(10, 3), 8, r_max=0.15)
    missing = np.arange(8)[None, :] >= sparse.counts[:, None]
    assert missing.any()
    assert (sparse.indices[missing] == -1).all()
    assert np.isinf(sparse.distances[missing]).all()


def test_pool_keeps_few_blocks_and_releases(small_blocks, monkeypatch):
    monkeypatch.setattr(_outputs, "MAX_BLOCKS", 2)
    arrays = [_outputs.empty(1000 * (k + 1), np.float64) for k in range(4)]
    while arrays:
        del arrays[0]  # given back in order of size
    assert _outputs.pooled_bytes() == 8 * 1000 * (3 + 4)  # the last two given back
    assert _outputs.release() == 8 * 1000 * 7
    assert _outputs.pooled_bytes() == 0


def test_block_serves_only_requests_near_its_size(small_blocks):
    big = _outputs.empty((1000, 2), np.int32)
    address = big.ctypes.data
    del big
    small = _outputs.empty(100, np.int32)  # under `MIN_FILL` of the block: not served
    assert small.ctypes.data != address
    assert _outputs.pooled_bytes() == 8000  # kept for a request of its size
    larger = _outputs.empty(3000, np.int32)  # a miss releases the blocks smaller than it
    assert _outputs.pooled_bytes() == 0
    del small, larger


def test_pool_limits_its_bytes(small_blocks, monkeypatch):
    monkeypatch.setattr(_outputs, "MAX_POOLED_BYTES", 10_000)
    arrays = [_outputs.empty(n, np.uint8) for n in (6_000, 3_000, 5_000)]
    while arrays:
        del arrays[0]
    assert _outputs.pooled_bytes() == 8_000  # the oldest went


def _finishes(target, seconds=30.0) -> bool:
    """Whether ``target()`` returns within ``seconds`` on a thread of its own."""
    import threading

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive()


def test_an_array_dropped_while_the_pool_is_locked_does_not_deadlock(small_blocks):
    # The last array over a block can go anywhere, a garbage collection inside the pool's
    # own locked code included: its block is queued, and pooled by the next call.
    array = _outputs.empty(1000, np.float64)

    def drop_under_the_lock():
        nonlocal array
        with _outputs._lock:
            array = None
            gc.collect()

    assert _finishes(drop_under_the_lock)
    assert _outputs.pooled_bytes() == 8000


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_child_forked_while_another_thread_holds_the_lock_can_use_the_pool(small_blocks):
    import os
    import threading

    held, release = threading.Event(), threading.Event()

    def hold():
        with _outputs._lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert held.wait(30)
    pid = os.fork()
    if pid == 0:  # the child: the holder thread does not exist here
        try:
            array = _outputs.empty(1000, np.float64)
            del array
            os._exit(0 if _outputs.pooled_bytes() == 8000 else 1)
        finally:
            os._exit(2)
    release.set()
    holder.join(30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung on the pool's lock")


def _leased(array: np.ndarray) -> bool:
    """Whether ``array`` lies over a block of the pool (its base chain ends in a lease)."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, _outputs._Lease)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
def test_parallel_dense_build_writes_only_recycled_memory(small_blocks, monkeypatch):
    """The parallel build of a dense grid takes every array it writes, the cells' included,
    from the pool: a second build after the first grid is gone reuses the same memory and
    gives the grid a build without the pool gives, byte for byte."""
    monkeypatch.setattr(_cpu_engine, "PARALLEL_MIN_POINTS", 0)
    points = _points(5_000, 4)
    monkeypatch.setattr(_outputs, "ENABLED", False)
    fresh = Grid(points, 0.07, n_threads=2).state
    monkeypatch.setattr(_outputs, "ENABLED", True)
    fields = ("points", "order", "cell_start", "cell_coords", "dense_lookup", "dense_start")
    state = Grid(points, 0.07, n_threads=2).state
    assert all(_leased(getattr(state, field)) for field in fields)
    addresses = {getattr(state, field).ctypes.data for field in fields}
    del state
    gc.collect()
    again = Grid(points, 0.07, n_threads=2).state
    assert {getattr(again, field).ctypes.data for field in fields} == addresses
    for field in fresh._fields:
        assert getattr(again, field).dtype == getattr(fresh, field).dtype, field
        np.testing.assert_array_equal(getattr(again, field), getattr(fresh, field), field)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
def test_a_loop_of_large_builds_and_pair_searches_takes_no_fresh_block(monkeypatch):
    """With the pool's own limits on its blocks, a loop that drops each grid and answer
    before the next call takes every large array of a dense parallel build of 140,000
    cells and of its pair search from memory recycled from the previous call (large:
    half a MiB and more, so that the build's every array of a point or a cell counts, as
    they do from 1 MiB on at a million points)."""
    monkeypatch.setattr(_outputs, "ENABLED", True)
    monkeypatch.setattr(_outputs, "MIN_BYTES", 1 << 19)
    _outputs.release()
    fresh = []
    take = _outputs._take

    def counting_take(n_bytes):
        block = take(n_bytes)
        if block is None:
            fresh.append(n_bytes)
        return block

    monkeypatch.setattr(_outputs, "_take", counting_take)
    points = _points(200_000, 5)
    cell_size = (1 / 140_000) ** (1 / 3)
    first = None
    try:
        for call in range(3):
            fresh.clear()
            first = None
            first = Grid(points, cell_size, n_threads=2).query_pairs(cell_size)
            if call == 0:
                assert len(fresh) >= 6  # the build's cells, sort and answer: blocks
        assert fresh == []
        expected = Grid(points, cell_size, n_threads=1).query_pairs(cell_size)
        np.testing.assert_array_equal(first.indices, expected.indices)
    finally:
        del first
        _outputs.release()


def test_estimated_region_pairs_scale_the_sampled_cells_counts():
    """The estimate of each region's pairs: the exact counts (the count pass over every
    cell) summed over the region's sampled cells, times the region's points over the
    sampled cells' points."""
    points = np.random.default_rng(6).random((60_000, 3))
    grid = Grid(points, 0.03)
    engine = grid._engine
    r2, radii, reach = grid._pair_inputs(0.03, None)
    reach_cells, counts = _pair_search.count_pairs(engine, r2, radii, reach)
    cell_start = engine.state.cell_start
    region_cells = regions.split_regions(cell_start, 7)
    got = _pair_search.estimate_region_pairs(engine, r2, radii, reach_cells, region_cells)
    stride = _pair_search.PAIR_SAMPLE_STRIDE
    expected = []
    for begin, end in zip(region_cells[:-1].tolist(), region_cells[1:].tolist(), strict=True):
        sampled = [c for c in range(begin, end) if c % stride == 0]
        sampled_pairs = sum(int(counts[c]) for c in sampled)
        sampled_points = sum(int(cell_start[c + 1] - cell_start[c]) for c in sampled)
        expected.append(sampled_pairs * int(cell_start[end] - cell_start[begin])
                        / max(sampled_points, 1))
    assert counts.sum() > 100_000
    np.testing.assert_allclose(got, expected, rtol=1e-12)
