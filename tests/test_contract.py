"""The contract of the batch grid: what every engine answering `Grid`'s queries must do.

The ``engine`` fixture is a factory ``engine(points, cell_size=None, *, box=None,
periodic=None)`` that returns an object with `Grid`'s query API (``query_pairs``,
``iter_pairs``, ``query_radius``, ``count_radius``, ``query_knn``, ``query_box``,
``query_ray``) and its result types. Each test takes it and checks one promise of the
semantics of docs/semantics.md: closed balls, pairs once, CSR
rows, exact k nearest, closed boxes, periodic boxes, empty inputs, index dtypes,
determinism, invariances, untouched inputs, duplicate points, rays. The fixture runs every
test on each engine of `ENGINES` that offers what the test needs.

Adding an engine (a Dask grid, a CUDA grid) is one entry in `ENGINES`: a name and a
factory with that signature; every test then runs on it too. An engine that offers only
part of the API declares what it lacks in `LACKS`, by the names of `FEATURES` (methods,
one ``r`` per query, a cell size, ...). Each test names the features it uses with
``@pytest.mark.needs(...)``, and `pytest_generate_tests` pairs it only with the engines
that offer them all: a test an engine cannot run is not generated for it, rather than
skipped (and one that calls a method without naming it fails where the method is
missing). So that an engine keeps every promise its features allow, the part of a
promise that needs a feature is a test of its own (the `query_box` rows of an invariance
beside its pairs, radius and k-nearest answers, say). Cell sizes come from a
``cell_sizes`` mark, not ``parametrize``: an engine without a cell size runs such a test
once. Periodic boxes come from the `boxes` decorator, likewise: an engine without them
runs such a test with ``box=None`` only, and the hypothesis scenes of such an engine are
open (`scenes`). `KNOWN_BUGS` turns the combinations of a known bug into strict xfails.
One test does not take the fixture: the engines named in pairs in `THREAD_TWINS` differ
only in their thread count and must give the same bytes.

The Dask engine (``"dask"``, when the ``dask`` extra is installed) answers through
``dask_adapter.py``, on Dask's synchronous scheduler, its points cut into tiles, with a
smaller share of the hypothesis examples (`EXAMPLES`).

The Warp engine on Warp's CPU device (``"warp-cpu"``, ``Grid(..., device="warp-cpu")``,
when warp-lang is installed) runs the kernels the GPU runs, with every feature of
`FEATURES`. With ``SPATIALHASH_TEST_CUDA=1`` the same engine on a CUDA GPU
(``"warp-cuda"``) runs the suite too (`benchmarks/gpu_check.py`).

The dynamic hash (``"dynamic"``) answers through ``dynamic_adapter.py``: a `DynamicHash`
holding the points as objects whose ids are their indices, one hash query per row of
queries, pairs as overlapping spheres; it has no periodic boxes, chunks of pairs, rays or
checks at construction (`LACKS`).

Answers are compared with the brute-force references of ``oracles.py`` (the kernels'
arithmetic, so exact inputs agree bit for bit) on coordinates that are multiples of a
power of two: distances are exact, ties and points at exactly ``distance == r`` are
common, and every comparison is for equality.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import ray_oracles
from dynamic_adapter import DynamicGrid
from spatialhash import Grid, KNearest, Neighbors, Pairs, RayHits

import oracles

#: Every engine the contract runs on: a name and a factory
#: ``(points, cell_size=None, *, box=None, periodic=None) -> engine``.
ENGINES = {
    "grid-1-thread": functools.partial(Grid, algorithm="grid", n_threads=1),
    "grid": functools.partial(Grid, algorithm="grid"),
    "brute-1-thread": functools.partial(Grid, algorithm="brute", n_threads=1),
    "brute": functools.partial(Grid, algorithm="brute"),
}
#: The engines of `Grid` itself.
CPU_ENGINES = list(ENGINES)
#: A `DynamicHash` of the points (``dynamic_adapter.py``).
ENGINES["dynamic"] = DynamicGrid
#: The Dask engine, when the ``dask`` extra is installed (its absence is no error here).
if all(importlib.util.find_spec(name) for name in ("dask", "pandas", "pyarrow")):
    from dask_adapter import DaskGrid

    ENGINES["dask"] = DaskGrid
#: The Warp engine, compiled by Warp for the CPU, when warp-lang (the ``gpu`` extra) is
#: installed.
if importlib.util.find_spec("warp"):
    ENGINES["warp-cpu"] = functools.partial(Grid, algorithm="grid", device="warp-cpu")
    #: The same engine on a CUDA GPU, where Warp finds one (`benchmarks/gpu_check.py`).
    if os.environ.get("SPATIALHASH_TEST_CUDA") == "1":
        ENGINES["warp-cuda"] = functools.partial(Grid, algorithm="grid", device="cuda")

#: What a test can need and an engine can lack: methods of `Grid` (``"query_knn"``
#: included: every engine but one has it); ``"per-query
#: radii"``, an array of one ``r`` per query in `query_radius` and `count_radius`;
#: ``"cell_size"``, a cell size the engine's index uses; ``"checks at construction"``,
#: points checked when the engine is made, with `Grid`'s messages; ``"fast queries"``,
#: queries of microseconds on small inputs, which the tests making 20 queries or more
#: need to stay quick; ``"periodic"``, a periodic box (``box`` and ``periodic``).
FEATURES = frozenset({"iter_pairs", "query_knn", "query_box", "query_ray", "per-query radii",
                      "cell_size", "checks at construction", "fast queries", "periodic"})
#: What each engine lacks of `FEATURES`; an engine not named here offers all of them.
LACKS = {
    # Pairs, radius and k-nearest queries, one `r` for all queries. No cell size: each
    # tile's grid has the search's reach as its cell. Points are checked block by block
    # when a query reads them, and an error names the block. A query builds and runs a
    # Dask graph: 30 to 100 ms, whatever its size.
    "dask": frozenset({"iter_pairs", "query_box", "query_ray", "per-query radii",
                       "cell_size", "checks at construction", "fast queries"}),
    # Radius, k-nearest, box and pair queries, one hash query per row; no periodic box,
    # no chunks of pairs. Rays: `DynamicHash` normalizes a direction by its norm alone,
    # `Grid` (and `ray_oracles.py`) by its largest component first, and distances along
    # oblique rays differ in the last bit (in `test_rays_match_the_oracle`, even with the
    # directions normalized as `Grid` does before the hash's own step). Points are checked
    # when inserted, with the dynamic hash's messages.
    "dynamic": frozenset({"iter_pairs", "query_ray", "checks at construction", "periodic"}),
    # Every feature: the functions over pairs, neighbours and ray hits take a Warp
    # function there and are no feature here (tests/test_warp_functions.py compares them
    # with the CPU engine's); neighbour lists are not on it.
    "warp-cpu": frozenset(),
}
if "warp-cuda" in ENGINES:
    LACKS["warp-cuda"] = LACKS["warp-cpu"]
assert all(lacks <= FEATURES for lacks in LACKS.values()), "see `FEATURES`"
#: Known bugs, by (test, engine): that combination runs as a strict xfail, so the fix
#: shows (as an unexpected pass) and the entry goes.
KNOWN_BUGS: dict[tuple[str, str], str] = {}
#: Engines that differ only in their thread count: their outputs are the same, byte for
#: byte, row order included.
THREAD_TWINS = [("grid-1-thread", "grid"), ("brute-1-thread", "brute")]

#: Examples per property and engine: the profile's count shared among the engines that
#: run on the CPU; the Dask engine takes a fifth of such a share (each of its queries
#: builds and runs a Dask graph: 30 to 100 ms, even on a few points).
EXAMPLES = {name: max(10, settings.default.max_examples // len(CPU_ENGINES))
            for name in CPU_ENGINES}
EXAMPLES["dynamic"] = EXAMPLES["grid"]
if "warp-cpu" in ENGINES:
    EXAMPLES["warp-cpu"] = EXAMPLES["grid"]
if "warp-cuda" in ENGINES:
    EXAMPLES["warp-cuda"] = EXAMPLES["grid"]
if "dask" in ENGINES:
    EXAMPLES["dask"] = max(2, EXAMPLES["grid"] // 5)

STEP = 0.25
#: Just above 1.25, exactly representable: a point this far away is outside a ball of 1.25.
BEYOND = 1.25 + 2.0**-40
#: Cell sizes below, at and above the radii the tests ask for; None is the default size.
CELL_SIZES = (None, 0.375, 0.625, 1.25, 2.5)


def boxes(*values):
    """The boxes a test taking ``engine`` and ``box`` runs with: each of ``values`` on an
    engine that offers ``"periodic"``, the open ones (None) alone on one that lacks it
    (read by `pytest_generate_tests`; an attribute rather than a mark, so that no mark
    is registered for it)."""
    def attach(test):
        test.boxes = values
        return test
    return attach


def pytest_generate_tests(metafunc):
    """Run each test taking ``engine`` on every engine that offers the features named by
    the test's ``needs`` marks; with a ``cell_sizes`` mark, at each of its cell sizes (an
    engine lacking ``"cell_size"`` runs the test once, with None); with `boxes`, with each
    of its boxes (an engine lacking ``"periodic"`` with None only)."""
    if "engine" not in metafunc.fixturenames:
        return
    needs = {feature for mark in metafunc.definition.iter_markers("needs")
             for feature in mark.args}
    assert needs <= FEATURES, f"unknown features {needs - FEATURES}: see `FEATURES`"
    names = [name for name in ENGINES if not needs & LACKS.get(name, frozenset())]
    sizes = metafunc.definition.get_closest_marker("cell_sizes")
    box_values = getattr(metafunc.function, "boxes", None)
    params = []
    for name in names:
        bug = KNOWN_BUGS.get((metafunc.function.__name__, name))
        marks = () if bug is None else (pytest.mark.xfail(reason=bug, strict=True),)
        lacks = LACKS.get(name, frozenset())
        combinations = [(name,)]
        if sizes is not None:
            cell_sizes = (None,) if "cell_size" in lacks else sizes.args
            combinations = [(*done, size) for done in combinations for size in cell_sizes]
        if box_values is not None:
            engine_boxes = [box for box in box_values if box is None or "periodic" not in lacks]
            combinations = [(*done, box) for done in combinations for box in engine_boxes]
        params += [pytest.param(*combination, marks=marks) for combination in combinations]
    argnames = (["engine"] + (["cell_size"] if sizes is not None else [])
                + (["box"] if box_values is not None else []))
    metafunc.parametrize(argnames, params, indirect=["engine"], scope="module")


@pytest.fixture(scope="module")
def engine(request):
    """A factory ``(points, cell_size=None, *, box=None, periodic=None)`` of one engine."""
    return ENGINES[request.param]


@pytest.fixture
def lacks(request) -> frozenset:
    """What this test's engine lacks of `FEATURES`."""
    return LACKS.get(request.node.callspec.params["engine"], frozenset())


