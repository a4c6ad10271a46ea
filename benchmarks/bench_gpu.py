"""The Warp engine (`Grid(..., device="cuda")`) against its peers on the same device, and
against spatialhash's CPU engine on the same machine.

Run from the repository root::

    python benchmarks/bench_gpu.py                       # "cuda" where Warp finds a GPU
    python benchmarks/bench_gpu.py --sizes 100000 1000000 10000000
    python benchmarks/bench_gpu.py --device warp-cpu --sizes 20000   # the kernels on the CPU
    python benchmarks/bench_gpu.py --peers vesin alchemi             # only these peers

Without a GPU the default device is ``warp-cpu`` (Warp's kernels compiled for the CPU) on
small sizes: a check that the script and its peers run, not a GPU figure.

Data and tasks
--------------
Uniform points in the unit cube and clustered points (`_common.clustered_points`), 3-D, a
radius for 30 expected neighbours on the uniform points. Each task starts from the points
in host memory and ends with the answer in host memory as NumPy arrays, as
`Grid(points, ..., device=...)` returns them:

- ``pairs``: build the grid and every pair within ``r`` (``query_pairs``);
- ``radius``: build, then every point's neighbours within ``r`` as CSR rows
  (``query_radius`` of the points themselves);
- ``knn16``: build, then every point's 16 nearest (``query_knn``);
- ``rays``: build, then every hit of ``n / 10`` rays (random origins in the cube, random
  directions) against the points as spheres of radius ``r / 2`` (``query_ray`` with
  ``all_hits``).

Contenders
----------
- spatialhash on ``--device``;
- spatialhash's CPU engine (numba, every thread of this machine);
- the peers of `_gpu_peers` (its notes give each one's conventions), on the same device
  as ours, each for the tasks it does:

  ========================  ======================  ===================================
  peer                      tasks                   device
  ========================  ======================  ===================================
  Warp ``HashGrid``         pairs, radius           Warp's (count and fill kernels)
  vesin                     pairs, radius           torch tensors there: its CPU or
                                                    CUDA path
  ALCHEMI toolkit-ops'      pairs, radius           torch tensors there (Warp kernels);
  cell list                                         ``max_neighbors`` from our answer
  torch-cluster             pairs, radius, knn16    torch tensors there;
                                                    ``max_num_neighbors`` from our answer
  FAISS ``IndexFlatL2``     knn16                   ``warp-cpu`` only (float32)
  ========================  ======================  ===================================

  A peer that cannot run (not installed, no torch CUDA build, no adapter for the device)
  is listed with the reason at the top of the output. cuML has no adapter (GPU only).

The CPU engine is the only contender of ``rays``, whose answer must be its bytes. On
``warp-cpu`` the peers run their CPU paths, so that every adapter and its check run
without a GPU (`tests/test_bench_gpu.py` runs the script so); the times there are no GPU
figures, nor a fair race between CPU codes.

Method
------
Before anything is timed, each contender's answer is compared with ours (``_common``'s
checks: pairs and rows as sorted keys, equal, or differing only at distance ``r`` within
rounding, as vesin's and ALCHEMI's strict cutoffs may; k-nearest distances allclose and
indices equal except at ties, FAISS's float32 distances within
`_gpu_peers.FAISS_ATOL`; ray rows, byte for byte). A mismatch is printed, marked in the
table, and makes the script exit with status 1; so does a peer that raises (its row holds
the error), so that no contender goes unchecked unseen. A peer whose work grows as the
square of the points is not run above `_gpu_peers.BRUTE_FORCE_POINTS` (its row says so).
Each contender makes one untimed call first (Warp, and ALCHEMI on Warp, compile or load
their kernels there). Times are medians over ``--repeat`` calls, each ended by
``wp.synchronize_device``; ratio = the contender's time / ours (above 1: the Warp engine
is faster).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

try:
    from . import _common as common
    from . import _gpu_peers as peers
except ImportError:  # run as a script, or loaded by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as common
    import _gpu_peers as peers

from spatialhash import Grid

TASKS = ("pairs", "radius", "knn16", "rays")


def default_device() -> str:
    """``"cuda"`` where Warp finds a GPU, else ``"warp-cpu"``."""
    import warp as wp

    wp.init()
    return "cuda" if wp.get_cuda_device_count() > 0 else "warp-cpu"


def synchronize(device: str) -> None:
    import warp as wp

    wp.synchronize_device(peers.warp_name(device))


# ---------------------------------------------------------------------- spatialhash
def ours(points: np.ndarray, r: float, task: str, device: str):
    """``task`` by spatialhash on ``device`` (``"cpu"``: the CPU engine)."""
    grid = Grid(points, cell_size=r, device=device)
    if task == "pairs":
        return grid.query_pairs(r)
    if task == "radius":
        return grid.query_radius(points, r)
    if task == "rays":
        return grid.query_ray(*ray_inputs(points.shape[0]), r / 2, all_hits=True)
    return grid.query_knn(points, 16)


@functools.cache
def ray_inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``rays`` task's origins and directions for ``n`` points (made once, untimed)."""
    rng = np.random.default_rng(n)
    m = max(1, n // 10)
    return rng.random((m, 3)), rng.normal(size=(m, 3))


def answer_keys(result, task: str, n: int):
    """The normal form of an answer for `_common`'s checks."""
    if task == "pairs":
        return common.pair_keys(result.indices[:, 0], result.indices[:, 1], n,
                                unordered=True)
    if task == "radius":
        return common.csr_keys(result.indptr, result.indices, n)
    return result


# ---------------------------------------------------------------------- one row
def check(task, ours_result, theirs, points, r, knn_atol=None):
    n = points.shape[0]
    if task == "rays":
        same = all(np.asarray(getattr(ours_result, name)).tobytes()
                   == np.asarray(getattr(theirs, name)).tobytes()
                   for name in ("indptr", "indices", "distances"))
        hits = f"{len(ours_result.indices):,} hits"
        return common.Check(same, f"identical bytes ({hits})" if same else f"MISMATCH ({hits})")
    if task == "knn16":
        tolerance = {} if knn_atol is None else {"atol": knn_atol}
        return common.compare_knn(ours_result.indices, ours_result.distances,
                                  theirs.indices, theirs.distances, points, points,
                                  **tolerance)
    mine = answer_keys(ours_result, task, n)
    return common.compare_keys(mine, theirs, r, points, points)


def timed(call, device: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return common.median(times)


def largest_row(result, task: str, n: int) -> int:
    """The most neighbours within ``r`` of any point (itself left out) in our answer to
    ``pairs`` or ``radius`` (0 for the other tasks)."""
    if n == 0 or task not in ("pairs", "radius"):
        return 0
    if task == "pairs":
        return int(np.bincount(result.indices.ravel(), minlength=n).max())
    return int(np.diff(result.indptr).max()) - 1


def peer_keys(answer, task: str, n: int):
    """The normal form of a peer's answer (see `_gpu_peers`) for `_common`'s checks."""
    if task in ("pairs", "radius"):
        first, second = answer
        return common.pair_keys(first, second, n, unordered=task == "pairs")
    return answer


def run_row(points: np.ndarray, task: str, device: str, repeat: int,
            contenders=peers.PEERS) -> tuple:
    """Our time and each contender's ``(label, seconds, check)`` on one data set: the CPU
    engine's, then those of the peers of ``contenders`` that do ``task``.

    A peer above its `_gpu_peers.Peer.max_points` gets a row that says so; one that
    raises gets a row with the error, which fails the run as a mismatch does.
    """
    n = points.shape[0]
    r = common.radius_for_neighbors_3d(n)
    mine = ours(points, r, task, device)
    our_s = timed(lambda: ours(points, r, task, device), device, repeat)

    def measure(label, call, keys, knn_atol=None):
        outcome = check(task, mine, keys(call()), points, r, knn_atol)
        seconds = timed(call, device, repeat) if outcome.ok else float("nan")
        return label, seconds, outcome

    results = [measure("spatialhash, CPU engine", lambda: ours(points, r, task, "cpu"),
                       lambda result: answer_keys(result, task, n))]
    problem = peers.Problem(points, r, device, largest_row(mine, task, n))
    for peer in contenders:
        if task not in peer.tasks:
            continue
        reason = peer.too_many(n)
        if reason is not None:
            results.append((peer.label, float("nan"), common.Check(True, reason)))
            continue
        try:
            results.append(measure(peer.label, functools.partial(peer.tasks[task], problem),
                                   lambda answer: peer_keys(answer, task, n),
                                   peer.knn_atol))
        except Exception as error:  # a peer's failure goes into its row
            message = f"{type(error).__name__}: {error}".splitlines()[0][:160]
            results.append((peer.label, float("nan"), common.Check(False,
                                                                   f"ERROR: {message}")))
    return our_s, results


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", help="cuda, cuda:N or warp-cpu (default: cuda where "
                                         "Warp finds a GPU, else warp-cpu)")
    parser.add_argument("--sizes", type=int, nargs="+",
                        help="points (default: 1e5 1e6 1e7 on a GPU, 20,000 on warp-cpu)")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--data", nargs="+", choices=("uniform", "clustered"),
                        default=["uniform", "clustered"])
    parser.add_argument("--peers", nargs="*", choices=[peer.name for peer in peers.PEERS],
                        help="the peers to run where they can (default: all; none: "
                             "--peers with no name)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if importlib.util.find_spec("warp") is None:
        print("bench_gpu needs warp-lang: pip install -e '.[gpu]'", file=sys.stderr)
        return 2
    device = args.device or default_device()
    on_gpu = device.startswith("cuda")
    sizes = args.sizes or ([100_000, 1_000_000, 10_000_000] if on_gpu else [20_000])
    print(f"device: {device}; CPU: {common.cpu_model()}, {common.usable_cores()} cores")
    contenders = []
    chosen = [peer for peer in peers.PEERS if args.peers is None or peer.name in args.peers]
    for peer in chosen:
        reason = peer.skip(device)
        if reason is None:
            contenders.append(peer)
        tasks = ", ".join(peer.tasks)
        print(f"{peer.label}: " + (f"{tasks} on {device}" if reason is None
                                   else f"skipped: {reason}"))
    for label, reason in peers.NO_ADAPTER.items():
        print(f"{label}: no adapter here ({reason})")
    rows, failed = [], False
    for n in sizes:
        for data in args.data:
            points = (common.uniform_points(n, 3, args.seed) if data == "uniform"
                      else common.clustered_points(n, args.seed))
            for task in args.tasks:
                our_s, results = run_row(points, task, device, args.repeat, contenders)
                for label, seconds, outcome in results:
                    failed |= not outcome.ok
                    ratio = seconds / our_s if outcome.ok else float("nan")
                    rows.append([f"{n:,}", data, task, common.format_seconds(our_s), label,
                                 common.format_seconds(seconds), f"{ratio:.2f}x",
                                 outcome.message])
                print(f"{n:,} {data} {task}: done", file=sys.stderr, flush=True)
    print(common.markdown_table(
        ["points", "data", "task", f"spatialhash, {device} (s)", "contender",
         "contender (s)", "ratio", "answer"], rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
