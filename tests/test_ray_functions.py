"""Ray casts with a user's function (``fn`` of `Grid.query_ray` and `DynamicHash.query_ray`)
against brute force: the answer is the first hit, in the order of the ``all_hits`` answer
(distance, then index or id), that the function accepts, and the function is offered
exactly the hits before it, in that order. Random dyadic scenes, named cases (hits found
out of order by the walk), thread counts, and every error."""

from __future__ import annotations

import contextlib
import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numba import njit
from numba.core.errors import TypingError

import dynamic_oracles as oracle
import ray_oracles
from spatialhash import DynamicHash, Grid, RayHits
from spatialhash._compile_notice import family_of
from spatialhash._validation import as_rays
from spatialhash.grid._kernels import ray as ray_kernels


# ---------------------------------------------------------------------- functions
@njit
def logged_table(ray, index, distance, accept, calls, offered, offered_t):
    """Accept what ``accept[ray, index]`` says, logging each call in row ``ray``."""
    n = calls[ray]
    if n < offered.shape[1]:
        offered[ray, n] = index
        offered_t[ray, n] = distance
    calls[ray] = n + 1
    return accept[ray, index]


@njit
def accept_all(ray, index, distance):
    return True


@njit
def reject_all(ray, index, distance):
    return False


@njit
def not_the_shooter(ray, index, distance, shooters):
    return index != shooters[ray]


@njit
def raise_at(ray, index, distance, bad_ray):
    if ray == bad_ray:
        raise ValueError("fn refused a hit")
    return False


@njit
def returns_a_number(ray, index, distance):
    return distance


@njit
def returns_sometimes_none(ray, index, distance):
    if distance > 1.0:
        return True
    return None


@njit
def two_arguments(ray, index):
    return True


def python_function(ray, index, distance):
    return True


def new_log(m: int, n_hits: int):
    """``(calls, offered, offered_t)`` of `logged_table` for ``m`` rays of at most
    ``n_hits`` hits: room for one more (a hit offered twice would show)."""
    return (np.zeros(m, np.int64), np.full((m, n_hits + 1), -1, np.int64),
            np.full((m, n_hits + 1), np.nan))


def accepted_prefixes(rows, accept):
    """For each ray's sorted hits ``(indices, distances)``: the hits ``fn`` must be offered
    (up to and including the first accepted) and the answer (-1 and ``inf`` for none)."""
    prefixes, answers = [], []
    for ray, (indices, distances) in enumerate(rows):
        taken = len(indices)
        answer = (-1, np.inf)
        for position, index in enumerate(indices):
            if accept[ray, index]:
                taken = position + 1
                answer = (int(index), float(distances[position]))
                break
        prefixes.append((indices[:taken], distances[:taken]))
        answers.append(answer)
    return prefixes, answers


def check_log(log, prefixes):
    """``fn`` was offered exactly ``prefixes``: the same hits, distances, order, once."""
    calls, offered, offered_t = log
    for ray, (indices, distances) in enumerate(prefixes):
        assert calls[ray] == len(indices)
        np.testing.assert_array_equal(offered[ray, :len(indices)], indices)
        np.testing.assert_array_equal(offered_t[ray, :len(indices)], distances)


# ---------------------------------------------------------------------- the grid
@contextlib.contextmanager
def walk_cost(value):
    """Set `ray.WALK_COST_PER_POINT` for the body: ``inf`` makes every ray walk the cells,
    0 makes every ray test every sphere in one run."""
    saved = ray_kernels.WALK_COST_PER_POINT
    ray_kernels.WALK_COST_PER_POINT = value
    try:
        yield
    finally:
        ray_kernels.WALK_COST_PER_POINT = saved


def sorted_rows(points, radii, origins, directions, max_distance=None):
    """The oracle's hits of each ray, sorted by distance, then index (`ray_oracles`)."""
    points = np.asarray(points, dtype=np.float64)
    n_dims = points.shape[1]
    origins3, units3 = as_rays(origins, directions, n_dims)
    centers3 = np.zeros((points.shape[0], 3))
    centers3[:, :n_dims] = points
    radii = np.broadcast_to(np.asarray(radii, dtype=np.float64), (points.shape[0],))
    limit = np.inf if max_distance is None else max_distance
    times = ray_oracles.ray_sphere_times(origins3, units3, centers3, radii, limit)
    indptr, indices, distances = ray_oracles.all_hits(times)
    return [(indices[indptr[q]:indptr[q + 1]], distances[indptr[q]:indptr[q + 1]])
            for q in range(times.shape[0])]