@pytest.fixture
def examples(request) -> settings:
    """Hypothesis settings with this test's engine's share of examples: a property test
    applies them to an inner ``@given`` function."""
    return settings(max_examples=EXAMPLES[request.node.callspec.params["engine"]])


# ---------------------------------------------------------------------- helpers
def lattice(rng, shape, spread, step=STEP):
    """Multiples of ``step`` in ``[-spread, spread] * step``."""
    return rng.integers(-spread, spread + 1, size=shape) * step


def assert_equal(got, expected, name=""):
    """Equal values, element for element (no tolerance)."""
    np.testing.assert_array_equal(got, expected, err_msg=name)


def assert_pairs_match_oracle(result, points, r=None, *, radii=None, box3=None):
    expected, distances = oracles.pairs(points, r, radii=radii, box3=box3)
    ordered = result.sorted()
    assert_equal(ordered.indices, expected.reshape(-1, 2))
    if result.distances is not None:
        assert_equal(ordered.distances, distances)


def assert_rows_match(result, indptr, indices, distances=None):
    assert_equal(result.indptr, indptr, "indptr")
    assert_equal(result.indices, indices, "indices")
    if distances is not None:
        assert_equal(result.distances, distances, "distances")


def assert_radius_matches_oracle(result, points, queries, r, box3=None):
    assert_rows_match(result, *oracles.radius(points, queries, r, box3=box3))


def assert_knn_matches_oracle(result, points, queries, k, r_max=None, box3=None):
    indices, distances, counts = oracles.knn(points, queries, k, r_max, box3=box3)
    assert_equal(result.counts, counts, "counts")
    assert_equal(result.distances, distances, "distances")
    assert_equal(result.indices, indices, "indices")


def rows(result: Neighbors) -> list[dict[int, float | None]]:
    """Each row as ``{index: distance}``: the row's order dropped."""
    out = []
    for q in range(len(result)):
        span = slice(result.indptr[q], result.indptr[q + 1])
        indices = result.indices[span].tolist()
        distances = ([None] * len(indices) if result.distances is None
                     else result.distances[span].tolist())
        out.append(dict(zip(indices, distances, strict=True)))
    return out


def answers(grid, r, queries, radii) -> dict[str, np.ndarray]:
    """Every pair, radius and count query's arrays in orders the contract fixes (pairs
    sorted, rows by index)."""
    pairs = grid.query_pairs(r, return_distances=True).sorted()
    contacts = grid.query_pairs(radii=radii, return_distances=True).sorted()
    between = grid.query_pairs(r, queries=queries, return_distances=True).sorted()
    near = grid.query_radius(queries, r, return_distances=True)
    return {
        "pairs.indices": pairs.indices, "pairs.distances": pairs.distances,
        "contacts.indices": contacts.indices, "contacts.distances": contacts.distances,
        "between.indices": between.indices, "between.distances": between.distances,
        "radius.indptr": near.indptr, "radius.indices": near.indices,
        "radius.distances": near.distances, "count": grid.count_radius(queries, r),
    }


def knn_answers(grid, r, queries) -> dict[str, np.ndarray]:
    """The arrays of `query_knn`, without and with ``r_max = r``."""
    nearest = grid.query_knn(queries, 5)
    bounded = grid.query_knn(queries, 3, r_max=r)
    return {
        "knn.indices": nearest.indices, "knn.distances": nearest.distances,
        "knn.counts": nearest.counts, "bounded.indices": bounded.indices,
        "bounded.distances": bounded.distances, "bounded.counts": bounded.counts,
    }


def box_answers(grid, lower, upper) -> dict[str, np.ndarray]:
    """The arrays of `query_box`, rows by index."""
    boxes = grid.query_box(lower, upper)
    return {"box.indptr": boxes.indptr, "box.indices": boxes.indices}


def raw_outputs(grid, r, queries, radii) -> dict[str, np.ndarray]:
    """`answers` plus the outputs whose row order is the engine's own (deterministic but
    unspecified): pairs as returned, unsorted rows."""
    out = answers(grid, r, queries, radii)
    pairs = grid.query_pairs(r, return_distances=True)
    contacts = grid.query_pairs(radii=radii, return_distances=True)
    near = grid.query_radius(queries, r, return_distances=True, sort=False)
    out |= {
        "raw pairs.indices": pairs.indices, "raw pairs.distances": pairs.distances,
        "raw contacts.indices": contacts.indices,
        "raw contacts.distances": contacts.distances,
        "raw radius.indptr": near.indptr, "raw radius.indices": near.indices,
        "raw radius.distances": near.distances,
    }
    return out


def raw_chunk_and_box_outputs(grid, r, lower, upper) -> dict[str, np.ndarray]:
    """`box_answers` plus the outputs in the engine's own order of `iter_pairs` (its
    chunks) and `query_box` (unsorted rows)."""
    out = box_answers(grid, lower, upper)
    chunks = list(grid.iter_pairs(r, chunk_size=1000, return_distances=True))
    boxes = grid.query_box(lower, upper, sort=False)
    out |= {
        "chunk lengths": np.array([len(chunk) for chunk in chunks]),
        "chunks.indices": np.concatenate([chunk.indices for chunk in chunks]),
        "chunks.distances": np.concatenate([chunk.distances for chunk in chunks]),
        "raw box.indptr": boxes.indptr, "raw box.indices": boxes.indices,
    }
    return out


def assert_same_bytes(got: dict, expected: dict):
    assert got.keys() == expected.keys()
    for name, array in expected.items():
        other = got[name]
        assert other.dtype == array.dtype and other.shape == array.shape, name
        assert other.tobytes() == array.tobytes(), name


def assert_same_answers(got: dict, expected: dict):
    assert got.keys() == expected.keys()
    for name, array in expected.items():
        assert_equal(got[name], array, name)


# ---------------------------------------------------------------------- random scenes
@st.composite
def scenes(draw, max_points: int = 40, periodic_boxes: bool = True):
    """Lattice points in 1-3 dimensions; open, periodic or partly periodic (open only
    without ``periodic_boxes``); a radius and queries on the same lattice (some outside
    the points' range)."""
    n_dims = draw(st.integers(1, 3))
    n = draw(st.integers(0, max_points))
    spread = draw(st.sampled_from([2, 4, 8, 16]))
    points = draw(arrays(np.int64, (n, n_dims), elements=st.integers(-spread, spread))) * STEP
    box = periodic = None
    if periodic_boxes and draw(st.booleans()):
        box = draw(st.lists(st.sampled_from([4.0, 8.0]), min_size=n_dims, max_size=n_dims))
        periodic = draw(st.lists(st.booleans(), min_size=n_dims, max_size=n_dims))
    m = draw(st.integers(0, 10))
    queries = draw(arrays(np.int64, (m, n_dims), elements=st.integers(-12, 12))) * STEP
    r = draw(st.integers(0, 8)) * STEP  # at most half the smallest period
    radii = draw(arrays(np.int64, n, elements=st.integers(0, 4))) * STEP
    return points, box, periodic, queries, r, radii


def box_corners(queries):
    """Boxes around the queries, as wide as 1.75 (some cross a period boundary)."""
    return queries - 1.0, queries + 0.75


# ---------------------------------------------------------------------- closed balls
def ball_points(n_dims: int) -> np.ndarray:
    """Point 0 at the origin; points 1 and 2 at exactly 1.25 from it (axis and 3-4-5
    offsets); point 3 at `BEYOND`, just outside a ball of 1.25."""
    rows = {
        1: [[0.0], [1.25], [-1.25], [BEYOND]],
        2: [[0.0, 0.0], [0.75, 1.0], [0.0, -1.25], [-BEYOND, 0.0]],
        3: [[0.0, 0.0, 0.0], [0.75, 0.0, -1.0], [0.0, 1.25, 0.0], [0.0, 0.0, BEYOND]],
    }
    return np.array(rows[n_dims])


@pytest.mark.cell_sizes(*CELL_SIZES)
@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_closed_balls_pairs_include_points_at_exactly_r(engine, n_dims, cell_size):
    points = ball_points(n_dims)
    result = engine(points, cell_size).query_pairs(1.25, return_distances=True)
    found = dict(zip(map(tuple, result.sorted().indices.tolist()),
                     result.sorted().distances.tolist(), strict=True))
    assert found[(0, 1)] == 1.25 and found[(0, 2)] == 1.25
    assert (0, 3) not in found
    assert_pairs_match_oracle(result, points, 1.25)


@pytest.mark.cell_sizes(*CELL_SIZES)
@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_closed_balls_radius_and_count_include_points_at_exactly_r(engine, n_dims, cell_size):
    points = ball_points(n_dims)
    grid = engine(points, cell_size)
    near = grid.query_radius(points[:1], 1.25, return_distances=True)
    assert near.row(0).tolist() == [0, 1, 2]
    assert near.distances.tolist() == [0.0, 1.25, 1.25]
    assert grid.count_radius(points[:1], 1.25).tolist() == [3]
    assert_radius_matches_oracle(grid.query_radius(points, 1.25, return_distances=True),
                                 points, points, 1.25)


@pytest.mark.needs("per-query radii")
@pytest.mark.cell_sizes(*CELL_SIZES)
@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_closed_balls_one_r_per_query_include_points_at_exactly_r(engine, n_dims, cell_size):
    points = ball_points(n_dims)
    grid = engine(points, cell_size)
    assert grid.count_radius(points[:2], np.array([1.25, 0.0])).tolist() == [3, 1]


