"""DynamicHash: every bad input raises a clear error naming the parameter, and changes nothing."""

from __future__ import annotations

import re

import numpy as np
import pytest

from spatialhash import DynamicHash, UnknownIdError


def raises(error, pattern):
    assert re.search(r"`\w+`", pattern.replace("\\", "")), pattern
    return pytest.raises(error, match=pattern)


@pytest.fixture
def world():
    hash_ = DynamicHash(1.0, n_dims=2)
    hash_.insert_many(np.arange(4), [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 3.0]],
                      [[0.5, 0.5], [1.5, 1.5], [2.5, 2.5], [3.5, 3.5]])
    hash_.insert("name", [5.0, 5.0], radius=1.0)
    return hash_


def snapshot(hash_):
    """Everything observable: ids, shapes, and every query's answer."""
    shapes = {id: tuple(map(tuple, hash_.bounds(id))) for id in hash_}
    pairs = sorted(map(repr, hash_.query_pairs().tolist()))
    near = sorted(map(repr, hash_.query_radius([2.0, 2.0], 10.0)))
    return shapes, pairs, near


def test_unknown_ids_raise_a_key_error_listing_them_and_change_nothing(world):
    before = snapshot(world)
    with raises(UnknownIdError, r"`ids` must all be in the hash; got unknown ids \[7, 9\]\."):
        world.move_many([0, 7, 1, 9], np.zeros((4, 2)))
    with raises(UnknownIdError, r"`ids` must all be in the hash; got unknown ids \[8\]\."):
        world.remove_many([2, 8])
    with raises(UnknownIdError, r"`id` must be in the hash; got unknown id 'nobody'\."):
        world.move("nobody", [0.0, 0.0])
    with raises(UnknownIdError, r"`id` must be in the hash; got unknown id 11\."):
        world.remove(11)
    with raises(UnknownIdError, r"`id` must be in the hash; got unknown id 12\."):
        world.bounds(12)
    assert snapshot(world) == before
    with pytest.raises(KeyError) as caught:  # a KeyError subclass, with the ids
        world.remove_many([5, 6])
    assert isinstance(caught.value, UnknownIdError)
    assert caught.value.ids == [5, 6]
    assert str(caught.value) == "`ids` must all be in the hash; got unknown ids [5, 6]."


def test_duplicate_ids_on_insert(world):
    before = snapshot(world)
    with raises(ValueError, r"`id` must not be in the hash already; got 'name'\. Use move\(\)"):
        world.insert("name", [0.0, 0.0])
    with raises(ValueError, r"`ids` must be new and distinct; got ids already in the hash or "
                            r"repeated: \[2, 5\]\."):
        world.insert_many([10, 2, 5, 5], np.zeros((4, 2)))
    assert snapshot(world) == before


