"""`NeighborList`: its pairs equal `Grid.query_pairs(r)` on the current positions at every
step, whether it rebuilt or only recomputed the candidates' distances."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
from numba import njit

from spatialhash import Grid, NeighborList
from spatialhash.grid import _pair_functions, _pair_search


def _expected(points, r, **box):
    return Grid(points, cell_size=r, **box).query_pairs(r, return_distances=True).sorted()


def _assert_current(neighbors, points, **box):
    got = neighbors.pairs.sorted()
    expected = _expected(points, neighbors.r, **box)
    np.testing.assert_array_equal(got.indices, expected.indices)
    np.testing.assert_array_equal(got.distances, expected.distances)


@pytest.mark.parametrize("n_dims, box", [(3, {}), (2, {"box": 1.0}), (1, {}),
                                         (3, {"box": [1.0, 1.0, 1.0],
                                              "periodic": [True, False, True]})])
def test_pairs_equal_query_pairs_at_every_step(n_dims, box):
    rng = np.random.default_rng(n_dims)
    points = rng.random((1500, n_dims))
    r, skin = 0.1 if n_dims == 3 else 0.04, 0.02
    neighbors = NeighborList(points, r, skin, **box)
    _assert_current(neighbors, points, **box)
    rebuilt = []
    for step in range(12):
        scale = 0.02 if step % 4 == 3 else 0.002  # now and then a move past skin / 2
        points = points + rng.normal(0.0, scale, points.shape)
        if box.get("periodic") is None and "box" in box:
            points = np.mod(points, 1.0)  # wrapped by the caller: a jump of a whole period
        rebuilt.append(neighbors.update(points))
        _assert_current(neighbors, points, **box)
    assert any(rebuilt) and not all(rebuilt)
    assert neighbors.n_builds == 1 + sum(rebuilt)


@pytest.mark.parametrize("case", ["open 3-D", "periodic 3-D", "2-D by cell id", "1-D radii",
                                  "one thread", "count and fill", "few points a cell"])
def test_found_pairs_are_rows_of_the_pairs_of_query_pairs(case):
    """The build's search (`Grid._found_pairs`, the engine's `found_pairs`: pairs written
    as found) on each of its paths: the pairs of `Grid.query_pairs`, each once, in the
    same order, grouped by the point that found them in increasing grid order, as
    `rows_of_found_pairs` needs; with the grid's order, and its points in that order."""
    rng = np.random.default_rng(41)
    options, search, patches = {}, {"r": 0.05}, {}
    points = rng.random((5000, 3))
    if case == "open 3-D":  # several points a cell: the kernel that gathers each cell's runs
        points = rng.random((30_000, 3))
    elif case == "periodic 3-D":
        options = {"box": 1.0}
    elif case == "2-D by cell id":  # three cells a side: stencils alias, pairs by cell id
        points, options, search = rng.random((3000, 2)), {"box": 1.0}, {"r": 0.3}
    elif case == "1-D radii":
        points, search = rng.random((3000, 1)), {"radii": rng.uniform(0.0, 1e-3, 3000)}
    elif case == "one thread":
        options = {"n_threads": 1}
    elif case == "count and fill":  # the path of very many pairs a point
        patches = {"ONE_PASS_MAX_PAIRS_PER_POINT": 0, "PAIR_ESTIMATE_MIN_POINTS": 0}
    elif case == "few points a cell":  # the kernel that reads each run in place
        search = {"r": 0.035}
    reach = search.get("r") or 2 * float(search["radii"].max())
    grid = Grid(points, reach, **options)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in patches.items():
            patch.setattr(_pair_search, name, value)
        found = grid._found_pairs(**search)
        listed = grid.query_pairs(**search)
    assert found.pairs.shape[0] == len(listed) > 1000
    assert found.pairs.dtype == found.order.dtype == listed.indices.dtype
    assert np.all(np.diff(found.pairs[:, 0]) >= 0)
    order = found.order
    np.testing.assert_array_equal(np.sort(order), np.arange(len(points)))
    mapped = np.column_stack([order[found.pairs[:, 0]], order[found.pairs[:, 1]]])
    np.testing.assert_array_equal(np.sort(mapped, axis=1), listed.indices)
    # The points in that order (inside the unit box: wrapping keeps them), padded to
    # three columns, in a copy of their own.
    expected = np.zeros((len(points), 3))
    expected[:, : points.shape[1]] = points[order]
    np.testing.assert_array_equal(found.points, expected)
    assert found.points.flags.c_contiguous and found.points.flags.writeable
    assert not np.shares_memory(found.points, grid.state.points)
    slabs = _pair_functions.row_slabs(grid.state, reach)
    assert (found.slabs is None) == (slabs is None)
    if slabs is not None:
        np.testing.assert_array_equal(found.slabs, slabs)


