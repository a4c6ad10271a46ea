"""A single query point given as a 1-D array is one query, as cKDTree and scikit-learn take
it: the result has one row, equal to that of the same point as a (1, d) array."""

from __future__ import annotations

import numpy as np
import pytest

from spatialhash import Grid


@pytest.fixture(params=[1, 2, 3], ids=lambda d: f"{d}-D")
def scene(request):
    n_dims = request.param
    points = np.random.default_rng(n_dims).integers(0, 16, (300, n_dims)) / 16.0
    return Grid(points, cell_size=0.125), points


def test_one_point_is_one_query_of_each_kind(scene):
    grid, points = scene
    point, as_row = points[7], points[7:8]
    assert point.ndim == 1
    nearest, expected = grid.query_knn(point, k=5), grid.query_knn(as_row, k=5)
    assert nearest.indices.shape == (1, 5)
    np.testing.assert_array_equal(nearest.indices, expected.indices)
    np.testing.assert_array_equal(nearest.distances, expected.distances)
    near = grid.query_radius(point, 0.2, return_distances=True)
    expected_near = grid.query_radius(as_row, 0.2, return_distances=True)
    assert len(near) == 1
    np.testing.assert_array_equal(near.indptr, expected_near.indptr)
    np.testing.assert_array_equal(near.indices, expected_near.indices)
    np.testing.assert_array_equal(near.distances, expected_near.distances)
    np.testing.assert_array_equal(grid.count_radius(point, 0.2), grid.count_radius(as_row, 0.2))


def test_one_point_matches_ckdtree():
    spatial = pytest.importorskip("scipy.spatial")
    points = np.random.default_rng(0).random((2_000, 3))
    distances, indices = Grid(points).query_knn(points[0], k=4)
    expected_distances, expected_indices = spatial.cKDTree(points).query(points[0], k=4)
    np.testing.assert_array_equal(indices[0], expected_indices)
    np.testing.assert_allclose(distances[0], expected_distances, rtol=1e-12)


def test_a_1d_array_of_several_points_in_1d_says_how_to_reshape():
    grid = Grid(np.arange(10.0).reshape(-1, 1), cell_size=1.0)
    assert grid.query_knn(np.array([2.25]), k=1).indices.tolist() == [[2]]
    message = (r"`queries` must have 1 columns, like the grid's points, or be one point of "
               r"shape \(1,\); got shape \(4,\)\. Use `\.reshape\(-1, 1\)` for 4 points\.")
    with pytest.raises(ValueError, match=message):
        grid.query_knn(np.array([0.5, 1.5, 2.5, 3.5]), k=1)
