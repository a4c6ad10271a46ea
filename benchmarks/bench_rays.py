"""Ray casts against spheres: ``Grid.query_ray`` on a million rays and a million spheres.

Run from the repository root::

    python benchmarks/bench_rays.py            # 1e6 spheres, 1e6 rays, 3 timed runs
    python benchmarks/bench_rays.py --quick    # 20,000 of each: a check that it all works

Method
------
- Data (3-D): sphere centres uniform in the unit cube, radii uniform in
  ``[RADIUS_MIN, RADIUS_MAX]`` (0.001 to 0.004 for a million spheres, scaled by
  ``(1e6 / n) ** (1/3)`` for other counts); ray origins uniform in the cube, directions isotropic
  (normal deviates, not normalized). The grid's cell size is ``--cell-factor`` times the
  largest radius.
- Timed: the grid build; the build and a first-hit query; the build and an all-hits query
  (CSR, rows sorted by distance). Medians of ``--repeat`` calls, after one untimed call
  that compiles the kernels or loads them from numba's disk cache (its time is printed).
- Checked before timing: a random subsample of ``--check-rays`` rays against every sphere
  by brute force in NumPy, with the kernels' arithmetic, so the answers must be identical
  (first hit and every hit).
- Peer: there is no standard NumPy or SciPy ray caster. pymunk (Chipmunk2D) casts segments
  against circles in 2-D (``Space.segment_query_first``, one Python call a segment); it is
  timed on a 2-D problem of ``--pymunk-n`` circles and ``--pymunk-m`` segments, with both
  its bounding-box tree and its spatial hash (cells of twice the largest radius), against
  ``Grid.query_ray`` with ``max_distance`` on the same segments (default cell size). Its
  answers are compared with ours first (segments starting inside a circle are left out:
  Chipmunk does not report those).
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

from spatialhash import Grid
from spatialhash._validation import as_rays

RADIUS_MIN = 0.001
RADIUS_MAX = 0.004


# ---------------------------------------------------------------------- data
def radius_range(n: int) -> tuple[float, float]:
    """The smallest and largest radius for ``n`` spheres: `RADIUS_MIN` and `RADIUS_MAX`
    scaled with the spacing of the centres, so that fewer spheres keep the same number of
    spheres a cell (and the grid dense)."""
    scale = (1e6 / n) ** (1.0 / 3.0)
    return RADIUS_MIN * scale, RADIUS_MAX * scale


def make_data(n: int, m: int, seed: int) -> tuple:
    """``(centers, radii, origins, directions)``: ``n`` spheres and ``m`` rays (see the
    module docstring)."""
    rng = np.random.default_rng(seed)
    centers = rng.random((n, 3))
    radii = rng.uniform(*radius_range(n), n)
    origins = rng.random((m, 3))
    directions = rng.normal(size=(m, 3))
    return centers, radii, origins, directions


# ---------------------------------------------------------------------- brute force
def brute_force(origins3, units3, centers3, radii, max_distance=np.inf):
    """First hits and all hits of each ray against every sphere (the kernels' arithmetic,
    see ``tests/ray_oracles.py``). Returns ``(first_index, first_t, rows)``, ``rows`` a list
    of (indices, distances) sorted by distance, then index."""
    first_index, first_t, rows = [], [], []
    r2 = radii * radii
    for o, d in zip(origins3, units3, strict=True):
        m = o[np.newaxis, :] - centers3
        c = (m[:, 0] * m[:, 0] + m[:, 1] * m[:, 1] + m[:, 2] * m[:, 2]) - r2
        b = m[:, 0] * d[0] + m[:, 1] * d[1] + m[:, 2] * d[2]
        q = m - b[:, np.newaxis] * d[np.newaxis, :]
        disc = r2 - (q[:, 0] * q[:, 0] + q[:, 1] * q[:, 1] + q[:, 2] * q[:, 2])
        with np.errstate(invalid="ignore", divide="ignore"):
            t = c / (np.sqrt(disc) - b)
        t = np.where(c <= 0, 0.0, np.where((b < 0) & (disc >= 0), t, np.inf))
        t = np.where(t <= max_distance, t, np.inf)
        hit = np.flatnonzero(np.isfinite(t))
        order = np.lexsort((hit, t[hit]))
        rows.append((hit[order], t[hit[order]]))
        first_index.append(hit[order[0]] if hit.size else -1)
        first_t.append(t[hit[order[0]]] if hit.size else np.inf)
    return np.array(first_index), np.array(first_t), rows


def check_subsample(grid, centers3, radii, origins, directions, first, hits, n_check, seed):
    """Compare ``n_check`` random rays of our answers with brute force; raise on mismatch."""
    rng = np.random.default_rng(seed)
    sample = rng.choice(origins.shape[0], size=min(n_check, origins.shape[0]), replace=False)
    origins3, units3 = as_rays(origins[sample], directions[sample], 3)
    index, t, rows = brute_force(origins3, units3, centers3, radii)
    assert np.array_equal(first.indices[sample], index), "first-hit indices differ"
    assert np.array_equal(first.distances[sample], t), "first-hit distances differ"
    for row, (indices, distances) in zip(sample, rows, strict=True):
        lo, hi = hits.indptr[row], hits.indptr[row + 1]
        assert np.array_equal(hits.indices[lo:hi], indices), f"hits of ray {row} differ"
        assert np.array_equal(hits.distances[lo:hi], distances), f"hits of ray {row} differ"
    n_hits = sum(len(indices) for indices, _ in rows)
    return (f"identical on {len(sample)} random rays ({n_hits} hits) against all "
            f"{len(radii):,} spheres")


# ---------------------------------------------------------------------- pymunk
def pymunk_space(pymunk, centers, radii, spatial_hash, cell):
    space = pymunk.Space()
    if spatial_hash:
        space.use_spatial_hash(cell, 10 * len(radii))
    body = space.static_body
    shapes = [pymunk.Circle(body, float(r), (float(x), float(y)))
              for (x, y), r in zip(centers, radii, strict=True)]
    for i, shape in enumerate(shapes):
        shape.index = i
    space.add(*shapes)
    return space


def pymunk_first_hits(pymunk, space, starts, ends):
    query = space.segment_query_first
    everything = pymunk.ShapeFilter()
    indices = np.full(len(starts), -1)
    alphas = np.full(len(starts), np.inf)
    for j, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        info = query(start, end, 0.0, everything)
        if info is not None:
            indices[j] = info.shape.index
            alphas[j] = info.alpha
    return indices, alphas


def pymunk_comparison(args, results):
    try:
        import pymunk
    except ImportError:
        print("pymunk not importable: no 2-D peer timed (pip install pymunk).")
        return True
    rng = np.random.default_rng(args.seed + 1)
    n, m = args.pymunk_n, args.pymunk_m
    centers = rng.random((n, 2))
    # A mean free path of about 0.05: 1 / (n * 2 * mean radius).
    radii = rng.uniform(0.5e-4, 1.5e-4, n) * (1e5 / n)
    starts = rng.random((m, 2))
    angles = rng.uniform(0.0, 2.0 * np.pi, m)
    length = args.segment_length
    ends = starts + length * np.column_stack([np.cos(angles), np.sin(angles)])
    cell = 2.0 * float(radii.max())

    def ours():
        grid = Grid(centers)  # the default cell size: about four circles a cell
        return grid.query_ray(starts, ends - starts, radii, max_distance=length)

    mine = ours()
    mine_times = common.time_repeated(ours, args.repeat)
    print(f"\n2-D segments, {n:,} circles, {m:,} segments of length {length}: "
          f"ours {common.median(mine_times):.4f} s (build + query)")
    ok = True
    # Segments starting inside a circle: Chipmunk reports no hit for that circle.
    fair = mine.distances > 0
    for spatial_hash in (False, True):
        name = "pymunk spatial hash" if spatial_hash else "pymunk bounding-box tree"
        start = time.perf_counter()
        space = pymunk_space(pymunk, centers, radii, spatial_hash, cell)
        build = time.perf_counter() - start
        start = time.perf_counter()
        indices, alphas = pymunk_first_hits(pymunk, space, starts, ends)
        query = time.perf_counter() - start
        lengths = np.hypot(*(ends - starts).T)
        distances = alphas * lengths
        same = fair & (mine.indices == indices)
        close = np.allclose(distances[same], mine.distances[same], rtol=1e-9, atol=1e-12)
        differing = int(np.count_nonzero(fair & (mine.indices != indices)))
        # A different first circle is accepted only where the two are at the same distance
        # up to rounding (two circles entered at one point).
        tie = np.isclose(distances, mine.distances, rtol=1e-9, atol=1e-12)
        unexplained = int(np.count_nonzero(fair & (mine.indices != indices) & ~tie))
        check_ok = close and unexplained == 0
        ok &= check_ok
        status = "same" if check_ok else "MISMATCH"
        print(f"  {name}: build {build:.3f} s, {m:,} queries {query:.3f} s "
              f"(one call each, timed once); answers {status} on {int(fair.sum()):,} segments "
              f"({differing} differ at a tie); ratio to ours "
              f"{(build + query) / common.median(mine_times):.1f}x")
        results.append((f"2-D {name}", build + query))
    return ok


# ---------------------------------------------------------------------- main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="spheres")
    parser.add_argument("--m", type=int, default=1_000_000, help="rays")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="n = m = 20,000")
    parser.add_argument("--cell-factor", type=float, default=2.0,
                        help="cell size in units of the largest radius")
    parser.add_argument("--check-rays", type=int, default=100)
    parser.add_argument("--pymunk-n", type=int, default=100_000)
    parser.add_argument("--pymunk-m", type=int, default=20_000)
    parser.add_argument("--segment-length", type=float, default=0.25)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.quick:
        args.n = args.m = 20_000
        args.pymunk_n, args.pymunk_m = 20_000, 2_000
    if args.threads:
        numba.set_num_threads(args.threads)
    centers, radii, origins, directions = make_data(args.n, args.m, args.seed)
    radius_min, radius_max = radius_range(args.n)
    cell = args.cell_factor * radius_max
    print(f"{args.n:,} spheres (radii {radius_min:.4g} to {radius_max:.4g}), {args.m:,} rays, "
          f"cell size {cell:.4g}, {numba.get_num_threads()} threads, numba {numba.__version__}")

    def build():
        return Grid(centers, cell)

    def first_hit():
        return build().query_ray(origins, directions, radii)

    def all_hits():
        return build().query_ray(origins, directions, radii, all_hits=True)

    cold = {}
    for name, func in (("build", build), ("first", first_hit), ("all", all_hits)):
        cold[name], _ = common.time_call(func)
    grid = build()
    first = grid.query_ray(origins, directions, radii)
    hits = grid.query_ray(origins, directions, radii, all_hits=True)
    print(f"rays hitting something: {int(first.hit.sum()):,}; hits in all: "
          f"{hits.indices.size:,}")
    print("check:", check_subsample(grid, centers, radii, origins, directions, first, hits,
                                    args.check_rays, args.seed))
    results = []
    for name, func, key in (("build", build, "build"), ("build + first hit", first_hit, "first"),
                            ("build + all hits", all_hits, "all")):
        times = common.time_repeated(func, args.repeat)
        results.append((name, common.median(times)))
        print(f"{name:20s} median {common.median(times):.3f} s over {args.repeat} "
              f"(first call in this process {cold[key]:.3f} s)")
    ok = pymunk_comparison(args, results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