def test_a_move_of_exactly_half_the_skin_keeps_the_candidates_and_finds_the_pair():
    r, skin = 0.25, 0.125
    points = np.array([[0.0, 0.0], [r + skin, 0.0], [3.0, 3.0]])
    neighbors = NeighborList(points, r, skin)
    assert len(neighbors.pairs) == 0
    moved = points + np.array([[skin / 2, 0.0], [-skin / 2, 0.0], [0.0, 0.0]])
    assert neighbors.update(moved) is False  # not more than skin / 2: no rebuild
    assert neighbors.pairs.indices.tolist() == [[0, 1]]  # now exactly r apart: closed
    assert neighbors.pairs.distances.tolist() == [r]
    _assert_current(neighbors, moved)
    beyond = moved.copy()
    beyond[0, 0] = np.nextafter(moved[0, 0], 1.0)
    beyond[1, 0] = np.nextafter(moved[1, 0], -1.0)
    # Points 0 and 1 have now come closer by more than skin: rebuilt.
    assert neighbors.update(beyond) is True


def test_a_drift_of_every_point_keeps_the_candidates():
    """Displacements within ``skin / 2`` of their centre keep the list, however far the
    centre: the points have come closer by at most ``skin``."""
    rng = np.random.default_rng(4)
    points = rng.random((2000, 3))
    neighbors = NeighborList(points, 0.08, 0.02)
    for step in range(1, 6):
        jiggle = rng.uniform(-0.005, 0.005, points.shape)  # |jiggle| <= 0.0087 < skin / 2
        moved = points + [0.0, 0.0, -0.3 * step] + jiggle  # falling
        assert neighbors.update(moved) is False
        _assert_current(neighbors, moved)
    assert neighbors.n_builds == 1
    # Two points moving apart by skin / 2 each, the rest still: the centre is theirs.
    apart = points.copy()
    apart[0, 0] += 0.011
    apart[1, 0] -= 0.011
    assert neighbors.update(apart) is True


def test_no_move_and_no_points():
    points = np.random.default_rng(2).random((200, 3))
    neighbors = NeighborList(points, 0.2, 0.0)
    assert neighbors.update(points) is False
    _assert_current(neighbors, points)
    empty = NeighborList(np.empty((0, 2)), 0.1, 0.05)
    assert empty.update(np.empty((0, 2))) is False
    assert len(empty.pairs) == 0


@pytest.mark.parametrize("skin", [-0.1, float("nan"), float("inf")])
def test_bad_skin_is_refused(skin):
    with pytest.raises(ValueError, match="`skin`"):
        NeighborList(np.zeros((3, 2)), 0.1, skin)


def test_bad_r_and_changing_shapes_are_refused():
    points = np.random.default_rng(3).random((10, 2))
    with pytest.raises(ValueError, match="`r`"):
        NeighborList(points, -1.0, 0.1)
    neighbors = NeighborList(points, 0.1, 0.05)
    with pytest.raises(ValueError, match="`points` must keep the shape"):
        neighbors.update(points[:5])
    with pytest.raises(ValueError, match="`points`"):
        neighbors.update(np.full((10, 2), np.nan))
    with pytest.raises(ValueError, match="`r \\+ skin` must be at most half"):
        NeighborList(points, 0.4, 0.2, box=1.0)


