"""Named edge cases: empty and degenerate inputs, exact boundaries, extreme coordinates,
unusual array layouts and dtypes, thread counts, pickling and result conversions."""

from __future__ import annotations

import pickle

import numba
import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

import spatialhash
from spatialhash import Grid, Neighbors, Pairs
from spatialhash._kernels.points import wrap_columns
from spatialhash._validation import grid_points
from spatialhash.grid import _build, _cpu_engine, _pair_search
from spatialhash.grid._kernels import pair_scan

import oracles


def assert_pairs_match_oracle(grid, points, r, box3=None):
    result = grid.query_pairs(r, return_distances=True).sorted()
    indices, distances = oracles.pairs(points, r, box3=box3)
    np.testing.assert_array_equal(result.indices, indices)
    np.testing.assert_array_equal(result.distances, distances)


def assert_radius_matches_oracle(grid, points, queries, r, box3=None):
    result = grid.query_radius(queries, r, return_distances=True)
    indptr, indices, distances = oracles.radius(points, queries, r, box3=box3)
    np.testing.assert_array_equal(result.indptr, indptr)
    np.testing.assert_array_equal(result.indices, indices)
    np.testing.assert_array_equal(result.distances, distances)


def assert_knn_matches_oracle(grid, points, queries, k, r_max=None, box3=None):
    result = grid.query_knn(queries, k, r_max=r_max)
    indices, distances, counts = oracles.knn(points, queries, k, r_max, box3=box3)
    np.testing.assert_array_equal(result.indices, indices)
    np.testing.assert_array_equal(result.distances, distances)
    np.testing.assert_array_equal(result.counts, counts)


def assert_all_match_oracle(grid, points, queries, r, box3=None):
    assert_pairs_match_oracle(grid, points, r, box3)
    assert_radius_matches_oracle(grid, points, queries, r, box3)
    assert_knn_matches_oracle(grid, points, queries, 3, box3=box3)
    result = grid.query_box(queries - r, queries + r)
    indptr, indices = oracles.box(points, queries - r, queries + r, box3=box3)
    np.testing.assert_array_equal(result.indptr, indptr)
    np.testing.assert_array_equal(result.indices, indices)


# ---------------------------------------------------------------------- no points
@pytest.mark.parametrize("n_dims", [1, 2, 3])
@pytest.mark.parametrize("algorithm", ["grid", "brute"])
def test_no_points_gives_empty_results_with_right_shapes(n_dims, algorithm):
    grid = Grid(np.empty((0, n_dims)), 1.0, algorithm=algorithm)
    queries = np.zeros((3, n_dims))
    assert grid.n_points == 0 and grid.n_occupied_cells == 0

    pairs = grid.query_pairs(1.0, return_distances=True)
    assert pairs.indices.shape == (0, 2) and pairs.indices.dtype == np.int32
    assert pairs.distances.shape == (0,) and pairs.distances.dtype == np.float64
    assert pairs.shape == (0, 0) and len(pairs) == 0
    assert grid.query_pairs(radii=np.empty(0)).indices.shape == (0, 2)
    chunks = list(grid.iter_pairs(1.0, chunk_size=1))
    assert sum(len(chunk) for chunk in chunks) == 0

    neighbors = grid.query_radius(queries, 1.0, return_distances=True)
    np.testing.assert_array_equal(neighbors.indptr, np.zeros(4, dtype=np.int64))
    assert neighbors.indptr.dtype == np.int64
    assert neighbors.indices.shape == (0,) and neighbors.indices.dtype == np.int32
    assert neighbors.distances.shape == (0,) and neighbors.n_points == 0
    np.testing.assert_array_equal(grid.count_radius(queries, 1.0), np.zeros(3))

    nearest = grid.query_knn(queries, 2)
    np.testing.assert_array_equal(nearest.counts, np.zeros(3, dtype=np.int64))
    np.testing.assert_array_equal(nearest.indices, np.full((3, 2), -1))
    np.testing.assert_array_equal(nearest.distances, np.full((3, 2), np.inf))

    boxes = grid.query_box(queries - 1, queries + 1)
    np.testing.assert_array_equal(boxes.indptr, np.zeros(4, dtype=np.int64))
    assert boxes.indices.shape == (0,)

    pairs_with_queries = grid.query_pairs(1.0, queries=queries)
    assert pairs_with_queries.indices.shape == (0, 2) and pairs_with_queries.shape == (3, 0)


def test_no_queries_gives_empty_rows():
    grid = Grid(np.arange(6.0).reshape(3, 2), 1.0)
    none = np.empty((0, 2))
    neighbors = grid.query_radius(none, 1.0, return_distances=True)
    np.testing.assert_array_equal(neighbors.indptr, [0])
    assert len(neighbors) == 0 and neighbors.distances.shape == (0,)
    assert grid.count_radius(none, 1.0).shape == (0,)
    nearest = grid.query_knn(none, 2)
    assert nearest.indices.shape == (0, 2) and nearest.counts.shape == (0,)
    assert grid.query_box(none, none).indptr.tolist() == [0]
    assert grid.query_pairs(1.0, queries=none).shape == (0, 3)


def test_no_points_periodic_and_default_cell_size():
    grid = Grid(np.empty((0, 3)), box=2.0)
    assert len(grid.query_pairs(1.0)) == 0
    assert grid.query_knn(np.zeros((1, 3)), 1).counts.tolist() == [0]


