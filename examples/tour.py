"""A tour of spatialhash: every query on a million random points, checked against SciPy.

Run from the repository root::

    python examples/tour.py              # 1,000,000 points, about a minute on 2 cores
    python examples/tour.py --n 100000   # a quicker look

The tour builds one `Grid` over random points in the unit cube and asks it, in turn, for
all close pairs, the neighbours of query points within a radius (and just their number),
the 16 nearest points of query points, the points inside boxes, and the close pairs in a
periodic box. Every answer is compared with ``scipy.spatial.cKDTree`` on the same data:
pairs and neighbour lists must be identical, k-nearest distances equal to rounding. The
script prints a table of timings (single runs, wall clock, index build included where it
says so) and exits with status 1 if any answer differs.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial import cKDTree

from spatialhash import Grid
from spatialhash.grid._cpu_engine import PARALLEL_MIN_POINTS, PARALLEL_MIN_QUERIES

NEIGHBORS_PER_POINT = 30
K_NEAREST = 16


@dataclass
class Tour:
    """What the tour measured and found, step by step.

    Attributes
    ----------
    timings : list of (str, float, float)
        Step name, our seconds, cKDTree's seconds.
    failures : list of str
        One line per answer that differed from cKDTree's.
    """

    timings: list = field(default_factory=list)
    failures: list = field(default_factory=list)

    def record(self, step: str, ours_s: float, scipy_s: float, same: bool, what: str) -> None:
        """Store a step's timings and print its outcome."""
        self.timings.append((step, ours_s, scipy_s))
        verdict = "same as cKDTree" if same else "DIFFERENT from cKDTree"
        print(f"   {what}: {verdict}  (spatialhash {ours_s:.2f} s, cKDTree {scipy_s:.2f} s)")
        if not same:
            self.failures.append(f"{step}: {what}")


def timed(func):
    """``(seconds, result)`` of one call of ``func``."""
    start = time.perf_counter()
    result = func()
    return time.perf_counter() - start, result


# ---------------------------------------------------------------------- comparisons
def pair_keys(first, second, n_columns: int) -> np.ndarray:
    """One sorted int64 key ``first * n_columns + second`` per pair, to compare as sets."""
    keys = np.asarray(first, dtype=np.int64) * n_columns + np.asarray(second, dtype=np.int64)
    keys.sort()
    return keys


def csr_keys(neighbors, n_columns: int) -> np.ndarray:
    """Keys of the (row, point) entries of a `Neighbors` result."""
    rows = np.repeat(np.arange(len(neighbors), dtype=np.int64), neighbors.counts)
    return pair_keys(rows, neighbors.indices, n_columns)


def list_keys(rows_of_indices, n_columns: int) -> np.ndarray:
    """Keys of cKDTree's answer: an object array holding a list of indices per row."""
    counts = np.fromiter(map(len, rows_of_indices), dtype=np.int64,
                         count=len(rows_of_indices))
    flat = np.fromiter(itertools.chain.from_iterable(rows_of_indices), dtype=np.int64,
                       count=int(counts.sum()))
    rows = np.repeat(np.arange(len(rows_of_indices), dtype=np.int64), counts)
    return pair_keys(rows, flat, n_columns)


def same_nearest(ours, scipy_distances, scipy_indices, points, queries) -> bool:
    """Distances equal to rounding; indices equal except between points equally far."""
    if not np.allclose(ours.distances, scipy_distances, rtol=1e-12, atol=0.0):
        return False
    rows, slots = np.nonzero(ours.indices != scipy_indices)
    their_points = points[scipy_indices[rows, slots]]
    their_distances = np.linalg.norm(their_points - queries[rows], axis=1)
    return bool(np.allclose(their_distances, ours.distances[rows, slots], rtol=1e-12, atol=0))


# ---------------------------------------------------------------------- steps
def warm_up() -> float:
    """Run every query once, so that compiling is not timed later.

    The data are just large enough for the parallel kernels, which the tour's million
    points use (smaller inputs run other, single-threaded kernels).
    """
    start = time.perf_counter()
    points = np.random.default_rng(1).random((PARALLEL_MIN_POINTS, 3))
    queries = points[:PARALLEL_MIN_QUERIES]
    r = 0.03
    grid = Grid(points, cell_size=r)
    grid.query_pairs(r)
    grid.query_radius(queries, r)
    grid.count_radius(queries, r)
    grid.query_knn(queries, K_NEAREST)
    grid.query_box(queries, queries + r)
    Grid(points, cell_size=r, box=1.0).query_pairs(r)
    return time.perf_counter() - start


def tour_pairs(tour: Tour, grid: Grid, tree: cKDTree, r: float) -> None:
    """All pairs closer than ``r``."""
    n = grid.n_points
    print("\n2. All pairs closer than r: grid.query_pairs(r)")
    ours_s, pairs = timed(lambda: grid.query_pairs(r))
    scipy_s, theirs = timed(lambda: tree.query_pairs(r, output_type="ndarray"))
    same = np.array_equal(pair_keys(pairs.indices[:, 0], pairs.indices[:, 1], n),
                          pair_keys(theirs[:, 0], theirs[:, 1], n))
    tour.record("query_pairs", ours_s, scipy_s, same,
                f"{len(pairs):,} pairs, each once with i < j")