def test_the_same_rows_for_every_thread_count():
    rng = np.random.default_rng(5)
    points = rng.random((20_000, 3))
    moved = points + rng.normal(0.0, 0.0005, points.shape)
    outputs = []
    for n_threads in (1, None, 2):
        neighbors = NeighborList(points, 0.03, 0.01, box=1.0, n_threads=n_threads)
        assert neighbors.update(moved) is False
        outputs.append(neighbors.pairs)
    for other in outputs[1:]:
        assert outputs[0].indices.tobytes() == other.indices.tobytes()
        assert outputs[0].distances.tobytes() == other.distances.tobytes()


# ------------------------------------------------------------------ per-point radii
@pytest.mark.parametrize("n_dims, box", [(2, {}), (3, {"box": 1.0}),
                                         (2, {"box": [1.0, 1.0], "periodic": [True, False]})])
def test_pairs_with_radii_equal_query_pairs_with_radii_at_every_step(n_dims, box):
    rng = np.random.default_rng(30 + n_dims)
    points = rng.random((1500, n_dims))
    radii = rng.uniform(0.0, 0.03 if n_dims == 2 else 0.06, 1500)
    radii[:10] = 0.0  # contact only at distance 0
    neighbors = NeighborList(points, skin=0.02, radii=radii, **box)
    assert neighbors.r is None
    np.testing.assert_array_equal(neighbors.radii, radii)
    rebuilt = []
    for step in range(8):
        expected = Grid(points, **box).query_pairs(radii=radii, return_distances=True).sorted()
        got = neighbors.pairs.sorted()
        np.testing.assert_array_equal(got.indices, expected.indices)
        np.testing.assert_array_equal(got.distances, expected.distances)
        calls, counts = _records(neighbors, points)
        grid = Grid(points, **box)
        grid_calls, _ = _records(
            SimpleNamespace(for_each_pair=lambda fn, *args, grid=grid: grid.for_each_pair(
                None, fn, *args, radii=radii)), points)
        np.testing.assert_array_equal(calls, grid_calls)
        assert calls.shape[0] == 2 * len(expected)
        points = points + rng.normal(0.0, 0.015 if step == 3 else 0.002, points.shape)
        rebuilt.append(neighbors.update(points))
    assert any(rebuilt) and not all(rebuilt)


def test_radii_lists_are_the_same_for_every_thread_count():
    rng = np.random.default_rng(33)
    points = rng.random((24_000, 3)) * [1.0, 1.0, 3.0]  # slabs, on many threads
    radii = rng.uniform(0.005, 0.02, 24_000)
    moved = points + rng.normal(0.0, 0.0005, points.shape)
    outputs = []
    for n_threads in (1, 2, None):
        neighbors = NeighborList(points, None, 0.01, radii=radii, n_threads=n_threads)
        assert neighbors._slabs is not None
        assert neighbors.update(moved) is False
        sums = np.zeros((24_000, 2))
        neighbors.for_each_pair(_weigh, sums)
        outputs.append((neighbors.pairs.indices.tobytes(), sums.tobytes()))
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]


def test_bad_radii_are_refused():
    points = np.random.default_rng(34).random((10, 2))
    both = "give exactly one of `r` (a distance) and `radii` (one per point)."
    with pytest.raises(TypeError, match=re.escape(both)):
        NeighborList(points, 0.1, 0.05, radii=np.ones(10))
    with pytest.raises(TypeError, match=re.escape(both)):
        NeighborList(points, skin=0.05)
    with pytest.raises(TypeError, match="give `skin`"):
        NeighborList(points, radii=np.ones(10))
    with pytest.raises(ValueError, match=re.escape("`radii` must hold finite values >= 0; "
                                                   "got -0.1 at radii[1].")):
        NeighborList(points, skin=0.1, radii=[0.1, -0.1] + [0.1] * 8)
    with pytest.raises(ValueError, match="`radii` must be a scalar or an array of shape "):
        NeighborList(points, skin=0.1, radii=np.ones(3))
    with pytest.raises(ValueError, match=re.escape(
            "`2 * max(radii) + skin` must be at most half the periodic box (0.5); got 0.75.")):
        NeighborList(points, skin=0.5, radii=np.full(10, 0.125), box=1.0)


