"""``out=`` of `Grid.count_radius` and `Grid.query_knn`: the answer written into the
caller's arrays, equal to the answer without them, and every wrong ``out`` refused with a
message naming it."""

from __future__ import annotations

import numpy as np
import pytest

from spatialhash import Grid


def _data(n=3000, m=700, seed=36):
    rng = np.random.default_rng(seed)
    return rng.random((n, 3)), rng.random((m, 3))


@pytest.mark.parametrize("box", [None, 1.0])
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("m", [700, 25_000])  # below and above the parallel scatter
def test_count_radius_writes_its_counts_into_out(box, n_threads, m):
    points, queries = _data(m=m)
    grid = Grid(points, cell_size=0.06, box=box, n_threads=n_threads)
    radii = np.linspace(0.0, 0.09, m)
    out = np.full(m, -7, dtype=np.int64)
    counts = grid.count_radius(queries, radii, out=out)
    assert counts is out
    assert np.array_equal(out, grid.count_radius(queries, radii))
    own = np.zeros(grid.n_points, dtype=np.int64)
    assert grid.count_radius(None, 0.05, exclude_self=True, out=own) is own
    assert np.array_equal(own, grid.count_radius(None, 0.05, exclude_self=True))


@pytest.mark.parametrize("box", [None, 1.0])
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize(("k", "r_max"), [(7, None), (5, 0.03), (3100, None)])
def test_query_knn_writes_its_rows_into_out(box, n_threads, k, r_max):
    points, queries = _data()
    grid = Grid(points, cell_size=0.06, box=box, n_threads=n_threads)
    plain = grid.query_knn(queries, k, r_max=r_max)
    out = (np.full((700, k), 5, plain.indices.dtype), np.full((700, k), 0.5))
    found = grid.query_knn(queries, k, r_max=r_max, out=out)
    assert found.indices is out[0] and found.distances is out[1]
    for got, want in zip((found.indices, found.distances, found.counts),
                         (plain.indices, plain.distances, plain.counts), strict=True):
        assert got.dtype == want.dtype
        assert np.array_equal(got, want)
    # Leaving each point out of its own row: the rows of the k + 1 search, compacted into
    # ``out``.
    plain = grid.query_knn(None, 4, exclude_self=True)
    own = [np.empty_like(plain.indices), np.empty_like(plain.distances)]  # a list will do
    found = grid.query_knn(None, 4, exclude_self=True, out=own)
    assert found.indices is own[0] and found.distances is own[1]
    assert np.array_equal(found.indices, plain.indices)
    assert np.array_equal(found.distances, plain.distances)
    assert np.array_equal(found.counts, plain.counts)


def test_an_out_array_passed_again_gets_the_new_answer():
    points, queries = _data()
    grid = Grid(points, cell_size=0.06)
    out = np.empty(700, dtype=np.int64)
    for r in (0.02, 0.07):
        assert np.array_equal(grid.count_radius(queries, r, out=out),
                              grid.count_radius(queries, r))


def _count_errors(queries, r, grid):
    m = queries.shape[0]
    strided = np.empty((m, 2), dtype=np.int64)[:, 0]
    read_only = np.empty(m, dtype=np.int64)
    read_only.flags.writeable = False
    radii = np.full(m, 0.05)
    cell_start = grid.state.cell_start
    return [
        ({"out": list(range(m))}, TypeError, r"`out` must be a NumPy array of int64; got list"),
        ({"out": np.empty(m, np.int32)}, TypeError, r"`out` must have dtype int64; got int32"),
        ({"out": np.empty(m + 1, np.int64)}, ValueError,
         rf"`out` must have shape \({m},\); got \({m + 1},\)"),
        ({"out": np.empty((m, 1), np.int64)}, ValueError, r"`out` must have shape"),
        ({"out": strided}, ValueError, r"`out` must be C-contiguous; got an array with "
                                       r"strides \(16,\)"),
        ({"out": read_only}, ValueError, r"`out` must be writeable; got a read-only array"),
        ({"out": radii.view(np.int64), "r": radii}, ValueError,
         r"`out` must not share memory .* with `r`"),
        ({"out": cell_start[:m]}, ValueError,
         r"`out` must not share memory .* with the grid's `cell_start`"),
    ]


