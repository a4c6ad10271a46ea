"""Every query against its brute-force oracle, on exact dyadic lattices.

Coordinates are multiples of 0.25 in a small range, so distances are exact, ties are
frequent and pairs at exactly ``distance == r`` are common: the grid must decide each of
them exactly as the oracle does. Results are compared for equality, never closeness.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from spatialhash import Grid, KNearest, Neighbors, Pairs

import oracles

STEP = 0.25
#: Cell sizes smaller than, equal to and larger than the radii drawn (0 .. 2). On the
#: periodic boxes (4 and 8) they give odd and even numbers of cells per axis, from 1 to 63.
CELL_SIZES = (0.125, 0.25, 0.375, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
PERIODS = (4.0, 8.0)


@dataclass
class Scene:
    points: np.ndarray
    box: list | None
    periodic: list | None
    cell_size: float
    algorithm: str

    @property
    def n_dims(self) -> int:
        return self.points.shape[1]

    @property
    def box3(self) -> np.ndarray:
        return oracles.periods(self.box, self.periodic, self.n_dims)

    def grid(self, **changes) -> Grid:
        options = {"cell_size": self.cell_size, "box": self.box, "periodic": self.periodic,
                   "algorithm": self.algorithm} | changes
        points = options.pop("points", self.points)
        return Grid(points, options.pop("cell_size"), **options)


def lattice(draw, shape, spread):
    """Multiples of STEP in ``[-spread, spread] * STEP``."""
    ints = draw(arrays(np.int64, shape, elements=st.integers(-spread, spread),
                       fill=st.nothing()))
    return ints * STEP


@st.composite
def scenes(draw, max_points: int = 40, periodic: bool | None = None) -> Scene:
    """Points, box and grid options; ``periodic``: True always, False never, None either."""
    n_dims = draw(st.integers(1, 3))
    n = draw(st.integers(0, max_points))
    spread = draw(st.sampled_from([2, 4, 8, 16]))
    points = lattice(draw, (n, n_dims), spread)
    box = flags = None
    if periodic or (periodic is None and draw(st.booleans())):
        box = draw(st.lists(st.sampled_from(PERIODS), min_size=n_dims, max_size=n_dims))
        flags = draw(st.lists(st.booleans(), min_size=n_dims, max_size=n_dims))
    cell_size = draw(st.sampled_from(CELL_SIZES))
    algorithm = draw(st.sampled_from(["grid", "brute"]))
    return Scene(points, box, flags, cell_size, algorithm)


def queries_for(draw, scene: Scene, max_queries: int = 12) -> np.ndarray:
    """Query positions on the same lattice, some outside the points' range."""
    m = draw(st.integers(0, max_queries))
    return lattice(draw, (m, scene.n_dims), 12)


#: Radii up to 2.0: at most half of the smallest period.
radii_values = st.integers(0, 8).map(lambda i: i * STEP)


# ---------------------------------------------------------------------- comparing
def sorted_pairs(result: Pairs):
    """``(indices int64, distances or None)`` of ``result`` in lexicographic order."""
    ordered = result.sorted()
    return ordered.indices.astype(np.int64), ordered.distances


def assert_pairs_equal(result: Pairs, expected_indices, expected_distances=None):
    indices, distances = sorted_pairs(result)
    np.testing.assert_array_equal(indices, expected_indices)
    if expected_distances is not None:
        np.testing.assert_array_equal(distances, expected_distances)


def assert_neighbors_equal(result: Neighbors, indptr, indices, distances=None):
    np.testing.assert_array_equal(result.indptr, indptr)
    np.testing.assert_array_equal(result.indices, indices)
    if distances is not None:
        np.testing.assert_array_equal(result.distances, distances)


def rows_as_sets(result: Neighbors) -> list[dict[int, float | None]]:
    """Each row as {index: distance} (order within a row dropped)."""
    rows = []
    for q in range(len(result)):
        span = slice(result.indptr[q], result.indptr[q + 1])
        distances = (None,) * (span.stop - span.start) if result.distances is None else (
            result.distances[span].tolist())
        rows.append(dict(zip(result.indices[span].tolist(), distances, strict=True)))
    return rows


