"""Every bad input raises ValueError (values, shapes) or TypeError (types, dtypes) with a
message that names the parameter in backticks and shows what was seen."""

from __future__ import annotations

import re
import sys

import numba
import numpy as np
import pytest

import spatialhash
from spatialhash import Grid

POINTS = np.arange(24.0).reshape(12, 2) * 0.1


@pytest.fixture(scope="module")
def grid():
    return Grid(POINTS, 0.5, algorithm="grid")


@pytest.fixture(scope="module")
def periodic_grid():
    return Grid(POINTS, 0.5, box=[4.0, 3.0], algorithm="grid")


def raises(error, pattern):
    """``pytest.raises`` with a pattern that must also name a parameter in backticks."""
    assert re.search(r"`\w+`", pattern.replace("\\", "")), pattern
    return pytest.raises(error, match=pattern)


# ---------------------------------------------------------------------- points
@pytest.mark.parametrize(
    ("points", "pattern"),
    [
        (np.zeros(5), r"`points` must be a 2-D array of shape \(n, d\); got an array of "
                      r"shape \(5,\) and dtype float64\. Use `\.reshape\(-1, 1\)` for n points in "
                      r"1-D, or `\.reshape\(1, -1\)` for a single point\."),
        (np.zeros((2, 2, 2)), r"`points` must be a 2-D array of shape \(n, d\); got an array "
                              r"of shape \(2, 2, 2\)"),
        (np.zeros(()), r"`points` must be a 2-D array.*shape \(\)"),
        (np.zeros((5, 4)), r"`points` must have 1, 2 or 3 columns \(the dimension d\); got "
                           r"shape \(5, 4\)"),
        (np.zeros((5, 0)), r"`points` must have 1, 2 or 3 columns.*got shape \(5, 0\)"),
        (np.array([[0.0, 1.0], [2.0, np.nan]]), r"`points` must be finite; got nan at "
                                                r"points\[1, 1\]"),
        (np.array([[np.inf, 1.0]]), r"`points` must be finite; got inf at points\[0, 0\]"),
        (np.array([[0.0], [-np.inf]]), r"`points` must be finite; got -inf at points\[1, 0\]"),
    ],
)
def test_bad_points_values_raise_value_error(points, pattern):
    with raises(ValueError, pattern):
        Grid(points, 1.0)


@pytest.mark.parametrize(
    ("points", "dtype"),
    [
        (np.ones((3, 2), dtype=bool), "bool"),
        (np.ones((3, 2), dtype=complex), "complex128"),
        (np.array([["a", "b"]]), "<U1"),
        (np.array([[1.0, 2.0]], dtype=object), "object"),
    ],
)
def test_bad_points_dtype_raises_type_error(points, dtype):
    with raises(TypeError, r"`points` must hold real numbers \(integer or floating dtype\); "
                           rf"got dtype {re.escape(dtype)}\."):
        Grid(points, 1.0)


def test_ragged_points_raise_type_error():
    with raises(TypeError, r"`points` must be array-like of real numbers; got \[\[1, 2\], "):
        Grid([[1, 2], [3]], 1.0)


# ---------------------------------------------------------------------- cell size
@pytest.mark.parametrize(
    ("cell_size", "pattern"),
    [
        (-1.0, r"`cell_size` must be > 0; got -1\.0\."),
        (0.0, r"`cell_size` must be > 0; got 0\.0\."),
        (0, r"`cell_size` must be > 0; got 0\.0\."),
        (np.nan, r"`cell_size` must be > 0; got nan\."),
        (np.inf, r"`cell_size` must be finite; got inf\."),
    ],
)
def test_bad_cell_size_raises_value_error(cell_size, pattern):
    with raises(ValueError, pattern):
        Grid(POINTS, cell_size)


@pytest.mark.parametrize("cell_size", ["1", True, [1.0], np.array([1.0])])
def test_cell_size_not_a_real_number_raises_type_error(cell_size):
    with raises(TypeError, r"`cell_size` must be a real number; got "):
        Grid(POINTS, cell_size)


def test_cell_size_too_small_for_the_spread_raises_value_error():
    points = np.array([[0.0, 0.0], [1e10, 1.0]])
    with raises(ValueError, r"`cell_size` is too small for the spread of the points: 1e-10 "
                            r"would need (\S+) cells along axis 0 \(at most 2\*\*52\)\. "
                            r"Use a larger cell_size\.") as error:
        Grid(points, 1e-10, algorithm="grid")
    needed = float(re.search(r"would need (\S+) cells", str(error.value)).group(1))
    assert needed >= 2.0**52