# ------------------------------------------------------------------ for_each_pair
@njit
def _record(i, j, d2, dx, dy, dz, counts, records):
    k = counts[i]
    records[i, k, 0] = j
    records[i, k, 1] = d2
    records[i, k, 2] = dx
    records[i, k, 3] = dy
    records[i, k, 4] = dz
    counts[i] = k + 1


@njit
def _weigh(i, j, d2, dx, dy, dz, sums):
    sums[i, 0] += d2 * (1.0 + dx)
    sums[i, 1] += dy * dz + 1.0 / (1.0 + d2)


@njit
def _raise_at(i, j, d2, dx, dy, dz, where):
    if i == where:
        raise ValueError("fn refused this point")


def _records(owner, points, *call):
    """Each ordered pair's (i, j, d2, dx, dy, dz) met by ``owner.for_each_pair``, sorted
    by (i, j), and the rows as met (j in the order of the calls)."""
    n = points.shape[0]
    counts = np.zeros(n, np.int64)
    records = np.full((n, 64, 5), np.nan)
    owner.for_each_pair(*call, _record, counts, records)
    rows = np.repeat(np.arange(n), counts)
    flat = np.concatenate([records[i, : counts[i]] for i in range(n)]) if n else \
        np.empty((0, 5))
    table = np.column_stack([rows.astype(np.float64), flat])
    return table[np.lexsort((table[:, 1], table[:, 0]))], counts


@pytest.mark.parametrize("n_dims, box", [(3, {}), (2, {"box": 1.0}),
                                         (3, {"box": [1.0, 1.0, 1.0],
                                              "periodic": [True, False, True]})])
def test_for_each_pair_meets_the_calls_of_grid_for_each_pair(n_dims, box):
    rng = np.random.default_rng(10 + n_dims)
    points = rng.random((1500, n_dims))
    r, skin = (0.1, 0.02) if n_dims == 3 else (0.04, 0.02)
    neighbors = NeighborList(points, r, skin, **box)
    rebuilt = []
    for step in range(6):
        got, counts = _records(neighbors, points)
        expected, _ = _records(Grid(points, cell_size=r, **box), points, r)
        assert counts.max() < 64 and got.shape[0] > 1000
        # The same calls, with the same d2 and differences, bit for bit.
        np.testing.assert_array_equal(got, expected)
        pairs = neighbors.pairs
        assert got.shape[0] == 2 * len(pairs)
        np.testing.assert_array_equal(
            counts, np.bincount(pairs.indices.ravel(), minlength=len(points)))
        points = points + rng.normal(0.0, 0.02 if step == 2 else 0.001, points.shape)
        rebuilt.append(neighbors.update(points))
    assert any(rebuilt) and not all(rebuilt)


@pytest.mark.parametrize("n_dims, box", [(3, {}), (3, {"box": [1.0, 1.0, 4.0]}),
                                         (2, {"box": [1.0, 4.0],
                                              "periodic": [False, True]})])
def test_for_each_pair_over_slabs_meets_the_calls_on_any_thread_count(n_dims, box):
    """Lists whose build grid cuts into slabs meet each pair once on their rows and call
    ``fn`` for both orders, slabs in two phases on many threads (even small lists, here,
    with the threshold patched): the calls of `Grid.for_each_pair`, and the same bytes
    for any thread count."""
    rng = np.random.default_rng(20 + n_dims)
    points = rng.random((3000, n_dims)) * ([1.0] * (n_dims - 1) + [4.0])
    r, skin = (0.1, 0.02) if n_dims == 3 else (0.03, 0.01)
    _assert_grid_calls_on_any_thread_count(points, r, skin, box, rng, slabs=True)