# ---------------------------------------------------------------------- pairs
@given(scene=scenes(), r=radii_values)
def test_query_pairs_matches_oracle(scene, r):
    result = scene.grid().query_pairs(r, return_distances=True)
    expected, distances = oracles.pairs(scene.points, r, box3=scene.box3)
    assert isinstance(result, Pairs)
    assert result.shape == (len(scene.points), len(scene.points))
    assert result.indices.dtype == np.int32 and result.indices.shape == (len(expected), 2)
    assert result.distances.dtype == np.float64
    assert (result.indices[:, 0] < result.indices[:, 1]).all()
    assert_pairs_equal(result, expected, distances)


@given(scene=scenes(), r=radii_values)
def test_query_pairs_without_distances_has_same_indices(scene, r):
    grid = scene.grid()
    plain = grid.query_pairs(r)
    with_distances = grid.query_pairs(r, return_distances=True)
    assert plain.distances is None
    np.testing.assert_array_equal(plain.indices, with_distances.indices)


@given(scene=scenes(), data=st.data())
def test_query_pairs_radii_matches_oracle(scene, data):
    n = len(scene.points)
    radii = np.array(data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))) * STEP
    result = scene.grid().query_pairs(radii=radii, return_distances=True)
    expected, distances = oracles.pairs(scene.points, radii=radii, box3=scene.box3)
    assert_pairs_equal(result, expected, distances)


@given(scene=scenes(), r=radii_values, data=st.data())
def test_query_pairs_with_queries_matches_oracle(scene, r, data):
    queries = queries_for(data.draw, scene)
    result = scene.grid().query_pairs(r, queries=queries, return_distances=True)
    indptr, indices, distances = oracles.radius(scene.points, queries, r, box3=scene.box3)
    rows = np.repeat(np.arange(len(queries)), np.diff(indptr))
    assert result.shape == (len(queries), len(scene.points))
    assert_pairs_equal(result, np.column_stack([rows, indices]).reshape(-1, 2), distances)


@given(n_dims=st.integers(2, 3), n=st.integers(1, 100), periodic_axis=st.integers(0, 2),
       periods=st.lists(st.sampled_from(PERIODS), min_size=3, max_size=3),
       cell_size=st.sampled_from([0.375, 0.5, 0.75]), r=st.integers(3, 8).map(lambda i: i * STEP),
       seed=st.integers(0, 2**32 - 1))
def test_query_pairs_partly_periodic_matches_oracle(n_dims, n, periodic_axis, periods,
                                                    cell_size, r, seed):
    """One periodic axis among open ones, many cells along it and a reach of 1 to 3 cells:
    the mix where pair searches have been seen to meet a pair across the boundary twice.
    Lattice points come from a seeded generator (fast to draw, so 50 examples are cheap)."""
    rng = np.random.default_rng(seed)
    points = rng.integers(-8, 9, size=(n, n_dims)) * STEP
    periodic = [axis == periodic_axis % n_dims for axis in range(n_dims)]
    box = periods[:n_dims]
    box3 = oracles.periods(box, periodic, n_dims)
    grid = Grid(points, cell_size, box=box, periodic=periodic, algorithm="grid")
    assert_pairs_equal(grid.query_pairs(r, return_distances=True),
                       *oracles.pairs(points, r, box3=box3))
    radii = rng.integers(0, 5, size=n) * STEP
    assert_pairs_equal(grid.query_pairs(radii=radii, return_distances=True),
                       *oracles.pairs(points, radii=radii, box3=box3))


@given(scene=scenes(), r=radii_values, chunk_size=st.sampled_from([1, 2, 5, 64, 1 << 22]),
       with_radii=st.booleans())
