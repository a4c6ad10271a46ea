"""Ray casts on the Warp engine (``Grid(..., device="warp-cpu")``): the CPU engine's first
hits and rows, byte for byte, on random coordinates and directions (where only the same
arithmetic in the same order gives the same distances), walking the cells and testing
every sphere; and the brute-force oracle of ``ray_oracles.py`` on dyadic scenes.

tests/test_contract.py runs the ray promises on the Warp engine too; here are the cases
of tests/test_rays.py that stress the walk (far origins, sparse grids, huge spheres,
long rows, ties). With ``SPATIALHASH_TEST_CUDA=1`` (`benchmarks/gpu_check.py`) the
comparisons with the CPU engine run on a CUDA GPU too (``DEVICES``).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import ray_oracles
from spatialhash import Grid, Neighbors, RayHits
from spatialhash._validation import as_rays
from spatialhash.grid._kernels import ray as ray_kernels

warp = pytest.importorskip("warp", reason="the gpu extra")

#: The Warp engine on Warp's CPU device.
WARP = "warp-cpu"
#: Where the comparisons with the CPU engine run: Warp's CPU device, and a CUDA GPU with
#: ``SPATIALHASH_TEST_CUDA=1``.
DEVICES = [WARP] + (["cuda"] if os.environ.get("SPATIALHASH_TEST_CUDA") == "1" else [])


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


def assert_same_bytes(got, expected, name=""):
    assert got.dtype == expected.dtype and got.shape == expected.shape, name
    assert got.tobytes() == expected.tobytes(), name


def assert_same_rays(device, points, cell_size, radii, origins, directions,
                     max_distance=None, costs=(np.inf, 0.0, None), **kwargs):
    """First hits and every hit of the Warp engine equal the CPU engine's, byte for byte,
    with every ray walking the cells (cost ``inf``), testing every sphere (0) and as each
    ray chooses by default (None); returns the CPU engine's answers."""
    cpu = Grid(points, cell_size, **kwargs)
    gpu = Grid(points, cell_size, device=device, **kwargs)
    saved = ray_kernels.WALK_COST_PER_POINT
    for cost in costs:
        ray_kernels.WALK_COST_PER_POINT = saved if cost is None else cost
        try:
            answers = [(grid.query_ray(origins, directions, radii, max_distance=max_distance),
                        grid.query_ray(origins, directions, radii, max_distance=max_distance,
                                       all_hits=True)) for grid in (cpu, gpu)]
        finally:
            ray_kernels.WALK_COST_PER_POINT = saved
        (first, every), (got_first, got_every) = answers
        assert isinstance(got_first, RayHits) and isinstance(got_every, Neighbors)
        for name in ("indices", "distances"):
            assert_same_bytes(getattr(got_first, name), getattr(first, name), f"{name} {cost}")
        for name in ("indptr", "indices", "distances"):
            assert_same_bytes(getattr(got_every, name), getattr(every, name), f"{name} {cost}")
        assert got_every.n_points == every.n_points
    return first, every


def random_scene(seed, n=2000, n_dims=3, m=300, largest=0.05):
    rng = np.random.default_rng(seed)
    points = rng.random((n, n_dims))
    radii = rng.random(n) * largest
    origins = rng.random((m, n_dims)) * 1.6 - 0.3
    directions = rng.normal(size=(m, n_dims))
    return points, radii, origins, directions


@pytest.mark.parametrize("n_dims", [1, 2, 3])
@pytest.mark.parametrize("cell_size", [0.02, 0.1, 0.7])
def test_rays_equal_the_cpu_engine_byte_for_byte(device, n_dims, cell_size):
    points, radii, origins, directions = random_scene(n_dims, n_dims=n_dims)
    for max_distance in (None, 0.4, np.random.default_rng(0).random(300)):
        first, every = assert_same_rays(device, points, cell_size, radii, origins, directions,
                                        max_distance)
    assert (first.indices >= 0).sum() > 30 and len(every.indices) > 100


def test_rays_of_brute_force_and_of_one_radius_equal_the_cpu_engine(device):
    points, radii, origins, directions = random_scene(4, n=200, m=50)
    assert Grid(points, 0.1, device=WARP, algorithm="brute").algorithm == "brute"
    assert_same_rays(device, points, 0.1, radii, origins, directions, algorithm="brute")
    assert_same_rays(device, points, 0.1, 0.04, origins, directions)