def test_cell_size_too_small_on_the_second_axis_names_the_axis():
    points = np.array([[0.0, 0.0, 0.0], [1.0, 1e6, 0.0]])
    with raises(ValueError, r"`cell_size` is too small.*along axis 1"):
        Grid(points, 1e-12, algorithm="grid")


# ---------------------------------------------------------------------- box, periodic
@pytest.mark.parametrize(
    ("box", "periodic", "pattern"),
    [
        (0.0, None, r"`box` must be finite and > 0 on periodic axes; got box\[0\] = 0\.0\."),
        ([4.0, -1.0], None, r"`box` must be finite and > 0 on periodic axes; got box\[1\] = "
                            r"-1\.0\."),
        ([4.0, np.inf], None, r"`box` must be finite and > 0 on periodic axes; got box\[1\] "
                              r"= inf\."),
        ([np.nan, 4.0], None, r"`box` must be finite and > 0 on periodic axes; got box\[0\] "
                              r"= nan\."),
        ([4.0, 0.0], [False, True], r"`box` must be finite and > 0.*box\[1\] = 0\.0"),
        ([1.0, 2.0, 3.0], None, r"`box` must be a scalar or hold one length per dimension "
                                r"\(2\); got an array of shape \(3,\)"),
        ([[1.0, 2.0]], None, r"`box` must be a scalar or hold one length per dimension "
                             r"\(2\); got an array of shape \(1, 2\)"),
        (4.0, [True], r"`periodic` must be a bool or hold one flag per dimension \(2\); got "
                      r"\[True\]\."),
        (4.0, [True, False, True], r"`periodic` must be a bool or hold one flag per "
                                   r"dimension \(2\)"),
    ],
)
def test_bad_box_or_periodic_raises_value_error(box, periodic, pattern):
    with raises(ValueError, pattern):
        Grid(POINTS, 0.5, box=box, periodic=periodic)


@pytest.mark.parametrize("periodic", [True, [True, False], np.True_])
def test_periodic_without_box_raises_value_error(periodic):
    with raises(ValueError, r"`periodic` needs `box`; got periodic=.* and box=None\."):
        Grid(POINTS, 0.5, periodic=periodic)


@pytest.mark.parametrize("periodic", [[1, 0], "yes", [1.0, 0.0]])
def test_periodic_not_bools_raises_type_error(periodic):
    with raises(TypeError, r"`periodic` must be a bool or a sequence of bools; got "):
        Grid(POINTS, 0.5, box=4.0, periodic=periodic)


def test_box_not_real_raises_type_error():
    with raises(TypeError, r"`box` must hold real numbers"):
        Grid(POINTS, 0.5, box="4")


def test_open_grid_without_periodic_axes_needs_no_box():
    """Not an error: ``periodic=False`` (or all False) without a box is an open grid."""
    assert Grid(POINTS, 0.5, periodic=False).box is None
    assert Grid(POINTS, 0.5, periodic=[False, False]).box is None
    assert Grid(POINTS, 0.5, box=[4.0, np.nan], periodic=[True, False]).periodic.tolist() == [
        True, False]


# ---------------------------------------------------------------------- algorithm, threads
@pytest.mark.parametrize("algorithm", ["kd", "Grid", "", None, "brute "])
def test_bad_algorithm_raises_value_error(algorithm):
    with raises(ValueError, r"`algorithm` must be one of \('auto', 'grid', 'brute'\); got "
                            + re.escape(repr(algorithm))):
        Grid(POINTS, 0.5, algorithm=algorithm)


@pytest.mark.parametrize("n_threads", [0, -2, numba.config.NUMBA_NUM_THREADS + 1, 10**6])
def test_n_threads_out_of_range_raises_value_error(n_threads):
    limit = numba.config.NUMBA_NUM_THREADS
    with raises(ValueError, rf"`n_threads` must be -1 or between 1 and {limit} "
                            rf"\(NUMBA_NUM_THREADS\); got {n_threads}\."):
        Grid(POINTS, 0.5, n_threads=n_threads)


