"""``spatialhash demo particles --device D``: the demo's run on a Warp device, and its table.

With ``--device warp-cpu``, ``cuda`` or ``cuda:N`` the simulation is a
`DeviceParticleSystem` (``_particle_device``): its state stays on the device and its step
is Warp kernels. The run is headless (``--headless``): the window draws the host's
state every frame, so it stays with ``--device cpu``. Animation frames are drawn from
the positions copied to the host every ``--frame-every`` steps.

The table (`time_device_step`, `format_device_table`) times the device step against the
CPU engine's, the host step with the hash search on ``--threads``, both from the state the
simulation ended in, after each has proved that its contact search finds the same pairs
there. Nothing here imports Warp: `ParticleSystem.to_device` does, naming the ``gpu``
extra where it is missing.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

from ..grid import _devices
from ._options import missing_modules_problem
from ._particle_run import simulate, write_frames
from ._particle_simulation import ParticleSystem

#: The CPU engine's row of the table.
CPU_ENGINE = "cpu"


def device_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with ``--device`` and the options it rules out, as one line, or None
    (``--device cpu``: nothing)."""
    try:
        warp_device = _devices.warp_device_name(args.device)
    except (TypeError, ValueError):
        return ("--device must be cpu, warp-cpu, cuda or cuda:N (N the number of a GPU); "
                f"got {args.device}.")
    if warp_device is None:
        return None
    if args.interactive or not args.headless:
        return (f"--device {args.device} runs headless only: add --headless (and leave out "
                "--interactive); the window runs with --device cpu.")
    if args.search not in ("all", "hash"):
        return (f"--search {args.search} runs with --device cpu only; a Warp device's step "
                "searches with Grid(..., device=...).")
    return None


def run(args: argparse.Namespace, command: str, write: bool, view) -> int:
    """Run the demo on the Warp device ``args.device`` (options checked by the caller
    and `device_problem`); ``view`` draws frames when ``write``. Returns the exit status."""
    needs = {"PIL": f"for --output {args.output}"} if write else {}
    needs.update({"warp": f"for --device {args.device}", "tqdm": ""})
    problem = missing_modules_problem(command, needs)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    host = ParticleSystem(args.count, seed=args.seed, n_threads=args.threads)
    try:
        system = host.to_device(args.device)
    except (ImportError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{system.n_particles:,} particles, radii 1 to {host.radii.max():g}, box "
          f"{system.width:.0f} x {system.height:.0f}, {args.steps} steps on {args.device} "
          f"(Warp kernels; contacts from Grid(..., device={args.device!r}))")
    frames = simulate(system, args, view if write else None, "the caches",
                      on_host=lambda device_system: device_system.to_host())
    try:
        rows = time_device_step(system, args.timing_steps)
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"\nPer-step wall-clock time from the final state, {args.timing_steps} steps each, "
          f"medians. {CPU_ENGINE}: the host step (the hash search on the CPU engine, "
          f"Gauss-Seidel sweeps);\n{args.device}: the device step (the search on the "
          f"device's positions, {system.n_substeps} substeps of "
          f"{system.n_sweeps} Jacobi sweeps):")
    print(format_device_table(rows))
    if write and write_frames(frames, args):
        return 1
    return 0


def time_device_step(system, n_steps: int) -> list:
    """The CPU engine's step and ``system``'s, each timed for ``n_steps`` steps from
    ``system``'s state (the host's on a copy), after one untimed step that compiles or
    loads its kernels. Raises `RuntimeError` when their searches find different pairs in
    that state.

    Parameters
    ----------
    system : DeviceParticleSystem
        Advanced by the timing.
    n_steps : int
        Steps timed of each.

    Returns
    -------
    list of particles.TimingRow
        The CPU engine's row (search ``"cpu"``), then the device's (search: its device).
    """
    from .particles import TimingRow, _pair_keys

    host = system.to_host()
    n = system.n_particles
    on_device = _pair_keys(system.candidate_pairs().numpy(), n)
    on_host = _pair_keys(host.candidate_pairs(), n)
    if not np.array_equal(on_device, on_host):
        raise RuntimeError(f"the search on {system.device} found {on_device.size} pairs, the "
                           f"CPU engine's {on_host.size}: the contact sets differ.")
    rows = []
    for label, stepper in ((CPU_ENGINE, host), (system.device, system)):
        stepper.step()
        times = [stepper.step() for _ in range(n_steps)]
        rows.append(TimingRow(label, n, statistics.median(t.search for t in times),
                              statistics.median(t.step for t in times),
                              int(statistics.median(t.n_pairs for t in times))))
    return rows


def format_device_table(rows: list) -> str:
    """A Markdown table of `time_device_step`'s rows, with the CPU engine's step time
    over each row's."""
    cpu_step = {row.n_particles: row.step_seconds for row in rows if row.search == CPU_ENGINE}
    lines = [
        "| particles | engine | search (ms/step) | whole step (ms/step) | candidate pairs "
        "| CPU engine's step / this step |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        ratio = cpu_step[row.n_particles] / row.step_seconds
        digits = 1 if ratio >= 10 else 2
        lines.append(
            f"| {row.n_particles:,} | {row.search} | {1e3 * row.search_seconds:.3f} | "
            f"{1e3 * row.step_seconds:.3f} | {row.n_pairs:,} | {ratio:.{digits}f}x |"
        )
    return "\n".join(lines)
