"""`Grid.for_each_pair`, `Grid.for_each_neighbor` and `Grid.query_ray` with ``fn`` on the
Warp engine (``device="warp-cpu"``), ``fn`` a Warp function: the CPU engine's calls with a
numba function of the same body.

The calls are recorded, each into its own slot of an array (a counter taken by an atomic
add), and compared with the CPU engine's as sets of rows ``(i, j, d2, dx, dy, dz)``: the
same pairs with the same bits, open, periodic and partly periodic boxes, one distance or
one radius per point, both orders or ``once``. `for_each_neighbor`'s calls of each query
are its row of `query_radius` in order, so float sums per query equal the CPU engine's
bit for bit; `for_each_pair`'s calls of a row come in another order than on the CPU
engine, so its float sums agree to rounding (exactly on lattice coordinates), its integer
counts exactly. With ``once``, a pair is called from its point first in the grid's order.
`query_ray` with ``fn`` chooses the CPU engine's hits after the same number of calls a
ray. Then the errors naming ``fn`` and its arguments, and the compiled code (no fused
multiply-add). With ``SPATIALHASH_TEST_CUDA=1``
(`benchmarks/gpu_check.py`) the comparisons run on a CUDA GPU too (``DEVICES``).
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from spatialhash import Grid

wp = pytest.importorskip("warp", reason="the gpu extra")

#: Where the comparisons run: Warp's CPU device, and a CUDA GPU with
#: ``SPATIALHASH_TEST_CUDA=1``.
DEVICES = ["warp-cpu"] + (["cuda"] if os.environ.get("SPATIALHASH_TEST_CUDA") == "1" else [])


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


def on(device: str) -> str:
    """Warp's name of a grid's device."""
    return "cpu" if device == "warp-cpu" else device


# ---------------------------------------------------------------------- functions
@wp.func
def record(i: wp.int64, j: wp.int64, d2: wp.float64, dx: wp.float64, dy: wp.float64,
           dz: wp.float64, calls: wp.array2d(dtype=wp.float64),
           n_calls: wp.array(dtype=wp.int64)):
    """The call in a slot of its own of ``calls`` (counted past its end, not written)."""
    k = wp.atomic_add(n_calls, 0, wp.int64(1))
    if k >= wp.int64(calls.shape[0]):
        return
    calls[k, 0] = wp.float64(i)
    calls[k, 1] = wp.float64(j)
    calls[k, 2] = d2
    calls[k, 3] = dx
    calls[k, 4] = dy
    calls[k, 5] = dz


@njit
def record_cpu(i, j, d2, dx, dy, dz, calls, n_calls):
    k = n_calls[0]
    n_calls[0] = k + 1
    if k >= calls.shape[0]:
        return
    calls[k, 0] = i
    calls[k, 1] = j
    calls[k, 2] = d2
    calls[k, 3] = dx
    calls[k, 4] = dy
    calls[k, 5] = dz


@wp.func
def accumulate(i: wp.int64, j: wp.int64, d2: wp.float64, dx: wp.float64, dy: wp.float64,
               dz: wp.float64, counts: wp.array(dtype=wp.int64),
               sums: wp.array2d(dtype=wp.float64), scale: wp.float64):
    """Row ``i``'s count and its sums of ``scale * d2``, ``dx``, ``dy``, ``dz``."""
    counts[i] += wp.int64(1)
    sums[i, 0] += scale * d2
    sums[i, 1] += dx
    sums[i, 2] += dy
    sums[i, 3] += dz


@njit
def accumulate_cpu(i, j, d2, dx, dy, dz, counts, sums, scale):
    counts[i] += 1
    sums[i, 0] += scale * d2
    sums[i, 1] += dx
    sums[i, 2] += dy
    sums[i, 3] += dz


@wp.func
def count_both(i: wp.int64, j: wp.int64, d2: wp.float64, dx: wp.float64, dy: wp.float64,
               dz: wp.float64, counts: wp.array(dtype=wp.int64), step: wp.int64):
    """``step`` into rows ``i`` and ``j`` (with ``once``: row ``j`` from other threads,
    by Warp's atomic ``+=``)."""
    counts[i] += step
    counts[j] += step


@njit
def count_row(i, j, d2, dx, dy, dz, counts, step):
    counts[i] += step


# ---------------------------------------------------------------------- helpers
def scene(seed, n=1200, n_dims=3, lattice=False):
    rng = np.random.default_rng(seed)
    points = rng.random((n, n_dims))
    if lattice:
        points = np.floor(points * 16) / 16
    queries = rng.random((250, n_dims)) * 1.2 - 0.1
    radii = rng.random(n) * 0.04
    return points, queries, radii