@pytest.mark.parametrize("n", [5_000, 100_000])
def test_default_cell_size_holds_about_four_points_a_cell(n):
    """Without a cell size: about four points a cell over the box of the points less their
    outermost 0.5% per axis (taken from a sample of about 1,024 points); a flat axis takes
    no part, and a cloud with no extent gets cells of 1."""
    rng = np.random.default_rng(n)
    cube = rng.random((n, 3)) * 10.0 - 3.0
    assert Grid(cube).cell_size == pytest.approx(10.0 * (4.0 / n) ** (1 / 3), rel=0.05)
    flat = cube.copy()
    flat[:, 2] = 1.5
    assert Grid(flat).cell_size == pytest.approx(10.0 * (4.0 / n) ** 0.5, rel=0.05)
    assert Grid(np.full((n, 2), 7.0)).cell_size == 1.0


# ---------------------------------------------------------------------- degenerate clouds
def test_one_point():
    grid = Grid(np.array([[1.0, 2.0]]), 0.5, algorithm="grid")
    assert len(grid.query_pairs(10.0)) == 0
    neighbors = grid.query_radius(np.array([[1.0, 2.5], [1.0, 2.75]]), 0.5,
                                  return_distances=True)
    assert neighbors.indptr.tolist() == [0, 1, 1] and neighbors.distances.tolist() == [0.5]
    nearest = grid.query_knn(np.array([[4.0, 6.0]]), 3)
    assert nearest.indices.tolist() == [[0, -1, -1]]
    assert nearest.distances.tolist() == [[5.0, np.inf, np.inf]]
    assert nearest.counts.tolist() == [1]


@pytest.mark.parametrize("algorithm", ["grid", "brute"])
def test_all_points_identical(algorithm):
    n = 60
    points = np.full((n, 3), 0.7)
    grid = Grid(points, 0.25, algorithm=algorithm)
    for r in (0.0, 1.0):
        pairs = grid.query_pairs(r, return_distances=True).sorted()
        i, j = np.triu_indices(n, k=1)
        np.testing.assert_array_equal(pairs.indices, np.column_stack([i, j]))
        np.testing.assert_array_equal(pairs.distances, np.zeros(len(i)))
    nearest = grid.query_knn(points[:2], 5)
    np.testing.assert_array_equal(nearest.indices, [[0, 1, 2, 3, 4]] * 2)
    np.testing.assert_array_equal(nearest.distances, np.zeros((2, 5)))
    np.testing.assert_array_equal(grid.count_radius(points[:1], 0.0), [n])


def test_many_duplicates_among_distinct_points():
    rng = np.random.default_rng(5)
    distinct = rng.integers(0, 6, size=(15, 2)) * 0.5
    points = distinct[rng.integers(0, 15, size=200)]
    grid = Grid(points, 0.5, algorithm="grid")
    assert_all_match_oracle(grid, points, distinct, 0.5)


def test_r_zero_pairs_are_exactly_the_duplicates():
    points = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1.0, 1e-100], [1.0, 0.0]])
    grid = Grid(points, 1.0, algorithm="grid")
    pairs = grid.query_pairs(0.0, return_distances=True).sorted()
    assert pairs.indices.tolist() == [[0, 2], [1, 4]]
    assert pairs.distances.tolist() == [0.0, 0.0]
    assert grid.query_radius(points[:1], 0.0).indices.tolist() == [0, 2]
    assert grid.query_knn(points[1:2], 3, r_max=0.0).indices.tolist() == [[1, 4, -1]]


# ---------------------------------------------------------------------- exact boundaries
@pytest.mark.parametrize("n_dims", [1, 2, 3])
@pytest.mark.parametrize("cell_size", [0.5, 1.0, 2.0])
def test_points_exactly_r_apart_are_pairs(n_dims, cell_size):
    """A unit lattice with r = 1: every axis neighbour is at exactly distance r."""
    axes = [np.arange(5.0)] * n_dims
    points = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, n_dims)
    grid = Grid(points, cell_size, algorithm="grid")
    pairs = grid.query_pairs(1.0, return_distances=True)
    n_expected = n_dims * 4 * 5 ** (n_dims - 1)
    assert len(pairs) == n_expected
    np.testing.assert_array_equal(pairs.distances, np.ones(n_expected))
    assert_all_match_oracle(grid, points, points[::7] + 0.5, 1.0)


@pytest.mark.parametrize("cell_size", [0.25, 0.5, 1.0])
def test_points_on_cell_faces_and_corners(cell_size):
    """Coordinates that are exact multiples of the cell size: on faces, edges and corners."""
    ticks = np.arange(-3, 4) * cell_size
    points = np.stack(np.meshgrid(ticks, ticks, ticks, indexing="ij"), -1).reshape(-1, 3)
    grid = Grid(points, cell_size, algorithm="grid")
    for r in (cell_size, 2 * cell_size, cell_size / 2):
        assert_all_match_oracle(grid, points, points[::11], r)


def test_periodic_r_exactly_half_the_box():
    box = 4.0
    points = np.array([[0.0, 0.0], [2.0, 0.0], [0.5, 3.0], [3.5, 1.0], [1.0, 2.0]])
    box3 = oracles.periods(box, None, 2)
    for cell_size in (0.5, 1.0, 2.0, 4.0):
        grid = Grid(points, cell_size, box=box, algorithm="grid")
        pairs = grid.query_pairs(2.0, return_distances=True).sorted()
        assert [0, 1] in pairs.indices.tolist()  # exactly half the box apart
        assert_all_match_oracle(grid, points, points + 0.25, 2.0, box3)


@pytest.mark.parametrize(("cell_size", "n_cells"), [(4.0, 1), (3.0, 1), (1.5, 2), (1.25, 3)])
def test_periodic_with_one_two_or_three_cells_per_axis(cell_size, n_cells):
    rng = np.random.default_rng(n_cells)
    points = rng.integers(0, 16, size=(40, 3)) * 0.25
    grid = Grid(points, cell_size, box=4.0, algorithm="grid")
    np.testing.assert_array_equal(grid.state.n_cells, [n_cells] * 3)
    box3 = oracles.periods(4.0, None, 3)
    for r in (0.5, 1.25, 2.0):
        assert_all_match_oracle(grid, points, points[::5] + 0.125, r, box3)


