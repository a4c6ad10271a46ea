"""The parallel drivers' cut of their items into calls of the sequential kernel
(``grid/_kernels/chunks.py``): every item in exactly one call, in order, and the same
answers as one call over all items, where the cap on calls binds."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from spatialhash import Grid
from spatialhash.grid._kernels import chunks


@pytest.mark.parametrize("n_items", [0, 1, 63, 64, 65, 1000, 65_536, 65_537, 10**6 + 3])
@pytest.mark.parametrize("min_items", [1, 64])
def test_calls_cover_every_item_once_in_order_within_the_cap(n_items, min_items):
    n_calls = chunks.call_count(n_items, min_items)
    assert n_calls <= chunks.MAX_CALLS
    assert (n_calls == 0) == (n_items == 0)
    bounds = [chunks.call_items(call, n_calls, n_items) for call in range(n_calls)]
    assert all(isinstance(value, (int, np.integer)) for pair in bounds for value in pair)
    if n_calls:
        assert [lo for lo, _ in bounds] == [0, *[hi for _, hi in bounds[:-1]]]
        assert bounds[-1][1] == n_items
        assert min(hi - lo for lo, hi in bounds) >= min(min_items, n_items)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
def test_queries_beyond_the_cap_answer_as_one_sequential_call():
    """More queries than `MAX_CALLS` calls of 64: each call takes several hundred, and the
    answers are those of the sequential kernel over all queries (``n_threads=1``)."""
    rng = np.random.default_rng(36)
    points = rng.random((5000, 3))
    queries = rng.random((chunks.MAX_CALLS * 64 + 999, 3))
    answers = []
    for n_threads in (1, 2):
        grid = Grid(points, cell_size=0.05, n_threads=n_threads)
        near = grid.query_radius(queries, 0.05, return_distances=True)
        nearest = grid.query_knn(queries, 5)
        answers.append([near.indptr, near.indices, near.distances,
                        grid.count_radius(queries, 0.05), nearest.indices,
                        nearest.distances, nearest.counts])
    for one, two in zip(*answers, strict=True):
        assert one.dtype == two.dtype
        assert np.array_equal(one, two)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
def test_count_and_fill_passes_beyond_the_cap_answer_as_one_sequential_call():
    """More parts of cells than `MAX_CALLS` (the count and fill passes of `iter_pairs`, and
    the sampled count of the pair search's estimate): each call scans several parts, and
    the pairs are those of the sequential kernel, in its order."""
    rng = np.random.default_rng(37)
    points = rng.random((60_000, 3))
    r = 0.012  # about 40,000 occupied cells of 1.5 points: over 2,000 parts of 16 cells
    answers = []
    for n_threads in (1, 2):
        grid = Grid(points, cell_size=r, n_threads=n_threads)
        pairs = grid.query_pairs(r, return_distances=True)
        chunked = list(grid.iter_pairs(r, chunk_size=50_000, return_distances=True))
        answers.append([pairs.indices, pairs.distances,
                        np.concatenate([chunk.indices for chunk in chunked]),
                        np.concatenate([chunk.distances for chunk in chunked])])
    assert grid._engine.n_occupied_cells > 16 * chunks.MAX_CALLS
    for one, two in zip(*answers, strict=True):
        assert np.array_equal(one, two)
