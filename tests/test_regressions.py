"""Named regression cases: one test per library bug found, named after the bug.

Each test states the input, the answer expected and what the library gave when the bug was
found ("Got"). A test here fails while its bug is open and guards the fix afterwards.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import spatialhash
from spatialhash import Grid

import oracles


# ---------------------------------------------------------------------- k nearest
@pytest.mark.parametrize("cell_size", [1.5, 1.0, 2.0, 0.5])
def test_knn_periodic_even_cell_count_misses_nearest_across_boundary(cell_size):
    """Box 4 with cell_size 1.5 has 2 cells per axis. The query at 0.1 is 0.15 from the
    point at 3.95 (through the boundary) and 0.9 from the point at 1.0.

    Got (cell_size 1.5): index 0 at 0.9 -- the search stops after the query's own cell,
    bounding the unvisited cell only by the face above the query, although on a periodic
    axis with an even cell count that cell is also adjacent below it.
    """
    points = np.array([[1.0], [3.95]])
    grid = Grid(points, cell_size, box=4.0, algorithm="grid")
    nearest = grid.query_knn(np.array([[0.1]]), 1)
    assert nearest.indices.tolist() == [[1]]
    np.testing.assert_allclose(nearest.distances, [[0.15]], rtol=1e-12)


@pytest.mark.parametrize("cell_size", [None, 1.5])
def test_knn_periodic_even_cell_count_breaks_ties_across_boundary(cell_size):
    """All nine points are 0.25 from the query; ties go to the smaller index, so [0, 1, 2, 3].

    Got (cell_size None, 2 cells): [1, 2, 3, 4] -- point 0, across the boundary, is missed.
    """
    points = np.array([[-0.25]] + [[0.25]] * 8)
    grid = Grid(points, cell_size, box=[4.0], algorithm="grid")
    nearest = grid.query_knn(np.array([[0.0]]), 4)
    assert nearest.indices.tolist() == [[0, 1, 2, 3]]
    assert nearest.distances.tolist() == [[0.25] * 4]


def test_knn_periodic_four_cells_misses_cell_half_a_box_away():
    """Box 8 with cell_size 1.9: four cells of 2. From the query at 0.3 (cell 0), the point
    at 6.0 is 2.3 away (cell 3, one cell below), the point at 5.9 is 2.4 away (cell 2, two
    cells away on either side) and the point at 3.0 is 2.7 away (cell 1).

    Expected the two nearest [2, 1] at [2.3, 2.4]. Got [2, 0] at [2.3, 2.7].
    """
    points = np.array([[3.0], [5.9], [6.0]])
    grid = Grid(points, 1.9, box=8.0, algorithm="grid")
    nearest = grid.query_knn(np.array([[0.3]]), 2)
    assert nearest.indices.tolist() == [[2, 1]]
    np.testing.assert_allclose(nearest.distances, [[2.3, 2.4]], rtol=1e-12)


def test_knn_periodic_even_cell_counts_match_oracle_in_3d():
    rng = np.random.default_rng(0)
    points = rng.integers(0, 32, size=(200, 3)) * 0.25
    queries = rng.integers(0, 32, size=(100, 3)) * 0.25 + 0.125
    box3 = oracles.periods(8.0, None, 3)
    for cell_size in (1.5, 0.75, 3.0):  # 4 / 10 / 2 cells per axis
        grid = Grid(points, cell_size, box=8.0, algorithm="grid")
        nearest = grid.query_knn(queries, 3)
        indices, distances, _ = oracles.knn(points, queries, 3, box3=box3)
        np.testing.assert_array_equal(nearest.distances, distances, err_msg=f"{cell_size}")
        np.testing.assert_array_equal(nearest.indices, indices, err_msg=f"{cell_size}")


# ---------------------------------------------------------------------- pairs
def test_query_pairs_reports_a_pair_across_the_periodic_boundary_twice():
    """Box [8, 8], periodic on y only, cell_size 1.5 (cells: 3 along x, 5 along y), r 0.75.
    Points 0 (1.5, -0.25 -> 7.75) and 1 (1.0, 0.0) are 0.56 apart across the y boundary.

    Expected pairs [[0, 1], [0, 4], [1, 4], [5, 6]]. Got [0, 1] twice (cell_size 1.0 and
    brute force are right). Seen for 1..2% of random lattice clouds with a periodic axis of
    more than ``2 * reach + 1`` cells; the minimal cloud found has these 7 points.
    """
    points = np.array([[1.5, -0.25], [1.0, 0.0], [-1.5, -2.0], [-1.75, 0.0], [1.5, 0.5],
                       [0.75, -1.5], [1.0, -2.0]])
    grid = Grid(points, 1.5, box=[8.0, 8.0], periodic=[False, True], algorithm="grid")
    pairs = grid.query_pairs(0.75, return_distances=True).sorted()
    assert pairs.indices.tolist() == [[0, 1], [0, 4], [1, 4], [5, 6]]
    box3 = oracles.periods([8.0, 8.0], [False, True], 2)
    np.testing.assert_array_equal(pairs.distances, oracles.pairs(points, 0.75, box3=box3)[1])


# ---------------------------------------------------------------------- building
def test_n_points_counts_points_not_axes():
    """``Grid.n_points`` returns ``state.points.shape[0]``, but the sorted points are now
    stored one row per axis, shape (3, n): every grid reports 3 points.

    Expected for 5 points: n_points 5, Pairs.shape (5, 5), radii of shape (5,) accepted.
    Got: n_points 3, Pairs.shape (3, 3), and "`radii` must be ... of shape (3,)".
    """
    points = np.arange(10.0).reshape(5, 2)
    grid = Grid(points, 1.0)
    assert grid.n_points == 5
    assert grid.query_pairs(0.5).shape == (5, 5)
    assert grid.query_radius(points, 0.5).n_points == 5
    assert len(grid.query_pairs(radii=np.full(5, 1.5))) == 4


def test_periodic_cell_size_too_small_raises_overflow_error_not_value_error():
    """cell_size 1e-20 on a periodic box of 1 would need 1e20 cells per axis.

    Expected: ValueError naming `cell_size` (as on open axes). Got: OverflowError "Python
    int too large to convert to C long".
    """
    points = np.random.default_rng(1).random((40, 2))
    with pytest.raises(ValueError, match=r"`cell_size`"):
        Grid(points, 1e-20, box=1.0, algorithm="grid")


def test_points_whose_spread_overflows_float64_corrupt_memory():
    """Finite points at +-1e308: their spread (2e308) overflows to inf. With few points the
    grid is built in brute-force mode (inverse cell size 0), ``inf * 0`` gives NaN, NaN is
    cast to a cell coordinate of -2**63 and the dense build kernel writes out of bounds.

    Expected: a grid that answers (or a ValueError naming `points`). Got: IndexError with a
    garbage index, or a segmentation fault. Run in a subprocess so a crash cannot take the
    test session down.
    """
    code = textwrap.dedent("""
        import warnings
        import numpy as np
        from spatialhash import Grid
        warnings.simplefilter("ignore")
        points = np.array([[1e308], [-1e308], [1e308]])
        try:
            grid = Grid(points)
        except ValueError as error:
            assert "`points`" in str(error), error
            print("ValueError")
        else:
            pairs = grid.query_pairs(0.0).sorted().indices.tolist()
            assert pairs == [[0, 2]], pairs
            print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.strip() in ("ok", "ValueError")


