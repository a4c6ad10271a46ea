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


def test_device_is_kept_and_shown():
    grid = Grid(np.zeros((3, 2)), 1.0, device=WARP)
    assert grid.device == WARP and Grid(np.zeros((3, 2)), 1.0).device == "cpu"
    assert "device='warp-cpu'" in repr(grid) and "device" not in repr(Grid(np.zeros((3, 2))))


def test_kernels_compile_without_fused_multiply_add():
    from spatialhash.grid._warp_kernels import build, scan

    for module in (build, scan):
        assert warp.get_module_options(module)["fuse_fp"] is False, module.__name__


# ---------------------------------------------------------------------- not yet
def not_yet_calls(grid, points):
    from numba import njit

    @njit
    def nothing(*args):
        return None

    return {
        "query_knn": lambda: grid.query_knn(points, 2),
        "query_ray": lambda: grid.query_ray(points, points + 1.0, 0.1),
        "iter_pairs": lambda: grid.iter_pairs(0.5),
        "for_each_pair": lambda: grid.for_each_pair(0.5, nothing),
        "for_each_neighbor": lambda: grid.for_each_neighbor(points, 0.5, nothing),
        "found_pairs": lambda: grid._found_pairs(0.5),
    }


@pytest.mark.parametrize("method", ["query_knn", "query_ray", "iter_pairs",
                                    "for_each_pair", "for_each_neighbor", "found_pairs"])
def test_calls_not_on_the_warp_engine_yet_raise_naming_themselves(method):
    points = np.array([[0.0, 0.0], [0.25, 0.0], [1.0, 1.0]])
    grid = Grid(points, 0.5, device=WARP)
    with pytest.raises(NotImplementedError,
                       match=rf"^`{method}` is not available on the Warp engine yet "
                             r"\(device='warp-cpu'\); build the grid with device='cpu' for "
                             r"it\.$"):
        not_yet_calls(grid, points)[method]()


def test_own_points_knn_is_not_on_the_warp_engine_yet():
    grid = Grid(np.zeros((3, 2)), 0.5, device=WARP)
    with pytest.raises(NotImplementedError, match=r"^`query_knn` is not available"):
        grid.query_knn(None, 1, exclude_self=True)


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
    from spatialhash.grid._warp_kernels import scan

    (path,) = warp.compile_aot_module(scan, arch=90, use_ptx=True)
    ptx = Path(path).read_text()
    assert re.search(r"\.entry", ptx) and re.search(r"\bsqrt\.rn\.f64", ptx)
    assert not re.search(r"\bfma\.\w+\.f64", ptx)
    for op in ("add", "sub", "mul"):
        assert re.search(rf"\b{op}\.rn\.f64", ptx), op
        assert not re.search(rf"\b{op}\.f64", ptx), op


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
