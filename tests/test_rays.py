"""`Grid.query_ray` against brute-force ray-sphere intersection (`ray_oracles.py`): random
dyadic data, the named edge cases, invariances and every error message."""

from __future__ import annotations

import contextlib
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ray_oracles
from spatialhash import Grid, Neighbors, RayHits
from spatialhash._validation import as_rays
from spatialhash.grid._kernels import ray as ray_kernels


def expected(points, radii, origins, directions, max_distance=np.inf):
    """Oracle first hits and all hits for rays in the caller's dimension."""
    points = np.asarray(points, dtype=np.float64)
    n_dims = points.shape[1]
    origins3, units3 = as_rays(origins, directions, n_dims)
    centers3 = np.zeros((points.shape[0], 3))
    centers3[:, :n_dims] = points
    radii = np.broadcast_to(np.asarray(radii, dtype=np.float64), (points.shape[0],))
    times = ray_oracles.ray_sphere_times(origins3, units3, centers3, radii, max_distance)
    return ray_oracles.first_hits(times), ray_oracles.all_hits(times)


@contextlib.contextmanager
def walk_cost(value):
    """Set `ray.WALK_COST_PER_POINT` for the body: ``inf`` makes every ray walk the cells,
    0 makes every ray test every sphere."""
    saved = ray_kernels.WALK_COST_PER_POINT
    ray_kernels.WALK_COST_PER_POINT = value
    try:
        yield
    finally:
        ray_kernels.WALK_COST_PER_POINT = saved


def check(grid, points, radii, origins, directions, max_distance=None, walk=True):
    """Both query forms equal the oracle exactly (indices and distances, bit for bit), with
    rays walking the cells (unless not ``walk``: rays billions of cells long), testing every
    sphere, and choosing as they do by default."""
    limit = np.inf if max_distance is None else max_distance
    (first_indices, first_distances), (indptr, indices, distances) = expected(
        points, radii, origins, directions, limit)
    costs = (np.inf, 0.0) if walk else (0.0,)
    for cost in (*costs, ray_kernels.WALK_COST_PER_POINT):
        with walk_cost(cost):
            first = grid.query_ray(origins, directions, radii, max_distance=max_distance)
            hits = grid.query_ray(origins, directions, radii, max_distance=max_distance,
                                  all_hits=True)
        assert isinstance(first, RayHits)
        np.testing.assert_array_equal(first.indices, first_indices)
        np.testing.assert_array_equal(first.distances, first_distances)
        assert isinstance(hits, Neighbors)
        np.testing.assert_array_equal(hits.indptr, indptr)
        np.testing.assert_array_equal(hits.indices, indices)
        np.testing.assert_array_equal(hits.distances, distances)
    return first, hits


# ---------------------------------------------------------------------- random data
def dyadic(low, high, denominator):
    return st.integers(low * denominator, high * denominator).map(lambda k: k / denominator)


@st.composite
def scenes(draw, n_dims=None):
    """Dyadic spheres and rays, with a cell size from below the radii to above them."""
    n_dims = draw(st.integers(1, 3)) if n_dims is None else n_dims
    n = draw(st.integers(0, 30))
    m = draw(st.integers(1, 12))
    coordinate = dyadic(-4, 4, 8)
    points = np.array(draw(st.lists(st.lists(coordinate, min_size=n_dims, max_size=n_dims),
                                    min_size=n, max_size=n)), dtype=np.float64)
    points = points.reshape(n, n_dims)
    radius = dyadic(0, 1, 16)
    if draw(st.booleans()):
        radii = draw(radius)
    else:
        radii = np.array(draw(st.lists(radius, min_size=n, max_size=n)), dtype=np.float64)
    origins = np.array(draw(st.lists(st.lists(dyadic(-6, 6, 8), min_size=n_dims,
                                              max_size=n_dims), min_size=m, max_size=m)))
    component = st.integers(-3, 3).map(float)
    directions = np.array(draw(st.lists(
        st.lists(component, min_size=n_dims, max_size=n_dims).filter(any),
        min_size=m, max_size=m)))
    cell_size = draw(st.sampled_from([0.125, 0.25, 0.5, 1.0, 3.0]))
    max_distance = draw(st.one_of(st.none(), dyadic(0, 8, 4),
                                  st.just(np.array([j / 2 for j in range(m)]))))
    return points, radii, origins, directions, cell_size, max_distance