def test_periodic_coordinates_outside_the_box_are_wrapped():
    points = np.array([[-0.25, 0.0], [4.25, 8.0], [-4.0, 12.0], [3.75, -8.0]])
    grid = Grid(points, 1.0, box=4.0, algorithm="grid")
    pairs = grid.query_pairs(0.5, return_distances=True).sorted()
    assert pairs.indices.tolist() == [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]
    np.testing.assert_array_equal(pairs.distances, [0.5, 0.25, 0.0, 0.25, 0.5, 0.25])


def test_periodic_points_inside_the_box_are_read_in_place():
    """Points strictly inside the periodic box are read as given (no wrapped copy) and
    left unchanged; the same points a period away, wrapped, give the same grid and pairs,
    bit for bit. A coordinate of 0 (either sign) takes the wrapping path."""
    rng = np.random.default_rng(12)
    # Multiples of 2**-20 of the period: a shift by a period, and back, is exact.
    inside = rng.integers(1, 2**20, (500, 3)) * ([4.0, 4.0, 9.0] / np.float64(2**20))
    for points in (inside, np.vstack([inside, [[0.0, 1.0, 1.0]]]),
                   np.vstack([inside, [[-0.0, 1.0, 1.0]]])):
        given = points.copy()
        wrapped, lowest, highest = grid_points(points, np.array([4.0, np.inf, 9.0]))
        assert (wrapped is points) == (points is inside)
        assert points.tobytes() == given.tobytes()
        shifted = points + [4.0, 0.0, -9.0]
        pairs = Grid(points, 0.5, box=[4.0, 1.0, 9.0], periodic=[True, False, True]) \
            .query_pairs(0.5, return_distances=True)
        moved = Grid(shifted, 0.5, box=[4.0, 1.0, 9.0], periodic=[True, False, True]) \
            .query_pairs(0.5, return_distances=True)
        assert pairs.indices.tobytes() == moved.indices.tobytes()
        assert pairs.distances.tobytes() == moved.distances.tobytes()


def test_periodic_tiny_negative_coordinate_wraps_to_zero():
    """np.mod(-1e-300, 4.0) rounds to 4.0, which must be treated as 0.0."""
    points = np.array([[-1e-300], [0.0], [3.9]])
    grid = Grid(points, 1.0, box=4.0, algorithm="grid")
    pairs = grid.query_pairs(0.0, return_distances=True)
    assert pairs.indices.tolist() == [[0, 1]]
    assert grid.query_knn(np.array([[0.0]]), 3).indices.tolist() == [[0, 1, 2]]


def test_mixed_periodic_and_open_axes():
    rng = np.random.default_rng(11)
    points = rng.integers(-20, 20, size=(80, 3)) * 0.25
    box, periodic = [4.0, 50.0, 8.0], [True, False, True]
    box3 = oracles.periods(box, periodic, 3)
    grid = Grid(points, 0.5, box=box, periodic=periodic, algorithm="grid")
    np.testing.assert_array_equal(grid.periodic, periodic)
    assert_all_match_oracle(grid, points, points[::9] + 0.125, 1.5, box3)


# ---------------------------------------------------------------------- extreme coordinates
@pytest.mark.parametrize("offset", [1e9, -1e9])
def test_coordinates_around_1e9(offset):
    rng = np.random.default_rng(1)
    points = offset + rng.integers(-40, 40, size=(300, 3)) * 0.25
    grid = Grid(points, 0.5, algorithm="grid")
    assert_all_match_oracle(grid, points, points[::13] + 0.125, 0.75)


def test_two_clusters_far_apart_use_the_hash_table_with_small_memory():
    rng = np.random.default_rng(2)
    cluster = rng.integers(-8, 8, size=(500, 3)) * 0.125
    points = np.concatenate([cluster - 1e9, cluster + 1e9])
    grid = Grid(points, 0.25, algorithm="grid")
    assert grid.state.dense_lookup.shape[0] == 0  # sparse (hashed) mode
    state_bytes = sum(array.nbytes for array in grid.state)
    assert state_bytes < 200 * points.nbytes  # proportional to n, not to 8e9 cells
    queries = np.concatenate([cluster[::25], cluster[::25] + 2e9]) - 1e9
    assert_all_match_oracle(grid, points, queries, 0.25)
    nearest = grid.query_knn(np.zeros((1, 3)), 2)  # halfway between the clusters
    assert np.all(nearest.distances > 9.9e8) and nearest.counts.tolist() == [2]


def test_one_far_outlier():
    rng = np.random.default_rng(3)
    points = rng.integers(0, 32, size=(200, 2)) * 0.25
    points[17] = [1e12, -1e12]
    grid = Grid(points, 0.5, algorithm="grid")
    assert grid.state.dense_lookup.shape[0] == 0
    assert_all_match_oracle(grid, points, points[::10] + 0.125, 0.5)
    assert_knn_matches_oracle(grid, points, np.array([[1e12, -1e12 + 1]]), 3)