def check_grid(grid, points, radii, origins, directions, accept, max_distance=None,
               costs=(np.inf, 0.0, None)):
    """`Grid.query_ray` with `logged_table` equals the oracle, answer and calls, with rays
    walking the cells, testing every sphere, and choosing as they do by default."""
    rows = sorted_rows(points, radii, origins, directions, max_distance)
    prefixes, answers = accepted_prefixes(rows, accept)
    n_hits = max(len(indices) for indices, _ in rows)
    for cost in costs:
        log = new_log(accept.shape[0], n_hits)
        with walk_cost(ray_kernels.WALK_COST_PER_POINT if cost is None else cost):
            hits = grid.query_ray(origins, directions, radii, max_distance=max_distance,
                                  fn=logged_table, args=(accept, *log))
        assert isinstance(hits, RayHits)
        np.testing.assert_array_equal(hits.indices, [index for index, _ in answers])
        np.testing.assert_array_equal(hits.distances, [t for _, t in answers])
        check_log(log, prefixes)
    return hits, rows


def dyadic(low, high, denominator):
    return st.integers(low * denominator, high * denominator).map(lambda k: k / denominator)


@st.composite
def grid_scenes(draw, n_dims=None):
    """Dyadic spheres and rays, a cell size below to above the radii, and a random table of
    which (ray, sphere) hits ``fn`` accepts."""
    n_dims = draw(st.integers(1, 3)) if n_dims is None else n_dims
    n = draw(st.integers(0, 24))
    m = draw(st.integers(1, 8))
    points = np.array(draw(st.lists(st.lists(dyadic(-4, 4, 8), min_size=n_dims,
                                             max_size=n_dims), min_size=n, max_size=n)),
                      dtype=np.float64).reshape(n, n_dims)
    radius = dyadic(0, 1, 16)
    if draw(st.booleans()):
        radii = draw(radius)
    else:
        radii = np.array(draw(st.lists(radius, min_size=n, max_size=n)), dtype=np.float64)
    origins = np.array(draw(st.lists(st.lists(dyadic(-6, 6, 8), min_size=n_dims,
                                              max_size=n_dims), min_size=m, max_size=m)))
    directions = np.array(draw(st.lists(
        st.lists(st.integers(-3, 3).map(float), min_size=n_dims, max_size=n_dims).filter(any),
        min_size=m, max_size=m)))
    cell_size = draw(st.sampled_from([0.125, 0.25, 0.5, 1.0, 3.0]))
    max_distance = draw(st.one_of(st.none(), dyadic(0, 8, 4),
                                  st.just(np.array([j / 2 for j in range(m)]))))
    accept = np.array(draw(st.lists(st.booleans(), min_size=m * n, max_size=m * n)),
                      dtype=np.bool_).reshape(m, n)
    return points, radii, origins, directions, cell_size, max_distance, accept


@given(scene=grid_scenes(), algorithm=st.sampled_from(["grid", "brute"]))
def test_grid_random_scenes_match_brute_force(scene, algorithm):
    points, radii, origins, directions, cell_size, max_distance, accept = scene
    grid = Grid(points, cell_size, algorithm=algorithm)
    check_grid(grid, points, radii, origins, directions, accept, max_distance)


def test_grid_seed_contract(rng):
    # Per-point radii, rays from within the spheres' cube (some inside spheres), about
    # half the hits accepted.
    points = rng.random((400, 3)) * 2 - 1
    radii = rng.uniform(0.0, 0.25, 400)
    origins = rng.random((30, 3)) * 2 - 1
    directions = rng.normal(size=(30, 3))
    accept = rng.random((30, 400)) < 0.5
    _, rows = check_grid(Grid(points, 0.1), points, radii, origins, directions, accept)
    assert sum(len(indices) > 1 for indices, _ in rows) > 5  # some rays choose


