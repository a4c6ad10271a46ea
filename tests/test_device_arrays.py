"""Arrays of the caller's kind in and out of `Grid` (``grid/_device_arrays.py``): PyTorch
tensors and Warp arrays read where they lie, results of the points' kind, NumPy as before.

Here on Warp's CPU device (``device="warp-cpu"``, where a host tensor or a Warp array on
Warp's "cpu" lies in the device's memory: the path a CUDA array takes on its GPU) and on
the CPU engine; every answer is compared with the CPU engine's on NumPy arrays, byte for
byte. The CUDA tests run where a GPU is present (``benchmarks/gpu_check.py``).
"""

from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

from spatialhash import Grid, Pairs

from device_kinds import assert_same, exact32, host, sorted_pairs

torch = pytest.importorskip("torch", reason="the torch extra")
wp = pytest.importorskip("warp", reason="the gpu extra")

WARP = "warp-cpu"


def as_torch(array):
    return torch.from_numpy(array.copy())


def as_torch32(array):
    return torch.from_numpy(array.astype(np.float32))


def as_warp(array):
    return wp.array(array, dtype=wp.float64 if array.dtype == np.float64 else wp.float32)


def as_warp32(array):
    return wp.array(array.astype(np.float32), dtype=wp.float32)


#: How each kind is made from a NumPy array, and the type its results have.
KINDS = {"torch": (as_torch, torch.Tensor), "torch32": (as_torch32, torch.Tensor),
         "warp": (as_warp, wp.array), "warp32": (as_warp32, wp.array)}










def scene(seed=0, n=400, n_dims=3):
    rng = np.random.default_rng(seed)
    return (exact32(rng.random((n, n_dims))), exact32(rng.random((40, n_dims))),
            exact32(rng.random(n) * 0.05))


def every_query(grid, points, queries, radii, make):
    """Every query of ``grid``, its array arguments of the kind ``make`` makes, by name;
    pair searches sorted (their order is each engine's own)."""
    r = 0.1
    return {
        "pairs": sorted_pairs(grid.query_pairs(r, return_distances=True)),
        "pairs radii": sorted_pairs(grid.query_pairs(radii=make(radii))),
        "pairs queries": grid.query_pairs(r, queries=make(queries), return_distances=True),
        "radius": grid.query_radius(make(queries), r, return_distances=True),
        "radius per query": grid.query_radius(make(queries), make(np.full(40, r)),
                                              sort=False),
        "radius self": grid.query_radius(None, r, exclude_self=True),
        "count": grid.count_radius(make(queries), r),
        "count self": grid.count_radius(None, r, exclude_self=True),
        "knn": grid.query_knn(make(queries), 5, r_max=0.2),
        "knn self": grid.query_knn(None, 3, exclude_self=True),
        "box": grid.query_box(make(queries), make(exact32(queries + 0.1))),
        "ray": grid.query_ray(make(queries), make(exact32(queries - 0.5)), 0.02),
        "ray all": grid.query_ray(make(queries), make(exact32(queries - 0.5)), make(radii),
                                  all_hits=True),
        "iter": sorted_pairs(Pairs(
            *(np.concatenate([host(getattr(chunk, name)) for chunk in chunks])
              for name in ("indices", "distances")), (len(points), len(points))))
        if (chunks := list(grid.iter_pairs(r, chunk_size=50, return_distances=True)))
        else None,
    }


