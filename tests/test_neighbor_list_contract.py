"""The contract of `NeighborList`: after any sequence of moves its pairs, and the calls of
its `for_each_pair`, are those of a new `Grid` on the same positions; it keeps its
candidates while no point has moved more than ``skin / 2``; and it builds on what `Grid`
declares, never on the grid's state.

Coordinates and moves are multiples of 1/16 (exact arithmetic: distances equal to ``r`` or
to ``radii[i] + radii[j]`` are common and decided alike), in open, periodic and partly
periodic boxes, with one distance ``r`` or a radius per point, and moves of every size:
none, within the skin, beyond it, a drift of every point, jumps of whole periods.
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numba import njit

import spatialhash
from spatialhash import Grid, NeighborList

import oracles

#: The lattice of the coordinates and of the moves.
STEP = 1.0 / 16.0
#: The periods of periodic axes: ``r + skin`` (at most 1 + 1) fits in half of each.
PERIODS = (4.0, 8.0)


@st.composite
def scenes(draw, max_points: int = 40):
    """Lattice points in 1-3 dimensions; open, periodic or partly periodic; ``r`` or
    radii; a skin; and 1-6 moves, each ``(displacements, whole periods)``."""
    n_dims = draw(st.integers(1, 3))
    n = draw(st.integers(0, max_points))
    spread = draw(st.sampled_from([8, 32, 64]))
    points = draw(arrays(np.int64, (n, n_dims), elements=st.integers(-spread, spread))) * STEP
    box = periodic = None
    if draw(st.booleans()):
        box = draw(st.lists(st.sampled_from(PERIODS), min_size=n_dims, max_size=n_dims))
        periodic = draw(st.lists(st.booleans(), min_size=n_dims, max_size=n_dims))
    skin = draw(st.sampled_from([0.0, 0.25, 0.5, 1.0]))
    if draw(st.booleans()):
        search = {"r": draw(st.integers(0, 4)) * 0.25}
    else:
        search = {"radii": draw(arrays(np.int64, n, elements=st.integers(0, 2))) * 0.25}
    moves = []
    for _ in range(draw(st.integers(1, 6))):
        # Up to `scale` steps a point: none, within skin / 2, or well beyond it.
        scale = draw(st.sampled_from([0, 1, 2, 4, 8, 32]))
        delta = draw(arrays(np.int64, (n, n_dims), elements=st.integers(-scale, scale)))
        if draw(st.booleans()):  # every point drifts together
            delta = delta + draw(arrays(np.int64, n_dims, elements=st.integers(-64, 64)))
        jumps = draw(arrays(np.int64, (n, n_dims), elements=st.integers(-1, 1)))
        moves.append((delta * STEP, jumps if box is not None else np.zeros_like(jumps)))
    return points, box, periodic, skin, search, moves


def _periods(box, periodic, n_dims):
    """The period of each axis, ``inf`` on open ones, for the caller's ``n_dims`` axes."""
    return oracles.periods(box, periodic, n_dims)[:n_dims]


def _farthest_move(now, then, periods):
    """The largest squared displacement, each axis's the nearest image on periodic axes."""
    delta = now - then
    periodic = np.isfinite(periods)
    delta[:, periodic] -= periods[periodic] * np.rint(delta[:, periodic] / periods[periodic])
    return float((delta * delta).sum(axis=1).max(initial=0.0))


@njit
def _record(i, j, d2, dx, dy, dz, counts, records):
    k = counts[i]
    records[i, k, 0] = j
    records[i, k, 1] = d2
    records[i, k, 2] = dx
    records[i, k, 3] = dy
    records[i, k, 4] = dz
    counts[i] = k + 1


def _calls(for_each_pair, n):
    """Every call ``(i, j, d2, dx, dy, dz)`` that ``for_each_pair(fn, *args)`` makes,
    sorted by ``(i, j)``."""
    counts = np.zeros(n, np.int64)
    records = np.full((n, max(n, 1), 5), np.nan)
    for_each_pair(_record, counts, records)
    table = np.concatenate([np.column_stack([np.full(counts[i], float(i)),
                                             records[i, : counts[i]]]) for i in range(n)]
                           + [np.empty((0, 6))])
    return table[np.lexsort((table[:, 1], table[:, 0]))]