def test_grid_hits_found_out_of_order_reach_fn_in_order():
    # k = 3 cells of reach (largest radius 2, cell 1). The big sphere's centre lies in the
    # first cell's neighbourhood, so it is found there, but the ray enters it at 3.3; the
    # small sphere lies in cell 4, found only from the ray's second cell, and is entered
    # at 3.1: it must be offered first.
    points = np.array([[3.5, 1.9921875], [4.0, 0.0], [-8.0, 0.0]])
    radii = np.array([2.0, 0.875, 0.5])
    grid = Grid(points, 1.0, algorithm="grid")
    origins, directions = np.array([[0.0, 0.0]]), np.array([[1.0, 0.0]])
    rows = sorted_rows(points, radii, origins, directions)
    assert rows[0][0].tolist() == [1, 0]
    for accept in ([[True, True, True]], [[True, False, True]], [[False, False, False]]):
        check_grid(grid, points, radii, origins, directions, np.array(accept), costs=(np.inf,))
    log = new_log(1, 3)
    with walk_cost(np.inf):
        hits = grid.query_ray(origins, directions, radii, fn=logged_table,
                              args=(np.array([[True, False, True]]), *log))
    assert hits.indices.tolist() == [0] and log[1][0, :2].tolist() == [1, 0]


def test_grid_fn_accepting_everything_is_the_plain_first_hit():
    rng = np.random.default_rng(3)
    points = rng.random((500, 3))
    radii = rng.uniform(0.0, 0.05, 500)
    origins = rng.random((300, 3)) * 1.4 - 0.2
    directions = rng.normal(size=(300, 3))
    grid = Grid(points, 0.05)
    for cost in (np.inf, 0.0, ray_kernels.WALK_COST_PER_POINT):
        with walk_cost(cost):
            plain = grid.query_ray(origins, directions, radii)
            with_fn = grid.query_ray(origins, directions, radii, fn=accept_all)
        np.testing.assert_array_equal(with_fn.indices, plain.indices)
        np.testing.assert_array_equal(with_fn.distances, plain.distances)
    assert plain.hit.sum() > 50


def test_grid_fn_rejecting_everything_finds_nothing_and_sees_every_hit():
    rng = np.random.default_rng(4)
    points = rng.random((300, 2))
    radii = rng.uniform(0.0, 0.04, 300)
    origins = rng.random((50, 2))
    directions = rng.normal(size=(50, 2))
    grid = Grid(points, 0.05)
    hits = grid.query_ray(origins, directions, radii, fn=reject_all)
    assert hits.indices.tolist() == [-1] * 50 and np.isinf(hits.distances).all()
    _, rows = check_grid(grid, points, radii, origins, directions, np.zeros((50, 300), bool))
    every = grid.query_ray(origins, directions, radii, all_hits=True)
    assert every.indices.size == sum(len(indices) for indices, _ in rows) > 50


def test_grid_fn_skipping_the_nearest_gives_the_second_hit():
    points = np.array([[float(x), 0.0, 0.0] for x in range(1, 6)])
    grid = Grid(points, 0.5)
    accept = np.ones((2, 5), bool)
    accept[0, 0] = False  # the nearest of ray 0 (+x)
    accept[1, 4] = False  # the nearest of ray 1 (-x)
    origins = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 0.0]])
    directions = np.array([[2.0, 0.0, 0.0], [-1.0, 0.0, 0.0]])
    hits, _ = check_grid(grid, points, 0.25, origins, directions, accept)
    assert hits.indices.tolist() == [1, 3] and hits.distances.tolist() == [1.75, 1.75]


def test_grid_ray_starting_inside_spheres():
    # The shooter's own sphere (distance 0) and an overlapping one (also 0, larger index).
    points = np.array([[0.0, 0.0], [0.25, 0.0], [2.0, 0.0], [-2.0, 0.0]])
    radii = np.array([0.5, 0.5, 0.5, 0.5])
    grid = Grid(points, 1.0)
    origins = np.array([[0.0, 0.0], [0.0, 0.0]])
    directions = np.array([[1.0, 0.0], [-1.0, 0.0]])
    shooters = np.array([0, 0])
    hits = grid.query_ray(origins, directions, radii, fn=not_the_shooter, args=(shooters,))
    assert hits.indices.tolist() == [1, 1] and hits.distances.tolist() == [0.0, 0.0]
    accept = np.array([[False, False, True, True], [False, False, True, True]])
    hits, rows = check_grid(grid, points, radii, origins, directions, accept)
    assert rows[0][0].tolist() == [0, 1, 2] and rows[1][0].tolist() == [0, 1, 3]
    assert hits.indices.tolist() == [2, 3] and hits.distances.tolist() == [1.5, 1.5]


