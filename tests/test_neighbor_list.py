"""`NeighborList`: its pairs equal `Grid.query_pairs(r)` on the current positions at every
step, whether it rebuilt or only recomputed the candidates' distances."""

from __future__ import annotations

import numpy as np
import pytest

from spatialhash import Grid, NeighborList


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
    beyond = moved + np.array([[np.nextafter(skin / 2, 1.0) - skin / 2, 0.0], [0.0, 0.0],
                               [0.0, 0.0]])
    assert neighbors.update(beyond) is True  # point 0 has now moved more than skin / 2


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