@pytest.mark.parametrize("box", [{}, {"box": [1.0, 1.0, 0.2]}])
def test_lists_without_slabs_scan_full_rows_on_any_thread_count(box):
    """Too few planes for slabs, from `PARALLEL_MIN_PAIR_POINTS` points on (patched):
    each row with its transposed row, on every thread; the calls of `Grid.for_each_pair`,
    and the same bytes for any thread count."""
    rng = np.random.default_rng(40)
    points = rng.random((3000, 3)) * [1.0, 1.0, 0.2]
    _assert_grid_calls_on_any_thread_count(points, 0.06, 0.01, box, rng, slabs=False)


def _assert_grid_calls_on_any_thread_count(points, r, skin, box, rng, slabs):
    """Lists of ``points`` on 1, 2 and the default number of threads, on the parallel path
    from any size, over four steps of moves (one large enough to rebuild): the calls of
    `Grid.for_each_pair` at every step, and sums of the same bytes."""
    lists = [NeighborList(points, r, skin, n_threads=n, **box) for n in (1, 2, None)]
    assert (lists[0]._slabs is not None) == slabs
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_pair_functions, "PARALLEL_MIN_PAIR_POINTS", 0)
        for step in range(4):
            got, counts = _records(lists[0], points)
            expected, _ = _records(Grid(points, cell_size=r, **box), points, r)
            assert counts.max() < 64 and got.shape[0] > 1000
            np.testing.assert_array_equal(got, expected)
            outputs = []
            for neighbors in lists:
                sums = np.zeros((len(points), 2))
                neighbors.for_each_pair(_weigh, sums)
                outputs.append(sums.tobytes())
            assert outputs[1] == outputs[0] and outputs[2] == outputs[0]
            points = points + rng.normal(0.0, 0.02 if step == 1 else 0.001, points.shape)
            for neighbors in lists:
                neighbors.update(points)
    assert lists[0].n_builds > 1


@njit
def _weigh_both(i, j, d2, dx, dy, dz, sums):
    _weigh(i, j, d2, dx, dy, dz, sums)
    _weigh(j, i, d2, -dx, -dy, -dz, sums)


@pytest.mark.parametrize("n", [600, 24_000])  # without slabs, and over slabs
def test_for_each_pair_once_meets_each_pair_once(n):
    """``once``: each pair of `pairs` once, in either order, with the separation of that
    order; sums written to both rows agree with the calls for both orders and are the same
    bytes for any thread count."""
    rng = np.random.default_rng(14)
    points = rng.random((n, 3))
    r = 0.25 if n == 600 else 0.035  # 3 planes of cells: too few for slabs
    lists = [NeighborList(points, r, 0.01, box=1.0, n_threads=t) for t in (1, 2, None)]
    assert (lists[0]._slabs is None) == (n == 600)
    moved = points + rng.normal(0.0, 0.0005, points.shape)
    outputs = []
    for neighbors in lists:
        assert neighbors.update(moved) is False
        sums = np.zeros((n, 2))
        neighbors.for_each_pair(_weigh_both, sums, once=True)
        outputs.append(sums.tobytes())
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]
    neighbors = lists[0]
    counts = np.zeros(n, np.int64)
    records = np.full((n, 64, 5), np.nan)
    neighbors.for_each_pair(_record, counts, records, once=True)
    got = np.concatenate([np.column_stack([np.full(counts[i], i), records[i, : counts[i]]])
                          for i in range(n)])
    swapped = got[:, 0] > got[:, 1]
    got[swapped] = got[swapped][:, [1, 0, 2, 3, 4, 5]] * [1, 1, 1, -1, -1, -1]
    got = got[np.lexsort((got[:, 1], got[:, 0]))]
    both, _ = _records(neighbors, moved)
    lower = both[both[:, 0] < both[:, 1]]
    np.testing.assert_array_equal(got, lower)
    sums = np.zeros((n, 2))
    neighbors.for_each_pair(_weigh, sums)
    np.testing.assert_allclose(np.frombuffer(outputs[0]).reshape(n, 2), sums, rtol=1e-12,
                               atol=1e-12)


