"""Queries of the grid's own points with each point left out of its own row:
``query_knn(None, k, exclude_self=True)``, ``query_radius(None, r, exclude_self=True)`` and
``count_radius(None, r, exclude_self=True)``, scikit-learn's ``kneighbors()`` and
``radius_neighbors()`` without ``X``.

A point is left out by its index, not by its distance: a duplicate at distance 0 stays.
The oracles below rank the other points directly (no ``k + 1`` search), on dyadic
lattices where duplicates, ties and points at exactly ``r`` are frequent and every
distance is exact, so results are compared for equality.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numba.core.registry import CPUDispatcher

from spatialhash import Grid
from spatialhash._warmup import KERNEL_PACKAGES

import oracles

STEP = 0.125
#: Periodic boxes hold the lattice's range [0, 2) and more; radii stay within half of 2.
PERIODS = (2.0, 4.0)
CELL_SIZES = (0.125, 0.25, 0.5, 1.0, 3.0)


# ---------------------------------------------------------------------- oracles
def other_squared_distances(points, box3):
    """(n, n) squared distances of ``oracles`` among the points, and the points' indices."""
    prepared = oracles.prepare(points, box3)
    return oracles.squared_distances(prepared, prepared, box3), np.arange(len(prepared))


def knn_of_others(points, k, r_max=None, box3=None):
    """The ``k`` nearest other points of each point, by a stable sort on ``(d2, index)``
    with the point's own index taken out; ``(indices, distances, counts)`` padded with -1
    and ``inf``."""
    box3 = np.full(3, np.inf) if box3 is None else box3
    d2, everyone = other_squared_distances(points, box3)
    n = len(everyone)
    max_d2 = np.inf if r_max is None else r_max * r_max
    indices, distances = np.full((n, k), -1, dtype=np.int64), np.full((n, k), np.inf)
    counts = np.zeros(n, dtype=np.int64)
    for row in range(n):
        order = np.argsort(d2[row], kind="stable")
        order = order[(order != row) & (d2[row, order] <= max_d2)][:k]
        counts[row] = order.size
        indices[row, : order.size] = order
        distances[row, : order.size] = np.sqrt(d2[row, order])
    return indices, distances, counts


def radius_of_others(points, r, box3=None):
    """CSR ``(indptr, indices, distances)`` of the other points within ``r`` of each
    point, rows sorted by index."""
    box3 = np.full(3, np.inf) if box3 is None else box3
    d2, everyone = other_squared_distances(points, box3)
    radii = np.broadcast_to(np.asarray(r, dtype=np.float64), everyone.shape)
    hit = (d2 <= (radii * radii)[:, np.newaxis]) & (everyone[:, np.newaxis] != everyone)
    rows, columns = np.nonzero(hit)
    indptr = np.zeros(len(everyone) + 1, dtype=np.int64)
    np.cumsum(hit.sum(axis=1), out=indptr[1:])
    return indptr, columns, np.sqrt(d2[rows, columns])


# ---------------------------------------------------------------------- scenes
@dataclass
class Scene:
    points: np.ndarray
    box: list | None
    periodic: list | None
    cell_size: float
    algorithm: str

    @property
    def box3(self) -> np.ndarray:
        return oracles.periods(self.box, self.periodic, self.points.shape[1])

    def grid(self) -> Grid:
        return Grid(self.points, self.cell_size, box=self.box, periodic=self.periodic,
                    algorithm=self.algorithm)


@st.composite
def scenes(draw) -> Scene:
    """Points on a lattice of step 1/8 in [0, 2) (some moved by a period), few distinct
    positions or many, an open or periodic box (all axes or some)."""
    n_dims = draw(st.integers(1, 3))
    n = draw(st.integers(0, 40))
    spread = draw(st.sampled_from([2, 4, 16]))  # few positions: many duplicates
    ints = draw(arrays(np.int64, (n, n_dims), elements=st.integers(0, spread - 1),
                       fill=st.nothing()))
    points = ints * (2.0 / spread)
    box = flags = None
    if draw(st.booleans()):
        box = draw(st.lists(st.sampled_from(PERIODS), min_size=n_dims, max_size=n_dims))
        flags = draw(st.lists(st.booleans(), min_size=n_dims, max_size=n_dims))
        # Points a period away from the box: the grid wraps them, as the oracle does.
        shift = draw(arrays(np.int64, (n, n_dims), elements=st.integers(-1, 1),
                            fill=st.nothing()))
        points = points + shift * np.where(flags, box, 0.0)
    return Scene(points, box, flags, draw(st.sampled_from(CELL_SIZES)),
                 draw(st.sampled_from(["grid", "brute"])))


