"""Parallel drivers call their kernel through its address (`_kernels/indirect.py`).

The driver checks that the target it is given was made for the argument types it passes
the kernel; a target made for other types must raise, never call code that reads its
arguments with another layout.
"""

from __future__ import annotations

import numpy as np
import pytest

from spatialhash import Grid
from spatialhash._kernels import indirect
from spatialhash.grid._kernels import radius


def _radius_inputs(index_dtype):
    rng = np.random.default_rng(3)
    points = rng.random((500, 3))
    grid = Grid(points, 0.1)
    queries = rng.random((40, 3))
    radii = np.full(40, 0.1)
    visit_order = np.arange(40)
    counts = np.zeros(40, np.int64)
    outputs = np.empty(0, index_dtype)
    return grid, (grid.state, queries, radii, visit_order, 0, 40, counts, outputs,
                  np.empty(0), False, False)


def test_driver_counts_like_the_kernel_through_the_target():
    grid, args = _radius_inputs(np.int32)
    kernel = indirect.kernel_target(radius.radius_scan_queries, args, ("test", np.int32))
    state, queries, radii, visit_order, _, _, counts, outputs, distances, write, sort = args
    radius.radius_scan(state, queries, radii, visit_order, counts, outputs, distances, write,
                       sort, kernel)
    expected = np.zeros(40, np.int64)
    radius.radius_scan_queries(state, queries, radii, visit_order, 0, 40, expected, outputs,
                               distances, write, sort)
    np.testing.assert_array_equal(counts, expected)
    assert counts.sum() > 0


def test_target_made_for_other_argument_types_is_refused():
    _, args32 = _radius_inputs(np.int32)
    _, args64 = _radius_inputs(np.int64)
    # A key that does not tell int32 outputs from int64 ones: the target is reused.
    key = ("test", "one key for both")
    kernel = indirect.kernel_target(radius.radius_scan_queries, args32, key)
    assert indirect.kernel_target(radius.radius_scan_queries, args64, key) is kernel
    state, queries, radii, visit_order, _, _, counts, outputs, distances, write, sort = args64
    with pytest.raises(ValueError, match="other types than"):
        radius.radius_scan(state, queries, radii, visit_order, counts, outputs, distances,
                           write, sort, kernel)
    assert not counts.any()


def test_parallel_ray_casts_take_a_read_only_limit():
    # The limits of the rays may be the caller's own (read-only) array, typed apart from a
    # writable one: both must reach the right kernel.
    rng = np.random.default_rng(11)
    points = rng.random((1000, 3))
    origins = rng.random((2500, 3))
    directions = rng.normal(size=(2500, 3))
    limit = np.full(2500, 0.3)
    grid = Grid(points, 0.05)
    writable = grid.query_ray(origins, directions, 0.01, max_distance=limit)
    limit.setflags(write=False)
    read_only = grid.query_ray(origins, directions, 0.01, max_distance=limit)
    serial = Grid(points, 0.05, n_threads=1).query_ray(origins, directions, 0.01,
                                                        max_distance=limit)
    for hits in (writable, read_only):
        np.testing.assert_array_equal(hits.indices, serial.indices)
        np.testing.assert_array_equal(hits.distances, serial.distances)
    assert (serial.indices >= 0).sum() > 100
