"""The dynamic hash against pymunk's spatial hash, the rtree package and a batch rebuild.

Run from the repository root::

    python benchmarks/bench_dynamic.py              # 100,000 boxes, 2-D
    python benchmarks/bench_dynamic.py --quick      # 5,000 boxes: a check that it all works
    python benchmarks/bench_dynamic.py --peers pymunk   # skip rtree (minutes per run)

Workloads (2-D, since pymunk is a 2-D engine):

- ``move f + pairs``: 100,000 axis-aligned boxes of mixed sizes (90% with sides 0.25-1.5,
  9% 1-6, 1% 5-30) in a 1000 x 1000 world; each step moves a fraction ``f`` (1%, 10%,
  100%) of them by a small random step (at most 0.5 per axis), then asks for every
  overlapping pair. Ours: `DynamicHash.move_many` + `query_pairs` (cell size 2).
  pymunk: kinematic sensor boxes in a ``Space.use_spatial_hash(2, 4n)``; moved bodies get
  their new position, then ``Space.step`` runs the broad and narrow phase and a
  ``pre_solve`` callback collects the pairs. rtree: an R*-tree; moved boxes are deleted
  and re-inserted, then each box asks ``intersection`` for the boxes it meets.
- ``rebuild``: a bulk move of every box against building the batch `Grid` over the
  100,000 box centres (cell size 2), the cost the move should match. The boxes go back and
  forth between two sets of positions, so that every timed move changes cells as a
  simulation's would. The move is timed alone and with the first query after it that reads
  the bucket lists (a small `query_box`), which rebuilds the lists the move dropped; the
  batch grid has no box pairs, so only its build is timed.
- ``single moves``: 100,000 calls of `DynamicHash.move`, one object each, from Python, then
  one query (which applies the moves `move` buffered: its time counts).
- ``contacts``: the boxes of ``move f + pairs`` at ``n / 10`` and ``n`` boxes; each step moves
  1% or 10% of them (untimed), then asks for the pairs that began and ended since the last
  step: `DynamicHash.query_contacts` against `query_pairs` and the set differences of its
  rows with the last step's, in Python (sets of tuples, the events left as sets), on a twin
  hash. The table gives `query_pairs` alone too (the floor), and the share of the pairs
  that began or ended per step. Medians of three times ``--steps`` steps.

Every peer's pairs are compared with ours (as sets) on the first step of each workload
before anything is timed. Times are medians of ``--steps`` steps (the peers' slowest
workloads use fewer, as printed). Compile time is excluded (one warm-up call first).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numba
import numpy as np

try:
    from . import _common as common
except ImportError:  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as common

from spatialhash import DynamicHash, Grid

WORLD = 1000.0
CELL_SIZE = 2.0
FRACTIONS = (0.01, 0.1, 1.0)


def make_boxes(n: int, seed: int, world: float) -> tuple[np.ndarray, np.ndarray]:
    """Lower corners and sizes of ``n`` boxes of three size classes (see the docstring)."""
    rng = np.random.default_rng(seed)
    kind = rng.random(n)
    side = np.where(kind < 0.9, rng.uniform(0.5, 1.5, n),
                    np.where(kind < 0.99, rng.uniform(2.0, 6.0, n), rng.uniform(10.0, 30.0, n)))
    sizes = side[:, None] * rng.uniform(0.5, 1.0, (n, 2))
    lower = rng.random((n, 2)) * world
    return lower, sizes


def make_steps(n: int, fraction: float, n_steps: int, lower: np.ndarray, seed: int):
    """Per step: the moved ids and the new lower corners of all boxes (moved ones change)."""
    rng = np.random.default_rng(seed)
    steps = []
    current = lower.copy()
    for _ in range(n_steps):
        m = max(1, int(round(fraction * n)))
        ids = np.sort(rng.choice(n, m, replace=False)) if m < n else np.arange(n)
        current = current.copy()
        current[ids] += rng.uniform(-0.5, 0.5, (m, 2))
        steps.append((ids, current))
    return steps


def pair_set(pairs) -> set:
    return {(min(a, b), max(a, b)) for a, b in pairs}


# ---------------------------------------------------------------------- ours
class Ours:
    name = "spatialhash"

    def __init__(self, lower, sizes):
        self.sizes = sizes
        self.hash = DynamicHash(CELL_SIZE, n_dims=2, capacity=len(lower))
        self.hash.insert_many(np.arange(len(lower)), lower, lower + sizes)

    def step(self, ids, lower):
        # `np.take` rather than ``lower[ids]``: NumPy's row indexing took 2.4 ms for
        # 100,000 rows of two columns, ten times as long as `np.take`.
        new_lower = np.take(lower, ids, axis=0)
        self.hash.move_many(ids, new_lower, new_lower + np.take(self.sizes, ids, axis=0))
        return self.hash.query_pairs()


# ---------------------------------------------------------------------- pymunk
class Pymunk:
    name = "pymunk"

    def __init__(self, lower, sizes):
        import pymunk

        self.space = pymunk.Space()
        self.space.use_spatial_hash(CELL_SIZE, 4 * len(lower))
        self.bodies = []
        self.found = []
        for i in range(len(lower)):
            body = pymunk.Body(body_type=pymunk.Body.KINEMATIC)
            body.position = (float(lower[i, 0] + sizes[i, 0] / 2),
                             float(lower[i, 1] + sizes[i, 1] / 2))
            shape = pymunk.Poly.create_box(body, (float(sizes[i, 0]), float(sizes[i, 1])))
            shape.sensor = True
            shape.idx = i
            self.space.add(body, shape)
            self.bodies.append(body)
        self.half = sizes / 2

        def collect(arbiter, space, data):
            a, b = arbiter.shapes
            self.found.append((a.idx, b.idx))

        self.space.on_collision(pre_solve=collect)

    def step(self, ids, lower):
        centers = (np.take(lower, ids, axis=0) + np.take(self.half, ids, axis=0)).tolist()
        bodies = self.bodies
        for i, center in zip(ids.tolist(), centers, strict=True):
            bodies[i].position = center
        self.found = []
        self.space.step(1e-3)
        return np.array(self.found, dtype=np.int64).reshape(-1, 2)


# ---------------------------------------------------------------------- rtree
class Rtree:
    name = "rtree"

    def __init__(self, lower, sizes):
        from rtree import index

        self.sizes = sizes
        self.boxes = np.hstack([lower, lower + sizes]).tolist()
        stream = ((i, tuple(box), None) for i, box in enumerate(self.boxes))
        self.index = index.Index(stream)

    def step(self, ids, lower):
        index = self.index
        boxes = self.boxes
        upper = lower + self.sizes
        for i in ids.tolist():
            index.delete(i, boxes[i])
            box = [float(lower[i, 0]), float(lower[i, 1]), float(upper[i, 0]),
                   float(upper[i, 1])]
            boxes[i] = box
            index.insert(i, box)
        found = []
        for i, box in enumerate(boxes):
            for j in index.intersection(box):
                if j > i:
                    found.append((i, j))
        return np.array(found, dtype=np.int64).reshape(-1, 2)


def time_steps(peer, steps) -> list[float]:
    times = []
    for ids, lower in steps:
        seconds, _ = common.time_call(lambda ids=ids, lower=lower: peer.step(ids, lower))
        times.append(seconds)
    return times


PEERS = {"pymunk": Pymunk, "rtree": Rtree}
#: Importable module of each peer.
PEER_MODULES = {"pymunk": "pymunk", "rtree": "rtree"}


def installed_peers(names) -> tuple[list[str], list[str]]:
    """The peers among ``names`` that can be imported, and those that cannot."""
    import importlib.util

    found = [name for name in names if importlib.util.find_spec(PEER_MODULES[name])]
    return found, [name for name in names if name not in found]


def bench_moves(n: int, n_steps: int, slow_steps: int, seed: int,
                peer_names=tuple(PEERS)) -> tuple[list, bool]:
    lower, sizes = make_boxes(n, seed, WORLD * (n / 100_000) ** 0.5)
    rows = []
    ok = True
    for fraction in FRACTIONS:
        steps = make_steps(n, fraction, 1 + n_steps, lower, seed + 1)
        peers = [Ours(lower, sizes)] + [PEERS[name](lower, sizes) for name in peer_names]
        # The first step (compile, first touches) doubles as the answer check.
        ids, new_lower = steps[0]
        answers = [pair_set(peer.step(ids, new_lower).tolist()) for peer in peers]
        for peer, answer in zip(peers[1:], answers[1:], strict=True):
            same = answer == answers[0]
            ok &= same
            print(f"  check f={fraction:g} {peer.name}: "
                  f"{'identical' if same else 'MISMATCH'} ({len(answer):,} pairs; ours "
                  f"{len(answers[0]):,})")
        ours = common.median(time_steps(peers[0], steps[1:]))
        row = [f"move {fraction:.0%} + pairs", f"{ours * 1e3:.1f}"]
        for peer in peers[1:]:
            count = n_steps if peer.name == "pymunk" else slow_steps
            theirs = common.median(time_steps(peer, steps[1 : 1 + count]))
            row += [f"{theirs * 1e3:.1f}", f"{theirs / ours:.1f}x"]
        rows.append(row)
    return rows, ok


def bench_rebuild(n: int, n_steps: int, seed: int) -> list:
    lower, sizes = make_boxes(n, seed, WORLD * (n / 100_000) ** 0.5)
    ours = Ours(lower, sizes)
    ids, new_lower = make_steps(n, 1.0, 1, lower, seed + 1)[0]
    # Back and forth between the two sets of positions: every move changes cells.
    targets = [(new_lower, new_lower + sizes), (lower, lower + sizes)]
    small_box = (lower[0], lower[0] + 0.1)

    def move(step):
        ours.hash.move_many(ids, *targets[step % 2])

    def move_and_read(step):
        move(step)
        ours.hash.query_box(*small_box)

    move_and_read(0)  # warm-up: compiles or loads the kernels
    moves = [common.time_call(lambda step=step: move(step))[0] for step in range(1, n_steps + 1)]
    moves_read = [common.time_call(lambda step=step: move_and_read(step))[0]
                  for step in range(n_steps + 1, 2 * n_steps + 1)]
    centers = lower + sizes / 2
    Grid(centers[:100], CELL_SIZE)
    builds = [common.time_call(lambda: Grid(centers, CELL_SIZE))[0] for _ in range(n_steps)]
    return [["move_many of all boxes (no query)", f"{common.median(moves) * 1e3:.1f}"],
            ["move_many of all boxes, then a query that reads the bucket lists",
             f"{common.median(moves_read) * 1e3:.1f}"],
            ["batch Grid build over the centres", f"{common.median(builds) * 1e3:.1f}"]]


def set_difference(pairs: np.ndarray, before: set) -> tuple[set, set, set]:
    """The pairs that began and ended since ``before`` (a set of tuples), in Python: the
    rows of ``pairs`` as a set of tuples, two set differences; and that set."""
    now = set(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist(), strict=True))
    return now - before, before - now, now


def bench_contacts(sizes, n_steps: int, seed: int) -> tuple[list, bool]:
    rows = []
    ok = True
    for n in sizes:
        lower, box_sizes = make_boxes(n, seed, WORLD * (n / 100_000) ** 0.5)
        for fraction in FRACTIONS[:2]:
            steps = make_steps(n, fraction, 1 + n_steps, lower, seed + 1)
            ours, twin = Ours(lower, box_sizes), Ours(lower, box_sizes)
            ours.hash.query_contacts()  # every pair begins: the reference for the steps
            before = set_difference(twin.hash.query_pairs(), set())[2]
            times = {"contacts": [], "pairs": [], "diff": []}
            changed = []
            for step, (ids, new_lower) in enumerate(steps):
                new_upper = np.take(new_lower, ids, axis=0) + np.take(box_sizes, ids, axis=0)
                for peer in (ours, twin):
                    peer.hash.move_many(ids, np.take(new_lower, ids, axis=0), new_upper)
                seconds, contacts = common.time_call(ours.hash.query_contacts)
                pair_seconds, pairs = common.time_call(twin.hash.query_pairs)
                diff_seconds, (began, ended, now) = common.time_call(
                    lambda pairs=pairs, before=before: set_difference(pairs, before))
                before = now
                if step == 0:  # compile and first touches; the answer check
                    same = (set(map(tuple, contacts.began.tolist())) == began
                            and set(map(tuple, contacts.ended.tolist())) == ended)
                    ok &= same
                    print(f"  check contacts n={n:,} f={fraction:g} set difference: "
                          f"{'identical' if same else 'MISMATCH'} ({len(began):,} began, "
                          f"{len(ended):,} ended of {len(now):,} pairs)")
                    continue
                times["contacts"].append(seconds)
                times["pairs"].append(pair_seconds)
                times["diff"].append(pair_seconds + diff_seconds)
                changed.append((len(began) + len(ended)) / max(len(now), 1))
            ours_ms = common.median(times["contacts"]) * 1e3
            theirs_ms = common.median(times["diff"]) * 1e3
            rows.append([f"{n:,} boxes, move {fraction:.0%}", f"{common.median(changed):.1%}",
                         f"{common.median(times['pairs']) * 1e3:.1f}", f"{ours_ms:.1f}",
                         f"{theirs_ms:.1f}", f"{theirs_ms / ours_ms:.1f}x"])
    return rows, ok


def bench_single_moves(n: int, seed: int) -> list:
    lower, sizes = make_boxes(n, seed, WORLD * (n / 100_000) ** 0.5)
    hash_ = DynamicHash(CELL_SIZE, n_dims=2, capacity=n)
    hash_.insert_many(np.arange(n), lower, lower + sizes)
    rng = np.random.default_rng(seed + 2)
    moved = lower + rng.uniform(-0.5, 0.5, (n, 2))
    new_lower = moved.tolist()
    new_upper = (moved + sizes).tolist()
    ids = rng.permutation(n).tolist()
    move = hash_.move
    hash_.move(0, new_lower[0], new_upper[0])
    hash_.query_cell(new_lower[0])  # loads the kernels that apply moves and query
    start = time.perf_counter()
    for i in ids:
        move(i, new_lower[i], new_upper[i])
    # `move` buffers its moves until something reads the hash: a query applies them, and
    # its time counts.
    found = hash_.query_cell(new_lower[ids[-1]])
    seconds = time.perf_counter() - start
    assert ids[-1] in found.tolist()
    points = DynamicHash(CELL_SIZE, n_dims=3, capacity=n)
    centers = np.zeros((n, 3))
    centers[:, :2] = lower
    points.insert_many(np.arange(n), centers)
    targets = (centers + rng.uniform(-0.5, 0.5, (n, 3)) * [1, 1, 0]).tolist()
    move = points.move
    points.move(0, targets[0])
    points.query_cell(targets[0])
    start = time.perf_counter()
    for i in ids:
        move(i, targets[i])
    found = points.query_cell(targets[ids[-1]])
    point_seconds = time.perf_counter() - start
    assert ids[-1] in found.tolist()
    return [["single box moves, 2-D", f"{seconds / n * 1e6:.2f}", f"{n / seconds:,.0f}"],
            ["single point moves, 3-D", f"{point_seconds / n * 1e6:.2f}",
             f"{n / point_seconds:,.0f}"]]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per workload")
    parser.add_argument("--slow-steps", type=int, default=1,
                        help="timed steps for rtree (seconds per step)")
    parser.add_argument("--quick", action="store_true", help="n = 5,000")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help="comma-separated peers to run (default: %(default)s; rtree "
                             "takes minutes per run, '' runs none)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    n = 5_000 if args.quick else args.n
    print(f"n = {n:,} boxes, {numba.get_num_threads()} numba threads, "
          f"{common.usable_cores()} cores ({common.cpu_model()})")
    peer_names = [name for name in args.peers.split(",") if name]
    unknown = sorted(set(peer_names) - set(PEERS))
    if unknown:
        parser.error(f"--peers must name peers among {sorted(PEERS)}; got {unknown}.")
    peer_names, missing = installed_peers(peer_names)
    for name in missing:
        print(f"{name} is not installed: skipped (pip install -e '.[bench]' installs it)")
    print(f"before the run, {common.speed_probe()}")
    steal = common.StealMeter()
    rows, ok = bench_moves(n, args.steps, args.slow_steps, args.seed, peer_names)
    stolen_moves = steal.share()
    print()
    header = ["workload (per step)", "spatialhash (ms)"]
    for name in peer_names:
        header += [f"{name} (ms)", "ratio"]
    print(common.markdown_table(header, rows))
    print()
    print(common.markdown_table(["bulk move against a batch rebuild", "ms"],
                                bench_rebuild(n, args.steps, args.seed)))
    print()
    print(common.markdown_table(["one object per call", "us per call", "calls per second"],
                                bench_single_moves(n, args.seed)))
    print()
    # Three times the steps: a step is short, and the medians of the small scene's few
    # milliseconds are otherwise swayed by a loaded machine's time slices.
    contact_rows, contacts_ok = bench_contacts((n // 10, n), 3 * args.steps, args.seed)
    ok &= contacts_ok
    print()
    print(common.markdown_table(
        ["contact events (per step)", "pairs changed", "query_pairs (ms)",
         "query_contacts (ms)", "query_pairs + set diff (ms)", "ratio"], contact_rows))
    print()
    print(f"CPU stolen by the host (the share of the machine's CPU time given to other "
          f"guests): {common.format_share(stolen_moves)} during the move + pairs workloads, "
          f"{common.format_share(steal.share())} over the whole run")
    print(f"after the run, {common.speed_probe()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
