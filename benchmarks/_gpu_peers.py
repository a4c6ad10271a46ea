"""The peers of `bench_gpu.py`: one adapter per library, each doing one of the benchmark's
tasks on the device of spatialhash's Warp engine, from points in host memory to an
answer in host memory.

A peer says which modules it needs, which tasks it does and on which devices; `Peer.skip`
gives the one line that says why it cannot run (not installed, no path for the device),
so that `bench_gpu.py` never leaves one out silently. Each adapter takes a `Problem` and
returns the answer in one of three shapes, which `bench_gpu.py` turns into `_common`'s
normal forms and checks against spatialhash's before it times anything:

- ``pairs``: ``(first, second)``, each pair within ``r`` once, in either order;
- ``radius``: ``(rows, columns)``, every point ``j`` within ``r`` of point ``i``, ``i``
  itself included (as in ``Grid.query_radius`` of the points themselves);
- ``knn16``: a `Knn` of the 16 nearest of every point, nearest first, the point itself
  included (at distance 0).

Peers and their conventions
---------------------------
- **Warp** ``HashGrid`` (float64): its cells of size ``r``, a count kernel, Warp's
  exclusive scan and a fill kernel (``HashGrid`` itself only returns candidates).
- **vesin** ``NeighborList`` on torch tensors: a CPU tensor takes vesin's CPU path, a CUDA
  tensor its CUDA path. An open box (``periodic=False``; the box is then unused). Its
  cutoff is strict (``d < r``; spatialhash's is ``d <= r``); the full list leaves a point
  out of its own row, so ``radius`` adds it.
- **ALCHEMI** toolkit-ops' cell list (``nvalchemiops.torch.neighbors.neighbor_list`` with
  ``method="cell_list"``, Warp kernels, float64), without a cell: it builds an open one
  around the points. It keeps at most ``max_neighbors`` per point, so the adapter passes
  the largest row of spatialhash's answer (`Problem.max_row`), which makes it exact. Its
  cutoff is strict; its full list leaves a point out of its own row.
- **torch-cluster** ``radius_graph`` (``pairs``: its directed edges, those with
  ``source < target`` kept), ``radius`` (``radius`` of the points against themselves)
  and ``knn`` (``knn16``: its pairs ordered by their float64 distance), with
  ``max_num_neighbors`` from `Problem.max_row` (it keeps at most that many, chosen at
  random), its default ``num_workers`` (one thread on the CPU). Its CPU path searches a
  k-d tree with a strict cutoff; its CUDA kernels compare every pair, so it is not run
  above `BRUTE_FORCE_POINTS`.
- **FAISS** ``IndexFlatL2`` (exact brute force) on its CPU index only: its GPU index has no
  adapter here, having never run on a GPU. FAISS works in float32: rounding coordinates
  below 1 to float32 moves a point by up to ``sqrt(3) * 2**-25`` and a distance by twice
  that, about 1.03e-7, and two neighbours that close to a tie may change places. Its
  answer is checked with ``atol`` `FAISS_ATOL` (that bound, doubled for a swap and
  rounded up for FAISS's float32 sums) and `_common.compare_knn`'s default ``rtol``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

#: ``atol`` of the check of FAISS's k-nearest distances (float32; see the module's notes).
FAISS_ATOL = 2.5e-7
#: The most points a peer that compares every pair runs at: ten billion pairs.
BRUTE_FORCE_POINTS = 100_000
#: Neighbours of the ``knn16`` task.
K = 16


class Problem(NamedTuple):
    """One task's input, as every adapter takes it.

    Attributes
    ----------
    points : ndarray of float64, shape (n, 3)
        The points, in host memory.
    r : float
        The radius of ``pairs`` and ``radius``.
    device : str
        spatialhash's device name: ``"warp-cpu"``, ``"cuda"`` or ``"cuda:N"``.
    max_row : int
        The most neighbours of any point within ``r`` (the point itself left out), from
        spatialhash's answer: the capacity that makes the capped peers exact.
    """

    points: np.ndarray
    r: float
    device: str
    max_row: int


class Knn(NamedTuple):
    """The 16 nearest of every point: ``indices`` (int) and ``distances`` (float64), both
    of shape (n, 16), nearest first."""

    indices: np.ndarray
    distances: np.ndarray


def warp_name(device: str) -> str:
    """Warp's (and torch's) name of a spatialhash device."""
    return "cpu" if device == "warp-cpu" else device


@dataclass(frozen=True)
class Peer:
    """A library that does some of the benchmark's tasks.

    Attributes
    ----------
    name : str
        Its name on the command line (``bench_gpu.py --peers``).
    label : str
        Its name in the table.
    requires : tuple of str
        The modules it imports.
    tasks : dict
        Its adapter (`Problem` in, answer out) for each task it does.
    cuda : bool
        It has an adapter for a CUDA device (every peer runs on ``"warp-cpu"``).
    torch_cuda : bool
        On a CUDA device it takes torch tensors there, so it needs torch's CUDA build.
    knn_atol : float or None
        ``atol`` of the check of its k-nearest distances (None: `_common.compare_knn`'s).
    max_points : int or None
        The most points it runs at (None: no limit), for a peer whose work grows as the
        square of the points somewhere; `quadratic` says where.
    """

    name: str
    label: str
    requires: tuple[str, ...]
    tasks: dict[str, Callable[[Problem], object]] = field(repr=False)
    cuda: bool = True
    torch_cuda: bool = False
    knn_atol: float | None = None
    max_points: int | None = None
    quadratic: str = ""

    def missing(self) -> list[str]:
        """The modules of `requires` that cannot be imported."""
        return [name for name in self.requires if importlib.util.find_spec(name) is None]

    def skip(self, device: str) -> str | None:
        """Why this peer cannot run on ``device`` (one line), or None where it can."""
        missing = self.missing()
        if missing:
            return f"not installed ({', '.join(missing)})"
        if device == "warp-cpu":
            return None
        if not self.cuda:
            return f"no adapter for {device}: its GPU path has never run here"
        if self.torch_cuda:
            import torch

            if not torch.cuda.is_available():
                return f"torch {torch.__version__} has no CUDA device"
        return None

    def too_many(self, n: int) -> str | None:
        """Why this peer does not run at ``n`` points, or None where it does."""
        if self.max_points is None or n <= self.max_points:
            return None
        return f"not run above {self.max_points:,} points ({self.quadratic})"


# ---------------------------------------------------------------------- Warp HashGrid
_WARP_KERNELS = {}


def warp_kernels():
    """The count and fill kernels of the ``HashGrid`` peer, made on first use (importing
    Warp only when the peer runs)."""
    if _WARP_KERNELS:
        return _WARP_KERNELS
    import warp as wp

    @wp.kernel
    def count(grid: wp.uint64, points: wp.array(dtype=wp.vec3d), r: wp.float64,
              half: wp.bool, counts: wp.array(dtype=wp.int32)):
        i = wp.hash_grid_point_id(grid, wp.tid())
        p = points[i]
        n = wp.int32(0)
        for j in wp.hash_grid_query(grid, p, r):
            d = points[j] - p
            if (not half or j > i) and wp.dot(d, d) <= r * r:
                n += 1
        counts[i] = n

    @wp.kernel
    def fill(grid: wp.uint64, points: wp.array(dtype=wp.vec3d), r: wp.float64,
             half: wp.bool, starts: wp.array(dtype=wp.int32),
             out: wp.array2d(dtype=wp.int32)):
        i = wp.hash_grid_point_id(grid, wp.tid())
        p = points[i]
        k = starts[i]
        for j in wp.hash_grid_query(grid, p, r):
            d = points[j] - p
            if (not half or j > i) and wp.dot(d, d) <= r * r:
                out[k, 0] = i
                out[k, 1] = j
                k += 1

    _WARP_KERNELS.update(count=count, fill=fill)
    return _WARP_KERNELS


def warp_hash_grid(problem: Problem, half: bool) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``(i, j)`` of Warp's ``HashGrid``: ``i < j`` with ``half``, else every ``j``
    (``i`` itself included)."""
    import warp as wp

    kernels = warp_kernels()
    name = warp_name(problem.device)
    n = problem.points.shape[0]
    r = problem.r
    on_device = wp.array(problem.points, dtype=wp.vec3d, device=name)
    dim = int(min(256, max(1, round((n / 4) ** (1 / 3)))))
    grid = wp.HashGrid(dim, dim, dim, device=name, dtype=wp.float64)
    grid.build(on_device, r)
    counts = wp.empty(n, dtype=wp.int32, device=name)
    wp.launch(kernels["count"], dim=n, inputs=[grid.id, on_device, r, half, counts],
              device=name)
    starts = wp.empty(n, dtype=wp.int32, device=name)
    wp.utils.array_scan(counts, starts, inclusive=False)
    total = int(starts.numpy()[-1] + counts.numpy()[-1]) if n else 0
    out = wp.empty((total, 2), dtype=wp.int32, device=name)
    wp.launch(kernels["fill"], dim=n, inputs=[grid.id, on_device, r, half, starts, out],
              device=name)
    rows = out.numpy()
    return rows[:, 0], rows[:, 1]


# ---------------------------------------------------------------------- torch-based peers
def to_torch(problem: Problem):
    """The points as a float64 torch tensor on the problem's device."""
    import torch

    return torch.from_numpy(problem.points).to(warp_name(problem.device))


def with_own_rows(first, second, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A full list of pairs (torch tensors) on the host, each point ``i`` added to its
    own row (``radius``'s rows hold the point itself)."""
    own = np.arange(n, dtype=np.int64)
    return (np.concatenate([first.cpu().numpy().astype(np.int64), own]),
            np.concatenate([second.cpu().numpy().astype(np.int64), own]))


def vesin_pairs(problem: Problem, full: bool):
    import vesin

    points = to_torch(problem)
    box = points.new_zeros((3, 3))
    first, second = vesin.NeighborList(cutoff=problem.r, full_list=full).compute(
        points, box, False, "ij")
    if full:
        return with_own_rows(first, second, problem.points.shape[0])
    return first.cpu().numpy(), second.cpu().numpy()


def alchemi_pairs(problem: Problem, full: bool):
    from nvalchemiops.torch.neighbors import neighbor_list

    pairs = neighbor_list(to_torch(problem), problem.r, method="cell_list",
                          max_neighbors=max(1, problem.max_row), half_fill=not full,
                          return_neighbor_list=True)[0]
    if full:
        return with_own_rows(pairs[0], pairs[1], problem.points.shape[0])
    return pairs[0].cpu().numpy(), pairs[1].cpu().numpy()


def torch_cluster_pairs(problem: Problem):
    import torch_cluster

    edges = torch_cluster.radius_graph(to_torch(problem), problem.r,
                                       max_num_neighbors=max(1, problem.max_row))
    edges = edges[:, edges[0] < edges[1]]
    return edges[0].cpu().numpy(), edges[1].cpu().numpy()


def torch_cluster_radius(problem: Problem):
    import torch_cluster

    points = to_torch(problem)
    rows, columns = torch_cluster.radius(points, points, problem.r,
                                         max_num_neighbors=problem.max_row + 1)
    return rows.cpu().numpy(), columns.cpu().numpy()


def torch_cluster_knn(problem: Problem) -> Knn:
    import torch_cluster

    points = to_torch(problem)
    rows, columns = torch_cluster.knn(points, points, K)
    order = rows.argsort(stable=True)
    columns = columns[order].reshape(-1, K)
    distances = (points[columns] - points[:, None, :]).norm(dim=2)
    distances, slots = distances.sort(dim=1, stable=True)
    return Knn(columns.gather(1, slots).cpu().numpy(), distances.cpu().numpy())


# ---------------------------------------------------------------------- FAISS
def faiss_knn(problem: Problem) -> Knn:
    import faiss

    points = problem.points.astype(np.float32)
    index = faiss.IndexFlatL2(points.shape[1])
    index.add(points)
    squared, indices = index.search(points, K)
    return Knn(indices, np.sqrt(np.maximum(squared.astype(np.float64), 0.0)))


PEERS = (
    Peer("hashgrid", "Warp HashGrid", ("warp",),
         {"pairs": lambda problem: warp_hash_grid(problem, half=True),
          "radius": lambda problem: warp_hash_grid(problem, half=False)}),
    Peer("vesin", "vesin", ("vesin", "torch"),
         {"pairs": lambda problem: vesin_pairs(problem, full=False),
          "radius": lambda problem: vesin_pairs(problem, full=True)},
         torch_cuda=True),
    Peer("alchemi", "ALCHEMI cell list", ("nvalchemiops", "torch"),
         {"pairs": lambda problem: alchemi_pairs(problem, full=False),
          "radius": lambda problem: alchemi_pairs(problem, full=True)},
         torch_cuda=True),
    Peer("torch-cluster", "torch-cluster", ("torch_cluster", "torch"),
         {"pairs": torch_cluster_pairs, "radius": torch_cluster_radius,
          "knn16": torch_cluster_knn},
         torch_cuda=True, max_points=BRUTE_FORCE_POINTS,
         quadratic="its CUDA kernels compare every pair"),
    Peer("faiss", "FAISS IndexFlatL2", ("faiss",), {"knn16": faiss_knn}, cuda=False,
         knn_atol=FAISS_ATOL, max_points=BRUTE_FORCE_POINTS,
         quadratic="brute force"),
)
#: GPU peers without an adapter here, and why.
NO_ADAPTER = {
    "cuML": "GPU only; its wheels need another numba and the CUDA libraries",
}