def box_of(box, n_dims):
    """``(box, periodic)`` of a case: open, periodic, or periodic on x and z only."""
    if box == "partly":
        return 1.0, [True, False, True][:n_dims]
    return box, None


def grids(points, cell_size, box, device):
    box, periodic = box_of(box, points.shape[1])
    return (Grid(points, cell_size, box=box, periodic=periodic),
            Grid(points, cell_size, box=box, periodic=periodic, device=device))


def warp_calls(grid, method, *args, n_max, **kwargs):
    """The calls of ``method`` on a Warp grid, ``record``ed: (n, 6) float64."""
    device = on(grid.device)
    calls = wp.zeros((n_max, 6), dtype=wp.float64, device=device)
    n_calls = wp.zeros(1, dtype=wp.int64, device=device)
    getattr(grid, method)(*args, record, calls, n_calls, **kwargs)
    n = int(n_calls.numpy()[0])
    assert n <= n_max
    return calls.numpy()[:n]


def cpu_calls(grid, method, *args, n_max, **kwargs):
    calls = np.zeros((n_max, 6))
    n_calls = np.zeros(1, dtype=np.int64)
    getattr(grid, method)(*args, record_cpu, calls, n_calls, **kwargs)
    assert n_calls[0] <= n_max
    return calls[:n_calls[0]]


def as_rows(calls):
    """The calls as sorted rows, to compare as sets, bit for bit but for the sign of a
    zero: the CPU engine passes the second order of a pair the negated separations of
    the first, -0.0 where the first has 0.0, the Warp engine computes each."""
    calls = calls + 0.0
    return calls[np.lexsort((calls[:, 1], calls[:, 0]))]


def first_in_order(calls):
    """Calls made once a pair, each turned to ``i < j`` (the separations negated)."""
    swap = calls[:, 0] > calls[:, 1]
    calls = calls.copy()
    calls[swap, 0], calls[swap, 1] = calls[swap, 1], calls[swap, 0]
    calls[swap, 3:] = -calls[swap, 3:]
    return as_rows(calls)


def assert_same_bytes(got, expected, name=""):
    assert got.dtype == expected.dtype and got.shape == expected.shape, name
    assert got.tobytes() == expected.tobytes(), name


# ---------------------------------------------------------------------- the calls
@pytest.mark.parametrize("n_dims", [1, 2, 3])
@pytest.mark.parametrize("box", [None, 1.0, "partly"])
@pytest.mark.parametrize("once", [False, True])
def test_pair_calls_are_the_cpu_engines_bit_for_bit(device, n_dims, box, once):
    points, _, radii = scene(n_dims, n_dims=n_dims)
    r = (0.004, 0.03, 0.1)[n_dims - 1]
    cpu, gpu = grids(points, r, box, device)
    # Radii up to r: limits of a pair up to 2 r.
    for r_or_none, kwargs in ((r, {}), (None, {"radii": radii * (r / 0.04)})):
        n_max = 2 * len(cpu.query_pairs(r_or_none, **kwargs)) + 1
        a = cpu_calls(cpu, "for_each_pair", r_or_none, n_max=n_max, once=once, **kwargs)
        b = warp_calls(gpu, "for_each_pair", r_or_none, n_max=n_max, once=once, **kwargs)
        assert len(a) > len(points) // 2
        assert np.all(b[:, 0] != b[:, 1])
        order = first_in_order if once else as_rows
        assert_same_bytes(order(b), order(a), f"{list(kwargs)}, once={once}")


def test_once_calls_each_pair_from_its_point_first_in_the_grids_order(device):
    points, _, _ = scene(7)
    cpu, gpu = grids(points, 0.08, 1.0, device)
    calls = warp_calls(gpu, "for_each_pair", 0.08, n_max=len(points) ** 2, once=True)
    position = np.argsort(gpu._found_pairs(0.08).order)
    i, j = calls[:, 0].astype(np.int64), calls[:, 1].astype(np.int64)
    assert np.all(position[i] < position[j])
    assert len(calls) == len(cpu.query_pairs(0.08))


