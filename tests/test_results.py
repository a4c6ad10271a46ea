"""The result types behave as the peers' do where users expect them to.

`KNearest` unpacks as ``distances, indices`` (cKDTree's ``query``, scikit-learn's
``kneighbors``) and gives the k-nearest graph of scikit-learn's ``kneighbors_graph``;
`Neighbors` is a sequence of its rows (cKDTree's ``query_ball_point`` lists). The
comparisons with scipy run on random coordinates (indices compared exactly away from ties,
distances with a tight tolerance); those with the brute-force oracle on integer coordinates,
where ties and zero distances happen and every answer is exact.
"""

from __future__ import annotations

import numpy as np
import pytest

from spatialhash import Grid, KNearest, Neighbors

import oracles


def cloud(n_dims=3, seed=0, n_points=2000, n_queries=300):
    rng = np.random.default_rng(seed)
    return rng.random((n_points, n_dims)), rng.random((n_queries, n_dims)) * 1.2 - 0.1


def lattice(seed=0, n_points=300, n_queries=60):
    """Integer coordinates in a small cube: many ties, duplicate points, zero distances."""
    rng = np.random.default_rng(seed)
    points = rng.integers(0, 6, (n_points, 3)).astype(np.float64)
    queries = np.concatenate([points[:10], rng.integers(-1, 7, (n_queries - 10, 3))])
    return points, queries.astype(np.float64)


def with_n_points(result: KNearest, n_points: int) -> KNearest:
    """``result`` knowing its column count, whatever the engine that built it filled in."""
    return KNearest(result.indices, result.distances, result.counts, n_points=n_points)


# ---------------------------------------------------------------------- KNearest unpacking
def test_knearest_unpacks_as_distances_then_indices_like_ckdtree_query():
    spatial = pytest.importorskip("scipy.spatial")
    points, queries = cloud()
    expected_distances, expected_indices = spatial.cKDTree(points).query(queries, k=6)
    result = Grid(points).query_knn(queries, 6)
    distances, indices = result
    assert distances is result.distances and indices is result.indices
    assert len(result) == len(queries)  # the number of queries, not of the two arrays
    np.testing.assert_allclose(distances, expected_distances, rtol=1e-12, atol=1e-15)
    gaps = np.diff(expected_distances, axis=1)
    untied = np.ones(expected_indices.shape, dtype=bool)
    untied[:, 1:] &= gaps > 1e-12
    untied[:, :-1] &= gaps > 1e-12
    assert untied.mean() > 0.99
    np.testing.assert_array_equal(indices[untied], expected_indices[untied])


def test_knearest_unpacking_with_r_max_agrees_with_ckdtree_padding_aside():
    spatial = pytest.importorskip("scipy.spatial")
    points, queries = cloud(seed=1)
    r_max = 0.07
    # cKDTree's bound is strict; random data never puts a point at exactly r_max.
    expected_distances, expected_indices = spatial.cKDTree(points).query(
        queries, k=5, distance_upper_bound=r_max)
    distances, indices = Grid(points, r_max).query_knn(queries, 5, r_max=r_max)
    found = np.isfinite(expected_distances)
    assert 0 < found.mean() < 1
    np.testing.assert_array_equal(indices[found], expected_indices[found])
    np.testing.assert_allclose(distances[found], expected_distances[found], rtol=1e-12)
    # The padding: -1 here, n (the number of points) in cKDTree; inf in both.
    np.testing.assert_array_equal(indices[~found], -1)
    np.testing.assert_array_equal(expected_indices[~found], len(points))
    assert np.isinf(distances[~found]).all() and np.isinf(expected_distances[~found]).all()


def test_knearest_keeps_its_attributes_and_repr():
    points, queries = lattice()
    result = Grid(points, 1.0).query_knn(queries, 4, r_max=1.0)
    assert result.indices.shape == result.distances.shape == (len(queries), 4)
    assert result.counts.shape == (len(queries),)
    assert repr(result).startswith(f"KNearest(n_queries={len(queries)}, k=4, ")
    assert [array is field for array, field in
            zip(result, (result.distances, result.indices), strict=True)] == [True, True]