def test_iter_pairs_chunks_concatenate_to_query_pairs(scene, r, chunk_size, with_radii):
    grid = scene.grid()
    kwargs = {"radii": np.full(len(scene.points), r / 2)} if with_radii else {"r": r}
    whole = grid.query_pairs(return_distances=True, **kwargs)
    chunks = list(grid.iter_pairs(chunk_size=chunk_size, return_distances=True, **kwargs))
    assert len(chunks) >= 1
    assert all(chunk.shape == whole.shape for chunk in chunks)
    np.testing.assert_array_equal(
        np.concatenate([chunk.indices for chunk in chunks]).reshape(-1, 2), whole.indices)
    np.testing.assert_array_equal(
        np.concatenate([chunk.distances for chunk in chunks]), whole.distances)
    if chunk_size >= len(whole):
        assert len(chunks) == 1
    # A chunk holds at most `chunk_size` pairs, or the pairs found from one cell: each of
    # them has a point in that cell.
    state = grid.state
    cell_of = np.repeat(np.arange(len(state.cell_start) - 1), np.diff(state.cell_start))
    cell_of_point = np.empty(len(state.order), np.int64)
    cell_of_point[state.order] = cell_of
    for chunk in chunks:
        if len(chunk) > chunk_size:
            cells = cell_of_point[chunk.indices]
            shared = set(cells[0].tolist())
            for row in cells.tolist():
                shared &= set(row)
            assert shared, cells


def test_iter_pairs_chunk_size_one_splits_by_cell():
    """With one pair a chunk, each chunk holds the pairs found from one cell."""
    points = np.array([[0.0], [0.5], [3.0], [3.5], [6.125], [6.25], [6.5]])
    grid = Grid(points, 1.0, algorithm="grid")
    chunks = list(grid.iter_pairs(0.5, chunk_size=1))
    assert [len(chunk) for chunk in chunks] == [1, 1, 3]
    np.testing.assert_array_equal(
        np.concatenate([chunk.indices for chunk in chunks]), grid.query_pairs(0.5).indices)


# ---------------------------------------------------------------------- radius
def draw_radius(data, n_queries: int, per_query: bool):
    """One radius for all queries, or one per query."""
    if per_query:
        return np.array(data.draw(st.lists(radii_values, min_size=n_queries,
                                           max_size=n_queries)), dtype=np.float64)
    return data.draw(radii_values)


@given(scene=scenes(), data=st.data(), per_query=st.booleans())
def test_query_radius_matches_oracle(scene, data, per_query):
    queries = queries_for(data.draw, scene)
    r = draw_radius(data, len(queries), per_query)
    result = scene.grid().query_radius(queries, r, return_distances=True)
    expected = oracles.radius(scene.points, queries, r, box3=scene.box3)
    assert isinstance(result, Neighbors)
    assert result.indptr.dtype == np.int64 and result.indices.dtype == np.int32
    assert len(result) == len(queries) and result.n_points == len(scene.points)
    assert_neighbors_equal(result, *expected)


@given(scene=scenes(), r=radii_values, data=st.data())
def test_query_radius_unsorted_has_same_rows(scene, r, data):
    queries = queries_for(data.draw, scene)
    grid = scene.grid()
    ordered = grid.query_radius(queries, r, return_distances=True)
    unordered = grid.query_radius(queries, r, return_distances=True, sort=False)
    plain = grid.query_radius(queries, r)
    assert plain.distances is None
    np.testing.assert_array_equal(plain.indices, ordered.indices)
    np.testing.assert_array_equal(unordered.indptr, ordered.indptr)
    assert rows_as_sets(unordered) == rows_as_sets(ordered)


@given(scene=scenes(), data=st.data(), per_query=st.booleans())
def test_count_radius_matches_oracle(scene, data, per_query):
    queries = queries_for(data.draw, scene)
    r = draw_radius(data, len(queries), per_query)
    counts = scene.grid().count_radius(queries, r)
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts, oracles.count(scene.points, queries, r,
                                                        box3=scene.box3))


# ---------------------------------------------------------------------- knn
@given(scene=scenes(max_points=80), data=st.data(), k=st.integers(1, 45),
       r_max=st.none() | st.integers(0, 40).map(lambda i: i * STEP))