@pytest.mark.parametrize("n_dims", [1, 2, 3])
@pytest.mark.parametrize("box", [None, 3.0])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_sparse_grids_answer_every_query_as_dense_ones(n_dims, box, n_threads, monkeypatch):
    """The table of rows (sparse mode) against the dense lookup, on the same cells: cells
    are numbered in row-major order both ways, so every output is the same, byte for byte.
    Rows of cells with gaps, long rows, empty rows and ranges past the points."""
    rng = np.random.default_rng(30 + n_dims)
    points = rng.integers(0, 24, size=(1500, n_dims)) * 0.125
    points = points[rng.random(len(points)) < 0.5 + 0.5 * (points[:, 0] < 1.5)]
    queries = rng.random((300, n_dims)) * 3.6 - 0.3
    radii = rng.random(len(points)) * 0.2
    directions = rng.normal(size=(60, n_dims))

    def every_query():
        grid = Grid(points, 0.25, box=box, algorithm="grid", n_threads=n_threads)
        pairs = grid.query_pairs(0.25, return_distances=True)
        contacts = grid.query_pairs(radii=radii)
        radius = grid.query_radius(queries, 0.3, return_distances=True, sort=False)
        nearest = grid.query_knn(queries, 9)
        boxes = grid.query_box(queries - 0.4, queries + 0.4, sort=False)
        outputs = [pairs.indices, pairs.distances, contacts.indices, radius.indptr,
                   radius.indices, radius.distances, grid.count_radius(queries, 0.55),
                   nearest.indices, nearest.distances, boxes.indptr, boxes.indices]
        if box is None:
            rays = grid.query_ray(queries[:60], directions, radii * 0.5, all_hits=True)
            first = grid.query_ray(queries[:60], directions, radii * 0.5)
            outputs += [rays.indptr, rays.indices, rays.distances, first.indices,
                        first.distances]
        return grid, outputs

    dense_grid, dense = every_query()
    assert dense_grid.state.dense_lookup.shape[0] > 0
    monkeypatch.setattr(_build.build, "max_dense_cells", lambda n_points: 0.0)
    sparse_grid, sparse = every_query()
    assert sparse_grid.state.dense_lookup.shape[0] == 0 and sparse_grid.state.hash_ids.size
    assert len(dense[0]) > 100 and len(dense[4]) > 100
    for expected, got in zip(dense, sparse, strict=True):
        assert expected.dtype == got.dtype
        np.testing.assert_array_equal(got, expected)
    box3 = None if box is None else oracles.periods(box, None, n_dims)
    assert_all_match_oracle(sparse_grid, points, queries[:40], 0.3, box3)


def test_negative_coordinates():
    rng = np.random.default_rng(4)
    points = -100.0 - rng.integers(0, 40, size=(150, 3)) * 0.25
    grid = Grid(points, 0.5, algorithm="grid")
    assert_all_match_oracle(grid, points, points[::7] - 0.125, 0.75)


def test_r_larger_than_the_whole_cloud():
    rng = np.random.default_rng(6)
    points = rng.random((50, 2))
    grid = Grid(points, 0.1, algorithm="grid")
    assert len(grid.query_pairs(10.0)) == 50 * 49 // 2
    np.testing.assert_array_equal(grid.count_radius(points[:3], 10.0), [50, 50, 50])
    neighbors = grid.query_radius(points[:2], 1e6)
    np.testing.assert_array_equal(neighbors.indices, np.tile(np.arange(50), 2))


@pytest.mark.parametrize("box", [None, 2.0])
def test_rows_longer_than_the_rank_sort_are_sorted_too(box):
    # Rows of radius and box queries up to RANK_SORT_MAX entries are sorted by counting
    # ranks, longer ones by a merge sort: both must give the oracle's rows.
    rng = np.random.default_rng(21)
    points = rng.integers(0, 16, size=(600, 3)) * 0.0625  # duplicates: equal distances
    queries = rng.integers(0, 16, size=(40, 3)) * 0.0625
    grid = Grid(points, 0.25, box=box, algorithm="grid")
    box3 = None if box is None else oracles.periods(box, None, 3)
    for r in (0.25, 0.5):  # rows of tens of points, then of hundreds
        assert_radius_matches_oracle(grid, points, queries, r, box3)
    lengths = np.diff(grid.query_radius(queries, 0.5).indptr)
    assert lengths.min() < 128 < lengths.max()
    boxes = grid.query_box(queries - 0.5, queries + 0.5)
    assert np.diff(boxes.indptr).max() > 128
    for row in np.split(boxes.indices, boxes.indptr[1:-1]):
        assert np.all(np.diff(row) > 0)


def test_queries_far_outside_the_data():
    rng = np.random.default_rng(7)
    points = rng.integers(0, 16, size=(100, 3)) * 0.25
    grid = Grid(points, 0.5, algorithm="grid")
    far = np.array([[1e6, 0.0, 0.0], [-1e6, -1e6, 1e6], [2.0, 2.0, -5e8]])
    np.testing.assert_array_equal(grid.count_radius(far, 1.0), [0, 0, 0])
    assert grid.query_box(far - 1.0, far + 1.0).indices.size == 0
    assert_knn_matches_oracle(grid, points, far, 4)
    assert_knn_matches_oracle(grid, points, far, 4, r_max=1e6)
    assert grid.query_knn(far, 4, r_max=10.0).counts.tolist() == [0, 0, 0]


def test_knn_k_larger_than_n():
    points = np.array([[0.0], [2.0], [1.0]])
    grid = Grid(points, 0.5, algorithm="grid")
    nearest = grid.query_knn(np.array([[0.9], [5.0]]), 5)
    assert nearest.indices.tolist() == [[2, 0, 1, -1, -1], [1, 2, 0, -1, -1]]
    np.testing.assert_array_equal(nearest.distances[:, 3:], np.inf)
    assert nearest.counts.tolist() == [3, 3]


def test_knn_ties_are_broken_by_smaller_index():
    points = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [0.0, 0.0]])
    grid = Grid(points[::-1].copy(), 0.5, algorithm="grid")
    nearest = grid.query_knn(np.array([[0.0, 0.0]]), 4)
    assert nearest.indices.tolist() == [[0, 1, 2, 3]]
    assert nearest.distances.tolist() == [[0.0, 1.0, 1.0, 1.0]]