@pytest.mark.parametrize("box", [None, 1.0])
def test_neighbor_calls_are_the_rows_of_query_radius_in_order(device, box):
    points, queries, _ = scene(3)
    cpu, gpu = grids(points, 0.1, box, device)
    if box is not None:
        queries = queries % 1.0
    rows = cpu.query_radius(queries, 0.1, return_distances=True, sort=False)
    calls = warp_calls(gpu, "for_each_neighbor", queries, 0.1, n_max=len(rows.indices) + 1)
    # One thread per query: on Warp's CPU device they run in query order.
    if device == "warp-cpu":
        assert_same_bytes(calls[:, 0].astype(np.int64),
                          np.repeat(np.arange(len(queries)), np.diff(rows.indptr)), "q")
    calls = calls[np.argsort(calls[:, 0], kind="stable")]
    assert_same_bytes(calls[:, 1].astype(np.int64), rows.indices.astype(np.int64), "j")
    assert_same_bytes(np.sqrt(calls[:, 2]), rows.distances, "distances")
    expected = cpu_calls(cpu, "for_each_neighbor", queries, 0.1, n_max=len(calls) + 1)
    assert_same_bytes(calls, expected, "the CPU engine's calls")


# ---------------------------------------------------------------------- sums
def sums_of(grid, method, *args, n_rows, **kwargs):
    """``accumulate``'s counts and sums, with ``scale`` 2.0 (a Python float)."""
    if grid.device == "cpu":
        counts, sums = np.zeros(n_rows, dtype=np.int64), np.zeros((n_rows, 4))
        getattr(grid, method)(*args, accumulate_cpu, counts, sums, 2.0, **kwargs)
        return counts, sums
    device = on(grid.device)
    counts = wp.zeros(n_rows, dtype=wp.int64, device=device)
    sums = wp.zeros((n_rows, 4), dtype=wp.float64, device=device)
    getattr(grid, method)(*args, accumulate, counts, sums, 2.0, **kwargs)
    return counts.numpy(), sums.numpy()


@pytest.mark.parametrize("box", [None, 1.0, "partly"])
@pytest.mark.parametrize("lattice", [False, True])
def test_pair_sums_equal_the_cpu_engines(device, box, lattice):
    # 3,000 points: the CPU engine's multi-threaded path.
    points, _, radii = scene(11, n=3000, lattice=lattice)
    cpu, gpu = grids(points, 0.07, box, device)
    for r, kwargs in ((0.07, {}), (None, {"radii": radii})):
        (a_counts, a_sums), (b_counts, b_sums) = (
            sums_of(grid, "for_each_pair", r, n_rows=len(points), **kwargs)
            for grid in (cpu, gpu))
        assert_same_bytes(b_counts, a_counts, "counts")
        if lattice:
            # Every partial sum is exact: any order gives the same bits.
            assert_same_bytes(b_sums, a_sums, "sums on a lattice")
        else:
            np.testing.assert_allclose(b_sums, a_sums, rtol=1e-12, atol=1e-13)


def test_neighbor_sums_equal_the_cpu_engines_bit_for_bit(device):
    points, queries, _ = scene(5, n=3000)
    cpu, gpu = grids(points, 0.1, 1.0, device)
    queries = queries % 1.0
    radii = np.linspace(0.0, 0.15, len(queries))
    a, b = (sums_of(grid, "for_each_neighbor", queries, radii, n_rows=len(queries))
            for grid in (cpu, gpu))
    assert_same_bytes(b[0], a[0], "counts")
    assert_same_bytes(b[1], a[1], "sums")


def test_arguments_on_the_device_give_the_cpu_engines_calls(device):
    """``queries``, per-query ``r`` and per-point ``radii`` as Warp arrays on the grid's
    device, checked there: the calls of the NumPy arguments."""
    points, queries, radii = scene(6, n=2000)
    cpu, gpu = grids(points, 0.1, 1.0, device)
    queries = queries % 1.0 - 0.5  # wrapped into the box on the device
    r = np.linspace(0.0, 0.15, len(queries))

    def there(array):
        return wp.array(array, dtype=wp.float64, device=on(device))

    a, b = (sums_of(cpu, "for_each_neighbor", queries, r, n_rows=len(queries)),
            sums_of(gpu, "for_each_neighbor", there(queries), there(r),
                    n_rows=len(queries)))
    assert_same_bytes(b[0], a[0], "neighbor counts")
    assert_same_bytes(b[1], a[1], "neighbor sums")
    a, b = (sums_of(cpu, "for_each_pair", None, n_rows=len(points), radii=radii),
            sums_of(gpu, "for_each_pair", None, n_rows=len(points), radii=there(radii)))
    assert_same_bytes(b[0], a[0], "pair counts")
    np.testing.assert_allclose(b[1], a[1], rtol=1e-12, atol=1e-13)
    bad = radii.copy()
    bad[17] = -1.0
    with pytest.raises(ValueError, match=r"^`radii` must hold finite values >= 0; got -1\.0 "
                                         r"at radii\[17\]\.$"):
        sums_of(gpu, "for_each_pair", None, n_rows=len(points), radii=there(bad))