def tour_radius(tour: Tour, grid: Grid, tree: cKDTree, queries: np.ndarray, r: float) -> None:
    """Neighbours within ``r`` of each query, then only their number."""
    n = grid.n_points
    print(f"\n3. Neighbours within r of {len(queries):,} query points: "
          "grid.query_radius(queries, r)")
    ours_s, neighbors = timed(lambda: grid.query_radius(queries, r))
    scipy_s, theirs = timed(lambda: tree.query_ball_point(queries, r, workers=-1))
    same = np.array_equal(csr_keys(neighbors, n), list_keys(theirs, n))
    tour.record("query_radius", ours_s, scipy_s, same,
                f"{len(neighbors.indices):,} neighbours in CSR rows (indptr, indices)")
    print("   Only the counts: grid.count_radius(queries, r)")
    ours_s, counts = timed(lambda: grid.count_radius(queries, r))
    scipy_s, their_counts = timed(
        lambda: tree.query_ball_point(queries, r, workers=-1, return_length=True))
    tour.record("count_radius", ours_s, scipy_s, np.array_equal(counts, their_counts),
                f"{counts.mean():.1f} neighbours per query on average")


def tour_knn(tour: Tour, grid: Grid, tree: cKDTree, points: np.ndarray,
             queries: np.ndarray) -> None:
    """The ``K_NEAREST`` nearest points of each query."""
    print(f"\n4. The {K_NEAREST} nearest points of {len(queries):,} query points: "
          f"grid.query_knn(queries, k={K_NEAREST})")
    ours_s, nearest = timed(lambda: grid.query_knn(queries, K_NEAREST))
    scipy_s, (distances, indices) = timed(lambda: tree.query(queries, k=K_NEAREST, workers=-1))
    same = same_nearest(nearest, distances, indices, points, queries)
    tour.record("query_knn", ours_s, scipy_s, same,
                f"indices and distances of shape {nearest.indices.shape}, nearest first")


def tour_boxes(tour: Tour, grid: Grid, tree: cKDTree, rng: np.random.Generator,
               n_boxes: int) -> None:
    """Points inside cubes; cKDTree answers the same with the max-norm ball (p = inf)."""
    n = grid.n_points
    print(f"\n5. Points inside {n_boxes:,} boxes: grid.query_box(lower, upper)")
    centres = rng.random((n_boxes, 3))
    half_widths = rng.uniform(0.005, 0.02, n_boxes)
    lower, upper = centres - half_widths[:, None], centres + half_widths[:, None]
    ours_s, inside = timed(lambda: grid.query_box(lower, upper))
    scipy_s, theirs = timed(
        lambda: tree.query_ball_point(centres, half_widths, p=np.inf, workers=-1))
    same = np.array_equal(csr_keys(inside, n), list_keys(theirs, n))
    tour.record("query_box", ours_s, scipy_s, same,
                f"{len(inside.indices):,} points found (cubes, so cKDTree can answer too)")


def tour_periodic(tour: Tour, points: np.ndarray, r: float) -> None:
    """All close pairs in a periodic unit box (minimum image), build included."""
    n = len(points)
    print("\n6. Pairs in a periodic unit box: Grid(points, cell_size=r, box=1.0)"
          ".query_pairs(r)")
    ours_s, pairs = timed(lambda: Grid(points, cell_size=r, box=1.0).query_pairs(r))
    scipy_s, theirs = timed(
        lambda: cKDTree(points, boxsize=1.0).query_pairs(r, output_type="ndarray"))
    same = np.array_equal(pair_keys(pairs.indices[:, 0], pairs.indices[:, 1], n),
                          pair_keys(theirs[:, 0], theirs[:, 1], n))
    tour.record("periodic build + query_pairs", ours_s, scipy_s, same,
                f"{len(pairs):,} pairs, some across the faces of the box")


# ---------------------------------------------------------------------- summary
def print_summary(tour: Tour) -> None:
    """The timing table and the verdict."""
    print("\nTimings (one run each, wall clock; cKDTree's query_pairs is single-threaded)\n")
    name_width = max(len(step) for step, _, _ in tour.timings)
    print(f"   {'step':<{name_width}}  spatialhash (s)  cKDTree (s)  speed-up")
    for step, ours_s, scipy_s in tour.timings:
        print(f"   {step:<{name_width}}  {ours_s:>15.3f}  {scipy_s:>11.3f}  "
              f"{scipy_s / ours_s:>7.1f}x")
    if tour.failures:
        print("\nSome answers differ from cKDTree:")
        for failure in tour.failures:
            print(f"   {failure}")
    else:
        print("\nall answers match cKDTree")


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="points (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    """Run the tour; returns 1 if any answer differs from cKDTree's."""
    args = parse_args(argv)
    n = args.n
    rng = np.random.default_rng(args.seed)
    points = rng.random((n, 3))
    n_queries = min(n, 100_000)  # cKDTree's radius queries are slow; a subset shows enough
    queries = rng.random((n_queries, 3))
    r = (3 * NEIGHBORS_PER_POINT / (4 * np.pi * n)) ** (1 / 3)
    print(f"spatialhash tour: {n:,} random points in the unit cube (seed {args.seed}), "
          f"r = {r:.4g} (about {NEIGHBORS_PER_POINT} neighbours per point)")
    print(f"\nCompiling the kernels (first run only; numba caches them on disk): "
          f"{warm_up():.1f} s")

    tour = Tour()
    print("\n1. Build the grid once, with cells as wide as the radius: "
          "grid = Grid(points, cell_size=r)")
    ours_s, grid = timed(lambda: Grid(points, cell_size=r))
    scipy_s, tree = timed(lambda: cKDTree(points))
    tour.timings.append(("build", ours_s, scipy_s))
    print(f"   {grid}\n   (spatialhash {ours_s:.2f} s, cKDTree {scipy_s:.2f} s)")

    tour_pairs(tour, grid, tree, r)
    tour_radius(tour, grid, tree, queries, r)
    tour_knn(tour, grid, tree, points, queries)
    tour_boxes(tour, grid, tree, rng, n_boxes=1000)
    tour_periodic(tour, points, r)
    print_summary(tour)
    return 1 if tour.failures else 0


if __name__ == "__main__":
    sys.exit(main())