@pytest.mark.parametrize("n_threads", [1.5, "2", True, [1]])
def test_n_threads_not_an_integer_raises_type_error(n_threads):
    with raises(TypeError, r"`n_threads` must be an integer or None; got "):
        Grid(POINTS, 0.5, n_threads=n_threads)


def test_n_threads_accepts_numpy_integers_and_minus_one():
    for n_threads in (np.int64(1), -1, None):
        assert len(Grid(POINTS, 0.5, n_threads=n_threads).query_pairs(0.3)) == 11


# ---------------------------------------------------------------------- device
#: The devices a message lists.
DEVICES = r"'cpu', 'cuda', 'cuda:N' \(N the number of a GPU\) or 'warp-cpu'"


@pytest.mark.parametrize("device", ["gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda0",
                                    "warp", "warp:cpu", ""])
def test_bad_device_raises_value_error(device):
    with raises(ValueError, rf"`device` must be {DEVICES}; got {re.escape(repr(device))}\."):
        Grid(POINTS, 0.5, device=device)


@pytest.mark.parametrize("device", [0, b"cpu"])
def test_device_not_a_str_raises_type_error(device):
    # None is the default: the points' device (tests/test_device_arrays.py).
    with raises(TypeError, rf"`device` must be a str: {DEVICES}; got "
                           rf"{type(device).__name__} {re.escape(repr(device))}\."):
        Grid(POINTS, 0.5, device=device)


@pytest.mark.parametrize("device", ["cuda", "cuda:1", "warp-cpu"])
def test_warp_device_without_warp_names_the_extra(monkeypatch, device):
    monkeypatch.setitem(sys.modules, "warp", None)  # `import warp` raises ImportError
    with raises(ImportError, rf"^`device` is {re.escape(repr(device))}, which runs on NVIDIA "
                             r"Warp \(warp-lang\), not installed: pip install "
                             r"'spatialhash\[gpu\]'\.$"):
        Grid(POINTS, 0.5, device=device)


# ---------------------------------------------------------------------- r and radii
@pytest.mark.parametrize(
    ("r", "error", "pattern"),
    [
        (-1.0, ValueError, r"`r` must be >= 0; got -1\.0\."),
        (np.nan, ValueError, r"`r` must be >= 0; got nan\."),
        (np.inf, ValueError, r"`r` must be finite; got inf\."),
        ("0.5", TypeError, r"`r` must be a real number; got '0\.5'\."),
        (True, TypeError, r"`r` must be a real number; got True\."),
        (np.array([0.5]), TypeError, r"`r` must be a real number; got array"),
    ],
)
def test_bad_r_for_pairs(grid, r, error, pattern):
    with raises(error, pattern):
        grid.query_pairs(r)
    with raises(error, pattern):
        next(grid.iter_pairs(r))


@pytest.mark.parametrize(
    ("r", "error", "pattern"),
    [
        (-0.5, ValueError, r"`r` must be >= 0; got -0\.5\."),
        (np.nan, ValueError, r"`r` must be >= 0; got nan\."),
        (np.inf, ValueError, r"`r` must be finite; got inf\."),
        ("1", TypeError, r"`r` must be a real number; got '1'\."),
        (None, TypeError, r"`r` must be a real number; got None\."),
        (np.array([0.5, -0.5, 0.5]), ValueError, r"`r` must hold finite values >= 0; got "
                                                 r"-0\.5 at r\[1\]\."),
        (np.array([0.5, 0.5, np.nan]), ValueError, r"`r` must hold finite values >= 0; got "
                                                   r"nan at r\[2\]\."),
        (np.array([np.inf, 0.5, 0.5]), ValueError, r"`r` must hold finite values >= 0; got "
                                                   r"inf at r\[0\]\."),
        (np.array([0.5, 0.5]), ValueError, r"`r` must be a scalar or an array of shape "
                                           r"\(3,\); got an array of shape \(2,\) and dtype "
                                           r"float64\."),
        (np.ones((3, 1)), ValueError, r"`r` must be a scalar or an array of shape \(3,\); "
                                      r"got an array of shape \(3, 1\)"),
        (np.ones(3, dtype=bool), TypeError, r"`r` must hold real numbers"),
    ],
)
def test_bad_r_for_radius_queries(grid, r, error, pattern):
    queries = POINTS[:3]
    with raises(error, pattern):
        grid.query_radius(queries, r)
    with raises(error, pattern):
        grid.count_radius(queries, r)
    with raises(error, pattern):
        grid.query_pairs(r, queries=queries)