def test_rays_match_the_oracle_on_a_lattice():
    # Exact (dyadic) distances: ties, tangent rays, hits at exactly max_distance.
    rng = np.random.default_rng(5)
    points = rng.integers(0, 24, size=(400, 3)) * 0.25
    radii = rng.integers(0, 4, size=400) * 0.125
    origins = rng.integers(-4, 28, size=(80, 3)) * 0.25
    directions = rng.integers(-2, 3, size=(80, 3)).astype(np.float64)
    directions[~directions.any(axis=1), 2] = 1.0
    grid = Grid(points, 0.5, device=WARP)
    origins3, units3 = as_rays(origins, directions, 3)
    for max_distance in (np.inf, 2.5):
        times = ray_oracles.ray_sphere_times(origins3, units3, points, radii, max_distance)
        (indices, distances), (indptr, all_indices, all_distances) = (
            ray_oracles.first_hits(times), ray_oracles.all_hits(times))
        first = grid.query_ray(origins, directions, radii, max_distance=max_distance)
        every = grid.query_ray(origins, directions, radii, max_distance=max_distance,
                               all_hits=True)
        np.testing.assert_array_equal(first.indices, indices)
        np.testing.assert_array_equal(first.distances, distances)
        np.testing.assert_array_equal(every.indptr, indptr)
        np.testing.assert_array_equal(every.indices, all_indices)
        np.testing.assert_array_equal(every.distances, all_distances)
        assert len(all_indices) > 20


def test_rays_from_far_outside_and_through_a_sparse_grid(device):
    points, radii, _, _ = random_scene(6, n=300)
    points = points + np.repeat(np.array([[0.0, 0.0, 0.0], [1e9, 0.0, 0.0], [2e9, 5.0, 0.0]]),
                                100, axis=0)
    origins = np.array([[-1e6, 0.5, 0.5], [1e12, 1e12, 1e12], [0.5, 1.0, -1e100],
                        [3e9, 0.5, 0.5], [1e9 + 0.5, 40.0, 0.5]])
    directions = np.array([[1.0, 0.0, 0.0], [-1.0, -1.0, -1.0], [0.0, 0.0, 1.0],
                           [-1.0, 1e-10, 0.0], [0.0, -1.0, 0.0]])
    assert Grid(points, 0.05).state.dense_lookup.shape[0] == 0
    # Walking 1e9 cells would take long: every sphere, and each ray's own choice.
    first, _ = assert_same_rays(device, points, 0.05, radii * 4, origins, directions,
                                costs=(0.0, None))
    assert (first.indices >= 0).sum() >= 3


def test_rays_with_spheres_wider_than_the_grid_and_long_rows(device):
    points, radii, origins, directions = random_scene(7, n=300, m=40)
    assert_same_rays(device, points, 0.05, radii * 40, origins, directions)
    # 300 hits in a row, many at distance 0, sorted by distance, then index.
    _, every = assert_same_rays(device, points, 0.2, 3.0, origins, directions)
    assert every.counts.min() == 300


def test_rays_that_tie_and_graze(device):
    points = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [2.0, 0.5], [3.0, 0.0]])
    first, every = assert_same_rays(device, points, 1.0, np.array([0.5, 0.5, 0.5, 0.5, 0.0]),
                                    np.array([[0.0, 0.0], [0.0, 1.0]]),
                                    np.array([[1.0, 0.0], [1.0, 0.0]]))
    assert first.indices.tolist() == [0, 3] and every.row(0).tolist() == [0, 1, 2, 3, 4]


def test_no_points_and_no_rays_equal_the_cpu_engine(device):
    assert_same_rays(device, np.empty((0, 3)), 1.0, 1.0, np.zeros((2, 3)), np.ones((2, 3)))
    points, radii, origins, directions = random_scene(8, n=50)
    assert_same_rays(device, points, 0.1, radii, origins[:0], directions[:0])


def test_ray_results_own_their_memory():
    points, radii, origins, directions = random_scene(9, n=200, m=20)
    grid = Grid(points, 0.1, device=WARP)
    first = grid.query_ray(origins, directions, radii)
    every = grid.query_ray(origins, directions, radii, all_hits=True)
    for array in (first.indices, first.distances, every.indptr, every.indices,
                  every.distances):
        while isinstance(array.base, np.ndarray):
            array = array.base
        assert array.base is None  # NumPy's memory, not a view of a Warp array's


def test_periodic_grids_refuse_rays_as_on_the_cpu_engine():
    grid = Grid(np.zeros((3, 2)), 1.0, box=[4.0, 4.0], device=WARP)
    with pytest.raises(ValueError, match=r"`box` must be None for ray casts"):
        grid.query_ray(np.zeros((1, 2)), np.ones((1, 2)), 0.5)


@pytest.mark.slow
def test_int64_ray_indices_equal_the_cpu_engine(device, monkeypatch):
    # The ray kernel's int64 overload (grids of 2**31 - 1 points or more), forced on a
    # small grid on both engines (slow: the first run compiles it).
    from spatialhash.grid import _build

    monkeypatch.setattr(_build, "index_dtype", lambda n: np.dtype(np.int64))
    points, radii, origins, directions = random_scene(11, n=300, m=60)
    first, every = assert_same_rays(device, points, 0.1, radii * 4, origins, directions,
                                    costs=(None,))
    assert first.indices.dtype == every.indices.dtype == np.int64