@pytest.mark.parametrize("n_dims", [2, 3])
def test_default_cell_size_overflows_for_clouds_with_huge_volume(n_dims):
    """A cloud spanning +-1e150 per axis (volume 8e450 in 3-D) with no cell_size given.

    The default cell size is (volume * 4 / n) ** (1/d); the volume overflows to inf, which
    warns ("overflow encountered in reduce"), falls back to 1.0, and then fails with
    "`cell_size` is too small ... 1.0 would need 2e+150 cells" for a cell_size the user
    never gave. Expected: a grid with a finite default cell size (about 1e150 here).
    (In 2-D the spread that overflows is beyond the +-1e150 coordinates accepted.)
    """
    spread = 1e150
    points = np.zeros((42, n_dims))
    points[0], points[1] = spread, -spread
    grid = Grid(points)
    assert np.isfinite(grid.cell_size) and grid.cell_size > 1e100
    assert grid.query_knn(np.zeros((1, n_dims)), 3).indices.tolist() == [[2, 3, 4]]


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_default_cell_size_one_far_outlier_puts_every_other_point_in_one_cell(n_dims):
    """20,000 points in the unit cube and one at 1e6 on every axis, no cell_size given.

    Expected: about four points a cell among the 20,000 (the cell size of the cloud
    without the outlier) and exact k-nearest answers. Got: the size from the bounding box,
    1e6 * (4 / 20,001) ** (1 / d) (5,800 in 3-D), which put the 20,000 points in one
    cell: on a million points, `query_knn` of a million queries compared every query with
    every point and had not ended after ten minutes.
    """
    rng = np.random.default_rng(n_dims)
    points = rng.random((20_000, n_dims))
    with_outlier = np.vstack([points, np.full((1, n_dims), 1e6)])
    grid = Grid(with_outlier)
    assert grid.cell_size < 1.1 * Grid(points).cell_size
    assert grid.n_occupied_cells > 1_000
    queries = np.vstack([rng.random((50, n_dims)), np.full((1, n_dims), 2e6)])
    found = grid.query_knn(queries, 5)
    indices, distances, _ = oracles.knn(with_outlier, queries, 5)
    np.testing.assert_array_equal(found.indices, indices)
    np.testing.assert_allclose(found.distances, distances, rtol=1e-12)


def test_periodic_given_as_numpy_array_without_box():
    """``periodic=np.array([False, False])`` with no box is an open grid, and
    ``np.array([True, False])`` should get "`periodic` needs `box`".

    Got for both: ValueError "The truth value of an array with more than one element is
    ambiguous" (``periodic not in (None, False)`` compares an array).
    """
    points = np.arange(8.0).reshape(4, 2)
    assert Grid(points, 1.0, periodic=np.array([False, False])).box is None
    with pytest.raises(ValueError, match=r"`periodic` needs `box`"):
        Grid(points, 1.0, periodic=np.array([True, False]))