@pytest.mark.parametrize(
    ("radii", "error", "pattern"),
    [
        (np.full(11, 0.1), ValueError, r"`radii` must be a scalar or an array of shape "
                                       r"\(12,\); got an array of shape \(11,\) and dtype "
                                       r"float64\."),
        (np.full((12, 1), 0.1), ValueError, r"`radii` must be a scalar or an array of shape "
                                            r"\(12,\); got an array of shape \(12, 1\)"),
        (np.r_[np.full(5, 0.1), -1.0, np.full(6, 0.1)], ValueError,
         r"`radii` must hold finite values >= 0; got -1\.0 at radii\[5\]\."),
        (np.r_[np.nan, np.full(11, 0.1)], ValueError,
         r"`radii` must hold finite values >= 0; got nan at radii\[0\]\."),
        (np.r_[np.full(11, 0.1), np.inf], ValueError,
         r"`radii` must hold finite values >= 0; got inf at radii\[11\]\."),
        (-0.1, ValueError, r"`radii` must be >= 0; got -0\.1\."),
        (np.ones(12, dtype=complex), TypeError, r"`radii` must hold real numbers"),
    ],
)
def test_bad_radii(grid, radii, error, pattern):
    with raises(error, pattern):
        grid.query_pairs(radii=radii)
    with raises(error, pattern):
        next(grid.iter_pairs(radii=radii))
    if np.isrealobj(radii):  # complex radii: see test_regressions.py
        with raises(error, pattern):
            spatialhash.query_pairs(POINTS, radii=radii)


def test_both_r_and_radii_or_neither_raise_type_error(grid):
    pattern = r"give exactly one of `r` \(a distance\) and `radii` \(one per point\)\."
    with raises(TypeError, pattern):
        grid.query_pairs(0.5, radii=np.full(12, 0.1))
    with raises(TypeError, pattern):
        grid.query_pairs()
    with raises(TypeError, pattern):
        next(grid.iter_pairs())
    with raises(TypeError, pattern):
        spatialhash.query_pairs(POINTS)


def test_radii_with_queries_raises_type_error(grid):
    with raises(TypeError, r"`radii` applies to pairs among the points, not with `queries`\."):
        grid.query_pairs(radii=np.full(12, 0.1), queries=POINTS)


def test_r_above_half_the_periodic_box_raises_value_error(periodic_grid):
    # The box is [4, 3]: half is 2.0 on axis 0 and 1.5 on axis 1; the first axis exceeded
    # is named.
    message = (r"`r` must be at most half the periodic box \(1\.5 on axis 1\); got 1\.75\. "
               r"Use a larger box or a smaller radius\.")
    queries = POINTS[:3]
    with raises(ValueError, message):
        periodic_grid.query_pairs(1.75)
    with raises(ValueError, message):
        next(periodic_grid.iter_pairs(1.75))
    with raises(ValueError, message):
        periodic_grid.query_radius(queries, 1.75)
    with raises(ValueError, message):
        periodic_grid.query_radius(queries, np.array([0.1, 1.75, 0.2]))
    with raises(ValueError, message):
        periodic_grid.count_radius(queries, 1.75)
    with raises(ValueError, message):
        periodic_grid.query_pairs(1.75, queries=queries)
    with raises(ValueError, r"`r` must be at most half the periodic box \(2\.0 on axis 0\); "
                            r"got 2\.5\."):
        periodic_grid.query_pairs(2.5)
    with raises(ValueError, r"`r` must be at most half the periodic box"):
        spatialhash.query_pairs(POINTS, 1.75, box=[4.0, 3.0])
    # Exactly half is allowed.
    assert len(periodic_grid.query_pairs(1.5)) > 0


def test_radii_above_half_the_periodic_box_raise_value_error(periodic_grid):
    radii = np.full(12, 0.1)
    radii[4] = 0.8
    with raises(ValueError, r"`radii` must be at most half the periodic box \(1\.5 on axis "
                            r"1\); got 2 \* max\(radii\) = 1\.6\. Use a larger box"):
        periodic_grid.query_pairs(radii=radii)
    with raises(ValueError, r"`radii` must be at most half the periodic box"):
        next(periodic_grid.iter_pairs(radii=radii))
    radii[4] = 0.75  # 2 * max == half the box: allowed
    assert len(periodic_grid.query_pairs(radii=radii)) > 0