def test_grid_segments_offer_no_hit_past_max_distance():
    points = np.array([[float(x), 0.0] for x in range(1, 9)])
    grid = Grid(points, 1.0)
    origins = np.zeros((3, 2))
    directions = np.array([[1.0, 0.0]] * 3)
    limits = np.array([3.75, 3.74, 0.5])
    accept = np.zeros((3, 8), bool)
    accept[:, 2] = True  # the sphere at x = 3, entered at 2.75
    accept[:, 7] = True
    hits, rows = check_grid(grid, points, 0.25, origins, directions, accept, limits)
    assert [len(indices) for indices, _ in rows] == [4, 3, 0]
    assert hits.indices.tolist() == [2, 2, -1]
    log = new_log(3, 8)
    grid.query_ray(origins, directions, 0.25, max_distance=limits,
                   fn=logged_table, args=(np.zeros((3, 8), bool), *log))
    assert log[0].tolist() == [4, 3, 0]


def test_grid_many_rays_are_the_same_for_any_thread_count():
    rng = np.random.default_rng(11)
    # More rays than PARALLEL_MIN_QUERIES: the parallel driver runs.
    points = rng.random((2000, 3))
    radii = rng.uniform(0.002, 0.03, 2000)
    origins = rng.random((2100, 3)) * 1.2 - 0.1
    directions = rng.normal(size=(2100, 3))
    accept = rng.random((2100, 2000)) < 0.3
    outputs = []
    for n_threads in (None, 1, 2):
        grid = Grid(points, 0.04, n_threads=n_threads)
        log = new_log(2100, 60)
        hits = grid.query_ray(origins, directions, radii, fn=logged_table,
                              args=(accept, *log))
        outputs.append((hits.indices, hits.distances, *log))
    for other in outputs[1:]:
        for got, expected in zip(other, outputs[0], strict=True):
            assert got.tobytes() == expected.tobytes()
    rows = sorted_rows(points, radii, origins, directions)
    assert max(len(indices) for indices, _ in rows) < 60
    prefixes, answers = accepted_prefixes(rows, accept)
    np.testing.assert_array_equal(outputs[0][0], [index for index, _ in answers])
    np.testing.assert_array_equal(outputs[0][1], [t for _, t in answers])
    check_log(outputs[0][2:], prefixes)
    assert (outputs[0][2] > 1).sum() > 100  # rays that passed over hits


# ---------------------------------------------------------------------- the dynamic hash
def dynamic_check(hash_, model, origin, direction, accept, max_distance=math.inf,
                  mask=oracle.ALL_BITS):
    """`DynamicHash.query_ray` with `logged_table` (ray 0, ``accept[0, id]``) equals the
    oracle: the answer and the hits offered."""
    n_dims = hash_.n_dims
    expected = oracle.query_ray(model, oracle.pad(origin, n_dims),
                                oracle.unit(oracle.pad(direction, n_dims)), max_distance, mask)
    row = (np.array([id for _, id in expected], np.int64),
           np.array([t for t, _ in expected]))
    prefixes, answers = accepted_prefixes([row], accept)
    log = new_log(1, accept.shape[1])
    hits = hash_.query_ray(origin, direction, max_distance=max_distance, mask=mask,
                           fn=logged_table, args=(accept, *log))
    index, t = answers[0]
    assert hits.ids.tolist() == ([] if index < 0 else [index])
    assert hits.distances.tolist() == ([] if index < 0 else [t])
    check_log(log, prefixes)
    return hits, expected


