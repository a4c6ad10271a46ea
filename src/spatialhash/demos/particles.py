"""``spatialhash demo particles``: the run of the particle demo and its timing table.

`run` checks the options, steps a `ParticleSystem` (the simulation, in `_particle_simulation`)
for ``--steps`` steps while drawing animation frames (`_particle_view`), times every contact
search on copies of the final state (`time_searches`, `format_table`), writes the GIF and,
where a display is or with ``--interactive``, opens the window. With ``--device`` a Warp
device, `run` hands the run to `_particle_device_run` (the simulation on that device, and
a table of its step against the CPU engine's). `add_arguments` adds its options to the
``spatialhash demo particles`` parser.

This module is the demo's import path: tests, ``benchmarks/bench_particles.py`` and
``benchmarks/bench_ab.py`` (which also imports it from the revisions it compares against)
take `ParticleSystem`, `find_contacts`, `SEARCHES` and `DEEP_OVERLAP` from here.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys

import numba
import numpy as np

from .. import _config
from ._options import add_threads_argument, missing_modules_problem, option_problem
from ._particle_run import simulate, write_frames
from ._particle_simulation import DEEP_OVERLAP, SEARCHES, ParticleSystem, find_contacts

__all__ = ["BRUTE_FORCE_MAX_PARTICLES", "DEEP_OVERLAP", "SEARCHES", "ParticleSystem",
           "TimingRow", "add_arguments", "find_contacts", "format_table", "run",
           "time_searches"]

#: Above this many particles brute force is left out of the timing table (it grows as n**2:
#: at 20,000 particles its search already takes over a hundred times the hash's).
BRUTE_FORCE_MAX_PARTICLES = 20_000
#: The command, for messages.
COMMAND = "spatialhash demo particles"


# ---------------------------------------------------------------------- timing
@dataclasses.dataclass(frozen=True)
class TimingRow:
    """Medians over timed steps of one search, in seconds (None: skipped, see `note`)."""

    search: str
    n_particles: int
    search_seconds: float | None
    step_seconds: float | None
    n_pairs: int | None
    note: str = ""


def time_searches(system: ParticleSystem, searches=SEARCHES, n_steps: int = 30,
                  progress: bool = False) -> list[TimingRow]:
    """Time each search on copies of ``system``: the same state, ``n_steps`` steps each.

    Every search first proves that it finds the same pairs as the others on that state
    (a `RuntimeError` otherwise). One untimed step per search loads or compiles its
    kernels. Brute force is skipped above `BRUTE_FORCE_MAX_PARTICLES`. With ``progress``,
    a progress bar counts the searches (on a terminal; brute force at 20,000 particles
    takes seconds).
    """
    from tqdm import tqdm

    reference = None
    rows = []
    for method in tqdm(searches, desc="timing the searches", unit="search",
                       disable=None if progress else True, leave=False):
        if method == "brute" and system.n_particles > BRUTE_FORCE_MAX_PARTICLES:
            rows.append(TimingRow(method, system.n_particles, None, None, None,
                                  f"skipped above {BRUTE_FORCE_MAX_PARTICLES:,} particles"))
            continue
        clone = system.copy(search=method)
        keys = _pair_keys(clone.candidate_pairs(), clone.n_particles)
        if reference is None:
            reference = (method, keys)
        elif not np.array_equal(keys, reference[1]):
            raise RuntimeError(
                f"search {method!r} found {keys.size} pairs, {reference[0]!r} found "
                f"{reference[1].size}: the contact sets differ."
            )
        clone.step()
        times = [clone.step() for _ in range(n_steps)]
        rows.append(TimingRow(
            method, system.n_particles,
            statistics.median(t.search for t in times),
            statistics.median(t.step for t in times),
            int(statistics.median(t.n_pairs for t in times)),
        ))
    return rows


def _pair_keys(pairs: np.ndarray, n: int) -> np.ndarray:
    """One sorted int64 key per pair, ``i * n + j``: equal arrays mean equal pair sets."""
    return np.sort(pairs[:, 0].astype(np.int64) * n + pairs[:, 1])


def format_table(rows: list[TimingRow]) -> str:
    """A Markdown table of timing rows, with each search's time relative to the hash's."""
    hash_search = {row.n_particles: row.search_seconds for row in rows if row.search == "hash"}
    lines = [
        "| particles | search | search (ms/step) | whole step (ms/step) | candidate pairs "
        "| search vs hash |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        if row.search_seconds is None:
            lines.append(f"| {row.n_particles:,} | {row.search} | | | | {row.note} |")
            continue
        base = hash_search.get(row.n_particles)
        ratio = f"{row.search_seconds / base:.1f}x" if base else ""
        lines.append(
            f"| {row.n_particles:,} | {row.search} | {1e3 * row.search_seconds:.3f} | "
            f"{1e3 * row.step_seconds:.3f} | {row.n_pairs:,} | {ratio} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------- command line
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``spatialhash demo particles`` to ``parser``."""
    parser.add_argument("--count", type=int, default=5000, help="number of particles "
                        "(default 5000)")
    parser.add_argument("--steps", type=int, default=600, help="simulation steps (default 600)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the initial state (at least 0)")
    parser.add_argument("--output", default="particles.gif",
                        help="animation file (GIF); 'none' writes none (default particles.gif)")
    parser.add_argument("--search", choices=(*SEARCHES, "all"), default="all",
                        help="contact search for the run; 'all' runs with the hash and times "
                        "every search on the final state (default all)")
    parser.add_argument("--timing-steps", type=int, default=30,
                        help="steps timed per search for the table (default 30)")
    parser.add_argument("--frame-every", type=int, default=4,
                        help="steps between animation frames (default 4)")
    parser.add_argument("--size", type=int, default=512, help="animation size in pixels")
    parser.add_argument("--fps", type=float, default=30.0,
                        help="animation frame rate (default 30)")
    parser.add_argument("--headless", action="store_true",
                        help="open no window even where a display is available; with "
                        "--interactive, run the window on SDL's dummy video driver (tests, CI)")
    parser.add_argument("--interactive", action="store_true",
                        help="after the run, open the window (it opens anyway where a display "
                        "is available, unless --headless): particles near the mouse pointer "
                        "are highlighted; Escape or closing the window ends it; fails without "
                        "a display")
    parser.add_argument("--frames", type=int, default=None,
                        help="end the interactive window after this many frames")
    add_threads_argument(parser, "the spatial hash's queries: the hash search, the overlap "
                         "check and the window's highlight; the solver and the other "
                         "searches run on one")
    parser.add_argument("--device", default="cpu",
                        help="where the simulation runs: cpu (the host step, default), or a "
                        "Warp device, headless only: warp-cpu (Warp's kernels on the CPU), "
                        "cuda or cuda:N; the table then times the device step against the "
                        "CPU engine's (needs the gpu extra)")