def test_r_on_open_axis_of_a_partly_periodic_box_is_unbounded():
    grid = Grid(POINTS, 0.5, box=[4.0, 1.0], periodic=[True, False])
    with raises(ValueError, r"`r` must be at most half the periodic box \(2\.0 on axis 0\)"):
        grid.query_pairs(2.25)
    assert len(grid.query_pairs(2.0)) > 0  # 2.0 > box[1] / 2, but axis 1 is open


# ---------------------------------------------------------------------- queries
@pytest.mark.parametrize(
    ("queries", "error", "pattern"),
    [
        (np.zeros((3, 3)), ValueError, r"`queries` must have 2 columns, like the grid's "
                                       r"points; got shape \(3, 3\)\."),
        (np.zeros((3, 1)), ValueError, r"`queries` must have 2 columns.*\(3, 1\)"),
        (np.zeros(3), ValueError, r"`queries` must have 2 columns, like the grid's points, "
                                  r"or be one point of shape \(2,\); got shape \(3,\)\.$"),
        (np.zeros((3, 2, 1)), ValueError, r"`queries` must be a 2-D array of shape \(n, d\); "
                                          r"got an array of shape \(3, 2, 1\)"),
        (np.array([[0.0, np.nan]]), ValueError, r"`queries` must be finite; got nan at "
                                                r"queries\[0, 1\]\."),
        (np.array([[0.0, 0.0], [np.inf, 0.0]]), ValueError, r"`queries` must be finite; got "
                                                            r"inf at queries\[1, 0\]\."),
        (np.ones((2, 2), dtype=bool), TypeError, r"`queries` must hold real numbers"),
        (np.ones((2, 2), dtype=complex), TypeError, r"`queries` must hold real numbers"),
    ],
)
def test_bad_queries(grid, queries, error, pattern):
    with raises(error, pattern):
        grid.query_radius(queries, 0.5)
    with raises(error, pattern):
        grid.count_radius(queries, 0.5)
    with raises(error, pattern):
        grid.query_knn(queries, 2)
    with raises(error, pattern):
        grid.query_pairs(0.5, queries=queries)


# ---------------------------------------------------------------------- k, r_max, chunk_size
@pytest.mark.parametrize(
    ("k", "error", "pattern"),
    [
        (0, ValueError, r"`k` must be >= 1; got 0\."),
        (-3, ValueError, r"`k` must be >= 1; got -3\."),
        (2.0, TypeError, r"`k` must be an integer; got 2\.0\."),
        (1.5, TypeError, r"`k` must be an integer; got 1\.5\."),
        ("3", TypeError, r"`k` must be an integer; got '3'\."),
        (True, TypeError, r"`k` must be an integer; got True\."),
        (None, TypeError, r"`k` must be an integer; got None\."),
    ],
)
def test_bad_k(grid, k, error, pattern):
    with raises(error, pattern):
        grid.query_knn(POINTS[:2], k)


def test_k_accepts_numpy_integers(grid):
    assert grid.query_knn(POINTS[:2], np.int32(3)).indices.shape == (2, 3)


@pytest.mark.parametrize(
    ("r_max", "error", "pattern"),
    [
        (-1.0, ValueError, r"`r_max` must be >= 0; got -1\.0\."),
        (np.nan, ValueError, r"`r_max` must be >= 0; got nan\."),
        ("1", TypeError, r"`r_max` must be a real number; got '1'\."),
    ],
)
def test_bad_r_max(grid, r_max, error, pattern):
    with raises(error, pattern):
        grid.query_knn(POINTS[:2], 2, r_max=r_max)


def test_r_max_infinity_means_no_limit(grid):
    np.testing.assert_array_equal(grid.query_knn(POINTS[:2], 12, r_max=np.inf).counts, [12, 12])


@pytest.mark.parametrize(
    ("chunk_size", "error", "pattern"),
    [
        (0, ValueError, r"`chunk_size` must be >= 1; got 0\."),
        (-5, ValueError, r"`chunk_size` must be >= 1; got -5\."),
        (1.5, TypeError, r"`chunk_size` must be an integer; got 1\.5\."),
    ],
)
def test_bad_chunk_size(grid, chunk_size, error, pattern):
    # Raised by the call itself, before any chunk is asked for.
    with raises(error, pattern):
        grid.iter_pairs(0.5, chunk_size=chunk_size)