@st.composite
def dynamic_scenes(draw):
    """Points, boxes and spheres of sizes over several levels, integer ids 0..n-1, a ray,
    and a random table of the ids ``fn`` accepts."""
    n_dims = draw(st.integers(1, 3))
    n = draw(st.integers(0, 20))
    coordinate = dyadic(-6, 6, 4)
    shapes = {}
    for id in range(n):
        lower = draw(st.lists(coordinate, min_size=n_dims, max_size=n_dims))
        kind = draw(st.sampled_from(["point", "box", "sphere"]))
        size = draw(st.sampled_from([0.0, 0.25, 1.0, 3.0, 12.0]))
        if kind == "point":
            shapes[id] = (lower, None, None)
        elif kind == "box":
            shapes[id] = (lower, [x + size for x in lower], None)
        else:
            shapes[id] = (lower, None, size / 2)
    origin = draw(st.lists(dyadic(-8, 8, 4), min_size=n_dims, max_size=n_dims))
    direction = draw(st.lists(st.integers(-3, 3).map(float), min_size=n_dims,
                              max_size=n_dims).filter(any))
    cell_size = draw(st.sampled_from([0.25, 1.0, 2.0]))
    max_distance = draw(st.one_of(st.just(math.inf), dyadic(0, 12, 4)))
    accept = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)),
                      dtype=np.bool_).reshape(1, n)
    return n_dims, shapes, origin, direction, cell_size, max_distance, accept


def filled(cell_size, n_dims, shapes: dict) -> tuple[DynamicHash, dict]:
    hash_ = DynamicHash(cell_size, n_dims=n_dims)
    for id, (lower, upper, radius) in shapes.items():
        hash_.insert(id, lower, upper, radius=radius)
    model = {id: oracle.make_shape(*args, n_dims=n_dims) for id, args in shapes.items()}
    return hash_, model


@given(scene=dynamic_scenes())
def test_dynamic_random_scenes_match_brute_force(scene):
    n_dims, shapes, origin, direction, cell_size, max_distance, accept = scene
    hash_, model = filled(cell_size, n_dims, shapes)
    dynamic_check(hash_, model, origin, direction, accept, max_distance)


def test_dynamic_seed_contract(rng):
    n_dims = 2 + int(rng.integers(2))
    hash_ = DynamicHash(1.0, n_dims=n_dims)
    lower = rng.integers(-40, 40, (150, n_dims)) / 4.0
    sizes = rng.choice([0.0, 0.5, 1.0, 3.0, 12.0], (150, 1))
    hash_.insert_many(np.arange(100), lower[:100], lower[:100] + sizes[:100])
    radii = sizes[100:, 0] / 2
    hash_.insert_many(np.arange(100, 150), lower[100:], radius=radii)
    model = {i: oracle.make_shape(lower[i], lower[i] + sizes[i], None, n_dims)
             for i in range(100)}
    model.update({i: oracle.make_shape(lower[i], None, radii[i - 100], n_dims)
                  for i in range(100, 150)})
    chose = 0
    for _ in range(10):
        origin = rng.integers(-48, 48, n_dims) / 4.0
        direction = rng.integers(-4, 5, n_dims) / 2.0
        if not direction.any():
            direction[0] = 1.0
        accept = rng.random((1, 150)) < 0.5
        _, expected = dynamic_check(hash_, model, origin, direction, accept)
        chose += len(expected) > 1
    assert chose > 0


def test_dynamic_levels_are_merged_in_order_of_distance():
    # Level 0 (points, small spheres) and a coarse level (a box 20 wide): the walks of the
    # levels go side by side, so the box's hit at 5 comes between the points' 1 and 7.
    shapes = {0: ([1.0, 0.0], None, None), 1: ([7.0, 0.0], None, None),
              2: ([5.0, -10.0], [25.0, 10.0], None), 3: ([3.0, 0.0], None, 0.25),
              4: ([40.0, 0.0], None, 0.5)}
    hash_, model = filled(1.0, 2, shapes)
    assert hash_.level_counts[0] == 4 and hash_.level_counts[1:].sum() == 1
    _, expected = dynamic_check(hash_, model, [0.0, 0.0], [1.0, 0.0], np.zeros((1, 5), bool))
    assert [id for _, id in expected] == [0, 3, 2, 1, 4]
    for accepted in range(5):
        accept = np.zeros((1, 5), bool)
        accept[0, accepted] = True
        hits, _ = dynamic_check(hash_, model, [0.0, 0.0], [1.0, 0.0], accept)
        assert hits.ids.tolist() == [accepted]