def run(args: argparse.Namespace) -> int:
    """Run the particle demo from parsed options; returns the exit status."""
    problem = option_problem(args, dict.fromkeys(
        ("count", "steps", "timing_steps", "frame_every", "size", "frames"), 1))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    write = str(args.output).lower() != "none"
    from . import _particle_device_run as device_run
    from . import _particle_view as view

    problem = device_run.device_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.device != "cpu":
        return device_run.run(args, COMMAND, write, view)
    if args.interactive:
        problem = view.display_problem(args.headless)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    # Asked for, or a display is there: the window is the demo's last part.
    window = args.interactive or (not args.headless and view.has_display())
    problem = missing_modules_problem(COMMAND, _needed_modules(args, write, window))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    method = "hash" if args.search == "all" else args.search
    system = ParticleSystem(args.count, seed=args.seed, search=method,
                            n_threads=args.threads)
    print(f"{system.n_particles:,} particles, radii 1 to {system.radii.max():g}, box "
          f"{system.width:.0f} x {system.height:.0f}, {args.steps} steps with the {method} "
          f"search")
    # One call, no steps to count for a bar: a line says what the wait is (a compile of
    # several seconds the first time on a machine, a load from the cache afterwards).
    frames = simulate(system, args, view if write else None, "numba's cache")
    searches = SEARCHES if args.search == "all" else (method,)
    try:
        rows = time_searches(system, searches, args.timing_steps, progress=True)
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    n_threads = _thread_count(system.n_threads)
    print(f"\nPer-step wall-clock time on the final state, {args.timing_steps} steps per "
          f"search, medians (whole step: the search, then {system.n_substeps} substeps);\n"
          f"the hash search on up to {n_threads} thread{'s' if n_threads > 1 else ''} "
          f"(--threads), the other searches and the solver on one:")
    print(format_table(rows))
    if write and write_frames(frames, args):
        return 1
    if window:
        # Unasked, a window that cannot open is only a note.
        print("\ninteractive window: particles near the pointer are highlighted; Escape or "
              "closing it ends the demo (--headless skips it)")
        viewer = view.InteractiveView(system, headless=args.headless)
        try:
            n_frames = viewer.run(args.frames)
        except viewer.pygame.error as error:
            print(f"{'error' if args.interactive else 'note'}: the interactive window could "
                  f"not open: {error}", file=sys.stderr)
            return 2 if args.interactive else 0
        print(f"interactive window closed after {n_frames} frames")
    return 0


def _needed_modules(args: argparse.Namespace, write: bool, window: bool) -> dict[str, str]:
    """The optional modules a run with ``args`` imports: import name -> what needs it."""
    needs = {}
    if write:
        needs["PIL"] = f"for --output {args.output}"
    if window:
        needs["pygame"] = ("for --interactive" if args.interactive else
                           "for the window that opens where a display is; --headless "
                           "skips it")
    needs["tqdm"] = ""  # the progress bars
    return needs


def _thread_count(n_threads: int | None) -> int:
    """The threads numba runs the library's parallel kernels on, given ``n_threads``."""
    with _config.threads(n_threads):
        return numba.get_num_threads()
