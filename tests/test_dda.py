"""The grid traversal (`_kernels/dda.py`) against exact rational arithmetic: on dyadic input
the visited cells with a non-empty interval are exactly the cells the segment passes
through, with bit-exact face parameters, and the intervals partition the segment."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ray_oracles import segment_cells
from spatialhash._kernels.dda import clip_to_cells, ray_to_cells, traverse

MAX_CELLS = 10_000


def run(point, direction, grid_origin=(0.0, 0.0, 0.0), cell_size=1.0, t_lo=0.0, t_hi=1.0):
    """Traverse and check the invariants every traversal must keep; return the cells."""
    point = np.asarray(point, dtype=np.float64)
    direction = np.asarray(direction, dtype=np.float64)
    grid_origin = np.asarray(grid_origin, dtype=np.float64)
    inv = np.full(3, 1.0 / cell_size)
    cells, t_enter, t_exit = traverse(point, direction, grid_origin, inv, t_lo, t_hi,
                                      MAX_CELLS)
    assert 0 < len(cells) < MAX_CELLS
    # The intervals partition [t_lo, t_hi] exactly, bit for bit.
    assert t_enter[0] == t_lo and t_exit[-1] == t_hi
    np.testing.assert_array_equal(t_enter[1:], t_exit[:-1])
    assert (t_enter <= t_exit).all()
    # One axis at a time, one cell at a time, along the direction of travel.
    moves = np.diff(cells, axis=0)
    assert (np.abs(moves).sum(axis=1) == 1).all()
    assert (moves * np.sign(direction) >= 0).all()
    # The non-empty intervals are exactly the cells the segment passes through.
    u_start, u_rate = np.empty(3), np.empty(3)
    ray_to_cells(point, direction, grid_origin, inv, u_start, u_rate)
    expected = segment_cells(u_start, u_rate, t_lo, t_hi)
    seen = [(tuple(int(c) for c in cell), a, b)
            for cell, a, b in zip(cells, t_enter, t_exit, strict=True) if a < b]
    assert [cell for cell, _, _ in seen] == [cell for cell, _, _ in expected]
    for (_, a, b), (_, exact_a, exact_b) in zip(seen, expected, strict=True):
        assert a == float(exact_a) and b == float(exact_b)
    return cells, t_enter, t_exit


dyadic = st.integers(-160, 160).map(lambda k: k / 8)
rate = st.integers(-12, 12).map(lambda k: k / 4)
directions = st.tuples(rate, rate, rate).filter(lambda d: any(d))


@given(point=st.tuples(dyadic, dyadic, dyadic), direction=directions,
       grid_origin=st.tuples(dyadic, dyadic, dyadic),
       cell_size=st.sampled_from([0.25, 0.5, 1.0, 2.0]),
       t_lo=st.integers(0, 16).map(lambda k: k / 8),
       length=st.integers(0, 64).map(lambda k: k / 8))
def test_traversal_matches_exact_cells(point, direction, grid_origin, cell_size, t_lo, length):
    run(point, direction, grid_origin, cell_size, t_lo, t_lo + length)


@given(point=st.tuples(dyadic, dyadic), direction=st.tuples(rate, rate).filter(any),
       cell_size=st.sampled_from([0.5, 1.0]), length=st.integers(1, 64).map(lambda k: k / 8))
def test_traversal_2d_never_leaves_its_plane(point, direction, cell_size, length):
    cells, _, _ = run((*point, 0.0), (*direction, 0.0), cell_size=cell_size, t_hi=length)
    assert (cells[:, 2] == 0).all()


def test_diagonal_through_corners_visits_each_corner_cell_empty():
    cells, t_enter, t_exit = run((0.0, 0.0, 0.0), (1.0, 1.0, 1.0), t_hi=2.5)
    # Each corner crossing steps x, then y, then z: two empty intervals in between.
    assert cells.tolist() == [[0, 0, 0], [1, 0, 0], [1, 1, 0], [1, 1, 1],
                              [2, 1, 1], [2, 2, 1], [2, 2, 2]]
    assert (t_exit - t_enter).tolist() == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.5]


def test_ray_along_a_face_stays_in_the_upper_cell():
    # y == 1 exactly, not moving in y: the floor puts the ray in row y = 1, never y = 0.
    cells, _, _ = run((0.5, 1.0, 0.0), (1.0, 0.0, 0.0), t_hi=3.0)
    assert cells.tolist() == [[0, 1, 0], [1, 1, 0], [2, 1, 0], [3, 1, 0]]


def test_ray_along_an_edge_negative_coordinates():
    cells, _, _ = run((-0.5, -2.0, -3.0), (-1.0, 0.0, 0.0), t_hi=2.0)
    assert cells.tolist() == [[-1, -2, -3], [-2, -2, -3], [-3, -2, -3]]


def test_start_on_a_face_moving_down_starts_below_it():
    # u = 2 exactly, moving down: the ray spends no time in cell 2.
    cells, t_enter, t_exit = run((2.0, 0.5, 0.5), (-1.0, 0.0, 0.0), t_hi=1.5)
    assert cells.tolist() == [[1, 0, 0], [0, 0, 0]]
    assert t_enter.tolist() == [0.0, 1.0] and t_exit.tolist() == [1.0, 1.5]


def test_start_later_on_the_ray():
    cells, t_enter, _ = run((-10.0, 0.5, 0.5), (1.0, 0.0, 0.0), t_lo=10.0, t_hi=12.0)
    assert cells.tolist() == [[0, 0, 0], [1, 0, 0]]
    assert t_enter.tolist() == [10.0, 11.0]


def test_zero_length_segment_is_one_cell():
    cells, t_enter, t_exit = run((0.5, 0.5, 0.5), (1.0, 2.0, 0.0), t_lo=0.25, t_hi=0.25)
    assert cells.tolist() == [[0, 1, 0]] and t_enter[0] == t_exit[0] == 0.25


def test_grid_origin_and_cell_size():
    cells, t_enter, _ = run((1.0, 1.0, 1.0), (0.0, 0.0, 1.0), grid_origin=(-1.0, -1.0, -1.0),
                            cell_size=0.5, t_hi=1.0)
    assert cells.tolist() == [[4, 4, 4], [4, 4, 5]]
    assert t_enter.tolist() == [0.0, 0.5]


def test_non_dyadic_direction_still_partitions():
    # Thirds are not exact: the partition and the one-step moves hold all the same.
    direction = np.array([1.0, 1.0, 1.0]) / 3.0
    cells, t_enter, t_exit = traverse(np.full(3, 0.1), direction, np.zeros(3), np.ones(3),
                                      0.0, 30.0, MAX_CELLS)
    np.testing.assert_array_equal(t_enter[1:], t_exit[:-1])
    assert (np.abs(np.diff(cells, axis=0)).sum(axis=1) == 1).all()
    assert cells[-1].tolist() == [10, 10, 10]


def test_empty_range_visits_nothing():
    cells, _, _ = traverse(np.zeros(3), np.ones(3), np.zeros(3), np.ones(3), 2.0, 1.0, 10)
    assert cells.shape == (0, 3)


@pytest.mark.parametrize(
    ("point", "direction", "expected"),
    [
        ((-2.0, 0.5, 0.5), (1.0, 0.0, 0.0), (2.0, 6.0)),     # enters and leaves in x
        ((6.0, 0.5, 0.5), (-2.0, 0.0, 0.0), (1.0, 3.0)),     # backwards
        ((0.5, 5.0, 0.5), (1.0, 0.0, 0.0), (np.inf, -np.inf)),  # parallel, outside
        ((0.5, 4.0, 0.5), (1.0, 0.0, 0.0), (0.0, 3.5)),      # parallel, on the upper face
        ((-2.0, -2.0, 0.5), (1.0, 1.0, 0.0), (2.0, 6.0)),    # through two corners
        ((-2.0, 0.0, 0.5), (1.0, 1.0, 0.0), (2.0, 4.0)),     # enters at a corner
        ((2.0, 2.0, 2.0), (-1.0, 4.0, 0.0), (0.0, 0.5)),     # starts inside
    ],
)
def test_clip_to_cells(point, direction, expected):
    lower, upper = np.zeros(3), np.full(3, 4.0)
    u_start, u_rate = np.array(point), np.array(direction)
    t_lo, t_hi = clip_to_cells(u_start, u_rate, lower, upper, 0.0, np.inf)
    assert (t_lo, t_hi) == expected


def test_clip_keeps_the_given_range():
    t_lo, t_hi = clip_to_cells(np.array([-2.0, 0.5, 0.5]), np.array([1.0, 0.0, 0.0]),
                               np.zeros(3), np.full(3, 4.0), 3.0, 4.5)
    assert (t_lo, t_hi) == (3.0, 4.5)


def test_segment_cells_oracle_itself():
    # The oracle on a case worked by hand: from (0.5, 0.5) at slope 1/2 over t in [0, 3].
    cells = segment_cells([0.5, 0.5, 0.0], [1.0, 0.5, 0.0], 0.0, 3.0)
    assert [(cell, a, b) for cell, a, b in cells] == [
        ((0, 0, 0), Fraction(0), Fraction(1, 2)),
        ((1, 0, 0), Fraction(1, 2), Fraction(1)),
        ((1, 1, 0), Fraction(1), Fraction(3, 2)),
        ((2, 1, 0), Fraction(3, 2), Fraction(5, 2)),
        ((3, 1, 0), Fraction(5, 2), Fraction(3)),
    ]