radii_values = st.integers(0, 8).map(lambda i: i * STEP)


def random_scene(seed, n_dims, periodic, algorithm, n=300) -> Scene:
    rng = np.random.default_rng(seed)
    points = rng.random((n, n_dims)) * 2.0
    box = [2.0] * n_dims if periodic else None
    return Scene(points, box, None, 0.25, algorithm)


def lattice_scene(seed, n_dims, periodic, algorithm, n=200) -> Scene:
    """Multiples of 1/8 in [0, 2): duplicates and points at exactly ``r`` in every run."""
    rng = np.random.default_rng(seed)
    points = rng.integers(0, 16 if n_dims > 1 else 8, (n, n_dims)) / 8
    box = [2.0] * n_dims if periodic else None
    return Scene(points, box, None, 0.25, algorithm)


SCENE_KINDS = {"random": random_scene, "lattice": lattice_scene}
CASES = [(kind, n_dims, periodic, algorithm) for kind in SCENE_KINDS for n_dims in (1, 2, 3)
         for periodic in (False, True) for algorithm in ("grid", "brute")]


def case_scene(case, seed=0) -> Scene:
    kind, n_dims, periodic, algorithm = case
    return SCENE_KINDS[kind](seed, n_dims, periodic, algorithm)


def assert_knn_equal(result, expected):
    indices, distances, counts = expected
    np.testing.assert_array_equal(result.indices, indices)
    np.testing.assert_array_equal(result.distances, distances)
    np.testing.assert_array_equal(result.counts, counts)


def assert_radius_equal(result, expected, with_distances=True):
    indptr, indices, distances = expected
    np.testing.assert_array_equal(result.indptr, indptr)
    np.testing.assert_array_equal(result.indices, indices)
    if with_distances:
        np.testing.assert_array_equal(result.distances, distances)


# ---------------------------------------------------------------------- against the oracle
@pytest.mark.parametrize("case", CASES, ids=lambda case: "-".join(map(str, case)))
@pytest.mark.parametrize("k", [1, 4, 9])
def test_knn_of_others_matches_oracle(case, k):
    scene = case_scene(case)
    result = scene.grid().query_knn(None, k, exclude_self=True)
    assert result.indices.shape == (len(scene.points), k)
    assert result.n_points == len(scene.points)
    assert_knn_equal(result, knn_of_others(scene.points, k, box3=scene.box3))


@pytest.mark.parametrize("case", CASES, ids=lambda case: "-".join(map(str, case)))
@pytest.mark.parametrize("r_max", [0.0, 0.125, 0.25])
def test_knn_of_others_with_r_max_matches_oracle(case, r_max):
    scene = case_scene(case)
    result = scene.grid().query_knn(None, 5, r_max=r_max, exclude_self=True)
    assert_knn_equal(result, knn_of_others(scene.points, 5, r_max, box3=scene.box3))


@pytest.mark.parametrize("case", CASES, ids=lambda case: "-".join(map(str, case)))
@pytest.mark.parametrize("r", [0.0, 0.125, 0.25])
def test_radius_and_count_of_others_match_oracle(case, r):
    scene = case_scene(case)
    grid = scene.grid()
    expected = radius_of_others(scene.points, r, box3=scene.box3)
    assert_radius_equal(grid.query_radius(None, r, return_distances=True, exclude_self=True),
                        expected)
    assert_radius_equal(grid.query_radius(None, r, exclude_self=True), expected,
                        with_distances=False)
    counts = grid.count_radius(None, r, exclude_self=True)
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts, np.diff(expected[0]))


