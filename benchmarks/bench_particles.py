"""How the particle demo's step time grows with the particle count, per contact search.

Run from the repository root::

    python benchmarks/bench_particles.py
    python benchmarks/bench_particles.py --counts 5000 20000 --steps 50

For each count, a `ParticleSystem` (radii from 1 to 4, the demo's lattice start and
density) runs ``--settle`` untimed steps, then each search runs ``--steps`` timed steps on a
copy of that same state (`particles.time_searches`): before any timing, every search must
return the same candidate pairs as the first one (identical sorted keys), and one untimed
step per search pays compile or cache load. Medians per step, wall clock, single-threaded
searches (the library runs inputs under 20,000 points on the calling thread).

The default state is a box without gravity (``--gravity 0``): particles keep their random
initial velocities and collide, at the same density for every count, so the per-particle
cost is comparable across counts. With gravity, particles fall at the speed cap (one radius
a step) and a box of 100,000 takes thousands of steps to settle; the demo itself times the
settled pile of 5,000.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import numba
import numpy as np

from spatialhash.demos import particles

COUNTS = (5_000, 10_000, 20_000, 50_000, 100_000)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=COUNTS)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per search")
    parser.add_argument("--settle", type=int, default=20, help="untimed steps before timing")
    parser.add_argument("--gravity", type=float, default=0.0)
    parser.add_argument("--searches", nargs="+", choices=particles.SEARCHES,
                        default=list(particles.SEARCHES))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"python {platform.python_version()}, numpy {np.__version__}, numba "
          f"{numba.__version__}, {numba.get_num_threads()} numba threads, "
          f"{platform.processor() or platform.machine()}")
    print(f"gravity {args.gravity}, {args.settle} settle steps, {args.steps} timed steps, "
          "medians per step\n")
    rows = []
    for count in args.counts:
        system = particles.ParticleSystem(count, seed=args.seed, gravity=args.gravity)
        start = time.perf_counter()
        for _ in range(args.settle):
            system.step()
        settle = time.perf_counter() - start
        rows += particles.time_searches(system, args.searches, args.steps)
        print(f"{count:,} particles: settled in {settle:.1f} s, candidate pairs checked "
              f"equal across {', '.join(args.searches)}", flush=True)
    print()
    print(particles.format_table(rows))
    print("\nGrowth with the hash search (time per step per 1,000 particles):\n")
    print("| particles | search (us / 1k) | whole step (us / 1k) | step vs first count |")
    print("|---:|---:|---:|---:|")
    hash_rows = [row for row in rows if row.search == "hash"]
    for row in hash_rows:
        microseconds_per_1k = 1e3 / row.n_particles * 1e6
        print(f"| {row.n_particles:,} | {row.search_seconds * microseconds_per_1k:.1f} | "
              f"{row.step_seconds * microseconds_per_1k:.1f} | "
              f"{row.step_seconds / hash_rows[0].step_seconds:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