@pytest.mark.parametrize("device", [WARP, "cpu"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_query_gives_the_kind_of_the_points_and_the_numpy_answers(device, kind):
    make, kind_type = KINDS[kind]
    points, queries, radii = scene()
    expected = every_query(Grid(points, 0.1), points, queries, radii, np.asarray)
    grid = Grid(make(points), 0.1, device=device)
    assert grid.device == device
    got = every_query(grid, points, queries, radii, make)
    for name, value in expected.items():
        if name in ("pairs", "pairs radii", "iter"):
            # Sorted on the host here; the kind of each chunk is checked below.
            assert_same(got[name], value, name, np.ndarray)
        else:
            assert_same(got[name], value, name, kind_type)
    for chunk in grid.iter_pairs(0.1, chunk_size=50):
        assert isinstance(chunk.indices, kind_type)
    assert isinstance(grid.query_pairs(0.1).indices, kind_type)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_points_on_the_device_build_the_cpu_engine_grid(kind, n_dims):
    """Padded, wrapped (negative, beyond the box, -0.0, exactly the period), bounded and
    checked on the device: the cells, the default cell size and the answers of the CPU
    engine, and the caller's points untouched."""
    make, kind_type = KINDS[kind]
    points, queries, _ = scene(n_dims, n_dims=n_dims)
    points = (points * 3.0 - 1.0).astype(np.float32).astype(np.float64)  # float32 too
    points[:4, 0] = [-0.0, 1.0, -1.0, 2.0]
    for box in (None, 1.0):
        given = make(points)
        before = host(given).copy()
        cpu = Grid(points, box=box)
        grid = Grid(given, box=box, device=WARP)
        assert grid.cell_size == cpu.cell_size
        assert grid.n_occupied_cells == cpu.n_occupied_cells
        assert host(given).tobytes() == before.tobytes()
        for name in ("points", "order", "cell_start"):
            assert_same(getattr(grid.state, name), getattr(cpu.state, name), name,
                        np.ndarray)
        assert_same(grid.query_knn(make(queries), 4), cpu.query_knn(queries, 4), "knn",
                    kind_type)


def test_strided_empty_and_brute_force_points_on_the_device():
    points, queries, _ = scene()
    wide = torch.from_numpy(np.column_stack([points, points[:, :1]]))
    strided = wide[:, 1:3]  # a view of every row's middle columns
    assert not strided.is_contiguous()
    assert_same(Grid(strided, 0.1, device=WARP).query_knn(queries[:, 1:3], 3),
                Grid(points[:, 1:3], 0.1).query_knn(queries[:, 1:3], 3), "knn", torch.Tensor)
    few = Grid(torch.from_numpy(points[:20]), device=WARP)
    assert few.algorithm == "brute"
    assert_same(few.query_radius(queries, 0.3), Grid(points[:20]).query_radius(queries, 0.3),
                "radius", torch.Tensor)
    empty = Grid(torch.zeros((0, 3)), device=WARP)
    assert empty.n_points == 0 and empty.cell_size == Grid(np.zeros((0, 3))).cell_size
    assert_same(empty.query_knn(queries, 2), Grid(np.zeros((0, 3))).query_knn(queries, 2),
                "knn", torch.Tensor)


def test_lists_of_queries_without_warp_imported(monkeypatch):
    # Regression: a list was taken for checked vectors where Warp was not imported.
    points, queries, _ = scene()
    monkeypatch.delitem(sys.modules, "warp")
    found = Grid(points, 0.1).query_knn(queries.tolist(), 2)
    assert found.indices.tolist() == Grid(points, 0.1).query_knn(queries, 2).indices.tolist()


def test_the_cpu_engine_gives_tensors_over_its_own_arrays():
    points, queries, _ = scene()
    grid = Grid(torch.from_numpy(points))
    found = grid.query_radius(queries, 0.1, return_distances=True)
    assert isinstance(found.indices, torch.Tensor) and found.indices.device.type == "cpu"
    # The CPU engine's arrays themselves, not copies.
    assert found.counts.tolist() == np.diff(found.indptr.numpy()).tolist()
    assert isinstance(Grid(points).query_radius(queries, 0.1).indices, np.ndarray)


def test_numpy_in_gives_numpy_out_on_every_device():
    points, queries, _ = scene()
    for device in ("cpu", WARP):
        grid = Grid(points, 0.1, device=device)
        assert type(grid.query_pairs(0.1).indices) is np.ndarray
        assert type(grid.count_radius(queries, 0.1)) is np.ndarray
        assert type(grid.query_knn(queries, 2).distances) is np.ndarray


def test_warp_results_of_the_cpu_engine_keep_their_memory():
    points, queries, _ = scene()
    found = Grid(as_warp(points)).query_knn(queries, 3)
    gc.collect()
    expected = Grid(points).query_knn(queries, 3)
    assert found.indices.numpy().tobytes() == expected.indices.tobytes()


def test_a_float32_tensor_is_not_modified_and_not_converted_on_the_host():
    points, _, _ = scene()
    given = torch.from_numpy(points.astype(np.float32)) * 4.0 - 2.0
    before = given.clone()
    grid = Grid(given, 0.3, box=1.0, device=WARP)
    assert torch.equal(given, before) and given.dtype == torch.float32
    cpu = Grid(given.numpy(), 0.3, box=1.0)
    assert_same(sorted_pairs(grid.query_pairs(0.3)), sorted_pairs(cpu.query_pairs(0.3)),
                "pairs", np.ndarray)


def test_points_on_the_device_are_not_read_on_the_host(monkeypatch):
    """A host tensor on "warp-cpu" lies in the device's memory: the points and the
    queries of radius and k-nearest queries go to Warp as they are (``wp.from_torch``),
    never through NumPy, and so do the results."""
    points, queries, _ = scene()
    given, asked = torch.from_numpy(points), torch.from_numpy(queries)

    def refused(*args, **kwargs):
        raise AssertionError("a tensor read through NumPy")

    for name in ("numpy", "__array__", "cpu"):
        monkeypatch.setattr(torch.Tensor, name, refused)
    grid = Grid(given, 0.1, box=1.0, device=WARP)
    shifted = asked - 0.5  # wrapped into the box on the device, never in place
    kept = shifted.clone()
    found = (grid.query_pairs(0.1, return_distances=True),
             grid.query_radius(shifted, 0.1, return_distances=True),
             grid.count_radius(asked.float(), 0.1), grid.query_knn(asked, 3, r_max=0.1))
    monkeypatch.undo()
    assert torch.equal(shifted, kept)
    cpu = Grid(points, 0.1, box=1.0)
    assert_same(sorted_pairs(found[0]), sorted_pairs(cpu.query_pairs(
        0.1, return_distances=True)), "pairs", np.ndarray)
    assert_same(found[1], cpu.query_radius(queries - 0.5, 0.1, return_distances=True),
                "radius", torch.Tensor)
    assert_same(found[2], cpu.count_radius(queries, 0.1), "count", torch.Tensor)
    assert_same(found[3], cpu.query_knn(queries, 3, r_max=0.1), "knn", torch.Tensor)


@pytest.mark.parametrize("make", [as_torch, as_warp], ids=["torch", "warp"])
def test_bad_queries_on_the_device_raise_as_numpy_queries_do(make):
    points, queries, _ = scene()
    grid = Grid(make(points), 0.1, device=WARP)
    queries[3, 2] = np.inf
    with pytest.raises(ValueError, match=r"^`queries` must be finite; got inf at "
                                         r"queries\[3, 2\]\.$"):
        grid.query_knn(make(queries), 2)
    queries[3, 2] = 1e-300
    with pytest.raises(ValueError, match=r"^`queries` must be 0 or at least"):
        grid.query_radius(make(queries), 0.1)
    with pytest.raises(ValueError, match=r"^`queries` must have 3 columns, like the grid's "
                                         r"points; got shape \(40, 2\)\.$"):
        grid.count_radius(make(queries[:, :2].copy()), 0.1)
    with pytest.raises(TypeError, match=r"got exclude_self=True and `queries` an array of "
                                        r"shape \(40, 2\)\."):
        grid.query_knn(make(queries[:, :2].copy()), 2, exclude_self=True)
    one = grid.query_knn(make(points[5].copy()), 1)  # one point, 1-D: the host's path
    assert host(one.indices).tolist() == [[5]]


# ---------------------------------------------------------------------- errors
class OnGpu:
    """An array that says, through DLPack, that it lies on GPU 0."""

    shape = (3, 3)

    def __dlpack__(self, stream=None):
        raise BufferError("not readable here")

    def __dlpack_device__(self):
        return (2, 0)


def test_points_on_a_gpu_with_device_cpu_raise_naming_them():
    with pytest.raises(TypeError, match=(
            r"^`points` must be on the host for device='cpu' \(the numba engine\); got a "
            r"test_device_arrays\.OnGpu on cuda:0\. Leave `device` out \(or pass "
            r"device='cuda:0'\)")):
        Grid(OnGpu(), 1.0, device="cpu")


def test_points_on_a_gpu_with_warp_cpu_raise_naming_them():
    with pytest.raises(TypeError, match=(
            r"^`points` must be on the grid's device \(the host, device='warp-cpu'\); got "
            r"a test_device_arrays\.OnGpu on cuda:0\.")):
        Grid(OnGpu(), 1.0, device=WARP)


@pytest.mark.parametrize("device", ["cpu", WARP])
def test_an_argument_on_another_device_raises_naming_it(device):
    points, _, _ = scene()
    grid = Grid(torch.from_numpy(points), 0.1, device=device)
    with pytest.raises(TypeError, match=(
            r"^`queries` must be on the host or on the grid's device \(the host\); got a "
            r"test_device_arrays\.OnGpu on cuda:0\.$")):
        grid.query_knn(OnGpu(), 2)
    with pytest.raises(TypeError, match=r"^`lower` must be on the host or on the grid's"):
        grid.query_box(OnGpu(), OnGpu())


@pytest.mark.parametrize("make", [as_torch, as_warp], ids=["torch", "warp"])
def test_bad_points_on_the_device_raise_as_numpy_points_do(make):
    points, _, _ = scene()
    points[7, 1] = np.nan
    with pytest.raises(ValueError, match=r"^`points` must be finite; got nan at points\[7, 1\]"):
        Grid(make(points), 0.1, device=WARP)
    points[7, 1] = 1e300
    with pytest.raises(ValueError, match=r"^`points` must lie within \+-1e\+150"):
        Grid(make(points), 0.1, device=WARP)
    with pytest.raises(ValueError, match=(
            r"^`points` must be a 2-D array of shape \(n, d\), d = 1, 2 or 3; got shape "
            r"\(400, 4\)")):
        Grid(make(np.zeros((400, 4))), 0.1, device=WARP)


def test_integer_tensors_on_the_host_are_converted_as_numpy_ones():
    points = np.arange(30).reshape(10, 3)
    grid = Grid(torch.from_numpy(points), 2.0, device=WARP)
    assert_same(grid.query_pairs(2.0), Grid(points, 2.0).query_pairs(2.0), "pairs",
                torch.Tensor)


@pytest.mark.parametrize("make", [as_torch, as_warp], ids=["torch", "warp"])
def test_result_methods_that_need_numpy_name_the_kind(make):
    points, queries, _ = scene()
    grid = Grid(make(points), 0.1, device=WARP)
    pairs = grid.query_pairs(0.1)
    kind = "torch.Tensor on cpu" if make is as_torch else "warp.array on cpu"
    with pytest.raises(TypeError, match=(
            rf"^`Pairs.sorted` needs NumPy arrays; this result holds {kind} arrays \(a "
            r"grid's results have the kind of its points\)")):
        pairs.sorted()
    rows = grid.query_radius(make(queries), 0.1)
    for method in (rows.to_scipy, rows.to_pairs, grid.query_knn(make(queries), 2).to_scipy):
        with pytest.raises(TypeError, match=r"needs NumPy arrays"):
            method()
    assert "n_queries=40" in repr(rows) and "k=2" in repr(grid.query_knn(make(queries), 2))
    if make is as_torch:  # what PyTorch computes as NumPy does
        expected = Grid(points, 0.1).query_radius(queries, 0.1)
        assert rows.counts.tolist() == expected.counts.tolist()
        assert rows[3].tolist() == expected[3].tolist()
        assert [row.tolist() for row in rows] == [row.tolist() for row in expected]
        assert grid.query_ray(make(queries), make(queries), 0.1).hit.dtype == torch.bool
    else:
        with pytest.raises(TypeError, match=r"^`Neighbors.counts` needs NumPy arrays or "
                                            r"PyTorch tensors; this result holds warp"):
            rows.counts  # noqa: B018
        with pytest.raises(TypeError, match=r"^`RayHits.hit` needs NumPy arrays or"):
            grid.query_ray(make(queries), make(queries), 0.1).hit  # noqa: B018


# ---------------------------------------------------------------------- CUDA
def _warp_gpus() -> int:
    wp.init()
    return wp.get_cuda_device_count()


warp_cuda = pytest.mark.skipif(not _warp_gpus(), reason="needs a CUDA GPU seen by Warp")
torch_cuda = pytest.mark.skipif(not (_warp_gpus() and torch.cuda.is_available()),
                                reason="needs a CUDA GPU seen by Warp and a CUDA torch")


@torch_cuda
def test_cuda_tensors_build_on_their_gpu_and_stay_there():
    points, queries, radii = scene()
    given = torch.from_numpy(points).cuda()
    grid = Grid(given, 0.1)
    assert grid.device == "cuda:0"
    on_gpu = lambda array: torch.from_numpy(np.asarray(array)).cuda()  # noqa: E731
    expected = every_query(Grid(points, 0.1), points, queries, radii, np.asarray)
    got = every_query(grid, points, queries, radii, on_gpu)
    for name, value in expected.items():
        if name not in ("pairs", "pairs radii", "iter"):
            assert_same(got[name], value, name, torch.Tensor)
            for array in vars(got[name]).values() if not isinstance(got[name],
                                                                    torch.Tensor) else ():
                assert not isinstance(array, torch.Tensor) or array.device == given.device
    pairs = grid.query_pairs(0.1, return_distances=True)
    assert pairs.indices.device == given.device and pairs.distances.device == given.device
    # No host copy of the points or of the results: neither goes through NumPy or .cpu().
    with pytest.MonkeyPatch.context() as patch:
        for name in ("numpy", "__array__", "cpu"):
            patch.setattr(torch.Tensor, name, lambda *args, **kwargs: 1 / 0)
        again = Grid(given, 0.1).query_pairs(0.1, return_distances=True)
    assert again.indices.device == given.device
    float32 = Grid(given.float(), 0.1)
    assert float32.query_knn(given.float(), 3).indices.device == given.device
    with pytest.raises(TypeError, match=r"^`points` must be on the host for device='cpu'"):
        Grid(given, 0.1, device="cpu")
    # Host points on a GPU grid: the results come back to the host, as tensors.
    from_host = Grid(torch.from_numpy(points), 0.1, device="cuda").query_pairs(0.1)
    assert from_host.indices.device.type == "cpu"
    with pytest.raises(TypeError, match=r"^`queries` must be on the host or on the grid's "
                                        r"device \(the host\)"):
        Grid(points, 0.1).query_knn(given, 2)


@warp_cuda
def test_warp_arrays_on_a_gpu_give_warp_arrays_there():
    points, queries, _ = scene()
    given = wp.array(points, dtype=wp.float64, device="cuda:0")
    found = Grid(given, 0.1).query_radius(wp.array(queries, dtype=wp.float64,
                                                   device="cuda:0"), 0.1)
    assert isinstance(found.indices, wp.array) and found.indices.device.is_cuda
    assert_same(found, Grid(points, 0.1).query_radius(queries, 0.1), "radius", wp.array)
