"""`Grid.for_each_pair` and `Grid.for_each_neighbor`: a compiled function called for every
pair (both orders) or every neighbour of a query, storing no list.

The calls are recorded (sequential paths: a shared counter would race on several threads)
and compared with `query_pairs` / `query_radius` and with the brute-force arithmetic of
``oracles.py``: the same pairs, the same squared distances, bit for bit, and separations
``x_i - x_j`` with the minimum image. Accumulations are compared with NumPy: counts per
point exactly (``np.bincount`` over both orders of each pair); sums of ``d2`` exactly on
lattice coordinates (every partial sum is exact, so the order of the terms does not
matter), and to a relative 1e-12 on random coordinates, where the order differs from
NumPy's. Determinism: sums are the same bytes for 1, 2 and the default number of threads
on inputs large enough for the multi-threaded path. Then the errors.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numba import njit
from numba.core.errors import TypingError

from spatialhash import Grid, _compile_notice
from spatialhash.grid import _cpu_engine, _pair_functions
from spatialhash.grid._kernels import stencil

import oracles

STEP = 0.25
EXAMPLES = max(10, settings.default.max_examples // 2)
#: Points and queries of the multi-threaded paths (from 20,000 points, 2,000 queries).
N_LARGE = 30_000
N_LARGE_QUERIES = 3_000


# ---------------------------------------------------------------------- functions
@njit
def record(i, j, d2, dx, dy, dz, calls, n_calls):
    """Append the call to ``calls`` (one thread only: the counter is shared)."""
    k = n_calls[0]
    calls[k, 0] = i
    calls[k, 1] = j
    calls[k, 2] = d2
    calls[k, 3] = dx
    calls[k, 4] = dy
    calls[k, 5] = dz
    n_calls[0] = k + 1


@njit
def accumulate(i, j, d2, dx, dy, dz, counts, sums):
    """Per-point counts and sums of ``d2``, ``dx``, ``dy``, ``dz``: row ``i`` only."""
    counts[i] += 1
    sums[i, 0] += d2
    sums[i, 1] += dx
    sums[i, 2] += dy
    sums[i, 3] += dz


@njit
def raise_at(i, j, d2, dx, dy, dz, bad):
    if i == bad:
        raise ValueError("fn refused a point")


@njit
def raise_once(i, j, d2, dx, dy, dz, raised):
    """Raise on the first call only: a second run of the same points does not."""
    if raised[0] == 0:
        raised[0] = 1
        raise ValueError("only once")


@njit
def two_arguments(i, j):
    pass


def python_function(i, j, d2, dx, dy, dz):
    pass


# ---------------------------------------------------------------------- helpers
def recorded_pairs(grid, r=None, radii=None, once=False):
    """The calls of ``grid.for_each_pair``, as rows (i, j, d2, dx, dy, dz) sorted by (i, j)."""
    n = grid.n_points
    calls = np.zeros((max(n * (n - 1), 1), 6))
    n_calls = np.zeros(1, np.int64)
    grid.for_each_pair(r, record, calls, n_calls, radii=radii, once=once)
    return sort_calls(calls[: n_calls[0]])


def lower_first(calls):
    """Calls ``(i, j, ...)`` as ``(min, max, ...)``, the separation negated where swapped,
    sorted."""
    swapped = calls[:, 0] > calls[:, 1]
    turned = calls.copy()
    turned[swapped] = calls[swapped][:, [1, 0, 2, 3, 4, 5]] * [1, 1, 1, -1, -1, -1]
    return sort_calls(turned)


def assert_once_matches(grid, points, r=None, *, radii=None, box3=None):
    """The calls of ``for_each_pair(once=True)``: each pair of the oracle once, in either
    order, with its separation ``x_i - x_j`` for the order it comes in."""
    box3 = np.full(3, np.inf) if box3 is None else box3
    calls = recorded_pairs(grid, r, radii, once=True)
    oracle, _ = oracles.pairs(points, r, radii=radii, box3=box3)
    expected, ties = expected_calls(points, points, oracle.astype(np.int64).reshape(-1, 2),
                                    box3)
    assert_calls_match(lower_first(calls), expected, ties)


def recorded_neighbors(grid, queries, r):
    """The calls of ``grid.for_each_neighbor``, sorted by (q, j)."""
    calls = np.zeros((max(len(queries) * grid.n_points, 1), 6))
    n_calls = np.zeros(1, np.int64)
    grid.for_each_neighbor(queries, r, record, calls, n_calls)
    return sort_calls(calls[: n_calls[0]])


def sort_calls(calls):
    return calls[np.lexsort((calls[:, 1], calls[:, 0]))]


def separations(a3, b3, box3):
    """``a - b`` per axis with one minimum-image correction, as in ``oracles.py``; and
    where the difference is exactly half a period (either image is as near)."""
    deltas, ties = [], []
    for axis in range(3):
        delta = a3[:, axis] - b3[:, axis]
        tie = np.zeros(delta.shape, bool)
        if np.isfinite(box3[axis]):
            half = box3[axis] / 2.0
            delta = np.where(delta > half, delta - box3[axis],
                             np.where(delta < -half, delta + box3[axis], delta))
            tie = np.abs(delta) == half
        deltas.append(delta)
        ties.append(tie)
    return np.column_stack(deltas), np.column_stack(ties)


def expected_calls(points, queries, pairs, box3):
    """Rows (i, j, d2, dx, dy, dz) of the calls for the index pairs ``pairs`` (points
    ``queries[i]`` and ``points[j]``), and where ``dx, dy, dz`` are ties."""
    a3 = oracles.prepare(queries, box3)[pairs[:, 0]]
    b3 = oracles.prepare(points, box3)[pairs[:, 1]]
    delta, ties = separations(a3, b3, box3)
    d2 = delta[:, 0] * delta[:, 0] + delta[:, 1] * delta[:, 1] + delta[:, 2] * delta[:, 2]
    return np.column_stack([pairs, d2, delta]), ties


def both_orders(pairs):
    """Unordered pairs ``(i, j)`` as ordered ones, both ways, sorted."""
    ordered = np.concatenate([pairs, pairs[:, ::-1]]).astype(np.int64).reshape(-1, 2)
    return ordered[np.lexsort((ordered[:, 1], ordered[:, 0]))]


def assert_calls_match(calls, expected, ties):
    """Equal rows; a separation of exactly half a period may come with either sign."""
    np.testing.assert_array_equal(calls[:, :3], expected[:, :3])
    delta, want = calls[:, 3:], expected[:, 3:]
    np.testing.assert_array_equal(np.where(ties, np.abs(delta), delta),
                                  np.where(ties, np.abs(want), want))


def assert_pairs_match(grid, points, r=None, *, radii=None, box3=None):
    """The calls of ``for_each_pair`` against ``query_pairs`` and the oracle."""
    box3 = np.full(3, np.inf) if box3 is None else box3
    calls = recorded_pairs(grid, r, radii)
    listed = grid.query_pairs(r, radii=radii).sorted().indices
    oracle, _ = oracles.pairs(points, r, radii=radii, box3=box3)
    np.testing.assert_array_equal(listed, oracle)
    expected, ties = expected_calls(points, points, both_orders(oracle), box3)
    assert_calls_match(calls, expected, ties)
    # (j, i) is (i, j) with the separation negated, bit for bit.
    swapped = sort_calls(calls[:, [1, 0, 2, 3, 4, 5]] * [1, 1, 1, -1, -1, -1])
    np.testing.assert_array_equal(swapped, calls)
    return calls


def assert_neighbors_match(grid, points, queries, r, box3=None):
    box3 = np.full(3, np.inf) if box3 is None else box3
    calls = recorded_neighbors(grid, queries, r)
    near = grid.query_radius(queries, r)
    rows = np.repeat(np.arange(len(queries)), np.diff(near.indptr))
    listed = np.column_stack([rows, near.indices]).astype(np.int64).reshape(-1, 2)
    indptr, indices, _ = oracles.radius(points, queries, r, box3=box3)
    np.testing.assert_array_equal(near.indices, indices)
    expected, ties = expected_calls(points, queries, listed, box3)
    assert_calls_match(calls, expected, ties)
    return calls


# ---------------------------------------------------------------------- random scenes
@st.composite
def scenes(draw, max_points: int = 40):
    """Lattice points in 1-3 dimensions, open or (partly) periodic, a radius, per-point
    radii, queries, a cell size and an algorithm."""
    n_dims = draw(st.integers(1, 3))
    n = draw(st.integers(0, max_points))
    spread = draw(st.sampled_from([2, 4, 8]))
    points = draw(arrays(np.int64, (n, n_dims), elements=st.integers(-spread, spread))) * STEP
    box = periodic = None
    if draw(st.booleans()):
        box = draw(st.lists(st.sampled_from([4.0, 8.0]), min_size=n_dims, max_size=n_dims))
        periodic = draw(st.lists(st.booleans(), min_size=n_dims, max_size=n_dims))
    m = draw(st.integers(0, 8))
    queries = draw(arrays(np.int64, (m, n_dims), elements=st.integers(-12, 12))) * STEP
    r = draw(st.integers(0, 8)) * STEP  # at most half the smallest period
    radii = draw(arrays(np.int64, n, elements=st.integers(0, 4))) * STEP
    cell_size = draw(st.sampled_from([None, 0.375, 0.625, 1.25, 2.5]))
    algorithm = draw(st.sampled_from(["grid", "brute"]))
    grid = Grid(points, cell_size, box=box, periodic=periodic, algorithm=algorithm)
    return grid, points, queries, r, radii, oracles.periods(box, periodic, n_dims)


@settings(max_examples=EXAMPLES)
@given(scenes())
def test_pairs_are_those_of_query_pairs_in_both_orders(scene):
    grid, points, _, r, radii, box3 = scene
    calls = assert_pairs_match(grid, points, r, box3=box3)
    assert_pairs_match(grid, points, radii=radii, box3=box3)
    # Accumulations: counts exact; sums of d2 exact on the lattice, in any order.
    n = len(points)
    counts = np.zeros(n, np.int64)
    sums = np.zeros((n, 4))
    grid.for_each_pair(r, accumulate, counts, sums)
    listed = grid.query_pairs(r).indices
    np.testing.assert_array_equal(counts, np.bincount(listed.ravel(), minlength=n))
    oracle, _ = oracles.pairs(points, r, box3=box3)
    expected, _ = expected_calls(points, points, both_orders(oracle), box3)
    np.testing.assert_array_equal(
        sums[:, 0], np.bincount(expected[:, 0].astype(np.int64), expected[:, 2], n))
    np.testing.assert_array_equal(
        sums[:, 0], np.bincount(calls[:, 0].astype(np.int64), calls[:, 2], n))


@settings(max_examples=EXAMPLES)
@given(scenes())
def test_neighbors_are_the_rows_of_query_radius(scene):
    grid, points, queries, r, _, box3 = scene
    calls = assert_neighbors_match(grid, points, queries, r, box3)
    counts = np.zeros(len(queries), np.int64)
    sums = np.zeros((len(queries), 4))
    grid.for_each_neighbor(queries, r, accumulate, counts, sums)
    np.testing.assert_array_equal(counts, grid.count_radius(queries, r))
    expected = np.zeros(len(queries))
    np.add.at(expected, calls[:, 0].astype(np.int64), calls[:, 2])
    np.testing.assert_array_equal(sums[:, 0], expected)


def test_random_coordinates_give_the_pairs_of_query_pairs():
    # Rounded distances near r: the same pairs, the same d2 as the pair search's.
    points = np.random.default_rng(3).random((1_500, 3))
    grid = Grid(points, cell_size=0.08)
    calls = assert_pairs_match(grid, points, 0.08)
    assert len(calls) > 4_000
    listed = grid.query_pairs(0.08, return_distances=True)
    d2 = np.concatenate([listed.distances, listed.distances]) ** 2
    np.testing.assert_allclose(np.sort(calls[:, 2]), np.sort(d2), rtol=1e-12)
    queries = np.random.default_rng(4).random((300, 3))
    assert_neighbors_match(grid, points, queries, 0.08)


# ---------------------------------------------------------------------- named cases
def test_periodic_pair_across_the_boundary_has_the_minimum_image():
    points = np.array([[0.25, 1.0, 1.0], [9.75, 1.0, 1.0], [5.0, 5.0, 5.0]])
    grid = Grid(points, cell_size=1.0, box=10.0)
    calls = assert_pairs_match(grid, points, 1.0, box3=np.full(3, 10.0))
    np.testing.assert_array_equal(calls, [[0, 1, 0.25, 0.5, 0, 0], [1, 0, 0.25, -0.5, 0, 0]])
    neighbors = recorded_neighbors(grid, np.array([[9.5, 1.0, 1.0]]), 1.0)
    np.testing.assert_array_equal(neighbors, [[0, 0, 0.5625, -0.75, 0, 0],
                                              [0, 1, 0.0625, -0.25, 0, 0]])


def test_minimum_image_when_the_search_covers_a_whole_periodic_axis():
    # Four cells of 0.5 on a period of 2, r = 1: the stencil covers the whole axis.
    points = np.array([[0.25], [1.75], [1.0]])
    grid = Grid(points, cell_size=0.5, box=2.0)
    calls = assert_pairs_match(grid, points, 1.0, box3=np.array([2.0, np.inf, np.inf]))
    assert [0, 1, 0.25, 0.5, 0, 0] in calls.tolist()


def test_per_particle_radii_are_closed_contacts():
    points = np.array([[0.0, 0.0], [0.75, 0.0], [2.0, 0.0], [2.0, 0.5]])
    radii = np.array([0.5, 0.25, 0.25, 0.25])  # 0-1 touch, 2-3 touch, 1-2 do not
    grid = Grid(points, cell_size=1.0)
    calls = assert_pairs_match(grid, points, radii=radii)
    assert calls[:, :2].tolist() == [[0, 1], [1, 0], [2, 3], [3, 2]]


@pytest.mark.parametrize("n_dims", [1, 2])
def test_missing_axes_give_zero_separations(n_dims):
    points = np.random.default_rng(n_dims).integers(0, 8, (30, n_dims)) * STEP
    grid = Grid(points, cell_size=0.5)
    calls = assert_pairs_match(grid, points, 0.5)
    assert len(calls) > 0
    assert not calls[:, 3 + n_dims:].any()
    neighbors = assert_neighbors_match(grid, points, points[:5] + STEP / 2, 0.5)
    assert not neighbors[:, 3 + n_dims:].any()


def test_empty_grid_and_no_queries_call_nothing():
    empty = Grid(np.empty((0, 3)))
    assert len(recorded_pairs(empty, 1.0)) == 0
    assert len(recorded_pairs(empty, radii=np.empty(0))) == 0
    assert len(recorded_neighbors(empty, np.zeros((3, 3)), 1.0)) == 0
    points = np.zeros((4, 3))
    assert len(recorded_neighbors(Grid(points), np.empty((0, 3)), 1.0)) == 0


def test_one_point_has_no_pair_and_is_its_own_neighbor():
    grid = Grid(np.array([[1.0, 2.0, 3.0]]))
    assert len(recorded_pairs(grid, 10.0)) == 0
    np.testing.assert_array_equal(recorded_neighbors(grid, np.array([[1.0, 2.0, 3.0]]), 0.0),
                                  [[0, 0, 0, 0, 0, 0]])


def test_duplicates_pair_at_distance_zero():
    points = np.array([[0.5, 0.5, 0.5]] * 3 + [[4.0, 4.0, 4.0]])
    calls = recorded_pairs(Grid(points, cell_size=1.0), 0.0)
    expected = [[i, j, 0, 0, 0, 0] for i in range(3) for j in range(3) if i != j]
    np.testing.assert_array_equal(calls, expected)


def test_points_exactly_at_r_are_included():
    points = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.375, 0.0]])
    grid = Grid(points, cell_size=0.5)
    # 0-1 at exactly 0.5, 0-2 at 0.375, 1-2 at 0.625.
    assert recorded_pairs(grid, 0.5)[:, :2].tolist() == [[0, 1], [0, 2], [1, 0], [2, 0]]
    assert recorded_pairs(grid, 0.5 - 2.0**-40)[:, :2].tolist() == [[0, 2], [2, 0]]
    assert recorded_neighbors(grid, points[:1], 0.5)[:, 1].tolist() == [0, 1, 2]


# ---------------------------------------------------------------------- determinism
@pytest.fixture(scope="module")
def large():
    """Random points and queries for the multi-threaded paths, and a radius of about 30
    neighbours."""
    rng = np.random.default_rng(11)
    r = (90 / (4 * np.pi * N_LARGE)) ** (1 / 3)
    return rng.random((N_LARGE, 3)), rng.random((N_LARGE_QUERIES, 3)), r


@pytest.mark.parametrize("box", [None, 1.0])
def test_sums_are_the_same_bytes_for_any_thread_count(large, box):
    points, queries, r = large
    outputs = []
    for n_threads in (1, None, 2):
        grid = Grid(points, cell_size=r, box=box, n_threads=n_threads)
        counts, sums = np.zeros(N_LARGE, np.int64), np.zeros((N_LARGE, 4))
        grid.for_each_pair(r, accumulate, counts, sums)
        query_counts = np.zeros(N_LARGE_QUERIES, np.int64)
        query_sums = np.zeros((N_LARGE_QUERIES, 4))
        grid.for_each_neighbor(queries, r, accumulate, query_counts, query_sums)
        outputs.append((counts, sums, query_counts, query_sums))
    for other in outputs[1:]:
        for got, expected in zip(other, outputs[0], strict=True):
            assert got.tobytes() == expected.tobytes()
    counts, sums, query_counts, query_sums = outputs[0]
    listed = grid.query_pairs(r, return_distances=True)
    np.testing.assert_array_equal(counts, np.bincount(listed.indices.ravel(), minlength=N_LARGE))
    # Random coordinates: NumPy adds the terms in another order; 1e-12 relative.
    d2 = listed.distances ** 2
    from_list = (np.bincount(listed.indices[:, 0], d2, N_LARGE)
                 + np.bincount(listed.indices[:, 1], d2, N_LARGE))
    np.testing.assert_allclose(sums[:, 0], from_list, rtol=1e-12)
    # Separations cancel pairwise: their total is 0 up to rounding.
    assert abs(sums[:, 1].sum()) < 1e-9
    np.testing.assert_array_equal(query_counts, grid.count_radius(queries, r))


# ---------------------------------------------------------------------- slabs
# Grids cut into slabs (`_pair_functions.slab_plan`) find each pair once, on the half
# stencil, and call ``fn`` for both orders; the slabs run in two phases on many threads.
@st.composite
def slab_scenes(draw):
    """Lattice points spread over many planes of the slowest axis, so that the grid cuts
    into slabs: 1-3 dimensions, open or (partly) periodic, a radius, per-point radii."""
    n_dims = draw(st.integers(1, 3))
    n = draw(st.integers(50, 300))
    planes = draw(st.sampled_from([32, 64, 128]))
    # Spread by a drawn seed: hypothesis's own arrays favour points all in one place.
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    points = rng.integers(0, 4, (n, n_dims))
    points[:, -1] = rng.integers(0, planes, n)
    points = points * STEP
    box = periodic = None
    if draw(st.booleans()):
        box = [4.0] * (n_dims - 1) + [planes * STEP]
        periodic = draw(st.lists(st.booleans(), min_size=n_dims, max_size=n_dims))
    r = draw(st.integers(0, 3)) * STEP
    radii = rng.integers(0, 3, n) * STEP
    cell_size = draw(st.sampled_from([0.25, 0.375]))

    def grid_for(n_threads=None):
        return Grid(points, cell_size, box=box, periodic=periodic, n_threads=n_threads)

    return grid_for, points, r, radii, oracles.periods(box, periodic, n_dims)


def slab_plan(grid, r=None, radii=None):
    """The plan `for_each_pair` makes for ``grid`` and this reach (None: no slabs)."""
    state = grid.state
    reach = r if radii is None else 2 * float(np.max(radii, initial=0.0))
    reach_cells = _pair_search_reach(state, reach)
    if stencil.stencil_by_id(state.n_cells, state.box, reach_cells,
                                   state.cell_coords.shape[0]):
        return None
    return _pair_functions.slab_plan(state, reach_cells)


def _pair_search_reach(state, reach):
    return stencil.reach_in_cells(state.inv_cell_size, state.n_cells, reach)


def thread_counts_agree(grid_for, r=None, radii=None):
    """The sums of `accumulate` on 1, 2 and the default number of threads: the same bytes;
    returns those of one thread."""
    outputs = []
    for n_threads in (1, 2, None):
        grid = grid_for(n_threads)
        counts, sums = np.zeros(grid.n_points, np.int64), np.zeros((grid.n_points, 4))
        grid.for_each_pair(r, accumulate, counts, sums, radii=radii)
        outputs.append((counts.tobytes(), sums.tobytes()))
    assert outputs[1] == outputs[0]
    assert outputs[2] == outputs[0]
    return counts, sums


@settings(max_examples=EXAMPLES)
@given(slab_scenes())
def test_slab_plans_cover_every_cell_in_slabs_no_thinner_than_the_reach(scene):
    grid_for, _, r, radii, _ = scene
    grid = grid_for()
    for reach_r, reach_radii in ((r, None), (None, radii)):
        plan = slab_plan(grid, reach_r, reach_radii)
        if plan is None:
            continue
        state = grid.state
        n_slabs = plan.shape[0]
        assert n_slabs >= _pair_functions.MIN_SLABS
        # Even slabs first, then the odd ones: in cell order they tile the cells.
        in_order = np.empty_like(plan)
        in_order[0::2], in_order[1::2] = plan[: (n_slabs + 1) // 2], plan[(n_slabs + 1) // 2:]
        assert in_order[0, 0] == 0 and in_order[-1, 1] == state.cell_coords.shape[0]
        np.testing.assert_array_equal(in_order[1:, 0], in_order[:-1, 1])
        axis = max(a for a in range(3) if state.n_cells[a] > 1)
        reach = reach_r if reach_radii is None else 2 * float(np.max(reach_radii))
        reach_cells = _pair_search_reach(state, reach)[axis]
        coords = state.cell_coords[:, axis]
        # Stencils reach `reach_cells` planes forward: no cell of slab s + 2 is within
        # that of a cell of slab s, nor (periodic axis, an even number of slabs) a cell of
        # slab 1 within that of the last slab, across the period.
        gaps = [(s, s + 2, 0) for s in range(n_slabs - 2)]
        if np.isfinite(state.box[axis]):
            assert n_slabs % 2 == 0
            gaps.append((n_slabs - 1, 1, state.n_cells[axis]))
        for earlier, later, period in gaps:
            (lo, hi), (later_lo, later_hi) = in_order[earlier], in_order[later]
            if hi > lo and later_hi > later_lo:
                assert coords[later_lo] + period - coords[hi - 1] > reach_cells


@pytest.mark.parametrize("n_threads", [1, None])
def test_a_periodic_grid_whose_cuts_all_fall_short_calls_fn_without_slabs(n_threads):
    # r = 0 on a periodic line: four occupied cells (more than the stencil's three, so not
    # by cell id), 30 of the 33 points in one of them: none of the cuts that would balance
    # the slabs' points passes the thickness checks, which leaves one slab, an odd number
    # on a periodic axis with no neighbour to merge with.
    points = np.array([-0.5625, 0.0, 0.5] + [-0.0625] * 30)[:, None]
    grid = Grid(points, box=4.0, n_threads=n_threads)
    assert slab_plan(grid, 0.0) is None
    counts, sums = np.zeros(len(points), np.int64), np.zeros((len(points), 4))
    grid.for_each_pair(0.0, accumulate, counts, sums)
    np.testing.assert_array_equal(counts, [0, 0, 0] + [29] * 30)


@settings(max_examples=EXAMPLES)
@given(slab_scenes())
def test_slab_grids_call_fn_for_the_pairs_of_query_pairs_in_both_orders(scene):
    grid_for, points, r, radii, box3 = scene
    grid = grid_for()
    assert_pairs_match(grid, points, r, box3=box3)
    assert_pairs_match(grid, points, radii=radii, box3=box3)
    n = len(points)
    counts, sums = np.zeros(n, np.int64), np.zeros((n, 4))
    grid.for_each_pair(r, accumulate, counts, sums)
    np.testing.assert_array_equal(counts,
                                  np.bincount(grid.query_pairs(r).indices.ravel(), minlength=n))
    oracle, _ = oracles.pairs(points, r, box3=box3)
    expected, _ = expected_calls(points, points, both_orders(oracle), box3)
    np.testing.assert_array_equal(
        sums[:, 0], np.bincount(expected[:, 0].astype(np.int64), expected[:, 2], n))


@settings(max_examples=EXAMPLES)
@given(slab_scenes())
def test_slabs_on_many_threads_give_the_same_bytes_as_one(scene):
    grid_for, _, r, radii, _ = scene
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_cpu_engine, "PARALLEL_MIN_POINTS", 0)  # every grid on many threads
        patch.setattr(_pair_functions, "PARALLEL_MIN_PAIR_POINTS", 0)
        thread_counts_agree(grid_for, r)
        thread_counts_agree(grid_for, radii=radii)


@njit
def accumulate_both(i, j, d2, dx, dy, dz, counts, sums):
    """`accumulate` for a function called once a pair: rows ``i`` and ``j``."""
    accumulate(i, j, d2, dx, dy, dz, counts, sums)
    accumulate(j, i, d2, -dx, -dy, -dz, counts, sums)


def thread_counts_agree_once(grid_for, r=None, radii=None):
    """The sums of `accumulate_both` with ``once`` on 1, 2 and the default number of
    threads: the same bytes; returns those of one thread."""
    outputs = []
    for n_threads in (1, 2, None):
        grid = grid_for(n_threads)
        counts, sums = np.zeros(grid.n_points, np.int64), np.zeros((grid.n_points, 4))
        grid.for_each_pair(r, accumulate_both, counts, sums, radii=radii, once=True)
        outputs.append((counts.tobytes(), sums.tobytes()))
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]
    return counts, sums


@settings(max_examples=EXAMPLES)
@given(scenes())
def test_once_meets_each_pair_once_on_any_grid(scene):
    """Small grids: mostly without slabs (pairs by cell id, or too few planes)."""
    grid, points, _, r, radii, box3 = scene
    assert_once_matches(grid, points, r, box3=box3)
    assert_once_matches(grid, points, radii=radii, box3=box3)


@settings(max_examples=EXAMPLES)
@given(slab_scenes())
def test_once_over_slabs_meets_each_pair_once_on_any_thread_count(scene):
    grid_for, points, r, radii, box3 = scene
    assert_once_matches(grid_for(), points, r, box3=box3)
    assert_once_matches(grid_for(), points, radii=radii, box3=box3)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_cpu_engine, "PARALLEL_MIN_POINTS", 0)  # every grid on many threads
        patch.setattr(_pair_functions, "PARALLEL_MIN_PAIR_POINTS", 0)
        counts, _ = thread_counts_agree_once(grid_for, r)
        np.testing.assert_array_equal(
            counts, np.bincount(grid_for().query_pairs(r).indices.ravel(),
                                minlength=len(points)))
        thread_counts_agree_once(grid_for, radii=radii)


@pytest.mark.parametrize("scene", ["plane", "line", "radii", "sparse", "slab periodic"])
def test_large_slab_grids_give_the_same_bytes_on_any_thread_count(scene):
    rng = np.random.default_rng(5)
    n = N_LARGE
    options, radii, r = {}, None, None
    if scene == "plane":
        points, r = rng.random((n, 2)), 0.01
    elif scene == "line":
        points, r = rng.random((n, 1)) * 100.0, 0.01
    elif scene == "radii":
        points = rng.random((n, 3))
        radii = rng.random(n) * 0.03
    elif scene == "sparse":  # two clusters far apart: a hashed grid
        points = np.concatenate([rng.random((n // 2, 3)), rng.random((n - n // 2, 3)) + 1e4])
        r = 0.06
    else:  # periodic along z only, an odd number of planes
        points, r = rng.random((n, 3)) * [1.0, 1.0, 1.05], 0.05
        options = {"box": (1.0, 1.0, 1.05), "periodic": (False, False, True)}

    def grid_for(n_threads):
        cell_size = r if r is not None else 0.06
        return Grid(points, cell_size, n_threads=n_threads, **options)

    grid = grid_for(1)
    if scene == "sparse":
        assert grid.state.dense_start.shape[0] == 0
    assert slab_plan(grid, r, radii) is not None
    listed = grid.query_pairs(r, radii=radii, return_distances=True)
    d2 = listed.distances ** 2
    for agree in (thread_counts_agree, thread_counts_agree_once):
        counts, sums = agree(grid_for, r, radii)
        np.testing.assert_array_equal(counts, np.bincount(listed.indices.ravel(), minlength=n))
        np.testing.assert_allclose(sums[:, 0], np.bincount(listed.indices[:, 0], d2, n)
                                   + np.bincount(listed.indices[:, 1], d2, n), rtol=1e-12)


def test_grids_without_slabs_scan_the_full_stencil():
    """Too few planes for `MIN_SLABS` slabs: from `PARALLEL_MIN_PAIR_POINTS` points on,
    each point scans its full stencil, on any number of threads."""
    rng = np.random.default_rng(6)
    points = rng.random((N_LARGE, 3)) * [1.0, 1.0, 0.06]
    assert N_LARGE >= _pair_functions.PARALLEL_MIN_PAIR_POINTS

    def grid_for(n_threads):
        return Grid(points, 0.03, n_threads=n_threads)

    assert slab_plan(grid_for(1), 0.03) is None
    listed = grid_for(1).query_pairs(0.03)
    for agree in (thread_counts_agree, thread_counts_agree_once):  # once: on one thread
        counts, _ = agree(grid_for, 0.03)
        np.testing.assert_array_equal(counts, np.bincount(listed.indices.ravel(),
                                                          minlength=N_LARGE))


# ---------------------------------------------------------------------- errors
NOT_COMPILED = "`fn` must be a function compiled with numba's `njit` (it is called from " \
               "compiled code, on every thread); got {}. Decorate it with `@njit` (`from " \
               "numba import njit`); a Warp function (`@wp.func`) runs on a grid with " \
               "device='cuda' or 'warp-cpu'."


@pytest.mark.parametrize("fn", [python_function, lambda *args: None, None, 3,
                                np.add], ids=["python", "lambda", "None", "int", "ufunc"])
def test_fn_must_be_compiled(fn):
    grid = Grid(np.zeros((3, 3)))
    with pytest.raises(TypeError, match=re.escape(NOT_COMPILED.format(repr(fn)))):
        grid.for_each_pair(1.0, fn)
    with pytest.raises(TypeError, match=re.escape(NOT_COMPILED.format(repr(fn)))):
        grid.for_each_neighbor(np.zeros((1, 3)), 1.0, fn)
    with pytest.raises(TypeError, match=re.escape(NOT_COMPILED.format("None"))):
        grid.for_each_pair(1.0)


def called_with(args: str) -> str:
    return re.escape(
        "`fn` must take fn(i, j, d2, dx, dy, dz, *args), i and j int64, d2, dx, dy and dz "
        f"float64, args the arguments after `fn` (here: {args}); got CPUDispatcher(<function "
    ) + ".*" + re.escape(", which numba could not compile for that call (numba's error is "
                         "the cause above).")


@pytest.mark.parametrize("n", [100, N_LARGE], ids=["one thread", "threads"])
def test_fn_that_does_not_compile_with_its_arguments_is_a_type_error(n):
    points = np.random.default_rng(0).random((n, 3))
    grid = Grid(points, cell_size=0.05)
    with pytest.raises(TypeError, match=called_with("none")) as error:
        grid.for_each_pair(0.05, two_arguments)
    assert isinstance(error.value.__cause__, TypingError)
    with pytest.raises(TypeError, match=called_with("none")):
        grid.for_each_neighbor(points[:2_500], 0.05, two_arguments)
    # Arguments numba cannot type at all.
    with pytest.raises(TypeError, match=called_with("object, which numba cannot type")):
        grid.for_each_pair(0.05, raise_at, object())
    # Too few arguments for `fn`.
    with pytest.raises(TypeError, match=called_with("none")):
        grid.for_each_pair(0.05, raise_at)


@pytest.mark.parametrize("n", [100, N_LARGE], ids=["one thread", "threads"])
def test_an_exception_in_fn_is_raised_with_its_type_and_message(n):
    points = np.random.default_rng(0).random((n, 3))
    grid = Grid(points, cell_size=0.05)
    pairs = grid.query_pairs(0.05).indices
    with pytest.raises(ValueError, match=r"^fn refused a point$"):
        grid.for_each_pair(0.05, raise_at, int(pairs[len(pairs) // 2, 0]))
    queries = points[:2_500]  # each query is its own neighbour
    with pytest.raises(ValueError, match=r"^fn refused a point$"):
        grid.for_each_neighbor(queries, 0.05, raise_at, len(queries) // 2)
    # No exception: the same functions run through.
    grid.for_each_pair(0.05, raise_at, -1)
    grid.for_each_neighbor(points[:2_500], 0.05, raise_at, -1)


def test_an_exception_that_does_not_recur_on_the_calling_thread():
    points = np.random.default_rng(0).random((N_LARGE, 3))
    grid = Grid(points, cell_size=0.05)
    # Which chunk fails first depends on the threads' timing.
    message = (r"^`fn` raised an exception on a worker thread \(items \d+ to \d+ of "
               r"\d+ slabs of cells\), but not when these were run again on the "
               r"calling thread; got CPUDispatcher\(.*\)\. Its exception cannot be shown: "
               r"run with n_threads=1 to see it\.$")
    with pytest.raises(RuntimeError, match=message):
        grid.for_each_pair(0.05, raise_once, np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="^only once$"):
        Grid(points, cell_size=0.05, n_threads=1).for_each_pair(
            0.05, raise_once, np.zeros(1, np.int64))


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"r": -1.0}, ValueError, "`r` must be >= 0; got -1.0."),
    ({"r": np.nan}, ValueError, "`r` must be >= 0; got nan."),
    ({"r": "0.5"}, TypeError, "`r` must be a real number; got '0.5'."),
    ({}, TypeError, "give exactly one of `r` (a distance) and `radii` (one per point)."),
    ({"r": 0.5, "radii": np.ones(4)}, TypeError,
     "give exactly one of `r` (a distance) and `radii` (one per point)."),
    ({"radii": np.array([0.1, -0.1, 0.1, 0.1])}, ValueError,
     "`radii` must hold finite values >= 0; got -0.1 at radii[1]."),
    ({"radii": np.ones(3)}, ValueError,
     "`radii` must be a scalar or an array of shape (4,); got an array of shape (3,) and "
     "dtype float64."),
])
def test_bad_pair_inputs_are_refused_as_in_query_pairs(kwargs, error, message):
    grid = Grid(np.arange(12.0).reshape(4, 3))
    r, radii = kwargs.get("r"), kwargs.get("radii")
    with pytest.raises(error, match=re.escape(message)):
        grid.for_each_pair(r, accumulate, radii=radii)
    with pytest.raises(error, match=re.escape(message)):
        grid.query_pairs(r, radii=radii)


def test_a_reach_beyond_half_the_box_is_refused():
    grid = Grid(np.zeros((4, 3)), box=2.0)
    message = ("`r` must be at most half the periodic box (1.0 on axis 0); got 1.5. Use a "
               "larger box or a smaller radius.")
    with pytest.raises(ValueError, match=re.escape(message)):
        grid.for_each_pair(1.5, accumulate)
    with pytest.raises(ValueError, match=re.escape(message)):
        grid.for_each_neighbor(np.zeros((1, 3)), 1.5, accumulate)
    with pytest.raises(ValueError, match=re.escape("got 2 * max(radii) = 1.5.")):
        grid.for_each_pair(None, accumulate, radii=np.full(4, 0.75))


@pytest.mark.parametrize(("queries", "r", "error", "message"), [
    (np.zeros((2, 2)), 1.0, ValueError,
     "`queries` must have 3 columns, like the grid's points; got shape (2, 2)."),
    (np.zeros((1, 1, 3)), 1.0, ValueError, "`queries` must be a 2-D array of shape (n, d)"),
    (np.zeros(2), 1.0, ValueError,
     "`queries` must have 3 columns, like the grid's points, or be one point of shape (3,); "
     "got shape (2,)."),
    (np.full((1, 3), np.nan), 1.0, ValueError, "`queries` must be finite; got nan"),
    (np.zeros((2, 3)), -1.0, ValueError, "`r` must be >= 0; got -1.0."),
    (np.zeros((2, 3)), np.ones(3), ValueError,
     "`r` must be a scalar or an array of shape (2,); got an array of shape (3,)"),
])
def test_bad_neighbor_inputs_are_refused_as_in_query_radius(queries, r, error, message):
    grid = Grid(np.zeros((4, 3)))
    with pytest.raises(error, match=re.escape(message)):
        grid.for_each_neighbor(queries, r, accumulate)
    with pytest.raises(error, match=re.escape(message)):
        grid.query_radius(queries, r)


def test_the_compile_notice_says_the_kernels_compile_for_each_function():
    family = _compile_notice.family_of("spatialhash.grid._kernels.pair_functions")
    assert family == "functions run over pairs"
    assert _compile_notice.notice(family) == (
        "spatialhash: compiling functions run over pairs for a new `fn` (about 3-4 s)")
