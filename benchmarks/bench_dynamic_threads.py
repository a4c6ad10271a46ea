"""A writer and a reader sharing one `DynamicHash` on two threads, under each kind of lock.

Run from the repository root::

    python benchmarks/bench_dynamic_threads.py                  # 200 writer rounds per lock
    python benchmarks/bench_dynamic_threads.py --rounds 2000    # the rounds of the report
    python benchmarks/bench_dynamic_threads.py --locks rlock    # the lock of old only

The hash holds ``--n`` boxes (default 20,000) in 3-D, about one per cell. The hash's lock
is replaced, before each run, by the lock named: ``rlock`` (`threading.RLock`, the lock the
hash had before) or ``fair`` (`spatialhash._fair_lock.FairLock`, the one it has now). The
hash takes its lock with ``acquire()`` and ``release()``; before the fair lock it took it
with ``with``, whose cost is the ``with lock`` column of the ``rlock`` row.

- ``threads``: a writer thread runs ``--rounds`` rounds, each a `DynamicHash.move_many` of
  10% of the boxes (back and forth between two sets of positions), an `insert_many` of 20
  new boxes and a `remove_many` of them; a reader thread loops `query_box`, `query_radius`
  and `query_knn` (k = 8) around random points until the writer is done. The writer stops
  early after ``--max-seconds``, so a starved writer ends the run too (its rounds are
  printed). For each lock: the writer's rounds per second, the reader's calls per second,
  the reader's calls per writer round, and the longest wait of each thread: the most time
  between the ends of two consecutive writer rounds (a round itself included), and between
  two consecutive reader calls. The first row runs each thread alone, for scale.
- ``uncontended``: one thread, the locks taken in turn, each measured ``--repeat`` times,
  medians (and the lowest) per call: an acquire and release of the lock itself
  (``lock.acquire(); lock.release()``, as `DynamicHash` takes it, and ``with lock:``), a
  `DynamicHash.move` of one object (a 3-D point, in the hash of ``--n`` boxes; the query
  that applies the buffered moves is in the timing) and a `query_radius` on a hash of 100
  boxes. CPU time of the calling thread (``time.thread_time``), garbage collection off.

Compile time is excluded: every call runs once before the timing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

try:
    from . import _common as common
except ImportError:  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as common

from spatialhash import DynamicHash

CELL_SIZE = 1.0
MOVED_FRACTION = 0.1
N_INSERTED = 20
N_SMALL = 100


def lock_kinds(names: list[str]) -> dict[str, Callable[[], object]]:
    """Lock factories by name; ``fair`` imported only when asked for."""
    kinds: dict[str, Callable[[], object]] = {}
    for name in names:
        if name == "rlock":
            kinds[name] = threading.RLock
        elif name == "fair":
            from spatialhash._fair_lock import FairLock

            kinds[name] = FairLock
        else:
            raise SystemExit(f"`--locks` must name rlock or fair; got {name!r}.")
    return kinds


class Scene:
    """The hash of ``n`` boxes and the writer's and reader's inputs."""

    def __init__(self, n: int, seed: int):
        rng = np.random.default_rng(seed)
        side = n ** (1 / 3) * CELL_SIZE  # about one box per cell
        self.lower = rng.random((n, 3)) * side
        self.upper = self.lower + rng.uniform(0.2, 0.8, (n, 3)) * CELL_SIZE
        self.world = DynamicHash(CELL_SIZE, n_dims=3, capacity=n + N_INSERTED)
        self.world.insert_many(np.arange(n), self.lower, self.upper)
        n_moved = max(int(n * MOVED_FRACTION), 1)
        self.moved = np.sort(rng.choice(n, n_moved, replace=False))
        step = rng.uniform(-0.3, 0.3, (n_moved, 3))
        self.targets = [(self.lower[self.moved], self.upper[self.moved]),
                        (self.lower[self.moved] + step, self.upper[self.moved] + step)]
        self.new_ids = np.arange(n, n + N_INSERTED)
        self.new_lower = rng.random((N_INSERTED, 3)) * side
        self.new_upper = self.new_lower + 0.5 * CELL_SIZE
        centers = rng.random((256, 3)) * side
        self.centers = centers.tolist()
        self.boxes = list(zip((centers - 2.0).tolist(), (centers + 2.0).tolist(), strict=True))
        self.round_number = 0

    def writer_round(self) -> None:
        lower, upper = self.targets[(self.round_number + 1) % 2]
        self.round_number += 1
        self.world.move_many(self.moved, lower, upper)
        self.world.insert_many(self.new_ids, self.new_lower, self.new_upper)
        self.world.remove_many(self.new_ids)

    def reader_call(self, number: int) -> None:
        kind = number % 3
        if kind == 0:
            self.world.query_box(*self.boxes[number % len(self.boxes)])
        elif kind == 1:
            self.world.query_radius(self.centers[number % len(self.centers)], 2.0)
        else:
            self.world.query_knn(self.centers[number % len(self.centers)], 8)


def run_threads(scene: Scene, rounds: int, max_seconds: float, *, writer: bool = True,
                reader: bool = True, reader_calls: int = 0) -> dict:
    """One run of the writer and the reader (or either alone, the reader for
    ``reader_calls`` calls); counts, rates and longest waits."""
    done = threading.Event()
    writer_ends: list[float] = []
    reader_gaps = [0.0]
    counts = {"reader": 0}
    failures: list[str] = []

    def write() -> None:
        deadline = time.perf_counter() + max_seconds
        try:
            writer_ends.append(time.perf_counter())
            for _ in range(rounds):
                scene.writer_round()
                writer_ends.append(time.perf_counter())
                if writer_ends[-1] > deadline:
                    break
        except Exception as error:  # printed, and the run fails
            failures.append(f"writer: {error!r}")
        finally:
            done.set()

    def read() -> None:
        number, last = 0, time.perf_counter()
        longest = 0.0
        try:
            while not done.is_set() and (writer or number < reader_calls):
                scene.reader_call(number)
                number += 1
                now = time.perf_counter()
                longest = max(longest, now - last)
                last = now
        except Exception as error:
            failures.append(f"reader: {error!r}")
        counts["reader"] = number
        reader_gaps[0] = longest

    threads = ([threading.Thread(target=write)] if writer else []) + (
        [threading.Thread(target=read)] if reader else [])
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    if failures:
        raise RuntimeError("; ".join(failures))
    n_rounds = len(writer_ends) - 1
    return {"rounds": n_rounds, "reader_calls": counts["reader"], "seconds": seconds,
            "writer_wait": max(np.diff(writer_ends), default=0.0),
            "reader_wait": reader_gaps[0]}


def bench_threads(scene: Scene, kinds: dict, rounds: int, max_seconds: float) -> list:
    rows = []
    alone_writer = run_threads(scene, rounds, max_seconds, reader=False)
    alone_reader = run_threads(scene, rounds, max_seconds, writer=False,
                               reader_calls=3 * rounds)
    rows.append(["each thread alone", f"{alone_writer['rounds']:,}",
                 f"{alone_writer['rounds'] / alone_writer['seconds']:,.1f}",
                 f"{alone_reader['reader_calls'] / alone_reader['seconds']:,.0f}", "",
                 f"{alone_writer['writer_wait'] * 1e3:,.1f}",
                 f"{alone_reader['reader_wait'] * 1e3:,.1f}", ""])
    for name, make in kinds.items():
        scene.world._lock = make()
        result = run_threads(scene, rounds, max_seconds)
        stopped = "" if result["rounds"] == rounds else "stopped at --max-seconds"
        rows.append([name, f"{result['rounds']:,}",
                     f"{result['rounds'] / result['seconds']:,.1f}",
                     f"{result['reader_calls'] / result['seconds']:,.0f}",
                     f"{result['reader_calls'] / max(result['rounds'], 1):,.1f}",
                     f"{result['writer_wait'] * 1e3:,.1f}",
                     f"{result['reader_wait'] * 1e3:,.1f}", stopped])
    return rows


def per_call(func: Callable[[], object], number: int) -> float:
    """CPU seconds of this thread per call, over ``number`` calls."""
    start = time.thread_time()
    for _ in range(number):
        func()
    return (time.thread_time() - start) / number


def bench_uncontended(scene: Scene, kinds: dict, repeat: int) -> list:
    rng = np.random.default_rng(1)
    n = scene.lower.shape[0]
    points = DynamicHash(CELL_SIZE, n_dims=3, capacity=n)
    centers = (scene.lower + scene.upper) / 2
    points.insert_many(np.arange(n), centers)
    targets = (centers + rng.uniform(-0.3, 0.3, (n, 3))).tolist()
    order = rng.permutation(n)[:2_000].tolist()
    small = DynamicHash(CELL_SIZE, n_dims=3)
    small_lower = rng.random((N_SMALL, 3)) * 5.0
    small.insert_many(np.arange(N_SMALL), small_lower, small_lower + 0.5)
    points.move(order[0], targets[order[0]])
    points.query_cell(targets[order[0]])  # compiles the moves and the query
    small.query_radius([2.5, 2.5, 2.5], 1.0)

    def moves() -> None:
        move = points.move
        for i in order:
            move(i, targets[i])
        points.query_cell(targets[order[-1]])  # applies the buffered moves

    def radius() -> None:
        small.query_radius([2.5, 2.5, 2.5], 1.0)

    locks = {name: make() for name, make in kinds.items()}

    def explicit(lock) -> Callable[[], None]:
        def call() -> None:
            lock.acquire()
            lock.release()
        return call

    def entered(lock) -> Callable[[], None]:
        def call() -> None:
            with lock:
                pass
        return call

    times: dict = {name: {"acquire": [], "with": [], "move": [], "radius": []}
                   for name in kinds}
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            for name in kinds:  # alternately, so that a slow phase of the machine hits all
                lock = locks[name]
                points._lock = small._lock = lock
                times[name]["acquire"].append(per_call(explicit(lock), 20_000))
                times[name]["with"].append(per_call(entered(lock), 20_000))
                times[name]["move"].append(per_call(moves, 1) / len(order))
                times[name]["radius"].append(per_call(radius, 500))
    finally:
        if was_enabled:
            gc.enable()
    rows = []
    for name in kinds:
        row = [name]
        for column in ("acquire", "with", "move", "radius"):
            values = times[name][column]
            scale = 1e9 if column in ("acquire", "with") else 1e6
            row.append(f"{statistics.median(values) * scale:,.{0 if scale == 1e9 else 2}f} "
                       f"({min(values) * scale:,.{0 if scale == 1e9 else 2}f})")
        rows.append(row)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="boxes in the hash")
    parser.add_argument("--rounds", type=int, default=200, help="writer rounds per lock")
    parser.add_argument("--max-seconds", type=float, default=120.0,
                        help="the writer stops after this long, rounds done or not")
    parser.add_argument("--locks", default="rlock,fair",
                        help="comma-separated locks: rlock, fair (default: %(default)s)")
    parser.add_argument("--mode", choices=("all", "threads", "uncontended"), default="all")
    parser.add_argument("--repeat", type=int, default=21,
                        help="measurements per lock in the uncontended mode")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    kinds = lock_kinds([name for name in args.locks.split(",") if name])
    print(f"n = {args.n:,} boxes, 3-D, {common.usable_cores()} cores ({common.cpu_model()}), "
          f"Python {sys.version.split()[0]}, switch interval {sys.getswitchinterval():g}")
    scene = Scene(args.n, args.seed)
    scene.writer_round()  # compiles the writer's calls
    for number in range(3):
        scene.reader_call(number)
    if args.mode in ("all", "threads"):
        print()
        print(common.markdown_table(
            ["lock", "writer rounds", "rounds/s", "reader calls/s", "reader calls per round",
             "longest writer wait (ms)", "longest reader wait (ms)", ""],
            bench_threads(scene, kinds, args.rounds, args.max_seconds)))
    if args.mode in ("all", "uncontended"):
        print()
        print(common.markdown_table(
            ["lock (one thread)", "acquire + release (ns)", "with lock (ns)",
             "move, one point (us)", "query_radius, 100 boxes (us)"],
            bench_uncontended(scene, kinds, args.repeat)))
        print("medians of --repeat measurements (the lowest in brackets), CPU time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