# ---------------------------------------------------------------------- dtypes and layouts
def test_float32_input_equals_oracle_on_float64_conversion():
    rng = np.random.default_rng(8)
    points = rng.random((120, 3)).astype(np.float32)
    queries = rng.random((10, 3)).astype(np.float32)
    grid = Grid(points, 0.2, algorithm="grid")
    assert grid.state.points.dtype == np.float64
    assert_all_match_oracle(grid, points.astype(np.float64), queries.astype(np.float64), 0.2)
    direct = grid.query_radius(queries, np.float32(0.2), return_distances=True)
    np.testing.assert_array_equal(
        direct.indptr, oracles.radius(points, queries, float(np.float32(0.2)))[0])


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int16])
def test_integer_input(dtype):
    rng = np.random.default_rng(9)
    points = rng.integers(0, 12, size=(90, 2)).astype(dtype)
    grid = Grid(points, 2, algorithm="grid")
    assert_all_match_oracle(grid, points.astype(np.float64), points[::9].astype(np.float64), 2)
    assert grid.query_radius(points[:3], 2).indices.size > 0  # integer queries


def test_non_contiguous_input():
    rng = np.random.default_rng(10)
    base = rng.integers(0, 40, size=(200, 6)) * 0.25
    points = base[::2, 1:6:2]  # strided rows and columns
    assert not points.flags.c_contiguous
    fortran = np.asfortranarray(base[:, :3])
    queries = base[::20, ::2]
    for cloud in (points, fortran):
        grid = Grid(cloud, 0.75, algorithm="grid")
        assert_all_match_oracle(grid, np.ascontiguousarray(cloud), queries, 0.75)
    radii = (base[:, 0] * 0.1)[::2]  # a strided view
    assert not radii.flags.c_contiguous
    result = Grid(points, 4.0).query_pairs(radii=radii).sorted()
    np.testing.assert_array_equal(result.indices, oracles.pairs(points, radii=radii)[0])
    r_per_query = (base[:, 4] * 0.1)[: len(queries) * 3 : 3]
    np.testing.assert_array_equal(
        Grid(points, 1.0).count_radius(queries, r_per_query),
        oracles.count(points, queries, r_per_query))


def test_read_only_input():
    rng = np.random.default_rng(12)
    points = rng.integers(0, 20, size=(80, 2)) * 0.25
    queries = points[::8] + 0.125
    radii = np.full(80, 0.25)
    r = np.full(len(queries), 0.5)
    lower, upper = queries - 0.5, queries + 0.5
    for array in (points, queries, radii, r, lower, upper):
        array.flags.writeable = False
    grid = Grid(points, 0.5, algorithm="grid")
    assert_all_match_oracle(grid, points, queries, 0.5)
    np.testing.assert_array_equal(grid.query_pairs(radii=radii).sorted().indices,
                                  oracles.pairs(points, radii=radii)[0])
    np.testing.assert_array_equal(grid.count_radius(queries, r),
                                  oracles.count(points, queries, r))
    np.testing.assert_array_equal(grid.query_box(lower, upper).indices,
                                  oracles.box(points, lower, upper)[1])


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_read_only_points_are_built_from_a_copy(n_dims):
    """Writable open float64 points are built from directly (no copy); read-only ones are
    copied, so that no build kernel is compiled again for read-only arrays."""
    from numba.core import types

    from spatialhash._validation import grid_points
    from spatialhash.grid._kernels import build

    points = np.random.default_rng(14).random((300, n_dims))
    open_box = np.full(3, np.inf)
    assert grid_points(points, open_box)[0] is points
    points.flags.writeable = False
    assert grid_points(points, open_box)[0] is not points
    grid = Grid(points, 0.2, algorithm="grid")
    np.testing.assert_array_equal(grid.query_pairs(0.2).sorted().indices,
                                  oracles.pairs(points, 0.2)[0])
    for signature in build.dense_build.signatures:
        assert not any(isinstance(arg, types.Array) and not arg.mutable for arg in signature)


@pytest.mark.parametrize("n_points", [300, 25_000])
@pytest.mark.parametrize("outlier", [False, True])
@pytest.mark.parametrize("n_dims", [1, 2])
def test_points_of_fewer_dimensions_build_the_grid_of_their_padded_copy(n_dims, outlier,
                                                                         n_points):
    """(n, 1) and (n, 2) points, read by the build as they are, give the grid of the same
    points padded with zero columns to (n, 3), byte for byte: dense and sparse (a far
    outlier) grids, built on one thread and (from 20,000 points) on every thread."""
    points = np.random.default_rng(15).random((n_points, n_dims)) * 10 - 5
    if outlier:
        points[7] = 1e9
    padded = np.zeros((n_points, 3))
    padded[:, :n_dims] = points
    direct, from_padded = Grid(points, 0.05).state, Grid(padded, 0.05).state
    assert (direct.dense_start.shape[0] == 0) == outlier
    for name, value in direct._asdict().items():
        np.testing.assert_array_equal(value, getattr(from_padded, name), err_msg=name)


@pytest.mark.parametrize("box", [None, 2.0])
def test_the_module_query_pairs_never_modifies_its_inputs(box):
    # The methods of every engine are held to it in test_contract.py.
    rng = np.random.default_rng(13)
    points = rng.random((100, 3)) * 6 - 3  # outside [0, box): an in-place wrap would show
    radii = rng.random(100) * 0.4
    copies = points.copy(), radii.copy()
    spatialhash.query_pairs(points, radii=radii, box=box)
    spatialhash.query_pairs(points, 0.5, box=box)
    np.testing.assert_array_equal(points, copies[0])
    np.testing.assert_array_equal(radii, copies[1])


