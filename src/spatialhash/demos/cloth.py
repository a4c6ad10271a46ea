"""``spatialhash demo cloth``: the run of the cloth demo and the figures it prints.

`run` checks the options, compiles (or loads) the kernels on a tiny cloth, steps a `Cloth`
(the simulation, in `_cloth_simulation`) for ``--frames`` frames while drawing every
``--render-every``-th one (`_cloth_view`), prints where the time went and whether the cloth
passed through itself, and writes the GIF. `add_arguments` adds its options to the
``spatialhash demo cloth`` parser.

This module is the demo's import path: tests, ``benchmarks/bench_contention.py`` and
``benchmarks/bench_ab.py`` (which also imports it from the revisions it compares against)
take `Cloth` from here, and the tests the interpenetration thresholds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numba

from .. import _config
from ._cloth_simulation import INTERPENETRATION_FRACTION, INTERPENETRATION_REST_DISTANCE, Cloth
from ._cloth_view import Renderer
from ._options import add_threads_argument, missing_modules_problem, option_problem

__all__ = ["INTERPENETRATION_FRACTION", "INTERPENETRATION_REST_DISTANCE", "Cloth",
           "add_arguments", "run"]

#: The command, for messages.
COMMAND = "spatialhash demo cloth"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the cloth demo's options to ``parser`` (``spatialhash demo cloth``)."""
    parser.add_argument("--size", type=int, default=100,
                        help="particles per side of the square cloth (default 100)")
    parser.add_argument("--frames", "--steps", type=int, default=120,
                        help="frames to simulate, at 60 per simulated second; each frame is "
                             "--substeps solver steps (default 120)")
    parser.add_argument("--substeps", type=int, default=10,
                        help="XPBD substeps per frame (default 10)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the initial jitter, which decides how it folds (at "
                             "least 0)")
    parser.add_argument("--output", default="cloth.gif",
                        help="animation file to write (default cloth.gif; 'none' for none)")
    parser.add_argument("--no-self-collision", action="store_true",
                        help="let the cloth pass through itself, for comparison")
    parser.add_argument("--render-every", type=int, default=2,
                        help="draw every Nth frame into the animation (default 2)")
    parser.add_argument("--headless", action="store_true",
                        help="accepted for symmetry with the particle demo; the cloth demo "
                             "opens no window")
    add_threads_argument(parser, "the spatial hash's queries and the solver's parallel "
                         "kernels")


def run(args: argparse.Namespace) -> int:
    """Run the cloth demo from parsed options, print its timing; returns the exit status."""
    problem = option_problem(args, {"size": 2, "frames": 1, "substeps": 1, "render_every": 1})
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    write = str(args.output).lower() != "none"
    needs = {"PIL": f"for --output {args.output}"} if write else {}
    problem = missing_modules_problem(COMMAND, {**needs, "tqdm": ""})
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2

    start = time.perf_counter()
    _warm_up(write)
    warm_up = time.perf_counter() - start
    cloth = Cloth(args.size, substeps=args.substeps, seed=args.seed,
                  self_collision=not args.no_self_collision, n_threads=args.threads)
    renderer = Renderer(cloth) if write else None
    with _config.threads(cloth.n_threads):
        n_threads = numba.get_num_threads()
    print(f"cloth of {cloth.size} x {cloth.size} particles, {args.frames} frames at "
          f"{cloth.fps:g} fps, {cloth.substeps} substeps, self-collision "
          f"{'on' if cloth.self_collision else 'off'}, {n_threads} "
          f"thread{'s' if n_threads > 1 else ''} (--threads); kernels compiled or loaded "
          f"from the cache in {warm_up:.2f} s")
    energy_start = cloth.energy()
    frames, render_seconds, simulate_seconds, cpu_seconds = _simulate(cloth, renderer, args)

    n = args.frames
    per_frame = simulate_seconds / n
    print(f"per frame: neighbour search {1e3 * cloth.times.search / n:.2f} ms "
          f"({cloth.times.n_builds / n:.2f} contact-list builds, "
          f"{cloth.times.n_refreshes / n:.2f} refreshes of the inner list), solve "
          f"{1e3 * cloth.times.solve / n:.2f} ms, total {1e3 * per_frame:.2f} ms "
          f"(real time: {1e3 / cloth.fps:.2f} ms)")
    print(f"simulated {cloth.time:.2f} s in {simulate_seconds:.2f} s of wall time: "
          f"{cloth.time / simulate_seconds:.2f}x real time (CPU time of the simulation, "
          f"all threads: {cpu_seconds:.2f} s)")
    if frames:
        print(f"render: {1e3 * render_seconds / len(frames):.1f} ms per drawn frame "
              f"({len(frames)} frames, not part of the figures above)")
    print(f"energy {energy_start:.3g} J -> {cloth.energy():.3g} J; at the end, pairs "
          f"interpenetrating: {cloth.count_interpenetrations()}, surface crossings: "
          f"{cloth.count_crossings()}")
    if write:
        from ._animation import write_gif

        try:
            write_gif(frames, args.output, cloth.fps / args.render_every)
        except OSError as error:
            print(f"error: could not write {args.output}: {error}", file=sys.stderr)
            return 1
        size = os.path.getsize(args.output) / 1e6
        print(f"wrote {args.output} ({len(frames)} frames, {size:.1f} MB)")
    return 0


def _warm_up(render: bool) -> None:
    """Compile (or load from the disk cache) every kernel on a tiny cloth, with a progress
    bar on a terminal (a cold compile takes tens of seconds)."""
    from tqdm import tqdm

    cloth = Cloth(4, substeps=2)
    stages = [cloth.step_frame, cloth.count_interpenetrations, cloth.count_crossings]
    if render:
        stages.append(lambda: Renderer(cloth, 16, 12).render())
    for stage in tqdm(stages, desc="compiling or loading the kernels", unit="stage",
                      disable=None, leave=False):
        stage()


def _simulate(cloth: Cloth, renderer: Renderer | None, args: argparse.Namespace):
    """Step ``args.frames`` frames.

    Returns the drawn frames and the seconds spent rendering, simulating (wall) and
    simulating (CPU time of the process, all its threads).
    """
    from tqdm import tqdm

    frames = []
    render_seconds = simulate_seconds = cpu_seconds = 0.0
    for index in tqdm(range(args.frames), desc="simulating", unit="frame", disable=None):
        start, cpu_start = time.perf_counter(), time.process_time()
        cloth.step_frame()
        simulate_seconds += time.perf_counter() - start
        cpu_seconds += time.process_time() - cpu_start
        if renderer is not None and index % args.render_every == 0:
            start = time.perf_counter()
            frames.append(renderer.render())
            render_seconds += time.perf_counter() - start
    return frames, render_seconds, simulate_seconds, cpu_seconds