@pytest.mark.cell_sizes(*CELL_SIZES)
@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_closed_balls_pairs_with_queries_include_points_at_exactly_r(engine, n_dims,
                                                                     cell_size):
    points = ball_points(n_dims)
    result = engine(points, cell_size).query_pairs(1.25, queries=points[:1],
                                                   return_distances=True)
    assert result.shape == (1, 4)
    assert result.sorted().indices.tolist() == [[0, 0], [0, 1], [0, 2]]
    assert result.sorted().distances.tolist() == [0.0, 1.25, 1.25]


@pytest.mark.needs("query_knn")
@pytest.mark.cell_sizes(*CELL_SIZES)
@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_closed_balls_knn_r_max_includes_points_at_exactly_r_max(engine, n_dims, cell_size):
    points = ball_points(n_dims)
    nearest = engine(points, cell_size).query_knn(points[:1], 4, r_max=1.25)
    assert nearest.counts.tolist() == [3]
    assert nearest.indices.tolist() == [[0, 1, 2, -1]]
    assert nearest.distances.tolist() == [[0.0, 1.25, 1.25, np.inf]]


@pytest.mark.cell_sizes(None, 1.25, 2.5)
@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_closed_balls_pairs_with_radii_include_contacts_at_exactly_ri_plus_rj(
        engine, n_dims, cell_size):
    points = ball_points(n_dims)
    radii = np.array([0.5, 0.75, 0.75, 0.75])  # 0.5 + 0.75 = 1.25 exactly
    result = engine(points, cell_size).query_pairs(radii=radii, return_distances=True)
    found = {tuple(pair) for pair in result.indices.tolist()}
    assert {(0, 1), (0, 2)} <= found and (0, 3) not in found
    assert_pairs_match_oracle(result, points, radii=radii)


@pytest.mark.needs("iter_pairs")
@pytest.mark.cell_sizes(None, 1.25, 2.5)
@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_closed_balls_iter_pairs_with_radii_include_contacts_at_exactly_ri_plus_rj(
        engine, n_dims, cell_size):
    points = ball_points(n_dims)
    radii = np.array([0.5, 0.75, 0.75, 0.75])
    found = {tuple(pair) for pair in
             engine(points, cell_size).query_pairs(radii=radii).indices.tolist()}
    chunks = engine(points, cell_size).iter_pairs(radii=radii, chunk_size=1)
    assert {tuple(pair) for chunk in chunks for pair in chunk.indices.tolist()} == found


# ---------------------------------------------------------------------- pairs
@pytest.mark.parametrize("seed", range(4))
def test_pairs_once_each_with_i_less_than_j(engine, seed):
    rng = np.random.default_rng(seed)
    n_dims = 1 + seed % 3
    points = lattice(rng, (300, n_dims), 6)  # many duplicates and equal distances
    r = 0.75
    result = engine(points, 0.5).query_pairs(r, return_distances=True)
    assert isinstance(result, Pairs)
    assert result.shape == (300, 300)
    assert result.indices.shape == (len(result), 2)
    assert result.distances.shape == (len(result),) and result.distances.dtype == np.float64
    i, j = result.indices[:, 0], result.indices[:, 1]
    assert (i < j).all()  # no self pairs, each unordered pair as (smaller, larger)
    assert len(np.unique(result.indices, axis=0)) == len(result)
    # The distance of each row is that of its own pair.
    d2 = ((points[i] - points[j]) ** 2).sum(axis=1)
    assert_equal(result.distances, np.sqrt(d2))
    assert_pairs_match_oracle(result, points, r)


def test_pairs_sorted_gives_lexicographic_order(engine):
    rng = np.random.default_rng(7)
    points = lattice(rng, (200, 2), 8)
    result = engine(points, 0.5).query_pairs(0.5, return_distances=True)
    ordered = result.sorted()
    assert ordered.shape == result.shape
    keys = ordered.indices[:, 0].astype(np.int64) * 200 + ordered.indices[:, 1]
    assert (np.diff(keys) > 0).all()
    # The same rows, each with its own distance.
    assert (sorted(zip(map(tuple, result.indices.tolist()), result.distances.tolist(),
                       strict=True))
            == list(zip(map(tuple, ordered.indices.tolist()), ordered.distances.tolist(),
                        strict=True)))


def test_pairs_without_distances_have_the_same_rows(engine):
    rng = np.random.default_rng(8)
    points = lattice(rng, (150, 3), 6)
    grid = engine(points, 0.5)
    plain, with_distances = grid.query_pairs(0.5), grid.query_pairs(0.5, return_distances=True)
    assert plain.distances is None
    assert_equal(plain.indices, with_distances.indices)


def test_pairs_between_queries_and_points_are_query_point_rows(engine):
    rng = np.random.default_rng(9)
    points, queries = lattice(rng, (120, 2), 8), lattice(rng, (30, 2), 10)
    result = engine(points, 0.5).query_pairs(0.75, queries=queries, return_distances=True)
    assert result.shape == (30, 120)
    indptr, indices, distances = oracles.radius(points, queries, 0.75)
    expected = np.column_stack([np.repeat(np.arange(30), np.diff(indptr)), indices])
    ordered = result.sorted()
    assert_equal(ordered.indices, expected)
    assert_equal(ordered.distances, distances)


@pytest.mark.needs("iter_pairs")
@pytest.mark.parametrize("chunk_size", [1, 7, 1 << 22])
def test_iter_pairs_chunks_concatenate_to_query_pairs(engine, chunk_size):
    rng = np.random.default_rng(10)
    points = lattice(rng, (200, 3), 6)
    grid = engine(points, 0.5)
    whole = grid.query_pairs(0.5, return_distances=True)
    chunks = list(grid.iter_pairs(0.5, chunk_size=chunk_size, return_distances=True))
    assert all(isinstance(chunk, Pairs) and chunk.shape == whole.shape for chunk in chunks)
    assert_equal(np.concatenate([chunk.indices for chunk in chunks]), whole.indices)
    assert_equal(np.concatenate([chunk.distances for chunk in chunks]), whole.distances)


# ---------------------------------------------------------------------- radius
@boxes(None, 4.0)
def test_radius_rows_are_csr_sorted_by_index(engine, box):
    rng = np.random.default_rng(11)
    points, queries = lattice(rng, (250, 3), 8), lattice(rng, (40, 3), 10)
    near = engine(points, 0.5, box=box).query_radius(queries, 1.0, return_distances=True)
    assert isinstance(near, Neighbors)
    assert len(near) == 40 and near.n_points == 250
    assert near.indptr.dtype == np.int64 and near.indptr.shape == (41,)
    assert near.indptr[0] == 0 and near.indptr[-1] == near.indices.shape[0]
    assert (np.diff(near.indptr) >= 0).all()
    assert near.distances.shape == near.indices.shape and near.distances.dtype == np.float64
    for q in range(len(near)):
        assert (np.diff(near.row(q)) > 0).all()
    assert_radius_matches_oracle(near, points, queries, 1.0, oracles.periods(box, None, 3))


@boxes(None, 4.0)
def test_radius_unsorted_rows_hold_the_same_neighbours(engine, box):
    rng = np.random.default_rng(12)
    points, queries = lattice(rng, (250, 2), 8), lattice(rng, (40, 2), 10)
    grid = engine(points, 0.5, box=box)
    ordered = grid.query_radius(queries, 1.0, return_distances=True)
    unordered = grid.query_radius(queries, 1.0, return_distances=True, sort=False)
    assert_equal(unordered.indptr, ordered.indptr)
    assert rows(unordered) == rows(ordered)
    plain = grid.query_radius(queries, 1.0)
    assert plain.distances is None
    assert_equal(plain.indices, ordered.indices)


@pytest.mark.needs("per-query radii")
def test_radius_one_r_per_query(engine):
    rng = np.random.default_rng(13)
    points, queries = lattice(rng, (200, 3), 8), lattice(rng, (30, 3), 10)
    r = rng.integers(0, 9, size=30) * STEP
    grid = engine(points, 0.5)
    assert_radius_matches_oracle(grid.query_radius(queries, r, return_distances=True),
                                 points, queries, r)
    counts = grid.count_radius(queries, r)
    assert counts.dtype == np.int64
    assert_equal(counts, oracles.count(points, queries, r))


def test_count_radius_equals_the_row_lengths(engine):
    rng = np.random.default_rng(14)
    points, queries = lattice(rng, (300, 2), 8), lattice(rng, (50, 2), 10)
    grid = engine(points, 0.75)
    counts = grid.count_radius(queries, 1.25)
    assert counts.dtype == np.int64 and counts.shape == (50,)
    assert_equal(counts, grid.query_radius(queries, 1.25).counts)


def test_neighbors_row_counts_negative_indices_from_the_end(engine):
    points = np.array([[0.0], [0.5], [2.0], [2.25]])
    near = engine(points, 1.0).query_radius(np.array([[0.25], [9.0], [2.0]]), 0.5)
    assert near.row(-1).tolist() == near.row(2).tolist() == [2, 3]
    assert near.row(-2).tolist() == near.row(1).tolist() == []
    assert near.row(-3).tolist() == near.row(0).tolist() == [0, 1]
    for q in (3, -4):
        with pytest.raises(IndexError, match=r"`q` must be in \[-3, 3\) for 3 queries"):
            near.row(q)