def test_query_knn_matches_oracle(scene, data, k, r_max):
    queries = queries_for(data.draw, scene)
    result = scene.grid().query_knn(queries, k, r_max=r_max)
    indices, distances, counts = oracles.knn(scene.points, queries, k, r_max, box3=scene.box3)
    assert isinstance(result, KNearest)
    assert result.indices.shape == result.distances.shape == (len(queries), k)
    assert result.indices.dtype == np.int32 and result.counts.dtype == np.int64
    np.testing.assert_array_equal(result.counts, counts)
    np.testing.assert_array_equal(result.distances, distances)
    np.testing.assert_array_equal(result.indices, indices)


@given(n_dims=st.integers(1, 3), n=st.integers(1, 120), k=st.integers(1, 6),
       periods=st.lists(st.sampled_from(PERIODS), min_size=3, max_size=3),
       cell_size=st.sampled_from([1.5, 3.0, 1.9, 0.9, 0.75, 0.5]),
       seed=st.integers(0, 2**32 - 1))
def test_query_knn_periodic_matches_oracle(n_dims, n, k, periods, cell_size, seed):
    """Periodic boxes with many points, so the ring search runs (rather than a full scan)
    across the boundary; cell sizes that tile the boxes of 4 and 8 with even numbers of
    cells (2, 4, 8, 10) as well as odd ones. Lattice points come from a seeded generator
    (elementwise drawing of ~100 points makes hypothesis, not the grid, the bottleneck)."""
    rng = np.random.default_rng(seed)
    points = rng.integers(-16, 17, size=(n, n_dims)) * STEP
    queries = rng.integers(-20, 21, size=(10, n_dims)) * STEP
    box = periods[:n_dims]
    box3 = oracles.periods(box, None, n_dims)
    result = Grid(points, cell_size, box=box, algorithm="grid").query_knn(queries, k)
    indices, distances, _ = oracles.knn(points, queries, k, box3=box3)
    np.testing.assert_array_equal(result.distances, distances)
    np.testing.assert_array_equal(result.indices, indices)


@pytest.mark.parametrize("n_dims", [2, 3])
@pytest.mark.parametrize("box", [None, 3.0])
@pytest.mark.parametrize("r_max", [None, 0.25])
def test_query_knn_on_dense_lattices_matches_oracle(n_dims, box, r_max):
    # Dense grids of many occupied cells, queries inside them and on their edges: rings 0
    # and 1 are read as one gathered block of cells (and, on periodic axes of at least five
    # cells, without minimum images). Dyadic coordinates make ties and cell faces common.
    rng = np.random.default_rng(31 + n_dims)
    n = 3000 if n_dims == 3 else 800
    points = rng.integers(0, 24, size=(n, n_dims)) * 0.125
    queries = np.concatenate([rng.integers(-2, 26, size=(300, n_dims)) * 0.125,
                              points[:50]])
    box3 = None if box is None else oracles.periods(box, None, n_dims)
    for cell_size in (0.25, 0.375, 0.5):
        grid = Grid(points, cell_size, box=box, algorithm="grid")
        result = grid.query_knn(queries, 9, r_max=r_max)
        indices, distances, counts = oracles.knn(points, queries, 9, r_max, box3=box3)
        np.testing.assert_array_equal(result.counts, counts)
        np.testing.assert_array_equal(result.distances, distances)
        np.testing.assert_array_equal(result.indices, indices)


@given(scene=scenes(max_points=12), data=st.data())
def test_query_knn_k_larger_than_n_returns_every_point(scene, data):
    queries = queries_for(data.draw, scene)
    n = len(scene.points)
    result = scene.grid().query_knn(queries, n + 3)
    np.testing.assert_array_equal(result.counts, np.full(len(queries), n))
    assert (result.indices[:, n:] == -1).all() and np.isinf(result.distances[:, n:]).all()
    for row in result.indices[:, :n]:
        np.testing.assert_array_equal(np.sort(row), np.arange(n))


# ---------------------------------------------------------------------- boxes
@given(scene=scenes(), data=st.data())
def test_query_box_matches_oracle(scene, data):
    m = data.draw(st.integers(0, 12))
    lower = lattice(data.draw, (m, scene.n_dims), 12)
    # Widths up to 10: some boxes reach across a period boundary or cover a whole period.
    width = data.draw(arrays(np.int64, (m, scene.n_dims), elements=st.integers(0, 40))) * STEP
    upper = lower + width
    result = scene.grid().query_box(lower, upper)
    assert result.distances is None and len(result) == m
    assert_neighbors_equal(result, *oracles.box(scene.points, lower, upper, box3=scene.box3))
    unordered = scene.grid().query_box(lower, upper, sort=False)
    assert rows_as_sets(unordered) == rows_as_sets(result)