# ---------------------------------------------------------------------- boxes
@pytest.mark.parametrize(
    ("lower", "upper", "error", "pattern"),
    [
        ([[0.0, 2.0]], [[1.0, 1.0]], ValueError,
         r"`upper` must be >= `lower` on every axis; got lower\[0, 1\] = 2\.0 > upper\[0, 1\] "
         r"= 1\.0\."),
        ([[0.0, 0.0], [3.0, 0.0]], [[1.0, 1.0], [2.0, 1.0]], ValueError,
         r"`upper` must be >= `lower` on every axis; got lower\[1, 0\] = 3\.0"),
        (np.zeros((2, 2)), np.ones((3, 2)), ValueError,
         r"`lower` and `upper` must have the same shape; got \(2, 2\) and \(3, 2\)\."),
        (np.zeros(2), np.ones((3, 2)), ValueError,
         r"`lower` and `upper` must have the same shape; got \(1, 2\) and \(3, 2\)\."),
        (np.zeros((2, 3)), np.ones((2, 3)), ValueError,
         r"`lower` must have 2 columns, like the grid's points; got shape \(2, 3\)\."),
        (np.zeros((2, 2)), np.ones((2, 1)), ValueError,
         r"`upper` must have 2 columns, like the grid's points; got shape \(2, 1\)\."),
        (np.zeros((1, 1, 2)), np.ones((1, 1, 2)), ValueError,
         r"`lower` must be a 2-D array of shape \(n, d\)"),
        (0.0, 1.0, ValueError, r"`lower` must be a 2-D array of shape \(n, d\); got an array "
                               r"of shape \(\)"),
        ([np.nan, 0.0], [1.0, 1.0], ValueError, r"`lower` must be finite; got nan at "
                                                r"lower\[0, 0\]\."),
        ([0.0, 0.0], [1.0, np.inf], ValueError, r"`upper` must be finite; got inf at "
                                                r"upper\[0, 1\]\."),
        (np.zeros((1, 2), dtype=bool), np.ones((1, 2)), TypeError,
         r"`lower` must hold real numbers"),
        (np.zeros((1, 2)), np.ones((1, 2), dtype=complex), TypeError,
         r"`upper` must hold real numbers"),
    ],
)
def test_bad_boxes(grid, lower, upper, error, pattern):
    with raises(error, pattern):
        grid.query_box(lower, upper)


def test_bad_input_to_a_periodic_grid_is_checked_before_wrapping(periodic_grid):
    with raises(ValueError, r"`queries` must be finite"):
        periodic_grid.query_knn(np.array([[np.nan, 0.0]]), 1)
    with raises(ValueError, r"`upper` must be >= `lower`"):
        periodic_grid.query_box([3.9, 0.0], [0.1, 1.0])  # would cross the boundary if wrapped


# ---------------------------------------------------------------------- pandas nullable dtypes
def test_pandas_nullable_numbers_are_accepted_as_their_values():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"x": pd.array([0.0, 0.5, 1.0, 4.0], dtype="Float64"),
                          "y": pd.array([0, 1, 1, 3], dtype="Int64")})
    plain = np.array([[0.0, 0.0], [0.5, 1.0], [1.0, 1.0], [4.0, 3.0]])
    expected = Grid(plain, 1.0).query_pairs(1.2)
    np.testing.assert_array_equal(Grid(frame, 1.0).query_pairs(1.2).indices, expected.indices)
    nearest = Grid(plain, 1.0).query_knn(frame, 2)
    np.testing.assert_array_equal(nearest.indices, Grid(plain, 1.0).query_knn(plain, 2).indices)


def test_a_missing_pandas_value_is_named_by_row_and_column():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"x": pd.array([0.0, 0.5, None], dtype="Float64"),
                          "y": pd.array([0, 1, 2], dtype="Int64")})
    with raises(ValueError, r"`points` must have no missing values; got <NA> at "
                            r"points\[2, 0\]\."):
        Grid(frame, 1.0)
    with raises(ValueError, r"`queries` must have no missing values; got <NA> at "
                            r"queries\[2, 0\]\."):
        Grid(np.zeros((3, 2)), 1.0).query_radius(frame, 0.5)
    strings = pd.DataFrame({"x": pd.array(["0.5", "1.0"], dtype="string")})
    with raises(TypeError, r"`points` must hold real numbers"):
        Grid(strings, 1.0)