# ---------------------------------------------------------------------- module function
@pytest.mark.parametrize(
    ("radii", "got"),
    [
        ("a", "UFuncTypeError: ufunc 'maximum' did not contain a loop"),
        ([[0.1], [0.1, 0.2]] + [[0.1]] * 10, "ValueError: setting an array element with a "
                                             "sequence"),
        ([None] * 12, "TypeError: '>=' not supported between 'NoneType' and 'NoneType'"),
        (np.full(12, 0.1 + 0j), "ComplexWarning: Casting complex values to real discards the "
                                "imaginary part"),
    ],
)
def test_module_query_pairs_uses_radii_before_validating_them(radii, got):
    """``spatialhash.query_pairs`` takes ``np.max(radii)`` before the validation funnel sees
    ``radii``. Expected: the TypeError of `Grid.query_pairs`, naming `radii`. Got: ``got``.
    """
    points = np.arange(24.0).reshape(12, 2)
    with pytest.raises(TypeError, match=r"`radii`"):
        spatialhash.query_pairs(points, radii=radii)


# ---------------------------------------------------------------------- warnings
def test_query_box_with_huge_finite_bounds_warns_overflow():
    """Finite bounds +-1.7e308: ``upper - lower`` overflows to inf and NumPy warns
    "overflow encountered in subtract" (an error under warnings-as-errors), although every
    input is valid and the answer (all points) is well defined."""
    points = np.random.default_rng(2).random((50, 2))
    grid = Grid(points, 0.1)
    boxes = grid.query_box([-1.7e308, -1.7e308], [1.7e308, 1.7e308])
    assert boxes.counts.tolist() == [50]


# ---------------------------------------------------------------------- reach and scale
@pytest.mark.parametrize("algorithm", ["grid", "auto"])
def test_pair_search_reaching_2_63_cells_or_more_finds_nothing(algorithm):
    """A reach of 2**63 cells or more (a huge ``r`` over tiny cells) overflowed the int64
    count of cells to search: ``Grid([[0], [1]], cell_size=1e-9).query_pairs(1e10)``.
    Expected: every pair. Got: no pairs, or a MemoryError, or "array is too big"."""
    grid = Grid([[0.0], [1.0]], cell_size=1e-9, algorithm=algorithm)
    assert grid.query_pairs(1e10).indices.tolist() == [[0, 1]]
    assert [chunk.indices.tolist() for chunk in grid.iter_pairs(1e10)] == [[[0, 1]]]
    points = np.random.default_rng(0).random((10, 2))
    found = Grid(points, 1e-2, algorithm=algorithm).query_pairs(1e17).sorted()
    np.testing.assert_array_equal(found.indices, np.argwhere(np.triu(np.ones((10, 10)), 1)))
    found = Grid(points, 1e-2, algorithm=algorithm).query_pairs(radii=np.full(10, 1e300))
    assert len(found.indices) == 45