@given(scene=scenes(), data=st.data())
def test_query_box_single_box_as_1d_arrays(scene, data):
    lower = lattice(data.draw, (scene.n_dims,), 8)
    upper = lower + np.abs(lattice(data.draw, (scene.n_dims,), 8))
    result = scene.grid().query_box(lower, upper)
    assert len(result) == 1
    assert_neighbors_equal(result, *oracles.box(scene.points, lower, upper, box3=scene.box3))


# ---------------------------------------------------------------------- invariance
@given(scene=scenes(), r=radii_values, data=st.data())
def test_results_do_not_depend_on_cell_size_or_algorithm(scene, r, data):
    queries = queries_for(data.draw, scene)
    lower, upper = queries - 1.0, queries + 0.5
    answers = []
    for options in ({"cell_size": size, "algorithm": "grid"} for size in CELL_SIZES):
        answers.append(_all_answers(scene.grid(**options), r, queries, lower, upper))
    answers.append(_all_answers(scene.grid(algorithm="brute"), r, queries, lower, upper))
    answers.append(_all_answers(scene.grid(cell_size=None, algorithm="grid"), r, queries,
                                lower, upper))
    for other in answers[1:]:
        for got, expected in zip(other, answers[0], strict=True):
            np.testing.assert_array_equal(got, expected)


def _all_answers(grid, r, queries, lower, upper):
    pair_indices, pair_distances = sorted_pairs(grid.query_pairs(r, return_distances=True))
    neighbors = grid.query_radius(queries, r, return_distances=True)
    nearest = grid.query_knn(queries, 4)
    boxes = grid.query_box(lower, upper) if len(queries) else None
    box_parts = (boxes.indptr, boxes.indices) if boxes is not None else ()
    return (pair_indices, pair_distances, neighbors.indptr, neighbors.indices,
            neighbors.distances, nearest.indices, nearest.distances, *box_parts)


@given(scene=scenes(), r=radii_values, data=st.data())
def test_results_invariant_to_translation_of_open_axes(scene, r, data):
    queries = queries_for(data.draw, scene)
    open_axes = ~np.asarray(scene.box3[: scene.n_dims] < np.inf)
    shift = data.draw(arrays(np.int64, scene.n_dims, elements=st.integers(-4096, 4096)))
    shift = shift * STEP * open_axes
    lower, upper = queries - 1.0, queries + 0.75
    base = _all_answers(scene.grid(), r, queries, lower, upper)
    moved = _all_answers(scene.grid(points=scene.points + shift), r, queries + shift,
                         lower + shift, upper + shift)
    for got, expected in zip(moved, base, strict=True):
        np.testing.assert_array_equal(got, expected)


@given(scene=scenes(), r=radii_values, data=st.data())
def test_results_invariant_to_permutation_of_points(scene, r, data):
    n = len(scene.points)
    permutation = np.array(data.draw(st.permutations(range(n))), dtype=np.int64)
    queries = queries_for(data.draw, scene)
    grid, shuffled = scene.grid(), scene.grid(points=scene.points[permutation])

    base_pairs = grid.query_pairs(r, return_distances=True)
    moved = shuffled.query_pairs(r, return_distances=True)
    mapped = np.sort(permutation[moved.indices], axis=1).reshape(-1, 2)
    assert_pairs_equal(Pairs(mapped, moved.distances, moved.shape), *sorted_pairs(base_pairs))

    base_rows = grid.query_radius(queries, r, return_distances=True)
    moved_rows = shuffled.query_radius(queries, r, return_distances=True)
    remapped = Neighbors(moved_rows.indptr, permutation[moved_rows.indices],
                         moved_rows.distances, n)
    assert rows_as_sets(remapped) == rows_as_sets(base_rows)

    # Ties are broken by index, which the permutation changes: compare distances, and
    # check that the points named are at the distances reported.
    base_knn, moved_knn = grid.query_knn(queries, 5), shuffled.query_knn(queries, 5)
    np.testing.assert_array_equal(moved_knn.distances, base_knn.distances)
    np.testing.assert_array_equal(moved_knn.counts, base_knn.counts)
    points3 = oracles.prepare(scene.points, scene.box3)
    queries3 = oracles.prepare(queries, scene.box3)
    for q, (row, count) in enumerate(zip(moved_knn.indices, moved_knn.counts, strict=True)):
        named = permutation[row[:count]]
        d2 = oracles.squared_distances(queries3[q : q + 1], points3[named], scene.box3)[0]
        np.testing.assert_array_equal(np.sqrt(d2), base_knn.distances[q, :count])