@given(scene=scenes(), k=st.integers(1, 45), r_max=st.none() | radii_values)
def test_knn_of_others_matches_oracle_on_lattices(scene, k, r_max):
    result = scene.grid().query_knn(None, k, r_max=r_max, exclude_self=True)
    assert_knn_equal(result, knn_of_others(scene.points, k, r_max, box3=scene.box3))


@given(scene=scenes(), r=radii_values, sort=st.booleans())
def test_radius_of_others_matches_oracle_on_lattices(scene, r, sort):
    grid = scene.grid()
    result = grid.query_radius(None, r, return_distances=True, sort=sort, exclude_self=True)
    indptr, indices, distances = radius_of_others(scene.points, r, box3=scene.box3)
    np.testing.assert_array_equal(result.indptr, indptr)
    for q in range(len(result)):
        found, found_distances = result.row(q, return_distances=True)
        order = np.argsort(found, kind="stable")
        np.testing.assert_array_equal(found[order], indices[indptr[q]:indptr[q + 1]])
        np.testing.assert_array_equal(found_distances[order],
                                      distances[indptr[q]:indptr[q + 1]])
    np.testing.assert_array_equal(grid.count_radius(None, r, exclude_self=True),
                                  np.diff(indptr))


@given(scene=scenes(), data=st.data())
def test_radius_of_others_takes_one_radius_per_point(scene, data):
    n = len(scene.points)
    radii = np.array(data.draw(st.lists(st.integers(0, 8), min_size=n, max_size=n))) * STEP
    expected = radius_of_others(scene.points, radii, box3=scene.box3)
    grid = scene.grid()
    assert_radius_equal(grid.query_radius(None, radii, return_distances=True,
                                          exclude_self=True), expected)
    np.testing.assert_array_equal(grid.count_radius(None, radii, exclude_self=True),
                                  np.diff(expected[0]))


# ---------------------------------------------------------------------- duplicates, padding
@pytest.mark.parametrize("algorithm", ["grid", "brute"])
def test_more_duplicates_than_k_give_the_smaller_indices_at_distance_zero(algorithm):
    # Six copies of one point: the k + 1 = 3 nearest of copies 3, 4 and 5 are copies 0, 1
    # and 2, without the point's own index; the k nearest others are the first two.
    points = np.array([[0.5, 0.5]] * 6 + [[1.0, 0.5], [3.0, 3.0]])
    result = Grid(points, 0.5, algorithm=algorithm).query_knn(None, 2, exclude_self=True)
    assert result.indices.tolist() == [[1, 2], [0, 2], [0, 1], [0, 1], [0, 1], [0, 1],
                                       [0, 1], [6, 0]]
    assert result.distances[:6].tolist() == [[0.0, 0.0]] * 6
    assert result.counts.tolist() == [2] * 8
    assert_knn_equal(result, knn_of_others(points, 2))


def test_a_duplicate_at_distance_zero_stays_in_the_row():
    points = np.array([[0.0, 0.0], [0.0, 0.0], [0.25, 0.0]])
    grid = Grid(points, 0.5)
    knn = grid.query_knn(None, 2, exclude_self=True)
    assert knn.indices.tolist() == [[1, 2], [0, 2], [0, 1]]
    assert knn.distances.tolist() == [[0.0, 0.25], [0.0, 0.25], [0.25, 0.25]]
    near = grid.query_radius(None, 0.0, return_distances=True, exclude_self=True)
    assert [row.tolist() for row in near] == [[1], [0], []]
    assert near.distances.tolist() == [0.0, 0.0]
    assert grid.count_radius(None, 0.0, exclude_self=True).tolist() == [1, 1, 0]


@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_k_beyond_the_other_points_pads_with_minus_one_and_inf(n_dims, periodic):
    scene = lattice_scene(3, n_dims, periodic, "grid", n=7)
    result = scene.grid().query_knn(None, 10, exclude_self=True)
    assert result.counts.tolist() == [6] * 7
    assert (result.indices[:, 6:] == -1).all() and np.isinf(result.distances[:, 6:]).all()
    for row in range(7):
        assert sorted(result.indices[row, :6].tolist()) == [j for j in range(7) if j != row]
    assert_knn_equal(result, knn_of_others(scene.points, 10, box3=scene.box3))