def test_dynamic_queries_spanning_2_63_cells_find_nothing():
    """A ball or box query spanning 2**63 cells or more: the count of its cells overflowed
    an int64 and went negative, so the query walked cells instead of scanning objects.
    Expected: the object at the origin. Got: ``[]``."""
    from spatialhash import DynamicHash

    hash_ = DynamicHash(1.0, n_dims=1)
    hash_.insert(1, [0.0])
    assert hash_.query_radius([0.0], 1e19).tolist() == [1]
    assert hash_.query_box([-1e300], [1e300]).tolist() == [1]
    fine = DynamicHash(1e-10, n_dims=3)
    fine.insert(1, [0.0, 0.0, 0.0])
    assert fine.query_box([-1e9] * 3, [1e9] * 3).tolist() == [1]


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_dynamic_rays_and_nearest_walk_every_cell_between_distant_objects(n_dims):
    """Objects 1e9 cells apart: a ray cast walked every cell between them (over a minute
    at 1e9, unbounded at 1e12), and in 1-D the nearest-object search walked them ring by
    ring (24 s at 1e9). Expected: the answers of brute force, at once."""
    import dynamic_oracles as oracle
    from spatialhash import DynamicHash

    rng = np.random.default_rng(n_dims)
    lower = rng.integers(-20, 20, (40, n_dims)) / 4.0
    lower[:3, 0] = [1e9, -1e12, 3e9]
    sizes = rng.choice([0.0, 0.5, 2.0], (40, 1))
    hash_ = DynamicHash(1.0, n_dims=n_dims)
    hash_.insert_many(np.arange(40), lower, lower + sizes)
    model = {i: oracle.make_shape(lower[i], lower[i] + sizes[i], None, n_dims)
             for i in range(40)}
    for _ in range(20):
        origin = rng.integers(-24, 24, n_dims) / 4.0
        direction = np.zeros(n_dims)
        direction[0] = rng.choice([-1.0, 1.0])
        direction[1:] = rng.integers(-1, 2, n_dims - 1) * 1e-12
        expected = oracle.query_ray(model, oracle.pad(origin, n_dims),
                                    oracle.unit(oracle.pad(direction, n_dims)))
        hits = hash_.query_ray(origin, direction, all_hits=True)
        assert hits.ids.tolist() == [id for _, id in expected]
        assert hits.distances.tolist() == [t for t, _ in expected]
        assert hash_.query_ray(origin, direction).ids.tolist() == [id for _, id in expected[:1]]
        nearest = hash_.query_knn(origin, 40)
        expected = oracle.query_knn(model, oracle.pad(origin, n_dims), 40)
        assert nearest.ids.tolist() == [id for _, id in expected]


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_coordinates_whose_squared_distances_overflow_give_wrong_answers(n_dims):
    """Coordinates from about 1.3e154 on: squared distances overflow to infinity, and with
    a radius whose square overflows too every pair matched. ``Grid([[0], [2e160]], 1e160)
    .query_pairs(1e160)``: expected no pair (they are 2e160 apart). Got: the pair, at
    distance inf; `query_knn` ranked two such points by index; a ray from -1e155 missed.
    Now coordinates beyond +-1e150 are refused, naming the argument."""
    far = np.zeros((2, n_dims))
    far[1, -1] = 2e160
    with pytest.raises(ValueError, match=r"`points` must lie within \+-1e\+150.*2e\+160"):
        Grid(far, 1e160)
    grid = Grid(np.zeros((1, n_dims)), 1.0)
    with pytest.raises(ValueError, match=r"`queries` must lie within.*queries\[0, 0\]"):
        grid.query_radius(np.full((1, n_dims), -1e151), 1e300)
    with pytest.raises(ValueError, match=r"`queries` must lie within"):
        grid.query_knn(np.full((1, n_dims), 1e151), 1)
    with pytest.raises(ValueError, match=r"`origins` must lie within"):
        grid.query_ray(np.full(n_dims, -1e155), np.eye(n_dims)[0], 0.5)
    # At the limit, distances and rankings are exact.
    edge = np.zeros((3, n_dims))
    edge[1, 0], edge[2, 0] = 1e150, -1e150
    grid = Grid(edge, 1e149)
    pairs = grid.query_pairs(1e300, return_distances=True).sorted()
    assert pairs.indices.tolist() == [[0, 1], [0, 2], [1, 2]]
    assert pairs.distances.tolist() == [1e150, 1e150, 2e150]
    assert grid.query_knn(np.full((1, n_dims), 1e150), 3).indices.tolist() == [[1, 0, 2]]


def test_huge_k_allocates_terabytes():
    """``Grid([[0.0]]).query_knn([[0.0]], 2**40)``: a valid k (more than the points) made
    (1, 2**40) result arrays. Expected: a clear error naming `k` (the padding alone would
    take 16 TiB), and the dynamic hash, which returns fewer than k, the one object. Got:
    MemoryError "Unable to allocate 4.00 TiB"; for 2**63 "Maximum allowed dimension
    exceeded"."""
    from spatialhash import DynamicHash

    grid = Grid([[0.0], [1.0]])
    for k in (2**40, 2**63):
        with pytest.raises(ValueError, match=r"`k` must not exceed the number of points \(2\)"):
            grid.query_knn([[0.0]], k)
    found = grid.query_knn([[0.0]], 5)  # a little beyond the points: padded, as documented
    assert found.indices.tolist() == [[0, 1, -1, -1, -1]] and found.counts.tolist() == [2]
    hash_ = DynamicHash(1.0, n_dims=1)
    assert hash_.query_knn([0.0], 2**40).ids.tolist() == []
    hash_.insert(7, [0.5])
    hits = hash_.query_knn([0.0], 2**40)
    assert hits.ids.tolist() == [7] and hits.distances.tolist() == [0.5]


@pytest.mark.parametrize(("n_dims", "outlier"), [(1, 1e15), (2, 1e16), (3, 1e150)])
def test_default_cell_size_too_small_for_a_far_outlier(n_dims, outlier):
    """1,000 points in the unit cube and one at 1e15 (1-D), no cell_size given. Expected: a
    grid (the default cell size made large enough for the spread). Got: "`cell_size` is
    too small for the spread of the points: 0.00395 would need 2.53e+17 cells", about a
    cell size the user never gave."""
    rng = np.random.default_rng(n_dims)
    points = np.vstack([rng.random((1000, n_dims)), np.full((1, n_dims), outlier)])
    grid = Grid(points)
    found = grid.query_knn(points[:20], 3)
    indices, _, _ = oracles.knn(points, points[:20], 3)
    np.testing.assert_array_equal(found.indices, indices)