def test_r_max_is_closed_unlike_ckdtree_distance_upper_bound():
    # Our documented rule: a point at exactly r_max counts (distance <= r_max), and empty
    # slots hold -1 and inf. cKDTree's bound is strict and pads with n and inf.
    points = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    result = Grid(points, 1.0).query_knn([[0.0, 0.0]], 3, r_max=1.0)
    assert result.indices.tolist() == [[0, 1, -1]]
    assert result.distances.tolist() == [[0.0, 1.0, np.inf]]
    assert result.counts.tolist() == [2]
    # r_max=0 still finds a point at the query itself.
    assert Grid(points, 1.0).query_knn([[0.0, 0.0]], 3, r_max=0.0).indices.tolist() == [
        [0, -1, -1]]
    spatial = pytest.importorskip("scipy.spatial")
    distances, indices = spatial.cKDTree(points).query([[0.0, 0.0]], k=3,
                                                       distance_upper_bound=1.0)
    assert indices.tolist() == [[0, 3, 3]]
    assert distances.tolist() == [[0.0, np.inf, np.inf]]


# ---------------------------------------------------------------------- Neighbors as rows
def test_neighbors_index_and_iterate_like_query_ball_point():
    spatial = pytest.importorskip("scipy.spatial")
    points, queries = cloud(seed=2)
    r = 0.08
    expected = spatial.cKDTree(points).query_ball_point(queries, r, return_sorted=True)
    near = Grid(points, r).query_radius(queries, r)
    assert len(near) == len(expected)
    assert [row.tolist() for row in near] == [sorted(row) for row in expected]
    assert all(near[q].tolist() == sorted(expected[q]) for q in range(len(queries)))
    assert near[-1].tolist() == sorted(expected[-1])
    assert near[np.int64(3)].tolist() == sorted(expected[3])
    assert all(row.dtype == near.indices.dtype for row in near)
    assert all(np.shares_memory(row, near.indices) for row in near if row.size)


def test_neighbors_of_no_queries_iterate_as_nothing():
    empty = Neighbors(np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int32), None, 5)
    assert len(empty) == 0 and list(empty) == []
    with pytest.raises(IndexError, match=r"`q` must be in \[0, 0\) for 0 queries; got 0\."):
        empty[0]


def test_neighbors_row_with_distances():
    points, queries = cloud(seed=3)
    r = 0.1
    near = Grid(points, r).query_radius(queries, r, return_distances=True)
    for q in (0, 7, -1):
        indices, distances = near.row(q, return_distances=True)
        assert indices.tolist() == near.row(q).tolist() == near[q].tolist()
        np.testing.assert_allclose(
            distances, np.linalg.norm(points[indices] - queries[q], axis=1), rtol=1e-12)
        assert np.shares_memory(distances, near.distances) or distances.size == 0
    assert sum(near.row(q, return_distances=True)[1].size for q in range(len(near))) == (
        near.distances.size)


@pytest.mark.parametrize(("q", "error", "message"), [
    (5, IndexError, r"`q` must be in \[-5, 5\) for 5 queries; got 5\."),
    (-6, IndexError, r"`q` must be in \[-5, 5\) for 5 queries; got -6\."),
    (1.5, TypeError, r"`q` must be an integer; got 1\.5\.$"),
    (slice(0, 2), TypeError, r"`q` must be an integer; got slice\(0, 2, None\)\. Take rows one "
                             r"at a time; rows a to b are `indices\[indptr\[a\]:indptr\[b\]\]`\."),
])
def test_neighbors_indexing_errors(q, error, message):
    points, queries = lattice()
    near = Grid(points, 1.0).query_radius(queries[:5], 1.0)
    with pytest.raises(error, match=message):
        near[q]
    with pytest.raises(error, match=message):
        near.row(q)


def test_neighbors_row_distances_of_a_result_without_them_names_the_remedy():
    points, queries = lattice()
    grid = Grid(points, 1.0)
    message = (r"`return_distances` must be False for a result computed without distances; "
               r"got True\. Pass `return_distances=True` to the query \(`query_radius`\); "
               r"`query_box` gives no distances\.")
    for result in (grid.query_radius(queries, 1.0), grid.query_box([0, 0, 0], [2, 2, 2])):
        with pytest.raises(ValueError, match=message):
            result.row(0, return_distances=True)


# ---------------------------------------------------------------------- the k-nearest graph
def brute_graph(points, queries, k, r_max, mode):
    """The graph from the oracle: coordinates of its stored entries, row-major, and values."""
    indices, distances, _ = oracles.knn(points, queries, k, r_max)
    rows, slots = np.nonzero(indices >= 0)
    columns = indices[rows, slots]
    values = np.ones(rows.size) if mode == "connectivity" else distances[rows, slots]
    order = np.lexsort((columns, rows))
    return rows[order], columns[order], values[order]