def test_one_dimensional_points():
    points = np.array([[0.0], [0.25], [1.0], [1.25], [3.0], [-2.0], [1.0]])
    grid = Grid(points, 0.5, algorithm="grid")
    pairs = grid.query_pairs(0.25, return_distances=True).sorted()
    assert pairs.indices.tolist() == [[0, 1], [2, 3], [2, 6], [3, 6]]
    assert pairs.distances.tolist() == [0.25, 0.25, 0.0, 0.25]
    assert_all_match_oracle(grid, points, np.array([[0.5], [-1.0], [10.0]]), 1.0)
    periodic = Grid(points, 0.5, box=5.0, algorithm="grid")
    assert_all_match_oracle(periodic, points, np.array([[0.5], [4.5]]), 2.0,
                            oracles.periods(5.0, None, 1))


# ---------------------------------------------------------------------- threads, pickling
#: (threads, settings) for every path a query can take: pairs by regions of cells on one
#: thread and on two, with rows sized from a sampled count, with every region overflowing
#: its rows (redone alone), in one pass into outputs that grow (from one row: many times),
#: and the count and fill passes on two threads (`iter_pairs`, radius, box, and pairs when
#: there are many per point), with the grid built on two threads; and the pair paths again
#: with the kernel that gathers each cell's candidates. A setting is ``module.NAME``, the
#: module being one of `PATH_MODULES`: where the code that reads the constant lives.
PATH_MODULES = {"engine": _cpu_engine, "build": _build, "pair_search": _pair_search,
                "pair_scan": pair_scan}
PATHS = [
    (1, {}),
    (2, {}),
    (2, {"pair_search.PAIR_ESTIMATE_MIN_POINTS": 0}),
    (2, {"pair_search.PAIRS_PER_POINT_RESERVED": 0, "pair_search.PAIR_ROWS_MARGIN": 0.0,
         "pair_search.PAIR_ROWS_SLACK": 1}),
    (1, {"pair_search.PARALLEL_MIN_POINTS_ONE_PASS": 10**9,
         "pair_search.PAIRS_PER_POINT_GUESS": 0}),
    (2, {"engine.PARALLEL_MIN_POINTS": 0, "engine.PARALLEL_MIN_QUERIES": 0,
         "build.PARALLEL_BUILD_MAX_COUNTS_PER_POINT": 100}),
    (2, {"engine.PARALLEL_MIN_POINTS": 0, "pair_search.PAIR_ESTIMATE_MIN_POINTS": 0,
         "pair_search.ONE_PASS_MAX_PAIRS_PER_POINT": 0}),
    # The pair kernel that gathers each cell's candidates, on the same paths.
    (1, {"pair_scan.GATHER_MIN_POINTS_PER_CELL": 0.0}),
    (2, {"pair_scan.GATHER_MIN_POINTS_PER_CELL": 0.0}),
    (1, {"pair_scan.GATHER_MIN_POINTS_PER_CELL": 0.0,
         "pair_search.PARALLEL_MIN_POINTS_ONE_PASS": 10**9,
         "pair_search.PAIRS_PER_POINT_GUESS": 0}),
    (2, {"pair_scan.GATHER_MIN_POINTS_PER_CELL": 0.0, "engine.PARALLEL_MIN_POINTS": 0,
         "pair_search.PAIR_ESTIMATE_MIN_POINTS": 0,
         "pair_search.ONE_PASS_MAX_PAIRS_PER_POINT": 0}),
    (2, {"pair_scan.GATHER_MIN_POINTS_PER_CELL": 0.0, "pair_search.PAIRS_PER_POINT_RESERVED": 0,
         "pair_search.PAIR_ROWS_MARGIN": 0.0, "pair_search.PAIR_ROWS_SLACK": 1}),
]


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
@pytest.mark.parametrize("box", [None, 1.0])
def test_outputs_identical_on_every_path_and_thread_count(box, monkeypatch):
    rng = np.random.default_rng(14)
    points = rng.random((3000, 3))
    queries = rng.random((700, 3))
    radii = rng.random(3000) * 0.03
    outputs = []
    for n_threads, settings in PATHS:
        with monkeypatch.context() as patch:
            for setting, value in settings.items():
                module, _, name = setting.partition(".")
                patch.setattr(PATH_MODULES[module], name, value)  # raises if not there
            outputs.append(_every_query(points, queries, radii, box, n_threads))
    assert len(outputs[0][2]) > 1000  # enough work to be split over threads
    # One pass gives the rows of the count and fill passes (iter_pairs), in their order.
    assert np.array_equal(outputs[0][2], outputs[0][6])
    for first, *others in zip(*outputs, strict=True):
        for other in others:
            assert first.dtype == other.dtype
            assert np.array_equal(first, other)


def _every_query(points, queries, radii, box, n_threads):
    """Every query's output arrays, for comparing paths."""
    grid = Grid(points, 0.06, box=box, algorithm="grid", n_threads=n_threads)
    pairs = grid.query_pairs(0.06, return_distances=True)
    contacts = grid.query_pairs(radii=radii, return_distances=True)
    chunks = list(grid.iter_pairs(0.06, chunk_size=1000))
    neighbors = grid.query_radius(queries, 0.08, return_distances=True, sort=False)
    nearest = grid.query_knn(queries, 7)
    boxes = grid.query_box(queries - 0.05, queries + 0.05, sort=False)
    return [
        grid.state.points, grid.state.order, pairs.indices, pairs.distances,
        contacts.indices, contacts.distances,
        np.concatenate([chunk.indices for chunk in chunks]),
        neighbors.indptr, neighbors.indices, neighbors.distances,
        grid.count_radius(queries, 0.08), nearest.indices, nearest.distances,
        boxes.indptr, boxes.indices,
    ]


