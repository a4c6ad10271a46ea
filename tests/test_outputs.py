"""Recycled result memory (`spatialhash._outputs`): a result's block serves a later result
only once nothing holds the first, and the answers do not change."""

from __future__ import annotations

import gc
import time

import numpy as np
import pytest

from spatialhash import Grid, _outputs


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