def test_module_query_pairs_refuses_the_cell_size_it_chose():
    """``spatialhash.query_pairs`` used the reach as the cell size unchecked: r = 1e-16 over
    points in [0, 1] gave "`cell_size` is too small ... would need 1e+16 cells", and radii
    of 1e308 (a reach of inf) "`cell_size` must be finite; got inf", neither a parameter
    of the function. Expected: the pairs (none, and every one)."""
    line = np.linspace(0.0, 1.0, 40)[:, None]
    assert spatialhash.query_pairs(line, 1e-16).indices.shape == (0, 2)
    assert spatialhash.query_pairs(line, 1e-17, box=1.0).indices.tolist() == [[0, 39]]
    assert spatialhash.query_pairs([[0.0], [1.0]], radii=[1e308, 1e308]).indices.tolist() == [
        [0, 1]]


@pytest.mark.parametrize("call", [
    lambda: Grid([[0.0]], cell_size=10**400),
    lambda: Grid([[0.0]]).query_pairs(10**400),
    lambda: spatialhash.query_pairs([[0.0]], 10**400),
    lambda: Grid([[0.0]]).query_knn([[0.0]], 1, r_max=-(10**400)),
])
def test_integers_beyond_float64_raise_overflow_error(call):
    """A Python integer too large for a float (10**400) as a cell size or radius. Expected:
    a ValueError naming the parameter. Got: "OverflowError: int too large to convert to
    float", naming none."""
    with pytest.raises(ValueError, match=r"`(cell_size|r|r_max)` must fit float64; got an "
                                         r"integer of 401 digits"):
        call()


@pytest.mark.parametrize(("call", "name"), [
    (lambda: Grid([[0.0], [1.0]]).query_pairs(radii=[[1], [1, 2]]), "radii"),
    (lambda: Grid([[0.0, 0.0]], box=1.0, periodic=[[True], [True, False]]), "periodic"),
    (lambda: spatialhash.DynamicHash(1.0, 1).insert_many([1, 2], [[0.0], [1.0]],
                                                         radius=[[1], [1, 2]]), "radius"),
    (lambda: spatialhash.DynamicHash(1.0, 1).insert_many([1, 2], [[0.0], [1.0]],
                                                         category=[[1], [1, 2]]), "category"),
])
def test_ragged_arguments_reach_numpy_unnamed(call, name):
    """Ragged nested lists as radii or periodic flags. Expected: a TypeError naming the
    argument. Got: NumPy's "setting an array element with a sequence. The requested array
    has an inhomogeneous shape", naming none."""
    with pytest.raises(TypeError, match=rf"`{name}` must be"):
        call()


def test_timedelta_and_masked_points_are_taken_as_numbers():
    """timedelta64 arrays (NumPy counts them among the integers) were accepted as
    coordinates, and a masked array's mask was dropped, its masked values used. Expected:
    TypeErrors naming `points`; a masked array with nothing masked is plain data."""
    with pytest.raises(TypeError, match=r"`points` must hold real numbers.*timedelta64"):
        Grid(np.array([[1], [2]], dtype="timedelta64[s]"), 1.0)
    masked = np.ma.array([[0.0], [5.0]], mask=[[False], [True]])
    with pytest.raises(TypeError, match=r"`points` must not be a masked array"):
        Grid(masked, 1.0)
    with pytest.raises(TypeError, match=r"`queries` must not be a masked array"):
        Grid([[0.0]], 1.0).query_radius(masked, 1.0)
    assert Grid(np.ma.array([[0.0], [0.5]]), 1.0).query_pairs(1.0).indices.tolist() == [[0, 1]]


def test_dynamic_coordinates_whose_squared_distances_overflow():
    """The dynamic hash took any finite coordinates; from about 1.3e154 on, squared
    distances overflow and a ball of radius 1e160 around 0 held an object 2e160 away.
    Now objects, centres, query points and ray origins are limited to +-1e150, as in the
    batch grid; box corners, cell positions and directions (no distances) are not."""
    from spatialhash import DynamicHash

    hash_ = DynamicHash(1.0, n_dims=2)
    hash_.insert(1, [0.5, 0.5])
    before = hash_.query_box([-1e300, -1e300], [1e300, 1e300]).tolist()
    for call, name in [
        (lambda: hash_.insert(2, [2e160, 0.0]), "lower"),
        (lambda: hash_.insert(2, [0.0, 0.0], [2e160, 1.0]), "upper"),
        (lambda: hash_.move(1, [0.0, -2e151]), "lower"),
        (lambda: hash_.insert_many([2, 3], np.array([[0.0, 0.0], [0.0, 1e151]])), "lower"),
        (lambda: hash_.query_radius([1e151, 0.0], 1e160), "center"),
        (lambda: hash_.query_knn([0.0, 1e151], 1), "point"),
        (lambda: hash_.query_ray([-1e155, 0.5], [1.0, 0.0]), "origin"),
    ]:
        with pytest.raises(ValueError, match=rf"`{name}` must lie within \+-1e\+150"):
            call()
    assert hash_.query_box([-1e300, -1e300], [1e300, 1e300]).tolist() == before == [1]
    assert hash_.query_cell([1e300, 0.0]).tolist() == []
    assert hash_.query_ray([0.0, 0.5], [1e300, 0.0]).ids.tolist() == [1]
    hash_.move(1, [1e150, -1e150])  # the limit itself is allowed
    assert hash_.query_radius([0.0, 0.0], 2e150).tolist() == [1]


