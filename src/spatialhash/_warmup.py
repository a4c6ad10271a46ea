"""Every query once, so that numba compiles every kernel (or loads it from its disk cache).

Numba compiles a kernel on its first call and caches it on disk; a new process that finds
the cache filled loads the kernels instead (see docs/design.md). `warm_up_calls`
lists calls that reach every kernel: each query of the batch grid on small data, the main
ones again on data large enough for their multi-threaded paths (parallel drivers, which
numba compiles apart), then ray casts and the dynamic hash, small and large. The command
``spatialhash compile`` runs them to fill the cache ahead of time (in an image build, say);
``benchmarks/bench_compile.py`` times them on an empty cache.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterator

import numpy as np

#: Points of the small calls: enough for the grid path rather than brute force.
N_POINTS = 1_000
#: Query points of the small calls.
N_QUERIES = 100
#: Points and queries of the calls that take the multi-threaded paths.
N_PARALLEL = 60_000
#: Expected neighbours within the radius of the generated points (3-D, uniform).
NEIGHBORS = 30

Call = tuple[str, Callable[[], object]]

#: The packages holding spatialhash's kernels: the shared ones, the batch grid's, the
#: neighbour lists' and the dynamic hash's.
KERNEL_PACKAGES = ("spatialhash._kernels", "spatialhash.grid._kernels",
                   "spatialhash.neighbors._kernels", "spatialhash.dynamic._kernels")


def _uniform_points(n: int, n_dims: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((n, n_dims))


def _radius(n: int) -> float:
    """The radius holding `NEIGHBORS` expected points of ``n`` uniform in the unit cube."""
    return float((3.0 * NEIGHBORS / (4.0 * np.pi * n)) ** (1.0 / 3.0))


def _neighbor_list_pairs(points: np.ndarray, r: float):
    """A neighbour list built, updated, and its pairs found (a lazy attribute)."""
    from .neighbors import NeighborList

    neighbors = NeighborList(points, r, r / 4)
    neighbors.update(points)
    return neighbors.pairs


def _molecular_list(points: np.ndarray, r: float):
    """A molecular neighbour list of ``points`` in the unit cube, periodic, sorted (the
    search's kernels and the sort's); then of two of them among their images within three
    cells, a few hundred rows an atom (the sort's kernel for long rows)."""
    from .neighbors import neighbor_list

    neighbor_list("ijSdDb", points[:2], 3.0, 1.0, sorted=True)
    return neighbor_list("ijSdDb", points, r, 1.0, sorted=True)


def _molecular_skin_list(points: np.ndarray, r: float):
    """A molecular list kept with a skin, built, and updated after a small move and a
    jump by a cell vector (its two kernels of an update, and the one of a jump); then a
    batch of two systems, one of them searched again (the copy of its candidates)."""
    from .neighbors import MolecularNeighborList

    neighbors = MolecularNeighborList("ijSdDb", r, r / 4, 1.0)
    neighbors.update(points)
    moved = points.copy()
    moved[0, 0] += 1.0  # one atom by a cell vector
    neighbors.update(moved)
    ptr = np.array([0, len(points) // 2, len(points)])
    batch = MolecularNeighborList("ijSdDb", r, r / 4, np.stack([np.eye(3)] * 2), ptr=ptr)
    batch.update(points)
    moved[0, 0] += r  # beyond half the skin, in system 0
    return batch.update(moved)


def small_calls(seed: int = 0) -> list[Call]:
    """Every query of the batch grid once on `N_POINTS` points, as (name, call) in order;
    the calls after the first read the grid it builds (run them in order)."""
    from .grid import Grid

    points = _uniform_points(N_POINTS, 3, seed)
    queries = _uniform_points(N_QUERIES, 3, seed + 1)
    r = _radius(N_POINTS)
    radii = np.full(N_POINTS, r / 2)
    spread = points.copy()
    spread[0] = 1e6  # an outlier: the grid falls back to its table of rows
    grids = {}

    def build():
        grids["open"] = Grid(points, cell_size=r)

    def grid():
        return grids["open"]

    return [
        ("Grid build", build),
        ("query_pairs", lambda: grid().query_pairs(r)),
        ("query_pairs return_distances", lambda: grid().query_pairs(r, return_distances=True)),
        ("query_pairs radii", lambda: grid().query_pairs(radii=radii)),
        ("iter_pairs", lambda: list(grid().iter_pairs(r, chunk_size=1000))),
        ("query_radius", lambda: grid().query_radius(queries, r)),
        ("query_radius return_distances",
         lambda: grid().query_radius(queries, r, return_distances=True)),
        ("count_radius", lambda: grid().count_radius(queries, r)),
        ("query_knn", lambda: grid().query_knn(queries, 16)),
        ("query_box", lambda: grid().query_box(queries, queries + r)),
        ("periodic build + query_pairs", lambda: Grid(points, cell_size=r, box=1.0)
         .query_pairs(r)),
        ("hash-table build + query_pairs", lambda: Grid(spread, cell_size=r).query_pairs(r)),
        ("NeighborList build + update + pairs", lambda: _neighbor_list_pairs(points, r)),
        # Its kernels take one set of types whatever the letters, list or cell.
        ("molecular neighbor_list", lambda: _molecular_list(points, r)),
        ("molecular list with a skin", lambda: _molecular_skin_list(points, r)),
        # Under `pair_scan.GATHER_MIN_POINTS_PER_CELL` points a cell: the other pair kernel.
        ("few points a cell: build + query_pairs",
         lambda: Grid(points, cell_size=r / 2).query_pairs(r)),
    ]


def parallel_calls(seed: int = 0) -> list[Call]:
    """The main queries once on `N_PARALLEL` points, as (name, call): their multi-threaded
    paths (the pair search of that many points also estimates its regions' rows)."""
    from .grid import Grid

    points = _uniform_points(N_PARALLEL, 3, seed)
    queries = _uniform_points(N_PARALLEL, 3, seed + 1)
    r = _radius(N_PARALLEL)
    spread = points.copy()
    spread[0] = 1e6  # the table of rows, sorted on every thread
    grids = {}

    def build():
        grids["open"] = Grid(points, cell_size=r)

    def grid():
        return grids["open"]

    label = f"{N_PARALLEL:,} points: "
    return [
        (label + "Grid build", build),
        (label + "query_pairs", lambda: grid().query_pairs(r)),
        (label + "iter_pairs", lambda: list(grid().iter_pairs(r, chunk_size=100_000))),
        (label + "query_radius", lambda: grid().query_radius(queries, r)),
        (label + "query_knn", lambda: grid().query_knn(queries, 16)),
        (label + "query_box", lambda: grid().query_box(queries, queries + r)),
        (label + "hash-table build + query_pairs",
         lambda: Grid(spread, cell_size=r).query_pairs(r)),
    ]


def ray_calls(seed: int = 0) -> list[Call]:
    """Ray casts on the batch grid, as (name, call): on small data, then on data large
    enough for the multi-threaded paths."""
    from .grid import Grid

    rng = np.random.default_rng(seed)
    calls = []
    grids = {}
    for n in (N_POINTS, N_PARALLEL):
        rays = f"{n // 10:,} rays on {n:,} points: "
        points = _uniform_points(n, 3, seed)
        origins = _uniform_points(n // 10, 3, seed + 1)
        directions = rng.normal(size=origins.shape)
        r = _radius(n)
        calls += [
            (rays + "Grid build + first hits",
             lambda p=points, o=origins, d=directions, r=r, n=n: grids.setdefault(
                 n, Grid(p, cell_size=r)).query_ray(o, d, r / 4)),
            (rays + "all hits",
             lambda o=origins, d=directions, r=r, n=n: grids[n].query_ray(
                 o, d, r / 4, all_hits=True)),
        ]
    return calls


def dynamic_calls(seed: int = 0) -> list[Call]:
    """The dynamic hash, as (name, call): bulk calls on small data, then on data large
    enough for the multi-threaded paths, then single-object calls and queries."""
    from .dynamic import DynamicHash

    rng = np.random.default_rng(seed + 2)
    calls = []
    hashes = {}
    for n in (N_POINTS, N_PARALLEL):
        boxes = f"{n:,} boxes: DynamicHash "
        lower = rng.random((n, 2)) * np.sqrt(n)
        upper = lower + rng.uniform(0.5, 1.5, (n, 2))

        def insert(lower=lower, upper=upper, n=n):
            hashes[n] = DynamicHash(2.0, n_dims=2, capacity=n)
            hashes[n].insert_many(np.arange(n), lower, upper)

        calls += [
            (boxes + "insert_many", insert),
            (boxes + "query_pairs", lambda n=n: hashes[n].query_pairs()),
            (boxes + "move_many + query_pairs",
             lambda n=n, lower=lower, upper=upper: (
                 hashes[n].move_many(np.arange(0, n, 2), lower[::2] + 0.3, upper[::2] + 0.3),
                 hashes[n].query_pairs())),
            # Few objects changed cells: the kept sort is updated, not redone.
            (boxes + "move_many of 1% + query_pairs",
             lambda n=n, lower=lower, upper=upper: (
                 hashes[n].move_many(np.arange(0, n, 100), lower[::100] + 1.1,
                                     upper[::100] + 1.1),
                 hashes[n].query_pairs())),
            # A query that reads the per-cell lists, which bulk moves may have dropped.
            (boxes + "query_box", lambda n=n, lower=lower, upper=upper: hashes[n].query_box(
                lower[0], upper[0])),
        ]
    hash_ = {}

    def one_by_one():
        hash_["h"] = DynamicHash(2.0, n_dims=3)
        for i in range(10):
            hash_["h"].insert(i, [i, 0.0, 0.0], [i + 1.5, 1.0, 1.0])
        hash_["h"].move(3, [0.5, 0.0, 0.0], [2.0, 1.0, 1.0])  # buffered
        hash_["h"].move(5, [5.0, 0.5, 0.5], radius=0.5)  # placed at once
        hash_["h"].remove(4)

    calls += [
        ("DynamicHash insert, move, remove one by one", one_by_one),
        ("DynamicHash query_box, query_radius, query_knn, query_ray", lambda: (
            hash_["h"].query_box([0, 0, 0], [3, 1, 1]), hash_["h"].query_radius([1, 0, 0], 2.0),
            hash_["h"].query_knn([1, 0, 0], 3), hash_["h"].query_ray([-1, 0.5, 0.5], [1, 0, 0]))),
        ("DynamicHash query_contacts", lambda: hash_["h"].query_contacts()),
    ]
    return calls


#: The groups of calls, each independent of the others (its own data): the unit of work
#: of `spatialhash compile --jobs`. Largest cold compile first (the first two take about
#: as long, the third half that, the last a quarter; ``docs/benchmarks.md``).
CALL_GROUPS = {"batch grid, small": small_calls, "dynamic hash": dynamic_calls,
               "batch grid, multi-threaded": parallel_calls, "rays": ray_calls}


def other_calls(seed: int = 0) -> list[Call]:
    """Ray casts on the batch grid, then the dynamic hash."""
    return ray_calls(seed) + dynamic_calls(seed)


def warm_up_calls(seed: int = 0) -> list[Call]:
    """`small_calls`, `parallel_calls` and `other_calls`, in that order: run them in order
    to compile (or load) every kernel of the library."""
    return small_calls(seed) + parallel_calls(seed) + other_calls(seed)


def kernel_dispatchers(import_all: bool = False) -> Iterator[tuple[str, object]]:
    """spatialhash's compiled kernels as ``("package.module.function", dispatcher)``, from
    the modules of its kernel packages (`KERNEL_PACKAGES`) imported so far, or from all
    of them."""
    from numba.core.registry import CPUDispatcher

    if import_all:
        for package_name in KERNEL_PACKAGES:
            package = importlib.import_module(package_name)
            for info in pkgutil.iter_modules(package.__path__):
                importlib.import_module(f"{package_name}.{info.name}")
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        package_name = name.rpartition(".")[0]
        if package_name not in KERNEL_PACKAGES:
            continue
        short = name.removeprefix("spatialhash.")
        for value in vars(module).values():
            if isinstance(value, CPUDispatcher) and value.__module__ == name:
                yield f"{short}.{value.py_func.__qualname__}", value


def cache_counts() -> dict[str, int]:
    """numba's cache hits (kernels loaded) and misses (kernels compiled) in this process,
    summed over spatialhash's kernels."""
    hits = misses = 0
    for _, dispatcher in kernel_dispatchers():
        hits += sum(dispatcher.stats.cache_hits.values())
        misses += sum(dispatcher.stats.cache_misses.values())
    return {"cache_hits": hits, "cache_misses": misses}