def test_count_radius_refuses_a_wrong_out_naming_it():
    points, queries = _data()
    grid = Grid(points, cell_size=0.06)
    assert grid.state.cell_start.shape[0] >= 700  # the grid's own array is tried as out
    for options, error, message in _count_errors(queries, 0.05, grid):
        r = options.pop("r", 0.05)
        with pytest.raises(error, match=message):
            grid.count_radius(queries, r, **options)
    # A view of the queries themselves (float64 memory seen as int64).
    flat = np.ascontiguousarray(queries)
    with pytest.raises(ValueError, match=r"`out` must not share memory .* with `queries`"):
        grid.count_radius(flat, 0.05, out=flat.reshape(-1).view(np.int64)[:700])


def test_query_knn_refuses_a_wrong_out_naming_it():
    points, queries = _data()
    grid = Grid(points, cell_size=0.06)
    index_dtype = grid.query_knn(queries[:1], 1).indices.dtype
    good_indices, good_distances = np.empty((700, 3), index_dtype), np.empty((700, 3))
    shared = np.empty(700 * 3 * 8, np.uint8)
    cases = [
        (good_indices, TypeError, r"`out` must be a pair \(indices, distances\) of arrays "
                                  r"of shape \(m, k\); got ndarray"),
        ((good_indices,), TypeError, r"`out` must be a pair .*; got tuple of length 1"),
        ((good_indices.astype(np.float64), good_distances), TypeError,
         rf"`out\[0\]` must have dtype {index_dtype}; got float64"),
        ((good_indices, good_distances.astype(np.float32)), TypeError,
         r"`out\[1\]` must have dtype float64; got float32"),
        ((good_indices, np.empty((700, 4))), ValueError,
         r"`out\[1\]` must have shape \(700, 3\); got \(700, 4\)"),
        ((good_indices, np.empty((3, 700)).T), ValueError, r"`out\[1\]` must be C-contiguous"),
        ((shared[:700 * 3 * index_dtype.itemsize].view(index_dtype).reshape(700, 3),
          shared.view(np.float64).reshape(700, 3)), ValueError,
         r"`out\[1\]` must not share memory .* with `out\[0\]`"),
        ((good_indices, queries), ValueError,
         r"`out\[1\]` must not share memory .* with `queries`"),
    ]
    for out, error, message in cases:
        with pytest.raises(error, match=message):
            grid.query_knn(queries, 3, out=out)
    points_out = grid.state.points.T  # (n, 3) float64 view of the grid's points
    with pytest.raises(ValueError, match=r"must be C-contiguous|must not share memory"):
        grid.query_knn(None, 3, out=(np.empty((3000, 3), index_dtype), points_out))


def test_a_refused_out_leaves_the_inputs_and_out_unchanged():
    points, queries = _data()
    grid = Grid(points, cell_size=0.06)
    before = queries.copy()
    out = np.full(700, 3, dtype=np.int32)
    with pytest.raises(TypeError):
        grid.count_radius(queries, 0.05, out=out)
    assert np.array_equal(queries, before) and (out == 3).all()


def test_the_warp_engine_writes_into_out_too():
    pytest.importorskip("warp", reason="the gpu extra")
    points, queries = _data(n=500, m=300)
    cpu = Grid(points, cell_size=0.08)
    grid = Grid(points, cell_size=0.08, device="warp-cpu")
    out = np.empty(300, np.int64)
    assert grid.count_radius(queries, 0.08, out=out) is out
    assert np.array_equal(out, cpu.count_radius(queries, 0.08))
    plain = cpu.query_knn(queries, 6)
    pair = (np.empty_like(plain.indices), np.empty_like(plain.distances))
    found = grid.query_knn(queries, 6, out=pair)
    assert found.indices is pair[0] and found.distances is pair[1]
    assert np.array_equal(pair[0], plain.indices)
    assert np.array_equal(pair[1], plain.distances)
    own = np.empty(500, np.int64)
    assert grid.count_radius(None, 0.08, exclude_self=True, out=own) is own
    assert np.array_equal(own, cpu.count_radius(None, 0.08, exclude_self=True))


def test_a_grid_on_tensors_refuses_out_naming_it():
    torch = pytest.importorskip("torch", reason="the torch extra")
    points, queries = _data(n=500, m=300)
    grid = Grid(torch.from_numpy(points), cell_size=0.08)
    with pytest.raises(TypeError, match=r"`out` takes NumPy arrays.*'torch'"):
        grid.count_radius(queries, 0.08, out=np.empty(300, np.int64))
    with pytest.raises(TypeError, match=r"`out` takes NumPy arrays.*'torch'"):
        grid.query_knn(queries, 4, out=(np.empty((300, 4), np.int32),
                                        np.empty((300, 4))))
    counts = grid.count_radius(torch.from_numpy(queries), 0.08)
    assert isinstance(counts, torch.Tensor)