@given(scene=scenes())
def test_random_rays_match_brute_force(scene):
    points, radii, origins, directions, cell_size, max_distance = scene
    grid = Grid(points, cell_size, algorithm="grid")
    check(grid, points, radii, origins, directions, max_distance)


@given(scene=scenes(n_dims=2))
def test_brute_force_grid_agrees(scene):
    points, radii, origins, directions, _, max_distance = scene
    check(Grid(points, algorithm="brute"), points, radii, origins, directions, max_distance)


@given(scene=scenes(n_dims=3), shift=st.tuples(*[dyadic(-64, 64, 1)] * 3))
def test_translation_changes_no_index(scene, shift):
    points, radii, origins, directions, cell_size, _ = scene
    with walk_cost(np.inf):
        before = Grid(points, cell_size).query_ray(origins, directions, radii, all_hits=True)
        shifted = points + np.array(shift)
        after = Grid(shifted, cell_size).query_ray(origins + np.array(shift), directions,
                                                   radii, all_hits=True)
    # Dyadic shifts are exact: the differences, and so every distance, stay the same.
    np.testing.assert_array_equal(before.indptr, after.indptr)
    np.testing.assert_array_equal(before.indices, after.indices)
    np.testing.assert_array_equal(before.distances, after.distances)


def test_seed_contract(rng):
    # Uniform spheres with spread radii, rays from inside and outside, several cell sizes.
    points = rng.random((300, 3)) * 2 - 1
    radii = rng.uniform(0.0, 0.15, 300)
    origins = rng.random((40, 3)) * 4 - 2
    directions = rng.normal(size=(40, 3))
    for cell_size in (0.05, 0.15, 0.4):
        _, hits = check(Grid(points, cell_size), points, radii, origins, directions)
        check(Grid(points, cell_size), points, radii, origins, directions, max_distance=1.0)
    # Point order changes nothing but the tie-breaking (rays starting in two spheres).
    permutation = rng.permutation(300)
    permuted = Grid(points[permutation], 0.1).query_ray(origins, directions,
                                                        radii[permutation], all_hits=True)
    np.testing.assert_array_equal(permuted.indptr, hits.indptr)
    rows = np.repeat(np.arange(40), permuted.counts)
    indices = permutation[permuted.indices]
    order = np.lexsort((indices, permuted.distances, rows))
    np.testing.assert_array_equal(indices[order], hits.indices)
    np.testing.assert_array_equal(permuted.distances[order], hits.distances)


def test_many_rays_run_in_parallel_with_the_same_result():
    rng = np.random.default_rng(7)
    # More rays than PARALLEL_MIN_QUERIES, so the parallel kernel runs.
    points = rng.random((2000, 3))
    radii = rng.uniform(0.002, 0.03, 2000)
    origins = rng.random((2048, 3)) * 1.2 - 0.1
    directions = rng.normal(size=(2048, 3))
    grid = Grid(points, 0.04)
    first, hits = check(grid, points, radii, origins, directions)
    one_thread = Grid(points, 0.04, n_threads=1)
    serial = one_thread.query_ray(origins, directions, radii, all_hits=True)
    np.testing.assert_array_equal(serial.indices, hits.indices)
    np.testing.assert_array_equal(serial.distances, hits.distances)
    assert first.hit.sum() > 500 and hits.indices.size > first.hit.sum()


# ---------------------------------------------------------------------- edge cases
LATTICE = np.array([[x, y, z] for x in range(4) for y in range(4) for z in range(4)], float)


def test_ray_along_a_cell_face():
    # Rays in the planes y == 0 (the grid's lowest face), y == 1.5 and z == 2 (faces: the
    # cell size is 0.5 enlarged by 2**-20, see grid/_grid.py, so faces are taken from the state),
    # grazing spheres centred on both sides.
    grid = Grid(LATTICE, 0.5)
    size = grid.state.cell_size[1]
    origins = [[-1.0, 0.0, 0.5], [-1.0, 3 * size, 0.0], [-1.0, 1.0, 4 * size], [-1.0, 0.0, 0.0]]
    directions = [[1.0, 0.0, 0.0]] * 4
    first, hits = check(grid, LATTICE, 0.5, origins, directions)
    # Just above y == 1.5 the sphere at y == 2 is the nearer; the index breaks ties at 0.
    assert first.indices.tolist() == [0, 8, 6, 0]
    assert first.distances.tolist()[::3] == [1.0, 0.5]
    assert hits.counts.tolist()[::3] == [8, 4]