# ---------------------------------------------------------------------- k nearest
@pytest.mark.needs("query_knn")
def test_knn_ties_go_to_the_smaller_index(engine):
    # Four points at distance 1 from the origin and one at 0, in shuffled index order.
    points = np.array([[0.0, -1.0], [1.0, 0.0], [0.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    nearest = engine(points, 0.5).query_knn(np.array([[0.0, 0.0], [0.5, 0.5]]), 4)
    assert nearest.indices.tolist() == [[2, 0, 1, 3], [1, 2, 4, 0]]
    assert nearest.distances[0].tolist() == [0.0, 1.0, 1.0, 1.0]


@pytest.mark.needs("query_knn")
@boxes(None, 3.0)
@pytest.mark.parametrize("n_dims", [2, 3])
def test_knn_ties_on_dense_lattices_match_the_oracle(engine, n_dims, box):
    rng = np.random.default_rng(20 + n_dims)
    points = rng.integers(0, 24, size=(600, n_dims)) * 0.125  # duplicates and equal distances
    queries = np.concatenate([rng.integers(-2, 26, size=(60, n_dims)) * 0.125, points[:10]])
    grid = engine(points, 0.375, box=box)
    box3 = oracles.periods(box, None, n_dims)
    for k, r_max in [(1, None), (9, None), (9, 0.25), (40, 0.5)]:
        assert_knn_matches_oracle(grid.query_knn(queries, k, r_max=r_max), points, queries,
                                  k, r_max, box3)


@pytest.mark.needs("query_knn")
def test_knn_pads_with_minus_one_and_inf_when_fewer_than_k_found(engine):
    points = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    nearest = engine(points, 1.0).query_knn(np.array([[0.0, 0.0], [10.0, 10.0]]), 3,
                                             r_max=2.0)
    assert isinstance(nearest, KNearest)
    assert nearest.counts.dtype == np.int64 and nearest.counts.tolist() == [3, 0]
    assert nearest.indices.tolist() == [[0, 1, 2], [-1, -1, -1]]
    assert nearest.distances.tolist() == [[0.0, 1.0, 2.0], [np.inf] * 3]
    assert nearest.distances.dtype == np.float64


@pytest.mark.needs("query_knn")
@boxes(None, 8.0)
def test_knn_k_above_n_returns_every_point_then_padding(engine, box):
    rng = np.random.default_rng(15)
    points, queries = lattice(rng, (7, 3), 8), lattice(rng, (5, 3), 10)
    nearest = engine(points, 0.5, box=box).query_knn(queries, 10)
    assert nearest.indices.shape == nearest.distances.shape == (5, 10)
    assert nearest.counts.tolist() == [7] * 5
    assert (nearest.indices[:, 7:] == -1).all() and np.isinf(nearest.distances[:, 7:]).all()
    for row in nearest.indices[:, :7]:
        assert sorted(row.tolist()) == list(range(7))
    assert_knn_matches_oracle(nearest, points, queries, 10, box3=oracles.periods(box, None, 3))


@pytest.mark.needs("query_knn")
def test_knn_r_max_limits_every_row(engine):
    rng = np.random.default_rng(16)
    points, queries = lattice(rng, (300, 3), 8), lattice(rng, (40, 3), 10)
    grid = engine(points, 0.5)
    for r_max in (0.0, 0.5, 1.25, np.inf):
        nearest = grid.query_knn(queries, 6, r_max=r_max)
        assert (nearest.distances[nearest.indices >= 0] <= r_max).all()
        assert_knn_matches_oracle(nearest, points, queries, 6, r_max)


# ---------------------------------------------------------------------- boxes
@pytest.mark.needs("query_box")
@pytest.mark.cell_sizes(None, 0.25, 1.0)
def test_box_queries_are_closed(engine, cell_size):
    ticks = np.arange(-2, 3) * 0.5
    points = np.stack(np.meshgrid(ticks, ticks, ticks, indexing="ij"), -1).reshape(-1, 3)
    grid = engine(points, cell_size)
    # Faces, edges and corners of the box lie on points of the lattice.
    boxes = grid.query_box(np.array([[-0.5, -0.5, -0.5], [0.5, 0.0, -1.0]]),
                           np.array([[0.5, 0.5, 0.5], [0.5, 0.0, -1.0]]))
    assert boxes.distances is None
    assert boxes.counts.tolist() == [27, 1]  # 3 x 3 x 3, and the degenerate box's point
    assert points[boxes.row(1)].tolist() == [[0.5, 0.0, -1.0]]
    lower = lattice(np.random.default_rng(17), (20, 3), 4)
    upper = lower + np.random.default_rng(18).integers(0, 5, size=(20, 3)) * STEP
    assert_rows_match(grid.query_box(lower, upper), *oracles.box(points, lower, upper))


@pytest.mark.needs("query_box")
def test_box_rows_sorted_unless_sort_false(engine):
    rng = np.random.default_rng(19)
    points = lattice(rng, (300, 2), 8)
    lower = lattice(rng, (25, 2), 8)
    upper = lower + rng.integers(0, 9, size=(25, 2)) * STEP
    grid = engine(points, 0.5)
    ordered = grid.query_box(lower, upper)
    assert ordered.indptr.dtype == np.int64 and len(ordered) == 25
    for q in range(len(ordered)):
        assert (np.diff(ordered.row(q)) > 0).all()
    assert_rows_match(ordered, *oracles.box(points, lower, upper))
    unordered = grid.query_box(lower, upper, sort=False)
    assert_equal(unordered.indptr, ordered.indptr)
    assert rows(unordered) == rows(ordered)
    single = grid.query_box(lower[3], upper[3])  # one box as 1-D corners
    assert len(single) == 1 and single.row(0).tolist() == ordered.row(3).tolist()


def test_any_radius_works_with_any_grid(engine):
    rng = np.random.default_rng(46)
    points, queries = lattice(rng, (200, 3), 16), lattice(rng, (10, 3), 16)
    grid = engine(points, 0.25)
    for r in (0.0, 3.0, 1e300):  # up to far beyond the cell size
        pairs = grid.query_pairs(r, return_distances=True)
        near = grid.query_radius(queries, r, return_distances=True)
        with np.errstate(over="ignore"):  # the oracles' r * r of 1e300 is inf
            assert_pairs_match_oracle(pairs, points, r)
            assert_radius_matches_oracle(near, points, queries, r)
    assert len(grid.query_pairs(radii=np.full(200, 1e299))) == 200 * 199 // 2


@pytest.mark.needs("query_knn")
def test_any_r_max_works_with_any_grid(engine):
    rng = np.random.default_rng(46)
    points, queries = lattice(rng, (200, 3), 16), lattice(rng, (10, 3), 16)
    grid = engine(points, 0.25)
    for r in (0.0, 3.0, 1e300):
        with np.errstate(over="ignore"):
            assert_knn_matches_oracle(grid.query_knn(queries, 4, r_max=r), points, queries, 4,
                                      r)


@pytest.mark.needs("query_box")
def test_any_finite_box_works_with_any_grid(engine):
    points = lattice(np.random.default_rng(46), (200, 3), 16)
    grid = engine(points, 0.25)
    huge = np.full(3, 1e308)
    assert grid.query_box(-huge, huge).row(0).tolist() == list(range(200))


@pytest.mark.needs("query_box", "periodic")
def test_any_finite_box_works_with_any_partly_periodic_grid(engine):
    points = lattice(np.random.default_rng(46), (200, 3), 16)
    huge = np.full(3, 1e308)
    partly = engine(points, 0.25, box=8.0, periodic=[True, False, True])
    assert partly.query_box(-huge, huge).row(0).tolist() == list(range(200))


# ---------------------------------------------------------------------- periodic boxes
@pytest.mark.needs("periodic")
def test_periodic_distances_use_the_minimum_image(engine):
    points = np.array([[0.25, 1.0], [3.75, 1.0], [2.0, 1.0], [0.25, 3.5]])
    grid = engine(points, 1.0, box=4.0)
    pairs = grid.query_pairs(0.5, return_distances=True).sorted()
    assert pairs.indices.tolist() == [[0, 1]] and pairs.distances.tolist() == [0.5]
    near = grid.query_radius(np.array([[0.0, 1.0]]), 0.25, return_distances=True)
    assert near.row(0).tolist() == [0, 1] and near.distances.tolist() == [0.25, 0.25]


@pytest.mark.needs("query_knn", "periodic")
def test_periodic_knn_uses_the_minimum_image(engine):
    points = np.array([[0.25, 1.0], [3.75, 1.0], [2.0, 1.0], [0.25, 3.5]])
    grid = engine(points, 1.0, box=4.0)
    queries = np.array([[3.5, 3.5], [0.25, 0.0]])
    nearest = grid.query_knn(queries, 2)
    # (3.5, 3.5) is 0.75 from point 3 across x; (0.25, 0.0) is 0.5 from it across y.
    assert nearest.indices[:, 0].tolist() == [3, 3]
    assert nearest.distances[:, 0].tolist() == [0.75, 0.5]
    assert_knn_matches_oracle(nearest, points, queries, 2, box3=oracles.periods(4.0, None, 2))


@pytest.mark.needs("periodic")
@pytest.mark.parametrize("seed", range(3))
def test_periodic_pairs_across_the_boundary(engine, seed):
    rng = np.random.default_rng(30 + seed)
    n_dims = 1 + seed
    points = rng.integers(0, 32, size=(150, n_dims)) * STEP  # in [0, 8)
    box3 = oracles.periods(8.0, None, n_dims)
    grid = engine(points, 1.0, box=8.0)
    result = grid.query_pairs(1.5, return_distances=True)
    assert_pairs_match_oracle(result, points, 1.5, box3=box3)
    # Some pairs are closer across the boundary than inside the box.
    gaps = np.abs(points[result.indices[:, 0]] - points[result.indices[:, 1]])
    assert (gaps > 4.0).any()
    radii = rng.integers(0, 4, size=150) * STEP
    assert_pairs_match_oracle(grid.query_pairs(radii=radii, return_distances=True), points,
                              radii=radii, box3=box3)
    queries = rng.integers(-4, 36, size=(30, n_dims)) * STEP
    assert_radius_matches_oracle(grid.query_radius(queries, 1.5, return_distances=True),
                                 points, queries, 1.5, box3)


@pytest.mark.needs("query_knn", "periodic")
@pytest.mark.parametrize("seed", range(3))
def test_periodic_knn_across_the_boundary(engine, seed):
    rng = np.random.default_rng(30 + seed)
    n_dims = 1 + seed
    points = rng.integers(0, 32, size=(150, n_dims)) * STEP
    queries = rng.integers(-4, 36, size=(30, n_dims)) * STEP
    nearest = engine(points, 1.0, box=8.0).query_knn(queries, 5)
    assert_knn_matches_oracle(nearest, points, queries, 5, box3=oracles.periods(8.0, None,
                                                                                n_dims))


@pytest.mark.needs("periodic")
def test_partly_periodic_boxes_wrap_only_their_periodic_axes(engine):
    points = np.array([[0.25, 0.25], [3.75, 0.25], [0.25, 3.75], [0.25, -3.25]])
    grid = engine(points, 1.0, box=[4.0, 4.0], periodic=[True, False])
    pairs = grid.query_pairs(0.5, return_distances=True).sorted()
    assert pairs.indices.tolist() == [[0, 1]]  # across x; y is open: 3.5 apart
    # The open axis is not wrapped: point 3 stays at y = -3.25, not 0.75.
    assert grid.count_radius(np.array([[0.25, -3.25], [0.25, 0.75]]), 0.0).tolist() == [1, 0]
    cloud, box, periodic, queries = partly_periodic_cloud()
    box3 = oracles.periods(box, periodic, 3)
    grid = engine(cloud, 0.5, box=box, periodic=periodic)
    assert_pairs_match_oracle(grid.query_pairs(1.5, return_distances=True), cloud, 1.5,
                              box3=box3)
    assert_radius_matches_oracle(grid.query_radius(queries, 1.5, return_distances=True),
                                 cloud, queries, 1.5, box3)


@pytest.mark.needs("query_knn", "periodic")
def test_partly_periodic_knn_wraps_only_its_periodic_axes(engine):
    cloud, box, periodic, queries = partly_periodic_cloud()
    grid = engine(cloud, 0.5, box=box, periodic=periodic)
    assert_knn_matches_oracle(grid.query_knn(queries, 4), cloud, queries, 4,
                              box3=oracles.periods(box, periodic, 3))


def partly_periodic_cloud():
    """120 points in 3-D, a box periodic on x and z only, and queries near the points."""
    cloud = np.random.default_rng(33).integers(-20, 20, size=(120, 3)) * STEP
    return cloud, [4.0, 50.0, 8.0], [True, False, True], cloud[::7] + 0.125


@pytest.mark.needs("query_box", "periodic")
def test_partly_periodic_box_queries_wrap_only_their_periodic_axes(engine):
    cloud, box, periodic, queries = partly_periodic_cloud()
    box3 = oracles.periods(box, periodic, 3)
    grid = engine(cloud, 0.5, box=box, periodic=periodic)
    assert_rows_match(grid.query_box(queries - 1.0, queries + 3.0),
                      *oracles.box(cloud, queries - 1.0, queries + 3.0, box3=box3))


def wrapped_inputs():
    """Points and queries in [0, 4) in 2-D, the same shifted by multiples of 4, and
    shifts for box corners."""
    rng = np.random.default_rng(34)
    inside = rng.integers(0, 16, size=(80, 2)) * STEP  # in [0, 4)
    outside = inside + rng.integers(-3, 4, size=(80, 2)) * 4.0
    queries = rng.integers(0, 16, size=(20, 2)) * STEP
    far_queries = queries + rng.integers(-3, 4, size=(20, 2)) * 4.0
    shifted = rng.integers(-3, 4, size=(20, 2)) * 4.0
    return inside, outside, queries, far_queries, shifted


@pytest.mark.needs("periodic")
def test_periodic_coordinates_are_wrapped_into_the_box(engine):
    inside, outside, queries, far_queries, _ = wrapped_inputs()
    radii = np.full(80, 0.25)
    expected = answers(engine(inside, 0.5, box=4.0), 1.0, queries, radii)
    got = answers(engine(outside, 0.5, box=4.0), 1.0, far_queries, radii)
    assert_same_answers(got, expected)


@pytest.mark.needs("query_knn", "periodic")
def test_periodic_coordinates_are_wrapped_into_the_box_for_knn(engine):
    inside, outside, queries, far_queries, _ = wrapped_inputs()
    expected = knn_answers(engine(inside, 0.5, box=4.0), 1.0, queries)
    assert_same_answers(knn_answers(engine(outside, 0.5, box=4.0), 1.0, far_queries),
                        expected)


@pytest.mark.needs("query_box", "periodic")
def test_periodic_box_corners_are_wrapped_into_the_box(engine):
    inside, outside, queries, _, shifted = wrapped_inputs()
    lower, upper = box_corners(queries)
    expected = box_answers(engine(inside, 0.5, box=4.0), lower, upper)
    got = box_answers(engine(outside, 0.5, box=4.0), lower + shifted, upper + shifted)
    assert_same_answers(got, expected)


@pytest.mark.needs("periodic")
def test_periodic_r_may_be_half_the_period(engine):
    points = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    grid = engine(points, 1.0, box=4.0)
    pairs = grid.query_pairs(2.0, return_distances=True).sorted()
    assert pairs.indices.tolist() == [[0, 1], [0, 2]]
    assert pairs.distances.tolist() == [2.0, 1.0]  # 0 and 1: exactly half the period apart
    assert grid.count_radius(points[:1], 2.0).tolist() == [3]
    assert grid.query_pairs(radii=np.full(3, 1.0)).sorted().indices.tolist() == [[0, 1],
                                                                                 [0, 2]]


#: Just above half the period of 4.0, and the error it raises.
TOO_FAR = 2.0 + 2.0**-40
TOO_FAR_MESSAGE = r"`r` must be at most half the periodic box \(2\.0 on axis 0\)"


@pytest.mark.needs("periodic")
@pytest.mark.parametrize("periodic", [None, [True, False]])
def test_periodic_r_above_half_the_period_is_refused(engine, periodic):
    points = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    grid = engine(points, 1.0, box=4.0, periodic=periodic)
    calls = [
        lambda: grid.query_pairs(TOO_FAR),
        lambda: grid.query_pairs(TOO_FAR, queries=points),
        lambda: grid.query_radius(points, TOO_FAR),
        lambda: grid.count_radius(points, TOO_FAR),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=TOO_FAR_MESSAGE):
            call()


@pytest.mark.needs("periodic")
@pytest.mark.parametrize("periodic", [None, [True, False]])
def test_periodic_radii_above_half_the_period_are_refused(engine, periodic):
    points = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    grid = engine(points, 1.0, box=4.0, periodic=periodic)
    with pytest.raises(ValueError, match=r"`radii` must be at most half the periodic box"):
        grid.query_pairs(radii=np.array([0.5, 1.0 + 2.0**-40, 0.0]))


@pytest.mark.needs("iter_pairs", "per-query radii", "periodic")
@pytest.mark.parametrize("periodic", [None, [True, False]])
def test_periodic_r_above_half_the_period_is_refused_in_chunks_and_per_query(engine,
                                                                             periodic):
    points = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    grid = engine(points, 1.0, box=4.0, periodic=periodic)
    with pytest.raises(ValueError, match=TOO_FAR_MESSAGE):
        grid.iter_pairs(TOO_FAR)
    with pytest.raises(ValueError, match=TOO_FAR_MESSAGE):
        grid.query_radius(points, np.array([0.5, TOO_FAR, 0.5]))


@pytest.mark.needs("periodic")
def test_partly_periodic_r_is_bounded_by_the_periodic_axes_only(engine):
    # The open axis's box entry (4.0) sets no bound: r = 3 reaches across it.
    points = np.array([[0.0, 0.0], [0.0, 3.0], [3.0, 0.0]])
    grid = engine(points, 1.0, box=[8.0, 4.0], periodic=[True, False])
    assert grid.query_pairs(3.0).sorted().indices.tolist() == [[0, 1], [0, 2]]


@pytest.mark.needs("query_box", "periodic")
def test_periodic_box_queries_cross_the_boundary(engine):
    rng = np.random.default_rng(35)
    points = rng.integers(0, 32, size=(200, 2)) * STEP  # in [0, 8)
    lower = rng.integers(-8, 40, size=(30, 2)) * STEP
    width = rng.integers(0, 40, size=(30, 2)) * STEP  # up to 10: some cover the period
    grid = engine(points, 1.0, box=8.0)
    result = grid.query_box(lower, lower + width)
    assert_rows_match(result, *oracles.box(points, lower, lower + width,
                                           box3=oracles.periods(8.0, None, 2)))
    whole = grid.query_box(np.array([7.0, 7.0]), np.array([15.0, 15.0]))
    assert whole.row(0).tolist() == list(range(200))  # a whole period: every point


# ---------------------------------------------------------------------- empty inputs
@boxes(None, 4.0)
@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_no_points_give_empty_results_of_the_right_shapes(engine, n_dims, box):
    grid = engine(np.empty((0, n_dims)), 1.0, box=box)
    queries = np.zeros((3, n_dims))
    pairs = grid.query_pairs(1.0, return_distances=True)
    assert pairs.indices.shape == (0, 2) and pairs.indices.dtype == np.int32
    assert pairs.distances.shape == (0,) and pairs.distances.dtype == np.float64
    assert pairs.shape == (0, 0) and len(pairs) == 0
    assert grid.query_pairs(radii=np.empty(0)).indices.shape == (0, 2)
    between = grid.query_pairs(1.0, queries=queries)
    assert between.indices.shape == (0, 2) and between.shape == (3, 0)
    near = grid.query_radius(queries, 1.0, return_distances=True)
    assert near.indptr.tolist() == [0, 0, 0, 0] and near.indptr.dtype == np.int64
    assert near.indices.shape == (0,) and near.indices.dtype == np.int32
    assert near.distances.shape == (0,) and near.n_points == 0
    counts = grid.count_radius(queries, 1.0)
    assert counts.tolist() == [0, 0, 0] and counts.dtype == np.int64


@pytest.mark.needs("query_knn")
@boxes(None, 4.0)
@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_no_points_give_knn_padding_only(engine, n_dims, box):
    grid = engine(np.empty((0, n_dims)), 1.0, box=box)
    nearest = grid.query_knn(np.zeros((3, n_dims)), 2)
    assert nearest.indices.tolist() == [[-1, -1]] * 3 and nearest.indices.dtype == np.int32
    assert nearest.distances.tolist() == [[np.inf, np.inf]] * 3
    assert nearest.counts.tolist() == [0, 0, 0]


@pytest.mark.needs("iter_pairs", "query_box")
@boxes(None, 4.0)
@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_no_points_give_no_chunks_and_empty_box_rows(engine, n_dims, box):
    grid = engine(np.empty((0, n_dims)), 1.0, box=box)
    queries = np.zeros((3, n_dims))
    assert sum(len(chunk) for chunk in grid.iter_pairs(1.0, chunk_size=1)) == 0
    boxes = grid.query_box(queries - 1.0, queries + 1.0)
    assert boxes.indptr.tolist() == [0, 0, 0, 0] and boxes.indices.shape == (0,)


@boxes(None, 4.0)
def test_no_queries_give_empty_results_of_the_right_shapes(engine, box):
    points = np.arange(6.0).reshape(3, 2) * STEP
    grid = engine(points, 1.0, box=box)
    none = np.empty((0, 2))
    near = grid.query_radius(none, 1.0, return_distances=True)
    assert near.indptr.tolist() == [0] and near.indptr.dtype == np.int64 and len(near) == 0
    assert near.indices.shape == (0,) and near.indices.dtype == np.int32
    assert near.distances.shape == (0,) and near.distances.dtype == np.float64
    counts = grid.count_radius(none, 1.0)
    assert counts.shape == (0,) and counts.dtype == np.int64
    between = grid.query_pairs(1.0, queries=none, return_distances=True)
    assert between.shape == (0, 3) and between.indices.shape == (0, 2)
    assert between.distances.shape == (0,)


@pytest.mark.needs("query_knn")
@boxes(None, 4.0)
def test_no_queries_give_empty_knn_results(engine, box):
    grid = engine(np.arange(6.0).reshape(3, 2) * STEP, 1.0, box=box)
    nearest = grid.query_knn(np.empty((0, 2)), 2)
    assert nearest.indices.shape == nearest.distances.shape == (0, 2)
    assert nearest.counts.shape == (0,) and nearest.indices.dtype == np.int32


@pytest.mark.needs("query_box")
@boxes(None, 4.0)
def test_no_boxes_give_empty_box_rows(engine, box):
    points = np.arange(6.0).reshape(3, 2) * STEP
    none = np.empty((0, 2))
    boxes = engine(points, 1.0, box=box).query_box(none, none)
    assert boxes.indptr.tolist() == [0] and boxes.indices.shape == (0,)


def test_no_pairs_give_empty_results_of_the_right_shapes(engine):
    points = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    pairs = engine(points, 1.0).query_pairs(1.0, return_distances=True)
    assert pairs.indices.shape == (0, 2) and pairs.indices.dtype == np.int32
    assert pairs.distances.shape == (0,) and pairs.shape == (3, 3)
    assert pairs.sorted().indices.shape == (0, 2)


# ---------------------------------------------------------------------- index dtype
def int32_inputs():
    """2,500 points and 2,100 queries in 3-D, and directions for rays from the queries."""
    rng = np.random.default_rng(40)
    points, queries = lattice(rng, (2500, 3), 16), lattice(rng, (2100, 3), 16)
    return points, queries, rng.normal(size=(2100, 3))


@boxes(None, 8.0)
def test_indices_are_int32_below_2_31_points(engine, box):
    points, queries, _ = int32_inputs()
    grid = engine(points, 0.5, box=box)
    radii = np.full(2500, 0.25)
    results = {
        "pairs": grid.query_pairs(0.5).indices,
        "contacts": grid.query_pairs(radii=radii).indices,
        "between": grid.query_pairs(0.5, queries=queries).indices,
        "radius": grid.query_radius(queries, 0.5).indices,
        "unsorted radius": grid.query_radius(queries, 0.5, sort=False).indices,
    }
    for name, indices in results.items():
        assert indices.dtype == np.int32, name
    assert grid.query_radius(queries, 0.5).indptr.dtype == np.int64


@pytest.mark.needs("query_knn")
@boxes(None, 8.0)
def test_knn_indices_are_int32_below_2_31_points(engine, box):
    points, queries, _ = int32_inputs()
    nearest = engine(points, 0.5, box=box).query_knn(queries, 4)
    assert nearest.indices.dtype == np.int32 and nearest.counts.dtype == np.int64


@pytest.mark.needs("iter_pairs", "query_box", "query_ray")
@boxes(None, 8.0)
def test_chunk_box_and_ray_indices_are_int32_below_2_31_points(engine, box):
    points, queries, directions = int32_inputs()
    grid = engine(points, 0.5, box=box)
    results = {
        "chunks": next(iter(grid.iter_pairs(0.5, chunk_size=100))).indices,
        "box": grid.query_box(queries, queries + 0.5).indices,
    }
    if box is None:
        results["ray"] = grid.query_ray(queries, directions, 0.125).indices
        results["all hits"] = grid.query_ray(queries, directions, 0.125, all_hits=True).indices
    for name, indices in results.items():
        assert indices.dtype == np.int32, name


# ---------------------------------------------------------------------- determinism
def determinism_inputs(n: int, m: int, n_dims: int = 3):
    """Random (not lattice) points: rows of distances that only the same arithmetic in
    the same order reproduces, bit for bit."""
    rng = np.random.default_rng(41)
    points = rng.random((n, n_dims))
    queries = rng.random((m, n_dims)) * 1.2 - 0.1
    radii = rng.random(n) * 0.02
    return points, queries, radii


@pytest.mark.needs("fast queries")
@boxes(None, 1.0)
def test_two_builds_give_byte_identical_outputs(engine, box):
    # 3,000 points and 2,500 queries: past the sizes from which queries run on every thread.
    points, queries, radii = determinism_inputs(3000, 2500)
    first = raw_outputs(engine(points, 0.08, box=box), 0.08, queries, radii)
    second = raw_outputs(engine(points, 0.08, box=box), 0.08, queries, radii)
    assert len(first["raw pairs.indices"]) > 3000
    assert_same_bytes(second, first)


@pytest.mark.needs("query_knn", "fast queries")
@boxes(None, 1.0)
def test_two_builds_give_byte_identical_knn(engine, box):
    points, queries, _ = determinism_inputs(3000, 2500)
    first = knn_answers(engine(points, 0.08, box=box), 0.08, queries)
    assert_same_bytes(knn_answers(engine(points, 0.08, box=box), 0.08, queries), first)


@pytest.mark.needs("iter_pairs", "query_box")
@boxes(None, 1.0)
def test_two_builds_give_byte_identical_chunks_and_box_rows(engine, box):
    points, queries, _ = determinism_inputs(3000, 2500)
    lower, upper = queries - 0.03, queries + 0.03
    first = raw_chunk_and_box_outputs(engine(points, 0.08, box=box), 0.08, lower, upper)
    second = raw_chunk_and_box_outputs(engine(points, 0.08, box=box), 0.08, lower, upper)
    assert_same_bytes(second, first)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
@pytest.mark.parametrize("box", [None, 1.0])
@pytest.mark.parametrize("twins", THREAD_TWINS, ids="-vs-".join)
def test_outputs_identical_for_one_thread_and_the_default(twins, box):
    # Open: 20,000 points, past the size from which the grid is built on every thread.
    # Periodic: 3,000 (brute force compares every pair, and minimum images cost more).
    n = 20_000 if box is None else 3000
    points, queries, radii = determinism_inputs(n, 2500)
    r = 0.05 if box is None else 0.08
    lower, upper = queries - 0.03, queries + 0.03
    one, default = (raw_outputs(grid, r, queries, radii) | knn_answers(grid, r, queries)
                    | raw_chunk_and_box_outputs(grid, r, lower, upper)
                    for grid in (ENGINES[name](points, r, box=box) for name in twins))
    assert len(one["raw pairs.indices"]) > n
    assert_same_bytes(default, one)


# ---------------------------------------------------------------------- invariance
def test_every_query_matches_the_oracle(engine, examples, lacks):
    @examples
    @given(scene=scenes(periodic_boxes="periodic" not in lacks))
    def check(scene):
        points, box, periodic, queries, r, radii = scene
        n_dims = points.shape[1]
        box3 = oracles.periods(box, periodic, n_dims)
        grid = engine(points, 0.5, box=box, periodic=periodic)
        assert_pairs_match_oracle(grid.query_pairs(r, return_distances=True), points, r,
                                  box3=box3)
        assert_pairs_match_oracle(grid.query_pairs(radii=radii, return_distances=True),
                                  points, radii=radii, box3=box3)
        assert_radius_matches_oracle(grid.query_radius(queries, r, return_distances=True),
                                     points, queries, r, box3)
        assert_equal(grid.count_radius(queries, r),
                     oracles.count(points, queries, r, box3=box3))

    check()


@pytest.mark.needs("query_knn")
def test_every_knn_query_matches_the_oracle(engine, examples, lacks):
    @examples
    @given(scene=scenes(periodic_boxes="periodic" not in lacks))
    def check(scene):
        points, box, periodic, queries, r, _ = scene
        box3 = oracles.periods(box, periodic, points.shape[1])
        grid = engine(points, 0.5, box=box, periodic=periodic)
        assert_knn_matches_oracle(grid.query_knn(queries, 4), points, queries, 4, box3=box3)
        assert_knn_matches_oracle(grid.query_knn(queries, 3, r_max=r), points, queries, 3, r,
                                  box3)

    check()


@pytest.mark.needs("query_box")
def test_every_box_query_matches_the_oracle(engine, examples, lacks):
    @examples
    @given(scene=scenes(periodic_boxes="periodic" not in lacks))
    def check(scene):
        points, box, periodic, queries, _, _ = scene
        box3 = oracles.periods(box, periodic, points.shape[1])
        grid = engine(points, 0.5, box=box, periodic=periodic)
        lower, upper = box_corners(queries)
        assert_rows_match(grid.query_box(lower, upper),
                          *oracles.box(points, lower, upper, box3=box3))

    check()


@pytest.mark.needs("cell_size", "query_box", "query_knn")
def test_answers_do_not_depend_on_the_cell_size(engine, examples, lacks):
    @examples
    @given(scene=scenes(periodic_boxes="periodic" not in lacks))
    def check(scene):
        points, box, periodic, queries, r, radii = scene
        lower, upper = box_corners(queries)

        def every_answer(cell_size):
            grid = engine(points, cell_size, box=box, periodic=periodic)
            return (answers(grid, r, queries, radii) | knn_answers(grid, r, queries)
                    | box_answers(grid, lower, upper))

        expected = every_answer(0.5)
        for cell_size in (None, 0.125, 0.375, 1.0, 4.0):
            assert_same_answers(every_answer(cell_size), expected)

    check()


#: Shifts of translations, in multiples of `STEP`.
SHIFTS = st.lists(st.integers(-(2**20), 2**20), min_size=3, max_size=3)


def translation(scene, shift) -> np.ndarray:
    """The offset by ``shift`` on the scene's open axes."""
    points, box, periodic = scene[:3]
    n_dims = points.shape[1]
    open_axes = ~np.isfinite(oracles.periods(box, periodic, n_dims)[:n_dims])
    return np.array(shift[:n_dims]) * STEP * open_axes  # dyadic: exact sums


def test_answers_invariant_to_translation_on_open_axes(engine, examples, lacks):
    @examples
    @given(scene=scenes(periodic_boxes="periodic" not in lacks), shift=SHIFTS)
    def check(scene, shift):
        points, box, periodic, queries, r, radii = scene
        offset = translation(scene, shift)
        expected = answers(engine(points, 0.5, box=box, periodic=periodic), r, queries,
                           radii)
        got = answers(engine(points + offset, 0.5, box=box, periodic=periodic), r,
                      queries + offset, radii)
        assert_same_answers(got, expected)

    check()


@pytest.mark.needs("query_knn")
def test_knn_answers_invariant_to_translation_on_open_axes(engine, examples, lacks):
    @examples
    @given(scene=scenes(periodic_boxes="periodic" not in lacks), shift=SHIFTS)
    def check(scene, shift):
        points, box, periodic, queries, r, _ = scene
        offset = translation(scene, shift)
        expected = knn_answers(engine(points, 0.5, box=box, periodic=periodic), r, queries)
        got = knn_answers(engine(points + offset, 0.5, box=box, periodic=periodic), r,
                          queries + offset)
        assert_same_answers(got, expected)

    check()


@pytest.mark.needs("query_box")
def test_box_answers_invariant_to_translation_on_open_axes(engine, examples, lacks):
    @examples
    @given(scene=scenes(periodic_boxes="periodic" not in lacks), shift=SHIFTS)
    def check(scene, shift):
        points, box, periodic, queries = scene[:4]
        offset = translation(scene, shift)
        lower, upper = box_corners(queries)
        expected = box_answers(engine(points, 0.5, box=box, periodic=periodic), lower, upper)
        got = box_answers(engine(points + offset, 0.5, box=box, periodic=periodic),
                          lower + offset, upper + offset)
        assert_same_answers(got, expected)

    check()


def test_answers_invariant_to_permutation_of_the_points(engine, examples, lacks):
    @examples
    @given(scene=scenes(periodic_boxes="periodic" not in lacks), data=st.data())
    def check(scene, data):
        points, box, periodic, queries, r, radii = scene
        n = len(points)
        permutation = np.array(data.draw(st.permutations(range(n))), dtype=np.int64)
        grid = engine(points, 0.5, box=box, periodic=periodic)
        shuffled = engine(points[permutation], 0.5, box=box, periodic=periodic)
        box3 = oracles.periods(box, periodic, points.shape[1])

        # Point i of the shuffled grid is point permutation[i] of the original.
        for kwargs, shuffled_kwargs in [({"r": r}, {"r": r}),
                                        ({"radii": radii}, {"radii": radii[permutation]})]:
            base = grid.query_pairs(return_distances=True, **kwargs)
            moved = shuffled.query_pairs(return_distances=True, **shuffled_kwargs)
            mapped = np.sort(permutation[moved.indices], axis=1).reshape(-1, 2)
            assert_pairs_match_oracle(Pairs(mapped, moved.distances, moved.shape), points,
                                      box3=box3, **kwargs)
            assert len(moved) == len(base)

        base_rows = grid.query_radius(queries, r, return_distances=True)
        moved_rows = shuffled.query_radius(queries, r, return_distances=True)
        remapped = Neighbors(moved_rows.indptr, permutation[moved_rows.indices],
                             moved_rows.distances, n)
        assert rows(remapped) == rows(base_rows)

    check()


@pytest.mark.needs("query_knn")
def test_knn_answers_invariant_to_permutation_of_the_points(engine, examples, lacks):
    @examples
    @given(scene=scenes(periodic_boxes="periodic" not in lacks), data=st.data())
    def check(scene, data):
        points, box, periodic, queries = scene[:4]
        permutation = np.array(data.draw(st.permutations(range(len(points)))),
                               dtype=np.int64)
        grid = engine(points, 0.5, box=box, periodic=periodic)
        shuffled = engine(points[permutation], 0.5, box=box, periodic=periodic)
        box3 = oracles.periods(box, periodic, points.shape[1])
        # Ties go to the smaller index, which the permutation changes: the distances are
        # the same, and each point named is at its distance.
        base_knn, moved_knn = grid.query_knn(queries, 5), shuffled.query_knn(queries, 5)
        assert_equal(moved_knn.distances, base_knn.distances)
        assert_equal(moved_knn.counts, base_knn.counts)
        points3, queries3 = oracles.prepare(points, box3), oracles.prepare(queries, box3)
        for q, (row, count) in enumerate(zip(moved_knn.indices, moved_knn.counts,
                                             strict=True)):
            named = permutation[row[:count]]
            assert len(set(named.tolist())) == count
            d2 = oracles.squared_distances(queries3[q : q + 1], points3[named], box3)[0]
            assert_equal(np.sqrt(d2), base_knn.distances[q, :count])

    check()


@pytest.mark.needs("query_box")
def test_box_rows_invariant_to_permutation_of_the_points(engine, examples, lacks):
    @examples
    @given(scene=scenes(periodic_boxes="periodic" not in lacks), data=st.data())
    def check(scene, data):
        points, box, periodic, queries = scene[:4]
        permutation = np.array(data.draw(st.permutations(range(len(points)))),
                               dtype=np.int64)
        grid = engine(points, 0.5, box=box, periodic=periodic)
        shuffled = engine(points[permutation], 0.5, box=box, periodic=periodic)
        lower, upper = box_corners(queries)
        moved_boxes = shuffled.query_box(lower, upper)
        assert rows(Neighbors(moved_boxes.indptr, permutation[moved_boxes.indices], None,
                              len(points))) == rows(grid.query_box(lower, upper))

    check()


# ---------------------------------------------------------------------- inputs
def every_call(grid, queries, radii):
    """Every pair, radius and count query once (one ``r`` for all queries), with the
    given inputs."""
    grid.query_pairs(0.5, return_distances=True)
    grid.query_pairs(radii=radii)
    grid.query_pairs(0.5, queries=queries)
    grid.query_radius(queries, 0.5, sort=False)
    grid.count_radius(queries, 0.5)


def every_feature_call(grid, queries, radii, r, lower, upper, box):
    """Every call of `FEATURES` once, with the given inputs: chunks of pairs, k nearest,
    one ``r`` per query, boxes and (on open grids) rays."""
    list(grid.iter_pairs(0.5, chunk_size=5))
    grid.query_knn(queries, 3)
    grid.query_knn(queries, 3, r_max=0.5)
    list(grid.iter_pairs(radii=radii, chunk_size=5))
    grid.query_radius(queries, r, return_distances=True)
    grid.count_radius(queries, r)
    grid.query_box(lower, upper)
    grid.query_box(lower[0], upper[0], sort=False)
    if box is None:
        grid.query_ray(queries, upper - lower + 0.25, radii)
        grid.query_ray(queries, upper - lower + 0.25, radii, max_distance=r, all_hits=True)


def unwrapped_inputs() -> dict[str, np.ndarray]:
    """Points, queries, radii, one ``r`` per query and box corners in 3-D, with
    coordinates outside [0, 2): anything wrapping them in place would show."""
    rng = np.random.default_rng(42)
    points = rng.random((100, 3)) * 6 - 3
    queries = rng.random((12, 3)) * 6 - 3
    radii = rng.random(100) * 0.4
    r = rng.random(12) * 0.9
    return {"points": points, "queries": queries, "radii": radii, "r": r,
            "lower": queries - 0.3, "upper": queries + 0.4}


@boxes(None, 2.0)
def test_inputs_are_never_modified(engine, box):
    inputs = unwrapped_inputs()
    copies = {name: array.copy() for name, array in inputs.items()}
    every_call(engine(inputs["points"], 0.25, box=box), inputs["queries"], inputs["radii"])
    for name, array in inputs.items():
        assert array.tobytes() == copies[name].tobytes(), name


@pytest.mark.needs("iter_pairs", "query_knn", "per-query radii", "query_box", "query_ray")
@boxes(None, 2.0)
def test_inputs_are_never_modified_by_the_feature_calls(engine, box):
    inputs = unwrapped_inputs()
    copies = {name: array.copy() for name, array in inputs.items()}
    points, queries, radii, r, lower, upper = inputs.values()
    every_feature_call(engine(points, 0.25, box=box), queries, radii, r, lower, upper, box)
    for name, array in inputs.items():
        assert array.tobytes() == copies[name].tobytes(), name


def read_only_inputs() -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Points, queries, radii, one ``r`` per query and box corners in 3-D, read-only, and
    their writable copies."""
    rng = np.random.default_rng(43)
    points = rng.integers(-12, 12, size=(100, 3)) * STEP
    queries = rng.integers(-12, 12, size=(12, 3)) * STEP
    radii = rng.integers(0, 3, size=100) * 0.125
    r = rng.integers(0, 4, size=12) * STEP
    lower, upper = queries - 0.5, queries + 0.75
    inputs = [points, queries, radii, r, lower, upper]
    writable = [array.copy() for array in inputs]
    for array in inputs:
        array.flags.writeable = False
    return inputs, writable


@pytest.mark.needs("fast queries")
@boxes(None, 2.0)
def test_read_only_inputs_are_accepted(engine, box):
    (points, queries, radii, *_), writable = read_only_inputs()
    every_call(engine(points, 0.5, box=box), queries, radii)
    expected = answers(engine(writable[0], 0.5, box=box), 0.5, *writable[1:3])
    got = answers(engine(points, 0.5, box=box), 0.5, queries, radii)
    assert_same_answers(got, expected)


@pytest.mark.needs("iter_pairs", "query_knn", "per-query radii", "query_box", "query_ray")
@boxes(None, 2.0)
def test_read_only_inputs_are_accepted_by_the_feature_calls(engine, box):
    (points, queries, radii, r, lower, upper), writable = read_only_inputs()
    every_feature_call(engine(points, 0.5, box=box), queries, radii, r, lower, upper, box)
    expected = (box_answers(engine(writable[0], 0.5, box=box), *writable[4:])
                | knn_answers(engine(writable[0], 0.5, box=box), 0.5, writable[1]))
    got = (box_answers(engine(points, 0.5, box=box), lower, upper)
           | knn_answers(engine(points, 0.5, box=box), 0.5, queries))
    assert_same_answers(got, expected)
    per_query = engine(points, 0.5, box=box).query_radius(queries, r, return_distances=True)
    assert_radius_matches_oracle(per_query, writable[0], writable[1], writable[3],
                                 oracles.periods(box, None, 3))


def integer_inputs():
    """Integer points, queries and box corners in 2-D, and the generator that drew them."""
    rng = np.random.default_rng(44)
    points = rng.integers(-40, 40, size=(150, 2))
    queries = rng.integers(-40, 40, size=(20, 2))
    return points, queries, queries - 3, queries + 5, rng


#: The dtypes of input coordinates converted to float64.
INPUT_DTYPES = (np.float32, np.int32, np.int64, np.int16)


@pytest.mark.needs("fast queries")
def test_float32_and_integer_inputs_give_the_answers_of_their_float64_copy(engine):
    points, queries, _, _, rng = integer_inputs()
    radii = np.full(150, 1.5)
    expected = answers(engine(points.astype(np.float64), 4.0), 4.0,
                       queries.astype(np.float64), radii)
    for dtype in INPUT_DTYPES:
        got = answers(engine(points.astype(dtype), 4), 4, queries.astype(dtype), radii)
        assert_same_answers(got, expected)
    values = rng.random((150, 3)).astype(np.float32)
    grid = engine(values, 0.2)
    assert_pairs_match_oracle(grid.query_pairs(0.2, return_distances=True),
                              values.astype(np.float64), 0.2)


@pytest.mark.needs("query_knn", "fast queries")
def test_float32_and_integer_inputs_give_the_knn_of_their_float64_copy(engine):
    points, queries, _, _, _ = integer_inputs()
    expected = knn_answers(engine(points.astype(np.float64), 4.0), 4.0,
                           queries.astype(np.float64))
    for dtype in INPUT_DTYPES:
        assert_same_answers(knn_answers(engine(points.astype(dtype), 4), 4,
                                        queries.astype(dtype)), expected)


@pytest.mark.needs("query_box")
def test_float32_and_integer_boxes_give_the_rows_of_their_float64_copy(engine):
    points, _, lower, upper, _ = integer_inputs()
    expected = box_answers(engine(points.astype(np.float64), 4.0), lower.astype(np.float64),
                           upper.astype(np.float64))
    for dtype in INPUT_DTYPES:
        got = box_answers(engine(points.astype(dtype), 4), lower.astype(dtype),
                          upper.astype(dtype))
        assert_same_answers(got, expected)


@pytest.mark.needs("checks at construction")
def test_coordinates_out_of_range_are_refused(engine):
    with pytest.raises(ValueError, match=r"`points` must lie within \+-1e\+150"):
        engine(np.array([[0.0, 1e151]]), 1.0)
    with pytest.raises(ValueError, match=r"`points` must be 0 or at least 1\.34e-138"):
        engine(np.array([[0.0, 1e-140]]), 1.0)
    grid = engine(np.array([[0.0, 1.0], [0.0, 2.0**-458]]), 1.0)
    for call in (lambda q: grid.query_radius(q, 1.0), lambda q: grid.query_knn(q, 1)):
        with pytest.raises(ValueError, match=r"`queries` must lie within \+-1e\+150"):
            call(np.array([[-1e151, 0.0]]))


# ---------------------------------------------------------------------- duplicates
#: Three points at (1, 1), two at the origin, one apart.
DUPLICATES = np.array([[1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [0.5, 0.0], [1.0, 1.0], [0.0, 0.0]])


def test_duplicate_points_are_reported_at_distance_zero(engine):
    grid = engine(DUPLICATES, 0.5)
    pairs = grid.query_pairs(0.0, return_distances=True).sorted()
    assert pairs.indices.tolist() == [[0, 2], [0, 4], [1, 5], [2, 4]]
    assert pairs.distances.tolist() == [0.0] * 4
    near = grid.query_radius(np.array([[1.0, 1.0]]), 0.0, return_distances=True)
    assert near.row(0).tolist() == [0, 2, 4] and near.distances.tolist() == [0.0] * 3
    assert grid.count_radius(np.array([[0.0, 0.0]]), 0.0).tolist() == [2]
    contacts = grid.query_pairs(radii=np.zeros(6)).sorted()
    assert contacts.indices.tolist() == pairs.indices.tolist()


@pytest.mark.needs("query_knn")
def test_duplicate_points_are_nearest_at_distance_zero(engine):
    nearest = engine(DUPLICATES, 0.5).query_knn(np.array([[1.0, 1.0]]), 4)
    assert nearest.indices.tolist() == [[0, 2, 4, 3]]
    assert nearest.distances[0, :3].tolist() == [0.0] * 3


@pytest.mark.needs("query_box")
def test_duplicate_points_are_all_in_a_box_around_them(engine):
    grid = engine(DUPLICATES, 0.5)
    assert grid.query_box(np.array([1.0, 1.0]), np.array([1.0, 1.0])).row(0).tolist() == [
        0, 2, 4]


def test_duplicate_points_keep_explicit_zeros_in_scipy_matrices(engine):
    pytest.importorskip("scipy")
    points = np.array([[0.0, 0.0], [0.0, 0.0], [0.5, 0.0]])
    grid = engine(points, 1.0)
    matrix = grid.query_pairs(0.5, return_distances=True).to_scipy()
    entries = sorted(zip(matrix.row.tolist(), matrix.col.tolist(), matrix.data.tolist(),
                         strict=True))
    assert entries == [(0, 1, 0.0), (0, 2, 0.5), (1, 2, 0.5)]
    rows_matrix = grid.query_radius(points[:1], 0.0, return_distances=True).to_scipy()
    assert rows_matrix.nnz == 2 and rows_matrix.data.tolist() == [0.0, 0.0]


# ---------------------------------------------------------------------- rays
def ray_expected(points, radii, origins, directions, max_distance=np.inf):
    """Oracle ``((first indices, first distances), (indptr, indices, distances))``."""
    n_dims = points.shape[1]
    origins3, directions3, centers3 = (np.zeros((len(a), 3)) for a in
                                       (origins, directions, points))
    origins3[:, :n_dims], directions3[:, :n_dims], centers3[:, :n_dims] = (
        origins, directions, points)
    times = ray_oracles.ray_sphere_times(origins3, ray_oracles.unit_directions(directions3),
                                         centers3, np.broadcast_to(radii, len(points)),
                                         max_distance)
    return ray_oracles.first_hits(times), ray_oracles.all_hits(times)


@pytest.mark.needs("query_ray")
def test_rays_closed_spheres_entry_distances_and_misses(engine):
    points = np.array([[2.0, 0.5], [2.0, -0.5], [0.0, 0.0], [5.0, 0.0], [3.0, 3.0]])
    radii = np.array([0.5, 0.5, 0.25, 0.0, 0.5])
    grid = engine(points, 1.0)
    origins = np.array([[-1.0, 0.0], [0.0, 0.0], [4.0, 1.0], [0.0, 3.5], [4.0, 0.0]])
    directions = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, -1.0], [1.0, 0.0], [1.0, 0.0]])
    first = grid.query_ray(origins, directions, radii)
    assert isinstance(first, RayHits)
    # Ray 0 enters sphere 2 at 0.75, then touches spheres 0 and 1 (tangent: spheres are
    # closed) at 3, a tie that goes to the smaller index, then meets point 3 (radius 0) at
    # 6; ray 1 starts inside sphere 2 (distance 0); ray 2 meets nothing; ray 3 touches
    # sphere 4 at 3; ray 4 meets point 3 at 1.
    assert first.indices.tolist() == [2, 2, -1, 4, 3]
    assert first.distances.tolist() == [0.75, 0.0, np.inf, 3.0, 1.0]
    every = grid.query_ray(origins, directions, radii, all_hits=True)
    assert every.row(0).tolist() == [2, 0, 1, 3]  # by distance, then by index
    assert every.distances[: every.indptr[1]].tolist() == [0.75, 3.0, 3.0, 6.0]
    (indices, distances), (indptr, all_indices, all_distances) = ray_expected(
        points, radii, origins, directions)
    assert_equal(first.indices, indices)
    assert_equal(first.distances, distances)
    assert_rows_match(every, indptr, all_indices, all_distances)


@pytest.mark.needs("query_ray")
def test_rays_segments_include_hits_at_exactly_max_distance(engine):
    points = np.array([[2.0, 0.0], [4.0, 0.0]])
    grid = engine(points, 1.0)
    origins, directions = np.zeros((2, 2)), np.array([[1.0, 0.0], [1.0, 0.0]])
    first = grid.query_ray(origins, directions, 0.5, max_distance=np.array([1.5, 1.25]))
    assert first.indices.tolist() == [0, -1] and first.distances.tolist() == [1.5, np.inf]
    every = grid.query_ray(origins, directions, 0.5, max_distance=3.5, all_hits=True)
    assert every.row(0).tolist() == [0, 1]


@pytest.mark.needs("query_ray")
@pytest.mark.parametrize("n_dims", [2, 3])
def test_rays_match_the_oracle(engine, n_dims):
    rng = np.random.default_rng(45 + n_dims)
    points = rng.integers(0, 40, size=(300, n_dims)) * STEP
    radii = rng.integers(0, 4, size=300) * 0.125
    origins = rng.integers(-4, 44, size=(60, n_dims)) * STEP
    directions = rng.integers(-4, 5, size=(60, n_dims)).astype(np.float64)
    directions[~directions.any(axis=1), 0] = 1.0
    grid = engine(points, 0.75)
    for max_distance in (np.inf, 3.0):
        (indices, distances), (indptr, all_indices, all_distances) = ray_expected(
            points, radii, origins, directions, max_distance)
        first = grid.query_ray(origins, directions, radii, max_distance=max_distance)
        assert_equal(first.indices, indices)
        assert_equal(first.distances, distances)
        every = grid.query_ray(origins, directions, radii, max_distance=max_distance,
                               all_hits=True)
        assert_rows_match(every, indptr, all_indices, all_distances)


@pytest.mark.needs("query_ray", "periodic")
def test_rays_need_an_open_grid(engine):
    grid = engine(np.zeros((3, 2)), 1.0, box=[4.0, 4.0], periodic=[False, True])
    with pytest.raises(ValueError, match=r"`box` must be None for ray casts"):
        grid.query_ray(np.zeros((1, 2)), np.ones((1, 2)), 0.5)