def test_subnormal_cell_size_or_box_overflows_its_inverse():
    """A subnormal period (box=5e-324) or cell size: ``1 / size`` overflowed, NumPy warned
    "overflow encountered in divide" (an error under warnings-as-errors), and a cell size
    of 1e-300 over a unit spread was said to need "4.61e+18 cells", the clamped count.
    Expected: ValueErrors naming the parameter, with the count from the coordinates."""
    points = np.random.default_rng(0).random((100, 2))
    with pytest.raises(ValueError, match=r"`box` is too small: 5e-324 \(axis 0\)"):
        Grid(points, 1e-3, box=5e-324)
    with pytest.raises(ValueError, match=r"`cell_size` is too small: 5e-324"):
        Grid(points, cell_size=5e-324)
    with pytest.raises(ValueError, match=r"1e-300 would need 9\.\d+e\+299 cells along axis"):
        Grid(points, cell_size=1e-300)


def test_dynamic_knn_and_rays_lose_objects_2_54_cells_out():
    """Found by a brute-force audit: the nearest-object scan took the ring of an object
    2**63 cells away as negative (an int64 difference of clamped cell coordinates) and
    skipped it; a ray from 2**55 cells out rounded its cell coordinates by whole cells
    and visited none; a ray starting inside an object at 2**67 cells clipped against the
    level's cells, saturated at 2**62, and missed it. Expected: the oracle's answers."""
    import dynamic_oracles as oracle
    from spatialhash import DynamicHash

    cases = [  # (cell size, dimensions, objects, query point, ray direction, max distance)
        (1.0, 1, {7: ([-2.0**62], None, None)}, [2.0**62], [-1.0], math.inf),
        (2.0**-20, 3, {7: ([-2.0**42, 0.0, 0.0], None, None), 8: ([1.0, 0.0, 0.0], None, None)},
         [2.0**42, 0.0, 0.0], [-1.0, 0.0, 0.0], math.inf),
        (1.0, 3, {5: ([2.0, 0.0, 0.0], None, None)}, [-2.0**55, 0.0, 0.0], [1.0, 0.0, 0.0],
         math.inf),
        (1.0, 2, {5: ([2.0, 3.0], [2.5, 4.0], None)}, [-2.0**56, 3.5], [1.0, 0.0], math.inf),
        (1.0, 3, {5: ([2.0**67, 0.0, 0.0], None, 3.75)}, [2.0**67, 0.0, 0.0],
         [1.0, 0.0, 0.0], 30.0),
    ]
    for cell_size, n_dims, shapes, point, direction, max_distance in cases:
        hash_ = DynamicHash(cell_size, n_dims=n_dims)
        for id, (lower, upper, radius) in shapes.items():
            hash_.insert(id, lower, upper, radius=radius)
        model = {id: oracle.make_shape(*args, n_dims=n_dims) for id, args in shapes.items()}
        padded = oracle.pad(point, n_dims)
        nearest = hash_.query_knn(point, len(shapes))
        assert nearest.ids.tolist() == [id for _, id in oracle.query_knn(model, padded, 9)]
        expected = oracle.query_ray(model, padded, oracle.unit(oracle.pad(direction, n_dims)),
                                    max_distance)
        hits = hash_.query_ray(point, direction, max_distance=max_distance, all_hits=True)
        assert hits.ids.tolist() == [id for _, id in expected]
        assert hits.distances.tolist() == [t for t, _ in expected]
        assert expected  # every case has a hit


def test_dynamic_ray_from_afar_misjudges_a_sphere():
    """Found reading the dynamic ray cast: its discriminant was ``b * b - c``, which
    cancels when the sphere is far along the ray. From 1e8 away, a ray along x passing
    1.0001 from the centre of a unit sphere (through its bounding box, so the box test
    let it on to the sphere test) hit it at 1e8, one passing 0.99 from the centre hit it
    at 1e8 rather than 1e8 - 0.1411, and in 2-D a diagonal ray passing 0.99 from the
    centre of a unit circle missed it. The batch grid's ray cast had the stable form
    already. Expected: the hit or miss of exact geometry, entry points to within 1e-6
    (the ulp of 1e8 is 1.5e-8)."""
    from spatialhash import DynamicHash

    root2 = math.sqrt(2.0)
    cases = [  # (origin, direction, distance of the line from the centre or None)
        ([-1e8, 0.7072, 0.7072], [1.0, 0.0, 0.0], None),
        ([-1e8, 0.7, 0.7], [1.0, 0.0, 0.0], math.sqrt(0.98)),
        ([-1e8, 1e8 + 1.4], [1.0, -1.0], 1.4 / root2),
        ([-1e8, 1e8 + 1.4144], [1.0, -1.0], None),
    ]
    for origin, direction, line_distance in cases:
        world = DynamicHash(1.0, n_dims=len(origin))
        world.insert("ball", [0.0] * len(origin), radius=1.0)
        hits = world.query_ray(origin, direction)
        if line_distance is None:
            assert hits.ids.tolist() == []
            continue
        assert hits.ids.tolist() == ["ball"]
        unit = np.array(direction) / np.linalg.norm(direction)
        to_foot = -float(np.dot(origin, unit))
        expected = to_foot - math.sqrt(1.0 - line_distance**2)
        assert abs(hits.distances[0] - expected) <= 1e-6