@pytest.mark.parametrize("mode", ["connectivity", "distance"])
@pytest.mark.parametrize("r_max", [None, 1.5])
def test_knn_graph_equals_brute_force(mode, r_max):
    pytest.importorskip("scipy.sparse")
    points, queries = lattice()
    k = 7
    result = with_n_points(Grid(points, 1.0).query_knn(queries, k, r_max=r_max), len(points))
    graph = result.to_scipy(mode)
    assert type(graph).__name__ == "csr_array"  # as `Neighbors.to_scipy`
    assert graph.shape == (len(queries), len(points)) and graph.dtype == np.float64
    np.testing.assert_array_equal(np.diff(graph.indptr), result.counts)
    if r_max is not None:
        assert (result.counts < k).any()  # padding slots are left out
    entries = graph.tocoo()
    order = np.lexsort((entries.col, entries.row))
    rows, columns, values = brute_graph(points, queries, k, r_max, mode)
    np.testing.assert_array_equal(entries.row[order], rows)
    np.testing.assert_array_equal(entries.col[order], columns)
    np.testing.assert_array_equal(entries.data[order], values)


def test_knn_graph_rows_follow_the_neighbours_nearest_first():
    pytest.importorskip("scipy.sparse")
    points, queries = lattice(seed=4)
    result = with_n_points(Grid(points, 1.0).query_knn(queries, 5), len(points))
    graph = result.to_scipy("distance")
    np.testing.assert_array_equal(graph.indices, result.indices.reshape(-1))
    np.testing.assert_array_equal(graph.data, result.distances.reshape(-1))


def test_knn_distance_graph_keeps_explicit_zeros():
    pytest.importorskip("scipy.sparse")
    points = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 0.0], [5.0, 0.0]])
    result = with_n_points(Grid(points, 1.0).query_knn(points[:2], 2), len(points))
    graph = result.to_scipy(mode="distance")
    assert graph.nnz == 4 and graph.shape == (2, 4)
    assert graph.data.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert graph.indices.tolist() == [0, 1, 0, 1]
    assert result.to_scipy().data.tolist() == [1.0] * 4


def test_knn_graph_does_not_share_the_results_arrays():
    pytest.importorskip("scipy.sparse")
    indices = np.array([[2, 0, 1], [1, -1, -1]], dtype=np.int64)
    distances = np.array([[0.5, 1.0, 2.0], [0.25, np.inf, np.inf]])
    result = KNearest(indices, distances, np.array([3, 1]), n_points=3)
    graph = result.to_scipy(mode="distance")
    graph.sort_indices()
    graph.data *= 2
    assert result.indices.tolist() == [[2, 0, 1], [1, -1, -1]]
    assert result.distances[0].tolist() == [0.5, 1.0, 2.0]
    assert graph.toarray().tolist() == [[2.0, 4.0, 1.0], [0.0, 0.5, 0.0]]


@pytest.mark.parametrize("mode", ["connectivity", "distance"])
def test_knn_graph_equals_scikit_learn_kneighbors_graph(mode):
    from sklearn import neighbors
    points, queries = cloud(seed=5)
    k = 6
    model = neighbors.NearestNeighbors(n_neighbors=k).fit(points)
    expected = model.kneighbors_graph(queries, mode=mode).tocsr()
    graph = with_n_points(Grid(points).query_knn(queries, k), len(points)).to_scipy(mode)
    assert graph.shape == expected.shape == (len(queries), len(points))
    graph.sort_indices()
    expected.sort_indices()
    np.testing.assert_array_equal(graph.indptr, expected.indptr)
    np.testing.assert_array_equal(graph.indices, expected.indices)
    np.testing.assert_allclose(graph.data, expected.data, rtol=1e-12, atol=1e-15)


def test_grid_knn_result_knows_its_column_count():
    points, queries = lattice()
    result = Grid(points, 1.0).query_knn(queries, 3)
    assert result.n_points == len(points)
    assert result.to_scipy().shape == (len(queries), len(points))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"mode": "distances"}, r"`mode` must be 'connectivity' or 'distance'; got 'distances'\."),
    ({"mode": None}, r"`mode` must be 'connectivity' or 'distance'; got None\."),
])
def test_knn_graph_mode_errors(kwargs, message):
    result = KNearest(np.zeros((1, 1), np.int32), np.zeros((1, 1)), np.ones(1, np.int64), 1)
    with pytest.raises(ValueError, match=message):
        result.to_scipy(**kwargs)


def test_knn_graph_without_n_points_names_what_to_pass():
    result = KNearest(np.zeros((1, 1), np.int32), np.zeros((1, 1)), np.ones(1, np.int64))
    with pytest.raises(ValueError, match=r"`n_points` must be known to size the graph; got "
                                         r"None\. Build the result with `KNearest\(indices, "
                                         r"distances, counts, n_points=n\)`\."):
        result.to_scipy()