def test_dynamic_fn_accepting_everything_is_the_plain_first_hit():
    rng = np.random.default_rng(5)
    hash_ = DynamicHash(1.0, n_dims=3)
    lower = rng.integers(-40, 40, (200, 3)) / 4.0
    sizes = rng.choice([0.0, 0.5, 2.0, 9.0], (200, 1))
    hash_.insert_many(np.arange(200), lower, lower + sizes)
    found = 0
    for _ in range(30):
        origin = rng.integers(-48, 48, 3) / 4.0
        direction = rng.normal(size=3)
        plain = hash_.query_ray(origin, direction)
        with_fn = hash_.query_ray(origin, direction, fn=accept_all)
        assert with_fn.ids.tolist() == plain.ids.tolist()
        assert with_fn.distances.tolist() == plain.distances.tolist()
        nothing = hash_.query_ray(origin, direction, fn=reject_all)
        assert len(nothing) == 0
        found += len(plain)
    assert found > 10


def test_dynamic_shooter_inside_its_sphere_segment_and_mask():
    hash_ = DynamicHash(1.0, n_dims=3)
    hash_.insert(7, [0.0, 0.0, 0.0], radius=0.5, category=1)
    hash_.insert(3, [2.0, 0.0, 0.0], radius=0.5, category=2)
    hash_.insert(9, [4.0, 0.0, 0.0], [5.0, 1.0, 1.0], category=1)
    shooter = np.array([7])
    hits = hash_.query_ray([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], fn=not_the_shooter,
                           args=(shooter,))
    assert hits.ids.tolist() == [3] and hits.distances.tolist() == [1.5]
    hits = hash_.query_ray([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], fn=not_the_shooter,
                           args=(shooter,), mask=1)
    assert hits.ids.tolist() == [9] and hits.distances.tolist() == [4.0]
    hits = hash_.query_ray([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], fn=not_the_shooter,
                           args=(shooter,), max_distance=1.25)
    assert len(hits) == 0
    model = {7: oracle.make_shape([0.0, 0.0, 0.0], None, 0.5, 3, category=1),
             3: oracle.make_shape([2.0, 0.0, 0.0], None, 0.5, 3, category=2),
             9: oracle.make_shape([4.0, 0.0, 0.0], [5.0, 1.0, 1.0], None, 3, category=1)}
    accept = np.ones((1, 10), bool)
    accept[0, 7] = False
    _, expected = dynamic_check(hash_, model, [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], accept,
                                mask=1)
    assert expected == [(0.0, 7), (4.0, 9)]


# ---------------------------------------------------------------------- errors
NOT_COMPILED = ("`fn` must be a function compiled with numba's `njit` (it is called from "
                "compiled code); got {}. Decorate it with `@njit` (`from numba import njit`).")


def small_grid():
    return Grid(np.array([[0.0, 0.0], [2.0, 0.0]]), 1.0)


def small_hash():
    hash_ = DynamicHash(1.0, n_dims=2)
    hash_.insert_many([0, 1], np.array([[0.0, 0.0], [2.0, 0.0]]), radius=0.5)
    return hash_


def cast_both(fn, **kwargs):
    """The same cast through the grid and the dynamic hash."""
    yield lambda: small_grid().query_ray([-1.0, 0.0], [1.0, 0.0], 0.5, fn=fn, **kwargs)
    yield lambda: small_hash().query_ray([-1.0, 0.0], [1.0, 0.0], fn=fn, **kwargs)


@pytest.mark.parametrize("fn", [python_function, lambda *args: True, 3, np.add],
                         ids=["python", "lambda", "int", "ufunc"])
def test_fn_must_be_compiled(fn):
    for cast in cast_both(fn):
        with pytest.raises(TypeError, match=re.escape(NOT_COMPILED.format(repr(fn)))):
            cast()


def test_fn_must_return_a_bool():
    for fn, seen in ((returns_a_number, "float64"), (returns_sometimes_none, "OptionalType")):
        for cast in cast_both(fn):
            message = re.escape("`fn` must return a bool (True accepts the hit, False passes "
                                f"over it); got {fn!r}, which returns ") + f"{seen}.*"
            with pytest.raises(TypeError, match=message + re.escape(" when called as fn(ray, ")):
                cast()