def test_rays_through_cell_corners():
    grid = Grid(LATTICE, 1.0)
    origins = [[-1.0, -1.0, -1.0], [4.0, 4.0, 4.0], [-0.5, -0.5, 0.0], [3.5, -0.5, 1.0]]
    directions = [[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], [1.0, 1.0, 0.0], [-1.0, 1.0, 0.0]]
    first, hits = check(grid, LATTICE, 0.25, origins, directions)
    assert first.indices.tolist() == [0, 63, 0, 49]
    assert hits.counts.tolist() == [4, 4, 4, 4]  # the diagonal's four spheres, in order
    assert hits.row(0).tolist() == [0, 21, 42, 63]


def test_corner_rays_with_cell_size_unlike_the_spacing():
    for cell_size in (0.25, 0.5, 2.0, 4.0):
        grid = Grid(LATTICE, cell_size)
        origins = [[-1.0, -1.0, -1.0], [0.5, 0.5, 0.5], [1.0, 1.0, -2.0]]
        check(grid, LATTICE, 0.5, origins, [[1.0, 1.0, 1.0], [1.0, 0.0, 1.0], [0, 0, 1]])


def test_ray_starting_inside_spheres_hits_at_zero():
    points = np.array([[0.0, 0.0, 0.0], [0.25, 0.0, 0.0], [2.0, 0.0, 0.0]])
    grid = Grid(points, 0.5)
    first, hits = check(grid, points, 0.5, [[0.125, 0.0, 0.0]], [[1.0, 0.0, 0.0]])
    assert first.indices.tolist() == [0] and first.distances.tolist() == [0.0]
    assert hits.indices.tolist() == [0, 1, 2]
    assert hits.distances.tolist() == [0.0, 0.0, 1.375]


def test_ray_starting_on_a_surface_pointing_away_hits_at_zero():
    # Closed spheres: the origin lies in the ball.
    first, _ = check(Grid([[0.0, 0.0]], 1.0), [[0.0, 0.0]], 1.0, [[1.0, 0.0]], [[1.0, 0.0]])
    assert first.distances.tolist() == [0.0]