def test_one_point_has_no_other_and_no_points_give_no_rows():
    one = Grid([[0.5, 0.5]], 1.0)
    result = one.query_knn(None, 3, exclude_self=True)
    assert result.indices.tolist() == [[-1, -1, -1]]
    assert np.isinf(result.distances).all() and result.counts.tolist() == [0]
    assert [row.tolist() for row in one.query_radius(None, 1.0, exclude_self=True)] == [[]]
    assert one.count_radius(None, 1.0, exclude_self=True).tolist() == [0]
    empty = Grid(np.empty((0, 3)), 1.0)
    assert empty.query_knn(None, 2, exclude_self=True).indices.shape == (0, 2)
    assert empty.query_radius(None, 1.0, exclude_self=True).indptr.tolist() == [0]
    assert empty.count_radius(None, 1.0, exclude_self=True).shape == (0,)


# ---------------------------------------------------------------------- the grid's own points
@pytest.mark.parametrize("case", CASES[:12], ids=lambda case: "-".join(map(str, case)))
def test_queries_none_are_the_grids_points_bit_for_bit(case):
    scene = case_scene(case, seed=4)
    grid = scene.grid()
    for kwargs in ({"sort": True}, {"sort": False}):
        alone = grid.query_radius(None, 0.25, return_distances=True, **kwargs)
        given_points = grid.query_radius(scene.points, 0.25, return_distances=True, **kwargs)
        assert_radius_equal(alone, (given_points.indptr, given_points.indices,
                                    given_points.distances))
    plain = grid.query_knn(scene.points, 4, r_max=0.25)
    assert_knn_equal(grid.query_knn(None, 4, r_max=0.25),
                     (plain.indices, plain.distances, plain.counts))
    np.testing.assert_array_equal(grid.count_radius(None, 0.25),
                                  grid.count_radius(scene.points, 0.25))


def test_unsorted_rows_keep_the_engines_order_less_the_point_itself():
    scene = lattice_scene(6, 3, True, "grid")
    grid = scene.grid()
    everyone = grid.query_radius(None, 0.375, return_distances=True, sort=False)
    others = grid.query_radius(None, 0.375, return_distances=True, sort=False,
                               exclude_self=True)
    for q in range(len(everyone)):
        indices, distances = everyone.row(q, return_distances=True)
        kept = indices != q
        assert (~kept).sum() == 1
        np.testing.assert_array_equal(others.row(q), indices[kept])
        np.testing.assert_array_equal(others.row(q, return_distances=True)[1], distances[kept])


def test_the_points_are_those_the_grid_was_built_on():
    # Points outside the periodic box and a caller's array changed after the build: the
    # queries are the grid's points (wrapped), not the caller's array as it is now.
    points = np.array([[0.25, 0.0], [2.25, 0.5], [-0.5, 0.0], [1.0, 1.0]])
    grid = Grid(points, 0.5, box=2.0)
    expected = knn_of_others(points, 2, box3=oracles.periods(2.0, None, 2))
    points[:] = 100.0
    assert_knn_equal(grid.query_knn(None, 2, exclude_self=True), expected)


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(("queries", "seen"), [
    (np.zeros((5, 2)), r"an array of shape \(5, 2\)"),
    ([[0.0, 0.0]], "a list"),
])
@pytest.mark.parametrize("call", [
    lambda grid, queries: grid.query_knn(queries, 2, exclude_self=True),
    lambda grid, queries: grid.query_radius(queries, 0.5, exclude_self=True),
    lambda grid, queries: grid.count_radius(queries, 0.5, exclude_self=True),
], ids=["query_knn", "query_radius", "count_radius"])
def test_exclude_self_with_queries_given_is_refused(call, queries, seen):
    grid = Grid(np.zeros((3, 2)), 1.0)
    message = (r"`exclude_self` must be False when `queries` are given \(a point is left out "
               r"of its own row only among the grid's own points\); got exclude_self=True "
               rf"and `queries` {seen}\. Pass `queries=None` to query the grid's points\.")
    with pytest.raises(TypeError, match=f"^{message}$"):
        call(grid, queries)