def test_for_each_pair_sums_equal_numpy_from_the_pairs():
    rng = np.random.default_rng(12)
    points = rng.random((800, 3))
    neighbors = NeighborList(points, 0.12, 0.03, box=1.0)
    moved = points + rng.normal(0.0, 0.003, points.shape)
    assert neighbors.update(moved) is False
    sums = np.zeros((800, 2))
    neighbors.for_each_pair(_weigh, sums)
    pairs = Grid(moved, cell_size=0.12, box=1.0).query_pairs(0.12)
    i, j = pairs.indices[:, 0], pairs.indices[:, 1]
    wrapped = np.mod(moved, 1.0)
    delta = wrapped[i] - wrapped[j]
    delta -= np.round(delta)  # the minimum image in the unit box
    d2 = np.einsum("ij,ij->i", delta, delta)
    expected = np.zeros((800, 2))
    for rows, sign in ((i, 1.0), (j, -1.0)):
        np.add.at(expected[:, 0], rows, d2 * (1.0 + sign * delta[:, 0]))
        np.add.at(expected[:, 1], rows, delta[:, 1] * delta[:, 2] + 1.0 / (1.0 + d2))
    np.testing.assert_allclose(sums, expected, rtol=1e-12, atol=1e-12)


def test_for_each_pair_is_the_same_for_every_thread_count():
    rng = np.random.default_rng(13)
    points = rng.random((24_000, 3))  # the multi-threaded scan (from 20,000 points)
    moved = points + rng.normal(0.0, 0.0005, points.shape)
    outputs = []
    for n_threads in (1, None, 2):
        neighbors = NeighborList(points, 0.035, 0.01, box=1.0, n_threads=n_threads)
        assert neighbors.update(moved) is False
        sums = np.zeros((24_000, 2))
        neighbors.for_each_pair(_weigh, sums)
        outputs.append(sums)
    assert outputs[0].any()
    for other in outputs[1:]:
        assert outputs[0].tobytes() == other.tobytes()


def test_for_each_pair_with_no_points_or_no_pairs_calls_nothing():
    counts = np.zeros(0, np.int64)
    NeighborList(np.empty((0, 3)), 0.1, 0.05).for_each_pair(_record, counts,
                                                           np.empty((0, 1, 5)))
    apart = NeighborList(np.array([[0.0, 0.0], [5.0, 0.0]]), 1.0, 0.5)
    counts = np.zeros(2, np.int64)
    apart.for_each_pair(_record, counts, np.empty((2, 1, 5)))
    assert counts.tolist() == [0, 0]


def test_for_each_pair_refuses_a_python_function_and_wrong_arguments():
    neighbors = NeighborList(np.random.default_rng(14).random((50, 3)), 0.2, 0.05)

    def plain(i, j, d2, dx, dy, dz):
        pass

    with pytest.raises(TypeError, match="`fn` must be a function compiled with numba"):
        neighbors.for_each_pair(plain)
    with pytest.raises(TypeError, match=r"`fn` must take fn\(i, j, d2, dx, dy, dz, \*args\)"):
        neighbors.for_each_pair(_weigh)  # `sums` missing


@pytest.mark.parametrize("n", [300, 21_000])  # the calling thread's scan, then every thread's
def test_an_exception_in_fn_is_raised_here(n):
    points = np.random.default_rng(15).random((n, 3))
    neighbors = NeighborList(points, 0.2 if n < 1000 else 0.04, 0.01)
    assert 7 in neighbors.pairs.indices
    with pytest.raises(ValueError, match="fn refused this point"):
        neighbors.for_each_pair(_raise_at, 7)
    neighbors.for_each_pair(_raise_at, -1)  # never raises


def test_pairs_follow_the_positions_after_for_each_pair_and_updates():
    rng = np.random.default_rng(16)
    points = rng.random((600, 3))
    neighbors = NeighborList(points, 0.1, 0.04)
    first = neighbors.pairs
    assert neighbors.pairs is first  # kept until the positions change
    moved = points + rng.normal(0.0, 0.004, points.shape)
    assert neighbors.update(moved) is False
    _assert_current(neighbors, moved)
    assert neighbors.pairs is not first