def test_once_writing_both_rows_counts_every_ordered_pair(device):
    points, _, _ = scene(2, n=2500)
    cpu, gpu = grids(points, 0.06, 1.0, device)
    expected = np.zeros(len(points), dtype=np.int64)
    cpu.for_each_pair(0.06, count_row, expected, 3)
    counts = wp.zeros(len(points), dtype=wp.int64, device=on(device))
    gpu.for_each_pair(0.06, count_both, counts, 3, once=True)
    assert_same_bytes(counts.numpy(), expected, "counts")
    # A NumPy integer keeps its dtype; rows i and j, in both orders.
    counts.zero_()
    gpu.for_each_pair(0.06, count_both, counts, np.int64(1))
    assert_same_bytes(counts.numpy(), 2 * expected // 3, "both orders, both rows")


def test_brute_force_on_the_warp_engine_makes_the_grids_calls(device):
    points, queries, radii = scene(4, n=600)
    grid = Grid(points, 0.1, device=device)
    brute = Grid(points, 0.1, device=device, algorithm="brute")
    for method, args in (("for_each_pair", (0.1,)), ("for_each_neighbor", (queries, 0.1))):
        a, b = (as_rows(warp_calls(g, method, *args, n_max=len(points) ** 2))
                for g in (grid, brute))
        assert len(a) > len(queries)
        assert_same_bytes(b, a, method)


def test_no_points_no_pairs_and_no_queries_make_no_calls(device):
    for points in (np.zeros((0, 3)), np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 0.5]])):
        grid = Grid(points, 0.1, device=device)
        assert len(warp_calls(grid, "for_each_pair", 0.1, n_max=1)) == 0
        assert len(warp_calls(grid, "for_each_neighbor", np.zeros((0, 3)), 0.1,
                              n_max=1)) == 0


# ---------------------------------------------------------------------- errors
@wp.func
def six_parameters(i: wp.int64, j: wp.int64, d2: wp.float64, dx: wp.float64,
                   dy: wp.float64, dz: wp.float64):
    pass


@wp.func
def float32_distance(i: wp.int64, j: wp.int64, d2: wp.float32, dx: wp.float64,
                     dy: wp.float64, dz: wp.float64, counts: wp.array(dtype=wp.int64)):
    counts[i] += wp.int64(1)


def test_a_numba_function_on_the_warp_engine_is_a_type_error_naming_fn():
    grid = Grid(np.random.default_rng(0).random((20, 3)), 0.2, device="warp-cpu")
    message = (r"^`fn` must be a Warp function \(`@wp\.func`\) on a grid with "
               r"device='warp-cpu', whose kernels call it; got CPUDispatcher\(.*\) \(a numba "
               r"function\)\. Decorate it with `@wp\.func` \(`import warp as wp`\), its "
               r"parameters typed, or build the grid with device='cpu' for a numba "
               r"function\.$")
    counts = np.zeros(20, dtype=np.int64)
    with pytest.raises(TypeError, match=message):
        grid.for_each_pair(0.2, count_row, counts, 1)
    with pytest.raises(TypeError, match=message):
        grid.for_each_neighbor(np.zeros((2, 3)), 0.2, count_row, counts, 1)
    with pytest.raises(TypeError, match=r"^`fn` must be a Warp function .* got <function"):
        grid.for_each_pair(0.2, lambda *args: None)
    with pytest.raises(TypeError, match=r"^`fn` must be a Warp function .* got .*sin"):
        grid.for_each_pair(0.2, wp.sin)


def test_a_warp_function_on_the_cpu_engine_is_a_type_error_naming_fn():
    grid = Grid(np.random.default_rng(0).random((20, 3)), 0.2)
    with pytest.raises(TypeError, match=r"^`fn` must be a function compiled with numba's "
                                        r"`njit`.*device='cuda' or 'warp-cpu'\.$"):
        grid.for_each_pair(0.2, six_parameters)