def test_negative_coordinates():
    points = -np.array([[10.0, 10.0, 10.0], [10.5, 10.0, 10.0], [12.0, 11.0, 10.0]])
    grid = Grid(points, 0.25)
    first, hits = check(grid, points, [0.125, 0.25, 0.5],
                        [[-8.0, -10.0, -10.0], [-12.0, -8.0, -10.0]],
                        [[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    assert first.indices.tolist() == [0, 2]
    assert first.distances.tolist() == [1.875, 2.5]


def test_rays_that_miss_everything():
    grid = Grid(LATTICE, 1.0)
    origins = [[-1.0, -1.0, -1.0], [1.5, 1.5, 5.0], [1.0, 1.0, 1.0]]
    directions = [[-1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    first, hits = check(grid, LATTICE, 0.25, origins, directions, max_distance=0.5)
    assert first.indices.tolist() == [-1, -1, 1 * 16 + 1 * 4 + 1]  # the third starts inside
    assert first.distances.tolist() == [np.inf, np.inf, 0.0]
    assert hits.counts.tolist() == [0, 0, 1]


def test_rays_parallel_to_each_axis():
    grid = Grid(LATTICE, 0.5)
    for axis in range(3):
        origins = np.full((2, 3), 1.0)
        origins[0, axis] = -5.0
        origins[1, axis] = 9.0
        directions = np.zeros((2, 3))
        directions[0, axis] = 1.0
        directions[1, axis] = -2.0
        first, hits = check(grid, LATTICE, 0.5, origins, directions)
        assert first.distances.tolist() == [4.5, 5.5]
        assert hits.counts.tolist() == [4, 4]


def test_circles_in_2d():
    points = np.array([[0.0, 0.0], [3.0, 0.0], [3.0, 4.0], [-1.0, 2.0]])
    grid = Grid(points, 1.0)
    first, hits = check(grid, points, [1.0, 1.0, 2.0, 0.0], [[-5.0, 0.0], [0.0, 0.0], [-1.0, 4.0]],
                        [[1.0, 0.0], [3.0, 4.0], [0.0, -1.0]])
    assert first.indices.tolist() == [0, 0, 3]
    assert first.distances.tolist() == [4.0, 0.0, 2.0]
    assert hits.row(1).tolist() == [0, 2]
    assert hits.distances[hits.indptr[1] + 1] == pytest.approx(3.0)  # 5 less the radius 2


def test_points_on_a_line_in_1d():
    points = np.array([[0.0], [2.0], [5.0]])
    first, hits = check(Grid(points, 1.0), points, 0.5, [[-3.0], [3.0], [3.0]],
                        [[2.0], [1.0], [-1.0]])
    assert first.indices.tolist() == [0, 2, 1] and first.distances.tolist() == [2.5, 1.5, 0.5]


def test_segment_end_on_a_surface_counts():
    points = np.array([[2.0, 0.0, 0.0]])
    grid = Grid(points, 1.0)
    first, _ = check(grid, points, 0.5, [[0.0, 0.0, 0.0]] * 2, [[1.0, 0.0, 0.0]] * 2,
                     max_distance=np.array([1.5, np.nextafter(1.5, 0.0)]))
    assert first.indices.tolist() == [0, -1]


def test_spheres_larger_than_many_cells():
    rng = np.random.default_rng(3)
    points = rng.random((200, 3)) * 10
    radii = rng.uniform(0.0, 3.0, 200)
    origins = rng.random((50, 3)) * 14 - 2
    directions = rng.normal(size=(50, 3))
    for cell_size in (0.25, 1.0):
        check(Grid(points, cell_size), points, radii, origins, directions)


def test_origins_far_outside_the_grid():
    points = LATTICE * 0.5
    grid = Grid(points, 0.5)
    origins = [[-1e6, 0.5, 0.5], [1e12, 1e12, 1e12], [0.5, 1.0, -1e100]]
    directions = [[1.0, 0.0, 0.0], [-1.0, -1.0, -1.0], [0.0, 0.0, 1.0]]
    first, _ = check(grid, points, 0.25, origins, directions)
    assert first.hit.all()


def test_sparse_grid_of_far_apart_clusters():
    # Coordinates 1e9 apart with a small cell: the grid uses its hash table.
    points = np.array([[0.0, 0.0, 0.0], [1e9, 0.0, 0.0], [1e9, 1.0, 0.0], [2e9, 0.0, 0.0]])
    grid = Grid(points, 0.5, algorithm="grid")
    assert grid.state.dense_lookup.shape[0] == 0
    origins = [[-1.0, 0.0, 0.0], [1e9, 5.0, 0.0], [3e9, 0.0, 0.0]]
    directions = [[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [-1.0, 0.0, 0.0]]
    first, hits = check(grid, points, 0.25, origins, directions, walk=False)
    assert first.indices.tolist() == [0, 2, 3]
    assert hits.counts.tolist() == [3, 2, 3]


def test_duplicate_spheres_tie_by_index():
    points = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    first, hits = check(Grid(points, 1.0), points, 0.5, [[0.0, 0.0]], [[1.0, 0.0]])
    assert first.indices.tolist() == [0]
    assert hits.indices.tolist() == [0, 1, 2]


def test_zero_radii_hit_points_exactly_on_the_ray():
    first, _ = check(Grid(LATTICE, 1.0), LATTICE, 0.0, [[-1.0, 2.0, 3.0], [-1.0, 2.5, 3.0]],
                     [[1.0, 0.0, 0.0]] * 2)
    assert first.indices.tolist() == [2 * 4 + 3, -1]


def test_long_rows_are_sorted():
    # More hits in a row than the insertion sort handles, in one cell.
    points = np.column_stack([np.linspace(0.0, 1.0, 200)[::-1], np.zeros(200)])
    grid = Grid(points, 4.0)
    _, hits = check(grid, points, 0.5, [[-1.0, 0.0]], [[1.0, 0.0]])
    assert hits.counts.tolist() == [200]


def test_empty_grid_and_no_rays():
    grid = Grid(np.empty((0, 3)), 1.0)
    first, hits = check(grid, np.empty((0, 3)), 1.0, [[0.0, 0.0, 0.0]], [[1.0, 0.0, 0.0]])
    assert first.indices.tolist() == [-1] and hits.indptr.tolist() == [0, 0]
    first, hits = check(Grid(LATTICE, 1.0), LATTICE, 0.5, np.empty((0, 3)), np.empty((0, 3)))
    assert len(first) == 0 and len(hits) == 0


def test_single_ray_as_a_vector_and_unnormalized_directions():
    grid = Grid(LATTICE, 1.0)
    one = grid.query_ray([-2.0, 1.0, 1.0], [1e-300, 0.0, 0.0], 0.5)
    big = grid.query_ray([[-2.0, 1.0, 1.0]], [[1e300, 0.0, 0.0]], 0.5)
    assert one.indices.tolist() == big.indices.tolist() == [5]
    assert one.distances.tolist() == big.distances.tolist() == [1.5]


def test_inputs_are_not_modified():
    origins = np.array([[0.5, 0.5, -1.0]])
    directions = np.array([[0.0, 0.0, 2.0]])
    radii = np.full(len(LATTICE), 0.5)
    copies = origins.copy(), directions.copy(), radii.copy()
    Grid(LATTICE, 1.0).query_ray(origins, directions, radii, all_hits=True)
    for array, copy in zip((origins, directions, radii), copies, strict=True):
        np.testing.assert_array_equal(array, copy)


def test_result_repr_and_hit_mask():
    first = Grid(LATTICE, 1.0).query_ray([[0, 0, -1], [9, 9, 9]], [[0, 0, 1], [1, 0, 0]], 0.1)
    assert repr(first) == "RayHits(n_rays=2, n_hit=1)"
    assert first.hit.tolist() == [True, False] and len(first) == 2


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"directions": [[0.0, 0.0, 0.0]]}, ValueError,
         "`directions` must be non-zero vectors; got [0.0, 0.0, 0.0] at directions[0]."),
        ({"directions": [[1.0, 0.0, 0.0], [-0.0, 0.0, 0.0]], "origins": np.zeros((2, 3))},
         ValueError, "`directions` must be non-zero vectors; got [-0.0, 0.0, 0.0] at "
                     "directions[1]."),
        ({"origins": [[np.nan, 0.0, 0.0]]}, ValueError,
         "`origins` must be finite; got nan at origins[0, 0]."),
        ({"directions": [[1.0, np.inf, 0.0]]}, ValueError,
         "`directions` must be finite; got inf at directions[0, 1]."),
        ({"directions": np.ones((2, 3))}, ValueError,
         "`directions` must have the same shape as `origins`; got (2, 3) and (1, 3)."),
        ({"origins": [[0.0, 0.0]]}, ValueError,
         "`origins` must have 3 columns, like the grid's points; got shape (1, 2)."),
        ({"origins": [["a", "b", "c"]]}, TypeError,
         "`origins` must hold real numbers (integer or floating dtype); got dtype <U1."),
        ({"radii": -1.0}, ValueError, "`radii` must be >= 0; got -1.0."),
        ({"radii": np.ones(3)}, ValueError,
         "`radii` must be a scalar or an array of shape (64,); got an array of shape (3,) "
         "and dtype float64."),
        ({"max_distance": -0.5}, ValueError, "`max_distance` must be >= 0; got -0.5."),
        ({"max_distance": np.nan}, ValueError, "`max_distance` must be >= 0; got nan."),
        ({"max_distance": np.ones(2)}, ValueError,
         "`max_distance` must be a scalar or an array of shape (1,); got an array of shape "
         "(2,) and dtype float64."),
    ],
)
def test_errors(kwargs, error, message):
    arguments = {"origins": [[0.0, 0.0, 0.0]], "directions": [[1.0, 0.0, 0.0]], "radii": 0.5}
    arguments.update(kwargs)
    with pytest.raises(error, match=re.escape(message)):
        Grid(LATTICE, 1.0).query_ray(**arguments)


def test_periodic_grid_is_refused():
    grid = Grid(LATTICE, 1.0, box=[8.0, 8.0, 8.0], periodic=[True, False, True])
    message = ("`box` must be None for ray casts (rays run through open grids only); got a "
               "grid periodic on axes [0, 2].")
    with pytest.raises(ValueError, match=re.escape(message)):
        grid.query_ray([[0.0, 0.0, 0.0]], [[1.0, 0.0, 0.0]], 0.5)