@pytest.mark.parametrize(("fn", "kwargs", "seen"), [
    (two_arguments, {}, "none"),
    (not_the_shooter, {}, "none"),
    (not_the_shooter, {"args": (object(),)}, "object, which numba cannot type"),
    (accept_all, {"args": (1.0,)}, "float64"),
], ids=["too few parameters", "too few arguments", "untyped argument", "too many arguments"])
def test_fn_that_numba_cannot_call_is_a_type_error(fn, kwargs, seen):
    calls = ("fn(ray, index, distance, *args), ray and index int64",
             "fn(ray, id, distance, *args), ray (0) and id int64")
    for cast, call in zip(cast_both(fn, **kwargs), calls, strict=True):
        message = (re.escape(f"`fn` must take {call}, distance float64, args the tuple `args` "
                             f"(here: {seen}); got CPUDispatcher(<function ")
                   + ".*" + re.escape(", which numba could not compile for that call "
                                      "(numba's error is the cause above)."))
        with pytest.raises(TypeError, match=message) as error:
            cast()
        assert isinstance(error.value.__cause__, (TypingError, ValueError))


def test_arguments_that_go_with_fn():
    for cast in cast_both(not_the_shooter, args=np.array([0])):
        with pytest.raises(TypeError, match=re.escape(
                "`args` must be a tuple (the arguments passed to `fn` after the hit's); got "
                "ndarray array([0]). Pass one argument as `args=(value,)`.")):
            cast()
    for cast in cast_both(accept_all, all_hits=True):
        with pytest.raises(TypeError, match=re.escape(
                "`all_hits` must be False with `fn`: `fn` picks one hit a ray, the first it "
                "accepts; got all_hits=True.")):
            cast()
    for cast in cast_both(None, args=(1,)):
        with pytest.raises(TypeError, match=re.escape(
                "`args` are passed to `fn`, which is None; got args=(1,). Give `fn` too, or "
                "leave `args` out.")):
            cast()


@pytest.mark.parametrize("m", [3, 2500], ids=["one thread", "threads"])
def test_an_exception_in_fn_is_raised_with_its_type_and_message(m):
    rng = np.random.default_rng(2)
    points = rng.random((400, 3))
    grid = Grid(points, 0.1)
    origins = rng.random((m, 3))
    directions = rng.normal(size=(m, 3))
    radii = 0.05
    hit = np.flatnonzero(grid.query_ray(origins, directions, radii).hit)
    with pytest.raises(ValueError, match=r"^fn refused a hit$"):
        grid.query_ray(origins, directions, radii, fn=raise_at, args=(int(hit[len(hit) // 2]),))
    # No exception: the same function runs through (it rejects every hit).
    hits = grid.query_ray(origins, directions, radii, fn=raise_at, args=(-1,))
    assert (hits.indices == -1).all()


def test_an_exception_in_fn_from_the_dynamic_hash():
    hash_ = small_hash()
    with pytest.raises(ValueError, match=r"^fn refused a hit$"):
        hash_.query_ray([-1.0, 0.0], [1.0, 0.0], fn=raise_at, args=(0,))
    assert len(hash_.query_ray([-1.0, 0.0], [1.0, 0.0], fn=raise_at, args=(1,))) == 0
    # The hash answers as before.
    assert hash_.query_ray([-1.0, 0.0], [1.0, 0.0]).ids.tolist() == [0]


def test_dynamic_fn_needs_integer_ids():
    hash_ = small_hash()
    hash_.insert("wall", [5.0, 0.0], [6.0, 1.0])
    with pytest.raises(TypeError, match=re.escape(
            "`fn` needs integer ids (it is called with the id as an int64); got a hash "
            "holding ids of other types, such as 'wall'. Give the objects integer ids, or "
            "map yours to integers.")):
        hash_.query_ray([-1.0, 0.0], [1.0, 0.0], fn=accept_all)
    hash_.remove("wall")
    assert hash_.query_ray([-1.0, 0.0], [1.0, 0.0], fn=accept_all).ids.tolist() == [0]


def test_kernels_are_named_as_compiled_for_each_fn():
    for module in ("spatialhash.grid._kernels.ray_functions",
                   "spatialhash.dynamic._kernels.ray_functions",
                   "spatialhash._kernels.ray_functions"):
        assert family_of(module) == "functions run over ray hits"
    assert family_of("spatialhash.dynamic._kernels.ray") == "the dynamic hash"