def test_a_warp_function_taking_other_parameters_is_a_type_error_naming_fn():
    grid = Grid(np.random.default_rng(0).random((20, 3)), 0.2, device="warp-cpu")
    counts = wp.zeros(20, dtype=wp.int64, device="cpu")
    with pytest.raises(TypeError, match=r"^`fn` must take fn\(i, j, d2, dx, dy, dz, \*args\)"
                                        r".*: 7 parameters with the 1 arguments given after "
                                        r"it; got 'six_parameters', which takes 6\.$"):
        grid.for_each_pair(0.2, six_parameters, counts)
    with pytest.raises(TypeError, match=r"^`fn` must take .* 6 parameters with the 0 "
                                        r"arguments given after it; got 'record', which "
                                        r"takes 8\.$"):
        grid.for_each_neighbor(np.zeros((2, 3)), 0.2, record)
    with pytest.raises(TypeError, match=r"^`fn` must take fn\(i, j, d2, dx, dy, dz, "
                                        r"\*args\).*typed as Warp passes them .* got "
                                        r"'float32_distance', which Warp could not compile "
                                        r"for that call") as caught:
        grid.for_each_pair(0.2, float32_distance, counts)
    assert isinstance(caught.value.__cause__, Exception)


def test_arguments_warp_cannot_take_are_type_errors_naming_them():
    grid = Grid(np.random.default_rng(0).random((20, 3)), 0.2, device="warp-cpu")
    with pytest.raises(TypeError, match=r"^`args\[0\]` must be a Warp array or a number "
                                        r"\(an argument of the Warp function `fn`\); got "
                                        r"ndarray\. Wrap an array as `wp\.array\(values, "
                                        r"device=\.\.\.\)`\.$"):
        grid.for_each_pair(0.2, count_both, np.zeros(20, dtype=np.int64), 1)
    # A NumPy int32 is an int32, as numba types it: `count_both` takes an int64.
    with pytest.raises(TypeError, match=r"^`fn` must take .* got 'count_both', which Warp "
                                        r"could not compile for that call"):
        grid.for_each_pair(0.2, count_both, wp.zeros(20, dtype=wp.int64, device="cpu"),
                           np.int32(1))
    # The failed build leaves no trace: the same call with an int64 runs.
    counts = wp.zeros(20, dtype=wp.int64, device="cpu")
    grid.for_each_pair(0.2, count_both, counts, np.int64(1))
    assert counts.numpy().sum() == 4 * len(grid.query_pairs(0.2)) > 0
    with pytest.raises(TypeError, match=r"^`args\[1\]` must be .* got str\."):
        grid.for_each_pair(0.2, count_both, wp.zeros(20, dtype=wp.int64, device="cpu"), "1")


# ---------------------------------------------------------------------- compiled code
def launched_kernels():
    """The kernels of both calls, launched once on Warp's CPU device (so that each has an
    overload of concrete types)."""
    from spatialhash.grid._warp_kernels import functions

    grid = Grid(np.random.default_rng(0).random((50, 3)), 0.2, device="warp-cpu")
    counts = wp.zeros(50, dtype=wp.int64, device="cpu")
    grid.for_each_pair(0.2, count_both, counts, 1)
    grid.for_each_neighbor(np.zeros((3, 3)), 0.2, count_both, counts, 1)
    return functions.pair_kernel(count_both, 2), functions.neighbor_kernel(count_both, 2)


def test_kernels_of_a_function_compile_without_fused_multiply_add():
    for kernel in launched_kernels():
        assert kernel.module.options["fuse_fp"] is False, kernel.key
        assert kernel.module.options["enable_backward"] is False, kernel.key
    # One kernel for each function, number of arguments and call.
    assert launched_kernels()[0] is launched_kernels()[0]


@pytest.mark.slow
@pytest.mark.skipif(platform.system() not in ("Linux", "Windows"),
                    reason="Warp's CUDA compiler (NVRTC) ships in its Linux and Windows wheels")
def test_cuda_code_of_a_function_has_no_fused_multiply_add():
    # As tests/test_warp_engine.py's check of the engine's other kernels: compiled
    # offline for sm_90, no GPU needed.
    for kernel in launched_kernels():
        (path,) = wp.compile_aot_module(kernel.module, arch=90, use_ptx=True)
        ptx = Path(path).read_text()
        assert re.search(r"\.entry", ptx), kernel.key
        assert not re.search(r"\bfma\.\w+\.f64", ptx), kernel.key
        for op in ("add", "sub", "mul"):
            assert re.search(rf"\b{op}\.rn\.f64", ptx), (kernel.key, op)
            assert not re.search(rf"\b{op}\.f64", ptx), (kernel.key, op)