def test_repeated_ids_on_bulk_moves_and_removes(world):
    before = snapshot(world)
    with raises(ValueError, r"`ids` must not repeat an id; got \[1\] more than once\."):
        world.move_many([1, 2, 1], np.zeros((3, 2)))
    with raises(ValueError, r"`ids` must not repeat an id; got \[3\] more than once\."):
        world.remove_many([3, 3])
    assert snapshot(world) == before


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda h: h.insert(9, [1.0, np.nan]), ValueError,
         r"`lower` must be finite; got nan at lower\[1\]\."),
        (lambda h: h.move(0, [np.inf, 0.0]), ValueError,
         r"`lower` must be finite; got inf at lower\[0\]\."),
        (lambda h: h.move(0, [0.0, 0.0, 0.0]), ValueError,
         r"`lower` must hold 2 coordinates \(shape \(2,\)\); got an array of shape \(3,\)\."),
        (lambda h: h.move(0, [1.0, 1.0], [0.0, 2.0]), ValueError,
         r"`upper` must be >= `lower` on every axis; got lower\[0\] = 1\.0 > upper\[0\] = "
         r"0\.0\."),
        (lambda h: h.move(0, ["a", 1.0]), TypeError,
         r"`lower` must hold real numbers \(integer or floating dtype\); got dtype <U32\."),
        (lambda h: h.move(0, [0.0, 0.0], radius=-1.0), ValueError,
         r"`radius` must be finite and >= 0; got -1\.0\."),
        (lambda h: h.move(0, [0.0, 0.0], [1.0, 1.0], radius=1.0), TypeError,
         r"give `upper` \(a box\) or `radius` \(a sphere\), not both\."),
        (lambda h: h.move(0, [1e308, 0.0], radius=1e308), ValueError,
         r"`lower` must lie within \+-1e\+150 .* got 1e\+308 at lower\[0\]\."),
        (lambda h: h.insert([1], [0.0, 0.0]), TypeError,
         r"`id` must be hashable; got \[1\]\."),
        (lambda h: h.insert(9, [0.0, 0.0], category=-1), ValueError,
         r"`category` must be in \[0, 2\*\*32\); got -1\."),
        (lambda h: h.insert(9, [0.0, 0.0], mask=1.5), TypeError,
         r"`mask` must be an integer; got 1\.5\."),
        (lambda h: h.move_many([0, 1], np.zeros((3, 2))), ValueError,
         r"`lower` must have shape \(2, 2\), one row per id; got an array of shape \(3, 2\)\."),
        (lambda h: h.move_many([0, 1], [[0.0, 0.0], [np.nan, 0.0]]), ValueError,
         r"`lower` must be finite; got nan at lower\[1, 0\]\."),
        # float64 arrays take the one-pass compiled check first; its errors are the same.
        (lambda h: h.move_many([0, 1], np.array([[0.0, 0.0], [0.0, np.inf]])), ValueError,
         r"`lower` must be finite; got inf at lower\[1, 1\]\."),
        (lambda h: h.insert_many([7, 8], np.zeros((2, 2)), np.array([[1.0, np.nan], [1, 1]])),
         ValueError, r"`upper` must be finite; got nan at upper\[0, 1\]\."),
        (lambda h: h.insert(9, [1.0, 1.0], [1.0, 0.5]), ValueError,
         r"`upper` must be >= `lower` on every axis; got lower\[1\] = 1\.0 > upper\[1\] = "
         r"0\.5\."),
        (lambda h: h.insert_many([7, 8], np.zeros((2, 2)), [[1.0, 1.0], [1.0, -3.0]]),
         ValueError, r"`upper` must be >= `lower` on every axis; got lower\[1, 1\] = 0\.0 > "
         r"upper\[1, 1\] = -3\.0\."),
        (lambda h: h.move_many([0, 1], np.zeros((2, 2)), -np.ones((2, 2))), ValueError,
         r"`upper` must be >= `lower` on every axis; got lower\[0, 0\] = 0\.0 > "
         r"upper\[0, 0\] = -1\.0\."),
        (lambda h: h.move_many([0.5, 1.0], np.zeros((2, 2))), TypeError,
         r"`ids` must be a 1-D array of integers; got dtype float64\."),
        (lambda h: h.move_many([[0, 1]], np.zeros((2, 2))), ValueError,
         r"`ids` must be a 1-D array of integers; got an array of shape \(1, 2\)\."),
        (lambda h: h.insert_many([7, 8], np.zeros((2, 2)), radius=[1.0, -2.0]), ValueError,
         r"`radius` must be finite and >= 0; got -2\.0 at radius\[1\]\."),
        (lambda h: h.insert_many([7, 8], np.zeros((2, 2)), category=[1, 2**32]), ValueError,
         r"`category` must be in \[0, 2\*\*32\); got 4294967296 at category\[1\]\."),
        (lambda h: h.query_radius([0.0, 0.0], -1.0), ValueError, r"`r` must be >= 0; got -1\.0\."),
        (lambda h: h.query_box([1.0, 0.0], [0.0, 0.0]), ValueError,
         r"`upper` must be >= `lower` on every axis"),
        (lambda h: h.query_knn([0.0, 0.0], 0), ValueError, r"`k` must be >= 1; got 0\."),
        (lambda h: h.query_cell([np.nan, 0.0]), ValueError,
         r"`position` must be finite; got nan at position\[0\]\."),
        (lambda h: h.query_ray([0.0, 0.0], [0.0, 0.0]), ValueError,
         r"`direction` must be non-zero; got \[0\.0, 0\.0\]\."),
        (lambda h: h.query_ray([0.0, 0.0], [1.0, 0.0], max_distance=-1.0), ValueError,
         r"`max_distance` must be >= 0; got -1\.0\."),
        (lambda h: h.query_ray([0.0, np.inf], [1.0, 0.0]), ValueError,
         r"`origin` must be finite; got inf at origin\[1\]\."),
    ],
)
def test_bad_values_raise_and_change_nothing(world, call, error, pattern):
    before = snapshot(world)
    with raises(error, pattern):
        call(world)
    assert snapshot(world) == before


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"cell_size": 0.0}, ValueError, r"`cell_size` must be > 0; got 0\.0\."),
        ({"cell_size": np.inf}, ValueError, r"`cell_size` must be finite; got inf\."),
        ({"cell_size": 1.0, "n_dims": 4}, ValueError, r"`n_dims` must be 1, 2 or 3; got 4\."),
        ({"cell_size": 1.0, "n_dims": 2.0}, TypeError, r"`n_dims` must be an integer"),
        ({"cell_size": 1.0, "n_dims": True}, TypeError, r"`n_dims` must be an integer"),
        ({"cell_size": 10**400}, ValueError, r"`cell_size` must fit float64; got an integer "
                                             r"of 401 digits\."),
        ({"cell_size": 1.0, "capacity": 0}, ValueError, r"`capacity` must be >= 1; got 0\."),
        ({"cell_size": 1.0, "engine": "gpu"}, ValueError,
         r"`engine` must be one of \('cpu',\); got 'gpu'\."),
        ({"cell_size": 1.0, "engine": None}, ValueError,
         r"`engine` must be one of \('cpu',\); got None\."),
    ],
)
def test_bad_construction(kwargs, error, pattern):
    with raises(error, pattern):
        DynamicHash(**kwargs)


def test_numpy_integer_dimension_is_accepted():
    world = DynamicHash(1.0, n_dims=np.int64(2))
    assert world.n_dims == 2 and type(world.n_dims) is int
    world.insert(1, [0.5, 0.5])
    assert world.query_radius([0.0, 0.0], 1.0).tolist() == [1]


def test_ray_directions_of_any_non_zero_length_give_the_same_hits():
    # Directions whose squared length overflows or underflows (1e200, 1e-170) are valid:
    # they must not be refused as not "non-zero with a finite length".
    world = DynamicHash(1.0, n_dims=2)
    world.insert_many(np.arange(3), np.array([[5.0, 5.0], [2.0, 2.5], [9.0, 9.0]]),
                      radius=0.75)
    expected = world.query_ray([0.0, 0.0], [1.0, 1.0], all_hits=True)
    assert expected.ids.tolist() == [1, 0, 2]
    for scale in (1e200, 1e-170, 1e308, 5e-324):
        hits = world.query_ray([0.0, 0.0], [scale, scale], all_hits=True)
        assert hits.ids.tolist() == expected.ids.tolist()
        np.testing.assert_allclose(hits.distances, expected.distances, rtol=1e-15)