def test_rays_through_points_of_radius_zero_miss_them():
    """Found when the dynamic hash took the batch grid's ray-sphere arithmetic: a sphere of
    radius 0 on the ray is met only if ``disc = -|q|^2`` is exactly 0, and ``q``, the
    centre's offset from the line, is rounded. Got: the diagonal ray from the origin missed
    the points (1, 1), (3, 3) and (5, 5) of radius 0 (an empty answer, 2-D and 3-D) in
    `Grid.query_ray`, and the sphere of radius 0 at (5, 5) in `DynamicHash.query_ray`.
    Expected: every point, at its distance along the ray."""
    from spatialhash import DynamicHash

    for n_dims in (2, 3):
        off_the_ray = [2.0, 1.0, 0.0][:n_dims]
        points = np.array([[1.0] * n_dims, [5.0] * n_dims, [3.0] * n_dims, off_the_ray])
        origin, direction = np.zeros((1, n_dims)), np.ones((1, n_dims))
        unit = 1.0 / np.linalg.norm(direction[0])
        expected = [float(x / unit) for x in (1.0, 3.0, 5.0)]  # the slab parameters
        for cell_size in (1.0, 0.3, 7.0):
            hits = Grid(points, cell_size=cell_size).query_ray(origin, direction, 0.0,
                                                               all_hits=True)
            assert hits.indices.tolist() == [0, 2, 1]
            assert hits.distances.tolist() == expected
        world = DynamicHash(1.0, n_dims=n_dims)
        for index, point in enumerate(points):
            world.insert(index, point, radius=0.0)
        hits = world.query_ray(origin[0], direction[0], all_hits=True)
        assert hits.ids.tolist() == [0, 2, 1]
        assert hits.distances.tolist() == expected


def test_dynamic_knn_with_integer_and_other_ids_returns_wrong_ids():
    """Found by the stateful test over mixed ids: with an id that is not an integer in the
    hash, `query_knn` took the integer ids' keys for slots. Objects 1.0 (slot 0), 0 (slot
    1, key 0) and 2**40 (slot 2, key 2**40) gave [1.0, 1.0] for the two nearest of the
    point at the origin, where both 1.0 and 0 sit; with 2**40 among the nearest,
    IndexError. Expected: each object once, by distance."""
    from spatialhash import DynamicHash

    world = DynamicHash(0.5, n_dims=3)
    world.insert(1.0, [0.0, 0.0, 0.0])
    world.insert(0, [0.0, 0.0, 0.25])
    world.insert(2**40, [0.0, 0.0, 0.0])
    world.insert("far", [9.0, 0.0, 0.0])
    nearest = world.query_knn([0.0, 0.0, 0.0], 4)  # ties by slot: 1.0 before 2**40
    assert list(map(repr, nearest.ids.tolist())) == ["1.0", "1099511627776", "0", "'far'"]
    assert nearest.distances.tolist() == [0.0, 0.0, 0.25, 9.0]
    hits = world.query_ray([0.0, 0.0, -1.0], [0.0, 0.0, 1.0], all_hits=True)
    assert list(map(repr, hits.ids.tolist())) == ["1.0", "1099511627776", "0"]
    assert hits.distances.tolist() == [1.0, 1.0, 1.25]


def test_neighbors_row_takes_negative_indices_as_python_does():
    points = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [5.0, 0.0, 0.0]])
    near = Grid(points, 1.0).query_radius(points, 1.0)
    assert near.row(-1).tolist() == [2]  # the last query's row, not []
    assert near.row(-3).tolist() == near.row(0).tolist() == [0, 1]
    for q in (3, -4):
        with pytest.raises(IndexError, match=rf"`q` must be in \[-3, 3\) for 3 queries; got {q}"):
            near.row(q)
    with pytest.raises(TypeError, match=r"`q` must be an integer; got 1.5"):
        near.row(1.5)


def test_knn_with_a_k_beyond_float64_names_k():
    grid = Grid(np.random.default_rng(0).random((100, 3)), 0.1)
    with pytest.raises(ValueError, match=r"`k` must not exceed the number of points \(100\) "
                                         r"by so much: .* about 10\*\*392 GiB"):
        grid.query_knn(np.zeros((2, 3)), 10**400)


def test_dynamic_hash_with_a_subnormal_cell_size_is_a_clear_error():
    # It leaked a RuntimeWarning (1 / cell_size overflowed), an error under -W error.
    for cell_size in (5e-324, 1 / sys.float_info.max):
        with pytest.raises(ValueError, match=r"`cell_size` is too small: .* has no finite "
                                             r"inverse in float64"):
            spatialhash.DynamicHash(cell_size=cell_size)