@pytest.mark.parametrize("value", [1, "yes", None])
def test_exclude_self_must_be_a_bool(value):
    grid = Grid(np.zeros((3, 2)), 1.0)
    with pytest.raises(TypeError, match=rf"^`exclude_self` must be a bool; got {value!r}\.$"):
        grid.query_knn(None, 2, exclude_self=value)
    assert grid.query_knn(None, 2, exclude_self=np.True_).counts.tolist() == [2, 2, 2]


def test_a_huge_k_is_refused_for_the_padding_of_the_other_points():
    grid = Grid(np.zeros((3, 2)), 1.0)
    with pytest.raises(ValueError, match=r"^`k` must not exceed the number of points \(2\) "
                                         r"by so much: .* got k = 100000000000 "):
        grid.query_knn(None, 10**11, exclude_self=True)


# ---------------------------------------------------------------------- compile cost
def _signature_count() -> dict[str, int]:
    counts = {}
    for package_name in KERNEL_PACKAGES:
        package = importlib.import_module(package_name)
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package_name}.{info.name}")
            for name, value in vars(module).items():
                if isinstance(value, CPUDispatcher):
                    counts[f"{module.__name__}.{name}"] = len(value.signatures)
    return counts


@pytest.mark.parametrize("box", [None, 2.0])
def test_leaving_points_out_compiles_nothing_new(box):
    points = np.random.default_rng(8).random((50, 3))
    grid = Grid(points, 0.25, box=box, algorithm="grid")
    grid.query_knn(points, 3, r_max=0.5)
    grid.query_radius(points, 0.25, return_distances=True)
    grid.query_radius(points, 0.25)
    grid.count_radius(points, 0.25)
    before = _signature_count()
    grid.query_knn(None, 3, r_max=0.5, exclude_self=True)
    grid.query_radius(None, 0.25, return_distances=True, exclude_self=True)
    grid.query_radius(None, 0.25, exclude_self=True)
    grid.count_radius(None, 0.25, exclude_self=True)
    assert _signature_count() == before


# ---------------------------------------------------------------------- scikit-learn
@pytest.mark.parametrize("n_dims", [1, 2, 3])
@pytest.mark.parametrize("k", [1, 5])
def test_knn_of_others_equals_scikit_learn_kneighbors_without_x(n_dims, k):
    from sklearn import neighbors
    points = np.random.default_rng(n_dims).random((400, n_dims))
    distances, indices = neighbors.NearestNeighbors(n_neighbors=k).fit(points).kneighbors()
    result = Grid(points).query_knn(None, k, exclude_self=True)
    np.testing.assert_array_equal(result.indices, indices)
    np.testing.assert_allclose(result.distances, distances, rtol=1e-12, atol=1e-12)


def test_knn_of_others_equals_scikit_learn_with_duplicates_distances_aside_from_ties():
    # Tied indices may differ (scikit-learn's trees order ties their own way); the
    # distances of each row may not.
    from sklearn import neighbors
    points = lattice_scene(2, 2, False, "grid").points
    model = neighbors.NearestNeighbors(n_neighbors=4, algorithm="kd_tree").fit(points)
    distances, _ = model.kneighbors()
    result = Grid(points, 0.25).query_knn(None, 4, exclude_self=True)
    np.testing.assert_array_equal(result.distances, distances)


@pytest.mark.parametrize("kind", ["random", "lattice"])
def test_radius_of_others_equals_scikit_learn_radius_neighbors_without_x(kind):
    from sklearn import neighbors
    points = SCENE_KINDS[kind](1, 3, False, "grid").points
    r = 0.25
    model = neighbors.NearestNeighbors(radius=r, algorithm="kd_tree").fit(points)
    distances, indices = model.radius_neighbors(sort_results=False)
    result = Grid(points, r).query_radius(None, r, return_distances=True, exclude_self=True)
    assert len(result) == len(indices)
    for q, (row_indices, row_distances) in enumerate(zip(indices, distances, strict=True)):
        order = np.argsort(row_indices)
        found, found_distances = result.row(q, return_distances=True)
        np.testing.assert_array_equal(found, row_indices[order])
        np.testing.assert_allclose(found_distances, row_distances[order], rtol=1e-12)