def test_colliding_rows_and_cells_in_the_hash_tables():
    """Rows of cells chosen to share one slot of the sparse grid's table of rows (16
    slots), and cells chosen to share one slot of the build's table of cells (1,024
    slots), so every lookup walks past entries of other rows and cells: the exact key
    comparisons must keep the answers those of the oracle, no pair lost or repeated."""
    from spatialhash._kernels.cells import hash_cell

    by_slot: dict = {}
    for cy in range(1, 81):  # cell coordinates count from the lowest point, the anchor
        for cz in range(1, 81):
            by_slot.setdefault(hash_cell(cy, cz, 0, 15), []).append((cy, cz))
    # Two neighbouring rows (each one's searches probe the other) and four others, all in
    # one slot.
    rows, adjacent = next(
        (group, (a, b)) for group in by_slot.values() for a in group for b in group
        if a < b and abs(a[0] - b[0]) <= 1 and abs(a[1] - b[1]) <= 1)
    rows = [*adjacent, *[row for row in rows if row not in adjacent][:4]]
    target = hash_cell(2, rows[0][0], rows[0][1], 1023)
    rng = np.random.default_rng(18)
    anchor = np.array([-5000.0, -50.0, -50.0])  # the lowest point on every axis
    points = [anchor[np.newaxis, :]]
    for cy, cz in rows:
        xs = [cx for cx in range(2, 8000) if hash_cell(cx, cy, cz, 1023) == target][:2]
        assert len(xs) == 2
        for cx in (*xs, xs[0] + 1, xs[1] - 1):  # colliding cells and their neighbours
            # Quarters inside the cell, clear of its faces (the cell size is enlarged by
            # a relative 2**-20).
            inside = rng.integers(1, 4, (3, 3)) / 4.0
            points.append(anchor + np.array([cx, cy, cz]) + inside)
    points = np.concatenate(points)
    grid = Grid(points, 1.0, algorithm="grid")
    # The cells are where they were meant to be, and the rows share one slot of a table
    # of 16.
    cells = {tuple(row) for row in grid.state.cell_coords.tolist()}
    assert {tuple(np.floor(p - anchor).astype(int)) for p in points} == cells
    assert len({hash_cell(cy, cz, 0, 15) for cy, cz in rows}) == 1
    assert grid.state.dense_lookup.shape[0] == 0 and grid.state.hash_ids.shape[0] == 16
    expected_pairs, expected_distances = oracles.pairs(points, 1.25)
    pairs = grid.query_pairs(1.25, return_distances=True).sorted()
    np.testing.assert_array_equal(pairs.indices, expected_pairs)
    np.testing.assert_array_equal(pairs.distances, expected_distances)
    assert len(expected_pairs) > len(points)  # pairs across cells and rows too
    queries = points + 0.125
    indptr, indices, distances = oracles.radius(points, queries, 1.5)
    near = grid.query_radius(queries, 1.5, return_distances=True)
    np.testing.assert_array_equal(near.indptr, indptr)
    np.testing.assert_array_equal(near.indices, indices)
    np.testing.assert_array_equal(near.distances, distances)
    nearest = grid.query_knn(queries, 7)
    knn_indices, knn_distances, _ = oracles.knn(points, queries, 7)
    np.testing.assert_array_equal(nearest.indices, knn_indices)
    np.testing.assert_array_equal(nearest.distances, knn_distances)
    box_indptr, box_indices = oracles.box(points, queries - 1.0, queries + 1.0)
    boxes = grid.query_box(queries - 1.0, queries + 1.0)
    np.testing.assert_array_equal(boxes.indptr, box_indptr)
    np.testing.assert_array_equal(boxes.indices, box_indices)


@pytest.mark.slow
@pytest.mark.parametrize(("box", "outlier"), [(None, False), (1.0, False), (None, True)])
def test_int64_indices_give_the_int32_answers(box, outlier, monkeypatch):
    """Grids of 2**31 points or more index with int64, a path no other test reaches
    (that many points need tens of GB). With the switch moved down to 0 points, every
    query on every thread count must give the int32 grid's answers, as int64."""
    rng = np.random.default_rng(16)
    points = rng.random((3000, 3))
    if outlier:
        points[0] = 1e6  # the hashed rows instead of the dense lookup
    queries, radii = rng.random((700, 3)), rng.random(3000) * 0.03
    for n_threads in (1, 2):
        expected = _every_query(points, queries, radii, box, n_threads)
        with monkeypatch.context() as patch:
            patch.setattr(_build, "_INT32_MAX", 0)
            got = _every_query(points, queries, radii, box, n_threads)
        for index, (want, have) in enumerate(zip(expected, got, strict=True)):
            if want.dtype == np.int32:
                assert have.dtype == np.int64, index
            assert np.array_equal(want, have), index
        assert expected[1].dtype == np.int32  # `order`: the switch did move


def test_auto_algorithm_is_brute_force_up_to_32_points():
    points = np.random.default_rng(17).random((33, 2))
    assert Grid(points[:32], 0.1).algorithm == "brute"
    assert Grid(points, 0.1).algorithm == "grid"
    assert (Grid(points[:32], 0.1).query_pairs(0.3).sorted().indices.tolist()
            == Grid(points[:32], 0.1, algorithm="grid").query_pairs(0.3).sorted().indices
            .tolist())


