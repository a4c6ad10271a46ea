"""Agreement with ``scipy.spatial.cKDTree`` on random data, open and periodic (``boxsize``).

Random (inexact) coordinates: the two libraries round differently, so index sets are
compared exactly (a pair within an ulp of ``r`` is vanishingly unlikely) and distances with
a tight tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

from spatialhash import Grid

spatial = pytest.importorskip("scipy.spatial")
scipy_sparse = pytest.importorskip("scipy.sparse")

N_POINTS = 3000
N_QUERIES = 400


def cloud(n_dims, periodic, seed=0):
    rng = np.random.default_rng(seed + 10 * n_dims + periodic)
    box = 1.0 if periodic else None
    points = rng.random((N_POINTS, n_dims))
    queries = rng.random((N_QUERIES, n_dims))
    if not periodic:
        queries = queries * 1.2 - 0.1  # some outside the points' bounding box
    tree = spatial.cKDTree(points, boxsize=box)
    return points, queries, box, tree


def radius_for(n_dims):
    return {2: 0.03, 3: 0.07}[n_dims]


CASES = [(n_dims, periodic) for n_dims in (2, 3) for periodic in (False, True)]
IDS = [f"{n_dims}d-{'periodic' if periodic else 'open'}" for n_dims, periodic in CASES]


@pytest.mark.parametrize(("n_dims", "periodic"), CASES, ids=IDS)
def test_query_pairs_matches_ckdtree(n_dims, periodic):
    points, _, box, tree = cloud(n_dims, periodic)
    r = radius_for(n_dims)
    expected = tree.query_pairs(r, output_type="ndarray")
    expected = expected[np.lexsort((expected[:, 1], expected[:, 0]))]
    result = Grid(points, r, box=box).query_pairs(r).sorted()
    assert len(expected) > 1000
    np.testing.assert_array_equal(result.indices, expected)


@pytest.mark.parametrize(("n_dims", "periodic"), CASES, ids=IDS)
def test_query_radius_matches_query_ball_point(n_dims, periodic):
    points, queries, box, tree = cloud(n_dims, periodic)
    r = 2 * radius_for(n_dims)
    expected = tree.query_ball_point(queries, r, return_sorted=True)
    grid = Grid(points, r, box=box)
    result = grid.query_radius(queries, r, return_distances=True)
    np.testing.assert_array_equal(result.counts, [len(row) for row in expected])
    np.testing.assert_array_equal(result.indices, np.concatenate(expected))
    np.testing.assert_array_equal(grid.count_radius(queries, r),
                                  tree.query_ball_point(queries, r, return_length=True))
    # Distances of every neighbour against scipy's own distance computation.
    rows = np.repeat(np.arange(len(queries)), result.counts)
    sparse = tree.sparse_distance_matrix(spatial.cKDTree(queries, boxsize=box), r,
                                         output_type="dok_matrix")
    scipy_distances = np.array([sparse[j, q] for q, j in zip(rows, result.indices,
                                                             strict=True)])
    np.testing.assert_allclose(result.distances, scipy_distances, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(("n_dims", "periodic"), CASES, ids=IDS)
def test_query_radius_per_query_r_matches_query_ball_point(n_dims, periodic):
    points, queries, box, tree = cloud(n_dims, periodic, seed=1)
    r = np.random.default_rng(3).random(len(queries)) * 2 * radius_for(n_dims)
    expected = tree.query_ball_point(queries, r, return_sorted=True)
    result = Grid(points, radius_for(n_dims), box=box).query_radius(queries, r)
    np.testing.assert_array_equal(result.indices, np.concatenate(expected))
    np.testing.assert_array_equal(result.counts, [len(row) for row in expected])


@pytest.mark.parametrize(("n_dims", "periodic"), CASES, ids=IDS)
@pytest.mark.parametrize("k", [1, 8])
def test_query_knn_matches_ckdtree_query(n_dims, periodic, k):
    points, queries, box, tree = cloud(n_dims, periodic)
    expected_distances, expected_indices = tree.query(queries, k=k)
    expected_distances = expected_distances.reshape(len(queries), k)
    expected_indices = expected_indices.reshape(len(queries), k)
    result = Grid(points, box=box).query_knn(queries, k)
    np.testing.assert_allclose(result.distances, expected_distances, rtol=1e-12, atol=1e-15)
    # Indices must agree wherever the distance is not tied (within rounding) with another.
    gaps = np.diff(expected_distances, axis=1)
    untied = np.ones_like(expected_indices, dtype=bool)
    untied[:, 1:] &= gaps > 1e-12
    untied[:, :-1] &= gaps > 1e-12
    assert untied.mean() > 0.99
    np.testing.assert_array_equal(result.indices[untied], expected_indices[untied])


@pytest.mark.parametrize(("n_dims", "periodic"), CASES, ids=IDS)
def test_query_knn_with_r_max_matches_distance_upper_bound(n_dims, periodic):
    points, queries, box, tree = cloud(n_dims, periodic, seed=2)
    r_max = radius_for(n_dims)
    # scipy's bound is strict (d < bound); random data never hits d == r_max exactly.
    expected_distances, expected_indices = tree.query(queries, k=5, distance_upper_bound=r_max)
    result = Grid(points, r_max, box=box).query_knn(queries, 5, r_max=r_max)
    found = np.isfinite(expected_distances)
    np.testing.assert_array_equal(result.counts, found.sum(axis=1))
    np.testing.assert_array_equal(result.indices[found], expected_indices[found])
    np.testing.assert_array_equal(result.indices[~found], -1)
    np.testing.assert_allclose(result.distances[found], expected_distances[found], rtol=1e-12)
    assert np.isinf(result.distances[~found]).all()


@pytest.mark.parametrize(("n_dims", "periodic"), CASES, ids=IDS)
def test_pairs_to_scipy_matches_sparse_distance_matrix(n_dims, periodic):
    points, _, box, tree = cloud(n_dims, periodic)
    r = radius_for(n_dims)
    entries = tree.sparse_distance_matrix(tree, r, output_type="ndarray")
    entries = entries[entries["i"] != entries["j"]]  # scipy includes each point with itself
    expected = scipy_sparse.coo_array((entries["v"], (entries["i"], entries["j"])),
                                      shape=(N_POINTS, N_POINTS)).tocsr()
    pairs = Grid(points, r, box=box).query_pairs(r, return_distances=True)
    matrix = pairs.to_scipy(symmetric=True).tocsr()
    assert matrix.shape == expected.shape == (N_POINTS, N_POINTS)
    assert matrix.nnz == expected.nnz == 2 * len(pairs)
    np.testing.assert_array_equal(matrix.indptr, expected.indptr)
    matrix.sort_indices()
    expected.sort_indices()
    np.testing.assert_array_equal(matrix.indices, expected.indices)
    np.testing.assert_allclose(matrix.data, expected.data, rtol=1e-12, atol=1e-15)


def test_query_pairs_with_queries_matches_sparse_distance_matrix():
    points, queries, _, tree = cloud(3, False)
    r = radius_for(3)
    other = spatial.cKDTree(queries)
    expected = other.sparse_distance_matrix(tree, r, output_type="coo_matrix").tocsr()
    result = Grid(points, r).query_pairs(r, queries=queries, return_distances=True)
    matrix = result.to_scipy().tocsr()
    matrix.sort_indices()
    expected.sort_indices()
    assert matrix.shape == (N_QUERIES, N_POINTS)
    np.testing.assert_array_equal(matrix.indptr, expected.indptr)
    np.testing.assert_array_equal(matrix.indices, expected.indices)
    np.testing.assert_allclose(matrix.data, expected.data, rtol=1e-12, atol=1e-15)