# ---------------------------------------------------------------------- rays
@wp.func
def every_nth(ray: wp.int64, index: wp.int64, distance: wp.float64,
              offered: wp.array(dtype=wp.int64), n: wp.int64) -> wp.bool:
    """Accept a point whose index is a multiple of ``n``, counting the hits offered."""
    offered[ray] += wp.int64(1)
    return index % n == wp.int64(0)


@njit
def every_nth_cpu(ray, index, distance, offered, n):
    offered[ray] += 1
    return index % n == 0


@wp.func
def far_enough(ray: wp.int64, index: wp.int64, distance: wp.float64,
               least: wp.float64) -> bool:
    return distance >= least


@njit
def far_enough_cpu(ray, index, distance, least):
    return distance >= least


@pytest.mark.parametrize("n_dims", [2, 3])
def test_ray_functions_choose_the_cpu_engines_hits_after_its_calls(device, n_dims):
    rng = np.random.default_rng(n_dims)
    points = rng.random((2000, n_dims))
    origins = rng.random((300, n_dims)) * 1.4 - 0.2
    directions = rng.normal(size=(300, n_dims))
    radii = rng.random(2000) * 0.03
    cpu, gpu = grids(points, 0.05, None, device)
    for n in (1, 3, 10**9):
        offered = np.zeros(300, dtype=np.int64)
        a = cpu.query_ray(origins, directions, radii, fn=every_nth_cpu, args=(offered, n))
        offered_warp = wp.zeros(300, dtype=wp.int64, device=on(device))
        b = gpu.query_ray(origins, directions, radii, fn=every_nth, args=(offered_warp, n))
        assert_same_bytes(b.indices, a.indices, f"indices, n={n}")
        assert_same_bytes(b.distances, a.distances, f"distances, n={n}")
        assert_same_bytes(offered_warp.numpy(), offered, f"calls, n={n}")
    every = cpu.query_ray(origins, directions, radii, all_hits=True)
    assert np.all(offered == np.diff(every.indptr))  # n = 10**9 accepts only index 0
    a = cpu.query_ray(origins, directions, 0.02, max_distance=0.8, fn=far_enough_cpu,
                      args=(0.1,))
    b = gpu.query_ray(origins, directions, 0.02, max_distance=0.8, fn=far_enough,
                      args=(0.1,))
    assert np.any(a.indices >= 0) and np.any(a.indices < 0)
    assert_same_bytes(b.indices, a.indices, "indices, far_enough")
    assert_same_bytes(b.distances, a.distances, "distances, far_enough")


@wp.func
def returns_a_distance(ray: wp.int64, index: wp.int64, distance: wp.float64) -> wp.float64:
    return distance


@wp.func
def undeclared_distance(ray: wp.int64, index: wp.int64, distance: wp.float64):
    return distance


def test_ray_function_errors_name_fn():
    grid = Grid(np.random.default_rng(0).random((20, 3)), 0.2, device="warp-cpu")
    cast = {"origins": np.zeros((2, 3)), "directions": np.ones((2, 3)), "radii": 0.1}
    with pytest.raises(TypeError, match=r"^`fn` must be a Warp function .* got "
                                        r"CPUDispatcher\(.*\) \(a numba function\)"):
        grid.query_ray(**cast, fn=far_enough_cpu, args=(0.1,))
    with pytest.raises(TypeError, match=r"^`fn` must return a bool \(True accepts the hit, "
                                        r"False passes over it\); got 'returns_a_distance', "
                                        r"declared to return float64\.$"):
        grid.query_ray(**cast, fn=returns_a_distance)
    with pytest.raises(TypeError, match=r"^`fn` must take fn\(ray, index, distance, \*args\)"
                                        r".*\), and return a bool; got 'undeclared_distance', "
                                        r"which Warp could not compile for that call"):
        grid.query_ray(**cast, fn=undeclared_distance)
    with pytest.raises(TypeError, match=r"^`fn` must take fn\(ray, index, distance, \*args\)"
                                        r".*: 4 parameters with the 1 arguments given after "
                                        r"it; got 'every_nth', which takes 5\.$"):
        grid.query_ray(**cast, fn=every_nth, args=(0.1,))
    with pytest.raises(TypeError, match=r"^`all_hits` must be False with `fn`"):
        grid.query_ray(**cast, fn=far_enough, args=(0.1,), all_hits=True)
    with pytest.raises(TypeError, match=r"^`args` must be a tuple"):
        grid.query_ray(**cast, fn=far_enough, args=0.1)