@pytest.mark.parametrize("box", [None, 4.0])
def test_pickled_grid_answers_the_same(box):
    rng = np.random.default_rng(15)
    points = rng.integers(0, 16, size=(150, 3)) * 0.25
    queries = points[::10] + 0.125
    grid = Grid(points, 0.5, box=box, algorithm="grid")
    clone = pickle.loads(pickle.dumps(grid))
    assert repr(clone) == repr(grid)
    for method, args in [("query_pairs", (0.75,)), ("query_radius", (queries, 0.75)),
                         ("query_knn", (queries, 4)),
                         ("query_box", (queries - 0.5, queries + 0.5))]:
        got, expected = getattr(clone, method)(*args), getattr(grid, method)(*args)
        for field in ("indices", "distances", "indptr", "counts"):
            if hasattr(expected, field) and getattr(expected, field) is not None:
                np.testing.assert_array_equal(getattr(got, field), getattr(expected, field))


# ---------------------------------------------------------------------- results
def test_pairs_to_scipy_keeps_explicit_zero_distances():
    pytest.importorskip("scipy")
    points = np.array([[0.0, 0.0], [0.0, 0.0], [0.5, 0.0], [3.0, 3.0], [3.0, 3.0]])
    pairs = Grid(points, 1.0).query_pairs(0.5, return_distances=True)
    matrix = pairs.to_scipy()
    assert matrix.shape == (5, 5) and matrix.nnz == 4
    entries = sorted(zip(matrix.row.tolist(), matrix.col.tolist(), matrix.data.tolist(),
                         strict=True))
    assert entries == [(0, 1, 0.0), (0, 2, 0.5), (1, 2, 0.5), (3, 4, 0.0)]
    symmetric = pairs.to_scipy(symmetric=True)
    assert symmetric.nnz == 8 and (symmetric.toarray() == symmetric.toarray().T).all()
    ones = Grid(points, 1.0).query_pairs(0.5).to_scipy()
    np.testing.assert_array_equal(ones.data, np.ones(4))


def test_neighbors_to_scipy_keeps_explicit_zero_distances():
    pytest.importorskip("scipy")
    points = np.array([[0.0], [0.0], [1.0]])
    queries = np.array([[0.0], [5.0], [1.0]])
    neighbors = Grid(points, 1.0).query_radius(queries, 1.0, return_distances=True)
    matrix = neighbors.to_scipy()
    assert matrix.shape == (3, 3) and matrix.nnz == 6
    np.testing.assert_array_equal(matrix.indptr, [0, 3, 3, 6])
    np.testing.assert_array_equal(matrix.indices, [0, 1, 2, 0, 1, 2])
    np.testing.assert_array_equal(matrix.data, [0.0, 0.0, 1.0, 1.0, 1.0, 0.0])


def test_neighbors_to_pairs_and_row():
    points = np.array([[0.0], [0.5], [2.0]])
    neighbors = Grid(points, 1.0).query_radius(np.array([[0.25], [9.0], [2.0]]), 0.5,
                                               return_distances=True)
    assert neighbors.row(0).tolist() == [0, 1] and neighbors.row(1).tolist() == []
    np.testing.assert_array_equal(neighbors.counts, [2, 0, 1])
    pairs = neighbors.to_pairs()
    assert isinstance(pairs, Pairs) and pairs.shape == (3, 3)
    assert pairs.indices.tolist() == [[0, 0], [0, 1], [2, 2]]
    assert pairs.distances.tolist() == [0.25, 0.25, 0.0]
    assert pairs.indices.dtype == neighbors.indices.dtype


def test_reprs_name_the_sizes():
    grid = Grid(np.zeros((4, 2)), 1.0, box=[2.0, 3.0])
    assert repr(grid).startswith("Grid(n_points=4, n_dims=2, cell_size=1.0, box=[2.0, 3.0]")
    assert "n_pairs=6" in repr(grid.query_pairs(0.0))
    neighbors = grid.query_radius(np.zeros((3, 2)), 0.0)
    assert isinstance(neighbors, Neighbors) and "n_queries=3, n_neighbors=12" in repr(neighbors)
    assert "queries_with_fewer_than_k=2" in repr(grid.query_knn(np.zeros((2, 2)), 5))


def test_module_level_query_pairs_matches_grid():
    rng = np.random.default_rng(16)
    points = rng.integers(0, 30, size=(120, 2)) * 0.25
    radii = rng.integers(0, 3, size=120) * 0.125
    expected = oracles.pairs(points, 0.5)
    result = spatialhash.query_pairs(points, 0.5, return_distances=True).sorted()
    np.testing.assert_array_equal(result.indices, expected[0])
    np.testing.assert_array_equal(result.distances, expected[1])
    contacts = spatialhash.query_pairs(points, radii=radii).sorted()
    np.testing.assert_array_equal(contacts.indices, oracles.pairs(points, radii=radii)[0])
    box3 = oracles.periods(8.0, None, 2)
    periodic = spatialhash.query_pairs(points, 0.5, box=8.0).sorted()
    np.testing.assert_array_equal(periodic.indices, oracles.pairs(points, 0.5, box3=box3)[0])
    assert len(spatialhash.query_pairs(points, 0)) == len(oracles.pairs(points, 0.0)[0])


# ---------------------------------------------------------------------- periodic wrapping
@hypothesis_settings(max_examples=200)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1,
                max_size=30),
       st.sampled_from([1.0, 0.1, 34.2, 7.3e5, 2.0**-20, 3.0e12]))
def test_wrapping_is_numpys_mod_bit_for_bit(values, period):
    """The compiled wrap (`points.wrap_columns`) against ``np.mod`` with a tiny negative
    number's result (the period itself) taken to 0, on every float, inside the box or not."""
    values = np.array(values + [period, -period, -0.0, np.nextafter(period, 0.0),
                                -np.nextafter(0.0, 1.0)])
    points = np.column_stack([values, values * 0.5, values])
    expected = np.mod(points, period)
    expected[expected >= period] = 0.0
    expected[:, 1] = points[:, 1]  # an open axis is left alone
    got = wrap_columns(points.copy(), np.array([period, np.inf, period]))
    assert got.tobytes() == expected.tobytes()