def _assert_as_a_new_grid(neighbors, points, box, periodic, search):
    """The pairs and the calls of ``neighbors`` are those of a new grid on ``points``."""
    grid = Grid(points, box=box, periodic=periodic)
    expected = grid.query_pairs(**search, return_distances=True).sorted()
    got = neighbors.pairs.sorted()
    np.testing.assert_array_equal(got.indices, expected.indices)
    np.testing.assert_array_equal(got.distances, expected.distances)
    n = points.shape[0]
    r = search.get("r")
    radii = search.get("radii")
    grid_calls = _calls(lambda fn, *args: grid.for_each_pair(r, fn, *args, radii=radii), n)
    np.testing.assert_array_equal(_calls(neighbors.for_each_pair, n), grid_calls)


@given(scene=scenes(), n_threads=st.sampled_from([1, None]))
def test_after_any_moves_the_pairs_are_those_of_a_new_grid(scene, n_threads):
    points, box, periodic, skin, search, moves = scene
    periods = _periods(box, periodic, points.shape[1])
    neighbors = NeighborList(points, search.get("r"), skin, radii=search.get("radii"),
                             box=box, periodic=periodic, n_threads=n_threads)
    _assert_as_a_new_grid(neighbors, points, box, periodic, search)
    built_at = points
    n_builds = 1
    for delta, jumps in moves:
        # Whole periods on periodic axes: the same points, another image.
        points = points + delta + jumps * np.where(np.isfinite(periods), periods, 0.0)
        rebuilt = neighbors.update(points)
        if _farthest_move(points, built_at, periods) <= (skin / 2) ** 2:
            assert not rebuilt  # every point within skin / 2: the candidates are kept
        if rebuilt:
            built_at = points
            n_builds += 1
        assert neighbors.n_builds == n_builds
        _assert_as_a_new_grid(neighbors, points, box, periodic, search)


def test_the_list_builds_on_what_grid_declares(monkeypatch):
    """A list reads neither `Grid.state` nor a grid's engine: the state made unreadable,
    it builds and updates as before; and no module of ``spatialhash.neighbors`` names a
    grid's ``_engine`` or ``state``."""
    rng = np.random.default_rng(7)
    points = rng.random((500, 3))
    expected = NeighborList(points, 0.1, 0.02, box=1.0).pairs

    def unreadable(self):
        raise AssertionError("a neighbour list read Grid.state")

    monkeypatch.setattr(Grid, "state", property(unreadable))
    neighbors = NeighborList(points, 0.1, 0.02, box=1.0)
    np.testing.assert_array_equal(neighbors.pairs.indices, expected.indices)
    moved = points + rng.uniform(-0.05, 0.05, points.shape)  # beyond skin / 2
    assert neighbors.update(moved) is True  # a rebuild, without the state
    np.testing.assert_array_equal(neighbors.pairs.sorted().indices,
                                  Grid(moved, box=1.0).query_pairs(0.1).sorted().indices)
    package = pathlib.Path(spatialhash.__file__).parent / "neighbors"
    for path in package.rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"\._engine\b|\bgrid\.state\b", text), path


@pytest.mark.parametrize("box", [None, 4.0])
def test_a_list_of_points_that_all_coincide(box):
    """Every pair at distance 0, with ``r = 0`` and ``skin = 0``: the closed ball."""
    points = np.full((6, 2), 1.5)
    neighbors = NeighborList(points, 0.0, 0.0, box=box)
    assert len(neighbors.pairs) == 15
    assert neighbors.update(points + 0.25) is False  # a drift keeps the candidates
    assert len(neighbors.pairs) == 15
    _assert_as_a_new_grid(neighbors, points + 0.25, box, None, {"r": 0.0})