def test_zero_dimensional_arrays_are_taken_wherever_a_scalar_is():
    points = np.random.default_rng(1).random((200, 3))
    grid = Grid(points, 0.1)
    r = np.array(0.1)
    assert np.array_equal(grid.query_pairs(r).indices, grid.query_pairs(0.1).indices)
    chunks = [chunk.indices for chunk in grid.iter_pairs(r)]
    assert sum(map(len, chunks)) == len(grid.query_pairs(0.1))
    assert np.array_equal(grid.query_knn(points[:5], np.array(3)).indices,
                          grid.query_knn(points[:5], 3).indices)
    world = spatialhash.DynamicHash(np.array(0.5))
    world.insert(1, [0.1, 0.1, 0.1], category=np.array(2))
    assert world.query_radius([0.0, 0.0, 0.0], np.array(0.5)) == [1]


FLOOR = 2.0**-458  # `_validation.COORDINATE_FLOOR`
TINY_MESSAGE = r"must be 0 or at least 1.34e-138 in magnitude \(squared distances between"


def test_coordinates_whose_squared_distances_underflow_are_refused():
    # Three pairs at distance 0 came out, the true distances being 2e-300 to 3.6e-300 > r.
    points = np.array([[0.0, 0.0, 0.0], [2e-300, 0.0, 0.0], [0.0, 3e-300, 0.0]])
    with pytest.raises(ValueError, match=r"`points` " + TINY_MESSAGE + r".* got 2e-300 at "
                                         r"points\[1, 0\]\. Scale the coordinates up\."):
        Grid(points, 1e-300)
    with pytest.raises(ValueError, match=r"`points` " + TINY_MESSAGE):
        spatialhash.query_pairs(points, 1e-300)
    with pytest.raises(ValueError, match=r"`points` " + TINY_MESSAGE):
        Grid(points, 1.0, box=1.0)  # wrapping leaves them as they are
    # On a periodic axis -2e-300 wraps to 0.0 (the period less 2e-300 rounds to the period):
    # accepted, as the coordinate the kernels compare.
    assert Grid(-points, 1.0, box=1.0).query_pairs(0.0).indices.tolist() == [
        [0, 1], [0, 2], [1, 2]]
    grid = Grid(np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]), 1.0)
    with pytest.raises(ValueError, match=r"`queries` " + TINY_MESSAGE):
        grid.query_knn([[1e-200, 0.0, 0.0]], 1)
    with pytest.raises(ValueError, match=r"`queries` " + TINY_MESSAGE):
        grid.query_radius([[0.0, -1e-150, 0.0]], 1.0)
    with pytest.raises(ValueError, match=r"`origins` " + TINY_MESSAGE):
        grid.query_ray([[0.0, 0.0, 1e-160]], [[1.0, 0.0, 0.0]], 0.1)


def test_coordinates_at_the_floor_give_exact_distances_and_order():
    # Each coordinate 0 or at least the floor: every squared distance is a normal float.
    points = np.array([[0.0, 0.0], [FLOOR, 0.0], [3 * FLOOR, 0.0], [0.0, 2 * FLOOR]])
    grid = Grid(points, 4 * FLOOR)
    pairs = grid.query_pairs(2 * FLOOR, return_distances=True).sorted()
    assert pairs.indices.tolist() == [[0, 1], [0, 3], [1, 2]]
    assert pairs.distances.tolist() == [FLOOR, 2 * FLOOR, 2 * FLOOR]
    nearest = grid.query_knn(np.array([[0.0, 0.0]]), 4)
    assert nearest.indices.tolist() == [[0, 1, 3, 2]]
    assert nearest.distances.tolist() == [[0.0, FLOOR, 2 * FLOOR, 3 * FLOOR]]


def test_dynamic_hash_refuses_coordinates_below_the_floor_and_is_left_unchanged():
    world = spatialhash.DynamicHash(1.0, n_dims=2)
    world.insert(1, [0.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"`lower` " + TINY_MESSAGE):
        world.insert(2, [1e-300, 0.0])
    with pytest.raises(ValueError, match=TINY_MESSAGE):
        world.move(1, [0.0, 1e-300], [1.0, 1.0])  # the buffered path checks it too
    with pytest.raises(ValueError, match=TINY_MESSAGE):
        world.insert_many(np.array([5]), np.array([[2e-300, 0.0]]))
    with pytest.raises(ValueError, match=TINY_MESSAGE):
        world.query_knn([3e-300, 0.0], 1)
    with pytest.raises(ValueError, match=TINY_MESSAGE):
        world.query_radius([0.0, 3e-300], 1.0)
    assert len(world) == 1
    assert [b.tolist() for b in world.bounds(1)] == [[0.0, 0.0], [1.0, 1.0]]
    world.move(1, [FLOOR, 0.0], [1.0, 1.0])  # at the floor: accepted
    assert world.bounds(1)[0].tolist() == [FLOOR, 0.0]
