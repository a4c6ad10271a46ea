"""The parallel drivers' cut of their queries into calls of the sequential kernel
(``grid/_kernels/chunks.py``): every query in exactly one call, in order, and the same
answers as one call over all queries, where the cap on calls binds."""

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
