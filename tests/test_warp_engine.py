"""The Warp engine (``Grid(..., device="cuda")``), run on Warp's CPU device
(``device="warp-cpu"``): the CPU engine's grid and answers, byte for byte, its errors,
and its quiet start.

tests/test_contract.py runs every promise of the batch grid on it; here, its answers are
compared with the CPU engine's on random coordinates (not lattices), where only the same
arithmetic in the same order gives the same distances, and with the order of unsorted
rows, which the contract leaves to each engine, and which the Warp engine takes from the
CPU engine.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from spatialhash import Grid
from spatialhash.grid import _devices

warp = pytest.importorskip("warp", reason="the gpu extra")

#: The Warp engine on Warp's CPU device.
WARP = "warp-cpu"


def grids(points, cell_size, **kwargs):
    """The same grid on the CPU engine and on the Warp engine."""
    return Grid(points, cell_size, **kwargs), Grid(points, cell_size, device=WARP, **kwargs)


def assert_same_bytes(got, expected, name=""):
    assert got.dtype == expected.dtype and got.shape == expected.shape, name
    assert got.tobytes() == expected.tobytes(), name


def assert_same_answers(cpu, gpu, queries, r, radii):
    """Pairs (sorted), per-point radii pairs (sorted), radius rows sorted and unsorted
    (in the CPU engine's order) and counts: the same bytes on both engines."""
    for kwargs in ({"r": r}, {"radii": radii}):
        a = cpu.query_pairs(return_distances=True, **kwargs)
        b = gpu.query_pairs(return_distances=True, **kwargs)
        assert_same_bytes(b.sorted().indices, a.sorted().indices, f"pairs {list(kwargs)}")
        assert_same_bytes(b.sorted().distances, a.sorted().distances, f"pairs {list(kwargs)}")
        assert_same_bytes(gpu.query_pairs(**kwargs).indices, b.indices, "without distances")
    for sort in (True, False):
        a = cpu.query_radius(queries, r, return_distances=True, sort=sort)
        b = gpu.query_radius(queries, r, return_distances=True, sort=sort)
        for name in ("indptr", "indices", "distances"):
            assert_same_bytes(getattr(b, name), getattr(a, name), f"{name}, sort={sort}")
    assert_same_bytes(gpu.count_radius(queries, r), cpu.count_radius(queries, r), "counts")


def scene(seed, n=1500, n_dims=3, spread=1.0):
    rng = np.random.default_rng(seed)
    points = rng.random((n, n_dims)) * spread
    queries = rng.random((300, n_dims)) * 1.2 * spread - 0.1 * spread
    radii = rng.random(n) * 0.03 * spread
    return points, queries, radii


# ---------------------------------------------------------------------- answers
@pytest.mark.parametrize("n_dims", [1, 2, 3])
@pytest.mark.parametrize("box", [None, 1.0, "partly"])
def test_answers_equal_the_cpu_engine_byte_for_byte(n_dims, box):
    points, queries, radii = scene(n_dims, n_dims=n_dims)
    periodic = None
    if box == "partly":
        box, periodic = 1.0, [True, False, True][:n_dims]
    r = (0.006, 0.03, 0.1)[n_dims - 1]  # about 5 neighbours a point
    cpu, gpu = grids(points, r, box=box, periodic=periodic)
    assert len(cpu.query_pairs(r)) > len(points)
    assert_same_answers(cpu, gpu, queries, r, radii)


@pytest.mark.parametrize("r", [0.0, 0.3, 0.5, 1e300])
def test_answers_equal_the_cpu_engine_for_any_radius(r):
    # Up to blocks larger than the grid (every occupied cell scanned) and, periodic, r
    # at half the period (every axis whole: minimum images per pair).
    points, queries, radii = scene(1, n=300)
    for box in (None, 1.0):
        r_box = r if box is None else min(r, 0.5)
        cpu, gpu = grids(points, 0.05, box=box)
        with np.errstate(over="ignore"):
            assert_same_answers(cpu, gpu, queries, r_box, radii * (1 + 10 * r_box))


def test_answers_equal_the_cpu_engine_on_a_sparse_grid():
    # Far clusters: the CPU engine takes its sparse layout (a hash table of rows).
    points, queries, radii = scene(2, n=600)
    offsets = np.repeat(np.array([[0.0, 0.0, 0.0], [1e6, 0.0, -3e5], [0.0, 2e7, 1e4]]), 200,
                        axis=0)
    cpu, gpu = grids(points + offsets, 0.05)
    assert cpu.state.hash_ids.size > 0
    assert_same_answers(cpu, gpu, queries + offsets[::2], 0.05, radii)


def test_answers_equal_the_cpu_engine_past_2_63_cells():
    # 2**22 cells per axis: a box of 2**66 cells, whose linear index overflows int64, so
    # the Warp build sorts by one axis at a time.
    rng = np.random.default_rng(3)
    points = rng.integers(0, 2**22, size=(500, 3)).astype(np.float64)
    points[::2] = points[1::2] + rng.random((250, 3))  # pairs within reach
    cpu, gpu = grids(points, 1.0)
    assert float(np.prod(cpu.state.n_cells.astype(float))) > 2.0**63
    assert_same_answers(cpu, gpu, points[::5] + 0.25, 1.0, np.full(500, 0.5))


def test_brute_force_equals_the_cpu_engine():
    points, queries, radii = scene(4, n=30)
    for box in (None, 1.0):
        cpu, gpu = grids(points, 0.2, box=box)
        assert cpu.algorithm == gpu.algorithm == "brute"
        assert_same_answers(cpu, gpu, queries, 0.2, radii)


def test_own_points_without_self_equal_the_cpu_engine():
    points, _, _ = scene(5, n=400)
    cpu, gpu = grids(points, 0.05, box=1.0)
    a = cpu.query_radius(None, 0.05, return_distances=True, exclude_self=True)
    b = gpu.query_radius(None, 0.05, return_distances=True, exclude_self=True)
    for name in ("indptr", "indices", "distances"):
        assert_same_bytes(getattr(b, name), getattr(a, name), name)
    assert_same_bytes(gpu.count_radius(None, 0.05, exclude_self=True),
                      cpu.count_radius(None, 0.05, exclude_self=True))


def chunks(grid, chunk_size, **kwargs):
    return list(grid.iter_pairs(chunk_size=chunk_size, return_distances=True, **kwargs))


@pytest.mark.parametrize("n_dims", [1, 2, 3])
@pytest.mark.parametrize("chunk_size", [1, 40, 1 << 22])
def test_chunks_of_pairs_hold_the_cpu_engines_pairs_chunk_for_chunk(n_dims, chunk_size):
    # Open: a cell's pairs are its points' pairs with the points after them, on both
    # engines (the CPU engine's half stencil reaches the cells after it in id order), so
    # each chunk holds the same pairs, in an order of each engine's own.
    points, _, radii = scene(8, n=1200, n_dims=n_dims)
    r = (0.006, 0.03, 0.1)[n_dims - 1]
    cpu, gpu = grids(points, r)
    for kwargs in ({"r": r}, {"radii": radii}):
        expected, got = chunks(cpu, chunk_size, **kwargs), chunks(gpu, chunk_size, **kwargs)
        assert len(got) == len(expected) and len(expected) > (chunk_size == 1)
        for a, b in zip(expected, got, strict=True):
            assert_same_bytes(b.sorted().indices, a.sorted().indices, f"{kwargs.keys()}")
            assert_same_bytes(b.sorted().distances, a.sorted().distances, f"{kwargs.keys()}")


@pytest.mark.parametrize("box", [1.0, "partly"])
def test_chunks_of_periodic_pairs_are_cells_of_query_pairs(box):
    # Periodic: the CPU engine's half stencil wraps round, so a cell's pairs may differ;
    # the chunks hold each cell's rows of `query_pairs`, in its order.
    points, _, radii = scene(9, n=1500, n_dims=3)
    periodic = [True, False, True] if box == "partly" else None
    cpu, gpu = grids(points, 0.1, box=1.0, periodic=periodic)
    cell_start = gpu.state.cell_start
    for kwargs in ({"r": 0.1}, {"radii": radii}):
        whole = gpu.query_pairs(return_distances=True, **kwargs)
        got = chunks(gpu, 25, **kwargs)
        assert_same_bytes(np.concatenate([chunk.indices for chunk in got]), whole.indices)
        assert_same_bytes(np.concatenate([chunk.distances for chunk in got]),
                          whole.distances)
        assert_same_bytes(whole.sorted().distances,
                          cpu.query_pairs(return_distances=True, **kwargs).sorted().distances)
        # Each chunk ends where a cell's points end, and holds at most 25 pairs or one
        # cell's pairs: the first point of its pairs in the sorted order (`order`).
        position = np.empty(len(points), dtype=np.int64)
        position[gpu.state.order] = np.arange(len(points))
        cells = [np.searchsorted(cell_start, position[chunk.indices].min(axis=1),
                                 side="right") - 1 for chunk in got]
        for chunk, chunk_cells in zip(got, cells, strict=True):
            assert len(chunk) <= 25 or chunk_cells.min() == chunk_cells.max()
        ends = [chunk_cells.max() for chunk_cells in cells if chunk_cells.size]
        starts = [chunk_cells.min() for chunk_cells in cells if chunk_cells.size]
        assert all(end < start for end, start in zip(ends, starts[1:], strict=False))


def test_chunks_of_an_empty_grid_and_of_no_pairs():
    for points in (np.empty((0, 3)), np.array([[0.0, 0.0], [5.0, 5.0]])):
        cpu, gpu = grids(points, 1.0)
        got, expected = chunks(gpu, 3, r=1.0), chunks(cpu, 3, r=1.0)
        assert [len(chunk) for chunk in got] == [len(chunk) for chunk in expected] == [0]
        assert got[0].indices.shape == (0, 2) and got[0].shape == expected[0].shape


# ---------------------------------------------------------------------- the build
@pytest.mark.parametrize("box", [None, 1.0])
def test_build_sorts_the_points_as_the_cpu_engine(box):
    points, _, _ = scene(6, n=2000)
    points[::3] = points[1::3]  # duplicates: a cell's points keep their index order
    cpu, gpu = grids(points, 0.05, box=box)
    built = gpu._engine._device_build
    assert_same_bytes(built.order.numpy(), cpu.state.order, "order")
    assert_same_bytes(built.grid.points.numpy().T.copy(), cpu.state.points, "points")
    assert_same_bytes(built.grid.cell_start.numpy(), cpu.state.cell_start, "cell_start")
    assert_same_bytes(built.grid.cell_coords.numpy(), cpu.state.cell_coords, "cell_coords")
    assert gpu.n_occupied_cells == cpu.n_occupied_cells
    for field, expected in cpu.state._asdict().items():
        assert_same_bytes(getattr(gpu.state, field), expected, field)


def test_results_own_their_memory():
    points, queries, _ = scene(7, n=200)
    gpu = Grid(points, 0.1, device=WARP)
    pairs = gpu.query_pairs(0.1, return_distances=True)
    near = gpu.query_radius(queries, 0.1, return_distances=True)
    arrays = [pairs.indices, pairs.distances, near.indptr, near.indices, near.distances,
              gpu.count_radius(queries, 0.1)]
    for array in arrays:
        while isinstance(array.base, np.ndarray):
            array = array.base
        assert array.base is None  # NumPy's memory, not a view of a Warp array's


def lattice_scene(seed, n=800, n_dims=3, steps=16):
    """Points, and boxes or queries, on a lattice of ``1 / steps``: many points at equal
    distances, on box faces and on cell faces."""
    rng = np.random.default_rng(seed)
    points = rng.integers(0, steps, size=(n, n_dims)) / steps
    lower = rng.integers(-2, steps, size=(200, n_dims)) / steps
    upper = lower + rng.integers(0, steps // 2, size=(200, n_dims)) / steps
    return points, lower, upper


@pytest.mark.parametrize("n_dims", [1, 2, 3])
@pytest.mark.parametrize("box", [None, 1.0, "partly"])
@pytest.mark.parametrize("cell_size", [0.05, 0.3, 2.0])
def test_boxes_equal_the_cpu_engine_row_for_row(n_dims, box, cell_size):
    # Unsorted rows too, in the CPU engine's order; boxes across the periodic boundary,
    # wider than the period, and blocks of more cells than are occupied (cell 0.05).
    points, lower, upper = lattice_scene(n_dims + 10, n_dims=n_dims)
    periodic = None
    if box == "partly":
        box, periodic = 1.0, [True, False, True][:n_dims]
    upper[::7] += 3.0
    cpu, gpu = grids(points, cell_size, box=box, periodic=periodic)
    for sort in (True, False):
        a, b = cpu.query_box(lower, upper, sort=sort), gpu.query_box(lower, upper, sort=sort)
        assert b.distances is None and a.indices.size > len(lower)
        for name in ("indptr", "indices"):
            assert_same_bytes(getattr(b, name), getattr(a, name), f"{name}, sort={sort}")


def assert_same_knn(cpu, gpu, queries, k, r_max=None, name=""):
    """The arrays of `query_knn`: the same bytes on both engines."""
    a, b = cpu.query_knn(queries, k, r_max=r_max), gpu.query_knn(queries, k, r_max=r_max)
    for field in ("indices", "distances", "counts"):
        assert_same_bytes(getattr(b, field), getattr(a, field), f"{field}, {name} k={k}")
    return a


@pytest.mark.parametrize("n_dims", [1, 2, 3])
@pytest.mark.parametrize("box", [None, 1.0, "partly"])
@pytest.mark.parametrize("cell_size", [0.05, 0.3, 2.0])
def test_knn_equals_the_cpu_engine_with_ties(n_dims, box, cell_size):
    # Points on a lattice: many at one distance, decided by index. Queries outside the
    # cells (open axes), k past 64 and past the point count, r_max on lattice distances.
    points, lower, _ = lattice_scene(n_dims + 20, n=300, n_dims=n_dims, steps=8)
    periodic = None
    if box == "partly":
        box, periodic = 1.0, [True, False, True][:n_dims]
    queries = lower * 1.5
    cpu, gpu = grids(points, cell_size, box=box, periodic=periodic)
    for k in (1, 6, 65, 299, 400):
        nearest = assert_same_knn(cpu, gpu, queries, k, name="no r_max")
        assert k < 300 or (nearest.counts == 300).all()
    for r_max in (0.0, 0.125, 0.25, np.inf):
        nearest = assert_same_knn(cpu, gpu, queries, 70, r_max, name=f"r_max={r_max}")
        assert r_max > 0.0 or nearest.counts.min() < 70


def test_knn_equals_the_cpu_engine_on_random_and_sparse_grids():
    # Random coordinates (distances equal only by the same arithmetic), and far clusters
    # with queries between them (rings of more cells than are occupied).
    points, queries, _ = scene(6, n=600)
    cpu, gpu = grids(points, 0.05, box=1.0)
    assert_same_knn(cpu, gpu, np.mod(queries, 1.0), 9)
    offsets = np.repeat(np.array([[0.0, 0.0, 0.0], [1e6, 0.0, -3e5], [0.0, 2e7, 1e4]]), 200,
                        axis=0)
    cpu, gpu = grids(points + offsets, 0.05)
    far = np.concatenate([queries + offsets[::2], [[5e5, 1e7, 0.0], [-1e8, 0.0, 0.0]]])
    for k in (1, 9, 250):
        assert_same_knn(cpu, gpu, far, k)
    assert_same_knn(cpu, gpu, far, 9, r_max=0.2)


def test_knn_of_brute_force_and_own_points_equal_the_cpu_engine():
    points, queries, _ = scene(7, n=30)
    for box in (None, 1.0):
        cpu, gpu = grids(points, 0.2, box=box)
        assert cpu.algorithm == gpu.algorithm == "brute"
        assert_same_knn(cpu, gpu, np.mod(queries, 1.0), 12)
    points, _, _ = lattice_scene(9, n=400, steps=8)
    cpu, gpu = grids(points, 0.2, box=1.0)
    for k in (1, 5, 500):
        a = cpu.query_knn(None, k, exclude_self=True)
        b = gpu.query_knn(None, k, exclude_self=True)
        for field in ("indices", "distances", "counts"):
            assert_same_bytes(getattr(b, field), getattr(a, field), f"{field}, k={k}")


def test_no_queries_and_no_hits_equal_the_cpu_engine():
    points, lower, upper = lattice_scene(11, n=50)
    cpu, gpu = grids(points, 0.25)
    assert_same_knn(cpu, gpu, np.empty((0, 3)), 3)
    assert_same_knn(cpu, gpu, lower + 10.0, 3, r_max=1.0)
    for first, last in ((lower[:0], upper[:0]), (lower + 10.0, upper + 10.0)):
        a, b = cpu.query_box(first, last), gpu.query_box(first, last)
        assert_same_bytes(b.indptr, a.indptr) and assert_same_bytes(b.indices, a.indices)


@pytest.mark.slow
def test_int64_indices_equal_the_cpu_engine(monkeypatch):
    # Grids of 2**31 - 1 points or more index in int64: the kernels' other overload,
    # compiled at its first use. Forced here on a small grid, on both engines (slow: the
    # first run compiles both engines' int64 kernels).
    from spatialhash.grid import _build

    monkeypatch.setattr(_build, "index_dtype", lambda n: np.dtype(np.int64))
    points, lower, upper = lattice_scene(12, n=300, steps=8)
    cpu, gpu = grids(points, 0.2, box=1.0)
    assert gpu.query_knn(points, 2).indices.dtype == np.int64
    assert_same_knn(cpu, gpu, lower, 70, name="int64")
    for sort in (True, False):
        a, b = cpu.query_box(lower, upper, sort=sort), gpu.query_box(lower, upper, sort=sort)
        assert_same_bytes(b.indices, a.indices, f"int64 box, sort={sort}")


@pytest.mark.parametrize(("call", "error"), [
    (lambda grid: grid.query_knn(np.zeros((2, 3)), 0), ValueError),
    (lambda grid: grid.query_knn(np.zeros((2, 3)), 2.5), TypeError),
    (lambda grid: grid.query_knn(np.zeros((2, 3)), 2, r_max=-1.0), ValueError),
    (lambda grid: grid.query_knn(np.zeros((2, 2)), 2), ValueError),
    (lambda grid: grid.query_knn(np.zeros((2, 3)), 2, exclude_self=True), TypeError),
    (lambda grid: grid.query_knn(None, 10**12), ValueError),
    (lambda grid: grid.query_box(np.ones(3), np.zeros(3)), ValueError),
    (lambda grid: grid.query_box(np.zeros((2, 3)), np.ones((3, 3))), ValueError),
])
def test_bad_knn_and_box_input_raise_as_on_the_cpu_engine(call, error):
    points, _, _ = lattice_scene(13, n=20)
    cpu, gpu = grids(points, 0.25)
    with pytest.raises(error) as expected:
        call(cpu)
    with pytest.raises(error, match=f"^{re.escape(str(expected.value))}$"):
        call(gpu)


def test_device_is_kept_and_shown():
    grid = Grid(np.zeros((3, 2)), 1.0, device=WARP)
    assert grid.device == WARP and Grid(np.zeros((3, 2)), 1.0).device == "cpu"
    assert "device='warp-cpu'" in repr(grid) and "device" not in repr(Grid(np.zeros((3, 2))))


def test_kernels_compile_without_fused_multiply_add():
    from spatialhash.grid._warp_kernels import build, knn, ray, scan

    for module in (build, scan, knn, ray):
        assert warp.get_module_options(module)["fuse_fp"] is False, module.__name__


def sorted_rows(pairs):
    """Each pair as (min, max), the rows in lexicographic order."""
    rows = np.sort(pairs, axis=1)
    return rows[np.lexsort((rows[:, 1], rows[:, 0]))]


@pytest.mark.parametrize("box", [None, 1.0])
@pytest.mark.parametrize("per_point", [False, True])
def test_found_pairs_are_the_cpu_engines_pairs_in_its_point_order(box, per_point):
    points, _, radii = scene(15, n=1200)
    cpu, gpu = grids(points, 0.05, box=box)
    search = {"radii": radii} if per_point else {"r": 0.05}
    a, b = cpu._found_pairs(**search), gpu._found_pairs(**search)
    # The same points at the same positions (wrapped into the box), and their indices.
    assert_same_bytes(b.order, a.order, "order")
    assert_same_bytes(b.points, a.points, "points")
    assert b.points.flags.c_contiguous and b.points.flags.writeable and b.slabs is None
    # Each pair once, (s, t) with s < t, grouped by s in increasing order.
    s, t = b.pairs[:, 0], b.pairs[:, 1]
    assert np.all(s < t) and np.all(np.diff(s) >= 0)
    assert_same_bytes(sorted_rows(b.pairs), sorted_rows(a.pairs), "pairs")
    # In the caller's indices: the pairs of query_pairs.
    caller = np.sort(b.order[b.pairs], axis=1)
    expected = cpu.query_pairs(**search).sorted().indices
    assert_same_bytes(np.unique(caller, axis=0), expected, "caller's pairs")


# ---------------------------------------------------------------------- memory
def test_an_array_the_device_cannot_hold_is_one_error_naming_its_size():
    from spatialhash.grid._warp_memory import DeviceMemoryError, device_empty

    # 2**40 int64: 8 TiB, more than the host holds (each dimension within Warp's limit).
    with pytest.raises(DeviceMemoryError, match=(
            r"^the rows of a test: out of memory on device 'cpu', asking for "
            r"8,796,093,022,208 bytes \(an array of shape \(1073741824, 1024\) and dtype "
            r"int64\); ask for fewer rows at a time")) as error:
        device_empty((2**30, 2**10), warp.int64, "cpu", "the rows of a test")
    assert isinstance(error.value, MemoryError)
    assert error.value.shape == (2**30, 2**10) and error.value.dtype == np.int64
    assert error.value.n_bytes == 2**43 and error.value.device == "cpu"


def test_rows_past_a_warp_dimension_are_one_error_naming_the_query(monkeypatch):
    from spatialhash.grid import _warp_memory

    points, queries, _ = scene(14, n=200)
    grid = Grid(points, 0.2, device=WARP)
    n_pairs = len(grid.query_pairs(0.2))
    n_rows = grid.count_radius(queries, 0.2).sum()
    # The limit lowered below these answers, which then take the path of a longer one.
    monkeypatch.setattr(_warp_memory, "MAX_DIMENSION", min(n_pairs, n_rows) - 1)
    with pytest.raises(MemoryError, match=(
            rf"^the {n_pairs:,} rows of query_pairs: an array of shape \({n_pairs}, 2\) on "
            rf"device 'cpu' is longer than a Warp array can be")):
        grid.query_pairs(0.2)
    with pytest.raises(MemoryError, match=rf"^the {n_rows:,} rows of query_radius: "):
        grid.query_radius(queries, 0.2)
    with pytest.raises(MemoryError, match=r"^the [0-9,]+ rows of iter_pairs: "):
        list(grid.iter_pairs(0.2, chunk_size=10**6))
    with pytest.raises(MemoryError, match=r"^query_knn's results of shape \(2, 1000\) "):
        monkeypatch.setattr(_warp_memory, "MAX_DIMENSION", 999)
        grid.query_knn(queries[:2], 1000)
    monkeypatch.setattr(_warp_memory, "MAX_DIMENSION", 199)
    with pytest.raises(MemoryError, match=r"^the build of 200 points: an array of shape "):
        Grid(points, 0.2, device=WARP)


# ---------------------------------------------------------------------- devices
@pytest.mark.parametrize(("facts", "device", "missing"), [
    ((None, 0), "cuda", r"a CUDA driver, and Warp could not load or start one \(libcuda\)"),
    (((12, 4), 0), "cuda:0", r"a CUDA GPU, and Warp found none \(CUDA driver 12\.4\)"),
])
def test_cuda_without_a_driver_or_a_gpu_raises_naming_it(monkeypatch, facts, device, missing):
    monkeypatch.setattr(_devices, "cuda_facts", lambda _: facts)
    monkeypatch.setattr(_devices, "_LOADED", set())
    with pytest.raises(RuntimeError, match=(
            rf"^`device` is '{device}', which needs {missing}\. Use device='cpu' for the CPU "
            r"engine, or device='warp-cpu' to run the Warp engine's kernels on the CPU\.$")):
        Grid(np.zeros((3, 3)), 1.0, device=device)


def test_cuda_index_beyond_the_gpus_raises_naming_them(monkeypatch):
    monkeypatch.setattr(_devices, "cuda_facts", lambda _: ((12, 4), 2))
    monkeypatch.setattr(_devices, "_LOADED", set())
    with pytest.raises(RuntimeError, match=(
            r"^`device` is 'cuda:2', which needs GPU 2, and Warp found 2 GPU\(s\): cuda:0, "
            r"cuda:1\. Name one of those\.$")):
        Grid(np.zeros((3, 3)), 1.0, device="cuda:2")


def test_cuda_on_this_machine_runs_or_names_what_is_missing():
    driver, n_gpus = _devices.cuda_facts(warp)
    points, queries, radii = scene(8, n=300)
    if driver is not None and n_gpus > 0:
        assert_same_answers(Grid(points, 0.05), Grid(points, 0.05, device="cuda"), queries,
                            0.05, radii)
    else:
        with pytest.raises(RuntimeError, match=r"^`device` is 'cuda', which needs a CUDA "):
            Grid(points, 0.05, device="cuda")


@pytest.mark.slow
@pytest.mark.skipif(platform.system() not in ("Linux", "Windows"),
                    reason="Warp's CUDA compiler (NVRTC) ships in its Linux and Windows wheels")
def test_cuda_code_has_no_fused_multiply_add():
    # Compiled offline for sm_90 by NVRTC, no GPU needed: every float64 add, subtract and
    # multiply rounds on its own (``.rn``, which ptxas may not contract either), and no
    # fma is left, so squared distances round as on the CPU.
    from spatialhash.grid._warp_kernels import arguments, knn, ray, scan

    for module in (scan, knn, ray, arguments):
        (path,) = warp.compile_aot_module(module, arch=90, use_ptx=True)
        ptx = Path(path).read_text()
        assert re.search(r"\.entry", ptx) and re.search(r"\bsqrt\.rn\.f64", ptx)
        assert not re.search(r"\bfma\.\w+\.f64", ptx), module.__name__
        for op in ("add", "sub", "mul"):
            assert re.search(rf"\b{op}\.rn\.f64", ptx), (module.__name__, op)
            assert not re.search(rf"\b{op}\.f64", ptx), (module.__name__, op)


@pytest.mark.slow
def test_a_fresh_process_prints_nothing():
    # Warp's banner, its lines about compiled modules and its native warning about a
    # missing CUDA driver stay out of the user's output.
    code = ("import numpy as np; from spatialhash import Grid; "
            "g = Grid(np.random.default_rng(0).random((50, 3)), 0.2, device='warp-cpu'); "
            "assert len(g.query_pairs(0.2)) > 0")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""