# ---------------------------------------------------------------------- seed contract
def assert_close(got, expected):
    """Distances on random (inexact) data: the oracle uses the kernels' arithmetic
    (``(a - b) - box``), so they agree bit for bit here too."""
    np.testing.assert_array_equal(got, expected)


def test_seed_contract_random_data(seed, rng):
    """Random (non-lattice) data for each seed 0..99: every query agrees with its oracle.

    Indices and distances must be equal, bit for bit.
    """
    n_dims = 1 + seed % 3
    periodic = seed % 2 == 1
    points = rng.random((int(rng.integers(0, 60)), n_dims))
    queries = rng.random((7, n_dims)) * 1.2 - 0.1
    box = 1.0 if periodic else None
    box3 = oracles.periods(box, None, n_dims)
    r = float(rng.uniform(0.0, 0.5))
    grid = Grid(points, float(rng.choice([0.05, 0.1, 0.3])), box=box, algorithm="grid")

    got_pairs = grid.query_pairs(r, return_distances=True).sorted()
    expected_pairs, expected_distances = oracles.pairs(points, r, box3=box3)
    np.testing.assert_array_equal(got_pairs.indices, expected_pairs)
    assert_close(got_pairs.distances, expected_distances)

    neighbors = grid.query_radius(queries, r, return_distances=True)
    indptr, indices, distances = oracles.radius(points, queries, r, box3=box3)
    assert_neighbors_equal(neighbors, indptr, indices)
    assert_close(neighbors.distances, distances)

    nearest = grid.query_knn(queries, 6, r_max=0.4)
    expected = oracles.knn(points, queries, 6, 0.4, box3=box3)
    np.testing.assert_array_equal(nearest.indices, expected[0])
    assert_close(nearest.distances, expected[1])
    np.testing.assert_array_equal(nearest.counts, expected[2])

    lower = queries - 0.2
    assert_neighbors_equal(grid.query_box(lower, lower + 0.3),
                           *oracles.box(points, lower, lower + 0.3, box3=box3))


@pytest.mark.slow
@pytest.mark.parametrize("n_dims", [1, 2, 3])
@pytest.mark.parametrize("box", [None, 1.0])
def test_large_random_clouds_match_oracle(n_dims, box):
    rng = np.random.default_rng(n_dims)
    points = rng.random((5000, n_dims))
    queries = rng.random((500, n_dims))
    box3 = oracles.periods(box, None, n_dims)
    r = 0.02 if n_dims == 3 else 0.005
    grid = Grid(points, r, box=box)
    got_pairs = grid.query_pairs(r, return_distances=True).sorted()
    expected_pairs, expected_distances = oracles.pairs(points, r, box3=box3)
    np.testing.assert_array_equal(got_pairs.indices, expected_pairs)
    assert_close(got_pairs.distances, expected_distances)
    neighbors = grid.query_radius(queries, 4 * r, return_distances=True)
    indptr, indices, distances = oracles.radius(points, queries, 4 * r, box3=box3)
    assert_neighbors_equal(neighbors, indptr, indices)
    assert_close(neighbors.distances, distances)
    result = grid.query_knn(queries, 10)
    expected = oracles.knn(points, queries, 10, box3=box3)
    np.testing.assert_array_equal(result.indices, expected[0])
    assert_close(result.distances, expected[1])
